"""Every verdict true (issue 15): each test builds a machine or definition of its own, shows the
case that used to give a false verdict, and checks the true one."""

from __future__ import annotations

import json
import os
import random
import shlex
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from charge_checks import charged_twice
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test
from planted import PLANTED
from planted import WORKFLOW as PLANTED_WORKFLOW
from running import cli, one_error_line
from transitions import Machine

from fault_injection import FaultKind, FaultPlan, FaultRate, load_plan, no_faults
from harness import (
    INVARIANTS,
    Applied,
    Committed,
    Delivered,
    ExploreOptions,
    Finished,
    FuzzOptions,
    HistoryRecord,
    ReferenceMachine,
    SimOptions,
    Simulator,
    ToolWorld,
    check,
    describe_steps,
    explore,
    fuzz,
    invariant,
    replay,
)
from harness.adapters import transitions_target
from harness.checks.determinism import difference
from harness.engines.judge import campaign_sim_options
from harness.errors import HarnessError
from harness.sim.choices import Choices
from harness.sim.simulator import plan_for
from harness.sim.world import Clock
from harness.stateful import InvariantViolated, workflow_machine
from reference_machine import DefinitionError, Failure, load_definition
from scenarios import bundled

ROOT = Path(__file__).resolve().parents[3]
SUPPORT = str(ROOT / "tests" / "support")

# -- 1. a service that honours keys never takes back an effect it applied -----------------------

REFUND = load_definition({
    "name": "refund_once", "version": "1",
    "tools": {"pay.refund": {"idempotency_keys": True}},
    "states": {
        "refunding": {"initial": True,
                      "step": {"tool": "pay.refund", "input": {"order": "o-1"},
                               "retry": {"attempts_max": 12, "delay_initial": "1s"}},
                      "on": {"step.succeeded": "refunded", "step.failed": "failed"}},
        "refunded": {"type": "final", "outcome": "success"},
        "failed": {"type": "final", "outcome": "failure"},
    },
})


def refunded_yet_failed(history: Sequence[HistoryRecord]) -> list[str]:
    """Gives the executions that ended `failed` although their refund took effect."""
    refunded = {r.execution for r in history if type(r) is Applied}
    return sorted(r.execution for r in history
                  if type(r) is Finished and r.state == "failed" and r.execution in refunded)


class TestAnAppliedKeyKeepsItsAnswer:
    def test_a_correct_machine_never_ends_failed_with_its_refund_made(self) -> None:
        """A timeout after apply, then a retry under the same key: the service answers the
        retry with its first answer, never `permanent` or a malformed output, so the
        reference machine (retrying timeouts) ends refunded whenever its refund applied."""
        plan = load_plan({"faults": {"tool_timeout_after_apply": 0.3, "tool_permanent": 0.3}})
        simulator = Simulator(REFUND, SimOptions(plan=plan, executions=1))
        retried = 0
        for seed in range(200):
            history = simulator.run(seed).history
            assert refunded_yet_failed(history) == [], f"seed {seed}"
            retried += sum(1 for r in history if type(r) is Applied) > 0 and any(
                getattr(r, "fault", None) == FaultKind.TOOL_TIMEOUT_AFTER_APPLY for r in history)
        assert retried > 20  # the case arose: a timed-out refund retried under its key

    @pytest.mark.parametrize("seed", [7, 8, 9, 10])
    @pytest.mark.parametrize("kind", [FaultKind.TOOL_PERMANENT, FaultKind.MALFORMED_OUTPUT])
    def test_the_service_answers_a_key_as_it_first_did(self, kind: FaultKind, seed: int
                                                       ) -> None:
        """At the world: a fault that is the service's own answer strikes a key's first call
        at most. Once the key applied, its first answer comes back; once refused, the refusal
        does (and nothing applies)."""
        answers, applied = _calls(kind, "x1/refunding/1", seed)
        if isinstance(answers[0], Failure):  # refused: refused for good
            assert kind is FaultKind.TOOL_PERMANENT
            assert all(isinstance(a, Failure) and a.category == "permanent" for a in answers)
            assert applied[-1] == 0
            return
        assert applied[0] == 1 and applied[-1] == 1
        assert all(answer == answers[0] for answer in answers)

    @pytest.mark.parametrize("kind", [FaultKind.TOOL_TRANSIENT, FaultKind.TOOL_RATE_LIMITED,
                                      FaultKind.TOOL_TIMEOUT_BEFORE_APPLY,
                                      FaultKind.TOOL_TIMEOUT_AFTER_APPLY])
    def test_faults_before_or_after_the_service_still_strike_a_retry(self, kind: FaultKind
                                                                     ) -> None:
        """The network between caller and service fails a retry as it fails a first call."""
        answers, applied = _calls(kind, "x1/refunding/1")
        first = applied.index(1)
        assert any(isinstance(answer, Failure) for answer in answers[first + 1:])
        assert applied[-1] == 1


