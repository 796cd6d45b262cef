"""Coverage: which states, transitions, guard outcomes, fault kinds and crash points a set of runs
reached, against what the definition, the plan and the machine offer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from fault_injection import FaultPlan
from harness.checks.checkers import _legal_table, guard_outcomes, per_definition
from harness.sim.history import Committed, Crashed, FaultInjected, HistoryRecord, Observed
from reference_machine import WorkflowDefinition

__all__ = [
    "UNSEEN_EVENT",
    "Coverage",
    "coverage_of",
    "covered_transitions",
    "transition_label",
    "vacuity",
]

Transition = tuple[str, str, str]  # (source, event or "forced:<reason>", target)
GuardOutcome = tuple[str, str, int, bool]  # (state, event, transition index, held)


@dataclass(frozen=True, slots=True)
class Coverage:
    """What was reached; `merge` adds another run's."""

    states: frozenset[str] = frozenset()
    transitions: frozenset[Transition] = frozenset()
    guards: frozenset[GuardOutcome] = frozenset()
    faults: frozenset[str] = frozenset()
    crash_points: frozenset[str] = frozenset()

    def merge(self, other: Coverage) -> Coverage:
        """Gives what either reached."""
        return Coverage(self.states | other.states, self.transitions | other.transitions,
                        self.guards | other.guards, self.faults | other.faults,
                        self.crash_points | other.crash_points)

    def report(self, definition: WorkflowDefinition, plan: FaultPlan | None = None,
               crash_points: Sequence[str] = ()) -> dict[str, Any]:
        """Gives, per dimension, how much of what exists was reached and what was not (as
        plain JSON data, lists sorted)."""
        universe = _universe(definition)
        parts: dict[str, tuple[Iterable[Any], Iterable[Any]]] = {
            "states": (self.states, universe["states"]),
            "transitions": (self.transitions, universe["transitions"]),
            "guards": (self.guards, universe["guards"]),
        }
        if plan is not None:
            parts["faults"] = (self.faults, [str(kind) for kind in plan.kinds])
        if crash_points:
            parts["crash_points"] = (self.crash_points, crash_points)
        report: dict[str, Any] = {}
        for name, (reached, offered) in parts.items():
            offered_set = set(offered)
            hit = (covered_transitions(self.transitions, offered_set) if name == "transitions"
                   else set(reached) & offered_set)
            report[name] = {
                "reached": len(hit), "of": len(offered_set),
                "missing": [list(item) if isinstance(item, tuple) else item
                            for item in sorted(offered_set - hit, key=repr)],
            }
        return report


@per_definition
def _universe(definition: WorkflowDefinition) -> dict[str, frozenset[Any]]:
    """Gives what a definition offers: its leaf states, declared transitions, guard outcomes."""
    parents = {state.parent for state in definition.states.values() if state.parent}
    states = frozenset(name for name in definition.states if name not in parents)
    transitions = frozenset((source, event, target)
                            for (source, event, forced), targets in
                            _legal_table(definition).items()
                            if not forced and source in states  # leaves hold the inherited
                            for target in targets)
    guards = frozenset(
        (name, event, index, held)
        for name in states for event, candidates in definition.states[name].on.items()
        for index, transition in enumerate(candidates) if transition.guard is not None
        for held in (False, True))
    return {"states": states, "transitions": transitions, "guards": guards}


UNSEEN_EVENT = "?"  # a move seen in observations only: a machine that reports no commits


def covered_transitions(reached: Iterable[Transition], declared: Iterable[Transition]
                        ) -> set[Transition]:
    """Gives the declared transitions a set of runs took. A move seen only in observations
    (its event unknown) covers the declared transitions between the same two states."""
    reached = set(reached)
    seen = {(source, target) for source, event, target in reached if event == UNSEEN_EVENT}
    return {t for t in declared if t in reached or (t[0], t[2]) in seen}


def vacuity(definition: WorkflowDefinition, coverage: Coverage,
            coverage_min: float | None = None) -> str:
    """Gives why a campaign that reached `coverage` tested nothing worth a verdict: no
    declared transition taken, or fewer than `coverage_min` percent of them ("" when it did)."""
    declared = _universe(definition)["transitions"]
    if not declared:
        return "the definition declares no transition to take: nothing can be exercised"
    taken = len(covered_transitions(coverage.transitions, declared))
    if taken == 0:
        return (f"no run took any of the {len(declared)} declared transitions: the machine "
                "never moved (every event refused, or a move it made never showed)")
    share = 100 * taken / len(declared)
    if coverage_min is not None and share < coverage_min:
        return (f"{taken} of {len(declared)} declared transitions taken ({share:.0f}%), under "
                f"the floor of {coverage_min:g}%")
    return ""


def transition_label(record: Committed) -> str:
    """Gives the label a committed move is covered under: its event, `forced:<reason>`, or
    `step.failed` for a run that undid its steps and took the step's declared failure move."""
    if record.forced == "compensated":
        return "step.failed"
    return f"forced:{record.forced}" if record.forced else record.moved


def coverage_of(definition: WorkflowDefinition, history: Sequence[HistoryRecord], *,
                guards: bool = True) -> Coverage:
    """Gives what one run's history reached (`guards=False` skips evaluating guards again,
    for a caller that needs the moves alone)."""
    states: set[str] = set()
    transitions: set[Transition] = set()
    faults: set[str] = set()
    points: set[str] = set()
    committed = False
    last: dict[str, tuple[str, int]] = {}
    for record in history:
        if type(record) is Committed:
            if record.decision != "accepted":
                continue
            committed = True
            states.add(record.state)
            if record.moved and record.from_state:
                transitions.add((record.from_state, transition_label(record), record.state))
        elif type(record) is Observed:
            states.add(record.state)
            before = last.get(record.execution)
            last[record.execution] = (record.state, record.version)
            # a move seen from outside: the state changed, or it stayed and the version went
            # up (a self-transition)
            if not committed and before is not None and (
                    before[0] != record.state or record.version > before[1]):
                transitions.add((before[0], UNSEEN_EVENT, record.state))
        elif type(record) is FaultInjected:
            faults.add(str(record.fault))
        elif type(record) is Crashed:
            points.add(record.point)
    outcomes = frozenset(guard_outcomes(definition, history)) if guards else frozenset()
    return Coverage(frozenset(states), frozenset(transitions), outcomes, frozenset(faults),
                    frozenset(points))
