"""The invariant checkers: each holds on real histories and breaks, naming the rule, the records
and what happened, on a history made to break it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from invariant_cases import CONTEXT, commit, only

from fault_injection import no_faults
from harness import (
    INVARIANTS,
    Applied,
    Commanded,
    Committed,
    Decided,
    Delivered,
    Dispatched,
    Finished,
    HarnessError,
    HistoryRecord,
    MachineFailed,
    Observed,
    ReferenceMachine,
    Replayed,
    SimOptions,
    Simulator,
    StepView,
    Violation,
    check,
    invariant,
)
from reference_machine import action_hash, load_definition

ROOT = Path(__file__).resolve().parents[4]
PLANTED = load_definition(ROOT / "tests" / "data" / "workflows" / "planted.yaml")
REFUND = load_definition(ROOT / "scenarios" / "refund_escalation.yaml")
TRIAGE = load_definition(ROOT / "scenarios" / "support_triage.yaml")
CHARGE = json.dumps({"amount": 40, "order": "o-1"}, sort_keys=True, separators=(",", ":"))


def applied(step: int, tool: str, key: str, input: str = CHARGE, *, execution: str = "x1",
            seq: int = 1) -> Applied:
    return Applied(step, 0, execution, tool, key, input, seq)


def rules(found: list[Violation]) -> set[str]:
    return {violation.rule for violation in found}


@pytest.fixture(scope="module")
def clean_histories() -> list[tuple[Any, tuple[HistoryRecord, ...]]]:
    """Gives real histories of the reference machine: three workflows, faults on."""
    out = []
    for definition in (PLANTED, REFUND, TRIAGE):
        simulator = Simulator(definition, SimOptions())
        out += [(definition, simulator.run(seed).history) for seed in range(40)]
    return out


def test_every_invariant_holds_on_the_reference_machine(
        clean_histories: list[tuple[Any, tuple[HistoryRecord, ...]]]) -> None:
    """120 faulty runs of the reference machine break no built-in invariant."""
    for definition, history in clean_histories:
        assert check(definition, history) == []


def test_the_builtin_invariants_are_the_designed_ones() -> None:
    """Every invariant DESIGN.md lists has a checker, each with a description."""
    builtin = {name for name, rule in INVARIANTS.items() if rule.builtin}
    assert builtin == {
        "no_duplicate_effect", "persist_before_effect", "terminal_stays_terminal",
        "legal_transitions", "guards_held", "approval_genuine", "approved_effects",
        "retries_within_bounds", "budgets_within_bounds", "compensation_order",
        "compensation_complete", "nothing_lost", "replay_matches", "delivered_once",
        "versions_increase", "no_stuck_execution", "machine_ok",
        # statecharts (issue 17)
        "join_after_regions", "map_results_per_item", "no_region_effect_after_leaving",
        "no_eventless_runaway", "region_keys_distinct"}
    assert all(INVARIANTS[name].description for name in builtin)


class TestNoDuplicateEffect:
    def test_the_same_action_twice_is_one_too_many(self) -> None:
        """Two applications of one tool, execution and input are reported with both records."""
        history = [applied(1, "pay.charge", "k#1"), applied(2, "pay.charge", "k#2", seq=2)]
        (found,) = only("no_duplicate_effect", PLANTED, history)
        assert found.records == (0, 1) and found.execution == "x1" and found.step == 2
        assert "pay.charge took effect twice" in found.message and "k#2" in found.message

    def test_the_input_is_quoted_whole_never_cut_mid_json(self) -> None:
        """A payment's input of a few hundred characters is quoted whole, as JSON that
        parses; a longer one keeps its keys and short values, each long value told by its
        size (what tells two actions apart stays readable)."""
        payment = json.dumps({"amount": 40, "order": "o-1", "memo": "m" * 150,
                              "customer": {"id": "c-7", "tier": "gold"}},
                             sort_keys=True, separators=(",", ":"))
        history = [applied(1, "pay.charge", "k#1", payment),
                   applied(2, "pay.charge", "k#2", payment, seq=2)]
        (found,) = only("no_duplicate_effect", PLANTED, history)
        quoted = found.message.partition(" with input ")[2].partition(": ledger")[0]
        assert json.loads(quoted) == json.loads(payment)
        huge = json.dumps({"order": "o-1", "document": "d" * 5_000}, sort_keys=True,
                          separators=(",", ":"))
        history = [applied(1, "pay.charge", "k#1", huge),
                   applied(2, "pay.charge", "k#2", huge, seq=2)]
        (found,) = only("no_duplicate_effect", PLANTED, history)
        quoted = found.message.partition(" with input ")[2].partition(": ledger")[0]
        assert json.loads(quoted) == {"document": "<5,002 characters>", "order": "o-1"}

    def test_other_inputs_executions_and_repeatable_tools_are_not_duplicates(self) -> None:
        """Another input, another execution, or a tool declared repeatable is no duplicate."""
        other = CHARGE.replace("40", "41")
        history = [applied(1, "pay.charge", "k"), applied(2, "pay.charge", "k2", other),
                   applied(3, "pay.charge", "k3", execution="x2")]
        assert only("no_duplicate_effect", PLANTED, history) == []
        reads = [applied(1, "crm.lookup_order", "k", "{}"),
                 applied(2, "crm.lookup_order", "k2", "{}")]
        assert only("no_duplicate_effect", REFUND, reads) == []  # repeatable: a read

    def test_a_tool_whose_action_is_a_call_is_one_action_per_key(self) -> None:
        """`action: call` (imported Step Functions tasks): a later visit sending the same input
        is a new action; the same key applied twice is still a duplicate."""
        data = PLANTED.spec.model_dump(mode="json", exclude_none=True)
        data["tools"]["pay.charge"]["action"] = "call"
        per_call = load_definition(data)
        visits = [applied(1, "pay.charge", "x1/charging/1"),
                  applied(2, "pay.charge", "x1/charging/2", seq=2)]
        assert only("no_duplicate_effect", per_call, visits) == []
        assert len(only("no_duplicate_effect", PLANTED, visits)) == 1
        again = [visits[0], applied(2, "pay.charge", "x1/charging/1", seq=2)]
        (found,) = only("no_duplicate_effect", per_call, again)
        assert found.records == (0, 1)

    def test_an_effect_of_no_known_execution_is_one_action_per_key(self) -> None:
        """Keys the harness cannot attribute count once per key."""
        history = [applied(1, "pay.charge", "a", execution=""),
                   applied(2, "pay.charge", "b", execution="")]
        assert only("no_duplicate_effect", PLANTED, history) == []
        history.append(applied(3, "pay.charge", "a", execution=""))
        assert len(only("no_duplicate_effect", PLANTED, history)) == 1


class TestPersistBeforeEffect:
    def test_a_call_before_its_commit_is_reported(self) -> None:
        """A tool called for a key no commit commanded yet breaks persist-before-effect."""
        effect = Commanded("x1/charging/1#1", "pay.charge", "x1/charging/1")
        history = [commit(1, "review", moved="execution.started"),
                   Dispatched(2, 0, "x1", "pay.charge", "x1/charging/1", "approval"),
                   commit(2, "charging", source="review", moved="approval.granted",
                          effects=(effect,), version=2)]
        (found,) = only("persist_before_effect", PLANTED, history)
        assert found.records == (1,) and "before committing" in found.message
        history.insert(1, history.pop(2))
        assert only("persist_before_effect", PLANTED, history) == []

    def test_a_machine_that_tells_no_commits_is_not_judged(self) -> None:
        """Without commits in the history there is nothing to order calls against."""
        assert only("persist_before_effect", PLANTED,
                    [Dispatched(1, 0, "x1", "pay.charge", "k")]) == []


class TestTerminalStaysTerminal:
    def test_an_accepted_event_after_the_end_is_reported(self) -> None:
        """An execution that accepts an event after its final commit breaks the rule."""
        history = [commit(1, "rejected", source="review", moved="approval.denied"),
                   commit(2, "rejected", decision="rejected", version=1),
                   commit(3, "review", source="rejected", moved="nudge", version=2)]
        (found,) = only("terminal_stays_terminal", PLANTED, history)
        assert found.records == (0, 2)
        assert "ended in 'rejected'" in found.message and "moved to 'review'" in found.message

    def test_a_change_seen_or_a_call_made_after_the_end_is_reported(self) -> None:
        """For a machine that tells no commits: its observations and its tool calls."""
        seen = [Observed(1, 0, "x1", "shipped", "final", 5, "success"),
                Observed(2, 0, "x1", "review", "waiting", 6)]
        assert rules(only("terminal_stays_terminal", PLANTED, seen)) == {
            "terminal_stays_terminal"}
        called = [seen[0], Dispatched(2, 0, "x1", "pay.charge", "k")]
        (found,) = only("terminal_stays_terminal", PLANTED, called)
        assert "called pay.charge" in found.message
        quiet = [seen[0], Observed(2, 0, "x1", "shipped", "final", 5, "success")]
        assert only("terminal_stays_terminal", PLANTED, quiet) == []


class TestLegalTransitions:
    def test_a_move_the_definition_does_not_declare_is_reported(self) -> None:
        """From the state the store last held, on that event, to a state it cannot reach."""
        history = [commit(1, "review", moved="execution.started"),
                   commit(2, "shipped", source="review", moved="nudge", version=2)]
        (found,) = only("legal_transitions", PLANTED, history)
        assert "from 'review' to 'shipped' on nudge" in found.message
        assert "'review'" in found.message.split("allows", 1)[1]

    def test_declared_moves_timeouts_and_budget_moves_are_legal(self) -> None:
        """An event's transition, a wait's timeout and a budget's forced move all hold."""
        history = [commit(1, "collecting_requirements", moved="execution.started"),
                   commit(2, "needs_human", source="collecting_requirements",
                          moved="step.failed", forced="visits_max", version=2),
                   commit(3, "failed", source="needs_human", moved="timer.fired", version=3)]
        assert only("legal_transitions", REFUND, history) == []
        wrong = [history[0], commit(2, "refunded", source="collecting_requirements",
                                    moved="step.failed", forced="visits_max", version=2)]
        assert len(only("legal_transitions", REFUND, wrong)) == 1

    def test_a_machine_seen_only_from_outside_must_move_along_the_graph(self) -> None:
        """Without commits, each observed change must be reachable by declared transitions."""
        ok = [Observed(1, 0, "x1", "review", "waiting", 1),
              Observed(3, 0, "x1", "shipping", "running", 4)]
        assert only("legal_transitions", PLANTED, ok) == []
        back = [Observed(1, 0, "x1", "shipping", "running", 4),
                Observed(2, 0, "x1", "review", "waiting", 5)]
        (found,) = only("legal_transitions", PLANTED, back)
        assert "no sequence of the definition's transitions" in found.message

    def test_each_move_a_machine_tells_must_move_along_the_graph(self) -> None:
        """A machine that moves several times in one call tells each move (`moves`): each is
        judged, though where the call ended is reachable from where it began."""
        along = (("review", "charging"), ("charging", "reserving"))
        ok = [Observed(1, 0, "x1", "review", "waiting", 1),
              Observed(3, 0, "x1", "reserving", "running", 4, moves=along)]
        assert only("legal_transitions", PLANTED, ok) == []
        lied = (*along, ("shipping", "review"))
        told = [ok[0], Observed(3, 0, "x1", "reserving", "running", 4, moves=lied)]
        (found,) = only("legal_transitions", PLANTED, told)
        assert found.message == ("x1 moved from 'shipping' to 'review', which no sequence of "
                                 "the definition's transitions reaches")
        assert found.records == (1,)


