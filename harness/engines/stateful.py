"""Hypothesis stateful testing of a workflow: a `RuleBasedStateMachine` made from a definition.

    from harness.stateful import workflow_machine
    from reference_machine import load_definition

    RefundMachine = workflow_machine(load_definition("scenarios/refund_escalation.yaml"))
    TestRefund = RefundMachine.TestCase            # pytest and unittest collect it

Rules: start an execution; deliver an enabled event (an external one, an approval decision, or a
queued copy), maybe with a delivery fault (duplicate, late, reordered, dropped, forged); complete
a tool call in flight, maybe with a tool fault; advance the clock, maybe skewed; crash and
recover at a crash point; and inject a fault inside the machine (a store write failure, a second
worker) at its next opportunity. Each example draws how often a rule that can carry a fault
carries one (`DENSITY`) and how readily the clock moves while anything else can happen
(`PATIENCE`, as fuzz runs draw it). After each rule every invariant that holds of a prefix
is checked; at teardown the faults heal, the run goes on for its liveness phase, and the rest are
checked. Hypothesis shrinks a failure to a minimal program and remembers it in its example
database; the failure's message tells the trace as readable steps and, with `replay_dir`, the
replay file that reruns it without Hypothesis (`fsmharness replay FILE`).

It drives the same simulator as `fuzz`: every choice goes through one recorded source, so what
Hypothesis found replays natively. The run is held in a child process (`isolate`, see
`workflow_machine`): a machine that ends its process fails its example with `machine_ok`, and
one that hangs it raises `MachineHung`, reported as found, not shrunk.

Settings are Hypothesis's own: set them on the class with `@settings(...)`, on
`TestCase.settings`, through a profile, or with `settings=` here; the deadline is off unless
those set one (a step with a crash and its recovery takes a while).
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple, NoReturn

from hypothesis import settings as Settings
from hypothesis import strategies as st
from hypothesis.control import current_build_context
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from fault_injection import TOOL_FAULTS, FaultKind, FaultPlan
from harness.checks.invariants import Invariant, Violation, invariants
from harness.engines import isolation
from harness.engines.exhaustive import fault_bands
from harness.engines.replay import write_replay
from harness.engines.shrink import Counterexample
from harness.errors import HarnessError
from harness.report.trace import describe_steps
from harness.sim.choices import BRANCH, Choice, RecordingChoices, Table, labels_of
from harness.sim.machine import MachineFactory, ReferenceMachine
from harness.sim.simulator import (
    ADVANCE,
    APPROVE,
    COMPLETE,
    EXTERNAL,
    PATIENCE,
    QUEUED,
    START,
    SimOptions,
    SimulationResult,
    Simulator,
    plan_for,
)
from reference_machine import WorkflowDefinition

__all__ = ["InvariantViolated", "MachineHung", "workflow_machine"]


def _told(violations: Sequence[Violation], trace: Sequence[str],
          replay_file: Path | None) -> str:
    lines = [str(v) for v in violations]
    lines += ["trace:", *(f"  {line}" for line in trace)]
    if replay_file is not None:
        lines.append(f"replay: fsmharness replay {replay_file}")
    return "\n".join(lines)


class InvariantViolated(AssertionError):
    """An invariant broke in a Hypothesis-driven run; `violations` holds what broke."""

    def __init__(self, violations: Sequence[Violation], trace: Sequence[str],
                 replay_file: Path | None) -> None:
        self.violations = tuple(violations)
        self.trace = tuple(trace)
        self.replay_file = replay_file
        super().__init__(_told(violations, trace, replay_file))

    def __reduce__(self) -> tuple[Any, ...]:  # it crosses from the child that ran the example
        return type(self), (self.violations, self.trace, self.replay_file)


class MachineHung(BaseException):
    """A step of a Hypothesis-driven run ran past its bound (`machine_ok`): the example is
    reported as found, not shrunk, since each run of it takes the step's bound. A
    `BaseException`, so that Hypothesis lets it through rather than shrink it; the test fails
    with it, and Hypothesis prints the seed that finds it again."""

    def __init__(self, violations: Sequence[Violation], trace: Sequence[str],
                 replay_file: Path | None) -> None:
        self.violations = tuple(violations)
        self.trace = tuple(trace)
        self.replay_file = replay_file
        super().__init__(_told(violations, trace, replay_file))

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.violations, self.trace, self.replay_file)


class _DrivenChoices(RecordingChoices):
    """The run's choices when Hypothesis drives: the action a rule chose, the faults a rule
    armed (each strikes at its next opportunity, and no other does), values from the seed.
    Every draw is recorded, so the run replays without Hypothesis.

    A fault is armed by kind (`crash`), or aimed: `crash:<point>` strikes at that crash point
    only, `forged_approval:<variant>` and `malformed_output:<variant>` take that shape."""

    paced = False

    def __init__(self, seed: int, variants: dict[str, tuple[str, ...]],
                 stream: bool = False) -> None:
        super().__init__(seed)
        self.stream = stream  # tell the parent each draw (`isolation.tell`) as it is made
        self.armed: Counter[str] = Counter()
        self.forced: int | None = None
        self.variants = variants
        self.shape: int | None = None  # the variant the next branch draw takes

    def action(self, actions: Sequence[Any], label: Any) -> int:
        index = self.forced if self.forced is not None else 0
        self.forced = None
        self._record(BRANCH, (index + 0.5) / len(actions))
        self.actions[self.step] = labels_of(actions, label)[index]
        if self.stream:
            isolation.tell((None, (self.step, self.actions[self.step])))
        return index

    def _record(self, tag: str, u: float) -> float:
        super()._record(tag, u)
        if self.stream:
            isolation.tell((self.recorded[-1], None))
        return u

    def branch(self, n: int) -> int:
        if self.shape is None:
            return super().branch(n)
        index, self.shape = min(self.shape, n - 1), None
        self._record(BRANCH, (index + 0.5) / n)
        return index

    def _take(self, kind: str, where: str = "") -> bool:
        """Disarms and tells whether a fault of `kind` (at `where`) was armed."""
        for name in (f"{kind}:{where}" if where else "", kind):
            if name and self.armed[name] > 0:
                self.armed[name] -= 1
                return True
        for name in [n for n, count in self.armed.items() if count and
                     n.startswith(f"{kind}:") and n[len(kind) + 1:] in self.variants.get(
                         kind, ())]:
            self.armed[name] -= 1
            self.shape = self.variants[kind].index(name[len(kind) + 1:])
            return True
        return False

    def chance(self, kind: str, rate: float, where: str = "") -> bool:
        if kind not in _KINDS:
            return super().chance(kind, rate, where)  # not a fault: drawn from the seed
        fire = rate > 0 and self._take(kind, where)
        return self._record(f"f:{kind}", 0.0 if fire else 1.0) < rate

    def pick(self, site: str, table: Table) -> Any:
        for low, high, kind in fault_bands(table):  # only kinds a draw can meet
            if self._take(kind):
                self._record(f"f:{site}", (low + high) / 2)
                return kind
        self._record(f"f:{site}", 1.0)
        return None


_KINDS = frozenset(str(kind) for kind in FaultKind)
#: How often a rule that can carry a fault carries one, drawn per example (swarm, as the
#: fuzzer's runs draw their plans): seldom, often, nearly always.
DENSITY = (0.1, 0.3, 0.9)
#: (roll, pick): a fault when the roll is high enough for the density, and which.
FAULT = st.tuples(st.integers(min_value=0, max_value=99), st.integers(min_value=0, max_value=255))
_DELIVER = frozenset({EXTERNAL, APPROVE, QUEUED})
_ANY = frozenset({START, COMPLETE, APPROVE, EXTERNAL, QUEUED, ADVANCE})


def workflow_machine(definition: WorkflowDefinition, *,
                     machine: MachineFactory = ReferenceMachine,
                     options: SimOptions | None = None,
                     plan: FaultPlan | None = None,
                     only: Iterable[str] | None = None,
                     replay_dir: str | os.PathLike[str] | None = None,
                     settings: Settings | None = None,
                     isolate: bool = True) -> type[RuleBasedStateMachine]:
    """Gives a `RuleBasedStateMachine` that tests `machine` running `definition`.

    `options` shapes the runs (executions, the liveness phase; its step bound is Hypothesis's
    `stateful_step_count`), `plan` the faults a rule may inject (every kind the definition can
    take by default), `only` the invariants checked (all by default). With `isolate` (where
    the platform can fork) each example's run is held in a child process the rules talk to,
    so that a machine that ends its process or hangs it past the watchdog is that example's
    `machine_ok` failure, never the test session's end."""
    base = options if options is not None else SimOptions()
    chosen_plan = plan if plan is not None else (base.plan if base.plan is not None
                                                 else plan_for(definition))
    if chosen_plan.swarm:
        raise HarnessError("a Hypothesis machine injects the faults its rules arm: give a plan "
                           "without swarm mode")
    if not isinstance(isolate, bool):
        raise HarnessError(f"isolate: expected true or false, got {isolate!r}")
    sim_options = replace(base, plan=chosen_plan)
    checked: tuple[Invariant, ...] = invariants(only)
    shared = _Shared(definition, machine, sim_options, Simulator(definition, sim_options, machine),
                     checked, tuple(rule_ for rule_ in checked if not rule_.final_only),
                     _fault_menu(chosen_plan, getattr(machine, "crash_points", ())),
                     None if replay_dir is None else Path(replay_dir))
    # a daemonic process (a pool's worker, a harness child) may have no children: here, then
    apart = isolate and isolation.available() and not multiprocessing.current_process().daemon
    menu = shared.menu

    class WorkflowMachine(RuleBasedStateMachine):
        """Runs the workflow one rule at a time; see `harness.stateful`. The run itself is an
        `_Example`, in a child process when isolated: the rules ask it to act, and read what
        it answers (the kinds of action enabled) for their preconditions."""

        def __init__(self) -> None:
            super().__init__()
            self.link: _Here | _Apart | None = None
            self.kinds: frozenset[int] = frozenset()  # of the actions enabled now
            self.live = False  # a run began and its machine has not failed
            self.steps = 0  # the run's steps so far
            self.failed = False  # teardown runs after a failure too, and must not fail again

        @initialize(seed=st.integers(min_value=0, max_value=2**32 - 1),
                    density=st.sampled_from(DENSITY), patience=st.sampled_from(PATIENCE))
        def begin(self, seed: int, density: float, patience: float) -> None:
            self.link = _Apart(shared, seed) if apart else _Here(shared)
            self._ask(f"begin(seed={seed}, density={density}, patience={patience})", "begin",
                      seed, density, patience, _final_example())

        def _ask(self, said: str, name: str, *args: Any) -> None:
            """Has the example do `name` for the rule `said` (as Hypothesis prints it)."""
            assert self.link is not None
            try:
                self.kinds, self.live, self.steps = self.link.ask(said, name, *args)
            except (InvariantViolated, MachineHung):
                self.failed = True
                raise

        def _can(self, kinds_of: frozenset[int]) -> bool:
            return self.live and not self.kinds.isdisjoint(kinds_of)

        @precondition(lambda self: self._can(frozenset({START})))
        @rule(pick=st.integers(min_value=0, max_value=255))
        def start_execution(self, pick: int) -> None:
            self._ask(f"start_execution(pick={pick})", "act", frozenset({START}), pick)

        @precondition(lambda self: self._can(_DELIVER))
        @rule(pick=st.integers(min_value=0, max_value=255), fault=FAULT)
        def deliver_event(self, pick: int, fault: tuple[int, int]) -> None:
            """Delivers an event the execution's state takes, an approval decision or a
            queued copy; `fault` strikes this delivery (or the next one it can)."""
            self._ask(f"deliver_event(pick={pick}, fault={fault})", "act", _DELIVER, pick,
                      ("delivery", fault))

        @precondition(lambda self: self._can(frozenset({COMPLETE})))
        @rule(pick=st.integers(min_value=0, max_value=255), fault=FAULT)
        def complete_call(self, pick: int, fault: tuple[int, int]) -> None:
            """Lets a tool call in flight reach its tool; `fault` is what the tool does."""
            self._ask(f"complete_call(pick={pick}, fault={fault})", "act",
                      frozenset({COMPLETE}), pick, ("tool", fault))

        @precondition(lambda self: self._can(frozenset({ADVANCE})))
        @rule(fault=FAULT, now=st.integers(min_value=0, max_value=99))
        def advance_clock(self, fault: tuple[int, int], now: int) -> None:
            """Moves the clock to what is due next; a run that holds the clock back
            (`patience`) moves it only on a `now` that high, while anything else can happen."""
            self._ask(f"advance_clock(fault={fault}, now={now})", "advance", fault, now)

        if menu.crash:
            @precondition(lambda self: self._can(_ANY))
            @rule(pick=st.integers(min_value=0, max_value=255),
                  point=st.sampled_from(menu.crash))
            def crash_and_recover(self, pick: int, point: str) -> None:
                """The process dies at `point` in the middle of its next action that passes
                it (later ones', if that one does not), and recovers."""
                self._ask(f"crash_and_recover(pick={pick}, point={point!r})", "act", _ANY,
                          pick, None, point)

        if menu.other or menu.tool:
            @precondition(lambda self: self.live)
            @rule(kind=st.sampled_from((*menu.other, *menu.tool)))
            def inject_fault(self, kind: str) -> None:
                """Arms a fault for its next opportunity inside the machine: a tool fault
                strikes its next tool call too, so a machine that calls its tools while it
                takes an event (no call left in flight to complete) meets them."""
                self._ask(f"inject_fault(kind={kind!r})", "arm", kind)

        @precondition(lambda self: not self._can(_ANY))
        @rule()
        def rest(self) -> None:
            """Nothing can happen (every execution has ended, or the machine failed): the run
            rests until Hypothesis ends it, rather than leaving no rule to run."""

        def teardown(self) -> None:
            link = self.link
            if link is None:
                return
            try:
                if self.live and not self.failed:
                    self._ask("teardown()", "teardown")
            finally:
                link.close()
                self.link = None

    WorkflowMachine.__name__ = WorkflowMachine.__qualname__ = (
        f"{_camel(definition.name)}Machine")
    # a simulated step may take long (a crash and its recovery, a loaded machine): no deadline
    # unless the settings given set one of their own
    chosen: Settings = settings if settings is not None else Settings()
    default = Settings.default
    if default is None or chosen.deadline == default.deadline:
        chosen = Settings(chosen, deadline=None)
    return chosen(WorkflowMachine)


