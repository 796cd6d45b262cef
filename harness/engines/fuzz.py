"""Native seeded fuzzing: many simulations of one definition, each reproducible from its seed.

`fuzz(target, options)` runs seeds `seed, seed + 1, ...` (swarm mode on by default: each run
draws its own subset of fault kinds and rates), checks every invariant over each history, and
merges coverage and stats. Runs can be spread over processes; results are merged in seed order,
so the report, and the first failing seed, are the same whatever the number of processes (a
time budget aside, which stops wherever the clock says). A failing run is shrunk to a minimal
schedule and saved as a replay file.

`fuzz` reads as its phases, each over a collaborator of its own module:

1. the determinism sample (`determinism_sample`): the first seeds run twice, beside the
   campaign;
2. the campaign: the runs, as seed batches (`seed_batches`) or guided rounds
   (`guided_rounds`) on the executor the options choose (`executor`), each judged by the run
   judge (`judge`) and added up in the tally (`tally`);
3. shrink (`failures`): each rule's first failure run again, shrunk, saved as a replay file;
4. the runs aimed at what the campaign left untested (`aimed`), when it held;
5. the fresh interpreters' second opinion on the first seed (`elsewhere`);
6. the report (`fuzz_report`), built from the tally.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from harness.checks.adequacy import check_acknowledged
from harness.checks.coverage import vacuity
from harness.engines.aimed import aimed_runs
from harness.engines.determinism_sample import determinism_sample
from harness.engines.failures import failures_of
from harness.engines.fuzz_options import (
    DEFAULT_STRATEGY,
    EXECUTORS,
    RUNS_DEFAULT,
    ExecutorKind,
    FuzzOptions,
)
from harness.engines.fuzz_report import FuzzFailure, FuzzReport, Verdict
from harness.engines.guided import Strategy
from harness.engines.guided_rounds import GuidedRounds
from harness.engines.judge import RunJudge
from harness.engines.seed_batches import SeedBatches
from harness.engines.tally import Tally
from harness.sim.machine import MachineFactory, ReferenceMachine
from reference_machine import WorkflowDefinition, load_definition

__all__ = ["DEFAULT_STRATEGY", "EXECUTORS", "RUNS_DEFAULT", "ExecutorKind", "FuzzFailure",
           "FuzzOptions", "FuzzReport", "Strategy", "Verdict", "fuzz"]

#: Of a time budget, the share its own runs take; the rest is for runs aimed at its gaps.
RUNS_TIME_SHARE = 0.9


def fuzz(target: WorkflowDefinition | str | os.PathLike[str] | Mapping[str, Any],
         options: FuzzOptions | None = None, *, machine: MachineFactory = ReferenceMachine,
         progress: Callable[[int, int, int], None] | None = None) -> FuzzReport:
    """Fuzzes a definition (or a definition file) on a machine: runs seeded simulations with
    faults, checks every invariant, shrinks what fails and saves its replay file. A campaign
    whose runs left a fault kind or a crash point untested that some of them had a chance at
    ends with runs aimed at it (`aimed_runs`).

    `progress(runs, steps, failures)` is called after each batch of runs."""
    options = options if options is not None else FuzzOptions()
    definition = target if isinstance(target, WorkflowDefinition) else load_definition(
        Path(target) if isinstance(target, os.PathLike) else target)
    _check_acknowledged(definition, options, machine)
    judge = RunJudge(definition, machine, options)
    started = time.monotonic()
    deadline = None if options.time_budget_s is None else started + options.time_budget_s
    # a campaign bounded by time leaves a tenth of it to the runs aimed at its gaps
    runs_until = None if options.time_budget_s is None else (
        started + RUNS_TIME_SHARE * options.time_budget_s)
    tally = Tally()
    runs = (SeedBatches(judge, options, runs_until) if options.strategy == Strategy.SWARM
            else GuidedRounds(judge, options, runs_until))
    sample = determinism_sample(judge, options)  # before any run could leave state behind
    try:
        _campaign(runs, tally, options, progress)
    except BaseException:
        sample.cancel()
        raise
    runs.close(tally)  # stops the worker processes, if any
    try:
        unsteady = sample.result()
        failures = failures_of(judge, options, tally.failing, unsteady)
        if not tally.failing and unsteady is None and not vacuity(
                definition, tally.coverage, options.coverage_min):  # held: as much as it claims?
            ran = tally.runs
            failures += aimed_runs(judge, options, tally, deadline)
            if progress is not None and tally.runs > ran:
                progress(tally.runs, tally.steps, len(failures))
        # the fresh interpreters' second opinion, last (not on a machine that hangs or ends
        # its process: they would wait out their bound on it, for no verdict the campaign lacks)
        if unsteady is None and not any(v.rule == "machine_ok" for failure in failures
                                        for v in failure.violations):
            there = sample.elsewhere(deadline)
            if there is not None:
                failures.insert(0, FuzzFailure(there[0], (there[1],)))
    finally:
        sample.cancel()
    elapsed = time.monotonic() - started
    guided = runs.guided_summary(tally.failing)
    return _report(judge, options, tally, failures, elapsed, guided)


def _check_acknowledged(definition: WorkflowDefinition, options: FuzzOptions,
                        machine: MachineFactory) -> None:
    """Checks the gaps the definition and the options acknowledge against the crash points a
    machine's class names before it is built (raises `HarnessError`)."""
    named = getattr(machine, "crash_points", None)  # a class says before it is built
    points = (tuple(named) or ("between_steps",)) if isinstance(named, tuple | list) else ()
    check_acknowledged(definition.untested, points)
    check_acknowledged(options.untested, points, where="options.untested.")


def _campaign(runs: SeedBatches | GuidedRounds, tally: Tally, options: FuzzOptions,
              progress: Callable[[int, int, int], None] | None) -> None:
    """Adds the campaign's runs to the tally, batch by batch, until they end or one fails
    (with `stop_at_first`)."""
    for batch in runs.outcomes:
        stop = tally.add(batch, options.stop_at_first)
        runs.note_growth(tally)
        if progress is not None:
            progress(tally.runs, tally.steps, len(tally.failing))
        if stop:
            break


def _report(judge: RunJudge, options: FuzzOptions, tally: Tally, failures: list[FuzzFailure],
            elapsed: float, guided: dict[str, Any]) -> FuzzReport:
    """Gives the campaign's report, from the tally."""
    definition, machine = judge.definition, judge.machine
    points = tally.exercised.points or tuple(getattr(machine, "crash_points", ())
                                             or ("between_steps",))
    return FuzzReport(
        definition=definition, machine=getattr(machine, "__qualname__", type(machine).__name__),
        plan=judge.plan, runs=tally.runs, steps=tally.steps, elapsed_s=elapsed,
        failures=tuple(failures), coverage=tally.coverage, faults=dict(tally.faults),
        invariants=judge.names, crash_points=points, metrics=tally.metrics,
        vacuous=vacuity(definition, tally.coverage, options.coverage_min),
        strategy=options.strategy, growth=tuple(tally.growth), targets=tally.best,
        guided=guided, executor=judge.executor,
        adequacy=tally.adequacy(definition, judge, options), aimed=dict(tally.aimed))
