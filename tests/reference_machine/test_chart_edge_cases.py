"""Edge cases of the statechart core (issue 17), each a defect a reviewer demonstrated and
that is now fixed (or, for deep history through a parallel state, a departure from SCXML the
README lists). Each docstring says what the README (or SCXML, where the README defers to it)
leads one to expect."""

from __future__ import annotations

from typing import Any

import pytest
from charts import Driver, log

from reference_machine import (
    Accepted,
    Event,
    Rejected,
    RejectReason,
    RunCompensation,
    RunEffect,
    check_spec,
    load_definition,
)
from reference_machine._spec import WorkflowSpec

T = {"idempotency_keys": True}
END = {"type": "final", "outcome": "success"}
FAIL = {"type": "final", "outcome": "failure"}


def fetch_both(**fetch: Any) -> dict[str, Any]:
    """Two regions: crm (lookup, then a hold that declares a release) and billing."""
    return {
        "name": "fetch_both",
        "context": {"log": []},
        "events": {"again": {}},
        "tools": {"crm": T, "billing": T, "hold": T, "release": T},
        "compensation_failed": "stuck",
        "states": {
            "fetch": {"initial": True, "type": "parallel",
                      "done": [{"target": "joined", "guard": "not event.payload.failed"},
                               "failed"], **fetch},
            "crm": {"parent": "fetch"},
            "crm_get": {"parent": "crm", "initial": True, "step": {"tool": "crm"},
                        "on": {"step.succeeded": "crm_hold", "step.failed": "crm_failed"}},
            "crm_hold": {"parent": "crm", "step": {"tool": "hold",
                                                   "compensation": {"tool": "release"}},
                         "on": {"step.succeeded": "crm_done", "step.failed": "crm_failed"}},
            "crm_done": {"parent": "crm", **END},
            "crm_failed": {"parent": "crm", **FAIL},
            "bill": {"parent": "fetch"},
            "bill_get": {"parent": "bill", "initial": True, "step": {"tool": "billing"},
                         "on": {"step.succeeded": "bill_done", "step.failed": "bill_failed"}},
            "bill_done": {"parent": "bill", **END},
            "bill_failed": {"parent": "bill", **FAIL},
            "joined": {"type": "wait", "on": {"again": "fetch"},
                       "after": {"delay": 60, "target": "ok"}},
            "ok": END,
            "failed": {**FAIL, "entry": [log("enter failed")]},
            "stuck": FAIL,
        },
    }


# -- eventless moves ---------------------------------------------------------------------------


def test_an_eventless_loop_through_a_join_is_a_runaway_not_a_crash() -> None:
    """choice -> parallel (regions final at once) -> done -> choice ... is one macrostep of
    eventless moves; past EVENTLESS_MAX it must be rejected as `runaway`. Today the count
    starts again at every join, so the loop recurses until Python's stack runs out (and a loop
    of 60 rounds, 120 moves, is accepted). Load gives no `eventless-loop` warning either
    (`_check_eventless_cycles` follows only `always:` edges, not `done:`)."""
    spec = {
        "name": "join_loop", "context": {"n": 0}, "events": {"go": {}},
        "states": {
            "idle": {"initial": True, "type": "wait", "on": {"go": "both"},
                     "after": {"delay": 60, "target": "end"}},
            "both": {"type": "parallel", "done": "route"},
            "a": {"parent": "both"},
            "a1": {"parent": "a", "initial": True, **END},
            "route": {"type": "choice", "always": [
                {"target": "both", "guard": "context.n < 1000",
                 "actions": [{"assign": {"n": "context.n + 1"}}]}, "end"]},
            "end": END,
        },
    }
    driver = Driver(load_definition(spec))
    driver.start()
    decision = driver.event("go")
    assert isinstance(decision, Rejected) and decision.reason == RejectReason.RUNAWAY


def _choice_chain(length: int) -> dict[str, Any]:
    states: dict[str, Any] = {"idle": {"initial": True, "type": "wait", "on": {"go": "c0"},
                                       "after": {"delay": 60, "target": "end"}}}
    for index in range(length):
        states[f"c{index}"] = {"type": "choice",
                               "always": [f"c{index + 1}" if index < length - 1 else "end"]}
    states["end"] = END
    return {"name": "chain", "events": {"go": {}}, "states": states}