#: What an example answers each request with: the kinds of the actions enabled, whether its
#: machine has not failed, its steps so far.
_State = tuple[frozenset[int], bool, int]


class _Shared(NamedTuple):
    """What every example of one Hypothesis machine shares."""

    definition: WorkflowDefinition
    machine: MachineFactory
    options: SimOptions
    simulator: Simulator
    checked: tuple[Invariant, ...]
    prefix: tuple[Invariant, ...]  # those that hold of a prefix: checked after each rule
    menu: _Menu
    folder: Path | None  # where replay files go


class _Example:
    """One example's run, where it runs (a child process, or here): the rules' work on it,
    the invariants after each, and the teardown. A failure raises `InvariantViolated`, or
    `MachineHung` when the watchdog stopped a step (which Hypothesis does not shrink: each run
    of it would take the step's bound)."""

    def __init__(self, shared: _Shared, seed: int, density: float, patience: float,
                 final: bool, stream: bool = False) -> None:
        self.shared = shared
        self.density, self.patience, self.final = density, patience, final
        self.choices = _DrivenChoices(seed, shared.menu.variants, stream)
        self.run = shared.simulator.begin(seed, choices=self.choices)
        if not self.run.start():
            failure = self.run.failure
            assert failure is not None
            self._fail(list(self._violations(complete=True)) or [Violation(
                "machine_ok", f"the machine {failure.problem} ({failure.error}): "
                              f"{failure.message}")])
        self._check()

    def state(self) -> _State:
        """Gives what the preconditions read: the kinds of the actions enabled now, and
        whether the machine has not failed; and the run's steps so far."""
        run = self.run
        if run.failure is not None:
            return frozenset(), False, run.clock.step
        return frozenset(action.kind for action in run.actions()), True, run.clock.step

    def act(self, kinds_of: frozenset[int], pick: int,
            fault: tuple[str, tuple[int, int]] | None = None, armed: str | None = None
            ) -> None:
        """Performs the `pick`-th enabled action of `kinds_of`, with the fault the rule drew
        from the menu's `fault[0]` kinds, or the fault `armed`."""
        if fault is not None:
            self._arm(self._fault(getattr(self.shared.menu, fault[0]), fault[1]))
        self._arm(armed)
        eligible = [i for i, action in enumerate(self.run.actions())
                    if action.kind in kinds_of]
        self.choices.forced = eligible[pick % len(eligible)]
        self.run.step()
        self._check()

    def advance(self, fault: tuple[int, int], now: int) -> None:
        if now < 100 - 100 * self.patience and not self.state()[0].isdisjoint(
                _ANY - {ADVANCE}):
            return
        self.act(frozenset({ADVANCE}), 0, ("clock", fault))

    def arm(self, kind: str) -> None:
        self._arm(kind)

    def _fault(self, kinds: tuple[str, ...], drawn: tuple[int, int]) -> str | None:
        """Gives the fault a rule arms: with the example's `density`, one of `kinds`."""
        roll, pick = drawn
        if not kinds or roll < 100 - 100 * self.density:
            return None
        return kinds[pick % len(kinds)]

    def _arm(self, fault: str | None) -> None:
        if fault is not None:
            self.choices.armed[fault] += 1

    def teardown(self) -> None:
        run, options = self.run, self.shared.options
        if run.failure is not None:
            return
        status = run.stopped()
        if status != "final" and options.liveness_steps:
            run.heal()
            status = run.steps(options.liveness_steps)
        run.finish(status)
        found = list(self._violations(complete=True))
        if found:
            self._fail(found)

    def _check(self) -> None:
        found = list(self._violations(complete=False))
        if found:
            self._fail(found)

    def _violations(self, *, complete: bool) -> Iterable[Violation]:
        for rule_ in self.shared.checked if complete else self.shared.prefix:
            yield from rule_.run(self.shared.definition, self.run.history)

    def _fail(self, found: list[Violation]) -> None:
        found.sort(key=lambda v: v.step)
        first, run, shared = found[0], self.run, self.shared
        failure = run.failure
        hung = failure is not None and failure.problem == "hung"
        path = None
        if shared.folder is not None and (self.final or hung):  # a hang is not shrunk
            example = Counterexample(
                shared.definition, shared.machine, run.seed,
                replace(shared.options, steps_max=(run.healed_at if run.healed
                                                   else run.clock.step)),
                tuple(c for c in self.choices.recorded if c.step <= first.step),
                {s: a for s, a in self.choices.actions.items() if s <= first.step},
                first, run.result("step_bound"))
            path = write_replay(example, shared.folder)
        trace = describe_steps(run.history, last=first.step)
        if hung:
            raise MachineHung(found, trace, path)
        raise InvariantViolated(found, trace, path)


