"""The engines beside `fuzz`: shrinking, replay files, exhaustive search and the Hypothesis
machine, on what they promise beyond finding the planted bugs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test
from planted import PLANTED, WORKFLOW

from fault_injection import default_plan, load_plan
from harness import (
    ExploreOptions,
    FuzzOptions,
    HarnessError,
    ReferenceMachine,
    ReplayError,
    SimOptions,
    Simulator,
    definition_digest,
    explore,
    fuzz,
    replay,
    shrink,
    write_replay,
)
from harness.engines.exhaustive import _Exploring
from harness.engines.judge import campaign_sim_options
from harness.engines.replay import checksum_of
from harness.sim.history import dump_line
from harness.sim.world import fault_tables
from harness.stateful import workflow_machine
from reference_machine import load_definition

ROOT = Path(__file__).resolve().parents[3]


class TestShrink:
    def test_shrinking_is_deterministic(self) -> None:
        """The same failing seed shrinks to the same schedule every time."""
        machine, rule = PLANTED["late_timer_applied"]
        options = campaign_sim_options(WORKFLOW, FuzzOptions())
        campaign = fuzz(WORKFLOW, FuzzOptions(runs=200, replay_dir=None, shrink=False),
                        machine=machine)
        seed = next(f.seed for f in campaign.failures if f.rule == rule)
        first = shrink(WORKFLOW, seed, options, rule, machine=machine)
        again = shrink(WORKFLOW, seed, options, rule, machine=machine)
        assert first.choices == again.choices and dict(first.actions) == dict(again.actions)
        assert first.trace() == again.trace() and first.steps < first.original_steps

    def test_a_run_past_its_deadline_ends_out_of_time(self) -> None:
        """A run whose deadline passed starts no step: `out_of_time`, which is no verdict."""
        result = Simulator(WORKFLOW, SimOptions(seed=1)).run(deadline=time.monotonic() - 1)
        assert result.status == "out_of_time" and result.failure is None
        assert result.steps == 0

    def test_a_spent_budget_keeps_the_failing_run_whole(self) -> None:
        """With no time left, every attempt is cut short and none is taken for a smaller
        counterexample: the failing run itself is given back, whole, and it replays."""
        machine, rule = PLANTED["late_timer_applied"]
        options = campaign_sim_options(WORKFLOW, FuzzOptions())
        campaign = fuzz(WORKFLOW, FuzzOptions(runs=200, replay_dir=None, shrink=False),
                        machine=machine)
        seed = next(f.seed for f in campaign.failures if f.rule == rule)
        spent = shrink(WORKFLOW, seed, options, rule, machine=machine, time_budget_s=0)
        assert spent.steps == spent.original_steps and spent.violation.rule == rule

    def test_a_seed_that_breaks_nothing_cannot_be_shrunk(self) -> None:
        """Shrinking a run that does not break the rule says the machine is not deterministic
        (the only way a failure seen once is not seen again)."""
        options = campaign_sim_options(WORKFLOW, FuzzOptions())
        with pytest.raises(HarnessError, match=r"seed 0 broke 'machine_ok' once but not when "
                                               r"run again"):
            shrink(WORKFLOW, 0, options, "machine_ok")


@pytest.fixture(scope="module")
def example() -> object:
    """Gives a shrunk counterexample of the unbounded-retry bug."""
    machine, _ = PLANTED["unbounded_retry"]
    report = fuzz(WORKFLOW, FuzzOptions(runs=200, replay_dir=None), machine=machine)
    return report.failures[0].counterexample


class TestReplayFiles:
    def test_a_replay_gives_the_same_run_up_to_the_violation(self, example: object,
                                                             tmp_path: Path) -> None:
        """The replayed history is the shrunk one, record for record, to the violation."""
        path = write_replay(example, tmp_path)  # type: ignore[arg-type]
        outcome = replay(path)
        step = example.violation.step  # type: ignore[attr-defined]
        assert outcome.reproduced and outcome.violation == example.violation  # type: ignore[attr-defined]
        mine = [dump_line(r) for r in example.result.history if r.step <= step]  # type: ignore[attr-defined]
        theirs = [dump_line(r) for r in outcome.result.history if r.step <= step]
        assert mine == theirs

    def test_the_file_is_small_and_says_how_to_replay_it(self, example: object,
                                                          tmp_path: Path) -> None:
        """The schedule keeps only what is not a default; the file names its command."""
        path = write_replay(example, tmp_path)  # type: ignore[arg-type]
        data = json.loads(path.read_text())
        assert path.stat().st_size < 8_000
        assert data["definition"]["digest"] == definition_digest(WORKFLOW)
        assert data["replay"] == f"fsmharness replay {path}"
        assert data["trace"] == example.trace()  # type: ignore[attr-defined]
        assert not list(tmp_path.glob(".*partial"))

    def test_a_definition_given_must_be_the_one_recorded(self, example: object,
                                                         tmp_path: Path) -> None:
        """Passing another definition than the file's is refused, naming both digests."""
        path = write_replay(example, tmp_path)  # type: ignore[arg-type]
        other = load_definition(ROOT / "scenarios" / "refund_escalation.yaml")
        with pytest.raises(ReplayError, match=r"definition 'refund_escalation' changed since"):
            replay(path, definition=other)

    def test_a_definition_from_python_must_be_given(self, tmp_path: Path) -> None:
        """A definition that was no file (a dict) cannot be found again: say to pass it."""
        definition = load_definition(json.loads(json.dumps(_spec_of(WORKFLOW))))
        machine, _ = PLANTED["dispatch_before_commit"]
        report = fuzz(definition, FuzzOptions(runs=5, replay_dir=tmp_path), machine=machine)
        path = report.failures[0].replay_file
        assert path is not None
        with pytest.raises(ReplayError, match=r"loaded from '<dict>', which is not a file here; "
                                              r"pass it with definition="):
            replay(path)
        assert replay(path, definition=definition).reproduced

    def test_options_in_a_file_are_checked_as_options(self, example: object,
                                                      tmp_path: Path) -> None:
        """An option the simulator does not know, or a bad value, names itself (the file's
        checksum made again, as one who knows the format would)."""
        path = write_replay(example, tmp_path)  # type: ignore[arg-type]
        data = json.loads(path.read_text())
        data["options"]["colour"] = "blue"
        path.write_text(json.dumps({**data, "checksum": checksum_of(data)}))
        with pytest.raises(ReplayError, match=r"options\.colour: not an option"):
            replay(path)
        del data["options"]["colour"]
        data["options"]["executions"] = 0
        path.write_text(json.dumps({**data, "checksum": checksum_of(data)}))
        with pytest.raises(ReplayError, match=r"options\.executions: expected a whole number"):
            replay(path)

    def test_an_unwritable_folder_is_a_clear_error(self, example: object,
                                                  tmp_path: Path) -> None:
        """A replay folder that is a file cannot be made."""
        blocker = tmp_path / "file"
        blocker.write_text("")
        with pytest.raises(HarnessError, match=r"cannot make the replay folder"):
            write_replay(example, blocker / "replays")  # type: ignore[arg-type]


