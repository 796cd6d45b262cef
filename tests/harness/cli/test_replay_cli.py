"""`fsmharness replay FILE` and the invariants `fsmharness run` checks, end to end."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from planted import PLANTED
from running import cli, one_error_line

from harness import FuzzOptions, fuzz

ROOT = Path(__file__).resolve().parents[3]
SUPPORT = ROOT / "tests" / "support"
PLANTED_YAML = ROOT / "tests" / "data" / "workflows" / "planted.yaml"


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Gives the replay file of the key-per-attempt bug, found and shrunk by the fuzzer."""
    folder = tmp_path_factory.mktemp("replays")
    machine, _ = PLANTED["key_per_attempt"]
    report = fuzz(PLANTED_YAML, FuzzOptions(runs=500, replay_dir=folder), machine=machine)
    (failure,) = report.failures
    assert failure.replay_file is not None
    return failure.replay_file


class TestReplay:
    @pytest.mark.smoke
    def test_a_saved_failure_breaks_again_and_exits_1(self, saved: Path) -> None:
        """The trace is printed step by step, then the violation it reproduced."""
        result = cli("replay", str(saved), path=str(SUPPORT))
        assert result.returncode == 1, result.stdout + result.stderr
        lines = result.stdout.splitlines()
        assert lines[0].startswith("  step 1 (t=0s): start x1")
        assert lines[-1].startswith("reproduced no_duplicate_effect (x1, step ")

    def test_json_tells_the_same(self, saved: Path) -> None:
        """`--json` gives the rule, whether it broke again, the violation and the trace."""
        result = cli("replay", str(saved), "--json", path=str(SUPPORT))
        assert result.returncode == 1
        data = json.loads(result.stdout)
        assert data["reproduced"] is True and data["rule"] == "no_duplicate_effect"
        assert data["violation"]["step"] == len(data["trace"])

    def test_a_fixed_machine_no_longer_fails_and_exits_0(self, saved: Path,
                                                       tmp_path: Path) -> None:
        """Point the file at the correct reference machine: the schedule breaks nothing."""
        data = json.loads(saved.read_text())
        data["machine"] = "harness:ReferenceMachine"
        fixed = tmp_path / "fixed.json"
        fixed.write_text(json.dumps(data))
        result = cli("replay", str(fixed))
        assert result.returncode == 0, result.stdout + result.stderr
        assert "no longer fails: no_duplicate_effect held" in result.stdout

    def test_a_changed_definition_is_refused(self, saved: Path, tmp_path: Path) -> None:
        """The digest guards the schedule's meaning: edit the workflow and replay refuses."""
        changed = tmp_path / "planted.yaml"
        shutil.copy(PLANTED_YAML, changed)
        changed.write_text(changed.read_text().replace("attempts_max: 2", "attempts_max: 3"))
        data = json.loads(saved.read_text())
        data["definition"]["source"] = str(changed)
        moved = tmp_path / "moved.json"
        moved.write_text(json.dumps(data))
        one_error_line(cli("replay", str(moved), path=str(SUPPORT)),
                       "definition 'planted' changed since this file was written")

    @pytest.mark.parametrize(("content", "fragment"), [
        ("{not json", "not JSON"),
        ('{"kind": "something else"}', "not an fsmharness replay file"),
        ('{"kind": "fsmharness.replay", "format": 99}', "replay format 99"),
        ('{"kind": "fsmharness.replay", "format": 1, "definition": {}, "seed": 0, '
         '"options": {}, "rule": "machine_ok", "violation": "", "choices": [["x"]]}',
         "choices[0]: expected [step, tag, n, u]"),
    ], ids=["json", "kind", "format", "choices"])
    def test_a_broken_file_is_one_clear_line(self, tmp_path: Path, content: str,
                                             fragment: str) -> None:
        """Whatever is wrong with the file: exit 2, one line, no traceback."""
        bad = tmp_path / "bad.json"
        bad.write_text(content)
        one_error_line(cli("replay", str(bad)), fragment)

    def test_a_missing_file_or_machine_is_one_clear_line(self, saved: Path) -> None:
        """No such file; a machine module not on the path: said plainly."""
        one_error_line(cli("replay", "nowhere.json"), "nowhere.json: no such file")
        one_error_line(cli("replay", str(saved)), "cannot import the machine "
                                                  "'planted:KeyPerAttempt'")


class TestRunChecksInvariants:
    def test_a_broken_invariant_fails_the_run(self, tmp_path: Path) -> None:
        """A naive loop that charges the same amount again takes effect twice: `run` reports
        the duplicate, exits 1 and prints the command that replays the run."""
        looping = tmp_path / "looping.yaml"
        looping.write_text(
            "name: looping\nversion: 1\n"
            "tools: {pay.charge: {idempotency_keys: true}}\n"
            "events: {again: {sources: [human]}}\n"
            "states:\n"
            "  charging:\n    initial: true\n"
            "    step: {tool: pay.charge, input: {amount: 1}}\n"
            "    on: {step.succeeded: waiting, step.failed: failed}\n"
            "  waiting:\n    type: wait\n    after: {delay: 1h, target: done}\n"
            "    on: {again: charging}\n"
            "  done: {type: final, outcome: success}\n"
            "  failed: {type: final, outcome: failure}\n")
        result = cli("run", str(looping), "--seed", "0", "--no-faults")
        assert result.returncode == 1, result.stdout + result.stderr
        assert "violated no_duplicate_effect" in result.stdout
        assert "replay: fsmharness run" in result.stdout

    @pytest.mark.smoke
    def test_the_bundled_scenarios_hold(self) -> None:
        """Every invariant holds on every bundled scenario's seeded run."""
        result = cli("run", "scenarios/", "--seed", "1")
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout.count("every invariant held") == len(
            list((ROOT / "scenarios").glob("*.yaml")))