def _approval(answers: str, *, source: str = "human", role: str = "supervisor",
              digest: str | None = None) -> list[HistoryRecord]:
    """Gives the review of the planted workflow and a decision of it."""
    expected = action_hash(PLANTED, "charging", CONTEXT)
    request = "x1/review/1/approval"
    return [commit(1, "review", moved="execution.started"),
            Observed(1, 0, "x1", "review", "waiting", 1, None, request, expected),
            commit(2, "charging", source="review", moved="approval.granted",
                   event_source=source, answers=answers, version=2,
                   payload={"role": role, "action_hash": digest or expected})]


class TestApprovalGenuine:
    def test_a_genuine_decision_holds(self) -> None:
        """From a human, with a listed role, for the current request and its exact action."""
        assert only("approval_genuine", PLANTED, _approval("x1/review/1/approval")) == []

    @pytest.mark.parametrize(("history", "why"), [
        (_approval("x1/review/1/approval", source="agent"), "came from source 'agent'"),
        (_approval("x1/review/1/approval", role="intern"), "role 'intern' may not"),
        (_approval("x1/review/0/approval"), "not the current"),
        (_approval("x1/review/1/approval", digest="f" * 64), "approves action ffff"),
    ], ids=["agent", "role", "stale", "hash"])
    def test_a_forged_decision_is_reported(self, history: list[HistoryRecord],
                                           why: str) -> None:
        """Each way an approval can be forged is named."""
        (found,) = only("approval_genuine", PLANTED, history)
        assert why in found.message and found.records == (2,)

    def test_a_machine_without_commits_is_judged_by_what_it_was_sent(self) -> None:
        """Deliveries and decisions stand in for commits."""
        expected = action_hash(PLANTED, "charging", CONTEXT)
        history = [Observed(1, 0, "x1", "review", "waiting", 1, None, "r1", expected),
                   Delivered(2, 0, "x1", "ev1", "approval.granted", "tool", "r1",
                             {"role": "supervisor", "action_hash": expected}, "forged"),
                   Decided(2, 0, "x1", "ev1", "accepted")]
        (found,) = only("approval_genuine", PLANTED, history)
        assert "source 'tool'" in found.message


