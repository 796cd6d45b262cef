"""The public surface: exported names are pinned, and the examples of the README and the
documentation site (`docs/`) run as written."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import fault_injection
import harness
import reference_machine
from fault_injection import load_plan
from reference_machine import load_definition

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
#: the README and every page of the documentation site, one after the other
DOCS = "\n".join([README, *(page.read_text(encoding="utf-8")
                            for page in sorted((ROOT / "docs").rglob("*.md")))])


def fenced(language: str) -> list[str]:
    """Gives the fenced blocks of one language of the README and the site's pages."""
    return re.findall(rf"```{language}\n(.*?)```", DOCS, flags=re.DOTALL)


def example(holding: str) -> str:
    """Gives the one Python block of the README and the site that holds `holding` (picked by
    what it says, not by its place: a section added above moves no test onto another
    example)."""
    found = [block for block in fenced("python") if holding in block]
    assert len(found) == 1, f"{len(found)} documented Python blocks hold {holding!r}"
    return found[0]


class TestExports:
    def test_all_is_sorted_and_complete(self) -> None:
        """__all__ is sorted (constants, then classes, then functions), and every name exists."""
        names = reference_machine.__all__
        assert names == sorted(names, key=lambda n: (not n.isupper(), not n[0].isupper(), n))
        missing = [name for name in names if not hasattr(reference_machine, name)]
        assert missing == []

    def test_exported_names_are_pinned(self) -> None:
        """Adding or removing a public name is a deliberate change to this list."""
        assert set(reference_machine.__all__) == {
            "APPROVAL_DENIED", "APPROVAL_GRANTED", "BUILTIN_EVENTS", "COMPENSATION_FAILED",
            "COMPENSATION_SUCCEEDED", "STARTED", "STEP_FAILED", "STEP_SUCCEEDED", "TIMER_FIRED",
            "Accepted", "Budgets", "CancelTimer", "Category", "Command", "CompiledState",
            "CompiledStep", "CompiledTransition", "CompletedStep", "Decision", "DefinitionError",
            "DefinitionSyntaxError", "Event", "Execution", "Finding", "GuardError",
            "IgnoreReason", "Ignored", "PendingApproval", "PendingEffect",
            "ReferenceMachineError", "RejectReason", "Rejected", "RequestApproval",
            "RunCompensation", "RunEffect", "ScheduleTimer", "Severity", "Source", "Status",
            "Timer", "TimerPurpose", "Transition", "VisitCounts", "WorkflowDefinition",
            "WorkflowSpec",
            "Commit", "ConflictError", "DuplicateEventError", "EventStore", "History",
            "ExecutionExistsError", "LogEntry", "MemoryStore", "OutboxEntry", "SQLiteStore",
            "PostgresStore",
            "StoredExecution", "StoreError", "TransitionRecord", "UnknownExecutionError",
            "CRASH_POINTS", "EngineError", "Failure", "Registry", "ReplayMismatchError",
            "Runtime", "Success", "Tool", "ToolOutcome", "UnknownDefinitionError",
            "action_hash", "check_spec", "compile_definition", "decide", "lint",
            "Acknowledged", "LintReport", "lint_report",
            "load_definition", "load_spec", "new_execution", "parse_duration_ms",
            "register_function", "registered_functions", "start_event", "EVENTLESS_MAX",
            "pending_approval", "pending_effect", "UNTESTED_KINDS", "step_action_hash",
            "RESERVED_PREFIXES", "reachable_from", "DurationMs", "Synchronous",
        }

    @pytest.mark.parametrize("package", [harness, fault_injection])
    def test_other_packages_sort_all(self, package: object) -> None:
        """harness and fault_injection sort __all__ alike, and every name exists."""
        names = package.__all__  # type: ignore[attr-defined]
        assert names == sorted(names, key=lambda n: (not n.isupper(), not n[0].isupper(), n))
        assert [name for name in names if not hasattr(package, name)] == []

    def test_harness_names_are_pinned(self) -> None:
        """The harness's public names are a deliberate list."""
        assert set(harness.__all__) == {
            "Applied", "ApprovalWait", "Call", "Committed", "Crashed", "Decided", "Delivered",
            "Dispatched", "EffectLedger", "FaultInjected", "Finished", "HarnessError",
            "HistoryRecord", "LedgerEntry", "MachineFactory", "MachineFailed",
            "MachineUnderTest", "Observation", "Probe", "Recovered", "ReferenceMachine",
            "ResultRecorded", "RunStarted", "SimOptions", "SimulationResult", "Simulator",
            "Started", "TimerFired", "ToolWorld", "simulate",
            # histories: what was seen, healed and replayed
            "Commanded", "Healed", "Observed", "Replayed",
            # the protocol's async form
            "AsyncMachineUnderTest",
            # invariants
            "INVARIANTS", "Invariant", "StepView", "Violation", "check", "invariant",
            # the scores guided fuzzing climbs
            "target",
            # choices, and the engines that make them
            "Choice", "Choices", "RecordingChoices", "ScriptedChoices",
            "Coverage", "coverage_of", "FuzzFailure", "FuzzOptions", "FuzzReport", "fuzz",
            "Counterexample", "shrink", "describe_steps", "ExploreOptions", "ExploreReport",
            "explore", "ReplayError", "ReplayOutcome", "definition_digest", "replay",
            "write_replay",
            # what a campaign exercised, and what it left untested
            "Adequacy", "Gap",
        }

    def test_fault_injection_names_are_pinned(self) -> None:
        """The fault catalogue's public names are a deliberate list."""
        assert set(fault_injection.__all__) == {
            "DESCRIPTIONS", "FORGED_VARIANTS", "MALFORMED_VARIANTS", "STORE_WRITE",
            "TOOL_FAULTS", "FaultInjectionError", "FaultKind", "FaultPlan", "FaultPlanError",
            "FaultRate", "ProbedStore", "SimulatedCrash", "StoreWriteError", "default_plan",
            "load_plan", "no_faults",
        }

    def test_errors_subclass_the_builtins_callers_expect(self) -> None:
        """A DefinitionError is a ValueError, so generic callers can catch it."""
        assert issubclass(reference_machine.DefinitionError, ValueError)
        assert issubclass(reference_machine.DefinitionSyntaxError,
                          reference_machine.DefinitionError)


