"""The simulator never fails because of the machine under test: a machine that raises, hangs or
answers nonsense ends its run as that machine's failure, the trace so far kept; a bad plan or
bad options are refused up front, naming the field at fault."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from small_workflow import base

from fault_injection import FaultKind, FaultPlan, FaultPlanError, FaultRate, load_plan, no_faults
from harness import (
    Crashed,
    Decided,
    Delivered,
    Dispatched,
    Finished,
    HarnessError,
    MachineFailed,
    Observation,
    ReferenceMachine,
    RunStarted,
    SimOptions,
    SimulationResult,
    Simulator,
    Started,
)
from reference_machine import Event, Tool, WorkflowDefinition, load_definition

SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"
TRIAGE = load_definition(SCENARIOS / "support_triage.yaml")
#: Duplicates and late copies make plenty of deliveries, and neither crashes the machine.
BUSY = load_plan({"faults": {"duplicate_event": 0.5, "late_event": 0.5}})


def run(machine: Any, *, plan: FaultPlan = BUSY, **options: Any) -> SimulationResult:
    """Runs the triage workflow on `machine` (a factory), eight executions, seed 1."""
    return Simulator(TRIAGE, SimOptions(seed=1, executions=8, plan=plan, **options),
                     machine=machine).run()


def assert_failed(result: SimulationResult, problem: str) -> MachineFailed:
    """Checks the run ended as the machine's failure of kind `problem`, the trace so far kept
    (it starts with the run, holds what happened, ends with the failure), and gives it."""
    assert result.status == "machine_failed", result.summary()
    assert not result.ok
    failure = result.failure
    assert failure is not None and failure.problem == problem, failure
    history = result.history
    assert isinstance(history[0], RunStarted)
    assert history[-1] == failure, "the failure is the last record"
    assert [r for r in history if isinstance(r, MachineFailed)] == [failure]
    assert any(isinstance(r, Started) for r in history), "the trace so far is kept"
    assert not any(isinstance(r, Finished) for r in history)
    assert result.summary()["failure"]["problem"] == problem
    return failure


# -- machines that misbehave -------------------------------------------------------------------


class RaisesOnFifthDelivery(ReferenceMachine):
    """Raises ValueError on its 5th delivery."""

    def __init__(self, definition: WorkflowDefinition, tools: Mapping[str, Tool],
                 probe: Any) -> None:
        super().__init__(definition, tools, probe)
        self.deliveries = 0

    def deliver(self, execution_id: str, event: Event, now: int) -> str | None:
        self.deliveries += 1
        if self.deliveries == 5:
            raise ValueError("the fifth delivery is one too many")
        return super().deliver(execution_id, event, now)


#: How many rounds a runaway loop makes before giving up: far past `OPS_MAX`, so that a bound
#: that misses the loop shows as a run that did not fail, not as a test that never ends.
RUNAWAY = 50_000
OPS_MAX = 200


class CallsToolForever(ReferenceMachine):
    """On delivery, calls a tool again and again (a retry loop without a bound)."""

    def __init__(self, definition: WorkflowDefinition, tools: Mapping[str, Tool],
                 probe: Any) -> None:
        super().__init__(definition, tools, probe)
        self.tool = tools["agent.classify"]

    def deliver(self, execution_id: str, event: Event, now: int) -> str | None:
        for _ in range(RUNAWAY):
            self.tool({"ticket_id": None}, f"{execution_id}/spin/1")
        return super().deliver(execution_id, event, now)


class SpinsOnProbe(ReferenceMachine):
    """On delivery, passes a probe point again and again (a busy wait on its store)."""

    def deliver(self, execution_id: str, event: Event, now: int) -> str | None:
        for _ in range(RUNAWAY):
            self._probe("store_write")
        return super().deliver(execution_id, event, now)


class ObservesMissingState(ReferenceMachine):
    """Reports an execution in a state the definition lacks."""

    def observe(self, execution_id: str) -> Observation:
        return super().observe(execution_id)._replace(state="limbo")


class ObservesBadStatus(ReferenceMachine):
    """Reports a status outside created, running, waiting, compensating, final."""

    def observe(self, execution_id: str) -> Observation:
        return super().observe(execution_id)._replace(status="thinking")


class ObservesVersionGoingBack(ReferenceMachine):
    """Reports version 0 once an execution passed version 2."""

    def observe(self, execution_id: str) -> Observation:
        observed = super().observe(execution_id)
        return observed._replace(version=0) if observed.version > 2 else observed


class ObservesNotAnObservation(ReferenceMachine):
    """Reports a plain dict instead of an Observation."""

    def observe(self, execution_id: str) -> Any:
        return super().observe(execution_id)._asdict()


class TellsAMoveThroughLimbo(ReferenceMachine):
    """Tells it moved through a state its definition lacks."""

    def observe(self, execution_id: str) -> Observation:
        observed = super().observe(execution_id)
        return observed._replace(moves=(("limbo", observed.state),))


class TellsMovesAsStrings(ReferenceMachine):
    """Tells its moves as "from->to" strings, not (from, to) pairs."""

    def observe(self, execution_id: str) -> Observation:
        observed = super().observe(execution_id)
        return observed._replace(moves=(f"{observed.state}->{observed.state}",))


class ObservesNoVersion(ReferenceMachine):
    """Reports None for its version."""

    def observe(self, execution_id: str) -> Observation:
        return super().observe(execution_id)._replace(version=None)


class SaysNonsense(ReferenceMachine):
    """Answers each delivery with a decision that is none of accepted, ignored or rejected."""

    def deliver(self, execution_id: str, event: Event, now: int) -> str | None:
        super().deliver(execution_id, event, now)
        return "maybe"


class StartsWithAnExecution(ReferenceMachine):
    """Answers a start with the execution's record, not a decision (as a runtime's own start
    returns it)."""

    def start(self, execution_id: str, context: Mapping[str, Any], now: int) -> Any:
        super().start(execution_id, context, now)
        return self.runtime.store.load(execution_id)


class CannotBeBuilt(ReferenceMachine):
    """Raises while it is being built."""

    def __init__(self, definition: WorkflowDefinition, tools: Mapping[str, Tool],
                 probe: Any) -> None:
        raise RuntimeError("cannot open its database")


class NamesItsOwnPoints(ReferenceMachine):
    """Names one crash point of its own, passed before each delivery and tool call."""

    crash_points = ("mine",)

    def deliver(self, execution_id: str, event: Event, now: int) -> str | None:
        self._probe("mine")
        return super().deliver(execution_id, event, now)

    def complete(self, execution_id: str, call_id: str, now: int) -> None:
        self._probe("mine")
        super().complete(execution_id, call_id, now)


# -- raised, hung, nonsense --------------------------------------------------------------------


def test_machine_that_raises_is_reported_raised() -> None:
    """A ValueError on the 5th delivery ends the run as raised, after exactly 5 deliveries."""
    result = run(RaisesOnFifthDelivery)
    failure = assert_failed(result, "raised")
    assert failure.error == "ValueError"
    assert "the fifth delivery is one too many" in failure.message
    assert "ValueError" in result.traceback
    deliveries = [r for r in result.history if isinstance(r, Delivered)]
    assert len(deliveries) == 5
    assert not any(isinstance(r, Decided) and r.event_id == deliveries[-1].event_id
                   and r.step == deliveries[-1].step for r in result.history)


def test_machine_that_calls_a_tool_forever_is_reported_hung() -> None:
    """A loop of tool calls is caught by the per-step bound and reported hung."""
    result = run(CallsToolForever, ops_max=OPS_MAX)
    failure = assert_failed(result, "hung")
    assert str(OPS_MAX) in failure.message
    spins = [r for r in result.history if isinstance(r, Dispatched) and "/spin/" in r.key]
    assert 0 < len(spins) <= OPS_MAX  # stopped at the bound, not at the loop's end


def test_machine_that_spins_on_its_probe_is_reported_hung() -> None:
    """A loop through a probe point is caught by the per-step bound and reported hung."""
    failure = assert_failed(run(SpinsOnProbe, ops_max=OPS_MAX), "hung")
    assert str(OPS_MAX) in failure.message


@pytest.mark.parametrize(("machine", "said"), [
    (ObservesMissingState, "'limbo'"),
    (ObservesBadStatus, "'thinking'"),
    (ObservesVersionGoingBack, "went back"),
    (ObservesNotAnObservation, "not an Observation"),
    (TellsAMoveThroughLimbo, "moved through state 'limbo'"),
    (TellsMovesAsStrings, "moves of (state, state) pairs"),
], ids=["missing state", "bad status", "version going back", "not an observation",
        "move through a missing state", "moves not pairs"])
def test_machine_that_answers_nonsense_is_reported_nonsense(machine: Any, said: str) -> None:
    """An observation that cannot be ends the run as nonsense, saying what was wrong."""
    failure = assert_failed(run(machine), "nonsense")
    assert said in failure.message


def test_version_that_is_not_a_number_is_nonsense() -> None:
    """A version of None is nonsense, not an exception of the machine's."""
    assert_failed(run(ObservesNoVersion), "nonsense")


