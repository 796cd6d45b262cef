"""Contract tests of the event store protocol: one suite, run against every backend.

`EventStoreContract` holds every test and says nothing about how a store is made; each backend
subclasses it once and defines `make_store` (the layout of the eventsourcing library's
persistence tests). SQLite-only tests (reopening a file, two writers on one file, refusing files
that are not stores) live in `SQLiteContract`, which both SQLite subclasses share. Executions are
real refund runs driven as a runtime would drive them: load, decide, commit.

Tests marked xfail(strict) document defects of the stores (see their reasons).
"""

from __future__ import annotations

import dataclasses
import re
import sqlite3
import tempfile
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from refund_world import TAGS, candidates

from reference_machine import (
    APPROVAL_DENIED,
    APPROVAL_GRANTED,
    COMPENSATION_FAILED,
    COMPENSATION_SUCCEEDED,
    STARTED,
    STEP_FAILED,
    STEP_SUCCEEDED,
    TIMER_FIRED,
    Accepted,
    CancelTimer,
    Commit,
    ConflictError,
    Decision,
    DuplicateEventError,
    Event,
    EventStore,
    Execution,
    ExecutionExistsError,
    LogEntry,
    MemoryStore,
    OutboxEntry,
    PostgresStore,
    RequestApproval,
    RunCompensation,
    RunEffect,
    ScheduleTimer,
    SQLiteStore,
    Status,
    StoredExecution,
    StoreError,
    Timer,
    TimerPurpose,
    Transition,
    TransitionRecord,
    UnknownExecutionError,
    WorkflowDefinition,
    decide,
    load_definition,
    new_execution,
    start_event,
)

ROOT = Path(__file__).resolve().parents[2]
REFUND = load_definition(ROOT / "scenarios" / "refund_escalation.yaml")

SECOND = 1000
HOUR = 3_600_000
DAY = 24 * HOUR
FOREVER = 10**15  # later than every timer
XID = "r1"
ORDER = "o-1"
LOOKUP = {"order_id": ORDER, "amount": 50, "customer_email": "a@example.com"}
PLAN = {"amount": 40, "reason": "damaged"}
GREEDY_PLAN = {"amount": 80, "reason": "greedy"}
REFUND_OUT = {"refund_id": "rf-1"}
SETTLED = {"status": "succeeded"}
SENT = {"message_id": "m-1"}
LOOKUP_EFFECT = f"{XID}/collecting_requirements/1#1"



# -- driving executions through a store ------------------------------------------------------------


def commit_of(execution_id: str, version: int, event: Event, decision: Decision, at: int,
              duration_ms: int = 0) -> Commit:
    """Gives the commit of `decision` for `event`, as a runtime would write it."""
    if isinstance(decision, Accepted):
        return Commit(execution_id, version, event, decision.kind, at, decision.execution,
                      decision.commands, decision.transition, duration_ms)
    return Commit(execution_id, version, event, decision.kind, at, duration_ms=duration_ms)


class Driver:
    """One execution in a store, driven as a runtime drives it: load, decide, commit."""

    def __init__(self, store: EventStore, execution_id: str = XID, *,
                 definition: WorkflowDefinition = REFUND, now: int = 0,
                 context: Mapping[str, Any] | None = None) -> None:
        self.store, self.id, self.definition, self.now = store, execution_id, definition, now
        self.count = 0
        if context is None and definition is REFUND:
            context = {"order_id": ORDER}
        self.created = new_execution(definition, execution_id, context=context)
        store.create(self.created)

    @property
    def ex(self) -> Execution:
        """Gives the stored execution."""
        return self.store.load(self.id).execution

    def next_id(self) -> str:
        """Gives a fresh event id."""
        self.count += 1
        return f"{self.id}-e{self.count}"

    def prepare(self, event: Event, *, at: int | None = None) -> tuple[Commit, Decision]:
        """Gives the commit `event` makes at the stored version, without writing it."""
        if at is not None:
            self.now = max(self.now, at)
        stored = self.store.load(self.id)
        decision = decide(self.definition, stored.execution, event, self.now)
        return commit_of(self.id, stored.version, event, decision, self.now), decision

    def deliver(self, event: Event, *, at: int | None = None) -> Decision:
        """Decides `event` against the stored execution and commits the decision."""
        commit, decision = self.prepare(event, at=at)
        self.store.commit(commit)
        return decision

    def accept(self, event: Event, *, at: int | None = None) -> Accepted:
        """Delivers `event`, which must be accepted."""
        decision = self.deliver(event, at=at)
        assert isinstance(decision, Accepted), decision
        return decision

    def start(self) -> Accepted:
        """Starts the execution."""
        return self.accept(start_event(self.id))

    def result(self, payload: Mapping[str, Any] | None = None, *, ok: bool = True,
               source: str = "tool") -> Event:
        """Gives a step result answering the pending effect."""
        effect = self.ex.effect
        assert effect is not None, "no effect pending"
        kind = STEP_SUCCEEDED if ok else STEP_FAILED
        return Event(self.next_id(), kind, source, dict(payload or {}), effect.effect_id)

    def failure(self, category: str) -> Event:
        """Gives a step failure of `category`."""
        return self.result({"category": category}, ok=False)

    def compensation(self, category: str | None = None) -> Event:
        """Gives the pending compensation's result: success, or failure of `category`."""
        effect = self.ex.effect
        assert effect is not None and effect.compensation
        if category is None:
            return Event(self.next_id(), COMPENSATION_SUCCEEDED, "tool", {}, effect.effect_id)
        return Event(self.next_id(), COMPENSATION_FAILED, "tool", {"category": category},
                     effect.effect_id)

    def approval(self, kind: str = APPROVAL_GRANTED) -> Event:
        """Gives a supervisor's decision on the pending approval request."""
        request = self.ex.approval
        assert request is not None, "no approval pending"
        return Event(self.next_id(), kind, "human",
                     {"role": "supervisor", "action_hash": request.action_hash},
                     request.request_id)

    def ticket(self) -> Event:
        """Gives a customer's ticket update."""
        return Event(self.next_id(), "ticket.updated", "human", {"note": "more details"})

    def fire(self, purpose: TimerPurpose) -> Accepted:
        """Fires the one pending timer of `purpose`, moving the clock to it."""
        (timer,) = [t for t in self.ex.timers if t.purpose == purpose]
        event = Event(self.next_id(), TIMER_FIRED, "timer", {}, timer.id)
        return self.accept(event, at=timer.fire_at)


# The happy path into each refund state; each entry extends the previous one.
PATH = {
    "collecting_requirements": lambda d: d.start(),
    "planning": lambda d: d.accept(d.result(LOOKUP)),
    "awaiting_approval": lambda d: d.accept(d.result(PLAN, source="agent")),
    "executing_refund": lambda d: d.accept(d.approval()),
    "verifying": lambda d: d.accept(d.result(REFUND_OUT)),
    "notifying": lambda d: d.accept(d.result(SETTLED)),
    "refunded": lambda d: d.accept(d.result(SENT)),
}


def drive_to(driver: Driver, state: str) -> Driver:
    """Drives a fresh execution along the happy path until it has entered `state`."""
    for name, step in PATH.items():
        step(driver)
        if name == state:
            break
    assert driver.ex.state == state
    return driver