class TestApprovedEffects:
    def test_an_approved_charge_holds_and_an_unapproved_one_breaks(self) -> None:
        """The gated charge needs a genuine grant of that very action first."""
        charge = applied(3, "pay.charge", "x1/charging/1")
        assert only("approved_effects", PLANTED, [*_approval("x1/review/1/approval"),
                                                  charge]) == []
        (found,) = only("approved_effects", PLANTED, [charge])
        assert "no genuine approval was granted" in found.message
        forged = [*_approval("x1/review/1/approval", source="agent"), charge]
        assert rules(only("approved_effects", PLANTED, forged)) == {"approved_effects"}

    def test_a_grant_covers_the_action_it_names_only(self) -> None:
        """A charge of another amount than the one approved breaks the rule."""
        other = applied(3, "pay.charge", "x1/charging/1", CHARGE.replace("40", "400"))
        (found,) = only("approved_effects", PLANTED, [*_approval("x1/review/1/approval"),
                                                      other])
        assert "not for this exact action" not in found.message
        assert "for this exact action" in found.message


class TestRetriesWithinBounds:
    def effects(self, count: int) -> list[HistoryRecord]:
        records: list[HistoryRecord] = [commit(1, "charging", source="review",
                                               moved="approval.granted")]
        for attempt in range(1, count + 1):
            records.append(commit(1 + attempt, "charging", version=1 + attempt, effects=(
                Commanded(f"x1/charging/1#{attempt}", "pay.charge", "x1/charging/1"),)))
        return records

    def test_attempts_beyond_the_bound_are_reported(self) -> None:
        """Charging allows two attempts per entry; a third is one too many."""
        assert only("retries_within_bounds", PLANTED, self.effects(2)) == []
        (found,) = only("retries_within_bounds", PLANTED, self.effects(3))
        assert "3 times in one entry" in found.message and "attempts_max is 2" in found.message

    def test_entering_the_state_again_starts_the_count_again(self) -> None:
        """Attempts are counted per entry into the state."""
        history = self.effects(2)
        history.append(commit(9, "charging", source="review", moved="approval.granted",
                              version=9))
        history += self.effects(2)[1:]
        assert only("retries_within_bounds", PLANTED, history) == []


