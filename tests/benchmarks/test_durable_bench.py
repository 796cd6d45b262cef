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
Run: `python -m pytest -n 0 tests/benchmarks --benchmark-only --benchmark-group-by=group`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.bench.durable import (
    BATCH,
    DAY_MS,
    BareLoop,
    bare_commit_per_event,
    bare_group_commit,
    ping_pong,
    ping_pong_event,
    ping_pong_state,
    runtime_commit_per_event,
    runtime_group_commit,
)
from reference_machine import (
    Accepted,
    Execution,
    MemoryStore,
    SQLiteStore,
    decide,
    new_execution,
    start_event,
)

EVENTS = BATCH


def decide_only() -> Callable[[], str]:
    """Gives the same events folded through `decide` with no store and no runtime."""
    definition = ping_pong()
    started = decide(definition, new_execution(definition, "run"), start_event("run"), 0)
    assert isinstance(started, Accepted)
    holder: list[Execution] = [started.execution]
    delivered = [0]

    def hundred_events() -> str:
        execution, first = holder[0], delivered[0]
        for number in range(first, first + EVENTS):
            decision = decide(definition, execution, ping_pong_event("run", number), number + 1)
            assert isinstance(decision, Accepted), decision
            execution = decision.execution
        holder[0], delivered[0] = execution, first + EVENTS
        assert execution.state == ping_pong_state(delivered[0])
        return str(execution.state)

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
    state = run(benchmark, runtime_group_commit(sqlite_normal, GROUP_IDS), rounds=50)
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


# -- PostgreSQL: the same floor against a real server -------------------------------------------


def test_the_postgres_groups_measure_the_store_beside_the_bare_loop(postgres_dsn: str) -> None:
    """On PostgreSQL the bare psycopg loop and the store write the same rows per table for the
    same events (each in its own schema, dropped after), and the groups' contenders run."""
    import contextlib

    import psycopg

    from harness.bench.durable import postgres_groups

    groups = postgres_groups(postgres_dsn)
    assert [len(group.contenders) for group in groups] == [2, 2]
    counts = []
    for contender in groups[0].contenders:
        with contextlib.ExitStack() as stack:
            contender.make(stack)()  # one call: 100 events
            with psycopg.connect(postgres_dsn, autocommit=True) as db:
                schema = db.execute("SELECT schema_name FROM information_schema.schemata "
                                    "WHERE schema_name LIKE 'fsmbench_%'").fetchone()[0]
                counts.append([db.execute(f"SELECT COUNT(*) FROM {schema}.{table}").fetchone()[0]
                               for table in ("log", "consumed", "timers", "transitions")])
    floor, ours = counts
    assert ours == [count + 1 if count == EVENTS else count for count in floor]  # + the start
    with psycopg.connect(postgres_dsn, autocommit=True) as db:  # each schema dropped after
        assert db.execute("SELECT COUNT(*) FROM information_schema.schemata WHERE "
                          "schema_name LIKE 'fsmbench_%'").fetchone()[0] == 0


def test_without_a_server_the_postgres_groups_say_what_they_need() -> None:
    from harness.bench.durable import postgres_groups

    groups = postgres_groups(None)
    assert [group.contenders for group in groups] == [(), ()]
    assert all("FSMHARNESS_POSTGRES_DSN" in group.note for group in groups)
