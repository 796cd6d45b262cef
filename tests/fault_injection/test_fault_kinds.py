"""Every fault kind of the catalogue, alone at a high rate, against the reference machine on the
bundled workflows: each is observably injected, observably survived (runs end final, logs
replay, no duplicate keyed effect, terminal stays terminal) and leaves its own trace."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import jsonschema
import pytest

from fault_injection import FORGED_VARIANTS, FaultKind, load_plan
from harness import (
    Applied,
    Committed,
    Crashed,
    Decided,
    Delivered,
    Dispatched,
    FaultInjected,
    HistoryRecord,
    Recovered,
    ReferenceMachine,
    ResultRecorded,
    SimOptions,
    SimulationResult,
    Simulator,
    Started,
    TimerFired,
)
from reference_machine import (
    APPROVAL_GRANTED,
    CRASH_POINTS,
    STEP_FAILED,
    STEP_SUCCEEDED,
    WorkflowDefinition,
    load_definition,
)

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
REFUND = load_definition(SCENARIOS / "refund_escalation.yaml")
TRIAGE = load_definition(SCENARIOS / "support_triage.yaml")

#: The bundled workflows declare no `correlate:`; a wrong correlation needs an event that does.
WEBHOOK = load_definition({
    "name": "ci_webhook",
    "context": {"issue_id": "ISS-7"},
    "tools": {"build": {"idempotency_keys": True}},
    "events": {"ci.finished": {
        "payload": {"type": "object", "properties": {"issue_id": {"type": "string"}},
                    "required": ["issue_id"]},
        "correlate": {"issue_id": "context.issue_id"}}},
    "states": {
        "build": {"initial": True, "step": {"tool": "build"},
                  "on": {"step.succeeded": "waiting", "step.failed": "failed"}},
        "waiting": {"type": "wait", "on": {"ci.finished": "done"},
                    "after": {"delay": "10m", "target": "failed"}},
        "done": {"type": "final", "outcome": "success"},
        "failed": {"type": "final", "outcome": "failure"},
    },
})

K = FaultKind
#: The rate each kind runs at alone; 0.4 unless said here (a crash costs a recovery).
RATES: Mapping[FaultKind, float] = {K.CRASH: 0.2, K.STORE_WRITE_FAILURE: 0.2,
                                    K.SECOND_WORKER: 0.3, K.FORGED_APPROVAL: 0.5}
SEEDS = range(8)
#: Forged approvals need an approval gate, and approvals are rare (the agent's plan is often
#: refused first): more seeds, more executions.
FORGED_SEEDS = range(30)
#: Likewise the email step, the last one of a refund, is reached in few runs.
UNKEYED_SEEDS = range(30)
#: How a delivery that was interrupted is named in `Delivered.via` and `_guard`'s activity.
VIAS = frozenset({"external", "approval", "forged", "late", "duplicate", "reordered",
                  "redelivered", "retry", "agent"})

R = TypeVar("R", bound=HistoryRecord)


class Run(NamedTuple):
    """One seeded run and the machine it ran on (its store is what survived)."""

    definition: WorkflowDefinition
    result: SimulationResult
    machine: ReferenceMachine


def simulate(definition: WorkflowDefinition, faults: Mapping[str, Any], seed: int,
             executions: int = 3) -> Run:
    """Runs `definition` with the plan `{faults: faults}`, keeping the machine built."""
    made: list[ReferenceMachine] = []

    def factory(d: Any, tools: Any, probe: Any) -> ReferenceMachine:
        machine = ReferenceMachine(d, tools, probe)
        made.append(machine)
        return machine

    options = SimOptions(seed=seed, executions=executions, steps_max=1000,
                         plan=load_plan({"faults": faults}))
    result = Simulator(definition, options, machine=factory).run()
    (machine,) = made
    return Run(definition, result, machine)


@functools.cache
def runs(kind: FaultKind) -> tuple[Run, ...]:
    """Gives the runs of `kind` alone at its rate, over the seeds, on the workflows it fits."""
    faults = {kind.value: {"rate": RATES.get(kind, 0.4)}}
    if kind is K.FORGED_APPROVAL:
        return tuple(simulate(REFUND, faults, seed, executions=4) for seed in FORGED_SEEDS)
    if kind is K.WRONG_CORRELATION:
        return tuple(simulate(WEBHOOK, faults, seed) for seed in SEEDS)
    return tuple(simulate(definition, faults, seed)
                 for definition in (REFUND, TRIAGE) for seed in SEEDS)


@functools.cache
def malformed_runs(variant: str) -> tuple[Run, ...]:
    """Gives the runs of malformed_output restricted to one variant."""
    faults = {"malformed_output": {"rate": 0.4, "variants": [variant]}}
    return tuple(simulate(definition, faults, seed)
                 for definition in (REFUND, TRIAGE) for seed in SEEDS)


def of(result: SimulationResult, kind: type[R]) -> list[R]:
    """Gives the records of one kind, in order."""
    return [record for record in result.history if isinstance(record, kind)]


def indexed(result: SimulationResult, kind: type[R]) -> list[tuple[int, R]]:
    """Gives the records of one kind with their index in the history."""
    return [(i, record) for i, record in enumerate(result.history) if isinstance(record, kind)]


def faults(result: SimulationResult, kind: FaultKind) -> list[tuple[int, FaultInjected]]:
    """Gives the injections of `kind`, with their index in the history."""
    return [(i, f) for i, f in indexed(result, FaultInjected) if f.fault == kind]


def decisions(result: SimulationResult) -> dict[tuple[str, int], str]:
    """Gives what the machine said of each delivery, by (event id, step delivered in)."""
    return {(d.event_id, d.step): d.decision for d in of(result, Decided)}


def label(run: Run) -> str:
    """Names a run in an assertion message."""
    return f"{run.definition.name} seed {run.result.seed}"


def states(result: SimulationResult) -> Iterator[tuple[int, HistoryRecord, Mapping[str, str]]]:
    """Walks the history with each execution's committed state before each record."""
    now: dict[str, str] = {}
    for index, record in enumerate(result.history):
        yield index, record, now
        if isinstance(record, Committed) and record.decision == "accepted":
            now[record.execution] = record.state


