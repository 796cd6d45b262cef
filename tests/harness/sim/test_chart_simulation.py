"""The simulator drives statecharts: events go to the states a parallel state's regions are in,
several calls and approvals of one execution are completed in any order (through crashes and a
second worker), a map's items all run, and a correlated webhook is sent for its own run (or,
as the `wrong_correlation` fault, for another). Every fault kind alone, on several seeds, takes
each execution to the join, and the same seed gives the same history."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fault_injection import FaultKind, load_plan, no_faults
from harness import (
    Committed,
    Decided,
    Delivered,
    FaultInjected,
    Observation,
    Observed,
    ReferenceMachine,
    Replayed,
    ResultRecorded,
    SimOptions,
    SimulationResult,
    Simulator,
)
from harness.sim.history import dump_line
from harness.sim.simulator import APPROVE, plan_for
from reference_machine import WorkflowDefinition, load_definition

HERE = Path(__file__).resolve().parent
SEEDS = range(4)
CONTEXT = {"issue_id": "ISS-7"}


def approval(for_state: str, role: str) -> dict[str, Any]:
    return {"for_state": for_state, "summary": f"{for_state} {{issue_id}}", "roles": [role],
            "expires_after": "1h"}


#: Four regions: a build whose CI webhook is correlated, two approvals gating a deploy (undone
#: if the release fails) and a notice, and timers; `tick` is taken by two regions at once.
RELEASE_SPEC: dict[str, Any] = {
    "name": "release",
    "context": {"issue_id": ""},
    "tools": {"build": {"idempotency_keys": True}, "deploy": {"idempotency_keys": True},
              "undeploy": {"idempotency_keys": True}, "notify": {"idempotency_keys": True}},
    "compensation_failed": "stuck",
    "events": {
        "ci.finished": {
            "payload": {"type": "object",
                        "properties": {"issue_id": {"type": "string"},
                                       "passed": {"type": "boolean"}},
                        "required": ["issue_id", "passed"]},
            "correlate": {"issue_id": "context.issue_id"}},
        "tick": {},
    },
    "states": {
        "release": {"initial": True, "type": "parallel", "on_region_failure": "wait",
                    "done": [{"target": "released", "guard": "not event.payload.failed"},
                             "failed"]},
        "build": {"parent": "release"},
        "build_run": {"parent": "build", "initial": True, "step": {"tool": "build"},
                      "on": {"step.succeeded": "build_wait", "step.failed": "build_failed"}},
        "build_wait": {"parent": "build", "type": "wait",
                       "on": {"ci.finished": [
                           {"target": "build_done", "guard": "event.payload.passed"},
                           "build_failed"]},
                       "after": {"delay": "10m", "target": "build_failed"}},
        "build_done": {"parent": "build", "type": "final", "outcome": "success"},
        "build_failed": {"parent": "build", "type": "final", "outcome": "failure"},
        "ship": {"parent": "release"},
        "ship_ask": {"parent": "ship", "initial": True, "type": "wait",
                     "approval": approval("ship_deploy", "release_manager"),
                     "on": {"approval.granted": "ship_deploy", "approval.denied": "ship_failed"}},
        "ship_deploy": {"parent": "ship", "step": {
            "tool": "deploy", "needs_approval": True, "compensation": {"tool": "undeploy"}},
            "on": {"step.succeeded": "ship_done", "step.failed": "ship_failed"}},
        "ship_done": {"parent": "ship", "type": "final", "outcome": "success"},
        "ship_failed": {"parent": "ship", "type": "final", "outcome": "failure"},
        "tell": {"parent": "release"},
        "tell_ask": {"parent": "tell", "initial": True, "type": "wait",
                     "approval": approval("tell_send", "support"),
                     "on": {"approval.granted": "tell_send", "approval.denied": "tell_done"}},
        "tell_send": {"parent": "tell", "step": {"tool": "notify", "needs_approval": True},
                      "on": {"step.succeeded": "tell_wait", "step.failed": "tell_done"}},
        "tell_wait": {"parent": "tell", "type": "wait", "on": {"tick": "tell_done"},
                      "after": {"delay": "5m", "target": "tell_done"}},
        "tell_done": {"parent": "tell", "type": "final", "outcome": "success"},
        "watch": {"parent": "release"},
        "watch_wait": {"parent": "watch", "initial": True, "type": "wait",
                       "on": {"tick": "watch_done"},
                       "after": {"delay": "5m", "target": "watch_done"}},
        "watch_done": {"parent": "watch", "type": "final", "outcome": "success"},
        "released": {"type": "final", "outcome": "success"},
        "failed": {"type": "final", "outcome": "failure"},
        "stuck": {"type": "final", "outcome": "failure"},
    },
}
RELEASE = load_definition(RELEASE_SPEC)
JOINED = frozenset({"released", "failed", "stuck"})

#: One extraction per attachment, two at once, none allowed to fail.
ITEMS: dict[str, Any] = {
    "name": "attachments",
    "context": {"attachments": [{"url": f"u{i}"} for i in range(4)]},
    "tools": {"extract": {"idempotency_keys": True}},
    "states": {
        "each": {"initial": True, "type": "map", "items": "context.attachments",
                 "concurrency_max": 2, "results": "texts",
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
MAP = load_definition(ITEMS)

#: A run that waits for its CI webhook, which must name its issue, with a timer as way out.
WEBHOOK = load_definition({
    "name": "webhook",
    "context": {"issue_id": ""},
    "events": {"ci.finished": {
        "payload": {"type": "object", "properties": {"issue_id": {"type": "string"}},
                    "required": ["issue_id"]},
        "correlate": {"issue_id": "context.issue_id"}}},
    "states": {
        "waiting": {"initial": True, "type": "wait", "on": {"ci.finished": "done"},
                    "after": {"delay": "10m", "target": "timed_out"}},
        "done": {"type": "final", "outcome": "success"},
        "timed_out": {"type": "final", "outcome": "failure"},
    },
})


def simulator(definition: WorkflowDefinition, plan: Any = None, **options: Any) -> Simulator:
    options.setdefault("context", CONTEXT)
    return Simulator(definition, SimOptions(plan=plan, **options))


def lines(result: SimulationResult) -> list[str]:
    return [dump_line(record) for record in result.history]


def records(result: SimulationResult, kind: type[Any]) -> Iterator[Any]:
    return (record for record in result.history if isinstance(record, kind))


def decided(result: SimulationResult) -> dict[str, str]:
    """Gives what the machine said of each event id (its first answer)."""
    said: dict[str, str] = {}
    for record in records(result, Decided):
        said.setdefault(record.event_id, record.decision)
    return said


# -- events offered in a parallel state --------------------------------------------------------


class TestOffered:
    def test_the_events_of_the_states_the_regions_are_in(self) -> None:
        """What the regions' states take is offered, and no more."""
        sim = simulator(RELEASE)
        seen = Observation("release", "running", 2, active=(
            "build_wait", "ship_ask", "tell_ask", "watch_wait"))
        assert sim.offered(seen) == ("ci.finished", "tick")
        building = seen._replace(active=("build_run", "ship_ask", "tell_ask", "watch_done"))
        assert sim.offered(building) == ()
        assert sim.offered(building._replace(active=(
            "build_run", "ship_done", "tell_wait", "watch_done"))) == ("tick",)

    def test_a_machine_that_does_not_say_is_offered_every_event_inside(self) -> None:
        """With no region states, whatever a state inside takes is offered."""
        sim = simulator(RELEASE)
        assert sim.offered(Observation("release", "running", 2)) == ("ci.finished", "tick")
        assert sim.offered(Observation("released", "final", 9)) == ()

    def test_the_reference_machine_tells_its_region_states(self) -> None:
        """The observation of an execution in a parallel state names each region's state, and
        every approval request its regions wait on, the mirrored one first."""
        made: list[ReferenceMachine] = []

        def factory(*args: Any) -> ReferenceMachine:
            made.append(ReferenceMachine(*args))
            return made[-1]

        run = Simulator(RELEASE, SimOptions(executions=1, plan=no_faults(), context=CONTEXT),
                        factory).begin(0)
        assert run.start()
        assert run.step()  # the only action: start x1
        seen = made[0].observe("x1")
        assert seen.state == "release"
        assert seen.active == ("build_run", "ship_ask", "tell_ask", "watch_wait")
        assert [a.request_id for a in seen.approvals] == [
            "x1/release/1/ship/ship_ask/1/approval", "x1/release/1/tell/tell_ask/1/approval"]
        assert seen.approval == seen.approvals[0]
        kinds = [action[0] for action in run.actions()]
        assert kinds.count(APPROVE) == 2  # either approval may be decided first

    def test_a_bounded_event_is_sent_no_more_than_its_bound(self) -> None:
        """`sends_max` holds inside a parallel state too."""
        spec = json.loads(json.dumps(RELEASE_SPEC))
        spec["events"]["tick"]["sends_max"] = 1
        definition = load_definition(spec)
        for seed in range(10):
            result = simulator(definition, no_faults(), executions=2).run(seed)
            sends = Counter(d.execution for d in records(result, Delivered)
                            if d.type == "tick" and d.via == "external")
            assert all(n <= 1 for n in sends.values()), (seed, sends)


