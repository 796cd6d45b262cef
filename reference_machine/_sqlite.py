"""The SQLite event store: the embedded default (WAL mode, `synchronous` configurable).

One transaction per commit: the consumed-id insert (a primary key, so the database itself
refuses a duplicate), the log append, the execution update guarded by its version, the outbox,
timers and the transition record. Driver errors are wrapped as `StoreError`s.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

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

#: What a commit checks, in one read: the execution's version, the log's next sequence, when
#: its last transition was, and whether the event was consumed already.
_WRITE_STATE = (
    "SELECT version, "
    "(SELECT COALESCE(MAX(sequence), 0) + 1 FROM log WHERE execution_id = ?1), "
    "(SELECT at FROM transitions WHERE execution_id = ?1 ORDER BY sequence DESC LIMIT 1), "
    "EXISTS (SELECT 1 FROM consumed WHERE execution_id = ?1 AND event_id = ?2) "
    "FROM executions WHERE id = ?1")
Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS executions (
    id TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    final INTEGER NOT NULL,
    record TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS log (
    execution_id TEXT NOT NULL REFERENCES executions(id),
    sequence INTEGER NOT NULL,
    event TEXT NOT NULL,
    decision TEXT NOT NULL,
    at INTEGER NOT NULL,
    PRIMARY KEY (execution_id, sequence)
);
CREATE TABLE IF NOT EXISTS consumed (
    execution_id TEXT NOT NULL,
    event_id TEXT NOT NULL,
    PRIMARY KEY (execution_id, event_id)
);
CREATE TABLE IF NOT EXISTS outbox (
    execution_id TEXT NOT NULL,
    command_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    command TEXT NOT NULL,
    result TEXT,
    delivered INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (execution_id, command_id)
);
CREATE TABLE IF NOT EXISTS timers (
    execution_id TEXT NOT NULL,
    timer_id TEXT NOT NULL,
    purpose TEXT NOT NULL,
    fire_at INTEGER NOT NULL,
    PRIMARY KEY (execution_id, timer_id)
);
CREATE INDEX IF NOT EXISTS timers_due ON timers (fire_at, timer_id);
CREATE TABLE IF NOT EXISTS transitions (
    execution_id TEXT NOT NULL,
    sequence INTEGER NOT NULL,
    definition_version TEXT NOT NULL,
    record TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    at INTEGER NOT NULL,
    duration_ms INTEGER NOT NULL,
    tool TEXT NOT NULL,
    outcome TEXT NOT NULL,
    PRIMARY KEY (execution_id, sequence)
);
"""


