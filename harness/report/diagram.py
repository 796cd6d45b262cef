"""The workflow's graph as a report holds it: its states and every transition, each marked
covered or not and on the counterexample's path or not (`diagram_of`, made from a definition and
its coverage); and what every drawing of it reads (`state_ids`, `DiagramShape`, a compound's
title, a state's notes, an edge's label), the Mermaid text and the SVG drawing alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from harness.checks.coverage import UNSEEN_EVENT, Coverage, coverage_universe
from reference_machine import TIMER_FIRED, WorkflowDefinition

__all__ = ["SCOPED_KINDS", "DiagramShape", "EdgeKey", "compound_title", "diagram_of",
           "edge_text", "history_mark", "state_ids", "state_notes"]


def diagram_of(definition: WorkflowDefinition, coverage: Coverage | None = None,
               path: Sequence[tuple[str, str, str]] = ()) -> dict[str, Any]:
    """Gives the workflow's graph: its states (grouped by their compound parents; a parallel
    state's children are its regions), every declared transition (eventless `always` and join
    `done` edges with their guards, internal transitions as self-loops, a transition into a
    compound with history drawn to its history marker) and every move a run made that no event
    declares (forced moves), each marked covered or not and on the counterexample's path or
    not. Keys added for statecharts are left out where they hold nothing, so a definition with
    no statechart construct gives the graph it always gave."""
    universe = coverage_universe(definition)
    declared = _declared_edges(definition, universe["transitions"])
    chart = _ChartIndex(definition, declared)
    taken = set(coverage.transitions) if coverage is not None else set()
    states_reached = coverage.states if coverage is not None else frozenset()
    covered, seen_only = chart.marked(taken)
    moves = set(path)
    on_path, path_only = chart.marked(moves)
    extra = path_only | {t for t in seen_only if t[0] and t[2] and t[1] != UNSEEN_EVENT}
    # a run only passes through a choice (it never rests there): one left was reached
    passed = {key[0] for key in covered if definition.states[key[0]].kind == "choice"}
    states = []
    for name, state in definition.states.items():
        entry: dict[str, Any] = {"name": name, "parent": state.parent or "",
                                 "final": state.final, "outcome": state.outcome or "",
                                 "reached": name in states_reached or name in passed}
        states.append({**entry, **_state_extras(definition, name)})
    edges: list[dict[str, Any]] = []
    for key in sorted(set(declared) | {(*t, "", "") for t in extra}):
        source, event, target, kind, history = key
        edge: dict[str, Any] = {
            "source": source, "event": event, "target": target,
            "declared": key in declared,
            "covered": key in covered or (key not in declared and key[:3] in taken),
            "on_path": key in on_path or (key not in declared and key[:3] in moves)}
        if kind:
            edge["kind"] = kind
        if declared.get(key):
            edge["guard"] = declared[key]
        if history:
            edge["history"] = history
        edges.append(edge)
    return {
        "initial": definition.initial,
        "states": states,
        "transitions": edges,
        "path": [list(step) for step in path],
    }


#: A drawn edge: (source, event, target, kind, history). `kind` is "", "always", "done" or
#: "internal"; `history` names the compound whose history marker the edge is drawn to ("" when
#: none). Coverage keys are (source, event, target) triples.
EdgeKey = tuple[str, str, str, str, str]

SCOPED_KINDS = ("parallel", "map")


def _declared_edges(definition: WorkflowDefinition,
                    universe: Iterable[tuple[str, str, str]]) -> dict[EdgeKey, str]:
    """Gives every transition the definition declares, as drawn edges with their guards' text
    ("" for an edge whose kind shows no guard, or that some unguarded transition also takes).
    A leaf holds what it inherits; a parallel or map state holds its own transitions (those
    leave it, abandoning the regions), its `done` joins and its eventless moves."""
    parents = {state.parent for state in definition.states.values() if state.parent}
    guards: dict[EdgeKey, list[str]] = {}

    def add(source: str, event: str, target: str, kind: str = "", declared_target: str = "",
            guard: str = "") -> None:
        aimed = definition.states.get(declared_target)
        history = declared_target if (aimed is not None and aimed.history
                                      and declared_target != target) else ""
        guards.setdefault((source, event, target, kind, history), []).append(guard)

    for name, state in definition.states.items():
        if state.final:
            continue
        if name not in parents or state.kind in SCOPED_KINDS:
            for event, transitions in state.on.items():
                for transition in transitions:
                    if transition.internal:
                        add(name, event, name, "internal")
                    else:
                        add(name, event, transition.target_leaf, "", transition.target)
            if state.after_target is not None:
                spec = definition.spec.states.get(name)
                after = spec.after if spec is not None else None
                add(name, TIMER_FIRED, state.after_target, "",
                    after.target if after is not None else "")
        for transition in (*state.always, *state.done):
            add(name, transition.event, transition.target_leaf, transition.event,
                transition.target, transition.guard_text)
    leaves = _leaves_below(definition)
    drawn = {alias for key in guards for alias in _aliases(key, leaves)}
    for source, event, target in universe:  # whatever else the checks count as declared
        if target and (source, event, target) not in drawn:
            add(source, event, target)
    return {key: (" or ".join(dict.fromkeys(texts)) if key[3] in ("always", "done")
                  and all(texts) else "")
            for key, texts in guards.items()}


def _leaves_below(definition: WorkflowDefinition) -> dict[str, set[str]]:
    """Gives each compound state's leaves, however deep."""
    leaves: dict[str, set[str]] = {}
    parents = {state.parent for state in definition.states.values() if state.parent}
    for name, state in definition.states.items():
        if name not in parents:
            for ancestor in state.ancestors:
                leaves.setdefault(ancestor, set()).add(name)
    return leaves


