"""DESIGN.md's failure examples as simulated scenarios: a retry sends the refund twice, a late
webhook resurrects a finished run, a restart forgets an approval, a loop never ends, and a crash
at each of the runtime's crash points. Each is checked from the history, the effect ledger and
the store, and, where it can be, shown to be caught when the machine's guard is taken away."""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from recording import recording_factory

from fault_injection import FaultPlan, load_plan
from harness import (
    Committed,
    Crashed,
    Decided,
    Delivered,
    Dispatched,
    FaultInjected,
    HistoryRecord,
    LedgerEntry,
    Recovered,
    ReferenceMachine,
    SimOptions,
    SimulationResult,
    Simulator,
)
from harness.sim.simulator import plan_for
from reference_machine import (
    APPROVAL_GRANTED,
    CRASH_POINTS,
    Event,
    RequestApproval,
    WorkflowDefinition,
    load_definition,
)

ROOT = Path(__file__).resolve().parents[2]
REFUND = "payments.refund"


@cache
def scenario(name: str) -> WorkflowDefinition:
    return load_definition(ROOT / "scenarios" / f"{name}.yaml")


def simulate(definition: WorkflowDefinition, plan: FaultPlan, seeds: Iterable[int],
             **options: Any) -> list[tuple[SimulationResult, ReferenceMachine]]:
    """Runs one simulation per seed, giving each result with the machine it ran."""
    factory, made = recording_factory()
    simulator = Simulator(definition, SimOptions(plan=plan, **options), machine=factory)
    runs = []
    for seed in seeds:
        made.clear()
        result = simulator.run(seed)
        assert result.failure is None, f"seed {seed}: {result.failure}\n{result.traceback}"
        runs.append((result, made[0]))
    return runs


def applied_twice(ledger: Iterable[LedgerEntry], tool: str) -> dict[str, int]:
    """Gives the keys under which `tool` was applied more than once, with how often."""
    counts = Counter(entry.key for entry in ledger if entry.tool == tool)
    return {key: count for key, count in counts.items() if count > 1}


def finals(definition: WorkflowDefinition) -> frozenset[str]:
    return frozenset(name for name, state in definition.states.items() if state.final)


def replay_problems(machine: ReferenceMachine) -> list[str]:
    """Tells of every execution whose log does not replay to its stored record."""
    problems = []
    for eid in machine.store.execution_ids():
        try:
            if machine.runtime.replay(eid) != machine.store.load(eid).execution:
                problems.append(f"{eid}: replay differs from the stored record")
        except Exception as exc:
            problems.append(f"{eid}: replay failed: {exc}")
    return problems


# -- a retry sends the refund twice -------------------------------------------------------------


REFUND_TIMEOUTS = {"faults": {"tool_timeout_after_apply": {"rate": 0.6, "tools": [REFUND]}}}
RETRY_SEEDS = range(40)


def test_retry_after_ambiguous_timeout_refunds_once() -> None:
    """Refunds timing out after applying are retried, yet applied once per execution visit."""
    runs = simulate(scenario("refund_escalation"), load_plan(REFUND_TIMEOUTS), RETRY_SEEDS)
    retried = visits = 0
    for result, _ in runs:
        calls = Counter(r.key for r in result.history
                        if isinstance(r, Dispatched) and r.tool == REFUND)
        ledger = Counter(entry.key for entry in result.ledger if entry.tool == REFUND)
        assert set(ledger) == set(calls), f"seed {result.seed}: calls {calls}, ledger {ledger}"
        assert all(count == 1 for count in ledger.values()), f"seed {result.seed}: {ledger}"
        retried += sum(1 for count in calls.values() if count > 1)
        visits += len(ledger)
    assert visits > 0, "no execution reached the refund"
    assert retried > 0, "no refund was retried after a timeout: the scenario tested nothing"


def test_a_provider_that_ignores_keys_makes_the_duplicate_visible() -> None:
    """A provider ignoring keys under the same faults shows the duplicate refund in the ledger."""
    runs = simulate(scenario("refund_escalation"), load_plan(REFUND_TIMEOUTS), RETRY_SEEDS,
                    honour_keys={REFUND: False})
    duplicated = {result.seed: applied_twice(result.ledger, REFUND) for result, _ in runs}
    assert any(duplicated.values()), "the duplicate refund never showed in the ledger"


