"""The tool world's contract for idempotency keys: a key in flight (a slow call the service has
not applied yet) is answered as real idempotent services answer it, never with a fault that
contradicts what the key will do when the call lands; a key refused stays refused."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from fault_injection import FaultKind, FaultPlan, FaultRate
from harness.sim.choices import Choices, Table
from harness.sim.history import Applied, FaultInjected, HistoryRecord
from harness.sim.world import Clock, ToolWorld
from reference_machine import Failure, Success, load_definition

KEY = "x1/refunding/1"
REFUND = load_definition({
    "name": "refund_in_flight", "version": "1",
    "tools": {"pay.refund": {"idempotency_keys": True,
                             "output": {"type": "object", "required": ["refund_id"],
                                        "properties": {"refund_id": {"type": "string"}}}}},
    "states": {
        "refunding": {"initial": True,
                      "step": {"tool": "pay.refund", "input": {"order": "o-1"}},
                      "on": {"step.succeeded": "refunded", "step.failed": "failed"}},
        "refunded": {"type": "final", "outcome": "success"},
        "failed": {"type": "final", "outcome": "failure"},
    },
})


class Scripted(Choices):
    """Draws each call's tool fault from a list (None: no fault), the rest from the seed."""

    def __init__(self, faults: Sequence[FaultKind | None]) -> None:
        super().__init__(0)
        self.faults = list(faults)

    def pick(self, site: str, table: Table) -> Any:
        return self.faults.pop(0) if self.faults else None


def world_of(faults: Sequence[FaultKind | None], *, honours: bool = True
             ) -> tuple[ToolWorld, list[HistoryRecord]]:
    """Gives a world whose calls meet `faults` in turn, and the records it emits."""
    records: list[HistoryRecord] = []
    plan = FaultPlan(tuple(FaultRate(kind, 0.1) for kind in FaultKind
                           if kind.value.startswith(("tool_", "slow", "malformed"))))
    world = ToolWorld(REFUND, plan, Scripted(faults), Clock(), records.append, seed=3,
                      honour_keys={"pay.refund": honours})
    return world, records


def call(world: ToolWorld) -> Any:
    return world.tools["pay.refund"]({"order": "o-1"}, KEY)


def applied(records: Sequence[HistoryRecord]) -> int:
    return sum(1 for record in records if type(record) is Applied)


def landed(world: ToolWorld, records: Sequence[HistoryRecord]) -> int:
    """Lands every slow call; gives the effects applied in all."""
    due = world.next_landing
    if due is not None:
        world.land(due)
    return applied(records)


