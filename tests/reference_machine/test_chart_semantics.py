"""Statechart semantics of `decide`, against hand-worked expectations: eventless moves and
choices, internal transitions, entry and exit order (SCXML's), history, parallel regions and
their join, region failure and compensation, map fan-out, conditional approvals and correlated
payloads."""

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
    action_hash,
    load_definition,
)
from reference_machine._codec import decode_execution, encode_execution

# -- eventless transitions and choices -------------------------------------------------------

ROUTER = {
    "name": "router",
    "context": {"amount": 0, "log": []},
    "events": {"go": {}},
    "states": {
        "idle": {"initial": True, "type": "wait", "on": {"go": "route"},
                 "after": {"delay": 60, "target": "small"}},
        "route": {"type": "choice", "always": [
            {"target": "large", "guard": "context.amount > 100", "actions": [log("large")]},
            {"target": "small", "actions": [log("small")]}]},
        "large": {"type": "final", "outcome": "success"},
        "small": {"type": "final", "outcome": "success"},
    },
}


@pytest.mark.parametrize(("amount", "target", "logged"), [(150, "large", ["large"]),
                                                         (100, "small", ["small"])])
def test_a_choice_takes_the_first_branch_whose_guard_holds(amount: int, target: str,
                                                           logged: list[str]) -> None:
    driver = Driver(load_definition(ROUTER), {"amount": amount})
    driver.start()
    decision = driver.event("go")
    assert isinstance(decision, Accepted)
    assert driver.ex.state == target and driver.ex.status == "final"
    assert driver.ex.context["log"] == logged
    # one macrostep: one version, one transition that names the choice it passed
    assert driver.ex.sequence == 2
    assert decision.transition == ("idle", "go", target, "", ("route",), ())
    assert driver.ex.visits == {"idle": 1, "route": 1, target: 1}


def test_a_choice_with_no_branch_that_holds_rejects_the_event() -> None:
    spec = {**ROUTER, "states": {**ROUTER["states"], "route": {"type": "choice", "always": [
        {"target": "large", "guard": "context.amount > 100"}]}}}
    definition = load_definition(spec)
    assert [w.code for w in definition.warnings] == ["choice-no-default"]
    driver = Driver(definition, {"amount": 5})
    driver.start()
    decision = driver.event("go")
    assert isinstance(decision, Rejected) and decision.reason == RejectReason.GUARD_FALSE
    assert "no branch of choice 'route' held" in decision.detail
    assert driver.ex.state == "idle"


LOOP = {
    "name": "loop",
    "context": {"n": 0},
    "events": {"go": {}, "stop": {}},
    "states": {
        "idle": {"initial": True, "type": "wait", "on": {"go": "a", "stop": "end"},
                 "after": {"delay": 60, "target": "end"}},
        "a": {"always": [{"target": "b", "guard": "context.n < 1000",
                          "actions": [{"assign": {"n": "context.n + 1"}}]}, "end"]},
        "b": {"always": [{"target": "a"}]},
        "end": {"type": "final", "outcome": "success"},
    },
}


def test_a_guarded_eventless_loop_that_does_not_settle_is_a_reported_runaway() -> None:
    definition = load_definition(LOOP)
    assert "eventless-loop" in [w.code for w in definition.warnings]
    driver = Driver(definition)
    driver.start()
    decision = driver.event("go")
    assert isinstance(decision, Rejected) and decision.reason == RejectReason.RUNAWAY
    assert "without settling" in decision.detail and "a -> b" in decision.detail
    assert driver.ex.state == "idle"  # nothing of the runaway was kept


def test_a_guarded_eventless_loop_that_settles_is_one_macrostep() -> None:
    driver = Driver(load_definition(LOOP), {"n": 997})
    driver.start()
    decision = driver.event("go")
    assert isinstance(decision, Accepted) and driver.ex.state == "end"
    assert decision.transition.via == ("a", "b", "a", "b", "a", "b", "a")
    assert driver.ex.context["n"] == 1000


# -- internal transitions, entry and exit ----------------------------------------------------

