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


def test_a_target_named_like_an_emoji_code_prints_as_named(hostile) -> None:
    """`library_examples:traffic_light` printed as `library_examples🚥`: rich read
    `:traffic_light:` as an emoji code."""
    result = hostile(Case("emoji", ("fuzz", "library_examples:traffic_light", "--runs", "5",
                                    "--no-report"), 0, "library_examples:traffic_light: 5 runs"))
    assert "\N{VERTICAL TRAFFIC LIGHT}" not in result.stdout
