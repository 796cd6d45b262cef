"""The durable runtime at its edges: regressions, each once a bug."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from reference_machine import (
    Event,
    MemoryStore,
    SQLiteStore,
    StoreError,
    load_definition,
)
from reference_machine._runtime import Failure, Runtime, Success, ToolOutcome
from reference_machine.secrecy import SecretError


def loop(steps_to_final: int | None = None, **tool: Any) -> Any:
    """Gives a definition whose state `a` runs `t.work` and loops back on success."""
    return load_definition({
        "name": "loop", "context": {"n": 0, **tool.get("context", {})},
        "secrets": tool.get("secrets", []),
        "tools": {"t.work": {"idempotency_keys": True}},
        "budgets": {"transitions_max": steps_to_final or 10_000, "on_exceeded": "z"},
        "states": {
            "a": {"initial": True, "step": {"tool": "t.work", "input": {
                      "n": "=context.n", **tool.get("input", {})}},
                  "on": {"step.succeeded": {"target": "a", "actions": [
                      {"assign": {"n": "context.n + 1", **tool.get("assign", {})}}]},
                         "step.failed": "z"}},
            "z": {"type": "final", "outcome": "success"},
        },
    })


def ok(output: Mapping[str, Any] | None = None) -> Any:
    def call(payload: Mapping[str, Any], key: str) -> ToolOutcome:
        return Success(dict(output or {}))
    return call


def test_secret_defaults_and_tool_outputs_are_never_stored_in_clear(tmp_path: Path) -> None:
    """A secret's default value and a tool output named like a secret key are stored as
    references; neither appears in the store's files."""
    definition = loop(steps_to_final=2, context={"api_key": "sk_live_DEFAULT", "token": None},
                      secrets=["api_key", "token"], assign={"token": "event.payload.token"})
    store = SQLiteStore(tmp_path / "s.db")
    runtime = Runtime(store, [definition], {"t.work": ok({"token": "tok_SECRET_1"})})
    runtime.start(definition, "x1")
    execution = store.load("x1").execution
    assert execution.context["api_key"] == {"$secret": "x1/api_key"}
    assert execution.context["token"] == {"$secret": "x1/token"}
    assert runtime.replay("x1") == execution
    store.close()
    for file in tmp_path.iterdir():
        data = file.read_bytes()
        assert b"sk_live_DEFAULT" not in data and b"tok_SECRET_1" not in data, file.name


def test_rejected_answer_leaves_the_effect_for_recovery(tmp_path: Path) -> None:
    """A forged result (from a human) is rejected and does not settle the effect: recovery
    still calls the tool and the run goes on."""
    definition = loop(steps_to_final=2)
    calls: list[str] = []

    def work(payload: Mapping[str, Any], key: str) -> ToolOutcome:
        calls.append(key)
        return Success({})

    store = SQLiteStore(tmp_path / "s.db")

    def crash(point: str) -> None:
        if point == "after_commit_before_dispatch" and not calls:
            raise KeyboardInterrupt

    runtime = Runtime(store, [definition], {"t.work": work}, crash=crash)
    with pytest.raises(KeyboardInterrupt):
        runtime.start(definition, "x1")
    effect = store.load("x1").execution.effect
    assert effect is not None
    forged = Event("forged", "step.succeeded", "human", {}, effect.effect_id)
    assert Runtime(store, [definition], {"t.work": work}).deliver("x1", forged, 1).kind == \
        "rejected"
    Runtime(store, [definition], {"t.work": work}).recover(now=2)
    assert calls[0] == "x1/a/1"
    assert store.load("x1").execution.outcome == "success"


def test_unknown_failure_category_from_a_tool_fails_the_step() -> None:
    """A tool failing with a category the machine does not know fails the step (permanent)
    instead of stranding the run with a rejected result."""
    definition = loop()

    def broken(payload: Mapping[str, Any], key: str) -> ToolOutcome:
        return Failure("network_error", "socket closed")

    store = MemoryStore()
    Runtime(store, [definition], {"t.work": broken}).start(definition, "x1")
    execution = store.load("x1").execution
    assert execution.state == "z"
    (entry,) = store.outbox("x1")
    assert entry.result is not None
    assert entry.result.payload["category"] == "permanent"
    assert "unknown failure category 'network_error'" in entry.result.payload["error"]


