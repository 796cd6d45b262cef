"""Fuzz campaigns on a Dask cluster: the same seeded batches as on local processes, as tasks.

A campaign is embarrassingly parallel: each batch of seeds is a task, and the results are taken
in batch order, so the report is the same whatever the workers (the same failures, first failing
seed, coverage and counts). The campaign's recipe (definition, machine factory, options) is sent
packed with each task; a worker builds the campaign once and keeps it.

On the worker, a batch runs in a forked child, as on local processes: the step watchdog runs
there (it needs a main thread, which a task's thread is not), and a machine that ends its
process ends the child, not the worker; the batch is then run again here, in forked children
one seed at a time as a local campaign does, so that the seed is named. A worker that dies
(killed from outside) is Dask's to handle: its tasks run again elsewhere, and a batch Dask gives
up on (`KilledWorker`) is run again here the same way. The workers lost during the campaign are
counted for its report. `DaskExecutor` is the campaign's executor
(`harness.engines.executor`); `DaskClient`, the client it holds.

Dask was chosen over Ray by measurement on the 2-core development machine (README, "Beyond one
machine"): a local cluster starts in about 0.8 s against Ray's 4.4 s, which dominates a CI
campaign of a few hundred runs; Ray's lower per-task cost (0.5 to 0.8 ms against 1.8 ms) is
hidden by batches of tens of runs.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any

from harness.engines.fuzz_options import FuzzOptions
from harness.engines.judge import RunJudge, RunOutcome
from harness.errors import HarnessError
from harness.sim.identity import definition_digest, machine_path

__all__ = ["DaskClient", "DaskExecutor", "batch_size"]

#: Seeds a task takes at most: a run is about a millisecond and a task costs about two, so
#: tens of runs a task keep the overhead small while the last tasks still spread.
BATCH_MAX = 64
#: Tasks per worker a campaign is cut into at least, so the last ones split evenly.
TASKS_PER_WORKER = 4

#: Campaigns a worker keeps built (the latest), for the next campaigns of the same recipe
CAMPAIGNS_KEPT = 8
_CAMPAIGNS: dict[str, tuple[Any, bool]] = {}  # on a worker: (campaign, stop at first), by key
#: on a worker: each task thread's forked children (`by_key`: one a campaign) that run batches
_CHILDREN = threading.local()


def batch_size(runs: int | None, workers: int) -> int:
    """Gives the seeds a task takes: enough to hide a task's cost, few enough that the
    campaign makes `TASKS_PER_WORKER` tasks a worker (a campaign bounded by time: the most)."""
    if runs is None:
        return BATCH_MAX
    return max(1, min(BATCH_MAX, runs // max(1, workers * TASKS_PER_WORKER)))


class _Died:
    """A task's answer when the forked child running its batch ended without a result (the
    machine ended its process): the batch runs again here, seed by seed, to name the seed."""


class _Unguarded:
    """A task's answer from a worker that may not fork: its outcomes, run in the task's thread
    without the step watchdog (counted for the report, which says so)."""

    def __init__(self, outcomes: list[Any]) -> None:
        self.outcomes = outcomes


def run_batch(key: str, packed: bytes, items: Sequence[Any], trials: bool = False
               ) -> list[Any] | _Died | _Unguarded:
    """A task: the outcomes of a batch, seeds (or, `trials`, a guided round's trials), from
    the campaign its recipe builds (built once per worker; the recipe travels packed, and is
    unpacked only by a worker that builds it). The batch runs in a forked child of the worker
    (one a task thread keeps for the campaign, as a local campaign keeps its workers): the step
    watchdog needs a main thread, which a Dask task's thread is not (the child's is), and a
    machine that ends its process ends the child, not the worker. A daemon worker may not fork
    (Dask's default for workers it starts itself; `distributed.worker.daemon: False` lifts it):
    there the batch runs in the task's thread, without the watchdog."""
    import multiprocessing

    from harness.engines import isolation

    campaign, stop = _built(key, packed)

    def work(batch: Sequence[Any]) -> list[Any]:  # (trials or seeds, the items)
        trials, items = batch
        outcomes = []
        for item in items:
            outcomes.append(campaign.trial(item) if trials else campaign.run(item))
            if stop and outcomes[-1].violations:
                break  # the campaign stops here, as a local batch does
        return outcomes

    if not isolation.available() or multiprocessing.current_process().daemon:
        return _Unguarded(work((trials, items)))
    children = _CHILDREN.__dict__.setdefault("by_key", {})
    child = children.get(key)
    if child is None:
        child = children[key] = isolation.Worker(work)
    child.give(0, (trials, items))
    try:
        return child.take_watched()
    except isolation.Died:
        return _Died()
    finally:
        child.given.clear()
        if not child.process.is_alive():
            children.pop(key).close()


def _built(key: str, packed: bytes) -> tuple[Any, bool]:
    """Gives the campaign a recipe builds, and whether it stops at its first failure: built
    once per worker and kept (the latest `CAMPAIGNS_KEPT`, and the children that run them)."""
    built = _CAMPAIGNS.get(key)
    if built is None:
        import cloudpickle

        definition, machine, options, modules = cloudpickle.loads(packed)
        _register(modules, options.invariants)
        while len(_CAMPAIGNS) >= CAMPAIGNS_KEPT:  # a long-lived worker does not grow
            dropped = next(iter(_CAMPAIGNS))
            _CAMPAIGNS.pop(dropped)
            child = _CHILDREN.__dict__.get("by_key", {}).pop(dropped, None)
            if child is not None:
                child.close()
        built = _CAMPAIGNS[key] = (RunJudge(definition, machine, options),
                                   options.stop_at_first)
    return built


def _register(modules: Sequence[str], names: Sequence[str]) -> None:
    """Imports the modules that register the campaign's user invariants (on a worker), and
    raises `HarnessError` naming an invariant the worker still lacks."""
    import importlib

    from harness.checks.invariants import INVARIANTS

    for module in modules:
        with contextlib.suppress(ImportError):
            importlib.import_module(module)
    missing = [name for name in names if name not in INVARIANTS]
    if missing:
        msg = (f"the cluster's workers cannot check invariant {missing[0]!r}: the module that "
               f"registers it ({', '.join(modules) or 'none known'}) does not import there; "
               "put it on their path (PYTHONPATH), as the machine's")
        raise HarnessError(msg)


class DaskClient:
    """A Dask client for one campaign: to the scheduler at `address`, or to a local cluster
    of `workers` processes made for it (and closed with it)."""

    def __init__(self, address: str | None, workers: int) -> None:
        try:
            from distributed import Client, LocalCluster
        except ImportError as exc:
            raise HarnessError(f"--executor dask needs Dask's distributed package (pip install "
                               f"'fsmharness[dask]'): {exc}") from None
        self.cluster: Any = None
        self.client: Any = None
        self.settings = contextlib.ExitStack()  # Dask's, for the cluster made here
        try:
            if address:  # within Dask's connect timeout (distributed.comm.timeouts.connect)
                self.client = Client(address, set_as_default=False)
            else:
                import dask

                # workers that may fork (each batch runs in a child of its worker), those a
                # nanny starts again too: the setting holds while the cluster lives
                self.settings.enter_context(dask.config.set(
                    {"distributed.worker.daemon": False}))
                self.cluster = LocalCluster(n_workers=workers, threads_per_worker=1,
                                            processes=True, dashboard_address=None,
                                            silence_logs=40)
                self.client = Client(self.cluster, set_as_default=False)
        except (OSError, TimeoutError, ValueError) as exc:  # ValueError: not an address
            self.close()
            where = address or "a local cluster"
            raise HarnessError(f"cannot reach the Dask scheduler at {where}: "
                               f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
                               ) from None
        self.started = self._workers()
        self.shipped: dict[str, Any] = {}  # each campaign's packed recipe, on every worker
        self.submitted = 0
        self.unguarded = 0  # batches run without the step watchdog (on daemon workers)

    def _workers(self) -> set[str]:
        return set(self.client.scheduler_info(n_workers=-1)["workers"])

    @property
    def workers(self) -> int:
        """Gives the number of workers the scheduler has now."""
        return len(self._workers())

    def lost(self) -> int:
        """Gives how many of the workers there were at the start are gone (0 once closed)."""
        if self.client is None:
            return 0
        return len(self.started - self._workers())

    def map_ordered(self, key: str, recipe: Any, batches: Iterable[Sequence[Any]],
                    again: Callable[[Sequence[Any]], list[Any]], *, trials: bool = False
                    ) -> Iterator[list[Any]]:
        """Runs each batch (of seeds; `trials`: of a guided round's trials) as a task and
        yields the results in the batches' order, keeping about two tasks a worker in
        flight; a batch Dask gave up on (`KilledWorker`) is given to `again` (run here, item
        by item, in forked children)."""
        import cloudpickle
        from distributed import CancelledError, KilledWorker, as_completed

        shipped = self.shipped.get(key)
        if shipped is None:  # packed once a campaign: a guided one maps a round at a time
            # (sent with each task, not scattered: a worker a machine kills takes scattered
            # data with it, and the tasks after would have none)
            shipped = self.shipped[key] = cloudpickle.dumps(recipe)
        pending = iter(enumerate(batches))
        flying: dict[Any, tuple[int, Sequence[int]]] = {}
        done: dict[int, list[Any]] = {}
        following = 0
        room = max(2, 2 * self.workers)
        finishing = as_completed(loop=self.client.loop, raise_errors=False)

        def feed() -> None:
            while len(flying) < room:
                item = next(pending, None)
                if item is None:
                    return
                index, seeds = item
                self.submitted += 1
                future = self.client.submit(run_batch, key, shipped, list(seeds), trials,
                                            pure=False,
                                            key=f"fsmharness-{key}-{self.submitted}")
                flying[future] = (index, seeds)
                finishing.add(future)

        try:
            feed()
            for future in finishing:
                index, seeds = flying.pop(future)
                try:
                    got = future.result()
                except (KilledWorker, CancelledError):  # it kept killing its workers
                    got = _Died()
                if isinstance(got, _Unguarded):
                    self.unguarded += 1
                    got = got.outcomes
                done[index] = again(seeds) if isinstance(got, _Died) else got
                feed()
                while following in done:
                    yield done.pop(following)
                    following += 1
        finally:
            for future in flying:
                future.cancel()

    def close(self) -> None:
        client, self.client = getattr(self, "client", None), None
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()
        if self.cluster is not None:
            with contextlib.suppress(Exception):
                self.cluster.close()
            self.cluster = None
        self.settings.close()


class DaskExecutor:
    """A campaign's Dask executor: its recipe, the key its workers keep the built campaign
    under, and where a batch Dask gave up on runs again (`alone`); on `close`, the cluster's
    workers and those lost are noted on the judge (for the report)."""

    def __init__(self, judge: RunJudge, options: FuzzOptions,
                 alone: Callable[[Sequence[Any]], list[RunOutcome]], *, trials: bool = False
                 ) -> None:
        self.judge, self.scheduler = judge, options.scheduler
        self.client = DaskClient(options.scheduler, options.processes)
        self.workers = self.client.workers
        # the invariants by name, and the modules that register the user's: a worker imports
        # those and checks each one, or refuses (it would otherwise check what it happens to
        # have registered, and the report would claim the rest)
        modules = sorted({rule.module for rule in judge.invariants
                          if not rule.builtin and rule.module and rule.module != "__main__"})
        self.recipe = (judge.definition, judge.machine,
                       replace(options, example_db=None, executor="local", scheduler=None,
                               invariants=judge.names), tuple(modules))
        # the same definition, machine and options: the same campaign, which a worker that
        # built it for an earlier campaign reuses
        self.key = hashlib.sha256(repr((definition_digest(judge.definition),
                                        machine_path(judge.machine) or id(judge.machine),
                                        self.recipe[2])).encode()).hexdigest()[:24]
        self.alone, self.trials = alone, trials
        self.seeds_per_batch = batch_size(options.runs, self.workers)

    def map_ordered(self, batches: Iterable[Sequence[Any]]) -> Iterator[list[RunOutcome]]:
        """Gives each batch's outcomes, run as tasks, in the batches' order."""
        return self.client.map_ordered(self.key, self.recipe, batches, self.alone,
                                       trials=self.trials)

    def close(self) -> None:
        """Notes the cluster on the judge, and closes its client."""
        self.judge.executor = {"kind": "dask", "scheduler": self.scheduler or "local cluster",
                                  "workers": self.workers,
                                  "workers_lost": self.client.lost(),
                                  "unguarded_batches": self.client.unguarded}
        self.client.close()
