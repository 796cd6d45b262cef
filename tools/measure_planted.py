"""Measures, per planted bug, how long the native fuzzer takes to find it and how short the
shrunk trace is, over ten campaigns that start at different seeds.

Run from the project's root: `python tools/measure_planted.py` (add `--hypothesis` to
measure the Hypothesis machine too). It prints one table row per bug: the median wall time and
number of runs to the first failure (shrinking excluded), and the shrunk trace lengths.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))

from planted import PLANTED, WORKFLOW

from harness import FuzzOptions, fuzz

STARTS = [index * 100_003 for index in range(10)]


def main() -> None:
    print("| bug | caught by | median time to find | median runs | shrunk steps (10 seeds) |")
    print("| --- | --- | --- | --- | --- |")
    for name, (machine, rule) in PLANTED.items():
        times, runs, steps = [], [], []
        for start in STARTS:
            began = time.perf_counter()
            found = fuzz(WORKFLOW, FuzzOptions(runs=20_000, seed=start, shrink=False,
                                               replay_dir=None), machine=machine)
            times.append(time.perf_counter() - began)
            runs.append(found.runs)
            assert found.failures and found.failures[0].rule == rule, (name, start)
            shrunk = fuzz(WORKFLOW, FuzzOptions(runs=1, seed=found.failures[0].seed,
                                                replay_dir=None), machine=machine)
            steps.append(shrunk.failures[0].counterexample.steps)
        print(f"| {name} | {rule} | {statistics.median(times):.2f} s | "
              f"{statistics.median(runs):g} | {min(steps)}-{max(steps)} "
              f"(median {statistics.median(steps):g}) |", flush=True)


if __name__ == "__main__":
    main()
