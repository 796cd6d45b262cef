"""The `fsmharness lint` and `schema` commands, end to end, as a user runs them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import jsonschema
import pytest
import yaml

from scenarios import bundled

ROOT = Path(__file__).resolve().parents[3]
BROKEN = ROOT / "tests" / "data" / "broken"


def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """Runs the CLI in a child process, as the console script does."""
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=cwd,
                          capture_output=True, text=True, check=False)


def planted(path: Path) -> list[str]:
    """Gives the locations a broken copy's header says were planted."""
    return re.findall(r"^#   (states[\w.\[\]]*)\s", path.read_text(), flags=re.MULTILINE)


class TestLint:
    @pytest.mark.smoke
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
    @pytest.mark.smoke
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


def _refund_with_irreversible_email(tmp_path: Path, lint_block: str = "",
                                    name: str = "refund.yaml") -> Path:
    """Writes the refund scenario with its email step irreversible (one warning,
    irreversible-unguarded) and `lint_block` appended."""
    text = (ROOT / "scenarios" / "refund_escalation.yaml").read_text()
    marker = "      tool: email.send\n"
    assert text.count(marker) == 1
    path = tmp_path / name
    path.write_text(text.replace(marker, marker + "      reversible: false\n") + lint_block)
    return path


ACKNOWLEDGED = """
lint:
  ignore:
    irreversible-unguarded: the apology email cannot be unsent, and a second one is harmless
"""


class TestLintIgnore:
    def test_an_acknowledged_warning_is_counted_not_shown(self, tmp_path: Path) -> None:
        """Exit 0; the file is ok, the summary counts the warning acknowledged, and the warning
        itself is not printed."""
        path = _refund_with_irreversible_email(tmp_path, ACKNOWLEDGED)
        result = run("lint", str(path))
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"ok    {path} (1 warning acknowledged)" in result.stdout
        assert result.stdout.strip().endswith(
            "1 file(s): 0 error(s), 0 warning(s), 1 acknowledged")
        assert "irreversible" not in result.stdout

    def test_json_lists_what_is_acknowledged_with_the_reason(self, tmp_path: Path) -> None:
        """--json: no findings, the acknowledged warning with its location and reason, and
        the count in the summary."""
        path = _refund_with_irreversible_email(tmp_path, ACKNOWLEDGED)
        result = run("lint", "--json", str(path))
        assert result.returncode == 0, result.stdout + result.stderr
        document = json.loads(result.stdout)
        assert document["summary"] == {"files": 1, "errors": 0, "warnings": 0,
                                       "acknowledged": 1, "unreadable": 0}
        [file_result] = document["results"]
        assert file_result["findings"] == []
        [acknowledged] = file_result["acknowledged"]
        assert acknowledged["code"] == "irreversible-unguarded"
        assert acknowledged["severity"] == "warning"
        assert acknowledged["location"] == "states.notifying.step"
        assert acknowledged["reason"] == ("the apology email cannot be unsent, and a second "
                                          "one is harmless")

    def test_without_the_ignore_the_warning_shows(self, tmp_path: Path) -> None:
        """The same file without `lint:` warns: what the ignore hides is real."""
        path = _refund_with_irreversible_email(tmp_path)
        result = run("lint", str(path))
        assert result.returncode == 0
        assert "[irreversible-unguarded]" in result.stdout
        assert "0 error(s), 1 warning(s)" in result.stdout

    def test_bad_ignores_fail_with_each_located(self, tmp_path: Path) -> None:
        """An entry with no reason, an error's code and an unknown code each fail the lint
        (exit 1) at their own line; the warning without a reason still shows."""
        path = _refund_with_irreversible_email(tmp_path, """
lint:
  ignore:
    irreversible-unguarded:
    approval-bypass: the shortcut is for admins
    implicit-wiat: a typo
""")
        result = run("lint", str(path))
        assert result.returncode == 1, result.stdout + result.stderr
        lines = path.read_text().splitlines()
        expected = [
            ("irreversible-unguarded:", "lint.ignore.irreversible-unguarded",
             "acknowledging 'irreversible-unguarded' needs a reason", "lint-ignore-reason"),
            ("approval-bypass:", "lint.ignore.approval-bypass",
             "'approval-bypass' is an error, and errors cannot be acknowledged",
             "lint-ignore-refused"),
            ("implicit-wiat:", "lint.ignore.implicit-wiat",
             "'implicit-wiat' is not a finding code (did you mean 'implicit-wait'?)",
             "lint-ignore-unknown"),
        ]
        for key, location, message, code in expected:
            line = next(i + 1 for i, text in enumerate(lines) if text.strip().startswith(key))
            assert re.search(rf"{re.escape(path.name)}:{line}: error: {re.escape(location)}: "
                             rf"{re.escape(message)}.*\[{code}\]", result.stdout), result.stdout
        assert "warning: states.notifying.step" in result.stdout
        assert "3 error(s), 1 warning(s)" in result.stdout
        assert "Traceback" not in result.stderr

    def test_a_stale_ignore_warns(self, tmp_path: Path) -> None:
        """Acknowledging a warning that never fires warns (exit 0), at the entry's line."""
        path = tmp_path / "refund.yaml"
        path.write_text((ROOT / "scenarios" / "refund_escalation.yaml").read_text()
                        + ACKNOWLEDGED)
        result = run("lint", str(path))
        assert result.returncode == 0, result.stdout
        assert re.search(r"refund\.yaml:\d+: warning: lint\.ignore\.irreversible-unguarded: "
                         r"'irreversible-unguarded' is acknowledged but no "
                         r"'irreversible-unguarded' warning fires", result.stdout)
        assert "0 error(s), 1 warning(s)" in result.stdout

    @pytest.mark.parametrize("command", [
        ("run", "--seed", "3"),
        ("fuzz", "--runs", "5", "--no-report", "-q"),
        ("explore", "--depth", "2", "--no-report", "-q"),
        ("diagram",),
    ], ids=lambda c: c[0])
    def test_every_command_takes_the_lint_key(self, tmp_path: Path,
                                              command: tuple[str, ...]) -> None:
        """run, fuzz, explore and diagram load a definition with `lint:` (exit 0)."""
        path = _refund_with_irreversible_email(tmp_path, ACKNOWLEDGED)
        result = run(command[0], str(path), *command[1:])
        assert result.returncode == 0, result.stdout + result.stderr


