"""`fsmharness fuzz`, `explore`, `diagram`, `report`, `bench` and `schema --report`, end to end
as subprocesses: verdicts and exit codes, reports that follow their schema, counterexamples that
replay, and bad input refused in one line with nothing half-written."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from running import ROOT, cli, one_error_line
from user_project import NAIVE_MACHINE, WORKFLOW

from harness.report.document import report_schema

SCENARIOS = ROOT / "scenarios"


@pytest.fixture
def user(tmp_path: Path) -> Path:
    """A user's folder: a definition and a machine under test with a planted bug."""
    (tmp_path / "workflow_pay.yaml").write_text(WORKFLOW)
    (tmp_path / "naive_machine.py").write_text(NAIVE_MACHINE)
    return tmp_path


def report_of(folder: Path, stem: str) -> dict:
    doc = json.loads((folder / f"{stem}.json").read_text())
    jsonschema.validate(doc, report_schema())
    return doc


class TestFuzz:
    def test_the_bundled_scenarios_hold_and_the_report_is_written(self, tmp_path: Path
                                                                  ) -> None:
        result = cli("fuzz", str(SCENARIOS), "--runs", "20", "--report", str(tmp_path / "r"))
        assert result.returncode == 0, result.stdout + result.stderr
        lines = result.stdout.splitlines()
        (refund,) = [line for line in lines if "refund_escalation" in line]
        # 20 runs, and any aimed at what they left untested ("20 runs + 1 aimed, ...")
        assert refund.startswith(f"held  {SCENARIOS / 'refund_escalation.yaml'}: 20 runs")
        assert "coverage states " in refund and "faults injected" in refund
        assert " of 22 invariants checked" in refund
        assert "every invariant held" in lines[-2]
        assert lines[-1] == f"report: {tmp_path / 'r' / 'fuzz.html'} (and fuzz.json, fuzz.md)"
        assert result.stderr == ""  # no progress bar when stdout is not a terminal
        doc = report_of(tmp_path / "r", "fuzz")
        names = [t["definition"]["name"] for t in doc["targets"]]
        assert doc["held"] and names == sorted(p.stem for p in SCENARIOS.glob("*.yaml"))
        section = doc["targets"][names.index("refund_escalation")]
        aimed = sum(part["runs"] for part in section["adequacy"]["aimed"].values())
        assert section["runs"] == 20 + aimed and len(section["invariants"]) == 22
        assert section["metrics"]["executions"] == 3 * section["runs"]  # 3 executions a run
        assert section["untested"] == [] and len(section["checked"]) > 12
        assert section["coverage"]["states"]["of"] == 10

    def test_a_planted_bug_exits_1_with_the_shrunk_trace_and_a_replay_that_reproduces(
            self, user: Path) -> None:
        result = cli("fuzz", "workflow_pay.yaml", "--machine", "naive_machine:KeyPerAttempt",
                     "--runs", "50", cwd=user)
        assert result.returncode == 1, result.stdout + result.stderr
        out = result.stdout
        assert out.startswith("FAIL  workflow_pay.yaml: ")
        assert "violated no_duplicate_effect (x1, step " in out
        assert "  step 1 (t=0s): start x1" in out
        (replay_line,) = [line.strip() for line in out.splitlines() if "replay:" in line]
        command = replay_line.removeprefix("replay: ").split()
        assert command[:2] == ["fsmharness", "replay"]
        again = cli(*command[1:], cwd=user, path=str(user))
        assert again.returncode == 1 and "reproduced no_duplicate_effect" in again.stdout
        doc = report_of(user / "reports", "fuzz")
        (failure,) = doc["targets"][0]["failures"]
        assert failure["rule"] == "no_duplicate_effect"
        assert failure["path"][0] == ["review", "approval.granted", "charging"]
        on_path = [e for e in doc["targets"][0]["diagram"]["transitions"] if e["on_path"]]
        assert {(e["source"], e["target"]) for e in on_path} >= {("review", "charging")}
        html = (user / "reports" / "fuzz.html").read_text()
        assert "Violated: no_duplicate_effect" in html and "#d62728" in html
        # what broke and how to replay it come before the diagram, not below a screenful
        assert html.index("Violated: no_duplicate_effect") < html.index("Replay: <code>") \
            < html.index("<h3>Workflow</h3>")

    def test_a_machine_target_names_its_own_definition(self, user: Path) -> None:
        result = cli("fuzz", "naive_machine:KeyPerAttempt", "--runs", "50", "--no-report",
                     cwd=user)
        assert result.returncode == 1, result.stdout + result.stderr
        assert result.stdout.startswith("FAIL  naive_machine:KeyPerAttempt: ")
        assert not (user / "reports").exists()

    @pytest.mark.smoke
    def test_json_prints_the_report_document(self, tmp_path: Path) -> None:
        result = cli("fuzz", str(SCENARIOS / "support_triage.yaml"), "--runs", "5",
                     "--faults", "crash,duplicate_event", "--json", "--no-report")
        assert result.returncode == 0, result.stderr
        doc = json.loads(result.stdout)
        jsonschema.validate(doc, report_schema())
        assert set(doc["targets"][0]["faults"]) <= {"crash", "duplicate_event"}
        assert doc["targets"][0]["options"]["faults"] == ["crash", "duplicate_event"]

    def test_the_same_seed_gives_the_same_report_in_any_number_of_processes(
            self, tmp_path: Path) -> None:
        docs = []
        for processes in ("1", "2"):
            result = cli("fuzz", str(SCENARIOS / "refund_escalation.yaml"), "--runs", "24",
                         "--seed", "9", "-n", processes, "--json", "--no-report")
            assert result.returncode == 0, result.stderr
            section = json.loads(result.stdout)["targets"][0]
            docs.append({key: section[key] for key in ("runs", "steps", "faults",
                                                       "coverage", "metrics")})
        assert docs[0] == docs[1]

    def test_faults_all_less_a_kind_runs_every_other_kind(self) -> None:
        """`--faults all,-second_worker` is `all` with that one kind left out (a deployment
        with one runner per execution states it so), not a list of the other fifteen."""
        kinds = []
        for faults in ("all", "all,-second_worker"):
            result = cli("fuzz", str(SCENARIOS / "refund_escalation.yaml"), "--runs", "4",
                         "--faults", faults, "--json", "--no-report")
            assert result.returncode == 0, result.stderr
            kinds.append(json.loads(result.stdout)["targets"][0]["options"]["faults"])
        assert "second_worker" in kinds[0]
        assert kinds[1] == [kind for kind in kinds[0] if kind != "second_worker"]

    @pytest.mark.parametrize(("args", "fragments"), [
        (["--faults", "crash,gremlins"], ("--faults", "unknown fault kind 'gremlins'")),
        (["--faults", "all,-gremlins"], ("--faults", "unknown fault kind 'gremlins'")),
        (["--faults", "crash,-second_worker"], ("--faults", "taken away from all only")),
        (["--runs", "0"], ("--runs", "0")),
        (["--machine", "no_such_module:Machine"], ("cannot import no_such_module",)),
        (["--machine", "naive_machine"], ("expected module:attribute",)),
        (["--plan", "missing-plan.yaml"], ("--plan missing-plan.yaml",)),
    ])
    def test_bad_options_exit_2_in_one_line(self, user: Path, args: list[str],
                                            fragments: tuple[str, ...]) -> None:
        one_error_line(cli("fuzz", "workflow_pay.yaml", *args, cwd=user), *fragments)
        assert not (user / "reports").exists()

    @pytest.mark.parametrize(("target", "fragments"), [
        ("nowhere.yaml", ("nowhere.yaml: no such file or folder",)),
        ("naive_machine:Missing", ("has no attribute 'Missing'",)),
        ("broken_module:flow", ("cannot import broken_module", "ZeroDivisionError")),
        ("naive_machine:WORKFLOW_TEXT", ("expected a WorkflowDefinition",)),
    ])
    def test_bad_targets_exit_2_in_one_line(self, user: Path, target: str,
                                            fragments: tuple[str, ...]) -> None:
        (user / "broken_module.py").write_text("flow = 1 / 0\n")
        (user / "naive_machine.py").write_text(NAIVE_MACHINE + "\nWORKFLOW_TEXT = 3\n")
        one_error_line(cli("fuzz", target, cwd=user), *fragments)

    def test_an_unreadable_definition_exits_2(self, user: Path) -> None:
        (user / "workflow_pay.yaml").write_text("states: [unclosed\n")
        result = cli("fuzz", "workflow_pay.yaml", cwd=user)
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert "workflow_pay.yaml" in result.stderr

    def test_a_report_folder_that_cannot_be_written_exits_2_before_any_run(
            self, user: Path) -> None:
        (user / "taken").write_text("a file where a folder should be")
        one_error_line(cli("fuzz", "workflow_pay.yaml", "--report", "taken/out", cwd=user),
                       "--report taken/out", "cannot write there")
        assert sorted(p.name for p in user.iterdir()) == [
            "naive_machine.py", "taken", "workflow_pay.yaml"]


