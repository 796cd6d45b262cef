"""The checkers groups of `fsmharness bench` (`--only checkers`): a pass of every built-in
invariant beside a bare read of the same records, over histories of 1k and 100k records
(10k with `--quick`), with the peak memory of a checking pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from harness.bench.timing import Contender, Group, Maker, peak_bytes
from harness.checks.invariants import check
from harness.errors import HarnessError
from harness.sim.history import HistoryRecord
from harness.sim.machine import MachineFactory, ReferenceMachine
from harness.sim.simulator import SimOptions, Simulator
from reference_machine import WorkflowDefinition

__all__ = [
    "checked",
    "checker_groups",
    "history_of",
    "read_types",
]

def history_of(definition: WorkflowDefinition, records_min: int,
               machine: MachineFactory = ReferenceMachine) -> tuple[HistoryRecord, ...]:
    """Gives a history of at least `records_min` records, faults on: seeded runs one after
    another, each run's executions renamed apart (`s7.x1`) and its steps moved after the last
    run's, so the checkers see one long history."""
    simulator = Simulator(definition, SimOptions(executions=10), machine)
    records: list[HistoryRecord] = []
    seed = 0
    while len(records) < records_min:
        offset = records[-1].step if records else 0
        for record in simulator.run(seed).history:
            moved: Any = record._replace(step=record.step + offset)
            execution = getattr(record, "execution", "")
            if execution:  # each record that names an execution takes its run's name for it
                moved = moved._replace(execution=f"s{seed}.{execution}")
            records.append(moved)
        seed += 1
    return tuple(records)


def read_types(history: Sequence[HistoryRecord]) -> int:
    """The cheapest pass over a history: look at each record's type."""
    seen: dict[type, int] = {}
    for record in history:
        kind = type(record)
        seen[kind] = seen.get(kind, 0) + 1
    return len(history)


def checked(definition: WorkflowDefinition, history: Sequence[HistoryRecord]) -> int:
    """Checks every built-in invariant over a history; gives its length."""
    found = check(definition, history)
    if found:
        raise HarnessError(f"{definition.name}: the benchmark history breaks "
                           f"{found[0].rule}: {found[0].message}")
    return len(history)


def _calling(work: Callable[..., Any], *args: Any) -> Maker:
    """Gives a maker whose unit of work is `work(*args)` (nothing to set up)."""
    return lambda stack: lambda: work(*args)


def checker_groups(definition: WorkflowDefinition, sizes: Sequence[int],
                   machine: MachineFactory = ReferenceMachine) -> list[Group]:
    """Gives a pass of every invariant beside a bare read of the records, per history size,
    with the peak memory of a checking pass per record."""
    groups = []
    for size in sizes:
        history = history_of(definition, size, machine)
        label = f"{size // 1000}k" if size >= 1000 else str(size)

        def extra(history: tuple[HistoryRecord, ...] = history) -> dict[str, dict[str, Any]]:
            peak = peak_bytes(lambda: checked(definition, history))
            return {"all invariants": {"peak_bytes_per_record": peak / len(history),
                                       "records": len(history)}}

        groups.append(Group(f"checkers: {label} records of {definition.name}", (
            Contender("read each record (floor)", _calling(read_types, history), len(history),
                      "record"),
            Contender("all invariants", _calling(checked, definition, history), len(history),
                      "record")), extra=extra))
    return groups
