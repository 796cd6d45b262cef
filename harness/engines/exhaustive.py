"""Exhaustive bounded exploration: every schedule of a small definition, breadth-first, to a depth.

A state is what the run has reached after some steps: each execution as the machine stores it,
the events in flight, the timers, the world's ledger, and how much of the fault budget is left.
From each distinct state the explorer runs every way the next step can go: each enabled action,
and at each fault opportunity of that step, the fault or not (while the budget lasts), each
tool fault and variant. Runs are rebuilt from their choices (a stateless search: no machine is
copied), each new state is hashed, and a state seen before is not expanded again.

Breadth-first means the first violation found has the fewest steps there are. Without one, the
report says the invariants held within the bound, and over how many distinct states. Values
(payloads, roles) take their simplest form; invalid payloads count against the fault budget.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from fault_injection import FaultPlan
from harness.checks.coverage import Coverage, coverage_of, vacuity
from harness.checks.invariants import Invariant, Violation, invariants
from harness.engines import isolation
from harness.engines.shrink import Counterexample
from harness.errors import HarnessError
from harness.sim.choices import BRANCH, VALUE, RecordingChoices, Table, labels_of
from harness.sim.machine import MachineFactory, ReferenceMachine
from harness.sim.simulator import Run, SimOptions, Simulator, plan_for
from reference_machine import StoreError, WorkflowDefinition, load_definition

__all__ = ["ExploreOptions", "ExploreReport", "explore"]

_SERIAL = re.compile(r"\bev\d+\b")


@dataclass(frozen=True, slots=True)
class ExploreOptions:
    """How far to explore: `depth` steps, at most `faults_max` faults on a path, `executions`
    side by side; `states_max` and `time_budget_s` stop a search that grows too large (the
    report then says the bound was not covered). `plan` names the fault kinds considered (its
    rates are not used: every opportunity is tried both ways)."""

    depth: int = 6
    faults_max: int = 1
    executions: int = 1
    states_max: int = 200_000
    time_budget_s: float | None = None
    plan: FaultPlan | None = None
    invariants: tuple[str, ...] | None = None
    grant_rate: float = 0.5  # only whether both answers are possible matters
    step_timeout_s: float = 10.0  # wall time a step may take before the machine is `hung`
    context: Mapping[str, Any] = field(default_factory=dict)  # the executions' start context
    isolate: bool = True  # search in a child process (where the platform can fork)

    def __post_init__(self) -> None:
        for name, low in (("depth", 1), ("faults_max", 0), ("executions", 1),
                          ("states_max", 1)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise HarnessError(f"options.{name}: expected a whole number of at least "
                                   f"{low}, got {value!r}")


@dataclass(frozen=True, slots=True)
class ExploreReport:
    """What an exhaustive search found: whether every invariant held within the bound (`depth`
    explored completely, `complete`), over how many distinct states and runs; or the shortest
    violating trace."""

    definition: WorkflowDefinition
    depth: int
    states: int
    runs: int
    elapsed_s: float
    complete: bool
    counterexample: Counterexample | None = None
    vacuous: str = ""  # why what was explored exercised nothing ("" when it did)
    died: str = ""  # how the machine ended the search's process, when it did

    @property
    def held(self) -> bool:
        """Tells whether no invariant broke in what was explored, and it exercised the
        machine (no declared transition taken within the bound is `vacuous`)."""
        return self.counterexample is None and not self.vacuous and not self.died

    @property
    def violation(self) -> Violation | None:
        """Gives what broke: the counterexample's violation, or `machine_ok` for a machine
        that ended the search's process (which no schedule replays: fuzz it for one)."""
        if self.counterexample is not None:
            return self.counterexample.violation
        if self.died:
            return Violation("machine_ok", f"the machine ended its process ({self.died}) "
                                           "during the search; no replay file: `fsmharness "
                                           "fuzz` the target for a run that replays")
        return None

    @property
    def states_per_second(self) -> float:
        """Gives distinct states found per second of wall time."""
        return self.states / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def summary(self) -> str:
        """Gives the verdict in one sentence."""
        if self.counterexample is not None:
            violation = self.counterexample.violation
            return (f"violated at depth {violation.step}: {violation} ({self.states:,} distinct "
                    f"states explored)")
        if self.died:
            return f"violated {self.violation}"
        if self.vacuous:
            return f"vacuous within bound {self.depth}: {self.vacuous}"
        if self.complete:
            return f"held within bound {self.depth} ({self.states:,} distinct states)"
        return (f"held as far as explored: every schedule to depth {self.depth} covered, depth "
                f"{self.depth + 1} not covered, stopped at {self.states:,} distinct states")