def snapshot(store: EventStore, *ids: str) -> dict[str, Any]:
    """Gives everything a store can tell about `ids`, to compare before and after a write."""
    return {
        "stored": [store.load(i) for i in ids],
        "log": [store.log(i) for i in ids],
        "outbox": [store.outbox(i) for i in ids],
        "transitions": [store.transitions(i) for i in ids],
        "pending": store.pending(),
        "timers": store.due_timers(FOREVER),
        "ids": store.execution_ids(),
        "unfinished": store.execution_ids(unfinished=True),
    }


def replay(definition: WorkflowDefinition, created: Execution, log: list[LogEntry]) -> Execution:
    """Folds `decide` over the logged events from a fresh execution, at their logged times."""
    execution = created
    for entry in log:
        decision = decide(definition, execution, entry.event, entry.at)
        assert decision.kind == entry.decision, (entry, decision)
        if isinstance(decision, Accepted):
            execution = decision.execution
    return execution


def command_ids(entries: list[OutboxEntry]) -> list[str]:
    """Gives the command ids of outbox entries, in order."""
    return [entry.command_id for entry in entries]


# -- drawing random walks --------------------------------------------------------------------------




WALK = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow,
                                       # one contract method, run by each backend's class
                                       HealthCheck.differing_executors])


# -- the contract ----------------------------------------------------------------------------------


