"""The PostgreSQL store beyond the shared contract (tests/reference_machine/test_event_store.py):
what it refuses, two workers on one schema, claims, and worker processes sharing executions against
a real server (tests/support/postgres_server.py starts one)."""

from __future__ import annotations

import multiprocessing
import os
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from small_workflow import base

from reference_machine import (
    ConflictError,
    DuplicateEventError,
    Event,
    PostgresStore,
    Runtime,
    StoreError,
    Success,
    decide,
    load_definition,
    new_execution,
    start_event,
)
from reference_machine._store import Commit

WORKERS = 2


@pytest.fixture
def schema(postgres_dsn: str) -> Iterator[str]:
    """A fresh schema name, dropped after the test."""
    name = f"store_{uuid.uuid4().hex[:16]}"
    yield name
    with psycopg.connect(postgres_dsn, autocommit=True) as db:
        db.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


def test_a_schema_that_is_not_an_sql_name_is_refused(postgres_dsn: str) -> None:
    with pytest.raises(ValueError, match="lower-case SQL name"):
        PostgresStore(postgres_dsn, schema="x; DROP TABLE log")


def test_a_server_that_cannot_be_reached_is_one_clear_store_error() -> None:
    with pytest.raises(StoreError, match=r"^cannot connect to PostgreSQL: ") as caught:
        PostgresStore("host=127.0.0.1 port=1 user=nobody dbname=none", connect_timeout_s=2)
    assert "\n" not in str(caught.value)


def test_a_schema_holding_other_tables_is_refused_and_left_as_it_was(postgres_dsn: str,
                                                                   schema: str) -> None:
    with psycopg.connect(postgres_dsn, autocommit=True) as db:
        db.execute(f"CREATE SCHEMA {schema}")
        db.execute(f"CREATE TABLE {schema}.accounts (id INT)")
        with pytest.raises(StoreError, match="holds tables but no schema_version"):
            PostgresStore(postgres_dsn, schema=schema)
        tables = db.execute("SELECT table_name FROM information_schema.tables WHERE "
                            "table_schema = %s", (schema,)).fetchall()
    assert tables == [("accounts",)]


def test_a_store_of_another_schema_version_is_refused(postgres_dsn: str, schema: str) -> None:
    PostgresStore(postgres_dsn, schema=schema).close()
    with psycopg.connect(postgres_dsn, autocommit=True) as db:
        db.execute(f"UPDATE {schema}.schema_version SET version = 99")
    with pytest.raises(StoreError, match="schema version 99; this fsmharness reads version 1"):
        PostgresStore(postgres_dsn, schema=schema)


def _started(store: PostgresStore, definition: Any, execution_id: str) -> Commit:
    """Creates an execution and gives the commit of its start (not written yet)."""
    store.create(new_execution(definition, execution_id))
    event = start_event(execution_id)
    decision = decide(definition, store.load(execution_id).execution, event, 0)
    return Commit(execution_id, 0, event, decision.kind, 0, decision.execution,  # type: ignore[union-attr]
                  decision.commands, decision.transition)  # type: ignore[union-attr]


def test_two_workers_on_one_schema_conflict_as_one_store_would(postgres_dsn: str,
                                                               schema: str) -> None:
    """The second of two commits made on the same version conflicts; the same event
    committed again by the other worker is a duplicate."""
    definition = load_definition(base())
    first = PostgresStore(postgres_dsn, schema=schema)
    second = PostgresStore(postgres_dsn, schema=schema)
    try:
        commit = _started(first, definition, "x1")
        assert first.commit(commit) == 1
        with pytest.raises(DuplicateEventError):
            second.commit(commit)
        other = Commit("x1", 0, Event("e2", "go", "agent"), "ignored", 0)
        with pytest.raises(ConflictError):
            second.commit(other)
        assert second.load("x1").version == 1
    finally:
        first.close()
        second.close()


def test_a_claim_is_held_by_one_worker_until_it_lets_go_or_its_connection_ends(
        postgres_dsn: str, schema: str) -> None:
    first = PostgresStore(postgres_dsn, schema=schema)
    second = PostgresStore(postgres_dsn, schema=schema)
    try:
        assert first.claim("x1")
        assert not second.claim("x1")
        assert second.claim("x2")  # another execution is free
        first.release("x1")
        assert second.claim("x1")
        second.close()  # a worker that ends frees what it held (once the server has seen
        # its connection end: the backend lets go of its locks as it exits)
        for _ in range(200):
            if first.claim("x1"):
                break
            time.sleep(0.05)
        else:
            pytest.fail("the claims of a closed worker were never freed")
        assert first.claim("x2")
    finally:
        first.close()


# -- worker processes sharing executions -----------------------------------------------------------


def _definition() -> Any:
    return load_definition(base())


