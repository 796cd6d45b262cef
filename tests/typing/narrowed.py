"""A user's code over the public API, as a type checker must accept it: records and decisions
told apart by class or by `kind` (each record's `Literal`), then their own fields read."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from harness import Applied, Committed, HistoryRecord, Observed, invariant
from reference_machine import Accepted, Decision, Ignored, WorkflowDefinition


@invariant(name="one_refund_per_order")
def one_refund_per_order(definition: WorkflowDefinition, history: Sequence[HistoryRecord]
                         ) -> Iterator[str]:
    seen: dict[str, str] = {}
    for record in history:
        if type(record) is Applied and record.tool == "payments.refund":
            if record.input in seen:
                yield f"{record.input} refunded by {seen[record.input]} and {record.execution}"
            seen[record.input] = record.execution


def last_states(history: Sequence[HistoryRecord]) -> dict[str, str]:
    states: dict[str, str] = {}
    for record in history:
        match record:
            case Committed(execution=execution, state=state) if record.decision == "accepted":
                states[execution] = state
            case Observed():
                states[record.execution] = record.state
    return states


def tools(history: Sequence[HistoryRecord]) -> list[str]:
    return [record.tool for record in history if record.kind == "applied"]


def moved_to(decision: Decision) -> str:
    if isinstance(decision, Accepted):
        return decision.execution.state
    if isinstance(decision, Ignored):
        return f"ignored: {decision.reason}"
    return f"rejected: {decision.detail}"

