"""The pure transition function: `decide(definition, execution, event, now) -> Decision`.

No I/O, no clock, no randomness: `now` is an input, jitter comes from `entropy` (or, when it is
not given, from a CRC of the effect id, which is stable in every process), and every id is derived
from the execution id, the state and its visit count. `decide` is total: whatever the event, it
answers Accepted, Ignored or Rejected, and a guard or action that raises becomes a rejection.

Ids: an effect's idempotency key is `{execution}/{state}/{visit}`: stable across the retries of
one entry into a state, new when the state is entered again. An attempt's effect id is
`{key}#{attempt}`; results must answer the current attempt's id.
"""

from __future__ import annotations

import hashlib
import json
import re
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from reference_machine._definition import (
    Action,
    CompiledState,
    CompiledStep,
    CompiledTransition,
    WorkflowDefinition,
)
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
    CancelTimer,
    Command,
    CompletedStep,
    Decision,
    Event,
    Execution,
    Ignored,
    IgnoreReason,
    PendingApproval,
    PendingEffect,
    Rejected,
    RejectReason,
    RequestApproval,
    RunCompensation,
    RunEffect,
    ScheduleTimer,
    Status,
    Timer,
    TimerPurpose,
    Transition,
    VisitCounts,
)
from reference_machine._spec import Category, Source

_CATEGORIES = frozenset(str(c) for c in Category)
_RETRYABLE_COMPENSATION = frozenset({Category.TRANSIENT, Category.RATE_LIMITED, Category.TIMEOUT})
#: Failures after which the effect may have taken place all the same.
_UNCERTAIN = frozenset({Category.TIMEOUT, Category.INVALID_OUTPUT})
_RESULT_SOURCES = frozenset({Source.TOOL, Source.AGENT, Source.SYSTEM})
_TIMER_SOURCES = frozenset({Source.TIMER, Source.SYSTEM})
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_COMPENSATION_DELAY_MS = 1000
_new = tuple.__new__
_UNSET: Any = object()  # `_move`'s domain, when it is to be worked out
#: Eventless moves one event may cause before the run counts as a runaway.
EVENTLESS_MAX = 100


# Enum members read once: attribute access on an Enum class costs ~200 ns on CPython 3.11.
_CREATED = Status.CREATED
_RUNNING = Status.RUNNING
_WAITING = Status.WAITING
_COMPENSATING = Status.COMPENSATING
_FINAL = Status.FINAL
_WAIT_TIMEOUT = TimerPurpose.WAIT_TIMEOUT
_APPROVAL_EXPIRY = TimerPurpose.APPROVAL_EXPIRY
_RETRY = TimerPurpose.RETRY
_STEP_TIMEOUT = TimerPurpose.STEP_TIMEOUT
_DEADLINE = TimerPurpose.DEADLINE
#: Forced reasons that are budgets: once one forces the run, budgets stop applying.
_BUDGETS = frozenset({"transitions_max", "visits_max", "cost_max", "deadline", "cycle"})


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
    if status == _FINAL:
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
    if status == _CREATED:
        if kind == STARTED:
            return _start(definition, execution, event, now)
        return Rejected(RejectReason.ILLEGAL,
                        f"execution {execution.id!r} has not started; deliver {STARTED!r} first")
    if execution.regions:
        return _in_regions(definition, execution, event, now, entropy)
    moves = definition.plain_moves.get(execution.state)
    if moves is not None:  # an open user event: no declaration to check (see plain_moves)
        move = moves.get(kind)
        if move is not None and status != _COMPENSATING:
            transitions, target, transition = move
            if target and not execution.timers:
                return _plain_move(execution, event, target, execution.context, transition)
            return _take(definition, execution, event, now, transitions)
    handler = _HANDLERS.get(kind)
    if handler is not None:
        return handler(definition, execution, event, now, entropy)
    return _external(definition, execution, event, now)


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
    if ex.status == _COMPENSATING:
        return Rejected(RejectReason.ILLEGAL,
                        f"execution {ex.id!r} is compensating; {event.type!r} must wait")
    transitions = definition.states[ex.state].on.get(event.type)
    if not transitions:
        return Rejected(RejectReason.ILLEGAL,
                        f"no transition for {event.type!r} in state {ex.state!r}")
    return _take(definition, ex, event, now, transitions)


def _take(definition: WorkflowDefinition, ex: Execution, event: Event, now: int,
          transitions: tuple[CompiledTransition, ...], *,
          approved: tuple[str, ...] | None = None,
          completed: tuple[CompletedStep, ...] | None = None,
          answered: str | None = None, via: tuple[str, ...] = ()) -> Decision:
    """Takes the first transition whose guard holds, applying its actions (`via`: the
    eventless path that led here, so that a bound on it holds across joins)."""
    context = ex.context
    scoped = definition.scoped
    for transition in transitions:
        guard = transition.guard
        if guard is not None:
            try:
                held = guard(context, event)
            except Exception as exc:  # a user's guard must not crash the machine
                return Rejected(RejectReason.GUARD_ERROR,
                                f"guard {transition.guard_text!r} on {transition.declared_in!r} "
                                f"failed: {type(exc).__name__}: {exc}")
            if not held:
                continue
        if transition.internal:
            return _internal(definition, ex, event, now, transition)
        if scoped:  # exits, then the transition's actions, then entries: `_move` runs them
            return _move(definition, ex, event, now, transition.target, context, "", approved,
                         completed, answered, declared=transition.declared_in,
                         actions=transition.actions, via=via)
        if transition.actions:
            updated = dict(context)
            for action in transition.actions:
                try:
                    changed = action(updated, event)
                except Exception as exc:  # likewise for actions
                    return Rejected(RejectReason.ACTION_ERROR,
                                    f"action on {transition.declared_in!r} for {event.type!r} "
                                    f"failed: {type(exc).__name__}: {exc}")
                if changed:
                    _merge(updated, changed)
            context = updated
        target = transition.target_leaf
        if (approved is None and completed is None and answered is None and not ex.timers
                and definition.states[target].plain and not definition.budgets.any_limit
                and not via):
            return _plain_move(ex, event, target, context)
        return _move(definition, ex, event, now, target, context, "", approved, completed,
                     answered, via=via)
    texts = ", ".join(repr(t.guard_text) for t in transitions)
    return Rejected(RejectReason.GUARD_FALSE,
                    f"no guard held for {event.type!r} in state {ex.state!r} ({texts})")


# -- moving between states ---------------------------------------------------------------------

#: Past this many states visited, visit counts are a `VisitCounts` rather than a dict copied
#: on every transition (below it a copy is the cheaper of the two).
_DICT_VISITS_MAX = 128


