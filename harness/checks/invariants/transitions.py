"""Invariants of transitions: `terminal_stays_terminal`, and `legal_transitions` (an event's
move, a timeout's, a forced one, and a statechart's eventless moves, joins, history resumes and
region moves)."""

from __future__ import annotations

from collections.abc import Iterator

from harness.checks.invariants.analysis import (
    ALWAYS,
    DONE,
    INTERNAL,
    Chart,
    chart_of,
    has_commits,
    legal_table,
    reachable,
    resumes,
    tables,
)
from harness.checks.invariants.registry import History, Violation, builtin
from harness.sim.history import Committed, Decided, Dispatched, HistoryRecord, Observed
from reference_machine import WorkflowDefinition

__all__ = [
    "legal_transitions",
    "terminal_stays_terminal",
]


@builtin("terminal_stays_terminal", "a final execution accepts nothing, changes nothing and "
                                    "calls no tool")
def terminal_stays_terminal(definition: WorkflowDefinition, history: History
                            ) -> Iterator[Violation]:
    ended: dict[str, int] = {}  # execution -> the record that showed it final
    reported: set[str] = set()
    states = definition.states
    commits = has_commits(history)  # then a decision says nothing the commits do not
    for index, record in enumerate(history):
        if type(record) is Committed:
            eid = record.execution
            if eid in ended:
                if record.decision == "accepted" and eid not in reported:
                    reported.add(eid)
                    yield _after_final(history, ended[eid], index, eid,
                                       f"accepted {record.event_type} {record.event_id!r} "
                                       f"and moved to {record.state!r}")
            elif record.decision == "accepted" and record.state in states and (
                    states[record.state].final):
                ended[eid] = index
        elif type(record) is Observed:
            eid = record.execution
            if eid in ended:
                if eid not in reported and _moved_on(history[ended[eid]], record):
                    reported.add(eid)
                    yield _after_final(history, ended[eid], index, eid,
                                       f"was seen in {record.state!r} ({record.status}) at "
                                       f"version {record.version}")
            elif record.status == "final":
                ended[eid] = index
        elif type(record) is Decided and not commits:
            eid = record.execution
            if (eid in ended and record.decision.partition(":")[0] == "accepted"
                    and eid not in reported):
                reported.add(eid)
                yield _after_final(history, ended[eid], index, eid,
                                   f"accepted event {record.event_id!r}")
        elif type(record) is Dispatched:
            eid = record.execution
            if eid in ended and eid not in reported:
                reported.add(eid)
                yield _after_final(history, ended[eid], index, eid,
                                   f"called {record.tool} (key {record.key!r})")


def _moved_on(final: HistoryRecord, seen: Observed) -> bool:
    """Tells whether an observation shows an execution changed since it was seen final (by an
    observation, or by the commit that made it final)."""
    if type(final) is Observed:
        return (final.state, final.version) != (seen.state, seen.version)
    if type(final) is Committed:
        return final.state != seen.state or seen.version > final.version
    raise TypeError(f"an execution is seen final by a commit or an observation, not {final!r}")


def _after_final(history: History, ended: int, index: int, eid: str, what: str) -> Violation:
    final = history[ended]
    state = getattr(final, "state", "?")
    return Violation("terminal_stays_terminal",
                     f"{eid} ended in {state!r} at step {final.step}, then {what}; a final "
                     "execution accepts nothing", eid, history[index].step, (ended, index))


@builtin("legal_transitions", "every transition is one the definition declares (an event's, "
                              "a timeout's, or a budget's or policy's forced move), and so is "
                              "every eventless move, join, history resume and region move a "
                              "statechart made")