def _calls(kind: FaultKind, key: str, seed: int = 7) -> tuple[list[Any], list[int]]:
    """Calls the refund 40 times under one key, the fault at rate 0.5; gives each answer and
    how many effects the ledger held after it."""
    world = ToolWorld(REFUND, FaultPlan((FaultRate(kind, 0.5),)), Choices(seed), Clock(),
                      lambda record: None, seed=seed)
    answers, applied = [], []
    for _ in range(40):
        answers.append(world.tools["pay.refund"]({"order": "o-1"}, key))
        applied.append(len(world.ledger))
    return answers, applied


# -- 2. an event the sender sends once is not sent again under a new id ----------------------

def account(sends_max: int | None) -> Any:
    """An account whose opening deposit settles once (`deposit.settled`); each settlement is
    credited. Correct as long as the bank sends the settlement once, as banks do."""
    deposit: dict[str, Any] = {"sources": ["system"]}
    if sends_max is not None:
        deposit["sends_max"] = sends_max
    return load_definition({
        "name": "account", "version": "1",
        "tools": {"bank.credit": {"idempotency_keys": True}},
        "events": {"deposit.settled": deposit, "close": {"sources": ["human"]}},
        "states": {
            "open": {"initial": True, "type": "wait",
                     "after": {"delay": "30d", "target": "closed"},
                     "on": {"deposit.settled": "crediting", "close": "closed"}},
            "crediting": {"step": {"tool": "bank.credit", "input": {"account": "a-1"}},
                          "on": {"step.succeeded": "open", "step.failed": "open"}},
            "closed": {"type": "final", "outcome": "success"},
        },
    })


def settlements(history: Sequence[HistoryRecord]) -> dict[str, int]:
    """Gives how many distinct settlements the scheduler sent each execution."""
    sent: dict[str, int] = {}
    for record in history:
        if type(record) is Delivered and record.via == "external" and (
                record.type == "deposit.settled"):
            sent[record.execution] = sent.get(record.execution, 0) + 1
    return sent


class TestBoundedSends:
    def test_a_one_shot_settlement_is_sent_once_and_the_correct_machine_holds(self) -> None:
        """Unbounded, the scheduler sends a second settlement under a new id and the account
        is blamed for crediting twice; `sends_max: 1` says the bank sends it once."""
        plan = no_faults()
        unbounded = fuzz(account(None), FuzzOptions(runs=40, sim=SimOptions(plan=plan)))
        assert not unbounded.held  # what a scheduler with no bound makes of a correct machine
        assert {f.rule for f in unbounded.failures} == {"no_duplicate_effect"}
        once = account(1)
        report = fuzz(once, FuzzOptions(runs=40, sim=SimOptions(plan=plan)))
        assert report.held, [str(f.violations[0]) for f in report.failures]
        simulator = Simulator(once, SimOptions(plan=plan))
        counts = [settlements(simulator.run(seed).history) for seed in range(40)]
        assert all(n == 1 for sent in counts for n in sent.values())
        assert sum(len(sent) for sent in counts) > 20  # the settlement did come, in most runs

    def test_a_repeatable_event_comes_at_most_its_bound(self) -> None:
        """`sends_max: 3` lets the sender send it up to three times, no more."""
        simulator = Simulator(account(3), SimOptions(plan=no_faults()))
        most = max(n for seed in range(40)
                   for n in settlements(simulator.run(seed).history).values())
        assert most == 3

    def test_faults_still_copy_a_one_shot_event(self) -> None:
        """A duplicate of a one-shot event is a fault on top of the bound: it still comes."""
        plan = load_plan({"faults": {"duplicate_event": 1.0}})
        simulator = Simulator(account(1), SimOptions(plan=plan))
        vias = {r.via for seed in range(20) for r in simulator.run(seed).history
                if type(r) is Delivered and r.type == "deposit.settled"}
        assert {"external", "duplicate"} <= vias

    @pytest.mark.parametrize("bad", [0, -1, "once", 1.5])
    def test_a_bound_that_is_no_positive_count_is_refused_with_its_location(self, bad: Any
                                                                            ) -> None:
        """`sends_max` is a whole number from 1; anything else names where it is."""
        data = account(None).spec.model_dump()
        data["events"]["deposit.settled"]["sends_max"] = bad
        with pytest.raises(DefinitionError, match=r"events\.deposit\.settled\.sends_max"):
            load_definition(data)

    def test_a_definition_without_bounds_keeps_its_digest(self) -> None:
        """The new key is left out of the digest while unused: old replay files still match."""
        spec = account(None).spec
        assert "sends_max" not in spec.model_dump()["events"]["close"]
        assert spec.model_dump()["events"]["close"] == {"description": "", "payload": None,
                                                         "sources": ["human"]}
        assert account(1).spec.model_dump()["events"]["deposit.settled"]["sends_max"] == 1


