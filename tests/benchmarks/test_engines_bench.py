"""Throughput of what issue 5 built: checker passes, native fuzzing beside the Hypothesis machine,
and exhaustive search.

Groups (each compares contenders run in the same session; ratios, not absolute times, are the
claims, and nothing here asserts a time):

- checkers over 1k and over 100k history records: every built-in invariant in one `check`,
  beside the floor, a bare pass that only reads each record's type. The per-record cost at
  both sizes shows the checkers stay linear in the history's length.
- native fuzzing and the Hypothesis machine on the planted workflow, each for a fixed amount of
  work; `extra_info["steps"]` holds the simulated steps each took, so the README divides.
- exhaustive search of the planted workflow to depth 5 with one fault:
  `extra_info["states"]` holds the distinct states it found.

Run: `python -m pytest tests/benchmarks/test_engines_bench.py --benchmark-only
--benchmark-group-by=group --benchmark-columns=min,median,rounds`.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test
from planted import WORKFLOW

from harness import ExploreOptions, FuzzOptions, HistoryRecord, SimOptions, Simulator, check
from harness import explore as explore_workflow
from harness import fuzz as fuzz_workflow
from harness.stateful import workflow_machine
from reference_machine import load_definition

ROOT = Path(__file__).resolve().parents[2]
REFUND = load_definition(ROOT / "scenarios" / "refund_escalation.yaml")


def history_of(records_min: int) -> tuple[HistoryRecord, ...]:
    """Gives a history of the refund scenario, faults on, of at least `records_min` records:
    seeded runs one after another, each run's executions renamed apart (`s7.x1`) and its
    steps moved after the last run's, so the checkers see one long history."""
    simulator = Simulator(REFUND, SimOptions(executions=10))
    records: list[HistoryRecord] = []
    seed = 0
    while len(records) < records_min:
        offset = records[-1].step if records else 0
        for record in simulator.run(seed).history:
            moved = record._replace(step=record.step + offset)
            if getattr(record, "execution", ""):
                moved = moved._replace(execution=f"s{seed}.{record.execution}")
            records.append(moved)
        seed += 1
    return tuple(records)


def floor(history: tuple[HistoryRecord, ...]) -> int:
    """The cheapest pass over a history: read each record's type."""
    kinds: Counter[type] = Counter()
    for record in history:
        kinds[type(record)] += 1
    return len(history)


def checked(history: tuple[HistoryRecord, ...]) -> int:
    found = check(REFUND, history)
    assert found == []
    return len(history)


@pytest.fixture(scope="module")
def small() -> tuple[HistoryRecord, ...]:
    return history_of(1_000)


@pytest.fixture(scope="module")
def large() -> tuple[HistoryRecord, ...]:
    return history_of(100_000)


@pytest.mark.benchmark(group="checkers: 1k records")
@pytest.mark.parametrize("contender", [floor, checked], ids=["floor", "all invariants"])
def test_checkers_1k(benchmark: Any, contender: Any, small: tuple[HistoryRecord, ...]) -> None:
    """A pass over a history of about a thousand records."""
    benchmark.extra_info["records"] = benchmark(contender, small)


@pytest.mark.benchmark(group="checkers: 100k records")
@pytest.mark.parametrize("contender", [floor, checked], ids=["floor", "all invariants"])
def test_checkers_100k(benchmark: Any, contender: Any, large: tuple[HistoryRecord, ...]
                       ) -> None:
    """The same over a hundred times as many records: the per-record cost should not grow."""
    benchmark.extra_info["records"] = benchmark.pedantic(contender, (large,), rounds=3,
                                                         iterations=1)


FUZZ_RUNS = 40


def native() -> int:
    report = fuzz_workflow(WORKFLOW, FuzzOptions(runs=FUZZ_RUNS, replay_dir=None,
                                                 sim=SimOptions(executions=1)))
    return report.steps


def hypothesis_driven() -> int:
    """Runs the Hypothesis machine for a fixed number of examples; gives the steps taken."""
    steps = [0]
    machine = workflow_machine(WORKFLOW, options=SimOptions(executions=1))
    teardown = machine.teardown

    def counting(self: Any) -> None:
        teardown(self)
        if self.run is not None:
            steps[0] += self.run.clock.step

    machine.teardown = counting  # type: ignore[method-assign]
    run_state_machine_as_test(machine, settings=settings(
        max_examples=25, stateful_step_count=30, database=None, deadline=None,
        derandomize=True, suppress_health_check=list(HealthCheck)))
    return steps[0]


@pytest.mark.benchmark(group="engines: simulated steps of the planted workflow")
@pytest.mark.parametrize("engine", [native, hypothesis_driven], ids=["native fuzz",
                                                                    "hypothesis machine"])
def test_fuzz_engines(benchmark: Any, engine: Any) -> None:
    """Native seeded runs beside Hypothesis's rule-based runs of the same simulator; divide
    the time by `extra_info["steps"]` for the time per step."""
    steps = benchmark.pedantic(engine, rounds=3, iterations=1)
    benchmark.extra_info["steps"] = steps
    assert steps > 0


@pytest.mark.benchmark(group="explore: distinct states")
def test_explore_depth_5(benchmark: Any) -> None:
    """Every schedule of the planted workflow to five steps with one fault."""
    report = benchmark.pedantic(explore_workflow, (WORKFLOW, ExploreOptions(depth=5)),
                                rounds=2, iterations=1)
    benchmark.extra_info["states"] = report.states
    benchmark.extra_info["runs"] = report.runs
    assert report.held and report.complete