class TestDocumentedExamples:
    def test_first_section_gives_two_commands(self) -> None:
        """The first section holds exactly two commands: install and run, then test."""
        first = README.split("\n## ", 2)[1]
        commands = re.findall(r"```bash\n(.*?)```", first, flags=re.DOTALL)
        assert len(commands) == 2
        assert "pip install -e . &&" in commands[0]  # the light core: no extra to fuzz
        assert commands[0].strip().endswith("&& fsmharness fuzz scenarios/")
        assert commands[1].strip() == "pip install -e '.[dev]' && python -m pytest"

    def test_ci_runs_the_readme_test_command(self) -> None:
        """.ci/run calls the README's test command."""
        assert "python -m pytest" in (ROOT / ".ci" / "run").read_text()

    def test_yaml_example_loads(self) -> None:
        """The documented refund definition loads clean."""
        (example,) = [block for block in fenced("yaml") if "name: refund_escalation" in block]
        definition = load_definition(example)
        assert definition.name == "refund_escalation"
        assert definition.warnings == ()

    def test_python_example_runs(self, tmp_path: Path) -> None:
        """The documented Python example runs as written and reaches the planning step."""
        code = example("decision = decide(definition, execution, start_event(\"run-1\"), now=0)")
        script = tmp_path / "example.py"
        script.write_text(code + "\nassert decision.execution.state == 'planning', decision\n")
        result = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True,
                                text=True, check=False)
        assert result.returncode == 0, result.stderr

    def test_runtime_example_runs(self, tmp_path: Path) -> None:
        """The documented runtime example runs as written, up to the supervisor's approval."""
        code = example("from reference_machine import Runtime, SQLiteStore")
        script = tmp_path / "runtime_example.py"
        script.write_text(code.replace('"scenarios/', f'"{ROOT}/scenarios/') + "\nassert "
                          "runtime.store.load('run-1').execution.state == 'awaiting_approval'\n")
        result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                                text=True, check=False)
        assert result.returncode == 0, result.stderr

    def test_postgres_example_runs(self, tmp_path: Path, postgres_dsn: str) -> None:
        """The documented PostgreSQL example runs after the runtime example, on a real server."""
        import uuid

        import psycopg

        schema = f"readme_{uuid.uuid4().hex[:12]}"
        code = (example("from reference_machine import Runtime, SQLiteStore") + "\n"
                + example("from reference_machine import PostgresStore, Runtime"))
        code = code.replace('"postgresql://app@db.internal/agents", schema="fsmharness"',
                            f"{postgres_dsn!r}, schema={schema!r}")
        script = tmp_path / "postgres_example.py"
        script.write_text(code.replace('"scenarios/', f'"{ROOT}/scenarios/') + "\nassert "
                          "store.load('run-2').execution.state == 'awaiting_approval'\n")
        result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                                text=True, check=False)
        with psycopg.connect(postgres_dsn, autocommit=True) as db:
            db.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        assert result.returncode == 0, result.stderr

    def test_fault_plan_example_loads(self, tmp_path: Path) -> None:
        """The documented fault plan loads as written."""
        plan_file = tmp_path / "plan.yaml"
        (example,) = [block for block in fenced("yaml") if "duplicate_event" in block]
        plan_file.write_text(example, encoding="utf-8")
        plan = load_plan(plan_file)
        assert plan.rate("duplicate_event") == 0.1
        assert plan.get("slow_tool").latency_ms == 120_000  # type: ignore[union-attr]

    @pytest.mark.parametrize("holding", ["plan = load_plan({", '"name": "doorbell"'],
                             ids=["simulation", "own-machine"])
    def test_simulation_examples_run(self, tmp_path: Path, holding: str) -> None:
        """The documented simulation examples run as written and end with every run final."""
        code = example(holding)
        script = tmp_path / "simulation_example.py"
        script.write_text(code.replace('"scenarios/', f'"{ROOT}/scenarios/')
                          + "\nassert result.ok and result.status == 'final', result.status\n")
        result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                                text=True, check=False)
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("final")

    def run_example(self, holding: str, folder: Path, suffix: str = "") -> str:
        """Runs the documented Python block that holds `holding` in `folder`, with the project's
        paths made absolute; gives what it printed."""
        code = example(holding)
        for relative in ('"scenarios/', '"tests/support"'):
            code = code.replace(relative, f'"{ROOT}/{relative[1:]}')
        script = folder / "example.py"
        script.write_text(code + suffix)
        result = subprocess.run([sys.executable, str(script)], cwd=folder, capture_output=True,
                                text=True, check=False)
        assert result.returncode == 0, result.stderr
        return result.stdout

    def test_invariant_example_runs(self, tmp_path: Path) -> None:
        """The user-invariant example registers it and finds every invariant held."""
        out = self.run_example('@invariant(name="one_refund_per_order")', tmp_path,
                               "\nassert 'one_refund_per_order' in "
                               "__import__('harness').INVARIANTS\n")
        assert out == "[]\n"

    def test_fuzz_example_finds_shrinks_and_replays(self, tmp_path: Path) -> None:
        """The fuzz example finds the planted bug, prints its trace and replays its file."""
        out = self.run_example('PLANTED["key_per_attempt"]', tmp_path).splitlines()
        assert out[0] == "no_duplicate_effect" and out[-1] == "True"
        assert out[1].startswith("step 1 (t=0s): start x1") and len(out) - 2 <= 12
        assert list((tmp_path / "reports" / "replays").glob("planted-*.json"))

    def test_hypothesis_example_is_a_test_case(self, tmp_path: Path) -> None:
        """The Hypothesis example gives a TestCase that runs and passes."""
        self.run_example("workflow_machine(load_definition(", tmp_path,
                         "\nimport unittest\nresult = unittest.TextTestRunner("
                         "verbosity=0).run(unittest.defaultTestLoader."
                         "loadTestsFromTestCase(TestRefund))\n"
                         "assert result.wasSuccessful() and result.testsRun == 1\n")

    def test_explore_example_proves_a_bound(self, tmp_path: Path) -> None:
        """The exhaustive search example prints its verdict."""
        out = self.run_example("explore(WORKFLOW, ExploreOptions(", tmp_path)
        assert out.startswith("held within bound 4 (") and out.endswith(" distinct states)\n")


