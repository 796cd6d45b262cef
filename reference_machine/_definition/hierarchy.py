"""The state hierarchy and the targets that name its states: parents, initial states, the leaf
each state resolves to, and targets that exist and stay in their scope (region or map item)."""

from __future__ import annotations

from collections.abc import Mapping

from reference_machine._definition.context import Compilation
from reference_machine.findings import did_you_mean

__all__ = ["check_hierarchy", "initial_state", "resolve_leaf", "same_scope", "target_exists"]


def check_hierarchy(ctx: Compilation) -> dict[str, list[str]]:
    """Gives each compound state's children, checking each parent (it exists, it may hold
    children, no cycle)."""
    children: dict[str, list[str]] = {}
    for name, state in ctx.states.items():
        if state.parent is None:
            continue
        location = f"states.{name}.parent"
        if state.parent not in ctx.states:
            hint = did_you_mean(state.parent, ctx.states)
            ctx.sink.error("unknown-parent", location,
                           f"parent state {state.parent!r} does not exist{hint}", state.parent)
            continue
        parent = ctx.states[state.parent]
        reasons = ([f"is {parent.type}"]
                   if parent.type not in ("normal", "parallel", "map") else [])
        # a parallel or map state's own timeout leaves it, abandoning its regions
        keys = ("step", "approval") if parent.type in ("parallel", "map") else (
            "step", "approval", "after")
        reasons += [f"has {key}" for key in keys if getattr(parent, key) is not None]
        if parent.always:
            reasons.append("has always")
        if reasons:
            ctx.sink.error("bad-parent", location,
                           f"parent {state.parent!r} {' and '.join(reasons)}; a compound parent "
                           "must be a plain normal, parallel or map state", state.parent, name)
        children.setdefault(state.parent, []).append(name)
    for name in ctx.states:
        seen = [name]
        current = ctx.states[name].parent
        while current is not None and current in ctx.states:
            if current in seen:
                if current == name:
                    cycle = " -> ".join([*seen, current])
                    ctx.sink.error("parent-cycle", f"states.{name}.parent",
                                   f"compound parents form a cycle: {cycle}", *seen)
                break
            seen.append(current)
            current = ctx.states[current].parent
    return children


def initial_state(ctx: Compilation, parent: str | None, children: Mapping[str, list[str]],
                  location: str) -> str | None:
    """Gives the one initial state among the top level's (`parent` None) or a compound
    state's children; None, and an error, when there is none or more than one."""
    members = children.get(parent, []) if parent else [
        n for n, s in ctx.states.items() if s.parent is None]
    flagged = [n for n in members if ctx.states[n].initial]
    where = "the top level" if parent is None else f"compound state {parent!r}"
    if len(flagged) == 1:
        return flagged[0]
    if not flagged:
        ctx.sink.error("initial-count", location,
                       f"{where} has no initial state; mark exactly one of "
                       f"{', '.join(sorted(members))} with `initial: true`", *members)
    else:
        ctx.sink.error("initial-count", location,
                       f"{where} has {len(flagged)} initial states "
                       f"({', '.join(flagged)}); exactly one may be initial", *flagged)
    return None


def resolve_leaf(name: str, initial_child: Mapping[str, str | None]) -> str | None:
    """Gives the leaf state `name` resolves to by following `initial_child` (None on a loop)."""
    seen: set[str] = set()
    current: str | None = name
    while current is not None and current in initial_child:
        if current in seen:
            return None
        seen.add(current)
        current = initial_child[current]
    return current


def target_exists(ctx: Compilation, target: str | None, location: str) -> bool:
    """Tells whether `target` names a state (an error when it names none)."""
    if target is None:
        return False
    if target in ctx.states:
        return True
    hint = did_you_mean(target, ctx.states)
    ctx.sink.error("unknown-target", location, f"target state {target!r} does not exist{hint}",
                   target)
    return False


def same_scope(ctx: Compilation, name: str, target: str | None, location: str) -> bool:
    """Tells whether a transition of `name` to `target` stays in `name`'s scope (an error
    when it does not: a region is left only by its parallel state's own transitions)."""
    if target is None or target not in ctx.states:
        return True
    here = ctx.scope_of.get(name)
    there = ctx.scope_of.get(target)
    if here == there and target != here:
        return True
    where = "the top level" if here is None else f"{ctx.scope_word(here)} {here!r}"
    ctx.sink.error("leaves-scope", location,
                   f"{name!r} is in {where} and may not move to {target!r}, which is not; a "
                   "region or map item ends in one of its own final states and the parallel "
                   "or map state's `done:` (or its own `on:`) leaves it", name, target)
    return False
