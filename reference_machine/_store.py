"""The event store protocol and its in-memory implementation.

Per execution a store keeps the append-only log of delivered events (strictly increasing sequence
numbers), the current execution record with its version, the outbox of commands that reach the
outside world (effects, compensations, approval requests) with their recorded results, durable
timers, consumed event ids, and a record of every transition. `commit` writes all of one event's
consequences atomically, with an optimistic check of the execution's version.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, runtime_checkable

from reference_machine._codec import (
    decode_command,
    decode_event,
    decode_transition,
    encode_command,
    encode_event,
    encode_execution,
    encode_transition,
)
from reference_machine._records import (
    TIMER_FIRED,
    CancelTimer,
    Command,
    Event,
    Execution,
    RequestApproval,
    RunCompensation,
    RunEffect,
    ScheduleTimer,
    Status,
    Timer,
    Transition,
)
from reference_machine.errors import ReferenceMachineError

__all__ = [
    "Commit",
    "ConflictError",
    "DuplicateEventError",
    "EventStore",
    "ExecutionExistsError",
    "History",
    "LogEntry",
    "MemoryStore",
    "OutboxEntry",
    "StoreError",
    "StoredExecution",
    "TransitionRecord",
    "UnknownExecutionError",
]


class StoreError(ReferenceMachineError):
    """A store refused or failed an operation."""


class ConflictError(StoreError):
    """Another writer advanced the execution first: reload and decide again."""

    def __init__(self, execution_id: str, expected: int, actual: int) -> None:
        self.execution_id, self.expected, self.actual = execution_id, expected, actual
        super().__init__(f"execution {execution_id!r} is at version {actual}, not {expected}: "
                         "another worker advanced it; reload and decide again")


class DuplicateEventError(StoreError):
    """The event id was consumed before: it is never applied twice."""

    def __init__(self, execution_id: str, event_id: str) -> None:
        self.execution_id, self.event_id = execution_id, event_id
        super().__init__(f"event {event_id!r} was already consumed by execution "
                         f"{execution_id!r}")


class UnknownExecutionError(StoreError, KeyError):
    """No execution has this id."""

    def __init__(self, execution_id: str) -> None:
        self.execution_id = execution_id
        super().__init__(f"no execution {execution_id!r} in the store")

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0])


class ExecutionExistsError(StoreError):
    """An execution with this id was created before."""

    def __init__(self, execution_id: str) -> None:
        self.execution_id = execution_id
        super().__init__(f"execution {execution_id!r} already exists")


@dataclass(frozen=True, slots=True)
class StoredExecution:
    """An execution record and the version the optimistic check compares against."""

    execution: Execution
    version: int


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One delivered event in an execution's log, with what `decide` made of it."""

    sequence: int
    event: Event
    decision: str
    at: int


@dataclass(frozen=True, slots=True)
class OutboxEntry:
    """A command that reaches the outside world, and its result once recorded."""

    execution_id: str
    command: RunEffect | RunCompensation | RequestApproval
    result: Event | None = None

    @property
    def command_id(self) -> str:
        """Gives the id a result answers: the effect id or the approval request id."""
        return _command_id(self.command)


@dataclass(frozen=True, slots=True)
class TransitionRecord:
    """What one accepted transition did, for observability: metrics derive from these."""

    execution_id: str
    definition_version: str
    sequence: int
    transition: Transition
    attempt: int
    at: int
    duration_ms: int
    tool: str
    outcome: str


@dataclass(frozen=True, slots=True)
class History:
    """An execution's record, log and transition records, read together."""

    stored: StoredExecution
    log: list[LogEntry]
    transitions: list[TransitionRecord]


@dataclass(frozen=True, slots=True)
class Commit:
    """Everything one delivered event changes, written in one transaction.

    `execution` is the new record when the event was accepted (None when it was ignored or
    rejected: the event is still logged and consumed). `expected_version` is the version the
    execution was loaded at. `reason` says why an event was ignored or rejected (`action_error:
    ...`), for whoever watches the store; a store keeps the decision, not the reason (replay
    decides it again).
    """

    execution_id: str
    expected_version: int
    event: Event
    decision: str
    at: int
    execution: Execution | None = None
    commands: tuple[Command, ...] = ()
    transition: Transition | None = None
    duration_ms: int = 0
    reason: str = ""


