"""The durable runtime under crashes: at every crash point, recovery finishes the run with each
effect applied exactly once, and the log replays to the stored record."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from refund_world import REFUND, TOOL_OUTPUTS, finish

from reference_machine import (
    Event,
    MemoryStore,
    SQLiteStore,
)
from reference_machine._runtime import CRASH_POINTS, Failure, Runtime, Success, ToolOutcome


class Crash(Exception):
    """The simulated death of the process at a crash point."""


class World:
    """Tools with an effect ledger: what was applied, by key, whatever the runtime believes.
    A tool that honours idempotency keys applies a key once; one that does not applies every
    call."""

    def __init__(self) -> None:
        self.applied: list[tuple[str, str]] = []
        self._seen: dict[tuple[str, str], Mapping[str, Any]] = {}
        self.store: Any = None  # when set, each call checks its command was committed first
        self.uncommitted: list[tuple[str, str]] = []

    def tool(self, name: str) -> Callable[[Mapping[str, Any], str], ToolOutcome]:
        honours_keys = REFUND.tools[name].idempotency_keys

        def call(payload: Mapping[str, Any], key: str) -> ToolOutcome:
            if self.store is not None and not any(
                    getattr(entry.command, "key", None) == key
                    for entry in self.store.outbox("r1")):
                self.uncommitted.append((name, key))  # persist-before-effect broken
            if honours_keys and (name, key) in self._seen:
                return Success(self._seen[(name, key)])
            self.applied.append((name, key))
            self._seen[(name, key)] = TOOL_OUTPUTS[name]
            return Success(TOOL_OUTPUTS[name])

        return call

    def tools(self) -> dict[str, Callable[[Mapping[str, Any], str], ToolOutcome]]:
        return {name: self.tool(name) for name in TOOL_OUTPUTS}


def crash_at(point: str, hit: int) -> Callable[[str], None]:
    """Gives a hook that crashes the `hit`-th time `point` is passed."""
    count = {"n": 0}

    def hook(name: str) -> None:
        if name == point:
            count["n"] += 1
            if count["n"] == hit:
                raise Crash(f"{point} #{hit}")

    return hook


def run_to_end(runtime: Runtime, store: Any) -> None:
    """Plays the supervisor and the clock until the run is final or with a human."""
    if not finish(runtime):
        pytest.fail(f"the run did not finish: {store.load('r1').execution}")


def stores(tmp_path: Path) -> dict[str, Callable[[], Any]]:
    path = tmp_path / "run.db"
    memory = MemoryStore()
    return {"memory": lambda: memory, "sqlite": lambda: SQLiteStore(path)}


@pytest.mark.parametrize("runtime_class", ["Runtime", "DispatchFirstRuntime"])
@pytest.mark.parametrize("backend", ["memory", "sqlite"])
@pytest.mark.parametrize("point", CRASH_POINTS)
@pytest.mark.parametrize("hit", [1, 3, 5])
def test_crash_then_recover_applies_each_effect_once(tmp_path: Path, backend: str, point: str,
                                                     hit: int, runtime_class: str) -> None:
    """A crash at `point` (its `hit`-th pass), then a new runtime recovers: the refund ends
    refunded, every tool applied each key once, and only after its command was committed,
    and the log replays to the stored record. Against a runtime that dispatches before it
    commits, every case finds effects applied before their commit."""
    runtime_class = {"Runtime": Runtime, "DispatchFirstRuntime": DispatchFirstRuntime}[
        runtime_class]
    open_store = stores(tmp_path)[backend]
    world = World()
    runtime = runtime_class(open_store(), [REFUND], world.tools(), crash=crash_at(point, hit))
    world.store = runtime.store
    crashed = False
    try:
        runtime.start(REFUND, "r1", context={"order_id": "o-1"})
        run_to_end(runtime, runtime.store)
    except Crash:
        crashed = True
    assert crashed, f"{point} was passed fewer than {hit} times"
    store = open_store()  # a new process: only what was committed survives
    world.store = store
    recovered = Runtime(store, [REFUND], world.tools())
    recovered.recover(now=0)
    recovered.start(REFUND, "r1", context={"order_id": "o-1"})  # the client retries its start
    run_to_end(recovered, store)
    execution = store.load("r1").execution
    if runtime_class is DispatchFirstRuntime:
        # the broken runtime calls tools before their commands are committed: every run of
        # this test against it fails here, whatever the crash point
        assert world.uncommitted, "the broken runtime should have applied uncommitted effects"
        return
    assert world.uncommitted == [], f"effects applied before commit: {world.uncommitted}"
    keys = [key for _, key in world.applied]
    assert len(keys) == len(set(keys)), f"an effect was applied twice: {world.applied}"
    assert [name for name, _ in world.applied] == [
        "crm.lookup_order", "agent.plan_refund", "payments.refund", "payments.get_refund",
        "email.send"]
    if point == "after_apply_before_record" and hit == 5:
        # the email (no idempotency keys) was sent, its result lost: ambiguous, so a human
        # decides; it is never sent again
        assert execution.state == "needs_human", execution
    else:
        assert execution.outcome == "success", execution
    assert recovered.replay("r1") == execution


class DispatchFirstRuntime(Runtime):
    """A broken runtime that calls the tools before committing the decision: the pattern the
    crash tests exist to catch."""

    def _commit_one(self, execution_id: str, event: Event, now: int) -> Any:
        from reference_machine import Accepted, decide

        stored = self.store.load(execution_id)
        decision = decide(self._definition(stored.execution), stored.execution, event, now)
        if isinstance(decision, Accepted):
            self._dispatch_before_commit = decision.commands
            for command in decision.commands:
                tool = self.tools.get(getattr(command, "tool", ""))
                if tool is not None and hasattr(command, "key"):
                    tool(command.input, command.key)  # the side effect happens first
        self._crash("before_commit")
        return super()._commit_one(execution_id, event, now)


def crash_once_email_sent(world: World) -> Callable[[str], None]:
    """Gives a hook that crashes before the next commit once the email has gone out."""
    def hook(point: str) -> None:
        if point == "before_commit" and world.applied and world.applied[-1][0] == "email.send":
            raise Crash("before_commit, email already sent")
    return hook


@pytest.mark.parametrize("runtime_class", [Runtime, DispatchFirstRuntime])
def test_the_crash_test_catches_dispatch_before_commit(tmp_path: Path,
                                                       runtime_class: type[Runtime]) -> None:
    """Crashing before a commit once the email is out: the correct runtime cannot get there
    (it commits before it dispatches), the broken one sends the email twice on recovery."""
    world = World()
    runtime = runtime_class(SQLiteStore(tmp_path / "run.db"), [REFUND], world.tools(),
                            crash=crash_once_email_sent(world))
    try:
        runtime.start(REFUND, "r1", context={"order_id": "o-1"})
        run_to_end(runtime, runtime.store)
    except Crash:
        pass
    recovered = Runtime(SQLiteStore(tmp_path / "run.db"), [REFUND], world.tools())
    recovered.recover(now=0)
    run_to_end(recovered, recovered.store)
    emails = [name for name, _ in world.applied].count("email.send")
    assert emails == (1 if runtime_class is Runtime else 2)


def test_tool_without_keys_is_not_retried_blindly_after_a_crash(tmp_path: Path) -> None:
    """A crash after email.send applied but before its result was recorded: recovery reports
    an ambiguous timeout and the run goes to a human, never sending the email twice."""
    world = World()
    calls: list[str] = []

    def crash_after_email(point: str) -> None:
        if point == "after_apply_before_record" and calls and calls[-1] == "email.send":
            raise Crash("after email")

    tools = world.tools()
    email = tools["email.send"]

    def recording_email(payload: Mapping[str, Any], key: str) -> ToolOutcome:
        calls.append("email.send")
        return email(payload, key)

    tools["email.send"] = recording_email
    store = SQLiteStore(tmp_path / "email.db")
    runtime = Runtime(store, [REFUND], tools, crash=crash_after_email)
    with pytest.raises(Crash, match="after email"):
        runtime.start(REFUND, "r1", context={"order_id": "o-1"})
        run_to_end(runtime, store)
    recovered = Runtime(SQLiteStore(tmp_path / "email.db"), [REFUND], tools)
    recovered.recover(now=0)
    execution = recovered.store.load("r1").execution
    assert execution.state == "needs_human", execution
    assert calls.count("email.send") == 1
    assert Failure  # the ambiguous outcome is recorded as a failure of category timeout
    (entry,) = [e for e in recovered.store.outbox("r1")
                if getattr(e.command, "tool", "") == "email.send"]
    assert entry.result is not None and entry.result.payload["category"] == "timeout"


def test_bad_deliveries_are_clear_and_lose_nothing(tmp_path: Path) -> None:
    """An event for an unknown execution is an UnknownExecutionError writing nothing; an event
    type the definition lacks is logged as rejected and changes nothing else."""
    from reference_machine import UnknownExecutionError

    store = SQLiteStore(tmp_path / "bad.db")
    runtime = Runtime(store, [REFUND], World().tools())
    runtime.start(REFUND, "r1", context={"order_id": "o-1"})
    before = store.load("r1")
    with pytest.raises(UnknownExecutionError, match=r"no execution 'nobody' in the store"):
        runtime.deliver("nobody", Event("e-1", "ticket.updated", "human", {}), 5)
    assert store.execution_ids() == ["r1"]
    decision = runtime.deliver("r1", Event("e-2", "refund.teleported", "agent", {}), 5)
    assert decision.kind == "rejected"
    assert store.log("r1")[-1].decision == "rejected"
    assert store.load("r1") == before
    assert runtime.replay("r1") == before.execution


def test_start_refuses_a_definition_whose_tools_were_not_given() -> None:
    """Starting a run whose tools the runtime lacks fails at once, naming them, and creates
    nothing."""
    from reference_machine import EngineError

    store = MemoryStore()
    runtime = Runtime(store, [REFUND], {"crm.lookup_order": World().tool("crm.lookup_order")})
    with pytest.raises(EngineError, match=r"uses tools that were not given to the runtime: "
                                          r"agent\.plan_refund, email\.send"):
        runtime.start(REFUND, "r1", context={"order_id": "o-1"})
    assert store.execution_ids() == []
