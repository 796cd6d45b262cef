"""Imported formats through every door a user has: `fsmharness lint/fuzz/run/diagram` on the
file as it is (by its name, or `--format`), `fsmharness import` writing the native YAML, the
survey and W3C tables, and the pytest plugin collecting the files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from corpus import CORPUS
from test_xstate_import import TRAFFIC_LIGHT

from reference_machine import load_definition
from reference_machine.importers import import_definition

ROOT = Path(__file__).resolve().parents[3]
SAGA = "saga-pattern-cdk__resources__statemachine.asl.json"

#: A small Step Functions file: a task, a choice on its result, two ends.
ASL = {
    "Comment": "charge then decide",
    "StartAt": "Charge",
    "States": {
        "Charge": {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke",
                   "Parameters": {"FunctionName": "charge", "Payload.$": "$"},
                   "ResultPath": "$.charge", "Next": "Paid?"},
        "Paid?": {"Type": "Choice", "Default": "Declined",
                  "Choices": [{"Variable": "$.charge.ok", "BooleanEquals": True,
                               "Next": "Done"}]},
        "Done": {"Type": "Succeed"},
        "Declined": {"Type": "Fail", "Error": "Declined"},
    },
}

SCXML = """<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="python"
       initial="idle">
  <datamodel><data id="count" expr="0"/></datamodel>
  <state id="idle">
    <transition event="go" target="busy"><assign location="count" expr="count + 1"/></transition>
  </state>
  <state id="busy">
    <transition event="stop" cond="count &gt; 0" target="done"/>
  </state>
  <final id="done"/>