# -- the regions, driven ---------------------------------------------------------------------


@functools.cache
def quiet_runs() -> tuple[SimulationResult, ...]:
    """Runs of the release without faults (three executions each)."""
    sim = simulator(RELEASE, no_faults())
    return tuple(sim.run(seed) for seed in range(30))


def test_an_event_reaches_every_region_that_takes_it() -> None:
    """One `tick` moves both regions that wait on it; the webhook moves the build region."""
    both = {("tell_wait", "tick", "tell_done"), ("watch_wait", "tick", "watch_done")}
    moves = [set(c.inner) for result in quiet_runs() for c in records(result, Committed)
             if c.decision == "accepted"]
    assert any(both <= inner for inner in moves)
    assert any(("build_wait", "ci.finished", "build_done") in inner for inner in moves)


def test_approvals_and_calls_complete_in_either_order() -> None:
    """Of two approvals asked at once either is decided first; of calls in flight at once
    either answers first."""
    first_decided: Counter[str] = Counter()
    first_answered: Counter[str] = Counter()
    for result in quiet_runs():
        for eid in result.final:
            asked = [d.answers.split("/")[3] for d in records(result, Delivered)
                     if d.execution == eid and d.via == "approval"]
            if len(set(asked)) == 2:
                first_decided[asked[0]] += 1
            answered = [r.call.split("/")[3] for r in records(result, ResultRecorded)
                        if r.execution == eid]
            if {"build", "ship"} <= set(answered):
                first_answered[min(("build", "ship"), key=answered.index)] += 1
    assert first_decided["ship"] and first_decided["tell"], first_decided
    assert first_answered["build"] and first_answered["ship"], first_answered
    pending = [len(o.approvals) for result in quiet_runs() for o in records(result, Observed)]
    assert max(pending) == 2


