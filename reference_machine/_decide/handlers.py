"""The handlers of the built-in events that answer what the machine asked for: step results
(success, failure, retries with backoff, exhaustion), compensation results, timers firing and
approval decisions. `dispatch` maps each built-in event type to its handler."""

from __future__ import annotations

import zlib

from reference_machine._decide.moves import begin_compensation, move, take
from reference_machine._decide.shared import (
    APPROVAL_EXPIRY,
    COMPENSATING,
    DEADLINE,
    RETRY,
    STEP_TIMEOUT,
    WAIT_TIMEOUT,
    input_failed,
)
from reference_machine._decide.undos import compensate, undo_of, with_undo
from reference_machine._definition import CompiledState, CompiledStep, WorkflowDefinition
from reference_machine._records import (
    APPROVAL_DENIED,
    APPROVAL_GRANTED,
    COMPENSATION_SUCCEEDED,
    STEP_FAILED,
    STEP_SUCCEEDED,
    Accepted,
    CancelTimer,
    Command,
    CompletedStep,
    Decision,
    Event,
    Execution,
    Ignored,
    IgnoreReason,
    PendingEffect,
    Rejected,
    RejectReason,
    RunEffect,
    ScheduleTimer,
    Timer,
    TimerPurpose,
)
from reference_machine._spec import Category, Source

__all__ = ["on_approval", "on_compensation_result", "on_step_result", "on_timer"]

_CATEGORIES = frozenset(str(c) for c in Category)
_RETRYABLE_COMPENSATION = frozenset({Category.TRANSIENT, Category.RATE_LIMITED, Category.TIMEOUT})
#: Failures after which the effect may have taken place all the same.
_UNCERTAIN = frozenset({Category.TIMEOUT, Category.INVALID_OUTPUT})
_RESULT_SOURCES = frozenset({Source.TOOL, Source.AGENT, Source.SYSTEM})
_TIMER_SOURCES = frozenset({Source.TIMER, Source.SYSTEM})
_COMPENSATION_DELAY_MS = 1000


def _unanswered(ex: Execution, event: Event, what: str) -> Ignored:
    if event.answers and event.answers == ex.answered:
        return Ignored(IgnoreReason.DUPLICATE,
                       f"{event.type!r} answers {what} {event.answers!r}, already answered")
    return Ignored(IgnoreReason.LATE,
                   f"{event.type!r} answers {what} {event.answers or '(nothing)'!r}, which is "
                   "no longer pending")


# -- steps ---------------------------------------------------------------------------------------


