"""The deterministic simulator: one seed, one PRNG, a virtual clock, faults drawn from the seed.

Each step the seeded scheduler picks one enabled action: start an execution, deliver an external
event enabled in an execution's state (its payload valid or, sometimes, invalid by its schema),
complete a tool call in flight, decide a pending approval, deliver a queued event (redelivered,
duplicated, reordered, late), or advance the clock to the next timer. In a parallel or map state
the events enabled are those the states its regions are in take, and each region's approval and
call is one to decide or complete. A payload's correlated fields (`correlate:`) hold the values
of its execution's context as last committed. Faults of the plan are drawn where they can
happen: at delivery (drop, duplicate, reorder, late, forged approval, wrong correlation), at
the tool world (tool failures), at the clock (skew), and inside the machine at its probe points
(crash, store write failure, a second worker on the same execution). A crash drops the
machine's memory; the simulator recovers it from the store and sends again what got no answer.

The run ends when every execution is final and nothing is left to deliver (or nothing at all
can happen: quiescent), or at the step bound. What happened is the history: typed records.
A machine that raises, runs away or answers nonsense ends its run with a `MachineFailed` record;
the simulator itself does not fail with it.

A machine whose methods are coroutine functions (the protocol's async form) is found out once,
when it is built: its calls then run to their end on an event loop the run owns
(`harness.sim.asyncloop`), made when the machine is built and closed when the run ends. A
synchronous machine is called as it is.

This module holds the `Simulator` (what a definition's runs share, made once) and the names
the rest of the harness imports; a run and its parts live beside it: `run` (the orchestration),
`scheduler`, `machinery`, `timekeeping`, `delivery`, `outside`, `observer`, `chances` and
`context`; the records in and out in `options`, `actions` and `results`.
"""

from __future__ import annotations

from typing import Any

from fault_injection import FaultKind
from harness.errors import HarnessError
from harness.sim.actions import ADVANCE, APPROVE, COMPLETE, EXTERNAL, QUEUED, START
from harness.sim.choices import Choices
from harness.sim.machine import MachineFactory, Observation, ReferenceMachine
from harness.sim.options import (
    EXECUTIONS_MAX,
    FROZEN_EPOCH,
    SEED_LIMIT,
    STEP_TIMEOUT_MAX,
    SimOptions,
    check_points,
    plan_for,
)
from harness.sim.payloads import schema_of
from harness.sim.results import Chances, SimulationResult
from harness.sim.run import Run
from harness.sim.scheduler import PATIENCE
from harness.sim.world import fault_tables, generator
from reference_machine import WorkflowDefinition
from reference_machine.findings import did_you_mean

__all__ = [
    "ADVANCE",
    "APPROVE",
    "COMPLETE",
    "EXECUTIONS_MAX",
    "EXTERNAL",
    "FROZEN_EPOCH",
    "PATIENCE",
    "QUEUED",
    "SEED_LIMIT",
    "START",
    "STEP_TIMEOUT_MAX",
    "Chances",
    "Run",
    "SimOptions",
    "SimulationResult",
    "Simulator",
    "check_points",
    "plan_for",
    "simulate",
]

_CHARTED = frozenset({"parallel", "map"})


