"""A test's own campaigns in real pytest sessions (pytester): `expect=` for a campaign that must
break (the marker and `fsm_fuzz`), the report `fsm_fuzz` gives without raising, and campaigns
named by their test's id in the terminal summary and the report.

The examples of the documentation (`DOCS_*`) run here as written: a page that shows one says
`<!-- docs: run by tests/harness/pytest_plugin/test_campaign_reports.py::NAME -->` above it.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import jsonschema
import pytest
from user_project import NAIVE_MACHINE, WORKFLOW

from harness.report.document import report_schema

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestAssertRewriteWarning")

SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"


@pytest.fixture
def flows(pytester: pytest.Pytester) -> pytest.Pytester:
    """A project with the small payment workflow (`flow.yaml`) and a machine that charges
    twice (`naive_machine:KeyPerAttempt`: a key per attempt breaks no_duplicate_effect)."""
    pytester.makefile(".yaml", flow=WORKFLOW)
    pytester.makepyfile(naive_machine=NAIVE_MACHINE)
    pytester.syspathinsert()
    return pytester


def _failures(result: pytest.RunResult) -> str:
    """Gives the FAILURES part of a session's output: under CI=1 pytest repeats each message
    in full in its short summary, which would count twice."""
    return result.stdout.str().split("short test summary info")[0]


class TestExpect:
    """`expect=`: a campaign kept because it must break one of the named invariants."""

    def test_a_campaign_that_breaks_what_it_expects_passes_its_test(
            self, flows: pytest.Pytester) -> None:
        """The marker's test and the fixture's call pass when the campaign breaks the named
        invariant (or one of a list), and the body gets the report of the break."""
        flows.makepyfile(test_naive="""
            import naive_machine
            import pytest

            NAIVE = "naive_machine:KeyPerAttempt"

            @pytest.mark.fsm_fuzz("flow.yaml", machine=NAIVE, runs=40,
                                  expect="no_duplicate_effect")
            def test_one_name(fsm_report):
                assert not fsm_report.held
                assert fsm_report.failures[0].rule == "no_duplicate_effect"

            @pytest.mark.fsm_fuzz("flow.yaml", machine=NAIVE, runs=40,
                                  expect=("terminal_stays_terminal", "no_duplicate_effect"))
            def test_one_of_two():
                pass

            def test_by_fixture(fsm_fuzz):
                report = fsm_fuzz("flow.yaml", machine=naive_machine.KeyPerAttempt, runs=40,
                                  expect=["no_duplicate_effect"])
                assert report.verdict == "violated"
        """)
        result = flows.runpytest("-v")
        result.assert_outcomes(passed=3)
        result.stdout.fnmatch_lines([
            # the header gives the session's default; each campaign's line its own runs
            "fsmharness: seed *, * runs per campaign that sets none, faults *",
            "*= fsmharness =*",
            "3 campaign(s): * 0 failing, 3 broke as expected",
            "  expected test_naive.py::test_by_fixture (fuzz): broke no_duplicate_effect as "
            "expected; * runs, *",
            "  expected test_naive.py::test_one_name (fuzz): broke no_duplicate_effect as "
            "expected; *",
            "  expected test_naive.py::test_one_of_two (fuzz): broke no_duplicate_effect as "
            "expected; *",
        ])

    def test_a_campaign_that_holds_or_breaks_something_else_fails_saying_so(
            self, flows: pytest.Pytester) -> None:
        """Held: the test fails with the runs it took; another invariant broke: the test fails
        naming it, with its trace and replay command; the fixture fails at the call."""
        flows.makepyfile(test_naive="""
            import naive_machine
            import pytest

            @pytest.mark.fsm_fuzz("flow.yaml", runs=12, expect="no_duplicate_effect")
            def test_holds():
                raise AssertionError("not reached: the campaign fails first")

            @pytest.mark.fsm_fuzz("flow.yaml", machine="naive_machine:KeyPerAttempt",
                                  runs=40, expect=["terminal_stays_terminal", "guards_held"])
            def test_breaks_another():
                pass

            def test_by_fixture(fsm_fuzz):
                fsm_fuzz("flow.yaml", runs=9, expect="no_duplicate_effect")
                raise AssertionError("not reached: the call fails the test")
        """)
        result = flows.runpytest()
        result.assert_outcomes(failed=3)
        result.stdout.fnmatch_lines([
            "*_ test_holds _*",
            "expected no_duplicate_effect to break, but every invariant held in 12 runs* "
            "(fixed? then drop expect= and keep the test as a guard)",
            "*_ test_breaks_another _*",
            "expected one of terminal_stays_terminal, guards_held to break, but "
            "no_duplicate_effect broke instead",
            "violated no_duplicate_effect (x*, step *): pay.charge took effect twice*",
            "shrunk to * steps (from *), seed *:",
            "replay: fsmharness replay reports/replays/planted-no_duplicate_effect-*.json",
            "*_ test_by_fixture _*",
            "expected no_duplicate_effect to break, but every invariant held in 9 runs*",
        ])
        result.stdout.no_fnmatch_line("*not reached*")
        result.stdout.fnmatch_lines([
            "3 campaign(s): * 3 failing",
            "  VIOLATED test_naive.py::test_breaks_another (fuzz): *; expected one of "
            "terminal_stays_terminal, guards_held to break",
            "  held     test_naive.py::test_by_fixture (fuzz): 9 runs*; expected "
            "no_duplicate_effect to break",
            "  held     test_naive.py::test_holds (fuzz): 12 runs*; expected "
            "no_duplicate_effect to break",
        ])

    def test_an_invariant_broken_beside_the_expected_one_fails_the_test(
            self, flows: pytest.Pytester) -> None:
        """Every invariant that broke must be in `expect=`: a second one is a bug of its own
        (a user invariant here, so the session runs in a process of its own)."""
        flows.makepyfile(test_naive="""
            import pytest

            from harness import check, invariant

            @invariant()
            def charged_once(definition, history):
                \"\"\"The built-in no_duplicate_effect under a name of its own: the two
                break in the same runs.\"\"\"
                for violation in check(definition, history, only=["no_duplicate_effect"]):
                    yield violation.message

            NAIVE = "naive_machine:KeyPerAttempt"

            @pytest.mark.fsm_fuzz("flow.yaml", machine=NAIVE, runs=40,
                                  expect="no_duplicate_effect")
            def test_one_named():
                pass

            @pytest.mark.fsm_fuzz("flow.yaml", machine=NAIVE, runs=40,
                                  expect=["no_duplicate_effect", "charged_once"])
            def test_both_named():
                pass
        """)
        flows.makeini("[pytest]\npythonpath = .\n")
        result = flows.runpytest_subprocess()
        result.assert_outcomes(passed=1, failed=1)
        result.stdout.fnmatch_lines([
            "*_ test_one_named _*",
            "no_duplicate_effect broke as expected, but charged_once broke too (add it to "
            "expect= if it is the same bug)",
            "violated no_duplicate_effect*",
        ])
        result.stdout.fnmatch_lines(["  expected test_naive.py::test_both_named (fuzz): broke "
                                     "no_duplicate_effect as expected*"])

    def test_the_ini_settings_apply_to_an_expected_campaign(self, flows: pytest.Pytester
                                                            ) -> None:
        """`fsm_runs` sets the runs the verdict counts; under `fsm_min_coverage` a campaign
        that exercised too little is vacuous, which is no expected break."""
        flows.syspathinsert(Path(__file__).resolve().parents[2] / "support")
        flows.makeini("[pytest]\nfsm_runs = 7\nfsm_min_coverage = 100\n")
        flows.makepyfile(test_ini="""
            import peers
            import pytest

            @pytest.mark.fsm_fuzz(peers.orders, min_coverage=0, expect="no_duplicate_effect")
            def test_runs_of_the_ini():
                pass

            def test_floor_of_the_ini(fsm_fuzz):  # one execution takes 2 of the 4 moves at most
                fsm_fuzz(peers.orders, runs=1, executions=1, expect="no_duplicate_effect")
        """)
        result = flows.runpytest()
        result.assert_outcomes(failed=2)
        result.stdout.fnmatch_lines([
            "*_ test_runs_of_the_ini _*",
            "expected no_duplicate_effect to break, but every invariant held in 7 runs*",
            "*_ test_floor_of_the_ini _*",
            "expected no_duplicate_effect to break, but the campaign was vacuous: * of 4 "
            "declared transitions taken (*%), under the floor of 100%",
        ])

    @pytest.mark.parametrize(("marker", "message"), [
        ('expect="no_duplicate_efect"',
         "test_bad.py::test_bad: @pytest.mark.fsm_fuzz: expect: no invariant named "
         "'no_duplicate_efect' (did you mean 'no_duplicate_effect'?); known: "
         "no_duplicate_effect, persist_before_effect, terminal_stays_terminal, *machine_ok*"),
        ('expect=["no_duplicate_effect", "gremlins"]',
         "*: expect: no invariant named 'gremlins'; known: no_duplicate_effect, *"),
        ("expect=[]", "*: expect: expected at least one invariant's name, got none"),
        ("expect=3", "*: expect: expected an invariant's name or a list of them, got 3"),
        ('invariants=["versions_increase"], expect="no_duplicate_effect"',
         "*: expect: no_duplicate_effect cannot break: invariants= checks only "
         "versions_increase"),
        ('expected="no_duplicate_effect"',
         "*: unknown option 'expected'; the options are machine, runs, seed, faults, "
         "executions, invariants, min_coverage, expect, untested"),
        ('faults="crash,gremlins"', "*: faults: unknown fault kind 'gremlins'*"),
    ])
    def test_a_misused_marker_stops_the_session_before_any_campaign(
            self, flows: pytest.Pytester, marker: str, message: str) -> None:
        """A marker the campaign would misread is refused at collection, as pytest refuses a
        misused parametrize: the test named, the known names listed, nothing run."""
        flows.makepyfile(test_bad=f"""
            import pytest

            @pytest.mark.fsm_fuzz("flow.yaml", runs=5, {marker})
            def test_bad():
                pass

            def test_other():
                pass
        """)
        result = flows.runpytest()
        assert result.ret == pytest.ExitCode.INTERRUPTED
        result.assert_outcomes(errors=1)
        result.stdout.fnmatch_lines(["*ERROR collecting test_bad.py*", message])
        result.stdout.no_fnmatch_line("*= fsmharness =*")  # no campaign ran
        result.stdout.no_fnmatch_line("*Traceback*")

    def test_a_misused_marker_is_refused_the_same_under_xdist(self, flows: pytest.Pytester
                                                              ) -> None:
        """Each worker refuses the module as it collects it, with no internal error."""
        flows.makepyfile(test_bad="""
            import pytest

            @pytest.mark.fsm_fuzz("flow.yaml", runs=5, expect="no_such_invariant")
            def test_bad():
                pass
        """)
        result = flows.runpytest_subprocess("-n", "2")
        assert result.ret != pytest.ExitCode.OK
        result.stdout.fnmatch_lines(["*test_bad.py::test_bad: @pytest.mark.fsm_fuzz: expect: "
                                     "no invariant named 'no_such_invariant'; known: *"])
        result.stdout.no_fnmatch_line("*INTERNALERROR*")

    def test_a_misused_fixture_call_fails_its_test_in_one_line(self, flows: pytest.Pytester
                                                               ) -> None:
        """`fsm_fuzz` refuses an unknown invariant, fault kind or definition at the call."""
        flows.makepyfile(test_bad="""
            def test_unknown_invariant(fsm_fuzz):
                fsm_fuzz("flow.yaml", runs=5, expect="no_duplicate_efect")

            def test_unknown_fault(fsm_fuzz):
                fsm_fuzz("flow.yaml", runs=5, faults="gremlins")

            def test_missing_definition(fsm_fuzz):
                fsm_fuzz("no_such_flow.yaml", runs=5)
        """)
        result = flows.runpytest()
        result.assert_outcomes(failed=3)
        result.stdout.fnmatch_lines([
            "*_ test_unknown_invariant _*",
            "fsm_fuzz: expect: no invariant named 'no_duplicate_efect' (did you mean "
            "'no_duplicate_effect'?); known: no_duplicate_effect, *",
            "*_ test_unknown_fault _*",
            "fsm_fuzz: faults: unknown fault kind 'gremlins'*",
            "*_ test_missing_definition _*",
            "fsm_fuzz: *no_such_flow.yaml*",
        ])
        result.stdout.no_fnmatch_line("*= fsmharness =*")
        result.stdout.no_fnmatch_line("*Traceback*")


class TestFsmFuzzFixture:
    """`fsm_fuzz` gives the campaign's report and raises only when asked."""

    def test_the_report_comes_back_for_the_test_to_assert_on(self, flows: pytest.Pytester
                                                             ) -> None:
        """A broken campaign does not fail the call: the test reads `held`, `failures`,
        `coverage` and the engine's fields, and passes on what it asserts."""
        flows.makepyfile(test_fixture="""
            import naive_machine
            from harness.engines.fuzz import FuzzReport
            from harness.pytest_plugin import CampaignReport

            def test_reads_the_break(fsm_fuzz):
                report = fsm_fuzz("flow.yaml", machine=naive_machine.KeyPerAttempt, runs=40)
                assert isinstance(report, CampaignReport)
                assert isinstance(report.fuzz_report, FuzzReport)
                assert not report.held and report.verdict == "violated"
                assert [failure.rule for failure in report.failures] == ["no_duplicate_effect"]
                assert report.failures[0].replay_file.exists()
                assert "charging" in report.coverage.states and report.steps > 0
                assert report.name == "test_fixture.py::test_reads_the_break"

            def test_reads_a_hold(fsm_fuzz):
                report = fsm_fuzz("flow.yaml", runs=6)
                aimed = sum(part["runs"] for part in report.aimed.values())
                assert report.held and report.runs == 6 + aimed and report.invariants
                assert report.untested == () and report.checked
                assert str(report) == (
                    f"test_fixture.py::test_reads_a_hold: held in {6 + aimed} runs")
        """)
        result = flows.runpytest()
        result.assert_outcomes(passed=2)

    def test_an_assert_on_held_fails_with_the_trace_and_check_fails_at_the_call(
            self, flows: pytest.Pytester) -> None:
        """`assert report.held` fails the test with the campaign's trace in a section of its
        own; `check=True` fails it at the call, the rest of the test not run."""
        flows.makepyfile(test_fixture="""
            import naive_machine

            def test_asserts(fsm_fuzz):
                report = fsm_fuzz("flow.yaml", machine=naive_machine.KeyPerAttempt, runs=40)
                assert report.held

            def test_checks(fsm_fuzz):
                fsm_fuzz("flow.yaml", machine=naive_machine.KeyPerAttempt, runs=40,
                         check=True)
                raise AssertionError("not reached: check=True fails the call")
        """)
        result = flows.runpytest()
        result.assert_outcomes(failed=2)
        result.stdout.fnmatch_lines([
            "*_ test_asserts _*",
            "E       assert False",
            "E        +  where False = <CampaignReport test_fixture.py::test_asserts: violated "
            "(no_duplicate_effect)>.held",
            "*- fsmharness campaign test_fixture.py::test_asserts -*",
            "violated no_duplicate_effect*",
            "shrunk to * steps (from *), seed *:",
            "replay: fsmharness replay *",
            "*_ test_checks _*",
            "violated no_duplicate_effect*",
            "replay: fsmharness replay *",
        ])
        result.stdout.no_fnmatch_line("*not reached*")
        assert _failures(result).count("shrunk to ") == 2  # each trace told once

    def test_a_failed_campaign_the_test_never_looked_at_fails_the_test(
            self, flows: pytest.Pytester) -> None:
        """Raising only when asked must not let a bare call pass over a broken invariant: a
        campaign that failed and whose verdict was never read fails its test when it ends;
        one that held, or whose verdict was read, does not."""
        flows.makepyfile(test_fixture="""
            import naive_machine

            NAIVE = naive_machine.KeyPerAttempt

            def test_bare(fsm_fuzz):
                fsm_fuzz("flow.yaml", machine=NAIVE, runs=40)

            def test_coverage_only(fsm_fuzz):
                report = fsm_fuzz("flow.yaml", machine=NAIVE, runs=40)
                assert "charging" in report.coverage.states

            def test_bare_that_holds(fsm_fuzz):
                fsm_fuzz("flow.yaml", runs=5)

            def test_verdict_read(fsm_fuzz):
                assert fsm_fuzz("flow.yaml", machine=NAIVE, runs=40).failures
        """)
        result = flows.runpytest()
        result.assert_outcomes(passed=2, failed=2)
        result.stdout.fnmatch_lines([
            "*_ test_bare _*",
            "fsm_fuzz: test_fixture.py::test_bare: the campaign failed and the test never read "
            "its verdict (assert on report.held, or pass check=True):",
            "violated no_duplicate_effect*",
            "replay: fsmharness replay *",
            "*_ test_coverage_only _*",
            "fsm_fuzz: test_fixture.py::test_coverage_only: the campaign failed and the test "
            "never read its verdict*",
        ])
        result.stdout.fnmatch_lines(["FAILED test_fixture.py::test_bare*",
                                     "FAILED test_fixture.py::test_coverage_only*"])

    def test_the_readme_example_means_what_it_says(self, pytester: pytest.Pytester) -> None:
        """The README's test, as written: the refund scenario holds under crashes and
        duplicates and reaches both outcomes; on a definition that charges twice, its
        `assert` is never reached and the campaign fails the test."""
        refund = (SCENARIOS / "refund_escalation.yaml").read_text(encoding="utf-8")
        pytester.makefile(".yaml", workflow_refund=refund)
        pytester.makeini("[pytest]\nfsm_definitions = none_*.yaml\n")
        pytester.makepyfile(test_refund=README_EXAMPLE)
        result = pytester.runpytest()
        result.assert_outcomes(passed=1)
        naive = (SCENARIOS / "naive" / "triage_credit_twice.yaml").read_text(encoding="utf-8")
        pytester.makefile(".yaml", workflow_refund=naive)
        result = pytester.runpytest()
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines(["*_ test_refund_survives_crashes_and_duplicates _*",
                                     "violated no_duplicate_effect*"])