def test_exactly_eventless_max_moves_that_settle_are_accepted() -> None:
    """README: a run that makes 100 eventless moves *without settling* is stopped; the checker
    says a runaway is *more than* EVENTLESS_MAX moves. An acyclic chain of 100 choice states
    (it loads with no finding) settles after 100 moves, yet `_settle` rejects it
    (`len(via) >= EVENTLESS_MAX`), and `no_eventless_runaway` then blames a loop that does
    not exist."""
    definition = load_definition(_choice_chain(100))
    assert definition.warnings == ()
    driver = Driver(definition)
    driver.start()
    decision = driver.event("go")
    assert isinstance(decision, Accepted) and decision.transition is not None
    assert len(decision.transition.via) == 100


# -- entry and exit actions ----------------------------------------------------------------------

TOP_COMPENSATE = {
    "name": "top_compensate", "context": {"log": []}, "tools": {"t": T, "u": T},
    "compensation_failed": "stuck",
    "states": {
        "s1": {"initial": True, "step": {"tool": "t", "compensation": {"tool": "u"}},
               "exit": [log("exit s1")], "on": {"step.succeeded": "s2", "step.failed": "bad"}},
        "s2": {"step": {"tool": "t", "retry": {"attempts_max": 1, "on_exhausted": "compensate"}},
               "exit": [log("exit s2")], "on": {"step.succeeded": "ok", "step.failed": "bad"}},
        "ok": END,
        "bad": {**FAIL, "entry": [log("enter bad")]},
        "stuck": FAIL,
    },
}


@pytest.mark.parametrize("where", ["top level", "parallel failure"])
def test_exit_and_entry_actions_run_once_around_a_compensation(where: str) -> None:
    """`_begin_compensation` takes the failure transition with `_take` (exits, actions,
    entries run; the context kept), and once undone `_on_compensation_result` moves from the
    same, never-left state to the same target with `_move`, which runs the exits and entries
    again."""
    if where == "top level":
        driver = Driver(load_definition(TOP_COMPENSATE))
        driver.start()
        driver.answer("t")
        driver.answer("t", ok=False)
        driver.answer("u")
        assert driver.ex.state == "bad"
        assert driver.ex.context["log"] == ["exit s1", "exit s2", "enter bad"]
    else:
        driver = Driver(load_definition(fetch_both(exit=[log("exit fetch")])))
        driver.start()
        driver.answer("crm")
        driver.answer("hold")
        driver.answer("billing", ok=False)
        driver.answer("release")
        assert driver.ex.state == "failed"
        assert driver.ex.context["log"] == ["exit fetch", "enter failed"]


def test_a_cost_budget_forced_move_runs_each_action_once() -> None:
    """In `_move`, `_run_moves` has already run exits, the transition's actions and the
    target's entries into `context` when the step's cost breaks `cost_max`; the recursive
    `_move(on_exceeded, context, ..., actions=actions)` runs exits and actions again on top."""
    spec = {
        "name": "costly", "context": {"log": []}, "events": {"go": {}}, "tools": {"t": T},
        "budgets": {"cost_max": 5, "on_exceeded": "over"},
        "states": {
            "idle": {"initial": True, "type": "wait", "exit": [log("exit idle")],
                     "on": {"go": {"target": "pay", "actions": [log("go")]}},
                     "after": {"delay": 60, "target": "over"}},
            "pay": {"entry": [log("enter pay")], "step": {"tool": "t", "cost": 10},
                    "on": {"step.succeeded": "done", "step.failed": "over"}},
            "over": {**FAIL, "entry": [log("enter over")]},
            "done": END,
        },
    }
    driver = Driver(load_definition(spec))
    driver.start()
    driver.event("go")
    assert driver.ex.state == "over"
    assert driver.ex.context["log"] == ["exit idle", "go", "enter over"]


