"""The refund scenario as tests drive it: canned tool outputs, plausible next events, and a
loop that plays the supervisor and the clock until a run ends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reference_machine import (
    APPROVAL_DENIED,
    APPROVAL_GRANTED,
    COMPENSATION_FAILED,
    COMPENSATION_SUCCEEDED,
    STEP_FAILED,
    STEP_SUCCEEDED,
    TIMER_FIRED,
    Event,
    Execution,
    Runtime,
    Status,
    load_definition,
)

ROOT = Path(__file__).resolve().parents[2]
REFUND = load_definition(ROOT / "scenarios" / "refund_escalation.yaml")
ORDER = "o-1"
LOOKUP = {"order_id": ORDER, "amount": 50, "customer_email": "a@example.com"}
PLAN = {"amount": 40, "reason": "damaged"}
REFUND_OUT = {"refund_id": "rf-1"}
SETTLED = {"status": "succeeded"}
SENT = {"message_id": "m-1"}
#: What each refund tool returns when it succeeds.
TOOL_OUTPUTS: dict[str, dict[str, Any]] = {
    "crm.lookup_order": LOOKUP,
    "agent.plan_refund": PLAN,
    "payments.refund": REFUND_OUT,
    "payments.get_refund": SETTLED,
    "email.send": {},
    "payments.void_refund": {},
}
#: The step outputs a random walk may draw, by state (a few that take other branches too).
OUTPUTS: dict[str, list[dict[str, Any]]] = {
    "collecting_requirements": [LOOKUP],
    "planning": [PLAN, {"amount": 80, "reason": "greedy"}],
    "executing_refund": [REFUND_OUT],
    "verifying": [SETTLED, {"status": "failed"}],
    "notifying": [SENT],
    "reserve": [{"reservation_id": "res-1"}],
}
CATEGORIES = ["transient", "rate_limited", "timeout", "permanent", "invalid_output"]


def candidates(ex: Execution, now: int) -> list[tuple[Event, int]]:
    """Gives events (without ids) a plausible environment could deliver next, with times."""
    out: list[tuple[Event, int]] = []
    effect = ex.effect
    if effect is not None and effect.compensation:
        out.append((Event("", COMPENSATION_SUCCEEDED, "tool", {}, effect.effect_id), now))
        out += [(Event("", COMPENSATION_FAILED, "tool", {"category": c}, effect.effect_id), now)
                for c in CATEGORIES]
    elif effect is not None:
        out += [(Event("", STEP_SUCCEEDED, "tool", p, effect.effect_id), now)
                for p in OUTPUTS.get(ex.state, [{}])]
        out += [(Event("", STEP_FAILED, "tool", {"category": c}, effect.effect_id), now)
                for c in CATEGORIES]
    out += [(Event("", TIMER_FIRED, "timer", {}, t.id), max(now, t.fire_at)) for t in ex.timers]
    if ex.approval is not None:
        payload = {"role": "supervisor", "action_hash": ex.approval.action_hash}
        out += [(Event("", kind, "human", payload, ex.approval.request_id), now)
                for kind in (APPROVAL_GRANTED, APPROVAL_DENIED)]
    out += [(Event("", "ticket.updated", "human", {"note": "n"}), now),
            (Event("", STEP_SUCCEEDED, "tool", LOOKUP, ex.answered or "junk#1"), now),
            (Event("", "refund.teleported", "human", {}), now)]
    return out


def finish(runtime: Runtime, execution_id: str = "r1", rounds: int = 50) -> bool:
    """Approves when asked and fires timers until the run is final or with a human; tells
    whether it got there within `rounds`."""
    now = 0
    for _ in range(rounds):
        execution = runtime.store.load(execution_id).execution
        if execution.status == Status.FINAL or execution.state == "needs_human":
            return True
        if execution.approval is not None:
            request = execution.approval
            runtime.deliver(execution_id, Event(
                f"{request.request_id}/decision", APPROVAL_GRANTED, "human",
                {"role": "supervisor", "action_hash": request.action_hash},
                request.request_id), now)
            continue
        now += 60_000
        runtime.tick(now)
    return False


# A workflow whose action assigns a list literal and whose guard compares against one: the
# smallest run that shows whether a stored run comes back exactly as it was decided.
TAGS = load_definition({
    "name": "tags",
    "version": 1,
    "context": {"tags": None},
    "events": {"go": {"sources": ["human"]}},
    "states": {
        "tagging": {
            "initial": True, "type": "wait", "after": {"delay": "1d", "target": "no"},
            "on": {"go": {"target": "tagged",
                          "actions": [{"assign": {"tags": "['x', 'y']"}}]}},
        },
        "tagged": {
            "type": "wait", "after": {"delay": "1d", "target": "no"},
            "on": {"go": [{"target": "yes", "guard": "context.tags == ['x', 'y']"},
                          {"target": "no"}]},
        },
        "yes": {"type": "final", "outcome": "success"},
        "no": {"type": "final", "outcome": "failure"},
    },
})