def _bumped(visits: Mapping[str, int], target: str) -> tuple[Mapping[str, int], int]:
    """Gives the visit counts with one more visit of `target`, and that visit's number."""
    visit = visits.get(target, 0) + 1
    if type(visits) is VisitCounts:
        return visits.bumped(target, visit), visit
    if len(visits) >= _DICT_VISITS_MAX:
        return VisitCounts(dict(visits), {target: visit}), visit
    counts = dict(visits)
    counts[target] = visit
    return counts, visit



def _plain_move(ex: Execution, event: Event, target: str, context: Mapping[str, Any],
                transition: Transition | None = None) -> Accepted:
    """`_move` where it has nothing to do but move: no timers to cancel, no budget, and a plain
    target (no step, approval or timeout). Gives what `_move` would, field for field."""
    (ex_id, ex_definition, ex_version, ex_state, _, _, _, sequence, started_at, transitions,
     visits, _, _, _, _, ex_approved, ex_completed, _, _, cost, failures, exceeded,
     ex_answered, _, _, _, ex_history) = ex
    if type(visits) is dict and len(visits) < _DICT_VISITS_MAX:
        visits = visits.copy()
        visits[target] = visits.get(target, 0) + 1
    else:
        visits = _bumped(visits, target)[0]
    execution = _new(Execution, (
        ex_id, ex_definition, ex_version, target, _RUNNING, None, context, sequence + 1,
        started_at, transitions + 1, visits, 0, None, (), None, ex_approved, ex_completed, (),
        "", cost, failures, exceeded, ex_answered, event.id, False, (), ex_history,
    ))
    if transition is None:
        transition = _new(Transition, (ex_state, event.type, target, "", (), ()))
    return _new(Accepted, (execution, (), transition))



def _move(
    definition: WorkflowDefinition,
    ex: Execution,
    event: Event,
    now: int,
    target: str,
    context: Mapping[str, Any],
    forced: str = "",
    approved: tuple[str, ...] | None = None,
    completed: tuple[CompletedStep, ...] | None = None,
    answered: str | None = None,
    prefix: tuple[Command, ...] = (),
    *,
    declared: str = "",
    actions: tuple[Action, ...] = (),
    domain: Any = _UNSET,
    via: tuple[str, ...] = (),
    quiet: bool = False,
) -> Decision:
    """Leaves the current state for `target` (a leaf): cancels its timers, checks budgets and
    cycles, and enters `target`, running its step, timers or approval request.

    In a definition with entry or exit actions or history (`scoped`), `target` may be a
    compound state (it resolves through history) and the move exits up to the transition's
    domain (the lowest compound state holding `declared`, the transition's source, and the
    target; `domain` when given), runs `actions`, then enters down to the leaf. `via` holds
    the states an eventless run of moves has passed through so far. A `quiet` move runs no
    exit or entry action: the end of a compensation, whose actions ran as it began."""
    if not target:
        return Rejected(RejectReason.ILLEGAL, f"{forced} exceeded but no on_exceeded state")
    # one unpacking reads every field at C speed; twelve attribute reads cost ~0.4 us
    (ex_id, ex_definition, ex_version, ex_state, _, _, _, sequence, started_at, transitions,
     visits, _, _, ex_timers, _, ex_approved, ex_completed, _, _, cost, failures, exceeded,
     ex_answered, _, _, _, history) = ex
    exits: tuple[str, ...] = ()
    scoped = definition.scoped
    if scoped:
        if domain is _UNSET:
            domain = _domain(definition, declared or ex_state, target)
        exits = _exit_set(definition, ex_state, domain)
        if exits:
            history = _recorded(definition, ex_state, exits, history)
        target = _resolve(definition, target, history)
    budgets = definition.budgets
    commands: list[Command] = list(prefix) if prefix else []
    timers: tuple[Timer, ...] = ()
    if forced in _BUDGETS:
        exceeded = forced  # from here on no budget applies: the run is a person's to finish
    if ex_timers:
        for timer in ex_timers:
            if timer.purpose is _DEADLINE and not exceeded:
                timers += (timer,)
            else:
                commands.append(_new(CancelTimer, (timer.id,)))
    transitions += 1
    if type(visits) is dict and len(visits) < _DICT_VISITS_MAX:
        visits = visits.copy()
        visit = visits.get(target, 0) + 1
        visits[target] = visit
    else:
        visits, visit = _bumped(visits, target)
    if not forced and not exceeded and budgets.any_limit:
        exceeded = ""
        if budgets.transitions_max is not None and transitions > budgets.transitions_max:
            exceeded = "transitions_max"
        elif budgets.visits_max is not None and visit > budgets.visits_max:
            exceeded = "visits_max"
        elif budgets.cycle_threshold is not None:
            error = _error_signature(event)
            if error is not None:
                # "in a row": only the latest error signature is counted; a different error
                # starts again at one, successes in between do not reset it
                signature = f"{ex_state}|{event.type}|{error}"
                seen = failures.get(signature, 0) + 1
                failures = {signature: seen}
                if seen >= budgets.cycle_threshold:
                    return _move(definition, ex._replace(failures=failures), event, now,
                                 budgets.on_cycle or "", context, "cycle", approved, completed,
                                 answered, prefix, actions=actions, via=via)
        if exceeded:
            return _move(definition, ex, event, now, budgets.on_exceeded or "", context,
                         exceeded, approved, completed, answered, prefix, actions=actions,
                         via=via)
    before = context  # a budget that forces the run elsewhere below starts from here
    if (scoped or actions) and not quiet:
        # SCXML's order: exits innermost first, the transition's actions, entries outermost
        context, refused = _run_moves(definition, context, event, exits, actions,
                                      _entry_set(definition, target, domain)
                                      if definition.scoped else ())
        if refused is not None:
            return refused

    state: CompiledState = definition.states[target]
    status = _RUNNING
    outcome = None
    effect = None
    attempt = 0
    approval = None
    if approved is None:
        approved = ex_approved
    if state.final:
        status = _FINAL
        outcome = state.outcome
        for timer in timers:
            commands.append(_new(CancelTimer, (timer.id,)))
        timers = ()
    elif state.step is not None:
        step = state.step
        try:
            step_input = step.input(context)
        except Exception as exc:  # step inputs are user expressions: a failure is a reject
            return _input_failed(target, "step input", exc)
        if step.needs_approval and (step.approval_when is None
                                    or _approval_needed(step, context, event)):
            action = _action_hash(step, step_input)
            if action not in approved:
                return Rejected(RejectReason.UNAUTHORIZED,
                                f"state {target!r} runs {step.tool!r}, which needs an approval "
                                f"of action {action[:12]} that was not granted")
            approved = tuple(h for h in approved if h != action)
        cost += step.cost
        if not forced and not exceeded and budgets.cost_max is not None and (
                cost > budgets.cost_max):
            return _move(definition, ex, event, now, budgets.on_exceeded or "", before,
                         "cost_max", approved, completed, answered, prefix, actions=actions,
                         via=via)
        key = f"{ex_id}/{target}/{visit}"
        effect_id = f"{key}#1"
        attempt = 1
        effect = _new(PendingEffect, (effect_id, key, target, step.tool, 1, False))
        commands.append(_new(RunEffect, (effect_id, key, target, step.tool, step_input, 1,
                                         step.timeout_ms, step.idempotent)))
        if step.timeout_ms is not None:
            timer = _new(Timer, (f"{effect_id}/timeout", _STEP_TIMEOUT, now + step.timeout_ms))
            timers += (timer,)
            commands.append(_new(ScheduleTimer, timer))
    else:
        if state.kind == "wait":
            status = _WAITING
        if state.approval is not None:
            try:
                request = _approval_request(definition, ex_id, state, visit, context, now)
            except Exception as exc:  # the gated step's input is user expressions
                return _input_failed(target, "approved step's input", exc)
            approval = PendingApproval(request.request_id, target, request.action_hash,
                                       request.roles, request.expires_at)
            commands.append(request)
            timer = _new(Timer, (f"{request.request_id}/expiry", _APPROVAL_EXPIRY,
                                 request.expires_at))
            timers += (timer,)
            commands.append(_new(ScheduleTimer, timer))
    if state.after_ms is not None:
        timer = _new(Timer, (f"{ex_id}/{target}/{visit}/after", _WAIT_TIMEOUT,
                             now + state.after_ms))
        timers += (timer,)
        commands.append(_new(ScheduleTimer, timer))

    execution = _new(Execution, (
        ex_id, ex_definition, ex_version, target, status, outcome, context, sequence + 1,
        started_at, transitions, visits, attempt, effect, timers, approval, approved,
        ex_completed if completed is None else completed, (), "", cost, failures, exceeded,
        ex_answered if answered is None else answered, event.id, False, (), history,
    ))
    accepted = _new(Accepted, (execution, tuple(commands),
                               _new(Transition, (ex_state, event.type, target, forced, via,
                                                 ()))))
    if state.moves_on:
        if state.regions:
            return _enter_regions(definition, accepted, event, now, visit)
        return _settle(definition, accepted, event, now)
    return accepted