def test_a_join_guard_reads_the_context_before_exits() -> None:
    spec = {
        "name": "guard_order", "context": {"left": False}, "events": {"tick": {}},
        "states": {
            "both": {"initial": True, "type": "parallel",
                     "done": [{"target": "saw_exit", "guard": "context.left"}, "before_exit"]},
            "a": {"parent": "both", "exit": [{"assign": {"left": "True"}}]},
            "a1": {"parent": "a", "initial": True, "type": "wait", "on": {"tick": "a_ok"},
                   "after": {"delay": 60, "target": "a_ok"}},
            "a_ok": {"parent": "a", **END},
            "saw_exit": END,
            "before_exit": END,
        },
    }
    driver = Driver(load_definition(spec))
    driver.start()
    driver.event("tick")
    assert driver.ex.state == "before_exit"


# -- parallel regions ----------------------------------------------------------------------------


def test_a_parallel_states_internal_transition_survives_the_join() -> None:
    """README: the join merges *the keys each region changed*. No region changed `notes`, yet
    the note the parallel state's internal transition added is gone after the join: `_join`
    takes every region value that differs from `ex.context` (the parent's context now), not
    from the context the region started with."""
    spec = {
        "name": "notes", "context": {"notes": []}, "events": {"note": {}, "tick": {}},
        "states": {
            "both": {"initial": True, "type": "parallel", "done": "end",
                     "on": {"note": {"actions": [{"assign": {"notes": "context.notes + ['n']"}}]}}},
            "a": {"parent": "both"},
            "a1": {"parent": "a", "initial": True, "type": "wait", "on": {"tick": "a2"},
                   "after": {"delay": 60, "target": "a2"}},
            "a2": {"parent": "a", **END},
            "end": END,
        },
    }
    driver = Driver(load_definition(spec))
    driver.start()
    driver.event("note")
    assert driver.ex.context["notes"] == ["n"]
    driver.event("tick")
    assert driver.ex.state == "end"
    assert driver.ex.context["notes"] == ["n"]


def test_a_parallel_failure_undoes_only_its_own_visit() -> None:
    """Visit 1 of `fetch` succeeds (its hold is kept for the run); visit 2 fails before any
    hold. `_join` undoes every completed key starting `{execution}/{state}/`, so visit 1's
    hold is released too, though visit 1 succeeded and the run goes on as if it held."""
    driver = Driver(load_definition(fetch_both()))
    driver.start()
    driver.answer("crm")
    driver.answer("hold")
    driver.answer("billing")
    assert driver.ex.state == "joined"
    assert [s.key for s in driver.ex.completed] == ["e/fetch/1/crm/crm_hold/1"]
    driver.event("again")
    decision = driver.answer("billing", ok=False)
    assert isinstance(decision, Accepted)
    undone = [c.compensates for c in decision.commands if isinstance(c, RunCompensation)]
    assert "e/fetch/1/crm/crm_hold/1" not in undone


def test_a_region_failing_on_entry_starts_no_other_regions_effects() -> None:
    """Region `a` ends in failure as the parallel state is entered; with the default
    `on_region_failure: cancel` region `b` is abandoned at once. Today `_regions_changed`
    starts every region anyway (the map branch stops, the parallel one does not), so one
    decision sends both the hold and its release: the release may run first, and the hold
    then stays. (In SCXML a state left in the macrostep it was entered starts no invoke.)"""
    spec = {
        "name": "instant_fail", "context": {"ok": False}, "tools": {"hold": T, "release": T},
        "compensation_failed": "stuck",
        "states": {
            "both": {"initial": True, "type": "parallel",
                     "done": [{"target": "good", "guard": "not event.payload.failed"}, "bad"]},
            "a": {"parent": "both"},
            "a1": {"parent": "a", "initial": True, "type": "choice",
                   "always": [{"target": "a_ok", "guard": "context.ok"}, "a_no"]},
            "a_ok": {"parent": "a", **END},
            "a_no": {"parent": "a", **FAIL},
            "b": {"parent": "both"},
            "b1": {"parent": "b", "initial": True,
                   "step": {"tool": "hold", "compensation": {"tool": "release"}},
                   "on": {"step.succeeded": "b_ok", "step.failed": "b_no"}},
            "b_ok": {"parent": "b", **END},
            "b_no": {"parent": "b", **FAIL},
            "good": END, "bad": FAIL, "stuck": FAIL,
        },
    }
    driver = Driver(load_definition(spec))
    decision = driver.start()
    assert isinstance(decision, Accepted)
    assert [c.tool for c in decision.commands if isinstance(c, RunEffect)] == []


