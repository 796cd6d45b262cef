"""What the importer learns of a whole document before converting it: whether a run can
succeed, which Maps read their items with an ItemReader, and which keys of its input a flow
reads before writing them."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from reference_machine.importers.asl.paths import parse_path

__all__ = ["data_key", "maps_over_data", "read_before_written", "reads_items", "strings",
           "succeeds"]


def succeeds(flow: Mapping[str, Any]) -> bool:
    """Tells whether some path from a flow's StartAt reaches a Succeed state or an `End`
    (through Next, Default, the Choices' and the Catchers' Next); a malformed flow is said to
    (the conversion reports what is wrong with it)."""
    states = flow.get("States")
    if not isinstance(states, Mapping):
        return True
    todo, seen = [flow.get("StartAt")], set()
    while todo:
        name = todo.pop()
        if not isinstance(name, str) or name in seen:
            continue
        seen.add(name)
        state = states.get(name)
        if not isinstance(state, Mapping):
            return True
        if state.get("Type") == "Succeed" or (state.get("End") is True
                                               and state.get("Type") != "Fail"):
            return True
        todo.append(state.get("Next"))
        todo.append(state.get("Default"))
        for key in ("Choices", "Catch"):
            if isinstance(state.get(key), list):
                todo += [rule.get("Next") for rule in state[key] if isinstance(rule, Mapping)]
    return False


def reads_items(state: Any) -> bool:
    """A Map whose items an ItemReader reads (from S3: a CSV or JSON file, a bucket's
    objects), not the data: a synthetic state draws them."""
    return isinstance(state, Mapping) and state.get("Type") == "Map" and isinstance(
        state.get("ItemReader"), Mapping) and "ItemsPath" not in state and "Items" not in state


_DATA_READ = re.compile(r"(?<![$\w])\$((?:\.[A-Za-z_][A-Za-z0-9_\-]*)+)")
#: the fields of a state that read its result or an item, not its input
_NOT_INPUT = frozenset(("ResultPath", "ResultSelector", "OutputPath", "ItemProcessor",
                        "Iterator", "Branches", "Catch", "Next", "Default", "Comment"))


def data_key(path: tuple[str | int, ...], flat: frozenset[tuple[str, ...]]) -> str:
    """Gives the native context key a read of `path` reads under: its flat key (`a.b`, where
    a result was written below the top level), else its first segment."""
    for size in range(len(path), 1, -1):
        if path[:size] in flat:
            return ".".join(str(s) for s in path[:size])
    return str(path[0])


def maps_over_data(value: Any) -> bool:
    """Tells whether a Map of the document goes over its whole input (ItemsPath `$`), which
    is natively `context.items`: a result replacing the data then sets `items`."""
    if isinstance(value, Mapping):
        if value.get("Type") == "Map" and value.get("ItemsPath", "$") == "$" and not (
                reads_items(value) or "Items" in value):
            return True
        return any(maps_over_data(v) for v in value.values())
    if isinstance(value, list):
        return any(maps_over_data(v) for v in value)
    return False


def read_before_written(flow: Mapping[str, Any], flat: frozenset[tuple[str, ...]]
                        ) -> set[str]:
    """Gives the context keys (see `data_key`) of a flow's input (`StartAt` + `States`)
    that some state may read (`$.key`) before a state on the way there wrote them: the keys
    the input itself must give. A result replacing the data (ResultPath `$`) writes every
    key; a Parallel's branches read as flows of their own; a Map's item flow reads its
    items, not the data."""
    states, start = flow.get("States"), flow.get("StartAt")
    if not isinstance(states, Mapping) or not isinstance(start, str) or start not in states:
        return set()
    reads: dict[str, set[str]] = {}
    edges: dict[str, list[tuple[str, set[str] | None]]] = {}
    for name, state in states.items():
        if not isinstance(state, Mapping):
            continue
        found = {data_key(tuple(path[1:].split(".")), flat)
                 for field_name, value in state.items() if field_name not in _NOT_INPUT
                 for text in strings(value) for path in _DATA_READ.findall(text)}
        if state.get("Type") == "Parallel" and isinstance(state.get("Branches"), list):
            for branch in state["Branches"]:
                if isinstance(branch, Mapping):
                    found |= read_before_written(branch, flat)
        if state.get("Type") == "Map" and state.get("ItemsPath", "$") == "$" and not (
                reads_items(state) or "Items" in state):
            found.add("items")  # natively the items of ItemsPath $ are context.items
        reads[str(name)] = found
        written = _writes(state)
        targets = [state.get("Next"), state.get("Default"), *(
            r.get("Next") for r in state.get("Choices") or () if isinstance(r, Mapping))]
        edges[str(name)] = [(t, written) for t in targets if isinstance(t, str)]
        for catcher in state.get("Catch") or ():
            if isinstance(catcher, Mapping) and isinstance(catcher.get("Next"), str):
                edges[str(name)].append((catcher["Next"], _path_writes(
                    catcher.get("ResultPath", "$"))))
    everything = set().union(*reads.values()) if reads else set()
    unwritten: dict[str, set[str]] = {start: set(everything)}
    work = [start]
    while work:
        name = work.pop()
        for target, written in edges.get(name, ()):
            passed = set() if written is None else {
                key for key in unwritten[name]
                if not any(key == w or key.startswith(w + ".") for w in written)}
            if target not in unwritten or not passed <= unwritten[target]:
                unwritten[target] = unwritten.get(target, set()) | passed
                work.append(target)
    return {key for name, left in unwritten.items() for key in reads.get(name, set()) & left}


def _path_writes(result_path: Any) -> set[str] | None:
    """Gives the context keys a result written at `result_path` sets, with the flat keys
    below them (`a.b` sets `a.b.c`); None: all of them (the result replaces the data)."""
    if result_path is None or not isinstance(result_path, str):
        return set()
    parsed = parse_path(result_path)
    if parsed is None or parsed[0] != "$":
        return set()
    if not parsed[1]:
        return None
    # a result below the top level goes to a flat key (`a.b`): the key `a` stays as it was
    return {".".join(str(s) for s in parsed[1])}


def _writes(state: Mapping[str, Any]) -> set[str] | None:
    """Gives the top-level keys a state's success sets natively (None: all of them)."""
    kind = state.get("Type")
    jsonata = state.get("QueryLanguage") == "JSONata"
    if kind == "Task":
        return None if jsonata else _path_writes(state.get("ResultPath", "$"))
    if kind == "Pass":
        if jsonata:
            return None if "Output" in state else set()
        if "Result" in state or "Parameters" in state:
            return _path_writes(state.get("ResultPath", "$"))
        return set()
    if kind == "Map":  # natively the items' results go to one key; the data stays
        written = _path_writes(state.get("ResultPath", "$"))
        return written if written and not any("." in key for key in written) else set()
    return set()  # a Parallel's branches may write nothing: the keys stay unwritten


def strings(value: Any) -> Iterator[str]:
    """Gives every text in a document, its keys included (each container once)."""
    seen: set[int] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, Mapping | list) and id(item) not in seen:
            seen.add(id(item))
            if isinstance(item, Mapping):
                stack.extend(str(k) for k in item)
                stack.extend(item.values())
            else:
                stack.extend(item)