def _error_signature(event: Event) -> str | None:
    """Gives the error an event reports (a failure's category, or a payload `error`), if any."""
    payload = event.payload
    if not payload:
        return None
    error = payload.get("error")
    if error is None and event.type in (STEP_FAILED, COMPENSATION_FAILED):
        error = payload.get("category")
    return None if error is None else str(error)


def _start(definition: WorkflowDefinition, ex: Execution, event: Event, now: int) -> Decision:
    context = ex.context
    if event.payload:
        context = {**context, **event.payload}
    prefix: tuple[Command, ...] = ()
    timers: tuple[Timer, ...] = ()
    if definition.budgets.deadline_ms is not None:
        timer = Timer(f"{ex.id}/deadline", _DEADLINE,
                      now + definition.budgets.deadline_ms)
        timers = (timer,)
        prefix = (ScheduleTimer(*timer),)
    begun = ex._replace(started_at=now, status=_RUNNING, timers=timers)
    return _move(definition, begun, event, now, definition.initial, context, prefix=prefix)


# -- steps ---------------------------------------------------------------------------------------


def _unanswered(ex: Execution, event: Event, what: str) -> Ignored:
    if event.answers and event.answers == ex.answered:
        return Ignored(IgnoreReason.DUPLICATE,
                       f"{event.type!r} answers {what} {event.answers!r}, already answered")
    return Ignored(IgnoreReason.LATE,
                   f"{event.type!r} answers {what} {event.answers or '(nothing)'!r}, which is "
                   "no longer pending")


def _on_step_result(definition: WorkflowDefinition, ex: Execution, event: Event, now: int,
                    entropy: float | None) -> Decision:
    effect = ex.effect
    if effect is None or effect.compensation or event.answers != effect.effect_id:
        return _unanswered(ex, event, "effect")
    if event.source not in _RESULT_SOURCES:
        return Rejected(RejectReason.UNAUTHORIZED,
                        f"a step result comes from a tool or agent, not {event.source!r}")
    state = definition.states[ex.state]
    step = state.step
    if step is None:  # the state was left; _move clears the effect, so this is defensive
        return _unanswered(ex, event, "effect")
    if event.type == STEP_SUCCEEDED:
        problem = step.check_output(event.payload) if step.check_output is not None else None
        if problem is None:
            return _on_step_success(definition, ex, event, now, state, step)
        failure = Event(event.id, STEP_FAILED, event.source,
                        {"category": Category.INVALID_OUTPUT, "error": problem}, event.answers)
        return _on_step_failure(definition, ex, failure, now, entropy, Category.INVALID_OUTPUT,
                                effect.effect_id)
    category = event.payload.get("category")
    if not isinstance(category, str) or category not in _CATEGORIES:
        return Rejected(RejectReason.INVALID_PAYLOAD,
                        f"step.failed needs payload.category, one of "
                        f"{', '.join(sorted(_CATEGORIES))}; got {category!r}")
    return _on_step_failure(definition, ex, event, now, entropy, category, effect.effect_id)


def _on_step_success(definition: WorkflowDefinition, ex: Execution, event: Event, now: int,
                     state: CompiledState, step: CompiledStep) -> Decision:
    effect = ex.effect
    assert effect is not None
    decision = _take(definition, ex, event, now, state.on.get(STEP_SUCCEEDED, ()),
                     answered=effect.effect_id)
    compensation = step.compensation
    if compensation is None or not isinstance(decision, Accepted):
        return decision
    # the undo is planned from the context after the transition's actions, so its input can
    # name what the step returned (a refund id, a reservation id)
    after = decision.execution
    try:
        undo_input = compensation.input(after.context)
    except Exception as exc:  # the undo's input is user expressions: a failure is a reject
        return _input_failed(ex.state, "compensation input", exc)
    done = CompletedStep(ex.state, effect.key, compensation.tool, undo_input,
                         compensation.attempts_max, compensation.retry_safe)
    return decision._replace(execution=after._replace(completed=_with_undo(after.completed,
                                                                           done)))