</scxml>
"""


def cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=cwd,
                          capture_output=True, text=True, check=False)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    written = {"asl": tmp_path / "charge.asl.json", "xstate": tmp_path / "light.xstate.json",
               "scxml": tmp_path / "counter.scxml", "plain": tmp_path / "charge.json"}
    written["asl"].write_text(json.dumps(ASL), encoding="utf-8")
    written["plain"].write_text(json.dumps(ASL), encoding="utf-8")
    written["xstate"].write_text(json.dumps(TRAFFIC_LIGHT), encoding="utf-8")
    written["scxml"].write_text(SCXML, encoding="utf-8")
    return written


class TestCommandsTakeTheFiles:
    @pytest.mark.parametrize("kind", ["asl", "xstate", "scxml"])
    def test_lint_fuzz_and_diagram_read_each_format_by_its_name(
            self, files: dict[str, Path], kind: str) -> None:
        path = str(files[kind])
        linted = cli("lint", path)
        assert linted.returncode == 0, linted.stdout + linted.stderr
        fuzzed = cli("fuzz", path, "--runs", "10", "--no-report", "-q")
        assert fuzzed.returncode in (0, 1), fuzzed.stdout + fuzzed.stderr
        assert "Traceback" not in fuzzed.stderr
        assert "0 vacuous" not in fuzzed.stdout and "vacuous:" not in fuzzed.stdout
        drawn = cli("diagram", path)
        assert drawn.returncode == 0 and drawn.stdout.startswith("stateDiagram-v2")

    def test_the_importers_warnings_are_lint_findings_with_their_location(self) -> None:
        linted = cli("lint", str(CORPUS / "step-functions" / SAGA))
        if not (CORPUS / "step-functions" / SAGA).exists():
            pytest.skip("the shared corpus is not here")
        assert linted.returncode == 0, linted.stdout
        assert ("warning: States.RefundPayment.Retry[1]: 2 retriers merged into one policy"
                in linted.stdout)

    def test_format_reads_a_file_its_name_does_not_tell(self, files: dict[str, Path]) -> None:
        as_native = cli("lint", str(files["plain"]))
        assert as_native.returncode == 1  # not a native file, and it says what it is
        assert "Step Functions (ASL) definition" in as_native.stdout
        assert "--format asl" in as_native.stdout
        as_asl = cli("lint", "--format", "asl", str(files["plain"]))
        assert as_asl.returncode == 0, as_asl.stdout
        ran = cli("run", "--format", "asl", str(files["plain"]), "--no-faults")
        assert ran.returncode == 0, ran.stdout + ran.stderr

    def test_a_file_that_cannot_be_imported_is_one_line_and_exit_2(
            self, tmp_path: Path) -> None:
        broken = tmp_path / "broken.asl.json"
        broken.write_text(json.dumps({"States": {"A": {"Type": "Succeed"}}}), encoding="utf-8")
        fuzzed = cli("fuzz", str(broken), "--runs", "3", "--report", str(tmp_path / "out"))
        assert fuzzed.returncode == 2
        assert fuzzed.stderr.startswith("fsmharness: error: ") and "StartAt" in fuzzed.stderr
        assert "Traceback" not in fuzzed.stderr and not (tmp_path / "out").exists()


class TestImportCommand:
    @pytest.mark.smoke
    def test_writes_the_native_yaml_it_read(self, files: dict[str, Path],
                                            tmp_path: Path) -> None:
        out = tmp_path / "charge.yaml"
        done = cli("import", str(files["asl"]), "-o", str(out))
        assert done.returncode == 0, done.stderr
        text = out.read_text(encoding="utf-8")
        assert text.startswith(f"# imported from {files['asl']} (asl) by fsmharness import")
        assert "asl-tool-contract" in text and "asl-tool-contract" in done.stderr
        written, read = load_definition(out), import_definition(files["asl"])
        assert set(written.states) == set(read.states)
        tools = yaml.safe_load(text)["tools"]
        assert set(tools) == set(read.tools) == {"lambda.invoke.charge"}
        assert tools["lambda.invoke.charge"]["action"] == "call"

    def test_prints_to_stdout_without_output(self, files: dict[str, Path]) -> None:
        done = cli("import", str(files["scxml"]))
        assert done.returncode == 0 and "states:" in done.stdout

    def test_refuses_what_it_cannot_import_and_writes_nothing(self, tmp_path: Path) -> None:
        bad = tmp_path / "bad.scxml"
        bad.write_text('<scxml xmlns="http://www.w3.org/2005/07/scxml" datamodel="xpath">'
                       '<state id="a"/></scxml>', encoding="utf-8")
        out = tmp_path / "bad.yaml"
        done = cli("import", str(bad), "-o", str(out))
        assert done.returncode == 2 and "xpath" in done.stderr
        assert "Traceback" not in done.stderr and not out.exists()

    def test_a_native_file_is_refused_naming_the_endings(self) -> None:
        done = cli("import", "scenarios/refund_escalation.yaml")
        assert done.returncode == 2 and "*.asl.json" in done.stderr and "--format" in done.stderr

    def test_the_survey_table(self, files: dict[str, Path], tmp_path: Path) -> None:
        (tmp_path / "broken.asl.json").write_text("{}", encoding="utf-8")
        done = cli("import", "--survey", str(tmp_path))
        assert done.returncode == 0, done.stderr
        # a folder's files whose names tell a format: charge.json is not one of them
        assert done.stdout.startswith("Imported 3 of 4 files (75%).")
        assert "| `broken.asl.json` |" in done.stdout

    def test_the_w3c_table(self, tmp_path: Path) -> None:
        folder = tmp_path / "w3c"
        folder.mkdir()
        (folder / "test1.scxml").write_text(
            '<scxml xmlns="http://www.w3.org/2005/07/scxml" datamodel="python" initial="s0">'
            '<state id="s0"><transition target="pass"/></state><final id="pass"/>'
            '<final id="fail"/></scxml>', encoding="utf-8")
        (folder / "test2.scxml").write_text(
            '<scxml xmlns="http://www.w3.org/2005/07/scxml" datamodel="xpath">'
            '<final id="pass"/></scxml>', encoding="utf-8")
        done = cli("import", "--w3c", str(folder))
        assert done.returncode == 0, done.stderr
        assert "Passed 1 of 2; imported 1." in done.stdout
        assert "| test2 | no | refused: datamodel xpath |" in done.stdout


def test_the_plugin_collects_imported_files(pytester: pytest.Pytester,
                                            files: dict[str, Path]) -> None:
    """`fsm_definitions = *.asl.json *.scxml`: each file is linted, fuzzed and explored."""
    pytester.makefile(".asl.json", charge=json.dumps(ASL))
    pytester.makefile(".scxml", counter=SCXML)
    pytester.makeini("[pytest]\nfsm_runs = 5\nfsm_depth = 3\n"
                     "fsm_definitions = *.asl.json *.scxml\n")
    result = pytester.runpytest("-v", "-p", "no:randomly")
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*charge.asl.json::fuzz PASSED*", "*counter.scxml::lint PASSED*"])


def test_a_source_file_without_a_format_is_told_how_to_read_it(tmp_path: Path) -> None:
    """A `.ts` file once read as YAML ('YAML syntax'); it is source code, and the error says
    which format reads the machine it creates."""
    path = tmp_path / "machine.ts"
    path.write_text("export const machine = createMachine({});\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "harness.cli", "lint", str(path)],
                          capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--format xstate" in done.stdout + done.stderr
    assert "YAML" not in done.stdout + done.stderr and "Traceback" not in done.stderr