@runtime_checkable
class EventStore(Protocol):
    """What the runtime needs from a store; `MemoryStore` and `SQLiteStore` implement it."""

    def create(self, execution: Execution) -> None:
        """Stores a new execution at version 0; raises `ExecutionExistsError` for a known id."""

    def load(self, execution_id: str) -> StoredExecution:
        """Gives the execution and its version; raises `UnknownExecutionError`."""

    def commit(self, commit: Commit) -> int:
        """Writes one event's consequences atomically and gives the new version.

        Raises `DuplicateEventError` for a consumed event id and `ConflictError` when the
        execution is no longer at `commit.expected_version`; then nothing is written.
        """

    def commit_many(self, commits: Sequence[Commit]) -> list[int | StoreError]:
        """Writes many executions' events in one transaction (group commit): each commit is
        still all-or-nothing for its execution; a failed one gives its error in its place and
        leaves the others written."""

    def record_result(self, execution_id: str, command_id: str, result: Event) -> Event:
        """Records the result of an outbox command (before it is delivered as an event) and
        gives the result the store keeps: the first one recorded wins."""

    def pending(self, execution_id: str | None = None) -> list[OutboxEntry]:
        """Gives outbox entries whose result was delivered to no one yet, oldest first."""

    def outbox(self, execution_id: str) -> list[OutboxEntry]:
        """Gives every outbox entry of an execution, with results, oldest first."""

    def log(self, execution_id: str) -> list[LogEntry]:
        """Gives the execution's log in sequence order."""

    def history(self, execution_id: str) -> History:
        """Gives the record, the log and the transition records as of one moment (one read
        transaction), so that replay never compares parts written at different times."""

    def due_timers(self, now: int) -> list[tuple[str, Timer]]:
        """Gives (execution id, timer) for every timer due at `now`, by fire time then id."""

    def execution_ids(self, *, unfinished: bool = False) -> list[str]:
        """Gives every execution id (only those not final, when `unfinished`), sorted."""

    def transitions(self, execution_id: str) -> list[TransitionRecord]:
        """Gives the transition records of an execution in order."""

    def close(self) -> None:
        """Releases the store's resources."""


def _command_id(command: Command) -> str:
    kind = type(command)
    if kind is RunEffect or kind is RunCompensation:  # the common case, read per step
        return command.effect_id  # type: ignore[union-attr]
    if isinstance(command, RequestApproval):
        return command.request_id
    if isinstance(command, RunEffect | RunCompensation):
        return command.effect_id
    msg = f"{type(command).__name__} does not go to the outbox"
    raise TypeError(msg)


def outbound(commands: Iterable[Command]) -> list[RunEffect | RunCompensation | RequestApproval]:
    """Gives the commands that reach the outside world (the outbox's part of a commit)."""
    return [c for c in commands if isinstance(c, RunEffect | RunCompensation | RequestApproval)]


def transition_record(commit: Commit, entered_at: int | None = None) -> TransitionRecord | None:
    """Gives the observability record of a commit's transition, if it made one; its duration
    is the time spent in the source state (since the previous transition, `entered_at`)."""
    if commit.transition is None or commit.execution is None:
        return None
    execution = commit.execution
    effect = next((c for c in commit.commands if isinstance(c, RunEffect)), None)
    return TransitionRecord(
        execution_id=commit.execution_id,
        definition_version=execution.version,
        sequence=execution.sequence,
        transition=commit.transition,
        attempt=execution.attempt,
        at=commit.at,
        duration_ms=commit.duration_ms or (0 if entered_at is None else commit.at - entered_at),
        tool=effect.tool if effect is not None else "",
        outcome=execution.outcome or str(execution.status),
    )


@dataclass
class _Memory:
    execution: Execution
    version: int = 0
    log: list[LogEntry] = field(default_factory=list)
    consumed: set[str] = field(default_factory=set)
    outbox: dict[str, OutboxEntry] = field(default_factory=dict)
    delivered: set[str] = field(default_factory=set)
    undelivered: dict[str, OutboxEntry] = field(default_factory=dict)  # pending, oldest first
    timers: dict[str, Timer] = field(default_factory=dict)
    transitions: list[TransitionRecord] = field(default_factory=list)


