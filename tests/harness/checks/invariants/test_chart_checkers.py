"""The checkers on statecharts (issue 17): each rule on hand-built histories of a parallel state,
a map, a choice, an internal transition, history and a conditional approval, both ways: the
history a correct machine makes holds, the one a bug makes breaks the rule it should.

The records are written as the reference machine's store tells them (keys
`{execution}/{P}/{visit}/{region}/{state}/{visit}`, region moves in `inner`, region states in
`regions`, an eventless path in `via`); tests/harness/engines/test_chart_verdicts.py runs the same
definitions for real."""

from __future__ import annotations

from typing import Any

import pytest
from chart_histories import (
    BILL,
    CRM,
    FAILED,
    FINAL,
    ITEM,
    MAP,
    PARALLEL,
    call,
    commit,
    fetched,
    items,
    mapped,
    regions,
)

from harness import (
    Applied,
    Commanded,
    Decided,
    Dispatched,
    Finished,
    HistoryRecord,
    Observed,
    Violation,
    check,
)
from harness.checks.coverage import coverage_of
from harness.checks.metrics import metrics_of
from reference_machine import WorkflowDefinition, action_hash, load_definition


def undo(key: str, tool: str) -> Commanded:
    return Commanded(f"{key}/undo#1", tool, f"{key}/undo", True)


def applied(step: int, tool: str, key: str, input: str = "{}", seq: int = 1) -> Applied:
    return Applied(step, 0, "x1", tool, key, input, seq)


def only(rule: str, definition: WorkflowDefinition, history: list[HistoryRecord]
         ) -> list[Violation]:
    return check(definition, history, only=[rule])


# -- a parallel state: two regions, a step with an undo, a join on the regions' outcomes ------


class TestLegalTransitions:
    def test_a_parallel_run_from_entry_to_join_is_legal(self) -> None:
        """Region moves (`fetch -> fetch`), region starts and the join are declared moves:
        the false alarm `moved from 'fetch' to 'fetch' on step.succeeded` is gone."""
        assert only("legal_transitions", PARALLEL, fetched()) == []

    def test_a_region_move_its_flow_does_not_declare_is_reported(self) -> None:
        history = fetched()
        history[2] = history[2]._replace(inner=(("crm_get", "step.succeeded", "crm_done"),))
        (found,) = only("legal_transitions", PARALLEL, history)
        assert "region of 'fetch' move from 'crm_get' to 'crm_done' on step.succeeded" in (
            found.message) and "'crm_hold'" in found.message and found.step == 3

    def test_a_region_started_elsewhere_than_its_initial_leaf_is_reported(self) -> None:
        history = fetched()
        history[1] = history[1]._replace(inner=(("", "step.succeeded", "crm_hold"),
                                                ("", "step.succeeded", "bill_get")))
        (found,) = only("legal_transitions", PARALLEL, history)
        assert "started a region of 'fetch' in 'crm_hold'; 'crm' starts in 'crm_get'" in (
            found.message)

    def test_a_join_to_a_state_its_done_does_not_name_is_reported(self) -> None:
        history = fetched()
        history[4] = history[4]._replace(state="reserving")
        (found,) = only("legal_transitions", PARALLEL, history)
        assert "from 'fetch' to 'reserving' on done" in found.message
        assert "'failed', 'joined'" in found.message

    def test_leaving_by_the_parallel_states_own_transition_is_legal(self) -> None:
        history = [*fetched()[:3], commit(4, "failed", source="fetch", moved="cancel")]
        assert only("legal_transitions", PARALLEL, history) == []
        history[-1] = history[-1]._replace(state="joined")
        assert len(only("legal_transitions", PARALLEL, history)) == 1


ROUTER = load_definition({
    "name": "router",
    "context": {"amount": 0, "log": []},
    "events": {"go": {}},
    "states": {
        "idle": {"initial": True, "type": "wait", "on": {"go": "route"},
                 "after": {"delay": 60, "target": "small"}},
        "route": {"type": "choice", "always": [
            {"target": "large", "guard": "context.amount > 100",
             "actions": [{"assign": {"log": "context.log + ['large']"}}]},
            {"target": "small", "actions": [{"assign": {"log": "context.log + ['small']"}}]}]},
        "large": FINAL,
        "small": FINAL,
    },
})


