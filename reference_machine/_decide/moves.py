"""Taking transitions and moving between states: `take` (the first transition whose guard
holds), `move` (cancel the timers, check the budgets, enter the target: its step, approval
request or timeout) and `plain_move`, its fast path; internal transitions and eventless
settling; entering a parallel or map state's regions and joining them; beginning a
compensation.

These are one module because they call one another round: a move into a parallel or map
state starts its regions with moves, their join takes the state's `done:` transition or begins
a compensation (which chooses where the run goes with `take`), and an eventless transition is
one more move.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from reference_machine._decide.approvals import (
    approval_needed,
    approval_request,
    step_action_hash,
)
from reference_machine._decide.hierarchy import (
    domain_of,
    entry_set,
    exit_set,
    merge,
    recorded,
    resolve,
    run_moves,
)
from reference_machine._decide.regions import (
    answered_of,
    completed_of,
    first_held,
    merged,
    own_timers,
)
from reference_machine._decide.shared import (
    APPROVAL_EXPIRY,
    COMPENSATING,
    CREATED,
    DEADLINE,
    FINAL,
    RUNNING,
    STEP_TIMEOUT,
    UNSET,
    WAIT_TIMEOUT,
    WAITING,
    input_failed,
)
from reference_machine._decide.undos import compensate, in_flight_undos
from reference_machine._definition import (
    Action,
    CompiledState,
    CompiledTransition,
    WorkflowDefinition,
)
from reference_machine._records import (
    COMPENSATION_FAILED,
    STEP_FAILED,
    Accepted,
    CancelTimer,
    Command,
    CompletedStep,
    Decision,
    Event,
    Execution,
    PendingApproval,
    PendingEffect,
    Rejected,
    RejectReason,
    RunEffect,
    ScheduleTimer,
    Timer,
    Transition,
    VisitCounts,
)

__all__ = [
    "EVENTLESS_MAX",
    "begin_compensation",
    "join",
    "move",
    "plain_move",
    "regions_changed",
    "take",
]

_new = tuple.__new__
#: Eventless moves one event may cause before the run counts as a runaway.
EVENTLESS_MAX = 100
#: Forced reasons that are budgets: once one forces the run, budgets stop applying.
_BUDGETS = frozenset({"transitions_max", "visits_max", "cost_max", "deadline", "cycle"})


# -- taking a transition -------------------------------------------------------------------------


def take(definition: WorkflowDefinition, ex: Execution, event: Event, now: int,
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
        if scoped:  # exits, then the transition's actions, then entries: `move` runs them
            return move(definition, ex, event, now, transition.target, context, "", approved,
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
                    merge(updated, changed)
            context = updated
        target = transition.target_leaf
        if (approved is None and completed is None and answered is None and not ex.timers
                and definition.states[target].plain and not definition.budgets.any_limit
                and not via):
            return plain_move(ex, event, target, context)
        return move(definition, ex, event, now, target, context, "", approved, completed,
                    answered, via=via)
    texts = ", ".join(repr(t.guard_text) for t in transitions)
    return Rejected(RejectReason.GUARD_FALSE,
                    f"no guard held for {event.type!r} in state {ex.state!r} ({texts})")


def _internal(definition: WorkflowDefinition, ex: Execution, event: Event, now: int,
              transition: CompiledTransition) -> Decision:
    """Runs a transition with no target: its actions, no exit, no entry, no visit."""
    context, refused = run_moves(definition, ex.context, event, (), transition.actions, ())
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


def plain_move(ex: Execution, event: Event, target: str, context: Mapping[str, Any],
               transition: Transition | None = None) -> Accepted:
    """`move` where it has nothing to do but move: no timers to cancel, no budget, and a plain
    target (no step, approval or timeout). Gives what `move` would, field for field."""
    (ex_id, ex_definition, ex_version, ex_state, _, _, _, sequence, started_at, transitions,
     visits, _, _, _, _, ex_approved, ex_completed, _, _, cost, failures, exceeded,
     ex_answered, _, _, _, ex_history) = ex
    if type(visits) is dict and len(visits) < _DICT_VISITS_MAX:
        visits = visits.copy()
        visits[target] = visits.get(target, 0) + 1
    else:
        visits = _bumped(visits, target)[0]
    execution = _new(Execution, (
        ex_id, ex_definition, ex_version, target, RUNNING, None, context, sequence + 1,
        started_at, transitions + 1, visits, 0, None, (), None, ex_approved, ex_completed, (),
        "", cost, failures, exceeded, ex_answered, event.id, False, (), ex_history,
    ))
    if transition is None:
        transition = _new(Transition, (ex_state, event.type, target, "", (), ()))
    return _new(Accepted, (execution, (), transition))


def move(
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
    domain: Any = UNSET,
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
        if domain is UNSET:
            domain = domain_of(definition, declared or ex_state, target)
        exits = exit_set(definition, ex_state, domain)
        if exits:
            history = recorded(definition, ex_state, exits, history)
        target = resolve(definition, target, history)
    budgets = definition.budgets
    commands: list[Command] = list(prefix) if prefix else []
    timers: tuple[Timer, ...] = ()
    if forced in _BUDGETS:
        exceeded = forced  # from here on no budget applies: the run is a person's to finish
    if ex_timers:
        for timer in ex_timers:
            if timer.purpose is DEADLINE and not exceeded:
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
                    return move(definition, ex._replace(failures=failures), event, now,
                                budgets.on_cycle or "", context, "cycle", approved, completed,
                                answered, prefix, actions=actions, via=via)
        if exceeded:
            return move(definition, ex, event, now, budgets.on_exceeded or "", context,
                        exceeded, approved, completed, answered, prefix, actions=actions,
                        via=via)
    before = context  # a budget that forces the run elsewhere below starts from here
    if (scoped or actions) and not quiet:
        # SCXML's order: exits innermost first, the transition's actions, entries outermost
        context, refused = run_moves(definition, context, event, exits, actions,
                                     entry_set(definition, target, domain)
                                     if definition.scoped else ())
        if refused is not None:
            return refused

    state: CompiledState = definition.states[target]
    status = RUNNING
    outcome = None
    effect = None
    attempt = 0
    approval = None
    if approved is None:
        approved = ex_approved
    if state.final:
        status = FINAL
        outcome = state.outcome
        for timer in timers:
            commands.append(_new(CancelTimer, (timer.id,)))
        timers = ()
    elif state.step is not None:
        step = state.step
        try:
            step_input = step.input(context)
        except Exception as exc:  # step inputs are user expressions: a failure is a reject
            return input_failed(target, "step input", exc)
        if step.needs_approval and (step.approval_when is None
                                    or approval_needed(step, context, event)):
            action = step_action_hash(step, step_input)
            if action not in approved:
                return Rejected(RejectReason.UNAUTHORIZED,
                                f"state {target!r} runs {step.tool!r}, which needs an approval "
                                f"of action {action[:12]} that was not granted")
            approved = tuple(h for h in approved if h != action)
        cost += step.cost
        if not forced and not exceeded and budgets.cost_max is not None and (
                cost > budgets.cost_max):
            return move(definition, ex, event, now, budgets.on_exceeded or "", before,
                        "cost_max", approved, completed, answered, prefix, actions=actions,
                        via=via)
        key = f"{ex_id}/{target}/{visit}"
        effect_id = f"{key}#1"
        attempt = 1
        effect = _new(PendingEffect, (effect_id, key, target, step.tool, 1, False))
        commands.append(_new(RunEffect, (effect_id, key, target, step.tool, step_input, 1,
                                         step.timeout_ms, step.idempotent)))
        if step.timeout_ms is not None:
            timer = _new(Timer, (f"{effect_id}/timeout", STEP_TIMEOUT, now + step.timeout_ms))
            timers += (timer,)
            commands.append(_new(ScheduleTimer, timer))
    else:
        if state.kind == "wait":
            status = WAITING
        if state.approval is not None:
            try:
                request = approval_request(definition, ex_id, state, visit, context, now)
            except Exception as exc:  # the gated step's input is user expressions
                return input_failed(target, "approved step's input", exc)
            approval = PendingApproval(request.request_id, target, request.action_hash,
                                       request.roles, request.expires_at)
            commands.append(request)
            timer = _new(Timer, (f"{request.request_id}/expiry", APPROVAL_EXPIRY,
                                 request.expires_at))
            timers += (timer,)
            commands.append(_new(ScheduleTimer, timer))
    if state.after_ms is not None:
        timer = _new(Timer, (f"{ex_id}/{target}/{visit}/after", WAIT_TIMEOUT,
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


# -- eventless transitions -----------------------------------------------------------------------


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
        after = move(definition, ex, event, now, target, ex.context, "", None, None, None,
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


# -- parallel regions and map items ------------------------------------------------------------


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
    return regions_changed(definition, ex, regions, list(accepted.commands), event, now,
                           [], accepted.transition)


def _start_region(definition: WorkflowDefinition, owner: str, region: Execution, event: Event,
                  now: int) -> Decision:
    scope = definition.scopes[region.definition]
    begun = region._replace(status=RUNNING, started_at=now)
    return move(scope, begun, event, now, scope.initial, region.context, domain=owner)


def regions_changed(definition: WorkflowDefinition, ex: Execution, regions: list[Execution],
                    commands: list[Command], event: Event, now: int,
                    moves: list[Transition | None], entered: Transition | None) -> Decision:
    """Gives the parent after its regions moved: map items started as slots free up, the
    completed steps, timers and approval of the regions mirrored, and the join (or the
    failure) once the regions say so. `entered` is the move into the state, when it was
    just entered."""
    state = definition.states[ex.state]
    if state.kind == "map":
        running = sum(1 for r in regions if r.status != FINAL and r.status != CREATED)
        limit = state.concurrency_max or len(regions)
        failures = sum(1 for r in regions if r.status == FINAL and r.outcome != "success")
        for index, region in enumerate(regions):
            if running >= limit or failures > state.tolerated_failures:
                break  # a map that has failed starts no more items (wait: the started finish)
            if region.status != CREATED:
                continue
            started = _start_region(definition, ex.state, region, event, now)
            if not isinstance(started, Accepted):
                # an item that cannot start (its input fails) is a failed item, not a refusal
                # of the event that freed its slot
                regions[index] = region._replace(status=FINAL, outcome="failure")
                failures += 1
                continue
            regions[index] = started.execution
            commands += started.commands
            moves.append(started.transition)
            if started.execution.status != FINAL:
                running += 1
            elif started.execution.outcome != "success":
                failures += 1
    else:
        cancel = state.on_region_failure == "cancel"
        for index, region in enumerate(regions):
            if cancel and any(r.status == FINAL and r.outcome != "success" for r in regions):
                break  # a region failed on entry: the others are never started
            if region.status == CREATED:
                started = _start_region(definition, ex.state, region, event, now)
                if not isinstance(started, Accepted):
                    return started
                regions[index] = started.execution
                commands += started.commands
                moves.append(started.transition)
    completed = completed_of(ex, regions)
    own = own_timers(ex)
    failed = [r for r in regions if r.status == FINAL and r.outcome != "success"]
    failing = (len(failed) > state.tolerated_failures) if state.kind == "map" else bool(failed)
    # a failed map starts no more items: those never started count as finished
    finished = all(r.status == FINAL or (failing and r.status == CREATED) for r in regions)
    inner = tuple(m for m in moves if m is not None)
    parent = ex._replace(regions=tuple(regions), completed=completed,
                         sequence=ex.sequence + (0 if entered else 1), last_event_id=event.id,
                         answered=answered_of(ex, regions))
    if finished or (failing and state.on_region_failure == "cancel"):
        return join(definition, parent, commands, event, now, failing, entered, inner)
    timers = own + tuple(t for r in regions for t in r.timers)
    approval = next((r.approval for r in regions if r.approval is not None), None)
    moved = entered or Transition(ex.state, event.type, ex.state)
    return Accepted(parent._replace(timers=timers, approval=approval), tuple(commands),
                    moved._replace(inner=(*moved.inner, *inner)))


def join(definition: WorkflowDefinition, ex: Execution, commands: list[Command], event: Event,
         now: int, failing: bool, entered: Transition | None,
         inner: tuple[Transition, ...]) -> Decision:
    """Leaves the regions for the state's `done:` transitions: every region final (the join),
    or one failed. Regions still running are abandoned (their timers cancelled, a result
    that comes later is ignored); a failure first undoes, newest first, the steps every region
    completed, and a call left in flight whose step declares an undo."""
    state = definition.states[ex.state]
    regions = ex.regions
    own = own_timers(ex)
    for region in regions:
        commands += [CancelTimer(t.id) for t in region.timers]
    # the done: transition is chosen before anything is exited (SCXML evaluates guards first)
    context, payload = merged(state, ex, regions)
    done = Event(event.id, "done", event.source, payload, event.answers)
    chosen = first_held(state.done, context, done, ex.state)
    if not isinstance(chosen, CompiledTransition):
        return chosen
    exited: list[Execution] = []
    for region in reversed(regions):  # SCXML exits regions in reverse document order
        if region.status == FINAL:
            leaving = exit_set(definition, region.state, ex.state)
            left, refused = run_moves(definition, region.context, event, leaving, (), ())
            if refused is not None:
                return refused
            region = region._replace(context=left)
        exited.append(region)
    exited.reverse()
    context, _ = merged(state, ex, tuple(exited))
    taken = (replace(chosen, guard=None),)
    base = ex._replace(regions=(), context=context, timers=own, approval=None)
    prefix = f"{ex.id}/{ex.state}/{ex.visits.get(ex.state, 0)}/"
    undo = tuple(s for s in reversed(ex.completed) if s.key.startswith(prefix)) if (
        failing and not definition.scope) else ()  # inside a region: the outermost undoes
    if failing and not definition.scope:
        flying = in_flight_undos(definition, regions)
        known = {step.key for step in flying}
        undo = (*flying, *(step for step in undo if step.key not in known))
    # an instant join continues the eventless run that entered the state: one bound for all
    via = (*entered.via, ex.state) if entered is not None else ()
    if undo:
        decision = begin_compensation(definition, base, done, now, taken, ex.answered,
                                      queue=undo)
    else:
        decision = take(definition, base, done, now, taken, via=via)
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


# -- compensation --------------------------------------------------------------------------------


def begin_compensation(definition: WorkflowDefinition, ex: Execution, event: Event, now: int,
                       transitions: tuple[CompiledTransition, ...], answered: str,
                       uncertain: bool = False,
                       queue: tuple[CompletedStep, ...] | None = None) -> Decision:
    """Chooses where the run goes once undone, then undoes completed steps newest first: the
    failing step first when its effect may have taken place (so its compensation must be safe
    to run for an effect that did not)."""
    chosen = take(definition, ex, event, now, transitions)
    if not isinstance(chosen, Accepted):
        return chosen
    queue = tuple(reversed(ex.completed)) if queue is None else queue
    step = definition.states[ex.state].step
    compensation = step.compensation if step is not None else None
    if uncertain and compensation is not None and ex.effect is not None:
        try:
            undo_input = compensation.input(ex.context)
        except Exception as exc:  # the undo's input is user expressions: a failure is a reject
            return input_failed(ex.state, "compensation input", exc)
        queue = (CompletedStep(ex.state, ex.effect.key, compensation.tool, undo_input,
                               compensation.attempts_max, compensation.retry_safe), *queue)
    commands: list[Command] = [CancelTimer(t.id) for t in ex.timers if t.purpose != DEADLINE]
    timers = tuple(t for t in ex.timers if t.purpose == DEADLINE)
    effect, command = compensate(queue[0], 1)
    commands.append(command)
    execution = ex._replace(
        status=COMPENSATING, context=chosen.execution.context, attempt=1, effect=effect,
        timers=timers, approval=None, compensating=queue,
        after_compensation=chosen.execution.state, sequence=ex.sequence + 1,
        answered=answered, last_event_id=event.id,
    )
    return Accepted(execution, tuple(commands))
