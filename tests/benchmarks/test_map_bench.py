"""Simulated steps of a Step Functions `Map` over its items, at 10 and at 100 items.

A map whose concurrency is unbounded calls every item's task at once: each step then completes
one call among all those in flight, and the machine's observation lists them. Both benchmarks
run `SEEDS` with no faults, so every item is called once and answered once; `extra_info`
tells the steps, so the ratio of the two means divided by the ratio of their steps is what a
step costs more with ten times the items (1.0: a step's cost does not grow with the items).
Issue 37 aims at 2,000 steps a second at 100 items on one core; nothing asserts a time.
Run: `python -m pytest -n 0 tests/benchmarks/test_map_bench.py --benchmark-only
--benchmark-columns=min,median,rounds`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fault_injection import load_plan
from harness import SimOptions, Simulator
from reference_machine.importers import import_definition

SEEDS = range(3)
MAP = {"StartAt": "Each", "States": {
    "Each": {"Type": "Map", "ItemsPath": "$.items", "ResultPath": None,
             "ItemProcessor": {"StartAt": "Work", "States": {
                 "Work": {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke",
                          "Parameters": {"FunctionName": "work", "Payload.$": "$"},
                          "End": True}}},
             "Next": "Done"},
    "Done": {"Type": "Succeed"}}}


@pytest.mark.parametrize("items", [10, 100])
@pytest.mark.benchmark(group="map items")
def test_map_of_items(benchmark: Any, items: int, tmp_path: Path) -> None:
    path = tmp_path / "map.asl.json"
    path.write_text(json.dumps(MAP), encoding="utf-8")
    simulator = Simulator(import_definition(path), SimOptions(
        plan=load_plan({"faults": {}}), executions=1,
        context={"items": [{"n": n} for n in range(items)]}))

    def runs() -> int:
        steps = 0
        for seed in SEEDS:
            result = simulator.run(seed)
            assert result.status == "final", result.summary()
            steps += result.steps
        return steps

    benchmark.extra_info["steps"] = steps = runs()
    assert steps == len(SEEDS) * (items + 1)  # a start, then one answer an item
    benchmark.pedantic(runs, rounds=3, warmup_rounds=0)
