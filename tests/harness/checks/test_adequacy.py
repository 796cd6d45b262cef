"""What a campaign exercised, and the gaps that keep its verdict from `held`
(`harness/checks/adequacy.py`), on counts made by hand."""

from __future__ import annotations

from typing import Any

import pytest

from fault_injection import FaultKind, FaultPlan, FaultRate, load_plan
from harness.checks.adequacy import Exercised, adequacy, check_acknowledged
from harness.checks.coverage import UNSEEN_EVENT, Coverage
from harness.errors import HarnessError
from reference_machine import DefinitionError, load_definition, load_spec

SPEC: dict[str, Any] = {
    "name": "bot", "version": 1,
    "tools": {"pay.refund": {"idempotency_keys": True}},
    "events": {"approve": {"sources": ["human"]}},
    "states": {
        "waiting": {"type": "wait", "initial": True, "on": {"approve": "refunding"},
                    "after": {"delay": "1d", "target": "expired"}},
        "refunding": {"step": {"tool": "pay.refund", "input": {"order": "o-1"}},
                      "on": {"step.succeeded": "refunded", "step.failed": "failed"}},
        "refunded": {"type": "final", "outcome": "success"},
        "failed": {"type": "final", "outcome": "failure"},
        "expired": {"type": "final", "outcome": "cancelled"},
    },
}
BOT = load_definition(SPEC)
CRASH = FaultPlan((FaultRate(FaultKind.CRASH, 0.02),))
NAMES = ("no_duplicate_effect", "persist_before_effect", "approval_genuine", "replay_matches",
         "my_rule")

NO_COMMITS = ("the machine reports no commits (a machine of your own reports them with "
              "watch(); an adapter's target cannot)")


def done(**counts: Any) -> Exercised:
    """Gives what one run exercised, as counted (crash points `after_save`, `after_refund`)."""
    base: dict[str, Any] = {"runs": 1, "points": ("after_save", "after_refund"),
                            "judged": dict.fromkeys(NAMES, 0)}
    return Exercised(**{**base, **counts})


NOWHERE = Coverage()


def gaps(exercised: Exercised, plan: FaultPlan = CRASH, coverage: Coverage = NOWHERE,
         accepted: dict[str, str] | None = None, definition: Any = BOT) -> list[str]:
    return [gap.code for gap in adequacy(definition, exercised, coverage, plan, NAMES,
                                         accepted).gaps]


class TestExercised:
    def test_merging_sums_every_count_and_keeps_the_points_in_order(self) -> None:
        """Two runs' counts add up, key by key; the crash points keep their first order."""
        one = done(passed={"after_save": 2}, crashed={"after_save": 1},
                   chances={"crash": 2}, judged={"my_rule": 1}, committed=1)
        two = done(passed={"after_save": 3, "after_refund": 1}, injected={"crash": 1},
                   points=("after_refund", "after_save", "between"), replayed=1)
        both = one.merge(two)
        assert both.runs == 2 and both.committed == 1 and both.replayed == 1
        assert both.passed == {"after_save": 5, "after_refund": 1}
        assert both.crashed == {"after_save": 1} and both.injected == {"crash": 1}
        assert both.points == ("after_save", "after_refund", "between")


class TestCrashPoints:
    def test_a_point_passed_and_never_crashed_is_a_gap_saying_how_often(self) -> None:
        """Passed 40 times, never crashed: named, with the plan that crashes there."""
        found = adequacy(BOT, done(passed={"after_save": 40, "after_refund": 3},
                                   crashed={"after_refund": 1}), Coverage(), CRASH, NAMES)
        (gap,) = found.gaps
        assert gap.code == "crash_point:after_save"
        assert "passed 40 times with faults on and never crashed there" in gap.what
        assert "points: [after_save]" in gap.how

    def test_a_point_never_passed_is_a_gap_too(self) -> None:
        (gap,) = adequacy(BOT, done(passed={"after_save": 4}, crashed={"after_save": 2}),
                          Coverage(), CRASH, NAMES).gaps
        assert gap.code == "crash_point:after_refund" and "never passed" in gap.what

    def test_without_crashes_in_the_plan_no_point_is_claimed(self) -> None:
        plan = FaultPlan((FaultRate(FaultKind.DUPLICATE_EVENT, 0.1),))
        assert gaps(done(chances={"duplicate_event": 3},
                         injected={"duplicate_event": 1}), plan) == []

    def test_a_plan_that_names_points_claims_those_only(self) -> None:
        plan = load_plan({"faults": {"crash": {"rate": 0.1, "points": ["after_refund"]}}},
                         crash_points=("after_save", "after_refund"))
        assert gaps(done(passed={"after_save": 9}), plan) == ["crash_point:after_refund"]


