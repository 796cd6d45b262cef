"""`fsmharness init`: a project started in an empty folder lints clean, fuzzes to held and its
test passes under pytest with the plugin; nothing is ever written over a file."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement
from running import cli, one_error_line

from harness.cli.project import ci_install

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

    @pytest.mark.smoke
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


def install_runs(folder: Path) -> list[str]:
    """Gives the CI workflow's steps before pytest runs: what installs pytest and fsmharness."""
    workflow = yaml.safe_load((folder / FILES[2]).read_text())
    runs = [step.get("run", "") for step in workflow["jobs"]["workflows"]["steps"]]
    return runs[:runs.index("python -m pytest --fsm-report fsm-reports")]


def requirement(command: str) -> Requirement:
    """Gives the requirement `pip install REQUIREMENT` installs, as pip parses it."""
    words = shlex.split(command)
    assert words[:2] == ["pip", "install"] and len(words) == 3, command
    return Requirement(words[2])


class TestInitInstall:
    def test_install_is_the_ci_step_as_given(self, tmp_path: Path) -> None:
        """`--install COMMAND`: the workflow installs pytest, then runs COMMAND as given."""
        command = "pip install 'fsmharness @ https://example.org/fsmharness-0.1.0-py3-none-any.whl'"
        result = cli("init", "--install", command, cwd=tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr
        assert install_runs(tmp_path)[-2:] == ["pip install pytest", command + "\n"]
        assert "note:" not in result.stdout

    def test_the_default_installs_from_where_pip_did_and_never_claims_pypi(
            self, tmp_path: Path) -> None:
        """Without --install, the step installs fsmharness from what pip recorded, or, where
        that is out of CI's reach, fails saying so and init says it too."""
        result = cli("init", cwd=tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr
        text = (tmp_path / FILES[2]).read_text()
        assert "PyPI" not in text
        assert "pip install fsmharness pytest" not in text
        *_, step = install_runs(tmp_path)
        if step.rstrip().endswith("exit 1"):
            assert "does not say how CI installs fsmharness" in step
            assert (f"note: {FILES[2]} does not know how CI installs fsmharness"
                    in result.stdout)
        else:
            assert requirement(step.strip()).name == "fsmharness"
            assert "note:" not in result.stdout

    def test_an_empty_install_is_refused(self, tmp_path: Path) -> None:
        one_error_line(cli("init", "--install", " ", cwd=tmp_path),
                       "--install: give the shell command")
        assert not (tmp_path / FILES[0]).exists()


class TestCiInstall:
    @pytest.mark.parametrize(("direct_url", "origin", "url"), [
        ({"url": "https://github.com/o/fsmharness.git",
          "vcs_info": {"vcs": "git", "commit_id": "0123abc", "requested_revision": "main"}},
         None, "git+https://github.com/o/fsmharness.git@0123abc"),
        ({"url": "https://example.org/fsmharness.git", "subdirectory": "python",
          "vcs_info": {"vcs": "git", "commit_id": "0123abc"}},
         None, "git+https://example.org/fsmharness.git@0123abc#subdirectory=python"),
        ({"url": "https://example.org/fsmharness-0.1.0-py3-none-any.whl",
          "archive_info": {}}, None, "https://example.org/fsmharness-0.1.0-py3-none-any.whl"),
        ({"url": "file:///home/ada/fsmharness", "dir_info": {"editable": True}},
         ("https://github.com/o/fsmharness.git", ""), "git+https://github.com/o/fsmharness.git"),
        ({"url": "file:///home/ada/tools/fsmharness", "dir_info": {}},
         ("git@github.com:o/tools.git", "fsmharness/"),
         "git+ssh://git@github.com/o/tools.git#subdirectory=fsmharness"),
    ], ids=["vcs", "vcs-subdirectory", "archive", "checkout", "checkout-scp-subdirectory"])
    def test_where_pip_installed_it_from_is_a_requirement_pip_takes(
            self, direct_url: dict[str, Any], origin: tuple[str, str] | None, url: str) -> None:
        """A VCS commit, an archive's URL or a checkout's git remote: `pip install` of it."""
        step = ci_install(direct_url, "0.1.0", origin)
        assert step.command is not None
        assert requirement(step.command).url == url

    def test_a_package_index_pins_the_version(self) -> None:
        step = ci_install(None, "0.1.0")
        assert step.command == "pip install fsmharness==0.1.0"
        assert "package index" in step.why and "PyPI" not in step.why

    @pytest.mark.parametrize("origin", [None, ("/srv/git/fsmharness", "")],
                             ids=["no-remote", "local-remote"])
    def test_a_folder_ci_cannot_reach_gives_no_command(
            self, origin: tuple[str, str] | None) -> None:
        """A local folder with no remote CI can reach: no command, and why names the folder
        and the way out."""
        step = ci_install({"url": "file:///home/ada/fsmharness", "dir_info": {}}, "0.1.0",
                          origin)
        assert step.command is None
        assert "/home/ada/fsmharness, which CI cannot reach" in step.why
        assert "--install COMMAND" in step.why

    @pytest.mark.parametrize(("direct_url", "origin", "url"), [
        ({"url": "file:///home/ada/fsmharness", "dir_info": {}},
         ("https://x-access-token:ghp_SECRET123@github.com/o/fsmharness.git", ""),
         "git+https://github.com/o/fsmharness.git"),
        ({"url": "https://oauth2:glpat-SECRET123@gitlab.example/o/fsmharness.git",
          "vcs_info": {"vcs": "git", "commit_id": "0123abc"}},
         None, "git+https://gitlab.example/o/fsmharness.git@0123abc"),
        ({"url": "file:///home/ada/fsmharness", "dir_info": {}},
         ("ssh://git:SECRET123@host.example/o/fsmharness.git", ""),
         "git+ssh://host.example/o/fsmharness.git"),
    ], ids=["remote-token", "vcs-token", "ssh-password"])
    def test_a_token_in_the_remote_never_reaches_the_file(
            self, direct_url: dict[str, Any], origin: tuple[str, str] | None, url: str) -> None:
        """The workflow file is committed: a token or password in the URL pip or git
        recorded is left out of both the command and the comment above it."""
        step = ci_install(direct_url, "0.1.0", origin)
        assert step.command is not None and requirement(step.command).url == url
        assert "SECRET123" not in step.command and "SECRET123" not in step.why

    def test_a_checkout_in_a_folder_with_a_space_is_found(self) -> None:
        """pip records `file:///a%20b`: the folder is `/a b`."""
        step = ci_install({"url": "file:///home/ada/my%20tools", "dir_info": {}}, "0.1.0")
        assert "/home/ada/my tools, which CI cannot reach" in step.why