def test_without_faults_every_execution_joins_and_some_release() -> None:
    """Every execution leaves the parallel state through its join; some are released."""
    ends = Counter(o.state for result in quiet_runs() for o in result.final.values())
    assert set(ends) <= JOINED and ends["released"] > 0, ends
    assert all(result.status == "final" for result in quiet_runs())


class Mute(ReferenceMachine):
    """The reference machine, telling neither its regions' states nor their approvals."""

    def observe(self, execution_id: str) -> Observation:
        return super().observe(execution_id)._replace(active=(), approvals=())


def test_a_machine_that_tells_no_regions_is_driven_to_the_join() -> None:
    """Offered every event inside and the first approval alone, a machine still joins."""
    sim = Simulator(RELEASE, SimOptions(context=CONTEXT), Mute)
    for seed in range(10):
        result = sim.run(seed)
        assert result.failure is None and result.status == "final", result.summary()
        assert {o.state for o in result.final.values()} <= JOINED


def plan_of(kind: FaultKind) -> Any:
    """Gives the plan of `kind` alone, at a high rate (a crash costs a recovery)."""
    rate = {FaultKind.CRASH: 0.2, FaultKind.STORE_WRITE_FAILURE: 0.2,
            FaultKind.SECOND_WORKER: 0.3}.get(kind, 0.4)
    return load_plan({"faults": {kind.value: rate}})


@pytest.mark.parametrize("kind", list(FaultKind), ids=str)
def test_every_fault_kind_alone_is_survived_to_the_join(kind: FaultKind) -> None:
    """Under each kind alone: no failure or hang, every execution joined, each log replays,
    no keyed effect twice, the kind injected, and the same seed gives the same bytes."""
    sim = simulator(RELEASE, plan_of(kind))
    injected = 0
    for seed in range(8):  # a run that holds the clock back may give a skew no chance
        result = sim.run(seed)
        where = f"{kind} seed {seed}"
        assert result.failure is None, f"{where}: {result.failure}\n{result.traceback}"
        assert result.status == "final", f"{where}: {result.summary()}"
        assert {o.state for o in result.final.values()} <= JOINED, where
        assert all(r.ok for r in records(result, Replayed)), where
        keys = Counter((e.tool, e.key) for e in result.ledger)
        assert all(n == 1 for n in keys.values()), f"{where}: {keys}"
        injected += sum(1 for f in records(result, FaultInjected) if f.fault == kind)
        assert lines(simulator(RELEASE, plan_of(kind)).run(seed)) == lines(result), where
    assert injected > 0, f"no {kind} injected"


def test_a_forged_approval_for_a_region_is_never_accepted() -> None:
    """With two regions asking at once, no forgery (a stale request included: one another
    region still waits on is not stale) is taken."""
    sim = simulator(RELEASE, load_plan({"faults": {"forged_approval": 0.6}}))
    forged = Counter()
    for seed in range(12):
        result = sim.run(seed)
        said = decided(result)
        for delivery in records(result, Delivered):
            if delivery.via == "forged":
                forged[said.get(delivery.event_id, "unanswered").partition(":")[0]] += 1
    assert forged["rejected"] + forged["ignored"] > 0 and not forged["accepted"], forged