def _spec_of(definition: object) -> dict[str, object]:
    return definition.spec.model_dump(mode="json", exclude_defaults=True)  # type: ignore[attr-defined]


class TestExplore:
    def test_the_count_of_distinct_states_is_the_same_in_any_process(self) -> None:
        """State hashing does not depend on PYTHONHASHSEED."""
        code = ("import sys; sys.path.insert(0, 'tests/support'); from planted import WORKFLOW;"
                "from harness import explore, ExploreOptions;"
                "r = explore(WORKFLOW, ExploreOptions(depth=4)); print(r.states, r.runs)")
        counts = {subprocess.run([sys.executable, "-c", code], cwd=ROOT, text=True,
                                 capture_output=True, check=True,
                                 env={**os.environ, "PYTHONHASHSEED": seed}).stdout
                  for seed in ("0", "4242")}
        report = explore(WORKFLOW, ExploreOptions(depth=4))
        assert counts == {f"{report.states} {report.runs}\n"}

    def test_more_faults_or_depth_find_more_states(self) -> None:
        """The bound is what is explored: raising it explores more."""
        small = explore(WORKFLOW, ExploreOptions(depth=3, faults_max=0))
        deeper = explore(WORKFLOW, ExploreOptions(depth=4, faults_max=0))
        faulty = explore(WORKFLOW, ExploreOptions(depth=3, faults_max=1))
        assert small.states < deeper.states and small.states < faulty.states
        assert small.held and small.complete

    def test_a_search_cut_short_says_the_bound_was_not_covered(self) -> None:
        """Past `states_max` the verdict is only as far as explored."""
        report = explore(WORKFLOW, ExploreOptions(depth=8, states_max=50))
        assert report.held and not report.complete
        assert "not covered, stopped at 50 distinct states" in report.summary()

    def test_no_watchdog_timer_is_left_ticking_after_a_search(self) -> None:
        """Each run the search plays is closed: its watchdog's timer stops with the search (a
        tick landing while Python shuts down killed a pytest session with SIGALRM)."""
        import signal
        import threading

        if threading.current_thread() is not threading.main_thread():
            pytest.skip("the watchdog runs in the main thread only")
        held = explore(WORKFLOW, ExploreOptions(depth=3, step_timeout_s=10))
        assert held.held
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
        machine, _ = PLANTED["final_accepts_events"]
        broken = explore(WORKFLOW, ExploreOptions(depth=6, step_timeout_s=10),  # stops at it
                         machine=machine)
        assert not broken.held
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)

    def test_bad_options_are_refused(self) -> None:
        """A bound of no steps explores nothing: refused."""
        with pytest.raises(HarnessError, match=r"options\.depth: expected a whole number of at "
                                               r"least 1, got 0"):
            ExploreOptions(depth=0)


