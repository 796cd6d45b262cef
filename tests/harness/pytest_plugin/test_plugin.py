"""The pytest plugin in real pytest sessions (pytester): options and ini keys, collected
definition files, the marker and fixtures, failures as readable traces, the terminal summary,
reports, xdist, and `-p no:fsmharness`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from user_project import NAIVE_MACHINE, WORKFLOW

from harness import INVARIANTS
from harness.report.document import report_schema

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestAssertRewriteWarning")


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    """A user's project: a definition file beside the tests, collected with no Python."""
    pytester.makefile(".yaml", workflow_pay=WORKFLOW)
    pytester.makeini("[pytest]\nfsm_runs = 30\n")
    return pytester


@pytest.mark.smoke
def test_a_definition_file_becomes_lint_fuzz_and_explore_items(project: pytest.Pytester
                                                                ) -> None:
    result = project.runpytest("-v")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines([
        "*workflow_pay.yaml::lint PASSED*",
        "*workflow_pay.yaml::fuzz PASSED*",
        "*workflow_pay.yaml::explore PASSED*",
        "*= fsmharness =*",
        f"2 campaign(s): * of {len(INVARIANTS)} invariants checked, * runs, * steps, * faults "
        "injected, 0 failing",  # the built-ins, and any a test module registered
        "  held     workflow_pay.yaml (explore): held within bound 4 (* distinct states)",
        "  held     workflow_pay.yaml (fuzz): 30 runs* steps; coverage states */10, "
        "transitions */13, *",
        "  faults injected: *crash *",
    ])


@pytest.mark.smoke
def test_a_buggy_machine_fails_with_the_invariant_the_trace_and_the_replay_command(
        project: pytest.Pytester) -> None:
    project.makepyfile(naive_machine=NAIVE_MACHINE)
    project.makeini("[pytest]\nfsm_runs = 30\nfsm_depth = 6\n"
                    "fsm_machine = naive_machine:KeyPerAttempt\npythonpath = .\n")
    result = project.runpytest()
    result.assert_outcomes(passed=1, failed=2)  # lint passes; fuzz and explore both catch it
    result.stdout.fnmatch_lines([
        "*_ fuzz _*",
        "workflow_pay.yaml (fuzz):",
        "violated no_duplicate_effect (x*, step *): pay.charge took effect twice*",
        "shrunk to * steps (from *), seed *:",
        "  step 1 (t=0s): start x1*",
        "replay: fsmharness replay reports/replays/planted-no_duplicate_effect-seed*.json",
    ])
    result.stdout.fnmatch_lines(["*_ explore _*", "workflow_pay.yaml (explore):",
                                 "violated no_duplicate_effect*"])
    result.stdout.fnmatch_lines(["  VIOLATED workflow_pay.yaml (explore): violated at depth *",
                                 "  VIOLATED workflow_pay.yaml (fuzz): *"])
    replays = sorted((project.path / "reports" / "replays").glob("*.json"))
    assert replays, "the failing campaign saved no replay file"
    replayed = subprocess.run([sys.executable, "-m", "harness.cli", "replay", str(replays[0])],
                              cwd=project.path, capture_output=True, text=True, timeout=120)
    assert replayed.returncode == 1, replayed.stderr
    assert "reproduced no_duplicate_effect" in replayed.stdout