class EventStoreContract:
    """Every test an event store must pass; a backend subclasses this and defines `make_store`."""

    def make_store(self, tmp_path: Path) -> EventStore:
        """Gives a new, empty store keeping its files (if any) under `tmp_path`."""
        raise NotImplementedError

    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[EventStore]:
        """Gives a new, empty store, closed after the test."""
        store = self.make_store(tmp_path)
        yield store
        store.close()

    # -- create and load --------------------------------------------------------------------------

    def test_store_implements_the_protocol(self, store: EventStore):
        """The store is an EventStore (the runtime-checkable protocol)."""
        assert isinstance(store, EventStore)

    def test_new_store_is_empty(self, store: EventStore):
        """A new store has no executions, no pending commands and no due timers."""
        assert store.execution_ids() == []
        assert store.execution_ids(unfinished=True) == []
        assert store.pending() == []
        assert store.due_timers(FOREVER) == []

    def test_create_then_load_round_trips(self, store: EventStore):
        """A created execution loads back equal to the one stored, at version 0, with no log."""
        execution = new_execution(REFUND, XID, context={"order_id": ORDER, "note": "é ✓"})
        store.create(execution)
        loaded = store.load(XID)
        assert loaded == StoredExecution(execution, 0)
        assert loaded.execution.status == Status.CREATED
        assert dict(loaded.execution.context) == dict(execution.context)
        assert store.log(XID) == []
        assert store.outbox(XID) == []
        assert store.pending(XID) == []
        assert store.transitions(XID) == []
        assert store.execution_ids() == [XID]

    def test_create_twice_raises_and_keeps_the_first(self, store: EventStore):
        """Creating a known id raises ExecutionExistsError and leaves the first record alone."""
        first = new_execution(REFUND, XID, context={"order_id": ORDER})
        store.create(first)
        second = new_execution(REFUND, XID, context={"order_id": "o-2"})
        with pytest.raises(ExecutionExistsError, match=r"execution 'r1' already exists") as info:
            store.create(second)
        assert info.value.execution_id == XID
        assert store.load(XID) == StoredExecution(first, 0)
        assert store.execution_ids() == [XID]

    def test_create_twice_after_commits_keeps_the_version(self, store: EventStore):
        """Re-creating a started execution raises and does not reset it to version 0."""
        driver = drive_to(Driver(store), "planning")
        before = snapshot(store, XID)
        with pytest.raises(ExecutionExistsError, match="already exists"):
            store.create(driver.created)
        assert snapshot(store, XID) == before

    def test_load_unknown_raises(self, store: EventStore):
        """Loading an unknown id raises UnknownExecutionError (also a KeyError) naming the id."""
        store.create(new_execution(REFUND, XID))
        with pytest.raises(UnknownExecutionError, match=r"no execution 'ghost' in the store"):
            store.load("ghost")
        with pytest.raises(KeyError):
            store.load("ghost")

    def test_commit_to_unknown_execution_raises(self, store: EventStore):
        """A commit for an unknown execution raises UnknownExecutionError and writes nothing."""
        store.create(new_execution(REFUND, XID))
        before = snapshot(store, XID)
        with pytest.raises(UnknownExecutionError, match=r"no execution 'ghost'"):
            store.commit(Commit("ghost", 0, start_event("ghost"), "rejected", 0))
        assert snapshot(store, XID) == before

    def test_reads_of_unknown_execution_raise(self, store: EventStore):
        """log, outbox, transitions and pending of an unknown id raise like load does."""
        store.create(new_execution(REFUND, XID))
        for read in (store.log, store.outbox, store.transitions, store.pending):
            with pytest.raises(UnknownExecutionError, match=r"no execution 'ghost'"):
                read("ghost")

    def test_executions_are_kept_apart(self, store: EventStore):
        """Commits to one execution leave another's record, log, outbox and timers alone."""
        other = Driver(store, "r0")
        alone = snapshot(store, "r0")
        drive_to(Driver(store), "awaiting_approval")
        assert store.load("r0") == alone["stored"][0]
        assert store.log("r0") == []
        assert store.outbox("r0") == []
        assert store.pending("r0") == []
        assert all(run == XID for run, _ in store.due_timers(FOREVER))
        other.start()
        assert store.load(XID).version == 3

    # -- commit -----------------------------------------------------------------------------------

    def test_commit_increments_version_and_stores_execution(self, store: EventStore):
        """Each accepted commit gives version + 1 and stores exactly the decided execution."""
        driver = Driver(store)
        for version, step in enumerate(PATH.values(), start=1):
            decision = step(driver)
            assert store.load(XID) == StoredExecution(decision.execution, version)

    def test_commit_returns_the_new_version(self, store: EventStore):
        """commit gives the version it wrote: 1, 2, 3 ... for accepted events."""
        driver = Driver(store)
        commit, _ = driver.prepare(start_event(XID))
        assert commit.expected_version == 0
        assert store.commit(commit) == 1
        commit, _ = driver.prepare(driver.result(LOOKUP))
        assert commit.expected_version == 1
        assert store.commit(commit) == 2

    def test_log_sequences_increase_strictly_from_one(self, store: EventStore):
        """Every delivered event, whatever its decision, is logged with sequence 1, 2, 3 ..."""
        driver = Driver(store)
        delivered: list[tuple[Event, str, int]] = []

        def send(event: Event, at: int) -> None:
            decision = driver.deliver(event, at=at)
            delivered.append((event, decision.kind, driver.now))

        send(start_event(XID), 5)
        send(Event("x", "refund.teleported", "human", {}), 6)  # rejected: unknown type
        send(driver.result(LOOKUP), 7)
        send(Event("late", STEP_SUCCEEDED, "tool", LOOKUP, LOOKUP_EFFECT), 8)  # ignored
        send(driver.result(PLAN, source="agent"), 9)
        log = store.log(XID)
        assert [entry.sequence for entry in log] == [1, 2, 3, 4, 5]
        assert [(e.event, e.decision, e.at) for e in log] == delivered
        assert [e.decision for e in log] == ["accepted", "rejected", "accepted", "ignored",
                                             "accepted"]

    def test_logged_events_round_trip(self, store: EventStore):
        """A logged event equals the delivered one: id, type, source, payload and answers."""
        driver = Driver(store)
        driver.start()
        event = Event("odd id/ü#1", "ticket.updated", "system",
                      {"note": "naïve ✓", "nested": {"b": [1, 2.5, None, True]}, "a": ""})
        driver.deliver(event)
        assert store.log(XID)[-1] == LogEntry(2, event, "rejected", 0)
        assert store.log(XID)[0].event == start_event(XID)

    def test_commit_records_the_transition(self, store: EventStore):
        """An accepted transition gives a TransitionRecord with every field as committed."""
        driver = Driver(store)
        commit, _ = driver.prepare(start_event(XID), at=1234)
        store.commit(dataclasses.replace(commit, duration_ms=7))
        assert store.transitions(XID) == [TransitionRecord(
            execution_id=XID, definition_version="1", sequence=1,
            transition=Transition("", STARTED, "collecting_requirements"), attempt=1,
            at=1234, duration_ms=7, tool="crm.lookup_order", outcome="running")]

    def test_transition_records_follow_the_run(self, store: EventStore):
        """Records come in order, one per transition, with tool, attempt and outcome."""
        driver = drive_to(Driver(store), "awaiting_approval")
        driver.accept(driver.approval(APPROVAL_DENIED))
        records = store.transitions(XID)
        assert [r.transition for r in records] == [
            Transition("", STARTED, "collecting_requirements"),
            Transition("collecting_requirements", STEP_SUCCEEDED, "planning"),
            Transition("planning", STEP_SUCCEEDED, "awaiting_approval"),
            Transition("awaiting_approval", APPROVAL_DENIED, "rejected"),
        ]
        assert [r.sequence for r in records] == [1, 2, 3, 4]
        assert [r.tool for r in records] == ["crm.lookup_order", "agent.plan_refund", "", ""]
        assert [r.outcome for r in records] == ["running", "running", "waiting", "rejected"]
        assert {r.execution_id for r in records} == {XID}
        assert {r.definition_version for r in records} == {"1"}

    def test_accepted_event_without_transition_records_none(self, store: EventStore):
        """A retry (accepted, no state change) bumps the version but records no transition."""
        driver = Driver(store)
        driver.start()
        decision = driver.accept(driver.failure("transient"))
        assert decision.transition is None
        assert store.load(XID).version == 2
        assert len(store.transitions(XID)) == 1
        retried = driver.fire(TimerPurpose.RETRY)
        assert retried.transition is None
        assert [r.attempt for r in store.transitions(XID)] == [1]
        assert store.load(XID).execution.attempt == 2

    def test_duplicate_event_id_raises_and_writes_nothing(self, store: EventStore):
        """Re-committing a consumed event id raises DuplicateEventError and changes nothing."""
        driver = Driver(store)
        driver.start()
        commit, _ = driver.prepare(driver.result(LOOKUP))
        store.commit(commit)
        before = snapshot(store, XID)
        again = Commit(XID, 2, commit.event, "accepted", 99, commit.execution, commit.commands,
                       commit.transition)
        with pytest.raises(DuplicateEventError,
                           match=r"event 'r1-e1' was already consumed by execution 'r1'") as info:
            store.commit(again)
        assert (info.value.execution_id, info.value.event_id) == (XID, "r1-e1")
        assert snapshot(store, XID) == before

    def test_duplicate_of_a_stale_commit_is_a_duplicate(self, store: EventStore):
        """A consumed id at a stale version is reported as a duplicate, not a conflict."""
        driver = Driver(store)
        commit, _ = driver.prepare(start_event(XID))
        store.commit(commit)
        driver.accept(driver.result(LOOKUP))
        before = snapshot(store, XID)
        with pytest.raises(DuplicateEventError, match="already consumed"):
            store.commit(commit)  # expected version 0; the execution is at 2
        assert snapshot(store, XID) == before

    def test_event_ids_are_per_execution(self, store: EventStore):
        """The same event id may be consumed once by each of two executions."""
        first, second = Driver(store, "r1"), Driver(store, "r2")
        first.start()
        second.start()
        shared = Event("shared", "ticket.updated", "human", {"note": "n"})
        first.deliver(shared)
        second.deliver(shared)
        assert store.log("r1")[-1].event == store.log("r2")[-1].event == shared
        with pytest.raises(DuplicateEventError, match="'shared' was already consumed by "
                                                      "execution 'r2'"):
            second.deliver(shared)

    def test_stale_version_raises_conflict_and_writes_nothing(self, store: EventStore):
        """A commit at a stale version raises ConflictError and writes nothing."""
        driver = Driver(store)
        driver.start()
        commit, _ = driver.prepare(driver.result(LOOKUP))
        stale = Commit(XID, 0, commit.event, commit.decision, commit.at, commit.execution,
                       commit.commands, commit.transition)
        before = snapshot(store, XID)
        with pytest.raises(ConflictError, match=r"execution 'r1' is at version 1, not 0") as info:
            store.commit(stale)
        assert (info.value.execution_id, info.value.expected, info.value.actual) == (XID, 0, 1)
        assert snapshot(store, XID) == before

    def test_conflict_does_not_consume_the_event(self, store: EventStore):
        """After a conflict the same event id commits at the right version."""
        driver = Driver(store)
        driver.start()
        commit, decision = driver.prepare(driver.result(LOOKUP))
        ahead = Commit(XID, 5, commit.event, commit.decision, commit.at, commit.execution,
                       commit.commands, commit.transition)
        with pytest.raises(ConflictError, match="at version 1, not 5"):
            store.commit(ahead)
        assert store.commit(commit) == 2
        assert store.load(XID) == StoredExecution(decision.execution, 2)
        assert [e.event.id for e in store.log(XID)] == [f"{XID}/started", commit.event.id]
        with pytest.raises(DuplicateEventError, match="already consumed"):
            store.commit(commit)

    def test_ignored_and_rejected_events_are_logged_and_consumed(self, store: EventStore):
        """Events decided ignored or rejected are logged and consumed; the version stays."""
        driver = Driver(store)
        driver.start()
        before = store.load(XID)
        again = Event("again", STARTED, "system")  # ignored: already started
        teleport = Event("tp", "refund.teleported", "human", {})  # rejected: unknown type
        assert driver.deliver(again).kind == "ignored"
        assert driver.deliver(teleport).kind == "rejected"
        assert store.load(XID) == before
        assert [(e.sequence, e.event, e.decision) for e in store.log(XID)[1:]] == [
            (2, again, "ignored"), (3, teleport, "rejected")]
        assert len(store.transitions(XID)) == 1
        for event in (again, teleport):
            with pytest.raises(DuplicateEventError, match=f"event {event.id!r} was already"):
                store.commit(Commit(XID, 1, event, "rejected", 0))

    def test_rejected_event_needs_the_current_version_too(self, store: EventStore):
        """A rejection decided on a stale record is refused like any commit (replay must decide
        each logged event on the state it was decided on); at the current version it is
        logged and consumed without changing the version."""
        driver = Driver(store)
        driver.start()
        driver.accept(driver.result(LOOKUP))
        stale = Commit(XID, 0, Event("tp", "refund.teleported"), "rejected", 1)
        with pytest.raises(ConflictError, match=r"is at version 2, not 0"):
            store.commit(stale)
        assert len(store.log(XID)) == 2
        current = Commit(XID, 2, Event("tp", "refund.teleported"), "rejected", 1)
        assert store.commit(current) == 2
        assert store.load(XID).version == 2
        assert store.log(XID)[-1].sequence == 3

    def test_commit_many_writes_every_commit(self, store: EventStore):
        """A group commit writes each execution's event and gives each new version in order."""
        first, second = Driver(store, "r1"), Driver(store, "r2")
        second.start()
        staged = [first.prepare(start_event("r1")), second.prepare(second.result(LOOKUP))]
        assert store.commit_many([commit for commit, _ in staged]) == [1, 2]
        assert store.load("r1") == StoredExecution(staged[0][1].execution, 1)
        assert store.load("r2") == StoredExecution(staged[1][1].execution, 2)
        assert [e.sequence for e in store.log("r2")] == [1, 2]
        assert store.commit_many([]) == []

    def test_commit_many_gives_each_failure_in_its_place(self, store: EventStore):
        """A refused commit in a batch gives its error in place; the others are written."""
        ok, stale, dup = Driver(store, "a"), Driver(store, "b"), Driver(store, "c")
        for driver in (stale, dup):
            driver.start()
        before = snapshot(store, "b", "c")
        commit, _ = stale.prepare(stale.result(LOOKUP))
        batch = [ok.prepare(start_event("a"))[0],
                 dataclasses.replace(commit, expected_version=0),
                 Commit("c", 1, start_event("c"), "ignored", 0),
                 Commit("ghost", 0, start_event("ghost"), "rejected", 0)]
        results = store.commit_many(batch)
        assert results[0] == 1
        assert isinstance(results[1], ConflictError)
        assert re.search("execution 'b' is at version 1, not 0", str(results[1]))
        assert isinstance(results[2], DuplicateEventError)
        assert isinstance(results[3], UnknownExecutionError)
        assert store.load("a").version == 1
        after = snapshot(store, "b", "c")
        for key in ("stored", "log", "outbox", "transitions"):  # "a" changed the rest
            assert after[key] == before[key], key

    def test_commit_many_refuses_one_execution_twice(self, store: EventStore):
        """A batch naming one execution twice raises StoreError and writes nothing."""
        driver = Driver(store)
        driver.start()
        before = snapshot(store, XID)
        first, _ = driver.prepare(driver.result(LOOKUP))
        second = Commit(XID, 2, Event("next", "ticket.updated", "human", {}), "rejected", 0)
        with pytest.raises(StoreError, match=r"a batch holds execution 'r1' twice; commit it "
                                             r"in order"):
            store.commit_many([first, second])
        assert snapshot(store, XID) == before

    def test_rejected_commit_changes_no_timers_or_outbox(self, store: EventStore):
        """A commit without an execution writes no timers, outbox entries or transitions."""
        driver = Driver(store)
        driver.start()
        before = snapshot(store, XID)
        junk = (ScheduleTimer("junk", TimerPurpose.RETRY, 1), CancelTimer(f"{XID}/deadline"))
        store.commit(Commit(XID, 1, Event("tp", "refund.teleported"), "rejected", 1,
                            None, junk, Transition("a", "b", "c")))
        after = snapshot(store, XID)
        assert len(after.pop("log")[0]) == len(before.pop("log")[0]) + 1
        assert after == before

    # -- timers -----------------------------------------------------------------------------------

    def test_started_run_has_its_step_timeout_and_deadline(self, store: EventStore):
        """Starting schedules the step timeout and the deadline; due_timers sees them by time."""
        driver = Driver(store, now=100)
        driver.start()
        timeout = Timer(f"{LOOKUP_EFFECT}/timeout", TimerPurpose.STEP_TIMEOUT, 100 + 10 * SECOND)
        deadline = Timer(f"{XID}/deadline", TimerPurpose.DEADLINE, 100 + 7 * DAY)
        assert store.due_timers(99 + 10 * SECOND) == []
        assert store.due_timers(100 + 10 * SECOND) == [(XID, timeout)]  # due at its fire time
        assert store.due_timers(FOREVER) == [(XID, timeout), (XID, deadline)]

    def test_cancelled_timers_are_gone(self, store: EventStore):
        """Leaving a state cancels its timers: the old step timeout is no longer due."""
        driver = Driver(store)
        driver.start()
        driver.accept(driver.result(LOOKUP), at=SECOND)
        timers = [timer.id for _, timer in store.due_timers(FOREVER)]
        assert f"{LOOKUP_EFFECT}/timeout" not in timers
        assert timers == [f"{XID}/planning/1#1/timeout", f"{XID}/deadline"]
        assert store.due_timers(FOREVER)[0][1].fire_at == SECOND + 60 * SECOND

    def test_due_timers_match_the_stored_execution(self, store: EventStore):
        """Along a run, due_timers lists exactly the timers the stored execution holds."""
        driver = Driver(store)
        for step in PATH.values():
            step(driver)
            held = sorted(driver.ex.timers, key=lambda t: (t.fire_at, t.id))
            assert store.due_timers(FOREVER) == [(XID, t) for t in held]
        assert store.due_timers(FOREVER) == []  # a final run keeps no timers

    def test_due_timers_order_by_fire_time_then_id(self, store: EventStore):
        """Timers of every execution come by fire time, then timer id (not insertion order)."""
        driver = Driver(store, "b")
        Driver(store, "a")
        commit, _ = driver.prepare(start_event("b"))
        store.commit(Commit("b", 0, commit.event, "accepted", 0, commit.execution, (
            ScheduleTimer("t3", TimerPurpose.RETRY, 50),
            ScheduleTimer("t2", TimerPurpose.WAIT_TIMEOUT, 50),
            ScheduleTimer("t9", TimerPurpose.STEP_TIMEOUT, 10),
            ScheduleTimer("t1", TimerPurpose.APPROVAL_EXPIRY, 70),
        ), commit.transition))
        store.commit(Commit("a", 0, start_event("a"), "accepted", 0,
                            commit.execution._replace(id="a"),
                            (ScheduleTimer("t25", TimerPurpose.DEADLINE, 50),), None))
        assert store.due_timers(50) == [
            ("b", Timer("t9", TimerPurpose.STEP_TIMEOUT, 10)),
            ("b", Timer("t2", TimerPurpose.WAIT_TIMEOUT, 50)),
            ("a", Timer("t25", TimerPurpose.DEADLINE, 50)),
            ("b", Timer("t3", TimerPurpose.RETRY, 50)),
        ]
        assert [t.id for _, t in store.due_timers(FOREVER)] == ["t9", "t2", "t25", "t3", "t1"]
        assert all(isinstance(t.purpose, TimerPurpose) for _, t in store.due_timers(FOREVER))

    def test_rescheduling_a_timer_replaces_it_and_cancel_removes_it(self, store: EventStore):
        """A timer id scheduled again moves; cancelling it (or an unknown id) removes only it."""
        driver = Driver(store)
        commit, _ = driver.prepare(start_event(XID))
        base = commit.execution
        assert base is not None

        def write(version: int, event_id: str, *commands: Any) -> None:
            store.commit(Commit(XID, version, Event(event_id, "x"), "accepted", 0, base,
                                commands))

        write(0, "e1", ScheduleTimer("t", TimerPurpose.RETRY, 10),
              ScheduleTimer("u", TimerPurpose.RETRY, 20))
        write(1, "e2", ScheduleTimer("t", TimerPurpose.RETRY, 30))
        assert store.due_timers(FOREVER) == [(XID, Timer("u", TimerPurpose.RETRY, 20)),
                                             (XID, Timer("t", TimerPurpose.RETRY, 30))]
        write(2, "e3", CancelTimer("t"), CancelTimer("never-scheduled"))
        assert store.due_timers(FOREVER) == [(XID, Timer("u", TimerPurpose.RETRY, 20))]
        write(3, "e4", ScheduleTimer("v", TimerPurpose.RETRY, 5), CancelTimer("v"))
        assert store.due_timers(FOREVER) == [(XID, Timer("u", TimerPurpose.RETRY, 20))]

    def test_retry_timer_is_kept_until_it_fires(self, store: EventStore):
        """A retry schedules its timer and cancels the step timeout; firing it removes it."""
        driver = Driver(store)
        driver.start()
        driver.accept(driver.failure("transient"), at=SECOND)
        (retry,) = [t for _, t in store.due_timers(FOREVER) if t.purpose == TimerPurpose.RETRY]
        purposes = [t.purpose for _, t in store.due_timers(FOREVER)]
        assert TimerPurpose.STEP_TIMEOUT not in purposes
        driver.fire(TimerPurpose.RETRY)
        ids = [t.id for _, t in store.due_timers(FOREVER)]
        assert retry.id not in ids
        assert f"{XID}/collecting_requirements/1#2/timeout" in ids

    def test_committed_firing_removes_its_timer_whatever_the_decision(self, store: EventStore):
        """A committed timer.fired (even one decide ignored) takes its timer off due_timers."""
        driver = Driver(store)
        commit, _ = driver.prepare(start_event(XID))
        store.commit(dataclasses.replace(commit, commands=(
            ScheduleTimer("t", TimerPurpose.RETRY, 10),
            ScheduleTimer("u", TimerPurpose.RETRY, 10))))
        fired = Event("t/fired", TIMER_FIRED, "timer", {}, "t")
        assert driver.deliver(fired, at=10).kind == "ignored"  # the execution holds no "t"
        assert [t.id for _, t in store.due_timers(FOREVER)] == ["u"]
        assert store.load(XID).version == 1

    def test_unauthorized_firing_leaves_the_timer_due(self, store: EventStore):
        """A timer.fired from a source that may not fire timers is rejected and disarms nothing."""
        driver = drive_to(Driver(store), "planning")
        deadline = f"{XID}/deadline"
        forged = Event("forged", TIMER_FIRED, "human", {}, deadline)
        assert driver.deliver(forged).kind == "rejected"
        assert deadline in [t.id for t in store.load(XID).execution.timers]
        assert deadline in [t.id for _, t in store.due_timers(FOREVER)]

    # -- outbox -----------------------------------------------------------------------------------

    def test_effect_is_pending_until_answered(self, store: EventStore):
        """A RunEffect is pending until an event answering its id is committed."""
        driver = Driver(store)
        start = driver.start()
        (effect,) = [c for c in start.commands if isinstance(c, RunEffect)]
        assert store.pending(XID) == [OutboxEntry(XID, effect)]
        assert store.pending() == [OutboxEntry(XID, effect)]
        assert store.outbox(XID) == [OutboxEntry(XID, effect)]
        assert store.pending(XID)[0].command_id == LOOKUP_EFFECT
        plan = driver.accept(driver.result(LOOKUP))
        (planned,) = [c for c in plan.commands if isinstance(c, RunEffect)]
        assert store.pending(XID) == [OutboxEntry(XID, planned)]
        assert command_ids(store.outbox(XID)) == [LOOKUP_EFFECT, planned.effect_id]

    def test_approval_request_goes_to_the_outbox(self, store: EventStore):
        """A RequestApproval is an outbox entry under its request id until decided."""
        driver = drive_to(Driver(store), "awaiting_approval")
        request = driver.ex.approval
        assert request is not None
        (entry,) = store.pending(XID)
        assert isinstance(entry.command, RequestApproval)
        assert entry.command_id == request.request_id == f"{XID}/awaiting_approval/1/approval"
        assert entry.command.roles == ("finance_lead", "supervisor")
        assert entry.result is None
        driver.accept(driver.approval())
        assert [type(e.command) for e in store.pending(XID)] == [RunEffect]
        assert request.request_id in command_ids(store.outbox(XID))

    def test_compensation_goes_to_the_outbox(self, store: EventStore):
        """A RunCompensation is pending until its result is committed."""
        driver = drive_to(Driver(store), "verifying")
        driver.accept(driver.failure("permanent"))
        assert driver.ex.status == Status.COMPENSATING
        (entry,) = store.pending(XID)
        assert isinstance(entry.command, RunCompensation)
        assert entry.command_id == f"{XID}/executing_refund/1/undo#1"
        assert entry.command.compensates == f"{XID}/executing_refund/1"
        driver.accept(driver.compensation())
        assert store.pending(XID) == []
        assert driver.ex.outcome == "failure"

    def test_rejected_answer_leaves_the_command_pending(self, store: EventStore):
        """An accepted or ignored answer settles its command; a rejected one (a forged result
        from a human) does not, so recovery can still finish the command."""
        driver = Driver(store)
        driver.start()
        driver.accept(driver.failure("transient"))  # the lookup is now answered
        assert store.pending(XID) == []
        driver.fire(TimerPurpose.RETRY)
        retry_id = f"{XID}/collecting_requirements/1#2"
        assert command_ids(store.pending(XID)) == [retry_id]
        wrong = Event("w", STEP_SUCCEEDED, "human", LOOKUP, retry_id)  # rejected: a human
        assert driver.deliver(wrong).kind == "rejected"
        assert command_ids(store.pending(XID)) == [retry_id]

    def test_answer_before_the_command_does_not_hide_it(self, store: EventStore):
        """An event answering an id not yet issued does not hide the command issued later."""
        driver = Driver(store)
        stray = Event("stray", STEP_SUCCEEDED, "tool", LOOKUP, LOOKUP_EFFECT)
        assert driver.deliver(stray).kind == "rejected"  # not started yet
        driver.start()
        assert command_ids(store.pending(XID)) == [LOOKUP_EFFECT]

    def test_pending_lists_every_execution_by_id_then_age(self, store: EventStore):
        """pending() gives every execution's entries, by execution id, oldest first."""
        second, first = Driver(store, "r2"), Driver(store, "r1")
        second.start()
        drive_to(first, "planning")
        expected = [f"{XID}/planning/1#1", "r2/collecting_requirements/1#1"]
        assert command_ids(store.pending()) == expected
        assert [e.execution_id for e in store.pending()] == ["r1", "r2"]
        assert command_ids(store.pending("r2")) == ["r2/collecting_requirements/1#1"]

    def test_outbox_keeps_every_command_in_order(self, store: EventStore):
        """outbox lists every command ever issued, oldest first, answered ones included."""
        driver = Driver(store)
        drive_to(driver, "refunded")
        assert command_ids(store.outbox(XID)) == [
            LOOKUP_EFFECT, f"{XID}/planning/1#1", f"{XID}/awaiting_approval/1/approval",
            f"{XID}/executing_refund/1#1", f"{XID}/verifying/1#1", f"{XID}/notifying/1#1"]
        assert store.pending(XID) == []
        assert {e.execution_id for e in store.outbox(XID)} == {XID}

    def test_record_result_stores_the_first_result_only(self, store: EventStore):
        """The first recorded result is kept; a second does not overwrite it."""
        driver = Driver(store)
        driver.start()
        first = Event("res-1", STEP_SUCCEEDED, "tool", LOOKUP, LOOKUP_EFFECT)
        second = Event("res-2", STEP_FAILED, "tool", {"category": "transient"}, LOOKUP_EFFECT)
        assert store.record_result(XID, LOOKUP_EFFECT, first) == first
        assert store.record_result(XID, LOOKUP_EFFECT, second) == first  # the kept one
        (entry,) = store.outbox(XID)
        assert entry.result == first
        assert store.pending(XID) == [entry]  # recorded is not delivered
        driver.accept(first)
        assert LOOKUP_EFFECT not in command_ids(store.pending(XID))
        assert store.outbox(XID)[0] == entry

    def test_record_result_for_unknown_command_raises(self, store: EventStore):
        """Recording a result for a command id the outbox lacks raises StoreError."""
        driver = Driver(store)
        driver.start()
        before = snapshot(store, XID)
        result = Event("res", STEP_SUCCEEDED, "tool", LOOKUP, "nope#1")
        with pytest.raises(StoreError, match=r"execution 'r1' has no outbox command 'nope#1'"):
            store.record_result(XID, "nope#1", result)
        timer_id = f"{LOOKUP_EFFECT}/timeout"  # timers are not outbox commands
        with pytest.raises(StoreError, match=re.escape(f"no outbox command {timer_id!r}")):
            store.record_result(XID, timer_id, result)
        assert snapshot(store, XID) == before

    def test_record_result_for_unknown_execution_raises(self, store: EventStore):
        """Recording a result for an unknown execution raises StoreError naming it."""
        with pytest.raises(StoreError, match=r"'ghost'"):
            store.record_result("ghost", LOOKUP_EFFECT, Event("res", STEP_SUCCEEDED))

    def test_reissued_command_id_keeps_its_first_entry(self, store: EventStore):
        """A command id issued again keeps its first outbox entry and recorded result."""
        driver = Driver(store)
        start = driver.start()
        (effect,) = [c for c in start.commands if isinstance(c, RunEffect)]
        result = Event("res", STEP_SUCCEEDED, "tool", LOOKUP, LOOKUP_EFFECT)
        store.record_result(XID, LOOKUP_EFFECT, result)
        execution = store.load(XID).execution
        store.commit(Commit(XID, 1, Event("again", "x"), "accepted", 0, execution,
                            (effect._replace(input={"order_id": "other"}),)))
        assert store.outbox(XID) == [OutboxEntry(XID, effect, result)]

    # -- executions -------------------------------------------------------------------------------

    def test_execution_ids_unfinished_excludes_final(self, store: EventStore):
        """execution_ids lists every id sorted; unfinished leaves out final executions."""
        drive_to(Driver(store, "c-done"), "refunded")
        drive_to(Driver(store, "b-running"), "verifying")
        Driver(store, "a-created")
        rejected = drive_to(Driver(store, "d-rejected"), "planning")
        rejected.accept(rejected.result(GREEDY_PLAN, source="agent"))
        assert store.execution_ids() == ["a-created", "b-running", "c-done", "d-rejected"]
        assert store.execution_ids(unfinished=True) == ["a-created", "b-running"]

    def test_load_gives_back_exactly_the_committed_execution(self, store: EventStore):
        """A stored run loads back equal to what decide made, and decides the same after."""
        driver = Driver(store, "t1", definition=TAGS)
        driver.start()
        tagged = driver.accept(Event("go-1", "go", "human", {}))
        assert store.load("t1").execution == tagged.execution
        then = decide(TAGS, tagged.execution, Event("go-2", "go", "human", {}), 1)
        assert decide(TAGS, store.load("t1").execution, Event("go-2", "go", "human", {}),
                      1) == then
        assert then.execution.outcome == "success"

    # -- whole runs -------------------------------------------------------------------------------

    def check_replays(self, store: EventStore, driver: Driver) -> None:
        """Checks the log folds, from a fresh execution, to exactly the stored execution."""
        log = store.log(driver.id)
        assert [e.sequence for e in log] == list(range(1, len(log) + 1))
        stored = store.load(driver.id)
        assert replay(driver.definition, driver.created, log) == stored.execution
        accepted = [e for e in log if e.decision == "accepted"]
        assert stored.version == len(accepted) == stored.execution.sequence

    def test_happy_refund_run_replays_from_the_log(self, store: EventStore):
        """A refund run to `refunded`, with noise, replays from its log to the stored run."""
        driver = Driver(store)
        driver.start()
        driver.accept(driver.failure("transient"), at=SECOND)  # a retry
        driver.fire(TimerPurpose.RETRY)
        driver.accept(driver.result(LOOKUP))
        assert driver.deliver(Event("late", STEP_SUCCEEDED, "tool", LOOKUP,
                                    LOOKUP_EFFECT)).kind == "ignored"
        driver.accept(driver.result(PLAN, source="agent"), at=10 * SECOND)
        driver.accept(driver.ticket())  # back to planning
        driver.accept(driver.result(PLAN, source="agent"))
        assert driver.deliver(Event("tp", "refund.teleported", "human", {})).kind == "rejected"
        driver.accept(driver.approval(), at=HOUR)
        driver.accept(driver.result(REFUND_OUT))
        driver.accept(driver.result(SETTLED))
        driver.accept(driver.result(SENT), at=2 * HOUR)
        stored = store.load(XID).execution
        assert (stored.state, stored.status, stored.outcome) == ("refunded", Status.FINAL,
                                                                 "success")
        self.check_replays(store, driver)
        # only the approval request that the ticket update superseded was never answered
        assert command_ids(store.pending()) == [f"{XID}/awaiting_approval/1/approval"]
        assert store.due_timers(FOREVER) == []
        assert store.execution_ids(unfinished=True) == []
        assert [r.transition.target for r in store.transitions(XID)] == [
            "collecting_requirements", "planning", "awaiting_approval", "planning",
            "awaiting_approval", "executing_refund", "verifying", "notifying", "refunded"]

    def test_compensating_refund_run_replays_from_the_log(self, store: EventStore):
        """A refund whose verification fails is voided (with a retried undo) and replays."""
        driver = drive_to(Driver(store), "verifying")
        driver.accept(driver.failure("permanent"), at=HOUR)
        compensating = store.load(XID).execution
        assert compensating.status == Status.COMPENSATING
        assert compensating.after_compensation == "failed"
        driver.accept(driver.compensation("transient"))
        assert [t.purpose for _, t in store.due_timers(FOREVER)] == [TimerPurpose.RETRY,
                                                                    TimerPurpose.DEADLINE]
        driver.fire(TimerPurpose.RETRY)
        assert command_ids(store.pending(XID)) == [f"{XID}/executing_refund/1/undo#2"]
        driver.accept(driver.compensation())
        stored = store.load(XID).execution
        assert (stored.state, stored.outcome, stored.completed) == ("failed", "failure", ())
        self.check_replays(store, driver)
        assert store.transitions(XID)[-1].transition == Transition(
            "verifying", COMPENSATION_SUCCEEDED, "failed", "compensated")

    def test_timer_driven_refund_run_replays_from_the_log(self, store: EventStore):
        """An approval that expires escalates to a person, whose timeout then fails the run."""
        driver = drive_to(Driver(store), "awaiting_approval")
        driver.fire(TimerPurpose.APPROVAL_EXPIRY)
        assert store.load(XID).execution.state == "needs_human"
        assert driver.ex.approval is None
        driver.fire(TimerPurpose.WAIT_TIMEOUT)
        assert store.load(XID).execution.outcome == "failure"
        self.check_replays(store, driver)
        assert [r.transition.forced for r in store.transitions(XID)][-2:] == [
            "approval_expired", ""]

    def test_deadline_forces_the_run_and_replays(self, store: EventStore):
        """The deadline timer, when it fires, forces the run to needs_human; the log replays."""
        driver = drive_to(Driver(store), "planning")
        driver.fire(TimerPurpose.DEADLINE)
        stored = store.load(XID).execution
        assert (stored.state, stored.exceeded) == ("needs_human", "deadline")
        driver.accept(driver.ticket())
        self.check_replays(store, driver)

    @WALK
    @given(data=st.data(), steps=st.integers(1, 25))
    def test_property_random_walks_replay_from_the_log(self, tmp_path: Path,
                                                       data: st.DataObject, steps: int):
        """Any walk of deliveries (duplicates included) leaves a log replaying to the store."""
        store = self.make_store(Path(tempfile.mkdtemp(dir=tmp_path)))
        try:
            driver = Driver(store)
            driver.start()
            used = [start_event(XID)]
            for index in range(steps):
                ex = store.load(XID).execution
                if data.draw(st.integers(0, 7), label="duplicate?") == 0:
                    event = data.draw(st.sampled_from(used), label="used")
                    before = snapshot(store, XID)
                    with pytest.raises(DuplicateEventError, match="already consumed"):
                        driver.deliver(event)
                    assert snapshot(store, XID) == before
                    continue
                event, at = data.draw(st.sampled_from(candidates(ex, driver.now)),
                                      label="event")
                event = event._replace(id=f"w{index}")
                version = store.load(XID).version
                decision = driver.deliver(event, at=at)
                used.append(event)
                expected = version + 1 if isinstance(decision, Accepted) else version
                assert store.load(XID).version == expected
            self.check_replays(store, driver)
            held = sorted(store.load(XID).execution.timers, key=lambda t: (t.fire_at, t.id))
            assert store.due_timers(FOREVER) == [(XID, t) for t in held]
        finally:
            store.close()