class MemoryStore:
    """An event store in this process's memory: fast, and gone with the process."""

    def __init__(self) -> None:
        self._runs: dict[str, _Memory] = {}

    def _run(self, execution_id: str) -> _Memory:
        run = self._runs.get(execution_id)
        if run is None:
            raise UnknownExecutionError(execution_id)
        return run

    def create(self, execution: Execution) -> None:
        if execution.id in self._runs:
            raise ExecutionExistsError(execution.id)
        self._runs[execution.id] = _Memory(execution)

    def load(self, execution_id: str) -> StoredExecution:
        run = self._run(execution_id)
        return StoredExecution(run.execution, run.version)

    def commit(self, commit: Commit) -> int:
        run = self._run(commit.execution_id)
        event_id = commit.event.id
        if event_id in run.consumed:
            raise DuplicateEventError(commit.execution_id, event_id)
        # every commit checks the version, rejections too: the log's order is the order in
        # which decisions were made on the state they saw, so replay decides them alike
        if run.version != commit.expected_version:
            raise ConflictError(commit.execution_id, commit.expected_version, run.version)
        # everything is checked above: from here on nothing can fail half-way
        run.consumed.add(event_id)
        run.log.append(LogEntry(len(run.log) + 1, commit.event, commit.decision, commit.at))
        answers = commit.event.answers
        # an answer settles its command unless it was rejected (forged, malformed): then the
        # command stays pending, for recovery to finish; one before its command hides nothing
        if answers in run.outbox and commit.decision != "rejected":
            run.delivered.add(answers)
            run.undelivered.pop(answers, None)
        if commit.event.type == TIMER_FIRED and commit.event.source in ("timer", "system"):
            run.timers.pop(answers, None)  # fired, whatever decide made of it; forged: kept
        if commit.execution is None:
            return run.version
        run.execution = commit.execution
        run.version += 1
        for command in commit.commands:
            if isinstance(command, ScheduleTimer):
                run.timers[command.timer_id] = Timer(*command)
            elif isinstance(command, CancelTimer):
                run.timers.pop(command.timer_id, None)
            else:
                entry = OutboxEntry(commit.execution_id, command)
                if entry.command_id not in run.outbox:
                    run.outbox[entry.command_id] = entry
                    if entry.command_id not in run.delivered:
                        run.undelivered[entry.command_id] = entry
        entered = run.transitions[-1].at if run.transitions else None
        record = transition_record(commit, entered)
        if record is not None:
            run.transitions.append(record)
        return run.version

    def commit_many(self, commits: Sequence[Commit]) -> list[int | StoreError]:
        check_commits(commits)
        results: list[int | StoreError] = []
        for commit in commits:
            try:
                results.append(self.commit(commit))
            except StoreError as exc:  # commit checks everything before it writes anything
                results.append(exc)
        return results

    def record_result(self, execution_id: str, command_id: str, result: Event) -> Event:
        run = self._run(execution_id)
        entry = run.outbox.get(command_id)
        if entry is None:
            raise StoreError(f"execution {execution_id!r} has no outbox command {command_id!r}")
        if entry.result is not None:  # the first recorded result wins, as in SQLite
            return entry.result
        entry = OutboxEntry(execution_id, entry.command, result)
        run.outbox[command_id] = entry
        if command_id in run.undelivered:
            run.undelivered[command_id] = entry
        return result

    def pending(self, execution_id: str | None = None) -> list[OutboxEntry]:
        ids = [execution_id] if execution_id is not None else sorted(self._runs)
        entries: list[OutboxEntry] = []
        for run_id in ids:
            entries += self._run(run_id).undelivered.values()
        return entries

    def outbox(self, execution_id: str) -> list[OutboxEntry]:
        return list(self._run(execution_id).outbox.values())

    def log(self, execution_id: str) -> list[LogEntry]:
        return list(self._run(execution_id).log)

    def history(self, execution_id: str) -> History:
        return History(self.load(execution_id), self.log(execution_id),
                       self.transitions(execution_id))

    def due_timers(self, now: int) -> list[tuple[str, Timer]]:
        due = [(run_id, timer) for run_id, run in self._runs.items()
               for timer in run.timers.values() if timer.fire_at <= now]
        return sorted(due, key=lambda item: (item[1].fire_at, item[1].id))

    def execution_ids(self, *, unfinished: bool = False) -> list[str]:
        return sorted(run_id for run_id, run in self._runs.items()
                      if not unfinished or run.execution.status != Status.FINAL)

    def transitions(self, execution_id: str) -> list[TransitionRecord]:
        return list(self._run(execution_id).transitions)

    def timers_of(self, execution_id: str) -> list[Timer]:
        """Gives the execution's durable timers (what will fire), by fire time then id."""
        return sorted(self._run(execution_id).timers.values(), key=lambda t: (t.fire_at, t.id))

    def consumed(self, execution_id: str, event_id: str) -> bool:
        """Tells whether the execution consumed an event with this id."""
        return event_id in self._run(execution_id).consumed

    def close(self) -> None:
        """Nothing to release."""


