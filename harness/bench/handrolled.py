"""A hand-rolled runtime, as a user writes one, and the classic bugs planted in it.

Not the reference runtime: a dict of records for its database (kept on the durable side, which
a crash does not drop, and shared with a second worker), the events it has seen, and its own
handling of one small order workflow: pay (a non-idempotent charge), then wait an hour for a
confirmation (a customer's `nudge` while waiting is counted), else expire. The sound machine
saves by compare-and-set on the record's version (a worker that lost the race reloads and
finds the event handled), drops an event id it has seen, ignores events once final, and drops
the wait's timer when it leaves the wait. Each planted variant changes one of these.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.sim.machine import Observation, Probe
from reference_machine import Event, Failure, Tool, WorkflowDefinition, load_definition

__all__ = ["HANDROLLED", "WORKFLOW", "FinalAcceptsLate", "HandRolled", "LostUpdate",
           "NoDedupe", "StaleTimer"]

WORKFLOW = load_definition({
    "name": "handrolled_order", "version": "1",
    "context": {"order": "o-1", "amount": 40},
    "tools": {"pay.charge": {"idempotency_keys": False}},
    "events": {"pay": {"sources": ["human"]}, "confirm": {"sources": ["human"]},
               "nudge": {"sources": ["human"]}},
    "states": {
        "created": {"initial": True, "type": "wait", "after": {"delay": "1d", "target": "expired"},
                    "on": {"pay": "charging"}},
        "charging": {"step": {"tool": "pay.charge",
                              "input": {"order": "=context.order", "amount": "=context.amount"}},
                     "on": {"step.succeeded": "awaiting", "step.failed": "failed"}},
        "awaiting": {"type": "wait", "after": {"delay": "1h", "target": "expired"},
                     "on": {"confirm": "done", "nudge": "awaiting"}},
        "done": {"type": "final", "outcome": "success"},
        "expired": {"type": "final", "outcome": "expired"},
        "failed": {"type": "final", "outcome": "failure"},
    },
})
_FINAL = frozenset({"done", "expired", "failed"})
_HOUR = 3_600_000
_DAY = 24 * _HOUR


class _Conflict(Exception):
    """Another worker saved the record first."""


class _Disk:
    """What survives a crash: the records and the event ids each execution has seen."""

    def __init__(self) -> None:
        self.records: dict[str, dict[str, Any]] = {}
        self.seen: dict[str, set[str]] = {}


class HandRolled:
    """The sound hand-rolled machine (a factory: `HandRolled(definition, tools, probe)`)."""

    crash_points: Sequence[str] = ("after_load",)
    check_version = True
    dedupe = True
    final_ignores = True
    cancel_timer = True

    def __init__(self, definition: WorkflowDefinition, tools: Mapping[str, Tool],
                 probe: Probe, disk: _Disk | None = None) -> None:
        self.tools, self.probe = tools, probe
        self.disk = disk if disk is not None else _Disk()
        self.moves: dict[str, list[tuple[str, str]]] = {}  # memory: told at the next look

    # -- the store ---------------------------------------------------------------------------

    def _load(self, eid: str) -> dict[str, Any]:
        return dict(self.disk.records[eid])

    def _save(self, eid: str, record: dict[str, Any], loaded: int) -> None:
        if self.check_version and self.disk.records[eid]["version"] != loaded:
            raise _Conflict(eid)
        self.disk.records[eid] = {**record, "version": loaded + 1}

    def _move(self, eid: str, record: dict[str, Any], state: str) -> None:
        self.moves.setdefault(eid, []).append((record["state"], state))
        record["state"] = state

    # -- the protocol ------------------------------------------------------------------------

    def start(self, execution_id: str, context: Mapping[str, Any], now: int) -> str:
        if execution_id in self.disk.records:
            return "ignored:duplicate"
        self.disk.records[execution_id] = {"state": "created", "version": 1,
                                           "timer": now + _DAY, "nudges": 0}
        self.disk.seen[execution_id] = set()
        return "accepted"

    def deliver(self, execution_id: str, event: Event, now: int) -> str:
        for _ in range(3):  # a worker that lost the race loads again
            try:
                return self._handle(execution_id, event, now)
            except _Conflict:
                continue
        return "rejected:conflict"

    def _handle(self, eid: str, event: Event, now: int) -> str:
        record = self._load(eid)
        loaded = record["version"]
        seen = self.disk.seen[eid]
        if self.dedupe and event.id in seen:
            return "ignored:duplicate"
        state = record["state"]
        if state in _FINAL and self.final_ignores:
            return "ignored:final"
        self.probe("after_load")  # checked, not yet saved: where another worker can cut in
        if state == "created" and event.type == "pay":
            record["timer"] = None
            self._move(eid, record, "charging")
            self._save(eid, record, loaded)  # the claim: one worker charges
            loaded += 1
            outcome = self.tools["pay.charge"]({"order": "o-1", "amount": 40}, f"{eid}/charge")
            if isinstance(outcome, Failure):
                self._move(eid, record, "failed")
            else:
                self._move(eid, record, "awaiting")
                record["timer"] = now + _HOUR
        elif event.type == "nudge" and state == "awaiting":
            record["nudges"] += 1
            self._move(eid, record, "awaiting")
        elif event.type == "confirm" and (state == "awaiting" or state in _FINAL):
            self._move(eid, record, "done")
            if self.cancel_timer:
                record["timer"] = None
        else:
            return "rejected:unexpected"
        self._save(eid, record, loaded)
        seen.add(event.id)
        return "accepted"

    def advance(self, now: int) -> None:
        for eid in sorted(self.disk.records):
            record = dict(self.disk.records[eid])
            due = record["timer"]
            if due is None or due > now:
                continue
            record["timer"] = None
            self._move(eid, record, "expired")
            self._save(eid, record, record["version"])

    def complete(self, execution_id: str, call_id: str, now: int) -> None:
        """Calls are made inline: none is ever in flight."""

    def crash(self) -> None:
        self.moves = {}

    def recover(self, now: int) -> None:
        """Nothing is left half done: each record is saved whole."""

    def observe(self, execution_id: str) -> Observation:
        record = self.disk.records[execution_id]
        state = record["state"]
        status = "final" if state in _FINAL else "waiting"
        timers = (() if record["timer"] is None
                  else ((f"{execution_id}/wait", record["timer"]),))
        moves = tuple(self.moves.pop(execution_id, ()))
        outcome = {"done": "success", "expired": "expired", "failed": "failure"}.get(state)
        return Observation(state, status, record["version"], outcome, timers, moves=moves)

    def worker(self) -> HandRolled:
        return type(self)(WORKFLOW, self.tools, self.probe, self.disk)


class FinalAcceptsLate(HandRolled):
    """Takes a confirmation after the run ended: a late one resurrects an expired order."""

    final_ignores = False


class NoDedupe(HandRolled):
    """Never checks an event's id: a redelivered nudge counts twice, a payment charges
    twice."""

    dedupe = False


class LostUpdate(HandRolled):
    """Loads, changes and saves without checking the version: two workers on one payment
    both charge."""

    check_version = False


class StaleTimer(HandRolled):
    """Keeps the wait's timer when a confirmation ends the wait, and applies it later."""

    cancel_timer = False


#: name -> (machine, the invariant a campaign must report; `a|b`: either, whichever comes
#: first)
HANDROLLED: dict[str, tuple[type[HandRolled], str]] = {
    "final_accepts_late": (FinalAcceptsLate, "terminal_stays_terminal"),
    "no_dedupe": (NoDedupe, "delivered_once|no_duplicate_effect"),
    "lost_update": (LostUpdate, "no_duplicate_effect"),
    "stale_timer": (StaleTimer, "terminal_stays_terminal"),
}
