"""The in-process executor: a campaign's batches run one after another in this process (not
isolated: a debugger's breakpoints work, and a machine that ends its process ends the
campaign).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from harness.engines.judge import RunOutcome

__all__ = ["InProcessExecutor"]


class InProcessExecutor:
    """Runs each batch here, when the campaign takes its outcomes."""

    def __init__(self, work: Callable[[Sequence[Any]], list[RunOutcome]],
                 seeds_per_batch: int) -> None:
        self.work, self.seeds_per_batch = work, seeds_per_batch

    def map_ordered(self, batches: Iterable[Sequence[Any]]) -> Iterator[list[RunOutcome]]:
        """Gives each batch's outcomes, run as it is asked for."""
        for batch in batches:
            yield self.work(batch)

    def close(self) -> None:
        """Holds nothing to let go of."""
