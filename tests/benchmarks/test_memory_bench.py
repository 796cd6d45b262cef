"""A fuzz campaign's memory does not grow with its runs (issue 16): it keeps what the runs add
up to (coverage, fault counts, metrics) and its failures, never each run's outcome.

Measured as `fsmharness bench --only memory` does, by tracemalloc in the campaign's own process
(after a short campaign has built what is built once). A campaign that kept every outcome grew
by about 3 kB a run (2.3 MB at 500 runs, 17 MB at 5,000); this one grows by tens of bytes a
run, which is noise. The bound below, 500 bytes a run, sits between the two; it is memory, not
time, so a loaded machine does not move it.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from harness.bench.memory import campaign_peak
from harness.engines.fuzz import RUNS_DEFAULT
from reference_machine import load_definition

ROOT = Path(__file__).resolve().parents[2]
REFUND = load_definition(ROOT / "scenarios" / "refund_escalation.yaml")


def _peak(runs: int, strategy: str) -> int:
    return campaign_peak(REFUND, runs, strategy=strategy)


def _apart(runs: int, strategy: str) -> int:
    """Gives the campaign's peak measured in a fresh interpreter (spawned, not forked: a fork
    of a test worker inherits what the tests before it left, and a full run measured 136 bytes
    a run where a fresh process measures 12); it may fork the campaign's workers in turn."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(_peak, runs, strategy).result()


def grown_per_run(strategy: str, short: int, long: int) -> tuple[float, str]:
    """Gives the bytes a run adds to a campaign's peak, from `short` runs to `long`, and the
    figures as words."""
    # each in a forked child of its own: tracemalloc counts every thread of the process it
    # runs in, and a test run's own threads (pytest-xdist's channel to its controller)
    # allocate meanwhile
    small, large = _apart(short, strategy), _apart(long, strategy)
    per_run = (large - small) / (long - short)
    return per_run, (f"{small:,} B at {short} runs, {large:,} B at {long}: "
                     f"{per_run:,.0f} B a run more")


def test_peak_memory_does_not_grow_with_the_runs() -> None:
    """From the default number of runs up, as both campaigns then start the same fixed work
    (two fresh interpreters beside the campaign, whose CPU leaves more results waiting in the
    parent: 300 runs against 3,000 measured 505 bytes a run, 500 against 3,000 230)."""
    per_run, told = grown_per_run("swarm", RUNS_DEFAULT, 3_000)
    assert per_run < 500, told


@pytest.mark.slow  # 8,000 guided runs: 80 s on the 2-core machine
def test_a_guided_campaign_keeps_a_corpus_of_bounded_size() -> None:
    """The guided strategy keeps a corpus, at most `CORPUS_MAX` entries of a few kilobytes
    each (its draws packed, its behaviours shared), and the fault sites it aims at (finite):
    the corpus of this workflow and its sites are full before 6,000 runs (with aimed faults
    they filled at about 3,200 runs; since swarm's hot runs meet more sites, the last still
    come between 4,000 and 6,000, 112 bytes a run), and 2,000 more runs add nothing but noise
    (0 bytes a run, measured)."""
    per_run, told = grown_per_run("guided", 6_000, 8_000)
    assert per_run < 100, told
