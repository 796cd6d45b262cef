"""The `guards_held` invariant: a run must take the first transition whose guard holds, on
an event, a wait's timeout, a choice's eventless moves, a join's `done` and inside a region;
on hand-made histories, and on machines with the bug planted."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import MappingProxyType
from typing import Any

from chart_histories import MAP, PARALLEL, fetched, mapped
from invariant_cases import (
    FINAL,
    WAITING_REGION,
    ChangedMachine,
    commit,
    history_of,
    only,
    reverse_choices,
)

from harness import (
    Applied,
    Committed,
    ReferenceMachine,
    check,
)
from reference_machine import load_definition

ROOT = Path(__file__).resolve().parents[4]


REFUND = load_definition(ROOT / "scenarios" / "refund_escalation.yaml")
TRIAGE = load_definition(ROOT / "scenarios" / "support_triage.yaml")


class TestGuardsHeld:
    def test_a_guard_that_was_false_is_reported(self) -> None:
        """Triage's intake goes to needs_more_info only when the output says info is needed."""
        context = {"ticket_id": "t-1", "questions_asked": 0, "priority": "normal"}
        payload = {"category": "billing", "priority": "low", "needs_info": False}
        history = [commit(1, "intake", moved="execution.started", context=context),
                   commit(2, "needs_more_info", source="intake", moved="step.succeeded",
                          payload=payload, event_source="tool", context=context, version=2)]
        (found,) = only("guards_held", TRIAGE, history)
        assert "first transition whose guard holds goes to 'retrieving_context'" in (
            found.message)
        history[1] = history[1]._replace(state="retrieving_context")
        assert only("guards_held", TRIAGE, history) == []

    def test_no_guard_holding_is_reported(self) -> None:
        """A planning result above the amount paid must go to rejected, never to approval."""
        context = {"order_id": "o-1", "amount": 40}
        history = [commit(1, "planning", moved="execution.started", context=context),
                   commit(2, "rejected", source="planning", moved="step.succeeded",
                          payload={"amount": 10, "reason": "x"}, context=context, version=2)]
        (found,) = only("guards_held", REFUND, history)
        assert "goes to 'awaiting_approval'" in found.message


class TestJoinGuards:
    def test_a_join_that_took_the_wrong_done_branch_is_reported(self) -> None:
        """No region failed, so `not event.payload.failed` holds: `failed` is wrong."""
        history = fetched()
        history[4] = history[4]._replace(state="failed")
        (found,) = only("guards_held", PARALLEL, history)
        assert "joined 'fetch' and moved to 'failed'" in found.message
        assert "goes to 'joined'" in found.message and "(failed: [])" in found.message
        assert only("guards_held", PARALLEL, fetched()) == []

    def test_a_maps_join_is_judged_on_its_items_outcomes(self) -> None:
        history = mapped(last="unreadable")  # two failures: failing
        assert only("guards_held", MAP, history) != []  # it went to done
        history[3] = history[3]._replace(state="failed")
        assert only("guards_held", MAP, history) == []
        assert only("guards_held", MAP, mapped()) == []


#: A region whose choice sends `big` for an amount over 100, `small` otherwise (amount 500).
CHOICE = load_definition({
    "name": "region_choice",
    "context": {"amount": 500},
    "tools": {"big": {"idempotency_keys": True}, "small": {"idempotency_keys": True}},
    "states": {
        "par": {"initial": True, "type": "parallel", "done": "end"},
        "ra": {"parent": "par"},
        "route": {"parent": "ra", "initial": True, "type": "choice", "always": [
            {"target": "b", "guard": "context.amount > 100"}, "s"]},
        "b": {"parent": "ra", "step": {"tool": "big"},
              "on": {"step.succeeded": "ra_ok", "step.failed": "ra_ok"}},
        "s": {"parent": "ra", "step": {"tool": "small"},
              "on": {"step.succeeded": "ra_ok", "step.failed": "ra_ok"}},
        "ra_ok": {"parent": "ra", **FINAL},
        **WAITING_REGION,
        "end": FINAL,
    },
})

#: A region waiting for `go`, which takes it to `hi` for an amount over 100, `lo` otherwise
#: (amount 500).
EVENT = load_definition({
    "name": "region_event",
    "context": {"amount": 500},
    "events": {"go": {"sources": ["human"]}},
    "states": {
        "par": {"initial": True, "type": "parallel", "done": "end"},
        "ra": {"parent": "par"},
        "w": {"parent": "ra", "initial": True, "type": "wait",
              "after": {"delay": 3600, "target": "lo"},
              "on": {"go": [{"target": "hi", "guard": "context.amount > 100"}, "lo"]}},
        "hi": {"parent": "ra", **FINAL},
        "lo": {"parent": "ra", **FINAL},
        **WAITING_REGION,
        "end": FINAL,
    },
})


def _reverse_events(state: Any) -> Any:
    return dataclasses.replace(state, on=MappingProxyType(
        {event: candidates[::-1] for event, candidates in state.on.items()}))


class RegionChoicesReversed(ChangedMachine):
    """Tries a region's choice branches last first: the default before the guarded one."""

    change = staticmethod(reverse_choices)


class RegionEventsReversed(ChangedMachine):
    """Tries a region's transitions on an event last first: the default before the guarded."""

    change = staticmethod(_reverse_events)


def test_a_region_choice_taking_its_default_though_the_guarded_branch_holds() -> None:
    """Was a false held (guards_held judged no guard inside a region): the region's choice is
    judged on the context the region starts with."""
    history = history_of(CHOICE, RegionChoicesReversed, 1)
    if not any(type(r) is Applied and r.tool == "small" for r in history):
        raise RuntimeError("the planted bug did not show")
    # amount 500 > 100, yet the region went to `s`
    found = [v.message for v in check(CHOICE, history) if v.rule == "guards_held"]
    assert found == ["x1 a region of 'par' started in 's', but the first eventless transition "
                     "of 'route' whose guard holds goes to 'b' (guard 'context.amount > 100')"]
    assert not check(CHOICE, history_of(CHOICE, ReferenceMachine, 1))


def test_a_region_move_on_an_event_taking_its_default_though_the_guarded_one_holds() -> None:
    """A region's transitions on an event are judged on the region's context as the previous
    commit recorded it."""
    for seed in range(20):
        history = history_of(EVENT, RegionEventsReversed, seed)
        if any(type(r) is Committed and ("w", "go", "lo") in r.inner for r in history):
            break
    else:
        raise RuntimeError("the planted bug did not show")
    found = [v.message for v in check(EVENT, history) if v.rule == "guards_held"]
    assert found == ["x1 a region of 'par' moved 'w' -> 'lo' on go, but the first transition "
                     "of 'w' whose guard holds goes to 'hi' (guard 'context.amount > 100')"]
    held = history_of(EVENT, ReferenceMachine, seed)
    assert any(type(r) is Committed and ("w", "go", "hi") in r.inner for r in held)
    assert not check(EVENT, held)