def enabled(definition: WorkflowDefinition, state: str, event_type: str) -> bool:
    """Tells whether `state` (or a parent) has a transition on `event_type`."""
    compiled = definition.states[state]
    return any(event_type in definition.states[name].on
               for name in (state, *compiled.ancestors))


def call_of(key: str, call: str) -> int | None:
    """Gives the attempt of effect id `call` when it is an attempt of `key`, else None."""
    head, _, attempt = call.rpartition("#")
    return int(attempt) if head == key and attempt.isdigit() else None


def result_after(result: SimulationResult, index: int, key: str) -> ResultRecorded:
    """Gives the first result recorded for an attempt of `key` after `index`."""
    return next(r for i, r in indexed(result, ResultRecorded)
                if i > index and call_of(key, r.call) is not None)


def outbox_result(run: Run, execution: str, call: str) -> Any:
    """Gives the result event the store holds for `call`."""
    return next(e.result for e in run.machine.store.outbox(execution) if e.command_id == call)


def tool_and_key(fault: FaultInjected) -> tuple[str, str]:
    """Splits a tool fault's detail `{tool} {key}`."""
    tool, key = fault.detail.split(" ", 1)
    return tool, key


# -- every kind: injected and survived ---------------------------------------------------------


@pytest.mark.parametrize("kind", list(FaultKind), ids=str)
def test_kind_is_injected(kind: FaultKind) -> None:
    """The kind alone at a high rate is injected, and recorded as such, in the runs."""
    injected = sum(len(faults(run.result, kind)) for run in runs(kind))
    assert injected > 0, f"no {kind} was injected"
    others = {f.fault for run in runs(kind) for f in of(run.result, FaultInjected)} - {kind}
    assert not others, f"a plan of {kind} alone injected {others}"


@pytest.mark.parametrize("kind", list(FaultKind), ids=str)
def test_runs_end_final(kind: FaultKind) -> None:
    """Under the kind, no run fails the machine, and every run ends with every execution final."""
    for run in runs(kind):
        result = run.result
        assert result.failure is None, f"{label(run)}: {result.failure}\n{result.traceback}"
        assert result.status == "final", f"{label(run)}: {result.summary()}"
        assert all(o.status == "final" for o in result.final.values()), label(run)


