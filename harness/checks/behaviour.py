"""Behaviour coverage: what one run did, finer than the states and transitions it reached, as the
feedback of guided fuzzing.

A behaviour is a small tuple read off the history in one pass, no tracing of Python lines:

- `("d", state, event, decision, via)`: an event delivered in a state (by the sender, again,
  late, forged...) and what the machine decided, rejected and ignored ones included;
- `("end", event, decision, via)`: an event delivered to an execution already final;
- `("n", event, bucket)`: how often one execution was delivered an event, bucketed as AFL
  buckets its hit counts (1, 2, 3, 4-7, 8-15, ...);
- `("f", fault, state)` and `("c", point, state)`: a fault, a crash point, in a state;
- `("s", state, status)`: a status seen in a state (compensation begun, a wait, the end);
- `("gap", bucket)`: an execution's version that moved by more than one between two looks
  (a second worker's commit, a recovery's);
- `("fx", tool, bucket)`: how often one key of a tool took effect;
- `("mf", problem)`: the machine failed (raised, hung, nonsense);

plus every item of the run's `Coverage` (transitions, guard outcomes both ways, conditional
approvals, regions). The set is what the guided strategy keeps a schedule for when it holds
one it has not seen.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fault_injection import TOOL_FAULTS, FaultKind
from harness.checks.coverage import Coverage
from harness.sim.history import (
    Applied,
    Crashed,
    Decided,
    Delivered,
    FaultInjected,
    HistoryRecord,
    MachineFailed,
    Observed,
)

__all__ = ["Behaviour", "behaviours_of", "bucket"]

#: The faults whose detail begins with a word worth telling apart: a variant, or a tool.
_DETAILED = frozenset({FaultKind.FORGED_APPROVAL, *TOOL_FAULTS})

Behaviour = tuple[Any, ...]


def bucket(count: int) -> int:
    """Gives a count's bucket: 1, 2 and 3 apart, then powers of two (4-7 is 4, 8-15 is 8)."""
    if count < 4:
        return count
    return 1 << (count.bit_length() - 1)


def behaviours_of(history: Sequence[HistoryRecord], coverage: Coverage) -> frozenset[Behaviour]:
    """Gives the behaviours of one run: its history's, and its coverage's items."""
    seen: set[Behaviour] = set()
    add = seen.add
    state: dict[str, str] = {}
    status: dict[str, str] = {}
    version: dict[str, int] = {}
    delivered: dict[str, tuple[str, str]] = {}  # event id -> (type, via)
    counts: dict[tuple[str, str], int] = {}
    effects: dict[tuple[str, str], int] = {}
    acting = ""
    record: Any
    for record in history:
        kind = type(record)
        if kind is Delivered:
            execution = record.execution
            acting = execution
            delivered[record.event_id] = (record.type, record.via)
            pair = (execution, record.type)
            counts[pair] = counts.get(pair, 0) + 1
        elif kind is Decided:
            execution = record.execution
            event, via = delivered.get(record.event_id, ("?", "?"))
            decision = record.decision.partition(":")[0]
            if status.get(execution) == "final":
                add(("end", event, decision, via))
            add(("d", state.get(execution, ""), event, decision, via))
        elif kind is Observed:
            execution = record.execution
            acting = execution
            now = record.state
            state[execution] = now
            status[execution] = record.status
            add(("s", now, record.status))
            before = version.get(execution)
            after = record.version
            if before is not None and after - before > 1:
                add(("gap", bucket(after - before - 1)))
            version[execution] = after
        elif kind is FaultInjected:  # with its variant, or its tool (the detail's first word)
            fault = str(record.fault)
            add(("f", fault, state.get(record.execution, ""),
                 record.detail.partition(" ")[0] if fault in _DETAILED else ""))
        elif kind is Crashed:
            add(("c", record.point, state.get(acting, "")))
        elif kind is Applied:
            pair = (record.tool, record.key)
            effects[pair] = effects.get(pair, 0) + 1
        elif kind is MachineFailed:
            add(("mf", record.problem))
    for (_, event), count in counts.items():
        add(("n", event, bucket(count)))
    for (tool, _), count in effects.items():
        add(("fx", tool, bucket(count)))
    for name in ("transitions", "guards", "regions", "resumes", "approvals"):
        for item in getattr(coverage, name):
            add((name, item))
    return frozenset(seen)
