"""SCXML (W3C State Chart XML) to the native definition format.

The document is parsed with the standard library's expat, refusing any DOCTYPE (so no entity
declaration, internal or external, can expand: no billion laughs, no external entity, no
network) and nesting past `NESTING_MAX`. Each element is located as an XPath-like path
(`scxml/state[@id='s1']/transition[2]`) with its line.

What maps one to one: `<state>` (atomic or compound; `initial` attribute, `<initial>`, or the
first child), `<final>` at the top level (a native final, outcome `failure` for the one
named `fail`, else `success`; its exit actions run right after its entry ones, as the
session ends) or in a region,
`<parallel>` whose regions end in their own finals (`done.state.ID` transitions become
`done:`), `<transition>` (`event` descriptors matched by prefix as SCXML does, `cond`, one
`target`, no target = internal; `type="internal"` is declared on each child, so its source
is neither left nor entered), eventless transitions (`always:`), `<onentry>`/`<onexit>`,
`<assign>`, `<if>`/`<elseif>`/`<else>` (the branch is chosen once, into a context key, and
each action of a branch takes effect only under it), `<datamodel>`/`<data>` (early binding:
evaluated in document order at import, or by the move out of a start choice state when they
read what only the run knows), and python-datamodel expressions rewritten into the native
safe expression language over `context` (a data item is a context key; `_event.name` is
`event.type`; `_event.data` and the other fields of `_event` come from the payload).
ECMAScript-datamodel expressions are read by a small parser of JavaScript's expression
grammar into the same Python tree, then rewritten the same way (nothing runs them): literals
(numbers, strings, `true`, `false`, `null`, `undefined`, arrays), `===` `!==` `==` `!=` (both
without JavaScript's type coercion), `<` `<=` `>` `>=`, `+ - * / %`, `!`, `&&` and `||` (the
operand that decides), `?:`, member and index reads, `.length`, `typeof x === 'type'`, `In()`,
`Math.abs`/`min`/`max`; a cond is true as JavaScript holds it (an empty array is true).
`undefined` and `null` are both None. Text that is no expression (`return`) raises
error.execution where it runs, as SCXML does.
What SCXML's interpreter raises where it runs (an assign to an undeclared location, text that
is not Python, a send to a session that cannot be this one) is raised there, as known at import.

What the native format lacks is said with a warning, located:

- an event queue. `<raise>` and `<send>` to this session append `[queue, event, delay_ms,
  data pairs, send id]` to the context key `OUTBOX`; `<cancel>` appends `["cancel", send id]`.
  Whoever drives the definition delivers them, internal ones first, as SCXML's interpreter
  would (`reference_machine.importers.w3c.run_definition` does, and the simulator under
  `run` and `fuzz`); the native runtime alone does not.
- system variables `_sessionid` and `_ioprocessors`: context keys the start event's payload
  sets (`SYSTEM_KEYS`).
- a `<final>` inside a compound state that is not a region: a native final ends the whole run,
  so it becomes a plain state that raises `done.state.PARENT` (with its donedata) on entry.
- eventless transitions of a compound state: the native format has them only on leaves, so
  they are copied to each leaf below it (after the leaf's own); `In('id')` is read from
  context flags `_scxml_in_ID` that each such state's entry and exit actions set.
- transitions out of a region: moved to the parallel state's own `on:` (tried when no region
  takes the event, where SCXML would run both); `<history>` (the `history:` attribute; a
  state with both kinds targeted keeps the deep one so, and the shallow one as the child
  active when it was left, a context key its children's entry and its exit set).
- an `initial` naming a state below the top: the run starts in a choice state whose
  eventless move enters it (the states above keep their own initial children).
- child sessions. An `<invoke>` of an inline `<content>` chart imports the chart as a
  definition of its own, kept under the context key `CHILDREN`; the invoking state's entry
  and exit append `["invoke", id, ...]` and `["uninvoke", id]` to the outbox, sends to
  `#_parent` and `#_ID` append entries of queue `parent` and `child`, and `<finalize>` is a
  targetless transition on the event `FINALIZE` + id. The W3C driver runs the sessions; the
  simulator starts none. A chart in a file `src=` names is imported the same way (`_Files`
  says which files may be read); a `srcexpr` whose values are known at import imports each
  file they name, under keys the entry's last item picks as the invoke starts, and so does
  a `<content expr>` over a data item that `<assign>`s set to `<scxml>` charts (a handle of
  the chart is the value, where nothing else reads the item).

Refused, with the location: datamodels other than python, ecmascript and null (`c89`),
JavaScript with no native counterpart (object literals, `new`, method calls, assignment
operators, `in`, the comma operator: each named), a `<script>` that is more than a list of
assignments to names (one that is, is those assigns: at load for a top-level script, where it
stands otherwise), an `<invoke>` of anything but an SCXML chart inline or in a file beside
the imported one, a `srcexpr` whose values are not known at import, a `src=` that leaves the
chart's directory, names a URL, a missing or oversized file (or any, without a directory), a
`<foreach>` over an array not known at import, `<send>` to sessions other than this one, its
parent and the children it invokes by id, or with markup content, transitions with several
targets, targetless eventless transitions, and expressions the safe language cannot say
(`hasattr`, method calls but `.get`). What the native checks refuse in what was made (a
parallel state with no `done.state` transition, a region that cannot end, a trap state) is
raised located at the SCXML element of the state at fault.
"""

from __future__ import annotations

import ast
import copy
import os
import re
import stat
import xml.parsers.expat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reference_machine._definition import check_spec
from reference_machine._expr import ExpressionSyntaxError, compile_expression
from reference_machine._spec import NAME_PATTERN
from reference_machine.documents import DEFINITION_BYTES_MAX, NESTING_MAX, validate
from reference_machine.errors import (
    DefinitionError,
    DefinitionSyntaxError,
    ReferenceMachineError,
)
from reference_machine.findings import Finding, Severity
from reference_machine.importers._common import Imported
from reference_machine.importers.scxml_parallel import (
    CONFIGURATIONS_MAX,
    Kind,
    Move,
    NotFlat,
    Place,
    Selection,
    Subtree,
)

__all__ = ["CHILDREN", "EVENT_DATA", "EVENT_FIELDS", "FINALIZE", "INVOKE_TYPES", "OUTBOX",
           "SRC_BYTES_MAX", "SRC_FILES_MAX", "SYSTEM_KEYS", "convert", "parse_delay_ms"]

_NS = "http://www.w3.org/2005/07/scxml"
#: The context key the chart's raised and sent events are appended to (see the module).
OUTBOX = "_scxml_outbox"
#: SCXML's system variables a run reads from its context, as the driver's start event sets
#: them: `_sessionid` (this run's id) and `_ioprocessors` (processor name to `{location}`).
SYSTEM_KEYS = {"_sessionid": "_scxml_sessionid", "_ioprocessors": "_scxml_ioprocessors"}
#: What the system variables hold in a run whose start sets neither.
_SYSTEM_DEFAULTS: dict[str, Any] = {
    "_sessionid": "session",
    "_ioprocessors": {name: {"location": "#_scxml_session"}
                      for name in ("http://www.w3.org/TR/scxml/#SCXMLEventProcessor", "scxml")}}
#: The payload keys of an event the SCXML driver delivers: SCXML's event fields (`type`,
#: `sendid`, `origin`, `origintype`, `invokeid`) and the event's data.
EVENT_FIELDS = "_scxml_event"
EVENT_DATA = "_scxml_data"
#: The context key of the charts a chart invokes (`<invoke>` with inline `<content>`): invoke
#: id to the child's native definition data, which the W3C driver runs as a session.
CHILDREN = "_scxml_children"
#: The event the W3C driver delivers, before each event a child sends its parent, to run the
#: invoke's `<finalize>` (this prefix, then the invoke id).
FINALIZE = "_scxml.finalize."
#: The `type` values of an invoke of an SCXML session.
INVOKE_TYPES = ("http://www.w3.org/TR/scxml/", "http://www.w3.org/TR/scxml", "scxml")
#: The data key a `<content>` value rides under, in an outbox entry's pairs.
_DATA = EVENT_DATA
_NAME = re.compile(NAME_PATTERN)
_START = "_scxml_start"
_EVENT_FIELD_NAMES = frozenset({"name", "type", "sendid", "origin", "origintype", "invokeid",
                                "data"})
_COND_ERROR = "_scxml_cond_error"  # marks, until placed, a transition whose cond is not Python
_UNROLL_MAX = 100  # a <foreach> is unrolled into a copy of its body per item
_RESERVED = ("execution.", "step.", "approval.", "timer.", "compensation.")
_STATES = ("state", "parallel", "final")
_EXECUTABLE = ("assign", "raise", "send", "log", "if", "elseif", "else", "foreach", "script",
               "cancel")
_FUNCTIONS = frozenset({"len", "abs", "min", "max", "round"})
_SCXML_PROCESSOR = ("http://www.w3.org/TR/scxml/#SCXMLEventProcessor", "scxml")
#: Event processors SCXML names besides its own: a send of one is refused, as a processor
#: that has it would deliver the event (a type no processor has raises error.execution)
_KNOWN_PROCESSORS = ("http://www.w3.org/TR/scxml/#BasicHTTPEventProcessor", "basichttp")
#: The most bytes one file a `src=` names may hold, and the most files one import reads by
#: `src=` (a chart that invokes itself by `src` would be read without end)
SRC_BYTES_MAX = DEFINITION_BYTES_MAX
SRC_FILES_MAX = 32
_SYMLINKS_MAX = 8  # symbolic links followed on the way to one file
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
#: Whether `os.open` takes a directory to open a name in (`dir_fd`: POSIX), which reading a
#: file a `src=` names needs
_OPENS_IN_DIRECTORY = os.open in os.supports_dir_fd
_DELAY = re.compile(r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*(ms|s|m|h|d)?\s*$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, None: 1000}


def parse_delay_ms(text: str) -> int | None:
    """Gives the milliseconds of an SCXML delay (`1s`, `500ms`, `.5s`; CSS2 times), or None."""
    match = _DELAY.match(text)
    if match is None:
        return None
    return round(float(match.group(1)) * _UNIT_MS[match.group(2)])


# -- reading the document ------------------------------------------------------------------------


@dataclass
class _Node:
    tag: str
    attrs: dict[str, str]
    line: int
    namespace: str
    children: list[_Node] = field(default_factory=list)
    text: str = ""
    path: str = ""
    parent: _Node | None = None

    def kids(self, *tags: str) -> list[_Node]:
        return [c for c in self.children if c.namespace == _NS and c.tag in tags]


class _Refusal(Exception):
    def __init__(self, code: str, message: str, line: int | None) -> None:
        super().__init__(message)
        self.code, self.message, self.line = code, message, line


