"""The protocol's async form, end to end: hand-written async machines (`async_machines.py` in
tests/support) run on the run's own event loop, hold their invariants under every fault, give
the same bytes for the same seed in any process, and fail `machine_ok` for what they leave
behind."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import async_machines
from async_machines import (
    DEFINITION,
    AsyncOrders,
    ForgetsToAwait,
    LeavesATask,
    SleepsLong,
    history_lines,
)

from fault_injection import no_faults
from harness import (
    Applied,
    Crashed,
    Dispatched,
    FaultInjected,
    FuzzOptions,
    Recovered,
    SimOptions,
    Simulator,
    check,
    fuzz,
)
from harness.sim.simulator import FROZEN_EPOCH, Run

ROOT = Path(__file__).resolve().parents[3]
SOURCE = Path(async_machines.__file__).read_text(encoding="utf-8").splitlines()


def line_of(text: str) -> int:
    """Gives the number of the line of async_machines.py that holds `text`."""
    (number,) = [n for n, line in enumerate(SOURCE, 1) if text in line]
    return number


def executed(machine: Any, seed: int, **options: Any) -> Run:
    """Gives a run of `machine` executed to its end (its loops are then to be seen)."""
    run = Simulator(DEFINITION, SimOptions(seed=seed, **options), machine=machine).begin()
    run.execute()
    return run


def first_run(machine: Any, found: Any, seeds: range = range(300)) -> Run:
    """Gives the first run among `seeds` whose history `found` accepts."""
    for seed in seeds:
        run = executed(machine, seed)
        if found(run.history):
            return run
    raise AssertionError(f"no run among seeds {seeds.start} to {seeds.stop - 1} fits")


class TestASoundAsyncMachine:
    def test_it_holds_under_every_fault_with_every_move_taken(self) -> None:
        report = fuzz(DEFINITION, FuzzOptions(runs=200, replay_dir=None), machine=AsyncOrders)
        assert report.verdict == "held", [str(f.violations[0]) for f in report.failures]
        assert report.summary()["coverage"]["transitions"]["missing"] == []
        assert report.faults.get("crash") and report.faults.get("second_worker")

    def test_its_calls_run_on_the_run_s_loop_closed_at_the_end(self) -> None:
        run = executed(AsyncOrders, 3)
        assert run.failure is None and len(run.loops) >= 1
        assert all(each.loop.is_closed() for each in run.loops)
        assert run.loops[0].loop.turns > 0  # it turned: the calls were made on it

    def test_a_crash_inside_an_awaited_tool_call_is_recovered(self) -> None:
        """The probe crashes the machine inside a gathered tool call: the simulator recovers
        it as a synchronous one's, the event is sent again, and every invariant holds; the
        charge is made once per execution (the service honours its key)."""
        run = first_run(AsyncOrders, lambda history: any(
            type(r) is Crashed and r.point == "after_tool_call" and r.during == "external"
            for r in history))
        history = run.history
        crashed = next(i for i, r in enumerate(history) if type(r) is Crashed
                       and r.point == "after_tool_call")
        assert any(type(r) is Recovered for r in history[crashed:])
        assert run.failure is None and check(DEFINITION, history) == []
        charged = [r.execution for r in history if type(r) is Applied
                   and r.tool == "pay.charge"]
        assert sorted(charged) == sorted(set(charged))

    def test_the_same_crash_against_a_service_that_ignores_keys_charges_twice(self) -> None:
        keyless = SimOptions(honour_keys={"pay.charge": False})
        report = fuzz(DEFINITION, FuzzOptions(runs=200, replay_dir=None, sim=keyless),
                      machine=AsyncOrders)
        assert report.failures and report.failures[0].rule == "no_duplicate_effect"

    def test_a_second_worker_mid_call_runs_on_a_loop_of_its_own(self) -> None:
        run = first_run(AsyncOrders, lambda history: any(
            type(r) is FaultInjected and r.fault == "second_worker"
            and "after_tool_call during external" in r.detail for r in history))
        assert run.failure is None and check(DEFINITION, run.history) == []
        assert len(run.loops) == 2 and run.loops[0].loop is not run.loops[1].loop

    def test_a_worker_made_by_a_coroutine_is_made_on_its_own_loop(self) -> None:
        """`async def worker()`, asked for in the middle of the machine's own call."""
        class Awaiting(AsyncOrders):
            async def worker(self) -> AsyncOrders:  # type: ignore[override]
                await asyncio.sleep(1)
                return AsyncOrders(None, self.tools, self.probe, disk=self.disk)

        run = first_run(Awaiting, lambda history: any(
            type(r) is FaultInjected and r.fault == "second_worker"
            and "during external" in r.detail for r in history))
        assert run.failure is None and check(DEFINITION, run.history) == []
        assert len(run.loops) == 2

    def test_an_async_factory_is_awaited(self) -> None:
        async def build(definition: Any, tools: Any, probe: Any) -> AsyncOrders:
            await asyncio.sleep(1)
            return AsyncOrders(definition, tools, probe)

        result = Simulator(DEFINITION, SimOptions(seed=4), machine=build).run()
        assert result.ok and result.status == "final"


