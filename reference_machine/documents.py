"""Reading the documents fsmharness is given: YAML (safe loader) and JSON, bounded, with the line
of every key; and validating a definition's data into a `WorkflowSpec`.

YAML is read with a `SafeLoader` subclass that keeps YAML 1.2 booleans (so a state's `on:` key
stays the string "on", not True), refuses duplicate keys, and remembers the line of every key so
that each finding can say where it is.

Every file fsmharness reads (definitions, fault plans, replay files, reports, bench documents)
goes through `read_document`, which bounds what a hostile file may cost before and while it is
parsed: its size, its nesting, the digits of a number; a file over a bound is refused with the
bound, never a RecursionError or a MemoryError.
"""

from __future__ import annotations

import json
import os
import re
import select
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from reference_machine._spec import WorkflowSpec, spec_keywords
from reference_machine.errors import DefinitionError, DefinitionSyntaxError
from reference_machine.findings import Finding, Severity, did_you_mean

_BOOL_TAG = "tag:yaml.org,2002:bool"
_INT_TAG = "tag:yaml.org,2002:int"
_EXPANDED_NODES_MAX = 100_000  # far past any real workflow; bounds alias expansion
#: The largest definition or fault plan file read: seventy times the largest bundled scenario,
#: and at most a few seconds of parsing YAML.
DEFINITION_BYTES_MAX = 500_000
#: The deepest nesting of lists and mappings in any file read (real files nest about ten deep);
#: deeper input would exhaust the stack of the parsers and checks that follow.
NESTING_MAX = 100
#: The most digits of an integer in any file read (Python refuses to read 4,300 and more).
DIGITS_MAX = 1_000


class _YamlLoader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 booleans only (`true`/`false`): `on`, `yes`, `no` stay strings;
    nesting past `NESTING_MAX` and integers past `DIGITS_MAX` digits are refused with their line,
    and a scalar that cannot be built (a date of month 13) is a syntax error, not a crash."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > NESTING_MAX:
                raise yaml.composer.ComposerError(
                    None, None, f"nested more than {NESTING_MAX} levels deep",
                    self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        if node.tag == _INT_TAG and len(str(node.value)) > DIGITS_MAX:
            raise yaml.constructor.ConstructorError(
                None, None, f"an integer of {len(str(node.value)):,} digits; at most "
                f"{DIGITS_MAX:,} digits are read", node.start_mark)
        try:
            return super().construct_object(node, deep)
        except (ValueError, OverflowError, TypeError) as exc:
            raise yaml.constructor.ConstructorError(
                None, None, f"cannot read the value {_short(node.value)}: {exc}",
                node.start_mark) from exc


_YamlLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != _BOOL_TAG]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_YamlLoader.add_implicit_resolver(
    _BOOL_TAG, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)



def read_document(path: str | os.PathLike[str], *, what: str, bytes_max: int,
                  yaml_ok: bool = True) -> tuple[Any, dict[str, int]]:
    """Gives the value in a JSON file (or a YAML one, by its suffix, when `yaml_ok`) and, for
    YAML, the line of each key path.

    `what` names the document in messages ("a report"). Raises `OSError` when the file cannot
    be opened or read (each caller words that its own way), and `DefinitionSyntaxError` naming
    the file, the line where known and the bound when it is larger than `bytes_max`, not UTF-8,
    not JSON/YAML, nested past `NESTING_MAX` or holds an integer past `DIGITS_MAX` digits.
    """
    path = Path(path)
    name = str(path)
    kind = path.stat().st_mode
    if stat.S_ISFIFO(kind) or stat.S_ISCHR(kind):  # a pipe (`<(...)`, /dev/stdin) or device
        raw = _read_stream(path, what, bytes_max)
    elif not stat.S_ISREG(kind) and not stat.S_ISDIR(kind):  # a folder: open() says so
        raise unreadable(name, f"a socket or block device: {what} is read from a file or a "
                                "pipe")
    else:
        with path.open("rb") as stream:  # read one byte past the bound
            raw = stream.read(bytes_max + 1)
    if len(raw) > bytes_max:
        try:
            size = max(path.stat().st_size, len(raw))
        except OSError:
            size = len(raw)
        raise _too_large(name, size, bytes_max, what)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise unreadable(name, f"not UTF-8 text: byte 0x{raw[exc.start]:02x} at offset "
                          f"{exc.start} cannot be read", line) from exc
    is_json = not yaml_ok or path.suffix == ".json"
    return parse_text(text, name, is_json, what, bytes_max)


