"""Drawn statecharts: `harness.strategies` with `statecharts=True`, and the reference machine
holding every invariant on them under every fault kind (the statechart half of
`test_generated_definitions.py`).

Run it longer with `FSM_CHART_EXAMPLES=500`, and the slow campaign with `FSM_SLOW=1`.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from harness import FuzzOptions, SimOptions, fuzz
from harness.strategies import StatechartOptions, workflow_specs
from reference_machine import load_definition

EXAMPLES = int(os.environ.get("FSM_CHART_EXAMPLES", "15"))
QUICK = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SLOW = pytest.mark.skipif(not os.environ.get("FSM_SLOW"), reason="slow: set FSM_SLOW=1")

#: Issue 17 is landing in stages: the reference machine is a statechart engine (the hand-worked
#: tests in tests/unit/chart hold it right); the checkers (harness/checks) and the simulator
#: (harness/sim) are being taught statecharts now. Until they are, drawn statecharts raise
#: false alarms. Seen with the checkers as committed when this test was written:
#: - legal_transitions: a region's move (`p -> p` on step.succeeded, timer.fired, an internal
#:   ping), a join (`p -> p` on done, `p -> failed` forced by compensated), an internal
#:   transition (`w -> w` forced by internal), an eventless path (`w -> g` where the definition
#:   says `w -> q`, the choice `q` passed on the way, or `(start) -> a` past an initial choice);
#: - guards_held: the target past a choice taken for the wrong branch (`s -> a3`, not `c1`);
#: - budgets_within_bounds: a region's moves counted as entries into the parallel or map state;
#: - approved_effects: `needs_approval: "context.amount > 100"` read as always needing one;
#: - compensation_complete: a parallel or map state's failure undoes its regions' steps (by
#:   design), and the checker asks for the steps before it to be undone too.
#: With the checkers' statechart work in progress only one remained: a campaign on a
#: definition of parallel and map blocks is `vacuous` ("no run took any of the declared
#: transitions"): coverage does not count region moves, joins and eventless moves.
#: Strict: once the checkers land these tests pass, and an unexpected pass fails the run;
#: then drop the mark and the `phases` below (they skip shrinking while the failure is known).
PENDING = pytest.mark.xfail(strict=True, reason="issue 17: harness/checks does not know "
                                                "statecharts yet (false alarms listed above)")
PENDING_RUN = settings(QUICK, phases=[Phase.explicit, Phase.generate])

#: the constructs that already hold on their own (their moves are plain ones to the checkers)
HOLDING = StatechartOptions(choices=False, eventless=False, internal=False, parallel=False,
                            maps=False, conditional_approvals=False)


def campaign(spec: dict[str, Any], swarm: bool, runs: int) -> list[str]:
    """Gives what `runs` seeded runs of the definition `spec` broke, every fault kind on (the
    tests draw specs, not loaded definitions: a failing one prints as a mapping to paste)."""
    options = FuzzOptions(runs=runs, swarm=swarm, shrink=False, replay_dir=None,
                          sim=SimOptions(executions=2, steps_max=300))
    report = fuzz(load_definition(spec), options)
    return [str(v) for f in report.failures for v in f.violations] + (
        [f"vacuous: {report.vacuous}"] if report.vacuous else [])


@QUICK
@given(spec=workflow_specs(statecharts=HOLDING), swarm=st.booleans())
def test_the_reference_holds_every_invariant_with_entry_exit_history_and_correlation(
        spec: dict[str, Any], swarm: bool) -> None:
    """Ten seeded runs of each drawn definition with entry/exit actions, a compound left and
    re-entered through its history, and correlated events: nothing breaks."""
    assert campaign(spec, swarm, runs=10) == []


@PENDING
@PENDING_RUN
@given(spec=workflow_specs(statecharts=True), swarm=st.booleans())
def test_the_reference_holds_every_invariant_on_drawn_statecharts(
        spec: dict[str, Any], swarm: bool) -> None:
    """Ten seeded runs of each drawn statechart, every construct on: nothing breaks."""
    assert campaign(spec, swarm, runs=10) == []


@pytest.mark.slow
@SLOW
@PENDING
@settings(PENDING_RUN, max_examples=max(EXAMPLES, 300))
@given(spec=workflow_specs(blocks_max=7, statecharts=True), swarm=st.booleans())
def test_a_longer_campaign_on_drawn_statecharts(spec: dict[str, Any], swarm: bool) -> None:
    """Thirty seeded runs of each of 300 longer drawn statecharts: nothing breaks."""
    assert campaign(spec, swarm, runs=30) == []
