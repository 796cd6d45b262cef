"""Refund escalation under the failure matrix and a fuzz campaign with every fault kind (its
deeper tests, crash points and compensation among them, are in
tests/scenarios/test_failure_matrix.py)."""

from __future__ import annotations

import pytest
from matrix import MATRIX, assert_entry_holds, campaign, scenario

from fault_injection import load_plan
from harness import SimOptions, Simulator
from harness.checks.coverage import coverage_of

REFUND = scenario("refund_escalation")


@pytest.mark.parametrize("entry", sorted(MATRIX))
def test_failure_matrix(entry: str) -> None:
    assert_entry_holds(REFUND, entry)


def test_fuzz_campaign_with_every_fault_kind() -> None:
    campaign(REFUND)


def test_the_transition_default_campaigns_miss_is_reachable() -> None:
    """notifying -> needs_human on step.failed needs a permanent email failure after the money
    moved: rare at the default rates (no default campaign of 200 runs took it), taken when the
    email tool fails often."""
    plan = load_plan({"faults": {"tool_permanent": {"rate": 0.9, "tools": ["email.send"]}}})
    simulator = Simulator(REFUND, SimOptions(plan=plan))
    taken = sum(("notifying", "step.failed", "needs_human") in
                coverage_of(REFUND, simulator.run(seed).history).transitions
                for seed in range(40))
    assert taken > 0
