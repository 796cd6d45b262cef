"""Validated execution under the failure matrix: every entry strikes and every invariant holds;
stale and duplicate approvals change nothing; a fuzz campaign with every fault kind holds."""

from __future__ import annotations

import pytest
from matrix import MATRIX, assert_entry_holds, campaign, scenario

from harness import Delivered

DEFINITION = scenario("validated_execution")


@pytest.mark.parametrize("entry", sorted(MATRIX))
def test_failure_matrix(entry: str) -> None:
    assert_entry_holds(DEFINITION, entry)


def test_stale_and_duplicate_approvals_are_refused_or_ignored() -> None:
    outcome = assert_entry_holds(DEFINITION, "forged_approval")
    stale = [r for h in outcome.histories for r in h
             if type(r) is Delivered and r.via == "forged" and r.answers.endswith("-stale")]
    assert stale, "no stale approval was tried"
    assert outcome.metrics.approvals["rejected"] > 0
    duplicated = assert_entry_holds(DEFINITION, "duplicate_tool_result")
    assert duplicated.faults["duplicate_event"] > 0


def test_an_invalid_request_is_rejected_and_nothing_is_posted() -> None:
    report = campaign(DEFINITION)
    assert ("received", "step.succeeded", "rejected") in report.coverage.transitions
    assert report.metrics.endings["rejected"] > 0


def test_fuzz_campaign_with_every_fault_kind() -> None:
    report = campaign(DEFINITION)
    assert report.coverage.states == frozenset(DEFINITION.states)