#: How long a pipe may keep the reader waiting for its next bytes (seconds): a named FIFO
#: nothing writes to would block forever.
PIPE_WAIT_S = 10.0


def _read_stream(path: Path, what: str, bytes_max: int) -> bytes:
    """Reads a pipe or a device to its end, one byte past `bytes_max` at most (/dev/zero never
    ends), waiting at most `PIPE_WAIT_S` for each part; raises `DefinitionSyntaxError` when
    nothing comes for that long."""
    number = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO with no writer: no wait
    chunks: list[bytes] = []
    held = 0
    try:
        waiting = select.poll()
        waiting.register(number, select.POLLIN | select.POLLHUP)
        while held <= bytes_max:
            if not waiting.poll(PIPE_WAIT_S * 1000):
                raise unreadable(str(path), f"nothing came through it for {PIPE_WAIT_S:g} s: "
                                             f"{what} given as a pipe needs a writer")
            try:
                chunk = os.read(number, min(65_536, bytes_max + 1 - held))
            except BlockingIOError:
                continue
            if not chunk:
                break
            chunks.append(chunk)
            held += len(chunk)
    finally:
        os.close(number)
    return b"".join(chunks)


def document_problem(error: DefinitionError, syntax: str) -> str:
    """Gives what `read_document` found wrong in one line (`line 3: ...`), with `syntax` ("not
    JSON") in place of "JSON syntax" when the text is not JSON."""
    if not error.findings:
        return str(error)
    finding = error.findings[0]
    message = finding.message
    for kind in ("JSON syntax: ", "YAML syntax: "):
        if message.startswith(kind):
            message = f"{syntax}: {message.removeprefix(kind)}"
    return f"line {finding.line}: {message}" if finding.line is not None else message


def parse_text(text: str, name: str, is_json: bool, what: str, bytes_max: int
           ) -> tuple[Any, dict[str, int]]:
    if len(text) > bytes_max // 4:  # a character is at most four bytes: only then count them
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > bytes_max:
            raise _too_large(name, size, bytes_max, what)
    return _parse_json(text, name) if is_json else _parse_yaml(text, name)


def _too_large(name: str, size: int, bytes_max: int, what: str) -> DefinitionSyntaxError:
    return unreadable(name, f"{_size(size)} is over the {_size(bytes_max)} {what} may be")


def _size(size: int) -> str:
    if size < 1_000_000:
        return f"{size / 1000:,.0f} kB"
    return f"{size / 1_000_000:,.1f} MB".replace(".0 MB", " MB")


def unreadable(name: str, message: str, line: int | None = None,
                location: str = "") -> DefinitionSyntaxError:
    return DefinitionSyntaxError(
        [Finding(Severity.ERROR, "unreadable", location, message, (), line)], name)