class TestNames:
    """A test's campaign is named by the test's id; a collected file's by the file."""

    def test_the_summary_and_the_report_name_a_campaign_by_its_test(
            self, pytester: pytest.Pytester) -> None:
        """Marker and fixture rows carry the test's id (a second campaign of one test `#2`);
        the collected file's items keep the file's name; the definition stays in the
        report."""
        pytester.makeini("[pytest]\nfsm_runs = 5\nfsm_depth = 2\n")
        tests = pytester.mkdir("tests")
        (tests / "workflow_pay.yaml").write_text(WORKFLOW, encoding="utf-8")
        (tests / "test_pay.py").write_text(textwrap.dedent("""
            import pytest

            @pytest.mark.fsm_fuzz("workflow_pay.yaml", runs=3)
            def test_refund():
                pass

            def test_twice(fsm_fuzz):
                assert fsm_fuzz("workflow_pay.yaml", runs=4).held
                two = "two runs name a campaign, they test no fault"
                assert fsm_fuzz("workflow_pay.yaml", runs=2,
                                untested={"crash_point:*": two, "fault:*": two}).held
        """), encoding="utf-8")
        result = pytester.runpytest("--fsm-report", "out")
        result.assert_outcomes(passed=5)
        result.stdout.fnmatch_lines([
            "  held     tests/test_pay.py::test_refund (fuzz): 3 runs*",
            "  held     tests/test_pay.py::test_twice (fuzz): 4 runs*",
            "  held     tests/test_pay.py::test_twice #2 (fuzz): 2 runs*",
            "  held     tests/workflow_pay.yaml (explore): *",
            "  held     tests/workflow_pay.yaml (fuzz): 5 runs*",
        ])
        doc = json.loads((pytester.path / "out" / "pytest.json").read_text())
        jsonschema.validate(doc, report_schema())
        assert [(t["name"], t["test"], t["definition"]["name"]) for t in doc["targets"]] == [
            ("tests/test_pay.py::test_refund", "tests/test_pay.py::test_refund", "planted"),
            ("tests/test_pay.py::test_twice", "tests/test_pay.py::test_twice", "planted"),
            ("tests/test_pay.py::test_twice #2", "tests/test_pay.py::test_twice", "planted"),
            ("tests/workflow_pay.yaml", "tests/workflow_pay.yaml::explore", "planted"),
            ("tests/workflow_pay.yaml", "tests/workflow_pay.yaml::fuzz", "planted")]
        markdown = (pytester.path / "out" / "pytest.md").read_text()
        assert "| tests/test\\_pay.py::test\\_refund | fuzz | yes |" in markdown

    def test_a_failing_campaign_is_named_by_its_test_and_a_parametrized_one_by_each_case(
            self, flows: pytest.Pytester) -> None:
        """Two cases of one parametrized test are two rows, each with its own id; the replay
        file keeps the definition's name, which is what `fsmharness replay` needs."""
        flows.makepyfile(test_pay_machines="""
            import pytest

            @pytest.mark.parametrize("machine", [None, "naive_machine:KeyPerAttempt"])
            def test_pay(fsm_fuzz, machine):
                assert fsm_fuzz("flow.yaml", machine=machine, runs=40).held
        """)
        result = flows.runpytest("--fsm-report", "out")
        result.assert_outcomes(passed=1, failed=1)
        result.stdout.fnmatch_lines([
            # `[[]` is fnmatch's literal `[`
            "  held     test_pay_machines.py::test_pay[[]None] (fuzz): 40 runs, *",
            "  VIOLATED test_pay_machines.py::test_pay[[]naive_machine:KeyPerAttempt] (fuzz): *",
        ])
        doc = json.loads((flows.path / "out" / "pytest.json").read_text())
        (broken,) = [t for t in doc["targets"] if not t["held"]]
        assert broken["name"] == "test_pay_machines.py::test_pay[naive_machine:KeyPerAttempt]"
        assert Path(broken["failures"][0]["replay_file"]).name.startswith(
            "planted-no_duplicate_effect-")


