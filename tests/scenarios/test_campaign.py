"""A fault campaign: thousands of simulated steps of both bundled workflows under every fault
kind (the default plan, swarm plans, and every kind at twice its default rate), with every
invariant checked over every run's history (the checkers' own tests are in
tests/harness/checks/invariants/test_checkers.py).

Run with `-s` to see the campaign's size and wall time.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from recording import recording_factory

from fault_injection import FaultKind, FaultPlan, FaultRate
from fault_injection._plan import DEFAULT_RATES
from harness import (
    Applied,
    Delivered,
    FaultInjected,
    ReferenceMachine,
    SimOptions,
    SimulationResult,
    Simulator,
    check,
)
from harness.sim.simulator import plan_for
from reference_machine import WorkflowDefinition, load_definition

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ("refund_escalation", "support_triage")
SEEDS = range(100)  # per workflow and mode: default and swarm
DOUBLED_SEEDS = range(40)  # per workflow, every kind at twice its default rate
EXECUTIONS = 4
STEPS_MIN = 10_000


def doubled_plan() -> FaultPlan:
    """Gives a plan with every fault kind on at twice its default rate."""
    return FaultPlan(tuple(FaultRate(kind, min(1.0, 2 * rate))
                           for kind, rate in DEFAULT_RATES.items()))


# -- what the harness's invariants do not see: the store's own numbering ------------------------


def log_problems(machine: ReferenceMachine) -> list[str]:
    """Tells of every execution whose log sequence is not 1, 2, 3..."""
    problems = []
    for eid in machine.store.execution_ids():
        sequences = [entry.sequence for entry in machine.store.log(eid)]
        if sequences != list(range(1, len(sequences) + 1)):
            problems.append(f"{eid}: log sequences {sequences}")
    return problems


# -- the campaign -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """One run of the campaign and what the checks found in it."""

    workflow: str
    mode: str
    result: SimulationResult
    problems: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{self.workflow}/{self.mode}/seed {self.result.seed}"


@dataclass(frozen=True)
class Campaign:
    runs: tuple[Run, ...]
    seconds: float

    @property
    def steps(self) -> int:
        return sum(run.result.steps for run in self.runs)


def check_run(definition: WorkflowDefinition, result: SimulationResult,
              machine: ReferenceMachine) -> tuple[str, ...]:
    """Gives every problem of one run: each invariant the harness checks, and the log's
    numbering."""
    return (*(str(v) for v in check(definition, result.history)), *log_problems(machine))


def campaign_plans(definition: WorkflowDefinition) -> list[tuple[str, FaultPlan, Sequence[int]]]:
    return [("default", plan_for(definition), SEEDS),
            ("swarm", plan_for(definition, swarm=True), SEEDS),
            ("doubled", doubled_plan(), DOUBLED_SEEDS)]


@pytest.fixture(scope="module")
def campaign() -> Campaign:
    """Runs the whole campaign once for the tests of this module."""
    began = time.perf_counter()
    runs = []
    for workflow in WORKFLOWS:
        definition = load_definition(ROOT / "scenarios" / f"{workflow}.yaml")
        for mode, plan, seeds in campaign_plans(definition):
            factory, made = recording_factory()
            simulator = Simulator(definition, SimOptions(executions=EXECUTIONS, plan=plan),
                                  machine=factory)
            for seed in seeds:
                made.clear()
                result = simulator.run(seed)
                runs.append(Run(workflow, mode, result, check_run(definition, result, made[0])))
    return Campaign(tuple(runs), time.perf_counter() - began)


def test_campaign_size_and_time(campaign: Campaign) -> None:
    """The campaign simulates at least 10,000 steps; its size and wall time are printed."""
    modes = Counter(run.mode for run in campaign.runs)
    print(f"\ncampaign: {len(campaign.runs)} runs ({dict(modes)}), {campaign.steps} steps, "
          f"{campaign.seconds:.1f}s wall time, "
          f"{campaign.steps / campaign.seconds:,.0f} steps/s")
    assert campaign.steps >= STEPS_MIN
    assert modes["default"] == modes["swarm"]


def test_no_machine_failure(campaign: Campaign) -> None:
    """No run ends with the machine raising, hanging or answering nonsense."""
    failed = [f"{run.name}: {run.result.failure}\n{run.result.traceback}"
              for run in campaign.runs if run.result.failure is not None]
    assert not failed, "\n".join(failed[:5])


def test_every_fault_kind_injected(campaign: Campaign) -> None:
    """Each of the 17 fault kinds of the catalogue is injected at least once, but
    wrong_correlation: the workflows declare no `correlate:` (tests/harness/sim/
    test_chart_simulation.py runs it)."""
    injected = Counter(record.fault for run in campaign.runs for record in run.result.history
                       if isinstance(record, FaultInjected))
    assert len(FaultKind) == 17
    missing = [str(kind) for kind in FaultKind
               if injected[kind] == 0 and kind is not FaultKind.WRONG_CORRELATION]
    assert not missing, f"never injected: {missing}; injected: {dict(injected)}"


def test_every_run_ends_final(campaign: Campaign) -> None:
    """Every run ends with every execution final (the ones that do not are named, with why)."""
    unfinished = [f"{run.name}: {run.result.status} after {run.result.steps} steps; "
                  + ", ".join(f"{eid} in {obs.state} ({obs.status})"
                              for eid, obs in run.result.final.items() if obs.status != "final")
                  for run in campaign.runs if run.result.status != "final"]
    assert not unfinished, "\n".join(unfinished)


def test_safety_holds_in_every_run(campaign: Campaign) -> None:
    """Every invariant holds in every run of the campaign, and every log is numbered 1..n."""
    problems = [f"{run.name}: {problem}" for run in campaign.runs for problem in run.problems]
    assert not problems, "\n".join(problems[:20])


def test_campaign_exercised_the_gate(campaign: Campaign) -> None:
    """The approval gate was exercised: refunds applied, approvals granted, forgeries refused."""
    applied = forged = 0
    for run in campaign.runs:
        for record in run.result.history:
            if isinstance(record, Applied) and record.tool == "payments.refund":
                applied += 1
            elif isinstance(record, Delivered) and record.via == "forged":
                forged += 1
    assert applied > 0
    assert forged > 0