def legal_transitions(definition: WorkflowDefinition, history: History
                      ) -> Iterator[Violation]:
    table = legal_table(definition)
    chart = chart_of(definition)
    committed: set[str] = set()
    last_seen: dict[str, tuple[int, str]] = {}
    visited: dict[str, set[str]] = {}  # per execution, the states it was in (for history)
    reach = None
    for index, record in enumerate(history):
        if type(record) is Committed:
            if record.decision != "accepted":
                continue
            eid = record.execution
            committed.add(eid)
            if chart.used:
                seen = visited.get(eid)
                if seen is None:
                    seen = visited[eid] = set()
                problem = _move_problem(definition, chart, record, seen) if record.moved else ""
                if not problem:
                    problem = next(filter(None, (_region_move_problem(definition, chart, move)
                                                 for move in record.inner)), "")
                seen.update(record.via)
                seen.add(record.state)
                if problem:
                    yield Violation("legal_transitions", f"{eid} {problem}", eid, record.step,
                                    (index,))
                continue
            if not record.moved:
                continue
            source, moved, forced = record.from_state, record.moved, record.forced
            key = (source, "*" if forced else moved, forced)
            if record.state in table.get(key, ()):
                continue
            if source and definition.states.get(source) is not None and (
                    definition.states[source].final):
                continue  # terminal_stays_terminal tells of it
            how = f"forced by {forced}" if forced else f"on {moved}"
            allowed = sorted(table.get(key, ()))
            yield Violation(
                "legal_transitions",
                f"{eid} moved from {source or '(start)'!r} to {record.state!r} {how}; the "
                f"definition allows {', '.join(map(repr, allowed)) or 'no such transition'}",
                eid, record.step, (index,))
        elif type(record) is Observed and record.execution not in committed:
            # a machine that tells no commits: each observed change must be reachable
            eid = record.execution
            before = last_seen.get(eid)
            last_seen[eid] = (index, record.state)
            for source, target in record.moves:  # each move its machine told it made
                if definition.states[source].final:
                    continue  # a final state left: terminal_stays_terminal tells of it
                reach = reach or reachable(definition)
                if target not in reach[source]:
                    yield Violation(
                        "legal_transitions",
                        f"{eid} moved from {source!r} to {target!r}, which no sequence of the "
                        "definition's transitions reaches", eid, record.step, (index,))
                    break
            if before is None or before[1] == record.state:
                continue
            if definition.states[before[1]].final:
                continue  # terminal_stays_terminal tells of it
            reach = reach or reachable(definition)
            if record.state not in reach[before[1]]:
                yield Violation(
                    "legal_transitions",
                    f"{eid} went from {before[1]!r} to {record.state!r}, which no sequence of "
                    "the definition's transitions reaches", eid, record.step,
                    (before[0], index))