def _aliases(edge: EdgeKey, leaves: Mapping[str, set[str]]) -> set[tuple[str, str, str]]:
    """Gives the coverage keys that name a drawn edge: its own; for an internal transition,
    one with no target or `forced:internal`; for one into a compound with history, one to
    each leaf the compound can resume."""
    source, event, target, kind, history = edge
    aliases = {(source, event, end) for end in {target} | leaves.get(history, set())}
    if kind == "internal":
        aliases |= {(source, event, ""), (source, "forced:internal", source)}
    return aliases


class _ChartIndex:
    """Tells which drawn edges a set of coverage keys (or a path's moves) took. A key names an
    edge by (source, event, target); an internal transition may be keyed with no target or as
    `forced:internal`; a move into a compound with history lands on whichever leaf it resumed;
    a key that skips the states an eventless run passed through (a choice, a join's next
    state) is the one route of declared edges that explains it; a parallel or map state that
    stays where it is while one of its regions moved is no move of its own."""

    def __init__(self, definition: WorkflowDefinition, declared: Mapping[EdgeKey, str]) -> None:
        self.kinds = {name: state.kind for name, state in definition.states.items()}
        leaves = _leaves_below(definition)
        self.by_key: dict[tuple[str, str, str], list[EdgeKey]] = {}
        self.by_pair: dict[tuple[str, str], list[EdgeKey]] = {}
        self.starts: dict[tuple[str, str], list[EdgeKey]] = {}
        self.eventless: dict[str, list[EdgeKey]] = {}
        self.ends: dict[EdgeKey, set[str]] = {}
        for edge in declared:
            source, event, target, kind, history = edge
            ends = {target} | leaves.get(history, set())
            self.ends[edge] = ends
            for alias in _aliases(edge, leaves):
                self.by_key.setdefault(alias, []).append(edge)
            for end in ends:
                self.by_pair.setdefault((source, end), []).append(edge)
            if kind != "internal":
                self.starts.setdefault((source, event), []).append(edge)
            if kind in ("always", "done"):
                self.eventless.setdefault(source, []).append(edge)

    def marked(self, keys: set[tuple[str, str, str]]
               ) -> tuple[set[EdgeKey], set[tuple[str, str, str]]]:
        """Gives the drawn edges `keys` took, and the keys no declared edge explains."""
        hit: set[EdgeKey] = set()
        left: set[tuple[str, str, str]] = set()
        for key in keys:
            source, event, target = key
            if event == UNSEEN_EVENT:  # seen from outside: any edge between the two states
                hit.update(self.by_pair.get((source, target), ()))
                continue
            if key in self.by_key:
                hit.update(self.by_key[key])
                continue
            explained = self._explain(key)
            if explained is None:
                left.add(key)
            else:
                hit |= explained
        return hit, left

    def _explain(self, key: tuple[str, str, str]) -> set[EdgeKey] | None:
        """Gives the edges a key that names no edge took (none, when it is a region's move or
        more than one route explains it), or None when nothing declared explains it."""
        source, event, target = key
        if self.kinds.get(source) in SCOPED_KINDS and target == source:
            return set()
        routes: list[list[EdgeKey]] = []
        for first in self.starts.get((source, event), ()):
            for rest in self._routes(first[2], target, {source, first[2]}):
                routes.append([first, *rest])
                if len(routes) > 1:
                    return set()
        return set(routes[0]) if routes else None

    def _routes(self, start: str, target: str, seen: set[str]) -> Iterator[list[EdgeKey]]:
        """Gives each way eventless edges lead from `start` to `target`, visiting no state
        twice."""
        for edge in self.eventless.get(start, ()):
            if target in self.ends[edge]:
                yield [edge]
            elif edge[2] not in seen:
                for rest in self._routes(edge[2], target, seen | {edge[2]}):
                    yield [edge, *rest]