def _on_step_failure(definition: WorkflowDefinition, ex: Execution, event: Event, now: int,
                     entropy: float | None, category: str, answered: str) -> Decision:
    """Retries the step, or applies its exhaustion policy; `answered` is the effect id a result
    answered (or the last one, when the failure is a step timeout rather than a result)."""
    state = definition.states[ex.state]
    step = state.step
    effect = ex.effect
    assert step is not None and effect is not None
    ambiguous = category == Category.TIMEOUT and not step.retry_safe
    # the effect may have taken place though this attempt failed (a timeout, an unusable
    # output, or a failure answered to a call sent again after its first answer was lost)
    uncertain = ex.uncertain or category in _UNCERTAIN or event.payload.get(
        "uncertain") is True
    attempt = ex.attempt
    if not ambiguous and category in step.retry_on and attempt < step.attempts_max:
        fraction = entropy if entropy is not None else _fraction(effect.effect_id)
        timer = Timer(f"{effect.key}/retry/{attempt}", _RETRY,
                      now + _backoff(step, attempt, fraction))
        commands: list[Command] = [CancelTimer(t.id) for t in ex.timers
                                   if t.purpose == _STEP_TIMEOUT]
        commands.append(ScheduleTimer(*timer))
        timers = (*(t for t in ex.timers if t.purpose != _STEP_TIMEOUT), timer)
        completed = ex.completed
        if uncertain and definition.scope and step.compensation is not None:
            # inside a region or map item: the attempt may have taken effect, so its undo is
            # kept from now on, in the order effects ended, for a failure of the parallel or
            # map state to run (the one the step completes with replaces it)
            undo = _undo_of(ex, step, effect.key)
            if isinstance(undo, Rejected):
                return undo
            completed = _with_undo(completed, undo)
        return Accepted(ex._replace(effect=None, timers=timers, sequence=ex.sequence + 1,
                                    answered=answered, last_event_id=event.id,
                                    uncertain=uncertain, completed=completed),
                        tuple(commands))
    if ambiguous and step.escalate_to is not None:
        escalated = _move(definition, ex, event, now, step.escalate_to, ex.context,
                          forced="ambiguous_failure", answered=answered)
        if definition.scope and step.compensation is not None and isinstance(escalated,
                                                                              Accepted):
            undo = _undo_of(ex, step, effect.key)  # it may have taken effect
            if isinstance(undo, Rejected):
                return undo
            after = escalated.execution
            return escalated._replace(execution=after._replace(
                completed=_with_undo(after.completed, undo)))
        return escalated
    if step.on_exhausted == "escalate":
        return _move(definition, ex, event, now, step.escalate_to or "", ex.context,
                     forced="retries_exhausted", answered=answered)
    transitions = state.on.get(STEP_FAILED, ())
    if step.on_exhausted == "compensate" and (ex.completed or (
            uncertain and step.compensation is not None)):
        return _begin_compensation(definition, ex, event, now, transitions, answered,
                                   uncertain)
    decision = _take(definition, ex, event, now, transitions, answered=answered)
    if uncertain and definition.scope and step.compensation is not None and isinstance(
            decision, Accepted):
        # inside a region or map item: the failed step may have taken effect, so its undo is
        # kept with the completed ones, for the parallel or map state's failure to run
        undo = _undo_of(ex, step, effect.key)
        if isinstance(undo, Rejected):
            return undo
        after = decision.execution
        return decision._replace(execution=after._replace(
            completed=_with_undo(after.completed, undo)))
    return decision


def _undo_of(ex: Execution, step: CompiledStep, key: str) -> CompletedStep | Rejected:
    """Gives the undo of the step's effect under `key`, planned from the context now."""
    compensation = step.compensation
    assert compensation is not None
    try:
        undo_input = compensation.input(ex.context)
    except Exception as exc:  # the undo's input is user expressions: a failure is a reject
        return _input_failed(ex.state, "compensation input", exc)
    return CompletedStep(ex.state, key, compensation.tool, undo_input, compensation.attempts_max,
                         compensation.retry_safe)


def _with_undo(completed: tuple[CompletedStep, ...], undo: CompletedStep
               ) -> tuple[CompletedStep, ...]:
    """Gives `completed` with `undo` in the place of an earlier one for its key, else last."""
    for index, step in enumerate(completed):
        if step.key == undo.key:
            return (*completed[:index], undo, *completed[index + 1:])
    return (*completed, undo)


def _backoff(step: CompiledStep, attempt: int, fraction: float) -> int:
    """Gives the delay before attempt `attempt + 1`: exponential, capped, with jitter."""
    try:
        delay = step.delay_initial_ms * step.multiplier ** (attempt - 1)
    except OverflowError:
        delay = step.delay_max_ms
    if step.jitter:
        if not 0.0 <= fraction <= 1.0:  # NaN fails this too
            fraction = 1.0 if fraction > 1.0 else 0.0
        delay *= 1 - step.jitter + 2 * step.jitter * fraction
    if not delay < step.delay_max_ms:  # inf included
        return step.delay_max_ms
    return max(0, min(step.delay_max_ms, round(delay)))


def _fraction(text: str) -> float:
    return zlib.crc32(text.encode()) / 4_294_967_296


# -- compensation --------------------------------------------------------------------------------


def _begin_compensation(definition: WorkflowDefinition, ex: Execution, event: Event, now: int,
                        transitions: tuple[CompiledTransition, ...], answered: str,
                        uncertain: bool = False,
                        queue: tuple[CompletedStep, ...] | None = None) -> Decision:
    """Chooses where the run goes once undone, then undoes completed steps newest first: the
    failing step first when its effect may have taken place (so its compensation must be safe
    to run for an effect that did not)."""
    chosen = _take(definition, ex, event, now, transitions)
    if not isinstance(chosen, Accepted):
        return chosen
    queue = tuple(reversed(ex.completed)) if queue is None else queue
    step = definition.states[ex.state].step
    compensation = step.compensation if step is not None else None
    if uncertain and compensation is not None and ex.effect is not None:
        try:
            undo_input = compensation.input(ex.context)
        except Exception as exc:  # the undo's input is user expressions: a failure is a reject
            return _input_failed(ex.state, "compensation input", exc)
        queue = (CompletedStep(ex.state, ex.effect.key, compensation.tool, undo_input,
                               compensation.attempts_max, compensation.retry_safe), *queue)
    commands: list[Command] = [CancelTimer(t.id) for t in ex.timers if t.purpose != _DEADLINE]
    timers = tuple(t for t in ex.timers if t.purpose == _DEADLINE)
    effect, command = _compensate(queue[0], 1)
    commands.append(command)
    execution = ex._replace(
        status=_COMPENSATING, context=chosen.execution.context, attempt=1, effect=effect,
        timers=timers, approval=None, compensating=queue,
        after_compensation=chosen.execution.state, sequence=ex.sequence + 1,
        answered=answered, last_event_id=event.id,
    )
    return Accepted(execution, tuple(commands))


def _compensate(step: CompletedStep, attempt: int) -> tuple[PendingEffect, RunCompensation]:
    key = f"{step.key}/undo"
    effect_id = f"{key}#{attempt}"
    return (PendingEffect(effect_id, key, step.state, step.tool, attempt, True),
            RunCompensation(effect_id, key, step.state, step.tool, step.input, attempt, step.key,
                            step.retry_safe))


