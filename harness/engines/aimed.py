"""Runs aimed at a campaign's gaps: the seeds whose runs had a chance at a fault kind (or passed
a crash point) the campaign left untested, run again with that fault pinned on.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

from fault_injection import FaultKind, FaultPlan
from harness.checks.adequacy import Exercised
from harness.engines.executor import executor_for
from harness.engines.failures import failures_of
from harness.engines.fuzz_options import FuzzOptions
from harness.engines.fuzz_report import FuzzFailure
from harness.engines.judge import RunJudge, RunOutcome, seed_died
from harness.engines.tally import Tally

__all__ = ["AIMED_BUDGET_MIN", "aimed_runs"]

#: A campaign aims at most `AIMED_BUDGET_MIN` runs (or a quarter of its runs when that is
#: more, four times its runs when that is less) at all its gaps (each from at most
#: `harness.engines.tally.AIMED_RUNS_MAX` of its runs).
AIMED_BUDGET_MIN = 16


def aimed_runs(judge: RunJudge, options: FuzzOptions, tally: Tally,
               deadline: float | None) -> list[FuzzFailure]:
    """Runs again, with the fault pinned on (`FaultPlan.pinned`), the seeds whose runs had a
    chance at a fault kind (or passed a crash point) the campaign left untested: each runs as
    it ran up to that chance, where the fault now strikes half the time. Gives the failures
    they found (shrunk, with replay files: their options are not the campaign's, so their
    seed alone does not run them again)."""
    failures: list[FuzzFailure] = []
    # a small campaign is not made a big one
    budget = min(max(AIMED_BUDGET_MIN, tally.runs // 4), 4 * tally.runs)
    for gap in tally.adequacy(judge.definition, judge, options).gaps:
        kind, _, name = gap.code.partition(":")
        key = name if kind == "fault" else gap.code
        seeds = tally.chanced.get(key, [])[:budget]
        if (kind not in ("fault", "crash_point") or not seeds
                or _closes(tally.exercised, gap.code)):
            continue  # nothing to aim from, or an earlier gap's aimed run exercised it too
        if deadline is not None and time.monotonic() >= deadline:
            break
        aimed = RunJudge(judge.definition, judge.machine,
                         replace(options, sim=replace(judge.sim_options,
                                                      plan=_pinned(judge.plan, gap.code))))

        def batch(seeds: Sequence[int], aimed: RunJudge = aimed, code: str = gap.code
                  ) -> list[RunOutcome]:
            outcomes = []
            for seed in seeds:
                outcomes.append(aimed.run(seed))
                if outcomes[-1].violations or _closes(outcomes[-1].exercised, code):
                    break  # the gap is closed, or the campaign has what it stops at
            return outcomes

        executor = executor_for(aimed, options, batch, seed_died, here=True)
        try:
            outcomes = next(executor.map_ordered([seeds]))
        finally:
            executor.close()
        failing_before = len(tally.failing)
        tally.add(outcomes, options.stop_at_first, aimed=True)
        budget -= len(outcomes)
        tally.aimed[gap.code] = {"runs": len(outcomes), "seeds": [o.seed for o in outcomes],
                                 "closed": any(_closes(o.exercised, gap.code)
                                               for o in outcomes)}
        found = tally.failing[failing_before:]
        if found:
            failures += failures_of(aimed, options, found, None, aimed=f"aimed at {gap.code}")
            if options.stop_at_first:
                break
        if budget <= 0:
            break
    return failures


def _pinned(plan: FaultPlan, code: str) -> FaultPlan:
    """Gives `plan` with the fault a gap names pinned on: a fault kind on in every run, or a
    crash at one crash point (the others keep the run's own rate, so the run draws as it did
    up to that point)."""
    kind, _, name = code.partition(":")
    if kind == "crash_point":
        return replace(plan, pinned_points=(name,))
    return replace(plan, pinned=(FaultKind(name),))


def _closes(done: Exercised, code: str) -> bool:
    """Tells whether a run exercised what a gap names (or showed that the machine cannot take
    it: a second worker it does not offer)."""
    kind, _, name = code.partition(":")
    if kind == "crash_point":
        return done.crashed.get(name, 0) > 0
    return done.injected.get(name, 0) > 0 or name in done.unoffered