def test_a_parallel_state_may_have_after() -> None:
    """README: "The parallel state's own `on:` and `after:` leave it, abandoning every region."
    `_check_hierarchy` refuses any compound parent with `after` (bad-parent on each region)."""
    spec = {
        "name": "timed", "events": {"tick": {}},
        "states": {
            "both": {"initial": True, "type": "parallel", "done": "end",
                     "after": {"delay": 500, "target": "late"}},
            "a": {"parent": "both"},
            "a1": {"parent": "a", "initial": True, "type": "wait", "on": {"tick": "a2"},
                   "after": {"delay": 60_000, "target": "a2"}},
            "a2": {"parent": "a", **END},
            "late": FAIL,
            "end": END,
        },
    }
    driver = Driver(load_definition(spec))
    driver.start()
    timer = next(t for t in driver.ex.timers if t.id == "e/both/1/after")
    driver.send(Event("fire", "timer.fired", "timer", {}, timer.id), 500)
    assert driver.ex.state == "late"


def test_a_region_may_have_its_own_transitions() -> None:
    """docs/statecharts-internals.md: "a region's own `on` is included". A region needs
    final children, and each of them was refused for inheriting the region's `on:` ("move
    it out of the compound state", which a region's final cannot be)."""
    spec = {
        "name": "region_on", "events": {"skip_a": {}, "tick": {}},
        "states": {
            "both": {"initial": True, "type": "parallel", "done": "end"},
            "a": {"parent": "both", "on": {"skip_a": "a_skipped"}},
            "a1": {"parent": "a", "initial": True, "type": "wait", "on": {"tick": "a_ok"},
                   "after": {"delay": 60, "target": "a_ok"}},
            "a_ok": {"parent": "a", **END},
            "a_skipped": {"parent": "a", "type": "final", "outcome": "skipped"},
            "end": END,
        },
    }
    driver = Driver(load_definition(spec))
    driver.start()
    driver.event("skip_a")
    assert driver.ex.state == "end"


def test_a_nested_scope_with_a_compensated_step_loads() -> None:
    """`_check_graph` adds the `compensation_failed` edge for a parallel or map state inside
    a region too (its `and top` is missing), and `compensation_failed` is required once a
    step declares a compensation; so any nested fan-out that undoes something is refused,
    located at the top-level state `states.stuck`."""
    spec = {
        "name": "map_in_region", "tools": {"hold": T, "release": T}, "context": {"xs": [1, 2]},
        "compensation_failed": "stuck",
        "states": {
            "outer": {"initial": True, "type": "parallel", "done": "ok"},
            "left": {"parent": "outer"},
            "each": {"parent": "left", "initial": True, "type": "map", "items": "context.xs",
                     "done": "left_ok"},
            "go": {"parent": "each", "initial": True,
                   "step": {"tool": "hold", "compensation": {"tool": "release"}},
                   "on": {"step.succeeded": "item_ok", "step.failed": "item_no"}},
            "item_ok": {"parent": "each", **END},
            "item_no": {"parent": "each", **FAIL},
            "left_ok": {"parent": "left", **END},
            "ok": END,
            "stuck": FAIL,
        },
    }
    load_definition(spec)


