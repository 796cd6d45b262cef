"""Tests of the pure core `decide`: every transition of the refund workflow, the failure matrix
(timeouts, duplicates, invalid plans, approvals, compensation, budgets, cycles, guards,
determinism) and Hypothesis properties over random walks of events."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import driving
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from small_workflow import base as _base
from small_workflow import step_of as _step

from reference_machine import (
    APPROVAL_DENIED,
    APPROVAL_GRANTED,
    BUILTIN_EVENTS,
    COMPENSATION_FAILED,
    COMPENSATION_SUCCEEDED,
    STARTED,
    STEP_FAILED,
    STEP_SUCCEEDED,
    TIMER_FIRED,
    Accepted,
    CancelTimer,
    Category,
    Command,
    Decision,
    Event,
    Execution,
    Ignored,
    IgnoreReason,
    Rejected,
    RejectReason,
    RequestApproval,
    RunCompensation,
    RunEffect,
    ScheduleTimer,
    Source,
    Status,
    TimerPurpose,
    Transition,
    WorkflowDefinition,
    action_hash,
    decide,
    load_definition,
    new_execution,
    start_event,
)

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = Path(__file__).resolve().parents[1] / "data" / "workflows"
REFUND = load_definition(ROOT / "scenarios" / "refund_escalation.yaml")

SECOND = 1000
HOUR = 3_600_000
DAY = 24 * HOUR
XID = "r1"
ORDER = "o-1"
EMAIL = "a@example.com"
LOOKUP = {"order_id": ORDER, "amount": 50, "customer_email": EMAIL}
PLAN = {"amount": 40, "reason": "damaged"}
REFUND_OUT = {"refund_id": "rf-1"}
SETTLED = {"status": "succeeded"}
DEADLINE_ID = f"{XID}/deadline"
UNKNOWN_TYPE = "refund.teleported"
ALL_TYPES = sorted(BUILTIN_EVENTS | set(REFUND.events) | {UNKNOWN_TYPE})
SOURCES = [str(s) for s in Source] + ["mallory"]
CATEGORIES = [str(c) for c in Category]  # transient first: retryable failures keep runs going


# -- driving executions ---------------------------------------------------------------------------


class Run(driving.Run):
    """A refund run (by default) driven through `decide`."""

    def __init__(self, definition: WorkflowDefinition = REFUND, execution_id: str = XID,
                 context: Mapping[str, Any] | None = None) -> None:
        if context is None and definition is REFUND:
            context = {"order_id": ORDER}
        super().__init__(definition, execution_id, context)

    def ticket(self, payload: Mapping[str, Any] | None = None, source: str = "human") -> Event:
        return Event(self.next_id(), "ticket.updated", source,
                     {"note": "more details"} if payload is None else payload)


# The happy path into each refund state; each entry extends the previous one.
PATH: dict[str, Callable[[Run], Any]] = {
    "collecting_requirements": lambda run: run.start(),
    "planning": lambda run: run.apply(run.result(LOOKUP)),
    "awaiting_approval": lambda run: run.apply(run.result(PLAN, source="agent")),
    "executing_refund": lambda run: run.apply(run.approval()),
    "verifying": lambda run: run.apply(run.result(REFUND_OUT)),
    "notifying": lambda run: run.apply(run.result(SETTLED)),
}


def drive_to(state: str) -> Run:
    """Gives a refund run that has just entered `state` along the happy path."""
    run = Run()
    if state == "needs_human":
        run = drive_to("notifying")
        run.apply(run.failure("permanent"))
    elif state == "refunded":
        run = drive_to("notifying")
        run.apply(run.result({"message_id": "m-1"}))
    elif state == "rejected":
        run = drive_to("planning")
        run.apply(run.result({"amount": 80, "reason": "greedy"}, source="agent"))
    elif state == "failed":
        run = drive_to("collecting_requirements")
        run.apply(run.failure("permanent"))
    else:
        for name, step in PATH.items():
            step(run)
            if name == state:
                break
    assert run.ex.state == state
    return run


load_variant = driving.load_variant


# -- 1. every permitted transition of the refund workflow --------------------------------------


def _triples(definition: WorkflowDefinition) -> list[tuple[str, str, str]]:
    return [(name, event, transition.target_leaf)
            for name, state in definition.states.items()
            for event, transitions in state.on.items()
            for transition in transitions]


TRIPLES = _triples(REFUND)

# (state, event, target) -> the event that takes that transition from a run just in `state`.
TRIGGERS: dict[tuple[str, str, str], Callable[[Run], Event]] = {
    ("collecting_requirements", STEP_SUCCEEDED, "planning"): lambda r: r.result(LOOKUP),
    ("collecting_requirements", STEP_FAILED, "failed"): lambda r: r.failure("permanent"),
    ("planning", STEP_SUCCEEDED, "rejected"):
        lambda r: r.result({"amount": 80, "reason": "x"}, source="agent"),
    ("planning", STEP_SUCCEEDED, "awaiting_approval"): lambda r: r.result(PLAN, source="agent"),
    ("planning", STEP_FAILED, "failed"): lambda r: r.failure("permanent", source="agent"),
    ("awaiting_approval", APPROVAL_GRANTED, "executing_refund"): lambda r: r.approval(),
    ("awaiting_approval", APPROVAL_DENIED, "rejected"):
        lambda r: r.approval(APPROVAL_DENIED, role="finance_lead"),
    ("awaiting_approval", "ticket.updated", "planning"): lambda r: r.ticket(),
    ("executing_refund", STEP_SUCCEEDED, "verifying"): lambda r: r.result(REFUND_OUT),
    ("executing_refund", STEP_FAILED, "failed"): lambda r: r.failure("permanent"),
    ("verifying", STEP_SUCCEEDED, "notifying"): lambda r: r.result(SETTLED),
    ("verifying", STEP_SUCCEEDED, "failed"): lambda r: r.result({"status": "failed"}),
    ("verifying", STEP_FAILED, "failed"): lambda r: r.failure("permanent"),
    ("notifying", STEP_SUCCEEDED, "refunded"): lambda r: r.result({"message_id": "m-1"}),
    ("notifying", STEP_FAILED, "needs_human"): lambda r: r.failure("permanent"),
    ("needs_human", "ticket.updated", "refunded"): lambda r: r.ticket(),
}

# What each step state runs, written out from the YAML: tool, timeout, idempotent, input.
STEP_ENTRY: dict[str, tuple[str, int, bool, Callable[[Mapping[str, Any]], dict[str, Any]]]] = {
    "collecting_requirements": ("crm.lookup_order", 10 * SECOND, True,
                                lambda c: {"order_id": c["order_id"]}),
    "planning": ("agent.plan_refund", 60 * SECOND, True,
                 lambda c: {"order_id": c["order_id"], "paid": c["amount"]}),
    "executing_refund": ("payments.refund", 30 * SECOND, True,
                         lambda c: {"order_id": c["order_id"], "amount": c["amount"],
                                    "currency": c["currency"]}),
    "verifying": ("payments.get_refund", 10 * SECOND, True,
                  lambda c: {"refund_id": c["refund_id"]}),
    "notifying": ("email.send", 15 * SECOND, False,
                  lambda c: {"to": c["customer_email"], "template": "refund_issued"}),
}
EVIDENCE = ("order_id", "amount", "currency", "reason", "customer_email")


def expected_entry(before: Execution, target: str, context: Mapping[str, Any],
                   now: int) -> tuple[Command, ...]:
    """Gives the commands of leaving `before.state` for `target`, written out by hand."""
    cancels = tuple(CancelTimer(t.id) for t in before.timers
                    if t.purpose != TimerPurpose.DEADLINE)
    visit = before.visits.get(target, 0) + 1
    if REFUND.states[target].final:
        return (*cancels, CancelTimer(DEADLINE_ID))
    if target in STEP_ENTRY:
        tool, timeout, idempotent, make_input = STEP_ENTRY[target]
        key = f"{XID}/{target}/{visit}"
        return (*cancels,
                RunEffect(f"{key}#1", key, target, tool, make_input(context), 1, timeout,
                          idempotent),
                ScheduleTimer(f"{key}#1/timeout", TimerPurpose.STEP_TIMEOUT, now + timeout))
    if target == "awaiting_approval":
        request_id = f"{XID}/awaiting_approval/{visit}/approval"
        expires = now + DAY
        summary = (f"Refund {context['amount']} {context['currency']} on order "
                   f"{context['order_id']}: {context['reason']}")
        return (*cancels,
                RequestApproval(request_id, "awaiting_approval", "executing_refund", summary,
                                {k: context[k] for k in EVIDENCE},
                                ("finance_lead", "supervisor"),
                                action_hash(REFUND, "executing_refund", context), expires),
                ScheduleTimer(f"{request_id}/expiry", TimerPurpose.APPROVAL_EXPIRY, expires))
    assert target == "needs_human"
    return (*cancels, ScheduleTimer(f"{XID}/needs_human/{visit}/after",
                                    TimerPurpose.WAIT_TIMEOUT, now + 3 * DAY))


def test_enumerated_transitions_are_exactly_the_triggers_table():
    """The (state, event, target) triples compiled from the refund workflow all have a trigger."""
    assert sorted(TRIPLES) == sorted(TRIGGERS)
    assert len(TRIPLES) == 16


@pytest.mark.parametrize(("state", "event", "target"), TRIPLES,
                         ids=[f"{s}--{e}->{t}" for s, e, t in TRIPLES])
@pytest.mark.smoke
def test_permitted_transition(state: str, event: str, target: str):
    """Each permitted transition is Accepted, lands in its target and emits its entry commands."""
    run = drive_to(state)
    run.now = 5 * SECOND
    before = run.ex
    trigger = TRIGGERS[(state, event, target)](run)
    decision = run.decide(trigger)
    assert isinstance(decision, Accepted), decision
    after = decision.execution
    if (state, event) == ("verifying", STEP_FAILED):
        # money moved in executing_refund, so exhaustion undoes it before going to `failed`
        assert decision.transition is None
        assert after.status == Status.COMPENSATING
        assert after.state == "verifying"
        assert after.after_compensation == "failed"
        key = f"{XID}/executing_refund/1"
        assert decision.commands == (
            CancelTimer(f"{XID}/verifying/1#1/timeout"),
            RunCompensation(f"{key}/undo#1", f"{key}/undo", "executing_refund",
                            "payments.void_refund", {"order_id": ORDER}, 1, key, True),
        )
        run.ex = after
        before = after
        trigger = run.compensation()
        decision = run.apply(trigger)
        assert decision.transition == Transition(state, COMPENSATION_SUCCEEDED, target,
                                                 "compensated")
        after = decision.execution
    else:
        assert decision.transition == Transition(state, event, target, "")
    assert after.state == target
    compiled = REFUND.states[target]
    expected_status = (Status.FINAL if compiled.final
                       else Status.WAITING if compiled.kind == "wait" else Status.RUNNING)
    assert after.status == expected_status
    assert after.outcome == compiled.outcome
    assert after.sequence == before.sequence + 1
    assert after.visits[target] == before.visits.get(target, 0) + 1
    assert after.last_event_id == trigger.id
    assert decision.commands == expected_entry(before, target, after.context, run.now)


def test_transition_actions_assign_context():
    """The assign actions copy the looked-up order and the plan into the context."""
    run = drive_to("awaiting_approval")
    assert dict(run.ex.context) == {"order_id": ORDER, "amount": 40, "currency": "EUR",
                                    "customer_email": EMAIL, "reason": "damaged"}
    run.apply(run.approval())
    run.apply(run.result(REFUND_OUT))
    assert run.ex.context["refund_id"] == "rf-1"


def test_step_entry_command_literals():
    """The refund's RunEffect carries the literal key, effect id and input, with approval used."""
    run = drive_to("awaiting_approval")
    decision = run.apply(run.approval())
    effect = [c for c in decision.commands if isinstance(c, RunEffect)]
    assert effect == [RunEffect("r1/executing_refund/1#1", "r1/executing_refund/1",
                                "executing_refund", "payments.refund",
                                {"order_id": "o-1", "amount": 40, "currency": "EUR"}, 1, 30_000,
                                True)]
    assert run.ex.approved == ()
    assert run.ex.approval is None