@pytest.mark.parametrize("kind", list(FaultKind), ids=str)
def test_logs_replay_to_the_stored_record(kind: FaultKind) -> None:
    """Under the kind, every execution's log replays to exactly its stored record."""
    for run in runs(kind):
        for execution in run.result.final:
            stored = run.machine.store.load(execution).execution
            assert run.machine.runtime.replay(execution) == stored, label(run)


@pytest.mark.parametrize("kind", list(FaultKind), ids=str)
def test_no_keyed_effect_applies_twice(kind: FaultKind) -> None:
    """Under the kind, a tool that honours idempotency keys applied each (tool, key) once."""
    for run in runs(kind):
        honoured = {name for name, tool in run.definition.tools.items() if tool.idempotency_keys}
        applied = Counter((e.tool, e.key) for e in run.result.ledger if e.tool in honoured)
        twice = {pair: n for pair, n in applied.items() if n > 1}
        assert not twice, f"{label(run)}: applied more than once: {twice}"


@pytest.mark.parametrize("kind", list(FaultKind), ids=str)
def test_terminal_stays_terminal(kind: FaultKind) -> None:
    """Under the kind, no execution accepts an event once a commit made it final."""
    for run in runs(kind):
        final = {name for name, state in run.definition.states.items() if state.final}
        done: set[str] = set()
        for commit in of(run.result, Committed):
            assert not (commit.execution in done and commit.decision == "accepted"), (
                f"{label(run)}: {commit} accepted after the execution was final")
            if commit.decision == "accepted" and commit.state in final:
                done.add(commit.execution)


# -- each kind's own trace ---------------------------------------------------------------------


def test_duplicate_event_is_ignored_as_duplicate() -> None:
    """Each duplicated delivery repeats an event id delivered before and is ignored as one."""
    seen = 0
    for run in runs(K.DUPLICATE_EVENT):
        result, said = run.result, decisions(run.result)
        delivered: set[str] = set()
        for delivery in of(result, Delivered):
            if delivery.via == "duplicate":
                seen += 1
                assert delivery.event_id in delivered, f"{label(run)}: {delivery}"
                assert said[delivery.event_id, delivery.step] == "ignored:duplicate", (
                    f"{label(run)}: {delivery}")
            delivered.add(delivery.event_id)
    assert seen


def test_crash_is_recovered_at_every_crash_point() -> None:
    """Each crash is followed by a recovery, and every crash point of the runtime is hit."""
    points: set[str] = set()
    for run in runs(K.CRASH):
        result = run.result
        crashes = indexed(result, Crashed)
        recoveries = [i for i, _ in indexed(result, Recovered)]
        assert len(crashes) == len(faults(result, K.CRASH)), label(run)
        for index, crash in crashes:
            assert any(i > index for i in recoveries), f"{label(run)}: no recovery after {crash}"
            points.add(crash.point)
    assert points == set(CRASH_POINTS)


def test_store_write_failure_is_recovered_and_the_delivery_sent_again() -> None:
    """Each refused write is followed by a recovery; a delivery it broke is delivered again
    (via retry, same event id), a start it broke is started again."""
    redelivered = restarted = 0
    for run in runs(K.STORE_WRITE_FAILURE):
        result = run.result
        recoveries = [i for i, _ in indexed(result, Recovered)]
        deliveries = indexed(result, Delivered)
        for index, fault in faults(result, K.STORE_WRITE_FAILURE):
            assert any(i > index for i in recoveries), f"{label(run)}: {fault}"
            during = fault.detail.removeprefix("during ")
            if during in VIAS:
                _, broken = [(i, d) for i, d in deliveries if i < index][-1]
                assert broken.step == fault.step and broken.via == during, label(run)
                assert any(i > index and d.via == "retry" and d.event_id == broken.event_id
                           for i, d in deliveries), f"{label(run)}: {broken} not sent again"
                redelivered += 1
            elif during == "start":
                assert any(i > index and s.execution == fault.execution
                           for i, s in indexed(result, Started)), label(run)
                restarted += 1
    assert redelivered and restarted


def test_dropped_event_is_redelivered_later() -> None:
    """Each dropped event reaches the machine only later, redelivered at a later virtual time."""
    seen = 0
    for run in runs(K.DROPPED_EVENT):
        result = run.result
        deliveries = indexed(result, Delivered)
        for index, fault in faults(result, K.DROPPED_EVENT):
            after = [d for i, d in deliveries if i > index and d.event_id == fault.detail]
            assert after, f"{label(run)}: {fault} never redelivered"
            assert after[0].via == "redelivered" and after[0].at > fault.at, label(run)
            seen += 1
    assert seen