class _Here:
    """An example run in this process."""

    def __init__(self, shared: _Shared) -> None:
        self.shared = shared
        self.example: _Example | None = None

    def ask(self, said: str, name: str, *args: Any) -> _State:
        """Has the example do `name` (`begin` makes it) for the rule `said`; gives its
        `state()` after."""
        return _answer(self, name, args)

    def close(self) -> None:
        self.example = None


def _answer(held: _Here, name: str, args: tuple[Any, ...],
            stream: bool = False) -> _State:
    if name == "begin":
        seed, density, patience, final = args
        held.example = _Example(held.shared, seed, density, patience, final, stream)
    else:
        assert held.example is not None
        getattr(held.example, name)(*args)
    return held.example.state()


class _Apart:
    """An example run in a child process the parent watches: each request is answered
    there, and a child that ends or hangs before it answers is the example's `machine_ok`
    failure. The choices the run draws come back as it draws them (`tell`), so that the
    replay file of a run whose process ended mid-step holds that step's draws too.

    The child outlives the example, for the machine's next one (`_kept`): a fork per example
    made the Hypothesis machine three times slower than in process, this about a third
    slower. Examples so share a process, as they did in the test's own."""

    def __init__(self, shared: _Shared, seed: int) -> None:
        self.shared, self.seed = shared, seed
        self.worker = _kept(shared)
        self.recorded: list[Choice] = []
        self.actions: dict[int, str] = {}
        self.asked: list[str] = []  # the rules run, as the trace of a run that died
        self.final = False
        self.steps = 0  # the run's steps as last answered

    def ask(self, said: str, name: str, *args: Any) -> _State:
        if name == "begin":
            self.final = args[-1]
        self.asked.append(f"state.{said}")
        self.worker.give(0, [(name, args)])
        try:
            (state,) = self.worker.take_watched(self._told)
        except isolation.Died as died:
            _end_kept()
            self._died(died)
        except (KeyboardInterrupt, SystemExit):  # here, while the child works: it is ended,
            _end_kept()  # so that no later example reads this one's answer
            raise
        finally:
            self.worker.given.clear()
        answer: _State = state
        self.steps = answer[2]
        return answer

    def _told(self, item: Any) -> None:
        choice, label = item
        if choice is not None:
            self.recorded.append(choice)
        else:
            step, text = label
            self.actions[step] = text

    def _died(self, died: isolation.Died) -> NoReturn:
        shared = self.shared
        if self.recorded:  # its draws came back: the step it died in is known
            step = max(c.step for c in self.recorded)
            where = f"in this example's step {step}"
        else:
            step, where = self.steps, f"after this example's step {self.steps}"
        found = [Violation("machine_ok", f"the machine ended its process ({died.how}) {where}",
                           step=step)]
        hung = died.hung is not None
        path = None
        if shared.folder is not None and (self.final or hung):
            assert shared.options.plan is not None
            ran = SimulationResult(self.seed, "machine_failed", step, 0, shared.options.plan,
                                   (), (), {})
            path = write_replay(Counterexample(
                shared.definition, shared.machine, self.seed,
                replace(shared.options, steps_max=step), tuple(self.recorded),
                dict(self.actions), found[0], ran), shared.folder)
        trace = ["(the run's history ended with its process; the rules run:)", *self.asked]
        if hung:
            raise MachineHung(found, trace, path) from None
        raise InvariantViolated(found, trace, path) from None

    def close(self) -> None:
        """Leaves the child to the machine's next example (see `_kept`)."""