# -- 4. a campaign that moved nothing is not `held` -------------------------------------------

class TestVacuous:
    def test_a_machine_that_never_moves_is_vacuous_not_held(self) -> None:
        """Every event refused by a condition: no declared transition taken, so no verdict of
        `held`, and the report says what never happened."""
        from vacuous import stuck_orders

        report = fuzz(stuck_orders.definition, FuzzOptions(runs=10, replay_dir=None),
                      machine=stuck_orders)
        assert not report.failures and not report.held
        assert report.verdict == "vacuous"
        assert report.vacuous.startswith("no run took any of the 2 declared transitions")
        assert report.summary()["verdict"] == "vacuous"

    def test_a_campaign_under_its_floor_is_vacuous(self) -> None:
        """Fault-free, the refund never fails: 1 of 2 moves taken, under a floor of 60%."""
        options = FuzzOptions(runs=20, replay_dir=None, sim=SimOptions(plan=no_faults()))
        assert fuzz(REFUND, options).held
        floored = fuzz(REFUND, replace(options, coverage_min=60))
        assert floored.verdict == "vacuous" and floored.vacuous == (
            "1 of 2 declared transitions taken (50%), under the floor of 60%")
        assert fuzz(REFUND, replace(options, coverage_min=50)).held

    def test_a_violation_is_told_over_vacuity(self) -> None:
        """What broke is the verdict, whatever the coverage."""
        report = fuzz(account(None), FuzzOptions(runs=40, replay_dir=None, coverage_min=100,
                                                 sim=SimOptions(plan=no_faults())))
        assert report.verdict == "violated"

    @pytest.mark.parametrize("bad", [-1, 101, "80", True])
    def test_a_floor_that_is_no_percent_is_refused(self, bad: Any) -> None:
        with pytest.raises(HarnessError, match=r"options\.coverage_min: expected a percent"):
            FuzzOptions(coverage_min=bad)

    def test_every_bundled_scenario_is_exercised(self) -> None:
        """No bundled scenario is vacuous: each takes most of its declared transitions."""
        for path in bundled():
            report = fuzz(path, FuzzOptions(runs=60, replay_dir=None, coverage_min=75))
            assert report.verdict == "held", (path.name, report.vacuous)


class TestVacuousAtTheCommandLine:
    def test_fuzz_says_vacuous_and_exits_1(self) -> None:
        result = cli("fuzz", "vacuous:stuck_orders", "--runs", "5", "--no-report",
                     path=SUPPORT)
        assert result.returncode == 1, result.stdout + result.stderr
        lines = result.stdout.splitlines()
        assert lines[0].startswith("VACUOUS  vacuous:stuck_orders: 5 runs")
        assert lines[1].strip().startswith("vacuous: no run took any of the 2 declared")
        assert lines[-1] == "1 target(s), 0 failing, 1 vacuous: nothing exercised"

    def test_a_floor_over_100_is_one_usage_line(self) -> None:
        one_error_line(cli("fuzz", "scenarios/refund_escalation.yaml", "--min-coverage", "101"),
                       "--min-coverage", "101")


