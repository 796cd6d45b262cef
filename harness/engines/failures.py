"""From failing runs to a campaign's failures: each rule's first failure run twice more (a
history that differs, or a failure that does not come back, is a `deterministic` failure),
then shrunk to a minimal counterexample and saved as a replay file.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from harness.checks.determinism import CAUSES, difference
from harness.checks.determinism import RULE as DETERMINISTIC
from harness.checks.invariants import Violation
from harness.engines import isolation
from harness.engines.forked import isolated
from harness.engines.fuzz_options import FuzzOptions
from harness.engines.fuzz_report import FuzzFailure
from harness.engines.guided import Trial
from harness.engines.isolation import Died
from harness.engines.judge import RunJudge, RunOutcome, watchdog_stopped
from harness.engines.replay import write_replay
from harness.engines.shrink import Counterexample, NotReproduced, shrink
from harness.sim.simulator import SimulationResult

__all__ = ["failures_of"]

T = TypeVar("T")


def failures_of(judge: RunJudge, options: FuzzOptions, failing: Iterable[RunOutcome],
                sampled: tuple[int, Violation] | None, *, aimed: str = "") -> list[FuzzFailure]:
    """Shrinks the first failure of each rule and saves its replay file, after running its
    seed twice more: a history that differs, or a failure that does not come back, is a
    `deterministic` failure, and nothing is shrunk after it (a schedule that does not come
    back cannot be made smaller). `sampled` is what the first seeds' two runs showed.
    `aimed` names the gap the runs were aimed at: as a mutant's, their seed alone under the
    campaign's options does not run them again, so each gets a replay file, shrunk or not."""
    failures = []
    unsteady = None
    if sampled is not None:
        failures.append(FuzzFailure(sampled[0], (sampled[1],)))
        unsteady = sampled[1]
    shrunk_rules: set[str] = set()
    for outcome in failing:
        rule = outcome.violations[0].rule
        counterexample = None
        path = None
        # a mutant's run is no seed's own: only its schedule, in a replay file, runs it again,
        # so one is written, shrunk or not
        mutant = aimed or ("" if outcome.trial is None or outcome.trial.script is None else
                           outcome.trial.how)
        if outcome.overran:  # run again, it would take the watchdog's bound each time
            failures.append(FuzzFailure(outcome.seed, outcome.violations, mutant=mutant))
            continue
        if unsteady is None and (options.shrink or mutant) and rule not in shrunk_rules:
            try:
                unsteady = _apart(options, functools.partial(_unsteady, judge,
                                                             outcome.seed, outcome.trial))
            except Died:  # the seed ends its process: nothing to shrink, the failure says why
                failures.append(FuzzFailure(outcome.seed, outcome.violations, mutant=mutant))
                continue
            if unsteady is None:
                try:
                    counterexample = _shrunk(judge, options, outcome.seed, rule,
                                             _start(outcome))
                except NotReproduced as exc:
                    unsteady = Violation(DETERMINISTIC, f"{exc.args[0]}; {CAUSES}",
                                         outcome.violations[0].execution,
                                         outcome.violations[0].step)
                except Died:
                    counterexample = None
            if unsteady is not None:
                failures.append(FuzzFailure(outcome.seed, (unsteady, *outcome.violations),
                                            mutant=mutant))
                continue
            shrunk_rules.add(rule)
            if options.replay_dir is not None and counterexample is not None:
                path = write_replay(counterexample, Path(options.replay_dir))
        failures.append(FuzzFailure(outcome.seed, outcome.violations, counterexample, path,
                                    mutant))
    return failures


def _apart(options: FuzzOptions, work: Callable[[], T]) -> T:
    """Runs `work` in a child process when the campaign is isolated (raises `Died` when the
    machine ends it), else here."""
    return isolation.call(work) if isolated(options) else work()


def _start(outcome: RunOutcome) -> dict[tuple[int, str, int], float] | None:
    """Gives the schedule a guided mutant's failure shrinks from (None: a seed's own run)."""
    if outcome.trial is None or outcome.trial.script is None or outcome.learnt is None:
        return None
    return {(c.step, c.tag, c.n): c.u for c in outcome.learnt.recorded}


def _shrunk(judge: RunJudge, options: FuzzOptions, seed: int, rule: str,
            start: dict[tuple[int, str, int], float] | None = None) -> Counterexample:
    """Shrinks `seed`'s failure of `rule` (apart, when isolated: the definition and the
    machine stay behind, as a closure does not cross processes, and are put back here)."""
    def work() -> Counterexample:
        found = shrink(judge.definition, seed, judge.sim_options, rule,
                       machine=judge.machine,
                       runs_max=options.shrink_runs_max if options.shrink else 1,
                       time_budget_s=options.shrink_time_s, start=start)
        return found if not isolated(options) else replace(
            found, definition=None, machine=None)  # type: ignore[arg-type]

    return replace(_apart(options, work), definition=judge.definition,
                   machine=judge.machine)


def _unsteady(judge: RunJudge, seed: int, trial: Trial | None = None) -> Violation | None:
    """Gives how two runs of `seed` (or of a guided trial) differ (None: the same history,
    byte for byte, or a first run the watchdog stopped: where a loop is stopped is the
    clock's, not the seed's)."""
    def run() -> SimulationResult:
        if trial is None or trial.script is None:
            return judge.simulator.run(seed)
        return judge.simulator.run(trial.seed, choices=trial.choices(record=True))

    first = run()
    if watchdog_stopped(first):
        return None
    return difference(first.history, run().history)
