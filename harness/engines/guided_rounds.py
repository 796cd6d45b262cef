"""A guided (or mixed) campaign's runs: rounds of trials the guide draws from its corpus
(`harness.engines.guided`), each round run on the campaign's executor and taught back to the
guide before the next is drawn.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Generator, Sequence
from typing import Any

from harness.engines.executor import BATCH, executor_for
from harness.engines.fuzz_options import FuzzOptions
from harness.engines.guided import ROUND, Corpus, Guide, Trial
from harness.engines.judge import RunJudge, RunOutcome, trial_died
from harness.engines.tally import Tally
from harness.sim.identity import definition_digest, machine_path

__all__ = ["GuidedRounds"]


class GuidedRounds:
    """A guided campaign's runs: `outcomes` gives them a round at a time, in batches, each
    round drawn by the guide (a kept corpus's entries first, `FuzzOptions.corpus_dir`) from
    what the rounds before it taught it."""

    def __init__(self, judge: RunJudge, options: FuzzOptions, deadline: float | None) -> None:
        self.options = options
        self.guide = Guide(options.seed, options.strategy)
        self.corpus: Corpus | None = None
        if options.corpus_dir is not None:
            self.corpus = Corpus(options.corpus_dir, definition_digest(judge.definition),
                                 machine_path(judge.machine))
            self.guide.queued = self.corpus.load()
        self.outcomes = _guided_outcomes(judge, options, deadline, self.guide)

    def note_growth(self, tally: Tally) -> None:
        """Notes how many behaviours the runs so far showed (the report's growth)."""
        tally.growth.append((tally.runs, len(self.guide.hits)))

    def close(self, tally: Tally) -> None:
        """Stops the worker processes, if any."""
        self.outcomes.close()

    def guided_summary(self, failing: Sequence[RunOutcome]) -> dict[str, Any]:
        """Saves the corpus and the failing schedules (when the corpus is kept); gives the
        report's account of the guidance: the corpus, its mutations, what they found."""
        kept = _keep(self.corpus, self.guide, failing) if self.corpus is not None else 0
        return _guided_summary(self.guide, kept, self.options)


def _guided_outcomes(judge: RunJudge, options: FuzzOptions, deadline: float | None,
                     guide: Guide) -> Generator[list[RunOutcome], None, None]:
    """Gives a guided campaign's outcomes a round at a time, in batches: each round's trials
    are drawn from the corpus the rounds before it left (run in worker children, if
    isolated), so the campaign is the same for any number of processes."""
    left = options.runs
    work = functools.partial(_trials, judge, options)
    executor = executor_for(judge, options, work, trial_died, trials=True, rounds=True)
    try:
        while left is None or left > 0:
            if deadline is not None and time.monotonic() >= deadline:
                return
            trials = guide.round(ROUND if left is None else min(ROUND, left))
            batches = [trials[start:start + BATCH] for start in range(0, len(trials), BATCH)]
            results = list(executor.map_ordered(batches))
            for outcomes in results:
                for outcome in outcomes:
                    if outcome.learnt is not None and outcome.trial is not None:
                        guide.learn(outcome.trial, outcome.learnt)
                yield outcomes
            if left is not None:
                left -= len(trials)
    finally:
        executor.close()


def _trials(judge: RunJudge, options: FuzzOptions, trials: Sequence[Trial]
            ) -> list[RunOutcome]:
    """Gives the outcomes of a batch of trials, up to the first failure when the campaign
    stops at it."""
    outcomes = []
    for trial in trials:
        outcomes.append(judge.trial(trial))
        if options.stop_at_first and outcomes[-1].violations:
            break
    return outcomes


def _guided_summary(guide: Guide | None, kept: int, options: FuzzOptions) -> dict[str, Any]:
    """Gives the report's account of the guidance (nothing for a campaign without a guide)."""
    if guide is None:
        return {}
    return {"corpus": len(guide.corpus), "behaviours": len(guide.hits),
            "mutants": dict(sorted(guide.mutations.items())),
            "new_behaviour_by": dict(sorted(guide.found.items())),
            "corpus_dir": None if options.corpus_dir is None else str(options.corpus_dir),
            "saved": kept,
            **({"line_coverage": list(options.line_coverage),
                "line_arcs": sum(1 for behaviour in guide.hits if behaviour[0] == "ln")}
               if options.line_coverage else {})}


def _keep(corpus: Corpus, guide: Guide, failing: Sequence[RunOutcome]) -> int:
    """Saves the campaign's corpus and its failing schedules to the corpus folder; gives how
    many entries it wrote."""
    written = 0
    for outcome in failing:
        if outcome.learnt is not None and outcome.learnt.recorded:
            corpus.save(outcome.seed, outcome.learnt.recorded, outcome.violations[0].rule)
            written += 1
    for entry in guide.corpus:
        corpus.save(entry.seed, entry.draws())
        written += 1
    return written
