"""Durable transitions per second: the runtime beside a bare sqlite3 loop, one run per policy.

A durable transition is one event that `decide` accepts and the store commits (its consumed id,
its log row, the new execution record, its timers, its transition record) with no tool to call:
the workflow is a ping-pong between two wait states (`left` --ping--> `right` --pong--> `left`),
each with a one-day timeout timer, so every event cancels one timer and schedules another.

Every benchmarked call handles `EVENTS` (100) events, so each number in the table is the time
per 100 events: divide by 100 for one event, and the ratio of two means in one group is the
per-event ratio. The groups:

- "durable, memory store": `Runtime.deliver` over a `MemoryStore`, beside `decide` alone on the
  same events (no store, no runtime): the in-process cost of durability's bookkeeping.
- "durable, SQLite NORMAL/FULL, commit per event": `Runtime.deliver` over a `SQLiteStore`
  beside the floor of that commit policy: a bare sqlite3 loop with the same pragmas (WAL, the
  same `synchronous`) and one BEGIN IMMEDIATE ... COMMIT per event, writing rows of the same
  shape into the same tables (a consumed id, a log row, the execution update, a timer deleted
  and one inserted, a transition row), with its JSON texts made by string formatting.
- "durable, SQLite NORMAL, group commit of 100": `Runtime.deliver_many` with one event for each
  of 100 executions per transaction, beside the bare loop writing the same rows 100 to a
  transaction.

The aim is the runtime within 2x of the bare loop for each policy; nothing here asserts it (no
wall-clock thresholds): read the ratios off the table.
Run: `python -m pytest tests/benchmarks --benchmark-only --benchmark-group-by=group`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from reference_machine import (
    Accepted,
    Event,
    Execution,
    MemoryStore,
    Runtime,
    SQLiteStore,
    WorkflowDefinition,
    decide,
    load_definition,
    new_execution,
    start_event,
)

#: Events per benchmarked call, in every group (also the group commit's batch size).
EVENTS = 100
DAY_MS = 86_400_000


def ping_pong_definition() -> WorkflowDefinition:
    """Gives two wait states that `ping` and `pong` move between, each timing out to `done`."""
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


def next_event(execution_id: str, number: int) -> Event:
    """Gives the `number`th event (from 0) after the start: ping, pong, ping, ..."""
    return Event(f"{execution_id}/e{number}", "ping" if number % 2 == 0 else "pong")


def state_after(events: int) -> str:
    """Gives the state a run is in after `events` ping-pong events."""
    return "right" if events % 2 else "left"


# -- the runtime contenders ---------------------------------------------------------------------


def runtime_commit_per_event(store: Any) -> Callable[[], str]:
    """Gives a call that delivers the next `EVENTS` events to one execution, one commit each."""
    definition = ping_pong_definition()
    runtime = Runtime(store, [definition], {})
    assert isinstance(runtime.start(definition, "run"), Accepted)
    delivered = [0]

    def hundred_events() -> str:
        first = delivered[0]
        for number in range(first, first + EVENTS):
            decision = runtime.deliver("run", next_event("run", number), number + 1)
            assert isinstance(decision, Accepted), decision
        delivered[0] = first + EVENTS
        execution = store.load("run").execution
        assert execution.state == state_after(delivered[0])
        assert execution.sequence == delivered[0] + 1  # the start, then every event
        return str(execution.state)

    return hundred_events


def runtime_group_commit(store: Any) -> Callable[[], str]:
    """Gives a call that delivers one event to each of `EVENTS` executions in one commit."""
    definition = ping_pong_definition()
    runtime = Runtime(store, [definition], {})
    ids = [f"run{index:03d}" for index in range(EVENTS)]
    for execution_id in ids:
        assert isinstance(runtime.start(definition, execution_id), Accepted)
    rounds = [0]

    def hundred_events() -> str:
        number = rounds[0]
        decisions = runtime.deliver_many(
            [(execution_id, next_event(execution_id, number)) for execution_id in ids],
            number + 1)
        assert len(decisions) == EVENTS
        assert all(isinstance(decision, Accepted) for decision in decisions), decisions
        rounds[0] = number + 1
        state = state_after(rounds[0])
        assert {decision.execution.state for decision in decisions} == {state}  # type: ignore[union-attr]
        assert store.load(ids[-1]).execution.sequence == rounds[0] + 1
        return state

    return hundred_events


def decide_only() -> Callable[[], str]:
    """Gives the same events folded through `decide` with no store and no runtime."""
    definition = ping_pong_definition()
    started = decide(definition, new_execution(definition, "run"), start_event("run"), 0)
    assert isinstance(started, Accepted)
    holder: list[Execution] = [started.execution]
    delivered = [0]

    def hundred_events() -> str:
        execution, first = holder[0], delivered[0]
        for number in range(first, first + EVENTS):
            decision = decide(definition, execution, next_event("run", number), number + 1)
            assert isinstance(decision, Accepted), decision
            execution = decision.execution
        holder[0], delivered[0] = execution, first + EVENTS
        assert execution.state == state_after(delivered[0])
        return str(execution.state)

    return hundred_events


# -- the bare sqlite3 floor ---------------------------------------------------------------------

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
    """The floor: the rows of one accepted ping-pong event written with plain sqlite3."""

    def __init__(self, path: Path, synchronous: str, execution_ids: list[str]) -> None:
        self.db = sqlite3.connect(str(path), isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(f"PRAGMA synchronous={synchronous}")
        self.db.execute("PRAGMA foreign_keys=ON")
        self.db.execute("BEGIN IMMEDIATE")
        for statement in _BARE_SCHEMA:
            self.db.execute(statement)
        for execution_id in execution_ids:
            self.db.execute("INSERT INTO executions VALUES (?, 0, 0, ?)",
                            (execution_id, self._record(execution_id, 0)))
            self.db.execute("INSERT INTO timers VALUES (?, ?, 'wait_timeout', ?)",
                            (execution_id, self._timer(execution_id, 0), DAY_MS))
        self.db.execute("COMMIT")

    @staticmethod
    def _timer(execution_id: str, events: int) -> str:
        return f"{execution_id}/{state_after(events)}/{events // 2 + 1}/after"

    def _record(self, execution_id: str, events: int) -> str:
        visits_right = (events + 1) // 2
        return _RECORD % (execution_id, f"{execution_id}/e{events}", events + 1,
                          state_after(events), DAY_MS + events,
                          self._timer(execution_id, events), events + 1,
                          events + 1 - visits_right, visits_right)

    def write(self, execution_id: str, number: int) -> None:
        """Writes the rows of event `number` (from 0) of one execution, in the open transaction."""
        db = self.db
        kind = "ping" if number % 2 == 0 else "pong"
        event_id = f"{execution_id}/e{number}"
        sequence = number + 2  # the start event is sequence 1
        db.execute("INSERT INTO consumed VALUES (?, ?)", (execution_id, event_id))
        db.execute("INSERT INTO log VALUES (?, ?, ?, 'accepted', ?)",
                   (execution_id, sequence, _EVENT % (event_id, kind), number + 1))
        db.execute("UPDATE executions SET version = ?, final = 0, record = ? WHERE id = ? "
                   "AND version = ?", (number + 1, self._record(execution_id, number + 1),
                                       execution_id, number))
        db.execute("DELETE FROM timers WHERE execution_id = ? AND timer_id = ?",
                   (execution_id, self._timer(execution_id, number)))
        db.execute("INSERT OR REPLACE INTO timers VALUES (?, ?, 'wait_timeout', ?)",
                   (execution_id, self._timer(execution_id, number + 1), DAY_MS + number + 1))
        source, target = state_after(number), state_after(number + 1)
        db.execute("INSERT INTO transitions VALUES (?, ?, '1', ?, 0, ?, 0, '', 'waiting')",
                   (execution_id, sequence, _TRANSITION % (kind, source, target), number + 1))

    def count(self, table: str) -> int:
        return int(self.db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])

    def close(self) -> None:
        self.db.close()


def bare_commit_per_event(bare: BareLoop) -> Callable[[], int]:
    """Gives a call that writes the next `EVENTS` events of one execution, one commit each."""
    written = [0]

    def hundred_events() -> int:
        db, first = bare.db, written[0]
        for number in range(first, first + EVENTS):
            db.execute("BEGIN IMMEDIATE")
            bare.write("run", number)
            db.execute("COMMIT")
        written[0] = first + EVENTS
        assert bare.count("consumed") == written[0]
        return written[0]

    return hundred_events


def bare_group_commit(bare: BareLoop, ids: list[str]) -> Callable[[], int]:
    """Gives a call that writes one event of each of `EVENTS` executions in one commit."""
    rounds = [0]

    def hundred_events() -> int:
        db, number = bare.db, rounds[0]
        db.execute("BEGIN IMMEDIATE")
        for execution_id in ids:
            bare.write(execution_id, number)
        db.execute("COMMIT")
        rounds[0] = number + 1
        assert bare.count("consumed") == rounds[0] * EVENTS
        return rounds[0] * EVENTS

    return hundred_events


# -- fixtures -----------------------------------------------------------------------------------


@pytest.fixture
def sqlite_normal(tmp_path: Path) -> Iterator[SQLiteStore]:
    store = SQLiteStore(tmp_path / "store.db", synchronous="NORMAL")
    yield store
    store.close()


@pytest.fixture
def sqlite_full(tmp_path: Path) -> Iterator[SQLiteStore]:
    store = SQLiteStore(tmp_path / "store.db", synchronous="FULL")
    yield store
    store.close()


def bare(tmp_path: Path, synchronous: str, ids: list[str]) -> BareLoop:
    return BareLoop(tmp_path / "bare.db", synchronous, ids)


def run(benchmark: Any, call: Callable[[], Any], rounds: int) -> Any:
    """Runs `call` (`EVENTS` events) for a fixed number of rounds after one warm-up round."""
    benchmark.extra_info["events_per_round"] = EVENTS
    return benchmark.pedantic(call, rounds=rounds, iterations=1, warmup_rounds=1)


# -- 1. memory store ----------------------------------------------------------------------------

MEMORY = "durable, memory store (per 100 events)"


@pytest.mark.benchmark(group=MEMORY)
def test_decide_only(benchmark: Any) -> None:
    """The floor in memory: `decide` alone folds the same events."""
    assert run(benchmark, decide_only(), rounds=200) in ("left", "right")


@pytest.mark.benchmark(group=MEMORY)
def test_runtime_memory_store(benchmark: Any) -> None:
    """`Runtime.deliver` over a `MemoryStore`: load, decide, commit per event."""
    store = MemoryStore()
    assert run(benchmark, runtime_commit_per_event(store), rounds=200) in ("left", "right")
    assert len(store.log("run")) == len(store.transitions("run")) == store.load("run").version
    assert len(store.due_timers(10 * DAY_MS)) == 1


# -- 2. SQLite NORMAL, commit per event ---------------------------------------------------------

NORMAL = "durable, SQLite NORMAL, commit per event (per 100 events)"


@pytest.mark.benchmark(group=NORMAL)
def test_bare_sqlite_normal(benchmark: Any, tmp_path: Path) -> None:
    """The floor: one BEGIN IMMEDIATE ... COMMIT per event, synchronous NORMAL."""
    loop = bare(tmp_path, "NORMAL", ["run"])
    written = run(benchmark, bare_commit_per_event(loop), rounds=30)
    assert loop.count("log") == loop.count("transitions") == written
    assert loop.count("timers") == 1
    loop.close()


@pytest.mark.benchmark(group=NORMAL)
def test_runtime_sqlite_normal(benchmark: Any, sqlite_normal: SQLiteStore) -> None:
    """`Runtime.deliver` over `SQLiteStore(synchronous="NORMAL")`."""
    run(benchmark, runtime_commit_per_event(sqlite_normal), rounds=30)
    events = sqlite_normal.load("run").version
    assert len(sqlite_normal.log("run")) == len(sqlite_normal.transitions("run")) == events
    assert len(sqlite_normal.due_timers(10 * DAY_MS)) == 1


# -- 3. SQLite FULL, commit per event -----------------------------------------------------------

FULL = "durable, SQLite FULL, commit per event (per 100 events)"


@pytest.mark.benchmark(group=FULL)
def test_bare_sqlite_full(benchmark: Any, tmp_path: Path) -> None:
    """The floor: one BEGIN IMMEDIATE ... COMMIT per event, synchronous FULL (fsync each)."""
    loop = bare(tmp_path, "FULL", ["run"])
    written = run(benchmark, bare_commit_per_event(loop), rounds=10)
    assert loop.count("log") == loop.count("transitions") == written
    loop.close()


@pytest.mark.benchmark(group=FULL)
def test_runtime_sqlite_full(benchmark: Any, sqlite_full: SQLiteStore) -> None:
    """`Runtime.deliver` over `SQLiteStore(synchronous="FULL")`."""
    run(benchmark, runtime_commit_per_event(sqlite_full), rounds=10)
    events = sqlite_full.load("run").version
    assert len(sqlite_full.log("run")) == len(sqlite_full.transitions("run")) == events


# -- 4. SQLite NORMAL, group commit of 100 ------------------------------------------------------

GROUP = "durable, SQLite NORMAL, group commit of 100 (per 100 events)"
GROUP_IDS = [f"run{index:03d}" for index in range(EVENTS)]


@pytest.mark.benchmark(group=GROUP)
def test_bare_sqlite_group_commit(benchmark: Any, tmp_path: Path) -> None:
    """The floor: one event for each of 100 executions per BEGIN IMMEDIATE ... COMMIT."""
    loop = bare(tmp_path, "NORMAL", GROUP_IDS)
    written = run(benchmark, bare_group_commit(loop, GROUP_IDS), rounds=50)
    assert loop.count("log") == loop.count("transitions") == written
    assert loop.count("timers") == EVENTS
    loop.close()


@pytest.mark.benchmark(group=GROUP)
def test_runtime_sqlite_group_commit(benchmark: Any, sqlite_normal: SQLiteStore) -> None:
    """`Runtime.deliver_many` over `SQLiteStore(synchronous="NORMAL")`, 100 executions."""
    state = run(benchmark, runtime_group_commit(sqlite_normal), rounds=50)
    versions = {sqlite_normal.load(execution_id).version for execution_id in GROUP_IDS}
    assert len(versions) == 1  # every execution took every round's event
    assert len(sqlite_normal.due_timers(10 * DAY_MS)) == EVENTS
    assert {sqlite_normal.load(i).execution.state for i in GROUP_IDS} == {state}


# -- the floor writes what the store writes -----------------------------------------------------


def test_bare_loop_writes_the_rows_the_store_writes(tmp_path: Path) -> None:
    """After the same events, the bare loop and the store hold the same rows per table, with
    the same keys and JSON texts of about the same size: the floor is a like-for-like one."""
    store = SQLiteStore(tmp_path / "store.db", synchronous="NORMAL")
    loop = bare(tmp_path, "NORMAL", ["run"])
    runtime_commit_per_event(store)()
    bare_commit_per_event(loop)()
    db = sqlite3.connect(store.path)  # a reader of the store's file, to compare row by row
    query = "SELECT * FROM timers"
    assert db.execute(query).fetchall() == loop.db.execute(query).fetchall()
    query = "SELECT * FROM consumed WHERE event_id != 'run/started' ORDER BY 1, 2"
    assert db.execute(query).fetchall() == loop.db.execute(query).fetchall()
    # the store also logs the start event (sequence 1) and its transition; the loop starts after
    for table, text in (("log", "event"), ("transitions", "record")):
        query = f"SELECT sequence, length({text}) FROM {table} WHERE sequence > 1 ORDER BY 1"
        ours, floor = db.execute(query).fetchall(), loop.db.execute(query).fetchall()
        assert [row[0] for row in ours] == [row[0] for row in floor], table
        assert all(abs(a[1] - b[1]) <= 0.1 * a[1] for a, b in zip(ours, floor, strict=True))
    query = "SELECT version, length(record) FROM executions"
    (version, size), (bare_version, bare_size) = (db.execute(query).fetchone(),
                                                 loop.db.execute(query).fetchone())
    assert version == EVENTS + 1 and bare_version == EVENTS  # the store also counts the start
    assert abs(size - bare_size) <= 0.1 * size
    db.close()
    store.close()
    loop.close()