def _parse_yaml(text: str, name: str) -> tuple[Any, dict[str, int]]:
    if len(text) > DEFINITION_BYTES_MAX and len(text.encode("utf-8", "surrogatepass")) > (
            DEFINITION_BYTES_MAX):  # what no YAML file may be, whoever reads it
        raise _too_large(name, len(text.encode("utf-8", "surrogatepass")),
                         DEFINITION_BYTES_MAX, "a YAML file")
    loader: _YamlLoader | None = None
    try:
        loader = _YamlLoader(text)  # the reader refuses a NUL or control character here
        node = loader.get_single_node()
        if node is None:
            raise unreadable(name, "the file is empty; expected a workflow definition mapping")
        lines: dict[str, int] = {}
        _walk(node, "", lines, name, set(), set(), [0, 0], 0)
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = " ".join(p for p in (exc.context, exc.problem) if p)
        raise unreadable(name, f"YAML syntax: {problem}", line) from exc
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        raise unreadable(name, f"YAML syntax: character #x{exc.character:04x} is not "
                                f"allowed: {exc.reason}", line) from exc
    except yaml.YAMLError as exc:
        raise unreadable(name, "YAML syntax: " + " ".join(str(exc).split())) from exc
    except RecursionError as exc:  # past the nesting bound, only alias chains can get here
        raise unreadable(name, f"nested more than {NESTING_MAX} levels deep") from exc
    finally:
        if loader is not None:
            loader.dispose()
    return data, lines


def _walk(node: yaml.Node, path: str, lines: dict[str, int], name: str,
          open_nodes: set[int], walked: set[int], visited: list[int], depth: int) -> None:
    """Records the line of every key path, refusing duplicate keys, recursive aliases, and
    documents past `_EXPANDED_NODES_MAX` nodes or `NESTING_MAX` levels, whether written out
    or reached through aliases (a "billion laughs"). `visited` counts the nodes walked and the
    walks of a container already walked (through an alias)."""
    visited[0] += 1
    if visited[0] > _EXPANDED_NODES_MAX:
        message = (f"the document expands to more than {_EXPANDED_NODES_MAX} nodes through "
                   "aliases" if visited[1] else f"the document holds more than "
                   f"{_EXPANDED_NODES_MAX:,} values; a definition holds far fewer")
        raise unreadable(name, message, node.start_mark.line + 1)
    if id(node) in open_nodes:
        raise unreadable(name, "a YAML alias refers to itself", node.start_mark.line + 1,
                          path)
    if not isinstance(node, yaml.MappingNode | yaml.SequenceNode):
        return
    if depth >= NESTING_MAX:  # only aliases get here: the composer bounds what is written
        raise unreadable(name, f"nested more than {NESTING_MAX} levels deep through aliases",
                          node.start_mark.line + 1)
    if id(node) in walked:
        visited[1] += 1
    walked.add(id(node))
    open_nodes.add(id(node))
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):  # and never expand it to print it
                raise unreadable(name, "a key must be plain text, not a list or mapping",
                                  key_node.start_mark.line + 1, path)
            key = str(key_node.value)
            line = key_node.start_mark.line + 1
            child = f"{path}.{key}" if path else key
            if key in seen:
                raise DefinitionSyntaxError(
                    [Finding(Severity.ERROR, "duplicate-key", child,
                             f"duplicate key {key!r} (first on line {seen[key]})", (key,), line)],
                    name)
            seen[key] = line
            lines[child] = line
            _walk(value_node, child, lines, name, open_nodes, walked, visited, depth + 1)
    else:
        for index, item in enumerate(node.value):
            child = f"{path}[{index}]"
            lines[child] = item.start_mark.line + 1
            _walk(item, child, lines, name, open_nodes, walked, visited, depth + 1)
    open_nodes.discard(id(node))


def _parse_json(text: str, name: str) -> tuple[Any, dict[str, int]]:
    def refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in pairs:
            if key in result:
                raise unreadable(name, f"duplicate key {key!r}")
            result[key] = value
        return result

    try:
        data = json.loads(text, object_pairs_hook=refuse_duplicates, parse_int=bounded_integer)
    except json.JSONDecodeError as exc:
        raise unreadable(name, f"JSON syntax: {exc.msg} (column {exc.colno})", exc.lineno) from exc
    except TooManyDigits as exc:
        found = re.search(rf"\d{{{DIGITS_MAX + 1}}}", text)
        line = text.count("\n", 0, found.start()) + 1 if found else None
        raise unreadable(name, str(exc), line) from exc
    except RecursionError as exc:
        raise unreadable(name, f"nested more than {NESTING_MAX} levels deep") from exc
    # json.loads nests as deep as the stack lets it; what follows (checks, schemas) may not
    if text.count("[") + text.count("{") > NESTING_MAX and deeper_than(data, NESTING_MAX):
        raise unreadable(name, f"nested more than {NESTING_MAX} levels deep")
    return data, {}