def _parse(data: str, name: str) -> _Node:
    parser = xml.parsers.expat.ParserCreate(namespace_separator="}")
    parser.SetParamEntityParsing(xml.parsers.expat.XML_PARAM_ENTITY_PARSING_NEVER)
    stack: list[_Node] = []
    roots: list[_Node] = []
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
            namespace = _NS  # a chart written without its namespace, throughout
        node = _Node(local, {k.rpartition("}")[2]: v for k, v in attrs.items()},
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


def _locate(node: _Node, path: str) -> None:
    node.path = path
    counts: dict[str, int] = {}
    for child in node.children:
        counts[child.tag] = counts.get(child.tag, 0) + 1
        ident = child.attrs.get("id")
        step = f"{child.tag}[@id='{ident}']" if ident else f"{child.tag}[{counts[child.tag]}]"
        _locate(child, f"{path}/{step}")


# -- files a chart names (`src=`) -----------------------------------------------------------------


class _SrcRefused(Exception):
    """A `src=` the import does not read; the message says why, in SCXML's terms."""


class _SrcMissing(_SrcRefused):
    """A `src=` that names no file in the chart's directory."""


class _Files:
    """Reads what a chart's `src=` attributes name: a relative path (`file:` in front or not)
    to a regular file in the directory of the chart imported, or below it, at most
    `SRC_BYTES_MAX` bytes, at most `SRC_FILES_MAX` files per import. The path is walked one
    name at a time from that directory, a symbolic link read as a name, so no `..`, absolute
    path or link leads out and nothing outside the directory is ever opened or looked at."""

    def __init__(self, directory: str | os.PathLike[str] | None) -> None:
        #: None: the chart was given as text, with no directory to read from
        self.root = None if directory is None else os.path.abspath(directory)
        self.count = 0

    def read(self, src: str, here: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
        """Gives the text of the file `src` names (relative to `here`, the directory of the
        document naming it, as names from the root) and its names from the root; raises
        `_SrcRefused` (`_SrcMissing` when there is no such file)."""
        if self.root is None:
            raise _SrcRefused("the chart was given to the importer as text, without its "
                              "directory, so there is none to read it from, and importing "
                              "reads no other file")
        names = self._walk(self.root, self._names(src, here))
        self.count += 1
        if self.count > SRC_FILES_MAX:
            raise _SrcRefused(f"the import would read more than {SRC_FILES_MAX} files by src= "
                              "(a chart that invokes itself by src= is read without end)")
        try:
            handle = self._open(self.root, names)
        except OSError as exc:  # a link swapped in since the walk (ELOOP), a file gone
            raise _SrcRefused(f"it cannot be read ({exc.strerror})") from exc
        try:  # what was opened is judged, not what the path names now
            info = os.fstat(handle)
            if not stat.S_ISREG(info.st_mode):
                raise _SrcRefused("it is not a regular file")
            if info.st_size > SRC_BYTES_MAX:
                raise _SrcRefused(f"it is over the {SRC_BYTES_MAX // 1000} kB a file src= "
                                  "names may be")
            with os.fdopen(handle, "rb", closefd=False) as stream:
                raw = stream.read(SRC_BYTES_MAX + 1)
        except OSError as exc:
            raise _SrcRefused(f"it cannot be read ({exc.strerror})") from exc
        finally:
            os.close(handle)
        if len(raw) > SRC_BYTES_MAX:
            raise _SrcRefused(f"it is over the {SRC_BYTES_MAX // 1000} kB a file src= names "
                              "may be")
        try:
            return raw.decode("utf-8"), names
        except UnicodeDecodeError as exc:
            raise _SrcRefused(f"it is not UTF-8 text (at byte {exc.start})") from exc

    @staticmethod
    def _names(src: str, here: tuple[str, ...]) -> tuple[str, ...]:
        """Gives the names of the path `src` says, from the root; refuses what is no relative
        path below the document's own directory."""
        text = src.strip()
        if text.startswith("file:"):
            text = text.removeprefix("file:")
            if text.startswith("/"):
                raise _SrcRefused("a file: URL with an absolute path names a file anywhere; "
                                  "only a path relative to the chart's directory is read")
        elif _SCHEME.match(text):
            raise _SrcRefused("it is a URL or another address; only a file in the chart's "
                              "directory (or below it) is read, never fetched")
        if text.startswith("/"):
            raise _SrcRefused("it is an absolute path; only a path relative to the chart's "
                              "directory is read")
        if "\\" in text or "\0" in text or _SCHEME.match(text):
            raise _SrcRefused("it holds a backslash, a NUL or a drive: only a relative path "
                              "with / between its names is read")
        parts = text.split("/")
        if ".." in parts:
            raise _SrcRefused("it climbs out with '..'; only a file in the chart's directory "
                              "(or below it) is read")
        names = tuple(part for part in parts if part not in ("", "."))
        if not names:
            raise _SrcRefused("it names no file")
        return (*here, *names)

    @staticmethod
    def _open(root: str, names: tuple[str, ...]) -> int:
        """Opens the file `names` (walked, no symbolic link among them) gives from `root`,
        one directory at a time and following no link: one swapped in since the walk makes
        the open fail rather than lead out."""
        if not _OPENS_IN_DIRECTORY:
            raise _SrcRefused("this platform cannot open a file one directory at a time, "
                              "which reading it safely needs")
        nofollow = getattr(os, "O_NOFOLLOW", 0)
        folder = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            for name in names[:-1]:
                inner = os.open(name, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | nofollow,
                                dir_fd=folder)
                os.close(folder)
                folder = inner
            return os.open(names[-1], os.O_RDONLY | nofollow | getattr(os, "O_NONBLOCK", 0),
                           dir_fd=folder)
        finally:
            os.close(folder)

    @staticmethod
    def _walk(root: str, names: tuple[str, ...]) -> tuple[str, ...]:
        """Gives the names of the file `names` leads to from `root`, each symbolic link on
        the way replaced by what it names; refuses a link that leads out."""
        done: list[str] = []
        pending = list(names)
        links = 0
        while pending:
            name = pending.pop(0)
            if name in ("", "."):
                continue
            if name == "..":
                if not done:
                    raise _SrcRefused("a symbolic link on its way leads out of the chart's "
                                      "directory")
                done.pop()
                continue
            path = os.path.join(root, *done, name)
            try:
                info = os.lstat(path)
            except (FileNotFoundError, NotADirectoryError) as exc:
                raise _SrcMissing("there is no such file in the chart's directory") from exc
            except OSError as exc:
                raise _SrcRefused(f"it cannot be read ({exc.strerror})") from exc
            if stat.S_ISLNK(info.st_mode):
                links += 1
                try:
                    link = os.readlink(path)
                except OSError as exc:  # changed since it was looked at
                    raise _SrcRefused(f"it cannot be read ({exc.strerror})") from exc
                if links > _SYMLINKS_MAX or os.path.isabs(link) or "\\" in link:
                    raise _SrcRefused("a symbolic link on its way leads out of the chart's "
                                      "directory (or through too many links)")
                pending = [*link.split("/"), *pending]
                continue
            if pending and not stat.S_ISDIR(info.st_mode):
                raise _SrcMissing("there is no such file in the chart's directory")
            done.append(name)
        if not done:
            raise _SrcRefused("it names the chart's directory, not a file")
        return tuple(done)


# -- expressions -----------------------------------------------------------------------------------


class _Inexpressible(Exception):
    """An SCXML expression the native safe language cannot say."""


class _Rewrite(ast.NodeTransformer):
    """Python datamodel to native: data items become `context["id"]` reads."""

    def __init__(self, chart_name: str) -> None:
        self.chart_name = chart_name
        self.in_states: list[str] = []
        self.system: set[str] = set()
        self.whole_event = False

    @staticmethod
    def _context(key: str) -> ast.expr:
        return ast.Subscript(ast.Name("context", ast.Load()), ast.Constant(key), ast.Load())

    @staticmethod
    def _payload() -> ast.expr:
        return ast.Attribute(ast.Name("event", ast.Load()), "payload", ast.Load())

    def _event_field(self, attr: str) -> ast.expr:
        """Gives `_event.ATTR`: an event the SCXML driver delivers carries SCXML's event
        fields under `_scxml_event` and its data under `_scxml_data`; any other event (sent
        from outside) is external, and its payload is its data."""
        if attr == "name":
            return ast.Attribute(ast.Name("event", ast.Load()), "type", ast.Load())
        driven = ast.Compare(ast.Constant(EVENT_FIELDS), [ast.In()], [self._payload()])
        if attr == "data":
            carried = ast.Subscript(self._payload(), ast.Constant(EVENT_DATA), ast.Load())
            return ast.IfExp(driven, carried,
                             ast.IfExp(self._payload(), self._payload(), ast.Constant(None)))
        if attr in ("type", "sendid", "origin", "origintype", "invokeid"):
            told = ast.Subscript(ast.Subscript(self._payload(), ast.Constant(EVENT_FIELDS),
                                               ast.Load()), ast.Constant(attr), ast.Load())
            return ast.IfExp(driven, told, ast.Constant("external" if attr == "type" else None))
        raise _Inexpressible(f"_event.{attr} (SCXML events have no such field)")

    def visit_Name(self, node: ast.Name) -> ast.expr:
        if node.id == "_event":
            # unbound (None) while the run starts; the driver's events tell their fields;
            # an event from outside is its payload
            self.whole_event = True
            driven = ast.Compare(ast.Constant(EVENT_FIELDS), [ast.In()], [self._payload()])
            fields = ast.Subscript(self._payload(), ast.Constant(EVENT_FIELDS), ast.Load())
            starting = ast.Compare(ast.Attribute(ast.Name("event", ast.Load()), "type",
                                                 ast.Load()), [ast.Eq()],
                                   [ast.Constant("execution.started")])
            return ast.IfExp(driven, fields,
                             ast.IfExp(starting, ast.Constant(None), self._payload()))
        if node.id == "_name":
            return ast.Constant(self.chart_name)
        if node.id in SYSTEM_KEYS:
            # the driver's start event sets them (see `SYSTEM_KEYS`)
            self.system.add(node.id)
            return self._context(SYSTEM_KEYS[node.id])
        if node.id == "_x":
            raise _Inexpressible(f"the system variable {node.id}")
        if node.id in ("context", "event"):
            raise _Inexpressible(f"the name {node.id!r} (the native language reserves it)")
        return self._context(node.id)

    def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
        if isinstance(node.value, ast.Name) and node.value.id == "_event":
            return self._event_field(node.attr)
        return ast.Attribute(self.visit(node.value), node.attr, ast.Load())

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.expr:
        # `x and x` is `x` (an expression has no effects): keeps the rewriting within the
        # length an expression may have
        values: list[ast.expr] = []
        seen: set[str] = set()
        for value in node.values:
            rewritten = self.visit(value)
            if ast.dump(rewritten) not in seen:
                seen.add(ast.dump(rewritten))
                values.append(rewritten)
        return values[0] if len(values) == 1 else ast.BoolOp(node.op, values)

    def visit_Call(self, node: ast.Call) -> ast.expr:
        func = node.func
        if getattr(node, "_native", False):  # made by the ECMAScript translation
            return _native_call(ast.unparse(func), *(self.visit(a) for a in node.args))
        if (isinstance(func, ast.Name) and func.id == "hasattr" and len(node.args) == 2
                and isinstance(node.args[0], ast.Name) and node.args[0].id == "_event"
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in _EVENT_FIELD_NAMES):
            # every SCXML event has every field: the question is whether _event is bound
            return ast.Compare(self.visit(node.args[0]), [ast.IsNot()], [ast.Constant(None)])
        if isinstance(func, ast.Name) and func.id == "In":
            if (len(node.args) != 1 or node.keywords or not isinstance(node.args[0], ast.Constant)
                    or not isinstance(node.args[0].value, str)):
                raise _Inexpressible("In() with anything but one state id")
            state = node.args[0].value
            self.in_states.append(state)
            return self._context(f"_scxml_in_{state}")
        if (isinstance(func, ast.Attribute) and func.attr == "get" and len(node.args) == 1
                and not node.keywords):
            # mapping.get(key): the native key read gives None for a missing key, as get does
            owner = func.value
            base = self.visit(owner)
            return ast.Subscript(base, self.visit(node.args[0]), ast.Load())
        if (isinstance(func, ast.Attribute) and func.attr == "startswith"
                and len(node.args) == 1 and not node.keywords):
            # text.startswith(head): the text's first len(head) characters are head (both
            # texts: a native comparison of a slice and a text of other types is false)
            text, part = self.visit(func.value), self.visit(node.args[0])
            size = ast.Call(ast.Name("len", ast.Load()), [part], [])
            sliced = ast.Call(ast.Name("slice", ast.Load()), [text, ast.Constant(0), size], [])
            both = [ast.Call(ast.Name("is_string", ast.Load()), [v], []) for v in (text, part)]
            return ast.BoolOp(ast.And(), [*both, ast.Compare(sliced, [ast.Eq()], [part])])
        if isinstance(func, ast.Name) and func.id in _FUNCTIONS:
            return ast.Call(func, [self.visit(a) for a in node.args],
                            [self.visit(k) for k in node.keywords])
        shown = ast.unparse(func)
        raise _Inexpressible(f"a call of {shown}() (native expressions call only "
                             f"{', '.join(sorted(_FUNCTIONS))})")


# -- ECMAScript expressions ------------------------------------------------------------------------


class _ScriptSyntaxError(SyntaxError):
    """Text that is not an ECMAScript expression (SCXML raises error.execution where it runs)."""


_JS_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<number>0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<string>'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")
  | (?P<name>[A-Za-z_$][A-Za-z0-9_$]*)
  | (?P<other>=>|\+\+|--|\*\*=?|>>>?=?|<<=?|[-+*/%&|^]=|=(?![=>])|&(?!&)|\|(?!\|)|[\^~;@\#`\\])
  | (?P<op>===|!==|==|!=|<=|>=|&&|\|\||[-+*/%!<>()\[\]{},.?:])
  | (?P<quote>['"])
""", re.VERBOSE)
_JS_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "0": "\0"}
#: Reserved words that cannot stand in an expression: text using them is not one.
_JS_RESERVED = frozenset({
    "break", "case", "catch", "const", "continue", "debugger", "default", "do", "else",
    "export", "extends", "finally", "for", "if", "import", "let", "return", "static", "switch",
    "throw", "try", "var", "while", "with", "enum", "await", "implements", "interface",
    "package", "private", "protected", "public"})
#: Valid in an expression, but what they do has no native counterpart: refused, named.
_JS_UNSAID = frozenset({
    "new", "this", "function", "class", "super", "delete", "void", "instanceof", "in", "yield",
    "NaN", "Infinity", "Math", "JSON", "Object", "Array", "String", "Number", "Boolean",
    "Date", "RegExp", "parseInt", "parseFloat", "isNaN", "isFinite", "eval", "Function",
    "arguments", "globalThis", "window", "document", "console", "Symbol", "Promise"})
_JS_LITERALS = {"true": True, "false": False, "null": None, "undefined": None}
_JS_MATH = {"abs": "abs", "min": "min", "max": "max"}
#: `typeof x === '<type>'`: the native test of each answer (`undefined` and `null` are both
#: None in a context read back from JSON)
_JS_TYPES = {"number": "is_number", "string": "is_string", "boolean": "is_bool"}
_JS_COMPARE: dict[str, ast.cmpop] = {"===": ast.Eq(), "==": ast.Eq(), "!==": ast.NotEq(),
                                     "!=": ast.NotEq(), "<": ast.Lt(), "<=": ast.LtE(),
                                     ">": ast.Gt(), ">=": ast.GtE()}
_JS_ARITHMETIC: dict[str, ast.operator] = {"+": ast.Add(), "-": ast.Sub(), "*": ast.Mult(),
                                           "/": ast.Div(), "%": ast.Mod()}


def _native_call(name: str, *args: ast.expr) -> ast.Call:
    """Gives a call of a native function the rewriting keeps as it is (`is_number(x)`)."""
    call = ast.Call(ast.Name(name, ast.Load()), list(args), [])
    call._native = True  # type: ignore[attr-defined]
    return call


def _js_test(node: ast.expr) -> ast.expr:
    """Gives `node` as a condition with ECMAScript's truth: false are `false`, 0, '', null
    and undefined, and an empty array or object is true (Python holds it false)."""
    if _js_boolean(node):
        return node
    # each use a copy: the rewriting changes a tree in place as it goes
    falsy = ast.BoolOp(ast.Or(), [
        ast.Compare(copy.deepcopy(node), [ast.Is()], [ast.Constant(None)]),
        ast.Compare(copy.deepcopy(node), [ast.Eq()], [ast.Constant(0)]),
        ast.Compare(copy.deepcopy(node), [ast.Eq()], [ast.Constant("")])])
    return ast.UnaryOp(ast.Not(), falsy)


def _js_boolean(node: ast.expr) -> bool:
    """Tells whether `node` is always a boolean (a comparison, `!`, a boolean literal, a
    call of `In` or of a type test, `&&`/`||` of those)."""
    if isinstance(node, ast.Compare) or (isinstance(node, ast.UnaryOp)
                                         and isinstance(node.op, ast.Not)):
        return True
    if isinstance(node, ast.Constant):
        return isinstance(node.value, bool)
    if isinstance(node, ast.BoolOp):
        return all(_js_boolean(value) for value in node.values)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return node.func.id == "In" or getattr(node, "_native", False)
    return False


class _Script:
    """ECMAScript expression text to the Python expression tree the python datamodel's
    rewriting takes: a recursive descent over JavaScript's precedence levels, for the part of
    the language an expression of a chart uses. Text that is no expression raises
    `_ScriptSyntaxError`; an expression with no native counterpart, `_Inexpressible`."""

    def __init__(self, text: str) -> None:
        self.tokens: list[tuple[str, str, int]] = []
        position = 0
        while position < len(text):
            match = _JS_TOKEN.match(text, position)
            if match is not None and match.lastgroup == "other":
                raise _Inexpressible(f"the operator {match.group()!r} at column "
                                     f"{position + 1}")
            if match is None or match.lastgroup == "quote":
                shown = text[position]
                raise _ScriptSyntaxError(f"unexpected {shown!r} at column {position + 1}")
            kind = match.lastgroup or ""
            if kind != "space":
                self.tokens.append((kind, match.group(), position + 1))
            position = match.end()
        self.at = 0

    def parse(self) -> ast.expr:
        node = self._conditional()
        if self.at < len(self.tokens):
            _, token, column = self.tokens[self.at]
            if token == ",":
                raise _Inexpressible(f"the comma operator at column {column}")
            if token in _JS_UNSAID:
                raise _Inexpressible(f"the operator {token!r} at column {column}")
            raise _ScriptSyntaxError(f"unexpected {token!r} at column {column}")
        if any(isinstance(inner, _TypeOf | _Global) for inner in ast.walk(node)):
            raise _Inexpressible("typeof other than compared with a type's name, or Math "
                                 "other than Math.abs, Math.min, Math.max")
        return node

    def _peek(self) -> str:
        return self.tokens[self.at][1] if self.at < len(self.tokens) else ""

    def _take(self, *ops: str) -> str | None:
        if self.at < len(self.tokens) and self.tokens[self.at][0] == "op" and \
                self.tokens[self.at][1] in ops:
            self.at += 1
            return self.tokens[self.at - 1][1]
        return None

    def _expect(self, op: str) -> None:
        if self._take(op) is None:
            found = self._peek()
            column = self.tokens[self.at][2] if found else "the end"
            if found == ",":
                raise _Inexpressible(f"the comma operator at column {column}")
            raise _ScriptSyntaxError(f"expected {op!r}, found {found or 'the end'!r} "
                                     f"at column {column}")

    def _conditional(self) -> ast.expr:
        test = self._binary(0)
        if self._take("?") is None:
            return test
        body = self._conditional()
        self._expect(":")
        return ast.IfExp(_js_test(test), body, self._conditional())

    #: the binary operators from the loosest to the tightest
    _LEVELS: tuple[tuple[str, ...], ...] = (("||",), ("&&",), ("===", "!==", "==", "!="),
                                            ("<", "<=", ">", ">="), ("+", "-"), ("*", "/", "%"))

    def _binary(self, level: int) -> ast.expr:
        if level == len(self._LEVELS):
            return self._unary()
        left = self._binary(level + 1)
        while (op := self._take(*self._LEVELS[level])) is not None:
            right = self._binary(level + 1)
            if op in ("&&", "||"):
                left = self._logical(op, left, right)
            elif op in _JS_COMPARE:
                left = self._typeof(op, left, right) or ast.Compare(left, [_JS_COMPARE[op]],
                                                                    [right])
            else:
                left = ast.BinOp(left, _JS_ARITHMETIC[op], right)
        return left

    @staticmethod
    def _logical(op: str, left: ast.expr, right: ast.expr) -> ast.expr:
        """Gives `a && b`, `a || b`: of booleans a Python `and`/`or`; else the operand that
        decides, as ECMAScript gives it (`a || b` is `a` when `a` is true)."""
        if _js_boolean(left) and _js_boolean(right):
            return ast.BoolOp(ast.And() if op == "&&" else ast.Or(), [left, right])
        if op == "&&":
            return ast.IfExp(_js_test(left), right, copy.deepcopy(left))
        return ast.IfExp(_js_test(left), copy.deepcopy(left), right)

    @staticmethod
    def _typeof(op: str, left: ast.expr, right: ast.expr) -> ast.expr | None:
        """Gives `typeof x === 'number'` (and `!==`, either side) as a native type test."""
        if not isinstance(left, _TypeOf) and not isinstance(right, _TypeOf):
            return None
        typed, name = (left, right) if isinstance(left, _TypeOf) else (right, left)
        if op not in ("===", "==", "!==", "!=") or not isinstance(name, ast.Constant) or \
                not isinstance(name.value, str) or not isinstance(typed, _TypeOf):
            raise _Inexpressible("typeof other than compared with a type's name")
        operand = typed.operand
        test: ast.expr
        if name.value == "undefined":
            test = ast.Compare(operand, [ast.Is()], [ast.Constant(None)])
        elif name.value == "object":
            test = ast.BoolOp(ast.Or(), [_native_call("is_object", operand),
                                         _native_call("is_list", operand)])
        elif name.value in _JS_TYPES:
            test = _native_call(_JS_TYPES[name.value], operand)
        else:  # 'function', 'symbol', a misspelling: never the type of a data value
            test = ast.Constant(False)
        return ast.UnaryOp(ast.Not(), test) if op in ("!==", "!=") else test

    def _unary(self) -> ast.expr:
        op = self._take("!", "-", "+")
        if op == "!":
            return ast.UnaryOp(ast.Not(), _js_test(self._unary()))
        if op is not None:
            return ast.UnaryOp(ast.USub() if op == "-" else ast.UAdd(), self._unary())
        if self.at < len(self.tokens) and self.tokens[self.at][1] == "typeof":
            self.at += 1
            return _TypeOf(self._unary())
        return self._postfix(self._primary())

    def _postfix(self, node: ast.expr) -> ast.expr:
        while True:
            if self._take(".") is not None:
                kind, name, column = self.tokens[self.at] if self.at < len(self.tokens) else (
                    "", "", 0)
                if kind != "name":
                    raise _ScriptSyntaxError(f"expected a property name after '.' at column "
                                             f"{column or 'the end'}")
                self.at += 1
                if isinstance(node, _Global) and self._peek() != "(":
                    raise _Inexpressible(f"Math.{name} (only Math.abs, Math.min, Math.max "
                                         "are translated)")
                if name == "length" and self._peek() != "(":
                    node = ast.Call(ast.Name("len", ast.Load()), [node], [])
                elif self._peek() == "(":
                    node = self._method(node, name)
                else:
                    node = ast.Attribute(node, name, ast.Load())
            elif self._take("[") is not None:
                index = self._conditional()
                self._expect("]")
                node = ast.Subscript(node, index, ast.Load())
            elif self._peek() == "(" and self.at < len(self.tokens):
                if not (isinstance(node, ast.Name) and node.id == "In"):
                    raise _Inexpressible(f"a call of {ast.unparse(node)}() (only In() and "
                                         "Math.abs, Math.min, Math.max are translated)")
                self.at += 1
                node = ast.Call(node, self._arguments(), [])
            else:
                return node

    def _method(self, owner: ast.expr, name: str) -> ast.expr:
        if isinstance(owner, _Global) and owner.id == "Math" and name in _JS_MATH:
            self.at += 1
            return ast.Call(ast.Name(_JS_MATH[name], ast.Load()), self._arguments(), [])
        shown = "Math" if isinstance(owner, _Global) else ast.unparse(owner)
        raise _Inexpressible(f"a call of {shown}.{name}() (only In() and Math.abs, "
                             "Math.min, Math.max are translated)")

    def _arguments(self) -> list[ast.expr]:
        args: list[ast.expr] = []
        while self._take(")") is None:
            if args:
                self._expect(",")
            args.append(self._conditional())
        return args

    def _primary(self) -> ast.expr:
        if self.at >= len(self.tokens):
            raise _ScriptSyntaxError("the expression ends too early")
        kind, token, column = self.tokens[self.at]
        self.at += 1
        if kind == "number":
            if token[:2] in ("0x", "0X"):
                whole = int(token[2:66], 16) if len(token) <= 66 else 2 ** 256
                if whole >= 2 ** 53:
                    raise _Inexpressible(f"the number at column {column} (past 2**53, where "
                                         "JavaScript's numbers lose their digits)")
                return ast.Constant(whole)
            number = float(token)
            if number in (float("inf"), float("-inf")):
                raise _Inexpressible(f"the number at column {column} (Infinity)")
            return ast.Constant(int(number) if number.is_integer() and abs(number) < 2 ** 53
                                else number)
        if kind == "string":
            return ast.Constant(_js_string(token[1:-1], column))
        if kind == "name":
            if token in _JS_LITERALS:
                return ast.Constant(_JS_LITERALS[token])
            if token in _JS_RESERVED:
                raise _ScriptSyntaxError(f"{token!r} cannot stand in an expression "
                                         f"(column {column})")
            if token == "Math" and self._peek() == ".":
                return _Global(token)
            if token in _JS_UNSAID:
                raise _Inexpressible(f"{token!r} (column {column}) has no native counterpart")
            return ast.Name(token, ast.Load())
        if token == "(":
            inner = self._conditional()
            self._expect(")")
            return inner
        if token == "[":
            items: list[ast.expr] = []
            while self._take("]") is None:
                if items:
                    self._expect(",")
                    if self._take("]") is not None:
                        break  # a trailing comma
                items.append(self._conditional())
            return ast.List(items, ast.Load())
        if token == "{":
            raise _Inexpressible(f"an object literal (column {column}): native expressions "
                                 "build lists, not mappings")
        raise _ScriptSyntaxError(f"unexpected {token!r} at column {column}")


_JS_ASSIGNMENT = re.compile(r"(?:(?:var|let|const)\s+)?([A-Za-z_$][A-Za-z0-9_$]*)\s*=(?![=>])\s*"
                            r"(.+)", re.DOTALL)


def _js_statements(text: str) -> list[str]:
    """Gives the statements of ECMAScript text, split at `;` and line ends outside strings
    and brackets (the ones a script of assignments has)."""
    statements: list[str] = []
    current: list[str] = []
    quote = ""
    depth = 0
    for index, char in enumerate(text):
        if quote:
            if char == quote and text[index - 1] != "\\":
                quote = ""
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char in ";\n" and depth == 0:
            statements.append("".join(current))
            current = []
            continue
        current.append(char)
    statements.append("".join(current))
    return [statement.strip() for statement in statements if statement.strip()]


class _TypeOf(ast.expr):
    """`typeof operand`, until the comparison with a type's name that gives its meaning."""

    def __init__(self, operand: ast.expr) -> None:
        super().__init__()
        self.operand = operand


class _Global(ast.Name):
    """`Math`, read only as the owner of a method."""

    def __init__(self, name: str) -> None:
        super().__init__(name, ast.Load())


def _js_string(body: str, column: int) -> str:
    out: list[str] = []
    index = 0
    while index < len(body):
        char = body[index]
        if char != "\\":
            out.append(char)
            index += 1
            continue
        escaped = body[index + 1]
        if escaped == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", body[index + 2:index + 6]):
            out.append(chr(int(body[index + 2:index + 6], 16)))
            index += 6
        elif escaped == "x" and re.fullmatch(r"[0-9a-fA-F]{2}", body[index + 2:index + 4]):
            out.append(chr(int(body[index + 2:index + 4], 16)))
            index += 4
        elif escaped in "ux":
            raise _ScriptSyntaxError(f"a bad \\{escaped} escape in the string at column "
                                     f"{column}")
        else:
            out.append(_JS_ESCAPES.get(escaped, escaped))
            index += 2
    return "".join(out)


# -- the converter -----------------------------------------------------------------------------


@dataclass
class _Transition:
    node: _Node
    source: str  # native name of the declaring state
    descriptors: tuple[str, ...] | None  # None: eventless
    guard: str | None
    target: str | None
    actions: list[dict[str, Any]]
    #: its cond is not Python: never enabled, and evaluating it raises error.execution
    cond_error: bool = False


class _Unflattened(Exception):
    """A `<parallel>` that cannot be flattened (see `scxml_parallel`): the chart is
    converted again with it kept native."""

    def __init__(self, parallel: str, reason: str) -> None:
        super().__init__(reason)
        self.parallel, self.reason = parallel, reason


@dataclass
class _Flat:
    """A `<parallel>` given SCXML's meaning: its subtree, the native actions of each
    state's entry and exit and of each transition inside, and its configurations' native
    states (see `_Converter._flat_state`)."""

    node: _Node
    name: str
    subtree: Subtree
    entry: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    exit: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    guards: dict[int, str] = field(default_factory=dict)
    bodies: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    nodes: dict[int, _Node] = field(default_factory=dict)
    done_pairs: dict[str, str | None] = field(default_factory=dict)
    products: dict[frozenset[str], str] = field(default_factory=dict)
    #: configurations transitions from outside enter; the one the chart's initial names
    entries: list[frozenset[str]] = field(default_factory=list)
    initial: frozenset[str] | None = None
    reached: list[frozenset[str]] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    events_known: bool = False
    start: frozenset[str] = frozenset()

    @property
    def conf(self) -> str:
        """The context key naming the configuration the parallel state is in."""
        return f"_scxml_conf_{self.name}"

    @property
    def pending(self) -> str:
        """The context key a transition from outside sets to the configuration it enters."""
        return f"_scxml_enter_{self.name}"


def _matches(descriptors: tuple[str, ...], event: str) -> bool:
    """SCXML's event descriptor match (`*` matches every event but the driver's own)."""
    for descriptor in descriptors:
        if descriptor == "*":
            if not event.startswith(FINALIZE):
                return True
        elif event == descriptor or event.startswith(descriptor + "."):
            return True
    return False


class _Converter:
    def __init__(self, root: _Node, name: str, *, invoked: bool = False,
                 files: _Files | None = None, here: tuple[str, ...] = (),
                 native_parallels: frozenset[str] = frozenset(),
                 memo: dict[tuple[Any, ...], Any] | None = None) -> None:
        self.root = root
        #: the charts this one holds or names, converted once for every time `_converted`
        #: converts this one again (each with the findings it made)
        self.memo: dict[tuple[Any, ...], Any] = {} if memo is None else memo
        #: parallel states kept native (their flattening was refused: `_Unflattened`)
        self.native_parallels = native_parallels
        #: the parallel states flattened, by id() of their node; each state inside one
        #: (its root left out) to it; the event descriptors of the transitions inside
        self.flats: dict[int, _Flat] = {}
        self.flat_inside: dict[str, _Flat] = {}
        self.flat_events: set[str] = set()
        #: native transitions and actions the flattening made (bounded: `_FLAT_MADE_MAX`)
        self.flat_made = 0
        #: an invoked chart (inline `<content>`, or a file `src=` names): it has a parent to
        #: send to, which may set its data
        self.invoked = invoked
        #: what `src=` may read, and the directory of this document in it (names from its root)
        self.files = files or _Files(None)
        self.here = here
        self.invoke_count = 0
        #: the charts this one invokes: invoke id to native definition data
        self.children: dict[str, dict[str, Any]] = {}
        self.source = name
        self.errors: list[Finding] = []
        self.warnings: list[Finding] = []
        self.names: dict[int, str] = {}  # id(node) -> native state name
        self.by_id: dict[str, _Node] = {}
        self.node_by_name: dict[str, _Node] = {}
        self.states: dict[str, dict[str, Any]] = {}
        self.node_of: dict[str, _Node] = {}
        self.context: dict[str, Any] = {}
        self.uses_outbox = False
        self.temp = 0
        self.raised: set[str] = set()
        self.transitions: list[_Transition] = []
        self.in_states: dict[str, _Node] = {}
        self._stopped = False
        self._syntax_error = False
        self.startup: list[list[Any]] = []
        self.initial_of: dict[str | None, str] = {}  # parent (None: the top) -> initial child
        self.last_system = False
        self.system_used: dict[str, _Node] = {}
        #: data bound as the run starts (they read what only the run knows), in order
        self.deferred: list[tuple[str, str]] = []
        #: the state a chart whose `initial` names a state deeper than the top starts in (the
        #: states above it keep their own initial children)
        self.start_target: str | None = None
        #: compound states with a shallow and a deep history each targeted: the deep one is
        #: the native `history: deep`, the shallow one is kept in the context (`_shallow`)
        self.both_histories: dict[str, _Node] = {}
        self.declared = {n.attrs.get("id", "") for n in self._all(root, "data")}
        # what any executable content may change: a data item no one changes is a constant
        self.assigned = {re.split(r"[.\[]", n.attrs.get("location", ""), maxsplit=1)[0]
                         for n in self._all(root, "assign")}
        for node in self._walk(root):
            for key in ("idlocation", "item", "index"):
                if key in node.attrs and node.tag in ("send", "invoke", "foreach"):
                    self.assigned.add(node.attrs[key].strip())
        # a foreach declares its item and index when they are not data (W3C test 151)
        self.declared |= {n.attrs[key].strip() for n in self._all(root, "foreach")
                          for key in ("item", "index") if _NAME.match(n.attrs.get(key, "").strip())
                          and not n.attrs[key].strip().startswith("_")}
        self.chart_name = root.attrs.get("name", "")
        #: the ids transitions target (a history no transition targets is left out)
        self.targeted = {target for n in self._all(root, "transition")
                         for target in n.attrs.get("target", "").split()}
        #: compound states a transition to whose history enters its default target until
        #: they were first left (a context flag `_scxml_left_ID` tells)
        self.left_flags: dict[str, _Node] = {}
        #: the invoke ids a `<send target="#_ID">` may name
        self.invoke_ids = {n.attrs["id"] for n in self._all(root, "invoke") if "id" in n.attrs}
        #: each `<script>`'s assignments, (name, expression text), by id() of its node
        self.scripts: dict[int, list[tuple[str, str]]] = {}
        self.datamodel = root.attrs.get("datamodel", "python")
        #: the language of the chart's expressions, as its messages name it
        self.language = "ECMAScript" if self.datamodel == "ecmascript" else "Python"

    # -- findings ----------------------------------------------------------------------------

    def error(self, code: str, node: _Node, message: str, *ids: str) -> None:
        self.errors.append(Finding(Severity.ERROR, code, node.path, message, ids, node.line))

    def warn(self, code: str, node: _Node, message: str, *ids: str) -> None:
        self.warnings.append(Finding(Severity.WARNING, code, node.path, message, ids,
                                     node.line))

    # -- the whole document ------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        root = self.root
        if root.tag != "scxml" or root.namespace not in (_NS, ""):
            self.error("scxml-root", root, f"the root element is <{root.tag}>, not <scxml> in "
                       f"namespace {_NS}", root.tag)
            raise DefinitionError(self.errors, self.source)
        if self.datamodel not in ("python", "null", "ecmascript"):
            self.error("scxml-datamodel", root,
                       f"datamodel {self.datamodel!r} is refused: its expressions are of a "
                       "language the import does not translate (the python, ecmascript and "
                       "null datamodels are imported)", self.datamodel)
            raise DefinitionError(self.errors, self.source)
        if root.attrs.get("binding", "early") != "early":
            self.warn("scxml-binding", root, "binding 'late' is approximated as early: every "
                      "data item is set when the run starts", "binding")
        self._refuse_everywhere(root)
        self._name_states(root)
        self._plan_flats(root)
        for data in self._all(root, "data"):
            self._data(data)
        for script in root.kids("script"):  # run as the document loads, after the data
            for ident, text in self.scripts.get(id(script), []):
                self._bind(ident, text, script, "script")
        for child in root.children:
            if child.namespace == _NS and child.tag in _STATES:
                self._state(child, None)
            elif child.namespace == _NS and child.tag not in ("datamodel", "script"):
                self._unknown(child)
        tops = [c for c in root.kids(*_STATES)]
        if not tops:
            self.error("scxml-empty", root, "the chart has no state", "scxml")
        else:
            self._initial(root, None, tops)
        self._place_transitions()
        self._flatten_all()
        for state in self.states.values():
            if state.get("always"):
                state["always"] = self._errors_raised(state["always"])
            if state.get("done"):
                state["done"] = self._errors_raised(state["done"])
        self._push_eventless_down()
        self._in_flags()
        for name in self.left_flags:
            key = f"_scxml_left_{name}"
            self.context[key] = False
            self.states[name]["exit"] = [*self.states[name].get("exit", []),
                                         {"assign": {key: "True"}}]
        if self.errors:
            raise DefinitionError(self.errors, self.source)
        if self.uses_outbox:
            self.context[OUTBOX] = list(self.startup)
        if self.children:
            self.context[CHILDREN] = self.children
        for name, where in self.system_used.items():
            # a run started with no payload (the simulator's) still has the values SCXML
            # guarantees: a session id, and this processor
            self.context.setdefault(SYSTEM_KEYS[name], _SYSTEM_DEFAULTS[name])
            self.warn("scxml-system-variable", where, f"{name} is read from the context key "
                      f"{SYSTEM_KEYS[name]!r}, which whoever starts the run sets in the start "
                      f"event's payload (the W3C driver does); otherwise it is "
                      f"{_SYSTEM_DEFAULTS[name]!r}", name)
        self._record_shallow()
        if self.deferred or self.start_target is not None:
            self._bind_at_start()
        events = self._events()
        self._expand(events)
        native: dict[str, Any] = {
            "name": self._workflow_name(),
            "version": str(root.attrs.get("version", "1")),
            "description": "imported from SCXML " + self.source.replace("\\", "/").rsplit(
                "/", 1)[-1],
            "context": self.context,
            "events": {event: {} for event in sorted(events)},
            "states": self.states,
        }
        return native

    def _bind_at_start(self) -> None:
        """Starts the run in a choice state, initial, whose one eventless transition binds
        the data that read what only the run knows and goes on to the chart's initial state
        (its entry actions run after them, as SCXML binds data before entering anything): the
        top state, or the deeper one the chart's `initial` names (`start_target`)."""
        first = next(n for n, st in self.states.items() if st.get("initial")
                     and st.get("parent") is None)
        del self.states[first]["initial"]
        move: dict[str, Any] = {"target": self.start_target or first}
        if self.deferred:
            move["actions"] = [{"assign": {ident: expression}}
                               for ident, expression in self.deferred]
        self.states = {_START: {"type": "choice", "initial": True, "always": [move]},
                       **self.states}
        if self.start_target is not None:
            self.warn("scxml-deep-initial", self.root, f"the chart starts in "
                      f"{self.start_target!r}, below the top: the run starts in the choice "
                      f"state {_START!r}, whose eventless move enters it", _START)
        if not self.deferred:
            return
        names = ", ".join(ident for ident, _ in self.deferred)
        self.warn("scxml-bound-at-start", self.root, f"data {names} read what only the run "
                  f"knows: they are bound by the eventless move out of the choice state "
                  f"{_START!r} the run starts in", _START)

    def _workflow_name(self) -> str:
        name = self.chart_name or re.sub(r"\.scxml$", "", self.source.replace("\\", "/")
                                         .rsplit("/", 1)[-1])
        name = re.sub(r"[^A-Za-z0-9_.\-]", "_", name) or "scxml"
        return name if _NAME.match(name) else f"scxml_{name}"

    def _all(self, node: _Node, tag: str) -> list[_Node]:
        found = [node] if node.namespace == _NS and node.tag == tag else []
        if node.tag in ("content", "scxml") and node is not self.root:
            # what a <content> holds (an invoked chart), a chart an <assign> holds, is not
            # this chart's
            return found
        for child in node.children:
            found += self._all(child, tag)
        return found

    def _refuse_everywhere(self, root: _Node) -> None:
        for node in self._all(root, "script"):
            assignments = self._script(node)
            if assignments is not None:
                self.scripts[id(node)] = assignments
                names = {name for name, _ in assignments}
                self.declared |= names
                self.assigned |= names

    def _unknown(self, node: _Node) -> None:
        self.error("scxml-element", node, f"<{node.tag}> is not imported here", node.tag)

    # -- states ------------------------------------------------------------------------------

    def _name_states(self, root: _Node) -> None:
        used: set[str] = set()
        anonymous = 0
        for node in self._walk(root):
            if node.namespace != _NS or node.tag not in (*_STATES, "history"):
                continue
            ident = node.attrs.get("id")
            if ident is None:
                anonymous += 1
                ident = f"_scxml_{node.tag}{anonymous}"
                while ident in used:
                    anonymous += 1
                    ident = f"_scxml_{node.tag}{anonymous}"
            elif ident in self.by_id:
                self.error("scxml-duplicate-id", node, f"id {ident!r} is used twice (first at "
                           f"line {self.by_id[ident].line})", ident)
                continue
            elif not _NAME.match(ident) or ident.startswith("_scxml_"):
                self.error("scxml-state-name", node, f"state id {ident!r} cannot be a native "
                           "state name (letters, digits, _ . -; not starting _scxml_)", ident)
                continue
            used.add(ident)
            self.node_by_name[ident] = node
            if "id" in node.attrs:
                self.by_id[ident] = node
            self.names[id(node)] = ident

    def _walk(self, node: _Node) -> list[_Node]:
        out = [node]
        if node.tag == "content" or (node.tag == "scxml" and node is not self.root):
            return out  # an invoked chart, or one an <assign> holds, is not this chart's
        for child in node.children:
            out += self._walk(child)
        return out

    def _state(self, node: _Node, parent: str | None) -> None:
        name = self.names.get(id(node))
        if name is None:
            return
        if id(node) in self.flats:
            self._flat_state(node, parent)
            return
        native: dict[str, Any] = {}
        if parent is not None:
            native["parent"] = parent
        self.states[name] = native
        self.node_of[name] = node
        kind = node.tag
        children = node.kids(*_STATES)
        entry = self._blocks(node, "onentry", name)
        exit_ = self._blocks(node, "onexit", name)
        if kind == "final":
            in_region = node.parent is not None and self._is_region(node.parent)
            if parent is None or in_region:
                native["type"] = "final"
                # the W3C tests' convention, and the plain meaning of the name: a top-level
                # final `fail` is a failed run (a region's final only ends its region, and a
                # failed region would fail the join SCXML makes regardless)
                native["outcome"] = "failure" if parent is None and name == "fail" else "success"
            else:
                self.warn("scxml-nested-final", node,
                          f"<final> {name!r} inside compound {parent!r}: a native final state "
                          f"ends the run, so it is a state that raises done.state.{parent} on "
                          "entry and waits there", name)
            if parent is not None:
                entry += self._done_event(node, parent)
            else:
                # entering a top-level final ends the session, which then exits it: its exit
                # actions run right after its entry actions (the native run exits nothing)
                entry, exit_ = entry + exit_, []
            for done in node.kids("donedata") if parent is None else ():
                self.warn("scxml-donedata", done, "<donedata> of a top-level final is left "
                          "out: it goes to an invoking session, and the native run has none",
                          name)
        elif kind == "parallel":
            native["type"] = "parallel"
        for child in node.children:
            if child.namespace != _NS:
                self.warn("scxml-foreign", child, f"element <{child.tag}> of namespace "
                          f"{child.namespace or '(none)'} is left out", child.tag)
            elif child.tag in _STATES:
                self._state(child, name)
            elif child.tag == "history":
                self._history(child, name, node)
            elif child.tag == "transition":
                self._transition(child, name)
            elif child.tag in ("onentry", "onexit", "datamodel", "invoke", "initial",
                               "donedata"):
                continue
            else:
                self._unknown(child)
        for invoke in node.kids("invoke"):
            started, cancelled = self._invoke(invoke, name)
            entry += started
            exit_ += cancelled
        if entry:
            native["entry"] = entry
        if exit_:
            native["exit"] = exit_
        if kind == "state" and children:
            self._initial(node, name, children)
        elif kind == "state" and (node.attrs.get("initial") or node.kids("initial")):
            self.error("scxml-initial", node, f"atomic state {name!r} names an initial child "
                       "it does not have", name)

    def _invoke(self, node: _Node, state: str) -> tuple[list[dict[str, Any]],
                                                         list[dict[str, Any]]]:
        """Gives the actions that start an `<invoke>` (after the state's entry actions) and
        cancel it (after its exit actions): outbox entries `["invoke", id, 0, params, "",
        [autoforward, type]]` and `["uninvoke", id]` that the W3C driver acts on. The inline
        chart is imported as a definition of its own, kept under the context key
        `CHILDREN`."""
        attrs = node.attrs
        kind = attrs.get("type", "scxml")
        type_expression = repr(kind)
        if "typeexpr" in attrs:
            # known only as it starts: the driver raises error.execution for another type
            type_expression = self._expression(attrs["typeexpr"], node, "typeexpr") or ""
            if not type_expression:
                return [], []
        elif kind not in INVOKE_TYPES:
            self.error("scxml-invoke", node, f"<invoke> of type {kind!r}: only SCXML charts "
                       "are invoked", kind)
            return [], []
        ident = attrs.get("id") or f"{state}.invoke{self.invoke_count + 1}"
        if "src" in attrs or "srcexpr" in attrs:
            made = self._src_charts(node, ident, state)
        else:
            made = self._inline_chart(node, ident, state)
        if made is None:
            return [], []
        charts, chart_key = made
        self.invoke_count += 1
        self.children.update(charts)
        finalize = [c for f in node.kids("finalize") for c in f.children]
        if finalize:
            # run by the driver before each event of the child: a targetless transition of
            # the invoking state, on an event of the driver's own, with the child's event data
            event = f"{FINALIZE}{ident}"
            self.raised.add(event)
            self.transitions.append(_Transition(node, state, (event,), None, None,
                                                self._block(finalize, state)))
        started: list[dict[str, Any]] = []
        if "idlocation" in attrs:
            location = attrs["idlocation"].strip()
            if not self._declared(location):
                return [self._static_error(node, "error.execution", None)], []
            started.append({"assign": {location: repr(ident)}})
        pairs = self._pairs(node, None, state, with_content=False)
        if pairs is None:
            return [*started, self._static_error(node, "error.execution", None)], []
        self._stopped = False
        autoforward = attrs.get("autoforward", "false") == "true"
        self.raised.add(f"done.invoke.{ident}")
        chart = "" if chart_key is None else f", {chart_key}"
        started.append(self._queue_action("invoke", repr(ident), None,
                                          "[" + ", ".join(pairs) + "]", None, "",
                                          f"[{autoforward!r}, {type_expression}{chart}]"))
        self.warn("scxml-invoke", node, f"<invoke> {ident!r}: the child chart runs as a session "
                  "of its own only where a driver starts it (reference_machine.importers.w3c."
                  "run_definition does); the simulator does not, so under run and fuzz it is "
                  "never started", ident)
        return started, [self._queue_action("uninvoke", repr(ident), None, None, None)]

    def _inline_chart(self, node: _Node, ident: str, state: str
                      ) -> tuple[dict[str, dict[str, Any]], str | None] | None:
        """Gives the chart of an invoke's inline `<content>` (under its invoke id), or None
        after an error located at it."""
        contents = node.kids("content")
        if len(contents) == 1 and "expr" in contents[0].attrs and not contents[0].children:
            return self._content_charts(node, ident, state, contents[0].attrs["expr"])
        charts = [c for c in contents[0].children if c.namespace == _NS and c.tag == "scxml"
                  ] if len(contents) == 1 else []
        if len(charts) != 1 or len(contents[0].children) != 1:
            self.error("scxml-invoke", node, "an <invoke> is imported with one inline "
                       "<content> holding one <scxml> chart, or a src= naming a file beside "
                       "the chart", state)
            return None
        data = self._chart_within(charts[0])
        return None if data is None else ({ident: data}, None)

    def _remembered(self, key: tuple[Any, ...], compute: Callable[[], Any]) -> Any:
        """Gives what `compute` gives and adds the findings it makes, computed once however
        often `_converted` converts this chart again."""
        if key in self.memo:
            result, errors, warnings = self.memo[key]
            self.errors += errors
            self.warnings += warnings
            return copy.deepcopy(result) if isinstance(result, dict) else result
        errors_before, warnings_before = len(self.errors), len(self.warnings)
        result = compute()
        self.memo[key] = (copy.deepcopy(result) if isinstance(result, dict) else result,
                          self.errors[errors_before:], self.warnings[warnings_before:])
        return result

    def _chart_within(self, root: _Node) -> dict[str, Any] | None:
        """Gives the native data of a chart written inside this one (an invoke's `<content>`,
        an assigned chart), its warnings taken as this chart's; None, its errors noted, when
        it does not import."""
        return self._remembered(("inline", id(root)), lambda: self._convert_within(root))

    def _convert_within(self, root: _Node) -> dict[str, Any] | None:
        try:
            child, native = _converted(lambda kept: _Converter(
                root, self.source, invoked=True, files=self.files, here=self.here,
                native_parallels=kept, memo=self.memo))
            data, notes = _native_checks(native, child, self.source)
        except DefinitionError as exc:
            self.errors += exc.findings
            return None
        self.warnings += [*child.warnings, *notes]
        return data

    def _src_charts(self, node: _Node, ident: str, state: str
                    ) -> tuple[dict[str, dict[str, Any]], str | None] | None:
        """Gives the charts an invoke's `src=` or `srcexpr=` may name, by the key the
        driver finds them under (`src=`: the invoke id), and the native expression of the
        key when it is known only as the invoke starts (`srcexpr=`); None after an error
        located at the invoke. A `srcexpr` is imported when each value it can have is known
        at import (`_known_strings`); one naming no file raises error.execution where it
        runs, as an invoke that cannot start does."""
        attrs = node.attrs
        if node.kids("content") or ("src" in attrs and "srcexpr" in attrs):
            self.error("scxml-invoke", node, "an <invoke> names its chart once: by src=, "
                       "srcexpr= or an inline <content>", state)
            return None
        if "src" in attrs:
            data = self._src_chart(node, "src", attrs["src"], missing_ok=False)
            return None if data is _REFUSED else ({ident: data}, None)
        text = attrs["srcexpr"]
        values = self._known_strings(text, node, "srcexpr")
        translated = self._expression(text, node, "srcexpr", quiet=True)
        if values is None or translated is None:
            self.error("scxml-invoke", node, f"<invoke srcexpr={text!r}> is refused: its value "
                       "is imported only when known at import (a string, or a data item set "
                       "only to strings, by its expr and each <assign> to it, and by nothing "
                       "else), as importing reads no file the run names later", "srcexpr")
            return None
        charts: dict[str, dict[str, Any]] = {}
        key = "''"
        for number, value in reversed(list(enumerate(values, 1))):
            data = self._src_chart(node, "srcexpr", value, missing_ok=True)
            if data is _REFUSED:
                return None
            if data is not None:
                charts[f"{ident}#{number}"] = data
                key = f"{f'{ident}#{number}'!r} if ({translated}) == {value!r} else ({key})"
        return charts, key

    def _src_chart(self, node: _Node, attribute: str, src: str, *, missing_ok: bool
                   ) -> Any:
        """Gives the native data of the chart in the file `src` names (an invoke's), imported
        as an inline chart is; None for a file that is not there when `missing_ok` (a
        warning), else `_REFUSED` after an error located at `node`."""
        return self._remembered(("src", id(node), attribute, src, missing_ok),
                                lambda: self._src_read(node, attribute, src, missing_ok))

    def _src_read(self, node: _Node, attribute: str, src: str, missing_ok: bool) -> Any:
        try:
            text, names = self.files.read(src, self.here)
        except _SrcRefused as exc:
            if missing_ok and isinstance(exc, _SrcMissing):
                self.warn("scxml-invoke-missing", node, f"<invoke {attribute}=> may name "
                          f"{src!r}: {exc}, so invoking it raises error.execution where it "
                          "runs", src)
                return None
            self.error("scxml-invoke", node, f"<invoke {attribute}={src!r}> is refused: {exc}",
                       attribute)
            return _REFUSED
        shown = "/".join(names)
        where = f"{node.path}/@{attribute}"
        try:
            parsed = _parse(text, shown)
            child, native = _converted(lambda kept: _Converter(
                parsed, shown, invoked=True, files=self.files, here=names[:-1],
                native_parallels=kept, memo=self.memo))
            data, notes = _native_checks(native, child, shown)
        except DefinitionError as exc:
            self.errors += [_in_file(f, shown, where, node.line) for f in exc.findings]
            return _REFUSED
        self.warnings += [_in_file(f, shown, where, node.line)
                          for f in (*child.warnings, *notes)]
        return data

    def _known_strings(self, text: str, node: _Node, attribute: str) -> list[str] | None:
        """Gives the strings `text` can give, when known at import: a string literal, or a
        data item that only literals set (its expr or value, each `<assign>` to it), of which
        the strings; None when not known (an invoked chart's data, which its parent may set,
        or a data item anything else sets)."""
        try:
            tree = self._parse_expression(text)
        except (SyntaxError, _Inexpressible, RecursionError):
            return None
        if isinstance(tree, ast.Constant):
            return [tree.value] if isinstance(tree.value, str) else []
        writes = self._writes(tree)
        if writes is None:
            return None
        values: list[str] = []
        for write in writes:
            value = write.attrs.get("expr", write.text.strip() or None)
            if write.children or "src" in write.attrs or (
                    value is not None and not self._is_literal(value)):
                return None
            if value is None:
                continue
            literal = self._parse_expression(value)
            if (isinstance(literal, ast.Constant) and isinstance(literal.value, str)
                    and literal.value not in values):
                values.append(literal.value)
        return values

    def _writes(self, tree: ast.expr) -> list[_Node] | None:
        """Gives what sets the data item `tree` names, when only its `<data>` and whole
        `<assign>`s to it do; None for anything else (not a data item, an invoked chart's,
        which its parent may set, one a script, an idlocation, a foreach or a partial
        assign sets)."""
        if not isinstance(tree, ast.Name) or self.invoked or tree.id not in self.declared:
            return None
        name = tree.id
        for other in self._walk(self.root):
            if other.tag in ("send", "invoke", "foreach") and name in (
                    other.attrs.get(k, "").strip() for k in ("idlocation", "item", "index")):
                return None
        if any(name == n for each in self.scripts.values() for n, _ in each):
            return None
        writes = [n for n in self._all(self.root, "data") if n.attrs.get("id") == name]
        for assign in self._all(self.root, "assign"):
            location = assign.attrs.get("location", "").strip()
            if re.split(r"[.\[]", location, maxsplit=1)[0] == name:
                if location != name:
                    return None
                writes.append(assign)
        return writes

    def _chart_assigned(self, node: _Node) -> bool:
        """Tells whether an `<assign>` sets its data item to the `<scxml>` chart it holds,
        where the item is read only by `<invoke><content expr="ITEM"/>`: the value stands
        for the chart (a handle, `_chart_handle`), which nothing else sees."""
        charts = [c for c in node.children if c.namespace == _NS and c.tag == "scxml"]
        name = node.attrs.get("location", "").strip()
        if "expr" in node.attrs or len(charts) != 1 or len(node.children) != 1 or \
                node.text.strip() or not _NAME.match(name):
            return False
        word = re.compile(rf"(?<![\w$]){re.escape(name)}(?![\w$])")
        for other in self._walk(self.root):
            if other is node or self._inside(other, node):
                continue
            if word.search(other.text):
                return False
            for key, value in other.attrs.items():
                written = (other.tag == "data" and key == "id") or (
                    other.tag == "assign" and key == "location")
                given = (other.tag == "content" and key == "expr" and value.strip() == name
                         and other.parent is not None and other.parent.tag == "invoke")
                if word.search(value) and not (written or given):
                    return False
        return True

    @staticmethod
    def _chart_handle(node: _Node) -> str:
        """Gives the value an `<assign>` of a chart sets (`_chart_assigned`): its place."""
        return f"_scxml_chart:{node.path}"

    def _content_charts(self, node: _Node, ident: str, state: str, text: str
                        ) -> tuple[dict[str, dict[str, Any]], str | None] | None:
        """Gives the charts an invoke's `<content expr=>` may give, by key, and the native
        expression of the key as the invoke starts: the data item it reads must be set only
        to literals and to `<scxml>` charts (`_chart_assigned`); a value that is no chart
        raises error.execution where it runs, as an invoke that cannot start does."""
        try:
            tree = self._parse_expression(text)
        except (SyntaxError, _Inexpressible, RecursionError):
            tree = None
        writes = None if tree is None else self._writes(tree)
        translated = self._expression(text, node, "expr", quiet=True)
        assigned = [w for w in writes or [] if w.tag == "assign" and w.children]
        others = [w for w in writes or [] if w not in assigned]
        values = [w.attrs.get("expr", w.text.strip()) for w in others]
        if writes is None or translated is None or not all(
                self._chart_assigned(w) for w in assigned) or any(
                w.children or "src" in w.attrs for w in others) or any(
                value and not self._is_literal(value) for value in values):
            self.error("scxml-invoke", node, f"<content expr={text!r}> is refused: it is "
                       "imported only when it reads a data item set only to literals and "
                       "<scxml> charts, read nowhere else", state)
            return None
        charts: dict[str, dict[str, Any]] = {}
        key = "''"
        for number, assign in reversed(list(enumerate(assigned, 1))):
            root = next(c for c in assign.children if c.tag == "scxml")
            data = self._chart_within(root)
            if data is None:
                return None
            charts[f"{ident}#{number}"] = data
            key = (f"{f'{ident}#{number}'!r} if ({translated}) == "
                   f"{self._chart_handle(assign)!r} else ({key})")
        return charts, key

    def _done_event(self, node: _Node, parent: str) -> list[dict[str, Any]]:
        """Gives the actions that raise `done.state.PARENT` as `node` (a final) is entered,
        with its `<donedata>` as the event's data."""
        event = f"done.state.{parent}"
        self.raised.add(event)
        actions: list[dict[str, Any]] = []
        pairs: list[str] = []
        for done in node.kids("donedata"):
            got = self._pairs(done, None, parent)
            if got is None:  # SCXML raises error.execution and sends the event with no data
                actions.append(self._static_error(done, "error.execution", None))
                self._stopped = False
            else:
                pairs += got
        actions.append(self._queue_action("internal", repr(event), None,
                                          "[" + ", ".join(pairs) + "]", None))
        return actions

    def _is_region(self, node: _Node) -> bool:
        return node.parent is not None and node.parent.tag == "parallel"

    def _history(self, node: _Node, parent: str, owner: _Node) -> None:
        kind = node.attrs.get("type", "shallow")
        if kind not in ("shallow", "deep"):
            self.error("scxml-history", node, f"history type {kind!r} is neither shallow nor "
                       "deep", kind)
            return
        if owner.tag != "state":
            self.error("scxml-history", node, f"history in <{owner.tag}> {parent!r}: the native "
                       "format keeps history on compound states only", parent)
            return
        state = self.states[parent]
        ident = node.attrs.get("id", "")
        others = [h for h in owner.kids("history") if h is not node
                  and h.attrs.get("type", "shallow") != kind]
        if self._shallow_kept(owner):
            if kind == "shallow":
                self.both_histories[parent] = owner
                self.warn("scxml-history-both", node, f"{parent!r} has both shallow and deep "
                          f"history: the deep one is `history: deep`; the shallow one is the "
                          f"child active as {parent!r} is left, kept in the context key "
                          f"'_scxml_shallow_{parent}', and a transition to {ident!r} enters "
                          "that child (its own initial state below it)", parent)
                return
            others = []  # the deep one: the native history
        if others and ident not in self.targeted and any(
                h.attrs.get("id", "") in self.targeted for h in others):
            self.warn("scxml-history-unused", node, f"history {ident!r} is the target of no "
                      "transition: left out", parent)
            return
        if state.get("history", kind) != kind or (others and all(
                h.attrs.get("id", "") in self.targeted for h in others)
                and ident in self.targeted):
            self.error("scxml-history", node, f"{parent!r} has both shallow and deep history, "
                       "each a transition's target; the native format keeps one kind per "
                       "state", parent)
            return
        state["history"] = kind
        self.warn("scxml-history-attribute", node,
                  f"history {self.names.get(id(node))!r} becomes `history: {kind}` on "
                  f"{parent!r}: a transition to {parent!r} itself then resumes it too; one "
                  f"to the history before {parent!r} was ever left takes the default "
                  "transition (its actions run before the entry actions)", parent)

    def _shallow_kept(self, owner: _Node) -> bool:
        """Tells whether `owner` has a shallow and a deep history, each a transition's
        target, and can keep the shallow one in the context: no child is a parallel state
        (whose entry each region runs on its own copy of the context), and each shallow
        history has a default transition to one state inside `owner`."""
        targeted = [h for h in owner.kids("history") if h.attrs.get("id", "") in self.targeted]
        if {h.attrs.get("type", "shallow") for h in targeted} != {"shallow", "deep"} or any(
                c.tag == "parallel" for c in owner.kids(*_STATES)):
            return False
        for history in owner.kids("history"):
            if history.attrs.get("type", "shallow") != "shallow":
                continue
            defaults = history.kids("transition")
            targets = defaults[0].attrs.get("target", "").split() if defaults else []
            default = self.by_id.get(targets[0]) if len(targets) == 1 else None
            if default is None or not self._inside(default, owner):
                return False
        return True

    def _record_shallow(self) -> None:
        """Keeps, for each state with both kinds of history (`both_histories`), the child
        it had active as it is left: each child's entry tells it is the active one, and the
        state's exit keeps that one."""
        for name, owner in self.both_histories.items():
            active, kept = f"_scxml_active_{name}", f"_scxml_shallow_{name}"
            self.context[active] = self.context[kept] = None
            for child in owner.kids(*_STATES):
                child_name = self.names.get(id(child))
                native = self.states.get(child_name or "")
                if child_name is not None and native is not None:
                    native["entry"] = [{"assign": {active: repr(child_name)}},
                                       *native.get("entry", [])]
            state = self.states[name]
            state["exit"] = [*state.get("exit", []), {"assign": {kept: f"context[{active!r}]"}}]

    def _to_shallow(self, node: _Node, source: str, descriptors: tuple[str, ...] | None,
                    guard: str | None, history: _Node, cond_error: bool) -> None:
        """Makes a transition to a shallow history kept in the context (`_record_shallow`)
        one per child of its state, each taken when that child is the one kept once the
        state was left, and one to the history's default target (with the default's actions)
        before it ever was."""
        owner = history.parent
        owner_name = self.names.get(id(owner)) if owner is not None else None
        if owner is None or owner_name is None:
            return
        self.left_flags.setdefault(owner_name, history)
        left = f"context[{f'_scxml_left_{owner_name}'!r}]"
        kept = f"context[{f'_scxml_shallow_{owner_name}'!r}]"
        both = f"({guard}) and " if guard else ""
        actions = self._block(node.children, source)
        for child in owner.kids(*_STATES):
            child_name = self.names.get(id(child))
            if child_name is not None:
                self.transitions.append(_Transition(
                    node, source, descriptors, f"{both}{left} and {kept} == {child_name!r}",
                    child_name, actions, cond_error))
        default = history.kids("transition")[0]
        after = self._block(default.children, source)
        target = self.by_id[default.attrs["target"].split()[0]]
        self.transitions.append(_Transition(node, source, descriptors, f"{both}not {left}",
                                            self._target_name(target, node),
                                            [*actions, *after], cond_error))

    def _initial(self, owner: _Node, name: str | None, children: list[_Node]) -> None:
        """Marks the initial child: the `initial` attribute, `<initial>` or the first child."""
        target_text = owner.attrs.get("initial")
        where = owner
        for initial in owner.kids("initial"):
            where = initial
            for transition in initial.kids("transition"):
                target_text = transition.attrs.get("target")
                actions = self._block(transition.children, name or "")
                if actions and name is not None:
                    self.warn("scxml-initial-actions", transition, "the actions of an "
                              "<initial> transition run as the compound's first entry actions",
                              name)
                    state = self.states[name]
                    state["entry"] = [*state.get("entry", []), *actions]
        if owner.tag == "parallel":
            return
        if not target_text:
            first = children[0]
            chain = [first]
        else:
            chains = []
            for target_id in target_text.split():
                target = self.by_id.get(target_id)
                if target is not None and target.tag == "history" and target.parent is owner:
                    # the native compound resumes its history itself: start at the default,
                    # whose actions run only while nothing is recorded (before it was left)
                    default = [t.attrs.get("target", "") for t in target.kids("transition")]
                    if name is not None and target.kids("transition"):
                        self.left_flags.setdefault(name, target)
                        state = self.states[name]
                        state["entry"] = [*state.get("entry", []), *self._actions(
                            target.kids("transition")[0].children,
                            f"not context[{f'_scxml_left_{name}'!r}]", name)]
                        self._stopped = False
                    target = self.by_id.get(default[0].split()[0]) if default and default[
                        0].split() else next(iter(children), None)
                if target is None or not self._inside(target, owner):
                    self.error("scxml-unknown-target", where, f"initial state {target_id!r} is "
                               f"not a state inside {name or 'the chart'}", target_id)
                    return
                chain = []
                current: _Node | None = target
                while current is not None and current is not owner:
                    chain.append(current)
                    current = current.parent
                chains.append(list(reversed(chain)))
            if len({id(c[0]) for c in chains}) != 1 or (len(chains) > 1 and not all(
                    any(n.tag == "parallel" for n in c) for c in chains)):
                self.error("scxml-initial", where, f"initial {target_text!r} names several "
                           "states that are not in the regions of one parallel state",
                           *target_text.split())
                return
            chain = chains[0]
            for other in chains[1:]:
                chain += [n for n in other if n not in chain]
        first_name = self.names.get(id(chain[0]))
        if first_name is None:
            return
        self._mark_initial(first_name)
        leaf = self.names.get(id(chain[-1]))
        if name is None and len(chain) > 1 and leaf is not None and all(
                n.tag == "state" for n in chain[:-1]) and chain[-1].tag in _STATES:
            # the states above keep their own initial children: a move enters the leaf
            self.start_target = leaf
            return
        for deeper in chain[1:]:
            deeper_name = self.names.get(id(deeper))
            if deeper_name is None or deeper.tag == "history":
                continue
            into = self.flat_inside.get(deeper_name)
            if into is not None:  # the configuration of a flattened parallel the chain names
                targets = tuple(t for t in (target_text or "").split() if t in self.flat_inside)
                try:
                    into.initial = into.subtree.entered(targets or (deeper_name,))
                except NotFlat as exc:
                    raise _Unflattened(into.name, str(exc)) from exc
                self.warn("scxml-deep-initial", where, f"the chart's initial states "
                          f"{target_text!r} are inside parallel state {into.name!r}: that "
                          f"configuration is where {into.name!r} starts every time it is "
                          "entered by default", into.name)
                break
            if deeper.parent is not None and deeper.parent.tag == "parallel":
                continue  # a region: entered with its parallel state
            self._mark_initial(deeper_name, where)

    def _mark_initial(self, name: str, where: _Node | None = None) -> None:
        state = self.states.get(name)
        if state is None:
            return
        parent = state.get("parent")
        sibling = self.initial_of.get(parent)
        if sibling is not None and sibling != name:
            if where is not None:
                self.warn("scxml-deep-initial", where, f"the chart starts in {name!r}, so it is "
                          f"the initial child of {parent!r} every time, not {sibling!r}",
                          name)
            del self.states[sibling]["initial"]
        self.initial_of[parent] = name
        state["initial"] = True

    def _inside(self, node: _Node, owner: _Node) -> bool:
        current = node.parent
        while current is not None:
            if current is owner:
                return True
            current = current.parent
        return False

    # -- transitions -------------------------------------------------------------------------

    def _descriptors(self, node: _Node, source: str) -> tuple[str, ...] | None:
        """Gives a transition's event descriptors (`a.*` and `a.` read as `a`), None when it
        is eventless, none after the error of an empty `event`."""
        if "event" not in node.attrs:
            return None
        descriptors = tuple(d.removesuffix(".*").removesuffix(".") or "*"
                            for d in node.attrs["event"].split())
        if not descriptors:
            self.error("scxml-event", node, "an empty event attribute", source)
        return descriptors

    def _transition(self, node: _Node, source: str) -> None:
        descriptors = self._descriptors(node, source)
        if descriptors == ():
            return
        guard = None
        cond_error = False
        if "cond" in node.attrs:
            guard = self._expression(node.attrs["cond"], node, "cond", runtime=True)
            if self._syntax_error:
                guard = "False"
                cond_error = True
                self.raised.add("error.execution")
                self.warn("scxml-cond-error", node, f"cond={node.attrs['cond']!r} is not "
                          f"{self.language}: like SCXML the transition is never enabled, and the "
                          "error.execution SCXML raises as it is evaluated is raised by the "
                          "later transition of this state that is taken (after the exit "
                          "actions; and not at all when none is taken: a native guard has no "
                          "effects)", source)
            elif guard is None:
                return
        target = None
        target_text = node.attrs.get("target")
        into = self._flat_target(target_text.split(), node) if target_text else None
        if target_text is not None and into is not None:
            target, entering = self._entering(into, tuple(target_text.split()))
            self.transitions.append(_Transition(
                node, source, descriptors, guard, target,
                [*self._block(node.children, source), *entering], cond_error))
            return
        if target_text is not None:
            targets = target_text.split()
            if len(targets) != 1:
                self.error("scxml-multiple-targets", node, f"target {target_text!r} names "
                           f"{len(targets)} states; the native format moves to one", source)
                return
            target_node = self.by_id.get(targets[0])
            if target_node is None:
                self.error("scxml-unknown-target", node, f"target state {targets[0]!r} does not "
                           "exist", targets[0])
                return
            target = self._target_name(target_node, node)
            if (target_node.tag == "history" and target_node.parent is not None
                    and target_node.attrs.get("type", "shallow") == "shallow"
                    and self._shallow_kept(target_node.parent)):
                self._to_shallow(node, source, descriptors, guard, target_node, cond_error)
                return
            if target_node.tag == "history" and self._history_default(
                    node, source, descriptors, guard, target_node, cond_error):
                return
        elif descriptors is None:
            self.error("scxml-eventless-internal", node, "an eventless transition with no "
                       "target: the native format runs eventless transitions only to move "
                       "(one without a target would loop)", source)
            return
        actions = self._block(node.children, source)
        self.transitions.append(_Transition(node, source, descriptors, guard, target, actions,
                                            cond_error))

    def _history_default(self, node: _Node, source: str, descriptors: tuple[str, ...] | None,
                         guard: str | None, history: _Node, cond_error: bool) -> bool:
        """Makes a transition to a history two: to its state (which resumes what it
        recorded) once the state was left, else to the history's default target with the
        default transition's actions; tells whether it did (a history with one default
        target)."""
        owner = history.parent
        defaults = history.kids("transition")
        targets = defaults[0].attrs.get("target", "").split() if defaults else []
        default = self.by_id.get(targets[0]) if len(targets) == 1 else None
        owner_name = self.names.get(id(owner)) if owner is not None else None
        if owner is None or owner_name is None or default is None or not self._inside(
                default, owner):
            return False
        flag = f"context[{f'_scxml_left_{owner_name}'!r}]"
        self.left_flags.setdefault(owner_name, history)
        actions = self._block(node.children, source)
        after = self._block(defaults[0].children, source)
        both = (f"({guard}) and " if guard else "")
        self.transitions.append(_Transition(node, source, descriptors, both + flag, owner_name,
                                            actions, cond_error))
        self.transitions.append(_Transition(node, source, descriptors, f"{both}not {flag}",
                                            self._target_name(default, node),
                                            [*actions, *after], cond_error))
        return True

    def _target_name(self, node: _Node, transition: _Node) -> str | None:
        inside = self.flat_inside.get(self.names.get(id(node), ""))
        if inside is not None:  # every path into a flattened parallel goes by `_entering`
            raise _Unflattened(inside.name, f"the transition at line {transition.line} enters "
                                            "it in a way the flattening does not follow")
        if node.tag == "history":
            owner = node.parent
            assert owner is not None
            return self.names.get(id(owner))
        owner = node.parent
        if (node.tag == "state" and owner is not None and owner.tag == "parallel"
                and transition.parent is not None
                and not self._inside(transition.parent, owner)):
            # entering a region enters its parallel state and every region with it
            self.warn("scxml-region-target", transition, f"the target is region "
                      f"{self.names.get(id(node))!r}: the transition enters its parallel "
                      f"state {self.names.get(id(owner))!r}, which enters every region",
                      self.names.get(id(node)) or "")
            return self.names.get(id(owner))
        return self.names.get(id(node))

    def _place_transitions(self) -> None:
        for t in self.transitions:
            if t.target is None and t.descriptors is None:
                continue
            source = t.source
            spec: dict[str, Any] = {}
            if t.target is not None:
                spec["target"] = t.target
            if t.guard is not None:
                spec["guard"] = t.guard
            if t.actions:
                spec["actions"] = t.actions
            if t.cond_error:
                spec[_COND_ERROR] = True
            region = self._region_of(source)
            if region is not None and t.target is not None and not self._within(
                    t.target, region):
                parallel = self.states[region]["parent"]
                if t.descriptors is None or (self._within(t.target, parallel) and t.target != \
                        parallel):
                    self.error("scxml-region-exit", t.node, f"a transition from region "
                               f"{region!r} to {t.target!r}: a native region is left only by "
                               f"its parallel state {parallel!r}", source, t.target)
                    continue
                self.warn("scxml-region-exit", t.node, f"the transition leaves region "
                          f"{region!r}: it is made a transition of parallel state "
                          f"{parallel!r}, tried only when no region takes the event", source)
                source = parallel
            if t.descriptors is None:
                if self.states[source].get("type") == "final":
                    continue
                earlier = self.states[source].setdefault("always", [])
                if any("guard" not in e and not e.get(_COND_ERROR) for e in earlier):
                    # SCXML takes the first enabled one: after one with no cond, none is
                    self.warn("scxml-never-taken", t.node, "an eventless transition after one "
                              "with no cond is never taken: left out", source)
                    continue
                earlier.append(spec)
                continue
            if (self.node_of[source].tag == "parallel"
                    and f"done.state.{source}" in t.descriptors):
                self.states[source].setdefault("done", []).append(spec)
                if len(t.descriptors) > 1:
                    self.warn("scxml-done", t.node, "the other event descriptors of this "
                              "done.state transition are left out: the native join is not an "
                              "event", source)
                continue
            internal = (t.node.attrs.get("type") == "internal" and t.target is not None
                        and t.target != source and self._within(t.target, source)
                        and self.states[source].get("type") != "parallel")
            self.states[source].setdefault("_on", []).append(
                (t.descriptors, spec, t.node, internal))

    def _errors_raised(self, specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Gives transitions tried in order with, after one whose cond is not Python, the
        error.execution its evaluation raised as the first action of each later one."""
        out: list[dict[str, Any]] = []
        erred = False
        for original in specs:
            spec = {k: v for k, v in original.items() if k != _COND_ERROR}
            if erred:
                raised = self._queue_action("platform", repr("error.execution"), None, None,
                                            None)
                spec["actions"] = [raised, *spec.get("actions", [])]
            erred = erred or bool(original.get(_COND_ERROR))
            out.append(spec)
        return out

    def _region_of(self, name: str) -> str | None:
        current: str | None = name
        while current is not None:
            parent = self.states[current].get("parent")
            if parent is not None and self.states[parent].get("type") == "parallel":
                return current
            current = parent
        return None

    def _within(self, name: str, ancestor: str) -> bool:
        current: str | None = name
        while current is not None:
            if current == ancestor:
                return True
            current = self.states[current].get("parent")
        return False

    def _children(self, name: str) -> list[str]:
        return [n for n, s in self.states.items() if s.get("parent") == name]

    def _push_eventless_down(self) -> None:
        """Copies a compound state's eventless transitions to the leaves below it."""
        # innermost first (reversed document order): a leaf tries its own, then its
        # parent's, then its grandparent's, as SCXML selects transitions
        for name in reversed(list(self.states)):
            state = self.states[name]
            node = self.node_of.get(name)
            if not state.get("always") or node is None or not node.kids(*_STATES):
                continue
            pushed = state.pop("always")
            if state.get("type") == "parallel":
                self.error("scxml-eventless-parallel", node, f"eventless transitions of "
                           f"parallel state {name!r}: the native format has them only on "
                           "leaf states", name)
                continue
            below = [n for n in (self.names.get(id(d)) for d in self._walk(node)[1:]
                                 if d.namespace == _NS and d.tag in _STATES)
                     if n is not None and n in self.states]
            below += [product for flat in self.flats.values() if self._inside(flat.node, node)
                      for product in flat.products.values()]
            leaves = [n for n in below if not self.node_of[n].kids(*_STATES)]
            if any(self.states[n].get("type") == "parallel" for n in below):
                self.error("scxml-eventless-parallel", node, f"eventless transitions of "
                           f"{name!r}, which holds a parallel state: a native region cannot "
                           "take them", name)
                continue
            self.warn("scxml-eventless-compound", node, f"the eventless transitions of compound "
                      f"{name!r} are copied to each leaf below it (after the leaf's own)"
                      + (f"; a move from a leaf to a state inside {name!r} does not exit and "
                         f"enter {name!r} again" if (state.get("entry") or state.get("exit"))
                         else ""), name)
            for leaf in leaves:
                if self.states[leaf].get("type") == "final":
                    continue
                self.states[leaf].setdefault("always", []).extend(dict(t) for t in pushed)

    def _in_flags(self) -> None:
        """Sets `_scxml_in_ID` on entry and clears it on exit of each state `In()` reads."""
        for state_id, where in self.in_states.items():
            node = self.by_id.get(state_id)
            if node is None or node.tag == "history":
                self.error("scxml-unknown-target", where, f"In({state_id!r}) names no state",
                           state_id)
                continue
            key = f"_scxml_in_{state_id}"
            self.context.setdefault(key, False)
            native = self.states.get(state_id)
            if native is None:
                continue
            native["entry"] = [{"assign": {key: "True"}}, *native.get("entry", [])]
            native["exit"] = [*native.get("exit", []), {"assign": {key: "False"}}]
            if self._region_of(state_id) is not None:
                self.warn("scxml-in-region", where, f"In({state_id!r}) reads a flag that each "
                          "region keeps in its own copy of the context: another region does "
                          "not see it change", state_id)

    # -- parallel states, SCXML's way (see `scxml_parallel`) -------------------------------

    def _plan_flats(self, root: _Node) -> None:
        """Plans the flattening of each outermost `<parallel>` not kept native: its states
        and transitions as `scxml_parallel` reads them (their actions come later, from
        `_flat_state`)."""
        for node in self._state_tree(root):
            if node.tag != "parallel" or any(
                    self._inside(node, flat.node) for flat in self.flats.values()):
                continue
            name = self.names.get(id(node))
            if name is None or name in self.native_parallels or not node.kids(*_STATES):
                continue
            flat = _Flat(node, name, Subtree(name, {}, [], _matches))
            self.flats[id(node)] = flat
            order = 0
            for inside in self._state_tree(node):
                for history in inside.kids("history"):
                    raise _Unflattened(name, f"it holds history state "
                                             f"{self.names.get(id(history))!r}")
                ident = self.names.get(id(inside))
                if ident is None:
                    continue
                kids = tuple(n for n in (self.names.get(id(c)) for c in inside.kids(*_STATES))
                             if n is not None)
                parent = None if inside is node else self.names.get(id(inside.parent))
                flat.subtree.places[ident] = Place(ident, inside.tag, parent, kids,
                                                   self._flat_initial(inside, kids, name),
                                                   order)
                order += 1
                if inside is not node:
                    self.flat_inside[ident] = flat

    def _state_tree(self, node: _Node) -> list[_Node]:
        """Gives `node` and the states below it, in document order: states only, and only
        where SCXML places them (not inside executable content or foreign elements)."""
        out = [node]
        for child in node.kids(*_STATES):
            out += self._state_tree(child)
        return out

    def _flat_initial(self, node: _Node, kids: tuple[str, ...], owner: str) -> tuple[str, ...]:
        """Gives the ids a compound state inside a flattened parallel enters by default."""
        if node.tag != "state" or not kids:
            return ()
        text = node.attrs.get("initial")
        for initial in node.kids("initial"):
            for transition in initial.kids("transition"):
                text = transition.attrs.get("target")
        if not text:
            return kids[:1]
        targets = tuple(text.split())
        for target in targets:
            found = self.by_id.get(target)
            if found is None or found.tag == "history" or not self._inside(found, node):
                raise _Unflattened(owner, f"the initial state {target!r} of "
                                          f"{self.names.get(id(node))!r} is not a state inside it")
        return targets

    def _flat_state(self, node: _Node, parent: str | None) -> None:
        """Gives a flattened `<parallel>` its native compound state and converts the
        actions of every state and transition inside it; its configurations become native
        states in `_flatten`."""
        flat = self.flats[id(node)]
        name = flat.name
        native: dict[str, Any] = {"parent": parent} if parent is not None else {}
        self.states[name] = native
        self.node_of[name] = node
        for key in (flat.conf, flat.pending):
            self.context[key] = None
        for inside in self._state_tree(node):
            ident = self.names.get(id(inside))
            if ident is None:
                continue
            entry = self._blocks(inside, "onentry", ident)
            for initial in inside.kids("initial"):
                for transition in initial.kids("transition"):
                    actions = self._block(transition.children, ident)
                    if actions:
                        self.warn("scxml-initial-actions", transition, "the actions of an "
                                  "<initial> transition run as the compound's last entry "
                                  "actions, on every entry", ident)
                    entry += actions
            exit_ = self._blocks(inside, "onexit", ident)
            for child in inside.children:
                if child.namespace != _NS:
                    self.warn("scxml-foreign", child, f"element <{child.tag}> of namespace "
                              f"{child.namespace or '(none)'} is left out", child.tag)
                elif child.tag == "transition":
                    self._flat_move(flat, child, ident)
                elif child.tag == "invoke":
                    started, cancelled = self._invoke(child, ident)
                    entry += started
                    exit_ += cancelled
                    while self.transitions and self.transitions[-1].node is child:
                        finalize = self.transitions.pop()
                        index = len(flat.subtree.moves)
                        flat.subtree.add(Move(index, ident, finalize.descriptors, False, (),
                                              False))
                        flat.bodies[index] = finalize.actions
                        flat.nodes[index] = child
                elif child.tag == "donedata":
                    pairs = self._pairs(child, None, ident)
                    self._stopped = False
                    # None: evaluating it fails whenever it runs (SCXML raises error.execution
                    # and sends the done event with no data)
                    flat.done_pairs[ident] = None if pairs is None else "[" + ", ".join(
                        pairs) + "]"
                elif child.tag not in (*_STATES, "onentry", "onexit", "datamodel",
                                       "initial"):
                    self._unknown(child)
            flat.entry[ident], flat.exit[ident] = entry, exit_
            place = flat.subtree.places[ident]
            if place.kind == "final" and place.parent is not None:
                self.raised.add(f"done.state.{place.parent}")
                above = flat.subtree.places[place.parent].parent
                if above is not None and flat.subtree.places[above].kind == "parallel":
                    self.raised.add(f"done.state.{above}")

    def _flat_move(self, flat: _Flat, node: _Node, source: str) -> None:
        """Adds a transition declared inside a flattened parallel (its root included)."""
        descriptors = self._descriptors(node, source)
        if descriptors == ():
            return
        self.flat_events.update(d for d in descriptors or () if d != "*")
        guard = None
        if "cond" in node.attrs:
            guard = self._expression(node.attrs["cond"], node, "cond", runtime=True)
            if self._syntax_error:
                guard = "False"
                self.warn("scxml-cond-error", node, f"cond={node.attrs['cond']!r} is not "
                          f"{self.language}: the transition is never enabled (the "
                          "error.execution SCXML raises as it is evaluated is not raised)",
                          source)
            elif guard is None:
                return
        targets = tuple(node.attrs.get("target", "").split())
        for target in targets:
            found = self.by_id.get(target)
            if found is None:
                self.error("scxml-unknown-target", node, f"target state {target!r} does not "
                           "exist", target)
                return
            if found.tag == "history":
                raise _Unflattened(flat.name, f"a transition inside it targets history state "
                                              f"{target!r}")
        outside = [t for t in targets if t not in flat.subtree.places]
        if outside and len(targets) > 1:
            self.error("scxml-multiple-targets", node, f"target {' '.join(targets)!r} names "
                       f"{len(targets)} states, some outside parallel state {flat.name!r}; "
                       "the native format moves to one", source)
            return
        if descriptors is None and not targets:
            self.error("scxml-eventless-internal", node, "an eventless transition with no "
                       "target: the native format runs eventless transitions only to move "
                       "(one without a target would loop)", source)
            return
        index = len(flat.subtree.moves)
        flat.subtree.add(Move(index, source, descriptors, guard is not None, targets,
                              node.attrs.get("type") == "internal"))
        flat.guards[index] = guard or "True"
        flat.bodies[index] = self._block(node.children, source)
        flat.nodes[index] = node

    def _flat_target(self, targets: list[str], node: _Node) -> _Flat | None:
        """Gives the flattened parallel every one of `targets` is inside, or None when none
        is (a mix is refused, located)."""
        owners = {id(self.flat_inside[t]) for t in targets if t in self.flat_inside}
        if not owners:
            return None
        if len(owners) > 1 or any(t not in self.flat_inside for t in targets):
            flat = next(self.flat_inside[t] for t in targets if t in self.flat_inside)
            raise _Unflattened(flat.name, f"the transition at line {node.line} enters it and "
                                          "other states at once")
        return self.flat_inside[targets[0]]

    def _entering(self, flat: _Flat, targets: tuple[str, ...]) -> tuple[str, list[dict[str, Any]]]:
        """Gives the native state a transition from outside entering `targets` (inside
        `flat`) goes to, and the action (last of its own) that tells the parallel state's
        entry which configuration that is."""
        try:
            config = flat.subtree.entered(targets)
        except NotFlat as exc:
            raise _Unflattened(flat.name, str(exc)) from exc
        flat.entries.append(config)
        name = self._product(flat, config)
        return name, [{"assign": {flat.pending: repr(name)}}]

    def _product(self, flat: _Flat, config: frozenset[str]) -> str:
        """Gives (making it the first time) the native state of one configuration: named by
        the parallel state and its active leaves."""
        name = flat.products.get(config)
        if name is not None:
            return name
        leaves = ".".join(flat.subtree.atomic(config))
        if len(leaves) > _PRODUCT_NAME_MAX:  # many regions: numbered instead
            leaves = f"configuration{len(flat.products) + 1}"
        name = f"{flat.name}.{leaves}"
        number = 1
        while name in self.states or name in self.node_by_name:
            number += 1
            name = f"{flat.name}.{leaves}.{number}"
        if len(flat.products) >= CONFIGURATIONS_MAX:
            raise _Unflattened(flat.name, f"its regions can be in more than "
                                          f"{CONFIGURATIONS_MAX} configurations")
        flat.products[config] = name
        self.states[name] = {"parent": flat.name}
        self.node_of[name] = _Node("state", {}, flat.node.line, _NS, path=flat.node.path)
        return name

    def _flatten_all(self) -> None:
        """Flattens every planned parallel: explores each one's configurations until none
        is left (a transition leaving one may enter another), then gives each its entry and
        exit."""
        names = {e for e in self.raised | self.flat_events
                 | {d for t in self.transitions for d in t.descriptors or ()}
                 if _NAME.match(e) and not e.startswith(_RESERVED)}
        flats = list(self.flats.values())
        while any([self._explore(flat, names) for flat in flats]):
            pass
        for flat in flats:
            self._mark_initial(self._product(flat, flat.start))
            self._dispatch(flat)

    def _explore(self, flat: _Flat, names: set[str]) -> bool:
        """Makes each configuration `flat` reaches (not made yet) a native state, and each
        way it takes an event a native transition; tells whether it made any."""
        subtree = flat.subtree
        if not flat.events_known:
            flat.events = sorted(e for e in names if any(
                m.events is not None and _matches(m.events, e) for m in subtree.moves))
            flat.start = flat.initial or subtree.default()
            flat.events_known = True
        queue = [flat.start, *flat.entries]
        made = False
        while queue:
            config = queue.pop(0)
            if config in flat.reached:
                continue
            flat.reached.append(config)
            made = True
            state = self.states[self._product(flat, config)]
            for event in (None, *flat.events):
                specs = []
                try:
                    selections = subtree.selections(config, event)
                except NotFlat as exc:
                    raise _Unflattened(flat.name, str(exc)) from exc
                for selection in selections:
                    if selection.kind is Kind.STAY and event is None:
                        raise _Unflattened(flat.name, "an eventless transition inside it "
                                                      "has no target")
                    spec = self._selection_spec(flat, selection)
                    self.flat_made += 1 + len(spec.get("actions", ()))
                    if self.flat_made > _FLAT_MADE_MAX:
                        raise _Unflattened(flat.name, f"its native transitions and their "
                                                      f"actions would pass {_FLAT_MADE_MAX}")
                    specs.append(spec)
                    if selection.kind in (Kind.MOVE, Kind.REENTER):
                        queue.append(selection.target)
                if specs and event is None:
                    state["always"] = specs
                elif specs:
                    state.setdefault("on", {})[event] = specs
        return made

    def _dispatch(self, flat: _Flat) -> None:
        """Gives the parallel state's native entry the entry actions of the configuration
        it enters (the one a transition from outside named, else its default) and its exit
        the exit actions of the one it leaves, each state's under a test of the
        configuration."""
        subtree = flat.subtree
        members = {ident: tuple(flat.products[c] for c in flat.reached if ident in c)
                   for ident in subtree.places}
        order = [s for s in subtree.ordered(subtree.places) if s != flat.name]
        conf = f"context[{flat.conf!r}]"
        entry = [*flat.entry[flat.name],
                 {"assign": {flat.conf: f"context[{flat.pending!r}] if context["
                                        f"{flat.pending!r}] is not None else "
                                        f"{flat.products[flat.start]!r}"}},
                 {"assign": {flat.pending: "None"}}]
        raised_by: dict[tuple[str, str], list[str]] = {}
        for config in flat.reached:
            for entered in subtree.entry_order(config - {flat.name}, {flat.name}):
                for done in entered.done:
                    raised_by.setdefault((entered.ident, done), []).append(
                        flat.products[config])
        every = len(flat.reached)

        def active(products: tuple[str, ...] | list[str]) -> str | None:
            if len(products) == every:
                return None
            return self._short(flat, f"{conf} in {tuple(products)!r}",
                               "the test of the configurations a state is active in")

        for ident in order:
            if not members[ident]:
                continue
            entry += self._when(self._entered_actions(flat, ident, ()), active(members[ident]))
            for (state_id, done), products in raised_by.items():
                if state_id == ident:
                    entry += self._done_raise(flat, ident, done, active(products))
        exit_: list[dict[str, Any]] = []
        for ident in reversed(order):
            if members[ident]:
                exit_ += self._when(self._left_actions(flat, ident), active(members[ident]))
        native = self.states[flat.name]
        self.warn("scxml-parallel", flat.node, f"parallel state {flat.name!r} has SCXML's "
                  f"meaning (one configuration, one datamodel, one microstep): each of the "
                  f"{every} configurations its regions reach is a native state inside it, "
                  f"named by its active leaves ({flat.products[flat.start]!r} first), and the "
                  f"context key {flat.conf!r} names the one it is in", flat.name)
        native["entry"] = [*native.get("entry", []), *entry]
        native["exit"] = [*native.get("exit", []), *exit_, *flat.exit[flat.name]]

    def _selection_spec(self, flat: _Flat, selection: Selection) -> dict[str, Any]:
        """Gives the native transition of one way a configuration takes an event."""
        subtree = flat.subtree
        bodies = [a for index in selection.moves for a in flat.bodies[index]]
        spec: dict[str, Any] = {}
        if selection.kind is Kind.LEAVE:
            leaving = subtree.moves[selection.leaving]
            node = flat.nodes[selection.leaving]
            into = self._flat_target(list(leaving.targets), node)
            if into is not None:
                target, extra = self._entering(into, leaving.targets)
            else:
                target, extra = self._target_name(self.by_id[leaving.targets[0]], node) or "", []
            spec = {"target": target, "actions": [*bodies, *extra]}
        elif selection.kind is Kind.STAY:
            spec = {"actions": bodies}
        else:
            actions: list[dict[str, Any]] = []
            for ident in selection.exits:
                actions += self._left_actions(flat, ident)
            actions += bodies
            for entered in selection.entries:
                actions += self._entered_actions(flat, entered.ident, entered.done)
            target = self._product(flat, selection.target)
            actions.append({"assign": {flat.conf: repr(target)}})
            spec = {"target": target, "actions": actions}
        if selection.conditions:
            spec["guard"] = self._short(flat, " and ".join(
                f"({flat.guards[index]})" if held else f"not ({flat.guards[index]})"
                for index, held in selection.conditions), "the conditions of one selection")
        if not spec["actions"]:
            del spec["actions"]
        return spec

    def _entered_actions(self, flat: _Flat, ident: str, done: tuple[str, ...]
                         ) -> list[dict[str, Any]]:
        actions = list(flat.entry[ident])
        if ident in self.in_states:
            actions.insert(0, {"assign": {f"_scxml_in_{ident}": "True"}})
        for parent in done:
            actions += self._done_raise(flat, ident, parent, None)
        return actions

    def _left_actions(self, flat: _Flat, ident: str) -> list[dict[str, Any]]:
        actions = list(flat.exit[ident])
        if ident in self.in_states:
            actions.append({"assign": {f"_scxml_in_{ident}": "False"}})
        return actions

    def _done_raise(self, flat: _Flat, final: str, parent: str, when: str | None
                    ) -> list[dict[str, Any]]:
        """Gives the raise of `done.state.PARENT` as `final` is entered: with the final's
        `<donedata>` when PARENT is its own parent (after the error.execution its evaluation
        raises, when it cannot be evaluated)."""
        own = flat.subtree.places[final].parent == parent
        pairs = flat.done_pairs.get(final, "[]") if own else "[]"
        actions = []
        if pairs is None:
            node = self.node_by_name[final].kids("donedata")[0]
            actions.append(self._static_error(node, "error.execution", when))
            self._stopped = False
        actions.append(self._queue_action("internal", repr(f"done.state.{parent}"), None,
                                          pairs or "[]", when))
        return actions

    def _short(self, flat: _Flat, expression: str, what: str) -> str:
        """Gives `expression`, which flattening `flat` made, if a native expression may be
        that long; otherwise `flat` stays native."""
        if len(expression) > _FLAT_EXPRESSION_MAX:
            raise _Unflattened(flat.name, f"{what} would be an expression longer than "
                                          f"{_FLAT_EXPRESSION_MAX} characters")
        return expression

    def _when(self, actions: list[dict[str, Any]], when: str | None) -> list[dict[str, Any]]:
        """Gives `actions` taking effect only when `when` holds (each assignment keeps the
        key's value otherwise); all of them when it is None."""
        if when is None:
            return actions
        out = []
        for action in actions:
            assigned = {}
            for key, value in action["assign"].items():
                self.context.setdefault(key, None)
                assigned[key] = f"({value}) if ({when}) else context[{key!r}]"
            out.append({"assign": assigned})
        return out

    # -- events ------------------------------------------------------------------------------

    def _events(self) -> set[str]:
        """Gives every event name the chart can tell: those it raises and sends, and those its
        transitions name (so that a sender outside can send them)."""
        names = self.raised | self.flat_events
        for t in self.transitions:
            for descriptor in t.descriptors or ():
                if descriptor != "*":
                    names.add(descriptor)
        usable = set()
        for event in names:
            if not _NAME.match(event) or event.startswith(_RESERVED):
                where = next((t.node for t in self.transitions if event in (t.descriptors or ())),
                             self.root)
                self.warn("scxml-event-name", where, f"event {event!r} cannot be a native "
                          "event name; no transition takes it", event)
                continue
            usable.add(event)
        return usable

    def _expand(self, events: set[str]) -> None:
        """Gives each state's `on:`: for each event name, the transitions whose descriptors
        match it (SCXML's prefix match), in document order."""
        copies: list[tuple[str, str, dict[str, Any], _Node]] = []
        # each event under every dotted prefix of its name: a descriptor `a.b` matches the
        # events `a.b` and `a.b.<anything>` (`*` every event), found at once instead of by a
        # scan of every event for every descriptor of every transition
        by_prefix: dict[str, set[str]] = {}
        for event in events:
            parts = event.split(".")
            for length in range(1, len(parts) + 1):
                by_prefix.setdefault(".".join(parts[:length]), set()).add(event)
        every = sorted(e for e in events if not e.startswith(FINALIZE))  # the driver's own
        made = 0
        for name, state in self.states.items():
            written = state.pop("_on", [])
            if not written:
                continue
            on: dict[str, list[dict[str, Any]]] = {}
            for descriptors, spec, node, internal in written:
                if "*" in descriptors:
                    matched = every
                else:
                    found: set[str] = set()
                    for descriptor in descriptors:
                        found |= by_prefix.get(descriptor, set())
                    matched = sorted(found)
                made += len(matched)
                self._bound_expansion(made, node, name)
                if self.node_of[name].tag == "parallel":
                    matched = [e for e in matched if e != f"done.state.{name}"]
                if not matched:
                    self.warn("scxml-event-never", node, f"no event the chart raises, sends or "
                              f"names matches {' '.join(descriptors)!r}", name)
                for event in matched:
                    if not internal:
                        on.setdefault(event, []).append(dict(spec))
                        continue
                    # declared on each child, its domain is `name`, which it neither leaves
                    # nor enters: SCXML's internal transition
                    if on.get(event):
                        self.warn("scxml-internal-order", node, f"type='internal': for "
                                  f"{event!r} it is tried before the transitions {name!r} "
                                  "declares above it", name)
                    copies.append((name, event, spec, node))
            if on:
                state["on"] = {event: self._errors_raised(specs) for event, specs in on.items()}
        children: dict[str, list[str]] = {}
        for name, event, spec, node in copies:
            if name not in children:
                children[name] = self._children(name)
            made += len(children[name])
            self._bound_expansion(made, node, name)
            for child in children[name]:
                if self.states[child].get("type") == "final":
                    continue
                self.states[child].setdefault("on", {}).setdefault(event, []).append(
                    dict(spec))

    def _bound_expansion(self, made: int, node: _Node, name: str) -> None:
        """Refuses, at `node`, an expansion of event descriptors past `_EXPANDED_MAX`."""
        if made > _EXPANDED_MAX:
            self.error("scxml-too-many-transitions", node, f"matching the transitions' event "
                       f"descriptors to the chart's events makes more than {_EXPANDED_MAX} "
                       "native transitions (the bound of an import); the import stops here",
                       name)
            raise DefinitionError(self.errors, self.source)

    # -- executable content ------------------------------------------------------------------

    def _blocks(self, node: _Node, tag: str, state: str) -> list[dict[str, Any]]:
        actions: list[dict[str, Any]] = []
        for block in node.kids(tag):
            actions += self._block(block.children, state)
        return actions

    def _block(self, nodes: list[_Node], state: str) -> list[dict[str, Any]]:
        """Gives one block of executable content (an `<onentry>`, a transition's body)."""
        self._stopped = False
        actions = self._actions(nodes, None, state)
        self._stopped = False
        return actions

    def _actions(self, nodes: list[_Node], when: str | None, state: str
                 ) -> list[dict[str, Any]]:
        """Gives the native actions of executable content; `when` (a native expression) is
        the condition an enclosing `<if>` branch set, under which they take effect."""
        actions: list[dict[str, Any]] = []
        for node in nodes:
            if self._stopped:
                if when is not None:
                    self.warn("scxml-error-stop", node, "after a statically known error in an "
                              "<if> branch, SCXML skips the rest of the block; the import "
                              "skips only the rest of the branch", state)
                    self._stopped = False
                break
            if node.namespace != _NS:
                self.warn("scxml-foreign", node, f"element <{node.tag}> of namespace "
                          f"{node.namespace or '(none)'} is left out", node.tag)
                continue
            tag = node.tag
            if tag == "log":
                continue  # a log changes nothing the run can see
            if tag == "assign":
                actions += self._assign(node, when)
            elif tag == "raise":
                event = node.attrs.get("event")
                if not event:
                    self.error("scxml-raise", node, "<raise> needs an event", state)
                    continue
                self.raised.add(event)
                self._outbox_warning(node)
                actions.append(self._queue_action("internal", repr(event), None, None, when))
            elif tag == "send":
                actions += self._send(node, when, state)
            elif tag == "cancel":
                actions += self._cancel(node, when)
            elif tag == "if":
                actions += self._if(node, when, state)
            elif tag == "script":
                actions += self._script_actions(node, when)
            elif tag == "invoke":
                continue  # refused where it stands (`_refuse_everywhere`)
            elif tag == "foreach":
                actions += self._foreach(node, when, state)
            else:
                self.error("scxml-element", node, f"<{tag}> is not executable content", tag)
        return actions

    def _foreach(self, node: _Node, when: str | None, state: str) -> list[dict[str, Any]]:
        """Gives a `<foreach>` over an array known at import (a literal, or a data item no
        content ever changes), unrolled: item and index set, then the body, per item."""
        item = node.attrs.get("item", "").strip()
        index = node.attrs.get("index", "").strip()
        text = node.attrs.get("array", "")
        if not _NAME.match(item) or item.startswith("_") or (
                index and (not _NAME.match(index) or index.startswith("_"))):
            return [self._static_error(node, "error.execution", when)]
        array = self._expression(text, node, "array", runtime=True)
        if self._syntax_error:
            return [self._static_error(node, "error.execution", when)]
        if array is None:
            return []
        constant = re.fullmatch(r"context\['([A-Za-z_][A-Za-z0-9_.\-]*)'\]", array)
        if constant is not None and constant.group(1) not in self.assigned:
            value = self.context.get(constant.group(1))
        elif "context" not in array and "event" not in array:
            try:
                value = compile_expression(array)({}, None)
            except Exception:  # an array that fails whenever it runs: SCXML's error
                return [self._static_error(node, "error.execution", when)]
        else:
            self.error("scxml-foreach", node, f"<foreach> over {text!r}: native actions have no "
                       "loops, so an array is unrolled only when it is known at import (a "
                       "literal, or a data item no content changes)", state)
            return []
        if not isinstance(value, list):
            return [self._static_error(node, "error.execution", when)]
        if len(value) > _UNROLL_MAX:
            self.error("scxml-foreach", node, f"<foreach> over {len(value)} items: unrolled "
                       f"at most {_UNROLL_MAX}", state)
            return []
        actions: list[dict[str, Any]] = []
        for position in range(len(value)):
            step = {item: f"({array})[{position}]"}
            if index:
                step[index] = str(position)
            actions.append({"assign": {key: (f"({v}) if ({when}) else context[{key!r}]"
                                             if when else v) for key, v in step.items()}})
            actions += self._actions(node.children, when, state)
            if self._stopped:
                break
        return actions

    def _guarded(self, key: str, value: str, when: str | None) -> dict[str, Any]:
        if when is None:
            return {"assign": {key: value}}
        return {"assign": {key: f"({value}) if ({when}) else context[{key!r}]"}}

    def _outbox_warning(self, node: _Node) -> None:
        what = {"raise": "the event is appended", "send": "the event is appended",
                "cancel": "the cancel is appended"}[node.tag]
        self.warn("scxml-outbox", node, f"<{node.tag}>: the native machine has no event queue, "
                  f"so {what} to the context key {OUTBOX!r}; a driver must deliver it (as "
                  "reference_machine.importers.w3c.run_definition does) and empty the key",
                  node.tag)

    def _static_error(self, node: _Node, event: str, when: str | None, send_id: str = ""
                      ) -> dict[str, Any]:
        """Gives the raise of an error SCXML's interpreter would raise when it runs `node`
        (known at import: an undeclared location, an expression that is not Python), and
        stops the rest of the block as SCXML does."""
        self.raised.add(event)
        self._stopped = event == "error.execution"
        self.warn("scxml-static-error", node, f"<{node.tag}> fails whenever it runs; like "
                  f"SCXML, the import raises {event} there"
                  + (" and skips the rest of the block" if self._stopped else ""), event)
        return self._queue_action("platform", repr(event), None, None, when, send_id)

    def _declared(self, location: str) -> bool:
        return location in self.declared

    def _assign(self, node: _Node, when: str | None) -> list[dict[str, Any]]:
        location = node.attrs.get("location", "").strip()
        root_name = re.split(r"[.\[]", location, maxsplit=1)[0]
        if not self._declared(root_name):
            return [self._static_error(node, "error.execution", when)]
        if not _NAME.match(location) or location.startswith("_") or "." in location:
            self.error("scxml-assign", node, f"assign to {location!r}: the native format sets "
                       "whole context keys (a data id), not parts of them", location)
            return []
        text = node.attrs.get("expr")
        if text is None and self._chart_assigned(node):
            self.warn("scxml-assign-chart", node, f"{location!r} is set to a handle of the "
                      "<scxml> chart the <assign> holds, which an <invoke><content expr> "
                      f"starts; nothing else reads {location!r}", location)
            return [self._guarded(location, repr(self._chart_handle(node)), when)]
        if text is None:
            text = node.text.strip()
            if node.children or not text:
                self.error("scxml-assign", node, "an <assign> needs expr= or a text value "
                           "(or holds an <scxml> chart that only an <invoke><content expr> "
                           "reads)", location)
                return []
        value = self._expression(text, node, "expr", runtime=True)
        if self._syntax_error:
            return [self._static_error(node, "error.execution", when)]
        if value is None:
            return []
        return [self._guarded(location, value, when)]

    def _queue_action(self, queue: str, event: str, delay: str | None, pairs: str | None,
                      when: str | None, send_id: str = "", target: str | None = None
                      ) -> dict[str, Any]:
        """Gives the action that appends `[queue, event, delay, pairs, send id]` (and, for
        queue `target`, the target the driver resolves) to the outbox."""
        self.uses_outbox = True
        entry = f"[{queue!r}, {event}, {delay or 0}, {pairs or '[]'}, {send_id!r}" + (
            f", {target}]" if target is not None else "]")
        if when is None:
            return {"assign": {OUTBOX: f"context[{OUTBOX!r}] + [{entry}]"}}
        return {"assign": {OUTBOX: f"context[{OUTBOX!r}] + ([{entry}] if ({when}) else [])"}}

    def _pairs(self, node: _Node, when: str | None, state: str, *, with_content: bool = True
               ) -> list[str] | None:
        """Gives the `[name, value]` expressions of an event's data (`namelist`, `<param>`,
        `<content>`), or None when evaluating them fails whenever it runs (SCXML then raises
        error.execution). An error of the import itself is recorded and gives []."""
        pairs: list[str] = []
        for key in node.attrs.get("namelist", "").split():
            if not self._declared(key):
                return None
            pairs.append(f"[{key!r}, context[{key!r}]]")
        for param in node.kids("param"):
            param_name = param.attrs.get("name")
            if not param_name:
                self.error("scxml-param", param, "<param> needs a name", state)
                return []
            if "expr" in param.attrs:
                value = self._expression(param.attrs["expr"], param, "expr", runtime=True)
            elif "location" in param.attrs:
                location = param.attrs["location"].strip()
                if not self._declared(location):
                    return None
                value = self._expression(location, param, "location", runtime=True)
            else:
                self.error("scxml-param", param, "<param> needs expr or location", param_name)
                return []
            if self._syntax_error:
                return None
            if value is None:
                return []
            pairs.append(f"[{param_name!r}, {value}]")
        for content in node.kids("content") if with_content else ():
            if content.children:
                self.error("scxml-content", content, "<content> with markup is refused: a "
                           "native event's data holds values, not XML", state)
                return []
            text = content.attrs.get("expr")
            if text is None:
                literal = content.text.strip()
                value = self._expression(literal, content, "value") if self._is_literal(
                    literal) else repr(literal)  # text content is data, not an expression
            else:
                value = self._expression(text, content, "expr", runtime=True)
                if self._syntax_error:
                    return None
                if value is None:
                    return []
            pairs.append(f"[{_DATA!r}, {value}]")
        return pairs

    def _send(self, node: _Node, when: str | None, state: str) -> list[dict[str, Any]]:
        attrs = node.attrs
        kind = attrs.get("type", _SCXML_PROCESSOR[0])
        type_expression = None
        if "typeexpr" in attrs:
            type_expression = self._expression(attrs["typeexpr"], node, "typeexpr")
            if type_expression is None:
                return []
            self.warn("scxml-send-typeexpr", node, "typeexpr: the type is known only when it "
                      "is sent; the driver raises error.execution for any but the SCXML event "
                      "processor", state)
        elif kind not in _SCXML_PROCESSOR and kind in _KNOWN_PROCESSORS:
            self.error("scxml-send-type", node, f"<send> of type {kind!r}: only the SCXML "
                       "event processor, to this session, is imported", kind)
            return []
        elif kind not in _SCXML_PROCESSOR:
            # a type no processor has: SCXML raises error.execution where the send runs
            return [self._static_error(node, "error.execution", when)]
        target = attrs.get("target")
        target_expression: str | None = None
        if "targetexpr" in attrs:
            target_expression = self._expression(attrs["targetexpr"], node, "targetexpr")
            if target_expression is None:
                return []
            self.warn("scxml-send-targetexpr", node, "targetexpr: the target is known only "
                      "when it is sent; the driver delivers it when it names this session or "
                      "#_internal, and raises error.communication otherwise", state)
        elif (target == "#_parent" and self.invoked) or (
                target is not None and target[2:] in self.invoke_ids
                and target.startswith("#_")):
            pass  # to the invoking session, or to a child this chart invokes: the driver's
        elif target in ("#_parent",) or (
                target is not None and target.startswith("#_") and target != "#_internal"
                and not target.startswith("#_scxml_")):
            self.error("scxml-send-target", node, f"<send> to "
                       f"{target or attrs.get('targetexpr')!r}: only sends to this session, "
                       "to the session that invoked this chart (#_parent of an inline "
                       "invoked chart) and to a child it invokes by id are imported",
                       target or "targetexpr")
            return []
        send_id = attrs.get("id", "")
        assigns: dict[str, str] = {}
        if "idlocation" in attrs:
            location = attrs["idlocation"].strip()
            if not self._declared(location):
                return [self._static_error(node, "error.execution", when)]
            send_id = f"send@{node.line}"
            self.warn("scxml-send-idlocation", node, f"idlocation: every run of this send gets "
                      f"the id {send_id!r}, not a fresh one", location)
            assigns[location] = (f"{send_id!r} if ({when}) else context[{location!r}]" if when
                                 else repr(send_id))

        def fail(event: str) -> list[dict[str, Any]]:
            raised = self._static_error(node, event, when, send_id)
            return [{"assign": {**assigns, **raised["assign"]}}]

        if target is not None and target.startswith("#_scxml_"):
            # a session id the chart writes as text cannot be this run's, which is made fresh
            return fail("error.communication")
        session = target == "#_parent" or (target is not None and target[2:] in
                                             self.invoke_ids and target_expression is None)
        if target is not None and target != "#_internal" and not session:
            return fail("error.execution")
        queue = "internal" if target == "#_internal" else "external"
        if session and target is not None:
            # another session's: the driver delivers it there (`parent`, or `child` naming
            # the invoke id in the entry's target)
            queue = "parent" if target == "#_parent" else "child"
            target_expression = None if queue == "parent" else repr(target[2:])
        if queue not in ("parent", "child") and (target_expression is not None
                                                 or type_expression is not None):
            queue = "target"
            target_expression = target_expression or repr(target)
            if type_expression is not None:
                target_expression = f"[{target_expression}, {type_expression}]"
        if "event" in attrs:
            event = repr(attrs["event"])
            if queue not in ("parent", "child"):
                self.raised.add(attrs["event"])
        elif "eventexpr" in attrs:
            expression = self._expression(attrs["eventexpr"], node, "eventexpr", runtime=True)
            if self._syntax_error:
                return fail("error.execution")
            if expression is None:
                return []
            event = f"({expression})"
            self.warn("scxml-send-eventexpr", node, "eventexpr: the event's name is known only "
                      "when it is sent; a name no transition names is dropped", state)
        else:
            self.error("scxml-send-event", node, "<send> without event or eventexpr is not "
                       "imported", state)
            return []
        delay: str | None = None
        if "delay" in attrs:
            ms = parse_delay_ms(attrs["delay"])
            if ms is None:
                return fail("error.execution")
            delay = str(ms)
        elif "delayexpr" in attrs:
            delay = self._expression(attrs["delayexpr"], node, "delayexpr", runtime=True)
            if self._syntax_error:
                return fail("error.execution")
            if delay is None:
                return []
            delay = f"({delay})"
        if delay is not None and queue == "internal":
            return fail("error.execution")
        pairs = self._pairs(node, when, state)
        if pairs is None:
            return fail("error.execution")
        self._outbox_warning(node)
        queued = self._queue_action(queue, event, delay, "[" + ", ".join(pairs) + "]", when,
                                    send_id, target_expression)
        return [{"assign": {**assigns, **queued["assign"]}}]

    def _cancel(self, node: _Node, when: str | None) -> list[dict[str, Any]]:
        if "sendid" in node.attrs:
            sendid = repr(node.attrs["sendid"])
        elif "sendidexpr" in node.attrs:
            expression = self._expression(node.attrs["sendidexpr"], node, "sendidexpr")
            if expression is None:
                return []
            sendid = f"({expression})"
        else:
            self.error("scxml-cancel", node, "<cancel> needs sendid or sendidexpr", "cancel")
            return []
        self.uses_outbox = True
        self._outbox_warning(node)
        entry = f"['cancel', {sendid}, 0, [], '']"
        value = f"context[{OUTBOX!r}] + [{entry}]" if when is None else (
            f"context[{OUTBOX!r}] + ([{entry}] if ({when}) else [])")
        return [{"assign": {OUTBOX: value}}]

    def _if(self, node: _Node, when: str | None, state: str) -> list[dict[str, Any]]:
        """Gives an `<if>`: the branch taken is chosen once (a context key holds its index),
        then each branch's actions take effect only under it."""
        branches: list[tuple[str | None, list[_Node]]] = []
        condition = node.attrs.get("cond")
        if condition is None:
            self.error("scxml-if", node, "<if> needs cond", state)
            return []
        current: list[_Node] = []
        branches.append((condition, current))
        for child in node.children:
            if child.namespace == _NS and child.tag == "elseif":
                current = []
                branches.append((child.attrs.get("cond", "False"), current))
            elif child.namespace == _NS and child.tag == "else":
                current = []
                branches.append((None, current))
            else:
                current.append(child)
        self.temp += 1
        key = f"_scxml_if{self.temp}"
        choice = str(len(branches))
        for index in range(len(branches) - 1, -1, -1):
            text, _ = branches[index]
            if text is None:
                choice = str(index)
                continue
            translated = self._expression(text, node, "cond")
            if translated is None:
                return []
            choice = f"{index} if ({translated}) else ({choice})"
        if when is not None:
            choice = f"({choice}) if ({when}) else -1"
        actions: list[dict[str, Any]] = [{"assign": {key: choice}}]
        for index, (_, body) in enumerate(branches):
            actions += self._actions(body, f"context[{key!r}] == {index}", state)
        return actions

    # -- data and expressions ----------------------------------------------------------------

    def _script(self, node: _Node) -> list[tuple[str, str]] | None:
        """Gives a `<script>`'s assignments, (name, expression text) in order, or None after
        an error located at it: a script is imported when it is a list of assignments to
        names (`x = 1` in Python; `var x = 1;` or `x = 1` in ECMAScript), each one an
        expression the native language can say."""
        if "src" in node.attrs:
            self.error("scxml-script", node, "<script src=> is refused: importing reads no "
                       "other file or address", "script")
            return None
        text = node.text.strip()
        assignments: list[tuple[str, str]] = []
        try:
            if self.datamodel == "ecmascript":
                for statement in _js_statements(text):
                    match = _JS_ASSIGNMENT.fullmatch(statement)
                    if match is None:
                        raise ValueError(statement)
                    assignments.append((match.group(1), match.group(2)))
            else:
                for line in ast.parse(text, mode="exec").body:
                    if not (isinstance(line, ast.Assign) and len(line.targets) == 1
                            and isinstance(line.targets[0], ast.Name)):
                        raise ValueError(ast.unparse(line))
                    assignments.append((line.targets[0].id, ast.unparse(line.value)))
        except (ValueError, SyntaxError) as exc:
            shown = str(exc) if isinstance(exc, ValueError) else f"not {self.language}"
            self.error("scxml-script", node, f"<script> is imported only as a list of "
                       f"assignments to names (the native format runs safe expressions, not "
                       f"code): {shown[:80]!r} is not one", "script")
            return None
        for name, _ in assignments:
            if not _NAME.match(name) or name.startswith("_"):
                self.error("scxml-script", node, f"<script> assigns {name!r}, which cannot be "
                           "a context key", name)
                return None
        return assignments

    def _script_actions(self, node: _Node, when: str | None) -> list[dict[str, Any]]:
        """Gives a `<script>` in executable content: its assignments, in order."""
        actions: list[dict[str, Any]] = []
        for name, text in self.scripts.get(id(node), []):
            value = self._expression(text, node, "script", runtime=True)
            if self._syntax_error:
                return [*actions, self._static_error(node, "error.execution", when)]
            if value is None:
                return actions
            actions.append(self._guarded(name, value, when))
        return actions

    def _data(self, node: _Node) -> None:
        ident = node.attrs.get("id", "")
        if not _NAME.match(ident) or ident.startswith("_"):
            self.error("scxml-data", node, f"data id {ident!r} cannot be a context key", ident)
            return
        if "src" in node.attrs:
            self._data_src(node, ident)
            return
        text = node.attrs.get("expr")
        if text is None and node.text.strip():
            text = node.text.strip()
        if text is None:
            self.context[ident] = None
            return
        self._bind(ident, text, node, "expr" if "expr" in node.attrs else "value")

    def _data_src(self, node: _Node, ident: str) -> None:
        """Binds a data item to the content of the file its `src=` names, read as the
        content of a `<data>` element is (an expression of the datamodel's language; an empty
        file leaves it None)."""
        src = node.attrs["src"]
        if "expr" in node.attrs or node.text.strip() or node.children:
            self.error("scxml-data-src", node, f"data {ident!r} has src= and a value besides; "
                       "SCXML allows one", ident)
            return
        try:
            text, names = self.files.read(src, self.here)
        except _SrcRefused as exc:
            self.error("scxml-data-src", node, f"<data src={src!r}> is refused: {exc}", ident)
            return
        if not text.strip():
            self.context[ident] = None
            return
        self._bind(ident, text.strip(), node, f"the content of {'/'.join(names)}")

    def _bind(self, ident: str, text: str, node: _Node, attribute: str) -> None:
        """Binds data item `ident` to the value of `text` as the document loads: at import
        when it reads nothing the run knows, else as the run starts."""
        translated = self._expression(text, node, attribute, runtime=True)
        if self._syntax_error:
            # SCXML raises error.execution as it binds the data, before the run starts
            self.warn("scxml-static-error", node, f"data {ident!r} = {text!r} is not "
                      f"{self.language}; "
                      "like SCXML, the import leaves it unset (None) and raises "
                      "error.execution as the run starts", ident)
            self.context[ident] = None
            self.startup.append(["platform", "error.execution", 0, [], ""])
            self.raised.add("error.execution")
            self.uses_outbox = True
            return
        if translated is None:
            return
        if self.last_system or (self.deferred and "context" in translated):
            # it reads a system variable (or data bound so): bound as the run starts
            self.context[ident] = None
            self.deferred.append((ident, translated))
            return
        try:
            value = compile_expression(translated)(dict(self.context), None)
        except Exception as exc:  # an expression of the user's: its failure is reported
            self.warn("scxml-data-failed", node, f"data {ident!r} = {text!r} fails when the run "
                      f"starts ({type(exc).__name__}: {exc}); SCXML raises error.execution, "
                      "the import leaves it unset (None)", ident)
            value = None
        self.context[ident] = value

    def _expression(self, text: str, node: _Node, attribute: str, *, runtime: bool = False,
                    quiet: bool = False) -> str | None:
        """Gives the native expression for an SCXML (python or ecmascript datamodel) one, or
        None after an error located at `node`. With `runtime`, text that is not an expression
        of the datamodel's language sets `_syntax_error` instead (executable content: SCXML
        raises error.execution where it runs)."""
        rewrite = _Rewrite(self.chart_name)
        self._syntax_error = False
        self.last_system = False
        try:
            tree = self._parse_expression(text)
            if self.datamodel == "ecmascript" and attribute == "cond":
                tree = _js_test(tree)
            translated = ast.unparse(rewrite.visit(tree))
            compile_expression(translated)
        except SyntaxError as exc:
            if runtime:
                self._syntax_error = True
                return None
            if not quiet:
                self.error("scxml-expression", node, f"{attribute}={text!r} is not an "
                           f"{self.language} expression: {exc.msg}" if self.language[0] == "E"
                           else f"{attribute}={text!r} is not a Python expression: {exc.msg}",
                           attribute)
            return None
        except _Inexpressible as exc:
            self.error("scxml-expression", node, f"{attribute}={text!r} cannot be said in the "
                       f"native expression language: {exc}", attribute)
            return None
        except ExpressionSyntaxError as exc:
            self.error("scxml-expression", node, f"{attribute}={text!r} cannot be said in the "
                       f"native expression language: {exc}", attribute)
            return None
        except RecursionError:
            self.error("scxml-expression", node, f"{attribute}= is nested too deeply",
                       attribute)
            return None
        for state in rewrite.in_states:
            self.in_states.setdefault(state, node)
        if rewrite.whole_event:
            self.warn("scxml-event-whole", node, "_event as a whole is its fields (name, "
                      "type, sendid, origin, origintype, invokeid) without its data, None "
                      "before the first event", attribute)
        self.last_system = bool(rewrite.system)
        if rewrite.system:
            for name in sorted(rewrite.system):
                self.system_used.setdefault(name, node)
        return translated

    def _parse_expression(self, text: str) -> ast.expr:
        """Gives the Python expression tree of an expression of the chart's datamodel (an
        ECMAScript one translated); raises SyntaxError for text that is none."""
        if self.datamodel == "ecmascript":
            return _Script(text.strip()).parse()
        return ast.parse(text.strip(), mode="eval").body

    def _is_literal(self, text: str) -> bool:
        """Tells whether `text` is a literal (a number, a quoted string, a list of them)."""
        try:
            tree = self._parse_expression(text)
        except (SyntaxError, _Inexpressible, RecursionError):
            return False
        allowed = (ast.Constant, ast.List, ast.Tuple, ast.UnaryOp, ast.USub, ast.Load)
        return all(isinstance(node, allowed) for node in ast.walk(tree))


def _in_file(finding: Finding, shown: str, where: str, line: int) -> Finding:
    """Gives a finding about a file `src=` names located at the attribute naming it (`where`,
    at `line` of the chart), the file and its own place in the message."""
    place = ", ".join(p for p in (f"line {finding.line}" if finding.line else "",
                                  finding.location) if p)
    return Finding(finding.severity, finding.code, where,
                   f"in {shown}{f' ({place})' if place else ''}: {finding.message}",
                   finding.ids, line)


#: What `_Converter._src_chart` gives for a file it refused (an error was recorded).
_REFUSED: Any = object()
#: The most native transitions and actions flattening the parallel states of one chart may
#: make (each selection's transition and its actions); past it a parallel stays native.
_FLAT_MADE_MAX = 20_000
#: The longest expression flattening may write (a native expression is at most 1,000
#: characters, and the user's own expressions sit inside it).
_FLAT_EXPRESSION_MAX = 900
#: The longest name of a configuration's native state before it is numbered instead.
_PRODUCT_NAME_MAX = 60
#: The most native transitions the matching of event descriptors to events may make in all
#: (each transition once for each event it matches): beyond it the import is refused, as a
#: chart whose `on:` grows that large is not one a run can be checked against
_EXPANDED_MAX = 20_000


# -- entry point -------------------------------------------------------------------------------


def convert(data: str, lines: Mapping[str, int], name: str, *,
            directory: str | os.PathLike[str] | None = None) -> Imported:
    """Gives the native definition data of an SCXML document, with a warning for each feature
    approximated; raises `DefinitionError` (located) for what cannot be imported.

    `directory` is the one the document's file is in: a `src=` may name a file in it or
    below it (see `_Files`). Without it (a document given as text), every `src=` is
    refused."""
    del lines  # SCXML is located by its own parse
    root = _parse(data, name)
    files = _Files(directory)
    memo: dict[tuple[Any, ...], Any] = {}
    try:
        converter, native = _converted(
            lambda kept: _Converter(root, name, files=files, native_parallels=kept, memo=memo))
        native, checked = _native_checks(native, converter, name)
    except RecursionError as exc:  # each file src= names nests within the last
        raise DefinitionError([Finding(
            Severity.ERROR, "scxml-nesting", "scxml",
            "the charts this one invokes, inline and by src=, nest too deeply to import "
            f"(each file at most {NESTING_MAX} levels, at most {SRC_FILES_MAX} files)")],
            name) from exc
    return Imported(format="scxml", data=native, findings=(*converter.warnings, *checked),
                    source=name)


def _converted(make: Callable[[frozenset[str]], _Converter]
               ) -> tuple[_Converter, dict[str, Any]]:
    """Runs the converter `make` gives, which flattens each `<parallel>` to give it SCXML's
    meaning; one it cannot flatten (`_Unflattened`) is kept native, said so, and the chart
    converted again."""
    kept: dict[str, str] = {}
    while True:
        converter = make(frozenset(kept))
        try:
            native = converter.run()
        except _Unflattened as exc:
            if exc.parallel in kept:  # a parallel kept native is never flattened again
                raise ReferenceMachineError(f"parallel {exc.parallel!r} refused twice") from exc
            kept[exc.parallel] = exc.reason
            continue
        for parallel, reason in kept.items():
            converter.warn("scxml-parallel-native", converter.node_by_name.get(
                parallel, converter.root), f"parallel state {parallel!r} keeps the native "
                f"meaning, its regions run as separate executions joined by done: ({reason}); "
                "SCXML's regions share one configuration and one datamodel", parallel)
        return converter, native


def _native_checks(native: dict[str, Any], converter: _Converter, name: str
                   ) -> tuple[dict[str, Any], list[Finding]]:
    """Runs the native load-time checks on what was made: states no transition reaches are
    left out (with a warning: they cannot change a run), a chart that need not end is
    `reactive`, and any other native error is raised, located in the SCXML document."""
    notes: list[Finding] = []
    for _ in range(len(native["states"]) + 2):
        try:
            spec = validate(native, {}, name)
        except DefinitionError as exc:
            raise DefinitionError([_relocated(f, converter) for f in exc.findings],
                                  name) from exc
        findings = check_spec(spec)
        errors = [f for f in findings if f.severity is Severity.ERROR]
        unreachable = [f.ids[0] for f in errors if f.code == "unreachable-state" and f.ids]
        if unreachable:
            for state in unreachable:
                node = converter.node_of.get(state)
                removed = native["states"].pop(state, None) or {}
                siblings = [n for n, st in native["states"].items()
                            if st.get("parent") == removed.get("parent")]
                if removed.get("initial") and removed.get("parent") and siblings:
                    # its parent is entered only through states inside it: which child is
                    # initial changes nothing, but the native format wants one
                    native["states"][siblings[0]]["initial"] = True
                if node is not None:
                    notes.append(Finding(Severity.WARNING, "scxml-unreachable", node.path,
                                         f"state {state!r} cannot be reached: left out",
                                         (state,), node.line))
            continue
        if any(f.code in ("no-final", "no-way-to-final") for f in errors) and not native.get(
                "reactive"):
            native["reactive"] = True
            notes.append(Finding(Severity.WARNING, "scxml-reactive", "scxml",
                                 "some state can reach no top-level final state: the chart is "
                                 "imported as `reactive: true` (an SCXML chart need not end)",
                                 (), converter.root.line))
            continue
        if errors:
            raise DefinitionError([_relocated(f, converter) for f in errors], name)
        return native, notes
    raise DefinitionError([Finding(Severity.ERROR, "scxml-native", "scxml",
                                   "the native checks did not settle", (), None)], name)


def _relocated(finding: Finding, converter: _Converter) -> Finding:
    """Gives a native finding located in the SCXML document (the state it names)."""
    parts = finding.location.split(".")
    node = converter.node_of.get(parts[1]) if len(parts) > 1 and parts[0] == "states" else None
    location = node.path if node is not None else "scxml"
    line = node.line if node is not None else converter.root.line
    return Finding(finding.severity, finding.code, location,
                   f"native check ({finding.location}): {finding.message}", finding.ids, line)