def _on_compensation_result(definition: WorkflowDefinition, ex: Execution, event: Event,
                            now: int, entropy: float | None) -> Decision:
    effect = ex.effect
    if effect is None or not effect.compensation or event.answers != effect.effect_id:
        return _unanswered(ex, event, "compensation")
    if event.source not in _RESULT_SOURCES:
        return Rejected(RejectReason.UNAUTHORIZED,
                        f"a compensation result comes from a tool, not {event.source!r}")
    current = ex.compensating[0]
    if event.type == COMPENSATION_SUCCEEDED:
        remaining = ex.compensating[1:]
        completed = tuple(s for s in ex.completed if s.key != current.key)
        if remaining:
            effect, command = _compensate(remaining[0], 1)
            return Accepted(ex._replace(
                attempt=1, effect=effect, compensating=remaining, completed=completed,
                sequence=ex.sequence + 1, answered=event.answers, last_event_id=event.id,
            ), (command,))
        # what was not in the queue (a parallel state's failure undoes only its regions')
        # stays completed
        return _move(definition, ex._replace(completed=completed), event, now,
                     ex.after_compensation, ex.context, forced="compensated",
                     completed=completed, answered=event.answers, quiet=True)
    category = event.payload.get("category")
    retryable = isinstance(category, str) and category in _RETRYABLE_COMPENSATION and (
        category != Category.TIMEOUT or current.retry_safe)  # never a blind retry of an undo
    if retryable and ex.attempt < current.attempts_max:
        timer = Timer(f"{effect.key}/retry/{ex.attempt}", _RETRY,
                      now + _COMPENSATION_DELAY_MS * 2 ** (ex.attempt - 1))
        return Accepted(ex._replace(
            effect=None, timers=(*ex.timers, timer), sequence=ex.sequence + 1,
            answered=event.answers, last_event_id=event.id,
        ), (ScheduleTimer(*timer),))
    return _move(definition, ex, event, now, definition.compensation_failed or "", ex.context,
                 forced="compensation_failed", answered=event.answers, quiet=True)


# -- timers --------------------------------------------------------------------------------------


def _on_timer(definition: WorkflowDefinition, ex: Execution, event: Event, now: int,
              entropy: float | None) -> Decision:
    if event.source not in _TIMER_SOURCES:
        return Rejected(RejectReason.UNAUTHORIZED,
                        f"timers fire from source timer or system, not {event.source!r}")
    timer = next((t for t in ex.timers if t.id == event.answers), None)
    if timer is None:
        return _unanswered(ex, event, "timer")
    state = definition.states[ex.state]
    purpose = timer.purpose
    if purpose == _WAIT_TIMEOUT:
        return _move(definition, ex, event, now, state.after_target or "", ex.context)
    rest = tuple(t for t in ex.timers if t.id != timer.id)
    if purpose == _DEADLINE:
        return _move(definition, ex._replace(timers=rest), event, now,
                     definition.budgets.on_exceeded or "", ex.context, forced="deadline")
    if purpose == _APPROVAL_EXPIRY:
        approval = state.approval
        assert approval is not None
        if approval.on_expiry == "escalate":
            return _move(definition, ex, event, now, approval.escalate_to or "", ex.context,
                         forced="approval_expired")
        expired = Event(event.id, APPROVAL_DENIED, event.source, {"decision": "expired"},
                        event.answers)
        return _take(definition, ex, expired, now, state.on.get(APPROVAL_DENIED, ()))
    if purpose == TimerPurpose.RETRY:
        attempt = ex.attempt + 1
        if ex.status == _COMPENSATING:
            effect, command = _compensate(ex.compensating[0], attempt)
            return Accepted(ex._replace(attempt=attempt, effect=effect, timers=rest,
                                        sequence=ex.sequence + 1, last_event_id=event.id),
                            (command,))
        step = state.step
        assert step is not None
        cost = ex.cost + step.cost  # every attempt is paid for, retries included
        cost_max = definition.budgets.cost_max
        if cost_max is not None and cost > cost_max and not ex.exceeded:
            return _move(definition, ex._replace(timers=rest, cost=cost), event, now,
                         definition.budgets.on_exceeded or "", ex.context, forced="cost_max")
        key = f"{ex.id}/{ex.state}/{ex.visits.get(ex.state, 0)}"
        effect_id = f"{key}#{attempt}"
        try:
            step_input = step.input(ex.context)
        except Exception as exc:  # unreachable unless the context changed under the step
            return _input_failed(ex.state, "step input", exc)
        commands: list[Command] = [RunEffect(effect_id, key, ex.state, step.tool, step_input,
                                             attempt, step.timeout_ms, step.idempotent)]
        if step.timeout_ms is not None:
            timeout = Timer(f"{effect_id}/timeout", _STEP_TIMEOUT,
                            now + step.timeout_ms)
            rest += (timeout,)
            commands.append(ScheduleTimer(*timeout))
        return Accepted(ex._replace(
            attempt=attempt, effect=PendingEffect(effect_id, key, ex.state, step.tool, attempt),
            timers=rest, cost=cost, sequence=ex.sequence + 1, last_event_id=event.id,
        ), tuple(commands))
    # a step timed out: a failure of category timeout; the attempt's late result is ignored
    pending = ex.effect
    if pending is None or f"{pending.effect_id}/timeout" != timer.id:
        return _unanswered(ex, event, "timer")
    failure = Event(event.id, STEP_FAILED, event.source,
                    {"category": Category.TIMEOUT, "error": "step timed out"}, pending.effect_id)
    return _on_step_failure(definition, ex._replace(timers=rest), failure, now, entropy,
                            Category.TIMEOUT, ex.answered)


# -- approvals -----------------------------------------------------------------------------------


def _on_approval(definition: WorkflowDefinition, ex: Execution, event: Event, now: int,
                 entropy: float | None) -> Decision:
    if event.source != Source.HUMAN:
        return Rejected(RejectReason.UNAUTHORIZED,
                        f"approval decisions come only from a human; this one came from "
                        f"{event.source!r}")
    request = ex.approval
    if request is None or event.answers != request.request_id:
        return Ignored(IgnoreReason.STALE,
                       f"{event.type!r} answers approval request {event.answers or '(none)'!r}, "
                       "which is not the current one")
    if now > request.expires_at:
        return Ignored(IgnoreReason.LATE,
                       f"approval request {request.request_id!r} expired at {request.expires_at}")
    role = event.payload.get("role")
    if role not in request.roles:
        return Rejected(RejectReason.UNAUTHORIZED,
                        f"role {role!r} may not decide this approval (roles: "
                        f"{', '.join(request.roles)})")
    if event.payload.get("action_hash") != request.action_hash:
        return Rejected(RejectReason.UNAUTHORIZED,
                        f"the decision is for action {str(event.payload.get('action_hash'))[:12]},"
                        f" not the requested action {request.action_hash[:12]}")
    transitions = definition.states[ex.state].on.get(event.type, ())
    if event.type == APPROVAL_GRANTED:
        return _take(definition, ex, event, now, transitions,
                     approved=(*ex.approved, request.action_hash))
    return _take(definition, ex, event, now, transitions)


