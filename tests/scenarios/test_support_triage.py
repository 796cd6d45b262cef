"""Support triage under the failure matrix (human review is by events, not an approval gate,
and nothing is compensated: those entries do not apply) and a fuzz campaign with every fault
kind; high-priority and billing tickets always pass human review."""

from __future__ import annotations

import pytest
from matrix import APPROVALS, COMPENSATIONS, assert_entry_holds, campaign, entries, scenario

from harness import Committed

TRIAGE = scenario("support_triage")
APPLIES = entries(APPROVALS, COMPENSATIONS)


@pytest.mark.parametrize("entry", APPLIES)
def test_failure_matrix(entry: str) -> None:
    assert_entry_holds(TRIAGE, entry)


def test_fuzz_campaign_with_every_fault_kind() -> None:
    report = campaign(TRIAGE)
    assert report.metrics.endings["success"] > 0


def test_high_priority_and_billing_tickets_always_pass_human_review() -> None:
    """Every move into `sending` of a high-priority, urgent or billing ticket comes from
    human_review, never straight from drafting; and some do reach sending that way."""
    outcome = assert_entry_holds(TRIAGE, "process_restart_mid_step", seeds=range(60))
    reviewed = 0
    for history in outcome.histories:
        for record in history:
            if not (type(record) is Committed and record.decision == "accepted"
                    and record.state == "sending" and record.moved):
                continue
            context = record.context or {}
            if context.get("priority") in ("high", "urgent") or (
                    context.get("category") == "billing"):
                assert record.from_state == "human_review", record
                reviewed += 1
    assert reviewed > 0
