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
Hypothesis found replays natively. Settings are Hypothesis's own: set them on the class with
`@settings(...)`, on `TestCase.settings`, through a profile, or with `settings=` here; the
deadline is off unless those set one (a step with a crash and its recovery takes a while).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

from hypothesis import settings as Settings
from hypothesis import strategies as st
from hypothesis.control import current_build_context
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from fault_injection import TOOL_FAULTS, FaultKind, FaultPlan
from harness.checks.checkers import Invariant, Violation, invariants
from harness.engines.exhaustive import _bands
from harness.engines.replay import write_replay
from harness.engines.shrink import Counterexample
from harness.errors import HarnessError
from harness.report.trace import describe_steps
from harness.sim.choices import BRANCH, RecordingChoices, Table, labels_of
from harness.sim.machine import MachineFactory, ReferenceMachine
from harness.sim.simulator import (
    _ADVANCE,
    _APPROVE,
    _COMPLETE,
    _EXTERNAL,
    _QUEUED,
    _START,
    PATIENCE,
    SimOptions,
    Simulator,
    _Run,
    plan_for,
)
from reference_machine import WorkflowDefinition

__all__ = ["InvariantViolated", "workflow_machine"]


class InvariantViolated(AssertionError):
    """An invariant broke in a Hypothesis-driven run; `violations` holds what broke."""

    def __init__(self, violations: Sequence[Violation], trace: Sequence[str],
                 replay_file: Path | None) -> None:
        self.violations = tuple(violations)
        self.replay_file = replay_file
        lines = [str(v) for v in violations]
        lines += ["trace:", *(f"  {line}" for line in trace)]
        if replay_file is not None:
            lines.append(f"replay: fsmharness replay {replay_file}")
        super().__init__("\n".join(lines))


class _DrivenChoices(RecordingChoices):
    """The run's choices when Hypothesis drives: the action a rule chose, the faults a rule
    armed (each strikes at its next opportunity, and no other does), values from the seed.
    Every draw is recorded, so the run replays without Hypothesis.

    A fault is armed by kind (`crash`), or aimed: `crash:<point>` strikes at that crash point
    only, `forged_approval:<variant>` and `malformed_output:<variant>` take that shape."""

    paced = False

    def __init__(self, seed: int, variants: dict[str, tuple[str, ...]]) -> None:
        super().__init__(seed)
        self.armed: Counter[str] = Counter()
        self.forced: int | None = None
        self.variants = variants
        self.shape: int | None = None  # the variant the next branch draw takes

    def action(self, actions: Sequence[Any], label: Any) -> int:
        index = self.forced if self.forced is not None else 0
        self.forced = None
        self._record(BRANCH, (index + 0.5) / len(actions))
        self.actions[self.step] = labels_of(actions, label)[index]
        return index

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
        for low, high, kind in _bands(table):  # only kinds a draw can meet
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
_DELIVER = frozenset({_EXTERNAL, _APPROVE, _QUEUED})
_ANY = frozenset({_START, _COMPLETE, _APPROVE, _EXTERNAL, _QUEUED, _ADVANCE})


