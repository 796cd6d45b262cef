"""The durable groups of `fsmharness bench` (`--only durable`): the reference runtime over a
store beside a bare loop that writes the same rows under the same commit policy, a commit per
event and group commit of 100, on the ping-pong workflow (every event cancels one timer and
schedules another): over SQLite (synchronous NORMAL and FULL) beside plain sqlite3, and over
PostgreSQL (when `FSMHARNESS_POSTGRES_DSN` names a server) beside plain psycopg.
"""

from __future__ import annotations

import contextlib
import sqlite3
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from harness.bench.timing import Contender, Group, Maker
from harness.errors import HarnessError
from reference_machine import (
    Accepted,
    Event,
    Runtime,
    SQLiteStore,
    Synchronous,
    WorkflowDefinition,
    load_definition,
)

__all__ = [
    "BATCH",
    "DAY_MS",
    "POSTGRES_DSN_VARIABLE",
    "BareLoop",
    "bare_commit_per_event",
    "bare_group_commit",
    "durable_groups",
    "ping_pong",
    "ping_pong_event",
    "ping_pong_state",
    "postgres_groups",
    "runtime_commit_per_event",
    "runtime_group_commit",
]

DAY_MS = 86_400_000


def ping_pong() -> WorkflowDefinition:
    """Gives two wait states that `ping` and `pong` move between, each timing out to `done`:
    every event cancels one timer and schedules another."""
    wait = {"type": "wait", "after": {"delay": "1d", "target": "done"}}
    return load_definition({
        "name": "ping-pong", "context": {"n": 0},
        "events": {"ping": {}, "pong": {}},
        "states": {
            "left": {**wait, "initial": True, "on": {"ping": "right"}},
            "right": {**wait, "on": {"pong": "left"}},
            "done": {"type": "final", "outcome": "success"},
        },
    })


def ping_pong_event(execution_id: str, number: int) -> Event:
    """Gives the `number`th event (from 0) after the start: ping, pong, ping, ..."""
    return Event(f"{execution_id}/e{number}", "ping" if number % 2 == 0 else "pong")


def ping_pong_state(events: int) -> str:
    """Gives the state a run is in after `events` ping-pong events."""
    return "right" if events % 2 else "left"


# The tables the store's transaction writes, with the same keys and the timers' index, so each
# bare statement maintains the same b-trees as the store's.
_BARE_SCHEMA = (
    "CREATE TABLE executions (id TEXT PRIMARY KEY, version INTEGER NOT NULL, "
    "final INTEGER NOT NULL, record TEXT NOT NULL)",
    "CREATE TABLE log (execution_id TEXT NOT NULL REFERENCES executions(id), "
    "sequence INTEGER NOT NULL, event TEXT NOT NULL, decision TEXT NOT NULL, "
    "at INTEGER NOT NULL, PRIMARY KEY (execution_id, sequence))",
    "CREATE TABLE consumed (execution_id TEXT NOT NULL, event_id TEXT NOT NULL, "
    "PRIMARY KEY (execution_id, event_id))",
    "CREATE TABLE timers (execution_id TEXT NOT NULL, timer_id TEXT NOT NULL, "
    "purpose TEXT NOT NULL, fire_at INTEGER NOT NULL, PRIMARY KEY (execution_id, timer_id))",
    "CREATE INDEX timers_due ON timers (fire_at, timer_id)",
    "CREATE TABLE transitions (execution_id TEXT NOT NULL, sequence INTEGER NOT NULL, "
    "definition_version TEXT NOT NULL, record TEXT NOT NULL, attempt INTEGER NOT NULL, "
    "at INTEGER NOT NULL, duration_ms INTEGER NOT NULL, tool TEXT NOT NULL, "
    "outcome TEXT NOT NULL, PRIMARY KEY (execution_id, sequence))",
)

# JSON texts of the store's sizes, made by formatting instead of encoding records.
_EVENT = '{"answers":"","id":"%s","payload":{},"source":"system","type":"%s"}'
_RECORD = (
    '{"after_compensation":"","answered":"","approval":null,"approved":[],"attempt":0,'
    '"compensating":[],"completed":[],"context":{"n":0},"cost":0.0,"definition":"ping-pong",'
    '"effect":null,"exceeded":"","failures":{},"id":"%s","last_event_id":"%s","outcome":null,'
    '"sequence":%d,"started_at":0,"state":"%s","status":"waiting","timers":[{"fire_at":%d,'
    '"id":"%s","purpose":"wait_timeout"}],"transitions":%d,"version":"1",'
    '"visits":{"left":%d,"right":%d}}'
)
_TRANSITION = '{"event":"%s","forced":"","source":"%s","target":"%s"}'