def on_step_result(definition: WorkflowDefinition, ex: Execution, event: Event, now: int,
                   entropy: float | None) -> Decision:
    effect = ex.effect
    if effect is None or effect.compensation or event.answers != effect.effect_id:
        return _unanswered(ex, event, "effect")
    if event.source not in _RESULT_SOURCES:
        return Rejected(RejectReason.UNAUTHORIZED,
                        f"a step result comes from a tool or agent, not {event.source!r}")
    state = definition.states[ex.state]
    step = state.step
    if step is None:  # the state was left; move clears the effect, so this is defensive
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
    decision = take(definition, ex, event, now, state.on.get(STEP_SUCCEEDED, ()),
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
        return input_failed(ex.state, "compensation input", exc)
    done = CompletedStep(ex.state, effect.key, compensation.tool, undo_input,
                         compensation.attempts_max, compensation.retry_safe)
    return decision._replace(execution=after._replace(completed=with_undo(after.completed,
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
        timer = Timer(f"{effect.key}/retry/{attempt}", RETRY,
                      now + _backoff(step, attempt, fraction))
        commands: list[Command] = [CancelTimer(t.id) for t in ex.timers
                                   if t.purpose == STEP_TIMEOUT]
        commands.append(ScheduleTimer(*timer))
        timers = (*(t for t in ex.timers if t.purpose != STEP_TIMEOUT), timer)
        completed = ex.completed
        if uncertain and definition.scope and step.compensation is not None:
            # inside a region or map item: the attempt may have taken effect, so its undo is
            # kept from now on, in the order effects ended, for a failure of the parallel or
            # map state to run (the one the step completes with replaces it)
            undo = undo_of(ex, step, effect.key)
            if isinstance(undo, Rejected):
                return undo
            completed = with_undo(completed, undo)
        return Accepted(ex._replace(effect=None, timers=timers, sequence=ex.sequence + 1,
                                    answered=answered, last_event_id=event.id,
                                    uncertain=uncertain, completed=completed),
                        tuple(commands))
    if ambiguous and step.escalate_to is not None:
        escalated = move(definition, ex, event, now, step.escalate_to, ex.context,
                         forced="ambiguous_failure", answered=answered)
        if definition.scope and step.compensation is not None and isinstance(escalated,
                                                                              Accepted):
            undo = undo_of(ex, step, effect.key)  # it may have taken effect
            if isinstance(undo, Rejected):
                return undo
            after = escalated.execution
            return escalated._replace(execution=after._replace(
                completed=with_undo(after.completed, undo)))
        return escalated
    if step.on_exhausted == "escalate":
        return move(definition, ex, event, now, step.escalate_to or "", ex.context,
                    forced="retries_exhausted", answered=answered)
    transitions = state.on.get(STEP_FAILED, ())
    if step.on_exhausted == "compensate" and (ex.completed or (
            uncertain and step.compensation is not None)):
        return begin_compensation(definition, ex, event, now, transitions, answered,
                                  uncertain)
    decision = take(definition, ex, event, now, transitions, answered=answered)
    if uncertain and definition.scope and step.compensation is not None and isinstance(
            decision, Accepted):
        # inside a region or map item: the failed step may have taken effect, so its undo is
        # kept with the completed ones, for the parallel or map state's failure to run
        undo = undo_of(ex, step, effect.key)
        if isinstance(undo, Rejected):
            return undo
        after = decision.execution
        return decision._replace(execution=after._replace(
            completed=with_undo(after.completed, undo)))
    return decision


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


def on_compensation_result(definition: WorkflowDefinition, ex: Execution, event: Event,
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
            effect, command = compensate(remaining[0], 1)
            return Accepted(ex._replace(
                attempt=1, effect=effect, compensating=remaining, completed=completed,
                sequence=ex.sequence + 1, answered=event.answers, last_event_id=event.id,
            ), (command,))
        # what was not in the queue (a parallel state's failure undoes only its regions')
        # stays completed
        return move(definition, ex._replace(completed=completed), event, now,
                    ex.after_compensation, ex.context, forced="compensated",
                    completed=completed, answered=event.answers, quiet=True)
    category = event.payload.get("category")
    retryable = isinstance(category, str) and category in _RETRYABLE_COMPENSATION and (
        category != Category.TIMEOUT or current.retry_safe)  # never a blind retry of an undo
    if retryable and ex.attempt < current.attempts_max:
        timer = Timer(f"{effect.key}/retry/{ex.attempt}", RETRY,
                      now + _COMPENSATION_DELAY_MS * 2 ** (ex.attempt - 1))
        return Accepted(ex._replace(
            effect=None, timers=(*ex.timers, timer), sequence=ex.sequence + 1,
            answered=event.answers, last_event_id=event.id,
        ), (ScheduleTimer(*timer),))
    return move(definition, ex, event, now, definition.compensation_failed or "", ex.context,
                forced="compensation_failed", answered=event.answers, quiet=True)


# -- timers --------------------------------------------------------------------------------------


def on_timer(definition: WorkflowDefinition, ex: Execution, event: Event, now: int,
             entropy: float | None) -> Decision:
    if event.source not in _TIMER_SOURCES:
        return Rejected(RejectReason.UNAUTHORIZED,
                        f"timers fire from source timer or system, not {event.source!r}")
    timer = next((t for t in ex.timers if t.id == event.answers), None)
    if timer is None:
        return _unanswered(ex, event, "timer")
    state = definition.states[ex.state]
    purpose = timer.purpose
    if purpose == WAIT_TIMEOUT:
        return move(definition, ex, event, now, state.after_target or "", ex.context)
    rest = tuple(t for t in ex.timers if t.id != timer.id)
    if purpose == DEADLINE:
        return move(definition, ex._replace(timers=rest), event, now,
                    definition.budgets.on_exceeded or "", ex.context, forced="deadline")
    if purpose == APPROVAL_EXPIRY:
        approval = state.approval
        assert approval is not None
        if approval.on_expiry == "escalate":
            return move(definition, ex, event, now, approval.escalate_to or "", ex.context,
                        forced="approval_expired")
        expired = Event(event.id, APPROVAL_DENIED, event.source, {"decision": "expired"},
                        event.answers)
        return take(definition, ex, expired, now, state.on.get(APPROVAL_DENIED, ()))
    if purpose == TimerPurpose.RETRY:
        attempt = ex.attempt + 1
        if ex.status == COMPENSATING:
            effect, command = compensate(ex.compensating[0], attempt)
            return Accepted(ex._replace(attempt=attempt, effect=effect, timers=rest,
                                        sequence=ex.sequence + 1, last_event_id=event.id),
                            (command,))
        step = state.step
        assert step is not None
        cost = ex.cost + step.cost  # every attempt is paid for, retries included
        cost_max = definition.budgets.cost_max
        if cost_max is not None and cost > cost_max and not ex.exceeded:
            return move(definition, ex._replace(timers=rest, cost=cost), event, now,
                        definition.budgets.on_exceeded or "", ex.context, forced="cost_max")
        key = f"{ex.id}/{ex.state}/{ex.visits.get(ex.state, 0)}"
        effect_id = f"{key}#{attempt}"
        try:
            step_input = step.input(ex.context)
        except Exception as exc:  # unreachable unless the context changed under the step
            return input_failed(ex.state, "step input", exc)
        commands: list[Command] = [RunEffect(effect_id, key, ex.state, step.tool, step_input,
                                             attempt, step.timeout_ms, step.idempotent)]
        if step.timeout_ms is not None:
            timeout = Timer(f"{effect_id}/timeout", STEP_TIMEOUT,
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


def on_approval(definition: WorkflowDefinition, ex: Execution, event: Event, now: int,
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
        return take(definition, ex, event, now, transitions,
                    approved=(*ex.approved, request.action_hash))
    return take(definition, ex, event, now, transitions)
