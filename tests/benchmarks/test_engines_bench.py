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

Run: `python -m pytest -n 0 tests/benchmarks/test_engines_bench.py --benchmark-only
--benchmark-group-by=group --benchmark-columns=min,median,rounds`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from planted import WORKFLOW

from harness import ExploreOptions, HistoryRecord
from harness import explore as explore_workflow
from harness.bench.checkers import checked, history_of, read_types
from harness.bench.engines import hypothesis_fuzz, native_fuzz
from reference_machine import load_definition

ROOT = Path(__file__).resolve().parents[2]
REFUND = load_definition(ROOT / "scenarios" / "refund_escalation.yaml")


def floor(history: tuple[HistoryRecord, ...]) -> int:
    """The cheapest pass over a history: read each record's type."""
    return read_types(history)


def all_invariants(history: tuple[HistoryRecord, ...]) -> int:
    return checked(REFUND, history)


@pytest.fixture(scope="module")
def small() -> tuple[HistoryRecord, ...]:
    return history_of(REFUND, 1_000)


@pytest.fixture(scope="module")
def large() -> tuple[HistoryRecord, ...]:
    return history_of(REFUND, 100_000)


@pytest.mark.benchmark(group="checkers: 1k records")
@pytest.mark.parametrize("contender", [floor, all_invariants], ids=["floor", "all invariants"])
def test_checkers_1k(benchmark: Any, contender: Any, small: tuple[HistoryRecord, ...]) -> None:
    """A pass over a history of about a thousand records."""
    benchmark.extra_info["records"] = benchmark(contender, small)


@pytest.mark.benchmark(group="checkers: 100k records")
@pytest.mark.parametrize("contender", [floor, all_invariants], ids=["floor", "all invariants"])
def test_checkers_100k(benchmark: Any, contender: Any, large: tuple[HistoryRecord, ...]
                       ) -> None:
    """The same over a hundred times as many records: the per-record cost should not grow."""
    benchmark.extra_info["records"] = benchmark.pedantic(contender, (large,), rounds=3,
                                                         iterations=1)


FUZZ_RUNS = 40
native = native_fuzz(WORKFLOW, FUZZ_RUNS)
hypothesis_driven = hypothesis_fuzz(WORKFLOW, examples=25)
hypothesis_here = hypothesis_fuzz(WORKFLOW, examples=25, isolate=False)


@pytest.mark.benchmark(group="engines: simulated steps of the planted workflow")
@pytest.mark.parametrize("engine", [native, hypothesis_driven, hypothesis_here],
                         ids=["native fuzz", "hypothesis machine",
                              "hypothesis machine, in process"])
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

