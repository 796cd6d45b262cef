"""A hand-rolled order runtime, the kind a user writes, and variants of it with one bug each.

`HandRolled` is not the reference runtime: it keeps a dict of execution records as its
database, handles its events itself and calls its one tool synchronously (no call is left in
flight), so it moves more than once inside one call: it tells each move in `observe`
(`Observation.moves`). What it keeps on its `_Disk` survives `crash()` and is shared with its
`worker()` twins; the rest is its memory. It guards every save with a version check
(compare-and-set), dedupes events by id, ignores events once final, cancels a wait's timer when
it leaves the wait, and charges under one payment intent minted once and stored before the
first call.

Each planted variant changes one of those things. `HANDROLLED` maps a short name to the
variant and the invariant a campaign must report; `WORKFLOW` is the order they all run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from harness.sim.machine import Observation, Probe
from reference_machine import (
    Event,
    Failure,
    Success,
    Tool,
    ToolOutcome,
    WorkflowDefinition,
    load_definition,
)

__all__ = [
    "HANDROLLED",
    "WORKFLOW",
    "FinalAcceptsLate",
    "HandRolled",
    "LostUpdate",
    "NoDedupe",
    "StaleTimer",
]

WORKFLOW = load_definition("""
name: handrolled_order
version: 1
context: {order: o-1, amount: 40}
tools:
  pay.charge: {idempotency_keys: true}
events:
  submit: {sources: [human]}
  extend: {sources: [human]}
  confirm: {sources: [human]}
  pickup: {sources: [human]}
states:
  created:
    initial: true
    type: wait
    after: {delay: 1d, target: abandoned}
    on: {submit: charging}
  charging:
    step:
      tool: pay.charge
      input: {order: "=context.order", amount: "=context.amount"}
      retry: {attempts_max: 3}
    on: {step.succeeded: awaiting_confirmation, step.failed: failed}
  awaiting_confirmation:
    type: wait
    after: {delay: 1h, target: expired}
    on: {confirm: awaiting_pickup, extend: awaiting_confirmation}
  awaiting_pickup:
    type: wait
    after: {delay: 2h, target: returned}
    on: {pickup: done}
  done: {type: final, outcome: success}
  expired: {type: final, outcome: cancelled}
  abandoned: {type: final, outcome: cancelled}
  returned: {type: final, outcome: cancelled}
  failed: {type: final, outcome: failure}
""")

_SAVES_MAX = 10  # compare-and-set retries before a worker gives up on one change


@dataclass(frozen=True, slots=True)
class Timer:
    """A wait's timeout: its id, the state that set it, when it fires."""

    id: str
    state: str
    fire_at: int


@dataclass(frozen=True, slots=True)
class Record:
    """One execution as the database holds it."""

    state: str
    version: int
    context: Mapping[str, Any]
    seen: frozenset[str] = frozenset()
    timers: tuple[Timer, ...] = ()
    intent: str = ""  # the payment intent (idempotency key) of the charge in progress
    left: str = ""  # the state it was in before this one
    entered: bool = False  # this version entered its state (a move), not only changed it


class _Conflict(Exception):
    """Another worker saved the record since it was loaded."""


class _Disk:
    """What survives a crash, shared by every worker: the records and the workers' count."""

    def __init__(self) -> None:
        self.records: dict[str, Record] = {}
        self.workers = 0
        self.moves: dict[str, list[tuple[str, str]]] = {}  # made, not yet observed


