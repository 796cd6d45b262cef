"""Regressions for what the review of issue 5 found in the checkers and the engines: each test
failed against the code before its fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from planted import WORKFLOW

from fault_injection import load_plan, no_faults
from harness import (
    Applied,
    Commanded,
    Committed,
    Dispatched,
    ExploreOptions,
    Finished,
    ReferenceMachine,
    SimOptions,
    Simulator,
    check,
    explore,
    replay,
    write_replay,
)
from harness.engines.exhaustive import _Exploring
from harness.sim.world import fault_tables
from reference_machine import load_definition

ROOT = Path(__file__).resolve().parents[2]
BUDGET_LOOP = (ROOT / "tests" / "unit" / "workflows" / "budget_loop.yaml").read_text()


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
    saga = load_definition(ROOT / "tests" / "unit" / "workflows" / "saga.yaml")
    plan = load_plan({"faults": {"tool_transient": 1.0, "tool_permanent": 1.0}})
    table = fault_tables(plan, saga)["bank.debit"]
    offered = {_Exploring([option], 1).pick("tool:bank.debit", table) for option in range(3)}
    assert offered == {None, "tool_transient"}
    report = explore(saga, ExploreOptions(depth=3, plan=plan, invariants=("machine_ok",)))
    assert report.held


def budgeted(lines: str, folder: Path, name: str) -> Any:
    path = folder / f"{name}.yaml"
    path.write_text(BUDGET_LOOP.replace("budgets:\n", "budgets:\n" + lines))
    return load_definition(path)


def test_a_cost_budget_alone_is_checked(tmp_path: Path) -> None:
    """A machine that spends past `cost_max` breaks the budget even when no other limit is
    set (before, only a transitions or visits limit turned the check on)."""
    loose = budgeted("", tmp_path, "loose")
    strict = budgeted("  cost_max: 1.0\n", tmp_path, "strict")
    for seed in range(200):
        history = Simulator(loose, SimOptions(seed=seed, plan=no_faults(),
                                              executions=1)).run().history
        if check(strict, history, only=["budgets_within_bounds"]):
            break
    else:
        raise AssertionError("no run spent past the budget")
    (found,) = check(strict, history, only=["budgets_within_bounds"])
    assert "cost_max is 1" in found.message


def test_a_first_step_over_the_cost_budget_may_force_the_start(tmp_path: Path) -> None:
    """The reference forces a run whose first step costs too much straight to `on_exceeded`:
    that move out of the start is legal."""
    hot = budgeted("  cost_max: 0.2\n", tmp_path, "hot")
    history = Simulator(hot, SimOptions(seed=0, plan=no_faults(), executions=1)).run().history
    forced = [r for r in history if type(r) is Committed and r.forced == "cost_max"]
    assert forced and forced[0].from_state == ""
    assert check(hot, history) == []


def test_two_undos_with_one_repeatable_tool_and_input_are_two_undos() -> None:
    """Two holds undone by the same cancel with the same input are both undone."""
    definition = load_definition({
        "name": "shared_undo", "version": 1, "context": {"order": "o-1"},
        "tools": {"a.hold": {"idempotency_keys": True}, "b.hold": {"idempotency_keys": True},
                  "order.cancel": {"idempotency_keys": True, "repeatable": True}},
        "compensation_failed": "human",
        "states": {
            "hold_a": {"initial": True, "step": {"tool": "a.hold", "compensation": {
                "tool": "order.cancel", "input": {"order": "=context.order"}}},
                "on": {"step.succeeded": "hold_b", "step.failed": "failed"}},
            "hold_b": {"step": {"tool": "b.hold", "compensation": {
                "tool": "order.cancel", "input": {"order": "=context.order"}}},
                "on": {"step.succeeded": "done", "step.failed": "failed"}},
            "human": {"type": "wait", "after": {"delay": "1h", "target": "failed"}},
            "done": {"type": "final", "outcome": "success"},
            "failed": {"type": "final", "outcome": "failure"}}})
    undo = '{"order":"o-1"}'
    history = [Applied(1, 0, "x1", "a.hold", "x1/hold_a/1", "{}", 1),
               Applied(2, 0, "x1", "b.hold", "x1/hold_b/1", "{}", 2),
               Dispatched(3, 0, "x1", "order.cancel", "x1/hold_b/1/undo"),
               Applied(3, 0, "x1", "order.cancel", "x1/hold_b/1/undo", undo, 3),
               Applied(4, 0, "x1", "order.cancel", "x1/hold_a/1/undo", undo, 4),
               Finished(5, 0, "x1", "failed", "final", "failure", 6)]
    assert check(definition, history, only=["compensation_complete",
                                            "compensation_order"]) == []


GATED_AND_NOT = {
    "name": "gated_and_not", "version": 1,
    "tools": {"pay.out": {"idempotency_keys": True}},
    "states": {
        "review": {"initial": True, "type": "wait", "approval": {
            "for_state": "paying", "summary": "pay", "roles": ["boss"], "expires_after": "1h"},
            "on": {"approval.granted": "paying", "approval.denied": "tipping"}},
        "paying": {"step": {"tool": "pay.out", "input": {"amount": 10}, "needs_approval": True,
                            "reversible": False}, "on": {"step.succeeded": "done",
                                                         "step.failed": "done"}},
        "tipping": {"step": {"tool": "pay.out", "input": {"amount": 1}},
                    "on": {"step.succeeded": "done", "step.failed": "done"}},
        "done": {"type": "final", "outcome": "success"}}}


def test_a_tool_gated_in_one_state_is_free_in_another() -> None:
    """The state that commanded an effect says whether it needed approval, not its tool."""
    definition = load_definition(GATED_AND_NOT)
    tip = Commanded("x1/tipping/1#1", "pay.out", "x1/tipping/1")
    history = [Committed(1, 0, "x1", "e1", "accepted", 1, "review", "", "execution.started"),
               Committed(2, 0, "x1", "e2", "accepted", 2, "tipping", "review",
                         "approval.denied", effects=(tip,)),
               Applied(3, 0, "x1", "pay.out", "x1/tipping/1", '{"amount":1}', 1)]
    assert check(definition, history, only=["approved_effects"]) == []
    pay = Commanded("x1/paying/1#1", "pay.out", "x1/paying/1")
    paid = [history[0], Committed(2, 0, "x1", "e2", "accepted", 2, "paying", "review",
                                  "approval.granted", effects=(pay,)),
            Applied(3, 0, "x1", "pay.out", "x1/paying/1", '{"amount":10}', 1)]
    (found,) = check(definition, paid, only=["approved_effects"])
    assert "no genuine approval was granted" in found.message


class OpaqueKeys(ReferenceMachine):
    """The reference machine, sending the tools keys that do not start with the run's id."""

    def __init__(self, definition: Any, tools: Any, probe: Any = None, **kwargs: Any) -> None:
        super().__init__(definition, {name: _prefixed(tool) for name, tool in tools.items()},
                         probe, **kwargs)


def _prefixed(tool: Any) -> Any:
    return lambda payload, key: tool(payload, f"k:{key}")


def test_an_effect_no_key_ties_to_its_run_may_use_its_grant() -> None:
    """With keys the harness cannot attribute, a genuine grant of the exact action counts."""
    definition = load_definition(GATED_AND_NOT)
    simulator = Simulator(definition, SimOptions(plan=no_faults(), executions=1),
                          machine=OpaqueKeys)
    for seed in range(30):
        history = simulator.run(seed).history
        paid = [r for r in history if type(r) is Applied and r.key == "k:x1/paying/1"]
        if paid:
            assert paid[0].execution == ""
            assert check(definition, history, only=["approved_effects"]) == []
            return
    raise AssertionError("no run paid")


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