def workflow_machine(definition: WorkflowDefinition, *,
                     machine: MachineFactory = ReferenceMachine,
                     options: SimOptions | None = None,
                     plan: FaultPlan | None = None,
                     only: Iterable[str] | None = None,
                     replay_dir: str | os.PathLike[str] | None = None,
                     settings: Settings | None = None) -> type[RuleBasedStateMachine]:
    """Gives a `RuleBasedStateMachine` that tests `machine` running `definition`.

    `options` shapes the runs (executions, the liveness phase; its step bound is Hypothesis's
    `stateful_step_count`), `plan` the faults a rule may inject (every kind the definition can
    take by default), `only` the invariants checked (all by default)."""
    base = options if options is not None else SimOptions()
    chosen_plan = plan if plan is not None else (base.plan if base.plan is not None
                                                 else plan_for(definition))
    if chosen_plan.swarm:
        raise HarnessError("a Hypothesis machine injects the faults its rules arm: give a plan "
                           "without swarm mode")
    sim_options = replace(base, plan=chosen_plan)
    simulator = Simulator(definition, sim_options, machine)
    checked: tuple[Invariant, ...] = invariants(only)
    prefix_rules = tuple(rule_ for rule_ in checked if not rule_.final_only)
    menu = _fault_menu(chosen_plan, getattr(machine, "crash_points", ()))
    variants = menu.variants
    folder = None if replay_dir is None else Path(replay_dir)

    class WorkflowMachine(RuleBasedStateMachine):
        """Runs the workflow one rule at a time; see `harness.stateful`."""

        def __init__(self) -> None:
            super().__init__()
            self.run: _Run | None = None
            self.choices: _DrivenChoices | None = None
            self.failed = False  # teardown runs after a failure too, and must not fail again

        @initialize(seed=st.integers(min_value=0, max_value=2**32 - 1),
                    density=st.sampled_from(DENSITY), patience=st.sampled_from(PATIENCE))
        def begin(self, seed: int, density: float, patience: float) -> None:
            self.density, self.patience = density, patience
            self.choices = _DrivenChoices(seed, variants)
            self.run = simulator.begin(seed, choices=self.choices)
            if not self.run.start():
                failure = self.run.failure
                assert failure is not None
                found = list(self._violations(self.run, complete=True)) or [Violation(
                    "machine_ok", f"the machine {failure.problem} ({failure.error}): "
                                  f"{failure.message}")]
                self._fail(found)

        def _enabled(self, kinds_of: frozenset[int]) -> list[int]:
            assert self.run is not None
            return [i for i, action in enumerate(self.run.actions()) if action[0] in kinds_of]

        def _can(self, kinds_of: frozenset[int]) -> bool:
            return (self.run is not None and self.run.failure is None
                    and bool(self._enabled(kinds_of)))

        def _act(self, kinds_of: frozenset[int], pick: int) -> None:
            assert self.run is not None and self.choices is not None
            eligible = self._enabled(kinds_of)
            self.choices.forced = eligible[pick % len(eligible)]
            self.run.step()

        @precondition(lambda self: self._can(frozenset({_START})))
        @rule(pick=st.integers(min_value=0, max_value=255))
        def start_execution(self, pick: int) -> None:
            self._act(frozenset({_START}), pick)

        @precondition(lambda self: self._can(_DELIVER))
        @rule(pick=st.integers(min_value=0, max_value=255), fault=FAULT)
        def deliver_event(self, pick: int, fault: tuple[int, int]) -> None:
            """Delivers an event the execution's state takes, an approval decision or a
            queued copy; `fault` strikes this delivery (or the next one it can)."""
            self._arm(self._fault(menu.delivery, fault))
            self._act(_DELIVER, pick)

        @precondition(lambda self: self._can(frozenset({_COMPLETE})))
        @rule(pick=st.integers(min_value=0, max_value=255), fault=FAULT)
        def complete_call(self, pick: int, fault: tuple[int, int]) -> None:
            """Lets a tool call in flight reach its tool; `fault` is what the tool does."""
            self._arm(self._fault(menu.tool, fault))
            self._act(frozenset({_COMPLETE}), pick)

        @precondition(lambda self: self._can(frozenset({_ADVANCE})))
        @rule(fault=FAULT, now=st.integers(min_value=0, max_value=99))
        def advance_clock(self, fault: tuple[int, int], now: int) -> None:
            """Moves the clock to what is due next; a run that holds the clock back
            (`patience`) moves it only on a `now` that high, while anything else can happen."""
            if now < 100 - 100 * self.patience and self._can(_ANY - {_ADVANCE}):
                return
            self._arm(self._fault(menu.clock, fault))
            self._act(frozenset({_ADVANCE}), 0)

        def _fault(self, kinds: tuple[str, ...], drawn: tuple[int, int]) -> str | None:
            """Gives the fault a rule arms: with the example's `density`, one of `kinds`."""
            roll, pick = drawn
            if not kinds or roll < 100 - 100 * self.density:
                return None
            return kinds[pick % len(kinds)]

        if menu.crash:
            @precondition(lambda self: self._can(_ANY))
            @rule(pick=st.integers(min_value=0, max_value=255),
                  point=st.sampled_from(menu.crash))
            def crash_and_recover(self, pick: int, point: str) -> None:
                """The process dies at `point` in the middle of its next action that passes
                it (later ones', if that one does not), and recovers."""
                self._arm(point)
                self._act(_ANY, pick)

        if menu.other or menu.tool:
            @precondition(lambda self: self.run is not None and self.run.failure is None)
            @rule(kind=st.sampled_from((*menu.other, *menu.tool)))
            def inject_fault(self, kind: str) -> None:
                """Arms a fault for its next opportunity inside the machine: a tool fault
                strikes its next tool call too, so a machine that calls its tools while it
                takes an event (no call left in flight to complete) meets them."""
                self._arm(kind)

        @precondition(lambda self: not self._can(_ANY))
        @rule()
        def rest(self) -> None:
            """Nothing can happen (every execution has ended, or the machine failed): the run
            rests until Hypothesis ends it, rather than leaving no rule to run."""

        def _arm(self, fault: str | None) -> None:
            if fault is not None:
                assert self.choices is not None
                self.choices.armed[fault] += 1

        @invariant()
        def invariants_hold(self) -> None:
            if self.run is None:
                return
            found = list(self._violations(self.run, complete=False))
            if found:
                self._fail(found)

        def teardown(self) -> None:
            run = self.run
            if run is None or run.failure is not None or self.failed:
                return
            status = run.stopped()
            if status != "final" and sim_options.liveness_steps:
                run.heal()
                status = run.steps(sim_options.liveness_steps)
            run.finish(status)
            found = list(self._violations(run, complete=True))
            if found:
                self._fail(found)

        def _violations(self, run: _Run, *, complete: bool) -> Iterable[Violation]:
            rules = checked if complete else prefix_rules
            for rule_ in rules:
                yield from rule_.run(definition, run.history)

        def _fail(self, found: list[Violation]) -> None:
            assert self.run is not None and self.choices is not None
            self.failed = True
            found.sort(key=lambda v: v.step)
            first = found[0]
            path = None
            if folder is not None and _final_example():
                example = Counterexample(
                    definition, machine, self.run.seed,
                    replace(sim_options, steps_max=(self.run.healed_at if self.run.healed
                                                    else self.run.clock.step)),
                    tuple(c for c in self.choices.recorded if c.step <= first.step),
                    {s: a for s, a in self.choices.actions.items() if s <= first.step},
                    first, self.run.result("step_bound"))
                path = write_replay(example, folder)
            raise InvariantViolated(found, describe_steps(self.run.history, last=first.step),
                                    path)

    WorkflowMachine.__name__ = WorkflowMachine.__qualname__ = (
        f"{_camel(definition.name)}Machine")
    # a simulated step may take long (a crash and its recovery, a loaded machine): no deadline
    # unless the settings given set one of their own
    chosen: Settings = settings if settings is not None else Settings()
    default = Settings.default
    if default is None or chosen.deadline == default.deadline:
        chosen = Settings(chosen, deadline=None)
    return chosen(WorkflowMachine)


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