class _Exploring(RecordingChoices):
    """Choices from a list of option indices (a path's prefix); past its end, each choice point
    takes option 0 and is noted with its number of options, for the search to branch on.
    Faults are options only while the path's budget lasts."""

    paced = False

    def __init__(self, prefix: Sequence[int], faults_max: int) -> None:
        super().__init__(0)
        self.prefix = prefix
        self.cursor = 0
        self.faults_left = faults_max
        self.found: list[int] = []  # option counts of the points past the prefix

    def _choose(self, options: int) -> int:
        if options <= 1:
            return 0
        if self.cursor < len(self.prefix):
            index = min(self.prefix[self.cursor], options - 1)
        else:
            index = 0
            self.found.append(options)
        self.cursor += 1
        return index

    def random(self) -> float:
        return self._record(VALUE, 0.0)

    def below(self, n: int) -> int:
        self._record(VALUE, 0.0)
        return 0

    def action(self, actions: Sequence[Any], label: Callable[[Any], str]) -> int:
        index = self._choose(len(actions))
        self._record(BRANCH, (index + 0.5) / len(actions))
        self.actions[self.step] = labels_of(actions, label)[index]
        return index

    def branch(self, n: int) -> int:
        index = self._choose(n)
        self._record(BRANCH, (index + 0.5) / n)
        return index

    def flip(self, p: float) -> bool:
        if p <= 0.0 or p >= 1.0:
            self._record(BRANCH, 0.0 if p >= 1.0 else 1.0)
            return p >= 1.0
        yes = self._choose(2) == 0
        self._record(BRANCH, 0.0 if yes else 1.0)
        return yes

    def chance(self, kind: str, rate: float, where: str = "") -> bool:
        fire = rate > 0 and self.faults_left > 0 and self._choose(2) == 1
        if fire:
            self.faults_left -= 1
        self._record(f"f:{kind}", 0.0 if fire else 1.0)
        return fire

    def pick(self, site: str, table: Table) -> Any:
        bands = fault_bands(table)  # a kind whose rates leave it no room is never met
        if not bands or self.faults_left <= 0:
            self._record(f"f:{site}", 1.0)
            return None
        index = self._choose(len(bands) + 1)
        if index == 0:
            self._record(f"f:{site}", 1.0)
            return None
        self.faults_left -= 1
        low, high, kind = bands[index - 1]
        self._record(f"f:{site}", (low + high) / 2)
        return kind


def fault_bands(table: Table) -> list[tuple[float, float, Any]]:
    """Gives (low, high, kind) for each tool fault a draw can meet: a kind the cumulative rates
    before it leave no room for (its threshold capped at 1) is left out."""
    bands, low = [], 0.0
    for threshold, kind in table:
        if threshold > low:
            bands.append((low, threshold, kind))
        low = max(low, threshold)
    return bands


