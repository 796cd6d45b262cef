"""The PostgreSQL event store: the runtime's workers on several hosts sharing one database.

The same tables and records as the SQLite store, in a schema of their own (`fsmharness` unless
told). One transaction per commit: the execution's row is read `FOR UPDATE` (the commits of one
execution queue behind each other, and the second sees the first's version and conflicts), the
consumed id is a primary key, then the log, the execution, the outbox, the timers and the
transition record. A group commit locks its executions in id order, so two workers committing
overlapping groups cannot deadlock.

Workers share executions through `claim`: a session-level advisory lock per execution that a
runtime holds while it commits and dispatches for it (`deliver`, `deliver_many` and `complete`
wait for it) and while it finishes another's work (`recover` and `tick` skip an execution
another worker holds). The lock ends with the worker's connection, so a worker that dies frees
what it held.

Needs the `postgres` extra (`pip install 'fsmharness[postgres]'`: psycopg 3). Driver errors are
wrapped as `StoreError`s.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from reference_machine._codec import (
    decode_event,
    decode_execution,
    encode_event,
    encode_execution,
)
from reference_machine._records import (
    TIMER_FIRED,
    CancelTimer,
    Event,
    Execution,
    ScheduleTimer,
    Status,
    Timer,
    TimerPurpose,
)
from reference_machine._store import (
    Commit,
    ConflictError,
    DuplicateEventError,
    EncodedCommit,
    ExecutionExistsError,
    History,
    LogEntry,
    OutboxEntry,
    StoredExecution,
    StoreError,
    TransitionRecord,
    UnknownExecutionError,
    check_commits,
    encode_commit,
    log_entry,
    outbox_entry,
    transition_entry,
)

SCHEMA_VERSION = 1
_TIMER_SOURCES = frozenset({"timer", "system"})
_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_BIGINT = 1 << 63

#: A commit's first read: the execution's version, its row locked until the commit ends (a
#: second commit of the same execution waits here for the first to end)
_LOCK = "SELECT version FROM executions WHERE id = %(id)s FOR UPDATE"
#: Then the rest of what it checks, read after the lock (under READ COMMITTED a statement
#: sees what committed before it began: the waiting commit sees the first one's rows)
_WRITE_STATE = (
    "SELECT (SELECT COALESCE(MAX(sequence), 0) + 1 FROM log WHERE execution_id = %(id)s), "
    "(SELECT at FROM transitions WHERE execution_id = %(id)s ORDER BY sequence DESC LIMIT 1), "
    "EXISTS (SELECT 1 FROM consumed WHERE execution_id = %(id)s AND event_id = %(event)s)")

_SCHEMA = (
    "CREATE TABLE schema_version (version INTEGER NOT NULL)",
    "CREATE TABLE executions (id TEXT PRIMARY KEY, version BIGINT NOT NULL, "
    "final BOOLEAN NOT NULL, record TEXT NOT NULL)",
    "CREATE TABLE log (execution_id TEXT NOT NULL REFERENCES executions(id), "
    "sequence BIGINT NOT NULL, event TEXT NOT NULL, decision TEXT NOT NULL, "
    "at BIGINT NOT NULL, PRIMARY KEY (execution_id, sequence))",
    "CREATE TABLE consumed (execution_id TEXT NOT NULL, event_id TEXT NOT NULL, "
    "PRIMARY KEY (execution_id, event_id))",
    "CREATE TABLE outbox (execution_id TEXT NOT NULL, command_id TEXT NOT NULL, "
    "position BIGINT NOT NULL, command TEXT NOT NULL, result TEXT, "
    "delivered BOOLEAN NOT NULL DEFAULT FALSE, PRIMARY KEY (execution_id, command_id))",
    "CREATE INDEX outbox_pending ON outbox (execution_id, position) WHERE NOT delivered",
    "CREATE TABLE timers (execution_id TEXT NOT NULL, timer_id TEXT NOT NULL, "
    "purpose TEXT NOT NULL, fire_at BIGINT NOT NULL, PRIMARY KEY (execution_id, timer_id))",
    "CREATE INDEX timers_due ON timers (fire_at, timer_id)",
    "CREATE TABLE transitions (execution_id TEXT NOT NULL, sequence BIGINT NOT NULL, "
    "definition_version TEXT NOT NULL, record TEXT NOT NULL, attempt BIGINT NOT NULL, "
    "at BIGINT NOT NULL, duration_ms BIGINT NOT NULL, tool TEXT NOT NULL, "
    "outcome TEXT NOT NULL, PRIMARY KEY (execution_id, sequence))",
)


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:
        msg = ("PostgresStore needs psycopg 3: pip install 'fsmharness[postgres]' "
               f"({exc})")
        raise StoreError(msg) from exc
    return psycopg


def _whole(value: int, what: str) -> int:
    """Gives `value` when a BIGINT column holds it; raises `OverflowError` before any write."""
    if not -_BIGINT <= value < _BIGINT:
        msg = f"{what} {value} does not fit a 64-bit integer"
        raise OverflowError(msg)
    return value


class PostgresStore:
    """An event store in a PostgreSQL database, its tables in `schema` (made when missing).
    `dsn` is a libpq connection string or URL (`postgresql://user@host/db`)."""

    def __init__(self, dsn: str, *, schema: str = "fsmharness",
                 connect_timeout_s: float = 10.0) -> None:
        if not isinstance(schema, str) or not _IDENTIFIER.fullmatch(schema):
            msg = (f"schema must be a lower-case SQL name (letters, digits, underscores; "
                   f"at most 63), not {schema!r}")
            raise ValueError(msg)
        psycopg = _psycopg()
        self.schema = schema
        self._errors = psycopg.Error
        self._unique = psycopg.errors.UniqueViolation
        try:
            # autocommit: each transaction is opened explicitly, as the SQLite store does
            self._db = psycopg.connect(dsn, autocommit=True,
                                       connect_timeout=max(1, round(connect_timeout_s)))
        except psycopg.Error as exc:
            raise StoreError(f"cannot connect to PostgreSQL: {_first_line(exc)}") from exc
        self.where = f"PostgreSQL schema {schema!r}"
        try:
            self._open_schema()
        except StoreError:
            self._db.close()
            raise
        except psycopg.Error as exc:
            self._db.close()
            raise StoreError(f"{self.where}: not a usable fsmharness store: "
                             f"{_first_line(exc)}") from exc

    def _open_schema(self) -> None:
        db = self._db
        with self._transaction():
            # one process makes the tables; the others wait here and then find them
            db.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                       (f"fsmharness schema {self.schema}",))
            db.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')  # quoted: `user` too
            db.execute(f'SET LOCAL search_path TO "{self.schema}"')
            tables = {row[0] for row in db.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                (self.schema,))}
            if tables and "schema_version" not in tables:
                raise StoreError(f"{self.where}: holds tables but no schema_version; it is "
                                 "not an fsmharness store")
            if not tables:
                for statement in _SCHEMA:
                    db.execute(statement)
                db.execute("INSERT INTO schema_version VALUES (%s)", (SCHEMA_VERSION,))
            row = db.execute("SELECT version FROM schema_version").fetchone()
            if row is None or row[0] != SCHEMA_VERSION:
                found = "no version" if row is None else f"version {row[0]}"
                raise StoreError(f"{self.where}: schema {found}; this fsmharness reads "
                                 f"version {SCHEMA_VERSION}")
        db.execute(f'SET search_path TO "{self.schema}"')

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self._db.execute("BEGIN")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        else:
            self._db.execute("COMMIT")

    # -- the protocol ---------------------------------------------------------------------------

    def create(self, execution: Execution) -> None:
        try:
            record = encode_execution(execution)
            with self._transaction():
                self._db.execute("INSERT INTO executions (id, version, final, record) VALUES "
                                 "(%s, 0, %s, %s)",
                                 (execution.id, execution.status == Status.FINAL, record))
        except self._unique as exc:
            raise ExecutionExistsError(execution.id) from exc
        except self._errors as exc:
            raise StoreError(f"{self.where}: create {execution.id!r} failed: "
                             f"{_first_line(exc)}") from exc

    def load(self, execution_id: str) -> StoredExecution:
        row = self._query_one("SELECT record, version FROM executions WHERE id = %s",
                              (execution_id,))
        if row is None:
            raise UnknownExecutionError(execution_id)
        return StoredExecution(decode_execution(row[0]), row[1])

    def commit(self, commit: Commit) -> int:
        try:
            with self._transaction():
                return self._write(commit)
        except (TypeError, ValueError, OverflowError) as exc:  # not storable exactly: refused
            raise StoreError(f"{self.where}: event {commit.event.id!r} cannot be stored: "
                             f"{exc}") from exc
        except self._errors as exc:
            raise StoreError(f"{self.where}: commit of event {commit.event.id!r} failed: "
                             f"{_first_line(exc)}") from exc

    def commit_many(self, commits: Sequence[Commit]) -> list[int | StoreError]:
        check_commits(commits)
        results: list[int | StoreError | None] = [None] * len(commits)
        # rows are locked in id order, whatever the batch's: no deadlock between two groups
        order = sorted(range(len(commits)), key=lambda index: commits[index].execution_id)
        try:
            with self._transaction():
                for index in order:
                    commit = commits[index]
                    # `_write` refuses before its first write or not at all (see `commit`)
                    try:
                        results[index] = self._write(commit)
                    except StoreError as exc:
                        results[index] = exc
                    except (TypeError, ValueError, OverflowError) as exc:
                        results[index] = StoreError(f"{self.where}: event {commit.event.id!r} "
                                                    f"cannot be stored: {exc}")
        except self._errors as exc:
            raise StoreError(f"{self.where}: group commit of {len(commits)} events failed: "
                             f"{_first_line(exc)}") from exc
        return [result for result in results if result is not None]

    def _write(self, commit: Commit) -> int:
        """Writes one commit in the open transaction. Every refusal (an unknown execution, a
        duplicate event, a version conflict, a record JSON or a 64-bit column cannot hold)
        is raised before the first write."""
        db = self._db
        execution_id, event = commit.execution_id, commit.event
        keys = {"id": execution_id, "event": event.id}
        locked = db.execute(_LOCK, keys).fetchone()
        if locked is None:
            raise UnknownExecutionError(execution_id)
        (version,) = locked
        sequence, entered_at, consumed = db.execute(_WRITE_STATE, keys).fetchone()
        if consumed:
            raise DuplicateEventError(execution_id, event.id)
        if version != commit.expected_version:  # every commit checks it, as in SQLite's
            raise ConflictError(execution_id, commit.expected_version, version)
        texts = encode_commit(commit, sequence, entered_at)
        _whole(commit.at, "the commit's time")
        timers = [(execution_id, command.timer_id, str(command.purpose),
                   _whole(command.fire_at, "a timer's fire time"))
                  for command in commit.commands if isinstance(command, ScheduleTimer)]
        if texts.transition is not None:
            for value in texts.transition[4:7]:  # attempt, at, duration
                _whole(value, "a transition record's number")
        with db.pipeline():  # the writes need no answer: one round trip for them all
            return self._write_rows(commit, texts, timers, version, sequence)

    def _write_rows(self, commit: Commit, texts: EncodedCommit,
                    timers: list[tuple[Any, ...]], version: int, sequence: int) -> int:
        """Writes a checked commit's rows (see `_write`)."""
        db, execution_id, event = self._db, commit.execution_id, commit.event
        execution = commit.execution
        db.execute("INSERT INTO consumed (execution_id, event_id) VALUES (%s, %s)",
                   (execution_id, event.id))
        db.execute("INSERT INTO log VALUES (%s, %s, %s, %s, %s)",
                   (execution_id, sequence, texts.event, commit.decision, commit.at))
        if event.answers and commit.decision != "rejected":
            db.execute("UPDATE outbox SET delivered = TRUE WHERE execution_id = %s AND "
                       "command_id = %s", (execution_id, event.answers))
        if event.type == TIMER_FIRED and event.source in _TIMER_SOURCES:
            db.execute("DELETE FROM timers WHERE execution_id = %s AND timer_id = %s",
                       (execution_id, event.answers))
        if execution is None:
            return int(version)
        new_version = version + 1
        db.execute("UPDATE executions SET version = %s, final = %s, record = %s WHERE id = %s",
                   (new_version, execution.status == Status.FINAL, texts.execution,
                    execution_id))
        for command in commit.commands:
            if isinstance(command, CancelTimer):
                db.execute("DELETE FROM timers WHERE execution_id = %s AND timer_id = %s",
                           (execution_id, command.timer_id))
            elif isinstance(command, ScheduleTimer):
                db.execute("INSERT INTO timers VALUES (%s, %s, %s, %s) ON CONFLICT "
                           "(execution_id, timer_id) DO UPDATE SET purpose = "
                           "EXCLUDED.purpose, fire_at = EXCLUDED.fire_at", timers.pop(0))
        if texts.outbox:
            with db.cursor() as cursor:
                cursor.executemany("INSERT INTO outbox (execution_id, command_id, position, "
                                   "command) VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                                   texts.outbox)
        if texts.transition is not None:
            db.execute("INSERT INTO transitions VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                       texts.transition)
        return int(new_version)

    def record_result(self, execution_id: str, command_id: str, result: Event) -> Event:
        try:
            text = encode_event(result)
            with self._transaction():
                row = self._db.execute(
                    "UPDATE outbox SET result = COALESCE(result, %s) WHERE execution_id = %s "
                    "AND command_id = %s RETURNING result",
                    (text, execution_id, command_id)).fetchone()
                if row is None:
                    raise StoreError(f"execution {execution_id!r} has no outbox command "
                                     f"{command_id!r}")
            kept = decode_event(row[0])
            return result if kept == result else kept
        except self._errors as exc:
            raise StoreError(f"{self.where}: recording the result of {command_id!r} failed: "
                             f"{_first_line(exc)}") from exc

    def _require(self, execution_id: str) -> None:
        if self._query_one("SELECT 1 FROM executions WHERE id = %s", (execution_id,)) is None:
            raise UnknownExecutionError(execution_id)

    def pending(self, execution_id: str | None = None) -> list[OutboxEntry]:
        if execution_id is not None:
            self._require(execution_id)
        where, args = ("AND execution_id = %s", (execution_id,)) if execution_id else ("", ())
        rows = self._query("SELECT execution_id, command, result FROM outbox WHERE NOT "
                           f"delivered {where} ORDER BY execution_id COLLATE \"C\", position", args)
        return [outbox_entry(row) for row in rows]

    def outbox(self, execution_id: str) -> list[OutboxEntry]:
        self._require(execution_id)
        rows = self._query("SELECT execution_id, command, result FROM outbox WHERE "
                           "execution_id = %s ORDER BY position", (execution_id,))
        return [outbox_entry(row) for row in rows]

    def log(self, execution_id: str) -> list[LogEntry]:
        self._require(execution_id)
        rows = self._query("SELECT sequence, event, decision, at FROM log WHERE "
                           "execution_id = %s ORDER BY sequence", (execution_id,))
        return [log_entry(row) for row in rows]

    def history(self, execution_id: str) -> History:
        try:
            # one snapshot for all three reads
            self._db.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                return History(self.load(execution_id), self.log(execution_id),
                               self.transitions(execution_id))
            finally:
                self._db.execute("COMMIT")
        except self._errors as exc:
            raise StoreError(f"{self.where}: reading the history of {execution_id!r} "
                             f"failed: {_first_line(exc)}") from exc

    def due_timers(self, now: int) -> list[tuple[str, Timer]]:
        rows = self._query("SELECT execution_id, timer_id, purpose, fire_at FROM timers WHERE "
                           "fire_at <= %s ORDER BY fire_at, timer_id COLLATE \"C\"",
                           (min(max(now, -_BIGINT), _BIGINT - 1),))
        return [(row[0], Timer(row[1], TimerPurpose(row[2]), row[3])) for row in rows]

    def execution_ids(self, *, unfinished: bool = False) -> list[str]:
        query = "SELECT id FROM executions" + (" WHERE NOT final" if unfinished else "")
        return [row[0] for row in self._query(query + " ORDER BY id COLLATE \"C\"", ())]

    def transitions(self, execution_id: str) -> list[TransitionRecord]:
        self._require(execution_id)
        rows = self._query("SELECT execution_id, definition_version, sequence, record, "
                           "attempt, at, duration_ms, tool, outcome FROM transitions WHERE "
                           "execution_id = %s ORDER BY sequence", (execution_id,))
        return [transition_entry(row) for row in rows]

    def close(self) -> None:
        self._db.close()

    # -- sharing executions between workers -----------------------------------------------------

    def claim(self, execution_id: str, *, wait: bool = False) -> bool:
        """Takes the execution for this worker (an advisory lock held by its connection);
        tells whether it got it: False when another worker holds it, or, with `wait`, once
        that worker lets go. Taken again by the same worker it nests; `release` lets go of
        one claim."""
        if wait:
            self._query("SELECT pg_advisory_lock(hashtextextended(%s, 0))",
                        (self._lock_name(execution_id),))
            return True
        row = self._query_one("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))",
                              (self._lock_name(execution_id),))
        return bool(row and row[0])

    def release(self, execution_id: str) -> None:
        """Lets go of one claim of the execution."""
        self._query("SELECT pg_advisory_unlock(hashtextextended(%s, 0))",
                    (self._lock_name(execution_id),))

    def _lock_name(self, execution_id: str) -> str:
        return f"fsmharness execution {self.schema}.{execution_id}"

    # -- reading ---------------------------------------------------------------------------------

    def _query(self, sql: str, args: tuple[object, ...]) -> list[tuple[Any, ...]]:
        """Gives the rows a query selects; a row's columns are as the database gave them."""
        try:
            cursor = self._db.execute(sql, args)
            return cursor.fetchall() if cursor.description is not None else []
        except (self._errors, OverflowError) as exc:
            raise StoreError(f"{self.where}: read failed: {_first_line(exc)}") from exc

    def _query_one(self, sql: str, args: tuple[object, ...]) -> tuple[Any, ...] | None:
        rows = self._query(sql, args)
        return rows[0] if rows else None


def _first_line(exc: BaseException) -> str:
    """Gives the driver's message without its context lines (the SQL it quotes)."""
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