# -- SQLite-only tests -----------------------------------------------------------------------------



def write_store(path: Path) -> None:
    """Writes a real store at `path`: two refund runs, one finished, and closes it."""
    store = SQLiteStore(path)
    drive_to(Driver(store, "r1"), "refunded")
    drive_to(Driver(store, "r2"), "awaiting_approval")
    store.close()


def foreign_database(path: Path) -> None:
    """Writes an SQLite database of some other program: tables, no schema_version."""
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    db.execute("INSERT INTO customers (name) VALUES ('Ada')")
    db.commit()
    db.close()


def future_store(path: Path) -> None:
    """Writes a real store whose schema_version row says 99."""
    write_store(path)
    db = sqlite3.connect(path)
    db.execute("UPDATE schema_version SET version = 99")
    db.commit()
    db.close()


def truncated_store(path: Path) -> None:
    """Writes a real store, then cuts its file to half its size."""
    write_store(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def garbage_file(path: Path) -> None:
    """Writes a file of bytes that are no database at all."""
    path.write_bytes(bytes(range(256)) * 64)


UNUSABLE = {
    "garbage": (garbage_file, r"not a usable fsmharness store: file is not a database"),
    "truncated": (truncated_store, r"not a usable fsmharness store: database disk image is "
                                   r"malformed"),
    "foreign": (foreign_database, r"holds tables but no schema_version; it is not an "
                                  r"fsmharness store"),
    "future": (future_store, r"schema version 99 is a newer schema; this fsmharness reads "
                             r"version 1"),
}


class SQLiteContract(EventStoreContract):
    """The contract plus what only a store in a file can promise."""

    def test_commit_many_leaves_nothing_of_a_record_it_cannot_store(self, store: EventStore):
        """A commit whose record JSON cannot hold (a tuple in the context) is refused in its
        place and leaves nothing behind: its event id is not consumed, so the same event,
        decided again on a record that can be stored, is written."""
        ok, odd = Driver(store, "a"), Driver(store, "b")
        odd.start()
        before = snapshot(store, "b")
        commit, decision = odd.prepare(odd.result(LOOKUP))
        assert commit.execution is not None
        unstorable = dataclasses.replace(commit, execution=commit.execution._replace(
            context={**commit.execution.context, "pair": (1, 2)}))
        results = store.commit_many([ok.prepare(start_event("a"))[0], unstorable])
        assert results[0] == 1
        assert isinstance(results[1], StoreError) and "cannot be stored" in str(results[1])
        assert snapshot(store, "b") == {**before, "pending": store.pending(),
                                        "timers": store.due_timers(FOREVER),
                                        "unfinished": store.execution_ids(unfinished=True)}
        assert store.commit_many([commit]) == [2]  # its event id was never consumed
        assert store.load("b").execution == decision.execution  # type: ignore[union-attr]

    synchronous = "NORMAL"

    def make_store(self, tmp_path: Path) -> SQLiteStore:
        return SQLiteStore(tmp_path / "store.db", synchronous=self.synchronous)

    def test_reads_of_unknown_execution_raise(self, store: EventStore):
        """log, outbox, transitions and pending of an unknown id raise like load does."""
        super().test_reads_of_unknown_execution_raise(store)

    def test_load_gives_back_exactly_the_committed_execution(self, store: EventStore):
        """A stored run loads back equal to what decide made, and decides the same after."""
        super().test_load_gives_back_exactly_the_committed_execution(store)

    def test_synchronous_setting_is_applied(self, store: SQLiteStore):
        """The connection runs with the synchronous level it was given."""
        levels = {"OFF": 0, "NORMAL": 1, "FULL": 2, "EXTRA": 3}
        assert store._db.execute("PRAGMA synchronous").fetchone()[0] == levels[self.synchronous]
        assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"

    def test_new_file_records_the_schema_version(self, store: SQLiteStore, tmp_path: Path):
        """A new store file holds schema_version 1 and the store's tables."""
        db = sqlite3.connect(tmp_path / "store.db")
        try:
            assert db.execute("SELECT version FROM schema_version").fetchall() == [(1,)]
            tables = {row[0] for row in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            db.close()
        assert {"executions", "log", "consumed", "outbox", "timers", "transitions"} <= tables

    def test_data_survives_closing_and_reopening(self, store: SQLiteStore, tmp_path: Path):
        """Everything written is there, unchanged, after the file is closed and reopened."""
        driver = drive_to(Driver(store), "awaiting_approval")
        driver.accept(driver.ticket())
        drive_to(Driver(store, "r2"), "refunded")
        store.record_result(XID, f"{XID}/planning/2#1",
                            Event("res", STEP_SUCCEEDED, "agent", PLAN, f"{XID}/planning/2#1"))
        before = snapshot(store, XID, "r2")
        store.close()
        reopened = SQLiteStore(tmp_path / "store.db", synchronous=self.synchronous)
        try:
            assert snapshot(reopened, XID, "r2") == before
            driver.store = reopened
            driver.accept(driver.result(PLAN, source="agent"))  # and it keeps working
            assert reopened.load(XID).version == before["stored"][0].version + 1
            self.check_replays(reopened, driver)
        finally:
            reopened.close()

    def test_empty_file_becomes_a_store(self, tmp_path: Path):
        """An existing empty file is a new database: the store sets it up."""
        path = tmp_path / "empty.db"
        path.write_bytes(b"")
        store = SQLiteStore(path, synchronous=self.synchronous)
        try:
            drive_to(Driver(store), "planning")
            assert store.execution_ids() == [XID]
        finally:
            store.close()

    def test_two_stores_on_one_file_see_each_others_commits(self, store: SQLiteStore,
                                                             tmp_path: Path):
        """Two SQLiteStore objects on one file read what the other committed."""
        other = SQLiteStore(tmp_path / "store.db", synchronous=self.synchronous)
        try:
            mine = Driver(store)
            mine.start()
            assert other.load(XID) == store.load(XID)
            theirs = Driver(other, "r2")
            theirs.start()
            assert store.execution_ids() == other.execution_ids() == [XID, "r2"]
            mine.store = other
            mine.accept(mine.result(LOOKUP))
            assert snapshot(store, XID, "r2") == snapshot(other, XID, "r2")
            assert store.load(XID).version == 2
        finally:
            other.close()

    def test_race_loser_gets_conflict_and_can_retry(self, store: SQLiteStore, tmp_path: Path):
        """Two writers at one version: the later gets ConflictError, then commits on reload."""
        other = SQLiteStore(tmp_path / "store.db", synchronous=self.synchronous)
        try:
            driver = Driver(store)
            driver.start()
            winner, _ = driver.prepare(driver.result(LOOKUP))
            loser_event = Event("loser", STEP_FAILED, "tool", {"category": "permanent"},
                                LOOKUP_EFFECT)
            driver.store = other
            loser, _ = driver.prepare(loser_event)
            assert winner.expected_version == loser.expected_version == 1
            assert store.commit(winner) == 2
            before = snapshot(store, XID)
            with pytest.raises(ConflictError, match="execution 'r1' is at version 2, not 1"):
                other.commit(loser)
            assert snapshot(store, XID) == snapshot(other, XID) == before
            decision = driver.deliver(loser_event)  # reload, decide again: late now
            assert decision.kind == "ignored"
            assert store.log(XID)[-1].event == loser_event
        finally:
            other.close()

    def test_same_event_in_two_writers_is_applied_once(self, store: SQLiteStore,
                                                       tmp_path: Path):
        """One event committed by two writers: the second gets DuplicateEventError."""
        other = SQLiteStore(tmp_path / "store.db", synchronous=self.synchronous)
        try:
            driver = Driver(store)
            driver.start()
            event = driver.result(LOOKUP)
            first, _ = driver.prepare(event)
            driver.store = other
            second, _ = driver.prepare(event)
            store.commit(first)
            with pytest.raises(DuplicateEventError, match="already consumed"):
                other.commit(second)
            assert [e.event.id for e in other.log(XID)] == [f"{XID}/started", event.id]
        finally:
            other.close()

    @pytest.mark.parametrize("case", sorted(UNUSABLE))
    def test_refuses_a_file_that_is_not_a_store(self, tmp_path: Path, case: str):
        """Garbage, a truncated store, a foreign database and a future schema raise StoreError."""
        make, message = UNUSABLE[case]
        path = tmp_path / "store.db"
        make(path)
        with pytest.raises(StoreError, match=message) as info:
            SQLiteStore(path, synchronous=self.synchronous)
        assert str(path) in str(info.value)

    @pytest.mark.parametrize("case", [
        "garbage", "truncated", "future",
        "foreign",
    ])
    def test_refused_file_is_not_modified(self, tmp_path: Path, case: str):
        """Refusing a file leaves its bytes exactly as they were."""
        make, message = UNUSABLE[case]
        path = tmp_path / "store.db"
        make(path)
        before = path.read_bytes()
        with pytest.raises(StoreError, match=message):
            SQLiteStore(path, synchronous=self.synchronous)
        assert path.read_bytes() == before

    @pytest.mark.parametrize("case", sorted(UNUSABLE))
    def test_refused_file_is_left_closed(self, tmp_path: Path, case: str):
        """Refusing a file closes the connection: no -wal or -shm file is left beside it."""
        make, message = UNUSABLE[case]
        path = tmp_path / "store.db"
        make(path)
        with pytest.raises(StoreError, match=message):
            SQLiteStore(path, synchronous=self.synchronous)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["store.db"]

    def test_bogus_synchronous_raises_value_error(self, tmp_path: Path):
        """synchronous="BOGUS" raises ValueError naming the choices, and creates no file."""
        path = tmp_path / "store.db"
        with pytest.raises(ValueError, match=r"synchronous must be OFF, NORMAL, FULL or EXTRA, "
                                             r"not 'BOGUS'"):
            SQLiteStore(path, synchronous="BOGUS")  # type: ignore[arg-type]
        assert not path.exists()


# -- the backends ----------------------------------------------------------------------------------




class TestMemoryStore(EventStoreContract):
    """The contract against the in-memory store."""

    def make_store(self, tmp_path: Path) -> MemoryStore:
        return MemoryStore()


class TestSQLiteStore(SQLiteContract):
    """The contract against an SQLite file with synchronous=NORMAL (the default)."""


class TestSQLiteStoreFull(SQLiteContract):
    """The contract against an SQLite file with synchronous=FULL."""

    synchronous = "FULL"


class TestPostgresStore(EventStoreContract):
    """The contract against a real PostgreSQL server, a fresh schema for each store."""

    @pytest.fixture(autouse=True)
    def _server(self, postgres_dsn: str) -> Iterator[None]:
        self.dsn, self.schemas = postgres_dsn, []
        yield
        drop_schemas(postgres_dsn, self.schemas)

    def make_store(self, tmp_path: Path) -> PostgresStore:
        schema = f"contract_{uuid.uuid4().hex[:16]}"
        self.schemas.append(schema)
        return PostgresStore(self.dsn, schema=schema)


def drop_schemas(dsn: str, schemas: list[str]) -> None:
    """Drops the schemas a test made (a server given by FSMHARNESS_POSTGRES_DSN keeps none)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as db:
        for schema in schemas:
            db.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")

