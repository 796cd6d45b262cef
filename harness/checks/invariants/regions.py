"""Invariants of joins and regions: `join_after_regions`, `map_results_per_item`,
`no_region_effect_after_leaving`, `region_keys_distinct`."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from harness.checks.invariants.analysis import DONE, chart_of, innermost, short, visit_prefixes
from harness.checks.invariants.judgements import JoinView, chain_below, join_view
from harness.checks.invariants.registry import History, Violation, builtin
from harness.sim.history import Committed
from reference_machine import WorkflowDefinition

__all__ = [
    "join_after_regions",
    "map_results_per_item",
    "no_region_effect_after_leaving",
    "region_keys_distinct",
]


class _Join(NamedTuple):
    position: int  # the commit's record
    record: Committed
    state: str  # the parallel or map state joined
    view: JoinView
    prev: Committed | None  # the execution's commit before: its regions as they were


def _joins(definition: WorkflowDefinition, history: History) -> Iterator[_Join]:
    """Gives each join the commits show: a commit whose move is a parallel or map state's
    `done` (or that began undoing its failure), and a state entered and joined at once on a
    commit's eventless path."""
    chart = chart_of(definition)
    if not chart.scoped:
        return
    last: dict[str, Committed] = {}
    for index, record in enumerate(history):
        if type(record) is not Committed or record.decision != "accepted":
            continue
        prev = last.get(record.execution)
        last[record.execution] = record
        if not record.moved:
            continue
        nodes = (*record.via, record.state)
        joined = [node for node in nodes[:-1] if node in chart.scoped]
        if record.moved == DONE and record.from_state in chart.scoped:
            joined.insert(0, record.from_state)
        for state in joined:
            if joined.count(state) > 1 or (state == record.from_state and state in nodes[:-1]):
                continue  # entered again on the same path: its visits cannot be told apart
            view = join_view(definition, chart, record, prev, state)
            if view is not None:
                yield _Join(index, record, state, view, prev)


@builtin("join_after_regions", "a parallel or map state takes its done: only once every region "
                               "(map item) is final, or, with on_region_failure: cancel, once "
                               "one failed (a map: once more than tolerated_failures failed)")
def join_after_regions(definition: WorkflowDefinition, history: History
                       ) -> Iterator[Violation]:
    for join in _joins(definition, history):
        view, state = join.view, definition.states[join.state]
        if view.final >= view.regions or (view.failing and state.on_region_failure == "cancel"):
            continue
        what = "items" if state.kind == "map" else "regions"
        eid = join.record.execution
        failure = (f"{view.failed} failed, and it tolerates {state.tolerated_failures}"
                   if state.kind == "map" else f"{view.failed} failed")
        waits = ("it waits for every one (on_region_failure: wait)"
                 if state.on_region_failure == "wait" and view.failing else
                 "no failure allows an early join")
        yield Violation("join_after_regions",
                        f"{eid} joined {join.state!r} (moving to {join.record.state!r} on "
                        f"{join.record.moved}) with {view.final} of its {view.regions} {what} "
                        f"final ({failure}); {waits}", eid, join.record.step, (join.position,))


@builtin("map_results_per_item", "after a map state's join, its results key holds a list with "
                                 "one entry per item (the item's own final context, as "
                                 "recorded when it finished before the join; none for an "
                                 "item that failed or was abandoned)")
def map_results_per_item(definition: WorkflowDefinition, history: History
                         ) -> Iterator[Violation]:
    chart = chart_of(definition)
    for join in _joins(definition, history):
        state = definition.states[join.state]
        record, view = join.record, join.view
        if state.kind != "map" or state.scope is not None or record.context is None or (
                join.state not in chart.results_kept) or (view.instant and view.failing):
            continue  # a map inside a region keeps its results in the region's context
        results = record.context.get(state.results)
        eid = record.execution
        problem = ""
        if not isinstance(results, list):
            problem = f"holds {type(results).__name__}, not a list"
        elif len(results) != view.regions:
            if not view.instant:  # joined as entered: an item that could not start shows no move
                problem = f"holds {len(results)} entries for {view.regions} items"
        elif view.outcomes is not None:
            finished = _finished_items(definition, join)
            for (index, outcome), result in zip(view.outcomes, results, strict=True):
                if outcome == "success" and not isinstance(result, Mapping):
                    problem = (f"holds {short(repr(result), 40)} for item {index}, which "
                               "succeeded (its final context was expected)")
                elif outcome == "success" and index in finished and result != finished[index]:
                    problem = (f"holds {short(repr(result), 40)} for item {index}, whose "
                               f"final context was {short(repr(finished[index]), 40)}")
                elif outcome != "success" and result is not None:
                    problem = (f"holds {short(repr(result), 40)} for item {index}, which "
                               f"{'failed' if outcome else 'never finished'} (None was "
                               "expected)")
                if problem:
                    break
        if problem:
            yield Violation("map_results_per_item",
                            f"{eid} joined map {join.state!r}, and context.{state.results} "
                            f"{problem}", eid, record.step, (join.position,))