# -- 5. a machine that is not deterministic is caught ------------------------------------------

@pytest.fixture
def unsteady() -> Iterator[Any]:
    """The machines that keep state between runs, with that state cleared."""
    import unsteady

    unsteady.forget()
    yield unsteady
    unsteady.forget()


class TestNondeterminism:
    @pytest.mark.parametrize("name", ["flip_orders", "cached_orders"])
    def test_a_machine_whose_seed_does_not_fix_its_history_fails_deterministic(
            self, name: str, unsteady: Any) -> None:
        """The first seeds are run twice; the first record that differs is named, with what
        usually causes it; nothing is shrunk (it would not come back)."""

        target = getattr(unsteady, name)
        report = fuzz(target.definition, FuzzOptions(runs=30, replay_dir=None), machine=target)
        assert report.verdict == "nondeterministic" and not report.held
        failure = report.failures[0]
        assert failure.rule == "deterministic" and failure.counterexample is None
        message = failure.violations[0].message
        assert message.startswith("the same seed gave two histories: record ")
        assert "random.random()" in message and "state kept from one run" in message

    def test_a_coin_flipped_now_and_then_is_caught_by_the_sampled_seeds(
            self, unsteady: Any) -> None:
        """Two runs of one seed of a machine that calls `random.random()` agree by luck about
        one time in ten (3 of 30 here, sampling one seed: CI once reported it `held`); three
        seeds run twice catch it under every one of these global seeds. The global random is
        seeded so that the test itself is deterministic."""

        target = unsteady.coin_orders
        verdicts = set()
        for global_seed in range(30):
            random.seed(global_seed)
            verdicts.add(fuzz(target.definition, FuzzOptions(runs=5, replay_dir=None),
                              machine=target).verdict)
        assert verdicts == {"nondeterministic"}

    def test_the_command_line_tells_it_and_exits_1(self) -> None:
        result = cli("fuzz", "unsteady:flip_orders", "--runs", "5", "--no-report", path=SUPPORT)
        assert result.returncode == 1, result.stdout + result.stderr
        assert "violated deterministic (" in result.stdout
        assert "the same seed gave two histories: record " in result.stdout
        assert "no replay file" not in result.stdout  # no schedule replays it

    @pytest.mark.parametrize("path", [*bundled(), *sorted((ROOT / "scenarios" / "naive").glob(
        "*.yaml"))], ids=lambda p: p.stem)
    def test_the_simulator_is_deterministic_on_every_scenario_under_every_fault(
            self, path: Path) -> None:
        """The reference machine under the whole plan (no swarm), and under swarm plans."""
        definition = load_definition(path)
        for swarm in (False, True):
            simulator = Simulator(definition, SimOptions(plan=plan_for(definition, swarm=swarm)))
            for seed in range(8):
                assert difference(simulator.run(seed).history,
                                  simulator.run(seed).history) is None, (seed, swarm)

    def test_two_histories_that_differ_are_told_apart(self) -> None:
        """The rule itself: a changed record, and a history cut short."""
        history = Simulator(REFUND, SimOptions(executions=1)).run(3).history
        changed = (*history[:2], history[2]._replace(at=history[2].at + 1), *history[3:])
        found = difference(history, changed)
        assert found is not None and found.records == (2,)
        cut = difference(history, history[:-1])
        assert cut is not None and "ended after" in cut.message


# -- 6. guard coverage counts what happened; 7. self-transitions of adapters count -------------

GATE = load_definition({
    "name": "gate", "version": "1",
    "events": {"pay": {"sources": ["human"], "payload": {
        "type": "object", "required": ["amount"],
        "properties": {"amount": {"type": "integer", "minimum": 0, "maximum": 200}}}}},
    "states": {
        "waiting": {"initial": True, "type": "wait", "after": {"delay": "1h", "target": "expired"},
                    "on": {"pay": [{"target": "big", "guard": "event.payload.amount > 100"}]}},
        "big": {"type": "final", "outcome": "success"},
        "expired": {"type": "final", "outcome": "failure"},
    },
})


