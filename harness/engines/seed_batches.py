"""A swarm campaign's runs: its seeds in batches, in order (a fleet's saved failing seeds
first), run on the campaign's executor.
"""

from __future__ import annotations

import hashlib
import itertools
import time
from collections.abc import Generator, Iterator, Sequence
from dataclasses import replace
from typing import Any

from harness.engines.executor import executor_for
from harness.engines.fleet import FailingSeeds
from harness.engines.fuzz_options import FuzzOptions
from harness.engines.judge import RunJudge, RunOutcome, seed_died
from harness.engines.tally import Tally
from harness.sim.identity import definition_digest, machine_path
from harness.sim.machine import MachineFactory

__all__ = ["SeedBatches"]


class SeedBatches:
    """A swarm campaign's runs: `outcomes` gives them batch by batch, in seed order; with an
    example database (`FuzzOptions.example_db`, see `harness.engines.fleet`), the seeds saved
    there run first, and on `close` the failing seeds are saved and the saved seeds that held
    dropped."""

    def __init__(self, judge: RunJudge, options: FuzzOptions, deadline: float | None) -> None:
        self.fleet = (FailingSeeds(options.example_db, definition_digest(judge.definition),
                                   _fleet_shape(judge.machine, options))
                      if options.example_db is not None else None)
        self.saved = self.fleet.load() if self.fleet is not None else []
        self.outcomes = _outcomes(judge, options, deadline, self.saved)

    def note_growth(self, tally: Tally) -> None:
        """Notes nothing: a swarm campaign keeps no corpus to grow."""

    def close(self, tally: Tally) -> None:
        """Stops the worker processes, if any; saves the fleet's failing seeds and drops the
        saved ones that ran and held."""
        self.outcomes.close()
        if self.fleet is not None:
            broke = {outcome.seed for outcome in tally.failing}
            self.fleet.update(sorted(broke), [seed for seed in self.saved
                                              if seed in tally.ran and seed not in broke])

    def guided_summary(self, failing: Sequence[RunOutcome]) -> dict[str, Any]:
        """Gives nothing: a swarm campaign is not guided."""
        return {}


def _outcomes(judge: RunJudge, options: FuzzOptions, deadline: float | None,
              first: Sequence[int] = ()) -> Generator[list[RunOutcome], None, None]:
    """Gives the outcomes batch by batch, in seed order (from child processes, if isolated;
    from a Dask cluster's workers with that executor), the `first` seeds (a fleet's saved
    failures) before the campaign's own."""
    def batches(size: int) -> Iterator[list[int]]:
        again = set(first)  # run first: not again in their place in the range
        return itertools.chain(
            (list(first[start:start + size]) for start in range(0, len(first), size)),
            (kept for seeds in _seeds(options, deadline, size)
             if (kept := [seed for seed in seeds if seed not in again])))

    def batch(seeds: Sequence[int]) -> list[RunOutcome]:
        outcomes = []
        for seed in seeds:
            outcomes.append(judge.run(seed))
            if options.stop_at_first and outcomes[-1].violations:
                break  # the campaign stops here: the seeds after it would cost for nothing
        return outcomes

    executor = executor_for(judge, options, batch, seed_died)
    try:
        yield from executor.map_ordered(batches(executor.seeds_per_batch))
    finally:
        executor.close()


def _seeds(options: FuzzOptions, deadline: float | None,
           batch: int) -> Generator[list[int], None, None]:
    seed, left = options.seed, options.runs
    while left is None or left > 0:
        if deadline is not None and time.monotonic() >= deadline:
            return
        size = batch if left is None else min(batch, left)
        yield list(range(seed, seed + size))
        seed += size
        if left is not None:
            left -= size


def _fleet_shape(machine: MachineFactory, options: FuzzOptions) -> str:
    """Names what a seed's run depends on besides the definition, for the fleet's database:
    the machine (by its module path; one that has none by its qualified name, marked so) and
    the options that shape a run (the fault plan and simulation options, swarm, the invariants
    checked). A seed saved under other options is another run: it is neither replayed here nor
    dropped when it holds here."""
    name = machine_path(machine) or "unnamed " + str(getattr(
        machine, "__qualname__", type(machine).__qualname__))
    shape = repr((options.swarm, options.invariants, replace(options.sim, seed=0)))
    return f"{name}:{hashlib.sha256(shape.encode()).hexdigest()[:16]}"