class TestBudgetsWithinBounds:
    def moves(self, count: int, *, forced_last: str = "") -> list[HistoryRecord]:
        records: list[HistoryRecord] = [commit(1, "planning", moved="execution.started")]
        for index in range(2, count + 1):
            state = "awaiting_approval" if index % 2 else "planning"
            records.append(commit(index, state, source="?", moved="ticket.updated",
                                  version=index))
        if forced_last:
            records[-1] = records[-1]._replace(state="needs_human", forced=forced_last)
        return records

    def test_a_run_past_its_budget_must_be_forced(self) -> None:
        """The refund's visits_max is 6: a seventh visit of planning must be forced."""
        assert only("budgets_within_bounds", REFUND, self.moves(11)) == []
        (found,) = only("budgets_within_bounds", REFUND, self.moves(12))
        assert "entered 'planning' 7 times" in found.message and found.step == 12
        assert only("budgets_within_bounds", REFUND, self.moves(12, forced_last="visits_max")
                    ) == []


class TestCompensation:
    def saga(self, *undo: str) -> list[HistoryRecord]:
        records: list[HistoryRecord] = [
            applied(1, "pay.charge", "x1/charging/1"),
            applied(2, "stock.reserve", "x1/reserving/1", '{"o":1}', seq=2)]
        keys = {"pay.refund": "x1/charging/1/undo", "stock.release": "x1/reserving/1/undo"}
        for offset, tool in enumerate(undo):
            records.append(Dispatched(3 + offset, 0, "x1", tool, keys[tool]))
            records.append(applied(3 + offset, tool, keys[tool], '{"u":1}', seq=3 + offset))
        return records

    def test_undoing_newest_first_holds_and_oldest_first_breaks(self) -> None:
        """Reserve was done after charge, so it is undone before it."""
        assert only("compensation_order", PLANTED,
                    self.saga("stock.release", "pay.refund")) == []
        (found,) = only("compensation_order", PLANTED,
                        self.saga("pay.refund", "stock.release"))
        assert "undid pay.charge (applied at step 1) before stock.reserve" in found.message

    def test_an_unfinished_undo_without_a_human_is_reported(self) -> None:
        """Ending in a final state with an effect left undone, and no human asked, breaks."""
        end = Finished(9, 0, "x1", "cancelled", "final", "cancelled", 9)
        (found,) = only("compensation_complete", PLANTED, [*self.saga("stock.release"), end])
        assert "pay.charge (step 1) not undone" in found.message
        asked = Observed(8, 0, "x1", "needs_human", "waiting", 8)
        assert only("compensation_complete", PLANTED,
                    [*self.saga("stock.release"), asked, end]) == []
        assert only("compensation_complete", PLANTED,
                    [*self.saga("stock.release", "pay.refund"), end]) == []

    def test_an_undo_of_an_effect_that_never_took_place_pairs_with_nothing(self) -> None:
        """An undo whose key names an effect the ledger lacks leaves the others in order."""
        history = self.saga()
        history.append(applied(3, "pay.refund", "x1/charging/2/undo", '{"u":2}', seq=3))
        history += self.saga("stock.release", "pay.refund")[2:]
        assert only("compensation_order", PLANTED, history) == []