class TestExplore:
    @pytest.mark.smoke
    def test_a_sound_definition_holds_within_the_bound(self, user: Path) -> None:
        result = cli("explore", "workflow_pay.yaml", "--depth", "4", cwd=user)
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout.startswith("held  workflow_pay.yaml: held within bound 4 (")
        doc = report_of(user / "reports", "explore")
        assert doc["targets"][0]["engine"] == "explore"
        assert doc["targets"][0]["states_explored"] > 100

    def test_a_planted_bug_gives_the_shortest_trace_and_a_replay_file(self, user: Path
                                                                       ) -> None:
        result = cli("explore", "workflow_pay.yaml", "--depth", "6", "--machine",
                     "naive_machine:KeyPerAttempt", cwd=user)
        assert result.returncode == 1, result.stdout + result.stderr
        assert "violated no_duplicate_effect (x1, step 5)" in result.stdout
        # told once, with no seed and no shrinking: explore found the shortest schedule
        assert result.stdout.count("took effect twice") == 1
        assert "the shortest failing schedule, 5 steps (breadth-first):" in result.stdout
        assert ", seed " not in result.stdout and "shrunk" not in result.stdout
        assert list((user / "reports" / "replays").glob("*.json"))


class TestDiagramReportBenchSchema:
    @pytest.mark.smoke
    def test_diagram_as_mermaid_and_svg(self, tmp_path: Path) -> None:
        flow = SCENARIOS / "refund_escalation.yaml"
        text = cli("diagram", str(flow))
        assert text.returncode == 0 and text.stdout.startswith("stateDiagram-v2\n")
        assert '    state "awaiting_approval" as ' in text.stdout
        drawn = cli("diagram", str(flow), "--format", "svg", "-o", str(tmp_path / "flow.svg"))
        assert drawn.returncode == 0, drawn.stderr
        assert (tmp_path / "flow.svg").read_text().startswith("<svg ")
        one_error_line(cli("diagram", str(flow), "-o", str(tmp_path / "no" / "flow.svg")),
                       "does not exist")

    @pytest.mark.smoke
    def test_report_renders_again_from_the_json(self, tmp_path: Path) -> None:
        first = cli("fuzz", str(SCENARIOS / "support_triage.yaml"), "--runs", "5",
                    "--report", str(tmp_path / "a"))
        assert first.returncode == 0, first.stderr
        again = cli("report", str(tmp_path / "a" / "fuzz.json"), "--report", str(tmp_path / "b"))
        assert again.returncode == 0, again.stderr
        assert (tmp_path / "b" / "fuzz.html").read_text() == (
            tmp_path / "a" / "fuzz.html").read_text()

    @pytest.mark.parametrize(("content", "fragment"), [
        ("{not json", "not a JSON report"),
        ('{"kind": "other"}', "not an fsmharness report"),
        ('{"kind": "fsmharness.report", "format": 99}', "report format 99"),
        ('{"kind": "fsmharness.report", "format": 1, "targets": []}', "(document): 'tool'"),
        ("CONSISTENT", "initial state 'nowhere' is not among the states"),
    ])
    def test_report_refuses_what_is_not_a_report(self, tmp_path: Path, content: str,
                                                 fragment: str) -> None:
        if content == "CONSISTENT":  # valid by the schema, but its diagram names no state
            done = cli("fuzz", str(SCENARIOS / "support_triage.yaml"), "--runs", "2", "--json",
                       "--no-report")
            doc = json.loads(done.stdout)
            doc["targets"][0]["diagram"]["initial"] = "nowhere"
            content = json.dumps(doc)
        (tmp_path / "r.json").write_text(content)
        one_error_line(cli("report", str(tmp_path / "r.json")), fragment)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]

    def test_schema_of_reports(self) -> None:
        result = cli("schema", "--report")
        assert result.returncode == 0
        assert json.loads(result.stdout)["title"] == "fsmharness report, format 1"