class TestFaultKinds:
    def test_a_kind_with_places_to_strike_that_never_struck_is_a_gap(self) -> None:
        plan = FaultPlan((FaultRate(FaultKind.LATE_EVENT, 0.03),
                          FaultRate(FaultKind.SLOW_TOOL, 0.05)))
        found = adequacy(BOT, done(chances={"late_event": 12, "slow_tool": 30},
                                   injected={"slow_tool": 2}), Coverage(), plan, NAMES)
        (gap,) = found.gaps
        assert gap.code == "fault:late_event"
        assert gap.what == "fault late_event had 12 places to strike and was never injected"

    def test_a_kind_with_no_place_to_strike_is_said_not_a_gap(self) -> None:
        """No timer fell due, no second worker to be had: the campaign could not try them."""
        plan = FaultPlan((FaultRate(FaultKind.TIMER_SKEW, 0.05),
                          FaultRate(FaultKind.SECOND_WORKER, 0.02)))
        found = adequacy(BOT, done(chances={"second_worker": 8},
                                   unoffered=frozenset({"second_worker"})), Coverage(), plan,
                         NAMES)
        assert found.gaps == ()
        assert found.untried == {
            "timer_skew": "no timer fell due, or the plan's max_skew is 0",
            "second_worker": "the machine offers no second worker (worker() gave None: a "
                             "deployment that runs one runner per execution)"}
        assert any("timer_skew (no timer fell due" in note for note in found.notes())


class TestMoves:
    def test_a_state_reached_only_by_a_jump_no_transition_makes_is_a_gap(self) -> None:
        """Seen in `waiting`, then in `refunded`: the move through `refunding` went unseen."""
        coverage = Coverage(states=frozenset({"waiting", "refunded"}),
                            transitions=frozenset({("waiting", UNSEEN_EVENT, "refunded")}))
        (gap,) = adequacy(BOT, done(), coverage, FaultPlan(), NAMES).gaps
        assert gap.code == "moves:refunded"
        assert "seen: waiting -> refunded, which no one transition makes" in gap.what
        assert "Observation.moves" in gap.how and "watch()" in gap.how

    def test_moves_seen_one_by_one_leave_no_gap(self) -> None:
        coverage = Coverage(states=frozenset({"waiting", "refunding", "refunded"}),
                            transitions=frozenset({("waiting", UNSEEN_EVENT, "refunding"),
                                                   ("refunding", UNSEEN_EVENT, "refunded")}))
        assert gaps(done(), FaultPlan(), coverage) == []

    def test_a_machine_that_reports_its_commits_has_no_move_gap(self) -> None:
        coverage = Coverage(states=frozenset({"waiting", "refunded"}),
                            transitions=frozenset({("waiting", UNSEEN_EVENT, "refunded")}))
        assert gaps(done(committed=1), FaultPlan(), coverage) == []