def routed(amount: int, target: str, *, via: tuple[str, ...] = ("route",),
           logged: tuple[str, ...] | None = None) -> list[HistoryRecord]:
    """`idle -> target on go`, through the choice."""
    before = {"amount": amount, "log": []}
    after = {"amount": amount, "log": list(logged if logged is not None else (target,))}
    return [commit(1, "idle", moved="execution.started", context=before,
                   payload={"amount": amount}),
            commit(2, target, source="idle", moved="go", via=via, context=after)]


class TestEventlessMoves:
    @pytest.mark.parametrize(("amount", "target"), [(150, "large"), (100, "small")])
    def test_a_path_through_a_choice_is_legal_and_its_branch_is_the_first_that_holds(
            self, amount: int, target: str) -> None:
        history = routed(amount, target)
        assert only("legal_transitions", ROUTER, history) == []
        assert only("guards_held", ROUTER, history) == []

    def test_a_hop_no_eventless_transition_declares_is_reported(self) -> None:
        history = routed(150, "large", via=("small",))
        (found,) = only("legal_transitions", ROUTER, history)
        assert "first move, to 'small', is none the definition allows" in found.message
        history = routed(150, "idle", via=("route",))
        (found,) = only("legal_transitions", ROUTER, history)
        assert "'route' -> 'idle' is no eventless move the definition declares" in (
            found.message)

    def test_the_wrong_branch_of_a_choice_is_reported(self) -> None:
        """150 takes the first branch; a machine that went on to `small` is caught (the
        context the replay makes, the log of `small`, is the one recorded)."""
        (found,) = only("guards_held", ROUTER, routed(150, "small"))
        assert ("moved on from 'route' to 'small' on go, but the first eventless transition "
                "whose guard holds goes to 'large'") in found.message

    def test_a_machine_that_stops_in_a_choice_is_reported(self) -> None:
        history = routed(150, "route", via=(), logged=())
        assert only("legal_transitions", ROUTER, history) == []  # `go` does lead there
        (found,) = only("guards_held", ROUTER, history)
        assert "settled in 'route' on go, though its eventless transition to 'large'" in (
            found.message)

    def test_a_replay_that_does_not_give_the_recorded_context_judges_nothing(self) -> None:
        """The wrong branch, but a context no replay gives (a region's merge, a function
        that is not pure): the guards' context is not known, so nothing is told."""
        history = routed(150, "small", logged=("something else",))
        assert only("guards_held", ROUTER, history) == []


NOTES = load_definition({
    "name": "notes",
    "context": {"n": 0, "log": []},
    "events": {"ping": {}, "go": {}},
    "states": {
        "outer": {"initial": True, "entry": [{"assign": {"log": "context.log + ['in']"}}]},
        "ask": {"parent": "outer", "initial": True, "type": "wait",
                "after": {"delay": 60, "target": "end"},
                "on": {"ping": [{"guard": "context.n > 0",
                                 "actions": [{"assign": {"n": "context.n + 1"}}]},
                                {"target": "end"}],
                       "go": "end"}},
        "end": FINAL,
    },
})


class TestInternalTransitions:
    def history(self, n: int, state: str, forced: str) -> list[HistoryRecord]:
        return [commit(1, "ask", moved="execution.started", context={"n": n, "log": ["in"]},
                       payload={"n": n}),
                commit(2, state, source="ask", moved="ping", forced=forced,
                       context={"n": n + (1 if forced else 0), "log": ["in"]})]

    def test_an_internal_transition_is_legal_and_chosen_by_its_guard(self) -> None:
        history = self.history(1, "ask", "internal")
        assert only("legal_transitions", NOTES, history) == []
        assert only("guards_held", NOTES, history) == []

    def test_an_internal_transition_where_none_is_declared_is_reported(self) -> None:
        history = self.history(1, "ask", "internal")
        history[1] = history[1]._replace(moved="go", event_type="go")
        (found,) = only("legal_transitions", NOTES, history)
        assert "'ask' has no transition without a target on go" in found.message

    def test_leaving_when_the_internal_transition_holds_is_reported(self) -> None:
        (found,) = only("guards_held", NOTES, self.history(1, "end", ""))
        assert "the first transition whose guard holds is internal" in found.message
        assert only("guards_held", NOTES, self.history(0, "end", "")) == []


def history_spec() -> dict[str, Any]:
    return {
        "name": "resumable",
        "events": {"next": {}, "pause": {}, "resume": {}},
        "states": {
            "work": {"initial": True, "history": "deep", "on": {"pause": "paused"}},
            "one": {"parent": "work", "initial": True, "type": "wait", "on": {"next": "two"},
                    "after": {"delay": 600, "target": "end"}},
            "two": {"parent": "work", "type": "wait", "on": {"next": "one"},
                    "after": {"delay": 600, "target": "end"}},
            "paused": {"type": "wait", "on": {"resume": "work"},
                       "after": {"delay": 600, "target": "end"}},
            "end": FINAL,
        },
    }