def test_a_long_chain_of_steps_is_not_recursion() -> None:
    """Hundreds of steps with no wait between them run to the end (no RecursionError)."""
    definition = loop(steps_to_final=1500)
    store = MemoryStore()
    Runtime(store, [definition], {"t.work": ok()}).start(definition, "x1")
    execution = store.load("x1").execution
    assert execution.outcome == "success"
    assert execution.context["n"] > 700


def test_a_tool_that_raises_is_an_ambiguous_failure_not_an_escape() -> None:
    """A tool raising becomes a recorded failure of category timeout, retried under the same
    key because the tool honours keys; deliver returns normally."""
    definition = loop(steps_to_final=3)
    calls: list[str] = []

    def flaky(payload: Mapping[str, Any], key: str) -> ToolOutcome:
        calls.append(key)
        if len(calls) == 1:
            raise ConnectionError("reset by peer")
        return Success({})

    store = MemoryStore()
    runtime = Runtime(store, [definition], {"t.work": flaky})
    runtime.start(definition, "x1")
    runtime.tick(10**9)
    assert calls[:2] == ["x1/a/1", "x1/a/1"]
    first = store.outbox("x1")[0]
    assert first.result is not None and first.result.payload["category"] == "timeout"
    assert "ConnectionError: reset by peer" in first.result.payload["error"]


def test_recovery_delivers_the_result_another_worker_recorded() -> None:
    """When a result is recorded between recovery's read and its own report, the recorded
    result is delivered, not the made-up timeout."""
    definition = load_definition({
        "name": "mail", "tools": {"mail.send": {}},
        "states": {"send": {"initial": True, "step": {"tool": "mail.send"},
                            "on": {"step.succeeded": "sent", "step.failed": "failed"}},
                   "sent": {"type": "final", "outcome": "success"},
                   "failed": {"type": "final", "outcome": "failure"}},
    })
    store = MemoryStore()

    def crash(point: str) -> None:
        if point == "after_commit_before_dispatch":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Runtime(store, [definition], {"mail.send": ok()}, crash=crash).start(definition, "x1")
    (entry,) = store.pending("x1")
    success = Event("~result:x1/send/1#1", "step.succeeded", "tool", {}, entry.command_id)
    store.record_result("x1", entry.command_id, success)  # the live worker got there first
    runtime = Runtime(store, [definition], {"mail.send": ok()})
    runtime._resume(entry, now=1)  # recovery read the entry before the result was recorded
    assert store.load("x1").execution.outcome == "success"


def test_one_run_failing_recovery_does_not_strand_the_others(tmp_path: Path) -> None:
    """A run whose secret the vault lost fails recovery; the other runs are still finished,
    and the failure is raised after them."""
    secret = loop(steps_to_final=2, context={"key": None}, secrets=["key"],
                  input={"key": "=context.key"})
    plain = loop(steps_to_final=2)
    plain = load_definition({**plain.spec.model_dump(mode="json"), "name": "plain"})
    store = SQLiteStore(tmp_path / "s.db")

    def crash(point: str) -> None:
        if point == "after_commit_before_dispatch":
            raise KeyboardInterrupt

    for definition, run_id in ((secret, "x1"), (plain, "x2")):
        with pytest.raises(KeyboardInterrupt):
            Runtime(store, [definition], {"t.work": ok()}, crash=crash).start(
                definition, run_id, context={"key": "k"} if run_id == "x1" else None)
    fresh = Runtime(SQLiteStore(tmp_path / "s.db"), [secret, plain], {"t.work": ok()})
    with pytest.raises(SecretError, match=r"no secret is kept under reference 'x1/key'"):
        fresh.recover(now=1)
    assert fresh.store.load("x2").execution.outcome == "success"


