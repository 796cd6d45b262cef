"""The replay-unit kit (`harness.adapters.replay_units`): tool calls made by a unit of work,
its keys and logical actions, the crash points around its saved result, and the causes the
journal gives for a call made again."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from harness.adapters import AdapterError, ToolFailed
from harness.adapters.replay_units import Dead, Journal, Unit, UnitCalls
from harness.sim.world import MadeBy
from reference_machine import Failure, Success, ToolOutcome


class World:
    """Tools like the world's: they take `made_by`, and record every call."""

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[str, dict[str, Any], str, MadeBy | None]] = []
        self.fail = fail

    def tool(self, name: str) -> Any:
        def call(input: Mapping[str, Any], key: str, *, made_by: MadeBy | None = None
                 ) -> ToolOutcome:
            self.calls.append((name, dict(input), key, made_by))
            return Failure("transient", "down") if self.fail else Success({"id": 7})
        call.knows_callers = True  # type: ignore[attr-defined]
        return call


class Host:
    def __init__(self) -> None:
        self.dead = False
        self.passed: list[str] = []

    def passing(self, point: str) -> None:
        self.passed.append(point)


def kit(world: World, host: Host | None = None, journal: Journal | None = None,
        **options: Any) -> UnitCalls:
    return UnitCalls({"pay": world.tool("pay")}, host or Host(), journal or Journal(),
                     "Engine", after_effect="after_tool_call", **options)


UNIT = Unit("x1", "charge", "3")


class TestCalls:
    def test_keys_actions_and_the_execution_are_the_units(self) -> None:
        world = World()
        calls = kit(world)
        assert calls.call(UNIT, "pay", {"n": 1}) == {"id": 7}
        calls.call(UNIT, "pay", {"n": 2})
        calls.call(UNIT, "pay", {"n": 3}, key="mine")
        keys = [key for _, _, key, _ in world.calls]
        assert keys == ["x1/charge/3", "x1/charge/3/2", "mine"]
        made_by = [made for _, _, _, made in world.calls]
        assert [m.action for m in made_by if m] == [
            "charge at step 3, call 1", "charge at step 3, call 2", "charge at step 3, call 3"]
        assert {m.execution for m in made_by if m} == {"x1"}

    def test_a_run_again_calls_under_the_same_keys(self) -> None:
        world = World()
        calls = kit(world)
        calls.call(UNIT, "pay", {})
        calls.ended(UNIT, "suspended")
        calls.call(UNIT, "pay", {})
        assert [key for _, _, key, _ in world.calls] == ["x1/charge/3", "x1/charge/3"]

    def test_a_plain_tool_is_called_with_input_and_key_only(self) -> None:
        seen: list[tuple[Any, ...]] = []

        def plain(input: Mapping[str, Any], key: str) -> ToolOutcome:
            seen.append((dict(input), key))
            return Success({})
        calls = UnitCalls({"pay": plain}, Host(), Journal(), "Engine")
        calls.call(UNIT, "pay", {"n": 1})
        assert seen == [({"n": 1}, "x1/charge/3")]

    def test_a_failure_raises_tool_failed_after_the_effect_point(self) -> None:
        host = Host()
        with pytest.raises(ToolFailed, match="pay failed: transient: down"):
            kit(World(fail=True), host).call(UNIT, "pay", {})
        assert host.passed == ["after_tool_call"]

    def test_an_undeclared_tool_and_a_dead_process_are_refused(self) -> None:
        host = Host()
        calls = kit(World(), host)
        with pytest.raises(AdapterError, match=r"tool 'nope' is not declared \(declared: pay\)"):
            calls.call(UNIT, "nope", {})
        host.dead = True
        with pytest.raises(Dead):
            calls.call(UNIT, "pay", {})


def causes(world: World) -> list[str]:
    return [made.cause for _, _, _, made in world.calls if made is not None]


class TestCauses:
    def test_a_first_call_has_no_cause(self) -> None:
        world = World()
        kit(world).call(UNIT, "pay", {})
        assert causes(world) == [""]

    def test_an_effect_before_a_suspension(self) -> None:
        world = World()
        calls = kit(world)
        calls.call(UNIT, "pay", {"n": 1})
        calls.ended(UNIT, "suspended")
        calls.call(UNIT, "pay", {"n": 1})
        assert causes(world)[1].startswith(
            "effect before suspension: charge (step 3) made this call and then suspended, "
            "and Engine re-runs a unit from its top on resume")

    def test_a_re_run_after_a_crash_names_who_re_ran_it(self) -> None:
        world, host = World(), Host()
        calls = kit(world, host, rerun_by="the worker's recovery")
        calls.call(UNIT, "pay", {})
        calls.crashed()  # the process recovers, as the same worker
        calls.call(UNIT, "pay", {})
        assert causes(world)[1].startswith(
            "the worker's recovery re-ran charge (step 3) after a crash before its result was "
            "saved")

    def test_a_unit_run_again_after_its_result_was_saved_is_the_engines(self) -> None:
        world, host = World(), Host()
        calls = kit(world, host)
        calls.call(UNIT, "pay", {})
        calls.ended(UNIT, "done")
        calls.saving("put", lambda: None, saves=(UNIT,))
        assert host.passed[-2:] == ["before_put", "after_put"]
        calls.call(UNIT, "pay", {})
        assert causes(world)[1] == ("the cause is Engine's, not the code's: Engine ran charge "
                                    "(step 3) again although its result was saved")

    def test_a_retry_and_a_re_run_that_decided_differently(self) -> None:
        world = World()
        calls = kit(world)
        calls.call(UNIT, "pay", {"amount": 40})
        calls.call(UNIT._replace(attempt=2), "pay", {"amount": 400})
        said = causes(world)[1]
        assert said.startswith("a retry of charge (step 3) (attempt 2) made the call again")
        assert 'the re-run decided differently from the first run: input {"amount":40}, ' \
               'then {"amount":400}' in said

    def test_a_second_worker(self) -> None:
        world, journal = World(), Journal()
        kit(world, journal=journal).call(UNIT, "pay", {})
        kit(world, journal=journal).call(UNIT, "pay", {})  # another host, the same journal
        assert causes(world)[1].startswith("two workers ran charge (step 3)")

    def test_a_second_worker_the_engine_gave_the_unit_to_says_why(self) -> None:
        world, journal = World(), Journal()
        engine = "the engine timed the first out"
        for _ in range(2):  # two hosts, the same journal
            kit(world, journal=journal, two_workers=engine).call(UNIT, "pay", {})
        said = causes(world)[1]
        assert said.startswith(f"two workers ran charge (step 3): {engine} (make the call "
                               f"idempotent")
        assert "say so to the adapter" not in said

    def test_a_key_built_from_a_minted_id_and_the_adapters_own_cause(self) -> None:
        world = World()
        unit = UNIT._replace(minted=(("task id the engine gave", "t-9"),))
        kit(world).call(unit, "pay", {}, key="x1:t-9", cause="see upstream#1")
        assert causes(world) == ["the key is built from the task id the engine gave, minted "
                                 "anew on each run: it is not stable across re-runs; "
                                 "see upstream#1"]


def test_an_awaited_save_passes_the_same_points() -> None:
    host = Host()
    calls = kit(World(), host)

    async def write(value: int) -> int:
        return value * 2
    assert asyncio.run(calls.asaving("aput", write, 21)) == 42
    assert host.passed == ["before_aput", "after_aput"]