#: An outbox command's position is its commit's sequence times this, plus its place in the
#: commit: room for any number of commands one event makes (a map fans out to thousands at
#: once; 1,000 let a later commit's command sort before an earlier one's), and still above
#: every position stores written with 1,000 hold, so their order is kept.
_POSITIONS = 1 << 32


class EncodedCommit(NamedTuple):
    """A commit's texts and rows as a database store writes them, all made before the first
    write (so a record JSON cannot hold is refused with nothing written): the event's text;
    for an accepted event, the execution record's text, the outbox rows (execution id,
    command id, position, command text) and the transition record's row."""

    event: str
    execution: str = ""
    outbox: tuple[tuple[str, str, int, str], ...] = ()
    transition: tuple[Any, ...] | None = None


def encode_commit(commit: Commit, sequence: int, entered_at: int | None) -> EncodedCommit:
    """Gives what a database store writes for `commit`, its log entry being `sequence` and
    its execution's last transition at `entered_at`; raises `TypeError`, `ValueError` or
    `OverflowError` for a record JSON cannot hold exactly."""
    event_text = encode_event(commit.event)
    execution = commit.execution
    if execution is None:
        return EncodedCommit(event_text)
    execution_id = commit.execution_id
    outbox = tuple((execution_id, OutboxEntry(execution_id, command).command_id,
                    sequence * _POSITIONS + position, encode_command(command))
                   for position, command in enumerate(outbound(commit.commands)))
    record = transition_record(commit, entered_at)
    row = None if record is None else (
        execution_id, record.sequence, record.definition_version,
        encode_transition(record.transition), record.attempt, record.at, record.duration_ms,
        record.tool, record.outcome)
    return EncodedCommit(event_text, encode_execution(execution), outbox, row)


def outbox_entry(row: Sequence[Any]) -> OutboxEntry:
    """Gives the outbox entry a database store's row holds: (execution id, command, result)."""
    command = decode_command(row[1])
    result = None if row[2] is None else decode_event(row[2])
    return OutboxEntry(row[0], command, result)  # type: ignore[arg-type]


def log_entry(row: Sequence[Any]) -> LogEntry:
    """Gives the log entry a database store's row holds: (sequence, event, decision, at)."""
    return LogEntry(row[0], decode_event(row[1]), row[2], row[3])


def transition_entry(row: Sequence[Any]) -> TransitionRecord:
    """Gives the transition record a database store's row holds (its columns in the
    record's order, the transition as JSON)."""
    return TransitionRecord(row[0], row[1], row[2], decode_transition(row[3]), *row[4:])


def check_commits(commits: Sequence[Commit]) -> None:
    """Refuses a batch that names one execution twice (group commit is one event each)."""
    seen: set[str] = set()
    for commit in commits:
        if commit.execution_id in seen:
            msg = f"a batch holds execution {commit.execution_id!r} twice; commit it in order"
            raise StoreError(msg)
        seen.add(commit.execution_id)
