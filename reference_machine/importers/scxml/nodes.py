"""An SCXML document read into a tree of `Node`s.

The document is parsed with the standard library's expat, refusing any DOCTYPE (so no entity
declaration, internal or external, can expand: no billion laughs, no external entity, no
network) and nesting past `NESTING_MAX`. Each element is located as an XPath-like path
(`scxml/state[@id='s1']/transition[2]`) with its line.
"""

from __future__ import annotations

import xml.parsers.expat
from dataclasses import dataclass, field
from typing import Any

from reference_machine.documents import NESTING_MAX
from reference_machine.errors import DefinitionSyntaxError
from reference_machine.findings import Finding, Severity

__all__ = ["NS", "STATES", "Node", "parse"]

#: SCXML's namespace.
NS = "http://www.w3.org/2005/07/scxml"
#: The elements that are states.
STATES = ("state", "parallel", "final")


@dataclass
class Node:
    """An element of the document: its tag, attributes, line and namespace, its children and
    text, and its place (`path`, an XPath-like location)."""

    tag: str
    attrs: dict[str, str]
    line: int
    namespace: str
    children: list[Node] = field(default_factory=list)
    text: str = ""
    path: str = ""
    parent: Node | None = None

    def kids(self, *tags: str) -> list[Node]:
        """Gives the children that are SCXML elements with one of `tags`."""
        return [c for c in self.children if c.namespace == NS and c.tag in tags]


class _Refusal(Exception):
    def __init__(self, code: str, message: str, line: int | None) -> None:
        super().__init__(message)
        self.code, self.message, self.line = code, message, line


def parse(data: str, name: str) -> Node:
    """Gives the root of the document `data` (from the file `name`), each element located;
    raises `DefinitionSyntaxError` for text that is not well-formed XML or is refused."""
    parser = xml.parsers.expat.ParserCreate(namespace_separator="}")
    parser.SetParamEntityParsing(xml.parsers.expat.XML_PARAM_ENTITY_PARSING_NEVER)
    stack: list[Node] = []
    roots: list[Node] = []
    bare: list[bool] = []

    def doctype(*_: Any) -> None:
        # a DOCTYPE is where entities are declared: refused before any can expand
        raise _Refusal("scxml-doctype", "a DOCTYPE (and any entity declaration) is refused: "
                       "SCXML needs none, and entities can expand without bound",
                       parser.CurrentLineNumber)

    def entity(*_: Any) -> None:
        raise _Refusal("scxml-entity", "entity declarations are refused",
                       parser.CurrentLineNumber)

    def external(*_: Any) -> int:
        raise _Refusal("scxml-entity", "external entities are refused (no I/O at import)",
                       parser.CurrentLineNumber)

    def start(tag: str, attrs: dict[str, str]) -> None:
        if len(stack) >= NESTING_MAX:
            raise _Refusal("scxml-nesting", f"elements nested more than {NESTING_MAX} levels "
                           "deep", parser.CurrentLineNumber)
        namespace, _, local = tag.rpartition("}")
        if not roots:
            bare.append(not namespace)
        if not namespace and bare[0]:
            namespace = NS  # a chart written without its namespace, throughout
        node = Node(local, {k.rpartition("}")[2]: v for k, v in attrs.items()},
                    parser.CurrentLineNumber, namespace)
        if stack:
            node.parent = stack[-1]
            stack[-1].children.append(node)
        else:
            roots.append(node)
        stack.append(node)

    def end(_: str) -> None:
        stack.pop()

    def text(chars: str) -> None:
        if stack:
            stack[-1].text += chars

    parser.StartDoctypeDeclHandler = doctype
    parser.EntityDeclHandler = entity
    parser.ExternalEntityRefHandler = external
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = text
    try:
        parser.Parse(data, True)
    except _Refusal as exc:
        raise DefinitionSyntaxError([Finding(Severity.ERROR, exc.code, "", exc.message,
                                             line=exc.line)], name) from exc
    except xml.parsers.expat.ExpatError as exc:
        message = xml.parsers.expat.errors.messages[exc.code]
        raise DefinitionSyntaxError(
            [Finding(Severity.ERROR, "scxml-syntax", "",
                     f"not well-formed XML: {message} at line {exc.lineno}, column "
                     f"{exc.offset + 1}", line=exc.lineno)], name) from exc
    root = roots[0]
    _locate(root, "scxml" if root.tag == "scxml" else root.tag)
    return root


def _locate(node: Node, path: str) -> None:
    node.path = path
    counts: dict[str, int] = {}
    for child in node.children:
        counts[child.tag] = counts.get(child.tag, 0) + 1
        ident = child.attrs.get("id")
        step = f"{child.tag}[@id='{ident}']" if ident else f"{child.tag}[{counts[child.tag]}]"
        _locate(child, f"{path}/{step}")
