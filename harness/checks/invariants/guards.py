"""Invariants of guards: `guards_held`, read off the guards `judgements` evaluates again."""

from __future__ import annotations

from collections.abc import Iterator

from harness.checks.invariants.judgements import judgements
from harness.checks.invariants.registry import History, Violation, builtin
from reference_machine import WorkflowDefinition

__all__ = [
    "guards_held",
]


@builtin("guards_held", "a guarded transition is crossed only when its guard held, and the "
                        "first transition whose guard holds is the one taken (an eventless "
                        "move's, a choice's and a join's included)")
def guards_held(definition: WorkflowDefinition, history: History) -> Iterator[Violation]:
    for index, record, judged in judgements(definition, history):
        if judged.problem:
            eid = record.execution
            yield Violation("guards_held", f"{eid} {judged.problem}", eid, record.step,
                            (index,))
