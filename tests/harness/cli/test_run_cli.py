"""The `fsmharness run` command, end to end, as a user runs it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
REFUND = ROOT / "scenarios" / "refund_escalation.yaml"
KINDS = {"run", "started", "delivered", "decided", "committed", "dispatched", "applied",
         "result_recorded", "crashed", "recovered", "timer_fired", "fault", "machine_failed",
         "observed", "healed", "replayed", "finished"}


def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """Runs the CLI in a child process, as the console script does."""
    return subprocess.run([sys.executable, "-m", "harness.cli", "run", *args], cwd=cwd,
                          capture_output=True, text=True, check=False)


def assert_usage_error(result: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """Checks exit 2 with one `fsmharness: error:` line holding `fragments`, no traceback."""
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("fsmharness: error: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def plan_file(folder: Path, text: str) -> Path:
    path = folder / "plan.yaml"
    path.write_text(text)
    return path


def history_lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def seed_3(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    """Runs `--seed 3 --json --history OUT` once; gives the summary and the history's path."""
    out = tmp_path_factory.mktemp("seed_3") / "out.jsonl"
    result = run(str(REFUND), "--seed", "3", "--json", "--history", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout), out


class TestRun:
    def test_prints_what_happened_faults_and_final_states(
            self, seed_3: tuple[dict[str, Any], Path]) -> None:
        """`run FILE --seed 3` exits 0 and prints what happened, faults and final states."""
        result = run("scenarios/refund_escalation.yaml", "--seed", "3")
        assert result.returncode == 0, result.stdout + result.stderr
        summary, _ = seed_3
        out = result.stdout
        assert out.startswith("scenarios/refund_escalation.yaml: seed 3, ")
        happened = re.search(r"^  what happened: (.+)$", out, flags=re.MULTILINE)
        assert happened is not None, out
        said = happened.group(1).split(", ")  # in words, not the history's record kinds
        expected = {"started": "executions started", "committed": "moves committed",
                    "dispatched": "calls sent", "result_recorded": "results recorded",
                    "crashed": "crashes"}
        for kind, words in expected.items():
            assert f"{summary['records'][kind]} {words}" in said, out
        assert "_" not in happened.group(1), out
        faults = re.search(r"^  faults injected: (.+)$", out, flags=re.MULTILINE)
        assert faults is not None, out
        expected = ", ".join(f"{kind} {count}" for kind, count in summary["faults"].items())
        assert faults.group(1) == (expected or "none")
        assert summary["final"], "no execution was reported"
        for eid, final in summary["final"].items():
            assert re.search(rf"^  {eid}: {final['state']} \[{final['status']}\]", out,
                             flags=re.MULTILINE), out

    def test_json_summary(self, seed_3: tuple[dict[str, Any], Path]) -> None:
        """`--json` prints one JSON document with records, faults, final and status."""
        summary, _ = seed_3
        assert {"records", "faults", "final", "status"} <= summary.keys()
        assert summary["status"] == "final"
        assert summary["seed"] == 3
        assert set(summary["records"]) <= KINDS
        assert summary["records"]["finished"] == len(summary["final"]) == 3
        assert all(final["status"] == "final" for final in summary["final"].values())
        assert sum(summary["faults"].values()) == summary["records"].get("fault", 0)

    def test_history_file_is_one_json_object_a_line(
            self, seed_3: tuple[dict[str, Any], Path]) -> None:
        """`--history OUT` writes one JSON object a line, matching the summary's counts."""
        summary, out = seed_3
        records = history_lines(out)
        assert all(isinstance(record, dict) and record["kind"] in KINDS for record in records)
        assert records[0]["kind"] == "run" and records[0]["seed"] == 3
        assert dict(Counter(str(record["kind"]) for record in records)) == summary["records"]
        assert [p.name for p in out.parent.iterdir()] == [out.name], "a temporary file was left"

    def test_history_is_the_same_for_a_seed_and_differs_for_another(
            self, tmp_path: Path, seed_3: tuple[dict[str, Any], Path]) -> None:
        """Another run with seed 3 writes an identical history file; seed 4's differs."""
        again, other = tmp_path / "again.jsonl", tmp_path / "other.jsonl"
        assert run(str(REFUND), "--seed", "3", "--history", str(again)).returncode == 0
        assert run(str(REFUND), "--seed", "4", "--history", str(other)).returncode == 0
        first = seed_3[1].read_bytes()
        assert again.read_bytes() == first
        assert other.read_bytes() != first

    def test_no_faults_injects_nothing(self) -> None:
        """`--no-faults` runs clean: no fault records, every execution final."""
        result = run(str(REFUND), "--seed", "3", "--no-faults", "--json")
        assert result.returncode == 0, result.stderr
        summary = json.loads(result.stdout)
        assert summary["faults"] == {}
        assert "fault" not in summary["records"]
        assert summary["status"] == "final"


