"""Drawn definitions: `harness.strategies` draws valid workflows with every feature, and the
reference machine holds every invariant on them under every fault kind.

This property test is what found the three bugs pinned in `test_reference_regressions.py`;
run it longer (`FSM_DRAWN_EXAMPLES=2000`) when changing the machine.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import FuzzOptions, SimOptions, fuzz
from harness.strategies import workflow_definitions, workflow_specs
from reference_machine import Severity, WorkflowDefinition, lint

EXAMPLES = int(os.environ.get("FSM_DRAWN_EXAMPLES", "100"))
QUICK = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(workflow_specs())
def test_every_drawn_definition_loads_without_an_error(spec: dict[str, Any]) -> None:
    """Each drawn definition passes every load-time check."""
    assert [f for f in lint(spec) if f.severity is Severity.ERROR] == []


def test_the_draws_cover_every_feature() -> None:
    """Over many draws: nesting, waits with timeouts, retries, approvals, compensations,
    escalations, guards, loops and budgets all appear."""
    seen: Counter[str] = Counter()

    @settings(max_examples=300, deadline=None, derandomize=True, database=None)
    @given(workflow_specs())
    def tally(spec: dict[str, Any]) -> None:
        states = spec["states"]
        steps = [s["step"] for s in states.values() if "step" in s]
        seen["compound"] += any("parent" in s for s in states.values())
        seen["wait timeout"] += any(s.get("type") == "wait" and "after" in s
                                    for s in states.values())
        seen["retry"] += any(s["retry"]["attempts_max"] > 1 for s in steps)
        seen["approval"] += any("approval" in s for s in states.values())
        seen["compensation"] += any("compensation" in s for s in steps)
        seen["escalation"] += any("escalate_to" in s for s in steps)
        seen["guard"] += "guard" in repr(states)
        seen["loop"] += any(name.startswith("r") for name in spec["events"])
        seen["budget"] += "budgets" in spec
    tally()
    assert set(seen) == {"compound", "wait timeout", "retry", "approval", "compensation",
                         "escalation", "guard", "loop", "budget"}
    assert min(seen.values()) >= 30, seen


@QUICK
@given(definition=workflow_definitions(), swarm=st.booleans())
def test_the_reference_holds_every_invariant_on_drawn_definitions(
        definition: WorkflowDefinition, swarm: bool) -> None:
    """Twenty seeded runs of each drawn definition, every fault kind on: nothing breaks
    (twenty runs need not exercise every crash point and fault kind: held or untested)."""
    report = fuzz(definition, FuzzOptions(runs=20, swarm=swarm, shrink=False, replay_dir=None,
                                          sim=SimOptions(executions=2, steps_max=300)))
    assert not report.failures, [str(v) for f in report.failures for v in f.violations]
    assert report.verdict in ("held", "untested")
