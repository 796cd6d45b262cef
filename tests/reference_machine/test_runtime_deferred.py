"""Deferred effects: calls stay in flight until `complete`, so timers and events can overtake
them; and a tool output that is no object is invalid output, not a runtime crash."""

from __future__ import annotations

from typing import Any

from small_workflow import base

from reference_machine import (
    Event,
    MemoryStore,
    Runtime,
    Success,
    load_definition,
)

STEP_TIMEOUT = 10_000


def definition() -> Any:
    """Gives the small workflow with a step timeout and retries."""
    data = base()
    data["states"]["work"]["step"].update(
        {"timeout": "10s", "retry": {"attempts_max": 3, "delay_initial": "1s"}})
    return load_definition(data)


class Counting:
    """A tool that counts its calls and answers `output` (an object unless told otherwise)."""

    def __init__(self, output: Any = None) -> None:
        self.calls: list[str] = []
        self.output = {} if output is None else output

    def __call__(self, payload: Any, idempotency_key: str) -> Success:
        self.calls.append(idempotency_key)
        return Success(self.output)


def runtime(tool: Counting) -> Runtime:
    """Gives a deferring runtime over a memory store with `tool` as svc.call."""
    return Runtime(MemoryStore(), [definition()], {"svc.call": tool, "svc.undo": Counting()},
                   defer_effects=True)


def enter_work(rt: Runtime) -> None:
    """Starts run r1 and moves it into `work`, whose step is then in flight."""
    rt.start(definition(), "r1")
    rt.deliver("r1", Event("e1", "go", "system"), 0)


class TestDeferred:
    def test_a_committed_call_waits_in_flight(self) -> None:
        """Entering a state with a step commits the call and does not call the tool."""
        tool = Counting()
        rt = runtime(tool)
        enter_work(rt)
        assert tool.calls == []
        assert rt.in_flight("r1") == ["r1/work/1#1"]

    def test_complete_calls_the_tool_and_delivers_the_result(self) -> None:
        """`complete` calls the tool once, records the result and moves the run on."""
        tool = Counting()
        rt = runtime(tool)
        enter_work(rt)
        decision = rt.complete("r1", "r1/work/1#1", 5)
        assert decision is not None and decision.kind == "accepted"
        assert tool.calls == ["r1/work/1"]
        assert rt.store.load("r1").execution.state == "done"
        assert rt.in_flight("r1") == []

    def test_a_timeout_overtakes_a_call_in_flight_whose_result_is_then_late(self) -> None:
        """The step timeout fires first and retries; the first call lands late and is
        ignored, the retry's result moves the run on, both under one idempotency key."""
        tool = Counting()
        rt = runtime(tool)
        enter_work(rt)
        rt.tick(STEP_TIMEOUT)  # the step times out: a retry timer
        rt.tick(STEP_TIMEOUT + 5_000)  # the retry: attempt 2 in flight beside attempt 1
        assert rt.in_flight("r1") == ["r1/work/1#1", "r1/work/1#2"]
        late = rt.complete("r1", "r1/work/1#1", STEP_TIMEOUT + 6_000)
        assert late is not None and late.kind == "ignored"
        assert rt.store.load("r1").execution.state == "work"
        rt.complete("r1", "r1/work/1#2", STEP_TIMEOUT + 7_000)
        assert rt.store.load("r1").execution.state == "done"
        assert tool.calls == ["r1/work/1", "r1/work/1"]

    def test_completing_a_call_no_longer_pending_does_nothing(self) -> None:
        """A call another worker finished (or one that never was) gives None."""
        tool = Counting()
        rt = runtime(tool)
        enter_work(rt)
        rt.complete("r1", "r1/work/1#1", 1)
        assert rt.complete("r1", "r1/work/1#1", 2) is None
        assert rt.complete("r1", "nothing#1", 2) is None
        assert tool.calls == ["r1/work/1"]

    def test_recover_finishes_a_call_in_flight(self) -> None:
        """After a crash a new runtime's recovery calls the committed step (same key)."""
        tool = Counting()
        rt = runtime(tool)
        enter_work(rt)
        fresh = Runtime(rt.store, [definition()], rt.tools, defer_effects=True)
        fresh.recover(1)
        assert tool.calls == ["r1/work/1"]
        assert fresh.store.load("r1").execution.state == "done"


class TestOutputShape:
    def test_an_output_that_is_no_object_is_invalid_output(self) -> None:
        """A list where an object belongs fails the step as invalid_output (no crash)."""
        rt = Runtime(MemoryStore(), [definition()],
                     {"svc.call": Counting(["not", "an", "object"]), "svc.undo": Counting()})
        enter_work(rt)
        log = rt.store.log("r1")
        failed = [e.event for e in log if e.event.type == "step.failed"]
        assert failed and failed[0].payload["category"] == "invalid_output"
        assert "list" in failed[0].payload["error"]