def test_action_hash_is_sha256_of_canonical_action():
    """The approval's action hash is the SHA-256 of the canonical {state, tool, input} JSON."""
    run = drive_to("awaiting_approval")
    canonical = json.dumps({"state": "executing_refund", "tool": "payments.refund",
                            "input": {"order_id": ORDER, "amount": 40, "currency": "EUR"}},
                           sort_keys=True, separators=(",", ":"))
    assert run.ex.approval.action_hash == hashlib.sha256(canonical.encode()).hexdigest()


def test_action_hash_of_state_without_step_raises():
    """`action_hash` refuses a state that runs no step."""
    with pytest.raises(ValueError, match="runs no step"):
        action_hash(REFUND, "awaiting_approval", {})


@pytest.mark.smoke
def test_start_runs_initial_step_and_deadline():
    """Starting schedules the deadline, runs the initial step and merges the start payload."""
    ex = new_execution(REFUND, XID, context={"order_id": ORDER})
    decision = decide(REFUND, ex, start_event(XID, {"reason": "late"}), 7)
    assert isinstance(decision, Accepted)
    assert decision.transition == Transition("", STARTED, "collecting_requirements", "")
    assert decision.execution.context["reason"] == "late"
    assert decision.execution.started_at == 7
    key = f"{XID}/collecting_requirements/1"
    assert decision.commands == (
        ScheduleTimer(DEADLINE_ID, TimerPurpose.DEADLINE, 7 + 7 * DAY),
        RunEffect(f"{key}#1", key, "collecting_requirements", "crm.lookup_order",
                  {"order_id": ORDER}, 1, 10_000, True),
        ScheduleTimer(f"{key}#1/timeout", TimerPurpose.STEP_TIMEOUT, 7 + 10_000),
    )


def test_second_start_is_ignored_duplicate():
    """A second `execution.started` (new id) on a running execution is Ignored duplicate."""
    run = drive_to("planning")
    decision = run.decide(Event("again", STARTED, "system"))
    assert isinstance(decision, Ignored)
    assert decision.reason == IgnoreReason.DUPLICATE


def test_wait_timeout_leaves_needs_human_for_failed():
    """needs_human's `after` timer (not an `on` transition) moves the run to failed."""
    run = drive_to("needs_human")
    decision = run.fire(TimerPurpose.WAIT_TIMEOUT)
    assert decision.transition == Transition("needs_human", TIMER_FIRED, "failed", "")
    assert run.ex.status == Status.FINAL
    assert run.ex.outcome == "failure"


def test_approval_expiry_escalates_to_needs_human():
    """The approval's expiry timer escalates (on_expiry: escalate) to needs_human, forced."""
    run = drive_to("awaiting_approval")
    decision = run.fire(TimerPurpose.APPROVAL_EXPIRY)
    assert decision.transition == Transition("awaiting_approval", TIMER_FIRED, "needs_human",
                                             "approval_expired")
    assert run.ex.approval is None
    assert run.ex.status == Status.WAITING


# -- 1b. rejections per state -------------------------------------------------------------------

NON_FINAL = [name for name, state in REFUND.states.items() if not state.final]
FINAL = list(REFUND.final_states)
ILLEGAL = [(name, event) for name in NON_FINAL for event in REFUND.events
           if event not in REFUND.states[name].on]


def test_illegal_pairs_cover_every_state_without_ticket_transition():
    """The declared-event illegal pairs are the five step states (ticket.updated unhandled)."""
    assert sorted(s for s, _ in ILLEGAL) == sorted(
        ["collecting_requirements", "planning", "executing_refund", "verifying", "notifying"])


@pytest.mark.parametrize(("state", "event"), ILLEGAL)
def test_declared_event_without_transition_is_illegal(state: str, event: str):
    """A declared event with no transition in the current state is Rejected illegal."""
    run = drive_to(state)
    decision = run.decide(run.ticket())
    assert decision == Rejected(RejectReason.ILLEGAL,
                                f"no transition for {event!r} in state {state!r}")


@pytest.mark.parametrize("state", NON_FINAL)
def test_undeclared_event_is_unknown_event(state: str):
    """An event type the workflow does not declare is Rejected unknown_event in every state."""
    run = drive_to(state)
    decision = run.decide(Event("x", UNKNOWN_TYPE, "human", {}))
    assert isinstance(decision, Rejected)
    assert decision.reason == RejectReason.UNKNOWN_EVENT
    assert UNKNOWN_TYPE in decision.detail


@pytest.mark.parametrize("state", FINAL)
@pytest.mark.parametrize("event_type", ALL_TYPES)
@pytest.mark.smoke
def test_final_state_rejects_everything_as_terminal(state: str, event_type: str):
    """A final execution Rejects every event type, declared, built-in or unknown, as terminal."""
    run = drive_to(state)
    decision = run.decide(Event("late", event_type, "system", {}, ""), at=run.now + HOUR)
    assert isinstance(decision, Rejected)
    assert decision.reason == RejectReason.TERMINAL


def test_event_before_start_is_illegal():
    """Before `execution.started` every other event is Rejected illegal."""
    ex = new_execution(REFUND, XID)
    decision = decide(REFUND, ex, Event("t", "ticket.updated", "human", {}), 0)
    assert isinstance(decision, Rejected)
    assert decision.reason == RejectReason.ILLEGAL
    assert "has not started" in decision.detail


def test_external_event_while_compensating_is_illegal():
    """A declared event during compensation is Rejected illegal: it must wait."""
    run = drive_to("verifying")
    run.apply(run.failure("permanent"))
    assert run.ex.status == Status.COMPENSATING
    decision = run.decide(run.ticket())
    assert isinstance(decision, Rejected)
    assert decision.reason == RejectReason.ILLEGAL
    assert "compensating" in decision.detail


def test_declared_event_from_wrong_source_is_unauthorized():
    """ticket.updated from an agent (allowed: human, system) is Rejected unauthorized."""
    run = drive_to("awaiting_approval")
    decision = run.decide(run.ticket(source="agent"))
    assert isinstance(decision, Rejected)
    assert decision.reason == RejectReason.UNAUTHORIZED


def test_declared_event_with_bad_payload_is_invalid_payload():
    """ticket.updated whose payload breaks its schema is Rejected invalid_payload."""
    run = drive_to("awaiting_approval")
    decision = run.decide(run.ticket({"note": 5}))
    assert isinstance(decision, Rejected)
    assert decision.reason == RejectReason.INVALID_PAYLOAD


@pytest.mark.parametrize("state", ["awaiting_approval", "needs_human"])
def test_step_result_with_no_pending_effect_is_ignored_late(state: str):
    """A step result in a state that runs no step answers nothing pending: Ignored late."""
    run = drive_to(state)
    decision = run.decide(Event("x", STEP_SUCCEEDED, "tool", {}, f"{XID}/{state}/1#1"))
    assert isinstance(decision, Ignored)
    assert decision.reason == IgnoreReason.LATE


def test_step_result_from_human_is_unauthorized():
    """A step result from a human (not tool, agent or system) is Rejected unauthorized."""
    run = drive_to("executing_refund")
    decision = run.decide(run.result(REFUND_OUT, source="human"))
    assert isinstance(decision, Rejected)
    assert decision.reason == RejectReason.UNAUTHORIZED


def test_timer_from_agent_is_unauthorized():
    """A timer.fired from an agent is Rejected unauthorized, even for a real timer id."""
    run = drive_to("executing_refund")
    event, _ = run.fired(TimerPurpose.STEP_TIMEOUT)
    decision = run.decide(event._replace(source="agent"))
    assert isinstance(decision, Rejected)
    assert decision.reason == RejectReason.UNAUTHORIZED


def test_step_failed_without_category_is_invalid_payload():
    """step.failed needs a payload.category from the Category enum."""
    run = drive_to("executing_refund")
    decision = run.decide(run.result({"category": "cosmic_ray"}, ok=False))
    assert isinstance(decision, Rejected)
    assert decision.reason == RejectReason.INVALID_PAYLOAD
    assert "cosmic_ray" in decision.detail


@pytest.mark.parametrize("category", [["timeout"], {"kind": "timeout"}, 5, None])
def test_step_failed_with_non_string_category_is_invalid_payload(category: Any):
    """step.failed with a list, object or number as category is invalid_payload, not a crash."""
    run = drive_to("executing_refund")
    decision = run.decide(run.result({"category": category}, ok=False))
    assert isinstance(decision, Rejected)
    assert decision.reason == RejectReason.INVALID_PAYLOAD


@pytest.mark.parametrize("category", [["transient"], {"a": 1}])
def test_compensation_failed_with_non_string_category_is_not_retried(category: Any):
    """compensation.failed with an unhashable category is a non-retryable failure, no crash."""
    run = drive_to("verifying")
    run.apply(run.failure("permanent"))
    decision = run.apply(run.compensation()._replace(type=COMPENSATION_FAILED,
                                                     payload={"category": category}))
    assert decision.transition.forced == "compensation_failed"


# -- 2. failure matrix: tool timeouts -----------------------------------------------------------


@pytest.mark.smoke
def test_tool_timeout_retries_with_same_key_and_new_attempt():
    """A payments.refund timeout schedules a policy backoff, then retries under the same key."""
    run = drive_to("executing_refund")
    key = f"{XID}/executing_refund/1"
    event, at = run.fired(TimerPurpose.STEP_TIMEOUT)
    assert at == 30 * SECOND
    decision = run.apply(event, at=at, entropy=0.5)
    # delay_initial 1s, jitter 0.5: 1000 * (1 - 0.5 + 2 * 0.5 * 0.5) = 1000
    assert decision.commands == (
        ScheduleTimer(f"{key}/retry/1", TimerPurpose.RETRY, at + 1000),)
    assert decision.transition is None
    assert run.ex.effect is None
    assert run.ex.attempt == 1
    assert run.ex.answered == f"{XID}/planning/1#1"  # a timeout answers nothing
    assert run.ex.state == "executing_refund"
    decision = run.fire(TimerPurpose.RETRY)
    assert decision.commands == (
        RunEffect(f"{key}#2", key, "executing_refund", "payments.refund",
                  {"order_id": ORDER, "amount": 40, "currency": "EUR"}, 2, 30_000, True),
        ScheduleTimer(f"{key}#2/timeout", TimerPurpose.STEP_TIMEOUT, run.now + 30_000),
    )
    assert run.ex.effect.key == key
    assert run.ex.effect.effect_id == f"{key}#2"
    assert run.ex.attempt == 2


