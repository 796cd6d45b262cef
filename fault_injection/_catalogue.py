"""The fault catalogue: every kind of fault the simulator can inject, in catalogue order.

The order of `FaultKind` is the catalogue order: plans list their rates in it, swarm mode draws
in it, and docs and CLI output print in it, so that runs stay deterministic given a seed.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType

__all__ = [
    "DESCRIPTIONS",
    "FORGED_VARIANTS",
    "MALFORMED_VARIANTS",
    "TOOL_FAULTS",
    "FaultKind",
]


class FaultKind(StrEnum):
    """One kind of fault; its value is the key a plan file uses."""

    CRASH = "crash"
    DUPLICATE_EVENT = "duplicate_event"
    LATE_EVENT = "late_event"
    REORDERED_EVENTS = "reordered_events"
    DROPPED_EVENT = "dropped_event"
    TOOL_TRANSIENT = "tool_transient"
    TOOL_RATE_LIMITED = "tool_rate_limited"
    TOOL_PERMANENT = "tool_permanent"
    TOOL_TIMEOUT_BEFORE_APPLY = "tool_timeout_before_apply"
    TOOL_TIMEOUT_AFTER_APPLY = "tool_timeout_after_apply"
    SLOW_TOOL = "slow_tool"
    MALFORMED_OUTPUT = "malformed_output"
    TIMER_SKEW = "timer_skew"
    STORE_WRITE_FAILURE = "store_write_failure"
    SECOND_WORKER = "second_worker"
    FORGED_APPROVAL = "forged_approval"
    WRONG_CORRELATION = "wrong_correlation"


TOOL_FAULTS: frozenset[FaultKind] = frozenset(
    {
        FaultKind.TOOL_TRANSIENT,
        FaultKind.TOOL_RATE_LIMITED,
        FaultKind.TOOL_PERMANENT,
        FaultKind.TOOL_TIMEOUT_BEFORE_APPLY,
        FaultKind.TOOL_TIMEOUT_AFTER_APPLY,
        FaultKind.SLOW_TOOL,
        FaultKind.MALFORMED_OUTPUT,
    }
)
"""The kinds that act on a tool call, and so need a definition with tools (`tools:` applies)."""

MALFORMED_VARIANTS: tuple[str, ...] = (
    "wrong_shape",
    "missing_field",
    "wrong_type",
    "unknown_event",
)
"""How `malformed_output` breaks a tool's output."""

FORGED_VARIANTS: tuple[str, ...] = ("wrong_source", "wrong_role", "stale_request", "changed_hash")
"""How `forged_approval` forges an approval event."""

DESCRIPTIONS: Mapping[FaultKind, str] = MappingProxyType(
    {
        FaultKind.CRASH: "the worker crashes at one of the runtime's crash points",
        FaultKind.DUPLICATE_EVENT: "an event is delivered twice",
        FaultKind.LATE_EVENT: "an event arrives late, after `delay`",
        FaultKind.REORDERED_EVENTS: "two pending events are delivered in swapped order",
        FaultKind.DROPPED_EVENT: "an event is lost, then redelivered after `redeliver_after`",
        FaultKind.TOOL_TRANSIENT: "a tool call fails with a transient error",
        FaultKind.TOOL_RATE_LIMITED: "a tool call is refused as rate limited",
        FaultKind.TOOL_PERMANENT: "a tool call fails permanently",
        FaultKind.TOOL_TIMEOUT_BEFORE_APPLY: "a tool call times out before the tool applied it",
        FaultKind.TOOL_TIMEOUT_AFTER_APPLY: "a tool call times out after the tool applied it",
        FaultKind.SLOW_TOOL: "a tool call takes `latency` longer than usual",
        FaultKind.MALFORMED_OUTPUT: "a tool returns output of the wrong shape or type",
        FaultKind.TIMER_SKEW: "a timer fires early or late by up to `max_skew`",
        FaultKind.STORE_WRITE_FAILURE: "the event store refuses a write",
        FaultKind.SECOND_WORKER: "a second worker advances the same execution concurrently",
        FaultKind.FORGED_APPROVAL: (
            "a forged approval arrives (wrong source, role, request or hash)"
        ),
        FaultKind.WRONG_CORRELATION: (
            "an event meant for another run arrives: a field its `correlate:` ties to the "
            "context holds another value"
        ),
    }
)
"""One line per kind, for docs and CLI output."""
