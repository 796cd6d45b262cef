"""The hand-rolled runtime of the bug hunt (`harness.bench.handrolled`): the sound one holds
and takes every declared transition, and each planted variant is caught with its rule."""

from __future__ import annotations

import pytest

from harness import FuzzOptions, fuzz
from harness.bench.handrolled import HANDROLLED, WORKFLOW, HandRolled


def test_the_sound_hand_rolled_machine_holds_under_every_fault() -> None:
    report = fuzz(WORKFLOW, FuzzOptions(runs=400, replay_dir=None), machine=HandRolled)
    assert report.held, [str(v) for f in report.failures for v in f.violations]
    coverage = report.summary()["coverage"]
    assert coverage["transitions"]["missing"] == [] and coverage["states"]["missing"] == []
    assert report.faults["second_worker"] > 0 and report.faults["crash"] > 0


@pytest.mark.parametrize("name", sorted(HANDROLLED))
@pytest.mark.parametrize("strategy", ["swarm", "guided"])
def test_each_planted_bug_is_caught_with_its_rule(name: str, strategy: str) -> None:
    machine, rule = HANDROLLED[name]
    report = fuzz(WORKFLOW, FuzzOptions(runs=3_000, shrink=False, replay_dir=None,
                                        strategy=strategy), machine=machine)
    assert report.failures, f"{name} not caught in 3,000 runs"
    assert report.failures[0].rule in rule.split("|")