def test_reordered_events_are_delivered_after_others() -> None:
    """Each held-back event is delivered later via reordered, and some are overtaken by
    another event of the same execution."""
    overtaken = 0
    for run in runs(K.REORDERED_EVENTS):
        result = run.result
        history = result.history
        for index, fault in faults(result, K.REORDERED_EVENTS):
            (at,) = [i for i, d in indexed(result, Delivered)
                     if i > index and d.event_id == fault.detail]
            assert history[at].via == "reordered", label(run)
            overtaken += any(isinstance(r, Committed) and r.execution == fault.execution
                             for r in history[index + 1:at])
    assert overtaken


def test_late_event_is_not_accepted_once_its_state_was_left() -> None:
    """A late copy is never accepted twice: one that answers nothing keeps its id and is a
    duplicate; a late answer is never accepted; one reaching a final execution is rejected as
    terminal (or ignored as a duplicate)."""
    terminal = refused = duplicates = 0
    for run in runs(K.LATE_EVENT):
        result, said = run.result, decisions(run.result)
        final = {name for name, state in run.definition.states.items() if state.final}
        for _, record, now in states(result):
            if not (isinstance(record, Delivered) and record.via == "late"):
                continue
            decision = said[record.event_id, record.step]
            state = now[record.execution]
            if not record.answers:
                assert decision == "ignored:duplicate", f"{label(run)}: {record}"
                duplicates += 1
            elif state in final:
                assert decision == "rejected:terminal", f"{label(run)}: {record}"
                terminal += 1
            else:
                assert decision != "accepted", f"{label(run)}: {record} in {state}"
                refused += 1
    assert duplicates and terminal + refused


RETRIED = (K.TOOL_TRANSIENT, K.TOOL_RATE_LIMITED, K.TOOL_TIMEOUT_BEFORE_APPLY)


@pytest.mark.parametrize("kind", [*RETRIED, K.TOOL_PERMANENT, K.TOOL_TIMEOUT_AFTER_APPLY],
                         ids=str)
def test_tool_failure_is_recorded_as_failed(kind: FaultKind) -> None:
    """Each failed call is recorded as a failed step (or compensation) of its category."""
    category = {K.TOOL_TRANSIENT: "transient", K.TOOL_RATE_LIMITED: "rate_limited",
                K.TOOL_PERMANENT: "permanent"}.get(kind, "timeout")
    for run in runs(kind):
        result = run.result
        for index, fault in faults(result, kind):
            _, key = tool_and_key(fault)
            recorded = result_after(result, index, key)
            assert recorded.type in (STEP_FAILED, "compensation.failed"), label(run)
            event = outbox_result(run, recorded.execution, recorded.call)
            assert event.payload["category"] == category, label(run)


@pytest.mark.parametrize("kind", RETRIED, ids=str)
def test_retryable_tool_failure_is_retried_under_the_same_key(kind: FaultKind) -> None:
    """A retryable failure whose retry timer fires starts the next attempt, which calls the
    tool again with the same idempotency key."""
    retried = 0
    for run in runs(kind):
        result = run.result
        for index, fault in faults(result, kind):
            _, key = tool_and_key(fault)
            recorded = result_after(result, index, key)
            attempt = call_of(key, recorded.call)
            retry = f"~fired:{key}/retry/{attempt}"
            fired = [i for i, c in indexed(result, Committed)
                     if c.event_id == retry and c.decision == "accepted"]
            if not fired:
                continue  # exhausted, not retryable here, or answered late
            called = any(i > fired[0] and d.key == key for i, d in indexed(result, Dispatched))
            # or the next attempt timed out before the scheduler let it reach the tool
            timed_out = any(c.event_id == f"~fired:{key}#{attempt + 1}/timeout"
                            for c in of(result, Committed))
            assert called or timed_out, f"{label(run)}: {retry} called nothing"
            retried += called
    assert retried