def test_tool_reported_timeout_cancels_step_timer_and_backs_off_exponentially():
    """A tool-reported timeout cancels the step timer; the second delay doubles (multiplier 2)."""
    run = drive_to("executing_refund")
    key = f"{XID}/executing_refund/1"
    decision = run.apply(run.failure("timeout"), entropy=0.5)
    assert decision.commands == (
        CancelTimer(f"{key}#1/timeout"),
        ScheduleTimer(f"{key}/retry/1", TimerPurpose.RETRY, run.now + 1000),
    )
    run.fire(TimerPurpose.RETRY)
    decision = run.apply(run.failure("timeout"), entropy=0.5)
    assert decision.commands[-1] == ScheduleTimer(f"{key}/retry/2", TimerPurpose.RETRY,
                                                  run.now + 2000)


@pytest.mark.parametrize(("entropy", "delay"), [(0.0, 400), (0.5, 500), (0.99, 598)])
def test_backoff_jitter_follows_policy(entropy: float, delay: int):
    """collecting_requirements' first retry waits 500ms +-20% jitter, drawn from entropy."""
    run = drive_to("collecting_requirements")
    decision = run.apply(run.failure("transient"), entropy=entropy)
    assert decision.commands[-1] == ScheduleTimer(
        f"{XID}/collecting_requirements/1/retry/1", TimerPurpose.RETRY, run.now + delay)


def test_backoff_is_capped_by_delay_max():
    """Delays double from delay_initial (1s) and stop at delay_max (3s): 1s, 2s, 3s, 3s."""
    run = Run(load_definition(WORKFLOWS / "retry_cap.yaml"), "c1")
    run.start()
    delays = []
    for attempt in range(1, 5):
        decision = run.apply(run.failure("transient"), entropy=0.9)
        timer = decision.commands[-1]
        assert timer.timer_id == f"c1/call/1/retry/{attempt}"
        delays.append(timer.fire_at - run.now)
        run.fire(TimerPurpose.RETRY)
    assert delays == [1000, 2000, 3000, 3000]
    decision = run.apply(run.failure("transient"))
    assert decision.transition == Transition("call", STEP_FAILED, "failed", "")


def test_timeout_retries_exhausted_take_step_failed():
    """Three timeouts of the lookup (attempts_max 3) end in step.failed -> failed."""
    run = drive_to("collecting_requirements")
    for _ in range(2):
        run.fire(TimerPurpose.STEP_TIMEOUT)
        run.fire(TimerPurpose.RETRY)
    decision = run.fire(TimerPurpose.STEP_TIMEOUT)
    assert decision.transition == Transition("collecting_requirements", STEP_FAILED, "failed",
                                             "")
    assert run.ex.outcome == "failure"
    assert run.ex.answered == ""  # no attempt was ever answered


def test_timeout_of_tool_without_idempotency_keys_escalates():
    """email.send does not honour keys: its timeout is never retried blind, it escalates."""
    run = drive_to("notifying")
    decision = run.fire(TimerPurpose.STEP_TIMEOUT)
    # the timer becomes a timeout failure, so the transition is labelled step.failed
    assert decision.transition == Transition("notifying", STEP_FAILED, "needs_human",
                                             "ambiguous_failure")
    assert not any(isinstance(c, RunEffect) for c in decision.commands)
    assert not any(c.purpose == TimerPurpose.RETRY for c in decision.commands
                   if isinstance(c, ScheduleTimer))
    assert run.ex.effect is None
    assert run.ex.status == Status.WAITING


def test_reported_timeout_of_tool_without_idempotency_keys_escalates():
    """A step.failed timeout from email.send escalates too, with attempts left."""
    run = drive_to("notifying")
    decision = run.apply(run.failure("timeout"))
    assert decision.transition == Transition("notifying", STEP_FAILED, "needs_human",
                                             "ambiguous_failure")
    assert run.ex.answered == f"{XID}/notifying/1#1"  # the tool did answer


def test_transient_failure_of_tool_without_keys_is_retried():
    """A transient failure of email.send is unambiguous (nothing was sent): it is retried."""
    run = drive_to("notifying")
    decision = run.apply(run.failure("transient"))
    assert decision.transition is None
    assert isinstance(decision.commands[-1], ScheduleTimer)
    assert decision.commands[-1].purpose == TimerPurpose.RETRY


def test_stale_step_timeout_timer_is_ignored():
    """A step-timeout timer of an attempt already answered is Ignored, not a failure."""
    run = drive_to("executing_refund")
    old = run.timer(TimerPurpose.STEP_TIMEOUT)
    run.apply(run.result(REFUND_OUT))
    decision = run.decide(Event("t", TIMER_FIRED, "timer", {}, old.id), at=old.fire_at)
    assert isinstance(decision, Ignored)
    assert decision.reason == IgnoreReason.LATE


# -- 2. failure matrix: duplicate and late results ---------------------------------------------


def test_duplicate_tool_result_is_ignored_duplicate():
    """A second delivery of the same result (new event id) is Ignored duplicate."""
    run = drive_to("executing_refund")
    first = run.result(REFUND_OUT)
    run.apply(first)
    decision = run.decide(first._replace(id="redelivered"))
    assert isinstance(decision, Ignored)
    assert decision.reason == IgnoreReason.DUPLICATE
    assert "already answered" in decision.detail


@pytest.mark.smoke
def test_redelivered_event_id_is_ignored_duplicate():
    """The very same event delivered twice is Ignored duplicate by its id."""
    run = drive_to("executing_refund")
    first = run.result(REFUND_OUT)
    run.apply(first)
    decision = run.decide(first)
    assert decision == Ignored(IgnoreReason.DUPLICATE,
                               f"event {first.id!r} was the last one applied")


def test_result_for_old_attempt_is_ignored_late():
    """After attempt 2 answered, a result for attempt 1 is Ignored late and changes nothing."""
    run = drive_to("executing_refund")
    old = f"{XID}/executing_refund/1#1"
    run.apply(run.failure("transient"))
    run.fire(TimerPurpose.RETRY)
    run.apply(run.failure("transient"))
    assert run.ex.answered == f"{XID}/executing_refund/1#2"
    decision = run.decide(run.result(REFUND_OUT, answers=old))
    assert isinstance(decision, Ignored)
    assert decision.reason == IgnoreReason.LATE


def test_result_while_retry_pending_is_ignored():
    """A success for the failed attempt while its retry waits is Ignored (already answered)."""
    run = drive_to("executing_refund")
    run.apply(run.failure("rate_limited"))
    decision = run.decide(run.result(REFUND_OUT, answers=f"{XID}/executing_refund/1#1"))
    assert isinstance(decision, Ignored)
    assert decision.reason == IgnoreReason.DUPLICATE


def test_result_of_timed_out_attempt_is_ignored_late():
    """The tool's result for an attempt that timed out (never answered) is Ignored late."""
    run = drive_to("executing_refund")
    run.fire(TimerPurpose.STEP_TIMEOUT)
    run.fire(TimerPurpose.RETRY)
    decision = run.decide(run.result(REFUND_OUT, answers=f"{XID}/executing_refund/1#1"))
    assert isinstance(decision, Ignored)
    assert decision.reason == IgnoreReason.LATE


def test_result_with_junk_answer_is_ignored_late():
    """A result answering an id that was never issued is Ignored late."""
    run = drive_to("executing_refund")
    decision = run.decide(run.result(REFUND_OUT, answers="nobody#9"))
    assert isinstance(decision, Ignored)
    assert decision.reason == IgnoreReason.LATE


# -- 2. failure matrix: invalid plan ------------------------------------------------------------


def test_invalid_plan_counts_as_invalid_output_and_is_retried():
    """An agent plan failing the output schema is an invalid_output failure, retried."""
    run = drive_to("planning")
    key = f"{XID}/planning/1"
    decision = run.apply(run.result({"amount": "lots"}, source="agent"))
    assert decision.transition is None
    # planning has jitter 0: delay_initial (default 1s) exactly
    assert decision.commands == (
        CancelTimer(f"{key}#1/timeout"),
        ScheduleTimer(f"{key}/retry/1", TimerPurpose.RETRY, run.now + 1000),
    )
    assert run.ex.context["amount"] == 50  # the bad plan was not applied
    assert run.ex.answered == f"{key}#1"
    decision = run.fire(TimerPurpose.RETRY)
    assert decision.commands[0] == RunEffect(f"{key}#2", key, "planning", "agent.plan_refund",
                                             {"order_id": ORDER, "paid": 50}, 2, 60_000, True)


def test_invalid_plan_exhaustion_takes_step_failed():
    """Three invalid plans (attempts_max 3) take planning's step.failed transition to failed."""
    run = drive_to("planning")
    for _ in range(2):
        run.apply(run.result({"amount": -1, "reason": ""}, source="agent"))
        run.fire(TimerPurpose.RETRY)
    decision = run.apply(run.result({"reason": "no amount"}, source="agent"))
    assert decision.transition == Transition("planning", STEP_FAILED, "failed", "")
    assert run.ex.status == Status.FINAL
    assert run.ex.outcome == "failure"


def test_invalid_output_not_retried_when_not_in_retry_on():
    """The lookup's invalid output is not in its retry_on: it takes step.failed at once."""
    run = drive_to("collecting_requirements")
    decision = run.apply(run.result({"order_id": ORDER}))
    assert decision.transition == Transition("collecting_requirements", STEP_FAILED, "failed",
                                             "")


def test_plan_guard_rejects_overpaying_plan():
    """A valid plan refunding more than was paid takes the guarded transition to rejected."""
    run = drive_to("planning")
    decision = run.apply(run.result({"amount": 50.01, "reason": "x"}, source="agent"))
    assert decision.transition == Transition("planning", STEP_SUCCEEDED, "rejected", "")
    assert run.ex.outcome == "rejected"


# -- 2. failure matrix: approvals ---------------------------------------------------------------


def test_approval_denied_goes_to_rejected():
    """A supervisor's denial of the current request rejects the refund; no money moves."""
    run = drive_to("awaiting_approval")
    decision = run.apply(run.approval(APPROVAL_DENIED))
    assert decision.transition == Transition("awaiting_approval", APPROVAL_DENIED, "rejected",
                                             "")
    assert not any(isinstance(c, RunEffect) for c in decision.commands)
    assert run.ex.outcome == "rejected"
    assert run.ex.approved == ()


def test_grant_after_expiry_timer_fired_is_ignored():
    """After the expiry timer escalated, a grant of the old request is Ignored (not current)."""
    run = drive_to("awaiting_approval")
    grant = run.approval()
    run.fire(TimerPurpose.APPROVAL_EXPIRY)
    decision = run.decide(grant)
    assert isinstance(decision, Ignored)
    assert decision.reason == IgnoreReason.STALE