class TestGuardCoverage:
    def test_a_guard_that_refused_an_event_counts_its_false_outcome(self) -> None:
        """No other move takes `pay`: a small amount is refused (`rejected:guard_false`), and
        that is the guard's false outcome, reached."""
        report = fuzz(GATE, FuzzOptions(runs=30, replay_dir=None,
                                        sim=SimOptions(plan=no_faults())))
        assert report.held
        assert report.coverage.guards == {("waiting", "pay", 0, False),
                                          ("waiting", "pay", 0, True)}
        assert report.summary()["coverage"]["guards"] == {"reached": 2, "of": 2, "missing": []}


class Counter:
    """A `transitions` machine whose `tick` stays where it is (a self-transition)."""

    def __init__(self, box: Any) -> None:
        self.machine = Machine(model=self, initial="counting",
                               states=["counting", {"name": "done", "final": True}],
                               transitions=[["tick", "counting", "counting"],
                                            ["stop", "counting", "done"]])


COUNTER = transitions_target(Counter, name="counter", events={
    "tick": {"sources": ["system"]}, "stop": {"sources": ["human"]}})


class TestSelfTransitionsOfAdapters:
    def test_a_self_transition_taken_is_covered(self) -> None:
        report = fuzz(COUNTER.definition, FuzzOptions(runs=20, replay_dir=None,
                                                      sim=SimOptions(plan=no_faults())),
                      machine=COUNTER)
        assert report.held
        assert report.summary()["coverage"]["transitions"] == {
            "reached": 2, "of": 2, "missing": []}


# -- 9. a user invariant written as the README shows shrinks and replays -----------------------

@pytest.fixture
def one_charge_per_order() -> Iterator[str]:
    """Registers the user invariant of the README's shape (it yields sentences), for one
    test."""
    name = "one_charge_per_order"
    invariant(name=name)(charged_twice)
    yield name
    del INVARIANTS[name]


class TestSentencesAreShrunkAndReplayed:
    def test_a_sentence_is_placed_at_the_step_it_broke(self, one_charge_per_order: str,
                                                       tmp_path: Path) -> None:
        """Fuzzing a planted bug under the user's invariant alone: the violation has its
        step, the trace is shrunk to it, and the replay file breaks the rule again."""
        machine, _ = PLANTED["key_per_attempt"]
        report = fuzz(PLANTED_WORKFLOW, FuzzOptions(runs=300, replay_dir=tmp_path,
                                                    invariants=(one_charge_per_order,)),
                      machine=machine)
        (failure,) = report.failures
        example = failure.counterexample
        assert example is not None and failure.replay_file is not None
        assert failure.violations[0].step > 0
        assert 1 <= example.steps <= example.original_steps and example.trace()
        outcome = replay(failure.replay_file)
        assert outcome.reproduced and outcome.violation is not None
        assert outcome.violation.step == example.steps

    def test_the_step_is_the_first_that_breaks_it(self, one_charge_per_order: str) -> None:
        """Over a history, the sentence sits at the step of the second charge."""
        machine, _ = PLANTED["key_per_attempt"]
        options = FuzzOptions(runs=300, replay_dir=None, shrink=False,
                              invariants=(one_charge_per_order,))
        seed = fuzz(PLANTED_WORKFLOW, options, machine=machine).failures[0].seed
        history = Simulator(PLANTED_WORKFLOW, campaign_sim_options(PLANTED_WORKFLOW, options),
                            machine).run(seed).history
        (violation,) = check(PLANTED_WORKFLOW, history, only=[one_charge_per_order])
        charges = [r for r in history if type(r) is Applied and r.tool == "pay.charge"]
        assert violation.step == charges[1].step


# -- 10. the printed replay command runs as printed --------------------------------------------

