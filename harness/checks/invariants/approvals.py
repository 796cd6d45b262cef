"""Invariants of approvals: `approval_genuine`, `approved_effects`."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from harness.checks.invariants.analysis import (
    Owner,
    action_hashes,
    chart_of,
    has_commits,
    owners_of,
    quoted,
)
from harness.checks.invariants.registry import History, Violation, builtin, per_history
from harness.sim.history import Applied, Committed, Decided, Delivered, FaultInjected, Observed
from reference_machine import (
    APPROVAL_DENIED,
    APPROVAL_GRANTED,
    Event,
    WorkflowDefinition,
    action_hash,
)

__all__ = [
    "approval_genuine",
    "approved_effects",
]


_APPROVALS = frozenset({APPROVAL_GRANTED, APPROVAL_DENIED})


class _Grant(NamedTuple):
    position: int  # the decision's record
    action_hash: str


@builtin("approval_genuine", "an approval decision is taken only from a human holding a listed "
                             "role, for the current request and its exact action")
def approval_genuine(definition: WorkflowDefinition, history: History) -> Iterator[Violation]:
    for index, eid, event, state, problem in _approval_decisions(definition, history):
        if problem:
            yield Violation("approval_genuine",
                            f"{eid} took {event.type} {event.id!r} in {state!r} although "
                            f"{problem}", eid, history[index].step, (index,))


@per_history
def _approval_decisions(definition: WorkflowDefinition, history: History
                        ) -> list[tuple[int, str, Event, str, str]]:
    """Gives (position, execution, event, state, problem) for each accepted approval decision;
    `problem` says why it was not genuine ("" when it was)."""
    return list(_each_approval_decision(definition, history))


#: the faults in the middle of a delivery after which the machine may rightly answer that the
#: event is a duplicate: a crash or a failed write after its commit, or a second worker that
#: took the event first
_MIDWAY = frozenset({"crash", "store_write_failure", "second_worker"})


def _each_approval_decision(definition: WorkflowDefinition, history: History
                            ) -> Iterator[tuple[int, str, Event, str, str]]:
    commits = has_commits(history)
    chart = chart_of(definition)
    requests: dict[str, Observed] = {}
    states: dict[str, str] = {}
    contexts: dict[str, Mapping[str, Any]] = {}
    regions: dict[str, tuple[tuple[str, str, str], ...]] = {}
    delivered: dict[tuple[str, str], Delivered] = {}
    # without commits: the state each delivery met, and the deliveries no answer came back for
    # (the machine crashed in them), whose copy it may later call a duplicate
    met: dict[tuple[str, str], tuple[str, Observed | None, int]] = {}
    delivered_at: dict[tuple[str, str], int] = {}
    awaiting: set[tuple[str, str]] = set()  # delivered, not answered yet
    unanswered: set[tuple[str, str]] = set()
    taken: set[tuple[str, str]] = set()  # the deliveries counted as accepted
    for index, record in enumerate(history):
        if type(record) is Observed:
            requests[record.execution] = record
            if not commits:
                states[record.execution] = record.state
            continue
        if type(record) is FaultInjected and not commits and record.fault in _MIDWAY:
            unanswered.update(key for key in awaiting if key[0] == record.execution)
            continue  # a delivery cut midway: its answer may be a duplicate's
        if type(record) is Delivered:
            sent_key = (record.execution, record.event_id)
            if not commits:
                if sent_key in awaiting:  # sent again: the one before got no answer
                    unanswered.add(sent_key)
                elif sent_key not in delivered:  # its first delivery
                    met[sent_key] = (states.get(record.execution, ""),
                                     requests.get(record.execution), index)
                awaiting.add(sent_key)
                delivered_at[sent_key] = index
            delivered[sent_key] = record
            continue
        if type(record) is Committed:
            if record.decision != "accepted":
                continue
            eid = record.execution
            before_state, before_context = states.get(eid, ""), contexts.get(eid)
            before_regions = regions.get(eid, ())
            states[eid] = record.state
            regions[eid] = record.regions
            if record.context is not None:
                contexts[eid] = record.context
            if record.event_type not in _APPROVALS:
                continue
            event = Event(record.event_id, record.event_type, record.event_source,
                          record.payload or {}, record.answers)
            state = record.from_state or before_state
            if state in chart.scoped:  # a region's request: the region in it decides
                asking = [(rid, at) for rid, at, _ in before_regions
                          if record.answers.startswith(f"{rid}/")]
                if asking:
                    state, before_context = max(asking, key=lambda pair: len(pair[0]))[1], None
        elif type(record) is Decided and not commits:
            eid = record.execution
            sent_key = (eid, record.event_id)
            awaiting.discard(sent_key)
            first_crashed = sent_key in unanswered
            unanswered.discard(sent_key)
            request = requests.get(eid)
            # the grant counts from its delivery: a machine that crashed in it may have
            # recovered and acted on it (dispatched its effect) before it answered
            at = delivered_at.get(sent_key, index)
            if record.decision.partition(":")[0] == "accepted":
                state = states.get(eid, "")
                taken.add(sent_key)
            elif (record.decision == "ignored:duplicate" and first_crashed
                  and sent_key not in taken):
                # a delivery cut midway may have been taken (committed, then no answer, or
                # taken by a second worker): the copy is then a duplicate. Judged as of its
                # first delivery, and counted only when it was a genuine grant then: the
                # machine may as well have refused it (nothing tells, without commits)
                state, request, at = met.get(sent_key, ("", None, index))
                sent = delivered.get(sent_key)
                if sent is None or sent.type not in _APPROVALS:
                    continue
                event = Event(sent.event_id, sent.type, sent.source, sent.payload or {},
                              sent.answers)
                if not _not_genuine(definition, event, state, request, None):
                    taken.add(sent_key)
                    yield at, eid, event, state, ""
                continue
            else:
                continue
            sent = delivered.get(sent_key)
            if sent is None or sent.type not in _APPROVALS:
                continue
            event = Event(sent.event_id, sent.type, sent.source, sent.payload or {},
                          sent.answers)
            yield at, eid, event, state, _not_genuine(definition, event, state, request, None)
            continue
        else:
            continue
        yield index, eid, event, state, _not_genuine(definition, event, state,
                                                     requests.get(eid), before_context)


def _not_genuine(definition: WorkflowDefinition, event: Event, state: str,
                 seen: Observed | None, context: Mapping[str, Any] | None) -> str:
    """Tells why an accepted approval decision was not genuine, or "" when it was."""
    compiled = definition.states.get(state)
    approval = compiled.approval if compiled is not None else None
    if approval is None:
        return f"{state!r} asks for no approval"
    if event.source != "human":
        return f"it came from source {event.source!r}, not from a human"
    payload = event.payload if isinstance(event.payload, Mapping) else {}
    role = payload.get("role")
    if role not in approval.roles:
        return f"role {role!r} may not decide it (roles: {', '.join(sorted(approval.roles))})"
    pending = {seen.request: seen.action_hash} if seen is not None and seen.request else {}
    if seen is not None:  # inside a parallel or map state, every region's request
        pending.update(dict(getattr(seen, "approvals", ()) or ()))
    if seen is None or not pending:
        return "no approval request was pending"
    if event.answers not in pending:
        return f"it answers request {event.answers!r}, not the current {seen.request!r}"
    expected = pending[event.answers]
    if context is not None and not definition.secrets:
        try:
            gated = definition.states[approval.for_state].step
            if gated is not None:
                expected = action_hash(definition, approval.for_state, context)
        except Exception:  # an input that cannot be built: the machine's hash stands
            expected = seen.action_hash
    if payload.get("action_hash") != expected:
        return (f"it approves action {str(payload.get('action_hash'))[:12]}, not the "
                f"requested {expected[:12]}")
    return ""


@builtin("approved_effects", "an effect of a step that needs approval takes place only after a "
                             "genuine grant of that exact action, one grant per action")
def approved_effects(definition: WorkflowDefinition, history: History) -> Iterator[Violation]:
    gated: dict[str, list[str]] = defaultdict(list)  # tool -> states whose step needs approval
    ungated: set[str] = set()  # tools some state runs without approval
    for name, state in definition.states.items():
        if state.step is not None:
            if state.step.needs_approval:
                gated[state.step.tool].append(name)
            if not state.step.needs_approval or state.step.approval_when is not None:
                ungated.add(state.step.tool)
    if not gated:
        return
    owners = owners_of(definition, history)
    conditional = chart_of(definition).conditional
    decisions = {index: (event, problem) for index, _, event, _, problem in
                 _approval_decisions(definition, history)}
    grants: dict[str, list[_Grant]] = defaultdict(list)
    done: dict[tuple[str, str, str], int] = {}
    for index, record in enumerate(history):
        decided = decisions.get(index)
        if decided is not None:
            event, problem = decided
            if event.type == APPROVAL_GRANTED and not problem:
                grants[getattr(record, "execution", "")].append(
                    _Grant(index, str(event.payload.get("action_hash"))))
            continue
        if type(record) is not Applied or record.tool not in gated:
            continue
        owner = owners.get(record.key)
        if owner is not None:  # the commit that commanded it says which state's it was
            if owner.compensation or owner.state not in gated[record.tool]:
                continue
            if owner.state in conditional and not _approval_needed(definition, history,
                                                                     owner):
                continue
            states, execution = [owner.state], record.execution or owner.execution
        elif record.tool in ungated:
            continue  # a tool gated in one state, not in another: cannot tell which
        else:
            states, execution = gated[record.tool], record.execution
        action = (execution, record.tool, record.input)
        if action in done:
            continue  # the same action again: no_duplicate_effect tells of it
        wanted = action_hashes(definition, states, record.input)
        if wanted is None and not execution:
            continue  # neither its run nor its action can be told: nothing to judge by
        # an effect no key ties to its run may use any run's grant of that exact action
        pools = [grants[execution]] if execution else list(grants.values())
        match, available = None, grants[execution]
        for pool in pools:
            match = next((g for g in pool if wanted is None or g.action_hash in wanted), None)
            if match is not None:
                available = pool
                break
        if match is None:
            why = ("no genuine approval was granted" if not any(pools) else
                   "no genuine approval granted was for this exact action")
            yield Violation("approved_effects",
                            f"{record.tool} took effect for {execution or 'an unknown run'} "
                            f"with input {quoted(record.input)} (ledger #{record.seq}), but "
                            f"{why}" + (f"; {record.cause}" if record.cause else ""),
                            execution, record.step, (index,))
            continue
        available.remove(match)
        done[action] = index


def _approval_needed(definition: WorkflowDefinition, history: History, owner: Owner) -> bool:
    """Tells whether a conditional approval (`needs_approval: <expression>`) held on the
    context the step's state was entered with (the commit that commanded its call, and its
    event); one that raises asks for a person, as the machine does. A region's step is judged
    on its region's context, when the history records it (else not judged: False)."""
    step = definition.states[owner.state].step
    if step is None or step.approval_when is None:
        return True
    entered = history[owner.position] if owner.position >= 0 else None
    if owner.context is None or type(entered) is not Committed:
        return False
    event = Event(entered.event_id, entered.event_type, entered.event_source,
                  entered.payload or {}, entered.answers)
    try:
        return bool(step.approval_when(owner.context, event))
    except Exception:  # the safe side of a broken condition is to ask a person
        return True