def test_grant_past_expires_at_is_ignored_late():
    """A grant at a time past expires_at (expiry timer not yet delivered) is Ignored late."""
    run = drive_to("awaiting_approval")
    expires = run.ex.approval.expires_at
    decision = run.decide(run.approval(), at=expires + 1)
    assert decision == Ignored(IgnoreReason.LATE, f"approval request "
                               f"{run.ex.approval.request_id!r} expired at {expires}")


def test_grant_at_expires_at_is_accepted():
    """A grant exactly at expires_at is still in time."""
    run = drive_to("awaiting_approval")
    decision = run.decide(run.approval(), at=run.ex.approval.expires_at)
    assert isinstance(decision, Accepted)
    assert decision.execution.state == "executing_refund"


@pytest.mark.smoke
def test_approval_from_agent_is_unauthorized():
    """An agent forging a grant (right role, hash and request) is Rejected unauthorized."""
    run = drive_to("awaiting_approval")
    decision = run.decide(run.approval(source="agent"))
    assert isinstance(decision, Rejected)
    assert decision.reason == RejectReason.UNAUTHORIZED
    assert "only from a human" in decision.detail


def test_approval_with_wrong_role_is_unauthorized():
    """A human whose role is not among the request's roles cannot approve."""
    run = drive_to("awaiting_approval")
    decision = run.decide(run.approval(role="intern"))
    assert isinstance(decision, Rejected)
    assert decision.reason == RejectReason.UNAUTHORIZED
    assert "intern" in decision.detail


def test_approval_of_changed_action_is_unauthorized():
    """A grant signing a different action (a bigger amount) is Rejected unauthorized."""
    run = drive_to("awaiting_approval")
    bigger = action_hash(REFUND, "executing_refund", {**run.ex.context, "amount": 4000})
    assert bigger != run.ex.approval.action_hash
    decision = run.decide(run.approval(action=bigger))
    assert isinstance(decision, Rejected)
    assert decision.reason == RejectReason.UNAUTHORIZED
    assert "not the requested action" in decision.detail


def test_approval_of_stale_request_is_ignored():
    """A grant answering the previous request (before a re-plan) is Ignored stale."""
    run = drive_to("awaiting_approval")
    old = run.ex.approval
    run.apply(run.ticket())
    run.apply(run.result(PLAN, source="agent"))
    assert run.ex.approval.request_id == f"{XID}/awaiting_approval/2/approval"
    decision = run.decide(run.approval(action=old.action_hash, answers=old.request_id))
    assert isinstance(decision, Ignored)
    assert decision.reason == IgnoreReason.STALE


def test_approval_with_expiry_deny_takes_denied():
    """With on_expiry: deny, the expiry timer takes approval.denied (gated workflow)."""
    definition = load_definition(WORKFLOWS / "gated.yaml")
    run = Run(definition, "g1")
    run.start()
    run.apply(Event("s", "submit", "human"))
    decision = run.fire(TimerPurpose.APPROVAL_EXPIRY)
    assert decision.transition == Transition("asking", APPROVAL_DENIED, "abandoned", "")
    assert run.ex.outcome == "failure"


def test_needs_approval_step_without_grant_is_unauthorized():
    """Entering a needs_approval step by a shortcut, with no granted approval, is Rejected."""
    definition = load_definition(WORKFLOWS / "gated.yaml")
    run = Run(definition, "g1")
    run.start()
    decision = run.decide(Event("s", "shortcut", "human"))
    assert isinstance(decision, Rejected)
    assert decision.reason == RejectReason.UNAUTHORIZED
    assert "needs an approval" in decision.detail


def test_needs_approval_step_with_grant_runs_and_consumes_it():
    """Through its approval state the gated step runs, and the grant is used up."""
    definition = load_definition(WORKFLOWS / "gated.yaml")
    run = Run(definition, "g1")
    run.start()
    run.apply(Event("s", "submit", "human"))
    decision = run.apply(run.approval(role="boss"))
    assert decision.commands[-1] == RunEffect("g1/paying/1#1", "g1/paying/1", "paying",
                                              "pay.out", {"amount": 10}, 1, None, True)
    assert run.ex.approved == ()


# -- 2. failure matrix: compensation ------------------------------------------------------------


def _compensating_refund() -> Run:
    run = drive_to("verifying")
    run.apply(run.failure("permanent"))
    assert run.ex.status == Status.COMPENSATING
    return run


def test_compensation_permanent_failure_goes_to_needs_human():
    """A void that fails permanently goes to compensation_failed (needs_human), forced."""
    run = _compensating_refund()
    decision = run.apply(run.compensation("permanent"))
    assert decision.transition == Transition("verifying", COMPENSATION_FAILED, "needs_human",
                                             "compensation_failed")
    assert run.ex.state == "needs_human"
    assert run.ex.status == Status.WAITING
    assert run.ex.compensating == ()
    assert run.ex.effect is None
    assert [s.state for s in run.ex.completed] == ["executing_refund"]  # still not undone
    assert decision.commands == (ScheduleTimer(f"{XID}/needs_human/1/after",
                                               TimerPurpose.WAIT_TIMEOUT, run.now + 3 * DAY),)


def test_compensation_retryable_failure_is_retried_via_timer():
    """A transient void failure schedules a retry timer; firing it runs attempt 2."""
    run = _compensating_refund()
    key = f"{XID}/executing_refund/1/undo"
    decision = run.apply(run.compensation("transient"))
    assert decision.transition is None
    assert decision.commands == (ScheduleTimer(f"{key}/retry/1", TimerPurpose.RETRY,
                                               run.now + 1000),)
    assert run.ex.status == Status.COMPENSATING
    assert run.ex.effect is None
    decision = run.fire(TimerPurpose.RETRY)
    assert decision.commands == (RunCompensation(f"{key}#2", key, "executing_refund",
                                                 "payments.void_refund", {"order_id": ORDER}, 2,
                                                 f"{XID}/executing_refund/1", True),)
    decision = run.apply(run.compensation("timeout"))
    assert decision.commands == (ScheduleTimer(f"{key}/retry/2", TimerPurpose.RETRY,
                                               run.now + 2000),)


def test_compensation_retries_exhausted_goes_to_needs_human():
    """The third retryable void failure (attempts_max 3) goes to needs_human."""
    run = _compensating_refund()
    for _ in range(2):
        run.apply(run.compensation("rate_limited"))
        run.fire(TimerPurpose.RETRY)
    decision = run.apply(run.compensation("transient"))
    assert decision.transition.target == "needs_human"
    assert decision.transition.forced == "compensation_failed"


def test_compensation_success_then_duplicate_is_ignored():
    """A redelivered compensation.succeeded after the run ended is Rejected terminal."""
    run = _compensating_refund()
    done = run.compensation()
    run.apply(done)
    assert run.ex.outcome == "failure"
    decision = run.decide(done._replace(id="again"))
    assert isinstance(decision, Rejected)
    assert decision.reason == RejectReason.TERMINAL


def _saga_until_compensation() -> tuple[Run, Accepted]:
    run = Run(load_definition(WORKFLOWS / "saga.yaml"), "s1")
    run.start()
    run.apply(run.result({"debit_id": "d-1"}))
    run.apply(run.result({"reservation_id": "res-9"}))
    run.apply(run.failure("transient"))
    run.fire(TimerPurpose.RETRY)
    return run, run.apply(run.failure("transient"))


def test_compensations_run_in_reverse_completion_order():
    """Exhausting dispatch undoes reserve then debit (newest first), then goes to cancelled."""
    run, decision = _saga_until_compensation()
    assert decision.transition is None
    assert run.ex.status == Status.COMPENSATING
    assert run.ex.after_compensation == "cancelled"
    order = []
    while run.ex.status == Status.COMPENSATING:
        (command,) = [c for c in decision.commands if isinstance(c, RunCompensation)]
        order.append(command)
        decision = run.apply(run.compensation())
    assert [(c.state, c.tool, c.compensates, c.effect_id) for c in order] == [
        ("reserve", "stock.release", "s1/reserve/1", "s1/reserve/1/undo#1"),
        ("debit", "bank.credit_back", "s1/debit/1", "s1/debit/1/undo#1"),
    ]
    assert order[0].input == {"reservation": "res-9"}
    assert order[1].input == {"amount": 30}
    assert decision.transition == Transition("dispatch", COMPENSATION_SUCCEEDED, "cancelled",
                                             "compensated")
    assert run.ex.outcome == "cancelled"
    assert run.ex.completed == ()


def test_compensation_result_for_wrong_step_is_ignored():
    """While reserve is being undone, a result answering debit's undo is Ignored late."""
    run, _ = _saga_until_compensation()
    decision = run.decide(Event("x", COMPENSATION_SUCCEEDED, "tool", {}, "s1/debit/1/undo#1"))
    assert isinstance(decision, Ignored)
    assert decision.reason == IgnoreReason.LATE


def test_compensation_input_sees_the_steps_output():
    """reserve's compensation input `=context.reservation_id` gets the id reserve returned."""
    _, decision = _saga_until_compensation()
    (command,) = [c for c in decision.commands if isinstance(c, RunCompensation)]
    assert command.input == {"reservation": "res-9"}


# -- 2. failure matrix: budgets and cycles ------------------------------------------------------


def _loop(definition: WorkflowDefinition) -> Run:
    run = Run(definition, "b1")
    run.start()
    return run


def test_budget_transitions_max_forces_on_exceeded():
    """The transition past transitions_max is forced to on_exceeded, naming the budget."""
    run = _loop(load_variant("budget_loop", transitions_max=3))
    run.apply(run.failure("permanent"))
    run.apply(run.failure("permanent"))
    decision = run.apply(run.failure("permanent"))
    assert decision.transition == Transition("work", STEP_FAILED, "held", "transitions_max")
    assert run.ex.transitions == 4
    assert run.ex.state == "held"
    assert decision.commands == (ScheduleTimer("b1/held/1/after", TimerPurpose.WAIT_TIMEOUT,
                                               run.now + HOUR),)


def test_budget_visits_max_forces_on_exceeded():
    """The third entry into `work` with visits_max 2 is forced to on_exceeded."""
    run = _loop(load_variant("budget_loop", visits_max=2))
    run.apply(run.failure("permanent"))
    assert run.ex.visits["work"] == 2
    decision = run.apply(run.failure("permanent"))
    assert decision.transition == Transition("work", STEP_FAILED, "held", "visits_max")
    assert run.ex.visits["work"] == 2


def test_budget_cost_max_forces_on_exceeded():
    """Entering `work` (cost 0.5) a third time exceeds cost_max 1.0 and is forced away."""
    run = _loop(load_variant("budget_loop", cost_max=1.0))
    run.apply(run.failure("permanent"))
    assert run.ex.cost == 1.0
    decision = run.apply(run.failure("permanent"))
    assert decision.transition == Transition("work", STEP_FAILED, "held", "cost_max")
    assert run.ex.cost == 1.0
    assert not any(isinstance(c, RunEffect) for c in decision.commands)