# --- the documentation's examples -----------------------------------------------------------

ROOT = Path(__file__).resolve().parents[3]


def _documented(page: str, test: str) -> str:
    """Gives the Python block the page says this test runs (`<!-- docs: run by ...::test -->`
    just above it): the page and the test cannot drift apart."""
    text = (ROOT / page).read_text(encoding="utf-8")
    marker = (f"<!-- docs: run by tests/harness/pytest_plugin/test_campaign_reports.py::{test} "
              "-->\n```")
    assert text.count(marker) == 1, f"{page} has no example run by {test}"
    block = text.split(marker, 1)[1].split("\n", 1)[1]
    return block.split("```", 1)[0]


def _tour_marker_test() -> str:
    """Gives the README tour's marker test (the one Python block of its tour)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    tour = readme.split("\n## A short tour\n", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", tour, flags=re.DOTALL)
    return block


README_EXAMPLE = _tour_marker_test()
DOCS_EXPECT = _documented("docs/pytest-plugin.md", "test_docs_expect")
DOCS_FIXTURE = _documented("docs/pytest-plugin.md", "test_docs_fixture")


@pytest.fixture
def docs_project(pytester: pytest.Pytester) -> pytest.Pytester:
    """The layout the documentation's examples assume: `tests/` holding the refund scenario
    as `workflow_refund.yaml` and the naive triage in `naive/`."""
    tests = pytester.mkdir("tests")
    (tests / "naive").mkdir()
    (tests / "workflow_refund.yaml").write_text(
        (SCENARIOS / "refund_escalation.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    (tests / "naive" / "triage_credit_twice.yaml").write_text(
        (SCENARIOS / "naive" / "triage_credit_twice.yaml").read_text(encoding="utf-8"),
        encoding="utf-8")
    return pytester


def test_docs_expect(docs_project: pytest.Pytester) -> None:
    """The documentation's `expect=` example passes as written, and its summary says the
    campaigns broke as expected."""
    (docs_project.path / "tests" / "test_naive.py").write_text(DOCS_EXPECT, encoding="utf-8")
    result = docs_project.runpytest("tests")
    result.assert_outcomes(passed=2 + 3)  # and workflow_refund.yaml's lint, fuzz, explore
    result.stdout.fnmatch_lines([
        "4 campaign(s): * 0 failing, 2 broke as expected",
        "  expected tests/test_naive.py::test_naive_triage_by_fixture (fuzz): broke "
        "no_duplicate_effect as expected; *",
        "  expected tests/test_naive.py::test_naive_triage_still_credits_twice (fuzz): broke "
        "no_duplicate_effect as expected; *",
    ])


def test_docs_fixture(docs_project: pytest.Pytester) -> None:
    """The documentation's `fsm_fuzz` examples pass as written."""
    (docs_project.path / "tests" / "test_refund.py").write_text(DOCS_FIXTURE,
                                                                encoding="utf-8")
    result = docs_project.runpytest("tests")
    result.assert_outcomes(passed=3 + 3)


