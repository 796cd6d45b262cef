"""The executor protocol: where a campaign's batches of runs go (this process, forked worker
processes, a Dask cluster), each executor one module behind one protocol, and the one place
a campaign's executor is chosen (`executor_for`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol

from harness.engines.cluster import DaskExecutor
from harness.engines.forked import ForkedExecutor, isolated, run_alone
from harness.engines.fuzz_options import ExecutorKind, FuzzOptions
from harness.engines.in_process import InProcessExecutor
from harness.engines.isolation import Died
from harness.engines.judge import RunJudge, RunOutcome

__all__ = ["BATCH", "BatchWork", "Executor", "ItemDied", "executor_for"]

BATCH = 8  # seeds run between two progress reports (a worker process takes this many)

#: Runs a batch of a campaign's items (seeds, or a guided round's trials): their outcomes,
#: in order, up to the first failure when the campaign stops at it.
BatchWork = Callable[[Sequence[Any]], list[RunOutcome]]
#: Gives the outcome of an item whose run ended the process it ran in.
ItemDied = Callable[[Any, Died], RunOutcome]


class Executor(Protocol):
    """Runs a campaign's batches and gives their outcomes in the batches' order, whatever ran
    them and in whatever order they ended, so the report is the same for any executor."""

    @property
    def seeds_per_batch(self) -> int:
        """Gives how many seeds a batch of a stream of seeds takes here."""
        ...

    def map_ordered(self, batches: Iterable[Sequence[Any]]) -> Iterator[list[RunOutcome]]:
        """Runs the batches (a lazy stream: the campaign may stop before its end) and gives
        each one's outcomes, in the batches' order."""
        ...

    def close(self) -> None:
        """Lets go of what the executor holds (worker processes kept between calls, a
        cluster's client)."""
        ...


def executor_for(judge: RunJudge, options: FuzzOptions, work: BatchWork, died: ItemDied, *,
                 trials: bool = False, rounds: bool = False, here: bool = False) -> Executor:
    """Gives the executor a campaign's batches run on: tasks on a Dask cluster (executor
    `dask`; each batch Dask gives up on is run again here), forked worker children (isolated,
    where the platform can fork), else this process. `trials`: the batches hold a guided
    round's trials, not seeds; `rounds`: the batches come a round at a time (worker children
    are kept between rounds); `here`: on this machine whatever the executor (runs aimed at a
    gap: one batch, after the campaign)."""
    if options.executor == ExecutorKind.DASK and not here:
        return DaskExecutor(judge, options, functools.partial(run_alone, work, died),
                            trials=trials)
    if isolated(options):
        return ForkedExecutor(work, options.processes, died, BATCH, rounds=rounds)
    return InProcessExecutor(work, BATCH)
