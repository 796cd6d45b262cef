"""Metrics from transition records: time and failures per state, re-sends per tool, approval
outcomes, endings, transitions and cost per execution; and merging runs."""

from __future__ import annotations

from pathlib import Path

from harness import Commanded, Committed, Dispatched, Finished, SimOptions, Simulator
from harness.checks.metrics import Metrics, metrics_of
from reference_machine import load_definition

ROOT = Path(__file__).resolve().parents[3]
REFUND = load_definition(ROOT / "scenarios" / "refund_escalation.yaml")


def commit(step: int, at: int, state: str, before: str = "", moved: str = "", *,
           event: str = "", forced: str = "", effects: tuple[Commanded, ...] = (),
           decision: str = "accepted") -> Committed:
    return Committed(step, at, "x1", f"e{step}", decision, step, state, before, moved, forced,
                     event or moved, effects=effects)


def test_a_hand_made_history_gives_its_metrics() -> None:
    """Planning costs 0.05 an attempt (two attempts), a failure leaves verifying, an approval
    is granted, a forged answer is rejected, and the run ends refunded-then-notified."""
    plan = Commanded("x1/planning/1", "agent.plan_refund", "k-plan")
    history = [
        commit(1, 0, "collecting_requirements", moved="execution.started"),
        commit(2, 1_000, "planning", "collecting_requirements", "step.succeeded",
               effects=(plan,)),
        commit(3, 1_500, "", event="approval.granted", decision="rejected"),  # forged
        commit(4, 2_000, "planning", "planning", event="step.failed", effects=(plan,)),
        Dispatched(4, 2_000, "x1", "agent.plan_refund", "k-plan"),
        Dispatched(5, 2_100, "x1", "agent.plan_refund", "k-plan"),  # the same key again
        commit(6, 3_000, "awaiting_approval", "planning", "step.succeeded"),
        commit(7, 63_000, "executing_refund", "awaiting_approval", "approval.granted"),
        commit(8, 64_000, "failed", "executing_refund", "step.failed"),
        Finished(9, 70_000, "x1", "failed", "final", "failure", 8),
    ]
    report = metrics_of(REFUND, history).report()
    assert report["states"]["planning"] == {"visits": 1, "time_ms": 2_000,
                                            "mean_time_ms": 2_000.0, "failures": 0,
                                            "failure_rate": 0.0}
    assert report["states"]["awaiting_approval"]["time_ms"] == 60_000
    assert report["states"]["executing_refund"]["failure_rate"] == 1.0
    assert report["states"]["failed"]["time_ms"] == 0  # a final state's time is no wait
    assert report["tools"] == {"agent.plan_refund": {"calls": 2, "resends": 1,
                                                     "resend_rate": 0.5}}
    assert report["approvals"] == {"granted": 1, "rejected": 1}
    assert report["endings"] == {"failure": 1}
    assert report["transitions"] == {"total": 4, "mean": 4.0, "max": 4}
    assert report["cost"] == {"total": 0.1, "mean": 0.1, "max": 0.1}


def test_an_execution_left_with_nothing_to_move_it_counts_as_stuck() -> None:
    history = [commit(1, 0, "collecting_requirements", moved="execution.started"),
               Finished(2, 10, "x1", "collecting_requirements", "running", None, 1, ()),
               Finished(2, 10, "x2", "awaiting_approval", "waiting", None, 3, ("timer",))]
    report = metrics_of(REFUND, history).report()
    assert report["endings"] == {"stuck": 1, "waiting": 1} and report["stuck"] == 1


def test_runs_merge_into_sums_and_maxima() -> None:
    """Merging two runs' metrics gives what one pass over both would count; neither changes."""
    runs = [Simulator(REFUND, SimOptions(seed=seed)).run().history for seed in (1, 2)]
    first, second = (metrics_of(REFUND, history) for history in runs)
    merged = first.merge(second)
    assert merged.executions == first.executions + second.executions == 6
    assert merged.tool_calls == first.tool_calls + second.tool_calls
    assert merged.transitions_max == max(first.transitions_max, second.transitions_max)
    assert sum(merged.endings.values()) == 6
    assert first.merge(Metrics()).report() == first.report()
    dispatched = sum(1 for history in runs for r in history if type(r) is Dispatched)
    assert sum(merged.tool_calls.values()) == dispatched
