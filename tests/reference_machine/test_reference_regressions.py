"""Regressions: what the property test over drawn definitions found in the reference machine,
each pinned here by name, each shown failing against the machine before its fix.

1. A step whose effect may have taken place (it timed out, or answered an unusable output) was
   left in place when the run unwound its saga: only completed steps were compensated.
2. A call sent again on recovery, after its first answer was lost, could be answered "rate
   limited": the machine took that for "nothing happened", though the first send had.
3. A call to a tool that honours no idempotency key, whose step had already moved on, was still
   sent when completed later, behind the back of the person the run was escalated to, and twice
   when its first send's result had been lost.
"""

from __future__ import annotations

from typing import Any

import pytest

from reference_machine import (
    Event,
    Failure,
    MemoryStore,
    RunCompensation,
    Runtime,
    Success,
    load_definition,
    start_event,
)

SAGA = {
    "name": "two_step_saga", "version": 1, "context": {"order": "o-1"},
    "tools": {"book.hold": {"idempotency_keys": True},
              "book.release": {"idempotency_keys": True},
              "pay.charge": {"idempotency_keys": True},
              "pay.refund": {"idempotency_keys": True}},
    "compensation_failed": "needs_human",
    "states": {
        "holding": {"initial": True, "step": {
            "tool": "book.hold", "input": {"order": "=context.order"},
            "compensation": {"tool": "book.release", "input": {"order": "=context.order"}}},
            "on": {"step.succeeded": "charging", "step.failed": "failed"}},
        "charging": {"step": {
            "tool": "pay.charge", "input": {"order": "=context.order"}, "timeout": "10s",
            "retry": {"attempts_max": 1, "on_exhausted": "compensate"},
            "compensation": {"tool": "pay.refund", "input": {"order": "=context.order"}}},
            "on": {"step.succeeded": "done", "step.failed": "failed"}},
        "needs_human": {"type": "wait", "after": {"delay": "1d", "target": "failed"}},
        "done": {"type": "final", "outcome": "success"},
        "failed": {"type": "final", "outcome": "failure"},
    },
}


class Tool:
    """A tool that records each call and answers from a list of outcomes (then success)."""

    def __init__(self, *outcomes: Any) -> None:
        self.calls: list[str] = []
        self.outcomes = list(outcomes)

    def __call__(self, payload: Any, idempotency_key: str) -> Any:
        self.calls.append(idempotency_key)
        return self.outcomes.pop(0) if self.outcomes else Success({})


def saga(charge: Tool, *, crash: Any = None) -> tuple[Runtime, dict[str, Tool]]:
    tools = {"book.hold": Tool(), "book.release": Tool(), "pay.charge": charge,
             "pay.refund": Tool()}
    return Runtime(MemoryStore(), [load_definition(SAGA)], tools, defer_effects=True,
                   crash=crash), tools


def undo_order(runtime: Runtime) -> list[str]:
    """Gives the compensations the run committed, in order."""
    return [entry.command.tool for entry in runtime.store.outbox("r1")
            if isinstance(entry.command, RunCompensation)]


def into_charging(runtime: Runtime) -> None:
    runtime.start(load_definition(SAGA), "r1")
    runtime.complete("r1", "r1/holding/1#1", 0)  # the hold succeeds


def drain(runtime: Runtime, now: int) -> None:
    """Completes the calls in flight, and the ones they lead to, until none is left."""
    while runtime.in_flight("r1"):
        runtime.complete("r1", runtime.in_flight("r1")[0], now)