def test_group_commit_dispatches_the_rest_before_raising(tmp_path: Path) -> None:
    """One unstorable event in a batch: the other committed runs are still dispatched before
    the error is raised."""
    definition = load_definition({
        "name": "go", "tools": {"t.work": {"idempotency_keys": True}},
        "events": {"go": {}},
        "states": {"w": {"initial": True, "type": "wait", "after": {"delay": 60, "target": "z"},
                         "on": {"go": "run"}},
                   "run": {"step": {"tool": "t.work"},
                           "on": {"step.succeeded": "z", "step.failed": "z"}},
                   "z": {"type": "final", "outcome": "success"}},
    })
    store = SQLiteStore(tmp_path / "s.db")
    runtime = Runtime(store, [definition], {"t.work": ok()})
    for run_id in ("x1", "x2", "x3"):
        runtime.start(definition, run_id)
    batch = [("x1", Event("g1", "go", "system", {})),
             ("x2", Event("g2", "go", "system", {"pair": (1, 2)})),
             ("x3", Event("g3", "go", "system", {}))]
    with pytest.raises(StoreError, match="cannot be stored"):
        runtime.deliver_many(batch, 1)
    assert store.load("x1").execution.state == "z"
    assert store.load("x3").execution.state == "z"
    assert store.load("x2").execution.state == "w"


def test_huge_times_are_store_errors(tmp_path: Path) -> None:
    """A time past SQLite's integers is a StoreError, not a bare OverflowError."""
    store = SQLiteStore(tmp_path / "s.db")
    with pytest.raises(StoreError, match="read failed"):
        store.due_timers(2**64)


def test_reserved_event_ids_are_refused_from_callers() -> None:
    """A caller's event may not take an id of the kind the runtime derives (`~...`), so it
    can never block a tool result or a timer firing."""
    from reference_machine import EngineError

    definition = loop(steps_to_final=2)
    store = MemoryStore()
    runtime = Runtime(store, [definition], {"t.work": ok()})
    runtime.start(definition, "x1")
    with pytest.raises(EngineError, match=r"event id '~fired:x1/a/1/after' starts with '~'"):
        runtime.deliver("x1", Event("~fired:x1/a/1/after", "go", "human", {}), 1)
    assert store.log("x1")[-1].event.id.startswith("~result:")


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_transition_records_carry_the_time_spent_in_the_source_state(tmp_path: Path,
                                                                      backend: str) -> None:
    """A transition's duration is the time since the previous transition of its run."""
    definition = load_definition({
        "name": "waits", "events": {"go": {}},
        "states": {"w": {"initial": True, "type": "wait", "after": {"delay": "1h", "target": "z"},
                         "on": {"go": "z"}},
                   "z": {"type": "final", "outcome": "success"}},
    })
    store = MemoryStore() if backend == "memory" else SQLiteStore(tmp_path / "s.db")
    runtime = Runtime(store, [definition], {})
    runtime.start(definition, "x1", now=1_000)
    runtime.deliver("x1", Event("g", "go", "system", {}), 250_000)
    assert [r.duration_ms for r in store.transitions("x1")] == [0, 249_000]


def test_replay_reads_one_moment_while_another_worker_commits(tmp_path: Path) -> None:
    """Another worker commits to the same run between replay's reads of the record and of the
    log: the history is one read transaction, so replay still matches."""
    definition = load_definition({
        "name": "waits", "events": {"go": {}},
        "states": {"w": {"initial": True, "type": "wait", "after": {"delay": "1h", "target": "z"},
                         "on": {"go": "z"}},
                   "z": {"type": "final", "outcome": "success"}},
    })
    path = tmp_path / "s.db"
    runtime = Runtime(SQLiteStore(path), [definition], {})
    other = Runtime(SQLiteStore(path), [definition], {})
    runtime.start(definition, "x1")
    store = runtime.store
    original_log = store.log
    interleaved = []

    def log_after_another_commit(execution_id: str) -> Any:
        if not interleaved:
            interleaved.append(True)
            other.deliver("x1", Event("go-1", "go", "system", {}), 5)  # mid-read
        return original_log(execution_id)

    store.log = log_after_another_commit  # type: ignore[method-assign]
    replayed = runtime.replay("x1")
    assert interleaved == [True]
    assert replayed.state == "w"  # the moment replay read: before the other commit
    store.log = original_log  # type: ignore[method-assign]
    assert runtime.replay("x1").state == "z"
