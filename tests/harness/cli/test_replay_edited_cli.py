"""`fsmharness replay FILE --definition PATH`: a recorded schedule run again on an edited
definition (the fix confirmed, or the failure still there), and a replay file run from another
folder than the one it was written in, end to end as subprocesses."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from running import cli, one_error_line

#: A loop that charges again on `again`: the same charge, a new idempotency key each visit, so
#: the second one takes effect twice (no_duplicate_effect). `done` ends it another way.
LOOPING = """\
name: looping
version: 1
tools: {pay.charge: {idempotency_keys: true}}
events:
  again: {sources: [human]}
  finish: {sources: [human]}
states:
  charging:
    initial: true
    step: {tool: pay.charge, input: {amount: 1}}
    on: {step.succeeded: waiting, step.failed: failed}
  waiting:
    type: wait
    after: {delay: 1h, target: done}
    on: {again: charging, finish: done}
  done: {type: final, outcome: success}
  failed: {type: final, outcome: failure}
"""
#: The fix: `waiting` no longer charges again.
FIXED = LOOPING.replace("on: {again: charging, finish: done}", "on: {finish: done}")
#: An edit that fixes nothing: `waiting` takes one more event, sorted before `again`, so the
#: recorded draw among the state's events would now pick `abandon` (and end the run: a false
#: "fixed") were the recorded event not sent by its type.
UNFIXED = LOOPING.replace("  again: {sources: [human]}\n",
                          "  abandon: {sources: [human]}\n  again: {sources: [human]}\n"
                          ).replace("on: {again: charging, finish: done}",
                                    "on: {abandon: done, again: charging, finish: done}")


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A user's folder where `fsmharness fuzz looping.yaml` ran and saved a replay file."""
    folder = tmp_path_factory.mktemp("project")
    (folder / "looping.yaml").write_text(LOOPING)
    result = cli("fuzz", "looping.yaml", "--faults", "none", "--executions", "1", "--runs",
                 "50", "--report", "reports", cwd=folder)
    assert result.returncode == 1, result.stdout + result.stderr
    (saved,) = (folder / "reports" / "replays").glob("*.json")
    data = json.loads(saved.read_text())
    assert data["rule"] == "no_duplicate_effect" and "again" in data["events"].values()
    assert data["definition"]["source"] == "looping.yaml"
    return folder


def replay_file(project: Path) -> str:
    (saved,) = (project / "reports" / "replays").glob("*.json")
    return str(saved.relative_to(project))


def edited(project: Path, tmp_path: Path, text: str) -> Path:
    """Gives a copy of the project with looping.yaml edited to `text`."""
    copy = tmp_path / "project"
    shutil.copytree(project, copy)
    (copy / "looping.yaml").write_text(text)
    return copy


class TestReplayOnAnEditedDefinition:
    def test_without_definition_an_edited_file_is_refused_and_the_option_named(
            self, project: Path, tmp_path: Path) -> None:
        """As before: the schedule means nothing on a changed definition, unless asked."""
        copy = edited(project, tmp_path, FIXED)
        one_error_line(cli("replay", replay_file(copy), cwd=copy),
                       "definition 'looping' changed since this file was written",
                       "with --definition PATH")

    def test_a_fix_holds_exits_0_and_says_what_was_skipped(self, project: Path,
                                                          tmp_path: Path) -> None:
        """The recorded `again` no longer applies: skipped and said (not swapped for
        `finish`, which the recorded draw would pick among the edited state's events)."""
        copy = edited(project, tmp_path, FIXED)
        result = cli("replay", replay_file(copy), "--definition", "looping.yaml", cwd=copy)
        assert result.returncode == 0, result.stdout + result.stderr
        lines = result.stdout.splitlines()
        assert lines[-2].startswith("fixed: no_duplicate_effect holds on the edited definition "
                                    "(it broke as: pay.charge took effect twice")
        assert lines[-1] == ("one schedule is not a campaign: fuzz the edited definition too "
                             "(fsmharness fuzz looping.yaml)")
        skipped = lines.index("skipped 2 recorded steps that no longer apply to the edited "
                              "definition:")
        assert lines[skipped + 1:skipped + 3] == [
            "  recorded step 3: send again to x1: x1 in waiting takes again no longer (it takes "
            "finish)",
            "  recorded step 4: complete x1 pay.charge: x1 had no call of pay.charge in flight"]

    def test_an_edit_that_fixes_nothing_exits_1_with_the_violation(
            self, project: Path, tmp_path: Path) -> None:
        """Every recorded step still applies (the recorded event is sent, not the one the
        edit put first), and the same rule breaks: exit 1."""
        copy = edited(project, tmp_path, UNFIXED)
        result = cli("replay", replay_file(copy), "--definition", "looping.yaml", cwd=copy)
        assert result.returncode == 1, result.stdout + result.stderr
        lines = result.stdout.splitlines()
        assert "every recorded step applied to the edited definition" in lines
        assert any(line.startswith("  step 3 (t=0s): deliver again from human to x1")
                   for line in lines)
        assert lines[-1].startswith("reproduced no_duplicate_effect (x1, step ")

    def test_json_lists_the_skipped_steps_and_the_output_is_the_same_bytes_twice(
            self, project: Path, tmp_path: Path) -> None:
        """The same file and definition give the same output, byte for byte."""
        copy = edited(project, tmp_path, FIXED)
        args = ("replay", replay_file(copy), "--definition", "looping.yaml", "--json")
        first, second = cli(*args, cwd=copy), cli(*args, cwd=copy)
        assert first.returncode == second.returncode == 0, first.stderr
        assert first.stdout == second.stdout
        data = json.loads(first.stdout)
        assert data["edited"] is True and data["reproduced"] is False
        assert [line.partition(":")[0] for line in data["skipped"]] == [
            "recorded step 3", "recorded step 4"]

    def test_the_recorded_definition_given_again_replays_as_recorded(
            self, project: Path) -> None:
        """`--definition` naming the very definition recorded: a plain replay, nothing
        skipped."""
        result = cli("replay", replay_file(project), "--definition", "looping.yaml",
                     cwd=project)
        assert result.returncode == 1, result.stdout + result.stderr
        assert "skipped" not in result.stdout
        assert result.stdout.splitlines()[-1].startswith("reproduced no_duplicate_effect")