def explore(target: WorkflowDefinition | str | Mapping[str, Any],
            options: ExploreOptions | None = None, *,
            machine: MachineFactory = ReferenceMachine,
            progress: Callable[[int, int], None] | None = None) -> ExploreReport:
    """Explores every schedule of `target` on `machine` breadth-first to `options.depth` steps;
    gives the verdict (held within the bound over K distinct states, or the shortest violating
    trace). `progress(depth, states)` is called as each depth is finished."""
    options = options if options is not None else ExploreOptions()
    definition = target if isinstance(target, WorkflowDefinition) else load_definition(target)
    plan = options.plan if options.plan is not None else plan_for(definition)
    if plan.swarm:
        plan = replace(plan, swarm=False)
    sim_options = SimOptions(executions=options.executions, steps_max=options.depth,
                             plan=plan, liveness_steps=0, grant_rate=options.grant_rate,
                             step_timeout_s=options.step_timeout_s,
                             context=dict(options.context))
    simulator = Simulator(definition, sim_options, machine)
    checked = invariants(options.invariants)
    search = _Search(definition, simulator, machine, options, checked)
    if not (options.isolate and isolation.available()):
        return search.run(progress)
    # apart: a machine that ends or hangs its process ends only the child's, and the verdict
    # is the parent's; the definition and machine stay behind (a closure does not cross)
    def work() -> ExploreReport:
        found = search.run(lambda depth, states: isolation.tell((depth, states)))
        example = found.counterexample
        if example is not None:
            example = replace(example, definition=None, machine=None)  # type: ignore[arg-type]
        return replace(found, definition=None, counterexample=example)  # type: ignore[arg-type]

    covered = [0, 0]  # the depth last finished and its distinct states, as the child told

    def told(item: Any) -> None:
        covered[:] = item
        if progress is not None:
            progress(*item)

    try:
        found = isolation.call(work, told)
    except isolation.Died as died:
        return ExploreReport(definition, covered[0], covered[1], 0,
                             time.monotonic() - search.started, False, died=died.how)
    example = found.counterexample
    return replace(found, definition=definition, counterexample=None if example is None else
                   replace(example, definition=definition, machine=machine))


class _Search:
    def __init__(self, definition: WorkflowDefinition, simulator: Simulator,
                 machine: MachineFactory, options: ExploreOptions,
                 checked: tuple[Invariant, ...]) -> None:
        self.definition, self.simulator, self.machine = definition, simulator, machine
        self.options, self.checked = options, checked
        self.prefix_rules = tuple(r for r in checked if not r.final_only)
        self.seen: set[str] = set()
        self.moved: set[tuple[str, str, str]] = set()  # the moves runs took, for vacuity
        self.runs = 0
        self.started = time.monotonic()

    def out_of_budget(self) -> bool:
        budget = self.options.time_budget_s
        return len(self.seen) >= self.options.states_max or (
            budget is not None and time.monotonic() - self.started > budget)

    def play(self, path: Sequence[int], steps: int) -> tuple[Run, _Exploring]:
        """Runs a path's choices for `steps` steps (past the path: option 0 everywhere)."""
        self.runs += 1
        choices = _Exploring(path, self.options.faults_max)
        run = self.simulator.begin(0, choices=choices)
        if run.start():
            for _ in range(steps):
                if not run.step():
                    break
        return run, choices

    def judge(self, run: Run) -> Violation | None:
        """Gives the first violation of the run so far; a run that cannot go on is at its
        end, so the checks of an ending (a stuck execution) apply too."""
        complete = run.failure is not None or not run.actions()
        rules = self.checked if complete else self.prefix_rules
        if complete and run.failure is None:
            run.finish(run.stopped())
        found = [v for rule in rules for v in rule.run(self.definition, run.history)]
        self.moved |= coverage_of(self.definition, run.history, guards=False).transitions
        return min(found, key=lambda v: v.step) if found else None

    def run(self, progress: Callable[[int, int], None] | None) -> ExploreReport:
        root, _ = self.play((), 0)
        if root.failure is not None:
            violation = self.judge(root)
            assert violation is not None
            return self.report(0, False, self.counterexample(root, _, violation))
        frontier: list[list[int]] = [[]]
        self.seen.add(_fingerprint(root))
        root.close()
        depth = 0
        while frontier and depth < self.options.depth:
            depth += 1
            next_frontier: list[list[int]] = []
            for path in frontier:
                for full, run, choices in self.successors(path, depth):
                    violation = self.judge(run)
                    if violation is not None:
                        return self.report(depth, False,
                                           self.counterexample(run, choices, violation))
                    if run.clock.step < depth:
                        continue  # nothing could happen any more: this path ended well
                    key = _fingerprint(run)
                    if key not in self.seen:
                        self.seen.add(key)
                        next_frontier.append(full)
                    if self.out_of_budget():
                        return self.report(depth - 1, False)
            frontier = next_frontier
            if progress is not None:
                progress(depth, len(self.seen))
        return self.report(self.options.depth, True)

    def successors(self, path: list[int], depth: int
                   ) -> Iterator[tuple[list[int], Run, _Exploring]]:
        """Gives every way the step after `path` can go: (its full choices, the run, its
        choices), enumerating each choice point's options depth-first."""
        pending: list[list[int]] = [path]
        while pending:
            prefix = pending.pop()
            run, choices = self.play(prefix, depth)
            found = choices.found
            try:
                yield prefix + [0] * len(found), run, choices
            finally:  # its timer would tick on past the search, and its machines stay open
                run.close()
            for position in range(len(found) - 1, -1, -1):
                for option in range(found[position] - 1, 0, -1):
                    pending.append(prefix + [0] * position + [option])

    def counterexample(self, run: Run, choices: _Exploring,
                       violation: Violation) -> Counterexample:
        options = replace(self.simulator.options, steps_max=max(run.clock.step, 1))
        kept = tuple(c for c in choices.recorded if c.step <= violation.step)
        actions = {s: a for s, a in choices.actions.items() if s <= violation.step}
        return Counterexample(self.definition, self.machine, 0, options, kept,
                              MappingProxyType(actions), violation, run.result("step_bound"),
                              self.runs, violation.step)

    def report(self, depth: int, complete: bool,
               counterexample: Counterexample | None = None) -> ExploreReport:
        vacuous = "" if counterexample is not None else vacuity(
            self.definition, Coverage(transitions=frozenset(self.moved)))
        return ExploreReport(self.definition, depth, len(self.seen), self.runs,
                             time.monotonic() - self.started, complete, counterexample,
                             vacuous)


