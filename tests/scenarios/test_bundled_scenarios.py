"""The two first bundled scenarios under the same failure matrix (their deeper tests are in
tests/simulation/test_failure_matrix.py); the naive variants are caught, shrunk, and replay."""

from __future__ import annotations

from pathlib import Path

import pytest
from matrix import MATRIX, SCENARIOS, assert_entry_holds, campaign, scenario
from running import cli

REFUND = scenario("refund_escalation")
TRIAGE = scenario("support_triage")
NAIVE = {"code_agent_pr_twice": ("no_duplicate_effect", "forge.open_pull_request took effect "
                                                         "twice"),
         "deploy_double_rollback": ("no_duplicate_effect", "deployer.rollback took effect twice"),
         "calendar_book_without_hold": ("no_slot_committed_twice", "booked by x")}


@pytest.mark.parametrize("entry", sorted(MATRIX))
def test_refund_failure_matrix(entry: str) -> None:
    assert_entry_holds(REFUND, entry)


@pytest.mark.parametrize("entry", sorted(set(MATRIX) - {
    "approval_denied", "approval_expired", "forged_approval", "compensation_failure"}))
def test_triage_failure_matrix(entry: str) -> None:
    assert_entry_holds(TRIAGE, entry)


@pytest.mark.parametrize("definition", [REFUND, TRIAGE], ids=["refund", "triage"])
def test_fuzz_campaign_with_every_fault_kind(definition: object) -> None:
    campaign(definition)  # type: ignore[arg-type]


def test_the_sound_scenarios_hold_and_the_naive_ones_break(tmp_path: Path) -> None:
    sound = cli("fuzz", "scenarios/", "--runs", "100", "--no-report")
    assert sound.returncode == 0, sound.stdout + sound.stderr
    assert sound.stdout.count("held  scenarios/") == 6
    # the calendar's invariant is a user's: imported, as a user would
    naive = cli("fuzz", "scenarios/naive/", "--runs", "500", "--report", str(tmp_path),
                "--import", "scenarios.calendar_world")
    assert naive.returncode == 1, naive.stdout + naive.stderr
    for name, (rule, says) in NAIVE.items():
        assert f"FAIL  scenarios/naive/{name}.yaml: " in naive.stdout
        assert f"violated {rule} " in naive.stdout and says in naive.stdout
    assert naive.stdout.count("shrunk to ") == len(NAIVE)
    replays = sorted((tmp_path / "replays").glob("*.json"))
    assert len(replays) == len(NAIVE)
    for replay_file in replays:
        again = cli("replay", str(replay_file), "--import", "scenarios.calendar_world")
        assert again.returncode == 1 and "reproduced no_" in again.stdout
    assert sorted(p.stem for p in (SCENARIOS / "naive").glob("*.yaml")) == sorted(NAIVE)


def test_the_calendar_runs_on_its_world_from_the_command_line() -> None:
    sound = cli("fuzz", "scenarios.calendar_world:SharedCalendar", "--runs", "100",
                "--no-report")
    assert sound.returncode == 0, sound.stdout + sound.stderr
    naive = cli("fuzz", "scenarios.calendar_world:NaiveSharedCalendar", "--runs", "200",
                "--no-report")
    assert naive.returncode == 1 and "violated no_slot_committed_twice" in naive.stdout


def test_the_refund_transition_default_campaigns_miss_is_reachable() -> None:
    """notifying -> needs_human on step.failed needs a permanent email failure after the money
    moved: rare at the default rates (no default campaign of 200 runs took it), taken when the
    email tool fails often."""
    from fault_injection import load_plan
    from harness import SimOptions, Simulator
    from harness._coverage import coverage_of

    plan = load_plan({"faults": {"tool_permanent": {"rate": 0.9, "tools": ["email.send"]}}})
    simulator = Simulator(REFUND, SimOptions(plan=plan))
    taken = sum(("notifying", "step.failed", "needs_human") in
                coverage_of(REFUND, simulator.run(seed).history).transitions
                for seed in range(40))
    assert taken > 0
