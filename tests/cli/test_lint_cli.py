"""The `fsmharness lint` and `schema` commands, end to end, as a user runs them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from scenarios import bundled

ROOT = Path(__file__).resolve().parents[2]
BROKEN = ROOT / "tests" / "data" / "broken"


def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """Runs the CLI in a child process, as the console script does."""
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=cwd,
                          capture_output=True, text=True, check=False)


def planted(path: Path) -> list[str]:
    """Gives the locations a broken copy's header says were planted."""
    return re.findall(r"^#   (states[\w.\[\]]*)\s", path.read_text(), flags=re.MULTILINE)


class TestLint:
    def test_bundled_scenarios_are_clean(self) -> None:
        """Every bundled definition lints clean: exit 0, no findings."""
        result = run("lint", "scenarios")
        assert result.returncode == 0, result.stdout + result.stderr
        assert "0 error(s), 0 warning(s)" in result.stdout
        for path in bundled():
            assert f"ok    scenarios/{path.name}" in result.stdout

    @pytest.mark.parametrize("name", ["refund_escalation_broken.yaml",
                                      "support_triage_broken.yaml",
                                      "refund_escalation_schema_broken.yaml"])
    def test_broken_copy_reports_every_planted_error(self, name: str) -> None:
        """A broken copy exits 1 and names each planted error's location and line."""
        path = BROKEN / name
        result = run("lint", str(path))
        assert result.returncode == 1, result.stdout + result.stderr
        expected = planted(path)
        assert expected, f"{name} lists no planted errors"
        for location in expected:
            assert re.search(rf"{re.escape(name)}:\d+: error: {re.escape(location)}:",
                             result.stdout), f"{location} not reported:\n{result.stdout}"
        assert "Traceback" not in result.stderr

    def test_json_output_lists_findings(self) -> None:
        """--json prints a document with the summary and each finding's fields."""
        result = run("lint", "--json", str(BROKEN / "refund_escalation_broken.yaml"))
        assert result.returncode == 1
        document = json.loads(result.stdout)
        assert document["summary"]["errors"] == 6
        codes = {f["code"] for f in document["results"][0]["findings"]}
        assert {"unknown-target", "bad-guard", "wait-timeout", "final-exit",
                "unreachable-state", "retry-bounds"} <= codes

    def test_missing_file_exits_2_with_one_line(self) -> None:
        """A path that does not exist exits 2 with one line on stderr and no traceback."""
        result = run("lint", "no/such/workflow.yaml")
        assert result.returncode == 2
        expected = "fsmharness: error: no/such/workflow.yaml: no such file or folder"
        assert result.stderr.strip() == expected

    def test_yaml_syntax_error_exits_2(self, tmp_path: Path) -> None:
        """Unreadable YAML exits 2 and says the line."""
        bad = tmp_path / "workflow_bad.yaml"
        bad.write_text("name: x\nstates: [unclosed\n")
        result = run("lint", str(bad))
        assert result.returncode == 2
        assert re.search(r"workflow_bad\.yaml:\d+: error: \(file\): YAML syntax", result.stdout)
        assert "Traceback" not in result.stderr + result.stdout

    def test_warning_only_exits_0(self, tmp_path: Path) -> None:
        """Warnings are reported but do not fail the lint."""
        text = (ROOT / "scenarios" / "refund_escalation.yaml").read_text()
        marker = "      tool: email.send\n"
        assert marker in text
        path = tmp_path / "warned.yaml"
        path.write_text(text.replace(marker, marker + "      reversible: false\n"))
        result = run("lint", str(path))
        assert result.returncode == 0, result.stdout
        assert "warning: states.notifying.step: step 'notifying' is irreversible" in result.stdout

    def test_no_arguments_is_a_usage_error(self) -> None:
        """lint with no paths is a usage error, exit 2."""
        assert run("lint").returncode == 2


class TestSchema:
    def test_schema_validates_bundled_and_rejects_bad(self, tmp_path: Path) -> None:
        """The exported JSON Schema accepts every bundled definition and refuses unknown keys."""
        out = tmp_path / "schema.json"
        result = run("schema", "-o", str(out))
        assert result.returncode == 0, result.stderr
        schema = json.loads(out.read_text())
        validator = jsonschema.Draft202012Validator(schema)
        for path in bundled():
            data = yaml.safe_load(path.read_text())
            data["states"] = {k: {("on" if key is True else key): value
                                  for key, value in v.items()} for k, v in data["states"].items()}
            assert not list(validator.iter_errors(data)), path
        with pytest.raises(jsonschema.ValidationError, match="Additional properties"):
            validator.validate({"name": "x", "states": {"a": {"typo": 1}}})