#: The child the last Hypothesis machine's examples ran in, kept for its next one: (the
#: machine's shared part, the child). One at most: another machine's example ends it.
_KEPT: list[tuple[_Shared, isolation.Worker]] = []


def _kept(shared: _Shared) -> isolation.Worker:
    """Gives the child this machine's examples run in, made when there is none alive."""
    if _KEPT and _KEPT[0][0] is shared and _KEPT[0][1].process.is_alive():
        return _KEPT[0][1]
    _end_kept()
    held = _Here(shared)
    stream = shared.folder is not None

    def serve(batch: Sequence[tuple[str, tuple[Any, ...]]]) -> list[Any]:
        ((name, args),) = batch
        return [_answer(held, name, args, stream)]

    worker = isolation.Worker(serve)
    if not _KEPT and not _ENDS_AT_EXIT:
        atexit.register(_end_kept)  # before multiprocessing's, which only asks it to end
        _ENDS_AT_EXIT.append(True)
    _KEPT[:] = [(shared, worker)]
    return worker


_ENDS_AT_EXIT: list[bool] = []


def _end_kept() -> None:
    """Ends the kept child (told to stop, killed when it does not within five seconds)."""
    if _KEPT:
        (_, worker), = _KEPT
        _KEPT.clear()
        worker.given.clear()
        worker.close()


