"""Document processing under the failure matrix (no approval gate and no compensation: those
entries do not apply); a revocation from each sub-state goes to recovery; a fuzz campaign with
every fault kind holds."""

from __future__ import annotations

import pytest
from matrix import APPROVALS, COMPENSATIONS, assert_entry_holds, campaign, entries, scenario

DEFINITION = scenario("document_processing")
APPLIES = entries(APPROVALS, COMPENSATIONS)


@pytest.mark.parametrize("entry", APPLIES)
def test_failure_matrix(entry: str) -> None:
    assert_entry_holds(DEFINITION, entry)


def test_credentials_revoked_from_any_sub_state_goes_to_recovery() -> None:
    report = campaign(DEFINITION)
    for state in ("parsing", "extracting", "validating"):
        assert (state, "credentials.revoked", "recovering") in report.coverage.transitions
    assert ("recovering", "step.succeeded", "parsing") in report.coverage.transitions