HISTORY = load_definition(history_spec())


class TestHistory:
    def test_a_resume_where_the_run_was_is_legal_and_one_where_it_never_was_is_not(
            self) -> None:
        moves = [commit(1, "one", moved="execution.started"),
                 commit(2, "two", source="one", moved="next"),
                 commit(3, "paused", source="two", moved="pause"),
                 commit(4, "two", source="paused", moved="resume")]
        assert only("legal_transitions", HISTORY, moves) == []
        never = [moves[0], moves[2]._replace(from_state="one"), moves[3]]
        (found,) = only("legal_transitions", HISTORY, never)
        assert "history could resume only had the run been there before" in found.message

    def test_a_resume_is_covered_with_the_transition_it_was_made_by(self) -> None:
        moves = [commit(1, "one", moved="execution.started"),
                 commit(2, "two", source="one", moved="next"),
                 commit(3, "paused", source="two", moved="pause"),
                 commit(4, "two", source="paused", moved="resume")]
        covered = coverage_of(HISTORY, moves)
        assert covered.resumes == {"work"}
        assert {("paused", "resume", "two"), ("paused", "resume", "one")} <= covered.transitions
        report = covered.report(HISTORY)
        assert report["history"] == {"reached": 1, "of": 1, "missing": []}


# -- joins, the regions' outcomes and a map's results -----------------------------------------


class TestJoinAfterRegions:
    def test_a_join_once_every_region_is_final_holds(self) -> None:
        assert only("join_after_regions", PARALLEL, fetched()) == []
        assert only("join_after_regions", MAP, mapped()) == []

    def test_a_join_with_a_region_still_running_is_reported(self) -> None:
        history = fetched()
        early = history[3]._replace(state="joined", moved="done", regions=())
        (found,) = only("join_after_regions", PARALLEL, [*history[:3], early])
        assert "joined 'fetch' (moving to 'joined' on done) with 1 of its 2 regions final" in (
            found.message) and found.step == 4

    def test_a_map_joins_early_only_past_its_tolerated_failures(self) -> None:
        """One unreadable item is tolerated: joining then, with item 2 still running, is
        early; a second failure allows it (on_region_failure: cancel)."""
        history = mapped()
        early = history[2]._replace(state="failed", moved="done", regions=())
        (found,) = only("join_after_regions", MAP, [*history[:2], early])
        assert "with 2 of its 3 items final (1 failed, and it tolerates 1)" in found.message
        second = mapped(last="unreadable")
        second[3] = second[3]._replace(state="failed")
        assert only("join_after_regions", MAP, second) == []

    def test_an_item_that_never_started_is_finished_once_the_map_failed(self) -> None:
        """Item 1 fails and item 2, due to start in its slot, cannot (its input fails: a
        failed item) or is not started (the map failed): two failures, past the one
        tolerated, end the map; with `wait`, once item 0 is final too."""
        history = mapped()
        failing = history[1]._replace(state="failed", moved="done", regions=(), effects=(),
                                      inner=(("extract", "step.failed", "unreadable"),))
        assert only("join_after_regions", MAP, [history[0], failing]) == []
        spec = MAP.spec.model_dump(exclude_unset=True)
        spec["states"]["each"]["on_region_failure"] = "wait"
        waiting = load_definition(spec)
        (found,) = only("join_after_regions", waiting, [history[0], failing])
        assert "with 2 of its 3 items final" in found.message  # item 0 still running
        first = history[1]._replace(moved="step.failed", effects=(),
                                    inner=(("extract", "step.failed", "unreadable"),),
                                    regions=items(("extract", "running"),
                                                  ("unreadable", "final"), ("", "final")))
        last = history[2]._replace(state="failed", moved="done", regions=())
        assert only("join_after_regions", waiting, [history[0], first, last]) == []

    def test_with_wait_a_failure_is_no_reason_to_join_early(self) -> None:
        spec = {**PARALLEL.spec.model_dump(exclude_unset=True)}
        spec["states"]["fetch"]["on_region_failure"] = "wait"
        waiting = load_definition(spec)
        history = fetched()
        failed = history[3]._replace(state="failed", moved="done", regions=(), inner=(
            ("bill_get", "step.failed", "bill_failed"),))
        assert only("join_after_regions", PARALLEL, [*history[:3], failed]) == []  # cancel
        (found,) = only("join_after_regions", waiting, [*history[:3], failed])
        assert "it waits for every one (on_region_failure: wait)" in found.message