class TestDurability:
    def test_a_version_seen_below_the_last_commit_is_lost(self) -> None:
        """What was committed must be what is seen after a crash."""
        history = [commit(1, "charging", version=3), Observed(2, 0, "x1", "review", "waiting", 2)]
        (found,) = only("nothing_lost", PLANTED, history)
        assert "committing 'charging' at version 3" in found.message

    def test_a_replay_that_diverged_is_reported(self) -> None:
        """The machine's own replay, recorded at the end, must match."""
        history = [Replayed(5, 0, "x1", False, "ReplayMismatchError: at sequence 3")]
        (found,) = only("replay_matches", PLANTED, history)
        assert "at sequence 3" in found.message
        assert only("replay_matches", PLANTED, [Replayed(5, 0, "x1", True)]) == []

    def test_versions_move_up_on_accepted_events_only(self) -> None:
        """An accepted event raises the version; a rejected one leaves it."""
        history = [commit(1, "review", version=1), commit(2, "review", version=1)]
        assert "not above 1" in only("versions_increase", PLANTED, history)[0].message
        moved = [commit(1, "review", version=1),
                 commit(2, "", decision="rejected", version=2)]
        assert "yet its version moved" in only("versions_increase", PLANTED, moved)[0].message


class TestDeliveredOnce:
    def test_an_event_accepted_twice_is_reported(self) -> None:
        """The same event id accepted twice by one execution breaks the rule."""
        history = [commit(1, "review", event="ev1", moved="nudge"),
                   commit(2, "review", event="ev1", moved="nudge", version=2)]
        (found,) = only("delivered_once", PLANTED, history)
        assert found.records == (0, 1)
        history[1] = history[1]._replace(event_id="ev2")
        assert only("delivered_once", PLANTED, history) == []

    def test_without_commits_the_decisions_tell(self) -> None:
        """A machine that tells no commits is judged by what it answered."""
        history = [Decided(1, 0, "x1", "ev1", "accepted"), Decided(2, 0, "x1", "ev1",
                                                                   "accepted")]
        assert len(only("delivered_once", PLANTED, history)) == 1