class Simulator:
    """Runs seeded simulations of one definition against a machine (the reference runtime
    unless another factory is given). Each `run` starts from nothing, so a seed always gives
    the same history."""

    def __init__(self, definition: WorkflowDefinition, options: SimOptions | None = None,
                 machine: MachineFactory = ReferenceMachine) -> None:
        self.definition = definition
        self.options = options if options is not None else SimOptions()
        self.plan = self.options.plan if self.options.plan is not None else plan_for(definition)
        self.plan.check(definition)
        skew = self.plan.get(FaultKind.TIMER_SKEW)
        self.skews = skew is None or skew.max_skew_ms > 0  # a timer due is a chance to skew
        named = getattr(machine, "crash_points", None)  # a class says before it is built
        if isinstance(named, tuple | list):
            check_points(self.plan, named)
        self.machine = machine
        # a plan without swarm is the plan of every run: what a run draws from it is made once
        self.tables = fault_tables(self.plan, definition)
        for tool in self.options.honour_keys:
            if tool not in definition.tools:
                raise HarnessError(f"options.honour_keys: {definition.name!r} has no tool "
                                   f"{tool!r}{did_you_mean(tool, list(definition.tools))}")
        self.enabled = {name: _enabled_events(definition, name) for name in definition.states}
        # in a parallel or map state the events are those its regions' states take: offered
        # by the states a machine says are active (memoised), else by every state inside
        self.charted = {name: _events_inside(definition, name)
                        for name, state in definition.states.items()
                        if state.kind in _CHARTED}
        self._offers: dict[tuple[str, tuple[str, ...]], tuple[str, ...]] = {}
        # the fields each correlated event must match on its execution's context
        self.correlates = {name: event.correlate for name, event in definition.events.items()
                           if event.correlate}
        # how often the sender sends an event to one execution, where the definition bounds it
        self.sends_max = {name: spec.sends_max for name, spec in definition.spec.events.items()
                          if spec.sends_max is not None}
        self._logged: dict[str, Any] | None = None  # what `logged_options` copies
        # built once: Faker's realistic pools cost milliseconds; a run draws from them
        self.payloads = {name: generator(f"events.{name}.payload", schema_of(spec.payload),
                                         index)
                         for index, (name, spec) in enumerate(definition.spec.events.items())
                         if spec.payload is not None}
        self.outputs = {name: generator(f"tools.{name}.output", spec.output, index)
                        for index, (name, spec) in enumerate(definition.tools.items())}

    def logged_options(self, seed: int) -> dict[str, Any]:
        """Gives the options a run logs as it starts: with its seed, without the plan (the
        run's is logged apart: the one drawn for it). Made once, copied for each run."""
        if self._logged is None:
            self._logged = self.options.to_dict()
            self._logged.pop("plan")
        return {**self._logged, "seed": seed}

    def run(self, seed: int | None = None, *, choices: Choices | None = None,
            deadline: float | None = None) -> SimulationResult:
        """Runs one simulation (with `seed` instead of the options' seed, if given); `choices`
        replaces the seeded source of the run's decisions (to record or replay a schedule);
        past `deadline` (a `time.monotonic()` value) no step starts, and the run ends
        `out_of_time` (a shrinker's bound: its runs of a machine slow to run)."""
        return self.begin(seed, choices=choices, deadline=deadline).execute()

    def begin(self, seed: int | None = None, *, choices: Choices | None = None,
              deadline: float | None = None) -> Run:
        """Gives a run not started yet, for engines that drive it one step at a time."""
        return Run(self, self.options.seed if seed is None else seed, choices, deadline)

    def offered(self, obs: Observation) -> tuple[str, ...]:
        """Gives the user events some transition of an execution so observed takes, sorted:
        its state's (and parents'); in a parallel or map state also those of the states its
        regions are in (up to the region) or, when the machine does not say, of every state
        inside it."""
        state = obs.state
        inside = self.charted.get(state)
        if inside is None:
            return self.enabled.get(state, ())
        active = obs.active
        if not active:
            return inside
        key = (state, active)
        names = self._offers.get(key)
        if names is None:
            external = self.enabled
            found = set(external.get(state, ()))
            for name in active:
                found.update(external.get(name, ()))
            names = self._offers[key] = tuple(sorted(found))
        return names


def simulate(definition: WorkflowDefinition, seed: int = 0, **options: Any) -> SimulationResult:
    """Runs one seeded simulation of `definition` on the reference machine."""
    return Simulator(definition, SimOptions(seed=seed, **options)).run()


def _events_inside(definition: WorkflowDefinition, charted: str) -> tuple[str, ...]:
    """Gives the user events any state inside a parallel or map state takes, or the state
    itself (or a parent), sorted."""
    names = set(_enabled_events(definition, charted))
    for name, state in definition.states.items():
        if charted in state.ancestors:
            names.update(_enabled_events(definition, name))
    return tuple(sorted(names))


def _enabled_events(definition: WorkflowDefinition, state: str) -> tuple[str, ...]:
    """Gives the user events a transition of `state` (or of a parent) takes, sorted."""
    compiled = definition.states[state]
    if compiled.final:
        return ()
    names: list[str] = []
    for name in (state, *compiled.ancestors):
        names += [e for e in definition.states[name].on if e in definition.events]
    return tuple(sorted(set(names)))