def test_budget_deadline_timer_forces_on_exceeded():
    """The deadline timer forces the run to on_exceeded, cancelling the step's timers (and not
    the deadline timer itself, which has just fired)."""
    run = Run()
    run.start()
    decision = run.fire(TimerPurpose.DEADLINE)
    assert run.now == 7 * DAY
    assert decision.transition == Transition("collecting_requirements", TIMER_FIRED,
                                             "needs_human", "deadline")
    assert decision.commands == (
        CancelTimer(f"{XID}/collecting_requirements/1#1/timeout"),
        ScheduleTimer(f"{XID}/needs_human/1/after", TimerPurpose.WAIT_TIMEOUT,
                      run.now + 3 * DAY),
    )
    assert run.ex.effect is None
    assert run.ex.exceeded == "deadline"
    assert [t.purpose for t in run.ex.timers] == [TimerPurpose.WAIT_TIMEOUT]


def test_budget_deadline_is_enforced_by_its_timer_only():
    """A result at the deadline time, before the deadline timer arrives, takes its transition."""
    run = _loop(load_variant("budget_loop", deadline=HOUR / 1000))
    assert run.timer(TimerPurpose.DEADLINE).fire_at == HOUR
    decision = run.apply(run.result({}), at=HOUR)
    assert decision.transition == Transition("work", STEP_SUCCEEDED, "done", "")
    assert run.ex.outcome == "success"


def test_budget_deadline_timer_forces_loop_to_on_exceeded():
    """In the loop workflow the deadline timer forces `work` to `held`, naming the deadline."""
    run = _loop(load_variant("budget_loop", deadline=HOUR / 1000))
    decision = run.fire(TimerPurpose.DEADLINE)
    assert decision.transition == Transition("work", TIMER_FIRED, "held", "deadline")
    assert run.ex.exceeded == "deadline"


def test_exhausted_transition_budget_lets_on_exceeded_state_finish():
    """After being forced to `held`, held's after timer still ends the run in abandoned."""
    run = _loop(load_variant("budget_loop", transitions_max=3))
    for _ in range(3):
        run.apply(run.failure("permanent"))
    assert run.ex.state == "held"
    decision = run.fire(TimerPurpose.WAIT_TIMEOUT)
    assert decision.transition == Transition("held", TIMER_FIRED, "abandoned", "")
    assert run.ex.status == Status.FINAL


def test_exceeded_run_is_no_longer_budgeted():
    """Once transitions_max forced the run to `held`, a person's poke finishes it unforced."""
    run = _loop(load_variant("budget_loop", transitions_max=3))
    for _ in range(3):
        run.apply(run.failure("permanent"))
    assert run.ex.exceeded == "transitions_max"
    decision = run.apply(Event("p", "poke", "human"))
    assert decision.transition == Transition("held", "poke", "done", "")
    assert run.ex.transitions == 5
    assert run.ex.outcome == "success"


def test_deadline_lets_needs_human_finish():
    """After the deadline escalated to needs_human, a person can still finish the run."""
    run = Run()
    run.start()
    run.fire(TimerPurpose.DEADLINE)
    assert run.ex.state == "needs_human"
    decision = run.apply(run.ticket(), at=run.now + HOUR)
    assert decision.transition == Transition("needs_human", "ticket.updated", "refunded", "")
    assert run.ex.outcome == "success"


def test_unknown_event_after_deadline_is_still_unknown():
    """After the deadline an undeclared event type is still Rejected unknown_event."""
    run = Run()
    run.start()
    decision = run.decide(Event("x", UNKNOWN_TYPE, "mallory", {}), at=7 * DAY)
    assert isinstance(decision, Rejected)
    assert decision.reason == RejectReason.UNKNOWN_EVENT


def test_cycle_detected_forces_on_cycle():
    """The same (state, event, error) seen cycle_threshold times forces 'cycle' to on_cycle."""
    run = _loop(load_variant("budget_loop", cycle_threshold=3))
    run.apply(run.failure("transient"))
    run.apply(run.failure("transient"))
    assert run.ex.failures == {"work|step.failed|transient": 2}
    decision = run.apply(run.failure("transient"))
    assert decision.transition == Transition("work", STEP_FAILED, "paused", "cycle")
    assert run.ex.state == "paused"
    assert run.ex.failures == {"work|step.failed|transient": 3}


def test_cycle_needs_the_same_error():
    """Alternating errors never reach the threshold for any one signature."""
    run = _loop(load_variant("budget_loop", cycle_threshold=3))
    for category in ("transient", "permanent", "transient", "permanent"):
        decision = run.apply(run.failure(category))
        assert decision.transition.forced == ""
    assert run.ex.state == "work"


def test_cycle_detected_in_refund_ticket_loop():
    """Three re-plans from awaiting_approval reporting the same error force 'cycle'."""
    run = drive_to("awaiting_approval")
    for _ in range(2):
        run.apply(run.ticket({"error": "customer unreachable"}))
        run.apply(run.result(PLAN, source="agent"))
    decision = run.apply(run.ticket({"error": "customer unreachable"}))
    assert decision.transition == Transition("awaiting_approval", "ticket.updated",
                                             "needs_human", "cycle")


# -- 2. failure matrix: guards ------------------------------------------------------------------


def _boom(context: Mapping[str, Any], event: Event) -> bool:
    raise RuntimeError("kaboom")


GUARDS = load_definition(WORKFLOWS / "guards.yaml", functions={"boom": _boom})


def _guarded(event_type: str, payload: Mapping[str, Any]) -> Decision:
    run = Run(GUARDS, "g1")
    run.start()
    return run.decide(Event("e", event_type, "human", payload))


def test_guard_true_takes_transition():
    """A guard that holds takes its transition."""
    decision = _guarded("submit", {"score": 11})
    assert isinstance(decision, Accepted)
    assert decision.transition == Transition("open", "submit", "accepted", "")


def test_guard_false_is_rejected_guard_false():
    """A guard that does not hold is Rejected guard_false."""
    decision = _guarded("submit", {"score": 10})
    assert isinstance(decision, Rejected)
    assert decision.reason == RejectReason.GUARD_FALSE
    assert "event.payload.score > 10" in decision.detail


def test_guard_raising_function_is_guard_error():
    """A registered guard function that raises becomes Rejected guard_error."""
    decision = _guarded("check", {})
    assert isinstance(decision, Rejected)
    assert decision.reason == RejectReason.GUARD_ERROR
    assert "RuntimeError: kaboom" in decision.detail


def test_guard_comparing_none_is_guard_error():
    """A guard comparing None > 1 (a missing context key) is Rejected guard_error."""
    decision = _guarded("compare", {})
    assert isinstance(decision, Rejected)
    assert decision.reason == RejectReason.GUARD_ERROR
    assert "TypeError" in decision.detail


def test_guard_on_missing_payload_key_is_guard_error():
    """A guard reading a payload key that is absent (None > 10) is Rejected guard_error."""
    decision = _guarded("submit", {})
    assert isinstance(decision, Rejected)
    assert decision.reason == RejectReason.GUARD_ERROR


# -- 2. determinism and entropy -----------------------------------------------------------------


def _scripted_run() -> list[Decision]:
    """Runs a fixed, eventful script and gives every decision."""
    run = Run()
    decisions: list[Decision] = [run.start()]

    def deliver(event: Event, at: int | None = None) -> None:
        decision = run.decide(event, at=at)
        decisions.append(decision)
        if isinstance(decision, Accepted):
            run.ex = decision.execution

    deliver(run.result(LOOKUP))
    deliver(run.result({"amount": "bad"}, source="agent"))
    deliver(*run.fired(TimerPurpose.RETRY))
    deliver(run.result(PLAN, source="agent"))
    deliver(run.approval(role="intern"))
    deliver(run.approval())
    deliver(*run.fired(TimerPurpose.STEP_TIMEOUT))
    deliver(*run.fired(TimerPurpose.RETRY))
    deliver(run.result(REFUND_OUT))
    deliver(run.result(REFUND_OUT, answers=f"{XID}/executing_refund/1#2"))
    deliver(run.failure("permanent"))
    deliver(run.compensation("transient"))
    deliver(*run.fired(TimerPurpose.RETRY))
    deliver(run.compensation())
    deliver(run.ticket())
    return decisions


def test_same_events_give_equal_executions_and_commands():
    """Folding the same events twice gives equal decisions, executions and commands."""
    first, second = _scripted_run(), _scripted_run()
    assert first == second
    assert [d.execution for d in first if isinstance(d, Accepted)] == [
        d.execution for d in second if isinstance(d, Accepted)]
    assert [d.commands for d in first if isinstance(d, Accepted)] == [
        d.commands for d in second if isinstance(d, Accepted)]
    outcomes = [d.kind if isinstance(d, Accepted) else str(d.reason) for d in first]
    assert outcomes == ["accepted"] * 5 + ["unauthorized"] + ["accepted"] * 4 + [
        "duplicate"] + ["accepted"] * 4 + ["terminal"]


def test_entropy_changes_only_the_jitter():
    """Two entropies change only the retry timer's fire_at, by the jitter's range."""
    run = drive_to("executing_refund")
    failure = run.failure("transient")
    low = run.decide(failure, entropy=0.1)
    high = run.decide(failure, entropy=0.9)
    assert isinstance(low, Accepted) and isinstance(high, Accepted)
    key = f"{XID}/executing_refund/1"
    # 1000ms with jitter 0.5: 1000 * (0.5 + 0.1) and 1000 * (0.5 + 0.9)
    assert low.commands[-1] == ScheduleTimer(f"{key}/retry/1", TimerPurpose.RETRY,
                                             run.now + 600)
    assert high.commands[-1] == low.commands[-1]._replace(fire_at=run.now + 1400)
    assert high.commands[:-1] == low.commands[:-1]
    assert high.execution._replace(timers=()) == low.execution._replace(timers=())
    assert high.execution.timers[:-1] == low.execution.timers[:-1]
    assert high.execution.timers[-1] == low.execution.timers[-1]._replace(fire_at=run.now + 1400)


def test_entropy_is_irrelevant_without_jitter():
    """planning has jitter 0, so any entropy gives the very same decision."""
    run = drive_to("planning")
    failure = run.failure("transient", source="agent")
    first, *others = [run.decide(failure, entropy=e) for e in (None, 0.0, 0.3, 0.999)]
    assert isinstance(first, Accepted)
    assert all(other == first for other in others)


def test_default_entropy_is_stable():
    """Without entropy the jitter derives from the effect id: equal on every call, in range."""
    run = drive_to("executing_refund")
    failure = run.failure("transient")
    first, second = run.decide(failure), run.decide(failure)
    assert first == second
    delay = first.commands[-1].fire_at - run.now
    assert 500 <= delay <= 1500


# -- 3. Hypothesis properties -------------------------------------------------------------------

JSON_LEAF = (st.none() | st.booleans() | st.integers(-10**6, 10**6)
             | st.floats(allow_nan=False) | st.text(max_size=8))
JSON = st.recursive(JSON_LEAF, lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=6)
PAYLOAD_KEYS = ["category", "role", "action_hash", "amount", "reason", "status", "refund_id",
                "note", "error", "order_id", "customer_email", "decision"]


JUNK_PAYLOAD = st.dictionaries(st.sampled_from(PAYLOAD_KEYS) | st.text(max_size=6), JSON,
                               max_size=4)