class HandRolled:
    """The sound hand-rolled runtime of `WORKFLOW` (any definition of wait states, one-tool
    steps and timeouts works)."""

    crash_points: Sequence[str] = ("before_save", "after_save", "after_call")

    def __init__(self, definition: WorkflowDefinition, tools: Mapping[str, Tool],
                 probe: Probe | None = None, *, disk: _Disk | None = None) -> None:
        self.definition = definition
        self._tools = tools
        self._probe: Probe = probe or (lambda point: None)
        self._disk = disk if disk is not None else _Disk()
        self._disk.workers += 1
        self.name = f"w{self._disk.workers}"
        self._stepping: set[str] = set()  # memory: the executions this worker is charging

    # -- the protocol -----------------------------------------------------------------------

    def start(self, execution_id: str, context: Mapping[str, Any], now: int) -> str:
        if execution_id in self._disk.records:
            return "ignored:duplicate start"
        initial = self.definition.initial
        blank = Record(initial, 0, {**self.definition.initial_context, **context})
        try:
            self._save(execution_id, None, self._enter(execution_id, blank, initial, now, ""))
        except _Conflict:
            return "ignored:duplicate start"
        return "accepted"

    def deliver(self, execution_id: str, event: Event, now: int) -> str:
        if event.type not in self.definition.events:
            return f"rejected:unknown event {event.type!r}"
        for _ in range(_SAVES_MAX):
            record = self._disk.records.get(execution_id)
            if record is None:
                return "rejected:unknown execution"
            if self._seen(record, event):
                return "ignored:duplicate"
            target = self._target(record, event)
            if target is None:
                return f"ignored:{event.type} is not expected in {record.state}"
            after = self._enter(execution_id, record, target, now, event.id)
            try:
                self._save(execution_id, record, after)
            except _Conflict:
                continue  # reload: the other worker may have taken this very event
            self._step(execution_id, now)
            return "accepted"
        return "rejected:too much contention"

    def advance(self, now: int) -> None:
        for execution_id in list(self._disk.records):
            self._fire(execution_id, now)

    def complete(self, execution_id: str, call_id: str, now: int) -> None:
        """Never called: every call is made synchronously, none is left in flight."""

    def crash(self) -> None:
        self._stepping = set()

    def recover(self, now: int) -> None:
        # a record saved in a step state has a charge committed, maybe not made: make it
        for execution_id, record in list(self._disk.records.items()):
            if self.definition.states[record.state].step is not None:
                self._step(execution_id, now)

    def observe(self, execution_id: str) -> Observation:
        record = self._disk.records[execution_id]
        state = self.definition.states[record.state]
        status = "final" if state.final else "waiting" if state.kind == "wait" else "running"
        return Observation(record.state, status, record.version, state.outcome,
                           tuple((t.id, t.fire_at) for t in record.timers),
                           moves=tuple(self._disk.moves.pop(execution_id, ())))

    def worker(self) -> HandRolled:
        return type(self)(self.definition, self._tools, self._probe, disk=self._disk)

    # -- the runtime ------------------------------------------------------------------------

    def _seen(self, record: Record, event: Event) -> bool:
        """Tells whether the record took this event id already."""
        return event.id in record.seen

    def _target(self, record: Record, event: Event) -> str | None:
        """Gives the state the event moves the record to (None: it takes no such event)."""
        state = self.definition.states[record.state]
        if state.final:
            return None
        moves = state.on.get(event.type, ())
        return moves[0].target_leaf if moves else None

    def _kept(self, record: Record, target: str) -> tuple[Timer, ...]:
        """Gives the timers still set once the record leaves its state for `target`."""
        return ()  # one wait at a time: leaving it cancels its timeout

    def _enter(self, execution_id: str, record: Record, target: str, now: int,
               cause: str) -> Record:
        """Gives the record moved to `target` by the event (or timer) `cause`."""
        version = record.version + 1
        state = self.definition.states[target]
        timers = () if state.final else self._kept(record, target)
        if state.after_ms is not None:
            timers = (*timers, Timer(f"{execution_id}/{target}/{version}", target,
                                     now + state.after_ms))
        # the payment intent is minted by the worker that commits the step, once
        intent = f"{execution_id}/{target}/{self.name}.{version}" if state.step else ""
        seen = record.seen | {cause} if cause else record.seen
        return Record(target, version, record.context, seen, timers, intent, record.state,
                      entered=True)

    def _save(self, execution_id: str, before: Record | None, after: Record) -> None:
        """Writes the record if nobody wrote it since `before` was loaded."""
        self._probe("before_save")
        self._probe("store_write")
        current = self._disk.records.get(execution_id)
        if (current.version if current else 0) != (before.version if before else 0):
            raise _Conflict(execution_id)
        self._disk.records[execution_id] = after
        if before is not None and after.entered:
            self._disk.moves.setdefault(execution_id, []).append((before.state, after.state))
        self._probe("after_save")

    def _step(self, execution_id: str, now: int) -> None:
        """Makes the charge a record in a step state commands, and moves on by its outcome."""
        if execution_id in self._stepping:
            return  # this worker is making it already (further up its own stack)
        self._stepping.add(execution_id)
        try:
            record = self._disk.records[execution_id]
            while (step := self.definition.states[record.state].step) is not None:
                intent = record.intent
                outcome = self._call(step.tool, record, step.attempts_max, step.retry_on)
                self._probe("after_call")
                event = "step.succeeded" if isinstance(outcome, Success) else "step.failed"
                target = self.definition.states[record.state].on[event][0].target_leaf
                try:
                    after = self._enter(execution_id, record, target, now, "")
                    self._save(execution_id, record, after)
                except _Conflict:
                    record = self._disk.records[execution_id]
                    if record.intent != intent:
                        return  # another worker finished this charge (and moved on)
                    continue  # the record changed otherwise: the charge is still ours
                record = after
        finally:
            self._stepping.discard(execution_id)

    def _call(self, tool: str, record: Record, attempts_max: int,
              retry_on: frozenset[str]) -> ToolOutcome:
        """Calls the tool under the record's intent until it succeeds or may not retry."""
        order = {"order": record.context["order"], "amount": record.context["amount"]}
        outcome: ToolOutcome = Failure("permanent", "not called")
        for _ in range(attempts_max):
            outcome = self._tools[tool](order, record.intent)
            if not isinstance(outcome, Failure) or outcome.category not in retry_on:
                break
        return outcome

    def _fire(self, execution_id: str, now: int) -> None:
        """Fires the execution's earliest due timer, if any."""
        for _ in range(_SAVES_MAX):
            record = self._disk.records[execution_id]
            due = [t for t in record.timers if t.fire_at <= now]
            if not due or self.definition.states[record.state].final:
                return
            timer = min(due, key=lambda t: t.fire_at)
            target = self._timeout_target(record, timer)
            if target is None:
                after = replace(record, version=record.version + 1, entered=False,
                                timers=tuple(t for t in record.timers if t != timer))
            else:
                after = self._enter(execution_id, record, target, now, timer.id)
            try:
                self._save(execution_id, record, after)
            except _Conflict:
                continue
            self._step(execution_id, now)

    def _timeout_target(self, record: Record, timer: Timer) -> str | None:
        """Gives where a fired timer moves the record (None: it is stale, dropped)."""
        if timer.state != record.state:
            return None
        return self.definition.states[timer.state].after_target