class TestMapResults:
    def test_one_result_per_item_holds(self) -> None:
        assert only("map_results_per_item", MAP, mapped()) == []

    @pytest.mark.parametrize(("texts", "says"), [
        ([{"text": "one"}, {"text": "two"}], "holds 2 entries for 3 items"),
        ({"0": None}, "holds dict, not a list"),
        ([{"text": "zero"}, {"text": "one"}, {"text": "two"}],
         "for item 0, which failed (None was expected)"),
        ([None, None, {"text": "two"}], "for item 1, which succeeded")])
    def test_results_that_do_not_match_the_items_are_reported(self, texts: Any, says: str
                                                              ) -> None:
        (found,) = only("map_results_per_item", MAP, mapped(texts))
        assert "joined map 'each', and context.texts" in found.message and says in (
            found.message)


class TestNoRegionEffectAfterLeaving:
    def test_a_region_call_after_its_visit_was_left_is_reported(self) -> None:
        history = [*fetched()[:3], commit(4, "failed", source="fetch", moved="cancel")]
        late = commit(5, "failed", effects=(call(f"{CRM}/crm_hold/1", "hold", 2),))
        (found,) = only("no_region_effect_after_leaving", PARALLEL, [*history, late])
        assert f"after the visit {'x1/fetch/1/'!r} of its parallel or map state was left at " \
               "step 4" in found.message and found.records == (3, 4)
        assert only("no_region_effect_after_leaving", PARALLEL, history) == []

    def test_undoing_a_left_visits_steps_is_no_region_effect(self) -> None:
        history = [*fetched()[:3], commit(4, "failed", source="fetch", moved="cancel"),
                   commit(5, "failed", effects=(undo(f"{CRM}/crm_get/1", "release"),))]
        assert only("no_region_effect_after_leaving", PARALLEL, history) == []


LOOP = load_definition({
    "name": "loop",
    "context": {"n": 0},
    "events": {"go": {}},
    "states": {
        "idle": {"initial": True, "type": "wait", "on": {"go": "a"},
                 "after": {"delay": 60, "target": "end"}},
        "a": {"always": [{"target": "b", "guard": "context.n < 1000",
                          "actions": [{"assign": {"n": "context.n + 1"}}]}, "end"]},
        "b": {"always": [{"target": "a"}]},
        "end": FINAL,
    },
})


class TestNoEventlessRunaway:
    def test_a_runaway_the_machine_tells_is_the_definitions_loop(self) -> None:
        history = [commit(1, "idle", moved="execution.started", context={"n": 0}),
                   Decided(2, 0, "x1", "e2", "rejected:runaway")]
        (found,) = only("no_eventless_runaway", LOOP, history)
        assert "refused event 'e2' as a runaway" in found.message and found.step == 2
        history[1] = history[1]._replace(decision="rejected:illegal")
        assert only("no_eventless_runaway", LOOP, history) == []

    def test_a_refusal_with_no_reason_told_is_replayed(self) -> None:
        """A timer or a tool result is refused without a decision said: the eventless moves
        are replayed from the context recorded, and loop (n < 1000 a hundred times over)."""
        refused = commit(2, "", event_type="go", decision="rejected")
        history = [commit(1, "idle", moved="execution.started", context={"n": 0}), refused]
        (found,) = only("no_eventless_runaway", LOOP, history)
        assert "never settle (" in found.message and "a -> b -> a" in found.message
        settles = [commit(1, "idle", moved="execution.started", context={"n": 997}), refused]
        assert only("no_eventless_runaway", LOOP, settles) == []


# -- approvals ---------------------------------------------------------------------------------

CREDIT = load_definition({
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
        "done": FINAL,
        "refused": FAILED,
    },
})


