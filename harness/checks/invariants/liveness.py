"""Invariants of liveness and the machine: `no_stuck_execution`, `machine_ok`."""

from __future__ import annotations

from collections.abc import Iterator

from harness.checks.invariants.registry import History, Violation, builtin
from harness.sim.history import REFUSED_TIMER, Finished, MachineFailed
from reference_machine import WorkflowDefinition

__all__ = [
    "machine_ok",
    "no_stuck_execution",
]


@builtin("no_stuck_execution", "at the end, after a phase with every fault healed, no "
                               "execution sits in a non-final state with nothing that could "
                               "move it", final_only=True)
def no_stuck_execution(definition: WorkflowDefinition, history: History
                       ) -> Iterator[Violation]:
    for index, record in enumerate(history):
        if type(record) is Finished and record.status != "final" and (
                not record.waiting_on or record.waiting_on == (REFUSED_TIMER,)):
            why = ("its timer stayed due, the execution unchanged, each time the machine was "
                   "told its time: it refuses the timer's move (the trace tells any reason it "
                   "gave)" if record.waiting_on else
                   "no timer, call, approval or event can move it")
            yield Violation("no_stuck_execution",
                            f"{record.execution} is stuck in {record.state!r} "
                            f"({record.status}): {why}",
                            record.execution, record.step, (index,))


@builtin("machine_ok", "the machine under test neither raises, hangs nor answers nonsense")
def machine_ok(definition: WorkflowDefinition, history: History) -> Iterator[Violation]:
    for index, record in enumerate(history):
        if type(record) is MachineFailed:
            yield Violation("machine_ok", f"the machine {record.problem} ({record.error}): "
                                          f"{record.message}", "", record.step, (index,))
