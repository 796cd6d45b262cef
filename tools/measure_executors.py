"""Dask distributed beside Ray on this machine, for running fuzz campaigns on a cluster: what
chose Dask as the first-class executor (README, "Beyond one machine").

    python tools/measure_executors.py [--runs 300] [--rounds 3]

For each engine, a local cluster of two single-threaded workers: the time to start it (until a
first task has come back), the cost of a task that does nothing (1,000 of them), a campaign of
`--runs` seeded runs of the bundled refund scenario cut into batches as `--executor dask` cuts
them (the recipe sent once, each worker building the campaign once), and the memory of the
cluster's processes (their resident set, summed) after it. Ray is measured when it is installed
(`pip install ray`: it is not a dependency of fsmharness).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import cloudpickle
import psutil

from harness import FuzzOptions
from harness.engines.cluster import batch_size, run_batch
from harness.sim.machine import ReferenceMachine
from reference_machine import load_definition


def _noop(value: int) -> int:
    return value


def _memory_mb() -> float:
    """Gives the resident memory of this process's descendants (the cluster's processes)."""
    total = 0
    for child in psutil.Process().children(recursive=True):
        try:
            total += child.memory_info().rss
        except psutil.Error:
            continue
    return total / 1e6


def _batches(runs: int) -> list[list[int]]:
    size = batch_size(runs, 2)
    return [list(range(start, min(start + size, runs))) for start in range(0, runs, size)]


def measure_dask(packed: bytes, runs: int, rounds: int) -> dict[str, Any]:
    from distributed import Client, LocalCluster

    started = time.perf_counter()
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           dashboard_address=None, silence_logs=40)
    client = Client(cluster, set_as_default=False)
    client.submit(_noop, 0).result()
    start_s = time.perf_counter() - started

    def tasks() -> None:
        client.gather(client.map(_noop, range(1000), pure=False))

    def campaign(round_: int) -> int:
        shipped = client.scatter(packed, broadcast=True, hash=False)
        futures = [client.submit(run_batch, "measure", shipped, seeds, pure=False)
                   for seeds in _batches(runs)]
        return sum(outcome.steps for batch in client.gather(futures) for outcome in batch)

    figures = _figures(start_s, tasks, campaign, rounds)
    client.close()
    cluster.close()
    return figures


def measure_ray(packed: bytes, runs: int, rounds: int) -> dict[str, Any] | None:
    try:
        import ray
    except ImportError:
        return None
    started = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    noop = ray.remote(_noop)
    batch = ray.remote(run_batch)
    ray.get(noop.remote(0))
    start_s = time.perf_counter() - started

    def tasks() -> None:
        ray.get([noop.remote(index) for index in range(1000)])

    def campaign(round_: int) -> int:
        shipped = ray.put(packed)
        results = ray.get([batch.remote("measure", shipped, seeds) for seeds in _batches(runs)])
        return sum(outcome.steps for batch_ in results for outcome in batch_)

    figures = _figures(start_s, tasks, campaign, rounds)
    ray.shutdown()
    return figures


def _figures(start_s: float, tasks: Callable[[], None], campaign: Callable[[int], int],
             rounds: int) -> dict[str, Any]:
    task_times, campaign_times = [], []
    for round_ in range(rounds):
        began = time.perf_counter()
        tasks()
        task_times.append((time.perf_counter() - began) / 1000)
        began = time.perf_counter()
        campaign(round_)
        campaign_times.append(time.perf_counter() - began)
    return {"start_s": round(start_s, 2),
            "per_task_ms": round(statistics.median(task_times) * 1000, 2),
            "campaign_s": round(statistics.median(campaign_times), 3),
            "memory_mb": round(_memory_mb())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    definition = load_definition("scenarios/refund_escalation.yaml")
    packed = cloudpickle.dumps((definition, ReferenceMachine,
                                FuzzOptions(runs=args.runs, replay_dir=None)))
    print("| engine | start-up | per task | 300-run campaign | memory of the cluster |")
    print("| --- | --- | --- | --- | --- |")
    for name, measured in (("Dask distributed", measure_dask(packed, args.runs, args.rounds)),
                           ("Ray", measure_ray(packed, args.runs, args.rounds))):
        if measured is None:
            print(f"| {name} | not installed | | | |")
            continue
        print(f"| {name} | {measured['start_s']} s | {measured['per_task_ms']} ms | "
              f"{measured['campaign_s']} s | {measured['memory_mb']} MB |")


if __name__ == "__main__":
    main()
