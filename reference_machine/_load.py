"""Reading definitions from YAML (safe loader), JSON, dicts or Python objects.

YAML is read with a `SafeLoader` subclass that keeps YAML 1.2 booleans (so a state's `on:` key
stays the string "on", not True), refuses duplicate keys, and remembers the line of every key so
that each finding can say where it is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from reference_machine._definition import WorkflowDefinition, check_spec, compile_definition
from reference_machine._findings import Finding, Severity, did_you_mean
from reference_machine._spec import WorkflowSpec, spec_keywords
from reference_machine.errors import DefinitionError, DefinitionSyntaxError

DefinitionSource = str | Path | Mapping[str, Any] | WorkflowSpec | WorkflowDefinition
Functions = Mapping[str, Callable[..., Any]]
_BOOL_TAG = "tag:yaml.org,2002:bool"
_EXPANDED_NODES_MAX = 100_000  # far past any real workflow; bounds alias expansion


class _YamlLoader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 booleans only (`true`/`false`): `on`, `yes`, `no` stay strings."""


_YamlLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != _BOOL_TAG]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_YamlLoader.add_implicit_resolver(
    _BOOL_TAG, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def load_definition(
    source: DefinitionSource, *, functions: Functions | None = None
) -> WorkflowDefinition:
    """Gives the checked definition from a path, YAML/JSON text, a dict or a `WorkflowSpec`.

    Raises `DefinitionSyntaxError` when the input cannot be read, and `DefinitionError` listing
    every error (with locations) when it is read but wrong.
    """
    if isinstance(source, WorkflowDefinition):
        return source
    spec, lines, name = load_spec(source)
    return compile_definition(spec, functions=functions, source=name, lines=lines)


def lint(source: DefinitionSource, *, functions: Functions | None = None) -> list[Finding]:
    """Gives every finding, errors and warnings, for a definition; raises only when unreadable."""
    if isinstance(source, WorkflowDefinition):
        return list(source.warnings)
    try:
        spec, lines, _ = load_spec(source)
    except DefinitionSyntaxError:
        raise
    except DefinitionError as exc:
        return list(exc.findings)
    return check_spec(spec, functions=functions, lines=lines)


def load_spec(source: DefinitionSource) -> tuple[WorkflowSpec, dict[str, int], str]:
    """Gives the validated spec, the line of each key path (YAML only) and the source's name."""
    if isinstance(source, WorkflowSpec):
        return source, {}, f"<{source.name}>"
    if isinstance(source, Mapping):
        return _validate(source, {}, "<dict>"), {}, "<dict>"
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source
                                     and source.rstrip().endswith((".yaml", ".yml", ".json"))):
        path = Path(source)
        name = str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError as exc:
            raise _unreadable(name, "file not found") from exc
        except (OSError, UnicodeDecodeError) as exc:
            raise _unreadable(name, f"cannot read: {exc}") from exc
        is_json = path.suffix == ".json"
    elif isinstance(source, str):
        name, text = "<text>", source
        is_json = source.lstrip().startswith("{")
    else:
        msg = (f"a definition is a path, YAML/JSON text, a dict or a WorkflowSpec, "
               f"not {type(source).__name__}")
        raise TypeError(msg)
    data, lines = _parse_json(text, name) if is_json else _parse_yaml(text, name)
    return _validate(data, lines, name), lines, name


def _unreadable(name: str, message: str, line: int | None = None,
                location: str = "") -> DefinitionSyntaxError:
    return DefinitionSyntaxError(
        [Finding(Severity.ERROR, "unreadable", location, message, (), line)], name)


def _parse_yaml(text: str, name: str) -> tuple[Any, dict[str, int]]:
    loader = _YamlLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise _unreadable(name, "the file is empty; expected a workflow definition mapping")
        lines: dict[str, int] = {}
        _walk(node, "", lines, name, set(), [0])
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = " ".join(p for p in (exc.context, exc.problem) if p)
        raise _unreadable(name, f"YAML syntax: {problem}", line) from exc
    except yaml.YAMLError as exc:
        raise _unreadable(name, f"YAML syntax: {exc}") from exc
    finally:
        loader.dispose()
    return data, lines


def _walk(node: yaml.Node, path: str, lines: dict[str, int], name: str,
          open_nodes: set[int], visited: list[int]) -> None:
    """Records the line of every key path, refusing duplicate keys, recursive aliases, and
    aliases that expand the document past `_EXPANDED_NODES_MAX` nodes (a "billion laughs")."""
    visited[0] += 1
    if visited[0] > _EXPANDED_NODES_MAX:
        raise _unreadable(name, f"the document expands to more than {_EXPANDED_NODES_MAX} "
                          "nodes through aliases", node.start_mark.line + 1)
    if id(node) in open_nodes:
        raise _unreadable(name, "a YAML alias refers to itself", node.start_mark.line + 1,
                          path)
    if not isinstance(node, yaml.MappingNode | yaml.SequenceNode):
        return
    open_nodes.add(id(node))
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):  # and never expand it to print it
                raise _unreadable(name, "a key must be plain text, not a list or mapping",
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
            _walk(value_node, child, lines, name, open_nodes, visited)
    else:
        for index, item in enumerate(node.value):
            child = f"{path}[{index}]"
            lines[child] = item.start_mark.line + 1
            _walk(item, child, lines, name, open_nodes, visited)
    open_nodes.discard(id(node))


def _parse_json(text: str, name: str) -> tuple[Any, dict[str, int]]:
    def refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in pairs:
            if key in result:
                raise _unreadable(name, f"duplicate key {key!r}")
            result[key] = value
        return result

    try:
        return json.loads(text, object_pairs_hook=refuse_duplicates), {}
    except json.JSONDecodeError as exc:
        raise _unreadable(name, f"JSON syntax: {exc.msg} (column {exc.colno})", exc.lineno) from exc


def _validate(data: Any, lines: Mapping[str, int], name: str) -> WorkflowSpec:
    if not isinstance(data, Mapping):
        raise DefinitionError(
            [Finding(Severity.ERROR, "not-a-mapping", "",
                     f"expected a mapping with name, states, ..., got {type(data).__name__}")],
            name)
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
