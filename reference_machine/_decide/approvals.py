"""Approvals: whether a step needs one, the request a gated state sends, and the hash of the
exact action an approver signs."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from reference_machine._definition import CompiledState, CompiledStep, WorkflowDefinition
from reference_machine._records import Event, RequestApproval

__all__ = ["action_hash", "approval_needed", "approval_request", "step_action_hash"]

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def approval_needed(step: CompiledStep, context: Mapping[str, Any], event: Event) -> bool:
    """Tells whether a conditional approval holds; an expression that raises asks for one."""
    assert step.approval_when is not None
    try:
        return bool(step.approval_when(context, event))
    except Exception:  # the safe side of a broken condition is to ask a person
        return True


def approval_request(definition: WorkflowDefinition, execution_id: str, state: CompiledState,
                     visit: int, context: Mapping[str, Any], now: int) -> RequestApproval:
    approval = state.approval
    assert approval is not None
    gated = definition.states[approval.for_state].step
    assert gated is not None
    summary = _PLACEHOLDER.sub(lambda m: str(context.get(m.group(1), "")), approval.summary)
    evidence = {key: context.get(key) for key in approval.evidence}
    return RequestApproval(
        f"{execution_id}/{state.name}/{visit}/approval", state.name, approval.for_state, summary,
        evidence, tuple(sorted(approval.roles)), step_action_hash(gated, gated.input(context)),
        now + approval.expires_after_ms,
    )


def step_action_hash(step: CompiledStep, step_input: Mapping[str, Any]) -> str:
    """Gives the hash of the exact action: state, tool and canonical input."""
    action = {"state": step.state, "tool": step.tool, "input": _canonical(step_input)}
    text = json.dumps(action, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _canonical(value: Any) -> Any:
    """Gives a JSON value that is the same in every process and distinct for distinct inputs.

    JSON-native values stay as they are (so an approver can hash the JSON action itself).
    Anything else is tagged under a key starting with NUL: a non-text key becomes
    `NUL type:json`, a set `{NUL "set": sorted}`; a text key that itself starts with NUL gets a
    second NUL, so no tagged form can equal a user's value.
    """
    if isinstance(value, Mapping):
        return {_canonical_key(key): _canonical(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(item) for item in value]
    if isinstance(value, set | frozenset):
        items = [_canonical(item) for item in value]
        return {"\x00set": sorted(items, key=lambda item: json.dumps(item, sort_keys=True))}
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return {"\x00" + type(value).__name__: repr(value)}


def _canonical_key(key: Any) -> str:
    if isinstance(key, str):
        return "\x00" + key if key.startswith("\x00") else key
    return f"\x00{type(key).__name__}:{json.dumps(_canonical(key), sort_keys=True)}"


def action_hash(definition: WorkflowDefinition, state: str, context: Mapping[str, Any]) -> str:
    """Gives the hash an approver must sign to authorize `state`'s step under `context`."""
    step = definition.states[state].step
    if step is None:
        msg = f"state {state!r} of {definition.name!r} runs no step"
        raise ValueError(msg)
    return step_action_hash(step, step.input(context))
