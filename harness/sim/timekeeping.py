"""Time in a run: the virtual clock moved to what falls due next, and the time the machine is
told, which a timer skew sets ahead (timers fire early) or holds back (this one fires late),
and which never goes back. A timer the machine is told is due again and again, its execution
unmoved, is one it refuses to fire.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from fault_injection import FaultKind
from harness.sim.chances import SKEW, Rates, Tally
from harness.sim.context import RunContext
from harness.sim.history import TimerFired
from harness.sim.machine import Observation
from harness.sim.machinery import Machinery
from harness.sim.options import FROZEN_EPOCH

__all__ = ["Timekeeper"]

_REFUSALS_MAX = 3  # times a due timer is fired, its execution unmoved, before it is refused


class Timekeeper:
    """Moves the run's clock and tells the machine its time. Owns the machine's clock
    (`machine_time`, never going back; `offset`, how far a skew set it ahead), freezegun's
    handle when wall time follows it, and how often each timer was told due."""

    def __init__(self, ctx: RunContext, rates: Rates, tally: Tally,
                 machinery: Machinery) -> None:
        self.ctx, self.rates, self.machinery = ctx, rates, machinery
        self.sim, self.clock, self.emit, self.obs = ctx.sim, ctx.clock, ctx.emit, ctx.obs
        self.chances, self.world = tally.chances, machinery.world
        self.machine_time = 0  # the machine's clock: never goes back
        # (execution, timer) -> (version, times told due): a timer the machine was told was
        # due `_REFUSALS_MAX` times and still shows, its execution unmoved, is one it refuses
        # to fire (its move rejected): the clock moves past it, and it moves nothing
        self.told_due: dict[tuple[str, str], tuple[int, int]] = {}
        self.offset = 0  # how far the machine's clock runs ahead (an early timer skew)
        self.frozen: Any = None  # freezegun's handle, with `freeze_clock`

    def advance(self, target: int) -> None:
        """Moves the clock to `target` and tells the machine, firing what is due; a timer
        skew makes the machine's clock run ahead from now on (the timer fires early) or makes
        this timer fire late. The machine's clock never goes back."""
        clock, rng = self.clock, self.ctx.rng
        due = target + self.offset  # the machine's time when the clock reaches the target
        sim_now = target
        timers = [fire_at for obs in self.obs.values() for _, fire_at in obs.timers]
        falls_due = any(t <= due for t in timers)
        if falls_due and not self.ctx.healed and self.sim.skews:
            self.chances[SKEW] += 1
        if self.rates.r_skew and falls_due and rng.chance(FaultKind.TIMER_SKEW,
                                                          self.rates.r_skew):
            skew = 1 + rng.below(self.rates.max_skew)
            if rng.flip(0.5):  # the machine's clock runs fast: timers fire early
                self.offset = skew
                sim_now = max(clock.now, due - skew)
            else:  # it runs slow: this timer fires late
                self.offset = 0
                sim_now = due + skew
            self.ctx.fault(FaultKind.TIMER_SKEW, "", f"due {due}, fired when the clock "
                                                     f"showed {sim_now}")
        clock.now = sim_now
        self.world.land(sim_now)
        machine_now = self.machine_now()
        if any(t <= machine_now for t in timers):
            self.emit(TimerFired(clock.step, sim_now, due, machine_now, machine_now - sim_now))
            told = self.told_due
            for eid, obs in self.obs.items():
                if obs.status != "final":
                    for timer, fire_at in obs.timers:
                        if fire_at <= machine_now:
                            version, times = told.get((eid, timer), (obs.version, 0))
                            told[eid, timer] = (obs.version, times + 1 if version == obs.version
                                                else 1)
        self.machinery.guard("timer", self.machinery.calls.advance, machine_now)

    def machine_now(self) -> int:
        """Gives the time the machine is told: the clock plus the skew's offset, never less
        than what it was told before."""
        now = self.clock.now + self.offset
        if now < self.machine_time:
            now = self.machine_time
        if now != self.machine_time and self.frozen is not None:
            self.frozen.move_to(FROZEN_EPOCH + timedelta(milliseconds=now))
        self.machine_time = now
        return now

    def refused(self, eid: str, obs: Observation, timer: str) -> bool:
        """Tells whether the machine refuses to fire an execution's timer: told it was due
        `_REFUSALS_MAX` times, the execution unmoved."""
        told = self.told_due.get((eid, timer))
        return told is not None and told[0] == obs.version and told[1] >= _REFUSALS_MAX
