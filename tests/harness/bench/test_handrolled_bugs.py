"""The hand-rolled order runtime (`harness.bench.planted`): the sound machine holds under a
swarm campaign, and each variant with one planted bug is caught by its invariant."""

from __future__ import annotations

import pytest

from harness import FuzzOptions, fuzz
from harness.bench.planted import HANDROLLED, WORKFLOW, HandRolled


def test_the_sound_machine_holds() -> None:
    """300 swarm runs with every fault: the hand-rolled machine breaks no invariant."""
    report = fuzz(WORKFLOW, FuzzOptions(runs=300, seed=0, replay_dir=None), machine=HandRolled)
    assert report.verdict == "held", report.summary()["failures"]
    assert report.runs == 300
    assert report.coverage.transitions


@pytest.mark.parametrize("name", HANDROLLED)
def test_each_planted_bug_is_caught_by_its_rule(name: str) -> None:
    """The first failing run breaks the invariant the bug is planted against."""
    machine, rule = HANDROLLED[name]
    report = fuzz(WORKFLOW, FuzzOptions(runs=5_000, seed=0, shrink=False, replay_dir=None),
                  machine=machine)
    assert not report.held
    assert report.failures[0].rule == rule, [str(v) for v in report.failures[0].violations]
