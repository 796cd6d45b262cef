"""`fsmharness bench` end to end: the groups side by side, the document, `--save` and
`--compare`, and bad input refused before any measuring.

Every run here is `--quick` with a tiny `--seconds`: these tests check what is measured and
reported, never how fast (no wall-clock thresholds)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from running import ROOT, cli, one_error_line

from harness.bench import suite
from harness.cli.main import cli as group

QUICK = ("--quick", "--seconds", "0.005", "--quiet")
CONTENDERS = ["dict FSM (floor)", "reference decide", "runtime, memory store",
              "runtime, SQLite NORMAL", "runtime, SQLite FULL", "transitions",
              "python-statemachine"]


def bench(*args: str, cwd: Path = ROOT) -> dict[str, Any]:
    result = cli("bench", *QUICK, "--json", *args, cwd=cwd)
    assert result.returncode == 0, result.stdout + result.stderr
    return dict(json.loads(result.stdout))


@pytest.mark.smoke
def test_a_shape_is_walked_by_every_contender_side_by_side() -> None:
    doc = bench("--only", "shape: 8-state cycle")
    assert (doc["kind"], doc["format"]) == ("fsmharness.bench", 1)
    rows = doc["results"]
    assert [row["contender"] for row in rows] == CONTENDERS
    assert {row["group"] for row in rows} == {
        "shape: 8-state cycle (cycle8, 8 transitions a round)"}
    assert rows[0]["x_floor"] == 1.0
    assert all(row["per_op_us"] > 0 and row["unit"] == "transition" for row in rows)
    decide = rows[1]
    # the ratios are the peers' times over this one's, from the same run
    transitions = rows[5]["per_op_us"]
    assert decide["speedup_vs"]["transitions"] == pytest.approx(
        transitions / decide["per_op_us"], rel=0.01)
    (aim,) = doc["aims"]
    assert aim["aim"] == "decide faster than transitions (8-state cycle)"
    assert aim["met"] == (aim["measured"] >= 6)


def test_the_durable_checkers_and_engine_groups_have_their_floors() -> None:
    doc = bench("--only", "durable", "--only", "checkers", "--only", "engines")
    floors = {row["group"].split(" (")[0]: row["contender"] for row in doc["results"]
              if row["x_floor"] == 1.0}
    assert floors == {
        "durable: SQLite NORMAL, commit per event": "bare sqlite3 loop (floor)",
        "durable: SQLite FULL, commit per event": "bare sqlite3 loop (floor)",
        "durable: SQLite NORMAL, group commit of 100": "bare sqlite3 loop (floor)",
        "checkers: 1k records of refund_escalation": "read each record (floor)",
        "checkers: 10k records of refund_escalation": "read each record (floor)",
        "engines: refund_escalation, every fault, 1 execution a run": "native fuzz (floor)",
    }
    checked = [row for row in doc["results"] if row["contender"] == "all invariants"]
    assert [row["records"] >= size for row, size in zip(checked, (1_000, 10_000),
                                                       strict=True)] == [True, True]
    assert all(row["peak_bytes_per_record"] > 0 for row in checked)
    assert [aim["aim"].split(" (")[0] for aim in doc["aims"]] == [
        "SQLite runtime over the bare sqlite3 loop", "SQLite runtime over the bare sqlite3 loop",
        "SQLite runtime over the bare sqlite3 loop",  # group commit of 100: issue 21's
        "native fuzz steps/s over the Hypothesis machine's",
        "checkers linear: time per record over a bare pass's, 10k over 1k",
        "checkers bounded: peak memory per record, 10k over 1k"]


def test_a_target_is_the_scenario_shape_and_runs_the_simulator(tmp_path: Path) -> None:
    triage = ROOT / "scenarios" / "support_triage.yaml"
    doc = bench(str(triage), "--only", "scenario", "--only", "simulator")
    groups = list(dict.fromkeys(row["group"] for row in doc["results"]))
    assert groups[0].startswith("shape: scenario (support_triage, ")
    assert groups[1] == "simulator: support_triage, 3 executions a run"


def test_the_table_and_markdown_name_every_group() -> None:
    table = cli("bench", *QUICK, "--only", "shape: 8-state cycle")
    assert table.returncode == 0, table.stderr
    assert "shape: 8-state cycle" in table.stdout and "aims" in table.stdout
    markdown = cli("bench", *QUICK, "--markdown", "--only", "shape: 8-state cycle")
    lines = markdown.stdout.splitlines()
    assert lines[0] == ("| group | contender | per op | x floor | vs transitions | "
                        "vs statemachine |")
    # the header and its rule, 7 contenders, then the aims: header, rule, one aim
    assert len([line for line in lines if line.startswith("| ")]) == 2 + 7 + 2 + 1


def test_save_then_compare_finds_a_regression(tmp_path: Path) -> None:
    saved = cli("bench", *QUICK, "--only", "shape: 8-state cycle", "--save", "base",
                cwd=tmp_path)
    assert saved.returncode == 0, saved.stderr
    path = tmp_path / "reports" / "benchmarks" / "base.json"
    assert f"saved: {Path('reports/benchmarks/base.json')}" in saved.stdout
    baseline = json.loads(path.read_text())
    # against itself with a huge tolerance: nothing regressed
    same = cli("bench", *QUICK, "--only", "shape: 8-state cycle", "--compare", str(path),
               "--tolerance", "100", cwd=tmp_path)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "0 of 6 figures regressed" in same.stdout
    # a baseline in which decide cost a ten-thousandth of what it costs now: a regression,
    # exit 1 (the tolerance is wide enough that no other figure's noise between two quick
    # runs passes it)
    for row in baseline["results"]:
        if row["contender"] == "reference decide":
            row["x_floor"] = row["x_floor"] / 10_000
    (tmp_path / "fast.json").write_text(json.dumps(baseline))
    worse = cli("bench", *QUICK, "--only", "shape: 8-state cycle", "--compare", "fast.json",
                "--tolerance", "100", "--json", cwd=tmp_path)
    assert worse.returncode == 1, worse.stdout + worse.stderr
    figures = json.loads(worse.stdout)["compared"]["figures"]
    assert [f["contender"] for f in figures if f["regressed"]] == ["reference decide"]


@pytest.mark.parametrize(("args", "fragments"), [
    (("--compare", "missing.json"), ("missing.json", "no such file")),
    (("--compare", "other.json"), ("other.json", "not an fsmharness bench document")),
    (("--only", "nothing-like-this"), ("--only nothing-like-this", "no section")),
    (("--save", "a/b"), ("--save 'a/b'", "expected a name or a path ending in .json")),
    (("--save", "x", "--only", "nothing-like-this"), ("--only nothing-like-this",)),
    (("--save", "sub/dir/x.json", "--compare", "nope.json"), ("nope.json", "no such file")),
    (("--seconds", "0"), ("--seconds",)),
    (("no_such_file.yaml",), ("no_such_file.yaml",)),
])
def test_bad_input_is_refused_before_measuring(tmp_path: Path, args: tuple[str, ...],
                                               fragments: tuple[str, ...]) -> None:
    (tmp_path / "other.json").write_text('{"kind": "fsmharness.report"}')
    small = () if "--only" in args else ("--only", "shape: 8-state cycle")
    result = cli("bench", "--quick", *small, *args, cwd=tmp_path)
    if args[0] == "--seconds":  # click's own usage error
        assert result.returncode == 2 and "--seconds" in result.stderr
        return
    one_error_line(result, *fragments)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.json"]  # nothing written


def test_a_save_folder_that_cannot_be_written_is_refused_first(tmp_path: Path) -> None:
    (tmp_path / "reports").write_text("a file where the folder should be")
    result = cli("bench", "--quick", "--only", "shape: 8-state cycle", "--save", "x",
                 cwd=tmp_path)
    one_error_line(result, "--save")


def invoked(*args: str, quick: bool = True) -> Result:
    """Runs `fsmharness bench --quick` (or a full bench) of one shape in this process, stdout
    and stderr each a pipe."""
    return CliRunner().invoke(group, ["bench", *(["--quick"] if quick else []), "--seconds",
                                      "0.001", "--only", "shape: 8-state cycle", *args])


@pytest.mark.smoke
def test_progress_is_told_in_plain_lines_when_stderr_is_a_pipe() -> None:
    """One line per section and per group on stderr, and none with --quiet."""
    told = invoked("--json")
    assert told.exit_code == 0, told.output
    assert told.stderr.splitlines() == [
        "bench: [1/1] shape: 8-state cycle",
        *(f"bench:   shape: 8-state cycle (cycle8, 8 transitions a round): {seconds} s"
          for seconds in re.findall(r"round\): (\d+\.\d) s", told.stderr)),
        *(line for line in told.stderr.splitlines() if line.startswith("bench: done: 1 "))]
    assert len(told.stderr.splitlines()) == 3
    assert json.loads(told.stdout)["kind"] == "fsmharness.bench"  # stdout stays parseable
    quiet = invoked("--json", "--quiet")
    assert quiet.exit_code == 0 and quiet.stderr == ""


def one(results: Any) -> tuple[float, str]:
    return 1.0, ""


@pytest.mark.parametrize(("target", "flags", "code"), [
    (2.0, ("--check-aims",), 1),  # 1 measured, at least 2 aimed for: missed
    (0.5, ("--check-aims",), 0),
    (2.0, (), 0),  # without the flag an aim missed is shown, not judged
])
def test_check_aims_exits_1_on_a_missed_aim_only_when_asked(
        monkeypatch: pytest.MonkeyPatch, target: float, flags: tuple[str, ...],
        code: int) -> None:
    monkeypatch.setattr(suite, "AIMS", (suite.Aim("a fixed figure of 1", target, True, one),))
    result = invoked(*flags, "--quiet", quick=False)  # aims are judged on a full run only
    assert result.exit_code == code, result.output
    met = "yes" if target <= 1 else "not yet"
    assert re.search(rf"a fixed figure of 1 +│ 1\.00 +│ >= {target:g} +│ {met}", result.stdout)
    assert "aims: targets, not a verdict" in result.stdout
    if flags:
        missed = 1 if code else 0
        assert f"--check-aims: {missed} of 1 aims missed" in result.stdout


def test_check_aims_refuses_the_quick_figures() -> None:
    """--quick's figures are too short to judge an aim by: asking both is a usage error."""
    result = invoked("--check-aims", "--quiet")
    assert result.exit_code == 2, result.output
    assert "--check-aims judges the aims on a full run" in result.output