def _deploy_with(tmp_path: Path, old: str, new: str, lint_block: str = "") -> Path:
    """Writes the approval-gated deploy scenario with `old` replaced by `new`."""
    text = (ROOT / "scenarios" / "approval_gated_deploy.yaml").read_text()
    assert text.count(old) == 1
    path = tmp_path / "deploy.yaml"
    path.write_text(text.replace(old, new) + lint_block)
    return path


RETRY_OLD = "    on:\n      step.succeeded: failed\n      step.failed: failed\n"
RETRY_NEW = "    on:\n      step.succeeded: executing\n      step.failed: failed\n"


class TestApprovalBypass:
    def test_the_bundled_gated_deploy_is_clean(self) -> None:
        """The scenario the bad copies start from lints clean."""
        result = run("lint", "scenarios/approval_gated_deploy.yaml")
        assert result.returncode == 0
        assert "0 error(s), 0 warning(s)" in result.stdout

    def test_a_transition_around_the_gate_fails_with_its_location(self, tmp_path: Path
                                                                  ) -> None:
        """A rollback that retries the deploy directly exits 1 with the file, line, state,
        transition, what was expected and the code."""
        path = _deploy_with(tmp_path, RETRY_OLD, RETRY_NEW)
        result = run("lint", str(path))
        assert result.returncode == 1, result.stdout + result.stderr
        line = path.read_text().splitlines().index("      step.succeeded: executing") + 1
        assert (f"{path}:{line}: error: states.recovery.on.step.succeeded.target: "
                "`step.succeeded` of 'recovery' enters 'executing' without its approval; "
                "expected only `approval.granted` of 'pending_approval' to enter 'executing', "
                "whose step needs approval: go to 'pending_approval' instead, which asks for "
                "it [approval-bypass]") in result.stdout
        assert "1 error(s), 0 warning(s)" in result.stdout

    def test_an_expiry_escalating_into_the_step_fails(self, tmp_path: Path) -> None:
        """An approval whose expiry escalates into the step it guards exits 1."""
        path = _deploy_with(tmp_path, "      on_expiry: deny\n",
                            "      on_expiry: escalate\n      escalate_to: executing\n")
        result = run("lint", "--json", str(path))
        assert result.returncode == 1
        [finding] = json.loads(result.stdout)["results"][0]["findings"]
        assert finding["code"] == "approval-bypass"
        assert finding["severity"] == "error"
        assert finding["location"] == "states.pending_approval.approval.escalate_to"
        assert finding["ids"] == ["pending_approval", "executing", "pending_approval"]

    def test_it_cannot_be_acknowledged(self, tmp_path: Path) -> None:
        """Acknowledging the bypass is refused, and the bypass still fails the lint."""
        path = _deploy_with(tmp_path, RETRY_OLD, RETRY_NEW, """
lint:
  ignore:
    approval-bypass: recovery retries once
""")
        result = run("lint", str(path))
        assert result.returncode == 1
        assert "[approval-bypass]" in result.stdout
        assert "[lint-ignore-refused]" in result.stdout

    def test_run_refuses_it_in_one_line(self, tmp_path: Path) -> None:
        """Other commands refuse the definition (exit 2) in one line with no traceback."""
        path = _deploy_with(tmp_path, RETRY_OLD, RETRY_NEW)
        result = run("run", str(path))
        assert result.returncode == 2
        assert "[approval-bypass]" in result.stderr
        assert "Traceback" not in result.stderr


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Runs `python -m harness.cli ARGS` in `cwd` and gives the finished process."""
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False)


# -- 1. JSON Schema $ref -------------------------------------------------------------------------


# -- 2. inputs that fail at run time -------------------------------------------------------------


# -- 3. malformed events -------------------------------------------------------------------------


# -- 4. compensation inputs checked at load ------------------------------------------------------


# -- 5. guards -----------------------------------------------------------------------------------


# -- 6. hostile YAML -----------------------------------------------------------------------------


# -- 7. compensation retries after a timeout -----------------------------------------------------


# -- 8. action hash is the same in every process -------------------------------------------------


# -- 9. backoff ----------------------------------------------------------------------------------


# -- 10. cycle detection -------------------------------------------------------------------------


# -- 11. lint ------------------------------------------------------------------------------------


# -- 12. CLI -------------------------------------------------------------------------------------


_GUARDED = textwrap.dedent("""
    name: wf
    events:
      go: {}
    states:
      start:
        initial: true
        type: wait
        after: {delay: 1h, target: done}
        on:
          go:
            target: done
            guard: {function: review_fix_ok}
      done: {type: final, outcome: success}
