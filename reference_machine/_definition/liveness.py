"""Reachability, cycles and liveness: eventless transitions that go round forever, trap states,
states no run reaches, and states from which no final state can be reached, per scope."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

from reference_machine._definition.compiled import CompiledState, CompiledTransition
from reference_machine._definition.context import Compilation

__all__ = ["check_eventless_cycles", "check_graph", "reachable_from"]


def check_eventless_cycles(ctx: Compilation, charted: Mapping[str, Mapping[str, Any]]) -> None:
    """An eventless move that always comes back (each state's first eventless transition
    unguarded) is a runaway: an error. A loop through guarded ones may end: a warning."""
    first: dict[str, CompiledTransition] = {}
    edges: dict[str, list[str]] = {}
    for name, chart in charted.items():
        always = chart["always"]
        if always:
            if always[0].guard is None:
                first[name] = always[0]
            edges[name] = [t.target_leaf for t in always]
    reported: set[str] = set()
    for start in first:
        path, current = [start], first[start].target_leaf
        while current in first and current not in path:
            path.append(current)
            current = first[current].target_leaf
        if current in path and not reported & set(path):
            loop = path[path.index(current):]
            reported |= set(loop)
            ctx.sink.error("eventless-cycle", f"states.{loop[0]}.always",
                           "eventless transitions with no guard go round forever: "
                           f"{' -> '.join([*loop, loop[0]])}", *loop)
    for start in edges:
        if start in reported:
            continue
        seen, stack = set(), list(edges[start])
        while stack:
            current = stack.pop()
            if current == start:
                ctx.sink.warning("eventless-loop", f"states.{start}.always",
                                 f"eventless transitions can lead from {start!r} back to it; "
                                 "if their guards all keep holding the run is stopped as a "
                                 "runaway", start)
                reported.add(start)
                break
            if current not in seen:
                seen.add(current)
                stack.extend(edges.get(current, ()))


def check_graph(ctx: Compilation, initial: str | None, leaves: list[str],
                states: Mapping[str, CompiledState],
                leaf_of: Mapping[str, str | None], scope: str | None = None) -> None:
    """Checks that every state of `scope` (the top level, a region or a map's item flow)
    can be reached from `initial`, and that a final state can be reached from each."""
    if initial is None:
        return
    spec = ctx.spec
    budgets = spec.budgets
    top = scope is None
    # every declared budget target can be reached from anywhere; but only budgets that a
    # loop must exhaust count as a way to finish: cost accrues only on steps and cycles only
    # on repeated errors, so neither guarantees an exit
    reachable_targets = [leaf_of.get(t) for t in (budgets.on_exceeded, budgets.on_cycle)
                         if t] if top else []
    bounded = any(limit is not None for limit in (budgets.transitions_max,
                                                   budgets.visits_max, budgets.deadline))
    exits = [leaf_of.get(budgets.on_exceeded)] if (
        top and bounded and budgets.on_exceeded) else []
    edges: dict[str, list[str]] = {}
    for leaf in leaves:
        state = states[leaf]
        if state.final:
            edges[leaf] = []
            continue
        out: list[str | None] = [t.target_leaf for ts in state.on.values() for t in ts
                                 if not t.internal]
        out += [t.target_leaf for t in (*state.always, *state.done)]
        if state.after_target:
            out.append(state.after_target)
        if state.step is not None:
            if state.step.escalate_to:
                out.append(state.step.escalate_to)
            if state.step.compensation is not None and spec.compensation_failed and top:
                out.append(leaf_of.get(spec.compensation_failed))
        if state.approval is not None and state.approval.escalate_to:
            out.append(state.approval.escalate_to)
        if state.regions and spec.compensation_failed and top and ctx.undoes(leaf):
            out.append(leaf_of.get(spec.compensation_failed))
        edges[leaf] = [t for t in out if t]
        if not edges[leaf] and leaf not in ctx.unresolved:
            ctx.sink.error("trap-state", f"states.{leaf}",
                           f"state {leaf!r} is not final and has no way out (no transition, "
                           "timeout or escalation leaves it)", leaf)
        edges[leaf].extend(t for t in exits if t)

    reachable = reachable_from(initial, edges)
    for target in reachable_targets:
        if target:
            reachable |= reachable_from(target, edges)
    where = f"the initial state {initial!r}" if top else (
        f"{initial!r}, where {ctx.scope_word(scope or '')} {scope!r} starts")
    for name in ctx.states:
        if ctx.scope_of.get(name) != scope or name == scope:
            continue
        descendants = [leaf for leaf in leaves
                       if leaf == name or name in states[leaf].ancestors]
        if not any(leaf in reachable for leaf in descendants):
            ctx.sink.error("unreachable-state", f"states.{name}",
                           f"state {name!r} cannot be reached from {where}", name)
    finals = {leaf for leaf in leaves if states[leaf].final}
    if top and ctx.spec.reactive:
        return  # it ends by design in no final state: nothing to reach
    owner = scope if scope is None or ctx.states[scope].type == "map" else (
        ctx.states[scope].parent)
    never = "" if top else (f", so {ctx.states[owner or ''].type} state {owner!r} never "
                            "gets to `done`")
    if not finals & reachable:
        if top:
            ctx.sink.error("no-final", "states",
                           f"no final state can be reached from the initial state {initial!r} "
                           "(a workflow that runs until it is stopped says `reactive: true`)",
                           initial)
        else:
            ctx.sink.error("join-never", f"states.{scope}",
                           f"{ctx.scope_word(scope or '')} {scope!r} has no final state that "
                           f"can be reached from {initial!r}{never}", scope or "", initial)
        return
    reverse: dict[str, list[str]] = {}
    for source, targets in edges.items():
        for target in targets:
            reverse.setdefault(target, []).append(source)
    can_finish: set[str] = set()
    for final in finals:
        can_finish |= reachable_from(final, reverse)
    stuck = sorted(leaf for leaf in reachable if leaf not in can_finish)
    for leaf in stuck:
        ctx.sink.error("no-way-to-final", f"states.{leaf}",
                       f"no final state can be reached from state {leaf!r} (it loops among "
                       f"{', '.join(stuck)} forever){never}", leaf)


def reachable_from(start: str, edges: Mapping[str, list[str]]) -> set[str]:
    """Gives the nodes reachable from `start` along `edges`, `start` among them."""
    seen = {start}
    queue = deque([start])
    while queue:
        for target in edges.get(queue.popleft(), ()):
            if target not in seen:
                seen.add(target)
                queue.append(target)
    return seen