def credited(amount: int, *, asked: bool) -> list[HistoryRecord]:
    context = {"amount": amount}
    key = "x1/issue/1"
    effect = (call(key, "credit"),)
    body = f'{{"amount":{amount}}}'
    if not asked:
        return [commit(1, "issue", moved="execution.started", via=("route",), context=context,
                       payload=context, effects=effect), applied(2, "credit", key, body)]
    digest = action_hash(CREDIT, "issue", context)
    request = "x1/ask/1/approval"
    return [commit(1, "ask", moved="execution.started", via=("route",), context=context,
                   payload=context),
            Observed(1, 0, "x1", "ask", "waiting", 1, None, request, digest),
            commit(2, "issue", source="ask", moved="approval.granted", context=context,
                   event_source="human", answers=request, effects=effect,
                   payload={"role": "supervisor", "action_hash": digest}),
            applied(3, "credit", key, body)]


class TestConditionalApproval:
    def test_a_small_credit_needs_no_grant_and_a_large_one_does(self) -> None:
        assert only("approved_effects", CREDIT, credited(50, asked=False)) == []
        assert only("approved_effects", CREDIT, credited(500, asked=True)) == []
        (found,) = only("approved_effects", CREDIT, credited(500, asked=False))
        assert "credit took effect for x1" in found.message
        assert "no genuine approval was granted" in found.message

    def test_both_sides_of_the_approval_are_covered(self) -> None:
        small = coverage_of(CREDIT, credited(50, asked=False))
        large = coverage_of(CREDIT, credited(500, asked=True))
        assert small.approvals == {("issue", "not asked")}
        assert large.approvals == {("issue", "asked")}
        report = small.merge(large).report(CREDIT)
        assert report["approvals"] == {"reached": 2, "of": 2, "missing": []}

    def test_a_large_credit_routed_past_its_approval_breaks_the_choice_too(self) -> None:
        (found,) = only("guards_held", CREDIT, credited(500, asked=False))
        assert "moved on from 'route' to 'issue'" in found.message


SIGNED = load_definition({
    "name": "signed",
    "tools": {"sign": {"idempotency_keys": True}, "note": {"idempotency_keys": True}},
    "states": {
        "both": {"initial": True, "type": "parallel", "done": "end"},
        "signer": {"parent": "both"},
        "asking": {"parent": "signer", "initial": True, "type": "wait",
                   "approval": {"for_state": "signing", "summary": "sign", "roles": ["lead"],
                                "expires_after": "1h"},
                   "on": {"approval.granted": "signing", "approval.denied": "refused"}},
        "signing": {"parent": "signer", "step": {"tool": "sign", "needs_approval": True},
                    "on": {"step.succeeded": "signed", "step.failed": "refused"}},
        "signed": {"parent": "signer", **FINAL},
        "refused": {"parent": "signer", **FAILED},
        "noter": {"parent": "both"},
        "noting": {"parent": "noter", "initial": True, "step": {"tool": "note"},
                   "on": {"step.succeeded": "noted", "step.failed": "noted"}},
        "noted": {"parent": "noter", **FINAL},
        "end": FINAL,
    },
})
SIGNER = "x1/both/1/signer"


def signed(role: str = "lead", *, granted: bool = True) -> list[HistoryRecord]:
    digest = action_hash(SIGNED, "signing", {})
    request = f"{SIGNER}/asking/1/approval"
    history: list[HistoryRecord] = [
        commit(1, "both", moved="execution.started",
               effects=(call("x1/both/1/noter/noting/1", "note"),),
               inner=(("", "execution.started", "asking"), ("", "execution.started", "noting")),
               regions=((SIGNER, "asking", "waiting"), ("x1/both/1/noter", "noting", "running"))),
        Observed(1, 0, "x1", "both", "running", 1, None, request, digest)]
    if granted:
        history.append(commit(
            2, "both", source="both", moved="approval.granted", event_source="human",
            answers=request, payload={"role": role, "action_hash": digest},
            effects=(call(f"{SIGNER}/signing/1", "sign"),),
            inner=(("asking", "approval.granted", "signing"),),
            regions=((SIGNER, "signing", "running"), ("x1/both/1/noter", "noting", "running"))))
    history.append(applied(3, "sign", f"{SIGNER}/signing/1"))
    return history


class TestApprovalsInRegions:
    def test_a_regions_request_decided_by_a_listed_role_is_genuine(self) -> None:
        assert only("approval_genuine", SIGNED, signed()) == []
        assert only("approved_effects", SIGNED, signed()) == []

    def test_a_region_decision_by_a_role_not_listed_is_not(self) -> None:
        (found,) = only("approval_genuine", SIGNED, signed("intern"))
        assert "in 'asking' although role 'intern' may not decide it" in found.message
        assert len(only("approved_effects", SIGNED, signed("intern"))) == 1

    def test_a_regions_gated_step_without_a_grant_is_reported(self) -> None:
        (found,) = only("approved_effects", SIGNED, signed(granted=False))
        assert "sign took effect for x1" in found.message