@pytest.mark.smoke
def test_the_marker_runs_a_campaign_and_hands_its_report_to_the_test(
        pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", flow=WORKFLOW)
    pytester.makepyfile(naive_machine=NAIVE_MACHINE)
    pytester.syspathinsert()
    pytester.makepyfile(test_flows="""
        import pytest

        @pytest.mark.fsm_fuzz("flow.yaml", runs=12)
        def test_reference_holds(fsm_report):
            assert fsm_report.held and fsm_report.runs >= 12  # and any aimed at gaps

        @pytest.mark.fsm_fuzz("flow.yaml", machine="naive_machine:KeyPerAttempt", runs=40)
        def test_naive_breaks(fsm_report):
            raise AssertionError("not reached: the campaign fails first")

        @pytest.mark.fsm_fuzz("no_such_flow.yaml")
        def test_missing_definition():
            pass
    """)
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines([
        "*_ test_naive_breaks _*",
        "violated no_duplicate_effect*",
        "shrunk to * steps*",
        "replay: fsmharness replay *",
    ])
    result.stdout.fnmatch_lines(["*_ test_missing_definition _*",
                                 "fsm_fuzz: *no_such_flow.yaml*"])
    result.stdout.no_fnmatch_line("*not reached*")


@pytest.mark.smoke
def test_fixtures_build_simulators_worlds_plans_and_a_frozen_clock(
        pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", flow=WORKFLOW)
    pytester.makepyfile(test_fixtures="""
        import datetime

        def test_simulator_is_seeded_from_the_session(fsm_simulator, fsm_settings):
            first = fsm_simulator("flow.yaml").run()
            again = fsm_simulator("flow.yaml").run()
            assert first.history == again.history and first.steps > 0
            assert fsm_settings.seed == 5 and fsm_settings.runs == 7

        def test_fault_plan_follows_fsm_faults(fsm_fault_plan):
            assert [str(k) for k in fsm_fault_plan.kinds] == ["crash", "duplicate_event"]

        def test_tool_world_applies_through_its_ledger(fsm_tool_world):
            world = fsm_tool_world("flow.yaml")
            outcome = world.tools["pay.charge"]({"order": "o-1", "amount": 3}, "x1/k")
            assert type(outcome).__name__ == "Success"
            assert [e.tool for e in world.ledger.entries] == ["pay.charge"]

        def test_frozen_clock(fsm_frozen_clock):
            first = datetime.datetime.now(datetime.UTC)
            fsm_frozen_clock.tick(60)
            assert (datetime.datetime.now(datetime.UTC) - first).total_seconds() == 60
            assert first.year == 2026
    """)
    result = pytester.runpytest("--fsm-seed", "5", "--fsm-runs", "7",
                                "--fsm-faults", "crash,duplicate_event")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["fsmharness: seed 5, 7 runs per campaign that sets none, "
                                 "faults crash,duplicate_event"])


@pytest.mark.parametrize(("args", "message"), [
    (["--fsm-runs", "0"], "*--fsm-runs: expected at least 1, got 0*"),
    (["--fsm-seed", "soon"], "*--fsm-seed: expected a whole number, got 'soon'*"),
    (["--fsm-budget", "-3"], "*--fsm-budget: expected a positive number of seconds*"),
    (["--fsm-faults", "crash,gremlins"], "*--fsm-faults: unknown fault kind 'gremlins'*"),
])
def test_bad_option_values_are_usage_errors(project: pytest.Pytester, args: list[str],
                                            message: str) -> None:
    result = project.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_bad_ini_values_are_usage_errors(project: pytest.Pytester) -> None:
    project.makeini("[pytest]\nfsm_runs = many\n")
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--fsm-runs: expected a whole number, got 'many'*"])


def test_a_report_folder_that_cannot_be_written_stops_the_session_first(
        project: pytest.Pytester) -> None:
    (project.path / "taken").write_text("a file, not a folder")
    result = project.runpytest("--fsm-report", "taken/reports")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--fsm-report taken/reports: cannot write there*"])
    assert not (project.path / "reports").exists()


def test_the_report_holds_every_campaign_and_follows_its_schema(project: pytest.Pytester
                                                                ) -> None:
    result = project.runpytest("--fsm-report", "out")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["  report: out/pytest.html (and pytest.json, pytest.md)"])
    doc = json.loads((project.path / "out" / "pytest.json").read_text())
    jsonschema.validate(doc, report_schema())
    assert doc["held"] and doc["command"] == "pytest"
    assert [(t["name"], t["engine"]) for t in doc["targets"]] == [
        ("workflow_pay.yaml", "explore"), ("workflow_pay.yaml", "fuzz")]
    assert "stateDiagram-v2" in (project.path / "out" / "pytest.md").read_text()
    assert "<svg" in (project.path / "out" / "pytest.html").read_text()