class TestEndings:
    def test_a_stuck_execution_is_reported(self) -> None:
        """Not final, and nothing that could move it: stuck."""
        stuck = Finished(9, 0, "x1", "review", "waiting", None, 3, ())
        (found,) = only("no_stuck_execution", PLANTED, [stuck])
        assert "stuck in 'review'" in found.message
        waiting = stuck._replace(waiting_on=("timer",))
        assert only("no_stuck_execution", PLANTED, [waiting]) == []

    def test_a_failed_machine_is_a_violation(self) -> None:
        """A machine that raised, hung or answered nonsense breaks machine_ok."""
        history = [MachineFailed(4, 0, "raised", "KeyError", "while tool call: 'x'")]
        (found,) = only("machine_ok", PLANTED, history)
        assert "raised (KeyError)" in found.message and found.step == 4

    def test_endings_are_left_out_of_a_prefix(self) -> None:
        """`complete=False` checks a run so far: the checks of its end wait."""
        stuck = [Finished(9, 0, "x1", "review", "waiting", None, 3, ())]
        assert check(PLANTED, stuck, complete=False) == []
        assert rules(check(PLANTED, stuck)) == {"no_stuck_execution"}


@pytest.fixture
def registered() -> Iterator[list[str]]:
    """Removes the invariants a test registers."""
    names: list[str] = []
    yield names
    for name in names:
        INVARIANTS.pop(name, None)


class TestUserInvariants:
    def test_an_invariant_over_the_history_joins_the_checks(self,
                                                           registered: list[str]) -> None:
        """A registered function's sentences become violations of its rule, at the step where
        it first breaks (the second charge's), not at step 0."""
        @invariant(name="at_most_one_charge")
        def at_most_one_charge(definition: Any, history: Any) -> Iterator[str]:
            charges = [r for r in history if r.kind == "applied" and r.tool == "pay.charge"]
            if len(charges) > 1:
                yield f"{len(charges)} charges"
        registered.append("at_most_one_charge")
        history = [applied(1, "pay.charge", "a"), applied(2, "pay.charge", "b",
                                                           CHARGE.replace("40", "1"))]
        (found,) = check(PLANTED, history, only=["at_most_one_charge"])
        assert found == Violation("at_most_one_charge", "2 charges", step=2)
        assert "at_most_one_charge" in rules(check(PLANTED, history))

    def test_a_per_step_invariant_sees_each_step(self, registered: list[str]) -> None:
        """A per-step invariant is called once per step with that step's records."""
        seen: list[StepView] = []

        @invariant(name="looks", per_step=True)
        def looks(definition: Any, view: StepView) -> Iterator[str]:
            seen.append(view)
            if view.applied and view.step == 3:
                yield "third step"
        registered.append("looks")
        history = [Observed(1, 0, "x1", "review", "waiting", 1), applied(2, "pay.charge", "a"),
                   applied(3, "stock.reserve", "b", "{}", seq=2)]
        (found,) = check(PLANTED, history, only=["looks"])
        assert [view.step for view in seen] == [1, 2, 3]
        assert seen[2].observed["x1"].state == "review" and len(seen[2].applied) == 2
        assert found.step == 3 and found.records == (2,)

    def test_misuse_fails_with_what_to_do(self, registered: list[str]) -> None:
        """A taken name, a yield that is no violation, an unknown name: clear errors."""
        with pytest.raises(HarnessError, match=r"'machine_ok' is registered already"):
            invariant(name="machine_ok")(lambda d, h: iter(()))

        @invariant(name="gives_numbers")
        def gives_numbers(definition: Any, history: Any) -> Iterator[int]:
            yield 42
        registered.append("gives_numbers")
        with pytest.raises(HarnessError, match=r"gave int; an invariant yields Violation"):
            check(PLANTED, [], only=["gives_numbers"])
        with pytest.raises(HarnessError, match=r"no invariant named 'machine_okk'.*did you "
                                               r"mean 'machine_ok'"):
            check(PLANTED, [], only=["machine_okk"])
        with pytest.raises(HarnessError, match=r"per step or final only"):
            invariant(per_step=True, final_only=True)