class TestHypothesisMachine:
    def test_it_is_a_test_case_with_the_users_settings(self) -> None:
        """`TestCase` runs it under unittest or pytest; `settings=` are applied as given."""
        machine = workflow_machine(WORKFLOW, settings=settings(max_examples=3,
                                                               stateful_step_count=5,
                                                               database=None))
        assert machine.__name__ == "PlantedMachine"
        assert machine.TestCase.settings.max_examples == 3
        run_state_machine_as_test(machine, settings=settings(
            max_examples=5, stateful_step_count=5, database=None, deadline=None,
            suppress_health_check=list(HealthCheck)))

    def test_a_swarm_plan_is_refused(self) -> None:
        """Rules choose the faults: a plan drawing them itself makes no sense here."""
        with pytest.raises(HarnessError, match=r"injects the faults its rules arm"):
            workflow_machine(WORKFLOW, plan=default_plan(swarm=True))

    def test_rules_aim_each_kind_of_fault(self) -> None:
        """Every crash point and every variant of a fault can be chosen by a rule."""
        from harness.engines.stateful import _fault_menu
        menu = _fault_menu(default_plan(), PLANTED["key_per_attempt"][0].crash_points)
        assert "crash:after_commit_before_dispatch" in menu.crash
        assert "forged_approval:wrong_source" in menu.delivery
        assert "wrong_correlation" in menu.delivery
        assert "malformed_output:wrong_shape" in menu.tool
        assert menu.clock == ("timer_skew",)
        assert set(menu.other) == {"store_write_failure", "second_worker"}

    def test_apart_or_here_it_finds_the_same_failure(self, tmp_path: Path) -> None:
        """The run held in a child process (the default) or in this one: the same examples,
        the same violation, the same replay file."""
        from harness.stateful import InvariantViolated

        machine, _ = PLANTED["key_per_attempt"]
        found = []
        for isolate in (True, False):
            folder = tmp_path / str(isolate)
            tested = workflow_machine(WORKFLOW, machine=machine, isolate=isolate,
                                      replay_dir=folder)
            with pytest.raises(InvariantViolated) as caught:
                run_state_machine_as_test(tested, settings=settings(
                    max_examples=200, stateful_step_count=20, database=None, deadline=None,
                    derandomize=True, suppress_health_check=list(HealthCheck)))
            assert caught.value.replay_file is not None
            found.append((str(caught.value.violations[0]),
                          caught.value.replay_file.read_text(encoding="utf-8").replace(
                              str(folder), "<folder>")))
        assert found[0] == found[1]

    def test_in_a_daemonic_process_it_runs_there(self) -> None:
        """A pool's worker or a harness child may have no children: the examples run in that
        process rather than each failing."""
        from harness.engines import isolation

        def work() -> str:
            run_state_machine_as_test(workflow_machine(WORKFLOW), settings=settings(
                max_examples=3, stateful_step_count=5, database=None, deadline=None,
                suppress_health_check=list(HealthCheck)))
            return "held"

        assert isolation.call(work) == "held"

    def test_isolate_must_be_a_truth_value(self) -> None:
        with pytest.raises(HarnessError, match=r"isolate: expected true or false, got 'no'"):
            workflow_machine(WORKFLOW, isolate="no")  # type: ignore[arg-type]

    def test_options_shape_its_runs(self) -> None:
        """Executions and the liveness phase come from `options`."""
        machine = workflow_machine(WORKFLOW, options=SimOptions(executions=2, liveness_steps=0))
        run_state_machine_as_test(machine, settings=settings(
            max_examples=5, stateful_step_count=5, database=None, deadline=None,
            suppress_health_check=list(HealthCheck)))


