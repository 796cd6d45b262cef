"""The bug hunt's figures: runs to the first failure per strategy, and its table."""

from __future__ import annotations

import pytest

from harness.bench.hunt import CRUDE_RATE, HUNTERS, Bug, bugs, crude_plan, hunt, summary, table
from harness.bench.planted import HANDROLLED, WORKFLOW, HandRolled
from harness.errors import HarnessError
from harness.sim.simulator import plan_for


def test_the_hunt_counts_runs_to_the_first_failure_and_tabulates_them() -> None:
    machine, rule = HANDROLLED["stale_timer"]
    found = hunt([Bug("stale", WORKFLOW, machine, rule)], ("swarm", "guided"), seeds=2,
                 runs_max=500)
    assert [h.strategy for h in found] == ["swarm", "guided"]
    assert all(h.missed == 0 and len(h.runs) == 2 and min(h.runs) >= 1 for h in found)
    text = table(found)
    assert text.splitlines()[0] == ("| bug | swarm runs (s) | guided runs (s) | swarm / guided "
                                    "|")
    assert text.splitlines()[2].startswith("| stale | ")
    assert summary(found)["guided"]["stale"]["missed"] == 0


def test_a_sound_machine_is_a_miss_that_counts_its_whole_budget() -> None:
    (found,) = hunt([Bug("sound", WORKFLOW, HandRolled, "no_duplicate_effect")], ("swarm",),
                    seeds=1, runs_max=40)
    # its budget, and the runs it aimed at what those left untested (harness.engines.fuzz)
    assert found.missed == 1 and 40 <= found.runs[0] <= 40 + 8 * 17


def test_a_bug_caught_by_another_rule_is_refused() -> None:
    machine, _ = HANDROLLED["stale_timer"]
    with pytest.raises(HarnessError, match="not approval_genuine"):
        hunt([Bug("stale", WORKFLOW, machine, "approval_genuine")], ("swarm",), seeds=1)


def test_the_bundled_bugs_are_the_hand_rolled_ones_and_the_naive_scenarios() -> None:
    names = [bug.name for bug in bugs()]
    assert sum(name.startswith("hand-rolled ") for name in names) == len(HANDROLLED)
    assert sum(name.startswith("naive ") for name in names) == 4


def test_the_crude_driver_runs_every_fault_kind_flat_in_every_run() -> None:
    """The baseline a user writes in an hour: every kind the definition can take, at
    `CRUDE_RATE`, no swarm, no hot runs; hunted beside the strategies, it finds a bug too."""
    plan = crude_plan(WORKFLOW)
    assert not plan.swarm and not plan.hot and plan.kinds
    assert {entry.rate for entry in plan.rates} == {CRUDE_RATE}
    assert set(plan.kinds) == set(plan_for(WORKFLOW).kinds)
    machine, rule = HANDROLLED["stale_timer"]
    (found,) = hunt([Bug("stale", WORKFLOW, machine, rule)], ("crude",), seeds=2,
                    runs_max=500)
    assert found.strategy == "crude" and found.missed == 0
    assert "crude" in HUNTERS