def _state_extras(definition: WorkflowDefinition, name: str) -> dict[str, Any]:
    """Gives what a diagram tells of a state's statechart constructs (nothing for a plain
    state): its kind, history, regions and their initial leaves, a map's items, a conditional
    approval, entry and exit actions."""
    state = definition.states[name]
    extras: dict[str, Any] = {}
    if state.kind in ("choice", *SCOPED_KINDS):
        extras["kind"] = state.kind
    if state.history:
        extras["history"] = state.history
    if state.kind in SCOPED_KINDS:
        extras["regions"] = [[region, leaf] for region, leaf in state.regions]
        if state.on_region_failure != "cancel":
            extras["on_region_failure"] = state.on_region_failure
    if state.kind == "map":
        extras.update(items=state.items_text, concurrency_max=state.concurrency_max,
                      tolerated_failures=state.tolerated_failures)
    if state.step is not None and state.step.approval_text:
        extras["approval_if"] = state.step.approval_text
    spec = definition.spec.states.get(name)
    for when in ("entry", "exit"):
        actions = getattr(spec, when, None) or []
        if actions:
            extras[when] = [_action_text(action) for action in actions]
    return extras


def _action_text(action: Any) -> str:
    """Gives an entry or exit action in a few words: the keys it assigns, or the function it
    calls."""
    if getattr(action, "assign", None):
        return "assign " + ", ".join(action.assign)
    function = getattr(action, "function", None)
    if isinstance(function, str):
        return function
    return str(getattr(function, "__name__", "") or "function")


def state_ids(diagram: Mapping[str, Any]) -> dict[str, str]:
    """Gives each state (and compound parent) a plain identifier, in definition order."""
    ids: dict[str, str] = {}
    for state in diagram["states"]:
        ids.setdefault(state["name"], f"s{len(ids)}")
    return ids


class DiagramShape:
    """What both renderers read of a diagram beyond its lists: states by name, children by
    parent, and the region or map state each state runs inside."""

    def __init__(self, diagram: Mapping[str, Any]) -> None:
        self.states = {state["name"]: state for state in diagram["states"]}
        self.children: dict[str, list[Mapping[str, Any]]] = {}
        for state in diagram["states"]:
            self.children.setdefault(state["parent"], []).append(state)
        #: a region's or map state's initial leaf
        self.starts: dict[str, str] = {}
        for state in diagram["states"]:
            for region, leaf in state.get("regions", ()):
                self.starts[region or state["name"]] = leaf

    def kind(self, name: str) -> str:
        return str(self.states[name].get("kind", "")) if name in self.states else ""

    def is_root(self, name: str) -> bool:
        """Tells whether `name` is a region (a parallel state's child) or a map state: what a
        region's or item's flow runs inside."""
        return self.kind(name) == "map" or (
            name in self.states and self.kind(self.states[name]["parent"]) == "parallel")

    def scope(self, name: str) -> str:
        """Gives the region or map state `name` runs inside ("" at the top)."""
        parent = self.states[name]["parent"] if name in self.states else ""
        while parent:
            if self.is_root(parent):
                return str(parent)
            parent = self.states[parent]["parent"] if parent in self.states else ""
        return ""

    def anchor(self, name: str) -> str:
        """Gives the leaf an edge to or from a compound `name` is drawn at (its initial one
        where known)."""
        while name in self.children:
            name = self.starts.get(name) or self.children[name][0]["name"]
        return name

    def leaving(self, name: str) -> str:
        """Gives the leaf an edge out of a compound `name` is drawn from: a final state of its
        flow (of its last region, for a parallel state), so that what follows the compound
        is laid out after it; its initial leaf when it has no final state."""
        while name in self.children:
            children = self.children[name]
            finals = [child["name"] for child in children if child["final"]]
            if finals:
                name = finals[-1]
            elif self.kind(name) == "parallel":
                name = children[-1]["name"]
            else:
                return self.anchor(name)
        return name


def compound_title(state: Mapping[str, Any]) -> str:
    """Gives what a compound's label adds to its name: parallel, or what a map maps over and
    how many items run at once ("" for a plain compound)."""
    kind = state.get("kind", "")
    waits = state.get("on_region_failure") == "wait"
    if kind == "parallel":
        return "parallel" + (", a failed region waits for the others" if waits else "")
    if kind != "map":
        return ""
    limit = state.get("concurrency_max")
    tolerated = int(state.get("tolerated_failures") or 0)
    words = [f"map over {state.get('items', '')}",
             f"{limit} at once" if limit else "all at once"]
    if tolerated:
        words.append(f"{tolerated} failure{'s' if tolerated > 1 else ''} tolerated")
    if waits:
        words.append("a failed item waits for the others")
    return ", ".join(words)


def state_notes(state: Mapping[str, Any]) -> list[str]:
    """Gives the lines a state's box adds below its name: a conditional approval, its entry
    and exit actions."""
    notes = [f"needs approval if {state['approval_if']}"] if state.get("approval_if") else []
    notes += [f"{when} / {', '.join(state[when])}" for when in ("entry", "exit")
              if state.get(when)]
    return notes


def history_mark(state: Mapping[str, Any]) -> str:
    return "H*" if state.get("history") == "deep" else "H"


def edge_text(edge: Mapping[str, Any], plain: Any = str, expression: Any = str) -> str:
    """Gives an edge's label: its event, `(internal)` after an internal transition's, and an
    eventless or join edge's guard in brackets."""
    text = plain(edge["event"])
    if edge.get("kind") == "internal":
        text += " (internal)"
    elif edge.get("guard"):
        text += f" [{expression(edge['guard'])}]"
    return str(text)