def test_the_definition_globs_are_configurable(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", flow_pay=WORKFLOW, workflow_other="not: [a, definition")
    pytester.makeini("[pytest]\nfsm_runs = 5\nfsm_definitions = flow_*.yaml\n")
    result = pytester.runpytest("-v")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*flow_pay.yaml::fuzz PASSED*"])
    result.stdout.no_fnmatch_line("*workflow_other*")


def test_a_broken_definition_fails_its_lint_item_with_the_location(
        pytester: pytest.Pytester) -> None:
    broken = WORKFLOW.replace("target: shipped", "target: nowhere", 1)
    assert broken != WORKFLOW
    pytester.makefile(".yaml", workflow_broken=broken)
    result = pytester.runpytest()
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(["workflow_broken.yaml (lint):",
                                 "*workflow_broken.yaml:*: *nowhere*"])


def test_disabled_with_no_fsmharness(project: pytest.Pytester) -> None:
    result = project.runpytest("-p", "no:fsmharness")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.no_fnmatch_line("fsmharness: seed*")
    result.stdout.no_fnmatch_line("*= fsmharness =*")
    refused = project.runpytest("-p", "no:fsmharness", "--fsm-runs", "3")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*unrecognized arguments: --fsm-runs*"])


def test_under_xdist_workers_results_are_merged_and_the_same_as_one_process(
        project: pytest.Pytester) -> None:
    copy = Path(project.path, "workflow_pay.yaml").read_text()
    project.makefile(".yaml", workflow_second=copy.replace("name: planted", "name: second"))
    single = project.runpytest_subprocess("--fsm-report", "one")
    single.assert_outcomes(passed=6)
    spread = project.runpytest_subprocess("-n", "2", "--fsm-report", "two")
    spread.assert_outcomes(passed=6)
    spread.stdout.fnmatch_lines(["*4 campaign(s): * of 22 invariants checked*0 failing"])

    def campaigns(folder: str) -> list[tuple[str, str, int, int]]:
        doc = json.loads((project.path / folder / "pytest.json").read_text())
        return [(t["name"], t["engine"], t["runs"], t["steps"]) for t in doc["targets"]]

    assert campaigns("two") == campaigns("one")  # seeds follow the test, not the worker
    fuzzed = [c for c in campaigns("two") if c[1] == "fuzz"]
    assert len(fuzzed) == 2 and fuzzed[0][3] != fuzzed[1][3]  # distinct seeds per test


def test_replay_files_of_an_earlier_run_are_not_collected_as_definitions(
        pytester: pytest.Pytester) -> None:
    """A definition named workflow_... leaves replay files named workflow_...json: the next
    session runs the same items, not three more per replay file."""
    pytester.makefile(".yaml", workflow_pay=WORKFLOW.replace("name: planted",
                                                             "name: workflow_pay"))
    pytester.makepyfile(naive_machine=NAIVE_MACHINE)
    pytester.makeini("[pytest]\nfsm_runs = 30\nfsm_depth = 6\n"
                     "fsm_machine = naive_machine:KeyPerAttempt\npythonpath = .\n")
    first = pytester.runpytest()
    first.assert_outcomes(passed=1, failed=2)
    assert list((pytester.path / "reports" / "replays").glob("workflow_pay-*.json"))
    again = pytester.runpytest()
    again.assert_outcomes(passed=1, failed=2)


def test_a_failing_marker_campaign_is_told_once(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", flow=WORKFLOW)
    pytester.makepyfile(naive_machine=NAIVE_MACHINE)
    pytester.syspathinsert()
    pytester.makepyfile(test_flow="""
        import pytest

        @pytest.mark.fsm_fuzz("flow.yaml", machine="naive_machine:KeyPerAttempt", runs=40)
        def test_naive():
            pass

        def test_naive_by_fixture(fsm_fuzz):
            import naive_machine
            fsm_fuzz("flow.yaml", machine=naive_machine.KeyPerAttempt, runs=40)
    """)
    result = pytester.runpytest()
    result.assert_outcomes(failed=2)
    # Count in the FAILURES section: under CI=true pytest's short summary repeats each
    # message in full, which is pytest's doing, not a second telling of ours.
    failures = result.stdout.str().split("short test summary info")[0]
    assert failures.count("shrunk to ") == 2  # one trace per failing test
    result.stdout.no_fnmatch_line("*During handling of the above exception*")


def test_a_machine_that_does_not_import_stops_the_session(project: pytest.Pytester) -> None:
    project.makeini("[pytest]\nfsm_machine = no_such_module:Machine\n")
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*fsm_machine: no_such_module:Machine: cannot import "
                                 "no_such_module*"])


def test_sections_are_named_by_their_test_and_ordered_by_it(pytester: pytest.Pytester
                                                            ) -> None:
    pytester.makefile(".yaml", flow=WORKFLOW)
    pytester.makepyfile(test_flows="""
        import pytest

        @pytest.mark.fsm_fuzz("flow.yaml", runs=30)
        def test_b():
            pass

        @pytest.mark.fsm_fuzz("flow.yaml", runs=40)
        def test_a():
            pass
    """)
    result = pytester.runpytest_subprocess("-n", "2", "--fsm-report", "out")
    result.assert_outcomes(passed=2)
    doc = json.loads((pytester.path / "out" / "pytest.json").read_text())
    assert [(t["test"], t["options"]["runs"]) for t in doc["targets"]] == [
        ("test_flows.py::test_a", 40), ("test_flows.py::test_b", 30)]
    result.stdout.fnmatch_lines(["  invariants checked: approval_genuine, approved_effects, *"])


def test_an_adapter_target_is_a_campaign_by_the_marker_and_the_fixture(
        pytester: pytest.Pytester) -> None:
    """A transitions machine wrapped by `harness.adapters` needs no definition file: the
    target carries its own, in the marker as in `fsm_fuzz`."""
    pytester.syspathinsert(Path(__file__).resolve().parents[2] / "support")
    pytester.makepyfile(test_orders="""
        import peers
        import pytest

        @pytest.mark.fsm_fuzz(peers.orders, runs=30)
        def test_correct(fsm_report):
            assert fsm_report.held and fsm_report.runs >= 30  # and any aimed at gaps

        @pytest.mark.fsm_fuzz(peers.naive_orders, runs=300)
        def test_naive():
            pass

        def test_by_fixture(fsm_fuzz):
            report = fsm_fuzz(peers.chart_orders, runs=20)
            assert report.held and "cancelled" in report.coverage.states
    """)
    result = pytester.runpytest()
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*test_naive*violated no_duplicate_effect*"])


def test_a_vacuous_campaign_fails_its_test_and_says_what_never_happened(
        pytester: pytest.Pytester) -> None:
    """A machine that never moves fails its marker campaign (no `held` for nothing), as does a
    campaign under the coverage floor; the floor comes from the marker or `fsm_min_coverage`."""
    pytester.syspathinsert(Path(__file__).resolve().parents[2] / "support")
    pytester.makeini("[pytest]\nfsm_min_coverage = 100\n")
    pytester.makepyfile(test_vacuous="""
        import peers
        import pytest
        import vacuous

        @pytest.mark.fsm_fuzz(vacuous.stuck_orders, runs=10)
        def test_stuck():
            pass

        ONE_RUN = "one run checks the floor, not the faults"

        @pytest.mark.fsm_fuzz(peers.orders, runs=1, executions=1, min_coverage=0,
                              untested={"crash_point:*": ONE_RUN, "fault:*": ONE_RUN,
                                        "outcome:*": ONE_RUN})
        def test_floor_lowered_by_the_marker(fsm_report):
            assert fsm_report.held and fsm_report.adequacy.acknowledged

        def test_floor_of_the_ini(fsm_fuzz):  # one execution takes 2 of the 4 moves at most
            fsm_fuzz(peers.orders, runs=1, executions=1)
    """)
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines([
        "*_ test_stuck _*", "vacuous: no run took any of the 2 declared transitions: the "
        "machine never moved*",
        "*_ test_floor_of_the_ini _*", "vacuous: * of 4 declared transitions taken (*%), under "
        "the floor of 100%",
        "  VACUOUS  test_vacuous.py::test_stuck*"])


def test_a_bad_coverage_floor_is_a_usage_error(project: pytest.Pytester) -> None:
    result = project.runpytest("--fsm-min-coverage", "150")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--fsm-min-coverage: expected a percent from 0 to 100, "
                                 "got '150'*"])


def test_a_bad_strategy_is_a_usage_error(project: pytest.Pytester) -> None:
    result = project.runpytest("--fsm-strategy", "blind")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--fsm-strategy: expected one of swarm, guided, mixed, got "
                                 "'blind'*"])


def test_the_strategy_and_the_corpus_come_from_the_ini(project: pytest.Pytester) -> None:
    project.makeini("[pytest]\nfsm_runs = 32\nfsm_strategy = guided\nfsm_corpus = corpus\n")
    result = project.runpytest("--fsm-report", "out")
    result.assert_outcomes(passed=3)
    doc = json.loads((project.path / "out" / "pytest.json").read_text())
    jsonschema.validate(doc, report_schema())
    (fuzzed,) = [section for section in doc["targets"] if section["engine"] == "fuzz"]
    assert fuzzed["strategy"] == "guided" and fuzzed["growth"][-1][0] == 32
    assert list((project.path / "corpus").glob("*.json"))