def test_an_effect_its_compensation_undid_may_be_done_again() -> None:
    """Refunded, voided, refunded again: two logical actions; refunded twice: one action done
    twice."""
    from harness import Applied, check
    from reference_machine import load_definition

    refund = load_definition(Path(__file__).resolve().parents[4] / "scenarios"
                             / "refund_escalation.yaml")
    order = '{"amount":5,"order_id":"o-1"}'
    once = Applied(3, 10, "x1", "payments.refund", "x1/executing_refund/1", order, 1)
    void = Applied(4, 20, "x1", "payments.void_refund", "x1/executing_refund/1/undo",
                   '{"order_id":"o-1"}', 2)
    again = Applied(5, 30, "x1", "payments.refund", "x1/executing_refund/2", order, 3)
    undone = [v.rule for v in check(refund, [once, void, again], complete=False)]
    assert "no_duplicate_effect" not in undone
    twice = [v for v in check(refund, [once, again], complete=False)
             if v.rule == "no_duplicate_effect"]
    assert [v.records for v in twice] == [(0, 1)]


class TestToldMovesCover:
    """Coverage of a machine seen only from outside: a move it tells (`moves`) covers the
    declared transitions between its two states; without them, only where each call ended
    shows, and a run that ends within one call covers nothing."""

    def test_moves_told_cover_each_hop(self) -> None:
        from harness import coverage_of
        from harness.checks.coverage import coverage_universe, covered_transitions, vacuity

        declared = coverage_universe(PLANTED)["transitions"]  # (source, event, target)
        seen = [Observed(1, 0, "x1", "review", "waiting", 1),
                Observed(3, 0, "x1", "shipping", "running", 4)]
        blind = coverage_of(PLANTED, seen)
        told = coverage_of(PLANTED, [seen[0], seen[1]._replace(
            moves=(("review", "charging"), ("charging", "reserving"),
                   ("reserving", "shipping")))])
        assert covered_transitions(blind.transitions, declared) == set()
        assert covered_transitions(told.transitions, declared) == {
            ("review", "approval.granted", "charging"),
            ("charging", "step.succeeded", "reserving"),
            ("reserving", "step.succeeded", "shipping")}
        assert {"charging", "reserving"} <= told.states
        assert vacuity(PLANTED, blind).startswith("no run took any")
        assert vacuity(PLANTED, told) == ""


BUDGET_LOOP = (ROOT / "tests" / "data" / "workflows" / "budget_loop.yaml").read_text()


def budgeted(lines: str, folder: Path, name: str) -> Any:
    path = folder / f"{name}.yaml"
    path.write_text(BUDGET_LOOP.replace("budgets:\n", "budgets:\n" + lines))
    return load_definition(path)


def test_a_cost_budget_alone_is_checked(tmp_path: Path) -> None:
    """A machine that spends past `cost_max` breaks the budget even when no other limit is
    set (before, only a transitions or visits limit turned the check on)."""
    loose = budgeted("", tmp_path, "loose")
    strict = budgeted("  cost_max: 1.0\n", tmp_path, "strict")
    for seed in range(200):
        history = Simulator(loose, SimOptions(seed=seed, plan=no_faults(),
                                              executions=1)).run().history
        if check(strict, history, only=["budgets_within_bounds"]):
            break
    else:
        raise AssertionError("no run spent past the budget")
    (found,) = check(strict, history, only=["budgets_within_bounds"])
    assert "cost_max is 1" in found.message


def test_a_first_step_over_the_cost_budget_may_force_the_start(tmp_path: Path) -> None:
    """The reference forces a run whose first step costs too much straight to `on_exceeded`:
    that move out of the start is legal."""
    hot = budgeted("  cost_max: 0.2\n", tmp_path, "hot")
    history = Simulator(hot, SimOptions(seed=0, plan=no_faults(), executions=1)).run().history
    forced = [r for r in history if type(r) is Committed and r.forced == "cost_max"]
    assert forced and forced[0].from_state == ""
    assert check(hot, history) == []