# -- a late webhook resurrects a finished run ---------------------------------------------------


LATE_AND_DUPLICATED = {"faults": {"late_event": {"rate": 1.0, "delay": "30d"},
                                  "duplicate_event": 1.0}}


@pytest.mark.parametrize("name", ["refund_escalation", "support_triage"])
def test_late_and_duplicate_events_cannot_resurrect_a_final_execution(name: str) -> None:
    """Late copies and duplicates reaching a final execution are refused; its state stays."""
    # a late answer has a new id (rejected: terminal); a late event that answers nothing, and
    # a duplicate, keep theirs (ignored as duplicates)
    definition = scenario(name)
    terminal = finals(definition)
    refused: Counter[str] = Counter()
    for result, machine in simulate(definition, load_plan(LATE_AND_DUPLICATED), range(12)):
        assert result.status == "final", f"seed {result.seed}: {result.status}"
        ended: dict[str, Committed] = {}
        to_final: dict[tuple[str, str], Delivered] = {}
        for record in result.history:
            if isinstance(record, Committed):
                assert record.execution not in ended or record.decision != "accepted", (
                    f"seed {result.seed}: {record} after {ended[record.execution]}")
                if record.decision == "accepted" and record.state in terminal:
                    ended.setdefault(record.execution, record)
            elif isinstance(record, Delivered) and record.execution in ended:
                to_final[(record.execution, record.event_id)] = record
            elif isinstance(record, Decided) and (record.execution, record.event_id) in to_final:
                sent = to_final.pop((record.execution, record.event_id))
                assert record.decision in ("rejected:terminal", "ignored:duplicate"), (
                    f"seed {result.seed}: {sent.via} {sent.type} to final {sent.execution}: "
                    f"{record.decision}")
                if sent.via == "late" and sent.answers:
                    assert record.decision == "rejected:terminal"
                refused[sent.via] += 1
        for eid, became in ended.items():
            stored = machine.store.load(eid)
            assert (stored.execution.state, stored.version) == (became.state, became.version)
            assert result.final[eid].state == became.state
        assert not replay_problems(machine)
    assert refused["late"] > 0, f"no late event reached a final execution: {refused}"
    assert refused["duplicate"] > 0, f"no duplicate reached a final execution: {refused}"


def test_a_webhook_delivered_by_hand_to_final_executions_changes_nothing() -> None:
    """Webhooks, approvals and replays sent by hand to final executions change nothing."""
    definition = scenario("refund_escalation")
    [(result, machine)] = simulate(definition, load_plan({"faults": {}}), [4])
    assert result.status == "final"
    for eid in machine.store.execution_ids():
        before, log = machine.store.load(eid), machine.store.log(eid)
        assert before.execution.status == "final"
        # the last event a caller sent (derived ids, `~...`, are the runtime's own)
        last = [entry.event for entry in log if not entry.event.id.startswith("~")][-1]
        webhook = Event(f"late-{eid}", "ticket.updated", "human", {"note": "any news?"})
        approval = Event(f"late-approval-{eid}", APPROVAL_GRANTED, "human",
                         {"role": "supervisor"}, f"{eid}/awaiting_approval/1/approval")
        assert machine.deliver(eid, webhook, result.at + 1) == "rejected:terminal"
        assert machine.deliver(eid, approval, result.at + 2) == "rejected:terminal"
        assert machine.deliver(eid, last, result.at + 3) in ("ignored:duplicate",
                                                             "rejected:terminal")
        assert machine.store.load(eid) == before
        # the two new events are logged as rejected; the duplicate is not logged again
        after = machine.store.log(eid)
        assert after[:len(log)] == log
        assert [(e.event.id, e.decision) for e in after[len(log):]] == [
            (webhook.id, "rejected"), (approval.id, "rejected")]
    assert not replay_problems(machine)


# -- a restart forgets an approval --------------------------------------------------------------