NESTED = {
    "name": "nested",
    "context": {"log": [], "pings": 0},
    "events": {"go": {}, "ping": {}, "back": {}, "finish": {}},
    "states": {
        "outer": {"initial": True, "entry": [log("enter outer")], "exit": [log("exit outer")],
                  "on": {"finish": "end"}},
        "a": {"parent": "outer", "initial": True, "type": "wait",
              "entry": [log("enter a")], "exit": [log("exit a")],
              "after": {"delay": 60, "target": "end"},
              "on": {"go": {"target": "b", "actions": [log("go")]},
                     "ping": {"actions": [{"assign": {"pings": "context.pings + 1"}}]}}},
        "b": {"parent": "outer", "type": "wait", "entry": [log("enter b")],
              "exit": [log("exit b")], "after": {"delay": 60, "target": "end"},
              "on": {"back": {"target": "outer", "actions": [log("back")]}}},
        "end": {"type": "final", "outcome": "success", "entry": [log("enter end")]},
    },
}


def test_entry_and_exit_actions_run_in_scxml_order() -> None:
    """Exits innermost first, then the transition's actions, then entries outermost first;
    a transition to the compound state it is declared in (external) leaves and re-enters
    it."""
    driver = Driver(load_definition(NESTED))
    driver.start()
    assert driver.ex.context["log"] == ["enter outer", "enter a"]
    driver.event("go")
    assert driver.ex.context["log"][2:] == ["exit a", "go", "enter b"]
    driver.event("back")
    assert driver.ex.context["log"][5:] == ["exit b", "exit outer", "back", "enter outer",
                                            "enter a"]
    driver.event("finish")  # declared on outer, taken from a
    assert driver.ex.context["log"][10:] == ["exit a", "exit outer", "enter end"]


def test_an_internal_transition_runs_its_actions_without_leaving() -> None:
    driver = Driver(load_definition(NESTED))
    driver.start()
    visits = dict(driver.ex.visits)
    timers = driver.ex.timers
    decision = driver.event("ping")
    assert isinstance(decision, Accepted)
    assert driver.ex.state == "a" and driver.ex.context["pings"] == 1
    assert driver.ex.context["log"] == ["enter outer", "enter a"]  # no exit, no entry
    assert driver.ex.visits == visits and driver.ex.timers == timers and not decision.commands
    assert decision.transition == ("a", "ping", "a", "internal", (), ())


# -- history ---------------------------------------------------------------------------------


def history_spec(kind: str) -> dict[str, Any]:
    return {
        "name": f"history_{kind}",
        "events": {"next": {}, "pause": {}, "resume": {}, "finish": {}},
        "states": {
            "work": {"initial": True, "history": kind, "on": {"pause": "paused"}},
            "one": {"parent": "work", "initial": True, "type": "wait", "on": {"next": "two"},
                    "after": {"delay": 600, "target": "end"}},
            "two": {"parent": "work"},
            "two_a": {"parent": "two", "initial": True, "type": "wait",
                      "on": {"next": "two_b"}, "after": {"delay": 600, "target": "end"}},
            "two_b": {"parent": "two", "type": "wait", "on": {"finish": "end"},
                      "after": {"delay": 600, "target": "end"}},
            "paused": {"type": "wait", "on": {"resume": "work"},
                       "after": {"delay": 600, "target": "end"}},
            "end": {"type": "final", "outcome": "success"},
        },
    }


@pytest.mark.parametrize(("kind", "resumed"), [("shallow", "two_a"), ("deep", "two_b")])
def test_reentering_a_compound_with_history_resumes_where_it_was(kind: str, resumed: str
                                                                ) -> None:
    driver = Driver(load_definition(history_spec(kind)))
    driver.start()
    driver.event("next")
    driver.event("next")
    assert driver.ex.state == "two_b"
    driver.event("pause")
    assert driver.ex.state == "paused"
    driver.event("resume")
    assert driver.ex.state == resumed
    assert decode_execution(encode_execution(driver.ex)).history == driver.ex.history


def test_a_compound_never_left_has_no_history_and_enters_its_initial_child() -> None:
    spec = history_spec("deep")
    spec["states"]["paused"] = {"initial": False, "type": "wait", "on": {"resume": "work"},
                                "after": {"delay": 600, "target": "end"}}
    definition = load_definition(spec)
    driver = Driver(definition)
    driver.start()
    assert driver.ex.state == "one" and driver.ex.history == {}