class TestReplayAsPrinted:
    def test_a_user_invariant_replays_without_being_told_where_it_lives(self, tmp_path: Path
                                                                         ) -> None:
        """Found with `--import charge_rules`, the failure's printed command replays it as
        printed: the replay file names the module that registers the rule."""
        found = cli("fuzz", str(ROOT / "tests/data/workflows/planted.yaml"), "--machine",
                    "planted:KeyPerAttempt", "--import", "charge_rules", "--all-failures",
                    "--runs", "300", "--report", str(tmp_path), cwd=tmp_path, path=SUPPORT)
        assert found.returncode == 1, found.stdout + found.stderr
        (printed,) = [line.strip().removeprefix("replay: ") for line in found.stdout.splitlines()
                      if line.strip().startswith("replay: ") and "one_charge_per_order" in line]
        saved = json.loads(Path(shlex.split(printed)[-1]).read_text())
        assert saved["imports"] == ["charge_rules"]
        again = subprocess.run(shlex.split(printed.replace("fsmharness", f"{sys.executable} -m "
                                                                         "harness.cli", 1)),
                               cwd=tmp_path, env={**os.environ, "PYTHONPATH": SUPPORT},
                               capture_output=True, text=True, timeout=300, check=False)
        assert again.returncode == 1, again.stdout + again.stderr
        assert again.stdout.splitlines()[-1].startswith("reproduced one_charge_per_order ")

    def test_a_module_that_no_longer_imports_is_one_clear_error(self, tmp_path: Path) -> None:
        kept = sorted((ROOT / "tests" / "data" / "replays").glob("planted-*.json"))[0]
        data = json.loads(kept.read_text())
        data["imports"] = ["no_such_rules_module"]
        broken = tmp_path / "broken.json"
        broken.write_text(json.dumps(data))
        one_error_line(cli("replay", str(broken), path=SUPPORT), "cannot import "
                       "'no_such_rules_module', which the failure needs")


# -- small truths in the output ----------------------------------------------------------------

class TestExploreSaysWhatItCovered:
    def test_a_search_stopped_short_names_the_depth_it_did_cover(self) -> None:
        """Stopped by `states_max`, the summary names the last depth covered in full (and a
        search to that depth alone proves it) and the first one not covered."""
        stopped = explore(PLANTED_WORKFLOW, ExploreOptions(depth=12, states_max=60))
        assert not stopped.complete
        covered = stopped.depth
        assert stopped.summary().startswith(
            f"held as far as explored: every schedule to depth {covered} covered, depth "
            f"{covered + 1} not covered")
        assert explore(PLANTED_WORKFLOW, ExploreOptions(depth=covered)).complete


class TestTraceTellsAStaleAnswer:
    def test_a_tool_answer_the_machine_ignored_says_so(self) -> None:
        """A slow call answered after its step gave up: the trace says the answer was not
        taken, instead of reading as a call that moved the execution."""
        definition = load_definition(ROOT / "scenarios" / "document_processing.yaml")
        history = Simulator(definition, SimOptions(plan=plan_for(definition))).run(0).history
        late = [r for r in history if type(r) is Committed and r.decision == "ignored"
                and r.event_type.startswith("step.")]
        assert late, "the case did not arise"
        line = describe_steps(history)[late[0].step - 1]
        assert (f"{late[0].execution} ignored the answer ({late[0].event_type}) to call "
                f"{late[0].answers}: stale or already answered") in line


# -- 12. reactive machines ---------------------------------------------------------------------

def microwave(**changes: Any) -> dict[str, Any]:
    """A microwave: no final state by design; idle waits for `start` with no timeout."""
    data: dict[str, Any] = {
        "name": "microwave", "version": "1", "reactive": True,
        "tools": {"magnetron.heat": {"idempotency_keys": True, "repeatable": True}},
        "events": {"start": {"sources": ["human"]}, "open": {"sources": ["human"]}},
        "states": {
            "idle": {"initial": True, "type": "wait", "on": {"start": "heating"}},
            "heating": {"step": {"tool": "magnetron.heat", "input": {"seconds": 60}},
                        "on": {"step.succeeded": "cooking", "step.failed": "idle"}},
            "cooking": {"type": "wait", "after": {"delay": "60s", "target": "idle"},
                        "on": {"open": "idle"}},
        },
    }
    data.update(changes)
    return data