class TestAKeyInFlight:
    @pytest.mark.parametrize("kind", [None, FaultKind.TOOL_PERMANENT,
                                      FaultKind.MALFORMED_OUTPUT])
    def test_the_service_answers_the_held_call_once_it_lands(self, kind: FaultKind | None
                                                              ) -> None:
        """A retry that reaches the service while its key is in flight is held until the first
        call lands, and answered its result: never a refusal the key will contradict."""
        world, records = world_of([FaultKind.SLOW_TOOL, kind])
        first = call(world)
        assert isinstance(first, Failure) and first.category == "timeout"
        assert applied(records) == 0
        answer = call(world)
        assert isinstance(answer, Success) and set(answer.output) == {"refund_id"}
        assert applied(records) == 1  # the held call landed: the key applied, once
        assert world.next_landing is None
        assert not [r for r in records if type(r) is FaultInjected
                    and r.fault in (FaultKind.TOOL_PERMANENT, FaultKind.MALFORMED_OUTPUT)]
        assert call(world) == answer  # and the key keeps that answer

    @pytest.mark.parametrize("kind", [FaultKind.TOOL_TRANSIENT, FaultKind.TOOL_RATE_LIMITED,
                                      FaultKind.TOOL_TIMEOUT_BEFORE_APPLY])
    def test_a_fault_before_the_service_strikes_and_the_key_still_lands(
            self, kind: FaultKind) -> None:
        """A request that never reached the service says nothing of its key: it fails as it
        would, and the first call still lands, once."""
        world, records = world_of([FaultKind.SLOW_TOOL, kind])
        call(world)
        answer = call(world)
        assert isinstance(answer, Failure) and answer.category != "permanent"
        assert applied(records) == 0 and world.next_landing is not None
        assert landed(world, records) == 1

    def test_a_timeout_after_apply_lands_the_key_and_loses_the_answer(self) -> None:
        """The service applied the key (the held call with it) and the answer was lost: one
        effect, and the slow call's landing adds none."""
        world, records = world_of([FaultKind.SLOW_TOOL, FaultKind.TOOL_TIMEOUT_AFTER_APPLY])
        call(world)
        answer = call(world)
        assert isinstance(answer, Failure) and answer.category == "timeout"
        assert applied(records) == 1
        assert landed(world, records) == 1

    def test_a_second_slow_call_is_held_past_its_timeout_and_the_key_applies_once(self) -> None:
        world, records = world_of([FaultKind.SLOW_TOOL, FaultKind.SLOW_TOOL])
        call(world)
        answer = call(world)
        assert isinstance(answer, Failure) and answer.category == "timeout"
        assert applied(records) == 0
        assert landed(world, records) == 1
        assert landed(world, records) == 1  # the second landing applies nothing more

    def test_a_service_that_ignores_keys_applies_each_call(self) -> None:
        """Without keys there is no held call: the retry applies, and so does the slow one
        when it lands (the machine's to avoid, not the world's to hide)."""
        world, records = world_of([FaultKind.SLOW_TOOL, None], honours=False)
        call(world)
        assert isinstance(call(world), Success)
        assert applied(records) == 1
        assert landed(world, records) == 2

    def test_another_key_is_not_held(self) -> None:
        """Only the key in flight is answered from it: a call under another key takes its
        own fault."""
        world, records = world_of([FaultKind.SLOW_TOOL, FaultKind.TOOL_PERMANENT])
        call(world)
        answer = world.tools["pay.refund"]({"order": "o-1"}, "x2/refunding/1")
        assert isinstance(answer, Failure) and answer.category == "permanent"
        assert applied(records) == 0


class TestAKeyRefused:
    @pytest.mark.parametrize("kind", [None, FaultKind.TOOL_PERMANENT,
                                      FaultKind.MALFORMED_OUTPUT])
    def test_the_service_refuses_it_again_and_never_applies_it(self, kind: FaultKind | None
                                                               ) -> None:
        """Refused once, a key is refused again (an idempotent service keeps its first answer
        to a key, a failure too): a retry, or a second worker's call, never applies it."""
        world, records = world_of([FaultKind.TOOL_PERMANENT, kind])
        first, again = call(world), call(world)
        assert isinstance(first, Failure) and first.category == "permanent"
        assert isinstance(again, Failure) and again.category == "permanent"
        assert applied(records) == 0 and landed(world, records) == 0

    @pytest.mark.parametrize("kind", [FaultKind.TOOL_TIMEOUT_AFTER_APPLY, FaultKind.SLOW_TOOL])
    def test_an_answer_lost_on_the_way_back_applies_nothing_either(self, kind: FaultKind
                                                                   ) -> None:
        world, records = world_of([FaultKind.TOOL_PERMANENT, kind])
        call(world)
        answer = call(world)
        assert isinstance(answer, Failure) and answer.category == "timeout"
        assert applied(records) == 0 and landed(world, records) == 0

    @pytest.mark.parametrize("kind", [FaultKind.TOOL_TRANSIENT, FaultKind.TOOL_RATE_LIMITED,
                                      FaultKind.TOOL_TIMEOUT_BEFORE_APPLY])
    def test_a_fault_before_the_service_still_strikes(self, kind: FaultKind) -> None:
        world, records = world_of([FaultKind.TOOL_PERMANENT, kind])
        call(world)
        answer = call(world)
        assert isinstance(answer, Failure) and answer.category != "permanent"
        assert [r.fault for r in records if type(r) is FaultInjected][-1] is kind

    def test_a_service_that_ignores_keys_applies_a_call_after_a_refusal(self) -> None:
        world, records = world_of([FaultKind.TOOL_PERMANENT, None], honours=False)
        call(world)
        assert isinstance(call(world), Success) and applied(records) == 1