def _approval_request(definition: WorkflowDefinition, execution_id: str, state: CompiledState,
                      visit: int, context: Mapping[str, Any], now: int) -> RequestApproval:
    approval = state.approval
    assert approval is not None
    gated = definition.states[approval.for_state].step
    assert gated is not None
    summary = _PLACEHOLDER.sub(lambda m: str(context.get(m.group(1), "")), approval.summary)
    evidence = {key: context.get(key) for key in approval.evidence}
    return RequestApproval(
        f"{execution_id}/{state.name}/{visit}/approval", state.name, approval.for_state, summary,
        evidence, tuple(sorted(approval.roles)), _action_hash(gated, gated.input(context)),
        now + approval.expires_after_ms,
    )


def _action_hash(step: CompiledStep, step_input: Mapping[str, Any]) -> str:
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


def _input_failed(state: str, what: str, exc: Exception) -> Rejected:
    return Rejected(RejectReason.ACTION_ERROR,
                    f"{what} of state {state!r} failed: {type(exc).__name__}: {exc}")


def action_hash(definition: WorkflowDefinition, state: str, context: Mapping[str, Any]) -> str:
    """Gives the hash an approver must sign to authorize `state`'s step under `context`."""
    step = definition.states[state].step
    if step is None:
        msg = f"state {state!r} of {definition.name!r} runs no step"
        raise ValueError(msg)
    return _action_hash(step, step.input(context))


# -- statecharts: internal and eventless moves, entry and exit, history ----------------------


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
        got = payload.get(name, _UNSET)
        if got is _UNSET or got != expected or type(got) is not type(expected):
            shown = "missing" if got is _UNSET else _clip(repr(got))
            return Rejected(RejectReason.UNCORRELATED,
                            f"{event.type!r} is for another run: payload.{name} is {shown}, "
                            f"but {text} is {_clip(repr(expected))}")
    return None


def _clip(text: str) -> str:
    return text if len(text) <= 60 else f"{text[:57]}..."


def _internal(definition: WorkflowDefinition, ex: Execution, event: Event, now: int,
              transition: CompiledTransition) -> Decision:
    """Runs a transition with no target: its actions, no exit, no entry, no visit."""
    context, refused = _run_moves(definition, ex.context, event, (), transition.actions, ())
    if refused is not None:
        return refused
    regions = ex.regions
    if regions and definition.states[ex.state].kind == "parallel":
        # the regions work on copies of the context: what the parallel state itself changes
        # goes to each of them too, so that the join's merge keeps it
        changed = {key: value for key, value in context.items()
                   if key not in ex.context or ex.context[key] != value}
        regions = tuple(r._replace(context={**r.context, **changed}) for r in regions)
    accepted = Accepted(ex._replace(context=context, sequence=ex.sequence + 1,
                                    last_event_id=event.id, regions=regions),
                        (), Transition(ex.state, event.type, ex.state, "internal"))
    if definition.states[ex.state].always:  # its context changed: eventless moves may apply
        return _settle(definition, accepted, event, now)
    return accepted


def _settle(definition: WorkflowDefinition, accepted: Accepted, event: Event, now: int
            ) -> Decision:
    """Takes the entered state's eventless transitions until none applies: one macrostep,
    one version, recorded as one transition whose `via` lists the states passed through."""
    ex = accepted.execution
    state = definition.states[ex.state]
    moved = accepted.transition
    assert moved is not None
    for transition in state.always:
        guard = transition.guard
        if guard is not None:
            try:
                held = guard(ex.context, event)
            except Exception as exc:  # a user's guard must not crash the machine
                return Rejected(RejectReason.GUARD_ERROR,
                                f"guard {transition.guard_text!r} of the eventless transitions "
                                f"of {ex.state!r} failed: {type(exc).__name__}: {exc}")
            if not held:
                continue
        via = (*moved.via, ex.state)
        if len(via) > EVENTLESS_MAX:
            loop = " -> ".join(via[-6:])
            return Rejected(RejectReason.RUNAWAY,
                            f"eventless transitions moved {len(via)} times on {event.type!r} "
                            f"without settling (... {loop} -> {transition.target})")
        target = transition.target if definition.scoped else transition.target_leaf
        after = _move(definition, ex, event, now, target, ex.context, "", None, None, None,
                      accepted.commands, declared=transition.declared_in,
                      actions=transition.actions, via=via)
        if not isinstance(after, Accepted):
            return after
        reached = after.transition
        assert reached is not None
        return after._replace(
            execution=after.execution._replace(sequence=ex.sequence),
            transition=reached._replace(source=moved.source, event=moved.event,
                                        forced=moved.forced or reached.forced))
    if state.kind == "choice":
        texts = ", ".join(repr(t.guard_text) for t in state.always)
        return Rejected(RejectReason.GUARD_FALSE,
                        f"no branch of choice {ex.state!r} held ({texts})")
    return accepted


def _approval_needed(step: CompiledStep, context: Mapping[str, Any], event: Event) -> bool:
    """Tells whether a conditional approval holds; an expression that raises asks for one."""
    assert step.approval_when is not None
    try:
        return bool(step.approval_when(context, event))
    except Exception:  # the safe side of a broken condition is to ask a person
        return True


def _domain(definition: WorkflowDefinition, source: str, target: str) -> str | None:
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


def _exit_set(definition: WorkflowDefinition, leaf: str, domain: str | None
              ) -> tuple[str, ...]:
    """Gives the states a move from `leaf` leaves, innermost first."""
    if not leaf:
        return ()
    chain = (leaf, *definition.states[leaf].ancestors)
    return chain[:chain.index(domain)] if domain in chain else chain


def _entry_set(definition: WorkflowDefinition, leaf: str, domain: str | None
               ) -> tuple[str, ...]:
    """Gives the states a move to `leaf` enters, outermost first."""
    chain = (leaf, *definition.states[leaf].ancestors)
    return tuple(reversed(chain[:chain.index(domain)] if domain in chain else chain))


