"""The proactive code agent under the failure matrix (it has no approval gate, so the three
approval entries do not apply); cost budget and cycle detection pause it for a human; a fuzz
campaign with every fault kind holds."""

from __future__ import annotations

import pytest
from matrix import (
    APPROVALS,
    assert_entry_holds,
    campaign,
    entries,
    run_entry,
    scenario,
)

DEFINITION = scenario("proactive_code_agent")


@pytest.mark.parametrize("entry", entries(APPROVALS))
def test_failure_matrix(entry: str) -> None:
    assert_entry_holds(DEFINITION, entry)


def test_the_same_plan_and_error_again_and_again_pauses_for_a_human() -> None:
    """Over enough runs some fail their tests with the same plan and error three times, or
    spend past the cost budget: the run is forced to needs_human, never left looping."""
    # a cycle is rare (one run in 60 to 150, by how the faults fall): 300 seeds see a few
    outcome = run_entry(DEFINITION, "invalid_agent_output", seeds=range(300))
    assert outcome.violations == []
    assert outcome.forced["cycle"] > 0 and outcome.forced["cost_max"] > 0, outcome.forced


def test_fuzz_campaign_with_every_fault_kind() -> None:
    report = campaign(DEFINITION)
    assert ("needs_human", "human.resumed", "planning") in report.coverage.transitions
    assert report.metrics.endings["success"] > 0
