"""Transitions: a state's `on:` by event, its `always:` and `done:`, each compiled with its guard
and actions and its target resolved to a leaf state."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reference_machine._definition.compiled import CompiledTransition
from reference_machine._definition.context import Compilation
from reference_machine._definition.expressions import compile_action, compile_guard
from reference_machine._definition.hierarchy import same_scope, target_exists
from reference_machine._records import BUILTIN_EVENTS, TRANSITION_EVENTS
from reference_machine._spec import StateSpec
from reference_machine.findings import did_you_mean

__all__ = ["compile_list", "compile_one", "compile_transitions"]


def compile_transitions(ctx: Compilation, name: str, state: StateSpec, events: Mapping[str, Any],
                        leaf_of: Mapping[str, str | None]
                        ) -> dict[str, tuple[CompiledTransition, ...]]:
    """Gives the transitions state `name` declares under `on:`, compiled, by event."""
    compiled: dict[str, tuple[CompiledTransition, ...]] = {}
    for event in state.on:
        transitions = state.transitions(event)
        location = f"states.{name}.on.{event}"
        if event not in events and event not in TRANSITION_EVENTS:
            if event in BUILTIN_EVENTS:
                ctx.sink.error("unknown-event", location,
                               f"{event!r} is handled by the machine itself and cannot label a "
                               "transition", event)
            else:
                hint = did_you_mean(event, [*events, *TRANSITION_EVENTS])
                ctx.sink.error("unknown-event", location,
                               f"event {event!r} is not declared under `events:`{hint}", event)
        items: list[CompiledTransition] = []
        for index, transition in enumerate(transitions):
            where = f"{location}[{index}]" if len(transitions) > 1 else location
            if transition.target is None and event in TRANSITION_EVENTS:
                ctx.sink.error("internal-builtin", f"{where}.target",
                               f"{event!r} ends a step or an approval, so its transition "
                               "must leave the state: give it a target", name, event)
                continue
            one = compile_one(ctx, name, event, index, transition, where, leaf_of)
            if one is not None:
                items.append(one)
        compiled[event] = tuple(items)
    return compiled


def compile_list(ctx: Compilation, name: str, transitions: list[Any], location: str,
                 leaf_of: Mapping[str, str | None], label: str
                 ) -> tuple[CompiledTransition, ...]:
    """Compiles `always:` or `done:` transitions (they always name a target)."""
    items: list[CompiledTransition] = []
    for index, transition in enumerate(transitions):
        where = f"{location}[{index}]" if len(transitions) > 1 else location
        if transition.target is None:
            ctx.sink.error("internal-eventless", f"{where}.target",
                           f"a `{label}` transition needs a target: one without would "
                           f"{'run its actions forever' if label == 'always' else 'stay'}",
                           name)
            continue
        compiled = compile_one(ctx, name, label, index, transition, where, leaf_of)
        if compiled is not None:
            items.append(compiled)
    return tuple(items)


def compile_one(ctx: Compilation, name: str, event: str, index: int, transition: Any, where: str,
                leaf_of: Mapping[str, str | None]) -> CompiledTransition | None:
    """Compiles one transition of `name` (None, an error said why, when its target is
    unknown or leaves its scope); a transition with no target is internal."""
    guard, guard_text = compile_guard(ctx, transition.guard, f"{where}.guard")
    actions = tuple(
        action for position, spec in enumerate(transition.actions)
        if (action := compile_action(ctx, spec, f"{where}.actions[{position}]"))
    )
    if transition.target is None:
        return CompiledTransition(event, name, index, "", "", guard, guard_text, actions,
                                  internal=True)
    if not target_exists(ctx, transition.target, f"{where}.target"):
        ctx.unresolved.add(name)
        return None
    same_scope(ctx, name, transition.target, f"{where}.target")
    target_leaf = leaf_of.get(transition.target)
    if target_leaf is None:
        ctx.unresolved.add(name)
        return None
    return CompiledTransition(event, name, index, transition.target, target_leaf, guard,
                              guard_text, actions)
