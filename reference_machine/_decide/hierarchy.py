"""Compound states: the domain a move leaves and enters below, its exit and entry sets, the
history an exit records and a move resolves, and running the exit, transition and entry
actions in order."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reference_machine._definition import Action, WorkflowDefinition
from reference_machine._records import Event, Rejected, RejectReason

__all__ = ["domain_of", "entry_set", "exit_set", "merge", "recorded", "resolve", "run_moves"]


def domain_of(definition: WorkflowDefinition, source: str, target: str) -> str | None:
    """Gives the lowest compound state that is a proper ancestor of both (SCXML's LCCA), or
    None for the top: what a transition from `source` to `target` leaves and enters below."""
    if not source:
        return None
    states = definition.states
    above = states[target].ancestors
    for ancestor in states[source].ancestors:
        if ancestor in above:
            return ancestor
    return None


def exit_set(definition: WorkflowDefinition, leaf: str, domain: str | None
             ) -> tuple[str, ...]:
    """Gives the states a move from `leaf` leaves, innermost first."""
    if not leaf:
        return ()
    chain = (leaf, *definition.states[leaf].ancestors)
    return chain[:chain.index(domain)] if domain in chain else chain


def entry_set(definition: WorkflowDefinition, leaf: str, domain: str | None
              ) -> tuple[str, ...]:
    """Gives the states a move to `leaf` enters, outermost first."""
    chain = (leaf, *definition.states[leaf].ancestors)
    return tuple(reversed(chain[:chain.index(domain)] if domain in chain else chain))


def recorded(definition: WorkflowDefinition, leaf: str, exits: tuple[str, ...],
             history: Mapping[str, str]) -> Mapping[str, str]:
    """Gives `history` with what each exited compound state with `history:` had active."""
    states = definition.states
    chain = (leaf, *states[leaf].ancestors)
    updated: dict[str, str] | None = None
    for name in exits:
        kind = states[name].history
        if kind is None:
            continue
        if updated is None:
            updated = dict(history)
        updated[name] = leaf if kind == "deep" else chain[chain.index(name) - 1]
    return history if updated is None else updated


def resolve(definition: WorkflowDefinition, target: str, history: Mapping[str, str]) -> str:
    """Gives the leaf a move to `target` enters: down its initial children, or to what its
    history recorded."""
    states = definition.states
    current = target
    while True:
        state = states[current]
        child = state.initial_child
        if child is None or state.kind == "map":
            return current
        if state.history is not None and current in history:
            if state.history == "deep":
                return history[current]
            child = history[current]
        current = child


def run_moves(definition: WorkflowDefinition, context: Mapping[str, Any], event: Event,
              exits: tuple[str, ...], actions: tuple[Action, ...], entries: tuple[str, ...]
              ) -> tuple[Mapping[str, Any], Rejected | None]:
    """Runs exit actions (innermost first), the transition's, then entry actions (outermost
    first); gives the context after them, or the rejection of one that raised."""
    states = definition.states
    steps = [(f"exit action of {name!r}", states[name].exit) for name in exits]
    steps.append(("transition action", actions))
    steps += [(f"entry action of {name!r}", states[name].entry) for name in entries]
    updated: dict[str, Any] | None = None
    for where, group in steps:
        for action in group:
            if updated is None:
                updated = dict(context)
            try:
                changed = action(updated, event)
            except Exception as exc:  # a user's action must not crash the machine
                return context, Rejected(RejectReason.ACTION_ERROR,
                                         f"{where} on {event.type!r} failed: "
                                         f"{type(exc).__name__}: {exc}")
            if changed:
                merge(updated, changed)
    return (context if updated is None else updated), None


def merge(context: dict[str, Any], changed: Mapping[str, Any]) -> None:
    """Sets the keys an action changed; a key given the context itself (a function returning
    `{"all": context}`) gets a copy of it as it was, so that a context never holds itself."""
    for key, value in changed.items():
        context[key] = dict(context) if value is context else value