def _finished_items(definition: WorkflowDefinition, join: _Join
                    ) -> dict[str, Mapping[str, Any]]:
    """Gives the final context of each map item the commit before the join recorded final
    (by item index): what the join must keep as its result. An item that finished in the
    joining commit itself was never recorded, and is not in it; nor is one the join ran exit
    actions on (its final leaf, or a state above it in the item, has some)."""
    prev = join.prev
    if join.view.instant or prev is None or len(prev.regions) != len(prev.region_contexts):
        return {}
    base = f"{join.record.execution}/{join.state}/"
    states = definition.states
    finished: dict[str, Mapping[str, Any]] = {}
    for (rid, at, status), context in zip(prev.regions, prev.region_contexts, strict=True):
        visit, _, index = rid.removeprefix(base).partition("/")
        if not (rid.startswith(base) and visit.isdigit() and index.isdigit()
                and status == "final" and at in states):
            continue
        if any(states[name].exit for name in chain_below(states, at, join.state)):
            continue  # the join ran its exit actions on it: the result is not the recorded one
        finished[index] = context
    return finished


@builtin("no_region_effect_after_leaving", "no region (map item) commands an effect once its "
                                           "parallel or map state was left: a visit's keys "
                                           "are closed by the commit that left it")
def no_region_effect_after_leaving(definition: WorkflowDefinition, history: History
                                   ) -> Iterator[Violation]:
    if not chart_of(definition).scoped:
        return
    active: dict[str, set[str]] = {}  # per execution, the visits its regions show
    closed: dict[str, dict[str, int]] = defaultdict(dict)  # visit -> the commit that left it
    reported: set[str] = set()
    for index, record in enumerate(history):
        if type(record) is not Committed or record.decision != "accepted":
            continue
        eid = record.execution
        left = closed[eid]
        if left and eid not in reported:
            for effect in record.effects:
                if effect.compensation:
                    continue  # undoing a failed visit's steps comes after it, by design
                visit = next((prefix for prefix in left if effect.key.startswith(prefix)), "")
                if visit:
                    reported.add(eid)
                    ended = history[left[visit]]
                    yield Violation(
                        "no_region_effect_after_leaving",
                        f"{eid} commanded {effect.tool} (key {effect.key!r}) at step "
                        f"{record.step}, after the visit {visit!r} of its parallel or map "
                        f"state was left at step {ended.step}: an abandoned region acted",
                        eid, record.step, (left[visit], index))
                    break
        now = visit_prefixes(record.regions)
        for visit in active.get(eid, set()) - now:
            left[visit] = index
        active[eid] = now


@builtin("region_keys_distinct", "no two regions (map items) send their calls under one "
                                 "idempotency key: a service that honours keys would answer "
                                 "the second with the first's result, and its effect would "
                                 "never take place")
def region_keys_distinct(definition: WorkflowDefinition, history: History
                         ) -> Iterator[Violation]:
    chart = chart_of(definition)
    if not chart.scoped:
        return
    sent: dict[str, tuple[str, str, int]] = {}  # key -> (region, effect id, record)
    regions: dict[str, tuple[str, ...]] = {}  # per execution, the region ids last recorded
    reported: set[str] = set()
    for index, record in enumerate(history):
        if type(record) is not Committed or record.decision != "accepted":
            continue
        eid = record.execution
        known = frozenset((*regions.get(eid, ()), *(rid for rid, _, _ in record.regions)))
        regions[eid] = tuple(rid for rid, _, _ in record.regions)
        if not known or not record.effects:
            continue
        for effect in record.effects:
            if effect.compensation:
                continue
            # the region whose id the call's id extends (a call's id names its region)
            region = innermost(known, effect.id)
            if not region:
                continue
            first = sent.setdefault(effect.key, (region, effect.id, index))
            if first[0] != region and effect.key not in reported:
                reported.add(effect.key)
                yield Violation("region_keys_distinct",
                                f"{eid} sent {effect.tool} for {region!r} (call "
                                f"{effect.id!r}) under key {effect.key!r}, the key of "
                                f"{first[0]!r}'s call {first[1]!r}: two actions, one key",
                                eid, record.step, (first[2], index))
