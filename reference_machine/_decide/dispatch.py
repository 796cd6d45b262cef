"""The entry points: `new_execution`, `start_event` and `decide`, which checks an event and
hands it on: to the fast path of a plain move, to a built-in event's handler, to the regions of
a parallel or map state, or to the current state's transitions for a user event."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from reference_machine._decide.handlers import (
    on_approval,
    on_compensation_result,
    on_step_result,
    on_timer,
)
from reference_machine._decide.moves import move, plain_move, regions_changed, take
from reference_machine._decide.regions import holds
from reference_machine._decide.shared import (
    COMPENSATING,
    CREATED,
    DEADLINE,
    FINAL,
    RUNNING,
    UNSET,
)
from reference_machine._definition import WorkflowDefinition
from reference_machine._records import (
    APPROVAL_DENIED,
    APPROVAL_GRANTED,
    COMPENSATION_FAILED,
    COMPENSATION_SUCCEEDED,
    EMPTY,
    STARTED,
    STEP_FAILED,
    STEP_SUCCEEDED,
    TIMER_FIRED,
    Accepted,
    Command,
    Decision,
    Event,
    Execution,
    Ignored,
    IgnoreReason,
    Rejected,
    RejectReason,
    ScheduleTimer,
    Timer,
    Transition,
)
from reference_machine._spec import Source

__all__ = ["decide", "new_execution", "start_event"]


def new_execution(
    definition: WorkflowDefinition,
    execution_id: str,
    *,
    context: Mapping[str, Any] | None = None,
) -> Execution:
    """Gives a created, not yet started execution; deliver `execution.started` to start it."""
    merged = dict(definition.initial_context)
    if context:
        merged.update(context)
    return Execution(id=execution_id, definition=definition.name, version=definition.version,
                     context=merged)


def start_event(execution_id: str, payload: Mapping[str, Any] | None = None) -> Event:
    """Gives the `execution.started` event; its payload is merged into the context."""
    return Event(f"{execution_id}/started", STARTED, Source.SYSTEM, payload or EMPTY)


def decide(
    definition: WorkflowDefinition,
    execution: Execution,
    event: Event,
    now: int,
    *,
    entropy: float | None = None,
) -> Decision:
    """Gives what `event` does to `execution` at virtual time `now` (ms): accepted (the next
    execution and the commands to run), ignored (duplicate, late, stale) or rejected.

    `entropy` in [0, 1) draws retry jitter; by default it derives from the effect id.
    """
    status = execution.status
    if status == FINAL:
        return Rejected(RejectReason.TERMINAL,
                        f"execution {execution.id!r} is final ({execution.outcome}) in state "
                        f"{execution.state!r}; it accepts nothing")
    event_id, kind, source, payload = event[0], event[1], event[2], event[3]
    payload_type = type(payload)
    if not ((type(kind) is str or isinstance(kind, str))  # `type is` first: ~3x cheaper
            and (type(event_id) is str or isinstance(event_id, str))
            and (type(source) is str or isinstance(source, str))
            and (payload_type is dict or payload_type is MappingProxyType
                 or isinstance(payload, Mapping))):  # the ABC check costs ~0.7 us: do it last
        return Rejected(RejectReason.INVALID_PAYLOAD,
                        "an event's id, type and source are strings and its payload a mapping; "
                        f"got {type(event.id).__name__}, {type(kind).__name__}, "
                        f"{type(event.source).__name__}, {type(payload).__name__}")
    if event_id and event_id == execution.last_event_id:
        return Ignored(IgnoreReason.DUPLICATE, f"event {event_id!r} was the last one applied")
    if status == CREATED:
        if kind == STARTED:
            return _start(definition, execution, event, now)
        return Rejected(RejectReason.ILLEGAL,
                        f"execution {execution.id!r} has not started; deliver {STARTED!r} first")
    if execution.regions:
        return _in_regions(definition, execution, event, now, entropy)
    moves = definition.plain_moves.get(execution.state)
    if moves is not None:  # an open user event: no declaration to check (see plain_moves)
        move = moves.get(kind)
        if move is not None and status != COMPENSATING:
            transitions, target, transition = move
            if target and not execution.timers:
                return plain_move(execution, event, target, execution.context, transition)
            return take(definition, execution, event, now, transitions)
    handler = _HANDLERS.get(kind)
    if handler is not None:
        return handler(definition, execution, event, now, entropy)
    return _external(definition, execution, event, now)


def _start(definition: WorkflowDefinition, ex: Execution, event: Event, now: int) -> Decision:
    context = ex.context
    if event.payload:
        context = {**context, **event.payload}
    prefix: tuple[Command, ...] = ()
    timers: tuple[Timer, ...] = ()
    if definition.budgets.deadline_ms is not None:
        timer = Timer(f"{ex.id}/deadline", DEADLINE,
                      now + definition.budgets.deadline_ms)
        timers = (timer,)
        prefix = (ScheduleTimer(*timer),)
    begun = ex._replace(started_at=now, status=RUNNING, timers=timers)
    return move(definition, begun, event, now, definition.initial, context, prefix=prefix)


# -- user events -------------------------------------------------------------------------------


def _external(definition: WorkflowDefinition, ex: Execution, event: Event, now: int) -> Decision:
    spec = definition.events.get(event.type)
    if spec is None:
        return Rejected(RejectReason.UNKNOWN_EVENT,
                        f"event type {event.type!r} is not declared in workflow "
                        f"{definition.name!r}")
    if spec.sources is not None and event.source not in spec.sources:
        return Rejected(RejectReason.UNAUTHORIZED,
                        f"event {event.type!r} may come from {', '.join(sorted(spec.sources))}, "
                        f"not {event.source!r}")
    if spec.check_payload is not None:
        problem = spec.check_payload(event.payload)
        if problem is not None:
            return Rejected(RejectReason.INVALID_PAYLOAD,
                            f"payload of {event.type!r} does not match its schema: {problem}")
    if spec.correlate:
        refusal = _uncorrelated(spec.correlate, ex.context, event)
        if refusal is not None:
            return refusal
    if ex.status == COMPENSATING:
        return Rejected(RejectReason.ILLEGAL,
                        f"execution {ex.id!r} is compensating; {event.type!r} must wait")
    transitions = definition.states[ex.state].on.get(event.type)
    if not transitions:
        return Rejected(RejectReason.ILLEGAL,
                        f"no transition for {event.type!r} in state {ex.state!r}")
    return take(definition, ex, event, now, transitions)


def _uncorrelated(correlate: tuple[tuple[str, Any, str], ...], context: Mapping[str, Any],
                  event: Event) -> Rejected | None:
    """Gives the rejection of a payload whose correlated fields do not equal the context's."""
    payload = event.payload
    for name, expression, text in correlate:
        try:
            expected = expression(context, event)
        except Exception as exc:  # a user's expression must not crash the machine
            return Rejected(RejectReason.GUARD_ERROR,
                            f"correlation {text!r} of {event.type!r} failed: "
                            f"{type(exc).__name__}: {exc}")
        got = payload.get(name, UNSET)
        if got is UNSET or got != expected or type(got) is not type(expected):
            shown = "missing" if got is UNSET else _clip(repr(got))
            return Rejected(RejectReason.UNCORRELATED,
                            f"{event.type!r} is for another run: payload.{name} is {shown}, "
                            f"but {text} is {_clip(repr(expected))}")
    return None