OUTPUTS = {
    "collecting_requirements": [LOOKUP],
    "planning": [PLAN, {"amount": 999, "reason": "x"}, {"amount": 50, "reason": "all"}],
    "executing_refund": [REFUND_OUT],
    "verifying": [SETTLED, {"status": "pending"}, {"status": "failed"}],
    "notifying": [{}],
}


def _valid_payloads(ex: Execution, kind: str) -> list[Mapping[str, Any]]:
    if kind == STEP_SUCCEEDED:
        return OUTPUTS.get(ex.state, [{}])
    if kind in (STEP_FAILED, COMPENSATION_FAILED):
        return [{"category": c} for c in CATEGORIES]
    if kind in (APPROVAL_GRANTED, APPROVAL_DENIED):
        signed = ex.approval.action_hash if ex.approval else "0" * 64
        return [{"role": r, "action_hash": signed} for r in ("supervisor", "finance_lead",
                                                             "intern")]
    if kind == "ticket.updated":
        return [{"note": "n"}, {}, {"error": "loop"}]
    return [{}]


def _sensible(ex: Execution, now: int, limit: int | None) -> dict[str, list[tuple[Event, int]]]:
    """Gives, by group, the events a well-behaved environment could deliver next, with times."""
    groups: dict[str, list[tuple[Event, int]]] = {}  # progress first: Hypothesis favours it
    effect = ex.effect
    if effect is not None:
        if effect.compensation:
            groups["succeed"] = [(Event("", COMPENSATION_SUCCEEDED, "tool", {},
                                        effect.effect_id), now)]
            failed = COMPENSATION_FAILED
        else:
            groups["succeed"] = [(Event("", STEP_SUCCEEDED, "tool", p, effect.effect_id), now)
                                 for p in OUTPUTS.get(ex.state, [{}])]
            failed = STEP_FAILED
        groups["fail"] = [(Event("", failed, "tool", {"category": c}, effect.effect_id), now)
                          for c in CATEGORIES]
    timers = [(Event("", TIMER_FIRED, "timer", {}, t.id), max(now, t.fire_at))
              for t in ex.timers if t.purpose != TimerPurpose.DEADLINE]
    if limit is None:  # the deadline timer is among the timers, one chance in several
        timers += [(Event("", TIMER_FIRED, "timer", {}, t.id), max(now, t.fire_at))
                   for t in ex.timers if t.purpose == TimerPurpose.DEADLINE]
    if timers:
        groups["timer"] = timers
    if ex.approval is not None:
        groups["approve"] = [
            (Event("", kind, "human", {"role": "supervisor",
                                       "action_hash": ex.approval.action_hash},
                   ex.approval.request_id), now)
            for kind in (APPROVAL_GRANTED, APPROVAL_GRANTED, APPROVAL_DENIED)]
    groups["ticket"] = [(Event("", "ticket.updated", "human", {"note": "n"}), now),
                        (Event("", "ticket.updated", "system", {"error": "loop"}), now)]
    order = ("succeed", "approve", "timer", "fail", "ticket")
    return {name: groups[name] for name in order if name in groups}


def _draw_event(data: st.DataObject, ex: Execution, now: int, seen: list[str], index: int,
                limit: int | None) -> tuple[Event, int, float | None]:
    """Draws the next event: mostly sensible ones, else anything from the whole alphabet."""
    if data.draw(st.integers(0, 3), label="random?") < 3:
        groups = _sensible(ex, now, limit)
        weighted = [name for name in groups for _ in range(WEIGHTS[name])]
        group = data.draw(st.sampled_from(weighted), label="group")
        event, at = data.draw(st.sampled_from(groups[group]), label="sensible")
    else:
        kind = data.draw(st.sampled_from(ALL_TYPES), label="type")
        answers = data.draw(st.sampled_from(
            ["", "junk#1", ex.answered, *(t.id for t in ex.timers),
             *([ex.effect.effect_id] if ex.effect else []),
             *([ex.approval.request_id] if ex.approval else []), *seen[-20:]]),
            label="answers")
        payload = data.draw(st.sampled_from(_valid_payloads(ex, kind)) | JUNK_PAYLOAD,
                            label="payload")
        source = data.draw(st.sampled_from(SOURCES), label="source")
        event = Event("", kind, source, payload, answers)
        delay = st.integers(0, 2 * HOUR)
        step = delay if limit is not None else st.one_of(delay, delay, delay,
                                                          st.integers(0, 9 * DAY))
        at = now + data.draw(step, label="delay")
    if limit is not None:
        at = min(at, limit - 1)
    duplicate = data.draw(st.integers(0, 9), label="dup?") == 0 and ex.last_event_id
    event_id = ex.last_event_id if duplicate else f"e{index}"
    entropy = data.draw(st.none() | st.floats(0, 1, exclude_max=True), label="entropy")
    return event._replace(id=event_id), at, entropy


def _issued(decision: Decision) -> list[str]:
    if not isinstance(decision, Accepted):
        return []
    ids = []
    for command in decision.commands:
        if isinstance(command, RunEffect | RunCompensation):
            ids.append(command.effect_id)
        elif isinstance(command, ScheduleTimer | CancelTimer):
            ids.append(command.timer_id)
        elif isinstance(command, RequestApproval):
            ids.append(command.request_id)
    return ids


WEIGHTS = {"succeed": 4, "approve": 3, "timer": 2, "fail": 2, "ticket": 1}
Check = Callable[[Execution, Event, int, Decision], None]
ANY_TIME = -1


def _walk(data: st.DataObject, steps: int, check: Check, *, limit: int | None = None,
          before: Callable[[Execution, Event], None] | None = None, restart: bool = False,
          definition: WorkflowDefinition = REFUND) -> tuple[Execution, int, list[str]]:
    """Folds `steps` drawn events from a started refund run, checking each decision.

    With `limit` (a time), time stays below it and the deadline never fires; with ANY_TIME,
    each example draws whether the walk may pass the deadline. With `restart`, a run that ends
    is replaced by a fresh one (started at the current time) so the walk keeps going deep."""
    if limit == ANY_TIME:
        limit = data.draw(st.sampled_from([None, definition.budgets.deadline_ms]), label="limit")
    def fresh(now: int) -> Execution:
        created = new_execution(definition, XID, context={"order_id": ORDER})
        return decide(definition, created, start_event(XID), now).execution

    ex, now, seen = fresh(0), 0, []
    for index in range(steps):
        if restart and ex.status == Status.FINAL:
            ex = fresh(now)
            if limit is not None:
                limit = now + (definition.budgets.deadline_ms or 0)
        event, at, entropy = _draw_event(data, ex, now, seen, index, limit)
        now = max(now, at)
        if before is not None:
            before(ex, event)
        decision = decide(definition, ex, event, now, entropy=entropy)
        check(ex, event, now, decision)
        seen += _issued(decision)
        if isinstance(decision, Accepted):
            ex = decision.execution
    return ex, now, seen