# -- parallel regions ------------------------------------------------------------------------


def parallel_spec(policy: str = "cancel") -> dict[str, Any]:
    return {
        "name": "fetch_both",
        "context": {"log": [], "crm_log": []},
        "tools": {"crm": {"idempotency_keys": True}, "billing": {"idempotency_keys": True},
                  "hold": {"idempotency_keys": True}, "release": {"idempotency_keys": True}},
        "compensation_failed": "stuck",
        "states": {
            "fetch": {"initial": True, "type": "parallel", "on_region_failure": policy,
                      "entry": [log("enter fetch")], "exit": [log("exit fetch")],
                      "done": [{"target": "joined", "guard": "not event.payload.failed"},
                               "failed"]},
            "crm": {"parent": "fetch", "exit": [log("exit crm", "crm_log")]},
            "crm_get": {"parent": "crm", "initial": True, "step": {"tool": "crm"},
                        "on": {"step.succeeded": {"target": "crm_hold", "actions": [
                            {"assign": {"customer": "event.payload.name"}}]},
                            "step.failed": "crm_failed"}},
            "crm_hold": {"parent": "crm", "step": {
                "tool": "hold", "compensation": {"tool": "release"}},
                "on": {"step.succeeded": "crm_done", "step.failed": "crm_failed"}},
            "crm_done": {"parent": "crm", "type": "final", "outcome": "success",
                         "exit": [log("exit crm_done", "crm_log")]},
            "crm_failed": {"parent": "crm", "type": "final", "outcome": "failure"},
            "bill": {"parent": "fetch", "exit": [log("exit bill")]},
            "bill_get": {"parent": "bill", "initial": True, "step": {"tool": "billing"},
                         "on": {"step.succeeded": {"target": "bill_done", "actions": [
                             {"assign": {"amount": "event.payload.amount"}}]},
                             "step.failed": "bill_failed"}},
            "bill_done": {"parent": "bill", "type": "final", "outcome": "success"},
            "bill_failed": {"parent": "bill", "type": "final", "outcome": "failure"},
            "joined": {"type": "final", "outcome": "success"},
            "failed": {"type": "final", "outcome": "failure"},
            "stuck": {"type": "final", "outcome": "failure"},
        },
    }


def test_entering_a_parallel_state_starts_every_region_with_its_calls_in_flight() -> None:
    driver = Driver(load_definition(parallel_spec()))
    decision = driver.start()
    assert isinstance(decision, Accepted)
    assert driver.ex.state == "fetch" and driver.ex.status == "running"
    assert [(r.definition, r.state) for r in driver.ex.regions] == [("crm", "crm_get"),
                                                                     ("bill", "bill_get")]
    effects = [c for c in decision.commands if isinstance(c, RunEffect)]
    assert [(c.tool, c.key) for c in effects] == [("crm", "e/fetch/1/crm/crm_get/1"),
                                                  ("billing", "e/fetch/1/bill/bill_get/1")]
    assert [(t.source, t.target) for t in decision.transition.inner] == [
        ("", "crm_get"), ("", "bill_get")]


@pytest.mark.parametrize("order", [("crm", "hold", "billing"), ("billing", "crm", "hold"),
                                   ("crm", "billing", "hold")])
def test_the_join_waits_for_every_region_in_any_order(order: tuple[str, ...]) -> None:
    driver = Driver(load_definition(parallel_spec()))
    driver.start()
    payloads = {"crm": {"name": "Ann"}, "billing": {"amount": 150}, "hold": {}}
    for tool in order[:-1]:
        assert isinstance(driver.answer(tool, payloads[tool]), Accepted)
        assert driver.ex.state == "fetch"
    decision = driver.answer(order[-1], payloads[order[-1]])
    assert isinstance(decision, Accepted)
    assert driver.ex.state == "joined" and driver.ex.regions == ()
    # each region works on its own copy of the context; the join merges the keys each one
    # changed, in region order. Exits: a region's states innermost first, then the parallel
    # state itself
    assert driver.ex.context["customer"] == "Ann" and driver.ex.context["amount"] == 150
    assert driver.ex.context["crm_log"] == ["exit crm_done", "exit crm"]
    assert driver.ex.context["log"] == ["enter fetch", "exit bill", "exit fetch"]
    assert decision.transition.source == "fetch" and decision.transition.event == "done"
    # the hold's undo is kept for the whole run's compensation
    assert [s.tool for s in driver.ex.completed] == ["release"]


