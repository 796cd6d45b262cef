"""A fault campaign: thousands of simulated steps of both bundled workflows under every fault
kind (the default plan, swarm plans, and every kind at twice its default rate), with safety
checked over every run from the history and the effect ledger, never from the machine's word.

Run with `-s` to see the campaign's size and wall time.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from recording import recording_factory

from fault_injection import FaultKind, FaultPlan, FaultRate
from fault_injection._plan import DEFAULT_RATES
from harness import (
    Applied,
    Committed,
    Delivered,
    FaultInjected,
    HistoryRecord,
    LedgerEntry,
    ReferenceMachine,
    SimOptions,
    SimulationResult,
    Simulator,
)
from harness._simulator import plan_for
from reference_machine import APPROVAL_GRANTED, WorkflowDefinition, load_definition

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ("refund_escalation", "support_triage")
SEEDS = range(100)  # per workflow and mode: default and swarm
DOUBLED_SEEDS = range(40)  # per workflow, every kind at twice its default rate
EXECUTIONS = 4
STEPS_MIN = 10_000
#: How the simulated approver's events may reach the machine: sent, or that same event
#: (same id) dropped and redelivered, held back, duplicated, or sent again after no answer;
#: a late copy carries the same human decision under a new id. Never `forged`.
GENUINE_VIAS = frozenset({"approval", "redelivered", "reordered", "duplicate", "retry", "late"})


def doubled_plan() -> FaultPlan:
    """Gives a plan with every fault kind on at twice its default rate."""
    return FaultPlan(tuple(FaultRate(kind, min(1.0, 2 * rate))
                           for kind, rate in DEFAULT_RATES.items()))


# -- safety checks: pure functions over what a run recorded -------------------------------------


def duplicate_effects(ledger: Iterable[LedgerEntry], honours: Mapping[str, bool]) -> list[str]:
    """Tells of every (tool, key) the ledger holds twice, for tools that honour keys."""
    first: dict[tuple[str, str], int] = {}
    problems = []
    for entry in ledger:
        if not honours.get(entry.tool, False):
            continue
        seen = first.setdefault((entry.tool, entry.key), entry.seq)
        if seen != entry.seq:
            problems.append(f"{entry.tool} applied twice under key {entry.key!r} "
                            f"(ledger #{seen} and #{entry.seq})")
    return problems


def final_stays_final(definition: WorkflowDefinition,
                      history: Iterable[HistoryRecord]) -> list[str]:
    """Tells of every accepted commit to an execution after it reached a final state."""
    finished: dict[str, Committed] = {}
    problems = []
    for record in history:
        if not isinstance(record, Committed) or record.decision != "accepted":
            continue
        done = finished.get(record.execution)
        if done is not None:
            problems.append(f"{record.execution}: {record.event_id} accepted (to "
                            f"{record.state!r}, version {record.version}) after it became final "
                            f"in {done.state!r} at step {done.step}")
        elif definition.states[record.state].final:
            finished[record.execution] = record
    return problems


def gated_without_approval(definition: WorkflowDefinition,
                           history: Iterable[HistoryRecord]) -> list[str]:
    """Tells of every effect of an approval-gated step applied at the world without a granted,
    genuine approval accepted earlier for its execution (one approval per gated key)."""
    gated = {state.step.tool for state in definition.states.values()
             if state.step is not None and state.step.needs_approval}
    delivered: dict[tuple[str, str], Delivered] = {}
    forged: set[str] = set()
    approvals: Counter[str] = Counter()
    keys: dict[str, set[str]] = defaultdict(set)
    problems = []
    for record in history:
        if isinstance(record, Delivered):
            delivered.setdefault((record.execution, record.event_id), record)
            if record.via == "forged":
                forged.add(record.event_id)
        elif isinstance(record, Committed) and record.decision == "accepted":
            sent = delivered.get((record.execution, record.event_id))
            if sent is None or sent.type != APPROVAL_GRANTED:
                continue
            if (record.event_id in forged or sent.source != "human"
                    or sent.via not in GENUINE_VIAS):
                problems.append(f"{record.execution}: forged approval {record.event_id} "
                                f"(source {sent.source!r}, via {sent.via!r}) was accepted")
            else:
                approvals[record.execution] += 1
        elif isinstance(record, Applied) and record.tool in gated:
            keys[record.execution].add(record.key)
            if len(keys[record.execution]) > approvals[record.execution]:
                problems.append(f"{record.execution}: {record.tool} applied under "
                                f"{record.key!r} at step {record.step} with "
                                f"{approvals[record.execution]} genuine approval(s) granted for "
                                f"{len(keys[record.execution])} gated key(s)")
    return problems


def versions_not_increasing(history: Iterable[HistoryRecord]) -> list[str]:
    """Tells of every accepted commit whose version is not above the execution's last one, and
    of every ignored or rejected commit that moved the version."""
    last: dict[str, int] = {}
    problems = []
    for record in history:
        if not isinstance(record, Committed):
            continue
        before = last.get(record.execution, 0)
        if record.decision == "accepted":
            if record.version <= before:
                problems.append(f"{record.execution}: accepted {record.event_id} at version "
                                f"{record.version}, not above {before}")
            last[record.execution] = record.version
        elif record.version != before:
            problems.append(f"{record.execution}: {record.decision} {record.event_id} moved the "
                            f"version from {before} to {record.version}")
    return problems


def store_problems(machine: ReferenceMachine) -> list[str]:
    """Tells of every execution whose log sequence is not 1, 2, 3... or whose log does not
    replay to the stored record."""
    problems = []
    for eid in machine.store.execution_ids():
        sequences = [entry.sequence for entry in machine.store.log(eid)]
        if sequences != list(range(1, len(sequences) + 1)):
            problems.append(f"{eid}: log sequences {sequences}")
        try:
            replayed = machine.runtime.replay(eid)
        except Exception as exc:
            problems.append(f"{eid}: replay failed: {exc}")
            continue
        if replayed != machine.store.load(eid).execution:
            problems.append(f"{eid}: replay differs from the stored record")
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
    """Gives every safety problem of one run."""
    honours = {name: tool.idempotency_keys for name, tool in definition.tools.items()}
    return (*duplicate_effects(result.ledger, honours),
            *final_stays_final(definition, result.history),
            *gated_without_approval(definition, result.history),
            *versions_not_increasing(result.history),
            *store_problems(machine))


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
    """Each of the 16 fault kinds of the catalogue is injected at least once."""
    injected = Counter(record.fault for run in campaign.runs for record in run.result.history
                       if isinstance(record, FaultInjected))
    assert len(FaultKind) == 16
    missing = [str(kind) for kind in FaultKind if injected[kind] == 0]
    assert not missing, f"never injected: {missing}; injected: {dict(injected)}"


def test_every_run_ends_final(campaign: Campaign) -> None:
    """Every run ends with every execution final (the ones that do not are named, with why)."""
    unfinished = [f"{run.name}: {run.result.status} after {run.result.steps} steps; "
                  + ", ".join(f"{eid} in {obs.state} ({obs.status})"
                              for eid, obs in run.result.final.items() if obs.status != "final")
                  for run in campaign.runs if run.result.status != "final"]
    assert not unfinished, "\n".join(unfinished)


def test_safety_holds_in_every_run(campaign: Campaign) -> None:
    """Every safety check of `check_run` holds in every run of the campaign."""
    # no keyed effect twice, nothing accepted after final, no gated effect without a genuine
    # approval, versions increase, logs are numbered 1..n and replay to the stored record
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


# -- the checks can fail ------------------------------------------------------------------------


REFUND = load_definition(ROOT / "scenarios" / "refund_escalation.yaml")


def _approval(step: int, eid: str, event_id: str, via: str, source: str = "human") -> Delivered:
    return Delivered(step, 0, eid, event_id, APPROVAL_GRANTED, source, f"{eid}/req", {}, via)


def test_checks_report_planted_violations() -> None:
    """Each check reports a history or ledger that breaks its rule, and passes a sound one."""
    ledger = [LedgerEntry(1, 0, "x1", "payments.refund", "x1/executing_refund/1", "{}"),
              LedgerEntry(2, 0, "x1", "payments.refund", "x1/executing_refund/1", "{}"),
              LedgerEntry(3, 0, "x1", "email.send", "x1/notifying/1", "{}"),
              LedgerEntry(4, 0, "x1", "email.send", "x1/notifying/1", "{}")]
    honours = {"payments.refund": True, "email.send": False}
    assert len(duplicate_effects(ledger, honours)) == 1
    assert duplicate_effects(ledger[:1] + ledger[2:], honours) == []

    after_final = [Committed(1, 0, "x1", "e1", "accepted", 1, "rejected"),
                   Committed(2, 0, "x1", "e2", "rejected", 1, "rejected"),
                   Committed(3, 0, "x1", "e3", "accepted", 2, "planning")]
    assert len(final_stays_final(REFUND, after_final)) == 1
    assert final_stays_final(REFUND, after_final[:2]) == []

    refund = Applied(9, 0, "x1", "payments.refund", "x1/executing_refund/1", "{}", 1)
    forged = [_approval(1, "x1", "ev1", "forged", "agent"),
              Committed(1, 0, "x1", "ev1", "accepted", 3, "executing_refund"), refund]
    assert any("forged" in p for p in gated_without_approval(REFUND, forged))
    assert len(gated_without_approval(REFUND, [refund])) == 1
    genuine = [_approval(1, "x1", "ev2", "approval"),
               Committed(1, 0, "x1", "ev2", "accepted", 3, "executing_refund"), refund]
    assert gated_without_approval(REFUND, genuine) == []
    second_visit = Applied(20, 0, "x1", "payments.refund", "x1/executing_refund/2", "{}", 2)
    assert len(gated_without_approval(REFUND, [*genuine, second_visit])) == 1

    versions = [Committed(1, 0, "x1", "e1", "accepted", 1, "planning"),
                Committed(2, 0, "x1", "e2", "accepted", 1, "awaiting_approval"),
                Committed(3, 0, "x1", "e3", "ignored", 2, "")]
    assert len(versions_not_increasing(versions)) == 2
    assert versions_not_increasing(versions[:1]) == []