# -- the older rules on region effects ---------------------------------------------------------


class TestEffectsOfRegions:
    def test_two_map_items_with_one_input_are_two_actions(self) -> None:
        same = '{"url":"u"}'
        history = [applied(1, "extract", "x1/each/1/0/extract/1", same),
                   applied(2, "extract", "x1/each/1/1/extract/1", same, 2)]
        assert only("no_duplicate_effect", MAP, history) == []
        history.append(applied(3, "extract", "x1/each/1/1/extract/1", same, 3))
        (found,) = only("no_duplicate_effect", MAP, history)
        assert found.records == (1, 2)

    def test_a_map_entered_again_does_the_same_items_action_again(self) -> None:
        """An item's visit number is not what makes it new: the same input again is."""
        same = '{"url":"u"}'
        history = [applied(1, "extract", "x1/each/1/0/extract/1", same),
                   applied(2, "extract", "x1/each/2/0/extract/1", same, 2)]
        assert len(only("no_duplicate_effect", MAP, history)) == 1

    def test_an_undone_region_step_may_be_done_and_undone_again(self) -> None:
        hold = f"{CRM}/crm_hold/1"
        again = "x1/fetch/2/crm/crm_hold/1"
        history = [applied(1, "hold", hold), applied(2, "release", f"{hold}/undo", seq=2),
                   applied(3, "hold", again, seq=3),
                   applied(4, "release", f"{again}/undo", seq=4)]
        assert only("no_duplicate_effect", PARALLEL, history) == []

    def test_a_regions_attempts_are_bounded_per_entry(self) -> None:
        key = ITEM.format(0) + "/extract/1"
        history = [commit(1, "each", moved="execution.started", effects=(call(key, "extract"),)),
                   commit(2, "each", source="each", moved="timer.fired",
                          effects=(call(key, "extract", 2),))]
        assert only("retries_within_bounds", MAP, history) == []
        history.append(commit(3, "each", source="each", moved="timer.fired",
                              effects=(call(key, "extract", 3),)))
        (found,) = only("retries_within_bounds", MAP, history)
        assert "attempted extract in 'extract' (a region's" in found.message
        assert "3 times in one entry" in found.message and "attempts_max is 2" in found.message

    def test_a_region_call_before_its_commit_is_reported(self) -> None:
        history = fetched()
        history.insert(2, Dispatched(3, 0, "x1", "hold", f"{CRM}/crm_hold/1", "tool call"))
        (found,) = only("persist_before_effect", PARALLEL, history)
        assert "called hold" in found.message
        assert only("persist_before_effect", PARALLEL, fetched()) == []

    def test_a_parallel_state_seen_behind_its_commit_is_lost(self) -> None:
        history = [*fetched()[:3], Observed(3, 0, "x1", "fetch", "running", 2)]
        (found,) = only("nothing_lost", PARALLEL, history)
        assert "after committing 'fetch' at version 3" in found.message

    def test_two_items_sending_under_one_key_are_reported(self) -> None:
        shared = "x1/each/1/extract/1"
        history = mapped()
        history[0] = history[0]._replace(effects=(
            Commanded(f"{ITEM.format(0)}/extract/1#1", "extract", shared),
            Commanded(f"{ITEM.format(1)}/extract/1#1", "extract", shared)))
        (found,) = only("region_keys_distinct", MAP, history)
        assert "for 'x1/each/1/1'" in found.message and "the key of 'x1/each/1/0'" in (
            found.message)
        assert only("region_keys_distinct", MAP, mapped()) == []