""")
_GUARD_MODULE = textwrap.dedent("""
    from reference_machine import register_function


    @register_function("review_fix_ok")
    def review_fix_ok(context, event):
        return True
""")


def test_cli_prints_paths_literally(tmp_path: Path) -> None:
    """A file name holding rich markup ([red], [bold]) is printed as written."""
    good = tmp_path / "wf[red].yaml"
    good.write_text(_GUARDED.replace("guard: {function: review_fix_ok}", "guard: 'True'"),
                    encoding="utf-8")
    bad = tmp_path / "bad[bold].yaml"
    bad.write_text(_GUARDED, encoding="utf-8")  # unknown function: a FAIL line
    done = _cli("lint", good.name, bad.name, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert "FAIL  bad[bold].yaml" in lines
    assert "ok    wf[red].yaml" in lines
    assert "Traceback" not in done.stderr


def test_cli_schema_to_a_missing_folder_exits_2(tmp_path: Path) -> None:
    """schema -o into a missing folder is one stderr line and exit 2; a real folder works."""
    done = _cli("schema", "-o", "/nonexistent/dir/x.json", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "fsmharness: error: --output /nonexistent/dir/x.json: folder '/nonexistent/dir' does not "
            "exist"]
    assert done.stdout == ""
    done = _cli("schema", "-o", "schema.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "schema.json").read_text(encoding="utf-8"))["title"] == (
        "fsmharness workflow definition")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["schema.json"]  # no temporary left


def test_cli_lint_import_registers_functions(tmp_path: Path) -> None:
    """lint --import MODULE makes `function:` guards known; without it they are unknown."""
    (tmp_path / "wf.yaml").write_text(_GUARDED, encoding="utf-8")
    (tmp_path / "review_guards.py").write_text(_GUARD_MODULE, encoding="utf-8")
    without = _cli("lint", "wf.yaml", cwd=tmp_path)
    assert without.returncode == 1
    assert "function 'review_fix_ok' is not registered" in without.stdout
    assert "[unknown-function]" in without.stdout
    with_import = _cli("lint", "--import", "review_guards", "wf.yaml", cwd=tmp_path)
    assert with_import.returncode == 0, with_import.stdout + with_import.stderr
    assert with_import.stdout.splitlines() == ["ok    wf.yaml",
                                               "1 file(s): 0 error(s), 0 warning(s)"]
    missing = _cli("lint", "--import", "nosuchmodule", "wf.yaml", cwd=tmp_path)
    assert missing.returncode == 2
    assert missing.stderr.splitlines() == [
        "fsmharness: error: --import nosuchmodule: ModuleNotFoundError: No module named "
        "'nosuchmodule'"]


# -- defects the fixes left behind ---------------------------------------------------------------


def test_cli_import_of_a_broken_user_module_exits_2(tmp_path: Path) -> None:
    """A user module that fails to import is the user's problem: one line, exit 2."""
    (tmp_path / "wf.yaml").write_text(_GUARDED, encoding="utf-8")
    (tmp_path / "broken_guards.py").write_text("def f(:\n", encoding="utf-8")
    done = _cli("lint", "--import", "broken_guards", "wf.yaml", cwd=tmp_path)
    assert (done.returncode, "Traceback" in done.stderr) == (2, False), done.stderr