class TestAcknowledged:
    def test_a_gap_the_definition_accepts_leaves_the_verdict_alone_with_its_reason(self
                                                                                  ) -> None:
        definition = load_definition({**SPEC, "untested": {
            "crash_point:after_refund": "answered inside the call"}})
        found = adequacy(definition, done(passed={"after_save": 3}, crashed={"after_save": 1}),
                         Coverage(), CRASH, NAMES)
        assert found.gaps == ()
        (kept,) = found.acknowledged
        assert kept.code == "crash_point:after_refund"
        assert kept.reason == "answered inside the call"

    def test_a_wildcard_accepts_every_gap_of_its_kind_and_the_options_add_theirs(self) -> None:
        assert gaps(done(), accepted={"crash_point:*": "a smoke test"}) == []
        assert gaps(done(), accepted={"fault:*": "not faults"}) == [
            "crash_point:after_save", "crash_point:after_refund"]

    def test_an_acknowledgement_no_gap_needed_is_a_note(self) -> None:
        found = adequacy(BOT, done(crashed={"after_save": 1, "after_refund": 1}), Coverage(),
                         CRASH, NAMES, {"fault:slow_tool": "too slow to matter"})
        assert found.gaps == () and found.stale == ("fault:slow_tool",)
        assert any("untested.fault:slow_tool is acknowledged, but the campaign left no such "
                   "gap" in note for note in found.notes())

    @pytest.mark.parametrize(("given", "message"), [
        ({"move:refunded": "x"}, r"untested\.move:refunded: expected crash_point:<name>, "
                                 r"fault:<name>, moves:<name>, outcome:<name> \(or "
                                 r"<kind>:\*\) \(did you mean 'moves'\?\)"),
        ({"fault:slow_tools": "x"}, r"no fault kind 'slow_tools' \(did you mean 'slow_tool'\?\)"),
        ({"crash_point:after_sav": "x"}, r"the machine offers no crash point 'after_sav' \(did "
                                         r"you mean 'after_save'\?\); its points: after_save"),
        ({"fault:crash": " "}, r"acknowledging a gap needs a reason"),
        ({"fault:crash": "x"}, r"crashes are judged per crash point: acknowledge "
                               r"crash_point:<name>"),
    ])
    def test_an_acknowledgement_that_cannot_stand_is_refused(self, given: dict[str, str],
                                                            message: str) -> None:
        with pytest.raises(HarnessError, match=message):
            check_acknowledged(given, ("after_save", "after_refund"))

    def test_a_definition_naming_no_gap_or_giving_no_reason_does_not_load(self) -> None:
        with pytest.raises(DefinitionError, match=r"untested\.moves:refunde: no state "
                                                  r"'refunde' \(did you mean 'refunded'\?\)"):
            load_definition({**SPEC, "untested": {"moves:refunde": "x"}})
        with pytest.raises(DefinitionError, match=r"untested\.fault:crash: leaving 'fault:"
                                                  r"crash' untested needs a reason"):
            load_definition({**SPEC, "untested": {"fault:crash": ""}})

    def test_acknowledgements_stay_out_of_the_definition_digest(self) -> None:
        from harness.sim.identity import definition_digest

        accepting = load_definition({**SPEC, "untested": {"moves:*": "x"}})
        assert definition_digest(accepting) == definition_digest(BOT)
        assert "untested" not in load_spec(SPEC)[0].model_dump()


class TestInvariants:
    def test_the_count_of_invariants_checked_counts_those_that_judged_a_record(self) -> None:
        """Judged something: checked. The definition has nothing for it: moot. The machine
        keeps it from judging (no commits, no replay): unable. Could, but nothing happened:
        idle."""
        found = adequacy(BOT, done(judged={**dict.fromkeys(NAMES, 0), "my_rule": 1}),
                         Coverage(), FaultPlan(), NAMES)
        assert found.checked == ("my_rule",)
        assert found.moot == {"approval_genuine": "the definition has no approval"}
        assert found.unable == {"persist_before_effect": NO_COMMITS,
                                "replay_matches": "the machine offers no replay(execution_id)"}
        assert found.idle == {"no_duplicate_effect": "no effect was applied"}
        assert found.counted == "1 of 5 invariants checked"
        report = found.report()["invariants"]
        assert report["persist_before_effect"] == {"judged": 0, "unable": NO_COMMITS}