class TestCompensationAcrossRegions:
    def failed_fetch(self, *undone: str) -> list[HistoryRecord]:
        """Reserve, then both regions; crm's get and hold complete, billing fails: the join
        undoes the crm region's steps newest first (hold, then get), not the reservation."""
        get, hold = f"{CRM}/crm_get/1", f"{CRM}/crm_hold/1"
        history = fetched()[:3]
        history += [
            applied(2, "reserve", "x1/reserving/1"),
            applied(3, "crm", get, seq=2),
            applied(3, "hold", hold, seq=3),
            commit(4, "fetch", source="fetch", moved="step.succeeded",
                   answers=f"{hold}#1", inner=(("crm_hold", "step.succeeded", "crm_done"),),
                   regions=regions("crm_done", "bill_get", crm_status="final")),
            commit(5, "fetch", source="fetch", moved="done", answers=f"{BILL}/bill_get/1#1",
                   inner=(("bill_get", "step.failed", "bill_failed"),),
                   effects=(undo(hold, "release"),))]
        for offset, key in enumerate(undone):
            history += [Dispatched(6 + offset, 0, "x1", "release", f"{key}/undo"),
                        applied(6 + offset, "release", f"{key}/undo", seq=4 + offset)]
        history += [commit(9, "failed", source="fetch", moved="compensation.succeeded",
                           forced="compensated"),
                    Finished(9, 0, "x1", "failed", "final", "failure", 9)]
        return history

    def test_a_parallel_failure_undoes_its_regions_and_keeps_what_came_before(self) -> None:
        get, hold = f"{CRM}/crm_get/1", f"{CRM}/crm_hold/1"
        history = self.failed_fetch(hold, get)
        assert only("compensation_complete", PARALLEL, history) == []
        assert only("compensation_order", PARALLEL, history) == []
        assert only("legal_transitions", PARALLEL, history) == []

    def test_a_regions_step_left_done_is_reported(self) -> None:
        (found,) = only("compensation_complete", PARALLEL,
                        self.failed_fetch(f"{CRM}/crm_hold/1"))
        assert "began compensating the regions of 'fetch'" in found.message
        assert "crm (step 3) not undone" in found.message and "reserve" not in found.message

    def test_within_a_region_newest_first(self) -> None:
        """The hold began once the get was answered: the hold is undone first."""
        get, hold = f"{CRM}/crm_get/1", f"{CRM}/crm_hold/1"
        (found,) = only("compensation_order", PARALLEL, self.failed_fetch(get, hold))
        assert "undid crm (applied at step 3) before hold" in found.message

    def test_regions_that_ran_side_by_side_are_undone_in_either_order(self) -> None:
        """crm's get and billing's get both began at the parallel state's entry."""
        get, bill = f"{CRM}/crm_get/1", f"{BILL}/bill_get/1"
        history: list[HistoryRecord] = [
            *fetched()[:2], applied(2, "crm", get), applied(2, "billing", bill, seq=2),
            commit(3, "fetch", source="fetch", moved="step.succeeded", answers=f"{bill}#1",
                   inner=(("bill_get", "step.succeeded", "bill_done"),)),
            commit(4, "fetch", source="fetch", moved="step.succeeded", answers=f"{get}#1",
                   inner=(("crm_get", "step.succeeded", "crm_hold"),))]
        both = load_definition({**PARALLEL.spec.model_dump(exclude_unset=True), "states": {
            **PARALLEL.spec.model_dump(exclude_unset=True)["states"],
            "bill_get": {"parent": "bill", "initial": True,
                         "step": {"tool": "billing", "compensation": {"tool": "release"}},
                         "on": {"step.succeeded": "bill_done", "step.failed": "bill_failed"}}}})
        for first, second in ((get, bill), (bill, get)):
            undone = [applied(5, "release", f"{first}/undo", seq=3),
                      applied(6, "release", f"{second}/undo", seq=4)]
            assert only("compensation_order", both, [*history, *undone]) == []


    def test_a_step_waiting_to_retry_is_no_older_than_what_began_meanwhile(self) -> None:
        """crm's get timed out (it may have taken effect) and waits to retry; billing's hold
        began and succeeded meanwhile. The get never succeeded, so the hold is not newer:
        undoing the uncertain get first, as the machine does, is in order."""
        spec = PARALLEL.spec.model_dump(exclude_unset=True)
        spec["states"]["bill_get"]["on"]["step.succeeded"] = "bill_hold"
        spec["states"]["bill_hold"] = {
            "parent": "bill", "step": {"tool": "hold", "compensation": {"tool": "release"}},
            "on": {"step.succeeded": "bill_done", "step.failed": "bill_failed"}}
        holding = load_definition(spec)
        get, bill, hold = f"{CRM}/crm_get/1", f"{BILL}/bill_get/1", f"{BILL}/bill_hold/1"
        history: list[HistoryRecord] = [
            *fetched()[:2], applied(2, "crm", get),
            commit(3, "fetch", source="fetch", moved="step.failed", answers=f"{get}#1",
                   regions=regions("crm_get", "bill_get")),  # timed out: a retry is due
            commit(4, "fetch", source="fetch", moved="step.succeeded", answers=f"{bill}#1",
                   effects=(call(hold, "hold"),),
                   inner=(("bill_get", "step.succeeded", "bill_hold"),)),
            applied(4, "hold", hold, seq=2),
            commit(5, "fetch", source="fetch", moved="step.succeeded", answers=f"{hold}#1",
                   inner=(("bill_hold", "step.succeeded", "bill_done"),)),
            applied(6, "release", f"{get}/undo", seq=3),
            applied(7, "release", f"{hold}/undo", seq=4)]
        assert only("compensation_order", holding, history) == []
        # had the get succeeded before the hold began, the hold would be newer
        history[3] = history[3]._replace(moved="step.succeeded", event_type="step.succeeded",
                                         inner=(("crm_get", "step.succeeded", "crm_hold"),))
        (found,) = only("compensation_order", holding, history)
        assert "undid crm (applied at step 2) before hold" in found.message