@pytest.mark.skipif(shutil.which("script") is None, reason="needs util-linux's script for a tty")
@pytest.mark.parametrize(("quiet", "shown"), [((), True), (("--quiet",), False)])
def test_a_progress_bar_on_a_terminal_unless_quiet(quiet: tuple[str, ...], shown: bool) -> None:
    command = shlex.join([sys.executable, "-m", "harness.cli", "fuzz",
                          str(SCENARIOS / "support_triage.yaml"), "--runs", "600",
                          "--no-report", *quiet])
    done = subprocess.run(["script", "-qec", command, "/dev/null"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout
    assert ("/600" in done.stdout) is shown  # rich's "done/total" column
    assert "every invariant held" in done.stdout


class TestReviewFindings:
    """Each once broke: a report crashed or leaked, a replay was overwritten, an error took
    several lines or a traceback."""

    def test_secrets_in_the_definitions_context_stay_out_even_under_a_report_fields_name(
            self, user: Path) -> None:
        flow = WORKFLOW.replace("context: {order: o-1, amount: 40, sku: sku-9}",
                                "secrets: [name, token]\ncontext: {order: o-1, amount: 40, "
                                "sku: sku-9, name: null, token: s3cr3t-TOKEN}").replace(
            'input: {order: "=context.order", amount: "=context.amount"}',
            'input: {order: "=context.order", amount: "=context.amount", auth: '
            '"=context.token"}', 1)
        assert flow.count("token") == 3
        (user / "workflow_pay.yaml").write_text(flow)
        result = cli("fuzz", "workflow_pay.yaml", "--machine", "naive_machine:KeyPerAttempt",
                     "--runs", "50", cwd=user)
        assert result.returncode == 1, result.stdout + result.stderr
        assert "[redacted]" in result.stdout and "s3cr3t-TOKEN" not in result.stdout
        for written in [*(user / "reports").glob("fuzz.*"),
                        *(user / "reports" / "replays").glob("*.json")]:
            text = written.read_text()
            if written.parent.name == "replays":  # replaying needs the options' context
                text = json.dumps({k: v for k, v in json.loads(text).items()
                                   if k != "options"})
            assert "s3cr3t-TOKEN" not in text, written.name
        doc = report_of(user / "reports", "fuzz")
        assert doc["targets"][0]["definition"]["name"] == "planted"

    def test_two_definitions_of_one_name_keep_their_own_replay_files(self, user: Path) -> None:
        (user / "other").mkdir()
        (user / "other" / "workflow_pay.yaml").write_text(
            WORKFLOW.replace("amount: 40", "amount: 99"))
        assert "amount: 99" in (user / "other" / "workflow_pay.yaml").read_text()
        result = cli("explore", "workflow_pay.yaml", "other/workflow_pay.yaml", "--depth", "5",
                     "--machine", "naive_machine:KeyPerAttempt", cwd=user)
        assert result.returncode == 1, result.stdout + result.stderr
        commands = [line.strip() for line in result.stdout.splitlines() if "replay:" in line]
        assert len(set(commands)) == 2, commands
        again = cli(*commands[1].removeprefix("replay: ").split()[1:], cwd=user,
                    path=str(user))
        assert again.returncode == 1 and '"amount":99' in again.stdout

    @pytest.mark.parametrize(("args", "fragments"), [
        (["diagram", "workflow_pay.yaml", "-o", ""], ("--output ''", "expected a file path")),
        (["schema", "-o", ""], ("expected a file path",)),
        (["fuzz", "workflow_pay.yaml", "--report", ""], ("--report: expected a folder",)),
        (["fuzz", "naive_machine:KeyPerAttempt", "--machine", "harness:ReferenceMachine"],
         ("applies to definitions only",)),
        (["fuzz", "naive_machine:Numbered"], ("Numbered.definition: expected a definition",)),
        (["fuzz", "broken.yaml"], ("broken.yaml: line ", "more error", "fsmharness lint")),
    ])
    def test_more_bad_input_in_one_line(self, user: Path, args: list[str],
                                        fragments: tuple[str, ...]) -> None:
        (user / "naive_machine.py").write_text(
            NAIVE_MACHINE + "\n\nclass Numbered(KeyPerAttempt):\n    definition = 5\n")
        (user / "broken.yaml").write_text(
            WORKFLOW.replace("target: shipped", "target: nowhere").replace(
                "initial: true", "initial: false", 1))
        one_error_line(cli(*args, cwd=user), *fragments)

    def test_no_progress_bar_off_a_terminal_even_with_force_color(self) -> None:
        result = subprocess.run(
            [sys.executable, "-m", "harness.cli", "fuzz", str(SCENARIOS / "support_triage.yaml"),
             "--runs", "300", "--no-report"], capture_output=True, text=True, check=False,
            env={**os.environ, "FORCE_COLOR": "1"}, timeout=600)
        assert result.returncode == 0 and result.stderr == ""

    def test_an_exploration_stopped_short_says_it_is_no_proof(self) -> None:
        result = cli("explore", str(SCENARIOS / "refund_escalation.yaml"), "--depth", "12",
                     "--states-max", "50", "--no-report")
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("partial  ")
        assert "not covered" in result.stdout and "as far as explored" in result.stdout

    def test_without_a_replay_file_the_failure_says_how_to_run_it_again(self, user: Path
                                                                        ) -> None:
        result = cli("fuzz", "workflow_pay.yaml", "--machine", "naive_machine:KeyPerAttempt",
                     "--runs", "50", "--no-report", cwd=user)
        assert result.returncode == 1
        assert "shrunk to " in result.stdout
        told = re.search(r"no replay file with --no-report: (.+) finds it again", result.stdout)
        assert told is not None, result.stdout
        command = shlex.split(told.group(1))
        assert command == ["fsmharness", "fuzz", "workflow_pay.yaml", "--machine",
                           "naive_machine:KeyPerAttempt", "--runs", "50"]
        again = cli(*command[1:], cwd=user)  # as printed: the same failure, now with its file
        assert again.returncode == 1
        assert list((user / "reports" / "replays").glob("*.json")), again.stdout


def test_a_blind_spot_is_said_under_the_verdict_and_in_every_report(tmp_path: Path) -> None:
    """A machine without watch() on a definition with a correlated event: the verdict line,
    the JSON, Markdown and HTML reports say which transition its runs could not take and why;
    and since that transition is the way to the refund, no run succeeds: untested, not held
    (the same campaign on the watched reference machine holds)."""
    (tmp_path / "unwatched.py").write_text(
        "from harness.sim.machine import ReferenceMachine\n\n\n"
        "class Unwatched(ReferenceMachine):\n    watch = None\n")
    definition = ROOT / "docs" / "examples" / "authoring" / "refund_4_approval.yaml"
    result = cli("fuzz", str(definition), "--machine", "unwatched:Unwatched", "--runs", "60",
                 "--report", "out", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("UNTESTED") and "untested: no run ended in success" in lines[1]
    at = next(i for i, line in enumerate(lines) if "note: 1 transition" in line)
    assert lines[at].startswith("      note: 1 transition on carrier.parcel_returned "
                                "never taken; the machine reports no commits")
    (section,) = report_of(tmp_path / "out", "fuzz")["targets"]
    assert section["verdict"].startswith("untested: ") and not section["held"]
    assert section["notes"][0] == lines[at].strip()[len("note: "):]
    assert "> note: 1 transition on carrier.parcel\\_returned" in (
        tmp_path / "out" / "fuzz.md").read_text()
    assert "<th>note</th>" in (tmp_path / "out" / "fuzz.html").read_text()
    quiet = cli("fuzz", str(definition), "--machine", "unwatched:Unwatched", "--runs", "60",
                "--no-report", "-q", cwd=tmp_path)  # a blind spot is said even when quiet
    assert quiet.returncode == 1 and "      note: 1 transition" in quiet.stdout, quiet.stdout
    watched = cli("fuzz", str(definition), "--runs", "60", "--no-report", cwd=tmp_path)
    assert watched.returncode == 0 and "never taken" not in watched.stdout, watched.stdout


def test_a_python_definition_is_a_target_for_run_fuzz_and_diagram(user: Path) -> None:
    (user / "flows.py").write_text("from reference_machine import load_definition\n\n"
                                   "flow = load_definition('workflow_pay.yaml')\n")
    ran = cli("run", "flows:flow", "--seed", "1", cwd=user)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.startswith("flows:flow: seed 1, ")
    fuzzed = cli("fuzz", "flows:flow", "--runs", "10", "--no-report", cwd=user)
    assert fuzzed.returncode == 0 and fuzzed.stdout.startswith("held  flows:flow: 10 runs"), (
        fuzzed.stdout)
    drawn = cli("diagram", "flows:flow", cwd=user)
    assert drawn.returncode == 0 and drawn.stdout.startswith("stateDiagram-v2")