def test_docs_names(docs_project: pytest.Pytester) -> None:
    """The documentation's summary, as the page shows it: each row named by its test."""
    (docs_project.path / "tests" / "test_refund.py").write_text(README_EXAMPLE,
                                                                encoding="utf-8")
    (docs_project.path / "tests" / "test_naive.py").write_text(DOCS_EXPECT, encoding="utf-8")
    result = docs_project.runpytest("tests", "--fsm-report", "reports")
    result.assert_outcomes(passed=3 + 3)
    result.stdout.fnmatch_lines([
        "*= fsmharness =*",
        "5 campaign(s): * of * invariants checked, * runs, * steps, * faults injected, 0 "
        "failing, 2 broke as expected",
        "  invariants checked: *",
        "  expected tests/test_naive.py::test_naive_triage_by_fixture (fuzz): *",
        "  expected tests/test_naive.py::test_naive_triage_still_credits_twice (fuzz): *",
        "  held     tests/test_refund.py::test_refund_survives_crashes_and_duplicates "
        "(fuzz): 50 runs, *",
        "  held     tests/workflow_refund.yaml (explore): held within bound 4 *",
        "  held     tests/workflow_refund.yaml (fuzz): 500 runs, *",
        "  faults injected: *",
        "  report: reports/pytest.html (and pytest.json, pytest.md)",
    ])
    # the report says the breaks were expected, as the session does (it passed)
    reports = docs_project.path / "reports"
    markdown = (reports / "pytest.md").read_text(encoding="utf-8")
    assert markdown.startswith("# fsmharness pytest: every invariant held but the breaks "
                               "expected\n")
    assert markdown.count(r"| no, as expected (no\_duplicate\_effect) |") == 1
    assert r"| no, as expected (no\_duplicate\_effect, retries\_within\_bounds) |" in markdown
    assert "**no**" not in markdown
    doc = json.loads((reports / "pytest.json").read_text(encoding="utf-8"))
    jsonschema.validate(doc, report_schema())
    assert sorted(t["expected"]["met"] for t in doc["targets"] if "expected" in t) == [True,
                                                                                     True]
    assert "expected to break" in (reports / "pytest.html").read_text(encoding="utf-8")