APPROVAL_SEEDS = range(40)


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_crash_around_the_approval_never_asks_again(point: str) -> None:
    """After crashes at `point` near the approval, an approved run refunds without re-asking."""
    # crashes strike while the approval is delivered or the refund it allowed runs; after
    # recovery the execution goes on to executing_refund and nothing asks for approval again
    definition = scenario("refund_escalation")
    plan = load_plan({"faults": {"crash": {"rate": 0.3, "points": [point]}}})
    granted = hit = 0
    for result, machine in simulate(definition, plan, APPROVAL_SEEDS, executions=4):
        assert result.status == "final", f"seed {result.seed}: {result.status}"
        sent = {(r.execution, r.event_id): r for r in result.history if isinstance(r, Delivered)}
        state: dict[str, str] = {}
        accepted_at: dict[str, Committed] = {}
        for index, record in enumerate(result.history):
            if (isinstance(record, FaultInjected) and record.fault == "crash"
                    and state.get(record.execution) in ("awaiting_approval", "executing_refund")):
                hit += 1
            if not isinstance(record, Committed) or record.decision != "accepted":
                continue
            event = sent.get((record.execution, record.event_id))
            if event is not None and event.type == APPROVAL_GRANTED:
                assert record.state == "executing_refund", f"seed {result.seed}: {record}"
                assert record.execution not in accepted_at, (
                    f"seed {result.seed}: a second approval accepted: {record}")
                accepted_at[record.execution] = record
                asked_again = [r for r in result.history[index:]
                               if isinstance(r, Delivered) and r.execution == record.execution
                               and r.via in ("approval", "forged")]
                assert not asked_again, f"seed {result.seed}: asked again: {asked_again}"
            state[record.execution] = record.state
        for eid, record in accepted_at.items():
            granted += 1
            execution = machine.store.load(eid).execution
            requests = [entry.command for entry in machine.store.outbox(eid)
                        if isinstance(entry.command, RequestApproval)]
            ids = [request.request_id for request in requests]
            assert len(ids) == len(set(ids)) == execution.visits["awaiting_approval"], (
                f"seed {result.seed}: {eid}: requests {ids}, visits {execution.visits}")
            answered = sent[(eid, record.event_id)].answers
            assert ids[-1] == answered, f"seed {result.seed}: {eid} asked after {answered}"
            assert execution.visits.get("executing_refund") == 1
            assert any(entry.command.key == f"{eid}/executing_refund/1"
                       for entry in machine.store.outbox(eid)
                       if not isinstance(entry.command, RequestApproval)), (
                f"seed {result.seed}: {eid}: the approved refund was never commanded")
            assert answered not in {entry.command_id for entry in machine.store.pending(eid)}, (
                f"seed {result.seed}: {eid}: the answered approval request is still pending")
        assert not replay_problems(machine)
    assert granted > 0, "no approval was accepted"
    assert hit > 0, f"no crash at {point} came near an approval"


# -- a forged approval moves money --------------------------------------------------------------


def accepted_forgeries(results: Iterable[SimulationResult]) -> list[str]:
    """Tells of every approval the simulator sent as a forgery that the machine accepted."""
    found = []
    for result in results:
        forged = {r.event_id: r for r in result.history
                  if isinstance(r, Delivered) and r.via == "forged"}
        found += [f"seed {result.seed}: {forged[r.event_id]}" for r in result.history
                  if isinstance(r, Decided) and r.event_id in forged
                  and r.decision == "accepted"]
    return found


def test_forged_approvals_are_refused() -> None:
    """Every variant of forged approval is refused (unauthorized, or stale and ignored)."""
    plan = load_plan({"faults": {"forged_approval": 0.5}})
    runs = simulate(scenario("refund_escalation"), plan, range(40), executions=4)
    results = [result for result, _ in runs]
    variants = {r.detail.split()[0] for result in results for r in result.history
                if isinstance(r, FaultInjected) and r.fault == "forged_approval"}
    assert variants == {"wrong_source", "wrong_role", "stale_request", "changed_hash"}
    assert not accepted_forgeries(results)