def _move_problem(definition: WorkflowDefinition, chart: Chart, record: Committed,
                  visited: set[str]) -> str:
    """Gives why a committed move is not one the definition declares ("" when it is): the
    event's transition (or the forced move) from where the run was, then each eventless move
    through `via` (an `always`, or a parallel or map state's join), each landing where its
    target, or the target's history, leads."""
    source, moved, forced, state = record.from_state, record.moved, record.forced, record.state
    states = definition.states
    if source and source in states and states[source].final:
        return ""  # terminal_stays_terminal tells of it
    if source == state and source in chart.scoped:
        return ""  # a region moved (its moves are judged apart), or the join began undoing
    legal, plain = tables(definition)
    nodes = (*record.via, state)
    how = f"forced by {forced}" if forced and forced != INTERNAL else f"on {moved}"
    through = (f" through {', '.join(map(repr, record.via))}" if record.via else "")
    if forced == INTERNAL:
        if (source, moved) not in chart.internal or nodes[0] != source:
            return (f"made an internal transition in {source!r} on {moved} and ended in "
                    f"{state!r}{through}; {source!r} has no transition without a target on "
                    f"{moved}" if (source, moved) not in chart.internal else
                    f"made an internal transition in {source!r} on {moved}, yet its path "
                    f"starts in {nodes[0]!r}: an internal transition leaves nothing")
    else:
        keys = [(source, "*" if forced else moved, forced)]
        if forced:  # a budget may have struck on an eventless move after the event's
            keys.append((source, moved, ""))
        landed = nodes[0]
        if not any(landed in legal.get(key, ()) for key in keys):
            allowed = sorted({target for key in keys for target in legal.get(key, ())})
            if not record.via:
                return (f"moved from {source or '(start)'!r} to {state!r} {how}; the definition "
                        f"allows {', '.join(map(repr, allowed)) or 'no such transition'}")
            return (f"moved from {source or '(start)'!r} to {state!r} {how}{through}; its first "
                    f"move, to {landed!r}, is none the definition allows (it allows "
                    f"{', '.join(map(repr, allowed)) or 'no such transition'})")
        if not any(landed in plain.get(key, ()) for key in keys) and not resumes(
                chart, landed, visited):
            return (f"moved from {source or '(start)'!r} to {landed!r} {how}, a state its "
                    "target's history could resume only had the run been there before")
    visited.add(nodes[0])  # an eventless path may leave a compound and resume it at once
    for position in range(1, len(nodes)):
        before, landed = nodes[position - 1], nodes[position]
        keys = [(before, ALWAYS, ""), (before, DONE, "")]
        if forced and forced != INTERNAL:
            keys.append((before, "*", forced))
        if not any(landed in legal.get(key, ()) for key in keys):
            allowed = sorted({target for key in keys for target in legal.get(key, ())})
            return (f"moved from {source or '(start)'!r} to {state!r} {how}{through}; "
                    f"{before!r} -> {landed!r} is no eventless move the definition declares "
                    f"(from {before!r} it allows "
                    f"{', '.join(map(repr, allowed)) or 'none'})")
        if not any(landed in plain.get(key, ()) for key in keys) and not resumes(
                chart, landed, visited):
            return (f"moved from {source or '(start)'!r} to {state!r} {how}{through}; "
                    f"{before!r} -> {landed!r} resumes a history the run never made")
        visited.add(landed)
    return ""


def _region_move_problem(definition: WorkflowDefinition, chart: Chart,
                         move: tuple[str, str, str]) -> str:
    """Gives why a move a region (or map item) made is not one its flow declares ("" when it
    is): a region starts in its initial leaf, and moves as the transitions of its states (its
    region's included) say, with the eventless moves after them."""
    source, event, target = move
    states = definition.states
    if not source:
        scope = states[target].scope if target in states else None
        start = chart.starts.get(scope or "")
        if start is None:
            return (f"started a region in {target!r}, which is in no region or map item")
        if target == start or target in chart.onward.get(start, ()):
            return ""
        return (f"started a region of {chart.owner.get(scope or '', '?')!r} in {target!r}; "
                f"{scope!r} starts in {start!r}")
    if source in chart.scoped and target == source:
        return ""  # a region of a nested parallel or map state moved
    inner = states.get(source)
    if inner is None or inner.scope is None:
        return (f"had a region move from {source!r} to {target!r} on {event}, but "
                f"{source!r} is in no region or map item")
    if inner.final:
        return ""  # terminal_stays_terminal's kind of fault, told by the join's rule
    allowed = _region_targets(definition, chart, source, event)
    if target in allowed:
        return ""
    return (f"had a region of {chart.owner.get(inner.scope, '?')!r} move from {source!r} to "
            f"{target!r} on {event}; the definition allows "
            f"{', '.join(map(repr, sorted(allowed))) or 'no such transition'}")


def _region_targets(definition: WorkflowDefinition, chart: Chart, source: str, event: str
                    ) -> frozenset[str]:
    """Gives where a region in `source` may move on `event`: its transitions, a forced move
    of its step or approval (a region records no reason), an internal transition, a nested
    join, each followed by the eventless moves it may lead on to."""
    known = chart.memo.get((source, event))
    if known is not None:
        return known
    legal = legal_table(definition)
    first = set(legal.get((source, event, ""), ()))
    for reason in ("ambiguous_failure", "retries_exhausted", "approval_expired"):
        first.update(legal.get((source, "*", reason), ()))
    if (source, event) in chart.internal:
        first.add(source)
    found = set(first)
    for reached in first:
        found.update(chart.onward.get(reached, ()))
    chart.memo[(source, event)] = frozenset(found)
    return chart.memo[(source, event)]
