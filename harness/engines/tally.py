"""The tally: what a campaign's runs add up to, kept as the runs come (runs, steps, failures,
coverage, faults, metrics, what they exercised, each target's best), and the seeds its runs
aimed at a gap can start from.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from harness.checks.adequacy import Adequacy, Exercised, adequacy
from harness.checks.coverage import Coverage
from harness.checks.metrics import Metrics
from harness.engines.fuzz_options import FuzzOptions
from harness.engines.judge import RunJudge, RunOutcome
from reference_machine import WorkflowDefinition

__all__ = ["AIMED_RUNS_MAX", "Tally"]

#: How many runs of a campaign a gap's aimed runs start from (seeds whose runs had a chance
#: at the fault, or passed the crash point): each runs again with the fault pinned.
AIMED_RUNS_MAX = 8


@dataclass(slots=True)
class Tally:
    """What a campaign's runs add up to, kept as the runs come (a run's outcome is not kept
    past its batch unless it failed, so memory does not grow with the runs), and, per fault
    kind and crash point, the first seeds whose runs had a chance at it."""

    runs: int = 0
    steps: int = 0
    failing: list[RunOutcome] = field(default_factory=list)  # the failing runs' outcomes
    coverage: Coverage = field(default_factory=Coverage)
    faults: Counter[str] = field(default_factory=Counter)  # faults injected, by kind
    metrics: Metrics = field(default_factory=Metrics)
    exercised: Exercised = field(default_factory=Exercised)  # what the runs exercised
    best: dict[str, dict[str, Any]] = field(default_factory=dict)  # each target's best score
    ran: set[int] = field(default_factory=set)  # the seeds run
    growth: list[tuple[int, int]] = field(default_factory=list)  # (runs, behaviours seen)
    chanced: dict[str, list[int]] = field(default_factory=dict)  # gap key -> seeds to aim from
    aimed: dict[str, dict[str, Any]] = field(default_factory=dict)  # gap code -> its aimed runs

    def add(self, batch: Iterable[RunOutcome], stop_at_first: bool, *, aimed: bool = False
            ) -> bool:
        """Adds a batch's outcomes (`aimed`: runs aimed at a gap, which start no aimed run
        and reach no target score a seed gives again); tells whether the campaign stops (a
        failure, with `stop_at_first`)."""
        for outcome in batch:
            self.runs += 1
            self.ran.add(outcome.seed)
            self.steps += outcome.steps
            self.coverage = self.coverage.merge(outcome.coverage)
            self.faults.update(outcome.faults)
            self.metrics = self.metrics.merge(outcome.metrics)
            self.exercised = self.exercised.merge(outcome.exercised)
            if not aimed:
                _best(self.best, outcome)
            if not aimed and (outcome.trial is None or outcome.trial.script is None):
                self._chances(outcome)  # a seed's own run: one an aimed run can start from
            if outcome.violations:
                self.failing.append(outcome)
                if stop_at_first:
                    return True
        return False

    def _chances(self, outcome: RunOutcome) -> None:
        done = outcome.exercised
        chanced = self.chanced
        for key in (*(kind for kind, count in done.chances.items() if count),
                    *(f"crash_point:{point}" for point, count in done.passed.items() if count)):
            seeds = chanced.setdefault(key, [])
            if len(seeds) < AIMED_RUNS_MAX:
                seeds.append(outcome.seed)

    def adequacy(self, definition: WorkflowDefinition, judge: RunJudge,
                 options: FuzzOptions) -> Adequacy:
        """Gives what the runs so far were worth."""
        return adequacy(definition, self.exercised, self.coverage, judge.plan, judge.names,
                        options.untested)


def _best(best: dict[str, dict[str, Any]], outcome: RunOutcome) -> None:
    """Keeps each target's best score, the seed that reached it, and its first error."""
    for name, value in outcome.scores:
        held = best.setdefault(name, {"best": None, "seed": None, "errors": 0})
        if isinstance(value, str):
            held["errors"] += 1
            held.setdefault("error", f"seed {outcome.seed}: {value}")
        elif held["best"] is None or value > held["best"]:
            held["best"], held["seed"] = value, outcome.seed
            held["mutant"] = outcome.trial is not None and outcome.trial.script is not None
