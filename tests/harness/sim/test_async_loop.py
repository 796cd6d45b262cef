"""The run's event loop (`harness.sim.asyncloop`): virtual time, an order drawn from the run's
choices, and nothing a call leaves behind let through."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from fault_injection import SimulatedCrash
from harness.sim.asyncloop import TURNS_MAX, AsyncCalls, LoopFailure, RunLoop, is_async
from harness.sim.choices import Choices


def loop_of(clock: Callable[[], int] = lambda: 0, order: Callable[[int], int] = lambda n: 0,
            fatal: Callable[[], BaseException | None] = lambda: None) -> RunLoop:
    return RunLoop(clock, order, fatal, contextlib.nullcontext)


async def now() -> float:
    return asyncio.get_running_loop().time()


async def sleep_then_now(seconds: float) -> float:
    await asyncio.sleep(seconds)
    return asyncio.get_running_loop().time()


async def noted(names: list[str], name: str) -> None:
    names.append(name)


async def sleeper(done: list[str]) -> None:
    try:
        await asyncio.sleep(60)
    finally:
        done.append("unwound")


class TestVirtualTime:
    def test_a_sleep_moves_the_loop_clock_and_nothing_waits(self) -> None:
        """Eleven days of sleep end at once: the loop's clock starts at the machine's time
        (5 s here) and jumps to the timer."""
        assert loop_of(clock=lambda: 5_000).call(sleep_then_now, 10**6) == 5 + 10**6

    def test_each_call_starts_at_the_machine_time_and_the_clock_never_goes_back(self) -> None:
        told = iter([2_000, 1_000, 9_000_000])
        loop = loop_of(clock=lambda: next(told))
        assert loop.call(sleep_then_now, 60) == 62.0
        assert loop.call(now) == 62.0  # told 1 s: the loop's clock stays where it got to
        assert loop.call(now) == 9_000.0

    def test_timers_fire_in_time_order(self) -> None:
        async def both(names: list[str]) -> list[str]:
            async def later(seconds: float, name: str) -> None:
                await asyncio.sleep(seconds)
                names.append(name)
            await asyncio.gather(later(2, "two"), later(1, "one"), later(3, "three"))
            return names
        assert loop_of().call(both, []) == ["one", "two", "three"]

    def test_a_function_sent_to_a_thread_runs_there_and_then(self) -> None:
        async def threaded() -> tuple[int, float]:
            value = await asyncio.to_thread(lambda: 41 + 1)
            return value, asyncio.get_running_loop().time()
        assert loop_of(clock=lambda: 3_000).call(threaded) == (42, 3.0)


class TestOrder:
    @staticmethod
    def gathered(names: list[str]) -> Callable[[], Any]:
        async def run() -> list[str]:
            await asyncio.gather(*(noted(names, name) for name in "abc"))
            return names
        return run

    def test_drawing_zero_every_time_is_asyncio_s_own_order(self) -> None:
        assert loop_of().call(self.gathered([])) == ["a", "b", "c"]

    def test_the_tasks_ready_together_run_in_the_order_drawn(self) -> None:
        """Always the last of those left: a, b, c become c, a, b (c first; then of b and a,
        the last, a; then b)."""
        draws: list[int] = []

        def last(n: int) -> int:
            draws.append(n)
            return n - 1
        assert loop_of(order=last).call(self.gathered([])) == ["c", "a", "b"]
        assert draws[:2] == [3, 2]  # one draw per position but the last

    def test_the_same_choices_give_the_same_order_and_others_another(self) -> None:
        def order_for(seed: int) -> list[str]:
            return list(loop_of(order=Choices(seed).below).call(self.gathered([])))
        orders = {seed: order_for(seed) for seed in range(30)}
        assert all(order_for(seed) == orders[seed] for seed in range(5))
        assert len({tuple(order) for order in orders.values()}) > 2

    def test_plain_callbacks_keep_the_order_they_were_made_in(self) -> None:
        async def callbacks() -> list[int]:
            loop, names = asyncio.get_running_loop(), []
            for number in range(5):
                loop.call_soon(names.append, number)
            await asyncio.sleep(0)
            return names
        assert loop_of(order=lambda n: n - 1).call(callbacks) == [0, 1, 2, 3, 4]


class TestWhatACallLeaves:
    def test_a_task_left_pending_is_named_and_cancelled(self) -> None:
        done: list[str] = []
        made: list[asyncio.Task[None]] = []

        async def forgets() -> None:
            made.append(asyncio.get_running_loop().create_task(sleeper(done)))
            await asyncio.sleep(0)

        with pytest.raises(LoopFailure, match=r"a task was still pending when forgets returned "
                           r".*: test_async_loop\.py:\d+, in sleeper$") as raised:
            loop_of().call(forgets)
        assert (raised.value.problem, raised.value.error) == ("leaked", "PendingTask")
        assert made[0].cancelled() and done == ["unwound"]  # cancelled, and run to its end

    def test_a_task_named_by_its_maker_is_told_by_its_name(self) -> None:
        async def forgets() -> None:
            asyncio.get_running_loop().create_task(sleeper([]), name="mailer")

        with pytest.raises(LoopFailure, match=r"task 'mailer': test_async_loop\.py:\d+, in "
                                              r"sleeper"):
            loop_of().call(forgets)

    def test_a_coroutine_never_awaited_is_named_with_where_it_was_made(self) -> None:
        async def forgetful() -> str:
            sleeper([])  # type: ignore[unused-coroutine]
            return "said"

        with pytest.raises(LoopFailure, match=r"never awaited while forgetful ran: sleeper, "
                                              r"made at test_async_loop\.py:\d+, in "
                                              r"forgetful$") as raised:
            loop_of().call(forgetful)
        assert raised.value.error == "UnawaitedCoroutine"

    def test_one_dropped_in_a_reference_cycle_is_told_by_the_call_that_made_it(self) -> None:
        """A coroutine kept only by a cycle is collected when the collector runs: the call
        that dropped it is failed as it ends, and a later call that collects is not blamed."""
        async def forgets_in_a_cycle() -> str:
            held: dict[str, Any] = {"coroutine": sleeper([])}
            held["self"] = held
            return "said"

        async def innocent() -> str:
            import gc
            gc.collect()
            return "ok"

        loop = loop_of()
        with pytest.raises(LoopFailure, match=r"never awaited while forgets_in_a_cycle ran: "
                                              r"sleeper"):
            loop.call(forgets_in_a_cycle)
        assert loop.call(innocent) == "ok"

    def test_a_callback_left_on_a_timer_is_named(self) -> None:
        async def later() -> None:
            asyncio.get_running_loop().call_later(5, print)

        with pytest.raises(LoopFailure, match=r"a callback was left scheduled when later "
                                              r"returned \(dropped\): print$"):
            loop_of().call(later)

    def test_waiting_on_what_nothing_completes_is_a_deadlock(self) -> None:
        async def waits() -> None:
            await asyncio.get_running_loop().create_future()

        with pytest.raises(LoopFailure, match=r"nothing will complete .*: test_async_loop\.py:"
                                              r"\d+, in .*waits$") as raised:
            loop_of().call(waits)
        assert (raised.value.problem, raised.value.error) == ("hung", "Deadlock")

    def test_a_task_that_never_ends_meets_the_bound_of_turns(self) -> None:
        async def spins() -> None:
            while True:
                await asyncio.sleep(1)

        with pytest.raises(LoopFailure, match=f"turned {TURNS_MAX:,} times") as raised:
            loop_of().call(spins)
        assert raised.value.error == "LoopBound"

    def test_an_exception_no_one_awaited_is_the_machine_raising(self) -> None:
        async def fails() -> None:
            raise ValueError("card service down")

        async def fires_and_forgets() -> None:
            asyncio.get_running_loop().create_task(fails())
            await asyncio.sleep(1)

        with pytest.raises(LoopFailure, match=r"a task nobody awaited raised \(test_async_loop"
                                              r"\.py:\d+, in .*fails\): card service down"
                           ) as raised:
            loop_of().call(fires_and_forgets)
        assert (raised.value.problem, raised.value.error) == ("raised", "ValueError")
        assert "ValueError: card service down" in raised.value.trace

    def test_other_warnings_reach_the_caller(self) -> None:
        async def warns() -> None:
            warnings.warn("deprecated tool", DeprecationWarning, stacklevel=1)

        with pytest.warns(DeprecationWarning, match="deprecated tool"):
            loop_of().call(warns)


class TestFaults:
    def test_a_crash_leaves_the_call_and_the_other_tasks_unwind(self) -> None:
        done: list[str] = []

        async def crashes() -> None:
            asyncio.get_running_loop().create_task(sleeper(done))
            await asyncio.sleep(1)
            raise SimulatedCrash("after_tool_call")

        with pytest.raises(SimulatedCrash, match="after_tool_call"):
            loop_of().call(crashes)
        assert done == ["unwound"]

    def test_a_fault_struck_in_a_task_nobody_awaits_still_ends_the_call(self) -> None:
        """The crash a probe raised is told by `fatal()`: the call stops at the next turn, and
        its own sleep never ends (the process died)."""
        struck: list[BaseException] = []
        woke: list[bool] = []

        async def crash() -> None:
            struck.append(SimulatedCrash("before_save"))
            raise struck[0]

        async def main() -> None:
            asyncio.get_running_loop().create_task(crash())
            await asyncio.sleep(60)
            woke.append(True)

        with pytest.raises(SimulatedCrash, match="before_save"):
            loop_of(fatal=lambda: struck[0] if struck else None).call(main)
        assert woke == []

    def test_tasks_unwind_with_faults_hushed(self) -> None:
        hushed: list[bool] = []
        state = {"quiet": False}

        @contextlib.contextmanager
        def hush() -> Any:
            state["quiet"] = True
            try:
                yield
            finally:
                state["quiet"] = False

        async def notes_quiet() -> None:
            try:
                await asyncio.sleep(60)
            finally:
                hushed.append(state["quiet"])

        async def crashes() -> None:
            asyncio.get_running_loop().create_task(notes_quiet())
            await asyncio.sleep(0)
            raise SimulatedCrash("after_tool_call")

        loop = RunLoop(lambda: 0, lambda n: 0, lambda: None, hush)
        with pytest.raises(SimulatedCrash, match="after_tool_call"):
            loop.call(crashes)
        assert hushed == [True] and state["quiet"] is False


class TestCalls:
    def test_a_call_runs_inside_another_loop_s_callback(self) -> None:
        """A second worker's call, made inside the machine's own: the inner one ends first."""
        inner = loop_of(clock=lambda: 7_000)

        async def outer() -> tuple[float, float]:
            seen = inner.call(sleep_then_now, 1)
            return seen, await sleep_then_now(2)
        assert loop_of(clock=lambda: 1_000).call(outer) == (8.0, 3.0)

    def test_a_call_inside_another_starts_from_the_run_s_context_not_the_caller_s(
            self) -> None:
        """A context variable the machine's call set is not the second worker's."""
        acting: contextvars.ContextVar[str] = contextvars.ContextVar("acting", default="none")
        inner = loop_of()

        async def reads() -> str:
            return acting.get()

        async def outer() -> tuple[str, str]:
            acting.set("the first worker")
            return inner.call(reads), acting.get()
        assert loop_of().call(outer) == ("none", "the first worker")

    def test_a_call_runs_inside_a_loop_of_the_caller_s(self) -> None:
        """A notebook's loop runs around the simulation: no thread is needed."""
        async def notebook() -> float:
            return float(loop_of().call(sleep_then_now, 10))
        assert asyncio.run(notebook()) == 10.0

    def test_async_calls_drive_coroutine_methods_and_pass_plain_ones(self) -> None:
        class Mixed:
            async def deliver(self, seconds: float) -> float:
                return await sleep_then_now(seconds)

            def observe(self) -> str:
                return "plain"

        machine = Mixed()
        calls = AsyncCalls(machine, loop_of())
        assert is_async(machine) and not is_async(object())
        assert (calls.deliver(4), calls.observe()) == (4.0, "plain")
        assert calls.observe == machine.observe  # the machine's own method, as it is

    def test_a_closed_loop_is_closed(self) -> None:
        loop = loop_of()
        loop.call(now)
        loop.close()
        assert loop.loop.is_closed()