class TestTour:
    def test_the_tour_runs_as_written(self, tmp_path: Path) -> None:
        """Every command of the README's tour runs, in order, in a user's folder holding the
        scenarios, the tour's marker test and the Doorbell example, and exits 0."""
        tour = README.split("\n## A short tour\n", 1)[1].split("\n## ", 1)[0]
        commands = re.findall(r"```bash\n(.*?)```", tour, flags=re.DOTALL)
        (marker_test,) = re.findall(r"```python\n(.*?)```", tour, flags=re.DOTALL)
        shutil.copytree(ROOT / "scenarios", tmp_path / "scenarios")
        (doorbell,) = [block for block in fenced("python") if "class Doorbell" in block]
        (tmp_path / "doorbell.py").write_text(doorbell)
        (orders,) = [block for block in fenced("python") if "transitions_target(" in block]
        (tmp_path / "orders.py").write_text(orders)
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
        env.pop("PYTHONPATH", None)
        for index, block in enumerate(commands):
            if index == 1:  # the plugin's step: the marker test goes beside the definition
                block += "\ncat > demo/test_refund.py <<'EOF'\n" + marker_test + "EOF\n" \
                         "python -m pytest demo --fsm-runs 50 -p no:cacheprovider"
            done = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=tmp_path,
                                  env=env, capture_output=True, text=True, check=False,
                                  timeout=600)
            assert done.returncode == 0, f"{block}\n{done.stdout[-3000:]}\n{done.stderr}"
            if index == 0:
                fuzzed = len(list((ROOT / "scenarios").glob("*.yaml")))
                assert done.stdout.count("held  scenarios/") == fuzzed + 1  # and one explored
                assert done.stdout.rstrip().endswith("[*]")  # the diagram's last line
            if index == 1:
                assert "4 passed" in done.stdout and "= fsmharness =" in done.stdout
                assert (tmp_path / "demo" / "reports" / "pytest.html").is_file()
            if index == 2:
                assert done.stdout.startswith("held  doorbell:Doorbell: 200 runs")
            if index == 3:  # the adapter's naive card service is caught, and named
                assert done.stdout.startswith("FAIL  orders:target: ")
                assert "violated no_duplicate_effect" in done.stdout
                assert "replay: fsmharness replay orders-reports/replays/" in done.stdout
        assert (tmp_path / "report.schema.json").read_text().startswith("{")
        assert (tmp_path / "reports" / "fuzz.md").read_text().startswith("# fsmharness fuzz")