class BareLoop:
    """The durable floor: the rows of one accepted ping-pong event (a consumed id, a log row,
    the execution update, a timer deleted and one inserted, a transition row) written with
    plain sqlite3 under the same pragmas as `SQLiteStore` (or, made by `on_postgres`, with
    plain psycopg into a schema of a PostgreSQL database, as `PostgresStore` writes them)."""

    def __init__(self, path: Path, synchronous: Synchronous, execution_ids: Sequence[str],
                 *, db: Any = None) -> None:
        self.postgres = db is not None
        if db is None:
            db = sqlite3.connect(str(path), isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(f"PRAGMA synchronous={synchronous}")
            db.execute("PRAGMA foreign_keys=ON")
        self.db = db
        self.begin = "BEGIN" if self.postgres else "BEGIN IMMEDIATE"
        self.db.execute(self.begin)
        for statement in _BARE_SCHEMA:
            self.db.execute(statement)
        for execution_id in execution_ids:
            self.execute("INSERT INTO executions VALUES (?, 0, 0, ?)",
                         (execution_id, self._record(execution_id, 0)))
            self.execute("INSERT INTO timers VALUES (?, ?, 'wait_timeout', ?)",
                         (execution_id, self._timer(execution_id, 0), DAY_MS))
        self.db.execute("COMMIT")
        self.upsert_timer = (
            "INSERT INTO timers VALUES (%s, %s, 'wait_timeout', %s) ON CONFLICT "
            "(execution_id, timer_id) DO UPDATE SET fire_at = EXCLUDED.fire_at"
            if self.postgres else "INSERT OR REPLACE INTO timers VALUES (?, ?, 'wait_timeout', ?)")

    @classmethod
    def on_postgres(cls, dsn: str, schema: str, execution_ids: Sequence[str]) -> BareLoop:
        """Gives the loop over a new schema `schema` of the PostgreSQL database `dsn`."""
        import psycopg

        db = psycopg.connect(dsn, autocommit=True)
        db.execute(f"CREATE SCHEMA {schema}")
        db.execute(f"SET search_path TO {schema}")
        return cls(Path(), "NORMAL", execution_ids, db=db)

    def execute(self, sql: str, args: tuple[Any, ...]) -> Any:
        """Runs one statement written with `?` placeholders, in the driver's style."""
        return self.db.execute(sql.replace("?", "%s") if self.postgres else sql, args)

    @staticmethod
    def _timer(execution_id: str, events: int) -> str:
        return f"{execution_id}/{ping_pong_state(events)}/{events // 2 + 1}/after"

    def _record(self, execution_id: str, events: int) -> str:
        visits_right = (events + 1) // 2
        return _RECORD % (execution_id, f"{execution_id}/e{events}", events + 1,
                          ping_pong_state(events), DAY_MS + events,
                          self._timer(execution_id, events), events + 1,
                          events + 1 - visits_right, visits_right)

    def write(self, execution_id: str, number: int) -> None:
        """Writes the rows of event `number` (from 0) of one execution, in the open
        transaction (on PostgreSQL in one pipeline: the writes need no answer)."""
        if self.postgres:
            with self.db.pipeline():
                self._write(execution_id, number)
        else:
            self._write(execution_id, number)

    def _write(self, execution_id: str, number: int) -> None:
        execute = self.execute
        kind = "ping" if number % 2 == 0 else "pong"
        event_id = f"{execution_id}/e{number}"
        sequence = number + 2  # the start event is sequence 1
        execute("INSERT INTO consumed VALUES (?, ?)", (execution_id, event_id))
        execute("INSERT INTO log VALUES (?, ?, ?, 'accepted', ?)",
                (execution_id, sequence, _EVENT % (event_id, kind), number + 1))
        execute("UPDATE executions SET version = ?, final = 0, record = ? WHERE id = ? "
                "AND version = ?", (number + 1, self._record(execution_id, number + 1),
                                    execution_id, number))
        execute("DELETE FROM timers WHERE execution_id = ? AND timer_id = ?",
                (execution_id, self._timer(execution_id, number)))
        self.db.execute(self.upsert_timer, (execution_id, self._timer(execution_id, number + 1),
                                            DAY_MS + number + 1))
        source, target = ping_pong_state(number), ping_pong_state(number + 1)
        execute("INSERT INTO transitions VALUES (?, ?, '1', ?, 0, ?, 0, '', 'waiting')",
                (execution_id, sequence, _TRANSITION % (kind, source, target), number + 1))

    def count(self, table: str) -> int:
        return int(self.db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])

    def close(self) -> None:
        self.db.close()


#: Events per call in the durable groups (also the group commit's batch size).
BATCH = 100


def bare_commit_per_event(bare: BareLoop) -> Callable[[], int]:
    """Gives a call that writes the next `BATCH` events of one execution, one commit each."""
    written = [0]

    def batch() -> int:
        db, first = bare.db, written[0]
        for number in range(first, first + BATCH):
            db.execute(bare.begin)
            bare.write("run", number)
            db.execute("COMMIT")
        written[0] = first + BATCH
        return written[0]

    return batch


def bare_group_commit(bare: BareLoop, ids: Sequence[str]) -> Callable[[], int]:
    """Gives a call that writes one event of each of `BATCH` executions in one commit."""
    rounds = [0]

    def batch() -> int:
        db, number = bare.db, rounds[0]
        db.execute(bare.begin)
        for execution_id in ids:
            bare.write(execution_id, number)
        db.execute("COMMIT")
        rounds[0] = number + 1
        return rounds[0] * len(ids)

    return batch


