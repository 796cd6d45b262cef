"""Drawn statecharts: `harness.strategies` with `statecharts=True`, and the reference machine
holding every invariant on them under every fault kind (the statechart half of
`test_generated_definitions.py`).

Run it longer with `FSM_CHART_EXAMPLES=500`, and the slow campaigns (each construct alone,
longer chains) with `python -m pytest -m slow`.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import FuzzOptions, SimOptions, fuzz
from harness.strategies import StatechartOptions, workflow_specs
from reference_machine import load_definition

EXAMPLES = int(os.environ.get("FSM_CHART_EXAMPLES", "25"))
QUICK = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
CONSTRUCTS = [f.name for f in dataclasses.fields(StatechartOptions)]


def campaign(spec: dict[str, Any], swarm: bool, runs: int) -> list[str]:
    """Gives what `runs` seeded runs of the definition `spec` broke, every fault kind on (the
    tests draw specs, not loaded definitions: a failing one prints as a mapping to paste)."""
    options = FuzzOptions(runs=runs, swarm=swarm, shrink=False, replay_dir=None,
                          sim=SimOptions(executions=2, steps_max=300))
    report = fuzz(load_definition(spec), options)
    return [str(v) for f in report.failures for v in f.violations] + (
        [f"vacuous: {report.vacuous}"] if report.vacuous else [])


@QUICK
@given(spec=workflow_specs(statecharts=True), swarm=st.booleans())
def test_the_reference_holds_every_invariant_on_drawn_statecharts(
        spec: dict[str, Any], swarm: bool) -> None:
    """Ten seeded runs of each drawn statechart, every construct on: nothing breaks."""
    assert campaign(spec, swarm, runs=10) == []


@pytest.mark.slow
@pytest.mark.parametrize("construct", CONSTRUCTS)
@settings(QUICK, max_examples=max(EXAMPLES, 60))
@given(data=st.data(), swarm=st.booleans())
def test_each_construct_alone_holds(construct: str, data: st.DataObject, swarm: bool) -> None:
    """Each construct alone on the plain blocks (a failure names the construct at fault)."""
    options = dataclasses.replace(StatechartOptions.none(), **{construct: True})
    spec = data.draw(workflow_specs(statecharts=options), label="spec")
    assert campaign(spec, swarm, runs=10) == []


@pytest.mark.slow
@settings(QUICK, max_examples=max(EXAMPLES, 300))
@given(spec=workflow_specs(blocks_max=7, statecharts=True), swarm=st.booleans())
def test_a_longer_campaign_on_drawn_statecharts(spec: dict[str, Any], swarm: bool) -> None:
    """Thirty seeded runs of each of 300 longer drawn statecharts: nothing breaks."""
    assert campaign(spec, swarm, runs=30) == []
