"""The scheduler of a run's steps: which actions are enabled now, in a fixed order, which one the
step takes (drawn from the run's choices, with the clock held back by the run's patience), and
performing it through the part of the run it belongs to.
"""

from __future__ import annotations

from harness.sim.actions import (
    ADVANCE,
    APPROVE,
    COMPLETE,
    EXTERNAL,
    QUEUED,
    START,
    Action,
    Advance,
    Approve,
    Complete,
    Deliver,
    SendEvent,
    Start,
    label_of,
)
from harness.sim.context import RunContext, check_said
from harness.sim.delivery import Delivery
from harness.sim.history import Started
from harness.sim.machine import Call
from harness.sim.machinery import Machinery
from harness.sim.observer import Observer
from harness.sim.outside import Approver, Sender
from harness.sim.timekeeping import Timekeeper
from reference_machine import Event

__all__ = ["PATIENCE", "Scheduler"]

_MOVES_MAX = 64  # clock moves one step of a schedule (`advance | N moves`) makes at most
#: How readily a run moves the clock while anything else can happen, one drawn per run (swarm
#: over the scheduler, as over the faults): every action alike, or the clock held back so
#: that one execution goes deep before its timers fire (`Scheduler.choose`). The first,
#: uniform, is what a schedule written without the draw replays with.
PATIENCE = (1.0, 0.3, 0.05)


class Scheduler:
    """Gives the actions enabled at each step, chooses one, and performs it. Owns the run's
    `patience` (how readily it moves the clock while something else can happen)."""

    def __init__(self, ctx: RunContext, patience: float, machinery: Machinery,
                 timekeeper: Timekeeper, delivery: Delivery, observer: Observer,
                 sender: Sender, approver: Approver) -> None:
        self.ctx, self.patience = ctx, patience
        self.machinery, self.timekeeper, self.delivery = machinery, timekeeper, delivery
        self.observer, self.sender, self.approver = observer, sender, approver
        self.sim, self.options, self.world = ctx.sim, ctx.options, machinery.world
        self.clock, self.emit, self.obs, self.unstarted = (ctx.clock, ctx.emit, ctx.obs,
                                                           ctx.unstarted)

    def actions(self) -> list[Action]:
        """Gives the actions enabled now, in a fixed order: starts, then per execution its calls
        to complete, its approval and its external events, then queued deliveries, then moving
        the clock to what is due next; while a chart's raised event waits, only its delivery
        (SCXML's internal queue comes first)."""
        if self.delivery.raised:
            return [Deliver(QUEUED, self.delivery.raised[0])]
        actions: list[Action] = [Start(START, eid) for eid in self.unstarted]
        now, offset = self.clock.now, self.timekeeper.offset
        soonest: int | None = None
        what = ""  # what the clock would move to: a timer, a queued delivery, a landing
        sim = self.sim
        external, charted, bounded = sim.enabled, sim.charted, sim.sends_max
        told = self.timekeeper.machine_time
        for eid, obs in self.obs.items():
            if obs.status == "final":
                # a timer a finished execution still shows fires as any other (once: one
                # the machine was told the time of stays shown only as its leftover); what
                # the machine then does is judged (terminal_stays_terminal)
                for timer, fire_at in obs.timers:
                    if fire_at > told and (soonest is None or fire_at - offset < soonest):
                        soonest, what = fire_at - offset, timer
                continue
            for call in obs.calls:
                actions.append(Complete(COMPLETE, eid, call))
            approval = obs.approval
            if obs.approvals:  # several regions wait on one: each may be decided first
                for each in obs.approvals:
                    actions.append(Approve(APPROVE, eid, each) if each == approval
                                   else Approve(APPROVE, eid, each, each.request_id))
            elif approval is not None:
                actions.append(Approve(APPROVE, eid, approval))
            state = obs.state
            if (self.sender.sendable(eid, obs) if bounded or state in charted
                    else external.get(state)):
                actions.append(SendEvent(EXTERNAL, eid, obs))
            for timer, fire_at in obs.timers:  # the machine's time; the clock's is behind
                if (soonest is None or fire_at - offset < soonest) and not (
                        self.timekeeper.refused(eid, obs, timer)):
                    soonest, what = fire_at - offset, timer
        for queued in self.delivery.queue:
            if queued.due <= now:
                actions.append(Deliver(QUEUED, queued))
            elif soonest is None or queued.due < soonest:
                soonest, what = queued.due, f"{queued.execution} {queued.event.type}"
        landing = self.world.next_landing
        if landing is not None and (soonest is None or landing < soonest):
            soonest, what = landing, "landing"
        if soonest is not None:
            actions.append(Advance(ADVANCE, max(now, soonest), what))
        return actions

    def choose(self, actions: list[Action]) -> int:
        """Gives the index of the action the step performs. A run of `patience` below 1
        moves the clock (always the last action offered) only with that chance while
        something else is enabled: a uniform pick leaves a waiting state by its timer about
        as often as by any of its events, so a deep path (a pause resumed, then the next
        attempt) is rare. The liveness phase picks uniformly."""
        rng = self.ctx.rng
        if (self.patience < 1.0 and not self.ctx.healed and len(actions) > 1
                and type(actions[-1]) is Advance and not rng.flip(self.patience)):
            return rng.action(actions[:-1], label_of)
        return rng.action(actions, label_of)

    def perform(self, action: Action) -> None:
        """Performs one action, through the part of the run it belongs to."""
        ctx = self.ctx
        ctx.topic = ""
        match action:
            case Complete(execution=eid, call=call):
                ctx.acting = eid
                self._complete(eid, call)
            case SendEvent(execution=eid, obs=obs):
                ctx.acting = eid
                self.sender.send(eid, obs)
            case Approve(execution=eid, approval=approval):
                ctx.acting = eid
                self.approver.approve(eid, approval)
            case Deliver(queued=queued):
                ctx.acting = queued.execution
                raised = self.delivery.raised
                (raised if raised and raised[0] == queued else self.delivery.queue).remove(
                    queued)
                self.delivery.deliver(queued.execution, queued.event, queued.via)
            case Advance(target=target):
                ctx.acting = ""
                self.timekeeper.advance(target)
                for _ in range(min(ctx.rng.moves(), _MOVES_MAX) - 1):
                    self.observer.observe()  # a schedule's clock moves in a row, made one step
                    last = self.actions()[-1:]
                    if not last or type(last[0]) is not Advance:
                        break
                    self.timekeeper.advance(last[0].target)
            case Start(execution=eid):
                ctx.acting = eid
                self._start(eid)

    def _start(self, eid: str) -> None:
        context = dict(self.options.context)
        self.emit(Started(self.clock.step, self.clock.now, eid, context))
        done, said = self.machinery.guard("start", self.machinery.calls.start, eid,
                                          dict(context), self.timekeeper.machine_now())
        if done:
            check_said(said, f"start({eid!r}, ...)")
            self.unstarted.remove(eid)
            self.observer.seen(eid, self.observer.observation(eid))

    def _complete(self, eid: str, call: Call) -> None:
        activity = "compensation" if call.compensation else "tool call"
        self.machinery.guard(activity, self.machinery.calls.complete, eid, call.id,
                             self.timekeeper.machine_now())
        noise = self.world.agent_noise
        while noise:
            target = noise.pop(0)
            word = ("teleport", "escalate_to_mars", "skip_approval", "refund_all")[
                self.ctx.rng.below(4)]
            self.delivery.enqueue(self.clock.now, target,
                                  Event(self.ctx.new_id(), f"agent.{word}", "agent", {}),
                                  "agent")