def test_a_stale_request_forgery_is_stale_even_after_a_dropped_approval() -> None:
    """A stale-request forgery sent while the genuine approval is dropped is still refused."""
    plan = load_plan({"faults": {"forged_approval": {"rate": 0.5, "variants": ["stale_request"]},
                                 "dropped_event": 0.5}})
    runs = simulate(scenario("refund_escalation"), plan, range(40))
    found = accepted_forgeries(result for result, _ in runs)
    assert not found, "\n".join(found[:3])


# -- a loop never ends --------------------------------------------------------------------------


def looping(budgets: Mapping[str, Any] | None) -> dict[str, Any]:
    """Gives a workflow whose two states hand over to each other forever, on an external
    `poke` or on their own timer; `stop` is there but its guard never holds."""
    states: dict[str, Any] = {
        "ping": {"initial": True, "type": "wait", "after": {"delay": "1h", "target": "pong"},
                 "on": {"poke": "pong", "stop": {"target": "done", "guard": "context.may_stop"}}},
        "pong": {"type": "wait", "after": {"delay": "1h", "target": "ping"},
                 "on": {"poke": "ping"}},
        "done": {"type": "final", "outcome": "success"},
    }
    data: dict[str, Any] = {"name": "looping", "version": "1", "context": {"may_stop": False},
                            "events": {"poke": {"sources": ["system"]},
                                       "stop": {"sources": ["human"]}},
                            "states": states}
    if budgets is not None:
        data["budgets"] = dict(budgets)
        states["gave_up"] = {"type": "final", "outcome": "failure"}
        if budgets["on_exceeded"] == "paused":
            states["paused"] = {"type": "wait", "after": {"delay": "1d", "target": "gave_up"}}
    return copy.deepcopy(data)


STEPS_MAX = 2_000
BUDGETS = [
    pytest.param({"visits_max": 4, "on_exceeded": "gave_up"}, "visits_max", id="visits_max"),
    pytest.param({"visits_max": 3, "on_exceeded": "paused"}, "visits_max",
                 id="visits_max-paused"),
    pytest.param({"transitions_max": 10, "on_exceeded": "paused"}, "transitions_max",
                 id="transitions_max"),
    pytest.param({"deadline": "1d", "on_exceeded": "paused"}, "deadline", id="deadline"),
]


@pytest.mark.parametrize("swarm", [False, True], ids=["default_plan", "swarm"])
@pytest.mark.parametrize(("budgets", "reason"), BUDGETS)
def test_a_budget_ends_an_endless_loop(budgets: dict[str, Any], reason: str,
                                       swarm: bool) -> None:
    """A budget forces an endless loop to its declared state; a budget of visits or moves
    ends it before the bound. A deadline waits for the clock, which a run that holds the
    clock back (`PATIENCE`) moves an hour at a time while pokes keep coming: such a run may
    meet its deadline only in the liveness phase, whose scheduler moves the clock as readily
    as it does anything else."""
    definition = load_definition(looping(budgets))
    for result, machine in simulate(definition, plan_for(definition, swarm=swarm), range(8),
                                    steps_max=STEPS_MAX):
        assert result.status == "final", f"seed {result.seed}: {result.status}"
        assert result.steps < (STEPS_MAX if reason != "deadline" else
                               STEPS_MAX + SimOptions().liveness_steps)
        for eid, seen in result.final.items():
            assert seen.state == "gave_up", f"seed {result.seed}: {eid} in {seen.state}"
            forced = [t.transition for t in machine.store.transitions(eid)
                      if t.transition.forced]
            assert forced, f"seed {result.seed}: {eid} was never forced"
            assert forced[0].forced == reason
            assert forced[0].target == budgets["on_exceeded"]
            if reason == "visits_max":
                visits = machine.store.load(eid).execution.visits
                assert max(visits["ping"], visits.get("pong", 0)) <= budgets["visits_max"]
        assert not replay_problems(machine)


