"""Shrinking: a failing run becomes the smallest schedule that still breaks the same invariant.

The failing seed is run again recording every choice (`RecordingChoices`), which gives the same
run. Then delta debugging over that schedule, each candidate replayed with `ScriptedChoices`
and checked for the same rule:

1. shorten: stop the safety phase at the step the violation appeared in;
2. drop an execution, with every step that acted on it (the others are renamed down);
3. drop faults (ddmin over the fault draws: a dropped draw strikes nothing);
4. drop whole steps (later steps move up one, so the rest stays aligned);
5. the first option at each scheduler choice, and the simplest values.

Each step's action is replayed by its label ("complete x1 pay.charge"), not by its position
among the enabled actions, so dropping one step leaves the others doing what they did.

A candidate is kept when it breaks the rule in fewer steps, or as many steps with fewer faults,
or with a shorter schedule. Each kept run's own record becomes the next schedule, so what
remains is only what that run drew.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from fault_injection import FaultKind, FaultPlan, FaultRate
from harness.checks.invariants import Invariant, Violation, invariants
from harness.errors import HarnessError
from harness.report.trace import describe_steps
from harness.sim.choices import (
    BRANCH,
    FAULT,
    VALUE,
    Choice,
    RecordingChoices,
    ScriptedChoices,
    default,
    moves_label,
    moves_of,
)
from harness.sim.history import Applied, FaultInjected, HistoryRecord
from harness.sim.machine import MachineFactory, ReferenceMachine
from harness.sim.run import OUT_OF_TIME
from harness.sim.simulator import SimOptions, SimulationResult, Simulator
from reference_machine import WorkflowDefinition

__all__ = ["Counterexample", "NotReproduced", "shrink"]

Key = tuple[int, str, int]
#: What a fault, and an execution past the first, cost a reader, in steps (`_Candidate.size`).
FAULT_COST, EXECUTION_COST = 2, 8
Script = dict[Key, float]


class NotReproduced(HarnessError):
    """A seed broke a rule once and not when run again: the machine is not deterministic."""

    def __init__(self, seed: int, rule: str) -> None:
        self.seed, self.rule = seed, rule
        super().__init__(f"seed {seed} broke {rule!r} once but not when run again: the machine "
                         "under test is not deterministic (does it read the wall clock, global "
                         "random, or keep state between runs?)")

    def __reduce__(self) -> tuple[type[NotReproduced], tuple[int, str]]:
        return NotReproduced, (self.seed, self.rule)  # it crosses from a worker process


@dataclass(frozen=True, slots=True)
class Counterexample:
    """A schedule that breaks `violation.rule`: the seed, the options and the recorded choices
    replay it exactly (`replay_file` writes them down; `harness.replay` reads them back)."""

    definition: WorkflowDefinition
    machine: MachineFactory
    seed: int
    options: SimOptions
    choices: tuple[Choice, ...]
    actions: Mapping[int, str]
    violation: Violation
    result: SimulationResult
    runs: int = 0  # the runs shrinking took
    original_steps: int = 0

    @property
    def steps(self) -> int:
        """Gives the trace's length: the step the violation appeared in."""
        return self.violation.step

    @property
    def faults(self) -> int:
        """Gives how many faults the trace injects before the violation."""
        return sum(1 for r in self.result.history
                   if type(r) is FaultInjected and r.step <= self.violation.step)

    def trace(self) -> list[str]:
        """Gives the trace as readable steps, up to the violation."""
        return describe_steps(self.result.history, last=self.violation.step)


@dataclass(slots=True)
class _Candidate:
    options: SimOptions
    script: Script
    actions: dict[int, str]
    violation: Violation
    result: SimulationResult
    choices: tuple[Choice, ...]

    def size(self) -> tuple[int, int, int, int]:
        """Gives how hard the trace is to read: its steps, a fault counted as `FAULT_COST`
        steps and each execution past the first as `EXECUTION_COST` (one more to follow);
        then fewer steps, fewer faults, fewer draws."""
        faults = sum(1 for r in self.result.history
                     if type(r) is FaultInjected and r.step <= self.violation.step)
        steps = self.violation.step
        return (steps + FAULT_COST * faults + EXECUTION_COST * (self.options.executions - 1),
                steps, faults, len(self.script) + len(self.actions))


