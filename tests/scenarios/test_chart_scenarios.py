"""The statechart scenarios (issue 17): `parallel_triage` (parallel regions, a join, a choice,
a conditional approval, a correlated webhook, entry actions, an internal transition) and
`batch_documents` (a map over attachments with a concurrency bound and a tolerated failure,
compensation of the items on a failed batch, a review with shallow history). Each is walked by
hand through `decide`, then fuzzed with every fault kind, with the coverage that says the
campaign exercised what it claims; each naive variant is caught for its stated reason, and
its replay file reproduces it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from driving import Run
from matrix import APPROVALS, COMPENSATIONS, SCENARIOS, assert_entry_holds, campaign, entries

from fault_injection import FaultKind
from harness import (
    Committed,
    FuzzOptions,
    HistoryRecord,
    SimOptions,
    Simulator,
    check,
    fuzz,
    replay,
)
from harness.sim.simulator import plan_for
from reference_machine import (
    COMPENSATION_FAILED,
    COMPENSATION_SUCCEEDED,
    STEP_FAILED,
    STEP_SUCCEEDED,
    Accepted,
    Event,
    Rejected,
    RejectReason,
    RunCompensation,
    RunEffect,
    WorkflowDefinition,
    load_definition,
)

TRIAGE = load_definition(SCENARIOS / "parallel_triage.yaml")
BATCH = load_definition(SCENARIOS / "batch_documents.yaml")
NAIVE_TRIAGE = load_definition(SCENARIOS / "naive" / "triage_credit_twice.yaml")
NAIVE_BATCH = load_definition(SCENARIOS / "naive" / "batch_refile_on_changes.yaml")
TICKET = "TCK-4821"


class Chart(Run):
    """A run through `decide` that keeps every call its decisions commanded, so that a
    region's or a map item's call (not the parent's `effect`) can be answered by its key."""

    def __init__(self, definition: WorkflowDefinition) -> None:
        super().__init__(definition)
        self.calls: list[RunEffect | RunCompensation] = []

    def apply(self, event: Event, *, at: int | None = None,
              entropy: float | None = None) -> Accepted:
        decision = super().apply(event, at=at, entropy=entropy)
        self.calls += [c for c in decision.commands if isinstance(c, RunEffect | RunCompensation)]
        return decision

    def keys(self, tool: str) -> list[str]:
        """Gives the keys `tool` was called under, in order."""
        return [c.key for c in self.calls if c.tool == tool]

    def answer(self, key: str, payload: dict[str, Any] | None = None, *, ok: bool = True
               ) -> Accepted:
        """Answers the newest call under `key`: success with `payload`, or a permanent
        failure."""
        call = [c for c in self.calls if c.key == key][-1]
        if isinstance(call, RunCompensation):
            kind = COMPENSATION_SUCCEEDED if ok else COMPENSATION_FAILED
        else:
            kind = STEP_SUCCEEDED if ok else STEP_FAILED
        body = (payload or {}) if ok else {"category": "permanent"}
        return self.apply(Event(self.next_id(), kind, "tool", body, call.effect_id))

    def webhook(self, kind: str, payload: dict[str, Any]) -> Any:
        """Gives the decision for a customer's webhook, applied when accepted."""
        event = self.user(kind, payload)
        decision = self.decide(event)
        if isinstance(decision, Accepted):
            self.ex = decision.execution
            self.calls += [c for c in decision.commands
                           if isinstance(c, RunEffect | RunCompensation)]
        return decision


@pytest.mark.parametrize("definition", [TRIAGE, BATCH, NAIVE_TRIAGE, NAIVE_BATCH],
                         ids=lambda d: d.name)
def test_each_definition_loads_without_a_warning(definition: WorkflowDefinition) -> None:
    """No finding at all: the naive ones' bugs are in what their flows do, not in anything
    the load checks could see."""
    assert definition.warnings == ()


# -- parallel_triage, by hand ------------------------------------------------------------------

CRM = "x1/fetching/1/crm/crm_fetching/1"
BILLING = "x1/fetching/1/billing/billing_fetching/1"


def triaged(definition: WorkflowDefinition = TRIAGE, intent: str = "refund") -> Chart:
    """Gives a triage run classified with `intent`, both fetches in flight."""
    run = Chart(definition)
    run.start()
    run.answer("x1/intake/1", {"category": "billing", "intent": intent})
    return run


def joined(amount: int, definition: WorkflowDefinition = TRIAGE, intent: str = "refund"
           ) -> Chart:
    """Gives a triage run past the join, its billing account disputing `amount`."""
    run = triaged(definition, intent)
    run.answer(CRM, {"tier": "pro"})
    run.answer(BILLING, {"account_id": "acc-1", "disputed_amount": amount})
    return run


def credited(amount: int, definition: WorkflowDefinition = TRIAGE) -> Chart:
    """Gives a triage run whose credit of `amount` was issued and the reply sent."""
    run = joined(amount, definition)
    if run.ex.state == "awaiting_supervisor":
        run.apply(run.approval())
    run.answer("x1/issuing_credit/1", {"credit_id": "cr-1"})
    run.answer("x1/replying/1")
    return run


@pytest.mark.parametrize("first", [CRM, BILLING])
def test_the_crm_and_billing_fetches_run_at_once_and_join_in_either_order(first: str) -> None:
    run = triaged()
    assert run.ex.state == "fetching" and run.ex.context["fetch_rounds"] == 1  # entry action
    assert [(r.definition, r.state) for r in run.ex.regions] == [
        ("crm", "crm_fetching"), ("billing", "billing_fetching")]
    assert run.keys("crm.fetch_customer") == [CRM]
    assert run.keys("billing.fetch_account") == [BILLING]
    payloads = {CRM: {"tier": "enterprise"}, BILLING: {"account_id": "acc-9",
                                                       "disputed_amount": 40}}
    second = BILLING if first == CRM else CRM
    run.answer(first, payloads[first])
    assert run.ex.state == "fetching"
    decision = run.answer(second, payloads[second])
    assert decision.transition.event == "done" and decision.transition.via == ("routing",)
    assert run.ex.state == "issuing_credit" and run.ex.regions == ()
    assert (run.ex.context["crm_tier"], run.ex.context["account_id"]) == ("enterprise", "acc-9")


def test_a_crm_outage_only_degrades_and_a_billing_outage_goes_to_a_person() -> None:
    run = triaged()
    run.answer(CRM, ok=False)  # the CRM region still ends in its success final
    run.answer(BILLING, {"account_id": "acc-1", "disputed_amount": 30})
    assert run.ex.state == "issuing_credit" and run.ex.context["crm_tier"] == "unknown"
    run = triaged()
    decision = run.answer(BILLING, ok=False)  # cancels the CRM region: nothing to undo
    assert decision.transition.target == "escalating" and run.ex.regions == ()
    assert run.keys("helpdesk.escalate") == ["x1/escalating/1"]


@pytest.mark.parametrize(("amount", "asked"), [(100, False), (101, True), (400, True), (1, False)])
def test_only_a_credit_over_100_waits_for_a_supervisor(amount: int, asked: bool) -> None:
    run = joined(amount)
    if not asked:
        assert run.ex.state == "issuing_credit" and run.ex.approval is None
    else:
        assert run.ex.state == "awaiting_supervisor" and not run.keys("billing.issue_credit")
        request = run.ex.approval
        assert request is not None and request.roles == ("supervisor",)
        run.apply(run.approval())
        assert run.ex.state == "issuing_credit"
    (call,) = [c for c in run.calls if c.tool == "billing.issue_credit"]
    assert call.input == {"ticket_id": TICKET, "account_id": "acc-1", "amount": amount}
    assert call.key == "x1/issuing_credit/1"


def test_a_denied_large_credit_is_answered_without_a_credit() -> None:
    run = joined(250)
    run.apply(run.approval("approval.denied"))
    assert run.ex.state == "replying" and run.ex.context["resolution"] == "credit_denied"
    assert not run.keys("billing.issue_credit")
    # the choice routes on the very condition the credit step declares
    step = TRIAGE.states["issuing_credit"].step
    assert step is not None and step.approval_text == "context.amount > 100"
    assert "context.amount > 100" in TRIAGE.states["routing"].always[1].guard_text


def test_the_customers_webhook_is_taken_only_for_this_ticket_and_notes_stay_in_the_wait() -> None:
    run = credited(60)
    assert run.ex.state == "awaiting_customer" and run.ex.context["waits"] == 1  # entry
    visits, timers = dict(run.ex.visits), run.ex.timers
    other = run.webhook("customer.replied", {"ticket_id": "TCK-4822", "resolved": True})
    assert isinstance(other, Rejected) and other.reason == RejectReason.UNCORRELATED
    note = run.webhook("customer.note", {"ticket_id": TICKET, "text": "still waiting"})
    assert isinstance(note, Accepted) and note.transition.forced == "internal"
    assert not note.commands and run.ex.visits == visits and run.ex.timers == timers
    assert run.ex.context["notes"] == ["still waiting"]
    stray = run.webhook("customer.note", {"ticket_id": "TCK-1", "text": "not yours"})
    assert isinstance(stray, Rejected) and run.ex.context["notes"] == ["still waiting"]
    done = run.webhook("customer.replied", {"ticket_id": TICKET, "resolved": True})
    assert isinstance(done, Accepted) and run.ex.state == "closed"


def test_a_reopened_question_gets_a_new_reply_numbered_by_the_waits() -> None:
    run = joined(20, intent="question")
    assert run.ex.state == "replying"
    run.answer("x1/replying/1")
    run.webhook("customer.replied", {"ticket_id": TICKET, "resolved": False})
    assert run.ex.state == "replying" and run.ex.context["reopened"] == 1
    first, second = [c for c in run.calls if c.tool == "helpdesk.send_reply"]
    assert (first.input["reply"], second.input["reply"]) == (0, 1)  # a new action, not a repeat


@pytest.mark.parametrize("amount", [60, 180])
def test_a_reopened_credited_ticket_goes_to_a_person_and_the_naive_one_is_credited_twice(
        amount: int) -> None:
    """The naive variant's bug at the decide level: the second credit has the same input
    under a new key (and, over 100, a second grant of the same action)."""
    sound = credited(amount)
    sound.webhook("customer.replied", {"ticket_id": TICKET, "resolved": False})
    assert sound.ex.state == "escalating" and len(sound.keys("billing.issue_credit")) == 1
    naive = credited(amount, NAIVE_TRIAGE)
    naive.webhook("customer.replied", {"ticket_id": TICKET, "resolved": False})
    if amount > 100:
        assert naive.ex.state == "awaiting_supervisor"
        naive.apply(naive.approval())
    first, again = [c for c in naive.calls if c.tool == "billing.issue_credit"]
    assert first.input == again.input and (first.key, again.key) == (
        "x1/issuing_credit/1", "x1/issuing_credit/2")


# -- batch_documents, by hand ------------------------------------------------------------------


def item(index: int, state: str, round_: int = 1) -> str:
    """Gives the key of a map item's step: `x1/filing_batch/{round}/{index}/{state}/1`."""
    return f"x1/filing_batch/{round_}/{index}/{state}/1"


def file_item(run: Chart, index: int, round_: int = 1) -> None:
    """Extracts and files one attachment."""
    run.answer(item(index, "extracting", round_), {"chars": 900, "language": "en"})
    run.answer(item(index, "filing", round_), {"folder": "invoices"})


def test_the_map_runs_two_attachments_at_a_time_and_collects_each_result_in_order() -> None:
    run = Chart(BATCH)
    run.start()
    assert run.keys("ocr.extract_text") == [item(0, "extracting"), item(1, "extracting")]
    assert [r.status for r in run.ex.regions] == ["running", "running", "created", "created"]
    file_item(run, 1)  # item 1 ends first; item 2 takes its slot
    assert run.keys("ocr.extract_text")[-1] == item(2, "extracting")
    run.answer(item(2, "extracting"), ok=False)  # one failure is tolerated
    assert run.ex.state == "filing_batch"
    file_item(run, 0)
    file_item(run, 3)
    assert run.ex.state == "summarizing"
    filed = run.ex.context["filed"]
    assert [r and r["id"] for r in filed] == ["att-1", "att-2", None, "att-4"]
    (summary,) = [c for c in run.calls if c.tool == "agent.summarize_batch"]
    assert summary.input["filed"] == filed


def fail_first_round(run: Chart) -> None:
    """Files attachment 1, then fails attachments 2 and 3 (past the one tolerated)."""
    run.start()
    file_item(run, 0)
    run.answer(item(1, "extracting"), ok=False)
    run.answer(item(2, "extracting"), {"chars": 10, "language": "de"})
    run.answer(item(2, "filing"), ok=False)


def test_a_failed_batch_is_taken_out_of_the_archive_and_the_sender_asked_to_resend() -> None:
    run = Chart(BATCH)
    fail_first_round(run)
    assert run.ex.status == "compensating"
    assert run.keys("archive.unfile_document") == [item(0, "filing") + "/undo"]
    run.answer(item(0, "filing") + "/undo")
    assert run.ex.state == "asking_sender" and run.ex.regions == ()
    run.answer("x1/asking_sender/1")
    assert (run.ex.state, run.ex.outcome) == ("rejected", "rejected")
    assert len(run.keys("archive.file_document")) == 2  # att-1 and att-3, once each


def summarized(definition: WorkflowDefinition = BATCH) -> Chart:
    """Gives a batch run with all four attachments filed and summarised, being read."""
    run = Chart(definition)
    run.start()
    for index in range(4):
        file_item(run, index)
    run.answer("x1/summarizing/1", {"summary": "four documents filed"})
    return run


@pytest.mark.parametrize("definition", [BATCH, NAIVE_BATCH], ids=lambda d: d.name)
def test_changes_requested_summarise_again_and_the_naive_batch_files_everything_twice(
        definition: WorkflowDefinition) -> None:
    run = summarized(definition)
    run.apply(run.user("review.changes_requested"))
    if definition is BATCH:
        assert run.ex.state == "summarizing" and run.keys("agent.summarize_batch")[-1] == (
            "x1/summarizing/2")
        assert len(run.keys("archive.file_document")) == 4
        return
    assert run.ex.state == "filing_batch"
    file_item(run, 0, round_=2)
    first, again = [c for c in run.calls if c.tool == "archive.file_document"
                    and c.input["attachment_id"] == "att-1"]
    assert first.input == again.input and (first.key, again.key) == (
        item(0, "filing"), item(0, "filing", 2))


@pytest.mark.parametrize(("checked", "resumed"), [(False, "reading"), (True, "signing_off")])
def test_a_paused_review_resumes_in_the_step_it_was_paused_in(checked: bool, resumed: str
                                                             ) -> None:
    run = summarized()
    assert run.ex.state == "reading"
    if checked:
        run.apply(run.user("review.checked"))
    run.apply(run.user("review.paused"))
    assert run.ex.state == "review_paused" and run.ex.history == {"review": resumed}
    run.apply(run.user("review.resumed"))
    assert run.ex.state == resumed and run.ex.context["pauses"] == 1
    assert run.ex.context["review_sessions"] == 2  # the review's entry action, on resuming too


# -- fuzzing -------------------------------------------------------------------------------


def histories(definition: WorkflowDefinition, seeds: Sequence[int]
              ) -> Iterator[Sequence[HistoryRecord]]:
    """Gives each seed's history of a simulation with every fault kind the definition can
    take; every invariant must hold over each."""
    simulator = Simulator(definition, SimOptions(plan=plan_for(definition)))
    for seed in seeds:
        history = simulator.run(seed).history
        assert check(definition, history) == [], seed
        yield history


def commits(history: Sequence[HistoryRecord]) -> Iterator[Committed]:
    """Gives the accepted commits of a history."""
    return (r for r in history if type(r) is Committed and r.decision == "accepted")


#: what a 200-run campaign of each scenario does not reach, and why that is acceptable: since
#: swarm runs a kind hot in half its runs (and the default plan leaves forged approvals out of
#: a definition without an approval), nothing
RARE: dict[str, dict[str, list[Any]]] = {"parallel_triage": {}, "batch_documents": {}}


@pytest.mark.parametrize("definition", [TRIAGE, BATCH], ids=lambda d: d.name)
def test_each_scenario_holds_when_fuzzed_as_the_readme_does(definition: WorkflowDefinition
                                                            ) -> None:
    """`fsmharness fuzz scenarios/` at its defaults (500 runs from seed 0, swarm mode: each
    run draws its own mix of every fault kind): every invariant holds, and the campaign
    reaches every state, region, eventless move, guard outcome, history resume and side of
    the conditional approval, every transition but the rare ones named in RARE."""
    report = fuzz(definition, FuzzOptions(replay_dir=None))
    assert report.held, "\n".join([*(str(v) for f in report.failures for v in f.violations),
                                   *(str(gap) for gap in report.adequacy.gaps)])
    assert not report.aimed  # the 500 runs exercised it all
    coverage = report.summary()["coverage"]
    rare = RARE[definition.name]
    for dimension, covered in coverage.items():
        assert covered["missing"] == rare.get(dimension, []), dimension
    if definition is TRIAGE:
        assert report.faults[str(FaultKind.WRONG_CORRELATION)] > 0
        assert coverage["approvals"]["of"] == 2  # asked for, and not needed
    else:
        assert coverage["history"]["of"] == 1


@pytest.mark.parametrize(("definition", "entry"), [
    *((TRIAGE, entry) for entry in entries(COMPENSATIONS)),
    *((BATCH, entry) for entry in entries(APPROVALS)),
], ids=lambda value: getattr(value, "name", value))
def test_failure_matrix(definition: WorkflowDefinition, entry: str) -> None:
    """Each entry of the failure matrix strikes and every invariant holds (the triage
    compensates nothing, the batch asks for no approval: those entries are left out)."""
    assert_entry_holds(definition, entry)


def test_the_batch_holds_with_every_fault_kind_in_every_run() -> None:
    """Every fault kind in every run (no swarm): seed 181 once broke compensation_order, when
    an item waiting to retry an uncertain filing had its undo put before a newer filing's;
    that undo now keeps its place in time."""
    campaign(BATCH, runs=200)


def test_the_triage_reaches_every_region_state_and_both_sides_of_the_approval() -> None:
    regions: Counter[str] = Counter()
    credits: Counter[str] = Counter()  # how the credit step was reached, by amount
    inner: set[tuple[str, str, str]] = set()
    for history in histories(TRIAGE, range(60)):
        for record in commits(history):
            # a region's last state shows in the move that ended it: a join or a region
            # failure leaves no regions behind
            regions.update(state for _, state, _ in record.regions)
            regions.update(target for _, _, target in record.inner)
            inner.update(record.inner)
            if record.state == "issuing_credit" and record.moved:
                amount = (record.context or {})["amount"]
                path = ("approved" if record.from_state == "awaiting_supervisor" else "direct")
                credits[f"{path} {'over' if amount > 100 else 'up to'} 100"] += 1
    assert set(regions) == {"crm_fetching", "crm_fetched", "billing_fetching",
                            "billing_fetched", "billing_unavailable"}
    assert ("crm_fetching", "step.failed", "crm_fetched") in inner  # a CRM outage degraded
    assert set(credits) == {"approved over 100", "direct up to 100"}, credits


def test_the_batch_runs_every_attachment_undoes_a_failed_batch_and_resumes_reviews() -> None:
    filed: Counter[str] = Counter()
    moves: Counter[tuple[str, str, str]] = Counter()
    for history in histories(BATCH, range(60)):
        for record in commits(history):
            moves[(record.from_state, record.moved, record.state)] += 1
            for region, state, _ in record.regions:
                if state == "filed":
                    filed[region.rsplit("/", 1)[-1]] += 1
            running = sum(1 for _, state, status in record.regions
                          if status in ("running", "waiting"))
            assert running <= 2, record  # concurrency_max
    assert set(filed) == {"0", "1", "2", "3"}
    assert moves[("filing_batch", "compensation.succeeded", "asking_sender")] > 0  # undone
    assert moves[("review_paused", "review.resumed", "signing_off")] > 0
    assert moves[("review_paused", "review.resumed", "reading")] > 0


NAIVE = {
    "triage_credit_twice": (NAIVE_TRIAGE, "billing.issue_credit took effect twice"),
    "batch_refile_on_changes": (NAIVE_BATCH, "archive.file_document took effect twice"),
}


@pytest.mark.parametrize("name", sorted(NAIVE))
def test_each_naive_variant_is_caught_by_no_duplicate_effect_and_replays(
        name: str, tmp_path: Path) -> None:
    """At the README's defaults (500 runs from seed 0, swarm mode)."""
    definition, says = NAIVE[name]
    report = fuzz(definition, FuzzOptions(replay_dir=tmp_path))
    assert not report.held
    (failure,) = report.failures
    assert failure.rule == "no_duplicate_effect" and says in failure.violations[0].message
    assert failure.counterexample is not None and failure.replay_file is not None
    outcome = replay(failure.replay_file)
    assert outcome.reproduced and outcome.rule == "no_duplicate_effect"
    assert outcome.violation is not None and says in outcome.violation.message