def test_an_event_goes_to_every_region() -> None:
    spec = {
        "name": "broadcast",
        "context": {"log": []},
        "events": {"tick": {}},
        "states": {
            "both": {"initial": True, "type": "parallel", "done": "end"},
            "left": {"parent": "both"},
            "l1": {"parent": "left", "initial": True, "type": "wait", "on": {"tick": "l2"},
                   "after": {"delay": 60, "target": "l2"}},
            "l2": {"parent": "left", "type": "final", "outcome": "success"},
            "right": {"parent": "both"},
            "r1": {"parent": "right", "initial": True, "type": "wait", "on": {"tick": "r2"},
                   "after": {"delay": 60, "target": "r2"}},
            "r2": {"parent": "right", "type": "final", "outcome": "success"},
            "end": {"type": "final", "outcome": "success"},
        },
    }
    driver = Driver(load_definition(spec))
    driver.start()
    assert len(driver.ex.timers) == 2  # the regions' timers, seen on the parent
    decision = driver.event("tick")
    assert isinstance(decision, Accepted) and driver.ex.state == "end"
    assert [(t.source, t.target) for t in decision.transition.inner] == [("l1", "l2"),
                                                                         ("r1", "r2")]
    cancelled = {c.timer_id for c in decision.commands if type(c).__name__ == "CancelTimer"}
    assert cancelled == {"e/both/1/left/l1/1/after", "e/both/1/right/r1/1/after"}


def test_a_region_failure_cancels_the_others_and_undoes_every_completed_effect() -> None:
    driver = Driver(load_definition(parallel_spec("cancel")))
    driver.start()
    driver.answer("crm", {"name": "Ann"})
    driver.answer("hold")  # crm region done, its hold completed
    decision = driver.answer("billing", ok=False)
    assert isinstance(decision, Accepted)
    assert driver.ex.status == "compensating" and driver.ex.regions == ()
    undo = [c for c in decision.commands if isinstance(c, RunCompensation)]
    assert [(c.tool, c.compensates) for c in undo] == [("release", "e/fetch/1/crm/crm_hold/1")]
    driver.answer("release")
    assert driver.ex.state == "failed" and driver.ex.status == "final"


def test_on_cancel_a_call_left_in_flight_is_undone_first() -> None:
    driver = Driver(load_definition(parallel_spec("cancel")))
    driver.start()
    driver.answer("crm", {"name": "Ann"})  # the hold is in flight
    decision = driver.answer("billing", ok=False)
    undo = [c for c in decision.commands if isinstance(c, RunCompensation)]
    assert [c.compensates for c in undo] == ["e/fetch/1/crm/crm_hold/1"]
    late = driver.answer("hold")  # the abandoned call lands later: ignored
    assert late.kind == "ignored"


def test_on_wait_the_other_regions_finish_before_the_join() -> None:
    driver = Driver(load_definition(parallel_spec("wait")))
    driver.start()
    driver.answer("billing", ok=False)
    assert driver.ex.state == "fetch" and driver.ex.status == "running"
    driver.answer("crm", {"name": "Ann"})
    decision = driver.answer("hold")
    assert driver.ex.status == "compensating"
    assert [c.tool for c in decision.commands if isinstance(c, RunCompensation)] == ["release"]


# -- map -------------------------------------------------------------------------------------

MAP = {
    "name": "attachments",
    "context": {"attachments": []},
    "tools": {"extract": {"idempotency_keys": True}},
    "states": {
        "each": {"initial": True, "type": "map", "items": "context.attachments",
                 "concurrency_max": 2, "tolerated_failures": 1, "results": "texts",
                 "done": [{"target": "done", "guard": "not event.payload.failing"}, "failed"]},
        "extract": {"parent": "each", "initial": True,
                    "step": {"tool": "extract", "input": {"url": "=context.url"}},
                    "on": {"step.succeeded": {"target": "extracted", "actions": [
                        {"assign": {"text": "event.payload.text"}}]},
                        "step.failed": "unreadable"}},
        "extracted": {"parent": "each", "type": "final", "outcome": "success"},
        "unreadable": {"parent": "each", "type": "final", "outcome": "failure"},
        "done": {"type": "final", "outcome": "success"},
        "failed": {"type": "final", "outcome": "failure"},
    },
}


