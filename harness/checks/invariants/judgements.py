"""The guards a history shows evaluated, judged again on what was recorded: for each accepted
commit, the outcomes of the guards its move was chosen by and what was wrong with the choice
(`judgements`, which `guards_held` reads; `guard_outcomes`, which coverage reads), with the
replay of a path's context and the view of a join's regions that other invariants read too.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from harness.checks.invariants.analysis import (
    ALWAYS,
    COMPENSATED,
    DONE,
    INTERNAL,
    Chart,
    chart_of,
    legal_table,
)
from harness.checks.invariants.registry import History, per_history
from harness.sim.history import Committed, Decided, Delivered
from reference_machine import STARTED, TIMER_FIRED, CompiledTransition, Event, WorkflowDefinition

__all__ = [
    "GuardOutcome",
    "JoinView",
    "chain_below",
    "first_held",
    "guard_outcomes",
    "join_view",
    "judgements",
    "moved_context",
]


GuardOutcome = tuple[str, str, int, bool]  # (state, event or always/done, index, held)


class _Judged(NamedTuple):
    outcomes: tuple[GuardOutcome, ...]
    problem: str
    #: the eventless moves and the join on the path were judged too (else coverage infers
    #: their outcomes from the path)
    whole: bool = False


_NOTHING = _Judged((), "")


@per_history
def judgements(definition: WorkflowDefinition, history: History
               ) -> list[tuple[int, Committed, _Judged]]:
    """Gives, for each accepted commit whose guards can be evaluated again, the outcomes of the
    guards its move was chosen by and what was wrong with the choice."""
    found: list[tuple[int, Committed, _Judged]] = []
    last: dict[str, Committed] = {}
    chart = chart_of(definition)
    for index, record in enumerate(history):
        if type(record) is not Committed or record.decision != "accepted":
            continue
        prev = last.get(record.execution)
        last[record.execution] = record
        if record.moved:
            judged = _judged(definition, record, prev)
            if record.inner and chart.used:
                inside = _judged_regions(definition, chart, record, prev)
                if inside is not _NOTHING:
                    judged = _Judged((*judged.outcomes, *inside.outcomes),
                                     judged.problem or inside.problem, judged.whole)
            if judged is not _NOTHING:
                found.append((index, record, judged))
    return found


def _judged(definition: WorkflowDefinition, record: Committed, prev: Committed | None
            ) -> _Judged:
    """Evaluates again the guards a committed move was chosen by, on the context the previous
    commit recorded: its event's transitions from where the run was, and then (a statechart)
    each eventless transition on its path and the join's `done:` (replaying the context the
    moves' actions made; those are judged only when the replay gives the context the commit
    recorded, so nothing is judged on a context the run never had)."""
    chart = chart_of(definition)
    states = definition.states
    moved, source, forced = record.moved, record.from_state, record.forced
    if forced and forced != INTERNAL:
        return _NOTHING  # a forced move, chosen by no guard
    if not chart.used and (source, moved) not in chart.guarded:
        return _NOTHING  # no guard chose the move (the common case: checked first)
    if source and (source not in states or states[source].final):
        return _NOTHING
    if source == record.state and source in chart.scoped and moved != DONE:
        return _NOTHING  # a region moved: its context is not recorded
    if moved == DONE and source in chart.scoped:
        return _judged_join(definition, chart, record, prev) if chart.used else _NOTHING
    if moved != record.event_type:
        return _NOTHING  # a substituted event (a timeout, an invalid output)
    event = Event(record.event_id, record.event_type, record.event_source,
                  record.payload or {}, record.answers)
    nodes = (*record.via, record.state)
    if not source:
        if moved != STARTED or not chart.used:
            return _NOTHING
        before: Mapping[str, Any] = {**definition.initial_context, **(record.payload or {})}
        first: CompiledTransition | None = None
        target = definition.initial
    elif prev is None or prev.context is None:
        return _NOTHING
    else:
        before = prev.context
        candidates = states[source].on.get(moved, ())
        outcomes: list[GuardOutcome] = []
        if not candidates:
            after = states[source].after_target
            if moved != TIMER_FIRED or after is None or not chart.used:
                return _NOTHING
            first, target = None, after
        else:
            chosen, problem = first_held(candidates, before, event, source, moved, outcomes)
            said = f"moved {source!r} -> {record.state!r} on {moved}"
            guarded = any(transition.guard is not None for transition in candidates)
            if problem:
                return _Judged(tuple(outcomes), f"{said}, but {problem}")
            if chosen is None:
                texts = ", ".join(repr(t.guard_text) for t in candidates)
                return _Judged(tuple(outcomes), f"{said} though no guard held ({texts})")
            if chosen.internal != (forced == INTERNAL):
                return _Judged(tuple(outcomes), (
                    f"{said}, but the first transition whose guard holds "
                    + (f"is internal: the run stays in {source!r}" if chosen.internal else
                       f"goes to {chosen.target_leaf!r}")
                    + (f" (guard {chosen.guard_text!r})" if chosen.guard_text else "")))
            if guarded and not chosen.internal and nodes[0] != chosen.target_leaf and (
                    nodes[0] not in chart.landings.get(chosen.target, ())):
                return _Judged(tuple(outcomes), (
                    f"{said}, but the first transition whose guard holds goes to "
                    f"{chosen.target_leaf!r}"
                    + (f" (guard {chosen.guard_text!r})" if chosen.guard_text else "")))
            if not chart.used:
                return _Judged(tuple(outcomes), "") if guarded else _NOTHING
            first, target = chosen, chosen.target
        base = tuple(outcomes)
        replayed = _replay(definition, chart, record, before, event, first, target)
        return _Judged((*base, *replayed.outcomes), replayed.problem, replayed.whole) if (
            base or replayed is not _NOTHING) else _NOTHING
    return _replay(definition, chart, record, before, event, first, target)


def _judged_regions(definition: WorkflowDefinition, chart: Chart, record: Committed,
                    prev: Committed | None) -> _Judged:
    """Evaluates again the guards that chose where a parallel state's regions went in a
    commit: a region's first eventless choice as it starts (on the context it starts with,
    the execution's, when no entry action ran on the way in), and the transitions a region
    took on the commit's event (on the region's context the previous commit recorded). A
    region that went where no transition whose guard held could lead (its eventless moves
    and forced moves after it included) is told. Map items are not judged (they share their
    states, and a move is not told by item)."""
    states = definition.states
    event = Event(record.event_id, record.event_type, record.event_source,
                  record.payload or {}, record.answers)
    outcomes: list[GuardOutcome] = []
    problem = ""
    # regions start with the event the execution entered with: the commit's own, unless it
    # was substituted (a timeout's or an invalid output's failure, an expiry's denial) or a
    # join's `done` on the way; and on the context it entered with, unless the path entered
    # the parallel state twice (each visit's regions start anew)
    starts_judged = record.moved == record.event_type and record.from_state not in (
        chart.scoped) and not any(node in chart.scoped for node in record.via)
    for source, moved, target in record.inner:
        scope = states[target].scope if target in states else None
        owner = chart.owner.get(scope or "")
        if scope is None or owner is None or states[owner].kind != "parallel":
            continue
        if not source:  # a region starting, with the execution entering its parallel state
            node = chart.starts.get(scope, "")
            if (not starts_judged or owner != record.state or record.context is None
                    or node not in states or any(
                        states[name].entry for name in chain_below(states, node, owner))):
                continue
            context: Mapping[str, Any] | None = record.context
            candidates, label = states[node].always, ALWAYS
        else:
            if (moved != record.event_type or source not in states or source in chart.scoped
                    or states[source].final):
                continue  # a substituted event (a timeout, an invalid output), a nested join
            node, context = source, _region_before(prev, scope, source)
            candidates, label = states[source].on.get(moved, ()), moved
        if context is None or not any(t.guard is not None for t in candidates):
            continue
        chosen, raised = first_held(candidates, context, event, node, label, outcomes)
        if raised or problem:
            continue
        allowed = _region_reach(definition, chart, node, chosen, bool(source))
        if allowed is not None and target not in allowed:
            region = f"a region of {owner!r}"
            how = (f"started in {target!r}" if not source else
                   f"moved {source!r} -> {target!r} on {moved}")
            problem = (f"{region} {how}, but " + (
                f"the first {'eventless ' if not source else ''}transition of {node!r} whose "
                f"guard holds goes to {chosen.target_leaf!r}"
                + (f" (guard {chosen.guard_text!r})" if chosen.guard_text else "")
                if chosen is not None else "no guard of " + ", ".join(
                    repr(t.guard_text) for t in candidates) + " held"))
    return _Judged(tuple(outcomes), problem) if outcomes or problem else _NOTHING


def _region_before(prev: Committed | None, scope: str, state: str
                   ) -> Mapping[str, Any] | None:
    """Gives the context the previous commit recorded for the region of `scope` in `state`
    (None when not exactly one region is found so)."""
    if prev is None or len(prev.regions) != len(prev.region_contexts):
        return None
    found = [context for (rid, at, _), context in zip(prev.regions, prev.region_contexts,
                                                        strict=True)
             if at == state and rid.rpartition("/")[2] == scope]
    return found[0] if len(found) == 1 else None


def _region_reach(definition: WorkflowDefinition, chart: Chart, node: str,
                  chosen: CompiledTransition | None, evented: bool) -> frozenset[str] | None:
    """Gives the leaves a region may be in after `chosen` (None: no judgement): its target's
    landings and the eventless moves on from them; for an event's move, also a forced move on
    that event (a region records no reason: an escalation, retries exhausted, an approval
    expired) and where it leads, chosen or not. With no transition chosen, a starting region
    stays where its eventless choice is, an evented move goes only where a forced one does."""
    if chosen is not None and chosen.internal:
        return None
    first: set[str] = set()
    if chosen is not None:
        first = set(chart.landings.get(chosen.target, ())) or {chosen.target_leaf}
    elif not evented:
        first = {node}
    reach = set(first)
    for leaf in first:
        reach.update(chart.onward.get(leaf, ()))
    if evented:  # forced whatever the guards say
        for reason in ("ambiguous_failure", "retries_exhausted", "approval_expired"):
            forced = legal_table(definition).get((node, "*", reason), ())
            reach.update(forced)
            for leaf in forced:
                reach.update(chart.onward.get(leaf, ()))
    return frozenset(reach)


def first_held(candidates: Sequence[CompiledTransition], context: Mapping[str, Any],
               event: Event, state: str, label: str, outcomes: list[GuardOutcome]
               ) -> tuple[CompiledTransition | None, str]:
    """Gives the first transition whose guard holds (or a sentence if a guard raised), adding
    the outcome of each guard tried to `outcomes`."""
    for position, transition in enumerate(candidates):
        if transition.guard is None:
            return transition, ""
        try:
            held = bool(transition.guard(context, event))
        except Exception as exc:  # the machine should have rejected the event
            return None, (f"guard {transition.guard_text!r} raises {type(exc).__name__}: "
                          f"{exc} on what was recorded")
        outcomes.append((state, label, position, held))
        if held:
            return transition, ""
    return None, ""


def _replay(definition: WorkflowDefinition, chart: Chart, record: Committed,
            context: Mapping[str, Any], event: Event, first: CompiledTransition | None,
            target: str, *, acted_max: int | None = None) -> _Judged:
    """Replays a committed path's context from `context`: its first move (`first`, or a
    timeout's or the start's move to `target`), then each eventless move on to where it
    settled, judging each eventless choice. Gives the outcomes and the first wrong choice,
    or nothing when the replay does not give the context the commit recorded (a region's
    merge, a function that is not pure: then the guards' context is not known). With
    `acted_max`, a path that ran more actions than that is not judged either."""
    states = definition.states
    nodes = (*record.via, record.state)
    acted = [0]
    if first is not None and first.internal:
        ctx = _run_actions(context, event, first.actions, acted)
    else:
        ctx = moved_context(definition, context, event, record.from_state,
                            first.declared_in if first is not None else "", target, nodes[0],
                            first.actions if first is not None else (), acted)
    outcomes: list[GuardOutcome] = []
    problem = ""
    for position, node in enumerate(nodes):
        if ctx is None:
            return _NOTHING
        ahead = nodes[position + 1] if position + 1 < len(nodes) else None
        if node in chart.scoped:
            if ahead is None:
                break  # entered a parallel or map state: its regions start apart
            return _NOTHING  # a join on entering: the regions' contexts are not recorded
        eventless = states[node].always if node in states else ()
        taken, raised = first_held(eventless, ctx, event, node, ALWAYS, outcomes)
        if raised:
            return _NOTHING  # the machine would have refused: judged on a replay, not told
        if ahead is None:
            if taken is not None and not problem:
                problem = (f"settled in {node!r} on {record.moved}, though its eventless "
                           f"transition to {taken.target!r} holds"
                           + (f" (guard {taken.guard_text!r})" if taken.guard_text else ""))
            break
        made = taken if taken is not None and (ahead == taken.target_leaf or ahead in (
            chart.landings.get(taken.target, ()))) else next(
            (t for t in eventless if ahead == t.target_leaf
             or ahead in chart.landings.get(t.target, ())), None)
        if made is None:
            return _NOTHING  # no declared eventless move: legal_transitions tells of it
        if made is not taken and not problem:
            problem = (f"moved on from {node!r} to {ahead!r} on {record.moved}, but "
                       + (f"the first eventless transition whose guard holds goes to "
                          f"{taken.target_leaf!r}" if taken is not None else
                          "no guard of its eventless transitions held ("
                          + ", ".join(repr(t.guard_text) for t in eventless) + ")"))
        ctx = moved_context(definition, ctx, event, node, made.declared_in, made.target,
                            ahead, made.actions, acted)
    if ctx is None or ctx != record.context or (acted_max is not None and acted[0] > acted_max):
        return _NOTHING
    return _Judged(tuple(outcomes), problem, True)


def moved_context(definition: WorkflowDefinition, context: Mapping[str, Any], event: Event,
                  leaving: str, declared: str, target: str, landed: str,
                  actions: Sequence[Any], acted: list[int]) -> dict[str, Any] | None:
    """Gives the context after a move from the leaf `leaving` (none: a start) to `landed` by
    a transition declared in `declared` to `target`: exit actions innermost first, the
    transition's, then entry actions outermost first, below the lowest compound state that
    holds both its source and its target (SCXML's order); None when an action raises."""
    states = definition.states
    exits: tuple[str, ...] = ()
    entries: tuple[str, ...] = ()
    if definition.scoped and landed in states:
        domain = _domain(states, declared or leaving, target if target in states else landed)
        if leaving in states:
            exits = chain_below(states, leaving, domain)
        entries = tuple(reversed(chain_below(states, landed, domain)))
    steps = [action for name in exits for action in states[name].exit]
    steps += actions
    steps += [action for name in entries for action in states[name].entry]
    return _run_actions(context, event, steps, acted)


def _run_actions(context: Mapping[str, Any], event: Event, actions: Sequence[Any],
                 acted: list[int]) -> dict[str, Any] | None:
    updated = dict(context)
    for action in actions:
        acted[0] += 1
        try:
            changed = action(updated, event)
        except Exception:  # the machine would have refused the event
            return None
        if changed:
            updated.update(changed)
    return updated


def _domain(states: Mapping[str, Any], source: str, target: str) -> str | None:
    """Gives the lowest compound state that is a proper ancestor of both (None: the top)."""
    if not source or source not in states:
        return None
    above = states[target].ancestors
    for ancestor in states[source].ancestors:
        if ancestor in above:
            return ancestor
    return None


def chain_below(states: Mapping[str, Any], leaf: str, domain: str | None) -> tuple[str, ...]:
    """Gives `leaf` and its ancestors below `domain`, innermost first."""
    chain = (leaf, *states[leaf].ancestors)
    return chain[:chain.index(domain)] if domain in chain else chain


def _judged_join(definition: WorkflowDefinition, chart: Chart, record: Committed,
                 prev: Committed | None) -> _Judged:
    """Evaluates again the `done:` guards of a join, on the event the regions' outcomes make
    (`failed`, `outcomes`, `failing`) and the context the join merged: a map's is the one
    before plus its results; a parallel state's is known only when no action ran on the way
    out, when it is the one recorded."""
    source = record.from_state
    state = definition.states[source]
    if source in chart.exiting:
        return _NOTHING  # the join runs its regions' exit actions after it chose: not recorded
    view = join_view(definition, chart, record, prev, source)
    if view is None or view.outcomes is None or prev is None or prev.context is None or (
            record.context is None):
        return _NOTHING
    if state.kind == "map":
        if source not in chart.results_kept:
            return _NOTHING
        context: Mapping[str, Any] = {**prev.context,
                                      state.results: record.context.get(state.results)}
        failed: list[Any] = [int(name) for name, outcome in view.outcomes
                             if outcome is not None and outcome != "success"]
        acted_max = None
    else:
        context = record.context
        failed = [name for name, outcome in view.outcomes
                  if outcome is not None and outcome != "success"]
        acted_max = 0
    payload = {"failed": failed, "outcomes": dict(view.outcomes), "failing": view.failing}
    event = Event(record.event_id, DONE, record.event_source, payload, record.answers)
    outcomes: list[GuardOutcome] = []
    chosen, problem = first_held(state.done, context, event, source, DONE, outcomes)
    said = f"joined {source!r} and moved to {record.state!r}"
    if problem:
        return _Judged(tuple(outcomes), f"{said}, but {problem}") if acted_max is None else (
            _NOTHING)
    if chosen is None:
        texts = ", ".join(repr(t.guard_text) for t in state.done)
        judged = _Judged(tuple(outcomes), f"{said} though no guard of its done: held ({texts})")
        return judged if acted_max is None else _NOTHING
    landed = (*record.via, record.state)[0]
    if record.state == source:
        return _Judged(tuple(outcomes), "")  # undoing first: where it goes is kept for later
    if landed != chosen.target_leaf and landed not in chart.landings.get(chosen.target, ()):
        wrong = _Judged(tuple(outcomes), (
            f"{said}, but the first done transition whose guard holds goes to "
            f"{chosen.target_leaf!r}" + (f" (guard {chosen.guard_text!r})"
                                          if chosen.guard_text else "")
            + f" (failed: {failed!r})"))
        if acted_max is None:
            return wrong
        replayed = _replay(definition, chart, record, context, event, None, landed,
                           acted_max=acted_max)
        return wrong if replayed is not _NOTHING else _NOTHING
    replayed = _replay(definition, chart, record, context, event, chosen, chosen.target,
                       acted_max=acted_max)
    if replayed is _NOTHING:
        return _Judged(tuple(outcomes), "") if acted_max is None else _NOTHING
    return _Judged((*outcomes, *replayed.outcomes), replayed.problem, True)


class JoinView(NamedTuple):
    """What a parallel or map state's regions (items) had come to when it joined."""

    regions: int
    final: int
    failed: int
    failing: bool
    #: (region name or item index, outcome: None while not final), in order, when each move
    #: could be told to its region
    outcomes: tuple[tuple[str, str | None], ...] | None
    #: the state was entered by the commit that joined it (its regions were never recorded)
    instant: bool


def join_view(definition: WorkflowDefinition, chart: Chart, record: Committed,
              prev: Committed | None, parallel: str) -> JoinView | None:
    """Gives what the regions of `parallel` (a parallel or map state the commit joined) had
    come to: their states after the previous commit, and the moves this commit made in them
    (a region by its scope, an item by the call, timer or request its event answers, or by
    being the only one where the move began). None when the previous commit did not record
    the regions, or when the commit's path entered `parallel` again after joining it (the new
    visit's regions start in the same commit: its moves cannot be told from the old ones')."""
    if record.from_state == parallel and parallel in (*record.via, record.state):
        return None
    states = definition.states
    state = states[parallel]
    roots = chart.roots.get(parallel, frozenset())
    base = f"{record.execution}/{parallel}/"
    rows: list[list[str]] = []  # [name, id, state, status]
    instant = record.from_state != parallel or prev is None or prev.state != parallel
    if not instant:
        assert prev is not None
        for rid, at, status in prev.regions:
            if rid.startswith(base):
                visit, _, name = rid[len(base):].partition("/")
                if visit.isdigit() and name and "/" not in name:
                    rows.append([name, rid, at, status])
        if not rows:
            return None
    elif state.kind == "parallel":
        rows = [[region, "", "", "created"] for region, _ in state.regions]
    if state.kind == "map":
        rows.sort(key=lambda row: int(row[0]) if row[0].isdigit() else -1)
    by_name = {row[0]: row for row in rows}
    moved: set[int] = set()
    exact = True
    loose: list[str] = []  # targets of moves no region could be told for
    for source, _, target in record.inner:
        inner = states.get(target)
        if inner is None or inner.scope not in roots:
            continue
        row: list[str] | None = None
        if state.kind == "parallel":
            row = by_name.get(inner.scope or "")
        elif not source:
            row = next((r for r in rows if r[3] == "created" and id(r) not in moved), None)
            if row is None and instant:
                row = [str(len(rows)), "", "", "created"]
                rows.append(row)
        else:
            answered = [r for r in rows if r[1] and record.answers.startswith(f"{r[1]}/")]
            if len(answered) != 1:
                answered = [r for r in rows if r[2] == source and r[3] != "final"
                            and id(r) not in moved]
            row = answered[0] if len(answered) == 1 else None
        if row is None:
            exact = False
            loose.append(target)
            continue
        moved.add(id(row))
        row[2], row[3] = target, "final" if inner.final else "running"
    # a map item still waiting to start when its map joined either could not start (its input
    # failed: a failed item) or was left unstarted by a failure: finished, either way, of
    # an outcome the records do not tell
    unstarted = sum(1 for row in rows if row[3] == "created") if state.kind == "map" else 0
    final = sum(1 for row in rows if row[3] == "final") + sum(
        1 for target in loose if states[target].final) + unstarted
    failed = sum(1 for row in rows if row[3] == "final" and _outcome(states, row[2]) != "success"
                 ) + sum(1 for target in loose if states[target].final
                         and states[target].outcome != "success")
    failing = (failed + unstarted > state.tolerated_failures if state.kind == "map"
               else failed > 0)
    outcomes = tuple((row[0], _outcome(states, row[2]) if row[3] == "final" else None)
                     for row in rows) if exact and not unstarted else None
    return JoinView(len(rows), final, failed, failing, outcomes, instant)


def _outcome(states: Mapping[str, Any], state: str) -> str | None:
    """Gives the outcome of a region that ended in `state`: a map item that could not start
    rests nowhere, and failed."""
    inner = states.get(state)
    return inner.outcome if inner is not None else "failure"


def guard_outcomes(definition: WorkflowDefinition, history: History
                   ) -> Iterator[tuple[str, str, int, bool]]:
    """Gives (state, event, transition index, held) for each guard the history shows evaluated
    (for coverage): by an accepted transition (the guards before the one taken did not hold),
    by an event the machine refused because no guard held (`rejected:guard_false`), by an
    eventless move (event `always`) or a join (`done`) evaluated again on a replayed context,
    and, inside regions (whose contexts are not recorded), by the transition a region's move
    took (the guards before it did not hold)."""
    contexts: dict[str, Mapping[str, Any]] = {}
    states: dict[str, str] = {}
    delivered: dict[tuple[str, str], Delivered] = {}
    judged = {index: found for index, _, found in judgements(definition, history)}
    chart = chart_of(definition)
    for index, record in enumerate(history):
        if type(record) is Delivered:
            delivered[(record.execution, record.event_id)] = record
            continue
        if type(record) is Decided:
            sent = delivered.get((record.execution, record.event_id))
            source = states.get(record.execution, "")
            before = contexts.get(record.execution)
            if (record.decision == _GUARD_FALSE and sent is not None and before is not None
                    and source in definition.states):
                yield from _guards_tried(definition, source, before, Event(
                    sent.event_id, sent.type, sent.source, sent.payload or {}, sent.answers))
            continue
        if type(record) is not Committed or record.decision != "accepted":
            continue
        if record.context is not None:
            contexts[record.execution] = record.context
        states[record.execution] = record.state
        found = judged.get(index)
        if found is not None:
            yield from found.outcomes
        if chart.used:
            if record.moved and (found is None or not found.whole):
                yield from _inferred_outcomes(chart, record)
            for source, event, target in record.inner:
                inner = chart.states.get(source)
                if inner is not None:
                    yield from _taken(chart, source, event, inner.on.get(event, ()), target)


def _inferred_outcomes(chart: Chart, record: Committed) -> Iterator[GuardOutcome]:
    """Gives the outcomes of the eventless and `done:` guards a committed path shows, told by
    where each move went (for coverage, where the context they read is not known)."""
    states = chart.states
    nodes = (*record.via, record.state)
    source = record.from_state
    if source in chart.scoped and source != record.state and (
            record.moved == DONE or record.forced == COMPENSATED):
        yield from _taken(chart, source, DONE, states[source].done, nodes[0])
    for position, node in enumerate(nodes[:-1]):
        inner = states.get(node)
        if inner is not None:
            label = DONE if node in chart.scoped else ALWAYS
            yield from _taken(chart, node, label, inner.done if label == DONE
                              else inner.always, nodes[position + 1])


def _taken(chart: Chart, state: str, label: str, candidates: Sequence[CompiledTransition],
           landed: str) -> Iterator[GuardOutcome]:
    """Gives the guard outcomes a move from `state` that ended in `landed` shows: the
    transition whose target leads there held, the guarded ones before it did not."""
    if not any(transition.guard is not None for transition in candidates):
        return
    for position, transition in enumerate(candidates):
        lands = (state,) if transition.internal else chart.landings.get(
            transition.target, (transition.target_leaf,))
        taken = landed in lands or any(landed in chart.onward.get(leaf, ()) for leaf in lands)
        if transition.guard is not None:
            yield state, label, position, taken
        if taken or transition.guard is None:
            return


_GUARD_FALSE = "rejected:guard_false"


def _guards_tried(definition: WorkflowDefinition, state: str, context: Mapping[str, Any],
                  event: Event) -> Iterator[tuple[str, str, int, bool]]:
    """Gives the outcome of each guard of `state`'s transitions on `event`, in order, up to
    the first that holds (the one an interpreter takes)."""
    for position, transition in enumerate(definition.states[state].on.get(event.type, ())):
        if transition.guard is None:
            break
        try:
            held = bool(transition.guard(context, event))
        except Exception:  # guards_held tells of it
            break
        yield state, event.type, position, held
        if held:
            break
