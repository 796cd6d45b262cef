"""Invariants of side effects: `no_duplicate_effect`, `persist_before_effect`."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from harness.checks.invariants.analysis import (
    chart_of,
    has_commits,
    quoted,
    region_identity,
    saga_of,
)
from harness.checks.invariants.registry import History, Violation, builtin
from harness.sim.history import Applied, Committed, Dispatched
from reference_machine import WorkflowDefinition

__all__ = [
    "no_duplicate_effect",
    "persist_before_effect",
]


@builtin("no_duplicate_effect", "no logical action takes effect twice: the same tool, "
                                "execution (region, map item) and input applied once (the "
                                "same key, for a tool whose `action` is `call`; the same unit "
                                "of work, step and place, where an adapter names it; tools "
                                "marked repeatable excepted; an effect its compensation undid "
                                "may be done again)")
def no_duplicate_effect(definition: WorkflowDefinition, history: History
                        ) -> Iterator[Violation]:
    repeatable = {name for name, tool in definition.tools.items() if tool.repeatable}
    per_call = {name for name, tool in definition.tools.items()
                if getattr(tool, "action", "input") == "call"}
    first: dict[tuple[str, str, str], int] = {}
    undone_at: dict[int, int] | None = None  # effect -> the undo that took it back
    undoing: dict[int, int] = {}  # undo -> the effect it took back
    chart = chart_of(definition)
    for index, record in enumerate(history):
        if type(record) is not Applied or record.tool in repeatable:
            continue
        # an effect whose execution is unknown is one logical action per key; two regions
        # (two map items) of one run are two actions, whatever their inputs
        region = region_identity(chart, record.key) if chart.scoped and record.execution \
            else ""
        if record.action and record.execution:  # an adapter named the logical action
            action = (record.execution, record.tool, "\0" + record.action)
        else:
            action = ((region or record.execution, record.tool,
                       record.key if record.tool in per_call else record.input)
                      if record.execution else ("", record.tool, record.key))
        seen = first.get(action)
        if seen is None:
            first[action] = index
            continue
        if undone_at is None:  # built only when a repeat is seen: the common case pays nothing
            pairs = [pair for found in saga_of(definition, history).pairs.values()
                     for pair in found]
            undone_at = {pair.forward: pair.position for pair in pairs}
            undoing = {pair.position: pair.forward for pair in pairs}
        if undone_at.get(seen, index) < index:  # undone before: doing it again is a new action
            first[action] = index
            continue
        if undoing.get(seen, -1) != undoing.get(index, -1) and index in undoing:
            first[action] = index  # an undo of an effect done again: undoing it is new too
            continue
        earlier = history[seen]
        assert type(earlier) is Applied
        yield Violation("no_duplicate_effect", _twice(earlier, record), record.execution,
                        record.step, (seen, index))


def _twice(earlier: Applied, record: Applied) -> str:
    """Says how one logical action took effect twice, and why, where the adapter knows."""
    if not record.action:
        return (f"{record.tool} took effect twice with input {quoted(record.input)}: ledger "
                f"#{earlier.seq} (key {earlier.key!r}, step {earlier.step}) and #{record.seq} "
                f"(key {record.key!r}); one logical action, two side effects")
    inputs = (f"input {quoted(record.input)}" if record.input == earlier.input else
              f"input {quoted(earlier.input)}, then {quoted(record.input)}")
    keys = (f"under one key {record.key!r}" if record.key == earlier.key else
            f"under two keys, {earlier.key!r} then {record.key!r}")
    said = (f"{record.tool} took effect twice for one logical action ({record.action}), "
            f"{inputs}, {keys}: ledger #{earlier.seq} (step {earlier.step}) and "
            f"#{record.seq}")
    return f"{said}; {record.cause}" if record.cause else said


@builtin("persist_before_effect", "a tool is called only for a command already committed (the "
                                  "machines that tell their commits)")
def persist_before_effect(definition: WorkflowDefinition, history: History
                          ) -> Iterator[Violation]:
    if not has_commits(history):
        return
    commanded: dict[str, set[str]] = defaultdict(set)  # execution -> committed ids and keys
    for index, record in enumerate(history):
        if type(record) is Committed:
            if record.effects:
                known = commanded[record.execution]
                for effect in record.effects:
                    known.add(effect.key)
                    known.add(effect.id)
        elif type(record) is Dispatched and record.execution and (
                record.key not in commanded[record.execution]):
            yield Violation("persist_before_effect",
                            f"{record.execution} called {record.tool} (key {record.key!r}) "
                            "before committing the decision that commands it: a crash there "
                            "leaves an effect no record knows of", record.execution,
                            record.step, (index,))
            return  # the first is the one to fix