def _clip(text: str) -> str:
    return text if len(text) <= 60 else f"{text[:57]}..."


# -- parallel regions and map items ------------------------------------------------------------


def _in_regions(definition: WorkflowDefinition, ex: Execution, event: Event, now: int,
                entropy: float | None) -> Decision:
    """Decides an event for an execution in a parallel or map state: an answer goes to the
    region it answers; any other event to every region (SCXML), and to the state's own
    transitions only when no region takes it."""
    kind, answers = event.type, event.answers
    regions = ex.regions
    scopes = definition.scopes
    if kind in _HANDLERS:
        if kind != STARTED and answers:
            for index, region in enumerate(regions):
                if region.status != FINAL and holds(region, answers):
                    decision = decide(scopes[region.definition], region, event, now,
                                      entropy=entropy)
                    if not isinstance(decision, Accepted):
                        return decision
                    changed = list(regions)
                    changed[index] = decision.execution
                    return regions_changed(definition, ex, changed, list(decision.commands),
                                           event, now, [decision.transition], None)
        return _HANDLERS[kind](definition, ex, event, now, entropy)
    changed = list(regions)
    commands: list[Command] = []
    moves: list[Transition | None] = []
    refusal: Decision | None = None
    for index, region in enumerate(regions):
        if region.status == FINAL or region.status == CREATED:
            continue
        decision = decide(scopes[region.definition], region, event, now, entropy=entropy)
        if isinstance(decision, Accepted):
            changed[index] = decision.execution
            commands += decision.commands
            moves.append(decision.transition)
        elif refusal is None or (type(refusal) is Rejected
                                 and refusal.reason == RejectReason.ILLEGAL):
            refusal = decision
    if moves:
        return regions_changed(definition, ex, changed, commands, event, now, moves, None)
    if definition.states[ex.state].on.get(kind):
        return _external(definition, ex, event, now)
    return refusal or Rejected(RejectReason.ILLEGAL,
                               f"no region of {ex.state!r} takes {kind!r}")


_HANDLERS = {
    STEP_SUCCEEDED: on_step_result,
    STEP_FAILED: on_step_result,
    COMPENSATION_SUCCEEDED: on_compensation_result,
    COMPENSATION_FAILED: on_compensation_result,
    TIMER_FIRED: on_timer,
    APPROVAL_GRANTED: on_approval,
    APPROVAL_DENIED: on_approval,
    STARTED: lambda d, ex, ev, now, entropy: Ignored(
        IgnoreReason.DUPLICATE, f"execution {ex.id!r} has already started"),
}