# -- budgets, coverage and metrics -------------------------------------------------------------


class TestBudgets:
    def test_region_moves_are_no_entries_and_eventless_moves_are(self) -> None:
        """The start, `go` into the choice and the choice's branch are three transitions, as
        the machine counts them; a region's moves enter nothing."""
        budgeted = load_definition({**ROUTER.spec.model_dump(exclude_unset=True),
                                    "budgets": {"transitions_max": 3, "on_exceeded": "small"}})
        assert only("budgets_within_bounds", budgeted, routed(150, "large")) == []
        tight = load_definition({**ROUTER.spec.model_dump(exclude_unset=True),
                                 "budgets": {"transitions_max": 2, "on_exceeded": "small"}})
        (found,) = only("budgets_within_bounds", tight, routed(150, "large"))
        assert "made transition 3; transitions_max is 2" in found.message
        one = load_definition({**PARALLEL.spec.model_dump(exclude_unset=True),
                               "budgets": {"visits_max": 1, "on_exceeded": "failed"}})
        assert only("budgets_within_bounds", one, fetched()) == []


class TestCoverage:
    def test_a_parallel_runs_region_states_moves_and_join_are_covered(self) -> None:
        covered = coverage_of(PARALLEL, fetched())
        assert {"crm_get", "crm_hold", "crm_done", "bill_get", "bill_done", "joined"} <= (
            covered.states)
        assert {("crm_get", "step.succeeded", "crm_hold"), ("fetch", "done", "joined"),
                ("reserving", "step.succeeded", "fetch")} <= covered.transitions
        assert ("fetch", "step.succeeded", "fetch") not in covered.transitions
        assert covered.regions == {"crm", "bill"}
        report = covered.report(PARALLEL)
        assert report["regions"] == {"reached": 2, "of": 2, "missing": []}
        assert ["fetch", "done", "failed"] in report["transitions"]["missing"]
        assert ("fetch", "done", 0, True) in covered.guards

    def test_eventless_moves_are_covered_move_by_move(self) -> None:
        covered = coverage_of(ROUTER, routed(150, "large"))
        assert {("idle", "go", "route"), ("route", "always", "large")} <= covered.transitions
        assert "route" in covered.states
        report = covered.report(ROUTER)
        assert report["eventless"] == {"reached": 1, "of": 2,
                                       "missing": [["route", "always", "small"]]}
        assert ("route", "always", 0, True) in covered.guards

    def test_an_internal_transition_is_covered_as_a_self_loop(self) -> None:
        history = TestInternalTransitions().history(1, "ask", "internal")
        assert ("ask", "ping", "ask") in coverage_of(NOTES, history).transitions

    def test_a_definition_without_statecharts_reports_what_it_did(self) -> None:
        plain = load_definition({"name": "plain", "events": {"go": {}}, "states": {
            "a": {"initial": True, "type": "wait", "on": {"go": "b"},
                  "after": {"delay": 60, "target": "b"}}, "b": FINAL}})
        history = [commit(1, "a", moved="execution.started"),
                   commit(2, "b", source="a", moved="go")]
        report = coverage_of(plain, history).report(plain)
        assert set(report) == {"states", "transitions", "guards"}
        assert report["transitions"]["reached"] == 1


class TestMetrics:
    def test_a_regions_moves_are_visits_of_its_states_not_of_the_parallel_state(self) -> None:
        metrics = metrics_of(PARALLEL, [*fetched(),
                                        Finished(5, 0, "x1", "joined", "final", "success", 5)])
        assert metrics.state_visits["fetch"] == 1 and metrics.transitions == 2
        assert metrics.state_visits["crm_hold"] == 1 and metrics.state_visits["bill_done"] == 1
