"""The sound scenarios hold from the command line; each naive variant is caught, shrunk, and
its replay file reproduces it."""

from __future__ import annotations

import shutil
from pathlib import Path

from matrix import SCENARIOS
from running import ROOT, cli

NAIVE = {"code_agent_pr_twice": ("no_duplicate_effect", "forge.open_pull_request took effect "
                                                         "twice"),
         "deploy_double_rollback": ("no_duplicate_effect", "deployer.rollback took effect twice"),
         "calendar_book_without_hold": ("no_slot_committed_twice", "booked by x"),
         "triage_credit_twice": ("no_duplicate_effect", "billing.issue_credit took effect twice"),
         "batch_refile_on_changes": ("no_duplicate_effect", "archive.file_document took effect "
                                                             "twice")}


def test_the_sound_scenarios_hold_and_the_naive_ones_break(tmp_path: Path) -> None:
    sound = cli("fuzz", "scenarios/", "--runs", "100", "--no-report")
    assert sound.returncode == 0, sound.stdout + sound.stderr
    assert sound.stdout.count("held  scenarios/") == 8


def test_the_readmes_command_catches_every_naive_variant(tmp_path: Path) -> None:
    """Exactly the command the scenarios page gives, at its defaults (500 runs, reports in
    `reports/`), run in a copy of the project's scenarios; the calendar's invariant is a
    user's, imported as a user would."""
    command = "fsmharness fuzz scenarios/naive/ --import scenarios.calendar_world"
    page = " ".join((ROOT / "docs" / "scenarios.md").read_text().split())
    assert f"`{command}`" in page
    shutil.copytree(SCENARIOS, tmp_path / "scenarios")
    naive = cli(*command.split()[1:], cwd=tmp_path)
    assert naive.returncode == 1, naive.stdout + naive.stderr
    for name, (rule, says) in NAIVE.items():
        assert f"FAIL  scenarios/naive/{name}.yaml: " in naive.stdout
        assert f"violated {rule} " in naive.stdout and says in naive.stdout
    assert naive.stdout.count("shrunk to ") == len(NAIVE)
    replays = sorted((tmp_path / "reports" / "replays").glob("*.json"))
    assert len(replays) == len(NAIVE)
    for replay_file in replays:
        again = cli("replay", str(replay_file), "--import", "scenarios.calendar_world",
                    cwd=tmp_path)
        assert again.returncode == 1 and "reproduced no_" in again.stdout
    assert sorted(p.stem for p in (SCENARIOS / "naive").glob("*.yaml")) == sorted(NAIVE)


def test_the_calendar_runs_on_its_world_from_the_command_line() -> None:
    sound = cli("fuzz", "scenarios.calendar_world:SharedCalendar", "--runs", "100",
                "--no-report")
    assert sound.returncode == 0, sound.stdout + sound.stderr
    naive = cli("fuzz", "scenarios.calendar_world:NaiveSharedCalendar", "--runs", "200",
                "--no-report")
    assert naive.returncode == 1 and "violated no_slot_committed_twice" in naive.stdout