def test_without_a_budget_the_loop_runs_into_the_step_bound() -> None:
    """With no budget the same loop runs into the step bound, so the check above can fail."""
    definition = load_definition(looping(None))
    [(result, _)] = simulate(definition, plan_for(definition), [0], steps_max=STEPS_MAX)
    assert result.status == "step_bound"
    assert result.steps == STEPS_MAX + SimOptions().liveness_steps  # the liveness phase too
    assert all(seen.status != "final" for seen in result.final.values())


# -- a crash at each of the runtime's crash points ----------------------------------------------


def crash_accounting(history: Iterable[HistoryRecord]) -> tuple[int, int, int]:
    """Gives (crashes outside recovery, recoveries, crashes during recovery) and checks that
    each recovery's attempts count the crashes it met."""
    records = list(history)
    outside = sum(1 for r in records if isinstance(r, Crashed) and r.during != "recovery")
    during = sum(1 for r in records if isinstance(r, Crashed) and r.during == "recovery")
    recoveries = [r for r in records if isinstance(r, Recovered)]
    assert sum(r.attempts - 1 for r in recoveries) == during
    return outside, len(recoveries), during


@pytest.mark.parametrize("name", ["refund_escalation", "support_triage"])
@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_crash_at_each_point_is_recovered(name: str, point: str) -> None:
    """Crashes at `point` are recovered: runs finish; nothing is lost, duplicated or unreplayed."""
    # no effect is applied twice, not even by a tool that honours no keys (email.send)
    definition = scenario(name)
    plan = load_plan({"faults": {"crash": {"rate": 0.25, "points": [point]}}})
    crashes, during = 0, Counter()
    for result, machine in simulate(definition, plan, range(10)):
        assert result.status == "final", f"seed {result.seed}: {result.status}"
        assert {r.point for r in result.history if isinstance(r, Crashed)} <= {point}
        outside, recoveries, _ = crash_accounting(result.history)
        assert outside == recoveries
        crashes += outside
        during.update(r.during for r in result.history if isinstance(r, Crashed))
        for tool in definition.tools:
            assert not applied_twice(result.ledger, tool), f"seed {result.seed}: {tool}"
        for record in result.history:
            if isinstance(record, Committed):
                logged = {(e.event.id, e.decision) for e in machine.store.log(record.execution)}
                assert (record.event_id, record.decision) in logged, (
                    f"seed {result.seed}: committed then lost: {record}")
        assert not replay_problems(machine), f"seed {result.seed}"
    assert crashes > 0, f"no crash at {point}"
    if point in ("before_commit", "after_commit_before_dispatch"):
        assert during["timer"] > 0, f"no crash at {point} while a timer fired: {during}"


VERIFY_FAILS = {"tool_permanent": {"rate": 1.0, "tools": ["payments.get_refund"]}}


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_crash_mid_compensation_voids_the_refund_once(point: str) -> None:
    """Crashes at `point` while a refund is being voided end with exactly one void per refund."""
    # verification always fails, so every refund applied is compensated (voided)
    plan = load_plan({"faults": {"crash": {"rate": 0.4, "points": [point]}, **VERIFY_FAILS}})
    mid_compensation = voided = 0
    for result, machine in simulate(scenario("refund_escalation"), plan, range(30),
                                    executions=4, grant_rate=1.0):
        assert result.status == "final", f"seed {result.seed}: {result.status}"
        mid_compensation += sum(1 for r in result.history
                                if isinstance(r, Crashed) and r.during == "compensation")
        refunds = {e.key for e in result.ledger if e.tool == REFUND}
        voids = Counter(e.key for e in result.ledger if e.tool == "payments.void_refund")
        undone = {r.key for r in result.history
                  if isinstance(r, Dispatched) and r.tool == "payments.void_refund"}
        assert set(voids) == undone, f"seed {result.seed}: voids {voids}, calls {undone}"
        assert all(count == 1 for count in voids.values()), f"seed {result.seed}: {voids}"
        assert {key.removesuffix("/undo") for key in voids} <= refunds
        voided += len(voids)
        assert not replay_problems(machine), f"seed {result.seed}"
    assert voided > 0, "no refund was voided"
    assert mid_compensation > 0, f"no crash at {point} during a compensation"