def runtime_commit_per_event(store: Any) -> Callable[[], str]:
    """Gives a call that delivers the next `BATCH` ping-pong events to one execution through
    the runtime, one commit each."""
    definition = ping_pong()
    runtime = Runtime(store, [definition], {})
    if not isinstance(runtime.start(definition, "run"), Accepted):
        raise HarnessError("ping-pong: the start was not accepted")
    delivered = [0]

    def batch() -> str:
        first = delivered[0]
        decision: Any = None
        for number in range(first, first + BATCH):
            decision = runtime.deliver("run", ping_pong_event("run", number), number + 1)
        delivered[0] = first + BATCH
        return str(decision.execution.state)

    return batch


def runtime_group_commit(store: Any, ids: Sequence[str]) -> Callable[[], str]:
    """Gives a call that delivers one event to each of `BATCH` executions in one commit."""
    definition = ping_pong()
    runtime = Runtime(store, [definition], {})
    for execution_id in ids:
        runtime.start(definition, execution_id)
    rounds = [0]

    def batch() -> str:
        number = rounds[0]
        decisions = runtime.deliver_many(
            [(execution_id, ping_pong_event(execution_id, number)) for execution_id in ids],
            number + 1)
        rounds[0] = number + 1
        return str(decisions[-1].execution.state)  # type: ignore[union-attr]

    return batch


def _durable(synchronous: Synchronous, grouped: bool) -> tuple[Maker, Maker]:
    """Gives the makers of the bare loop and of the runtime for one commit policy."""
    ids = [f"run{index:03d}" for index in range(BATCH)] if grouped else ["run"]

    def folder(stack: contextlib.ExitStack) -> Path:
        return Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="fsmbench-")))

    def bare(stack: contextlib.ExitStack) -> Callable[[], Any]:
        loop = BareLoop(folder(stack) / "bare.db", synchronous, ids)
        stack.callback(loop.close)
        return bare_group_commit(loop, ids) if grouped else bare_commit_per_event(loop)

    def ours(stack: contextlib.ExitStack) -> Callable[[], Any]:
        store = SQLiteStore(folder(stack) / "store.db", synchronous=synchronous)
        stack.callback(store.close)
        return runtime_group_commit(store, ids) if grouped else runtime_commit_per_event(store)

    return bare, ours


def durable_groups() -> list[Group]:
    """Gives the runtime over SQLite beside the bare loop, per commit policy."""
    groups = []
    policies: tuple[tuple[str, Synchronous, bool], ...] = (
            ("durable: SQLite NORMAL, commit per event", "NORMAL", False),
            ("durable: SQLite FULL, commit per event", "FULL", False),
            ("durable: SQLite NORMAL, group commit of 100", "NORMAL", True))
    for title, synchronous, grouped in policies:
        bare, ours = _durable(synchronous, grouped)
        groups.append(Group(f"{title} (ping-pong)", (
            Contender("bare sqlite3 loop (floor)", bare, BATCH, "event"),
            Contender("reference runtime", ours, BATCH, "event"))))
    return groups


#: Where the PostgreSQL groups run (a libpq connection string); without it they are skipped
POSTGRES_DSN_VARIABLE = "FSMHARNESS_POSTGRES_DSN"


def postgres_groups(dsn: str | None) -> list[Group]:
    """Gives the runtime over PostgreSQL beside a bare psycopg loop writing the same rows, a
    commit per event and group commit of 100, each contender in a schema of its own (dropped
    after); with no `dsn`, the groups with a note saying what they need."""
    titles = (("durable: PostgreSQL, commit per event (ping-pong)", False),
              ("durable: PostgreSQL, group commit of 100 (ping-pong)", True))
    if not dsn:
        note = (f"skipped: no PostgreSQL server (set {POSTGRES_DSN_VARIABLE} to a connection "
                "string, and install the postgres extra)")
        return [Group(title, (), note=note) for title, _ in titles]
    return [Group(title, (Contender("bare psycopg loop (floor)",
                                    _postgres_maker(dsn, grouped, bare=True), BATCH, "event"),
                          Contender("reference runtime", _postgres_maker(dsn, grouped, bare=False),
                                    BATCH, "event")))
            for title, grouped in titles]


def _postgres_maker(dsn: str, grouped: bool, *, bare: bool) -> Maker:
    ids = [f"run{index:03d}" for index in range(BATCH)] if grouped else ["run"]

    def make(stack: contextlib.ExitStack) -> Callable[[], Any]:
        import uuid

        import psycopg

        from reference_machine import PostgresStore

        schema = f"fsmbench_{uuid.uuid4().hex[:12]}"

        def drop() -> None:
            with psycopg.connect(dsn, autocommit=True) as db:
                db.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")

        stack.callback(drop)
        if bare:
            loop = BareLoop.on_postgres(dsn, schema, ids)
            stack.callback(loop.close)
            return bare_group_commit(loop, ids) if grouped else bare_commit_per_event(loop)
        store = PostgresStore(dsn, schema=schema)
        stack.callback(store.close)
        return runtime_group_commit(store, ids) if grouped else runtime_commit_per_event(store)

    return make