class SQLiteStore:
    """An event store in one SQLite file (or `":memory:"`)."""

    def __init__(self, path: str | Path, *, synchronous: Synchronous = "NORMAL",
                 timeout_s: float = 30.0) -> None:
        if synchronous not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            msg = f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}"
            raise ValueError(msg)
        self.path = str(path)
        try:
            # autocommit mode: transactions are opened explicitly with BEGIN IMMEDIATE
            self._db = sqlite3.connect(self.path, timeout=timeout_s, isolation_level=None)
            self._refuse_foreign()  # before any pragma: a refused file is left as it was
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={synchronous}")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._open_schema()
        except StoreError:
            self._close_quietly()  # a refused file is left closed, as it was found
            raise
        except sqlite3.DatabaseError as exc:
            self._close_quietly()
            raise StoreError(f"{self.path}: not a usable fsmharness store: {exc}") from exc

    def _close_quietly(self) -> None:
        db = getattr(self, "_db", None)
        if db is not None:
            db.close()

    def _tables(self) -> set[str]:
        return {row[0] for row in self._db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}

    def _refuse_foreign(self) -> None:
        tables = self._tables()
        if tables and "schema_version" not in tables:
            raise StoreError(f"{self.path}: holds tables but no schema_version; it is not an "
                             "fsmharness store")
        if tables:
            row = self._db.execute("SELECT version FROM schema_version").fetchone()
            if row is not None and row[0] != SCHEMA_VERSION:
                newer = "a newer" if row[0] > SCHEMA_VERSION else "an unknown"
                raise StoreError(f"{self.path}: schema version {row[0]} is {newer} schema; "
                                 f"this fsmharness reads version {SCHEMA_VERSION}")

    def _open_schema(self) -> None:
        tables = self._tables()
        with self._transaction():
            if not tables:  # executescript would commit; run the statements one by one
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        self._db.execute(statement)
            row = self._db.execute("SELECT version FROM schema_version").fetchone()
            if row is None:
                self._db.execute("INSERT INTO schema_version VALUES (?)", (SCHEMA_VERSION,))
            elif row[0] != SCHEMA_VERSION:
                newer = "a newer" if row[0] > SCHEMA_VERSION else "an unknown"
                raise StoreError(f"{self.path}: schema version {row[0]} is {newer} schema; "
                                 f"this fsmharness reads version {SCHEMA_VERSION}")

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self._db.execute("BEGIN IMMEDIATE")
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
            with self._transaction():
                self._db.execute(
                    "INSERT INTO executions (id, version, final, record) VALUES (?, 0, ?, ?)",
                    (execution.id, execution.status == Status.FINAL,
                     encode_execution(execution)))
        except sqlite3.IntegrityError as exc:
            raise ExecutionExistsError(execution.id) from exc
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: create {execution.id!r} failed: {exc}") from exc

    def load(self, execution_id: str) -> StoredExecution:
        row = self._query_one("SELECT record, version FROM executions WHERE id = ?",
                              (execution_id,))
        if row is None:
            raise UnknownExecutionError(execution_id)
        return StoredExecution(decode_execution(row[0]), row[1])

    def commit(self, commit: Commit) -> int:
        try:
            with self._transaction():
                return self._write(commit)
        except (TypeError, ValueError, OverflowError) as exc:  # not storable exactly: refused
            raise StoreError(f"{self.path}: event {commit.event.id!r} cannot be stored: "
                             f"{exc}") from exc
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: commit of event {commit.event.id!r} failed: "
                             f"{exc}") from exc

    def commit_many(self, commits: Sequence[Commit]) -> list[int | StoreError]:
        check_commits(commits)
        results: list[int | StoreError] = []
        try:
            with self._transaction():
                for commit in commits:
                    # `_write` refuses before its first write or not at all: a refused
                    # commit leaves nothing to roll back, so no savepoint is needed for it
                    try:
                        results.append(self._write(commit))
                    except StoreError as exc:
                        results.append(exc)
                    except (TypeError, ValueError, OverflowError) as exc:  # not storable
                        results.append(StoreError(f"{self.path}: event {commit.event.id!r} "
                                                  f"cannot be stored: {exc}"))
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: group commit of {len(commits)} events failed: "
                             f"{exc}") from exc
        return results

    def _write(self, commit: Commit) -> int:
        """Writes one commit in the open transaction. Every refusal (an unknown execution, a
        duplicate event, a version conflict, a record JSON cannot hold) is raised before the
        first write: one read checks, every text is encoded, then the rows are written."""
        db = self._db
        execution_id, event = commit.execution_id, commit.event
        row = db.execute(_WRITE_STATE, (execution_id, event.id)).fetchone()
        if row is None:
            raise UnknownExecutionError(execution_id)
        version, sequence, entered_at, consumed = row
        if consumed:
            raise DuplicateEventError(execution_id, event.id)
        # every commit checks the version, rejections too: the log's order is the order in
        # which decisions were made on the state they saw, so replay decides them alike
        if version != commit.expected_version:
            raise ConflictError(execution_id, commit.expected_version, version)
        texts = encode_commit(commit, sequence, entered_at)
        execution = commit.execution
        db.execute("INSERT INTO consumed (execution_id, event_id) VALUES (?, ?)",
                   (execution_id, event.id))
        db.execute("INSERT INTO log VALUES (?, ?, ?, ?, ?)",
                   (execution_id, sequence, texts.event, commit.decision, commit.at))
        if event.answers and commit.decision != "rejected":
            # an answer settles its command unless it was rejected (forged, malformed): then
            # the command stays pending, for recovery to finish
            db.execute("UPDATE outbox SET delivered = 1 WHERE execution_id = ? AND "
                       "command_id = ?", (execution_id, event.answers))
        if event.type == TIMER_FIRED and event.source in _TIMER_SOURCES:
            # a fired timer is gone, whatever decide made of it, a rejection too (its firing's
            # id is consumed: firing it again could only be refused as a duplicate, at every
            # tick); a forged firing (from a human or an agent) removes nothing
            db.execute("DELETE FROM timers WHERE execution_id = ? AND timer_id = ?",
                       (execution_id, event.answers))
        if execution is None:
            return int(version)
        new_version = version + 1
        db.execute("UPDATE executions SET version = ?, final = ?, record = ? WHERE id = ?",
                   (new_version, execution.status == Status.FINAL, texts.execution,
                    execution_id))
        for command in commit.commands:
            if isinstance(command, ScheduleTimer):
                db.execute("INSERT OR REPLACE INTO timers VALUES (?, ?, ?, ?)",
                           (execution_id, command.timer_id, str(command.purpose),
                            command.fire_at))
            elif isinstance(command, CancelTimer):
                db.execute("DELETE FROM timers WHERE execution_id = ? AND timer_id = ?",
                           (execution_id, command.timer_id))
        if texts.outbox:
            db.executemany("INSERT OR IGNORE INTO outbox (execution_id, command_id, position, "
                           "command) VALUES (?, ?, ?, ?)", texts.outbox)
        if texts.transition is not None:
            db.execute("INSERT INTO transitions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       texts.transition)
        return int(new_version)

    def record_result(self, execution_id: str, command_id: str, result: Event) -> Event:
        try:
            with self._transaction():
                updated = self._db.execute(
                    "UPDATE outbox SET result = COALESCE(result, ?) WHERE execution_id = ? AND "
                    "command_id = ?", (encode_event(result), execution_id, command_id))
                if updated.rowcount != 1:
                    raise StoreError(f"execution {execution_id!r} has no outbox command "
                                     f"{command_id!r}")
                (text,) = self._db.execute(
                    "SELECT result FROM outbox WHERE execution_id = ? AND command_id = ?",
                    (execution_id, command_id)).fetchone()
            kept = decode_event(text)
            return result if kept == result else kept
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: recording the result of {command_id!r} failed: "
                             f"{exc}") from exc

    def _require(self, execution_id: str) -> None:
        if self._query_one("SELECT 1 FROM executions WHERE id = ?", (execution_id,)) is None:
            raise UnknownExecutionError(execution_id)

    def pending(self, execution_id: str | None = None) -> list[OutboxEntry]:
        if execution_id is not None:
            self._require(execution_id)
        where, args = ("AND execution_id = ?", (execution_id,)) if execution_id else ("", ())
        rows = self._query(f"SELECT execution_id, command, result FROM outbox WHERE delivered = "
                           f"0 {where} ORDER BY execution_id, position", args)
        return [outbox_entry(row) for row in rows]

    def outbox(self, execution_id: str) -> list[OutboxEntry]:
        self._require(execution_id)
        rows = self._query("SELECT execution_id, command, result FROM outbox WHERE "
                           "execution_id = ? ORDER BY position", (execution_id,))
        return [outbox_entry(row) for row in rows]

    def log(self, execution_id: str) -> list[LogEntry]:
        self._require(execution_id)
        rows = self._query("SELECT sequence, event, decision, at FROM log WHERE "
                           "execution_id = ? ORDER BY sequence", (execution_id,))
        return [log_entry(row) for row in rows]

    def history(self, execution_id: str) -> History:
        try:
            self._db.execute("BEGIN")  # one read snapshot (WAL) for all three reads
            try:
                return History(self.load(execution_id), self.log(execution_id),
                               self.transitions(execution_id))
            finally:
                self._db.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: reading the history of {execution_id!r} failed: "
                             f"{exc}") from exc

    def due_timers(self, now: int) -> list[tuple[str, Timer]]:
        rows = self._query("SELECT execution_id, timer_id, purpose, fire_at FROM timers WHERE "
                           "fire_at <= ? ORDER BY fire_at, timer_id", (now,))
        return [(row[0], Timer(row[1], TimerPurpose(row[2]), row[3])) for row in rows]

    def execution_ids(self, *, unfinished: bool = False) -> list[str]:
        query = "SELECT id FROM executions" + (" WHERE final = 0" if unfinished else "")
        return [row[0] for row in self._query(query + " ORDER BY id", ())]

    def transitions(self, execution_id: str) -> list[TransitionRecord]:
        self._require(execution_id)
        rows = self._query("SELECT execution_id, definition_version, sequence, record, "
                           "attempt, at, duration_ms, tool, outcome FROM transitions WHERE "
                           "execution_id = ? ORDER BY sequence", (execution_id,))
        return [transition_entry(row) for row in rows]

    def close(self) -> None:
        self._db.close()

    # -- reading ---------------------------------------------------------------------------------

    def _query(self, sql: str, args: tuple[object, ...]) -> list[tuple[Any, ...]]:
        """Gives the rows a query selects; a row's columns are as the database gave them."""
        try:
            return self._db.execute(sql, args).fetchall()
        except (sqlite3.DatabaseError, OverflowError) as exc:
            raise StoreError(f"{self.path}: read failed: {exc}") from exc

    def _query_one(self, sql: str, args: tuple[object, ...]) -> tuple[Any, ...] | None:
        rows = self._query(sql, args)
        return rows[0] if rows else None