class TestDeterminism:
    def test_the_same_seed_gives_the_same_bytes(self) -> None:
        assert history_lines(7) == history_lines(7)
        assert history_lines(7) != history_lines(8)

    def test_the_order_of_tasks_ready_together_is_drawn_from_the_seed(self) -> None:
        """The charge and the receipt are gathered: which is sent first differs between
        seeds (no fault here could reorder them), and is the same for one seed."""
        def first_sent(seed: int) -> list[str]:
            history = Simulator(DEFINITION, SimOptions(seed=seed, plan=no_faults()),
                                AsyncOrders).run().history
            return [r.tool for r in history if type(r) is Dispatched][:2]
        orders = {tuple(first_sent(seed)) for seed in range(40)}
        assert orders == {("pay.charge", "mail.send"), ("mail.send", "pay.charge")}
        assert all(first_sent(seed) == first_sent(seed) for seed in range(3))

    def test_the_same_seed_gives_the_same_bytes_in_other_processes(self) -> None:
        """Children under two PYTHONHASHSEEDs write what this process does."""
        script = str(ROOT / "tests" / "support" / "async_machines.py")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get(
            "PYTHONPATH", "")])}
        written = [subprocess.run([sys.executable, script, "11"], capture_output=True,
                                  check=True, timeout=120,
                                  env={**env, "PYTHONHASHSEED": hash_seed}).stdout
                   for hash_seed in ("0", "12345")]
        assert written[0] and written[0] == written[1] == history_lines(11)


class TestVirtualTime:
    def test_a_long_sleep_inside_a_call_ends_at_once_and_costs_the_run_no_time(self) -> None:
        """Eleven days of sleep in every delivery: the run completes, the loop's clock moved
        by the sleep from the machine's `now`, and the history is the one the machine that
        does not sleep gives, time for time (a sleep is no time on the simulator's clock)."""
        run = executed(SleepsLong, 1)
        assert run.failure is None and run.stopped() == "final"
        slept = run.machine.slept  # type: ignore[union-attr]
        assert slept and all(after - before == 10**6 for _, before, after in slept)
        told, started, _ = slept[0]
        assert started == told / 1000  # the first call starts at the machine's time
        assert run.history[1:] == executed(AsyncOrders, 1).history[1:]


    def test_a_frozen_wall_clock_stays_where_the_call_began(self) -> None:
        """With `freeze_clock`, `datetime.now()` is the machine's time as told; a sleep moves
        the loop's clock only."""
        class Wall(AsyncOrders):
            seen: list[tuple[int, datetime, datetime]] = []

            async def deliver(self, *args: Any) -> Any:
                before = datetime.now(UTC)
                await asyncio.sleep(60)
                self.seen.append((args[2], before, datetime.now(UTC)))
                return await super().deliver(*args)

        run = executed(Wall, 1, freeze_clock=True)
        assert run.failure is None and Wall.seen
        for told, before, after in Wall.seen:
            assert before == after == FROZEN_EPOCH + timedelta(milliseconds=told)


class TestWhatAMachineLeavesBehind:
    def test_a_task_left_pending_fails_the_run_and_is_named(self) -> None:
        run = executed(LeavesATask, 3)
        failure = run.failure
        assert failure is not None
        assert (failure.problem, failure.error) == ("leaked", "PendingTask")
        sleeping = line_of("await asyncio.sleep(latency)")  # where the mailing task waits
        assert failure.message.endswith(f"async_machines.py:{sleeping}, in AsyncOrders.call")
        assert [v.rule for v in check(DEFINITION, run.history)] == ["machine_ok"]
        # cancelled before its latency ended: the receipt never reached the service
        assert [r.tool for r in run.history if type(r) is Applied] == ["pay.charge"]
        loop = run.loops[0].loop
        assert loop.is_closed() and not asyncio.all_tasks(loop)

    def test_a_coroutine_never_awaited_fails_the_run_and_is_named(self) -> None:
        report = fuzz(DEFINITION, FuzzOptions(runs=20, replay_dir=None), machine=ForgetsToAwait)
        assert report.verdict == "violated" and report.failures[0].rule == "machine_ok"
        made = line_of('self.call(execution_id, "mail.send", version)  # type: ignore')
        assert report.failures[0].violations[0].message == (
            "the machine leaked (UnawaitedCoroutine): while external: a coroutine was never "
            f"awaited while deliver ran: AsyncOrders.call, made at async_machines.py:{made}, "
            "in pay")

    def test_a_plain_method_giving_a_coroutine_is_nonsense(self) -> None:
        """Its coroutine would never be awaited: the run says so instead of passing."""
        class Mixed(AsyncOrders):
            def deliver(self, *args: Any) -> Any:  # type: ignore[override]
                return super().deliver(*args)

        run = executed(Mixed, 3)
        assert run.failure is not None and run.failure.problem == "nonsense"
        assert "deliver() gave a coroutine, not its answer" in run.failure.message