def _fingerprint(run: Run) -> str:
    """Gives the state a run reached, with the serial event ids renamed in order of
    appearance (states equal up to the names of fresh ids behave alike)."""
    now = run.clock.now
    machine = run.machine
    describe = getattr(machine, "fingerprint", None)
    executions: list[tuple[Any, ...]] = []
    for eid in run.ids:  # the unstarted too: a start that crashed may have left a record
        stored = None
        if describe is not None:
            try:
                stored = describe(eid, now)
            except (StoreError, KeyError):
                stored = None  # the machine knows nothing of it yet
        obs = run.obs.get(eid)
        if obs is None:
            executions.append((eid, "unseen", stored))
            continue
        approval = obs.approval
        executions.append((
            eid, obs.state, obs.status, obs.outcome,
            tuple(sorted((timer, at - now) for timer, at in obs.timers)),
            None if approval is None else (approval.request_id, approval.action_hash,
                                           approval.expires_at - now),
            tuple(call.id for call in obs.calls), stored,
        ))
    consumed = getattr(machine, "consumed", None)
    queue = tuple((q.due - now, q.execution, q.event.type, q.event.source, q.event.answers,
                   _canonical(q.event.payload), q.via, q.event.id,
                   bool(consumed(q.execution, q.event.id)) if consumed else None)
                  for q in run.delivery.queue)
    world = run.world
    state = (
        tuple(run.unstarted), tuple(executions), queue, run.timekeeper.offset,
        run.timekeeper.machine_time - now, tuple(sorted(run.approver.last_request.items())),
        tuple((e.execution, e.tool, e.input) for e in world.ledger.entries),
        tuple(sorted((tool, key, _canonical(out)) for (tool, key), out in
                     world._outputs.items())),
        tuple(sorted((landing.due - now, landing.execution, landing.tool, landing.key)
                     for landing in world._landings)),
        run.ctx.rng.faults_left if isinstance(run.ctx.rng, _Exploring) else None,
        run.machinery.worker is not None, tuple(world.agent_noise),
        tuple(sorted(run.sender.sent.items())),  # what the sender has left to send
    )
    text = repr(state)
    names: dict[str, str] = {}

    def rename(match: re.Match[str]) -> str:
        return names.setdefault(match.group(0), f"ev#{len(names)}")

    return _SERIAL.sub(rename, text)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
