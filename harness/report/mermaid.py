"""The workflow's graph as a Mermaid `stateDiagram-v2`, the counterexample's path styled on it:
the Markdown report's drawing (`fsmharness diagram` prints it too). What came from the user is
made safe inside Mermaid's labels.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from harness.report.diagram import (
    DiagramShape,
    compound_title,
    edge_text,
    history_mark,
    state_ids,
    state_notes,
)

__all__ = ["mermaid"]


def _plain(text: str) -> str:
    """Gives text safe inside a Mermaid label: letters, digits and a few marks."""
    return re.sub(r"[^\w .\-/]", " ", text).strip() or "-"


#: What Mermaid would take for syntax in a label, and a look-alike it shows instead: a label
#: ends at `:` or `;` (entity codes such as `#58;` are not decoded in a state diagram's labels)
_MERMAID_LOOKALIKES = {ord(":"): "\u2236", ord(";"): "\u037e"}


def _mermaid_text(text: str, *, quoted: bool = False) -> str:
    """Gives an expression (a guard, a map's items) as Mermaid shows it, on one line: `:` and
    `;` as look-alikes; a space after a `<` or `&` that a browser would read as the start of a
    tag or a character reference (`a<b`, `&lt`); `%%` (a directive) split; inside a quoted
    title, `'` for `"`."""
    text = re.sub(r"[\x00-\x1f\x7f\u2028\u2029\x85]", " ", text)
    text = re.sub(r"([<&])(?=[A-Za-z/!?#])", r"\1 ", text.translate(_MERMAID_LOOKALIKES))
    text = re.sub(r"%(?=%)", "% ", text)
    return text.replace('"', "'") if quoted else text


def mermaid(diagram: Mapping[str, Any]) -> str:
    """Gives the workflow as a Mermaid `stateDiagram-v2`; an edge never covered says so in its
    label; the counterexample's path is drawn in its own style: its transitions' labels in
    bold (and marked in words), its states in the `counterexample` class (red, bold).

    Compound states are composite states; a parallel state's regions are separated by `--`
    (Mermaid's concurrency), each region (and a map's flow) holding its own start, moves and
    ends; a choice is a `<<choice>>`; a compound with history holds an `H` (shallow) or `H*`
    (deep) state that the transitions into the compound go to; a conditional approval and
    entry and exit actions are lines of the state's description."""
    ids = state_ids(diagram)
    shape = DiagramShape(diagram)
    lines = ["stateDiagram-v2"]

    def declare(parent: str, depth: int) -> None:
        states = shape.children.get(parent, [])
        for index, state in enumerate(states):
            if index and shape.kind(parent) == "parallel":
                lines.append("    " * depth + "--")
            declare_one(state, depth)

    def declare_one(state: Mapping[str, Any], depth: int) -> None:
        pad = "    " * depth
        name, sid = state["name"], ids[state["name"]]
        if state.get("kind") == "choice":
            lines.extend([f"{pad}%% {_plain(name)}", f"{pad}state {sid} <<choice>>"])
            return
        title = compound_title(state)
        extra = f" ({_mermaid_text(title, quoted=True)})" if title else ""
        lines.append(f'{pad}state "{_plain(name)}{extra}" as {sid}')
        if name not in shape.children:
            lines.extend(f"{pad}{sid}: {_mermaid_text(note)}" for note in state_notes(state))
            return
        lines.append(f"{pad}state {sid} {{")
        declare(name, depth + 1)
        if state.get("history"):
            lines.append(f'{pad}    state "{history_mark(state)}" as {sid}h')
        if shape.is_root(name):
            moves(name, depth + 1)
        lines.append(f"{pad}}}")

    def moves(scope: str, depth: int) -> None:
        """Adds the start, transitions and ends of the top level or of one region's flow."""
        pad = "    " * depth
        initial = shape.starts.get(scope, "") if scope else diagram["initial"]
        if initial in ids:
            lines.append(f"{pad}[*] --> {ids[initial]}")
        for edge in diagram["transitions"]:
            if _edge_scope(shape, edge) == scope:
                target = (f"{ids[edge['history']]}h" if edge.get("history") in ids
                          else ids[edge["target"]])
                lines.append(f"{pad}{ids[edge['source']]} --> {target}: "
                             f"{_mermaid_label(edge)}")
        for state in diagram["states"]:
            if state["final"] and shape.scope(state["name"]) == scope:
                lines.append(f"{pad}{ids[state['name']]} --> [*]")

    declare("", 1)
    moves("", 1)
    # the states the counterexample passed through, in its colours (Mermaid styles no
    # composite state, and no transition: those are in bold in their labels)
    passed = dict.fromkeys(name for move in diagram.get("path", ()) for name in
                           (move[0], move[2]) if name in ids and name not in shape.children)
    if passed:
        lines += [f"    classDef {_PATH_CLASS} {_PATH_STYLE}",
                  f"    class {','.join(ids[name] for name in passed)} {_PATH_CLASS}"]
    return "\n".join(lines) + "\n"


#: The Mermaid class of the states on the counterexample's path, and how they are drawn: the
#: HTML report's colour for the path, in bold.
_PATH_CLASS = "counterexample"
_PATH_STYLE = "fill:#fde2e1,stroke:#d62728,stroke-width:3px,color:#8b0000,font-weight:bold"


def _edge_scope(shape: DiagramShape, edge: Mapping[str, Any]) -> str:
    """Gives the region or map state an edge runs inside ("" at the top, where an edge whose
    ends lie in different scopes is drawn too)."""
    scope = shape.scope(edge["source"])
    return scope if scope == shape.scope(edge["target"]) else ""


def _mermaid_label(edge: Mapping[str, Any]) -> str:
    label = edge_text(edge, _plain, _mermaid_text)
    if edge["on_path"]:  # Mermaid draws a label's HTML bold (and lets no class style an edge)
        label = f"<b>{label}</b> (counterexample)"
    elif not edge["covered"]:
        label += " (never taken)"
    return label
