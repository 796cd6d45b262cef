"""Options a careless user gives: each refused with its reason, or capped and said so."""

from __future__ import annotations

import pytest
from hostile import Case

CASES = [
    Case("budget nan", ("fuzz", "{root}/scenarios/refund_escalation.yaml", "--budget", "nan",
                        "--no-report"), 2, "--budget"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_option(case: Case, hostile) -> None:
    hostile(case)
