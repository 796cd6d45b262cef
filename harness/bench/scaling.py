"""The scaling groups of `fsmharness bench` (`--only scaling`): a fuzz campaign on one process
beside the same on two, bare CPU work split the same way (this machine's ceiling), and, only
when asked (`--cluster`), the campaign on a local Dask cluster. (`scaling: states`, rings of 8
and 2,000 states, is built from `harness.bench.shapes`.)
"""

from __future__ import annotations

import contextlib
import multiprocessing
from collections.abc import Callable

from harness.bench.engines import native_fuzz
from harness.bench.timing import Contender, Group, importable
from harness.engines.fuzz import FuzzOptions, fuzz
from harness.errors import HarnessError
from harness.sim.machine import MachineFactory
from harness.sim.simulator import SimOptions
from reference_machine import WorkflowDefinition

__all__ = [
    "CEILING_WORK",
    "ceiling_group",
    "cluster_group",
    "process_group",
    "split_work",
]

def process_group(definition: WorkflowDefinition, machine: MachineFactory, quick: bool
                  ) -> Group:
    """Gives one campaign on one process beside the same on two."""
    runs = 40 if quick else 300
    return Group(f"scaling: processes, {runs} fuzz runs of {definition.name}", (
        Contender("1 process (floor)",
                  lambda stack: native_fuzz(definition, runs, 1, machine=machine), 0, "step"),
        Contender("2 processes",
                  lambda stack: native_fuzz(definition, runs, 2, machine=machine), 0,
                  "step")))


def cluster_group(definition: WorkflowDefinition, machine: MachineFactory, quick: bool
                  ) -> Group:
    """Gives one campaign on one local process beside the same as tasks on a local Dask
    cluster of two workers: made for each campaign (its start-up counted, as `--executor
    dask` alone pays it) and kept between campaigns (a scheduler given by address)."""
    runs = 40 if quick else 300
    title = f"scaling: cluster, {runs} fuzz runs of {definition.name}"
    if not importable("distributed"):
        return Group(title, (), note="skipped: Dask's distributed is not installed (pip "
                                     "install 'fsmharness[dask]')")

    def campaign(scheduler: str | None) -> Callable[[], int]:
        options = FuzzOptions(runs=runs, replay_dir=None, processes=2, executor="dask",
                              scheduler=scheduler, sim=SimOptions(executions=1))

        def call() -> int:
            report = fuzz(definition, options, machine=machine)
            if report.failures:
                raise HarnessError(f"{definition.name}: the benchmark campaign failed")
            return report.steps

        return call

    def kept(stack: contextlib.ExitStack) -> Callable[[], int]:
        import dask
        from distributed import LocalCluster

        # workers that may fork, as `--executor dask` makes them: each batch runs in a child
        stack.enter_context(dask.config.set({"distributed.worker.daemon": False}))
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                               dashboard_address=None, silence_logs=40)
        stack.callback(cluster.close)
        return campaign(cluster.scheduler_address)

    return Group(title, (
        Contender("1 process (floor)",
                  lambda stack: native_fuzz(definition, runs, 1, machine=machine), 0, "step"),
        Contender("Dask, a local cluster of 2 made per campaign",
                  lambda stack: campaign(None), 0, "step"),
        Contender("Dask, a local cluster of 2 kept", kept, 0, "step")))


#: Rounds of the bare loop a ceiling call runs in all (about a 300-run campaign's time)
CEILING_WORK = 2_000_000


def _busy(rounds: int) -> int:
    """Plain interpreter work (dict stores, integer arithmetic): what any Python process does
    and nothing shared between processes."""
    table: dict[int, int] = {}
    for number in range(rounds):
        table[number & 1023] = number
    return rounds


def split_work(processes: int, rounds: int = CEILING_WORK) -> Callable[[], int]:
    """Gives a call that runs `rounds` of the bare loop split evenly over `processes` forked
    children, and waits for them all; the call gives the rounds run."""
    context = multiprocessing.get_context("fork")

    def run() -> int:
        children = [context.Process(target=_busy, args=(rounds // processes,))
                    for _ in range(processes)]
        for child in children:
            child.start()
        for child in children:
            child.join()
        return rounds

    return run


def ceiling_group() -> Group:
    """Gives the same plain work on one process beside it split over two: what this machine
    itself gives two processes (on shared or busy cores, less than 2), which no campaign
    can beat."""
    return Group("scaling: processes, bare CPU work split the same way (this machine's ceiling)",
                 (Contender("1 process (floor)", lambda stack: split_work(1), 0, "round"),
                  Contender("2 processes", lambda stack: split_work(2), 0, "round")))