class TestReplayFromAnotherFolder:
    def test_the_definition_is_found_from_the_replay_files_folder(
            self, project: Path, tmp_path: Path) -> None:
        """Run from elsewhere, `looping.yaml` is no file from the current folder: it is
        found from the replay file's, and said."""
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        result = cli("replay", str(project / replay_file(project)), cwd=elsewhere)
        assert result.returncode == 1, result.stdout + result.stderr
        assert result.stdout.splitlines()[-1].startswith("reproduced no_duplicate_effect")
        assert "replaying it from " + str((project / "looping.yaml").resolve()) in (
            result.stderr)

    def test_a_definition_not_found_names_the_option_to_give(self, project: Path,
                                                             tmp_path: Path) -> None:
        """The replay file alone: one line naming `--definition PATH`; given, it replays."""
        alone = tmp_path / "alone"
        alone.mkdir()
        moved = alone / "failure.json"
        shutil.copy(project / replay_file(project), moved)
        one_error_line(cli("replay", str(moved), cwd=alone),
                       "the definition 'looping' was loaded from 'looping.yaml'",
                       "which is not a file here; pass it with --definition PATH")
        result = cli("replay", str(moved), "--definition", str(project / "looping.yaml"),
                     cwd=alone)
        assert result.returncode == 1, result.stdout + result.stderr
        assert result.stdout.splitlines()[-1].startswith("reproduced no_duplicate_effect")


class TestBadInput:
    def test_a_missing_definition_file(self, project: Path) -> None:
        one_error_line(cli("replay", replay_file(project), "--definition", "nowhere.yaml",
                           cwd=project), "--definition nowhere.yaml: no such file")

    def test_a_folder_as_the_definition(self, project: Path) -> None:
        one_error_line(cli("replay", replay_file(project), "--definition", "reports",
                           cwd=project), "--definition reports: is a folder")

    def test_a_definition_with_errors(self, project: Path, tmp_path: Path) -> None:
        """The first error, where it is, and how many more `lint` shows: one line."""
        broken = tmp_path / "broken.yaml"
        broken.write_text(LOOPING.replace("{again: charging, finish: done}",
                                          "{again: nowhere, finish: gone}"))
        one_error_line(cli("replay", replay_file(project), "--definition", str(broken),
                           cwd=project), f"--definition {broken}: ", "nowhere",
                       "(and 1 more error: fsmharness lint")

    def test_a_definition_that_is_not_yaml(self, project: Path, tmp_path: Path) -> None:
        broken = tmp_path / "broken.yaml"
        broken.write_text("states: [unclosed\n")
        one_error_line(cli("replay", replay_file(project), "--definition", str(broken),
                           cwd=project), f"--definition {broken}")

    def test_another_workflow_is_no_edited_definition(self, project: Path,
                                                       tmp_path: Path) -> None:
        """A path to another workflow (a slip in CI) is refused, not judged `fixed`."""
        other = tmp_path / "other.yaml"
        other.write_text(FIXED.replace("name: looping", "name: another"))
        one_error_line(cli("replay", replay_file(project), "--definition", str(other),
                           cwd=project), "this file records definition 'looping'; "
                       "--definition PATH gives 'another', another workflow")

    def test_a_missing_replay_file(self, project: Path) -> None:
        one_error_line(cli("replay", "nowhere.json", "--definition", "looping.yaml",
                           cwd=project), "nowhere.json: no such file")