class TestReactive:
    def test_a_reactive_machine_is_fuzzed_and_holds(self) -> None:
        """No final state, a wait with no timeout: it loads, every move is taken, nothing is
        stuck (each execution can still be moved by an event or a timer)."""
        report = fuzz(load_definition(microwave()), FuzzOptions(runs=30, replay_dir=None))
        assert report.verdict == "held", [str(f.violations[0]) for f in report.failures]
        assert report.summary()["coverage"]["transitions"]["missing"] == []

    def test_without_the_flag_no_final_is_an_error_that_names_the_flag(self) -> None:
        with pytest.raises(DefinitionError, match=r"no final state can be reached .* says "
                                                  r"`reactive: true`"):
            load_definition(microwave(reactive=False))

    def test_a_wait_that_nothing_can_end_still_needs_a_timeout(self) -> None:
        """Reactive or not, a wait state that takes no event and has no timeout is stuck."""
        data = microwave()
        data["states"]["idle"]["on"] = {}
        data["states"]["cooking"]["on"]["start"] = "heating"
        with pytest.raises(DefinitionError, match=r"states\.idle\.after"):
            load_definition(data)


# -- 8. the Hypothesis machine meets synchronous machines' tools, and always has a rule --------

HYPOTHESIS = settings(max_examples=300, stateful_step_count=20, database=None, deadline=None,
                      derandomize=True, phases=[Phase.generate],
                      suppress_health_check=list(HealthCheck), print_blob=False)


class TestHypothesisMachine:
    def test_tool_faults_reach_a_machine_that_calls_its_tools_synchronously(self) -> None:
        """The per-attempt key of a machine that retries inside its callback: native fuzzing
        finds it, and so must the Hypothesis machine, though no call is ever in flight."""
        from peers import retrying_orders

        native = fuzz(retrying_orders.definition, FuzzOptions(runs=200, replay_dir=None),
                      machine=retrying_orders)
        assert native.failures and native.failures[0].rule == "no_duplicate_effect"
        found = workflow_machine(retrying_orders.definition, machine=retrying_orders,
                                 options=SimOptions(executions=1))
        with pytest.raises(InvariantViolated) as caught:
            run_state_machine_as_test(found, settings=HYPOTHESIS)
        assert caught.value.violations[0].rule == "no_duplicate_effect"

    def test_a_run_whose_executions_all_ended_still_has_a_rule(self) -> None:
        """A plan of crashes only, on the reference machine: once every execution is final no
        action is enabled, and the machine rests instead of Hypothesis refusing it."""
        found = workflow_machine(REFUND, options=SimOptions(executions=1),
                                 plan=load_plan({"faults": {"crash": 0.5}}))
        run_state_machine_as_test(found, settings=HYPOTHESIS)


# -- found in review -------------------------------------------------------------------------

class TestReviewFindings:
    def test_an_invalid_payload_does_not_use_up_a_one_shot_send(self) -> None:
        """A reactive wait with no timeout for a one-shot settlement: a payload the run made
        invalid is a fault, not the bank's one send, so the valid one still comes."""
        definition = load_definition({
            "name": "settle", "version": "1", "reactive": True,
            "events": {"settled": {"sources": ["system"], "sends_max": 1, "payload": {
                "type": "object", "required": ["amount"],
                "properties": {"amount": {"type": "integer", "minimum": 1}}}}},
            "states": {
                "waiting": {"initial": True, "type": "wait", "on": {"settled": "settled"}},
                "settled": {"type": "wait", "after": {"delay": "1d", "target": "settled"}},
            },
        })
        report = fuzz(definition, FuzzOptions(runs=40, replay_dir=None,
                                               sim=SimOptions(invalid_rate=0.6)))
        assert report.verdict == "held", [str(f.violations[0]) for f in report.failures]

    def test_an_invariant_that_cannot_read_a_prefix_is_placed_at_the_end(self) -> None:
        """Placing a sentence reads prefixes of the run; one that raises on a prefix (it
        expects the end) breaks at the last step, instead of crashing the campaign."""
        name = "ends_refunded"

        def ends_refunded(definition: Any, history: Sequence[HistoryRecord]) -> Iterator[str]:
            finished = [r for r in history if type(r) is Finished]
            if finished[-1].state == "refunded":  # IndexError on a prefix: no Finished yet
                yield "ended refunded"

        invariant(name=name)(ends_refunded)
        try:
            history = Simulator(REFUND, SimOptions(plan=no_faults(), executions=1)).run(
                0).history
            (violation,) = check(REFUND, history, only=[name])
            assert violation.step == history[-1].step
        finally:
            del INVARIANTS[name]

    def test_a_nondeterministic_campaign_says_so_in_its_report(self, unsteady: Any) -> None:
        from harness.adapters.targets import Target
        from harness.engines.campaign import fuzz_target

        target = Target("unsteady:flip_orders", unsteady.flip_orders.definition,
                        unsteady.flip_orders)
        _, section = fuzz_target(target, FuzzOptions(runs=5, replay_dir=None))
        assert section["verdict"] == "nondeterministic: the same seed gave two histories"


