"""Each state's shape: what its type allows (final, wait, choice, parallel, map), the events it
can receive, and its statechart constructs (entry, exit, always, done, history, regions, map
settings), compiled."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from reference_machine._definition.compiled import Action
from reference_machine._definition.context import Compilation
from reference_machine._definition.expressions import compile_action, compile_guard
from reference_machine._definition.hierarchy import same_scope, target_exists
from reference_machine._definition.steps import check_step
from reference_machine._definition.transitions import compile_list
from reference_machine._spec import ActionSpec, StateSpec

__all__ = ["check_handlers", "check_map_fields", "check_state", "compile_chart"]


def check_state(ctx: Compilation, name: str, state: StateSpec, children: Mapping[str, list[str]],
                leaf_of: Mapping[str, str | None]) -> None:
    """Checks what the type of state `name` allows, its timeout's target, its step, and the
    built-in events it cannot receive."""
    location = f"states.{name}"
    is_compound = bool(children.get(name))
    if state.type == "final":
        for key in ("on", "after", "step", "approval"):
            if getattr(state, key):
                ctx.sink.error("final-exit", f"{location}.{key}",
                               f"final state {name!r} may not have `{key}`: a final state "
                               "accepts nothing", name)
        if state.outcome is None:
            ctx.sink.error("final-outcome", f"{location}.outcome",
                           f"final state {name!r} needs an outcome (success, failure, ...)", name)
        if is_compound:
            ctx.sink.error("final-compound", location,
                           f"final state {name!r} may not have child states", name)
        # a region's own transitions are not a final state's: a region that is final
        # takes nothing (they apply only while the region runs)
        scope = ctx.scope_of.get(name)
        inherited = [event for parent in ctx.chain(name)[1:] if parent != scope
                     for event in ctx.states[parent].on]
        if inherited:
            ctx.sink.error("final-exit", f"{location}.parent",
                           f"final state {name!r} would inherit transitions "
                           f"({', '.join(sorted(set(inherited)))}) from its parents; move it out "
                           "of the compound state", name, *sorted(set(inherited)))
        return
    if state.outcome is not None:
        ctx.sink.error("outcome-not-final", f"{location}.outcome",
                       f"only final states have an outcome; {name!r} is {state.type}", name)
    if state.type == "wait":
        if state.step is not None:
            ctx.sink.error("wait-step", f"{location}.step",
                           f"wait state {name!r} suspends the run and may not run a step; "
                           "put the step in a normal state", name)
        if state.after is None and state.approval is None and not (
                ctx.spec.reactive and state.on):  # a reactive wait may wait for events
            ctx.sink.error("wait-timeout", f"{location}.after",
                           f"wait state {name!r} has no timeout; expected "
                           "`after: {delay: ..., target: ...}`", name)
    elif state.approval is not None:
        ctx.sink.error("approval-not-wait", f"{location}.approval",
                       f"state {name!r} has an approval but is {state.type}; approvals are "
                       "`type: wait`", name)
    elif (state.step is None and state.after is None and not is_compound
          and state.type == "normal" and not state.always):
        ctx.sink.warning("implicit-wait", location,
                         f"state {name!r} runs no step, so it waits for an event with no "
                         "timeout; make it `type: wait` with `after:`", name)
    if state.after is not None and target_exists(ctx, state.after.target,
                                                 f"{location}.after.target"):
        same_scope(ctx, name, state.after.target, f"{location}.after.target")
    if state.step is not None:
        check_step(ctx, name, state.step, leaf_of)
    elif not is_compound:
        check_handlers(ctx, name, ("step.succeeded", "step.failed"), "has no step")
    if state.approval is None and not is_compound:
        check_handlers(ctx, name, ("approval.granted", "approval.denied"),
                       "has no approval")


def check_handlers(ctx: Compilation, name: str, events: tuple[str, ...], why: str) -> None:
    """Reports a transition of `name` on one of `events`, which never arrive there (`why`)."""
    for event in events:
        if event in ctx.states[name].on:
            ctx.sink.error("event-never-arrives", f"states.{name}.on.{event}",
                           f"state {name!r} {why}, so {event!r} never arrives there", name, event)


def compile_chart(ctx: Compilation, name: str, state: StateSpec, children: Mapping[str, list[str]],
                  initial_child: Mapping[str, str | None],
                  leaf_of: Mapping[str, str | None]) -> dict[str, Any]:
    """Gives the statechart fields of a compiled state (entry, exit, always, done, history,
    regions, map settings), checking each with its location."""
    location = f"states.{name}"
    kind = state.type
    members = children.get(name, [])

    def actions(specs: list[ActionSpec], key: str) -> tuple[Action, ...]:
        return tuple(action for index, spec in enumerate(specs)
                     if (action := compile_action(ctx, spec, f"{location}.{key}[{index}]")))

    always = compile_list(ctx, name, state.eventless(), f"{location}.always", leaf_of,
                          "always")
    done = compile_list(ctx, name, state.joins(), f"{location}.done", leaf_of, "done")
    chart: dict[str, Any] = {
        "entry": actions(state.entry, "entry"),
        "exit": actions(state.exit, "exit"),
        "always": always,
        "done": done,
        "history": state.history,
        "initial_child": initial_child.get(name),
        "scope": ctx.scope_of.get(name),
    }
    if state.always and (state.step is not None or state.approval is not None):
        ctx.sink.error("always-with-step", f"{location}.always",
                       f"state {name!r} runs a {'step' if state.step else 'approval'}; leaving "
                       "it at once by an eventless transition would abandon it", name)
    if kind == "final" and state.always:
        ctx.sink.error("final-exit", f"{location}.always",
                       f"final state {name!r} may not have `always`: a final state accepts "
                       "nothing", name)
    if kind == "choice":
        for key in ("step", "approval", "after"):
            if getattr(state, key) is not None:
                ctx.sink.error("choice-shape", f"{location}.{key}",
                               f"choice state {name!r} is left at once and may not have "
                               f"`{key}`", name)
        if state.on or members:
            ctx.sink.error("choice-shape", location,
                           f"choice state {name!r} is left at once: it has only `always:` "
                           "(no `on:`, no children)", name)
        if not state.always:
            ctx.sink.error("choice-shape", f"{location}.always",
                           f"choice state {name!r} needs `always:`, the branches it chooses "
                           "among", name)
        elif all(t.guard is not None for t in state.eventless()):
            ctx.sink.warning("choice-no-default", f"{location}.always",
                             f"no branch of choice {name!r} is unguarded: when no guard holds "
                             "the event that led there is rejected", name)
    if state.done is not None and kind not in ("parallel", "map"):
        ctx.sink.error("done-not-parallel", f"{location}.done",
                       f"only parallel and map states have `done:`; {name!r} is {kind}", name)
    if state.history is not None and (not members or kind != "normal"):
        ctx.sink.error("history-shape", f"{location}.history",
                       f"`history:` belongs on a compound normal state; {name!r} is "
                       f"{'a leaf' if not members else kind}", name)
    check_map_fields(ctx, name, state)
    if kind in ("parallel", "map"):
        for key in ("step", "approval"):
            if getattr(state, key) is not None:
                ctx.sink.error("parallel-shape", f"{location}.{key}",
                               f"{kind} state {name!r} may not have `{key}`: put it in a child",
                               name)
        if not state.done:
            ctx.sink.error("join-missing", f"{location}.done",
                           f"{kind} state {name!r} needs `done:`, where the run goes once "
                           f"every {'region' if kind == 'parallel' else 'item'} is final", name)
    if kind == "parallel":
        if not members:
            ctx.sink.error("parallel-shape", location,
                           f"parallel state {name!r} needs regions: child states, each a "
                           "compound state with an initial and a final child", name)
        regions = []
        for region in members:
            if not children.get(region) or ctx.states[region].type != "normal":
                ctx.sink.error("parallel-shape", f"states.{region}",
                               f"{region!r} is a region of parallel state {name!r}, so it must "
                               "be a compound normal state (with child states of its own)",
                               region, name)
                continue
            if ctx.states[region].step is not None or ctx.states[region].after:
                continue  # bad-parent says why
            start = leaf_of.get(region)
            if start is not None:
                regions.append((region, start))
        chart["regions"] = tuple(regions)
        chart["on_region_failure"] = state.on_region_failure
    elif kind == "map":
        first = initial_child.get(name)
        start = leaf_of.get(first) if first else None
        if not members:
            ctx.sink.error("map-shape", location,
                           f"map state {name!r} needs child states: the flow each item runs",
                           name)
        chart["regions"] = (("", start),) if start else ()
        guard, text = compile_guard(ctx, state.items, f"{location}.items") \
            if state.items else (None, "")
        chart.update(items=guard, items_text=text, concurrency_max=state.concurrency_max,
                     tolerated_failures=state.tolerated_failures, results=state.results,
                     on_region_failure=state.on_region_failure)
    return chart


def check_map_fields(ctx: Compilation, name: str, state: StateSpec) -> None:
    """Checks the map settings: only on a map state, and its `items:` a list."""
    location = f"states.{name}"
    if state.type != "map":
        for key in ("items", "concurrency_max"):
            if getattr(state, key) is not None:
                ctx.sink.error("map-only", f"{location}.{key}",
                               f"`{key}` belongs on a map state; {name!r} is {state.type}", name)
        return
    if state.items is None:
        ctx.sink.error("map-items", f"{location}.items",
                       f"map state {name!r} needs `items:`, an expression giving the list it "
                       "maps over (items: context.attachments)", name)
        return
    match = re.fullmatch(r"\s*context\.([A-Za-z_][A-Za-z0-9_]*)\s*", state.items)
    if match and match.group(1) in ctx.spec.context:
        value = ctx.spec.context[match.group(1)]
        if not isinstance(value, list):
            ctx.sink.error("map-not-list", f"{location}.items",
                           f"map state {name!r} maps over {state.items.strip()!r}, which the "
                           f"initial context sets to a {type(value).__name__}, not a list", name)
