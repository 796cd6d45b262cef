"""The shared calendar, two agents: under the failure matrix (no approval gate and no
compensation: those entries do not apply) the user invariant no_slot_committed_twice holds with
the calendar's rules; without them, or booking without a hold, a slot is booked twice."""

from __future__ import annotations

import pytest
from matrix import APPROVALS, COMPENSATIONS, assert_entry_holds, campaign, entries, run_entry

from fault_injection import no_faults
from harness import FuzzOptions, ReferenceMachine, SimOptions, fuzz
from harness.checks.coverage import coverage_of
from harness.sim.simulator import Simulator
from scenarios.calendar_world import NaiveSharedCalendar, SharedCalendar

DEFINITION = SharedCalendar.definition
APPLIES = entries(APPROVALS, COMPENSATIONS)


@pytest.mark.parametrize("entry", APPLIES)
def test_failure_matrix(entry: str) -> None:
    outcome = assert_entry_holds(DEFINITION, entry, machine=SharedCalendar)
    assert outcome.metrics.endings["success"] > 0


def test_agents_race_for_a_slot_and_the_loser_looks_again() -> None:
    """With no fault at all, a hold can only fail because the other agent holds the slot: the
    loser lets go and finds another; no slot is ever booked twice."""
    simulator = Simulator(DEFINITION, SimOptions(plan=no_faults()), SharedCalendar)
    lost = 0
    for seed in range(40):
        history = simulator.run(seed).history
        lost += ("holding", "step.failed", "letting_go") in coverage_of(DEFINITION,
                                                                        history).transitions
    assert lost > 0


def test_the_rules_are_what_keeps_slots_apart() -> None:
    """The same definition on the bare tool world (no calendar rules) books a slot twice."""
    outcome = run_entry(DEFINITION, "process_restart_mid_step", seeds=range(60),
                        machine=ReferenceMachine)
    assert {v.rule for v in outcome.violations} == {"no_slot_committed_twice"}


def test_booking_without_a_hold_is_caught_and_shrunk() -> None:
    report = fuzz(NaiveSharedCalendar.definition, FuzzOptions(runs=200, replay_dir=None),
                  machine=NaiveSharedCalendar)
    (failure,) = report.failures
    assert failure.rule == "no_slot_committed_twice"
    assert failure.counterexample is not None and failure.counterexample.steps <= 10


def test_fuzz_campaign_with_every_fault_kind() -> None:
    report = campaign(DEFINITION, machine=SharedCalendar)
    assert report.coverage.states == frozenset(DEFINITION.states)