def test_a_map_runs_one_flow_per_item_at_most_concurrency_max_at_once() -> None:
    items = [{"url": f"u{i}"} for i in range(3)]
    driver = Driver(load_definition(MAP), {"attachments": items})
    decision = driver.start()
    calls = [c for c in decision.commands if isinstance(c, RunEffect)]
    assert [(c.key, c.input["url"]) for c in calls] == [("e/each/1/0/extract/1", "u0"),
                                                        ("e/each/1/1/extract/1", "u1")]
    # item 1 answers first; item 2 starts in its slot
    call = calls[1]
    decision = driver.send(Event("r1", "step.succeeded", "tool", {"text": "one"},
                                 call.effect_id))
    started = [c for c in decision.commands if isinstance(c, RunEffect)]
    assert [c.key for c in started] == ["e/each/1/2/extract/1"]
    driver.send(Event("r0", "step.succeeded", "tool", {"text": "zero"}, calls[0].effect_id))
    driver.send(Event("r2", "step.succeeded", "tool", {"text": "two"}, started[0].effect_id))
    assert driver.ex.state == "done"
    assert [r["text"] for r in driver.ex.context["texts"]] == ["zero", "one", "two"]


def test_a_map_tolerates_its_failures_then_fails() -> None:
    items = [{"url": f"u{i}"} for i in range(3)]
    driver = Driver(load_definition({**MAP, "states": {**MAP["states"], "each": {
        **MAP["states"]["each"], "concurrency_max": None}}}), {"attachments": items})
    driver.start()
    keys = [c for c in driver.commands if isinstance(c, RunEffect)]
    driver.send(Event("f0", "step.failed", "tool", {"category": "permanent"}, keys[0].effect_id))
    assert driver.ex.state == "each"  # one failure tolerated
    driver.send(Event("f1", "step.failed", "tool", {"category": "permanent"}, keys[1].effect_id))
    assert driver.ex.state == "failed"  # two are not; item 2 is abandoned
    assert driver.ex.context["texts"] == [None, None, None]


def test_a_map_over_nothing_is_done_at_once() -> None:
    driver = Driver(load_definition(MAP), {"attachments": []})
    driver.start()
    assert driver.ex.state == "done" and driver.ex.context["texts"] == []


def test_a_map_over_a_non_list_is_rejected_at_run_time_and_at_load_time() -> None:
    driver = Driver(load_definition(MAP), {"attachments": "not a list"})
    decision = driver.start()
    assert isinstance(decision, Rejected) and "is a str, not a list" in decision.detail
    with pytest.raises(Exception, match=r"states\.each\.items: map state 'each' maps over "
                                        r"'context\.attachments'.*not a list"):
        load_definition({**MAP, "context": {"attachments": {"a": 1}}})


# -- conditional approval --------------------------------------------------------------------

CREDIT = {
    "name": "credit",
    "context": {"amount": 0},
    "tools": {"credit": {"idempotency_keys": True}},
    "states": {
        "route": {"initial": True, "type": "choice", "always": [
            {"target": "ask", "guard": "context.amount > 100"}, "issue"]},
        "ask": {"type": "wait", "approval": {
            "for_state": "issue", "summary": "credit {amount}", "roles": ["supervisor"],
            "expires_after": "1h"},
            "on": {"approval.granted": "issue", "approval.denied": "refused"}},
        "issue": {"step": {"tool": "credit", "input": {"amount": "=context.amount"},
                           "reversible": False, "needs_approval": "context.amount > 100"},
                  "on": {"step.succeeded": "done", "step.failed": "refused"}},
        "done": {"type": "final", "outcome": "success"},
        "refused": {"type": "final", "outcome": "failure"},
    },
}