class _Shrinker:
    def __init__(self, definition: WorkflowDefinition, machine: MachineFactory, seed: int,
                 rule: Invariant, runs_max: int, deadline: float | None) -> None:
        self.definition, self.machine, self.seed, self.rule = definition, machine, seed, rule
        self.runs_max, self.deadline = runs_max, deadline
        self.runs = 0
        self.safety = True  # the violation shows in the safety phase (cleared if it does not)
        self._simulators: dict[tuple[Any, ...], Simulator] = {}
        self.first_s = 0.0  # how long the failing run took

    def simulator(self, options: SimOptions) -> Simulator:
        # building one fills Faker's pools: one per shape of options
        key = (options.executions, options.steps_max, options.plan,
               json.dumps(dict(options.context), sort_keys=True))
        simulator = self._simulators.get(key)
        if simulator is None:
            simulator = self._simulators[key] = Simulator(self.definition, options,
                                                          self.machine)
        return simulator

    def _shorter_lists(self, best: _Candidate) -> Iterator[_Schedule]:
        """Shortens each list of the start context (a batch's items, say) to its first half,
        then its first item: a failure that needs one item reads in fewer steps."""
        context = {**self.definition.initial_context, **best.options.context}
        for key in sorted(context):
            value = context[key]
            if not isinstance(value, list) or len(value) < 2:
                continue
            for size in dict.fromkeys((len(value) // 2, 1)):
                yield (replace(best.options, context={**best.options.context,
                                                      key: value[:size]}),
                       best.script, best.actions)

    def _attempt_deadline(self) -> float | None:
        """Gives when an attempt is cut short: at the budget's end, and long before it for
        a schedule whose run is far slower than the failing run was (a machine that loops
        on the defaults past the violation), so the others get their turn."""
        now = time.monotonic()
        cut = now + max(ATTEMPT_MIN_S, ATTEMPT_SLOWER * self.first_s)
        return cut if self.deadline is None else min(cut, self.deadline)

    def out_of_budget(self) -> bool:
        return self.runs >= self.runs_max or (
            self.deadline is not None and time.monotonic() > self.deadline)

    def attempt(self, schedule: _Schedule) -> _Candidate | None:
        """Runs a schedule; gives it if it still breaks the rule."""
        options, script, actions = schedule
        self.runs += 1
        choices = ScriptedChoices(script, actions)
        result = self.simulator(options).run(self.seed, choices=choices,
                                             deadline=self._attempt_deadline())
        if result.status == OUT_OF_TIME:
            return None  # cut short: not a whole run, so not a counterexample
        return self._judge(options, result, choices)

    def _judge(self, options: SimOptions, result: SimulationResult,
               choices: RecordingChoices) -> _Candidate | None:
        found = self.rule.run(self.definition, result.history)
        if not found:
            return None
        first = min(found, key=lambda v: v.step)
        if self.safety and first.step > options.steps_max:
            return None  # broken only after the faults healed, where no schedule reaches
        kept = tuple(c for c in choices.recorded if c.step <= first.step)
        struck = choices.struck  # a fault draw that did not strike is the default's decision
        script = {(c.step, c.tag, c.n): c.u for c in kept if c.u != default(c.tag)
                  and (c.tag[0] != FAULT or (c.step, c.tag, c.n) in struck)}
        actions = {step: label for step, label in choices.actions.items()
                   if step <= first.step}
        return _Candidate(options, script, actions, first, result, kept)

    def record(self, options: SimOptions, start: Script | None = None,
               bounded: bool = False) -> _Candidate:
        """Records the run of `options` (whole; within the budget when `bounded`); raises
        `NotReproduced` when it does not break the rule."""
        choices = RecordingChoices(self.seed) if start is None else ScriptedChoices(start)
        began = time.monotonic()
        result = self.simulator(options).run(self.seed, choices=choices,
                                             deadline=self.deadline if bounded else None)
        self.first_s = max(self.first_s, time.monotonic() - began)
        self.runs += 1
        if result.status == OUT_OF_TIME:
            raise NotReproduced(self.seed, self.rule.name)
        self.safety = False
        found = self._judge(options, result, choices)
        self.safety = found is not None and found.violation.step <= options.steps_max
        if found is None:
            raise NotReproduced(self.seed, self.rule.name)
        return found

    def shrink(self, best: _Candidate) -> _Candidate:
        passes: tuple[Callable[[_Candidate], Iterator[_Schedule]], ...] = (
            _shorten, _drop_executions, _drop_faults, _merge_clock, self._shorter_lists,
            _drop_steps, _other_faults, _first_branches, _simplest_values)
        changed = True
        while changed and not self.out_of_budget():
            changed = False
            for make in passes:
                progress = True
                while progress and not self.out_of_budget():
                    progress = False
                    for schedule in make(best):
                        if self.out_of_budget():
                            break
                        candidate = self.attempt(schedule)
                        if candidate is not None and candidate.size() < best.size():
                            best, progress, changed = candidate, True, True
                            break
        return best


_Schedule = tuple[SimOptions, Script, dict[int, str]]


def _shorten(best: _Candidate) -> Iterator[_Schedule]:
    steps = best.violation.step
    if 0 < steps < best.options.steps_max:
        yield replace(best.options, steps_max=steps), best.script, best.actions
    half = best.options.steps_max // 2
    if 0 < half < steps:
        yield replace(best.options, steps_max=half), best.script, best.actions


def _without_steps(best: _Candidate, dropped: set[int]) -> tuple[Script, dict[int, str]]:
    """Gives the schedule without the `dropped` steps, later steps moved up to close the gap."""
    order = sorted(dropped)

    def moved(step: int) -> int:
        return step - sum(1 for d in order if d < step)

    script = {(moved(s), tag, n): u for (s, tag, n), u in best.script.items()
              if s not in dropped}
    actions = {moved(s): label for s, label in best.actions.items() if s not in dropped}
    return script, actions


def _drop_executions(best: _Candidate) -> Iterator[_Schedule]:
    count = best.options.executions
    keep = best.violation.execution
    for number in range(count, 0, -1):
        gone = f"x{number}"
        if count == 1 or gone == keep:
            continue
        dropped = {s for s, label in best.actions.items() if gone in _executions_in(label)}
        script, actions = _without_steps(best, dropped)
        # the executions after it take its place: x3 becomes x2
        renamed = {s: _rename(label, number, count) for s, label in actions.items()}
        yield (replace(best.options, executions=count - 1,
                       steps_max=max(1, best.options.steps_max - len(dropped))),
               script, renamed)


_EXECUTION = re.compile(r"\bx(\d+)\b")


def _executions_in(label: str) -> set[str]:
    """Gives the executions an action's label names (in its own words and in its ids)."""
    return {f"x{number}" for number in _EXECUTION.findall(label)}


def _rename(label: str, gone: int, count: int) -> str:
    """Renames the executions after `gone` down by one, wherever the label names them."""
    def down(match: re.Match[str]) -> str:
        number = int(match.group(1))
        return f"x{number - 1}" if gone < number <= count else match.group(0)
    return _EXECUTION.sub(down, label)


def _subsets(keys: list[Key]) -> Iterator[list[Key]]:
    """Gives the chunks of `keys` to try removing, coarse to fine (ddmin's order)."""
    chunks = 1
    while keys and chunks <= len(keys):
        size = -(-len(keys) // chunks)
        for start in range(0, len(keys), size):
            yield keys[start:start + size]
        chunks *= 2


def _without(script: Script, removed: Sequence[Key]) -> Script:
    gone = set(removed)
    return {key: u for key, u in script.items() if key not in gone}


def _drop_faults(best: _Candidate) -> Iterator[_Schedule]:
    keys = sorted(key for key in best.script if key[1][0] == FAULT)
    for chunk in _subsets(keys):
        yield best.options, _without(best.script, chunk), best.actions


def _drop_steps(best: _Candidate) -> Iterator[_Schedule]:
    """Drops runs of steps before the violation: long runs first, then pairs, then one."""
    last = best.violation.step
    steps = list(range(1, last))
    for width in (*(w for w in (last // 2, last // 4) if w > 2), 2, 1):
        for start in range(len(steps) - width, -1, -1):
            dropped = set(steps[start:start + width])
            options = replace(best.options,
                              steps_max=max(1, best.options.steps_max - len(dropped)))
            script, actions = _without_steps(best, dropped)
            yield options, script, actions


def _merge_clock(best: _Candidate) -> Iterator[_Schedule]:
    """Makes each run of consecutive steps that only move the clock one step, which moves it
    as many times in a row (`advance | N moves`), longest run first; a step where a fault
    struck stays a step of its own (what it set off reads apart from the clock's moves)."""
    struck = {step for step, tag, _ in best.script if tag[0] == FAULT}
    advancing = sorted(step for step, label in best.actions.items()
                       if label.partition(" | ")[0] == "advance" and step not in struck)
    runs: list[list[int]] = []
    for step in advancing:
        if runs and runs[-1][-1] == step - 1:
            runs[-1].append(step)
        else:
            runs.append([step])
    for run in sorted((run for run in runs if len(run) > 1), key=len, reverse=True):
        script, actions = _without_steps(best, set(run[1:]))
        actions[run[0]] = moves_label(sum(moves_of(best.actions[step]) for step in run))
        yield (replace(best.options, steps_max=max(1, best.options.steps_max - len(run) + 1)),
               script, actions)


#: Where a tool fault's draw may land instead (`_other_faults`): each falls in another band of
#: a tool's table, so another kind of fault strikes (a refusal fails at once, where timeouts
#: retry through several steps).
_FAULT_DRAWS = (0.0, 0.01, 0.02, 0.04, 0.07, 0.1, 0.15, 0.2, 0.3)


def _other_faults(best: _Candidate) -> Iterator[_Schedule]:
    """Tries each tool fault as another kind of tool fault."""
    keys = sorted(key for key in best.script if key[1].startswith(f"{FAULT}:tool:"))
    for key in keys:
        for u in _FAULT_DRAWS:
            if u != best.script[key]:
                yield best.options, {**best.script, key: u}, best.actions


def _first_branches(best: _Candidate) -> Iterator[_Schedule]:
    keys = sorted((key for key in best.script if key[1] == BRANCH), reverse=True)
    for key in keys:
        yield best.options, _without(best.script, [key]), best.actions


def _simplest_values(best: _Candidate) -> Iterator[_Schedule]:
    keys = sorted(key for key in best.script if key[1] == VALUE)
    for chunk in _subsets(keys):
        yield best.options, _without(best.script, chunk), best.actions


#: Seeds a shrink tries with one execution, when the failure it shrinks took more.
ALONE_SEEDS = 200
#: An attempt's run is cut short past this many times the failing run's time (and at least
#: `ATTEMPT_MIN_S` seconds): a schedule whose run drags on is given up, not waited for.
ATTEMPT_SLOWER = 10
ATTEMPT_MIN_S = 5.0


def _shrunk(shrinker: _Shrinker, first: _Candidate) -> _Candidate:
    """Gives `first` shrunk: the passes, then, while it keeps several executions, each dropped
    and the rest shrunk again (a local minimum may keep an execution the violation does not
    need, whose timers the clock's steps depend on: dropped even if the trace grows, kept if
    the result is smaller)."""
    best = shrinker.shrink(first)
    restarted = True
    while restarted and best.options.executions > 1 and not shrinker.out_of_budget():
        restarted = False
        for schedule in _drop_executions(best):
            candidate = shrinker.attempt(schedule)
            if candidate is None:
                continue
            candidate = shrinker.shrink(candidate)
            if candidate.size() < best.size():
                best, restarted = candidate, True
                break
    return best


#: The rate each tool fault that struck the violation's calls strikes at, in the runs of one
#: execution aimed at it (`_alone_plans`).
ALONE_RATE = 0.3
#: The rate of each kind that struck the violation's execution, in the runs of one execution
#: that spread them (`_alone_plans`).
ALONE_SPREAD = 0.1


#: How many failures of one execution a shrink collects before it shrinks the smallest
#: `ALONE_SHRUNK` of them (a short failure shrinks to a short counterexample more often).
ALONE_FOUND, ALONE_SHRUNK = 6, 2


def _alone(definition: WorkflowDefinition, machine: MachineFactory, seed: int, rule: Invariant,
           first: _Candidate, spent: _Shrinker) -> tuple[_Shrinker, _Candidate] | None:
    """Gives the smallest counterexample of one execution found: of the first `ALONE_FOUND`
    runs of one execution from `seed` on (up to `ALONE_SEEDS` of them) that break the rule
    the way `first` does (the same tools named), the `ALONE_SHRUNK` smallest, shrunk; or None.
    The executions of a run interleave, so dropping all but one from its schedule seldom keeps
    the failure, where a run of one alone may break the rule as well: the seeds take in turn
    the campaign's plan and one aimed at the faults the violation's calls met
    (`_alone_plans`)."""
    plans = _alone_plans(first)
    subject = _subject(first)
    found: list[tuple[_Shrinker, _Candidate]] = []
    for tried in range(seed, seed + ALONE_SEEDS):
        if spent.out_of_budget() or len(found) == ALONE_FOUND:
            break
        shrinker = _Shrinker(definition, machine, tried, rule, 0, spent.deadline)
        shrinker._simulators = spent._simulators  # one per shape of options, shared
        spent.runs += 1
        try:
            failed = shrinker.record(plans[tried % len(plans)], bounded=True)
        except NotReproduced:
            continue
        if _subject(failed) == subject:  # not another failure of the same rule
            found.append((shrinker, failed))
    best: tuple[_Shrinker, _Candidate] | None = None
    for shrinker, failed in sorted(found, key=lambda pair: pair[1].size())[:ALONE_SHRUNK]:
        shrinker.runs, shrinker.runs_max = 0, spent.runs_max - spent.runs
        shrunk = shrinker.shrink(failed)
        spent.runs += shrinker.runs
        if best is None or shrunk.size() < best[1].size():
            best = shrinker, shrunk
    return best


def _alone_plans(first: _Candidate) -> list[SimOptions]:
    """Gives the options of runs of one execution, which the seeds of `_alone` take in turn:
    the campaign's; when tool faults struck the calls the violation names, only these faults,
    on these tools, at `ALONE_RATE` (a failure a late answer to one call makes is found in a
    few seeds of that plan, where the campaign's strikes everywhere else as well); and the
    kinds that struck the violation's execution, each at `ALONE_SPREAD` (few faults a run,
    so that what is found has few to drop)."""
    single = replace(first.options, executions=1)
    plan, history, violation = first.options.plan, first.result.history, first.violation
    if plan is None:
        return [single]
    calls = {f"{record.tool} {record.key}" for record in _named(first)
             if type(record) is Applied}
    tools: dict[FaultKind, set[str]] = {}
    kinds: set[FaultKind] = set()
    for record in history:
        if record.step > violation.step:
            break
        if type(record) is FaultInjected and record.execution == violation.execution:
            kinds.add(FaultKind(record.fault))
            if record.detail in calls:
                tools.setdefault(FaultKind(record.fault), set()).add(
                    record.detail.split(" ")[0])
    plans = [single]
    if tools:
        plans.append(replace(single, plan=FaultPlan(tuple(
            replace(plan.get(kind) or FaultRate(kind, ALONE_RATE), rate=ALONE_RATE,
                    tools=tuple(sorted(tools[kind]))) for kind in sorted(tools, key=str)))))
    if kinds:
        plans.append(replace(single, plan=FaultPlan(tuple(
            (plan.get(kind) or FaultRate(kind, ALONE_SPREAD)).with_rate(ALONE_SPREAD)
            for kind in sorted(kinds, key=str)), pinned_points=plan.pinned_points
            if FaultKind.CRASH in kinds else ())))
    return plans


def _named(candidate: _Candidate) -> list[HistoryRecord]:
    """Gives the records the violation names."""
    history = candidate.result.history
    return [history[i] for i in candidate.violation.records if 0 <= i < len(history)]


def _subject(candidate: _Candidate) -> frozenset[str]:
    """Gives the tools of the records the violation names (its subject, told apart from
    another failure of the same rule)."""
    return frozenset(str(getattr(record, "tool", "")) for record in _named(candidate))


def shrink(definition: WorkflowDefinition, seed: int, options: SimOptions, rule: str, *,
           machine: MachineFactory = ReferenceMachine, runs_max: int = 500,
           time_budget_s: float | None = 60.0, start: Script | None = None) -> Counterexample:
    """Gives the smallest schedule found that still breaks `rule` in the run of `seed` with
    `options` (the run must break it), within `runs_max` runs and `time_budget_s` seconds.
    With `start` (every draw of a run, as a guided mutant recorded them), the run shrunk is
    that schedule's, from `seed`, instead of the seed's own."""
    (chosen,) = invariants([rule])
    deadline = None if time_budget_s is None else time.monotonic() + time_budget_s
    shrinker = _Shrinker(definition, machine, seed, chosen, runs_max, deadline)
    first = shrinker.record(options, start)
    alone = None
    if first.options.executions > 1:  # one execution reads best: does one suffice?
        alone = _alone(definition, machine, seed, chosen, first, shrinker)
    runs = shrinker.runs
    if alone is not None:
        shrinker, best = alone
    else:
        best = _shrunk(shrinker, first)
        runs = shrinker.runs
    # the schedule keeps the draws up to the violation: run it once more, so the result
    # shown is exactly what replaying it gives (within the budget: past it, the run that
    # found this schedule stands, which took the same steps up to the violation)
    final = shrinker.attempt((best.options, best.script, best.actions))
    if final is not None and final.violation.step == best.violation.step:
        best = final
    return Counterexample(definition, machine, shrinker.seed, best.options, best.choices,
                          MappingProxyType(best.actions), best.violation, best.result,
                          runs + 1, first.violation.step)
