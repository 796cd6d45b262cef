"""The machine under test as a run holds it: made against the run's tool world, called with
an injected crash or store failure survived (the machine recovered from its store), crashed at
its probe points, met by a second worker, and closed when the run ends.

Every call into the machine goes through `Machinery.guard`; the machine calls back at its
probe points (`_probe`) and through its tools (counted against the per-step bound). An async
machine's calls run on event loops the machinery makes (`harness.sim.asyncloop`).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from fault_injection import STORE_WRITE, FaultKind, FaultPlan, SimulatedCrash, StoreWriteError
from harness.sim.asyncloop import AsyncCalls, LoopFailure, RunLoop, is_async
from harness.sim.chances import CRASH, STORE, WORKER, Rates, Tally
from harness.sim.context import Hung, Nonsense, RunContext
from harness.sim.history import Crashed, Recovered
from harness.sim.machine import AsyncMachineUnderTest, MachineUnderTest
from harness.sim.options import BETWEEN, check_points
from harness.sim.watchdog import Watchdog, beat, doing, rest
from harness.sim.world import ToolWorld

if TYPE_CHECKING:
    from harness.sim.observer import Observer
    from harness.sim.timekeeping import Timekeeper

__all__ = ["Machinery"]

_CLOSE_BOUND = 5  # a machine's close() may take this many step timeouts (a slow teardown)


class Machinery:
    """Makes the machine under test, calls it, crashes and recovers it, brings in its second
    worker, and closes it. Owns the machine (`machine`; `calls`, the machine as it is called),
    its second worker, the run's event loops, the tool world, the crash points the machine
    offers, and the per-step bound of operations. The timekeeper (the machine's time) and
    the observer (told what the machine commits) are given to it once they are made."""

    def __init__(self, ctx: RunContext, plan: FaultPlan, rates: Rates, tally: Tally,
                 watchdog: Watchdog) -> None:
        simulator, options = ctx.sim, ctx.options
        self.ctx, self.plan, self.rates, self.watchdog = ctx, plan, rates, watchdog
        self.sim, self.definition, self.options = simulator, ctx.definition, options
        self.clock, self.emit = ctx.clock, ctx.emit
        self.chances, self.passed, self.unoffered = tally.chances, tally.passed, tally.unoffered
        self.world = ToolWorld(ctx.definition, plan, ctx.rng, ctx.clock, ctx.emit, seed=ctx.seed,
                               honour_keys=options.honour_keys,
                               executions=ctx.execution_of, outputs=simulator.outputs,
                               tables=simulator.tables if plan is simulator.plan else None,
                               on_call=self._count, activity=self._doing)
        self.ops = 0  # what the machine did this step: tool calls and probe points passed
        self.ops_max = options.ops_max
        self.quiet = False  # no fault is injected meanwhile (building, recovering, a worker)
        self.in_worker = False  # the second worker is acting
        self.worker: MachineUnderTest | AsyncCalls | None = None
        self.closing = False  # the machines were told the run ended
        # made by build before the first step; None only while a factory that raised is told of
        self.machine: MachineUnderTest | AsyncMachineUnderTest = None  # type: ignore[assignment]
        # the machine as it is called: itself, or (async) its coroutines run on the run's loop
        self.calls: MachineUnderTest | AsyncCalls = None  # type: ignore[assignment]
        self.loops: list[RunLoop] = []  # the run's event loops: the machine's, its worker's
        self.dying: BaseException | None = None  # a crash or bound struck in the machine
        self.points: frozenset[str] = frozenset()
        self.offered: tuple[str, ...] = ()  # the crash points, in the machine's order
        self.between = False  # a machine that names no crash points crashes between steps
        self.timekeeper: Timekeeper  # given by the run once made
        self.observer: Observer  # given by the run once made

    def build(self) -> None:
        """Makes the machine (a factory that raises is that machine's failure); no fault is
        injected while it is built."""
        self.quiet = True
        try:
            machine = self.sim.machine(self.definition, self.world.tools, self._probe)
            if inspect.isawaitable(machine):  # an async factory's
                machine = self._loop().call(_awaited, machine)
            self.machine = machine
            self.calls = self._called(machine)
        finally:
            self.quiet = False
        named = getattr(self.machine, "crash_points", ())
        if not isinstance(named, tuple | list):  # a set: its order is the process's
            named = tuple(sorted(named))
        # a plan may name any point the machine's class names: one this definition cannot
        # pass (the reference's call points, without tools) is simply never passed
        declared = getattr(type(self.machine), "crash_points", None)
        check_points(self.plan, (*named, *(declared if isinstance(declared, tuple | list)
                                           else ())))
        crash = self.plan.get(FaultKind.CRASH)
        self.offered = tuple(crash.points if crash is not None and crash.points else named)
        self.points = frozenset(self.offered)
        self.between = not named  # a machine without named points crashes between steps
        # a machine that tells what it commits and records is observed where it changed;
        # another, everywhere after each step
        watch = getattr(self.machine, "watch", None)
        self.observer.watched = watch is not None
        if watch is not None:
            watch(self.observer.committed, self.observer.recorded)

    def _called(self, machine: Any) -> Any:
        """Gives the machine as the simulator calls it: itself, or, when some of its methods
        are coroutine functions, those run on the run's loop."""
        return AsyncCalls(machine, self._loop()) if is_async(machine) else machine

    def _loop(self) -> RunLoop:
        """Gives the run's event loop (made the first time)."""
        return self.loops[0] if self.loops else self._new_loop()

    def _new_loop(self) -> RunLoop:
        loop = RunLoop(lambda: self.timekeeper.machine_time, lambda n: self.ctx.rng.below(n),
                       lambda: self.dying or self.watchdog.overran, self._hushed)
        self.loops.append(loop)
        return loop

    @contextlib.contextmanager
    def _hushed(self) -> Iterator[None]:
        """Keeps faults off meanwhile (while an async machine's tasks unwind)."""
        quiet, self.quiet = self.quiet, True
        try:
            yield
        finally:
            self.quiet = quiet

    def close(self) -> None:
        """The run has ended: each machine's optional `close()` (its files, its connections;
        once, and what it raises does not change the verdict), then the event loops."""
        machines, self.closing = ([] if self.closing else [self.worker, self.machine]), True
        for machine in machines:
            close = getattr(machine, "close", None) if machine is not None else None
            if callable(close):
                doing(f"closing the machine: close(), bounded at {_CLOSE_BOUND} times "
                      "the step timeout")
                beat(self.watchdog.seconds * _CLOSE_BOUND)  # only a parent can bound it
                try:
                    with contextlib.suppress(Exception):
                        close()
                finally:
                    rest()
        for loop in self.loops:
            loop.close()
        self.watchdog.release()

    # -- calling the machine -----------------------------------------------------------------

    def guard(self, activity: str, call: Any, *args: Any) -> tuple[bool, Any]:
        """Calls the machine; an injected crash or store failure is survived here (the machine
        is recovered), anything else it raises ends the run."""
        self.ctx.activity = activity
        doing(activity, call)
        try:
            said = call(*args)
        except SimulatedCrash as crash:
            self.dying = None  # survived: the machine is recovered
            self.emit(Crashed(self.clock.step, self.clock.now, crash.point, activity))
            self._recover(crashed=True)
        except StoreWriteError:
            self._recover(crashed=False)
        else:
            if said is not None and type(said) is not str and inspect.isawaitable(said):
                _close_awaitable(said)  # dropped here: no second warning of it
                raise Nonsense(f"{getattr(call, '__name__', activity)}() gave a coroutine, "
                               "not its answer: a method that awaits must be `async def`, so "
                               "that the simulator awaits it")
            return True, said
        return False, None

    def _recover(self, *, crashed: bool) -> None:
        """Recovers the machine from its store until it manages (after `recoveries_max`
        failed tries, with faults off: a storm of crashes must end)."""
        clock, machine = self.clock, self.calls
        quiet, attempts = self.quiet, 0
        # a tick a crash cut short fires nothing: each is due again
        self.timekeeper.told_due.clear()
        if crashed:
            machine.crash()
        try:
            while True:
                attempts += 1
                if attempts > self.options.recoveries_max:
                    self.quiet = True
                if attempts > 2 * self.options.recoveries_max:
                    raise Hung(f"recovery never succeeds: {attempts - 1} tries, the last "
                               f"{self.options.recoveries_max} with no fault injected")
                self.ctx.activity = "recovery"
                doing("recovery: recover()")
                try:
                    machine.recover(self.timekeeper.machine_now())
                    break
                except SimulatedCrash as crash:
                    self.dying = None
                    self.emit(Crashed(clock.step, clock.now, crash.point, "recovery"))
                    machine.crash()
                except StoreWriteError:
                    continue
        finally:
            self.quiet = quiet
        self.emit(Recovered(clock.step, clock.now, attempts))

    def _count(self) -> None:
        """Counts one tool call against the per-step bound."""
        self.ops += 1
        if self.ops > self.ops_max:
            raise self._hung()

    def _doing(self) -> str:
        """Tells what the machine is doing when it calls a tool (for `Dispatched.during`)."""
        return "worker" if self.in_worker else self.ctx.activity

    def _hung(self) -> Hung:
        self.dying = hung = Hung(f"more than {self.ops_max} operations in one step (while "
                                 f"{self.ctx.activity}): a loop that never ends?")
        return hung

    def _probe(self, point: str) -> None:
        """The machine passes a named point: maybe crash it, fail its write, or let a second
        worker act first."""
        self.ops += 1
        if self.ops > self.ops_max:
            raise self._hung()
        if self.quiet:
            return
        rng = self.ctx.rng
        if point == STORE_WRITE:
            if not self.ctx.healed:
                self.chances[STORE] += 1
            if self.rates.r_store and rng.chance(FaultKind.STORE_WRITE_FAILURE,
                                                 self.rates.r_store):
                self.ctx.fault(FaultKind.STORE_WRITE_FAILURE, "",
                               f"during {self.ctx.activity}")
                raise StoreWriteError(self.ctx.activity)
            return
        if not self.ctx.healed:
            if point in self.points:
                self.passed[point] = self.passed.get(point, 0) + 1
                self.chances[CRASH] += 1
            self.chances[WORKER] += 1
        rate = (self.rates.r_crash_at.get(point, self.rates.r_crash) if self.rates.r_crash_at
                else self.rates.r_crash)
        if rate and point in self.points and rng.chance(FaultKind.CRASH, rate, point):
            self.ctx.fault(FaultKind.CRASH, "", f"at {point} during {self.ctx.activity}")
            self.dying = crash = SimulatedCrash(point)  # an async machine's loop stops too
            raise crash
        if self.rates.r_worker and not self.in_worker and rng.chance(
                FaultKind.SECOND_WORKER, self.rates.r_worker, point):
            self._second_worker(point)

    def between_steps(self) -> None:
        """A machine that names no crash points is crashed, and met by a second worker,
        between two steps (all it offers)."""
        rng = self.ctx.rng
        if not self.ctx.healed:
            self.passed[BETWEEN] = self.passed.get(BETWEEN, 0) + 1
            self.chances[CRASH] += 1
            self.chances[WORKER] += 1
        rate = (self.rates.r_crash_at.get(BETWEEN, self.rates.r_crash) if self.rates.r_crash_at
                else self.rates.r_crash)
        if rate and rng.chance(FaultKind.CRASH, rate, BETWEEN):
            self.ctx.fault(FaultKind.CRASH, "", "between steps")
            self.emit(Crashed(self.clock.step, self.clock.now, "between_steps", "idle"))
            self._recover(crashed=True)
        if self.rates.r_worker and rng.chance(FaultKind.SECOND_WORKER, self.rates.r_worker,
                                              "between_steps"):
            self._second_worker("between_steps")

    def _second_worker(self, point: str) -> None:
        """Another worker, with its own memory and the same store, acts in the middle of this
        one's step: it recovers, fires due timers and takes the same event."""
        if self.worker is None:
            quiet, self.quiet = self.quiet, True
            loop = None
            try:
                make = self.machine.worker
                if inspect.iscoroutinefunction(make):  # made on the worker's own loop: the
                    loop = self._new_loop()  # machine's may be running (mid-call)
                    worker = loop.call(make)
                else:
                    worker = make()
            finally:
                self.quiet = quiet
            if worker is None:
                self.rates.r_worker = 0.0  # this machine has no second worker to offer
                self.unoffered.add(WORKER)
                return
            self.worker = (worker if not is_async(worker) else
                           AsyncCalls(worker, loop if loop is not None else self._new_loop()))
        current = self.ctx.current
        self.ctx.fault(FaultKind.SECOND_WORKER, current[0] if current else "",
                       f"at {point} during {self.ctx.activity}")
        self.in_worker, quiet = True, self.quiet
        self.quiet = True  # the other worker is not the one being faulted
        try:
            now = self.timekeeper.machine_now()
            self.worker.recover(now)
            self.worker.advance(now)
            if current is not None:
                self.worker.deliver(current[0], current[1], now)
        except LoopFailure as failure:  # inside the machine's own loop, that one stops too
            self.dying = failure
            raise
        finally:
            self.in_worker, self.quiet = False, quiet


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _close_awaitable(awaitable: Any) -> None:
    close = getattr(awaitable, "close", None)
    if close is not None:
        close()