class _Menu(NamedTuple):
    """The faults the rules may arm, by the action they strike."""

    delivery: tuple[str, ...]  # with deliver_event
    tool: tuple[str, ...]  # with complete_call
    clock: tuple[str, ...]  # with advance_clock
    crash: tuple[str, ...]  # crash_and_recover's points
    other: tuple[str, ...]  # inject_fault: inside the machine, at its next chance
    variants: dict[str, tuple[str, ...]]


_DELIVERY_KINDS = frozenset({FaultKind.DUPLICATE_EVENT, FaultKind.LATE_EVENT,
                             FaultKind.REORDERED_EVENTS, FaultKind.DROPPED_EVENT,
                             FaultKind.FORGED_APPROVAL, FaultKind.WRONG_CORRELATION})


def _fault_menu(plan: FaultPlan, points: Sequence[str]) -> _Menu:
    """Gives the faults the rules may arm (each kind, each crash point, each variant)."""
    delivery: list[str] = []
    tool: list[str] = []
    clock: list[str] = []
    crash: list[str] = []
    other: list[str] = []
    variants: dict[str, tuple[str, ...]] = {}
    for kind in plan.kinds:
        entry = plan.get(kind)
        shapes = tuple(entry.variants) if entry is not None and entry.variants else ()
        if shapes:
            variants[str(kind)] = shapes
        named = [str(kind), *(f"{kind}:{shape}" for shape in shapes)]
        if kind is FaultKind.CRASH:
            crash += [f"crash:{point}" for point in (entry.points if entry and entry.points
                                                     else points)] or ["crash"]
        elif kind in _DELIVERY_KINDS:
            delivery += named
        elif kind in TOOL_FAULTS:
            tool += named
        elif kind is FaultKind.TIMER_SKEW:
            clock += named
        else:
            other += named
    return _Menu(tuple(delivery), tuple(tool), tuple(clock), tuple(crash), tuple(other),
                 variants)


def _final_example() -> bool:
    """Tells whether Hypothesis is running the example it will report (the shrunk one), so
    the replay file written is that one's, not one of the many tried while shrinking."""
    try:
        return bool(current_build_context().is_final)
    except Exception:  # outside a Hypothesis test: the example is the one there is
        return True


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.replace("-", "_").replace(
        ".", "_").split("_") if part)