def test_an_approval_escalation_out_of_a_region_is_leaves_scope() -> None:
    """README: an `escalate_to` that leaves its region is `leaves-scope`. A step's is; an
    approval's is only caught by accident, as `no-way-to-final` located at the target."""
    spec = {
        "name": "approval_escape", "tools": {"pay": T},
        "states": {
            "both": {"initial": True, "type": "parallel",
                     "done": [{"target": "end", "guard": "not event.payload.failed"},
                              "manual"]},
            "a": {"parent": "both"},
            "ask": {"parent": "a", "initial": True, "type": "wait",
                    "approval": {"for_state": "pay_it", "summary": "pay", "roles": ["boss"],
                                 "expires_after": "1h", "on_expiry": "escalate",
                                 "escalate_to": "manual"},
                    "on": {"approval.granted": "pay_it", "approval.denied": "a_no"}},
            "pay_it": {"parent": "a", "step": {"tool": "pay", "needs_approval": True},
                       "on": {"step.succeeded": "a_ok", "step.failed": "a_no"}},
            "a_ok": {"parent": "a", **END},
            "a_no": {"parent": "a", **FAIL},
            "manual": {"type": "final", "outcome": "escalated"},
            "end": END,
        },
    }
    found = [(f.code, f.location) for f in check_spec(WorkflowSpec.model_validate(spec))]
    assert ("leaves-scope", "states.ask.approval.escalate_to") in found


# -- map -----------------------------------------------------------------------------------------

MAP = {
    "name": "attachments",
    "context": {"attachments": []},
    "tools": {"extract": T},
    "states": {
        "each": {"initial": True, "type": "map", "items": "context.attachments",
                 "concurrency_max": 1, "tolerated_failures": 1,
                 "done": [{"target": "done", "guard": "not event.payload.failing"}, "failed"]},
        "extract": {"parent": "each", "initial": True,
                    "step": {"tool": "extract", "input": {"url": "=context.url + '?raw'"}},
                    "on": {"step.succeeded": "extracted", "step.failed": "unreadable"}},
        "extracted": {"parent": "each", **END},
        "unreadable": {"parent": "each", **FAIL},
        "done": END,
        "failed": FAIL,
    },
}


def test_an_item_that_cannot_start_does_not_refuse_another_items_result() -> None:
    """Item 0's extract succeeded; its slot frees and item 1 (no `url`) starts, whose step
    input raises. `_regions_changed` returns that rejection for the whole event, so item 0's
    result (an effect that did happen) is refused, now and on every redelivery, and nothing
    else can move the run."""
    driver = Driver(load_definition(MAP),
                    {"attachments": [{"url": "u0"}, {"name": "no url"}]})
    driver.start()
    decision = driver.answer("extract", {"text": "zero"})
    assert isinstance(decision, Accepted)


# -- history -------------------------------------------------------------------------------------


def test_deep_history_resumes_a_parallel_state_afresh() -> None:
    """Deep history does not reach into a parallel state (a departure from SCXML the README
    lists): the parallel state is recorded as the leaf, so resuming enters it again and its
    regions start from their initial states, their steps sent again under new keys."""
    spec = {
        "name": "deep_parallel", "tools": {"t": T},
        "events": {"pause": {}, "resume": {}, "tick": {}},
        "states": {
            "work": {"initial": True, "history": "deep", "on": {"pause": "paused"}},
            "both": {"parent": "work", "initial": True, "type": "parallel", "done": "end"},
            "a": {"parent": "both"},
            "a1": {"parent": "a", "initial": True, "step": {"tool": "t"},
                   "on": {"step.succeeded": "a2", "step.failed": "a2"}},
            "a2": {"parent": "a", "type": "wait", "on": {"tick": "a3"},
                   "after": {"delay": 600, "target": "a3"}},
            "a3": {"parent": "a", **END},
            "paused": {"type": "wait", "on": {"resume": "work"},
                       "after": {"delay": 600, "target": "end"}},
            "end": END,
        },
    }
    driver = Driver(load_definition(spec))
    driver.start()
    driver.answer("t")
    assert [r.state for r in driver.ex.regions] == ["a2"]
    driver.event("pause")
    driver.event("resume")
    assert driver.ex.state == "both"
    assert [c.key for c in driver.commands if isinstance(c, RunEffect)] == [
        "e/both/1/a/a1/1", "e/both/2/a/a1/1"]
    assert [r.state for r in driver.ex.regions] == ["a1"]