class TooManyDigits(ValueError):
    """A JSON integer longer than `DIGITS_MAX` digits."""


def bounded_integer(digits: str) -> int:
    """Reads a JSON integer's digits; raises `TooManyDigits` past `DIGITS_MAX` of them."""
    if len(digits) > DIGITS_MAX:
        raise TooManyDigits(f"an integer of {len(digits):,} digits; at most {DIGITS_MAX:,} "
                             "digits are read")
    return int(digits)


def deeper_than(value: Any, limit: int) -> bool:
    """Tells whether lists and mappings nest in `value` more than `limit` levels deep."""
    stack = [(value, 1)] if type(value) is dict or type(value) is list else []
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if type(item) is dict else item
        stack.extend((child, depth + 1) for child in children
                     if type(child) is dict or type(child) is list)
    return False


def validate(data: Any, lines: Mapping[str, int], name: str) -> WorkflowSpec:
    if not isinstance(data, Mapping):
        raise DefinitionError(
            [Finding(Severity.ERROR, "not-a-mapping", "",
                     f"expected a mapping with name, states, ..., got {type(data).__name__}")],
            name)
    if "StartAt" in data and "States" in data and "states" not in data:
        raise DefinitionError(
            [Finding(Severity.ERROR, "other-format", "",
                     "this is a Step Functions (ASL) definition, not a native one: name the "
                     "file *.asl.json (or *.asl.yaml), or give --format asl")], name)
    try:
        return WorkflowSpec.model_validate(dict(data))
    except ValidationError as exc:
        raise DefinitionError(_findings(exc, data, lines), name) from exc


def _findings(exc: ValidationError, data: Any, lines: Mapping[str, int]) -> list[Finding]:
    grouped: dict[str, list[str]] = {}
    ids: dict[str, tuple[str, ...]] = {}
    keywords = spec_keywords()
    for error in exc.errors():
        kind = error["type"]
        location = _data_path(error["loc"], data, kind)
        if kind == "extra_forbidden":
            key = location.rsplit(".", 1)[-1]
            if key in keywords:
                message = f"key {key!r} is not allowed here"
            else:
                message = f"unknown key {key!r}{did_you_mean(key, keywords)}"
            ids[location] = (key,)
        elif kind == "missing":
            message = f"missing required key {str(error['loc'][-1])!r}"
        elif kind == "value_error":  # our own validators already quote the value
            message = error["msg"].removeprefix("Value error, ")
        else:
            message = f"{error['msg']} (got {_short(error.get('input'))})"
        messages = grouped.setdefault(location, [])
        if message not in messages:
            messages.append(message)
    findings = []
    for location, messages in grouped.items():
        message = messages[0] if len(messages) == 1 else "expected one of: " + "; or ".join(
            messages)
        line = lines.get(location)
        findings.append(Finding(Severity.ERROR, "schema", location, message,
                                ids.get(location, ()), line))
    return findings


def _data_path(loc: tuple[Any, ...], data: Any, kind: str) -> str:
    """Gives the error's location in the user's data, skipping pydantic's union-member tags."""
    path = ""
    node = data
    for position, part in enumerate(loc):
        if isinstance(node, Mapping) and part in node:
            node = node[part]
            path = f"{path}.{part}" if path else str(part)
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
            path = f"{path}[{part}]"
        elif position == len(loc) - 1 and kind in ("missing", "extra_forbidden"):
            path = f"{path}.{part}" if path else str(part)
    return path


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