def test_the_same_seed_gives_the_same_bytes_in_another_process(tmp_path: Path) -> None:
    """A child process with another PYTHONHASHSEED writes this process's history."""
    path = tmp_path / "release.json"
    path.write_text(json.dumps({**RELEASE_SPEC, "context": CONTEXT}))
    child = subprocess.run([sys.executable, str(HERE / "sim_child.py"), str(path), "3",
                            "swarm"], capture_output=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": "4242"})
    definition = load_definition(path)
    plan = plan_for(definition, swarm=True)
    here = Simulator(definition, SimOptions(seed=3, plan=plan)).run()
    assert child.stdout.decode().splitlines() == lines(here)


# -- a map -----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [None, FaultKind.CRASH, FaultKind.SECOND_WORKER,
                                  FaultKind.TOOL_TIMEOUT_AFTER_APPLY], ids=str)
def test_every_item_of_a_map_completes(kind: FaultKind | None) -> None:
    """A map done has an extraction applied, once, for every item, and a text per item."""
    plan = no_faults() if kind is None else load_plan({"faults": {kind.value: 0.3}})
    sim = Simulator(MAP, SimOptions(plan=plan))
    done = 0
    for seed in SEEDS:
        result = sim.run(seed)
        assert result.failure is None and result.status == "final", result.summary()
        contexts = {c.execution: c.context for c in records(result, Committed)
                    if c.decision == "accepted"}
        for eid, seen in result.final.items():
            if seen.state != "done":
                continue
            done += 1
            keys = sorted(e.key for e in result.ledger if e.execution == eid)
            assert keys == [f"{eid}/each/1/{i}/extract/1" for i in range(4)]
            context = contexts[eid]
            assert context is not None
            assert len(context["texts"]) == 4 and None not in context["texts"]
    assert done > 0


# -- correlated payloads -------------------------------------------------------------------


@functools.cache
def webhook_runs() -> tuple[SimulationResult, ...]:
    sim = simulator(WEBHOOK, plan_for(WEBHOOK))
    return tuple(sim.run(seed) for seed in range(60))


def test_the_correlated_webhook_is_accepted_in_most_runs() -> None:
    """The sender's webhook names its own run: most runs take it; none of those is refused
    as another run's."""
    taken = 0
    for result in webhook_runs():
        said = decided(result)
        faulted = {f.detail.split(" ")[0] for f in records(result, FaultInjected)
                   if f.fault == FaultKind.WRONG_CORRELATION}
        sent = [d for d in records(result, Delivered) if d.type == "ci.finished"]
        assert all(said.get(d.event_id) != "rejected:uncorrelated" for d in sent
                   if d.event_id not in faulted), result.seed
        taken += any(said.get(d.event_id) == "accepted" for d in sent)
    assert taken > len(webhook_runs()) // 2, taken


def test_a_wrong_correlation_is_refused_as_uncorrelated() -> None:
    """Each webhook the fault made another run's is refused as uncorrelated (or as too late,
    once its execution ended), never accepted."""
    plan = load_plan({"faults": {"wrong_correlation": 0.5}})
    sim = simulator(WEBHOOK, plan)
    outcomes: Counter[str] = Counter()
    for seed in range(20):
        result = sim.run(seed)
        said = decided(result)
        for fault in records(result, FaultInjected):
            assert fault.fault == FaultKind.WRONG_CORRELATION
            outcomes[said[fault.detail.split(" ")[0]]] += 1
    assert outcomes["rejected:uncorrelated"] > 0
    assert set(outcomes) <= {"rejected:uncorrelated", "rejected:terminal"}, outcomes


def test_a_campaign_shows_both_outcomes_of_the_correlated_event() -> None:
    """Over the default plan's runs, the webhook is both accepted and refused as another
    run's; the fault is in the plan only for a definition that correlates."""
    said = Counter(decision for result in webhook_runs()
                   for event, decision in decided(result).items()
                   if any(d.event_id == event and d.type == "ci.finished"
                          for d in records(result, Delivered)))
    assert said["accepted"] > said["rejected:uncorrelated"] > 0, said
    assert FaultKind.WRONG_CORRELATION in plan_for(WEBHOOK).kinds
    assert FaultKind.WRONG_CORRELATION not in plan_for(MAP).kinds


def test_the_webhook_in_a_region_is_correlated_with_the_run() -> None:
    """In the release's build region the webhook names the run's issue too."""
    said = Counter(decided(result)[d.event_id] for result in quiet_runs()
                   for d in records(result, Delivered) if d.type == "ci.finished")
    assert said["accepted"] > 0 and said["rejected:uncorrelated"] == 0, said
