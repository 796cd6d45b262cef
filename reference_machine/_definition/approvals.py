"""Approvals: an approval state's shape and targets, the step it approves, and the gate it
keeps (no way into a step that needs approval but its approval state's grant)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from reference_machine._definition.compiled import CompiledApproval, Transitions
from reference_machine._definition.context import Compilation
from reference_machine._definition.hierarchy import same_scope, target_exists
from reference_machine._records import APPROVAL_GRANTED
from reference_machine._spec import StateSpec
from reference_machine.findings import did_you_mean

__all__ = ["check_approval_entries", "check_approvals", "compile_approval"]

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def compile_approval(name: str, state: StateSpec,
                     leaf_of: Mapping[str, str | None]) -> CompiledApproval | None:
    """Gives the compiled approval of `state` (None when it asks for none)."""
    approval = state.approval
    if approval is None:
        return None
    return CompiledApproval(
        for_state=approval.for_state,
        summary=approval.summary,
        evidence=tuple(approval.evidence),
        roles=frozenset(approval.roles),
        expires_after_ms=approval.expires_after,
        on_expiry=approval.on_expiry,
        escalate_to=leaf_of.get(approval.escalate_to or ""),
    )


def check_approvals(ctx: Compilation) -> None:
    """Checks each approval state (its step, expiry, escalation, summary and handlers), and
    that every step needing approval has an approval state."""
    approved_states: set[str] = set()
    for name, state in ctx.states.items():
        approval = state.approval
        if approval is None:
            continue
        location = f"states.{name}.approval"
        approved_states.add(approval.for_state)
        target = ctx.states.get(approval.for_state)
        if target is None:
            hint = did_you_mean(approval.for_state, ctx.states)
            ctx.sink.error("unknown-target", f"{location}.for_state",
                           f"approval is for state {approval.for_state!r}, which does not "
                           f"exist{hint}", approval.for_state)
        elif target.step is None:
            ctx.sink.error("approval-without-step", f"{location}.for_state",
                           f"approval is for state {approval.for_state!r}, which runs no step",
                           name, approval.for_state)
        elif not target.step.needs_approval:
            ctx.sink.warning("approval-unneeded", f"{location}.for_state",
                             f"approval is for state {approval.for_state!r}, whose step does not "
                             "declare `needs_approval: true`", name, approval.for_state)
        if approval.expires_after <= 0:
            ctx.sink.error("approval-expiry", f"{location}.expires_after",
                           "an approval must expire after a positive delay", name)
        if approval.on_expiry == "escalate" and approval.escalate_to is None:
            ctx.sink.error("escalate-target", f"{location}.escalate_to",
                           "on_expiry is escalate, so the approval needs `escalate_to`", name)
        if approval.escalate_to is not None and target_exists(
                ctx, approval.escalate_to, f"{location}.escalate_to"):
            same_scope(ctx, name, approval.escalate_to, f"{location}.escalate_to")
        for key in _PLACEHOLDER.findall(approval.summary):
            if key not in ctx.spec.context:
                ctx.sink.warning("summary-placeholder", f"{location}.summary",
                                 f"summary names {{{key}}}, which the initial context lacks; it "
                                 "shows empty unless an action sets it", name, key)
        for event in ("approval.granted", "approval.denied"):
            if not ctx.handles(name, event):
                ctx.sink.error("unhandled-approval", f"states.{name}.on",
                               f"approval state {name!r} has no {event!r} transition", name)
    for name, state in ctx.states.items():
        if state.step is not None and state.step.needs_approval and name not in approved_states:
            ctx.sink.error("approval-missing", f"states.{name}.step.needs_approval",
                           f"step {name!r} needs approval, but no approval state names it in "
                           "`for_state`", name)


def check_approval_entries(ctx: Compilation, own: Mapping[str, Mapping[str, Transitions]],
                           charted: Mapping[str, Mapping[str, Any]],
                           leaf_of: Mapping[str, str | None], initial: str | None) -> None:
    """A step that needs approval (`needs_approval: true`) is entered only by the
    `approval.granted` transition of its approval state. Any other way in (a transition,
    a timeout, an escalation, a budget, the start) bypasses the approval: the machine
    refuses the move, or runs the step on an earlier grant still unspent. A conditional
    approval (an expression) is decided on entry, so a direct way in is its design. A
    return to a compound with `history` may resume a gated step rather than enter its
    initial state, depending on the path that left it: lint follows no paths there, and
    `decide` refuses any entry with no grant."""
    approves = {name: state.approval.for_state for name, state in ctx.states.items()
                if state.approval is not None}
    gates: dict[str, list[str]] = {}
    for name, step in approves.items():
        gates.setdefault(step, []).append(name)
    gated = {name: gates[name] for name, state in ctx.states.items()
             if state.step is not None and state.step.needs_approval is True
             and name in gates}  # with no approval state, approval-missing says so
    if not gated:
        return

    def bypass(location: str, how: str, target: str, *ids: str) -> None:
        leaf = leaf_of.get(target)
        if leaf is None or leaf not in gated:
            return
        ways = " or ".join(repr(gate) for gate in gated[leaf])
        into = f"enters {leaf!r}" if leaf == target else (
            f"enters {leaf!r} (the initial state of {target!r})")
        ctx.sink.error("approval-bypass", location,
                       f"{how} {into} without its approval; expected only `approval.granted` "
                       f"of {ways} to enter {leaf!r}, whose step needs approval: go to "
                       f"{gated[leaf][0]!r} instead, which asks for it",
                       *ids, leaf, *gated[leaf])

    for name, events in own.items():
        state = ctx.states[name]
        for event, transitions in events.items():
            written = len(state.transitions(event))
            for transition in transitions:
                where = f"states.{name}.on.{event}" + (
                    f"[{transition.index}]" if written > 1 else "")
                if transition.internal:
                    continue
                if event == APPROVAL_GRANTED:
                    stray = _stray_grant(ctx, name, leaf_of.get(transition.target),
                                         approves)
                    if stray is None:
                        continue
                    how = (f"`approval.granted` of {name!r}, taken also when approval "
                           f"state {stray!r} (an approval of {approves[stray]!r}) is "
                           "granted," if stray != name else f"`approval.granted` of {name!r}")
                else:
                    how = f"`{event}` of {name!r}"
                bypass(f"{where}.target", how, transition.target, name, event)
        for key, label, count in (
                ("always", "an `always` transition", len(state.eventless())),
                ("done", "the `done` transition", len(state.joins()))):
            for transition in charted[name][key]:
                where = f"states.{name}.{key}" + (
                    f"[{transition.index}]" if count > 1 else "")
                bypass(f"{where}.target", f"{label} of {name!r}", transition.target, name)
        if state.after is not None:
            bypass(f"states.{name}.after.target", f"the timeout (`after:`) of {name!r}",
                   state.after.target, name)
        if state.step is not None and state.step.escalate_to is not None:
            bypass(f"states.{name}.step.escalate_to", f"the escalation of step {name!r}",
                   state.step.escalate_to, name)
        if state.approval is not None and state.approval.escalate_to is not None:
            bypass(f"states.{name}.approval.escalate_to",
                   f"the expiry escalation of approval {name!r}",
                   state.approval.escalate_to, name)
    budgets = ctx.spec.budgets
    for key, target in (("budgets.on_exceeded", budgets.on_exceeded),
                        ("budgets.on_cycle", budgets.on_cycle),
                        ("compensation_failed", ctx.spec.compensation_failed)):
        if target is not None:
            bypass(key, f"`{key}`", target)
    starts: list[tuple[str | None, str]] = [(initial, "the run starts in it and")]
    for name, state in ctx.states.items():
        if state.type == "parallel":
            starts += [(region, f"region {region!r} of parallel state {name!r} starts "
                                "in it and") for region in ctx.children.get(name, [])]
        elif state.type == "map":
            first = next((child for child in ctx.children.get(name, [])
                          if ctx.states[child].initial), None)
            starts.append((first, f"each item of map state {name!r} starts in it and"))
    for start, how in starts:
        leaf = leaf_of.get(start or "")
        if leaf in gated:
            ctx.sink.error("approval-bypass", f"states.{leaf}.initial",
                           f"{leaf!r} needs approval for its step, but {how} runs it with "
                           f"no approval; expected only `approval.granted` of "
                           f"{' or '.join(repr(gate) for gate in gated[leaf])} to enter it: "
                           f"start in {gated[leaf][0]!r} instead", leaf, *gated[leaf])


def _stray_grant(ctx: Compilation, holder: str, entered: str | None, approves: Mapping[str, str]
                 ) -> str | None:
    """Gives the approval state whose grant takes `holder`'s `approval.granted` transition
    into `entered` though it approves another step: `holder` itself, or an approval state
    below it that inherits the transition (None when every grant taking it approves
    `entered`)."""
    takers = [name for name in approves
              if holder in ctx.chain(name) and _inherits(ctx, name, holder)]
    return next((taker for taker in takers if approves[taker] != entered), None)


def _inherits(ctx: Compilation, name: str, holder: str) -> bool:
    """Tells whether an `approval.granted` of `name` may fall through to the one its
    ancestor `holder` declares: no state between them declares an unguarded one."""
    for state in ctx.chain(name):
        if state == holder:
            return True
        if any(t.guard is None for t in ctx.states[state].transitions(APPROVAL_GRANTED)):
            return False
    return False