PROPERTY = settings(max_examples=200, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@PROPERTY
@given(data=st.data(), steps=st.integers(1, 40))
def test_property_decide_is_total(data: st.DataObject, steps: int):
    """From reachable executions decide never raises and always gives one of three kinds."""
    def check(ex: Execution, event: Event, now: int, decision: Decision) -> None:
        assert isinstance(decision, Accepted | Ignored | Rejected)
        assert decision.kind in ("accepted", "ignored", "rejected")
        if isinstance(decision, Accepted):
            assert isinstance(decision.execution, Execution)
            assert decision.execution.state in REFUND.states
            assert all(isinstance(c, Command) for c in decision.commands)
        else:
            assert decision.reason in (*IgnoreReason, *RejectReason)
            assert isinstance(decision.detail, str) and decision.detail

    _walk(data, steps, check, limit=ANY_TIME, restart=True)


def _finish(ex: Execution, now: int) -> tuple[Execution, int]:
    """Drives a run below its deadline to a final state by failing, denying or resolving."""
    for index in range(40):
        if ex.status == Status.FINAL:
            return ex, now
        if ex.effect is not None:
            kind = COMPENSATION_FAILED if ex.effect.compensation else STEP_FAILED
            event = Event(f"f{index}", kind, "tool", {"category": "permanent"},
                          ex.effect.effect_id)
        elif ex.approval is not None and now <= ex.approval.expires_at:
            event = Event(f"f{index}", APPROVAL_DENIED, "human",
                          {"role": "supervisor", "action_hash": ex.approval.action_hash},
                          ex.approval.request_id)
        elif ex.state == "needs_human":
            event = Event(f"f{index}", "ticket.updated", "human", {"note": "done"})
        else:
            timer = min((t for t in ex.timers if t.purpose != TimerPurpose.DEADLINE),
                        key=lambda t: t.fire_at)
            now = max(now, timer.fire_at)
            event = Event(f"f{index}", TIMER_FIRED, "timer", {}, timer.id)
        decision = decide(REFUND, ex, event, now)
        assert isinstance(decision, Accepted), (ex, event, decision)
        ex = decision.execution
    raise AssertionError(f"run did not finish: {ex}")


@PROPERTY
@given(data=st.data(), steps=st.integers(0, 30), after=st.integers(1, 8))
def test_property_final_rejects_everything(data: st.DataObject, steps: int, after: int):
    """Once an execution is final, every event (any type, source, time) is Rejected terminal."""
    def check(ex: Execution, event: Event, now: int, decision: Decision) -> None:
        if ex.status == Status.FINAL:
            assert isinstance(decision, Rejected)
            assert decision.reason == RejectReason.TERMINAL

    limit = REFUND.budgets.deadline_ms
    ex, now, seen = _walk(data, steps, check, limit=limit)
    ex, now = _finish(ex, now)
    assert ex.status == Status.FINAL
    for index in range(after):
        event, at, entropy = _draw_event(data, ex, now, seen, 100 + index, None)
        decision = decide(REFUND, ex, event, max(now, at), entropy=entropy)
        assert isinstance(decision, Rejected)
        assert decision.reason == RejectReason.TERMINAL


@PROPERTY
@given(data=st.data(), steps=st.integers(1, 40))
def test_property_sequence_counts_accepted_events(data: st.DataObject, steps: int):
    """sequence grows by exactly one on every Accepted; Ignored/Rejected carry no execution."""
    counts = {"accepted": 0}

    def check(ex: Execution, event: Event, now: int, decision: Decision) -> None:
        if isinstance(decision, Accepted):
            counts["accepted"] += 1
            assert decision.execution.sequence == ex.sequence + 1
            assert decision.execution.last_event_id == event.id
        else:
            assert not hasattr(decision, "execution")

    ex, _, _ = _walk(data, steps, check, limit=ANY_TIME)
    assert ex.sequence == 1 + counts["accepted"]


def _snapshot(value: Any) -> Any:
    """Gives a deep, plain copy of records, mappings and sequences for before/after checks."""
    if isinstance(value, Mapping):
        return {key: _snapshot(item) for key, item in value.items()}
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return (type(value).__name__, *(_snapshot(item) for item in value))
    if isinstance(value, list | tuple):
        return [_snapshot(item) for item in value]
    return value


@PROPERTY
@given(data=st.data(), steps=st.integers(1, 40))
def test_property_decide_does_not_mutate_inputs(data: st.DataObject, steps: int):
    """decide leaves its execution, context, event and definition exactly as they were."""
    initial_context = dict(REFUND.initial_context)
    taken: dict[str, Any] = {}

    def before(ex: Execution, event: Event) -> None:
        taken["execution"], taken["event"] = _snapshot(ex), _snapshot(event)
        taken["context"] = copy.deepcopy(dict(ex.context))

    def check(ex: Execution, event: Event, now: int, decision: Decision) -> None:
        assert _snapshot(ex) == taken["execution"]
        assert dict(ex.context) == taken["context"]
        assert _snapshot(event) == taken["event"]

    _walk(data, steps, check, limit=ANY_TIME, before=before, restart=True)
    assert dict(REFUND.initial_context) == initial_context


def test_budget_cost_counts_every_retry_attempt():
    """Each retry attempt is paid for: retries past cost_max force the run to on_exceeded."""
    definition = load_variant("budget_loop", cost_max=1.2)
    data = definition.spec.model_dump()
    data["states"]["work"]["step"]["retry"] = {"attempts_max": 5, "retry_on": ["transient"]}
    run = Run(load_definition(data), "loop")
    run.start()
    assert run.ex.cost == 0.5
    run.apply(run.failure("transient"))
    run.fire(TimerPurpose.RETRY)
    assert run.ex.cost == 1.0
    run.apply(run.failure("transient"))
    decision = run.fire(TimerPurpose.RETRY)
    assert decision.transition == Transition("work", TIMER_FIRED, "held", "cost_max")
    assert run.ex.exceeded == "cost_max"
    assert not any(isinstance(c, RunEffect) for c in decision.commands)


@pytest.mark.parametrize("entropy", [-5.0, 7.0])
def test_entropy_outside_unit_interval_is_clamped(entropy: float):
    """Entropy outside [0, 1] gives the same delay as the nearest bound, never a negative one."""
    delays = []
    for value in (entropy, 0.0 if entropy < 0 else 1.0):
        run = drive_to("executing_refund")
        run.apply(run.failure("timeout"), entropy=value)
        delays.append(run.timer(TimerPurpose.RETRY).fire_at - run.now)
    assert delays[0] == delays[1] >= 0


def test_dumped_spec_loads_to_the_same_definition():
    """A definition's spec dumped (to Python or JSON) loads back with the same durations."""
    dumped = REFUND.spec.model_dump(mode="json")
    assert dumped["states"]["needs_human"]["after"]["delay"] == "259200000ms"
    assert load_definition(dumped).spec == REFUND.spec


# -- the plain-move fast path gives what the general path gives -----------------------------------


_names = st.text("abcdefgh", min_size=1, max_size=3)


@settings(max_examples=150, deadline=None)
@given(state=st.sampled_from("abcdefgh"), sequence=st.integers(1, 10**6),
       transitions=st.integers(0, 10**6), visits=st.dictionaries(_names, st.integers(1, 99)),
       approved=st.lists(_names, max_size=3).map(tuple), cost=st.floats(0, 1e6),
       failures=st.dictionaries(_names, st.integers(1, 5), max_size=2),
       exceeded=st.sampled_from(["", "deadline", "cost_max"]), answered=_names,
       context_n=st.integers(0, 10**6))
def test_the_plain_move_fast_path_gives_what_move_gives(
        state: str, sequence: int, transitions: int, visits: dict[str, int],
        approved: tuple[str, ...], cost: float, failures: dict[str, int], exceeded: str,
        answered: str, context_n: int) -> None:
    """Whatever the rest of an execution holds, the fast path and `move` agree field for
    field on a plain target (the 8-state cycle: one guard, one action)."""
    from harness.bench.shapes import cycle8
    from reference_machine import Event
    from reference_machine._decide import move, plain_move

    definition = cycle8().definition
    started = decide(definition, new_execution(definition, "x"), start_event("x"), 0)
    execution = started.execution._replace(
        state=state, sequence=sequence, transitions=transitions, visits=visits,
        approved=approved, cost=cost, failures=failures, exceeded=exceeded,
        answered=answered, context={"n": context_n})
    event = Event("e", "next", "agent")
    decision = decide(definition, execution, event, 5)
    target = decision.execution.state
    assert definition.states[target].plain
    # decide took the fast path (so the next line compares the fast path with move)
    assert decision == plain_move(execution, event, target, decision.execution.context)
    assert decision == move(definition, execution, event, 5, target,
                            decision.execution.context)


def test_the_fast_path_is_taken_on_a_plain_cycle() -> None:
    """The case the benchmarks walk: a ring of plain states."""
    from harness.bench.shapes import cycle8
    from reference_machine._decide import move, plain_move

    shape = cycle8()
    definition = shape.definition
    started = decide(definition, new_execution(definition, "x"), start_event("x"), 0)
    execution = started.execution
    for event in shape.events:
        decision = decide(definition, execution, event, 0)
        slow = move(definition, execution, event, 0, decision.execution.state,
                    decision.execution.context)
        assert decision == slow == plain_move(execution, event, decision.execution.state,
                                              decision.execution.context)
        execution = decision.execution


# -- visit counts past 128 states: shared, and the same as a dict ---------------------------------


@settings(max_examples=60, deadline=None)
@given(visits=st.lists(st.integers(0, 300), min_size=1, max_size=400))
def test_visit_counts_behave_as_the_dict_they_stand_for(visits: list[int]) -> None:
    import pickle

    from reference_machine import VisitCounts
    from reference_machine._codec import dumps

    model: dict[str, int] = {}
    counts = VisitCounts({}, {})
    history = []
    for number in visits:
        key = f"s{number}"
        model[key] = model.get(key, 0) + 1
        counts = counts.bumped(key, counts.get(key, 0) + 1)
        history.append((counts, dict(model)))
    for shared, then in history:  # every earlier map still says what it said
        assert shared == then and then == shared and len(shared) == len(then)
        assert sorted(shared) == sorted(then) and shared.get("nope", 7) == 7
        assert dict(shared.items()) == then
    assert pickle.loads(pickle.dumps(counts)) == model
    assert dumps(dict(counts)) == dumps(model)


def test_a_long_walk_keeps_every_visit_count_and_round_trips_the_store() -> None:
    """Past 128 states the counts are shared, not copied; what the keys and the store see is
    the same as a dict's."""
    from harness.bench.shapes import ring
    from reference_machine import VisitCounts
    from reference_machine._codec import decode_execution, encode_execution

    shape = ring(300)
    definition = shape.definition
    execution = decide(definition, new_execution(definition, "x"), start_event("x"),
                       0).execution
    model = {"s0": 1}
    for event, target in zip(shape.events, (t for _, t in shape.walk), strict=True):
        execution = decide(definition, execution, event, 0).execution
        model[target] = model.get(target, 0) + 1
    assert type(execution.visits) is VisitCounts
    assert execution.visits == model
    assert decode_execution(encode_execution(execution)) == execution


@pytest.mark.parametrize("action", [{"assign": {"all": "context"}},
                                    {"assign": {"all": "[context, context.a]"}},
                                    {"function": "keeps_everything"}],
                         ids=["assign", "assign in a list", "function"])
def test_an_action_storing_the_context_stores_a_copy_not_itself(action: dict[str, Any]) -> None:
    """`all: context` keeps the context as it was: a context holding itself could never be
    written to a history or a store (it failed the harness with a circular reference)."""
    definition = load_definition({
        "name": "keeper", "version": 1, "context": {"a": 1},
        "events": {"go": {"sources": ["human"]}},
        "states": {"s": {"initial": True, "type": "wait",
                         "after": {"delay": "1h", "target": "done"},
                         "on": {"go": {"target": "done", "actions": [action]}}},
                   "done": {"type": "final", "outcome": "success"}}},
        functions={"keeps_everything": lambda context, event: {"all": context}})
    run = new_execution(definition, "r1", context={"a": 1})
    run = decide(definition, run, start_event("r1"), now=0).execution
    after = decide(definition, run, Event("e1", "go", "human", {}), now=1).execution
    kept = after.context["all"]
    assert (kept[0] if isinstance(kept, list) else kept) == {"a": 1}
    json.dumps(after.context)  # no circular reference


def _open_events_definition(path: Path | None = None) -> Any:
    """A definition whose user events take every path `decide` has for them: open ones that
    only move, guarded and acting ones, one limited to a source, one with a payload schema,
    and a timed wait (a move out of a state with timers is not plain)."""
    from reference_machine import load_definition

    return load_definition({
        "name": "open_events", "context": {"n": 0},
        "events": {"go": {}, "bump": {}, "back": {}, "admin": {"sources": ["human"]},
                   "sized": {"payload": {"type": "object", "required": ["size"],
                                         "properties": {"size": {"type": "integer"}}}}},
        "states": {
            "a": {"initial": True, "on": {"go": "b", "bump": {"target": "b", "actions": [
                {"assign": {"n": "context.n + 1"}}]}, "admin": "c"}},
            "b": {"on": {"go": {"target": "c", "guard": "context.n >= 1"}, "back": "a",
                         "sized": "c"}},
            "c": {"after": {"delay": "5s", "target": "a"}, "on": {"go": "a", "back": "b",
                                                                 "admin": "done"}},
            "done": {"type": "final", "outcome": "success"},
        },
    })


@pytest.mark.parametrize("name", ["open_events", "cycle8", "ring8", "refund_escalation",
                                  "parallel_triage"])
def test_the_open_event_table_decides_as_the_declarations_do(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`decide` takes an open user event from `definition.plain_moves` without reading its
    declaration (and a plain move at once): the histories of seeded runs are the same, byte
    for byte, with that table as without it."""
    from harness import SimOptions, Simulator
    from harness.bench import shapes
    from harness.sim.history import dump_line
    from reference_machine import load_definition
    from reference_machine._definition import compiled

    root = Path(__file__).resolve().parents[2]

    def definition() -> Any:
        if name == "open_events":
            return _open_events_definition()
        if name == "cycle8":
            return shapes.cycle8().definition
        if name == "ring8":
            return shapes.ring(8).definition
        return load_definition(root / "scenarios" / f"{name}.yaml")

    def histories(made: Any) -> list[str]:
        simulator = Simulator(made, SimOptions(executions=2))
        return ["\n".join(dump_line(r) for r in simulator.run(seed).history)
                for seed in range(12)]

    table = definition()
    if name in ("open_events", "cycle8", "ring8"):  # the bundled scenarios limit every
        assert table.plain_moves, "the table is empty"  # event's sources: nothing is open
    fast = histories(table)
    monkeypatch.setattr(compiled, "plain_moves_of", lambda made: {})
    declared = definition()
    assert not declared.plain_moves
    assert histories(declared) == fast
    moved = sum(history.count('"decision":"accepted"') for history in fast)
    assert moved > 12, "the runs committed almost nothing"


def _rejected(decision: Decision, reason: RejectReason, pattern: str) -> None:
    """Asserts `decision` is a rejection for `reason` whose detail matches `pattern`."""
    assert isinstance(decision, Rejected), decision
    assert decision.reason == reason, decision
    assert re.search(pattern, decision.detail), decision.detail


def test_failing_step_approval_and_compensation_inputs_are_action_errors() -> None:
    """Inputs that raise when evaluated become Rejected(action_error) naming the state."""
    # on start: the initial state's step input fails
    data = _base()
    data["states"]["start"] = {"initial": True, "step": {"tool": "svc.call",
                                                         "input": {"n": "=context.a + 1"}},
                               "on": {"step.succeeded": "done", "step.failed": "failed"}}
    del data["states"]["work"]
    definition = load_definition(data)
    run = Run(definition)
    _rejected(run.decide(start_event(run.ex.id)), RejectReason.ACTION_ERROR,
              r"^step input of state 'start' failed: TypeError: unsupported operand")
    run = Run(definition, context={"a": 1})
    (command,) = [c for c in run.start().commands if isinstance(c, RunEffect)]
    assert command.input == {"n": 2}

    # on entering a later state
    data = _base()
    _step(data)["input"] = {"n": "=context.a + 1"}
    definition = load_definition(data)
    run = Run(definition)
    run.start()
    _rejected(run.decide(run.user("go")), RejectReason.ACTION_ERROR,
              r"^step input of state 'work' failed: TypeError")
    assert run.ex.state == "start"
    run = Run(definition, context={"a": 41})
    run.start()
    (command,) = [c for c in run.apply(run.user("go")).commands if isinstance(c, RunEffect)]
    assert command.input == {"n": 42}

    # a compensation input, planned from the context after the success transition's actions
    data = _base()
    data["compensation_failed"] = "failed"
    _step(data)["compensation"] = {"tool": "svc.undo", "input": {"id": "=context.b + 1"}}
    data["states"]["work"]["on"]["step.succeeded"] = {
        "target": "done", "actions": [{"assign": {"b": "event.payload.b"}}]}
    definition = load_definition(data)
    run = Run(definition)
    run.start()
    run.apply(run.user("go"))
    _rejected(run.decide(run.result({})), RejectReason.ACTION_ERROR,
              r"^compensation input of state 'work' failed: TypeError")
    assert run.ex.effect is not None and run.ex.state == "work"
    run.apply(run.result({"b": 1}))
    assert [(s.tool, s.input) for s in run.ex.completed] == [("svc.undo", {"id": 2})]

    # an approval state whose gated step's input fails
    data = _base()
    data["states"]["start"]["on"] = {"go": "asking"}
    data["states"]["asking"] = {
        "type": "wait",
        "approval": {"for_state": "work", "summary": "Run for {a}", "roles": ["boss"],
                     "expires_after": "1h"},
        "on": {"approval.granted": "work", "approval.denied": "failed"},
    }
    _step(data).update(input={"n": "=context.a + 1"}, needs_approval=True)
    definition = load_definition(data)
    run = Run(definition)
    run.start()
    _rejected(run.decide(run.user("go")), RejectReason.ACTION_ERROR,
              r"^approved step's input of state 'asking' failed: TypeError")
    run = Run(definition, context={"a": 1})
    run.start()
    (request,) = [c for c in run.apply(run.user("go")).commands
                  if isinstance(c, RequestApproval)]
    assert request.action_hash == action_hash(definition, "work", run.ex.context)


# -- 3. malformed events -------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [STEP_FAILED, STEP_SUCCEEDED, "go"])
def test_malformed_event_is_invalid_payload_not_a_crash(kind: str) -> None:
    """A None or list payload, or a list type or source, is Rejected(invalid_payload)."""
    run = Run(load_definition(_base()))
    run.start()
    user = kind == "go"
    if not user:
        run.apply(run.user("go"))

    def event(payload: Any, *, kind_: Any = kind, source: Any = None) -> Event:
        answers = "" if user or run.ex.effect is None else run.ex.effect.effect_id
        if source is None:
            source = "human" if user else "tool"
        return Event(run.next_id(), kind_, source, payload, answers)

    good = {"category": "permanent"} if kind == STEP_FAILED else {}
    bad_events = {
        "payload None": event(None),
        "payload list": event([good]),
        "type list": event(good, kind_=[kind]),
        "source list": event(good, source=["human" if user else "tool"]),
    }
    for label, bad in bad_events.items():
        decision = run.decide(bad)
        assert isinstance(decision, Rejected), (label, decision)
        assert decision.reason == RejectReason.INVALID_PAYLOAD, (label, decision)
        assert "payload a mapping" in decision.detail, (label, decision.detail)
    expected = {STEP_FAILED: "failed", STEP_SUCCEEDED: "done", "go": "work"}[kind]
    assert run.apply(event(good)).execution.state == expected


def _saga(undo_tool: dict[str, Any]) -> Run:
    """Gives a run compensating `first` (undo tool `undo_tool`) after `second` failed."""
    data = {
        "name": "saga",
        "tools": {"t.do": {"idempotency_keys": True}, "t.undo": undo_tool},
        "compensation_failed": "stuck",
        "states": {
            "first": {"initial": True,
                      "step": {"tool": "t.do", "compensation": {"tool": "t.undo",
                                                                "attempts_max": 3}},
                      "on": {"step.succeeded": "second", "step.failed": "failed"}},
            "second": {"step": {"tool": "t.do",
                                "retry": {"attempts_max": 1, "on_exhausted": "compensate"}},
                       "on": {"step.succeeded": "done", "step.failed": "failed"}},
            "stuck": {"type": "wait", "after": {"delay": "1h", "target": "failed"}},
            "done": {"type": "final", "outcome": "success"},
            "failed": {"type": "final", "outcome": "failure"},
        },
    }
    run = Run(load_definition(data))
    run.start()
    run.apply(run.result())
    run.apply(run.failure("permanent"))
    assert run.ex.status == Status.COMPENSATING
    return run


def test_undo_is_not_retried_blindly_after_a_timeout() -> None:
    """A keyless undo's timeout goes to compensation_failed; transient, or a safe tool, retries."""
    run = _saga({"idempotency_keys": False})
    decision = run.apply(run.compensation("timeout"))
    assert decision.transition == Transition("second", COMPENSATION_FAILED, "stuck",
                                             "compensation_failed")
    assert run.ex.state == "stuck" and run.ex.status == Status.WAITING

    for tool, category in (({"idempotency_keys": False}, "transient"),
                           ({"idempotency_keys": True}, "timeout"),
                           ({"repeatable": True}, "timeout")):
        run = _saga(tool)
        decision = run.apply(run.compensation(category))
        assert decision.transition is None, (tool, category)
        assert run.ex.status == Status.COMPENSATING
        assert [type(c) for c in decision.commands] == [ScheduleTimer]
        retried = run.fire(TimerPurpose.RETRY)
        (command,) = retried.commands
        assert isinstance(command, RunCompensation)
        assert (command.tool, command.attempt) == ("t.undo", 2)


# -- 8. action hash is the same in every process -------------------------------------------------


_HASH_SCRIPT = """
import json, reference_machine as rm
d = rm.load_definition({"name": "wf", "tools": {"t": {"idempotency_keys": True}},
    "states": {"s": {"initial": True,
                     "step": {"tool": "t", "input": {"tags": "=context.tags", "m": "=context.m"}},
                     "on": {"step.succeeded": "done", "step.failed": "done"}},
               "done": {"type": "final", "outcome": "success"}}})
tags = {f"tag-{i}" for i in range(16)}
print(json.dumps({
    "hash": rm.action_hash(d, "s", {"tags": tags, "m": {"k": 1}}),
    "mixed": rm.action_hash(d, "s", {"tags": frozenset({1, "x"}), "m": {1: "a", "b": 2}}),
    "order": list(tags),
}))
"""


def test_action_hash_is_the_same_under_every_hash_seed() -> None:
    """The hash of an input holding a set is seed-independent; mixed key types do not raise."""
    outputs = []
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-c", _HASH_SCRIPT], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        outputs.append(json.loads(done.stdout))
    assert len({tuple(o["order"]) for o in outputs}) > 1  # the seeds do reorder the set
    assert len({o["hash"] for o in outputs}) == 1
    assert len({o["mixed"] for o in outputs}) == 1
    assert all(re.fullmatch(r"[0-9a-f]{64}", o["mixed"]) for o in outputs)

    data = _base()
    _step(data)["input"] = {"m": "=context.m"}
    definition = load_definition(data)
    mixed = action_hash(definition, "work", {"m": {1: "a", "b": 2, None: 3}})
    assert mixed != action_hash(definition, "work", {"m": {"b": 2}})
    with pytest.raises(ValueError, match=r"state 'start' of 'wf' runs no step"):
        action_hash(definition, "start", {})


# -- 9. backoff ----------------------------------------------------------------------------------


def test_backoff_never_overflows_and_clamps_nan_entropy() -> None:
    """multiplier 1e10 over 99 retries stays capped at delay_max; NaN entropy gives a delay."""
    data = _base()
    del data["states"]["start"]
    data["states"]["work"]["initial"] = True
    _step(data)["retry"] = {"attempts_max": 100, "multiplier": 1e10, "delay_initial": "1s",
                            "delay_max": "1h", "jitter": 0.5}
    definition = load_definition(data)
    run = Run(definition)
    run.start()
    delays = []
    for _ in range(99):
        decision = run.apply(run.failure("transient"), entropy=0.5)
        (command,) = [c for c in decision.commands if isinstance(c, ScheduleTimer)]
        delays.append(command.fire_at - run.now)
        run.fire(TimerPurpose.RETRY)
    assert run.ex.attempt == 100
    assert delays[0] == 1000 and set(delays[1:]) == {HOUR}
    assert all(isinstance(d, int) for d in delays)
    exhausted = run.apply(run.failure("transient"))
    assert exhausted.transition == Transition("work", STEP_FAILED, "failed", "")

    for attempts, expected in ((1, 500), (60, HOUR // 2)):  # NaN draws the low end
        run = Run(definition)
        run.start()
        for _ in range(attempts - 1):
            run.apply(run.failure("transient"))
            run.fire(TimerPurpose.RETRY)
        decision = run.apply(run.failure("transient"), entropy=float("nan"))
        (command,) = [c for c in decision.commands if isinstance(c, ScheduleTimer)]
        assert command.fire_at - run.now == expected


# -- 10. cycle detection -------------------------------------------------------------------------


def test_cycle_counts_the_same_error_in_a_row() -> None:
    """Other errors in between reset the count; three of the same in a row force 'cycle'."""
    run = Run(load_variant("budget_loop", cycle_threshold=3), execution_id="b1")
    run.start()
    for category in ("transient", "transient", "permanent", "rate_limited", "transient",
                     "transient"):
        decision = run.apply(run.failure(category))
        assert decision.transition is not None and decision.transition.forced == ""
        assert run.ex.state == "work"
    assert dict(run.ex.failures) == {"work|step.failed|transient": 2}
    decision = run.apply(run.failure("transient"))
    assert decision.transition == Transition("work", STEP_FAILED, "paused", "cycle")
    assert dict(run.ex.failures) == {"work|step.failed|transient": 3}


def test_distinct_inputs_with_mixed_keys_hash_differently() -> None:
    """Inputs that differ only in a key's type are different actions, with different hashes."""
    data = _base()
    _step(data)["input"] = {"m": "=context.m"}
    definition = load_definition(data)
    assert action_hash(definition, "work", {"m": {1: "a", "1": "b"}}) != action_hash(
        definition, "work", {"m": {"1": "b"}})