def test_two_undos_with_one_repeatable_tool_and_input_are_two_undos() -> None:
    """Two holds undone by the same cancel with the same input are both undone."""
    definition = load_definition({
        "name": "shared_undo", "version": 1, "context": {"order": "o-1"},
        "tools": {"a.hold": {"idempotency_keys": True}, "b.hold": {"idempotency_keys": True},
                  "order.cancel": {"idempotency_keys": True, "repeatable": True}},
        "compensation_failed": "human",
        "states": {
            "hold_a": {"initial": True, "step": {"tool": "a.hold", "compensation": {
                "tool": "order.cancel", "input": {"order": "=context.order"}}},
                "on": {"step.succeeded": "hold_b", "step.failed": "failed"}},
            "hold_b": {"step": {"tool": "b.hold", "compensation": {
                "tool": "order.cancel", "input": {"order": "=context.order"}}},
                "on": {"step.succeeded": "done", "step.failed": "failed"}},
            "human": {"type": "wait", "after": {"delay": "1h", "target": "failed"}},
            "done": {"type": "final", "outcome": "success"},
            "failed": {"type": "final", "outcome": "failure"}}})
    undo = '{"order":"o-1"}'
    history = [Applied(1, 0, "x1", "a.hold", "x1/hold_a/1", "{}", 1),
               Applied(2, 0, "x1", "b.hold", "x1/hold_b/1", "{}", 2),
               Dispatched(3, 0, "x1", "order.cancel", "x1/hold_b/1/undo"),
               Applied(3, 0, "x1", "order.cancel", "x1/hold_b/1/undo", undo, 3),
               Applied(4, 0, "x1", "order.cancel", "x1/hold_a/1/undo", undo, 4),
               Finished(5, 0, "x1", "failed", "final", "failure", 6)]
    assert check(definition, history, only=["compensation_complete",
                                            "compensation_order"]) == []


GATED_AND_NOT = {
    "name": "gated_and_not", "version": 1,
    "tools": {"pay.out": {"idempotency_keys": True}},
    "states": {
        "review": {"initial": True, "type": "wait", "approval": {
            "for_state": "paying", "summary": "pay", "roles": ["boss"], "expires_after": "1h"},
            "on": {"approval.granted": "paying", "approval.denied": "tipping"}},
        "paying": {"step": {"tool": "pay.out", "input": {"amount": 10}, "needs_approval": True,
                            "reversible": False}, "on": {"step.succeeded": "done",
                                                         "step.failed": "done"}},
        "tipping": {"step": {"tool": "pay.out", "input": {"amount": 1}},
                    "on": {"step.succeeded": "done", "step.failed": "done"}},
        "done": {"type": "final", "outcome": "success"}}}


def test_a_tool_gated_in_one_state_is_free_in_another() -> None:
    """The state that commanded an effect says whether it needed approval, not its tool."""
    definition = load_definition(GATED_AND_NOT)
    tip = Commanded("x1/tipping/1#1", "pay.out", "x1/tipping/1")
    history = [Committed(1, 0, "x1", "e1", "accepted", 1, "review", "", "execution.started"),
               Committed(2, 0, "x1", "e2", "accepted", 2, "tipping", "review",
                         "approval.denied", effects=(tip,)),
               Applied(3, 0, "x1", "pay.out", "x1/tipping/1", '{"amount":1}', 1)]
    assert check(definition, history, only=["approved_effects"]) == []
    pay = Commanded("x1/paying/1#1", "pay.out", "x1/paying/1")
    paid = [history[0], Committed(2, 0, "x1", "e2", "accepted", 2, "paying", "review",
                                  "approval.granted", effects=(pay,)),
            Applied(3, 0, "x1", "pay.out", "x1/paying/1", '{"amount":10}', 1)]
    (found,) = check(definition, paid, only=["approved_effects"])
    assert "no genuine approval was granted" in found.message


class OpaqueKeys(ReferenceMachine):
    """The reference machine, sending the tools keys that do not start with the run's id."""

    def __init__(self, definition: Any, tools: Any, probe: Any = None, **kwargs: Any) -> None:
        super().__init__(definition, {name: _prefixed(tool) for name, tool in tools.items()},
                         probe, **kwargs)


def _prefixed(tool: Any) -> Any:
    return lambda payload, key: tool(payload, f"k:{key}")


def test_an_effect_no_key_ties_to_its_run_may_use_its_grant() -> None:
    """With keys the harness cannot attribute, a genuine grant of the exact action counts."""
    definition = load_definition(GATED_AND_NOT)
    simulator = Simulator(definition, SimOptions(plan=no_faults(), executions=1),
                          machine=OpaqueKeys)
    for seed in range(30):
        history = simulator.run(seed).history
        paid = [r for r in history if type(r) is Applied and r.key == "k:x1/paying/1"]
        if paid:
            assert paid[0].execution == ""
            assert check(definition, history, only=["approved_effects"]) == []
            return
    raise AssertionError("no run paid")
