"""The two first bundled scenarios under the same failure matrix (their deeper tests are in
tests/simulation/test_failure_matrix.py); the naive variants are caught, shrunk, and replay."""

from __future__ import annotations

from pathlib import Path

import pytest
from matrix import MATRIX, SCENARIOS, assert_entry_holds, campaign, scenario
from running import cli

REFUND = scenario("refund_escalation")
TRIAGE = scenario("support_triage")
NAIVE = {"code_agent_pr_twice": ("no_duplicate_effect", "forge.open_pull_request"),
         "deploy_double_rollback": ("no_duplicate_effect", "deployer.rollback")}


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
    naive = cli("fuzz", "scenarios/naive/", "--runs", "500", "--report", str(tmp_path))
    assert naive.returncode == 1, naive.stdout + naive.stderr
    for name, (rule, tool) in NAIVE.items():
        assert f"FAIL  scenarios/naive/{name}.yaml: " in naive.stdout
        assert f"violated {rule} " in naive.stdout and f"{tool} took effect twice" in naive.stdout
    replays = sorted((tmp_path / "replays").glob("*.json"))
    assert len(replays) == len(NAIVE)
    for replay_file in replays:
        again = cli("replay", str(replay_file))
        assert again.returncode == 1 and "reproduced no_duplicate_effect" in again.stdout
    assert sorted(p.stem for p in (SCENARIOS / "naive").glob("*.yaml")) == sorted(NAIVE)
