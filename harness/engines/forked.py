"""The forked executor: a campaign's batches run in forked worker children
(`harness.engines.isolation`), so that a machine that ends its process fails its seed instead
of ending the campaign; and `run_alone`, a batch run again here, each item in a child.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from harness.engines import isolation
from harness.engines.fuzz_options import FuzzOptions
from harness.engines.isolation import Died
from harness.engines.judge import RunOutcome, batch_died

__all__ = ["ForkedExecutor", "isolated", "run_alone"]


def isolated(options: FuzzOptions) -> bool:
    """Tells whether a campaign's runs go to forked children (isolated, where the platform
    can fork)."""
    return options.isolate and isolation.available()


class ForkedExecutor:
    """Runs the batches in at most `processes` forked worker children, a batch whose worker
    died run again one item at a time to name the item at fault (`died` gives its outcome).
    A stream of batches gets workers of its own, ended when it ends; with `rounds` (a guided
    campaign maps a round at a time) the workers are kept between rounds until `close`."""

    def __init__(self, work: Callable[[Sequence[Any]], list[RunOutcome]], processes: int,
                 died: Callable[[Any, Died], RunOutcome], seeds_per_batch: int, *,
                 rounds: bool = False) -> None:
        self.work, self.processes, self.died = work, processes, died
        self.seeds_per_batch = seeds_per_batch
        self.pool = (isolation.Pool(work, processes, died, batch_died) if rounds else None)

    def map_ordered(self, batches: Iterable[Sequence[Any]]) -> Iterator[list[RunOutcome]]:
        """Gives each batch's outcomes in order (a round's: once every batch of it ran)."""
        if self.pool is not None:
            return iter(self.pool.run(list(batches)))
        return isolation.map_ordered(self.work, batches, self.processes, self.died, batch_died)

    def close(self) -> None:
        """Ends the workers kept between rounds."""
        if self.pool is not None:
            self.pool.close()


def run_alone(work: Callable[[Sequence[Any]], list[RunOutcome]],
              died: Callable[[Any, Died], RunOutcome], batch: Sequence[Any]
              ) -> list[RunOutcome]:
    """A batch run here, each item in a forked child (where the platform can fork)."""
    if not isolation.available():
        return work(batch)
    return next(isolation.map_ordered(work, [batch], 1, died, batch_died))
