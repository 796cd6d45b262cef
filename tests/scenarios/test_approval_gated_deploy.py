"""The approval-gated deploy under the failure matrix (it keeps one undo, the recovery state,
so no compensation can fail); every transition is in the append-only log; a fuzz campaign with
every fault kind holds."""

from __future__ import annotations

import pytest
from matrix import COMPENSATIONS, assert_entry_holds, campaign, entries, scenario

from harness import Committed

DEFINITION = scenario("approval_gated_deploy")


@pytest.mark.parametrize("entry", entries(COMPENSATIONS))
def test_failure_matrix(entry: str) -> None:
    assert_entry_holds(DEFINITION, entry)


def test_every_transition_is_audited_in_order() -> None:
    """The audit is the store's log: each execution's accepted commits have versions 1, 2, ...
    with no gap, and replaying the log gives the stored state (replay_matches held)."""
    outcome = assert_entry_holds(DEFINITION, "process_restart_mid_step")
    for history in outcome.histories:
        versions: dict[str, list[int]] = {}
        for record in history:
            if type(record) is Committed and record.decision == "accepted":
                versions.setdefault(record.execution, []).append(record.version)
        for execution, seen in versions.items():
            assert seen == list(range(1, len(seen) + 1)), (execution, seen)


def test_fuzz_campaign_with_every_fault_kind() -> None:
    report = campaign(DEFINITION)
    assert ("verifying", "step.succeeded", "recovery") in report.coverage.transitions
    assert report.metrics.approvals["granted"] > 0 and report.metrics.approvals["denied"] > 0
