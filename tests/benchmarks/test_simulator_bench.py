"""Simulated steps per second with every fault on, beside as many bare `decide` calls.

A simulated step is one action the seeded scheduler picks (start a run, deliver an event,
complete a tool call, decide an approval, fire a timer) with everything it causes: the faults
drawn on the way, the decisions, commits and tool calls in the reference runtime over a
`MemoryStore`, crashes and recoveries, the history records and the observations.

Both benchmarks of the group do the same count of units: `simulate` runs the refund scenario
for the seeds `SEEDS` (all faults on, default rates) and `decide alone` makes as many `decide`
calls as those runs took steps, on the events the runs logged. So the ratio of the two means is
the cost of a simulated step in bare `decide` calls. The aim is 50,000 steps a second per core
(never below 20,000); nothing asserts it (no wall-clock thresholds): the note and the README
read the numbers off the table.
Run: `python -m pytest -n 0 tests/benchmarks/test_simulator_bench.py --benchmark-only`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from recording import recording_factory

from harness import SimOptions, Simulator
from harness.bench import simulator as simulated
from reference_machine import (
    Accepted,
    Event,
    Execution,
    WorkflowDefinition,
    decide,
    load_definition,
    new_execution,
)

ROOT = Path(__file__).resolve().parents[2]
REFUND = load_definition(ROOT / "scenarios" / "refund_escalation.yaml")
SEEDS = range(20)


def simulate_seeds(simulator: Simulator) -> int:
    """Runs every seed; gives the steps taken in all."""
    return simulated.simulate_seeds(simulator, SEEDS)()


def logged_decisions(definition: WorkflowDefinition) -> list[tuple[Execution, Event, int]]:
    """Gives (execution before, event, time) for every event the runs' stores logged."""
    factory, made = recording_factory()
    simulator = Simulator(definition, SimOptions(), machine=factory)
    calls: list[tuple[Execution, Event, int]] = []
    for seed in SEEDS:
        simulator.run(seed)
        machine = made[-1]
        for execution_id in machine.store.execution_ids():
            execution = new_execution(definition, execution_id)
            for entry in machine.store.log(execution_id):
                calls.append((execution, entry.event, entry.at))
                decision = decide(definition, execution, entry.event, entry.at)
                if isinstance(decision, Accepted):
                    execution = decision.execution
    return calls


def decide_loop(definition: WorkflowDefinition,
                calls: list[tuple[Execution, Event, int]], count: int) -> Callable[[], int]:
    """Gives a loop of `count` bare `decide` calls over the logged events (cycled)."""
    work = (calls * (count // len(calls) + 1))[:count]

    def run() -> int:
        for execution, event, now in work:
            decide(definition, execution, event, now)
        return len(work)

    return run


@pytest.mark.benchmark(group="simulator: steps vs decide calls")
def test_simulated_steps_all_faults(benchmark: Any) -> None:
    """Simulated steps with every fault on (the refund scenario, 3 executions a run)."""
    simulator = Simulator(REFUND, SimOptions())
    steps = benchmark(simulate_seeds, simulator)
    benchmark.extra_info["steps"] = steps
    assert steps == simulate_seeds(simulator)  # the same seeds take the same steps


@pytest.mark.benchmark(group="simulator: steps vs decide calls")
def test_decide_alone_same_count(benchmark: Any) -> None:
    """As many bare `decide` calls as the simulation took steps, on the events it logged."""
    steps = simulate_seeds(Simulator(REFUND, SimOptions()))
    calls = logged_decisions(REFUND)
    done = benchmark(decide_loop(REFUND, calls, steps))
    benchmark.extra_info["steps"] = done
    assert done == steps


@pytest.fixture(scope="module")
def logs() -> list[tuple[simulated.EventLog, ...]]:
    return simulated.event_logs(REFUND, SEEDS)


@pytest.mark.benchmark(group="simulator: per logged event")
def test_runtime_redelivers_the_logged_events(benchmark: Any,
                                              logs: list[tuple[simulated.EventLog, ...]]) -> None:
    """The floor of issue 21's first aim: the runtime over a memory store delivering the
    events the simulated runs' stores logged, with nothing around it."""
    events = benchmark(simulated.redeliver(REFUND, logs))
    benchmark.extra_info["events"] = events
    assert events == simulated.logged_events(logs)


@pytest.mark.benchmark(group="simulator: per logged event")
def test_simulated_runs_per_logged_event(benchmark: Any,
                                         logs: list[tuple[simulated.EventLog, ...]]) -> None:
    """The same runs simulated, every fault on; divide by `extra_info["events"]`."""
    simulator = Simulator(REFUND, SimOptions())
    benchmark(simulate_seeds, simulator)
    benchmark.extra_info["events"] = simulated.logged_events(logs)


def test_the_floor_rebuilds_what_the_simulated_runs_stored(
        logs: list[tuple[simulated.EventLog, ...]]) -> None:
    """Delivering each execution's logged events again, in order and at their times, ends
    where the simulated run's store ended: the floor does the runs' machine work, not less."""
    from reference_machine import MemoryStore, Runtime

    factory, made = recording_factory()
    simulator = Simulator(REFUND, SimOptions(), machine=factory)
    checked = 0
    for seed, run in zip(SEEDS, logs, strict=True):
        simulator.run(seed)
        stored = made[-1].store
        runtime = Runtime(MemoryStore(), [REFUND], {}, defer_effects=True)
        for execution_id, log in run:
            runtime.store.create(new_execution(REFUND, execution_id))
            for event, now in log:
                runtime._deliver(execution_id, event, now)
            assert runtime.store.load(execution_id) == stored.load(execution_id)
            checked += len(log)
    assert checked == simulated.logged_events(logs) > 15 * len(SEEDS)