class TestUncertainStepIsCompensatedToo:
    @pytest.mark.parametrize("outcome", [Failure("timeout", "no answer in time"),
                                         Failure("invalid_output", "not the shape")],
                             ids=["timeout", "invalid_output"])
    def test_a_step_that_may_have_applied_is_undone_first(self, outcome: Failure) -> None:
        """Charging fails without telling whether it charged: refund it, then release."""
        runtime, _ = saga(Tool(outcome))
        into_charging(runtime)
        runtime.complete("r1", "r1/charging/1#1", 1)
        drain(runtime, 2)
        assert undo_order(runtime) == ["pay.refund", "book.release"]
        assert runtime.store.load("r1").execution.state == "failed"

    def test_a_step_that_surely_failed_is_not_undone(self) -> None:
        """A permanent failure says nothing was charged: only the hold is released."""
        runtime, _ = saga(Tool(Failure("permanent", "card refused")))
        into_charging(runtime)
        runtime.complete("r1", "r1/charging/1#1", 1)
        drain(runtime, 2)
        assert undo_order(runtime) == ["book.release"]
        assert runtime.store.load("r1").execution.state == "failed"

    def test_the_step_timing_out_is_uncertain_too(self) -> None:
        """The step's own timeout leaves its effect uncertain as well."""
        runtime, _ = saga(Tool())
        into_charging(runtime)
        runtime.tick(10_000)  # the charge never answered: the step times out
        assert undo_order(runtime) == ["pay.refund"]  # first, before the hold's release


class TestFailureOfAResentCallIsUncertain:
    def test_a_lost_answer_then_a_refusal_still_undoes_the_step(self) -> None:
        """The charge applies, the process dies before recording it; sent again on recovery
        it is answered "rate limited": the run must still refund it."""
        armed: dict[str, int] = {}

        def crash(point: str) -> None:
            if armed.get(point):
                armed[point] -= 1
                raise RuntimeError(f"crash at {point}")

        charge = Tool(Success({}), Failure("rate_limited", "429"))
        runtime, _ = saga(charge, crash=crash)
        into_charging(runtime)
        armed["after_apply_before_record"] = 1
        with pytest.raises(RuntimeError, match="after_apply_before_record"):
            runtime.complete("r1", "r1/charging/1#1", 1)
        recovered = Runtime(runtime.store, runtime.registry, runtime.tools, defer_effects=True)
        recovered.recover(2)
        assert charge.calls == ["r1/charging/1", "r1/charging/1"]  # the same key again
        (result,) = [e.result for e in recovered.store.outbox("r1")
                     if e.command_id == "r1/charging/1#1"]
        assert result is not None and result.payload["uncertain"] is True
        drain(recovered, 3)
        assert undo_order(recovered) == ["pay.refund", "book.release"]


ESCALATING = {
    "name": "mail_once", "version": 1,
    "tools": {"mail.send": {"idempotency_keys": False}},
    "states": {
        "mailing": {"initial": True, "step": {
            "tool": "mail.send", "input": {"to": "a@b.c"}, "timeout": "5s",
            "escalate_to": "needs_human"},
            "on": {"step.succeeded": "done", "step.failed": "failed"}},
        "needs_human": {"type": "wait", "after": {"delay": "1d", "target": "failed"}},
        "done": {"type": "final", "outcome": "success"},
        "failed": {"type": "final", "outcome": "failure"},
    },
}


class TestSupersededCallWithoutKeysIsNotSent:
    def test_a_call_whose_step_escalated_is_not_sent_after(self) -> None:
        """The mail's step timed out and went to a person; completing the old call later
        sends nothing and its result is ignored."""
        mail = Tool()
        runtime = Runtime(MemoryStore(), [load_definition(ESCALATING)], {"mail.send": mail},
                          defer_effects=True)
        runtime.start(load_definition(ESCALATING), "r1")
        runtime.tick(5_000)
        assert runtime.store.load("r1").execution.state == "needs_human"
        assert runtime.in_flight("r1") == ["r1/mailing/1#1"]
        decision = runtime.complete("r1", "r1/mailing/1#1", 6_000)
        assert mail.calls == []
        assert decision is not None and decision.kind == "ignored"
        assert runtime.in_flight("r1") == []

    def test_a_current_call_is_sent_once(self) -> None:
        """The same step answered in time sends the mail once, as before."""
        mail = Tool()
        runtime = Runtime(MemoryStore(), [load_definition(ESCALATING)], {"mail.send": mail},
                          defer_effects=True)
        runtime.start(load_definition(ESCALATING), "r1")
        runtime.complete("r1", "r1/mailing/1#1", 1_000)
        assert mail.calls == ["r1/mailing/1"]
        assert runtime.store.load("r1").execution.state == "done"


def test_a_start_event_is_what_it_was() -> None:
    """The start event the runtime sends is the one `start_event` gives (a sanity anchor for
    the ids the tests above complete by name)."""
    assert start_event("r1") == Event("r1/started", "execution.started", "system")