def test_decision_outside_the_protocol_is_nonsense() -> None:
    """A delivery answered with a decision that is none of the protocol's is nonsense."""
    assert_failed(run(SaysNonsense), "nonsense")


def test_a_start_answered_outside_the_protocol_is_nonsense() -> None:
    """A start answered with something other than a decision is nonsense too (it was let
    through: only deliveries' answers were read)."""
    failure = assert_failed(run(StartsWithAnExecution), "nonsense")
    assert re.fullmatch(r"start\('x\d+', \.\.\.\) answered StoredExecution\(.{101}\.\.\.; "
                        r"expected accepted, ignored\[:reason\], rejected\[:reason\] or None",
                        failure.message), failure.message


def test_machine_that_cannot_be_built_is_reported_raised() -> None:
    """A factory that raises ends the run as the machine's failure, not the simulator's."""
    result = run(CannotBeBuilt)
    assert result.status == "machine_failed"
    assert result.failure is not None and result.failure.problem == "raised"
    assert result.failure.error == "RuntimeError"


def test_failed_run_writes_its_history(tmp_path: Path) -> None:
    """The history of a failed run is written whole, the failure on its last line."""
    path = tmp_path / "history.jsonl"
    result = run(RaisesOnFifthDelivery)
    result.write_history(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(result.history)
    assert json.loads(lines[-1])["kind"] == "machine_failed"


# -- crash points ------------------------------------------------------------------------------


def test_crash_points_left_out_mean_all_of_the_machines() -> None:
    """A crash plan without `points:` crashes a machine at the points that machine names."""
    plan = load_plan({"faults": {"crash": 0.5}})
    result = run(NamesItsOwnPoints, plan=plan)
    assert result.ok, result.failure
    assert {r.point for r in result.history if isinstance(r, Crashed)} == {"mine"}


def test_crash_points_named_for_the_machine_crash_it() -> None:
    """A plan read with the machine's own crash points crashes it there, and it recovers."""
    plan = load_plan({"faults": {"crash": 0.5}}, crash_points=NamesItsOwnPoints.crash_points)
    result = run(NamesItsOwnPoints, plan=plan)
    assert result.ok and result.status == "final", result.summary()
    assert {r.point for r in result.history if isinstance(r, Crashed)} == {"mine"}


def test_crash_point_the_machine_lacks_is_refused() -> None:
    """A plan naming a crash point the machine lacks is refused, naming the point."""
    plan = FaultPlan((FaultRate(FaultKind.CRASH, 0.5, points=("nowhere",)),))
    with pytest.raises(FaultPlanError) as info:
        Simulator(TRIAGE, SimOptions(plan=plan)).run()
    assert info.value.location.startswith("faults.crash.points")


# -- bad plans and options ---------------------------------------------------------------------


def no_tools() -> WorkflowDefinition:
    """Gives the small workflow with its tools, and the state that called them, taken out."""
    data = base()
    del data["tools"]
    data["states"]["work"] = {"type": "wait", "after": {"delay": "1h", "target": "failed"},
                              "on": {"submit": "done"}}
    return load_definition(data)


@pytest.mark.parametrize(("faults", "location"), [
    ({"crsh": 0.1}, "faults.crsh"),
    ({"crash": {"rate": 0.1, "points": ["before_commit", "after_lunch"]}},
     "faults.crash.points[1]"),
    ({"crash": {"rate": -0.1}}, "faults.crash.rate"),
    ({"tool_transient": -0.5}, "faults.tool_transient"),
], ids=["unknown kind", "unknown crash point", "negative rate", "negative bare rate"])
def test_bad_plan_is_refused_naming_the_field(faults: dict[str, Any], location: str) -> None:
    """A plan with an unknown kind, an unknown crash point or a negative rate is refused."""
    with pytest.raises(FaultPlanError) as info:
        load_plan({"faults": faults})
    assert info.value.location == location


def test_negative_rate_record_is_refused() -> None:
    """A rate record built in code with a negative rate is refused, naming its rate."""
    with pytest.raises(FaultPlanError) as info:
        FaultRate(FaultKind.CRASH, -0.1)
    assert info.value.location == "faults.crash.rate"


def test_unknown_kind_record_is_refused() -> None:
    """A rate record built in code for an unknown kind is refused, naming the kind."""
    with pytest.raises(FaultPlanError) as info:
        FaultRate("crsh", 0.1)  # type: ignore[arg-type]
    assert info.value.location == "faults.crsh"


def test_tool_fault_without_tools_is_refused_by_the_simulator() -> None:
    """A tool fault against a definition without tools is refused when the simulator is
    built, naming the fault; the same definition runs with the default plan."""
    plan = load_plan({"faults": {"crash": 0.1, "tool_timeout_after_apply": 0.2}})
    with pytest.raises(FaultPlanError) as info:
        Simulator(no_tools(), SimOptions(plan=plan))
    assert info.value.location == "faults.tool_timeout_after_apply"
    assert Simulator(no_tools(), SimOptions(executions=2)).run().ok


@pytest.mark.parametrize(("options", "name"), [
    ({"executions": 0}, "options.executions"),
    ({"steps_max": -1}, "options.steps_max"),
    ({"ops_max": 0}, "options.ops_max"),
    ({"invalid_rate": 2}, "options.invalid_rate"),
    ({"grant_rate": -0.5}, "options.grant_rate"),
])
def test_bad_options_are_refused_naming_the_option(options: dict[str, Any], name: str) -> None:
    """Options out of range are refused with a HarnessError naming the option."""
    with pytest.raises(HarnessError, match=rf"^{name}:"):
        SimOptions(**options)


def test_no_faults_run_is_clean() -> None:
    """The reference machine, unwrapped, ends the same runs final: the failures above are the
    wrappers'."""
    result = run(ReferenceMachine, plan=no_faults())
    assert result.ok and result.status == "final", result.summary()