def _recorded(definition: WorkflowDefinition, leaf: str, exits: tuple[str, ...],
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


def _resolve(definition: WorkflowDefinition, target: str, history: Mapping[str, str]) -> str:
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


def _run_moves(definition: WorkflowDefinition, context: Mapping[str, Any], event: Event,
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
                _merge(updated, changed)
    return (context if updated is None else updated), None


def _merge(context: dict[str, Any], changed: Mapping[str, Any]) -> None:
    """Sets the keys an action changed; a key given the context itself (a function returning
    `{"all": context}`) gets a copy of it as it was, so that a context never holds itself."""
    for key, value in changed.items():
        context[key] = dict(context) if value is context else value


# -- statecharts: parallel regions and map items ---------------------------------------------


def _enter_regions(definition: WorkflowDefinition, accepted: Accepted, event: Event, now: int,
                   visit: int) -> Decision:
    """Starts the regions of the parallel or map state just entered (a map: one execution per
    item, as many running as `concurrency_max` allows)."""
    ex = accepted.execution
    state = definition.states[ex.state]
    base = f"{ex.id}/{ex.state}/{visit}"
    regions: list[Execution] = []
    if state.kind == "parallel":
        for name, _ in state.regions:
            regions.append(Execution(f"{base}/{name}", name, ex.version, context=ex.context))
    else:
        assert state.items is not None
        try:
            items = state.items(ex.context, event)
        except Exception as exc:  # a user's expression must not crash the machine
            return Rejected(RejectReason.ACTION_ERROR,
                            f"items {state.items_text!r} of map {ex.state!r} failed: "
                            f"{type(exc).__name__}: {exc}")
        if not isinstance(items, list | tuple):
            return Rejected(RejectReason.ACTION_ERROR,
                            f"items {state.items_text!r} of map {ex.state!r} is a "
                            f"{type(items).__name__}, not a list")
        for index, item in enumerate(items):
            context = dict(item) if isinstance(item, Mapping) else {"item": item}
            regions.append(Execution(f"{base}/{index}", ex.state, ex.version, context=context))
    return _regions_changed(definition, ex, regions, list(accepted.commands), event, now,
                            [], accepted.transition)


def _start_region(definition: WorkflowDefinition, owner: str, region: Execution, event: Event,
                  now: int) -> Decision:
    scope = definition.scopes[region.definition]
    begun = region._replace(status=_RUNNING, started_at=now)
    return _move(scope, begun, event, now, scope.initial, region.context, domain=owner)


def _holds(region: Execution, answers: str) -> bool:
    """Tells whether `answers` names a call, timer or approval of `region` (or of its own
    regions)."""
    effect = region.effect
    if effect is not None and effect.effect_id == answers:
        return True
    approval = region.approval
    if approval is not None and approval.request_id == answers:
        return True
    if any(timer.id == answers for timer in region.timers):
        return True
    return any(_holds(inner, answers) for inner in region.regions)


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
                if region.status != _FINAL and _holds(region, answers):
                    decision = decide(scopes[region.definition], region, event, now,
                                      entropy=entropy)
                    if not isinstance(decision, Accepted):
                        return decision
                    changed = list(regions)
                    changed[index] = decision.execution
                    return _regions_changed(definition, ex, changed, list(decision.commands),
                                            event, now, [decision.transition], None)
        return _HANDLERS[kind](definition, ex, event, now, entropy)
    changed = list(regions)
    commands: list[Command] = []
    moves: list[Transition | None] = []
    refusal: Decision | None = None
    for index, region in enumerate(regions):
        if region.status == _FINAL or region.status == _CREATED:
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
        return _regions_changed(definition, ex, changed, commands, event, now, moves, None)
    if definition.states[ex.state].on.get(kind):
        return _external(definition, ex, event, now)
    return refusal or Rejected(RejectReason.ILLEGAL,
                               f"no region of {ex.state!r} takes {kind!r}")


def _regions_changed(definition: WorkflowDefinition, ex: Execution, regions: list[Execution],
                     commands: list[Command], event: Event, now: int,
                     moves: list[Transition | None], entered: Transition | None) -> Decision:
    """Gives the parent after its regions moved: map items started as slots free up, the
    completed steps, timers and approval of the regions mirrored, and the join (or the
    failure) once the regions say so. `entered` is the move into the state, when it was
    just entered."""
    state = definition.states[ex.state]
    if state.kind == "map":
        running = sum(1 for r in regions if r.status != _FINAL and r.status != _CREATED)
        limit = state.concurrency_max or len(regions)
        failures = sum(1 for r in regions if r.status == _FINAL and r.outcome != "success")
        for index, region in enumerate(regions):
            if running >= limit or failures > state.tolerated_failures:
                break  # a map that has failed starts no more items (wait: the started finish)
            if region.status != _CREATED:
                continue
            started = _start_region(definition, ex.state, region, event, now)
            if not isinstance(started, Accepted):
                # an item that cannot start (its input fails) is a failed item, not a refusal
                # of the event that freed its slot
                regions[index] = region._replace(status=_FINAL, outcome="failure")
                failures += 1
                continue
            regions[index] = started.execution
            commands += started.commands
            moves.append(started.transition)
            if started.execution.status != _FINAL:
                running += 1
            elif started.execution.outcome != "success":
                failures += 1
    else:
        cancel = state.on_region_failure == "cancel"
        for index, region in enumerate(regions):
            if cancel and any(r.status == _FINAL and r.outcome != "success" for r in regions):
                break  # a region failed on entry: the others are never started
            if region.status == _CREATED:
                started = _start_region(definition, ex.state, region, event, now)
                if not isinstance(started, Accepted):
                    return started
                regions[index] = started.execution
                commands += started.commands
                moves.append(started.transition)
    completed = _completed_of(ex, regions)
    own = _own_timers(ex)
    failed = [r for r in regions if r.status == _FINAL and r.outcome != "success"]
    failing = (len(failed) > state.tolerated_failures) if state.kind == "map" else bool(failed)
    # a failed map starts no more items: those never started count as finished
    finished = all(r.status == _FINAL or (failing and r.status == _CREATED) for r in regions)
    inner = tuple(m for m in moves if m is not None)
    parent = ex._replace(regions=tuple(regions), completed=completed,
                         sequence=ex.sequence + (0 if entered else 1), last_event_id=event.id,
                         answered=_answered_of(ex, regions))
    if finished or (failing and state.on_region_failure == "cancel"):
        return _join(definition, parent, commands, event, now, failing, entered, inner)
    timers = own + tuple(t for r in regions for t in r.timers)
    approval = next((r.approval for r in regions if r.approval is not None), None)
    moved = entered or Transition(ex.state, event.type, ex.state)
    return Accepted(parent._replace(timers=timers, approval=approval), tuple(commands),
                    moved._replace(inner=(*moved.inner, *inner)))


def _own_timers(ex: Execution) -> tuple[Timer, ...]:
    """Gives the parent's own timers (its deadline, its state's `after:`), not the regions'."""
    theirs = {t.id for r in ex.regions for t in r.timers}
    return tuple(t for t in ex.timers if t.id not in theirs)


def _completed_of(ex: Execution, regions: list[Execution]) -> tuple[CompletedStep, ...]:
    """Gives the parent's completed steps with the regions' new ones appended in the order
    they completed (so that undoing goes newest first across regions)."""
    completed = ex.completed
    for region in regions:
        for step in region.completed:
            if step not in completed:  # new, or a better-planned undo of a known key
                completed = _with_undo(completed, step)
    return completed


def _answered_of(ex: Execution, regions: list[Execution]) -> str:
    for before, after in zip(ex.regions, regions, strict=False):
        if after.answered != before.answered:
            return after.answered
    return ex.answered


def _join(definition: WorkflowDefinition, ex: Execution, commands: list[Command], event: Event,
          now: int, failing: bool, entered: Transition | None,
          inner: tuple[Transition, ...]) -> Decision:
    """Leaves the regions for the state's `done:` transitions: every region final (the join),
    or one failed. Regions still running are abandoned (their timers cancelled, a result
    that comes later is ignored); a failure first undoes, newest first, the steps every region
    completed, and a call left in flight whose step declares an undo."""
    state = definition.states[ex.state]
    regions = ex.regions
    own = _own_timers(ex)
    for region in regions:
        commands += [CancelTimer(t.id) for t in region.timers]
    # the done: transition is chosen before anything is exited (SCXML evaluates guards first)
    context, payload = _merged(state, ex, regions)
    done = Event(event.id, "done", event.source, payload, event.answers)
    chosen = _first_held(state.done, context, done, ex.state)
    if not isinstance(chosen, CompiledTransition):
        return chosen
    exited: list[Execution] = []
    for region in reversed(regions):  # SCXML exits regions in reverse document order
        if region.status == _FINAL:
            leaving = _exit_set(definition, region.state, ex.state)
            left, refused = _run_moves(definition, region.context, event, leaving, (), ())
            if refused is not None:
                return refused
            region = region._replace(context=left)
        exited.append(region)
    exited.reverse()
    context, _ = _merged(state, ex, tuple(exited))
    taken = (replace(chosen, guard=None),)
    base = ex._replace(regions=(), context=context, timers=own, approval=None)
    prefix = f"{ex.id}/{ex.state}/{ex.visits.get(ex.state, 0)}/"
    undo = tuple(s for s in reversed(ex.completed) if s.key.startswith(prefix)) if (
        failing and not definition.scope) else ()  # inside a region: the outermost undoes
    if failing and not definition.scope:
        flying = _in_flight_undos(definition, regions)
        known = {step.key for step in flying}
        undo = (*flying, *(step for step in undo if step.key not in known))
    # an instant join continues the eventless run that entered the state: one bound for all
    via = (*entered.via, ex.state) if entered is not None else ()
    if undo:
        decision = _begin_compensation(definition, base, done, now, taken, ex.answered,
                                       queue=undo)
    else:
        decision = _take(definition, base, done, now, taken, via=via)
    if not isinstance(decision, Accepted):
        return decision
    moved = decision.transition or Transition(ex.state, "done", decision.execution.state)
    if entered is not None:
        moved = moved._replace(source=entered.source, event=entered.event,
                               via=moved.via if moved.via[:len(via)] == via else (
                                   *via, *moved.via))
    return decision._replace(
        execution=decision.execution._replace(sequence=ex.sequence),
        commands=(*commands, *decision.commands),
        transition=moved._replace(inner=(*moved.inner, *inner)))


def _merged(state: CompiledState, ex: Execution, regions: tuple[Execution, ...]
            ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Gives the parent's context with its regions' work merged in (a parallel state: the
    keys each region changed, in region order; a map: one result per item), and the `done`
    event's payload."""
    if state.kind == "parallel":
        context = dict(ex.context)
        for region in regions:  # each region's changes, in region order
            for key, value in region.context.items():
                if key not in ex.context or ex.context[key] != value:
                    context[key] = value
        failed: list[Any] = [r.definition for r in regions
                             if r.status == _FINAL and r.outcome != "success"]
        outcomes: dict[str, Any] = {r.definition: r.outcome for r in regions}
    else:
        context = {**ex.context, state.results: [
            dict(r.context) if r.status == _FINAL and r.outcome == "success" else None
            for r in regions]}
        failed = [index for index, r in enumerate(regions)
                  if r.status == _FINAL and r.outcome != "success"]
        outcomes = {str(index): r.outcome for index, r in enumerate(regions)}
    failing = (len(failed) > state.tolerated_failures) if state.kind == "map" else bool(failed)
    return context, {"failed": failed, "outcomes": outcomes, "failing": failing}


def _first_held(transitions: tuple[CompiledTransition, ...], context: Mapping[str, Any],
                event: Event, where: str) -> CompiledTransition | Rejected:
    """Gives the first transition whose guard holds, or the rejection `_take` would give."""
    for transition in transitions:
        if transition.guard is None:
            return transition
        try:
            if transition.guard(context, event):
                return transition
        except Exception as exc:  # a user's guard must not crash the machine
            return Rejected(RejectReason.GUARD_ERROR,
                            f"guard {transition.guard_text!r} on {where!r} failed: "
                            f"{type(exc).__name__}: {exc}")
    texts = ", ".join(repr(t.guard_text) for t in transitions)
    return Rejected(RejectReason.GUARD_FALSE,
                    f"no guard held for 'done' in state {where!r} ({texts})")


def _in_flight_undos(definition: WorkflowDefinition, regions: tuple[Execution, ...]
                     ) -> tuple[CompletedStep, ...]:
    """Gives the undo of each abandoned region's call in flight whose step declares one: the
    call may land all the same, so its compensation (safe for an effect that did not happen)
    runs first."""
    undos: list[CompletedStep] = []
    for region in regions:
        effect = region.effect
        if region.status == _FINAL or (effect is not None and effect.compensation):
            continue
        if region.regions:
            undos += _in_flight_undos(definition, region.regions)
            continue
        if effect is None:
            continue  # an attempt that ended uncertain left its undo with the completed ones
        state, key = effect.state, effect.key
        step = definition.states[state].step
        compensation = step.compensation if step is not None else None
        if compensation is None:
            continue
        try:
            undo_input = compensation.input(region.context)
        except Exception:  # an undo that cannot be planned is skipped, not a crash
            continue
        undos.append(CompletedStep(state, key, compensation.tool, undo_input,
                                   compensation.attempts_max, compensation.retry_safe))
    return tuple(undos)


def pending_approval(execution: Execution, request_id: str) -> PendingApproval | None:
    """Gives the approval request (the execution's, or one of its regions') `request_id`
    names, or None."""
    for ex in _with_regions(execution):
        if ex.approval is not None and ex.approval.request_id == request_id:
            return ex.approval
    return None


def pending_effect(execution: Execution, effect_id: str) -> PendingEffect | None:
    """Gives the effect in flight (the execution's, or one of its regions') `effect_id`
    names, or None."""
    for ex in _with_regions(execution):
        if ex.effect is not None and ex.effect.effect_id == effect_id:
            return ex.effect
    return None


def _with_regions(execution: Execution) -> Iterator[Execution]:
    """Gives the execution, then each of its regions' (depth first)."""
    yield execution
    for region in execution.regions:
        yield from _with_regions(region)


_HANDLERS = {
    STEP_SUCCEEDED: _on_step_result,
    STEP_FAILED: _on_step_result,
    COMPENSATION_SUCCEEDED: _on_compensation_result,
    COMPENSATION_FAILED: _on_compensation_result,
    TIMER_FIRED: _on_timer,
    APPROVAL_GRANTED: _on_approval,
    APPROVAL_DENIED: _on_approval,
    STARTED: lambda d, ex, ev, now, entropy: Ignored(
        IgnoreReason.DUPLICATE, f"execution {ex.id!r} has already started"),
}