class TestBadInput:
    def test_missing_definition_file(self, tmp_path: Path) -> None:
        """A definition file that does not exist exits 2 with one line naming it."""
        assert_usage_error(run("no/such/workflow.yaml"), "no/such/workflow.yaml")

    def test_unknown_fault_kind(self, tmp_path: Path) -> None:
        """A plan with an unknown fault kind names `faults.<kind>` and suggests the right one."""
        plan = plan_file(tmp_path, "faults:\n  crash: 0.1\n  duplicate_evnet: 0.2\n")
        line = assert_usage_error(run(str(REFUND), "--plan", str(plan)),
                                  "faults.duplicate_evnet", "unknown fault kind",
                                  "did you mean 'duplicate_event'?")
        assert f"{plan}:3" in line

    def test_unknown_crash_point(self, tmp_path: Path) -> None:
        """A plan naming a crash point the runtime lacks exits 2 and lists the known points."""
        plan = plan_file(tmp_path, "faults:\n  crash: {rate: 0.1, points: [mid_compensation]}\n")
        assert_usage_error(run(str(REFUND), "--plan", str(plan)),
                           "faults.crash.points[0]", "'mid_compensation'", "before_commit")

    def test_negative_rate(self, tmp_path: Path) -> None:
        """A negative rate exits 2 naming the fault and the value."""
        plan = plan_file(tmp_path, "faults:\n  duplicate_event: {rate: -0.5}\n")
        assert_usage_error(run(str(REFUND), "--plan", str(plan)), "faults.duplicate_event",
                           "-0.5")

    def test_no_faults_with_swarm(self) -> None:
        """`--no-faults --swarm` together exits 2 with one line."""
        assert_usage_error(run(str(REFUND), "--no-faults", "--swarm"), "--no-faults",
                           "--swarm")

    def test_history_in_a_missing_folder(self, tmp_path: Path) -> None:
        """A history path in a missing folder exits 2 and writes nothing anywhere."""
        target = tmp_path / "missing" / "out.jsonl"
        assert_usage_error(run(str(REFUND), "--history", str(target)), "missing")
        assert not target.parent.exists()
        assert list(tmp_path.iterdir()) == []

    def test_zero_executions_exits_2(self) -> None:
        """`--executions 0` exits 2 without a traceback."""
        result = run(str(REFUND), "--executions", "0")
        assert result.returncode == 2
        assert "Traceback" not in result.stderr
        assert "--executions" in result.stderr

    @pytest.mark.parametrize("option", [["--executions", "0"], ["--history", "scenarios"]],
                             ids=["executions_0", "history_is_a_folder"])
    def test_bad_option_value_is_one_line(self, option: list[str]) -> None:
        """A bad option value (`--executions 0`, a folder as history) gives one error line."""
        assert_usage_error(run(str(REFUND), *option), option[0])

    def test_empty_history_path(self, tmp_path: Path) -> None:
        """An empty history path exits 2 with one line and writes nothing."""
        assert_usage_error(run(str(REFUND), "--history", "", cwd=tmp_path), "--history")
        assert list(tmp_path.iterdir()) == []

    def test_plan_naming_a_tool_the_definition_lacks(self, tmp_path: Path) -> None:
        """A plan's `tools:` naming an unknown tool exits 2, naming the entry and suggesting."""
        plan = plan_file(tmp_path, "faults:\n  slow_tool: {rate: 0.1, tools: [payments.refnd]}\n")
        assert_usage_error(run(str(REFUND), "--plan", str(plan)), "faults.slow_tool.tools[0]",
                           "did you mean 'payments.refund'?")

    def test_plan_tool_error_names_the_plan_file(self, tmp_path: Path) -> None:
        """The error for a plan's unknown tool names the plan file, as other plan errors do."""
        plan = plan_file(tmp_path, "faults:\n  slow_tool: {rate: 0.1, tools: [payments.refnd]}\n")
        assert_usage_error(run(str(REFUND), "--plan", str(plan)), str(plan))


BROKEN_MACHINE = '''
from harness.sim.machine import ReferenceMachine


def complete(self, execution_id, call_id, now):
    raise RuntimeError("the machine under test broke")


ReferenceMachine.complete = complete
'''

FULL_DISK = '''
import errno
import os

import harness.sim.history as history

written = []
dump_line = history.dump_line


def failing_dump_line(record):
    written.append(record)
    if len(written) > 5:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return dump_line(record)


history.dump_line = failing_dump_line
'''


class TestFailedRuns:
    def test_machine_failure_exits_1_with_a_whole_history(self, tmp_path: Path) -> None:
        """A machine that raises exits 1, says so, and its history is written whole."""
        (tmp_path / "broken_machine.py").write_text(BROKEN_MACHINE)
        out = tmp_path / "out.jsonl"
        result = run(str(REFUND), "--seed", "3", "--history", str(out),
                     "--import", "broken_machine", cwd=tmp_path)
        assert result.returncode == 1, result.stdout + result.stderr
        assert "machine failed" in result.stdout
        assert f"replay: fsmharness run {REFUND} --seed 3" in result.stdout
        records = history_lines(out)
        assert records[0]["kind"] == "run"
        assert records[-1]["kind"] == "machine_failed"
        assert "the machine under test broke" in str(records[-1]["message"])

    def test_failed_write_leaves_no_half_history(self, tmp_path: Path) -> None:
        """A write failing half-way exits 2, leaves no partial file, keeps an earlier history."""
        (tmp_path / "full_disk.py").write_text(FULL_DISK)
        out, earlier = tmp_path / "out.jsonl", tmp_path / "earlier.jsonl"
        earlier.write_text('{"kind":"run"}\n')
        for path in (out, earlier):
            line = assert_usage_error(run(str(REFUND), "--seed", "3", "--history", str(path),
                                          "--import", "full_disk", cwd=tmp_path),
                                      "--history", "No space left on device")
            assert str(path) in line
        assert earlier.read_text() == '{"kind":"run"}\n'
        left = {p.name for p in tmp_path.iterdir()} - {"__pycache__"}
        assert left == {"full_disk.py", "earlier.jsonl"}
