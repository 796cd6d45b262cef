"""Invariants of bounds: `retries_within_bounds`, `budgets_within_bounds`,
`no_eventless_runaway`."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from harness.checks.invariants.analysis import (
    ALWAYS,
    INTERNAL,
    Chart,
    budgeted,
    chart_of,
    key_state,
    states_entered,
)
from harness.checks.invariants.judgements import first_held, moved_context
from harness.checks.invariants.registry import History, Violation, builtin
from harness.sim.history import Committed, Decided
from reference_machine import EVENTLESS_MAX, Event, WorkflowDefinition

__all__ = [
    "budgets_within_bounds",
    "no_eventless_runaway",
    "retries_within_bounds",
]


_BUDGET_REASONS = frozenset({"transitions_max", "visits_max", "cost_max", "deadline", "cycle"})


@builtin("retries_within_bounds", "a step is attempted at most `attempts_max` times per entry "
                                  "into its state, and a compensation at most its own bound")
def retries_within_bounds(definition: WorkflowDefinition, history: History
                          ) -> Iterator[Violation]:
    undo_bound: dict[str, int] = {}
    for state in definition.states.values():
        if state.step is not None and state.step.compensation is not None:
            tool = state.step.compensation.tool
            undo_bound[tool] = max(undo_bound.get(tool, 0), state.step.compensation.attempts_max)
    attempts: dict[str, set[str]] = {}  # execution -> effect ids in the current visit
    undos: dict[tuple[str, str], set[str]] = defaultdict(set)
    reported: set[tuple[str, str]] = set()
    chart = chart_of(definition)
    in_regions: dict[str, set[str]] = defaultdict(set)  # a region's key -> its effect ids
    for index, record in enumerate(history):
        if type(record) is not Committed or record.decision != "accepted":
            continue
        eid = record.execution
        if record.moved:
            attempts[eid] = set()
        step = definition.states[record.state].step if record.state in definition.states \
            else None
        for effect in record.effects:
            inner = key_state(chart, effect.key) if chart.scoped and (
                not effect.compensation) and (step is None or step.tool != effect.tool) else ""
            if inner:  # a region's step: its key is one entry into its state
                seen = in_regions[effect.key]
                seen.add(effect.id)
                bounded = definition.states[inner].step
                if bounded is not None and bounded.tool == effect.tool and (
                        len(seen) > bounded.attempts_max) and (eid, effect.key) not in reported:
                    reported.add((eid, effect.key))
                    yield Violation("retries_within_bounds",
                                    f"{eid} attempted {effect.tool} in {inner!r} (a region's, "
                                    f"key {effect.key!r}) {len(seen)} times in one entry into "
                                    f"the state; attempts_max is {bounded.attempts_max}", eid,
                                    record.step, (index,))
                continue
            if effect.compensation:
                seen = undos[(eid, effect.key)]
                seen.add(effect.id)
                bound = undo_bound.get(effect.tool)
                if bound is not None and len(seen) > bound and (eid, effect.key) not in reported:
                    reported.add((eid, effect.key))
                    yield Violation("retries_within_bounds",
                                    f"{eid} attempted compensation {effect.tool} "
                                    f"({effect.key!r}) {len(seen)} times; its bound is {bound}",
                                    eid, record.step, (index,))
                continue
            current = attempts.setdefault(eid, set())
            current.add(effect.id)
            if step is not None and effect.tool == step.tool and (
                    len(current) > step.attempts_max):
                if (eid, record.state) in reported:
                    continue
                reported.add((eid, record.state))
                yield Violation("retries_within_bounds",
                                f"{eid} attempted {step.tool} in {record.state!r} "
                                f"{len(current)} times in one entry into the state; "
                                f"attempts_max is {step.attempts_max}", eid, record.step,
                                (index,))


@builtin("budgets_within_bounds", "no execution passes its transitions, visits or cost budget "
                                  "without being forced to the budget's state")
def budgets_within_bounds(definition: WorkflowDefinition, history: History
                          ) -> Iterator[Violation]:
    budgets = definition.budgets
    if not budgeted(definition):
        return
    transitions: dict[str, int] = defaultdict(int)
    visits: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    cost: dict[str, float] = defaultdict(float)
    exceeded: set[str] = set()
    chart = chart_of(definition)
    previous: dict[str, Committed] = {}
    for index, record in enumerate(history):
        if type(record) is not Committed or record.decision != "accepted":
            continue
        eid = record.execution
        if eid in exceeded:
            continue
        if record.forced in _BUDGET_REASONS:
            exceeded.add(eid)
            continue
        problem = ""
        entered = states_entered(chart, record, previous.get(eid)) if record.moved else ()
        previous[eid] = record
        for state in entered:
            transitions[eid] += 1
            visits[eid][state] += 1
            if not record.forced or record.forced == INTERNAL:
                if budgets.transitions_max is not None and (
                        transitions[eid] > budgets.transitions_max):
                    problem = (f"made transition {transitions[eid]}; transitions_max is "
                               f"{budgets.transitions_max}")
                elif budgets.visits_max is not None and (
                        visits[eid][state] > budgets.visits_max):
                    problem = (f"entered {state!r} {visits[eid][state]} times; "
                               f"visits_max is {budgets.visits_max}")
            if problem:
                break
        for effect in record.effects:
            if effect.compensation:
                continue
            step = definition.states[record.state].step if record.state in (
                definition.states) else None
            if step is not None and step.tool == effect.tool:
                cost[eid] += step.cost
        if not problem and budgets.cost_max is not None and cost[eid] > budgets.cost_max:
            problem = f"spent {cost[eid]:g}; cost_max is {budgets.cost_max:g}"
        if problem:
            exceeded.add(eid)  # once is enough
            yield Violation("budgets_within_bounds",
                            f"{eid} {problem}, and was not forced to "
                            f"{budgets.on_exceeded or '(no on_exceeded state)'!r}", eid,
                            record.step, (index,))


_RUNAWAY = "rejected:runaway"


@builtin("no_eventless_runaway", "no event sets off eventless moves that never settle: a "
                                 "rejected:runaway (more than EVENTLESS_MAX moves) is the "
                                 "definition's loop of always transitions whose guards keep "
                                 "holding")
def no_eventless_runaway(definition: WorkflowDefinition, history: History
                         ) -> Iterator[Violation]:
    chart = chart_of(definition)
    if not chart.onward:
        return
    told: set[tuple[str, str]] = set()
    decided = {(r.execution, r.event_id) for r in history if type(r) is Decided}
    last: dict[str, Committed] = {}
    for index, record in enumerate(history):
        if type(record) is Decided and record.decision == _RUNAWAY:
            told.add((record.execution, record.event_id))
            yield Violation("no_eventless_runaway",
                            f"{record.execution} refused event {record.event_id!r} as a "
                            f"runaway: its eventless transitions moved {EVENTLESS_MAX} times "
                            "without settling; the definition loops (always transitions whose "
                            "guards keep holding)", record.execution, record.step, (index,))
        elif type(record) is Committed:
            if record.decision == "accepted":
                last[record.execution] = record
                continue
            key = (record.execution, record.event_id)
            prev = last.get(record.execution)
            if key in told or key in decided or prev is None or prev.context is None:
                continue  # the machine said why it refused (a decision tells it)
            loop = _runs_away(definition, chart, prev, record)
            if loop:
                told.add(key)
                yield Violation("no_eventless_runaway",
                                f"{record.execution} refused {record.event_type} "
                                f"{record.event_id!r}, on which the definition's eventless "
                                f"transitions never settle ({loop} -> ...): moved "
                                f"{EVENTLESS_MAX} times from {prev.state!r}, the definition "
                                "loops", record.execution, record.step, (index,))


def _runs_away(definition: WorkflowDefinition, chart: Chart, prev: Committed,
               record: Committed) -> str:
    """Gives the loop (its last states) when the definition's eventless moves never settle on
    an event refused without a reason told: its transition from where the run was, on the
    context then, then each first eventless transition whose guard holds ("" when they
    settle, or when that cannot be told)."""
    states = definition.states
    source = prev.state
    if source not in states or source in chart.scoped or prev.context is None:
        return ""
    event = Event(record.event_id, record.event_type, record.event_source,
                  record.payload or {}, record.answers)
    chosen, problem = first_held(states[source].on.get(event.type, ()), prev.context, event,
                                 source, event.type, [])
    if chosen is None or problem or chosen.internal or len(
            chart.landings.get(chosen.target, ())) > 1:
        return ""
    leaf = chosen.target_leaf
    if not any(state in chart.onward.get(state, ())
               for state in (leaf, *chart.onward.get(leaf, ()))):
        return ""  # no eventless move comes back: it settles
    acted = [0]
    context = moved_context(definition, prev.context, event, source, chosen.declared_in,
                            chosen.target, leaf, chosen.actions, acted)
    path = [leaf]
    for _ in range(EVENTLESS_MAX + 1):  # the machine takes EVENTLESS_MAX and refuses one more
        if context is None or leaf not in states:
            return ""
        taken, raised = first_held(states[leaf].always, context, event, leaf, ALWAYS, [])
        if taken is None or raised or len(chart.landings.get(taken.target, ())) > 1:
            return ""  # it settles, the machine refuses, or history decides where it goes
        context = moved_context(definition, context, event, leaf, taken.declared_in,
                                taken.target, taken.target_leaf, taken.actions, acted)
        leaf = taken.target_leaf
        path.append(leaf)
    return " -> ".join(path[-4:])