# -- the planted bugs ------------------------------------------------------------------------


class FinalAcceptsLate(HandRolled):
    """Takes an event after the order ended: a late answer to the wait it ended from (a
    timed-out confirmation, a pickup) moves it on as if it still waited."""

    def _target(self, record: Record, event: Event) -> str | None:
        if not self.definition.states[record.state].final or not record.left:
            return super()._target(record, event)
        # the bug: no terminal check; an event the last wait took still moves the order
        waited = self.definition.states[record.left]
        moves = waited.on.get(event.type, ()) if waited.kind == "wait" else ()
        return moves[0].target_leaf if moves else None


class NoDedupe(HandRolled):
    """Never checks whether an event was seen before: a redelivery is applied again."""

    def _seen(self, record: Record, event: Event) -> bool:
        return False


class LostUpdate(HandRolled):
    """Loads, changes and saves without checking the version: two workers both act."""

    def _save(self, execution_id: str, before: Record | None, after: Record) -> None:
        self._probe("before_save")
        self._probe("store_write")
        self._disk.records[execution_id] = after  # the bug: a blind write
        if before is not None and after.entered:
            self._disk.moves.setdefault(execution_id, []).append((before.state, after.state))
        self._probe("after_save")


class StaleTimer(HandRolled):
    """Keeps a wait's timeout when the wait ends, and applies it when it fires later."""

    def _kept(self, record: Record, target: str) -> tuple[Timer, ...]:
        return record.timers  # the bug: leaving a wait does not cancel its timer

    def _timeout_target(self, record: Record, timer: Timer) -> str | None:
        return self.definition.states[timer.state].after_target  # whoever set it


#: Each planted bug: its machine, and the invariant that must catch it.
HANDROLLED: dict[str, tuple[type[HandRolled], str]] = {
    "final_accepts_late": (FinalAcceptsLate, "terminal_stays_terminal"),
    "no_dedupe": (NoDedupe, "delivered_once"),
    "lost_update": (LostUpdate, "no_duplicate_effect"),
    "stale_timer": (StaleTimer, "legal_transitions"),
}
