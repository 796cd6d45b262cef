"""Every verdict true (issue 15): each test builds a machine or definition of its own, shows the
case that used to give a false verdict, and checks the true one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from fault_injection import FaultKind, FaultPlan, FaultRate, load_plan
from harness import Applied, Finished, HistoryRecord, SimOptions, Simulator, ToolWorld
from harness.sim.choices import Choices
from harness.sim.world import Clock
from reference_machine import Failure, load_definition

# -- 1. a service that honours keys never takes back an effect it applied -----------------------

REFUND = load_definition({
    "name": "refund_once", "version": "1",
    "tools": {"pay.refund": {"idempotency_keys": True}},
    "states": {
        "refunding": {"initial": True,
                      "step": {"tool": "pay.refund", "input": {"order": "o-1"},
                               "retry": {"attempts_max": 12, "delay_initial": "1s"}},
                      "on": {"step.succeeded": "refunded", "step.failed": "failed"}},
        "refunded": {"type": "final", "outcome": "success"},
        "failed": {"type": "final", "outcome": "failure"},
    },
})


def refunded_yet_failed(history: Sequence[HistoryRecord]) -> list[str]:
    """Gives the executions that ended `failed` although their refund took effect."""
    refunded = {r.execution for r in history if type(r) is Applied}
    return sorted(r.execution for r in history
                  if type(r) is Finished and r.state == "failed" and r.execution in refunded)


class TestAnAppliedKeyKeepsItsAnswer:
    def test_a_correct_machine_never_ends_failed_with_its_refund_made(self) -> None:
        """A timeout after apply, then a retry under the same key: the service answers the
        retry with its first answer, never `permanent` or a malformed output, so the
        reference machine (retrying timeouts) ends refunded whenever its refund applied."""
        plan = load_plan({"faults": {"tool_timeout_after_apply": 0.3, "tool_permanent": 0.3}})
        simulator = Simulator(REFUND, SimOptions(plan=plan, executions=1))
        retried = 0
        for seed in range(200):
            history = simulator.run(seed).history
            assert refunded_yet_failed(history) == [], f"seed {seed}"
            retried += sum(1 for r in history if type(r) is Applied) > 0 and any(
                getattr(r, "fault", None) == FaultKind.TOOL_TIMEOUT_AFTER_APPLY for r in history)
        assert retried > 20  # the case arose: a timed-out refund retried under its key

    @pytest.mark.parametrize("kind", [FaultKind.TOOL_PERMANENT, FaultKind.MALFORMED_OUTPUT])
    def test_the_service_answers_an_applied_key_as_it_first_did(self, kind: FaultKind) -> None:
        """At the world: once a key applied, a fault that is the service's own answer gives
        its first answer instead; nothing applies twice; a new key still takes the fault."""
        answers, applied = _calls(kind, "x1/refunding/1")
        first = applied.index(1)
        assert all(answer == answers[first] for answer in answers[first:])
        assert applied[-1] == 1
        if kind is FaultKind.TOOL_PERMANENT:  # before the key applied, the refusal did strike
            assert first > 0 and all(isinstance(a, Failure) for a in answers[:first])

    @pytest.mark.parametrize("kind", [FaultKind.TOOL_TRANSIENT, FaultKind.TOOL_RATE_LIMITED,
                                      FaultKind.TOOL_TIMEOUT_BEFORE_APPLY,
                                      FaultKind.TOOL_TIMEOUT_AFTER_APPLY])
    def test_faults_before_or_after_the_service_still_strike_a_retry(self, kind: FaultKind
                                                                     ) -> None:
        """The network between caller and service fails a retry as it fails a first call."""
        answers, applied = _calls(kind, "x1/refunding/1")
        first = applied.index(1)
        assert any(isinstance(answer, Failure) for answer in answers[first + 1:])
        assert applied[-1] == 1


def _calls(kind: FaultKind, key: str, seed: int = 7) -> tuple[list[Any], list[int]]:
    """Calls the refund 40 times under one key, the fault at rate 0.5; gives each answer and
    how many effects the ledger held after it."""
    world = ToolWorld(REFUND, FaultPlan((FaultRate(kind, 0.5),)), Choices(seed), Clock(),
                      lambda record: None, seed=seed)
    answers, applied = [], []
    for _ in range(40):
        answers.append(world.tools["pay.refund"]({"order": "o-1"}, key))
        applied.append(len(world.ledger))
    return answers, applied