def test_the_aims_are_judged_from_an_injected_table() -> None:
    """A table of aims is data: each judged from the rows, the words it gives filled in, one
    whose figures are missing left out."""
    table = (suite.Aim("at least 3 ({})", 3, True, lambda results: (len(results), "rows")),
             suite.Aim("at most 1", 1, False, lambda results: (len(results), "")),
             suite.Aim("not measured", 1, False, lambda results: None))
    rows = [{"group": "g", "contender": "c"}] * 2
    assert suite.aims(rows, table) == [
        {"aim": "at least 3 (rows)", "measured": 2, "target": ">= 3", "met": False},
        {"aim": "at most 1", "measured": 2, "target": "<= 1", "met": False}]


def test_no_cluster_is_started_unless_asked() -> None:
    """Quick or not, and under `--only scaling`, the cluster section is left out; `--cluster`
    or an `--only` text naming it runs it."""
    def titles(**options: Any) -> list[str]:
        return [title for title, _ in suite.suite(**options)]

    assert suite.CLUSTER in suite.SECTIONS
    for options in ({"quick": True}, {"quick": False}, {"quick": True, "only": ["scaling"]}):
        assert suite.CLUSTER not in titles(**options), options
    assert "scaling: processes" in titles(quick=True, only=["scaling"])
    assert titles(quick=True, only=["cluster"]) == [suite.CLUSTER]
    assert titles(quick=True, only=["scaling: cluster"]) == [suite.CLUSTER]
    assert suite.CLUSTER in titles(quick=True, cluster=True)
