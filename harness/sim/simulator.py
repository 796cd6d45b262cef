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
"""

from __future__ import annotations

import contextlib
import inspect
import json
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

import freezegun

from fault_injection import (
    FORGED_VARIANTS,
    STORE_WRITE,
    TOOL_FAULTS,
    FaultKind,
    FaultPlan,
    FaultPlanError,
    SimulatedCrash,
    StoreWriteError,
    default_plan,
    load_plan,
    no_faults,
)
from harness.errors import HarnessError, short_repr, trace_of, words_of
from harness.sim.asyncloop import AsyncCalls, LoopFailure, RunLoop, is_async
from harness.sim.choices import AimedChoices, Choices
from harness.sim.history import (
    REFUSED_TIMER,
    Commanded,
    Committed,
    Crashed,
    Decided,
    Delivered,
    FaultInjected,
    Finished,
    Healed,
    HistoryRecord,
    MachineFailed,
    Observed,
    Recovered,
    Replayed,
    ResultRecorded,
    RunStarted,
    Started,
    TimerFired,
    counts,
    write_jsonl,
)
from harness.sim.machine import (
    ApprovalWait,
    AsyncMachineUnderTest,
    Call,
    MachineFactory,
    MachineUnderTest,
    Observation,
    ReferenceMachine,
)
from harness.sim.payloads import correlated, schema_of
from harness.sim.watchdog import Overran, Watchdog, apart, beat, doing, rest
from harness.sim.world import Clock, LedgerEntry, ToolWorld, fault_tables, generator
from reference_machine import (
    APPROVAL_DENIED,
    APPROVAL_GRANTED,
    CRASH_POINTS,
    Commit,
    Event,
    Execution,
    RunCompensation,
    RunEffect,
    StoreError,
    WorkflowDefinition,
)
from reference_machine.findings import did_you_mean
from reference_machine.importers import scxml, w3c

__all__ = ["FROZEN_EPOCH", "Chances", "SimOptions", "SimulationResult", "Simulator", "plan_for",
           "simulate"]

#: The wall time virtual time 0 stands for, with `SimOptions(freeze_clock=True)`.
FROZEN_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
_STATUSES = frozenset({"created", "running", "waiting", "compensating", "final"})
_DECISIONS = frozenset({"accepted", "ignored", "rejected"})
_KEEP_VIA = frozenset({"forged", "late", "duplicate", "agent"})
_CHARTED = frozenset({"parallel", "map"})
START, EXTERNAL, COMPLETE, APPROVE, QUEUED, ADVANCE = range(6)
_CLOSE_BOUND = 5  # a machine's close() may take this many step timeouts (a slow teardown)
_VERSION_LIMIT = 2**63  # a store's version is a signed 64-bit number, as databases keep it
_REFUSALS_MAX = 3  # times a due timer is fired, its execution unmoved, before it is refused
_MOVES_MAX = 64  # clock moves one step of a schedule (`advance | N moves`) makes at most
#: How readily a run moves the clock while anything else can happen, one drawn per run (swarm
#: over the scheduler, as over the faults): every action alike, or the clock held back so
#: that one execution goes deep before its timers fire (`Run._choose`). The first, uniform,
#: is what a schedule written without the draw replays with.
PATIENCE = (1.0, 0.3, 0.05)
#: A seed is a whole number from 0 below this (the generator takes 64 bits).
SEED_LIMIT = 2**64
#: The most executions a run takes side by side: far past any concurrency a run can show, short
#: of what would exhaust memory before the first step.
EXECUTIONS_MAX = 1_000
_BETWEEN = "between_steps"  # the crash point of a machine that names none
# the fault kinds' names as Chances counts them; a send is a chance to drop or hold it back,
# an answered delivery one to copy it (duplicate, late)
_CRASH, _STORE, _WORKER = (str(FaultKind.CRASH), str(FaultKind.STORE_WRITE_FAILURE),
                           str(FaultKind.SECOND_WORKER))
_SKEW, _FORGED, _WRONG = (str(FaultKind.TIMER_SKEW), str(FaultKind.FORGED_APPROVAL),
                          str(FaultKind.WRONG_CORRELATION))
_SENT, _ANSWERED = "sent", "answered"
_ON_SEND = (str(FaultKind.DROPPED_EVENT), str(FaultKind.REORDERED_EVENTS))
_ON_ANSWER = (str(FaultKind.DUPLICATE_EVENT), str(FaultKind.LATE_EVENT))
_ON_CALL = tuple(str(kind) for kind in FaultKind if kind in TOOL_FAULTS)


_STEP_TIMEOUT = 10.0
STEP_TIMEOUT_MAX = 1_000_000  # eleven days; past about 1e10 the system's timer overflows


@dataclass(frozen=True, slots=True)
class SimOptions:
    """How one simulated run is made. `steps_max` bounds the safety phase (faults on), then
    `liveness_steps` more run with every fault healed; `ops_max` bounds one step (tool calls
    plus probe points: a machine past it is reported as hung)."""

    seed: int = 0
    executions: int = 3
    steps_max: int = 1_000
    plan: FaultPlan | None = None  # None: every fault the definition can take, default rates
    invalid_rate: float = 0.1
    grant_rate: float = 0.7
    ops_max: int = 10_000
    recoveries_max: int = 20
    context: Mapping[str, Any] = field(default_factory=dict)
    honour_keys: Mapping[str, bool] = field(default_factory=dict)
    freeze_clock: bool = False  # wall time follows the machine's clock (freezegun)
    liveness_steps: int = 200  # after the safety phase, steps with every fault healed
    replay_check: bool = True  # at the end, have a machine that can replay its log do so
    step_timeout_s: float = _STEP_TIMEOUT  # wall time a step may take, else `hung` (0: none)

    def __post_init__(self) -> None:
        for name, low in (("seed", 0), ("executions", 1), ("steps_max", 0), ("ops_max", 1),
                          ("recoveries_max", 1), ("liveness_steps", 0)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise HarnessError(f"options.{name}: expected a whole number of at least "
                                   f"{low}, got {short_repr(value)}")
        for name, high in (("seed", SEED_LIMIT - 1), ("executions", EXECUTIONS_MAX)):
            if getattr(self, name) > high:
                raise HarnessError(f"options.{name}: expected at most {high:,}, got "
                                   f"{short_repr(getattr(self, name))}")
        for name in ("invalid_rate", "grant_rate"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool) or not (
                    0.0 <= value <= 1.0):
                raise HarnessError(f"options.{name}: expected a rate from 0 to 1, got "
                                   f"{value!r}")
        timeout = self.step_timeout_s
        if not isinstance(timeout, int | float) or isinstance(timeout, bool) or not (
                0 <= timeout <= STEP_TIMEOUT_MAX):
            raise HarnessError(f"options.step_timeout_s: expected a number of seconds up to "
                               f"{STEP_TIMEOUT_MAX:,}, 0 for no bound, got {timeout!r}")
        for name in ("freeze_clock", "replay_check"):
            if not isinstance(getattr(self, name), bool):
                raise HarnessError(f"options.{name}: expected true or false, got "
                                   f"{getattr(self, name)!r}")
        try:  # the context travels in the history and the start event: JSON data only
            json.dumps(dict(self.context), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise HarnessError(f"options.context: expected JSON data: {exc}") from exc

    def to_dict(self) -> dict[str, Any]:
        """Gives the options as plain JSON data, the plan included (`from_dict` reads it)."""
        return {"seed": self.seed, "executions": self.executions, "steps_max": self.steps_max,
                "invalid_rate": self.invalid_rate, "grant_rate": self.grant_rate,
                "ops_max": self.ops_max, "recoveries_max": self.recoveries_max,
                "context": dict(self.context), "honour_keys": dict(sorted(
                    self.honour_keys.items())), "freeze_clock": self.freeze_clock,
                "liveness_steps": self.liveness_steps, "replay_check": self.replay_check,
                "plan": None if self.plan is None else self.plan.to_dict(),
                # a bound of wall time changes no history unless one is hit: said when not
                # the default only, so that histories written before it stay the same bytes
                **({} if self.step_timeout_s == _STEP_TIMEOUT else {
                    "step_timeout_s": self.step_timeout_s})}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SimOptions:
        """Gives the options `to_dict` gave (a replay file's); raises `HarnessError` naming the
        option that is wrong."""
        if not isinstance(data, Mapping):
            raise HarnessError(f"options: expected a mapping, got {type(data).__name__}")
        known = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(data) - known)
        if unknown:
            raise HarnessError(f"options.{unknown[0]}: not an option"
                               f"{did_you_mean(unknown[0], sorted(known))}")
        values = dict(data)
        plan = values.pop("plan", None)
        if plan is not None:
            try:
                # the crash points a machine other than the reference names are checked
                # against that machine when a run builds it (check_points)
                values["plan"] = load_plan(plan, crash_points=_points_named(plan))
            except FaultPlanError as exc:
                raise HarnessError(f"options.plan: {exc}") from exc
        try:
            return cls(**values)
        except TypeError as exc:
            raise HarnessError(f"options: {exc}") from exc


class Chances(NamedTuple):
    """Where a run could have injected a fault, counted while faults were on (the safety
    phase), whether or not its plan had that kind on: `passed` is how often the machine passed
    each of its crash points ("between_steps" for a machine that names none), `chances` how
    often each fault kind had a place to strike (a send, a tool call, a probe, a timer due, an
    approval decided), `unoffered` the kinds the machine said it cannot take (no second
    worker)."""

    passed: Mapping[str, int]
    chances: Mapping[str, int]
    unoffered: frozenset[str] = frozenset()
    points: tuple[str, ...] = ()  # the crash points the run's machine offered


@dataclass(frozen=True, slots=True)
class SimulationResult:
    """What a run did: its history, the effect ledger, how it ended, and what was seen last.

    `status` is `final` (every execution ended), `quiescent` (nothing could happen),
    `step_bound` (steps ran out) or `machine_failed`."""

    seed: int
    status: str
    steps: int
    at: int
    plan: FaultPlan
    history: tuple[HistoryRecord, ...]
    ledger: tuple[LedgerEntry, ...]
    final: Mapping[str, Observation]
    failure: MachineFailed | None = None
    traceback: str = ""
    chances: Chances = field(default_factory=lambda: Chances({}, {}))

    @property
    def ok(self) -> bool:
        """Tells whether the machine held up (it did not fail; invariants are checked apart)."""
        return self.failure is None

    def summary(self) -> dict[str, Any]:
        """Gives counts of records by kind, faults injected by kind, and the final states."""
        faults = Counter(str(r.fault) for r in self.history if isinstance(r, FaultInjected))
        return {
            "seed": self.seed,
            "status": self.status,
            "steps": self.steps,
            "virtual_ms": self.at,
            "records": counts(self.history),
            "faults": dict(sorted(faults.items())),
            "effects_applied": len(self.ledger),
            "final": {eid: {"state": o.state, "status": o.status, "outcome": o.outcome}
                      for eid, o in self.final.items()},
            "failure": None if self.failure is None else self.failure._asdict(),
        }

    def write_history(self, path: str | Path) -> None:
        """Writes the history as JSON lines (all or nothing)."""
        write_jsonl(self.history, path)


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
        self._tables = fault_tables(self.plan, definition)
        for tool in self.options.honour_keys:
            if tool not in definition.tools:
                raise HarnessError(f"options.honour_keys: {definition.name!r} has no tool "
                                   f"{tool!r}{did_you_mean(tool, list(definition.tools))}")
        self._external = {name: _enabled_events(definition, name) for name in definition.states}
        # in a parallel or map state the events are those its regions' states take: offered
        # by the states a machine says are active (memoised), else by every state inside
        self._charted = {name: _events_inside(definition, name)
                         for name, state in definition.states.items()
                         if state.kind in _CHARTED}
        self._offers: dict[tuple[str, tuple[str, ...]], tuple[str, ...]] = {}
        # the fields each correlated event must match on its execution's context
        self._correlated = {name: event.correlate for name, event in definition.events.items()
                            if event.correlate}
        # how often the sender sends an event to one execution, where the definition bounds it
        self._sends_max = {name: spec.sends_max for name, spec in definition.spec.events.items()
                           if spec.sends_max is not None}
        self._logged: dict[str, Any] | None = None  # what `logged_options` copies
        # built once: Faker's realistic pools cost milliseconds; a run draws from them
        self._payloads = {name: generator(f"events.{name}.payload", schema_of(spec.payload),
                                           index)
                          for index, (name, spec) in enumerate(definition.spec.events.items())
                          if spec.payload is not None}
        self._outputs = {name: generator(f"tools.{name}.output", spec.output, index)
                         for index, (name, spec) in enumerate(definition.tools.items())}

    def logged_options(self, seed: int) -> dict[str, Any]:
        """Gives the options a run logs as it starts: with its seed, without the plan (the
        run's is logged apart: the one drawn for it). Made once, copied for each run."""
        if self._logged is None:
            self._logged = self.options.to_dict()
            self._logged.pop("plan")
        return {**self._logged, "seed": seed}

    def run(self, seed: int | None = None, *, choices: Choices | None = None
            ) -> SimulationResult:
        """Runs one simulation (with `seed` instead of the options' seed, if given); `choices`
        replaces the seeded source of the run's decisions (to record or replay a schedule)."""
        return self.begin(seed, choices=choices).execute()

    def begin(self, seed: int | None = None, *, choices: Choices | None = None) -> Run:
        """Gives a run not started yet, for engines that drive it one step at a time."""
        return Run(self, self.options.seed if seed is None else seed, choices)

    def offered(self, obs: Observation) -> tuple[str, ...]:
        """Gives the user events some transition of an execution so observed takes, sorted:
        its state's (and parents'); in a parallel or map state also those of the states its
        regions are in (up to the region) or, when the machine does not say, of every state
        inside it."""
        state = obs.state
        inside = self._charted.get(state)
        if inside is None:
            return self._external.get(state, ())
        active = obs.active
        if not active:
            return inside
        key = (state, active)
        names = self._offers.get(key)
        if names is None:
            external = self._external
            found = set(external.get(state, ()))
            for name in active:
                found.update(external.get(name, ()))
            names = self._offers[key] = tuple(sorted(found))
        return names


def check_points(plan: FaultPlan, named: Sequence[str]) -> None:
    """Refuses a plan whose crash points (or pinned points) the machine does not name."""
    crash = plan.get(FaultKind.CRASH)
    named = tuple(dict.fromkeys(named))
    where = [(f"faults.crash.points[{index}]", point)
             for index, point in enumerate(crash.points if crash is not None else ())]
    where += [(f"pinned_points[{index}]", point) for index, point in
              enumerate(plan.pinned_points) if named or point != _BETWEEN]
    for location, point in where:
        if point not in named:
            known = ", ".join(named) or "none (it is crashed between steps)"
            raise FaultPlanError(location, f"the machine under test has no crash point "
                                           f"{point!r}; its points: {known}")


def plan_for(definition: WorkflowDefinition, *, swarm: bool = False) -> FaultPlan:
    """Gives the default plan less what the definition cannot take (tool faults without
    tools, wrong correlations without an event that declares `correlate:`, forged approvals
    without an approval)."""
    plan = default_plan(swarm=swarm)
    tools = bool(definition.tools)
    correlates = any(event.correlate for event in definition.events.values())
    approvals = any(state.approval is not None for state in definition.states.values())
    if tools and correlates and approvals:
        return plan
    return replace(plan, rates=tuple(
        r for r in plan.rates if (tools or r.kind not in TOOL_FAULTS)
        and (correlates or r.kind is not FaultKind.WRONG_CORRELATION)
        and (approvals or r.kind is not FaultKind.FORGED_APPROVAL)))


def simulate(definition: WorkflowDefinition, seed: int = 0, **options: Any) -> SimulationResult:
    """Runs one seeded simulation of `definition` on the reference machine."""
    return Simulator(definition, SimOptions(seed=seed, **options)).run()


class _Queued(NamedTuple):
    due: int
    seq: int
    execution: str
    event: Event
    via: str


class _Hung(BaseException):
    """The machine passed the per-step bound of operations."""


class _Nonsense(Exception):
    """The machine answered something that cannot be."""


def _check_said(said: object, call: str) -> None:
    """Raises `_Nonsense` unless a machine's answer to `call` is a decision or None."""
    if said is not None and (not isinstance(said, str) or said.partition(":")[0] not in
                             _DECISIONS):
        shown = repr(said)
        shown = shown if len(shown) <= 120 else f"{shown[:117]}..."
        raise _Nonsense(f"{call} answered {shown}; expected accepted, ignored[:reason], "
                        "rejected[:reason] or None")


class Run:
    """The state of one run; built fresh by each `Simulator.run` (or `Simulator.begin`, for an
    engine that drives it a step at a time: `start`, then `step`, `heal` and `finish`)."""

    def __init__(self, simulator: Simulator, seed: int, choices: Choices | None = None) -> None:
        options = simulator.options
        self.sim, self.options, self.seed = simulator, options, seed
        self.definition = definition = simulator.definition
        self.rng = rng = choices if choices is not None else Choices(seed)
        rng.at_step(0)
        self.plan = plan = simulator.plan.for_run(rng)
        # how readily the run moves the clock (drawn after the plan, as a branch of step 0:
        # a schedule without the draw, written before there was one, gets the first, uniform)
        self.patience = PATIENCE[rng.branch(len(PATIENCE))] if rng.paced else 1.0
        self.topic = ""  # the type of the event being sent or delivered, for aimed faults
        if isinstance(rng, AimedChoices):
            rng.context = self._context
        self.clock = Clock()
        self.history: list[HistoryRecord] = []
        self.emit = self.history.append
        self.ids = [f"x{n}" for n in range(1, options.executions + 1)]
        self.world = ToolWorld(definition, plan, rng, self.clock, self.emit, seed=seed,
                               honour_keys=options.honour_keys,
                               executions=self._execution_of, outputs=simulator._outputs,
                               tables=simulator._tables if plan is simulator.plan else None,
                               on_call=self._count, activity=self._doing)
        self.changed: dict[str, None] = {}
        self.watched = False
        self.obs: dict[str, Observation] = {}
        self.unstarted = list(self.ids)
        self.queue: list[_Queued] = []
        # what an imported SCXML chart raised and sent to itself (its context outbox): raised
        # events are delivered before anything else happens, sends on the clock
        self.raised: list[_Queued] = []
        self.outboxes: dict[str, w3c.OutboxReader] | None = (
            {} if scxml.OUTBOX in definition.initial_context else None)
        self.serial = 0
        self.sent: dict[tuple[str, str], int] = {}  # (execution, event) -> sends of a bounded one
        self.ops = 0
        self.ops_max = options.ops_max
        self.quiet = False
        self.in_worker = False
        self.worker: MachineUnderTest | AsyncCalls | None = None
        self.closing = False  # the machines were told the run ended
        self.activity = ""
        self.acting = ""  # the execution this step acts on ("" when the clock moves)
        self.current: tuple[str, Event] | None = None
        self.last_request: dict[str, str] = {}
        self.last_state: dict[str, str] = {}  # each execution's state at its last commit
        self.contexts: dict[str, Mapping[str, Any]] = {}  # each one's context at its last commit
        # made by _build before the first step; None only while a factory that raised is told of
        self.machine: MachineUnderTest | AsyncMachineUnderTest = None  # type: ignore[assignment]
        # the machine as it is called: itself, or (async) its coroutines run on the run's loop
        self.calls: MachineUnderTest | AsyncCalls = None  # type: ignore[assignment]
        self.loops: list[RunLoop] = []  # the run's event loops: the machine's, its worker's
        self.dying: BaseException | None = None  # a crash or bound struck in the machine
        self.points: frozenset[str] = frozenset()
        self.offered: tuple[str, ...] = ()  # the crash points, in the machine's order
        self.between = False
        self.machine_time = 0  # the machine's clock: never goes back
        # (execution, timer) -> (version, times told due): a timer the machine was told was
        # due `_REFUSALS_MAX` times and still shows, its execution unmoved, is one it refuses
        # to fire (its move rejected): the clock moves past it, and it moves nothing
        self.told_due: dict[tuple[str, str], tuple[int, int]] = {}
        self.offset = 0  # how far the machine's clock runs ahead (an early timer skew)
        self.frozen: Any = None  # freezegun's handle, with `freeze_clock`
        self.healed = False
        self.healed_at = 0  # the last step of the safety phase, once healed
        # where faults could strike, while they are on (Chances): crash points passed, and
        # per fault kind its places; the tool world counts its calls
        self.passed: dict[str, int] = {}
        self.chances: Counter[str] = Counter()
        self.unoffered: set[str] = set()
        self.failure: MachineFailed | None = None
        self.trace = ""
        self.watchdog = Watchdog(options.step_timeout_s)
        self._rates(plan)

    def _build(self) -> None:
        """Makes the machine (a factory that raises is that machine's failure); no fault is
        injected while it is built."""
        self.quiet = True
        try:
            machine = self.sim.machine(self.definition, self.world.tools, self._probe)
            if inspect.isawaitable(machine):  # an async factory's
                machine = self._loop().call(_awaited, machine)
            self.machine = machine
            self.calls = self._called(machine)
        finally:
            self.quiet = False
        named = getattr(self.machine, "crash_points", ())
        if not isinstance(named, tuple | list):  # a set: its order is the process's
            named = tuple(sorted(named))
        # a plan may name any point the machine's class names: one this definition cannot
        # pass (the reference's call points, without tools) is simply never passed
        declared = getattr(type(self.machine), "crash_points", None)
        check_points(self.plan, (*named, *(declared if isinstance(declared, tuple | list)
                                           else ())))
        crash = self.plan.get(FaultKind.CRASH)
        self.offered = tuple(crash.points if crash is not None and crash.points else named)
        self.points = frozenset(self.offered)
        self.between = not named  # a machine without named points crashes between steps
        # a machine that tells what it commits and records is observed where it changed;
        # another, everywhere after each step
        watch = getattr(self.machine, "watch", None)
        self.watched = watch is not None
        if watch is not None:
            watch(self._committed, self._recorded)

    def _called(self, machine: Any) -> Any:
        """Gives the machine as the simulator calls it: itself, or, when some of its methods
        are coroutine functions, those run on the run's loop."""
        return AsyncCalls(machine, self._loop()) if is_async(machine) else machine

    def _loop(self) -> RunLoop:
        """Gives the run's event loop (made the first time)."""
        return self.loops[0] if self.loops else self._new_loop()

    def _new_loop(self) -> RunLoop:
        loop = RunLoop(lambda: self.machine_time, lambda n: self.rng.below(n),
                       lambda: self.dying or self.watchdog.overran, self._hushed)
        self.loops.append(loop)
        return loop

    @contextlib.contextmanager
    def _hushed(self) -> Iterator[None]:
        """Keeps faults off meanwhile (while an async machine's tasks unwind)."""
        quiet, self.quiet = self.quiet, True
        try:
            yield
        finally:
            self.quiet = quiet

    def close(self) -> None:
        """Ends a run that is not played to its end (an exhaustive search's prefix), as one
        that is ends: the machines' `close()`, the event loops, the watchdog's timer."""
        self._close()

    def _close(self) -> None:
        """The run has ended: each machine's optional `close()` (its files, its connections;
        once, and what it raises does not change the verdict), then the event loops."""
        machines, self.closing = ([] if self.closing else [self.worker, self.machine]), True
        for machine in machines:
            close = getattr(machine, "close", None) if machine is not None else None
            if callable(close):
                doing(f"closing the machine: close(), bounded at {_CLOSE_BOUND} times "
                      "the step timeout")
                beat(self.watchdog.seconds * _CLOSE_BOUND)  # only a parent can bound it
                try:
                    with contextlib.suppress(Exception):
                        close()
                finally:
                    rest()
        for loop in self.loops:
            loop.close()
        self.watchdog.release()

    def _rates(self, plan: FaultPlan) -> None:
        self.r_crash = plan.rate(FaultKind.CRASH)
        # the points a run aimed at a crash point crashes at more often (FaultPlan.pinned_points)
        self.r_crash_at = {point: plan.crash_rate(point) for point in plan.pinned_points}
        self.r_store = plan.rate(FaultKind.STORE_WRITE_FAILURE)
        self.r_worker = plan.rate(FaultKind.SECOND_WORKER)
        self.r_drop = plan.rate(FaultKind.DROPPED_EVENT)
        self.r_reorder = plan.rate(FaultKind.REORDERED_EVENTS)
        self.r_dup = plan.rate(FaultKind.DUPLICATE_EVENT)
        self.r_late = plan.rate(FaultKind.LATE_EVENT)
        self.r_skew = plan.rate(FaultKind.TIMER_SKEW)
        self.r_forged = plan.rate(FaultKind.FORGED_APPROVAL)
        self.r_wrong = plan.rate(FaultKind.WRONG_CORRELATION)
        dropped, late = plan.get(FaultKind.DROPPED_EVENT), plan.get(FaultKind.LATE_EVENT)
        skew, forged = plan.get(FaultKind.TIMER_SKEW), plan.get(FaultKind.FORGED_APPROVAL)
        self.redeliver_after = dropped.redeliver_after_ms if dropped else 0
        self.late_delay = late.delay_ms if late else 0
        self.max_skew = skew.max_skew_ms if skew else 0
        if self.max_skew <= 0:
            self.r_skew = 0.0  # no room to skew
        self.forged_variants = forged.variants if forged and forged.variants else (
            FORGED_VARIANTS)

    # -- the loop ----------------------------------------------------------------------------

    def execute(self) -> SimulationResult:
        """Runs the simulation; with `freeze_clock`, `datetime.now()` and `time.time()` in the
        machine read the machine's virtual clock (from `FROZEN_EPOCH`), not the wall."""
        if not self.options.freeze_clock:
            return self._execute()
        with freezegun.freeze_time(FROZEN_EPOCH) as frozen:
            self.frozen = frozen
            return self._execute()

    def _execute(self) -> SimulationResult:
        if not self.start():
            return self.result("machine_failed")
        status = self.steps(self.options.steps_max)
        if status != "final" and self.failure is None and self.options.liveness_steps:
            self.heal()
            status = self.steps(self.options.liveness_steps)
        return self.finish(status)

    def start(self) -> bool:
        """Logs the run and builds the machine; tells whether that went well (else the run's
        failure is set)."""
        self.emit(RunStarted(0, 0, self.seed, self.definition.name, self.definition.version,
                             _name_of(self.sim.machine), self.sim.logged_options(self.seed),
                             self.plan))
        beat(self.watchdog.seconds)
        try:
            return self._build_machine()
        finally:
            rest()

    def _build_machine(self) -> bool:
        try:
            self.activity = "building the machine"
            doing(self.activity)
            self.watchdog.start()
            try:
                self._build()
            finally:
                self.watchdog.stop()
        except FaultPlanError:
            raise  # the plan names crash points this machine lacks: the user's mistake
        except KeyboardInterrupt:
            self._interrupted()
            return False
        except _Hung as exc:
            self._fail(MachineFailed(0, 0, "hung", "StepBound", str(exc)), "")
            return False
        except Overran as exc:
            self._fail(MachineFailed(0, 0, "hung", "Watchdog",
                                     f"while {self.activity}: {exc}"), exc.stack)
            return False
        except LoopFailure as exc:
            self._fail(MachineFailed(0, 0, exc.problem, exc.error,
                                     f"while {self.activity}: {exc.message}"), exc.trace)
            return False
        except BaseException as exc:  # SystemExit too: the machine's, not the simulator's
            self._fail(MachineFailed(0, 0, "raised", type(exc).__name__,
                                     f"while {self.activity}: {words_of(exc)}"),
                       trace_of(exc))
            return False
        return True

    def _interrupted(self) -> None:
        """A KeyboardInterrupt left the machine: the user's Ctrl-C, raised again; in a child
        process, the machine's own (the parent gets the user's), which fails the run."""
        if not apart():
            raise  # the one being handled where this is called
        self._fail(MachineFailed(self.clock.step, self.clock.now, "raised", "KeyboardInterrupt",
                                 f"while {self.activity}: the machine raised "
                                 "KeyboardInterrupt"), "")

    def steps(self, count: int) -> str:
        """Runs up to `count` steps; gives `final` (every execution ended), `quiescent`
        (nothing could happen), `step_bound` (the steps ran out) or `machine_failed`."""
        for _ in range(count):
            if not self.step():
                return "machine_failed" if self.failure is not None else self.stopped()
        return "step_bound"

    def stopped(self) -> str:
        """Tells why nothing can happen: every execution ended, or some are stuck."""
        done = not self.unstarted and all(o.status == "final" for o in self.obs.values())
        return "final" if done else "quiescent"

    def step(self) -> bool:
        """Performs one step (one action, chosen by the run's choices); tells whether one was
        performed (not when nothing could happen or the machine failed)."""
        if self.failure is not None:
            return False
        beat(self.watchdog.seconds)  # what the step does with what the machine said included
        try:
            return self._step()
        finally:
            rest()

    def _step(self) -> bool:
        clock = self.clock
        watchdog = self.watchdog
        try:
            actions = self.actions()
            if not actions:
                return False
            clock.step += 1
            self.ops = 0
            self.rng.at_step(clock.step)
            watchdog.start()
            try:
                self._perform(actions[self._choose(actions)])
                if self.between:
                    self._between_steps()
                self._observe()
            finally:
                watchdog.stop()
        except _Hung as exc:
            self._fail(MachineFailed(clock.step, clock.now, "hung", "StepBound", str(exc)), "")
        except Overran as exc:
            self._fail(MachineFailed(clock.step, clock.now, "hung", "Watchdog",
                                     f"while {self.activity}: {exc}"), exc.stack)
        except LoopFailure as exc:
            self._fail(MachineFailed(clock.step, clock.now, exc.problem, exc.error,
                                     f"while {self.activity}: {exc.message}"), exc.trace)
        except _Nonsense as exc:
            self._fail(MachineFailed(clock.step, clock.now, "nonsense", "Observation",
                                     str(exc)), "")
        except (SimulatedCrash, StoreWriteError) as exc:  # escaped a machine that was not called
            self._fail(MachineFailed(clock.step, clock.now, "raised", type(exc).__name__,
                                     f"an injected fault escaped the machine: "
                                     f"{words_of(exc)}"), "")
        except KeyboardInterrupt:
            self._interrupted()
            return False
        except BaseException as exc:  # SystemExit too: the machine's, not the simulator's
            self._fail(MachineFailed(clock.step, clock.now, "raised", type(exc).__name__,
                                     f"while {self.activity}: {words_of(exc)}"),
                       trace_of(exc))
        return self.failure is None

    def _choose(self, actions: list[tuple[Any, ...]]) -> int:
        """Gives the index of the action the step performs. A run of `patience` below 1
        moves the clock (always the last action offered) only with that chance while
        something else is enabled: a uniform pick leaves a waiting state by its timer about
        as often as by any of its events, so a deep path (a pause resumed, then the next
        attempt) is rare. The liveness phase picks uniformly."""
        rng = self.rng
        if (self.patience < 1.0 and not self.healed and len(actions) > 1
                and actions[-1][0] == ADVANCE and not rng.flip(self.patience)):
            return rng.action(actions[:-1], _label)
        return rng.action(actions, _label)

    def heal(self) -> None:
        """Ends the safety phase: no fault is injected from here on, and the scheduler draws
        from its own seeded source (so a schedule edited by shrinking leaves it alone)."""
        if self.healed:
            return
        self.healed = True
        self.healed_at = self.clock.step
        self.emit(Healed(self.clock.step, self.clock.now))
        self._rates(no_faults())
        self.rng = Choices(f"{self.seed}:liveness")
        self.rng.at_step(self.clock.step)
        self.world.heal(self.rng)

    def finish(self, status: str) -> SimulationResult:
        """Ends the run: each execution as last seen and what could still move it, and, for a
        machine that can replay its log, whether that reproduces its state."""
        if self.failure is not None:
            return self.result("machine_failed")
        clock = self.clock
        for eid, obs in self.obs.items():
            self.emit(Finished(clock.step, clock.now, eid, obs.state, obs.status,
                               obs.outcome, obs.version, self._waiting_on(eid, obs)))
        replay = getattr(self.calls, "replay", None) if self.options.replay_check else None
        if replay is not None:
            for eid in self.obs:
                try:
                    doing(f"replaying {eid}'s log: replay()")
                    beat(self.watchdog.seconds)
                    self.watchdog.start()
                    try:
                        replay(eid)
                    finally:
                        self.watchdog.stop()
                        rest()
                except KeyboardInterrupt:
                    raise
                except Overran as exc:  # a replay that loops is a hung machine, not a mismatch
                    self._fail(MachineFailed(clock.step, clock.now, "hung", "Watchdog",
                                             f"while replaying {eid}'s log: {exc}"), exc.stack)
                    return self.result("machine_failed")
                except LoopFailure as exc:  # what it left behind is no mismatch either
                    self._fail(MachineFailed(clock.step, clock.now, exc.problem, exc.error,
                                             f"while replaying {eid}'s log: {exc.message}"),
                               exc.trace)
                    return self.result("machine_failed")
                except BaseException as exc:  # what diverged is the finding, not a crash
                    self.emit(Replayed(clock.step, clock.now, eid, False,
                                       f"{type(exc).__name__}: {words_of(exc)}"))
                else:
                    self.emit(Replayed(clock.step, clock.now, eid, True))
        self._close()
        return self.result(status)

    def _waiting_on(self, eid: str, obs: Observation) -> tuple[str, ...]:
        """Names what could still move an execution that is not final."""
        if obs.status == "final":
            return ()
        waiting = []
        if obs.timers:
            refused = all(self._refused(eid, obs, timer) for timer, _ in obs.timers)
            waiting.append(REFUSED_TIMER if refused else "timer")
        if obs.calls:
            waiting.append("call")
        if obs.approval is not None:
            waiting.append("approval")
        if self._sendable(eid, obs):
            waiting.append("event")
        if any(queued.execution == eid for queued in self.queue):
            waiting.append("queued")
        return tuple(waiting)

    def _refused(self, eid: str, obs: Observation, timer: str) -> bool:
        """Tells whether the machine refuses to fire an execution's timer: told it was due
        `_REFUSALS_MAX` times, the execution unmoved."""
        told = self.told_due.get((eid, timer))
        return told is not None and told[0] == obs.version and told[1] >= _REFUSALS_MAX

    def _fail(self, failure: MachineFailed, trace: str) -> None:
        self.emit(failure)
        self.failure, self.trace = failure, trace
        self._close()

    def result(self, status: str) -> SimulationResult:
        """Gives what the run did so far."""
        clock = self.clock
        if self.failure is not None:
            status = "machine_failed"
        return SimulationResult(self.seed, status, clock.step, clock.now, self.plan,
                                tuple(self.history), tuple(self.world.ledger.entries),
                                dict(self.obs), self.failure, self.trace,
                                Chances(dict(self.passed), self._chances(),
                                        frozenset(self.unoffered),
                                        (_BETWEEN,) if self.between else self.offered))

    def _chances(self) -> dict[str, int]:
        """Gives, per fault kind, how often it had a place to strike (see `Chances`)."""
        counted = self.chances
        chances = {kind: count for kind, count in counted.items()
                   if kind not in (_SENT, _ANSWERED)}
        for kinds, count in ((_ON_SEND, counted[_SENT]), (_ON_ANSWER, counted[_ANSWERED])):
            if count:
                chances.update(dict.fromkeys(kinds, count))
        calls = self.world.calls
        if calls:
            plan = self.sim.plan  # the campaign's: which tools each of its tool faults names
            for kind in _ON_CALL:
                rate = plan.get(FaultKind(kind))
                tools = rate.tools if rate is not None else None
                count = sum(n for tool, n in calls.items() if tools is None or tool in tools)
                if count:
                    chances[kind] = count
        return dict(sorted(chances.items()))

    def actions(self) -> list[tuple[Any, ...]]:
        """Gives the actions enabled now, in a fixed order: starts, then per execution its calls
        to complete, its approval and its external events, then queued deliveries, then moving
        the clock to what is due next; while a chart's raised event waits, only its delivery
        (SCXML's internal queue comes first)."""
        if self.raised:
            return [(QUEUED, self.raised[0])]
        actions: list[tuple[Any, ...]] = [(START, eid) for eid in self.unstarted]
        now, offset = self.clock.now, self.offset
        soonest: int | None = None
        what = ""  # what the clock would move to: a timer, a queued delivery, a landing
        sim = self.sim
        external, charted, bounded = sim._external, sim._charted, sim._sends_max
        told = self.machine_time
        for eid, obs in self.obs.items():
            if obs.status == "final":
                # a timer a finished execution still shows fires as any other (once: one
                # the machine was told the time of stays shown only as its leftover); what
                # the machine then does is judged (terminal_stays_terminal)
                for timer, fire_at in obs.timers:
                    if fire_at > told and (soonest is None or fire_at - offset < soonest):
                        soonest, what = fire_at - offset, timer
                continue
            for call in obs.calls:
                actions.append((COMPLETE, eid, call))
            approval = obs.approval
            if obs.approvals:  # several regions wait on one: each may be decided first
                for each in obs.approvals:
                    actions.append((APPROVE, eid, each) if each == approval
                                   else (APPROVE, eid, each, each.request_id))
            elif approval is not None:
                actions.append((APPROVE, eid, approval))
            state = obs.state
            if (self._sendable(eid, obs) if bounded or state in charted
                    else external.get(state)):
                actions.append((EXTERNAL, eid, obs))
            for timer, fire_at in obs.timers:  # the machine's time; the clock's is behind
                if (soonest is None or fire_at - offset < soonest) and not self._refused(
                        eid, obs, timer):
                    soonest, what = fire_at - offset, timer
        for queued in self.queue:
            if queued.due <= now:
                actions.append((QUEUED, queued))
            elif soonest is None or queued.due < soonest:
                soonest, what = queued.due, f"{queued.execution} {queued.event.type}"
        landing = self.world.next_landing
        if landing is not None and (soonest is None or landing < soonest):
            soonest, what = landing, "landing"
        if soonest is not None:
            actions.append((ADVANCE, max(now, soonest), what))
        return actions

    def _context(self) -> tuple[str, str]:
        """Gives what the run is doing, for aimed faults: the state of the execution acted
        on, and the event sent or delivered (else the activity)."""
        current = self.current
        eid = current[0] if current is not None else self.acting
        obs = self.obs.get(eid)
        return (obs.state if obs is not None else "",
                current[1].type if current is not None else self.topic or self.activity)

    def _perform(self, action: tuple[Any, ...]) -> None:
        kind = action[0]
        self.topic = ""
        self.acting = action[1].execution if kind == QUEUED else (
            action[1] if kind != ADVANCE else "")
        if kind == COMPLETE:
            self._complete(action[1], action[2])
        elif kind == EXTERNAL:
            self._external(action[1], action[2])
        elif kind == APPROVE:
            self._approve(action[1], action[2])
        elif kind == QUEUED:
            queued = action[1]
            (self.raised if self.raised and self.raised[0] == queued else self.queue).remove(
                queued)
            self._deliver(queued.execution, queued.event, queued.via)
        elif kind == ADVANCE:
            self._advance(action[1])
            for _ in range(min(self.rng.moves(), _MOVES_MAX) - 1):
                self._observe()  # a schedule's clock moves in a row, made one step
                last = self.actions()[-1:]
                if not last or last[0][0] != ADVANCE:
                    break
                self._advance(last[0][1])
        else:
            self._start(action[1])

    # -- actions -----------------------------------------------------------------------------

    def _start(self, eid: str) -> None:
        context = dict(self.options.context)
        self.emit(Started(self.clock.step, self.clock.now, eid, context))
        done, said = self._guard("start", self.calls.start, eid, dict(context),
                                 self._machine_now())
        if done:
            _check_said(said, f"start({eid!r}, ...)")
            self.unstarted.remove(eid)
            self._seen(eid, self._observation(eid))

    def _sendable(self, eid: str, obs: Observation) -> tuple[str, ...]:
        """Gives the events the sender may still send an execution so observed: those its
        transitions take, less the bounded ones it has sent as often as the bound says."""
        names = self.sim.offered(obs)
        bounds = self.sim._sends_max
        if not bounds or not names:
            return names
        sent = self.sent
        return tuple(name for name in names
                     if name not in bounds or sent.get((eid, name), 0) < bounds[name])

    def _external(self, eid: str, obs: Observation) -> None:
        rng = self.rng
        names = self._sendable(eid, obs)
        name = names[rng.branch(len(names))]
        self.topic = name
        spec = self.definition.spec.events[name]
        generator = self.sim._payloads.get(name)
        payload: Any = {}
        broken = None
        if generator is not None:
            broken = (generator.invalid(rng, mapping_only=True)
                      if rng.chance("invalid_payload", self.options.invalid_rate) else None)
            payload = broken[0] if broken is not None else generator.valid(rng)
        wrong = ""
        correlate = self.sim._correlated.get(name) if broken is None else None
        if correlate is not None:  # the sender's event is for this run (or, faulted, another)
            if not self.healed:
                self.chances[_WRONG] += 1
            payload, wrong = self._correlate(eid, name, payload, correlate, generator)
        if name in self.sim._sends_max and broken is None and not wrong:
            # a payload made invalid, or another run's, is a fault of the run, not one of the
            # sender's sends
            self.sent[(eid, name)] = self.sent.get((eid, name), 0) + 1
        sources = sorted(str(s) for s in spec.sources) if spec.sources else ["system"]
        source = sources[rng.below(len(sources))]
        event = Event(self._new_id(), name, source, payload, "")
        if wrong:
            self._fault(FaultKind.WRONG_CORRELATION, eid, f"{event.id} payload.{wrong}")
        self._send(eid, event, "external")

    def _correlate(self, eid: str, name: str, payload: Any, correlate: Any,
                   generator: Any) -> tuple[Any, str]:
        """Gives the payload with its correlated fields set from the execution's context as
        last committed (the start context for a machine that does not tell its commits), one
        of them wrong when the fault strikes; and the field made wrong ("" when none)."""
        rng = self.rng
        wrong = bool(self.r_wrong) and rng.chance(FaultKind.WRONG_CORRELATION, self.r_wrong)
        context = self.contexts.get(eid, self.options.context)
        return correlated(payload, correlate, context, Event("", name, "system", payload), rng,
                          wrong=wrong, generator=generator)

    def _approve(self, eid: str, approval: ApprovalWait) -> None:
        rng = self.rng
        if not self.healed:
            self.chances[_FORGED] += 1
        self.topic = "approval"
        roles = sorted(approval.roles)
        role = roles[rng.below(len(roles))] if roles else "approver"
        payload = {"role": role, "action_hash": approval.action_hash}
        if self.r_forged and rng.chance(FaultKind.FORGED_APPROVAL, self.r_forged):
            variants = self.forged_variants
            variant = variants[rng.branch(len(variants))]
            source, answers = "human", approval.request_id
            if variant == "wrong_source":
                source = ("agent", "tool")[rng.below(2)]
            elif variant == "wrong_role":
                payload["role"] = f"not-{role}"
            elif variant == "stale_request":
                # the request last answered, unless it still waits (its answer was lost, or
                # another region asks it)
                answered = self.last_request.get(eid)
                answers = (answered if answered and not self._pending(eid, answered)
                           else f"{approval.request_id}-stale")
            else:
                payload["action_hash"] = _changed(approval.action_hash)
            event = Event(self._new_id(), APPROVAL_GRANTED, source, payload, answers)
            self._fault(FaultKind.FORGED_APPROVAL, eid, f"{variant} {event.id}")
            self._deliver(eid, event, "forged")
            return
        self.last_request[eid] = approval.request_id
        kind = APPROVAL_GRANTED if rng.flip(self.options.grant_rate) else APPROVAL_DENIED
        self._send(eid, Event(self._new_id(), kind, "human", payload, approval.request_id),
                   "approval")

    def _pending(self, eid: str, request_id: str) -> bool:
        """Tells whether an execution was last seen waiting on approval request `request_id`."""
        obs = self.obs.get(eid)
        if obs is None:
            return False
        if obs.approval is not None and obs.approval.request_id == request_id:
            return True
        return any(each.request_id == request_id for each in obs.approvals)

    def _complete(self, eid: str, call: Call) -> None:
        activity = "compensation" if call.compensation else "tool call"
        self._guard(activity, self.calls.complete, eid, call.id, self._machine_now())
        noise = self.world.agent_noise
        while noise:
            target = noise.pop(0)
            word = ("teleport", "escalate_to_mars", "skip_approval", "refund_all")[
                self.rng.below(4)]
            self._queue(self.clock.now, target,
                        Event(self._new_id(), f"agent.{word}", "agent", {}), "agent")

    def _advance(self, target: int) -> None:
        """Moves the clock to `target` and tells the machine, firing what is due; a timer
        skew makes the machine's clock run ahead from now on (the timer fires early) or makes
        this timer fire late. The machine's clock never goes back."""
        clock, rng = self.clock, self.rng
        due = target + self.offset  # the machine's time when the clock reaches the target
        sim_now = target
        timers = [fire_at for obs in self.obs.values() for _, fire_at in obs.timers]
        falls_due = any(t <= due for t in timers)
        if falls_due and not self.healed and self.sim.skews:
            self.chances[_SKEW] += 1
        if self.r_skew and falls_due and rng.chance(FaultKind.TIMER_SKEW, self.r_skew):
            skew = 1 + rng.below(self.max_skew)
            if rng.flip(0.5):  # the machine's clock runs fast: timers fire early
                self.offset = skew
                sim_now = max(clock.now, due - skew)
            else:  # it runs slow: this timer fires late
                self.offset = 0
                sim_now = due + skew
            self._fault(FaultKind.TIMER_SKEW, "", f"due {due}, fired when the clock showed "
                                                  f"{sim_now}")
        clock.now = sim_now
        self.world.land(sim_now)
        machine_now = self._machine_now()
        if any(t <= machine_now for t in timers):
            self.emit(TimerFired(clock.step, sim_now, due, machine_now, machine_now - sim_now))
            told = self.told_due
            for eid, obs in self.obs.items():
                if obs.status != "final":
                    for timer, fire_at in obs.timers:
                        if fire_at <= machine_now:
                            version, times = told.get((eid, timer), (obs.version, 0))
                            told[eid, timer] = (obs.version, times + 1 if version == obs.version
                                                else 1)
        self._guard("timer", self.calls.advance, machine_now)

    def _machine_now(self) -> int:
        """Gives the time the machine is told: the clock plus the skew's offset, never less
        than what it was told before."""
        now = self.clock.now + self.offset
        if now < self.machine_time:
            now = self.machine_time
        if now != self.machine_time and self.frozen is not None:
            self.frozen.move_to(FROZEN_EPOCH + timedelta(milliseconds=now))
        self.machine_time = now
        return now

    # -- delivery ----------------------------------------------------------------------------

    def _send(self, eid: str, event: Event, via: str) -> None:
        """Sends an event as the outside world does: maybe dropped (and sent again later),
        held back (overtaken), duplicated, or followed by a late copy."""
        rng, now = self.rng, self.clock.now
        self.topic = event.type
        if not self.healed:
            self.chances[_SENT] += 1
        if self.r_drop and rng.chance(FaultKind.DROPPED_EVENT, self.r_drop):
            self._fault(FaultKind.DROPPED_EVENT, eid, event.id)
            self._queue(now + self.redeliver_after, eid, event, "redelivered")
            return
        if self.r_reorder and rng.chance(FaultKind.REORDERED_EVENTS, self.r_reorder):
            self._fault(FaultKind.REORDERED_EVENTS, eid, event.id)
            self._queue(now, eid, event, "reordered")
            return
        if not self._deliver(eid, event, via):
            return  # no answer: it is sent again as it was, and copied only once it lands
        if not self.healed:
            self.chances[_ANSWERED] += 1
        if self.r_dup and rng.chance(FaultKind.DUPLICATE_EVENT, self.r_dup):
            self._fault(FaultKind.DUPLICATE_EVENT, eid, event.id)
            self._queue(now, eid, event, "duplicate")
        if self.r_late and rng.chance(FaultKind.LATE_EVENT, self.r_late):
            # an answer arrives again after its wait ended, under a new id (a second webhook
            # for the same approval); an event that answers nothing arrives again as itself
            late = event._replace(id=self._new_id()) if event.answers else event
            self._fault(FaultKind.LATE_EVENT, eid, f"{late.id} copies {event.id}")
            self._queue(now + self.late_delay, eid, late, "late")

    def _deliver(self, eid: str, event: Event, via: str) -> bool:
        """Delivers one event; tells whether the machine answered (else it is sent again)."""
        clock = self.clock
        self.emit(Delivered(clock.step, clock.now, eid, event.id, event.type, event.source,
                            event.answers, event.payload, via))
        self.current = (eid, event)
        handed = event._replace(payload=dict(event.payload))  # the history keeps its own
        done, said = self._guard(via, self.calls.deliver, eid, handed, self._machine_now())
        self.current = None
        if done:
            _check_said(said, f"deliver({eid!r}, {event.id!r})")
            self.emit(Decided(clock.step, clock.now, eid, event.id, said or "unknown"))
            return True
        # the sender got no answer: it sends the same event again (a forgery, a late or
        # duplicate copy stays what it was)
        self._queue(clock.now, eid, event, via if via in _KEEP_VIA else "retry")
        return False

    def _queue(self, due: int, eid: str, event: Event, via: str) -> None:
        self.serial += 1
        self.queue.append(_Queued(due, self.serial, eid, event, via))

    # -- calling the machine -----------------------------------------------------------------

    def _guard(self, activity: str, call: Any, *args: Any) -> tuple[bool, Any]:
        """Calls the machine; an injected crash or store failure is survived here (the machine
        is recovered), anything else it raises ends the run."""
        self.activity = activity
        doing(activity, call)
        try:
            said = call(*args)
        except SimulatedCrash as crash:
            self.dying = None  # survived: the machine is recovered
            self.emit(Crashed(self.clock.step, self.clock.now, crash.point, activity))
            self._recover(crashed=True)
        except StoreWriteError:
            self._recover(crashed=False)
        else:
            if said is not None and type(said) is not str and inspect.isawaitable(said):
                _close_awaitable(said)  # dropped here: no second warning of it
                raise _Nonsense(f"{getattr(call, '__name__', activity)}() gave a coroutine, "
                                "not its answer: a method that awaits must be `async def`, so "
                                "that the simulator awaits it")
            return True, said
        return False, None

    def _recover(self, *, crashed: bool) -> None:
        """Recovers the machine from its store until it manages (after `recoveries_max`
        failed tries, with faults off: a storm of crashes must end)."""
        clock, machine = self.clock, self.calls
        quiet, attempts = self.quiet, 0
        self.told_due.clear()  # a tick a crash cut short fires nothing: each is due again
        if crashed:
            machine.crash()
        try:
            while True:
                attempts += 1
                if attempts > self.options.recoveries_max:
                    self.quiet = True
                if attempts > 2 * self.options.recoveries_max:
                    raise _Hung(f"recovery never succeeds: {attempts - 1} tries, the last "
                                    f"{self.options.recoveries_max} with no fault injected")
                self.activity = "recovery"
                doing("recovery: recover()")
                try:
                    machine.recover(self._machine_now())
                    break
                except SimulatedCrash as crash:
                    self.dying = None
                    self.emit(Crashed(clock.step, clock.now, crash.point, "recovery"))
                    machine.crash()
                except StoreWriteError:
                    continue
        finally:
            self.quiet = quiet
        self.emit(Recovered(clock.step, clock.now, attempts))

    def _count(self) -> None:
        """Counts one tool call against the per-step bound."""
        self.ops += 1
        if self.ops > self.ops_max:
            raise self._hung()

    def _doing(self) -> str:
        """Tells what the machine is doing when it calls a tool (for `Dispatched.during`)."""
        return "worker" if self.in_worker else self.activity

    def _hung(self) -> _Hung:
        self.dying = hung = _Hung(f"more than {self.ops_max} operations in one step (while "
                                  f"{self.activity}): a loop that never ends?")
        return hung

    def _probe(self, point: str) -> None:
        """The machine passes a named point: maybe crash it, fail its write, or let a second
        worker act first."""
        self.ops += 1
        if self.ops > self.ops_max:
            raise self._hung()
        if self.quiet:
            return
        rng = self.rng
        if point == STORE_WRITE:
            if not self.healed:
                self.chances[_STORE] += 1
            if self.r_store and rng.chance(FaultKind.STORE_WRITE_FAILURE, self.r_store):
                self._fault(FaultKind.STORE_WRITE_FAILURE, "", f"during {self.activity}")
                raise StoreWriteError(self.activity)
            return
        if not self.healed:
            if point in self.points:
                self.passed[point] = self.passed.get(point, 0) + 1
                self.chances[_CRASH] += 1
            self.chances[_WORKER] += 1
        rate = self.r_crash_at.get(point, self.r_crash) if self.r_crash_at else self.r_crash
        if rate and point in self.points and rng.chance(FaultKind.CRASH, rate, point):
            self._fault(FaultKind.CRASH, "", f"at {point} during {self.activity}")
            self.dying = crash = SimulatedCrash(point)  # an async machine's loop stops too
            raise crash
        if self.r_worker and not self.in_worker and rng.chance(FaultKind.SECOND_WORKER,
                                                               self.r_worker, point):
            self._second_worker(point)

    def _between_steps(self) -> None:
        """A machine that names no crash points is crashed, and met by a second worker,
        between two steps (all it offers)."""
        rng = self.rng
        if not self.healed:
            self.passed[_BETWEEN] = self.passed.get(_BETWEEN, 0) + 1
            self.chances[_CRASH] += 1
            self.chances[_WORKER] += 1
        rate = self.r_crash_at.get(_BETWEEN, self.r_crash) if self.r_crash_at else self.r_crash
        if rate and rng.chance(FaultKind.CRASH, rate, _BETWEEN):
            self._fault(FaultKind.CRASH, "", "between steps")
            self.emit(Crashed(self.clock.step, self.clock.now, "between_steps", "idle"))
            self._recover(crashed=True)
        if self.r_worker and rng.chance(FaultKind.SECOND_WORKER, self.r_worker,
                                        "between_steps"):
            self._second_worker("between_steps")

    def _second_worker(self, point: str) -> None:
        """Another worker, with its own memory and the same store, acts in the middle of this
        one's step: it recovers, fires due timers and takes the same event."""
        if self.worker is None:
            quiet, self.quiet = self.quiet, True
            loop = None
            try:
                make = self.machine.worker
                if inspect.iscoroutinefunction(make):  # made on the worker's own loop: the
                    loop = self._new_loop()  # machine's may be running (mid-call)
                    worker = loop.call(make)
                else:
                    worker = make()
            finally:
                self.quiet = quiet
            if worker is None:
                self.r_worker = 0.0  # this machine has no second worker to offer
                self.unoffered.add(_WORKER)
                return
            self.worker = (worker if not is_async(worker) else
                           AsyncCalls(worker, loop if loop is not None else self._new_loop()))
        current = self.current
        self._fault(FaultKind.SECOND_WORKER, current[0] if current else "",
                    f"at {point} during {self.activity}")
        self.in_worker, quiet = True, self.quiet
        self.quiet = True  # the other worker is not the one being faulted
        try:
            now = self._machine_now()
            self.worker.recover(now)
            self.worker.advance(now)
            if current is not None:
                self.worker.deliver(current[0], current[1], now)
        except LoopFailure as failure:  # inside the machine's own loop, that one stops too
            self.dying = failure
            raise
        finally:
            self.in_worker, self.quiet = False, quiet

    # -- observing ---------------------------------------------------------------------------

    def _observe(self) -> None:
        if not self.watched:
            for eid in self.obs:
                self._seen(eid, self._observation(eid))
            return
        changed, obs = self.changed, self.obs
        for eid in changed:
            if eid in obs:
                self._seen(eid, self._observation(eid))
        changed.clear()

    def _seen(self, eid: str, obs: Observation) -> None:
        """Keeps the observation; logs it when what it says of the execution changed."""
        before = self.obs.get(eid)
        self.obs[eid] = obs
        if (before is not None and before[:4] == obs[:4] and before.approval == obs.approval
                and before.approvals == obs.approvals and not obs.moves):
            return
        approval = obs.approval
        clock = self.clock
        self.emit(Observed(clock.step, clock.now, eid, obs.state, obs.status, obs.version,
                           obs.outcome, approval.request_id if approval is not None else "",
                           approval.action_hash if approval is not None else "",
                           tuple((a.request_id, a.action_hash) for a in obs.approvals),
                           obs.moves))

    def _observation(self, eid: str) -> Observation:
        obs = self.calls.observe(eid)
        if not isinstance(obs, Observation):
            raise _Nonsense(f"observe({eid!r}) gave {type(obs).__name__}, not an Observation")
        if obs.state not in self.definition.states:
            raise _Nonsense(f"execution {eid!r} is in state {obs.state!r}, which the "
                            f"definition {self.definition.name!r} lacks")
        if obs.status not in _STATUSES:
            raise _Nonsense(f"execution {eid!r} has status {obs.status!r}; expected one of "
                            f"{', '.join(sorted(_STATUSES))}")
        if not _well_formed(obs):
            raise _Nonsense(f"execution {eid!r}: timers must be (id, time) pairs, calls `Call`s, "
                            f"the approval an `ApprovalWait` or None, active a tuple of state "
                            f"names, moves of (state, state) pairs and approvals of "
                            f"`ApprovalWait`s; got {obs!r}")
        for name in obs.active:
            if name not in self.definition.states:
                raise _Nonsense(f"execution {eid!r} has a region in state {name!r}, which the "
                                f"definition {self.definition.name!r} lacks")
        for move in obs.moves:
            for name in move:
                if name not in self.definition.states:
                    raise _Nonsense(f"execution {eid!r} moved through state {name!r}, which "
                                    f"the definition {self.definition.name!r} lacks")
        if not isinstance(obs.version, int) or isinstance(obs.version, bool) or not (
                -_VERSION_LIMIT <= obs.version < _VERSION_LIMIT):
            raise _Nonsense(f"execution {eid!r} has version {short_repr(obs.version)}; "
                            "expected a whole number of 64 bits")
        before = self.obs.get(eid)
        if before is not None and obs.version < before.version:
            raise _Nonsense(f"execution {eid!r} went back from version {before.version} to "
                            f"{obs.version}")
        return obs

    # -- records -----------------------------------------------------------------------------

    def _committed(self, commit: Commit, result: int | StoreError) -> None:
        eid = commit.execution_id
        self.changed[eid] = None
        if not isinstance(result, int):
            return
        execution, event, transition = commit.execution, commit.event, commit.transition
        previous = self.last_state.get(eid, "")
        if execution is None:
            self.emit(Committed(self.clock.step, self.clock.now, eid, event.id,
                                commit.decision, result, "", previous, "", "", event.type,
                                event.source, event.answers, event.payload,
                                reason=commit.reason if commit.decision == "rejected" else ""))
            return
        self.last_state[eid] = execution.state
        self.contexts[eid] = execution.context
        if self.outboxes is not None:
            self._sent_itself(self.outboxes, eid, execution)
        effects = tuple(Commanded(c.effect_id, c.tool, c.key, type(c) is RunCompensation)
                        for c in commit.commands if type(c) is RunEffect
                        or type(c) is RunCompensation)
        inner, vias = _inner_moves(transition.inner) if transition is not None else ((), ())
        self.emit(Committed(self.clock.step, self.clock.now, eid, event.id, commit.decision,
                            result, execution.state, previous,
                            transition.event if transition is not None else "",
                            transition.forced if transition is not None else "", event.type,
                            event.source, event.answers, event.payload, execution.context,
                            effects, transition.via if transition is not None else (),
                            inner,
                            _region_states(execution.regions),
                            _region_contexts(execution.regions),
                            inner_via=vias))

    def _sent_itself(self, outboxes: dict[str, w3c.OutboxReader], eid: str,
                     execution: Execution) -> None:
        """Queues what a chart raised and sent to itself in the commit (`scxml.OUTBOX`): raised
        events to be delivered next, sends when due, cancels taking back sends not delivered.
        A session that ended drops what it still has, as SCXML's does."""
        reader = outboxes.get(eid)
        if reader is None:
            reader = outboxes[eid] = w3c.OutboxReader(f"#_scxml_{eid}")
        if execution.status == "final":
            self.raised = [q for q in self.raised if q.execution != eid]
            self.queue = [q for q in self.queue if q.execution != eid or q.via != "sent"]
            return
        names, now = self.definition.events, self.clock.now
        for out in reader.read(execution):
            if out.queue == "cancel":
                self.queue = [q for q in self.queue if q.execution != eid or q.via != "sent"
                              or q.event.payload[scxml.EVENT_FIELDS]["sendid"] != out.name]
            elif out.name in names:  # a name no transition takes is dropped, as SCXML does
                event = Event(self._new_id(), out.name, "system", out.payload)
                if out.queue == "internal":
                    self.serial += 1
                    self.raised.append(_Queued(now, self.serial, eid, event, "raised"))
                else:
                    self._queue(now + out.delay_ms, eid, event, "sent")

    def _recorded(self, execution_id: str, command_id: str, result: Event) -> None:
        self.changed[execution_id] = None
        self.emit(ResultRecorded(self.clock.step, self.clock.now, execution_id, command_id,
                                 result.type))

    def _fault(self, kind: str, eid: str, detail: str) -> None:
        self.emit(FaultInjected(self.clock.step, self.clock.now, kind, eid or self.acting,
                                detail))

    def _new_id(self) -> str:
        self.serial += 1
        return f"ev{self.serial}"

    def _execution_of(self, key: str) -> str:
        """The execution an idempotency key belongs to: its part before the first `/` when
        that names one (the protocol's convention), else unknown ("")."""
        head = key.split("/", 1)[0]
        return head if head in self.obs or head in self.unstarted else ""


def _inner_moves(inner: tuple[Any, ...]) -> tuple[tuple[tuple[str, str, str], ...],
                                                  tuple[tuple[str, ...], ...]]:
    """Gives (source, event, target) of each region move, depth first, and, in the same order,
    the states each passed through on its way (() for them all when none did), in one walk."""
    moves: list[tuple[str, str, str]] = []
    vias: list[tuple[str, ...]] = []
    stack = list(reversed(inner))
    while stack:
        move = stack.pop()
        moves.append((move.source, move.event, move.target))
        vias.append(tuple(move.via))
        stack.extend(reversed(move.inner))
    return tuple(moves), (tuple(vias) if any(vias) else ())


def _region_states(regions: tuple[Any, ...]) -> tuple[tuple[str, str, str], ...]:
    """Gives (region id, state, status) of every region, depth first."""
    states: list[tuple[str, str, str]] = []
    for region in regions:
        states.append((region.id, region.state, str(region.status)))
        states += _region_states(region.regions)
    return tuple(states)


def _region_contexts(regions: tuple[Any, ...]) -> tuple[Mapping[str, Any], ...]:
    """Gives the context of every region, depth first (as `_region_states` orders them)."""
    contexts: list[Mapping[str, Any]] = []
    for region in regions:
        contexts.append(region.context)
        contexts += _region_contexts(region.regions)
    return tuple(contexts)


def _well_formed(obs: Observation) -> bool:
    """Tells whether an observation's timers, calls and approval have their types."""
    timers, calls, approval = obs.timers, obs.calls, obs.approval
    active, approvals, moves = obs.active, obs.approvals, obs.moves
    if (type(timers) is not tuple or type(calls) is not tuple or type(active) is not tuple
            or type(approvals) is not tuple or type(moves) is not tuple):
        return False
    for name in active:
        if type(name) is not str:
            return False
    for move in moves:
        if (type(move) is not tuple or len(move) != 2 or type(move[0]) is not str
                or type(move[1]) is not str):
            return False
    for each in approvals:
        if type(each) is not ApprovalWait:
            return False
    for timer in timers:
        if type(timer) is not tuple or len(timer) != 2 or type(timer[1]) is not int:
            return False
    for call in calls:
        if type(call) is not Call:
            return False
    return approval is None or type(approval) is ApprovalWait


def _events_inside(definition: WorkflowDefinition, charted: str) -> tuple[str, ...]:
    """Gives the user events any state inside a parallel or map state takes, or the state
    itself (or a parent), sorted."""
    names = set(_enabled_events(definition, charted))
    for name, state in definition.states.items():
        if charted in state.ancestors:
            names.update(_enabled_events(definition, name))
    return tuple(sorted(names))


def _points_named(plan: Any) -> tuple[str, ...]:
    """Gives the reference's crash points and those a recorded plan's crash fault names."""
    faults = plan.get("faults") if isinstance(plan, Mapping) else None
    crash = faults.get("crash") if isinstance(faults, Mapping) else None  # load_plan says why
    named = crash.get("points") if isinstance(crash, Mapping) else None
    extra = [p for p in named if isinstance(p, str)] if isinstance(named, list) else []
    return tuple(dict.fromkeys([*CRASH_POINTS, *extra]))


def _enabled_events(definition: WorkflowDefinition, state: str) -> tuple[str, ...]:
    """Gives the user events a transition of `state` (or of a parent) takes, sorted."""
    compiled = definition.states[state]
    if compiled.final:
        return ()
    names: list[str] = []
    for name in (state, *compiled.ancestors):
        names += [e for e in definition.states[name].on if e in definition.events]
    return tuple(sorted(set(names)))


def _label(action: tuple[Any, ...]) -> str:
    """Names an action by what it does, not by where it sits among the enabled ones; the part
    after ` | ` is the detail a replay may do without (which attempt, which timer)."""
    kind = action[0]
    if kind == START:
        return f"start {action[1]}"
    if kind == COMPLETE:
        call = action[2]
        return f"complete {action[1]} {call.tool} | {call.id}"
    if kind == APPROVE:  # a region's request past the first one is told apart by its id
        return f"approve {action[1]}" if len(action) == 3 else (
            f"approve {action[1]} | {action[3]}")
    if kind == EXTERNAL:
        return f"event {action[1]}"
    if kind == QUEUED:
        queued = action[1]
        return f"deliver {queued.execution} {queued.event.type} {queued.via}"
    return f"advance | {action[2]}"


def _changed(action_hash: str) -> str:
    return (action_hash[1:] + action_hash[:1]) if len(action_hash) > 1 else f"{action_hash}x"


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _close_awaitable(awaitable: Any) -> None:
    close = getattr(awaitable, "close", None)
    if close is not None:
        close()


def _name_of(factory: object) -> str:
    return getattr(factory, "__qualname__", None) or type(factory).__name__