def test_a_conditional_approval_is_asked_only_when_its_expression_holds() -> None:
    definition = load_definition(CREDIT)
    assert definition.warnings == ()
    small = Driver(definition, {"amount": 50})
    small.start()
    assert small.ex.state == "issue" and [c.tool for c in small.calls("credit")] == ["credit"]
    large = Driver(definition, {"amount": 500})
    large.start()
    assert large.ex.state == "ask"
    request = large.ex.approval
    assert request is not None
    assert request.action_hash == action_hash(definition, "issue", {"amount": 500})
    large.send(Event("g", "approval.granted", "human",
                     {"role": "supervisor", "action_hash": request.action_hash},
                     request.request_id))
    assert large.ex.state == "issue" and large.calls("credit")[0].input == {"amount": 500}


def test_a_large_credit_that_skips_the_approval_is_refused() -> None:
    spec = {**CREDIT, "states": {**CREDIT["states"], "route": {
        "initial": True, "type": "choice", "always": [
            {"target": "issue", "guard": "context.amount > 0"}, "ask"]}}}
    driver = Driver(load_definition(spec), {"amount": 500})
    decision = driver.start()
    assert isinstance(decision, Rejected) and decision.reason == RejectReason.UNAUTHORIZED


# -- correlated payloads ---------------------------------------------------------------------

WEBHOOK = {
    "name": "webhook",
    "context": {"issue_id": ""},
    "events": {"ci.finished": {
        "payload": {"type": "object", "properties": {"issue_id": {"type": "string"}},
                    "required": ["issue_id"]},
        "correlate": {"issue_id": "context.issue_id"}}},
    "states": {
        "waiting": {"initial": True, "type": "wait", "on": {"ci.finished": "done"},
                    "after": {"delay": 60, "target": "done"}},
        "done": {"type": "final", "outcome": "success"},
    },
}


def test_a_correlated_event_for_another_run_is_refused_and_its_own_is_taken() -> None:
    driver = Driver(load_definition(WEBHOOK), {"issue_id": "ISS-7"})
    driver.start()
    decision = driver.event("ci.finished", {"issue_id": "ISS-8"})
    assert isinstance(decision, Rejected) and decision.reason == RejectReason.UNCORRELATED
    assert "payload.issue_id is 'ISS-8', but context.issue_id is 'ISS-7'" in decision.detail
    assert isinstance(driver.event("ci.finished", {"issue_id": "ISS-7"}), Accepted)
    assert driver.ex.state == "done"


def test_a_region_failure_undoes_only_what_the_regions_did() -> None:
    """A step completed before the parallel state stays completed (its undo kept for the
    run), while the regions' completed steps are undone."""
    spec = parallel_spec("cancel")
    states = dict(spec["states"])
    states["reserve"] = {"initial": True, "step": {"tool": "hold", "compensation": {
        "tool": "release"}}, "on": {"step.succeeded": "fetch", "step.failed": "failed"}}
    states["fetch"] = {**states["fetch"], "initial": False}
    driver = Driver(load_definition({**spec, "states": states}))
    driver.start()
    driver.answer("hold")  # the reservation, before the parallel state
    driver.answer("crm", {"name": "Ann"})
    driver.answer("hold")  # the region's hold
    decision = driver.answer("billing", ok=False)
    undo = [c.compensates for c in decision.commands if isinstance(c, RunCompensation)]
    assert undo == ["e/fetch/1/crm/crm_hold/1"]
    driver.answer("release")
    assert driver.ex.state == "failed"
    assert [s.key for s in driver.ex.completed] == ["e/reserve/1"]


def test_a_region_waiting_to_retry_an_uncertain_call_is_undone_when_abandoned() -> None:
    spec = parallel_spec("cancel")
    states = dict(spec["states"])
    states["crm_hold"] = {**states["crm_hold"], "step": {
        "tool": "hold", "compensation": {"tool": "release"}, "timeout": "5s",
        "retry": {"attempts_max": 3}}}
    driver = Driver(load_definition({**spec, "states": states}))
    driver.start()
    driver.answer("crm", {"name": "Ann"})
    driver.answer("hold", {"category": "timeout", "error": "slow"}, ok=False)  # may have held
    assert driver.ex.regions[0].uncertain and driver.ex.regions[0].effect is None
    decision = driver.answer("billing", ok=False)
    undo = [c.compensates for c in decision.commands if isinstance(c, RunCompensation)]
    assert undo == ["e/fetch/1/crm/crm_hold/1"]


