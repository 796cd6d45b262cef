"""`fsmharness init`: a project started in an empty folder lints clean, fuzzes to held and its
test passes under pytest with the plugin; nothing is ever written over a file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from running import cli, one_error_line

FILES = ("workflow_example.yaml", "test_workflow_example.py", ".github/workflows/fsmharness.yml")


def pytest_in(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Runs `python -m pytest ARGS` in `folder` as a user would there: its own rootdir, the
    plugin from the installed entry point, no options of this repository's or this
    session's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHONPATH"))}
    return subprocess.run([sys.executable, "-m", "pytest", *args], cwd=folder, env=env,
                          capture_output=True, text=True, check=False, timeout=600)


class TestInit:
    def test_a_new_project_lints_fuzzes_and_tests_clean(self, tmp_path: Path) -> None:
        """Init, then the next commands it prints: lint (clean), fuzz (held), and the test
        it wrote passes under pytest, its campaign run by the plugin's marker."""
        result = cli("init", cwd=tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr
        assert [line.split()[1] for line in result.stdout.splitlines()[:3]] == list(FILES)
        assert ("next: fsmharness lint workflow_example.yaml && fsmharness fuzz "
                "workflow_example.yaml") in result.stdout
        assert "then: python -m pytest" in result.stdout
        linted = cli("lint", "workflow_example.yaml", cwd=tmp_path)
        assert linted.returncode == 0, linted.stdout + linted.stderr
        assert "0 error(s), 0 warning(s)" in linted.stdout
        fuzzed = cli("fuzz", "workflow_example.yaml", cwd=tmp_path)
        assert fuzzed.returncode == 0, fuzzed.stdout + fuzzed.stderr
        assert fuzzed.stdout.startswith("held  workflow_example.yaml: 500 runs")
        tested = pytest_in(tmp_path, "test_workflow_example.py")
        assert tested.returncode == 0, tested.stdout + tested.stderr
        assert ("held     test_workflow_example.py::test_every_invariant_holds (fuzz): 100 "
                "runs") in tested.stdout
        assert " 1 passed" in tested.stdout

    def test_the_ci_workflow_runs_the_tests_and_writes_the_summary(self, tmp_path: Path
                                                                  ) -> None:
        """The workflow is YAML GitHub reads: pytest writes the report, whose Markdown goes
        to the job's summary."""
        assert cli("init", cwd=tmp_path).returncode == 0
        workflow = yaml.safe_load((tmp_path / FILES[2]).read_text())
        runs = [step.get("run", "") for step in workflow["jobs"]["workflows"]["steps"]]
        assert "python -m pytest --fsm-report fsm-reports" in runs
        assert 'cat fsm-reports/pytest.md >> "$GITHUB_STEP_SUMMARY"' in runs

    def test_dir_writes_into_a_folder_it_makes(self, tmp_path: Path) -> None:
        """`--dir` names the folder, made when missing; the next commands name it too."""
        result = cli("init", "--dir", "flows/orders", cwd=tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr
        for name in FILES:
            assert (tmp_path / "flows" / "orders" / name).is_file()
        assert "fsmharness lint flows/orders/workflow_example.yaml" in result.stdout
        assert "then: python -m pytest flows/orders" in result.stdout


class TestInitRefuses:
    @pytest.mark.parametrize("taken", FILES)
    def test_an_existing_file_is_named_and_nothing_is_written(self, tmp_path: Path,
                                                             taken: str) -> None:
        """Any one of the three there already: exit 2 naming it, and no other file made."""
        (tmp_path / taken).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / taken).write_text("mine\n")
        one_error_line(cli("init", cwd=tmp_path), f"init: {taken} exists already",
                       "wrote nothing")
        assert (tmp_path / taken).read_text() == "mine\n"
        for name in FILES:
            assert name == taken or not (tmp_path / name).exists()

    def test_a_second_init_names_every_file(self, tmp_path: Path) -> None:
        assert cli("init", cwd=tmp_path).returncode == 0
        one_error_line(cli("init", cwd=tmp_path), f"init: {', '.join(FILES)} exist already")

    def test_a_dir_that_is_a_file(self, tmp_path: Path) -> None:
        (tmp_path / "notes.txt").write_text("")
        one_error_line(cli("init", "--dir", "notes.txt", cwd=tmp_path),
                       "--dir notes.txt: is a file, not a folder")

    def test_a_dir_that_cannot_be_made_leaves_nothing(self, tmp_path: Path) -> None:
        """A folder under a file cannot be made: one line, and no folder left half made."""
        (tmp_path / "notes.txt").write_text("")
        one_error_line(cli("init", "--dir", "notes.txt/flows", cwd=tmp_path),
                       "init: cannot write", "wrote nothing")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
