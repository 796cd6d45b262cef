"""The failure matrix the scenario tests run: each entry is a fault plan (or a world) that
makes one failure happen, and what shows in the history that it did.

An entry runs a scenario over several seeds, checks every invariant over each history, and
gives what struck, so a test can say both "every invariant held" and "the failure really
happened" (an entry that never strikes would prove nothing).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fault_injection import FaultPlan, load_plan
from harness import (
    INVARIANTS,
    Committed,
    FaultInjected,
    FuzzOptions,
    FuzzReport,
    HistoryRecord,
    MachineFactory,
    ReferenceMachine,
    SimOptions,
    Simulator,
    Violation,
    check,
    fuzz,
)
from harness.checks.metrics import Metrics, metrics_of
from reference_machine import WorkflowDefinition, load_definition

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


@dataclass(frozen=True)
class Entry:
    """One failure: the plan that causes it, the simulation options, and the sign it struck."""

    plan: Mapping[str, Any]
    struck: Callable[[Outcome], bool]
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class Outcome:
    """What a matrix entry's runs gave: violations, faults injected by kind, metrics, and the
    forced moves taken."""

    violations: list[Violation] = field(default_factory=list)
    faults: Counter[str] = field(default_factory=Counter)
    metrics: Metrics = field(default_factory=Metrics)
    forced: Counter[str] = field(default_factory=Counter)
    histories: list[Sequence[HistoryRecord]] = field(default_factory=list)


def _faulted(*kinds: str) -> Callable[[Outcome], bool]:
    return lambda outcome: all(outcome.faults[kind] > 0 for kind in kinds)


def _undo_failed(outcome: Outcome) -> bool:
    """A compensation's call failed (its key ends in /undo)."""
    return any(type(r) is FaultInjected and "/undo" in r.detail
               for history in outcome.histories for r in history)


MATRIX: dict[str, Entry] = {
    "tool_timeout": Entry(
        {"faults": {"tool_timeout_before_apply": 0.3, "tool_timeout_after_apply": 0.3}},
        _faulted("tool_timeout_before_apply", "tool_timeout_after_apply")),
    # a result handed over twice: an outside event delivered twice, and a second worker that
    # records the same call's result beside the first
    "duplicate_tool_result": Entry(
        {"faults": {"duplicate_event": 0.5, "second_worker": 0.3}},
        _faulted("second_worker")),
    "invalid_agent_output": Entry({"faults": {"malformed_output": 0.4}},
                                  _faulted("malformed_output")),
    "approval_denied": Entry({"faults": {}}, lambda o: o.metrics.approvals["denied"] > 0,
                             {"grant_rate": 0.0}),
    # the answer is lost and comes again only days later, past the request's expiry
    "approval_expired": Entry(
        {"faults": {"dropped_event": {"rate": 1.0, "redeliver_after": "3d"}}},
        lambda o: o.metrics.approvals["expired"] > 0),
    "process_restart_mid_step": Entry({"faults": {"crash": 0.2}}, _faulted("crash")),
    # every undo fails; forward steps fail often enough that runs unwind
    "compensation_failure": Entry(
        {"faults": {"tool_permanent": {"rate": 1.0, "tools": "COMPENSATIONS"},
                    "tool_transient": {"rate": 0.6, "tools": "FORWARD"}}}, _undo_failed),
    "forged_approval": Entry({"faults": {"forged_approval": 1.0}},
                             _faulted("forged_approval")),
}


APPROVALS = frozenset({"approval_denied", "approval_expired", "forged_approval"})
"""The entries that need an approval gate."""
COMPENSATIONS = frozenset({"compensation_failure"})
"""The entries that need a compensation."""


def entries(*without: frozenset[str]) -> list[str]:
    """Gives the matrix's entries, sorted, less those a scenario has nothing for."""
    left = set(MATRIX)
    for names in without:
        left -= names
    return sorted(left)


def scenario(name: str) -> WorkflowDefinition:
    """Loads a bundled scenario by name."""
    return load_definition(SCENARIOS / f"{name}.yaml")


def _tools_named(definition: WorkflowDefinition, plan: Mapping[str, Any]) -> dict[str, Any]:
    """Fills in the tool lists an entry names by role: the compensation tools, the others."""
    undo = sorted({state.step.compensation.tool for state in definition.states.values()
                   if state.step is not None and state.step.compensation is not None})
    roles = {"COMPENSATIONS": undo, "FORWARD": sorted(set(definition.tools) - set(undo))}
    faults = {kind: {**spec, "tools": roles[spec["tools"]]}
              if isinstance(spec, dict) and spec.get("tools") in roles else spec
              for kind, spec in plan["faults"].items()}
    return {"faults": faults}


def run_entry(definition: WorkflowDefinition, name: str, seeds: range = range(30),
              machine: MachineFactory = ReferenceMachine, **options: Any) -> Outcome:
    """Runs one matrix entry over `seeds` (three executions each) on `machine`; gives what
    happened."""
    entry = MATRIX[name]
    plan: FaultPlan = load_plan(_tools_named(definition, entry.plan))
    outcome = Outcome()
    simulator = Simulator(definition, SimOptions(plan=plan, **{**entry.options, **options}),
                          machine)
    for seed in seeds:
        history = simulator.run(seed).history
        outcome.histories.append(history)
        outcome.violations += check(definition, history)
        outcome.faults.update(str(r.fault) for r in history if type(r) is FaultInjected)
        outcome.metrics = outcome.metrics.merge(metrics_of(definition, history))
        outcome.forced.update(r.forced for r in history
                              if type(r) is Committed and r.forced)
    return outcome


def assert_entry_holds(definition: WorkflowDefinition, name: str,
                       machine: MachineFactory = ReferenceMachine, **options: Any) -> Outcome:
    """Runs an entry and checks that it struck and that every invariant held."""
    outcome = run_entry(definition, name, machine=machine, **options)
    assert MATRIX[name].struck(outcome), f"{name} never struck {definition.name}"
    assert outcome.violations == [], "\n".join(map(str, outcome.violations[:5]))
    return outcome


def campaign(definition: WorkflowDefinition, runs: int = 150,
             machine: MachineFactory = ReferenceMachine) -> FuzzReport:
    """A fuzz campaign with every fault kind on in every run (no swarm), no replay files."""
    report = fuzz(definition, FuzzOptions(runs=runs, swarm=False, replay_dir=None),
                  machine=machine)
    assert report.held, "\n".join(str(v) for f in report.failures for v in f.violations)
    assert set(report.invariants) == set(INVARIANTS)
    return report