def test_a_parallel_state_inside_a_region_joins_inside_out() -> None:
    spec = {
        "name": "nested_parallel",
        "tools": {"t": {"idempotency_keys": True}},
        "states": {
            "outer": {"initial": True, "type": "parallel", "done": "end"},
            "left": {"parent": "outer"},
            "inner": {"parent": "left", "initial": True, "type": "parallel",
                      "done": "left_done"},
            "i1": {"parent": "inner"},
            "i1_go": {"parent": "i1", "initial": True, "step": {"tool": "t"},
                      "on": {"step.succeeded": "i1_ok", "step.failed": "i1_ok"}},
            "i1_ok": {"parent": "i1", "type": "final", "outcome": "success"},
            "i2": {"parent": "inner"},
            "i2_go": {"parent": "i2", "initial": True, "step": {"tool": "t"},
                      "on": {"step.succeeded": "i2_ok", "step.failed": "i2_ok"}},
            "i2_ok": {"parent": "i2", "type": "final", "outcome": "success"},
            "left_done": {"parent": "left", "type": "final", "outcome": "success"},
            "right": {"parent": "outer"},
            "r_go": {"parent": "right", "initial": True, "step": {"tool": "t"},
                     "on": {"step.succeeded": "r_ok", "step.failed": "r_ok"}},
            "r_ok": {"parent": "right", "type": "final", "outcome": "success"},
            "end": {"type": "final", "outcome": "success"},
        },
    }
    driver = Driver(load_definition(spec))
    decision = driver.start()
    keys = [c.key for c in decision.commands if isinstance(c, RunEffect)]
    assert keys == ["e/outer/1/left/inner/1/i1/i1_go/1", "e/outer/1/left/inner/1/i2/i2_go/1",
                    "e/outer/1/right/r_go/1"]
    calls = [c for c in decision.commands if isinstance(c, RunEffect)]
    for index, call in enumerate(reversed(calls)):
        assert driver.ex.state == "outer"
        driver.send(Event(f"r{index}", "step.succeeded", "tool", {}, call.effect_id))
    assert driver.ex.state == "end" and driver.ex.sequence == 4  # one version per event


def test_a_parallel_state_whose_regions_end_at_once_joins_in_the_same_macrostep() -> None:
    spec = {
        "name": "instant",
        "events": {"go": {}},
        "states": {
            "idle": {"initial": True, "type": "wait", "on": {"go": "both"},
                     "after": {"delay": 60, "target": "end"}},
            "both": {"type": "parallel", "done": "check"},
            "a": {"parent": "both"},
            "a1": {"parent": "a", "initial": True, "type": "choice", "always": ["a2"]},
            "a2": {"parent": "a", "type": "final", "outcome": "success"},
            "b": {"parent": "both"},
            "b1": {"parent": "b", "initial": True, "type": "final", "outcome": "success"},
            "check": {"type": "choice", "always": ["end"]},
            "end": {"type": "final", "outcome": "success"},
        },
    }
    driver = Driver(load_definition(spec))
    driver.start()
    decision = driver.event("go")
    assert isinstance(decision, Accepted) and driver.ex.state == "end"
    assert decision.transition.source == "idle" and decision.transition.via == ("both",
                                                                                "check")
    assert driver.ex.sequence == 2


def test_a_region_that_fails_after_an_uncertain_attempt_has_that_attempt_undone() -> None:
    """The hold timed out (it may have held), its retries ran out, the region failed: the
    parallel state's failure undoes the hold though it never completed."""
    spec = parallel_spec("cancel")
    states = dict(spec["states"])
    states["crm_hold"] = {**states["crm_hold"], "step": {
        "tool": "hold", "compensation": {"tool": "release"}, "retry": {"attempts_max": 1}}}
    driver = Driver(load_definition({**spec, "states": states}))
    driver.start()
    driver.answer("billing", {"amount": 5})
    driver.answer("crm", {"name": "Ann"})
    decision = driver.answer("hold", {"category": "timeout", "error": "slow"}, ok=False)
    assert driver.ex.status == "compensating"
    undo = [c.compensates for c in decision.commands if isinstance(c, RunCompensation)]
    assert undo == ["e/fetch/1/crm/crm_hold/1"]
