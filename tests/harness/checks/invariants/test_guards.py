"""The `guards_held` invariant: a run must take the first transition whose guard holds, on
an event, a wait's timeout, a choice's eventless moves, a join's `done` and inside a region;
on hand-made histories, and on machines with the bug planted."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import MappingProxyType
from typing import Any

from chart_histories import MAP, PARALLEL, fetched, mapped

from harness import (
    Applied,
    Commanded,
    Committed,
    HistoryRecord,
    ReferenceMachine,
    SimOptions,
    Simulator,
    Violation,
    check,
)
from reference_machine import WorkflowDefinition, load_definition

ROOT = Path(__file__).resolve().parents[4]


REFUND = load_definition(ROOT / "scenarios" / "refund_escalation.yaml")
TRIAGE = load_definition(ROOT / "scenarios" / "support_triage.yaml")
CONTEXT = {"order": "o-1", "amount": 40, "sku": "sku-9", "round": 0}


def commit(step: int, state: str, *, execution: str = "x1", event: str = "e",
           decision: str = "accepted", version: int = 1, source: str = "", moved: str = "",
           forced: str = "", event_type: str = "", event_source: str = "system",
           answers: str = "", payload: Any = None, context: Any = None,
           effects: tuple[Commanded, ...] = ()) -> Committed:
    """Gives a commit record (the defaults: an accepted event that moved nothing)."""
    return Committed(step, 0, execution, event, decision, version, state, source, moved,
                     forced, event_type or moved, event_source, answers, payload or {},
                     context if context is not None else CONTEXT, effects)


def only(rule: str, definition: Any, history: list[HistoryRecord]) -> list[Violation]:
    return check(definition, history, only=[rule])


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


FINAL = {"type": "final", "outcome": "success"}


WAITING_REGION = {
    "rb": {"parent": "par"},
    "rb1": {"parent": "rb", "initial": True, "type": "wait",
            "after": {"delay": 60, "target": "rb_ok"}},
    "rb_ok": {"parent": "rb", **FINAL},
}


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


def _changed(definition: WorkflowDefinition, change: Any) -> WorkflowDefinition:
    """The definition with each compiled state changed, in every scope (regions, map items) as
    well: a region runs on its scope's definition, not the top level's states."""
    memo: dict[int, WorkflowDefinition] = {}

    def one(d: WorkflowDefinition) -> WorkflowDefinition:
        if id(d) in memo:
            return memo[id(d)]
        new = dataclasses.replace(d, states=MappingProxyType(
            {name: change(state) for name, state in d.states.items()}))
        memo[id(d)] = new
        object.__setattr__(new, "scopes", {root: one(s) for root, s in d.scopes.items()})
        return new

    return one(definition)


def _reverse_choices(state: Any) -> Any:
    return dataclasses.replace(state, always=state.always[::-1]) if state.kind == "choice" \
        else state


def _reverse_events(state: Any) -> Any:
    return dataclasses.replace(state, on=MappingProxyType(
        {event: candidates[::-1] for event, candidates in state.on.items()}))


class _ChangedMachine(ReferenceMachine):
    change: Any = None

    def __init__(self, definition: WorkflowDefinition, tools: Any, probe: Any = None,
                 **kwargs: Any) -> None:
        super().__init__(_changed(definition, type(self).change), tools, probe, **kwargs)


class RegionChoicesReversed(_ChangedMachine):
    """Tries a region's choice branches last first: the default before the guarded one."""

    change = staticmethod(_reverse_choices)


class RegionEventsReversed(_ChangedMachine):
    """Tries a region's transitions on an event last first: the default before the guarded."""

    change = staticmethod(_reverse_events)


def _history(definition: WorkflowDefinition, machine: Any, seed: int) -> Any:
    return Simulator(definition, SimOptions(seed=seed, executions=1), machine=machine).run(
    ).history


def test_a_region_choice_taking_its_default_though_the_guarded_branch_holds() -> None:
    """Was a false held (guards_held judged no guard inside a region): the region's choice is
    judged on the context the region starts with."""
    history = _history(CHOICE, RegionChoicesReversed, 1)
    if not any(type(r) is Applied and r.tool == "small" for r in history):
        raise RuntimeError("the planted bug did not show")
    # amount 500 > 100, yet the region went to `s`
    found = [v.message for v in check(CHOICE, history) if v.rule == "guards_held"]
    assert found == ["x1 a region of 'par' started in 's', but the first eventless transition "
                     "of 'route' whose guard holds goes to 'b' (guard 'context.amount > 100')"]
    assert not check(CHOICE, _history(CHOICE, ReferenceMachine, 1))


def test_a_region_move_on_an_event_taking_its_default_though_the_guarded_one_holds() -> None:
    """A region's transitions on an event are judged on the region's context as the previous
    commit recorded it."""
    for seed in range(20):
        history = _history(EVENT, RegionEventsReversed, seed)
        if any(type(r) is Committed and ("w", "go", "lo") in r.inner for r in history):
            break
    else:
        raise RuntimeError("the planted bug did not show")
    found = [v.message for v in check(EVENT, history) if v.rule == "guards_held"]
    assert found == ["x1 a region of 'par' moved 'w' -> 'lo' on go, but the first transition "
                     "of 'w' whose guard holds goes to 'hi' (guard 'context.amount > 100')"]
    held = _history(EVENT, ReferenceMachine, seed)
    assert any(type(r) is Committed and ("w", "go", "hi") in r.inner for r in held)
    assert not check(EVENT, held)