class WipingStart(ReferenceMachine):
    """A machine whose start, sent again after a crash, throws away the run it started."""

    def start(self, execution_id: str, context: Any, now: int) -> str | None:
        self.store.inner._runs.pop(execution_id, None)  # type: ignore[attr-defined]
        return super().start(execution_id, context, now)


def test_a_start_that_crashed_after_its_commit_is_a_state_of_its_own() -> None:
    """Exhaustive search tells a run the store holds but the simulator has not seen from no run
    at all, so it finds the wiping start (it said "held" before)."""
    plan = load_plan({"faults": {"crash": {"rate": 1.0}}})
    report = explore(WORKFLOW, ExploreOptions(depth=3, faults_max=1, plan=plan),
                     machine=WipingStart)
    assert not report.held and report.counterexample is not None
    assert report.counterexample.violation.rule == "legal_transitions"


def test_a_tool_fault_rates_leave_no_room_for_is_never_tried() -> None:
    """With rates adding past 1 a later kind cannot happen natively: exploration does not
    offer it, so each counterexample it gives replays."""
    saga = load_definition(ROOT / "tests" / "data" / "workflows" / "saga.yaml")
    plan = load_plan({"faults": {"tool_transient": 1.0, "tool_permanent": 1.0}})
    table = fault_tables(plan, saga)["bank.debit"]
    offered = {_Exploring([option], 1).pick("tool:bank.debit", table) for option in range(3)}
    assert offered == {None, "tool_transient"}
    report = explore(saga, ExploreOptions(depth=3, plan=plan, invariants=("machine_ok",)))
    assert report.held


def test_a_hypothesis_failure_to_build_is_reported_as_one(tmp_path: Path) -> None:
    """A machine that cannot be built fails the Hypothesis run with machine_ok, even when
    only other invariants are checked (it raised IndexError before)."""
    import pytest
    from hypothesis import HealthCheck, settings
    from hypothesis.stateful import run_state_machine_as_test

    from harness.stateful import InvariantViolated, workflow_machine

    def broken(*args: Any) -> Any:
        raise RuntimeError("cannot build")

    machine = workflow_machine(WORKFLOW, machine=broken, only=["no_duplicate_effect"])
    with pytest.raises(InvariantViolated, match=r"machine_ok\b.*cannot build"):
        run_state_machine_as_test(machine, settings=settings(
            max_examples=3, database=None, suppress_health_check=list(HealthCheck)))


def test_a_replay_of_an_explored_counterexample_reproduces(tmp_path: Path) -> None:
    """What exhaustive search finds replays from its file, as the fuzzer's does."""
    import sys
    sys.path.insert(0, str(ROOT / "tests" / "support"))
    from planted import PLANTED
    machine, rule = PLANTED["late_timer_applied"]
    report = explore(WORKFLOW, ExploreOptions(depth=5), machine=machine)
    assert report.counterexample is not None
    path = write_replay(report.counterexample, tmp_path)
    outcome = replay(path)
    assert outcome.reproduced and outcome.violation is not None
    assert outcome.violation.rule == rule