class TestVacuousExplore:
    def test_an_exhaustive_search_of_a_machine_that_never_moves_is_vacuous(self) -> None:
        """Every schedule to the bound, and no declared transition taken: no proof of
        anything, so no `held` (it was 'held within bound 4')."""
        from vacuous import stuck_orders

        report = explore(stuck_orders.definition, ExploreOptions(depth=4),
                         machine=stuck_orders)
        assert not report.held and report.counterexample is None
        assert report.summary().startswith("vacuous within bound 4: no run took any of the 2")
        assert explore(PLANTED_WORKFLOW, ExploreOptions(depth=4)).held


def test_a_definition_whose_start_is_refused_is_stuck_not_the_machines_nonsense() -> None:
    """Its initial choice's action fails on the initial context: every start is refused, and
    the verdict is the definition's (stuck where it would begin), not the reference machine
    answering nonsense (it was observed in state '')."""
    from harness import SimOptions, Simulator, check
    from reference_machine import load_definition

    definition = load_definition({
        "name": "refused_start", "version": 1, "context": {"a": None},
        "states": {"begin": {"type": "choice", "initial": True, "always": [
                       {"target": "done", "actions": [{"assign": {"b": "context.a + 1"}}]}]},
                   "done": {"type": "final", "outcome": "success"}}})
    result = Simulator(definition, SimOptions(seed=0, plan=no_faults())).run()
    assert result.failure is None, result.failure
    assert {obs.state for obs in result.final.values()} == {"begin"}
    assert {v.rule for v in check(definition, result.history)} == {"no_stuck_execution"}


class _Unwatched(ReferenceMachine):
    """The reference machine, correct, offering no `watch()`: the checkers judge it on what
    `deliver` answers and what `observe` shows."""

    watch = None


@pytest.mark.parametrize("seed", [172, 189, 397, 677, 2786])
def test_a_correct_machine_without_watch_is_not_blamed_for_a_grant_cut_midway(
        seed: int) -> None:
    """Each seed cuts a delivery of an approval midway (a crash after its commit, a second
    worker that took it first, a duplicate copy of it): the machine acts on the grant, and
    answers the copy sent again `ignored:duplicate` (or answers after its recovery acted).
    Without commits to read, these were blamed as effects with no approval
    (approved_effects) or as grants taken in the wrong state (approval_genuine)."""
    report = fuzz(ROOT / "scenarios" / "refund_escalation.yaml",
                  FuzzOptions(runs=1, seed=seed, replay_dir=None, shrink=False),
                  machine=_Unwatched)
    # one run, on a machine whose moves inside a step go unseen: it need not be adequate, but
    # nothing may be blamed
    assert not report.failures, [v.message for f in report.failures for v in f.violations]


def test_a_machine_without_watch_is_told_where_correlated_events_could_not_match() -> None:
    """The authoring guide's refund waits for `carrier.parcel_returned`, correlated on a
    tracking number a tool's output put in the context. Without commits to read, the sender
    fills the field from the start context, the event never matches, and the campaign holds
    with that transition untaken: the report says so, and why. With watch(), every transition
    is taken and there is nothing to say."""
    path = ROOT / "docs" / "examples" / "authoring" / "refund_4_approval.yaml"
    options = FuzzOptions(runs=60, seed=0, replay_dir=None)
    blind = fuzz(path, options, machine=_Unwatched)
    missing = blind.coverage.report(blind.definition)["transitions"]["missing"]
    assert any(event == "carrier.parcel_returned" for _, event, _ in missing)
    note = blind.notes[0]
    assert note.startswith("1 transition on carrier.parcel_returned never taken; the machine "
                           "reports no commits (no watch())"), note
    assert blind.summary()["notes"][0] == note
    seen = fuzz(path, options)
    assert not any("never taken" in note for note in seen.notes)
    assert not seen.coverage.report(seen.definition)["transitions"]["missing"]