def _worker(dsn: str, schema: str, barrier: Any, claims: bool) -> None:
    """One worker host: its own connections, finishing what the executions committed."""
    store = PostgresStore(dsn, schema=schema)
    if not claims:
        store.claim = None  # type: ignore[assignment,method-assign]
    ledger = psycopg.connect(dsn, autocommit=True)

    def call(payload: Any, key: str) -> Success:
        ledger.execute(f"INSERT INTO {schema}.ledger VALUES (%s, %s)", (key, os.getpid()))
        time.sleep(0.1)  # the call takes a while: the other workers are at work meanwhile
        return Success({})

    runtime = Runtime(store, [_definition()], {"svc.call": call, "svc.undo": call})
    barrier.wait()
    runtime.recover(now=1)
    store.close()
    ledger.close()


def _share(dsn: str, schema: str, runs: int, claims: bool) -> list[tuple[str, int]]:
    """Commits `runs` executions' first effect without running it, lets `WORKERS` worker
    processes recover them all at once, and gives the ledger: (key, count) of each call."""
    definition = _definition()
    store = PostgresStore(dsn, schema=schema)
    store._db.execute(f"CREATE TABLE {schema}.ledger (key TEXT NOT NULL, pid INT NOT NULL)")
    deferred = Runtime(store, [definition], {"svc.call": None, "svc.undo": None},  # type: ignore[dict-item]
                       defer_effects=True)
    for number in range(runs):
        execution_id = f"x{number:02d}"
        deferred.start(definition, execution_id, now=0)
        deferred.deliver(execution_id, Event(f"go-{number}", "go", "agent"), now=0)
    assert len(store.pending()) == runs  # each one's call committed, not made
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(WORKERS)
    workers = [context.Process(target=_worker, args=(dsn, schema, barrier, claims))
               for _ in range(WORKERS)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert [worker.exitcode for worker in workers] == [0] * WORKERS
    ledger = store._db.execute(f"SELECT key, COUNT(*) FROM {schema}.ledger GROUP BY key "
                               "ORDER BY key").fetchall()
    if claims:
        assert store.pending() == []
        assert {store.load(f"x{n:02d}").execution.state for n in range(runs)} == {"done"}
    store.close()
    return [(key, count) for key, count in ledger]


def test_worker_processes_share_executions_and_run_every_effect_once(postgres_dsn: str,
                                                                     schema: str) -> None:
    """Workers recovering the same executions at the same moment: each claims an execution
    before it finishes it and skips those another holds, so each call is made once."""
    ledger = _share(postgres_dsn, schema, 8, claims=True)
    assert len(ledger) == 8
    assert [count for _, count in ledger] == [1] * 8


def test_without_claims_the_same_workers_run_effects_twice(postgres_dsn: str,
                                                           schema: str) -> None:
    """The control: the same workers with claims turned off call the same effects at once
    (what the test above would see if claims did nothing)."""
    ledger = _share(postgres_dsn, schema, 8, claims=False)
    assert any(count > 1 for _, count in ledger)


def test_a_commit_that_waited_for_another_reads_what_that_one_wrote(postgres_dsn: str,
                                                                    schema: str) -> None:
    """A rejected commit bumps no version but appends to the log: a second commit of the same
    execution, waiting on its row meanwhile, takes the next sequence after it (and sees its
    consumed id), instead of failing on the log's key."""
    import threading

    definition = load_definition(base())
    store = PostgresStore(postgres_dsn, schema=schema)
    store.commit(_started(store, definition, "x1"))
    other = psycopg.connect(postgres_dsn)  # another worker, mid-commit of a rejected event
    other.execute(f"SELECT version FROM {schema}.executions WHERE id = 'x1' FOR UPDATE")
    other.execute(f"INSERT INTO {schema}.consumed VALUES ('x1', 'late')")
    other.execute(f"INSERT INTO {schema}.log VALUES ('x1', 2, '{{}}', 'rejected', 5)")
    results: list[Any] = []

    def second(event_id: str) -> None:
        try:
            results.append(store.commit(Commit("x1", 1, Event(event_id, "go", "agent"),
                                               "ignored", 6)))
        except Exception as exc:
            results.append(exc)

    waiting = threading.Thread(target=second, args=("e3",))
    waiting.start()
    time.sleep(0.3)  # it waits on the row
    other.commit()
    waiting.join(timeout=30)
    other.close()
    assert results == [1]  # rejected/ignored commits keep the version
    with psycopg.connect(postgres_dsn) as db:
        sequences = db.execute(f"SELECT sequence FROM {schema}.log ORDER BY 1").fetchall()
    assert sequences == [(1,), (2,), (3,)]
    with pytest.raises(DuplicateEventError):
        second("late")
        raise results[-1]
    store.close()


def test_a_schema_named_like_a_keyword_works(postgres_dsn: str) -> None:
    store = PostgresStore(postgres_dsn, schema="user")
    try:
        assert store.execution_ids() == []
    finally:
        store.close()
        with psycopg.connect(postgres_dsn, autocommit=True) as db:
            db.execute('DROP SCHEMA IF EXISTS "user" CASCADE')