def test_permanent_tool_failure_is_not_retried() -> None:
    """A permanent failure the step accepts starts no further attempt of the step."""
    seen = 0
    for run in runs(K.TOOL_PERMANENT):
        result = run.result
        accepted = {c.event_id for c in of(result, Committed) if c.decision == "accepted"}
        for index, fault in faults(result, K.TOOL_PERMANENT):
            _, key = tool_and_key(fault)
            recorded = result_after(result, index, key)
            if f"~result:{recorded.call}" not in accepted:
                continue  # late: the step had moved on (a timeout retried it first)
            attempt = call_of(key, recorded.call) or 0
            later = [r.call for i, r in indexed(result, ResultRecorded)
                     if i > index and (call_of(key, r.call) or 0) > attempt]
            assert not later, f"{label(run)}: {recorded.call} retried as {later}"
            seen += 1
    assert seen


def test_timeout_after_apply_applied_once_under_its_key() -> None:
    """Each call that timed out after applying is in the ledger; a retry of it under the same
    key at a tool honouring keys applies nothing again; at a tool honouring none, there is no
    retry."""
    retried = 0
    for run in runs(K.TOOL_TIMEOUT_AFTER_APPLY):
        result = run.result
        applied = indexed(result, Applied)
        for index, fault in faults(result, K.TOOL_TIMEOUT_AFTER_APPLY):
            tool, key = tool_and_key(fault)
            assert any(i <= index + 1 and a.key == key for i, a in applied), label(run)
            again = [i for i, d in indexed(result, Dispatched) if i > index and d.key == key]
            if not run.definition.tools[tool].idempotency_keys:
                # no key to lean on: the ambiguous timeout goes to a person, never a retry
                assert not again, f"{label(run)}: {tool} {key} blindly retried"
            elif again:
                assert not any(i > index + 1 and a.key == key for i, a in applied), label(run)
                retried += 1
    assert retried


def test_timeout_after_apply_at_an_unkeyed_tool_goes_to_a_person() -> None:
    """An email (no idempotency keys) that timed out after it was sent is not sent again: the
    ambiguous step escalates to needs_human."""
    plan = {"tool_timeout_after_apply": {"rate": 0.5, "tools": ["email.send"]}}
    seen = 0
    for seed in UNKEYED_SEEDS:
        run = simulate(REFUND, plan, seed, executions=4)
        result = run.result
        for index, fault in faults(result, K.TOOL_TIMEOUT_AFTER_APPLY):
            _, key = tool_and_key(fault)
            assert [e.key for e in result.ledger].count(key) == 1, label(run)
            assert not any(i > index and d.key == key
                           for i, d in indexed(result, Dispatched)), label(run)
            # by this result, or by the step's timeout when that came first
            assert any(c.execution == fault.execution and c.decision == "accepted"
                       and c.state == "needs_human" for c in of(result, Committed)), label(run)
            seen += 1
    assert seen


def test_slow_tool_lands_after_the_call_gave_up() -> None:
    """Each slow call fails as a timeout, and lands later: an Applied at a later virtual time
    (unless the service had applied that key already)."""
    landed = 0
    for run in runs(K.SLOW_TOOL):
        result = run.result
        applied = of(result, Applied)
        for index, fault in faults(result, K.SLOW_TOOL):
            tool, key = tool_and_key(fault)
            recorded = result_after(result, index, key)
            event = outbox_result(run, recorded.execution, recorded.call)
            assert event.payload["category"] == "timeout", label(run)
            lands = [a for a in applied if a.key == key and a.at > fault.at]
            if lands:
                landed += 1
            else:
                assert run.definition.tools[tool].idempotency_keys, label(run)
                assert any(a.key == key for a in applied), f"{label(run)}: {fault} never landed"
    assert landed


