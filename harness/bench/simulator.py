"""The simulator groups of `fsmharness bench` (`--only simulator`): simulated steps per second
with and without faults, and simulated runs per logged event beside the reference runtime
delivering the same events, what the simulator costs over the machine's own work.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fault_injection import no_faults
from harness.bench.timing import Contender, Group
from harness.sim.machine import MachineFactory, ReferenceMachine
from harness.sim.simulator import SimOptions, Simulator
from reference_machine import Event, MemoryStore, Runtime, WorkflowDefinition, new_execution

__all__ = [
    "EventLog",
    "event_logs",
    "logged_events",
    "redeliver",
    "simulate_seeds",
    "simulator_group",
    "step_group",
]

def simulate_seeds(simulator: Simulator, seeds: range) -> Callable[[], int]:
    """Gives a call that runs every seed; the call gives the steps taken in all."""
    def run() -> int:
        return sum(simulator.run(seed).steps for seed in seeds)

    return run


def simulator_group(definition: WorkflowDefinition, machine: MachineFactory, quick: bool
                    ) -> Group:
    """Gives simulated steps with and without faults on a definition's machine."""
    seeds = range(5 if quick else 20)
    quiet = Simulator(definition, SimOptions(plan=no_faults()), machine)
    faulty = Simulator(definition, SimOptions(), machine)
    return Group(f"simulator: {definition.name}, 3 executions a run", (
        Contender("simulate, no faults (floor)",
                  lambda stack: simulate_seeds(quiet, seeds), 0, "step"),
        Contender("simulate, every fault", lambda stack: simulate_seeds(faulty, seeds), 0,
                  "step")))


#: One logged execution: its id, then each event its store logged with the time it came.
EventLog = tuple[str, tuple[tuple[Event, int], ...]]


def event_logs(definition: WorkflowDefinition, seeds: range,
               options: SimOptions | None = None) -> list[tuple[EventLog, ...]]:
    """Runs the seeds on the reference machine (every fault, unless `options` say else);
    gives, run by run, each execution's logged events in the order its store logged them."""
    made: list[ReferenceMachine] = []

    def keeping(definition: WorkflowDefinition, tools: Any, probe: Any) -> ReferenceMachine:
        machine = ReferenceMachine(definition, tools, probe)
        made.append(machine)
        return machine

    simulator = Simulator(definition, options or SimOptions(), keeping)
    runs: list[tuple[EventLog, ...]] = []
    for seed in seeds:
        simulator.run(seed)
        store = made[-1].store
        runs.append(tuple((execution_id, tuple((entry.event, entry.at)
                                               for entry in store.log(execution_id)))
                          for execution_id in store.execution_ids()))
    return runs


def logged_events(runs: Sequence[tuple[EventLog, ...]]) -> int:
    """Gives how many events the runs' stores logged in all."""
    return sum(len(log) for run in runs for _, log in run)


def redeliver(definition: WorkflowDefinition, runs: Sequence[tuple[EventLog, ...]]
              ) -> Callable[[], int]:
    """Gives a call that delivers every logged event again, in its order and at its time, to
    the reference runtime over a fresh memory store per run (effects deferred, as the
    simulator has them): the machine's own work on those events, with nothing around it. The
    call gives the events delivered."""
    events = logged_events(runs)

    def run() -> int:
        for logs in runs:
            runtime = Runtime(MemoryStore(), [definition], {}, defer_effects=True)
            store, deliver = runtime.store, runtime._deliver  # `deliver` refuses derived ids
            for execution_id, log in logs:
                store.create(new_execution(definition, execution_id))
                for event, now in log:
                    deliver(execution_id, event, now)
        return events

    return run


def step_group(definition: WorkflowDefinition, quick: bool) -> Group:
    """Gives simulated runs (every fault, the reference machine over a memory store) beside
    the runtime delivering the events those runs' stores logged, per logged event: what the
    simulator costs over the machine's own work."""
    seeds = range(5 if quick else 20)
    logs = event_logs(definition, seeds)
    events = logged_events(logs)
    faulty = Simulator(definition, SimOptions())
    return Group(f"simulator: {definition.name}, per logged event, 3 executions a run", (
        Contender("runtime deliver, the same events (floor)",
                  lambda stack: redeliver(definition, logs), events, "event"),
        Contender("simulate, every fault", lambda stack: simulate_seeds(faulty, seeds), events,
                  "event")))
