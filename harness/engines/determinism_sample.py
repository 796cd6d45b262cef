"""The determinism sample: a campaign's first seeds run twice each, beside the campaign (in a
child of their own, when isolated), and its first seed in two fresh interpreters with two hash
seeds (`harness.engines.elsewhere`); a seed whose two histories differ makes the campaign
`nondeterministic`.
"""

from __future__ import annotations

from harness.checks.determinism import difference
from harness.checks.invariants import Violation
from harness.engines import elsewhere, isolation
from harness.engines.forked import isolated
from harness.engines.fuzz_options import RUNS_DEFAULT, FuzzOptions
from harness.engines.isolation import Died
from harness.engines.judge import RunJudge, watchdog_stopped
from harness.engines.replay import imports_needed

__all__ = ["DETERMINISM_SAMPLE", "ELSEWHERE_BUDGET_MIN_S", "ELSEWHERE_RUNS",
           "DeterminismSample", "determinism_sample"]

DETERMINISM_SAMPLE = 3
"""How many of a campaign's first seeds run twice before it: one seed misses a machine that
flips a coin only now and then (two runs agree by luck); each more seed makes that rarer."""
#: A campaign of at least this many runs (the default, or an open-ended one) also runs its
#: first seed in two fresh interpreters with two hash seeds (`harness.engines.elsewhere`):
#: about a second of a core, beside the campaign (a fixed cost a short campaign would feel).
ELSEWHERE_RUNS = RUNS_DEFAULT
#: Nor a campaign bounded by less time than this (seconds): their second of CPU would take
#: the time its own runs and its aimed runs have.
ELSEWHERE_BUDGET_MIN_S = 30.0


class DeterminismSample:
    """The determinism sample's verdict: the first seed whose two histories differ, and how
    (see `determinism_sample`)."""

    def __init__(self, running: isolation.Running | None,
                 found: tuple[int, Violation] | bool | None = None,
                 there: elsewhere.Elsewhere | None = None) -> None:
        self.running, self.there = running, there
        self.found = found if isinstance(found, tuple) else None
        self.looped = found is False  # its first run ran past its bound, or ended its process

    def result(self) -> tuple[int, Violation] | None:
        """Gives the verdict of the sample's runs in this process (or its child)."""
        if self.running is not None:
            running, self.running = self.running, None
            try:
                got = running.result()
            except Died:  # the campaign meets the seed that ends its process, and says so
                got = False
            self.found = got if isinstance(got, tuple) else None
            self.looped = got is False
        return self.found

    def elsewhere(self, deadline: float | None) -> tuple[int, Violation] | None:
        """Gives the fresh interpreters' verdict on the first seed, waiting for them at most
        until `deadline` (a time budget's end) when one is given; None: the same history, or
        none in time. Not when the sample's first run looped or ended its process."""
        if self.looped or self.there is None:
            return None
        try:
            unsteady = self.there.difference(deadline)
            return None if unsteady is None else (self.there.seed, unsteady)
        finally:
            self._close()

    def cancel(self) -> None:
        """Ends the sample's child if it still runs, and the fresh interpreters (their
        verdicts are not wanted any more)."""
        if self.running is not None:
            self.running.cancel()
            self.running = None
        self._close()

    def _close(self) -> None:
        if self.there is not None:
            self.there.close()
            self.there = None


def determinism_sample(judge: RunJudge, options: FuzzOptions) -> DeterminismSample:
    """Runs the campaign's first seeds twice each, from the state the campaign starts in (and
    the first in two fresh interpreters, see `ELSEWHERE_RUNS`); its `result()` gives the first
    seed whose two histories differ, and how. Isolated, the
    sample runs in a child of its own beside the campaign's workers (a fork of this process
    before any run, so no run of the campaign can leave state behind in it); else here,
    before the campaign."""
    sample = DETERMINISM_SAMPLE if options.runs is None else min(DETERMINISM_SAMPLE,
                                                                  options.runs)

    def work() -> tuple[int, Violation] | bool | None:
        for seed in range(options.seed, options.seed + sample):
            first = judge.simulator.run(seed)
            if watchdog_stopped(first):  # a machine that loops: the campaign says so, at less cost
                return False
            unsteady = difference(first.history, judge.simulator.run(seed).history)
            if unsteady is not None:
                return seed, unsteady
        return None

    # the first seed in two fresh interpreters too, meanwhile: hash order and id() differ
    long_enough = ((options.runs is None or options.runs >= ELSEWHERE_RUNS)
                   and (options.time_budget_s is None
                        or options.time_budget_s >= ELSEWHERE_BUDGET_MIN_S))
    there = (elsewhere.begin(judge.definition, judge.machine, judge.sim_options,
                             options.seed, imports_needed(judge.definition, ""))
             if long_enough else None)
    try:
        if isolated(options):
            return DeterminismSample(isolation.begin(work), there=there)
        return DeterminismSample(None, work(), there)
    except BaseException:
        if there is not None:
            there.close()
        raise