@pytest.mark.parametrize("variant", ["wrong_shape", "missing_field", "wrong_type"])
def test_malformed_output_fails_the_step(variant: str) -> None:
    """Each malformed output is logged either as a failed step of category invalid_output or
    as a success whose output breaks the tool's schema; it never takes a success transition."""
    seen = 0
    for run in malformed_runs(variant):
        result = run.result
        for index, fault in faults(result, K.MALFORMED_OUTPUT):
            tool, key = tool_and_key(fault)
            recorded = result_after(result, index, key)
            log = run.machine.store.log(recorded.execution)
            entry = next(e for e in log if e.event.id == f"~result:{recorded.call}")
            schema = run.definition.tools[tool].output
            if entry.event.type == STEP_FAILED:
                assert entry.event.payload["category"] == "invalid_output", label(run)
            else:
                assert entry.event.type == STEP_SUCCEEDED and schema is not None, label(run)
                assert not jsonschema.Draft202012Validator(schema).is_valid(
                    entry.event.payload), f"{label(run)}: {entry}"
            if entry.decision != "accepted":
                continue
            step_state = key.split("/")[1]
            on = run.definition.states[step_state].on
            success = {t.target_leaf for t in on.get(STEP_SUCCEEDED, ())}
            failure = {t.target_leaf for t in on.get(STEP_FAILED, ())}
            (commit,) = [c for c in of(result, Committed)
                         if c.event_id == entry.event.id and c.decision == "accepted"]
            assert commit.state not in success - failure - {step_state}, (
                f"{label(run)}: {entry} took a success transition to {commit.state}")
            seen += 1
    assert seen


def test_malformed_unknown_event_is_rejected() -> None:
    """An event an agent makes up, outside the definition, is rejected as unknown (as terminal
    when its execution is final by then)."""
    seen = 0
    for run in malformed_runs("unknown_event"):
        said = decisions(run.result)
        final = {name for name, state in run.definition.states.items() if state.final}
        for _, record, now in states(run.result):
            if isinstance(record, Delivered) and record.via == "agent":
                terminal = now[record.execution] in final  # final first: it takes nothing
                assert said[record.event_id, record.step] == (
                    "rejected:terminal" if terminal else "rejected:unknown_event"), label(run)
                seen += not terminal
    assert seen


def test_timer_skew_fires_early_and_late() -> None:
    """Skewed clocks show as timers fired with the machine's clock ahead (early) and as
    timers fired after their due time (late)."""
    fired = [t for run in runs(K.TIMER_SKEW) for t in of(run.result, TimerFired)]
    assert any(t.skew != 0 for t in fired)
    assert any(t.skew == 0 and t.now > t.due for t in fired)


def test_second_worker_takes_events_first() -> None:
    """A second worker acts in the middle of a step: some event delivered once is answered
    as a duplicate, because the other worker consumed it first."""
    taken = 0
    for run in runs(K.SECOND_WORKER):
        result = run.result
        times = Counter(d.event_id for d in of(result, Delivered))
        taken += sum(1 for d in of(result, Decided)
                     if d.decision == "ignored:duplicate" and times[d.event_id] == 1)
    assert taken


def test_forged_approval_is_never_accepted() -> None:
    """Every forgery variant is tried; each forged approval is refused (unauthorized, or
    ignored as stale), and no execution enters the refund without a genuine approval."""
    expected = {"wrong_source": "rejected:unauthorized", "wrong_role": "rejected:unauthorized",
                "changed_hash": "rejected:unauthorized", "stale_request": "ignored:stale"}
    variants: set[str] = set()
    for run in runs(K.FORGED_APPROVAL):
        result, said = run.result, decisions(run.result)
        forged = {f.detail.split()[1]: f.detail.split()[0]
                  for _, f in faults(result, K.FORGED_APPROVAL)}
        genuine: set[str] = set()
        for _, record, now in states(result):
            if isinstance(record, Delivered) and record.via == "forged":
                variant = forged[record.event_id]
                variants.add(variant)
                assert said[record.event_id, record.step] == expected[variant], (
                    f"{label(run)}: {variant} {record}")
            elif (isinstance(record, Delivered) and record.via == "approval"
                  and record.type == APPROVAL_GRANTED):
                genuine.add(record.event_id)
            elif (isinstance(record, Committed) and record.decision == "accepted"
                  and record.state == "executing_refund"
                  and now.get(record.execution) != "executing_refund"):
                assert record.event_id in genuine, f"{label(run)}: {record}"
    assert variants == set(FORGED_VARIANTS)


def test_second_worker_history_records_only_results_the_store_kept() -> None:
    """With two workers racing on a call, each ResultRecorded is the result the store holds."""
    for definition in (REFUND, TRIAGE):
        for seed in SEEDS:
            run = simulate(definition, {"second_worker": 0.4, "tool_transient": 0.4}, seed)
            for record in of(run.result, ResultRecorded):
                stored = outbox_result(run, record.execution, record.call)
                assert record.type == stored.type, f"{label(run)}: {record}, stored {stored}"
