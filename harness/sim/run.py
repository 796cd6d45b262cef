"""One run of the simulator, as an orchestration of its parts: the scheduler chooses and
performs each step's action; the machinery calls the machine, crashes and recovers it; the
timekeeper moves the clock; delivery sends events the way the outside world does; the sender
and the approver make the events; the observer sees the executions and records the commits;
the rates and the tally say how readily faults strike and where they could have.

A run logs how it is made and builds the machine (`start`), takes steps with faults on (the
safety phase), heals and takes more with every fault off (the liveness phase), and ends
(`finish`): each execution as last seen, and a replay of each log where the machine can.
A machine that raises, runs away or answers nonsense ends the run with a `MachineFailed`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import freezegun

from fault_injection import FaultPlanError, SimulatedCrash, StoreWriteError, no_faults
from harness.errors import Unsupported, trace_of, words_of
from harness.sim.actions import Action
from harness.sim.asyncloop import LoopFailure
from harness.sim.chances import Rates, Tally
from harness.sim.choices import AimedChoices, Choices
from harness.sim.context import Hung, Nonsense, RunContext
from harness.sim.delivery import Delivery
from harness.sim.history import REFUSED_TIMER, Finished, Healed, MachineFailed, Replayed, RunStarted
from harness.sim.machine import AsyncMachineUnderTest, MachineUnderTest, Observation
from harness.sim.machinery import Machinery
from harness.sim.observer import Observer
from harness.sim.options import BETWEEN, FROZEN_EPOCH
from harness.sim.outside import Approver, Sender
from harness.sim.results import Chances, SimulationResult
from harness.sim.scheduler import PATIENCE, Scheduler
from harness.sim.timekeeping import Timekeeper
from harness.sim.watchdog import Overran, Watchdog, apart, beat, doing, monotonic_now, rest

if TYPE_CHECKING:
    from harness.sim.simulator import Simulator

__all__ = ["OUT_OF_TIME", "Run"]

#: A run's status when its deadline (`Simulator.run(deadline=)`) passed before it ended.
OUT_OF_TIME = "out_of_time"


class Run:
    """One run; built fresh by each `Simulator.run` (or `Simulator.begin`, for an engine that
    drives it a step at a time: `start`, then `step`, `heal` and `finish`). Owns how it ends
    (`failure`, and the `trace` of what the machine raised), the step where it healed, and the
    watchdog on each step's wall time; its parts own the rest."""

    def __init__(self, simulator: Simulator, seed: int, choices: Choices | None = None,
                 deadline: float | None = None) -> None:
        options = simulator.options
        self.sim, self.options, self.seed = simulator, options, seed
        self.deadline = deadline  # the monotonic time past which no step starts
        self.definition = simulator.definition
        rng = choices if choices is not None else Choices(seed)
        rng.at_step(0)
        self.plan = plan = simulator.plan.for_run(rng)
        # how readily the run moves the clock (drawn after the plan, as a branch of step 0:
        # a schedule without the draw, written before there was one, gets the first, uniform)
        self.patience = PATIENCE[rng.branch(len(PATIENCE))] if rng.paced else 1.0
        self.ctx = ctx = RunContext(simulator, seed, rng)
        if isinstance(rng, AimedChoices):
            rng.context = ctx.aim
        self.watchdog = Watchdog(options.step_timeout_s)
        self.rates, self.tally = rates, tally = Rates(plan), Tally()
        self.machinery = machinery = Machinery(ctx, plan, rates, tally, self.watchdog)
        self.timekeeper = timekeeper = Timekeeper(ctx, rates, tally, machinery)
        self.delivery = delivery = Delivery(ctx, rates, tally, machinery, timekeeper)
        self.observer = observer = Observer(ctx, machinery, delivery)
        # the machinery is made first (the others call the machine through it), then told
        # of the machine's time and of the observer its commits go to
        machinery.timekeeper, machinery.observer = timekeeper, observer
        self.sender = Sender(ctx, rates, tally, delivery, observer)
        self.approver = Approver(ctx, rates, tally, delivery)
        self.scheduler = Scheduler(ctx, self.patience, machinery, timekeeper, delivery,
                                   observer, self.sender, self.approver)
        # what the engines and tests read of a run, held by its parts
        self.clock, self.history, self.emit = ctx.clock, ctx.history, ctx.emit
        self.ids, self.obs, self.unstarted = ctx.ids, ctx.obs, ctx.unstarted
        self.world, self.loops = machinery.world, machinery.loops
        self.healed_at = 0  # the last step of the safety phase, once healed
        self.failure: MachineFailed | None = None
        self.trace = ""

    @property
    def healed(self) -> bool:
        """Tells whether the run has healed (its liveness phase: no fault injected)."""
        return self.ctx.healed

    @property
    def machine(self) -> MachineUnderTest | AsyncMachineUnderTest:
        """Gives the machine under test, once built."""
        return self.machinery.machine

    def actions(self) -> list[Action]:
        """Gives the actions enabled now, in the order they are offered (`Scheduler.actions`)."""
        return self.scheduler.actions()

    # -- the loop ----------------------------------------------------------------------------

    def execute(self) -> SimulationResult:
        """Runs the simulation; with `freeze_clock` (or a machine factory that asks for it,
        `freeze_clock = True`: an adapter that pins the user's clock), `datetime.now()` and
        `time.time()` in the machine read the machine's virtual clock (from `FROZEN_EPOCH`),
        not the wall."""
        if not (self.options.freeze_clock or getattr(self.sim.machine, "freeze_clock", False)):
            return self._execute()
        with freezegun.freeze_time(FROZEN_EPOCH, real_asyncio=True) as frozen:
            self.timekeeper.frozen = frozen
            return self._execute()

    def _execute(self) -> SimulationResult:
        if not self.start():
            return self.result("machine_failed")
        status = self.steps(self.options.steps_max)
        if status not in ("final", OUT_OF_TIME) and self.failure is None and \
                self.options.liveness_steps:
            self.heal()
            status = self.steps(self.options.liveness_steps)
        return self.finish(status)

    def start(self) -> bool:
        """Logs the run and builds the machine; tells whether that went well (else the run's
        failure is set)."""
        self.emit(RunStarted(0, 0, self.seed, self.definition.name, self.definition.version,
                             _name_of(self.sim.machine), self.sim.logged_options(self.seed),
                             self.plan))
        beat(self.watchdog.seconds)
        try:
            return self._build_machine()
        finally:
            rest()

    def _build_machine(self) -> bool:
        try:
            self.ctx.activity = "building the machine"
            doing(self.ctx.activity)
            self.watchdog.start()
            try:
                self.machinery.build()
            finally:
                self.watchdog.stop()
        except (FaultPlanError, Unsupported):
            raise  # the plan names crash points this machine lacks: the user's mistake
        except KeyboardInterrupt:
            self._interrupted()
            return False
        except Hung as exc:
            self._fail(MachineFailed(0, 0, "hung", "StepBound", str(exc)), "")
            return False
        except Overran as exc:
            self._fail(MachineFailed(0, 0, "hung", "Watchdog",
                                     f"while {self.ctx.activity}: {exc}"), exc.stack)
            return False
        except LoopFailure as exc:
            self._fail(MachineFailed(0, 0, exc.problem, exc.error,
                                     f"while {self.ctx.activity}: {exc.message}"), exc.trace)
            return False
        except BaseException as exc:  # SystemExit too: the machine's, not the simulator's
            self._fail(MachineFailed(0, 0, "raised", type(exc).__name__,
                                     f"while {self.ctx.activity}: {words_of(exc)}"),
                       trace_of(exc))
            return False
        return True

    def _interrupted(self) -> None:
        """A KeyboardInterrupt left the machine: the user's Ctrl-C, raised again; in a child
        process, the machine's own (the parent gets the user's), which fails the run."""
        if not apart():
            raise  # the one being handled where this is called
        self._fail(MachineFailed(self.clock.step, self.clock.now, "raised", "KeyboardInterrupt",
                                 f"while {self.ctx.activity}: the machine raised "
                                 "KeyboardInterrupt"), "")

    def steps(self, count: int) -> str:
        """Runs up to `count` steps; gives `final` (every execution ended), `quiescent`
        (nothing could happen), `step_bound` (the steps ran out), `machine_failed`, or
        `out_of_time` (the run's deadline passed: what it saw is not a whole run)."""
        deadline = self.deadline
        for _ in range(count):
            # the system's monotonic clock, as the watchdog reads it: a frozen clock
            # (`freeze_clock`: freezegun patches `time.monotonic`) leaves it running
            if deadline is not None and monotonic_now() > deadline:
                return OUT_OF_TIME
            if not self.step():
                return "machine_failed" if self.failure is not None else self.stopped()
        return "step_bound"

    def stopped(self) -> str:
        """Tells why nothing can happen: every execution ended, or some are stuck."""
        done = not self.unstarted and all(o.status == "final" for o in self.obs.values())
        return "final" if done else "quiescent"

    def step(self) -> bool:
        """Performs one step (one action, chosen by the run's choices); tells whether one was
        performed (not when nothing could happen or the machine failed)."""
        if self.failure is not None:
            return False
        beat(self.watchdog.seconds)  # what the step does with what the machine said included
        try:
            return self._step()
        finally:
            rest()

    def _step(self) -> bool:
        clock = self.clock
        watchdog = self.watchdog
        try:
            actions = self.scheduler.actions()
            if not actions:
                return False
            clock.step += 1
            self.machinery.ops = 0
            self.ctx.rng.at_step(clock.step)
            watchdog.start()
            try:
                self.scheduler.perform(actions[self.scheduler.choose(actions)])
                if self.machinery.between:
                    self.machinery.between_steps()
                self.observer.observe()
            finally:
                watchdog.stop()
        except Hung as exc:
            self._fail(MachineFailed(clock.step, clock.now, "hung", "StepBound", str(exc)), "")
        except Overran as exc:
            self._fail(MachineFailed(clock.step, clock.now, "hung", "Watchdog",
                                     f"while {self.ctx.activity}: {exc}"), exc.stack)
        except LoopFailure as exc:
            self._fail(MachineFailed(clock.step, clock.now, exc.problem, exc.error,
                                     f"while {self.ctx.activity}: {exc.message}"), exc.trace)
        except Nonsense as exc:
            self._fail(MachineFailed(clock.step, clock.now, "nonsense", "Observation",
                                     str(exc)), "")
        except (SimulatedCrash, StoreWriteError) as exc:  # escaped a machine that was not called
            self._fail(MachineFailed(clock.step, clock.now, "raised", type(exc).__name__,
                                     f"an injected fault escaped the machine: "
                                     f"{words_of(exc)}"), "")
        except KeyboardInterrupt:
            self._interrupted()
            return False
        except Unsupported:
            raise  # what the adapter cannot model: the user's input, not the machine's fault
        except BaseException as exc:  # SystemExit too: the machine's, not the simulator's
            self._fail(MachineFailed(clock.step, clock.now, "raised", type(exc).__name__,
                                     f"while {self.ctx.activity}: {words_of(exc)}"),
                       trace_of(exc))
        return self.failure is None

    def heal(self) -> None:
        """Ends the safety phase: no fault is injected from here on, and the scheduler draws
        from its own seeded source (so a schedule edited by shrinking leaves it alone)."""
        if self.ctx.healed:
            return
        self.ctx.healed = True
        self.healed_at = self.clock.step
        self.emit(Healed(self.clock.step, self.clock.now))
        self.rates.set(no_faults())
        self.ctx.rng = Choices(f"{self.seed}:liveness")
        self.ctx.rng.at_step(self.clock.step)
        self.world.heal(self.ctx.rng)

    def finish(self, status: str) -> SimulationResult:
        """Ends the run: each execution as last seen and what could still move it, and, for a
        machine that can replay its log, whether that reproduces its state."""
        if self.failure is not None:
            return self.result("machine_failed")
        clock = self.clock
        for eid, obs in self.obs.items():
            self.emit(Finished(clock.step, clock.now, eid, obs.state, obs.status,
                               obs.outcome, obs.version, self._waiting_on(eid, obs)))
        replay = (getattr(self.machinery.calls, "replay", None) if self.options.replay_check
                  else None)
        if replay is not None:
            for eid in self.obs:
                try:
                    doing(f"replaying {eid}'s log: replay()")
                    beat(self.watchdog.seconds)
                    self.watchdog.start()
                    try:
                        replay(eid)
                    finally:
                        self.watchdog.stop()
                        rest()
                except KeyboardInterrupt:
                    raise
                except Overran as exc:  # a replay that loops is a hung machine, not a mismatch
                    self._fail(MachineFailed(clock.step, clock.now, "hung", "Watchdog",
                                             f"while replaying {eid}'s log: {exc}"), exc.stack)
                    return self.result("machine_failed")
                except LoopFailure as exc:  # what it left behind is no mismatch either
                    self._fail(MachineFailed(clock.step, clock.now, exc.problem, exc.error,
                                             f"while replaying {eid}'s log: {exc.message}"),
                               exc.trace)
                    return self.result("machine_failed")
                except BaseException as exc:  # what diverged is the finding, not a crash
                    self.emit(Replayed(clock.step, clock.now, eid, False,
                                       f"{type(exc).__name__}: {words_of(exc)}"))
                else:
                    self.emit(Replayed(clock.step, clock.now, eid, True))
        self.machinery.close()
        return self.result(status)

    def _waiting_on(self, eid: str, obs: Observation) -> tuple[str, ...]:
        """Names what could still move an execution that is not final."""
        if obs.status == "final":
            return ()
        waiting = []
        if obs.timers:
            refused = all(self.timekeeper.refused(eid, obs, timer) for timer, _ in obs.timers)
            waiting.append(REFUSED_TIMER if refused else "timer")
        if obs.calls:
            waiting.append("call")
        if obs.approval is not None:
            waiting.append("approval")
        if self.sender.sendable(eid, obs):
            waiting.append("event")
        if any(queued.execution == eid for queued in self.delivery.queue):
            waiting.append("queued")
        return tuple(waiting)

    def _fail(self, failure: MachineFailed, trace: str) -> None:
        self.emit(failure)
        self.failure, self.trace = failure, trace
        self.machinery.close()

    def result(self, status: str) -> SimulationResult:
        """Gives what the run did so far."""
        clock = self.clock
        if self.failure is not None:
            status = "machine_failed"
        return SimulationResult(self.seed, status, clock.step, clock.now, self.plan,
                                tuple(self.history), tuple(self.world.ledger.entries),
                                dict(self.obs), self.failure, self.trace,
                                Chances(dict(self.tally.passed),
                                        self.tally.by_kind(self.world.calls, self.sim.plan),
                                        frozenset(self.tally.unoffered),
                                        (BETWEEN,) if self.machinery.between
                                        else self.machinery.offered))

    def close(self) -> None:
        """Ends a run that is not played to its end (an exhaustive search's prefix), as one
        that is ends: the machines' `close()`, the event loops, the watchdog's timer."""
        self.machinery.close()


def _name_of(factory: object) -> str:
    return getattr(factory, "__qualname__", None) or type(factory).__name__
