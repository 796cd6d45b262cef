"""Delivering events to the machine as the outside world does: a send may be dropped (and sent
again later), held back (overtaken), duplicated or followed by a late copy; a delivery the
machine gives no answer to is sent again. What waits to be delivered is queued, and an
imported SCXML chart's own raised and sent events join the queue from its commits.
"""

from __future__ import annotations

from fault_injection import FaultKind
from harness.sim.actions import Queued
from harness.sim.chances import ANSWERED, SENT, Rates, Tally
from harness.sim.context import RunContext, check_said
from harness.sim.history import Decided, Delivered
from harness.sim.machinery import Machinery
from harness.sim.timekeeping import Timekeeper
from reference_machine import Event, Execution
from reference_machine.importers import scxml, w3c

__all__ = ["Delivery"]

_KEEP_VIA = frozenset({"forged", "late", "duplicate", "agent"})


class Delivery:
    """Sends and delivers events to the machine, and keeps what waits to be delivered: the
    queue (each entry due at a time), a chart's raised events (delivered before anything else)
    and the readers of each chart's outbox."""

    def __init__(self, ctx: RunContext, rates: Rates, tally: Tally, machinery: Machinery,
                 timekeeper: Timekeeper) -> None:
        self.ctx, self.rates, self.machinery, self.timekeeper = ctx, rates, machinery, timekeeper
        self.clock, self.emit, self.definition = ctx.clock, ctx.emit, ctx.definition
        self.chances = tally.chances
        self.queue: list[Queued] = []
        # what an imported SCXML chart raised and sent to itself (its context outbox): raised
        # events are delivered before anything else happens, sends on the clock
        self.raised: list[Queued] = []
        self.outboxes: dict[str, w3c.OutboxReader] | None = (
            {} if scxml.OUTBOX in ctx.definition.initial_context else None)

    def send(self, eid: str, event: Event, via: str) -> None:
        """Sends an event as the outside world does: maybe dropped (and sent again later),
        held back (overtaken), duplicated, or followed by a late copy."""
        rng, now = self.ctx.rng, self.clock.now
        self.ctx.topic = event.type
        if not self.ctx.healed:
            self.chances[SENT] += 1
        if self.rates.r_drop and rng.chance(FaultKind.DROPPED_EVENT, self.rates.r_drop):
            self.ctx.fault(FaultKind.DROPPED_EVENT, eid, event.id)
            self.enqueue(now + self.rates.redeliver_after, eid, event, "redelivered")
            return
        if self.rates.r_reorder and rng.chance(FaultKind.REORDERED_EVENTS,
                                               self.rates.r_reorder):
            self.ctx.fault(FaultKind.REORDERED_EVENTS, eid, event.id)
            self.enqueue(now, eid, event, "reordered")
            return
        if not self.deliver(eid, event, via):
            return  # no answer: it is sent again as it was, and copied only once it lands
        if not self.ctx.healed:
            self.chances[ANSWERED] += 1
        if self.rates.r_dup and rng.chance(FaultKind.DUPLICATE_EVENT, self.rates.r_dup):
            self.ctx.fault(FaultKind.DUPLICATE_EVENT, eid, event.id)
            self.enqueue(now, eid, event, "duplicate")
        if self.rates.r_late and rng.chance(FaultKind.LATE_EVENT, self.rates.r_late):
            # an answer arrives again after its wait ended, under a new id (a second webhook
            # for the same approval); an event that answers nothing arrives again as itself
            late = event._replace(id=self.ctx.new_id()) if event.answers else event
            self.ctx.fault(FaultKind.LATE_EVENT, eid, f"{late.id} copies {event.id}")
            self.enqueue(now + self.rates.late_delay, eid, late, "late")

    def deliver(self, eid: str, event: Event, via: str) -> bool:
        """Delivers one event; tells whether the machine answered (else it is sent again)."""
        clock = self.clock
        self.emit(Delivered(clock.step, clock.now, eid, event.id, event.type, event.source,
                            event.answers, event.payload, via))
        self.ctx.current = (eid, event)
        handed = event._replace(payload=dict(event.payload))  # the history keeps its own
        done, said = self.machinery.guard(via, self.machinery.calls.deliver, eid, handed,
                                          self.timekeeper.machine_now())
        self.ctx.current = None
        if done:
            check_said(said, f"deliver({eid!r}, {event.id!r})")
            self.emit(Decided(clock.step, clock.now, eid, event.id, said or "unknown"))
            return True
        # the sender got no answer: it sends the same event again (a forgery, a late or
        # duplicate copy stays what it was)
        self.enqueue(clock.now, eid, event, via if via in _KEEP_VIA else "retry")
        return False

    def enqueue(self, due: int, eid: str, event: Event, via: str) -> None:
        """Queues an event for an execution, due at `due`."""
        self.ctx.serial += 1
        self.queue.append(Queued(due, self.ctx.serial, eid, event, via))

    def sent_itself(self, outboxes: dict[str, w3c.OutboxReader], eid: str,
                    execution: Execution) -> None:
        """Queues what a chart raised and sent to itself in the commit (`scxml.OUTBOX`): raised
        events to be delivered next, sends when due, cancels taking back sends not delivered.
        A session that ended drops what it still has, as SCXML's does."""
        reader = outboxes.get(eid)
        if reader is None:
            reader = outboxes[eid] = w3c.OutboxReader(f"#_scxml_{eid}")
        if execution.status == "final":
            self.raised = [q for q in self.raised if q.execution != eid]
            self.queue = [q for q in self.queue if q.execution != eid or q.via != "sent"]
            return
        names, now = self.definition.events, self.clock.now
        for out in reader.read(execution):
            if out.queue == "cancel":
                self.queue = [q for q in self.queue if q.execution != eid or q.via != "sent"
                              or q.event.payload[scxml.EVENT_FIELDS]["sendid"] != out.name]
            elif out.name in names:  # a name no transition takes is dropped, as SCXML does
                event = Event(self.ctx.new_id(), out.name, "system", out.payload)
                if out.queue == "internal":
                    self.ctx.serial += 1
                    self.raised.append(Queued(now, self.ctx.serial, eid, event, "raised"))
                else:
                    self.enqueue(now + out.delay_ms, eid, event, "sent")
