"""Coverage: which states, transitions, guard outcomes, fault kinds and crash points a set of runs
reached, against what the definition, the plan and the machine offer.

A statechart adds what its constructs offer: the regions (and map items) entered, the eventless
moves taken, the compound states whose history was resumed, and both sides of each conditional
approval (asked, not asked). States reached inside regions, and the moves regions made, count
as states and transitions like any other.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from fault_injection import FaultPlan
from harness.checks.invariants import (
    ALWAYS,
    COMPENSATED,
    DONE,
    INTERNAL,
    Chart,
    chart_of,
    guard_outcomes,
    legal_table,
    per_definition,
    plain_table,
    states_entered,
)
from harness.sim.history import Committed, Crashed, FaultInjected, HistoryRecord, Observed
from reference_machine import WorkflowDefinition

__all__ = [
    "UNSEEN_EVENT",
    "Coverage",
    "correlation_blind_spot",
    "coverage_of",
    "covered_transitions",
    "transition_label",
    "vacuity",
]

Transition = tuple[str, str, str]  # (source, event or "forced:<reason>", target)
GuardOutcome = tuple[str, str, int, bool]  # (state, event, transition index, held)
ASKED, NOT_ASKED = "asked", "not asked"


@dataclass(frozen=True, slots=True)
class Coverage:
    """What was reached; `merge` adds another run's. `regions` are the regions (a parallel
    state's children) and map states whose items were entered, `resumes` the compound states
    re-entered through their history, `approvals` (step state, "asked" or "not asked") for
    steps whose approval is conditional."""

    states: frozenset[str] = frozenset()
    transitions: frozenset[Transition] = frozenset()
    guards: frozenset[GuardOutcome] = frozenset()
    faults: frozenset[str] = frozenset()
    crash_points: frozenset[str] = frozenset()
    regions: frozenset[str] = frozenset()
    resumes: frozenset[str] = frozenset()
    approvals: frozenset[tuple[str, str]] = frozenset()

    def merge(self, other: Coverage) -> Coverage:
        """Gives what either reached."""
        return Coverage(self.states | other.states, self.transitions | other.transitions,
                        self.guards | other.guards, self.faults | other.faults,
                        self.crash_points | other.crash_points, self.regions | other.regions,
                        self.resumes | other.resumes, self.approvals | other.approvals)

    def report(self, definition: WorkflowDefinition, plan: FaultPlan | None = None,
               crash_points: Sequence[str] = ()) -> dict[str, Any]:
        """Gives, per dimension, how much of what exists was reached and what was not (as
        plain JSON data, lists sorted). A statechart's dimensions (`regions`, `eventless`,
        `history`, `approvals`) are there only for a definition that offers some."""
        universe = coverage_universe(definition)
        parts: dict[str, tuple[Iterable[Any], Iterable[Any]]] = {
            "states": (self.states, universe["states"]),
            "transitions": (self.transitions, universe["transitions"]),
            "guards": (self.guards, universe["guards"]),
        }
        extras: tuple[tuple[str, Iterable[Any]], ...] = (
            ("regions", self.regions), ("eventless", self.transitions),
            ("history", self.resumes), ("approvals", self.approvals))
        for name, reached in extras:
            if universe[name]:
                parts[name] = (reached, universe[name])
        if plan is not None:
            parts["faults"] = (self.faults, [str(kind) for kind in plan.kinds])
        if crash_points:
            parts["crash_points"] = (self.crash_points, crash_points)
        report: dict[str, Any] = {}
        for name, (reached, offered) in parts.items():
            offered_set = set(offered)
            hit = (covered_transitions(self.transitions, offered_set)
                   if name in ("transitions", "eventless") else set(reached) & offered_set)
            report[name] = {
                "reached": len(hit), "of": len(offered_set),
                "missing": [list(item) if isinstance(item, tuple) else item
                            for item in sorted(offered_set - hit, key=repr)],
            }
        return report


@per_definition
def coverage_universe(definition: WorkflowDefinition) -> dict[str, frozenset[Any]]:
    """Gives what a definition offers: its leaf states, declared transitions (a parallel or
    map state's own, its joins, eventless and internal ones included), guard outcomes, and a
    statechart's regions, eventless moves, history compounds and conditional approvals."""
    chart = chart_of(definition)
    parents = {state.parent for state in definition.states.values() if state.parent}
    states = frozenset(name for name in definition.states if name not in parents)
    sources = states | chart.scoped  # leaves hold the inherited; a parallel state its own
    transitions = {(source, event, target)
                   for (source, event, forced), targets in plain_table(definition).items()
                   if not forced and source in sources for target in targets}
    transitions |= {(source, event, source) for source, event in chart.internal
                    if source in sources}
    guards = frozenset(
        (name, event, index, held)
        for name in sources for event, candidates in (
            *definition.states[name].on.items(), (ALWAYS, definition.states[name].always),
            (DONE, definition.states[name].done))
        for index, transition in enumerate(candidates) if transition.guard is not None
        for held in (False, True))
    eventless = frozenset(t for t in transitions if t[1] == ALWAYS)
    resumable = frozenset(name for name, state in definition.states.items()
                          if state.history and definition.scoped)
    approvals = frozenset((name, side) for name in chart.conditional
                          for side in (ASKED, NOT_ASKED))
    return {"states": states, "transitions": frozenset(transitions), "guards": guards,
            "regions": frozenset(chart.owner), "eventless": eventless, "history": resumable,
            "approvals": approvals}


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
    declared = coverage_universe(definition)["transitions"]
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


def correlation_blind_spot(definition: WorkflowDefinition, coverage: Coverage) -> str:
    """Says which untaken transitions wait on an event with `correlate:` fields, when the runs
    had a machine that reported no commits (its moves seen in observations only: no
    `watch()`): the simulator fills those fields from the context as last committed, which
    such a machine never shows, so they carry the start context's values, and an event
    correlated on a value the run set later (a tracking number, a ticket id) never matches.
    Gives "" when no such transition was missed, or the machine reported its commits."""
    if not any(event == UNSEEN_EVENT for _, event, _ in coverage.transitions):
        return ""
    declared = coverage_universe(definition)["transitions"]
    missed = declared - covered_transitions(coverage.transitions, declared)
    events = sorted({event for _, event, _ in missed
                     if event in definition.events and definition.events[event].correlate})
    if not events:
        return ""
    count = sum(1 for _, event, _ in missed if event in events)
    return (f"{count} transition{'s' if count > 1 else ''} on {', '.join(events)} never "
            "taken; the machine reports no commits (no watch()), so those events' "
            "`correlate:` fields carried the start context's values, not the run's: give the "
            "machine watch() to have them follow its context (the machine-under-test guide)")


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
    chart = chart_of(definition)
    charted = _Charted(definition, chart) if chart.used else None
    previous: dict[str, Committed] = {}
    for record in history:
        if type(record) is Committed:
            if record.decision != "accepted":
                continue
            committed = True
            states.add(record.state)
            if charted is not None:
                charted.add(record, previous.get(record.execution), states, transitions)
                previous[record.execution] = record
            elif record.moved and record.from_state:
                transitions.add((record.from_state, transition_label(record), record.state))
        elif type(record) is Observed:
            states.add(record.state)
            before = last.get(record.execution)
            last[record.execution] = (record.state, record.version)
            if committed:
                continue
            for source, target in record.moves:  # the moves its machine told it made
                states.update((source, target))
                transitions.add((source, UNSEEN_EVENT, target))
            # a move seen from outside: the state changed, or it stayed and the version went
            # up (a self-transition); not where the machine told its moves (from where it was
            # to where it is need not be one move: it may be another branch's state)
            if not record.moves and before is not None and (
                    before[0] != record.state or record.version > before[1]):
                transitions.add((before[0], UNSEEN_EVENT, record.state))
        elif type(record) is FaultInjected:
            faults.add(str(record.fault))
        elif type(record) is Crashed:
            points.add(record.point)
    outcomes = frozenset(guard_outcomes(definition, history)) if guards else frozenset()
    if charted is None:
        return Coverage(frozenset(states), frozenset(transitions), outcomes,
                        frozenset(faults), frozenset(points))
    return Coverage(frozenset(states), frozenset(transitions), outcomes, frozenset(faults),
                    frozenset(points), frozenset(charted.regions), frozenset(charted.resumes),
                    frozenset(charted.approvals))


class _Charted:
    """What a statechart's commits reach: each move of a macrostep (its event's, then every
    eventless one on its path), the regions' moves and states, regions entered, history
    resumed and how conditional approvals went."""

    def __init__(self, definition: WorkflowDefinition, chart: Chart) -> None:
        self.definition = definition
        self.chart = chart
        self.plain = plain_table(definition)
        self.legal = legal_table(definition)
        self.regions: set[str] = set()
        self.resumes: set[str] = set()
        self.approvals: set[tuple[str, str]] = set()
        self.visited: dict[str, set[str]] = {}  # per execution, where it (and its regions) was

    def add(self, record: Committed, prev: Committed | None, states: set[str],
            transitions: set[Transition]) -> None:
        chart = self.chart
        seen = self.visited.setdefault(record.execution, set())
        states.update(record.via)
        if record.moved:
            self._path(record, prev, seen, transitions)
        seen.add(record.state)
        vias = record.inner_via or ((),) * len(record.inner)
        for (source, event, target), via in zip(record.inner, vias, strict=True):
            states.add(target)
            states.update(via)
            inner = chart.states.get(target)
            if not source:
                if inner is not None and inner.scope is not None:
                    self.regions.add(inner.scope)
                self._approval(source, via[0] if via else target)
                # the region's eventless path from its first state: each hop a move
                for begun, landed in zip(via, (*via[1:], target), strict=False):
                    self._region_move(begun, self._onward_label(begun, ""), landed, seen,
                                      transitions)
            elif not (source in chart.scoped and source == target):
                for begun, label, landed in zip((source, *via), (event, *(
                        self._onward_label(node, "") for node in via)), (*via, target),
                        strict=True):
                    self._region_move(begun, label, landed, seen, transitions)
            seen.update(via)
            seen.add(target)
        for _, state, _ in record.regions:
            states.add(state)
            seen.add(state)

    def _path(self, record: Committed, prev: Committed | None, seen: set[str],
              transitions: set[Transition]) -> None:
        """Adds each move of a committed macrostep: its event's (or forced) move, then each
        eventless one (`always`, or a join's `done`) on its path."""
        chart = self.chart
        nodes: tuple[str, ...] = (*record.via, record.state)
        source = record.from_state
        label = ""
        if record.forced == INTERNAL:
            transitions.add((source, record.moved, source))
            nodes = nodes[1:]
        elif source == record.state and source in chart.scoped and not record.via:
            if states_entered(chart, record, prev):  # its own transition, into itself again
                self._hop(source, record.moved, source, seen, transitions)
            return  # else a region's move (or the join began undoing): no move of its own
        elif record.forced == COMPENSATED and source in chart.scoped:
            label = DONE  # the join's choice, taken once its regions were undone
        elif source:
            label = transition_label(record)
        for landed in nodes:
            if label:
                self._hop(source, label, landed, seen, transitions)
            seen.add(landed)
            source, label = landed, self._onward_label(landed, record.forced)

    def _onward_label(self, source: str, forced: str) -> str:
        """Gives how a macrostep goes on from `source`: by an eventless move, a join, or (a
        budget struck on the way) forced."""
        if source in self.chart.scoped:
            return DONE
        if self.plain.get((source, ALWAYS, "")) or not forced or forced == INTERNAL:
            return ALWAYS
        return f"forced:{forced}"

    def _hop(self, source: str, label: str, landed: str, seen: set[str],
             transitions: set[Transition]) -> None:
        """Adds one move of a macrostep; a landing only history explains also covers the
        declared transition (to the compound's first leaf) it was made by."""
        transitions.add((source, label, landed))
        key = (source, label, "")
        if landed not in self.plain.get(key, ()) and landed in self.legal.get(key, ()):
            for transition in self._declared(source, label):
                if landed in self.chart.landings.get(transition.target, ()):
                    transitions.add((source, label, transition.target_leaf))
        self._resumed(source, label, landed, seen)
        self._approval(source, landed)

    def _declared(self, source: str, label: str) -> tuple[Any, ...]:
        state = self.chart.states.get(source)
        if state is None:
            return ()
        if label == ALWAYS:
            return state.always
        if label == DONE:
            return state.done
        return tuple(t for t in state.on.get(label, ()) if not t.internal)

    def _region_move(self, source: str, event: str, target: str, seen: set[str],
                     transitions: set[Transition]) -> None:
        """Adds a region's move: a region's record keeps no eventless path, so a move that
        ended past one covers the declared route that explains it, when only one does."""
        chart = self.chart
        direct = self.plain.get((source, event, ""), frozenset())
        if target in direct or ((source, event) in chart.internal and target == source):
            transitions.add((source, event, target))
            self._resumed(source, event, target, seen)
            self._approval(source, target)
            return
        routes = [route for first in sorted(direct) for route in self._routes(first, target)]
        if len(routes) == 1:
            hops = [(source, event), *((hop, ALWAYS) for hop in routes[0][:-1])]
            for (start, label), landed in zip(hops, routes[0], strict=True):
                transitions.add((start, label, landed))
                self._approval(start, landed)
        else:
            transitions.add((source, event, target))  # undeclared as it stands: shown as is

    def _routes(self, start: str, target: str) -> list[list[str]]:
        """Gives each way `always` edges lead from `start` to `target` (the states landed in,
        `start` first), visiting no state twice."""
        if start == target:
            return [[start]]
        found: list[list[str]] = []
        todo = [[start]]
        while todo and len(found) < 2:
            path = todo.pop()
            for leaf in sorted(self.plain.get((path[-1], ALWAYS, ""), ())):
                if leaf == target:
                    found.append([*path, leaf])
                elif leaf not in path:
                    todo.append([*path, leaf])
        return found

    def _resumed(self, source: str, label: str, landed: str, seen: set[str]) -> None:
        """Adds the compounds with history a move into `landed` resumed: entered again from
        outside (or by a transition to the compound itself) after the run had been inside."""
        states = self.chart.states
        leaf = states.get(landed)
        if leaf is None or landed not in self.chart.resumed:
            return
        here = states.get(source)
        inside = (source, *here.ancestors) if here is not None else ()
        aims = {t.target for t in self._declared(source, label)}
        for compound in leaf.ancestors:
            if not states[compound].history:
                continue
            if compound in inside and not (aims & {compound, *states[compound].ancestors}):
                continue  # moved within it: nothing resumed
            if any(compound in states[name].ancestors for name in seen if name in states):
                self.resumes.add(compound)

    def _approval(self, source: str, landed: str) -> None:
        """Adds how a conditional approval went when its step's state is entered: asked (from
        the approval state that asks for it) or not asked."""
        if landed not in self.chart.conditional:
            return
        asking = self.chart.states.get(source)
        approval = asking.approval if asking is not None else None
        asked = approval is not None and approval.for_state == landed
        self.approvals.add((landed, ASKED if asked else NOT_ASKED))
