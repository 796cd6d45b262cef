"""The machine-under-test template: a minimal durable runtime, and the wrapper that puts it
under the harness (docs/machine-protocol.md explains each part).

Copy this file, put your runtime where `CartRuntime` is, and keep the wrapper's shape. Fuzz it
from the repository's root:

    fsmharness fuzz docs.examples.machine_template:CartMachine --runs 100

`CartRuntime` runs one workflow by hand: a cart takes items until the customer checks out,
then the runtime charges the customer once, retrying a failed charge under the same
idempotency key; a cart left for an hour is abandoned. Its records live on a `Disk`, which
survives a crash and is shared with a second worker; everything else is memory. It saves with
a compare-and-set on the record's version, dedupes events by id, and commits each charge
before it makes it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from harness import Observation, Probe
from reference_machine import (
    STARTED,
    STEP_FAILED,
    STEP_SUCCEEDED,
    TIMER_FIRED,
    Commit,
    Event,
    Execution,
    Failure,
    RunEffect,
    Status,
    StoreError,
    Success,
    Tool,
    ToolOutcome,
    Transition,
    WorkflowDefinition,
    load_definition,
)

# -- what the runtime does, as a definition: the simulator sends its events, the checkers hold
# -- the runtime to its transitions

DEFINITION = load_definition({
    "name": "cart", "version": 1,
    "context": {"order_id": "A-1", "items": 0},
    "tools": {
        "payments.charge": {
            "idempotency_keys": True,  # the provider applies a key once
            "output": {"type": "object", "required": ["charge_id"],
                       "properties": {"charge_id": {"type": "string"}}},
        },
    },
    "events": {"item.added": {"sources": ["human"]}, "checkout": {"sources": ["human"]}},
    "states": {
        "cart": {"type": "wait", "initial": True,
                 "on": {"item.added": "cart", "checkout": "charging"},
                 "after": {"delay": "1h", "target": "abandoned"}},
        "charging": {"step": {"tool": "payments.charge",
                              "input": {"order_id": "=context.order_id",
                                        "items": "=context.items"},
                              "retry": {"attempts_max": 3, "retry_on": [
                                  "transient", "rate_limited", "timeout", "invalid_output"]}},
                     "on": {"step.succeeded": "paid", "step.failed": "failed"}},
        "paid": {"type": "final", "outcome": "success"},
        "failed": {"type": "final", "outcome": "failure"},
        "abandoned": {"type": "final", "outcome": "cancelled"},
    },
})

# -- the runtime: what you already have ----------------------------------------------------------

HOUR_MS = 3_600_000
ATTEMPTS_MAX = 3
RETRIED = frozenset({"transient", "rate_limited", "timeout", "invalid_output"})
MOVES = {("cart", "item.added"): "cart", ("cart", "checkout"): "charging"}
OUTCOMES = {"paid": "success", "failed": "failure", "abandoned": "cancelled"}


@dataclass(frozen=True, slots=True)
class Record:
    """One cart as the disk holds it."""

    state: str
    version: int
    context: Mapping[str, Any]
    seen: frozenset[str] = frozenset()  # the ids of the events it accepted
    timer: tuple[str, int] | None = None  # (id, fire time) of the cart's timeout
    attempt: int = 0  # the charge's attempt in progress (charging only)
    key: str = ""  # the charge's idempotency key, committed before the first call


@dataclass(frozen=True, slots=True)
class Write:
    """Why a record was written, for whoever watches the disk."""

    execution_id: str
    record: Record
    event: Event  # what caused it
    at: int
    source: str = ""  # the state it left, when it moved
    moved: str = ""  # the event type of the move ("" when it did not move)
    effect: Mapping[str, Any] | None = None  # the charge it commands: its input


class Conflict(Exception):
    """Another worker wrote the record since it was read."""


@dataclass
class Disk:
    """What survives a crash, shared by every worker: the records, and who watches them."""

    records: dict[str, Record] = field(default_factory=dict)
    watchers: list[Callable[[Write], None]] = field(default_factory=list)

    def put(self, write: Write, expected: int) -> None:
        """Writes the record if it is still at version `expected` (0: not there yet)."""
        current = self.records.get(write.execution_id)
        if (0 if current is None else current.version) != expected:
            raise Conflict(write.execution_id)
        self.records[write.execution_id] = write.record
        for watcher in self.watchers:
            watcher(write)


class CartRuntime:
    """Runs carts on a disk. `checkpoint(name)` is called before each write ("store_write"),
    after it ("after_save") and after each charge ("after_charge"): a test can stop it there."""

    def __init__(self, disk: Disk, charge: Tool, checkpoint: Callable[[str], None]) -> None:
        self.disk, self.charge, self.checkpoint = disk, charge, checkpoint

    def open(self, execution_id: str, context: Mapping[str, Any], now: int) -> str:
        if execution_id in self.disk.records:
            return "ignored:duplicate"
        record = self._entered(execution_id, "cart", None, {**DEFINITION.initial_context,
                                                            **context}, now)
        start = Event(f"{execution_id}/start", STARTED, "system", dict(context))
        try:
            self._save(Write(execution_id, record, start, now, moved=STARTED), 0)
        except Conflict:
            return "ignored:duplicate"  # another worker opened it first
        return "accepted"

    def handle(self, execution_id: str, event: Event, now: int) -> str:
        while True:
            record = self.disk.records.get(execution_id)
            if record is None:
                return "rejected:unknown execution"
            if self.already_seen(record, event):
                return "ignored:duplicate"
            if event.type not in DEFINITION.events:
                return "rejected:unknown_event"
            if record.state in OUTCOMES:
                return "rejected:terminal"
            target = MOVES.get((record.state, event.type))
            if target is None:
                return "rejected:illegal"
            context = dict(record.context)
            if event.type == "item.added":
                context["items"] += 1
            after = self._entered(execution_id, target, record, context, now)
            after = replace(after, seen=record.seen | {event.id})
            write = Write(execution_id, after, event, now, record.state, event.type,
                          self._input(after) if target == "charging" else None)
            try:
                self._save(write, record.version)
            except Conflict:
                continue  # read again: the other worker may have taken this very event
            self._charge_due(execution_id, now)
            return "accepted"

    def tick(self, now: int) -> None:
        for execution_id in list(self.disk.records):
            while (record := self.disk.records[execution_id]).timer is not None:
                timer_id, fire_at = record.timer
                if fire_at > now:
                    break
                after = self._entered(execution_id, "abandoned", record, record.context, now)
                fired = Event(f"{timer_id}/fired", TIMER_FIRED, "timer", {}, timer_id)
                try:
                    self._save(Write(execution_id, after, fired, now, record.state,
                                     TIMER_FIRED), record.version)
                except Conflict:
                    continue

    def resume(self, now: int) -> None:
        """Makes the charges that were committed and not answered (after a restart)."""
        for execution_id in list(self.disk.records):
            self._charge_due(execution_id, now)

    def already_seen(self, record: Record, event: Event) -> bool:
        """Tells whether the record accepted this event id before (a redelivery)."""
        return event.id in record.seen

    def key_of(self, execution_id: str, attempt: int) -> str:
        """Gives the charge's idempotency key: one per charge, the same on every attempt."""
        return f"{execution_id}/charge"

    def _entered(self, execution_id: str, state: str, before: Record | None,
                 context: Mapping[str, Any], now: int) -> Record:
        """Gives the record as it enters `state` from `before` (None: a new cart): a cart sets
        its timeout, a charge its key."""
        version, seen = (1, frozenset[str]()) if before is None else (before.version + 1,
                                                                      before.seen)
        entered = Record(state, version, context, seen)
        if state == "cart":
            return replace(entered, timer=(f"{execution_id}/cart/{version}", now + HOUR_MS))
        if state == "charging":
            return replace(entered, attempt=1, key=self.key_of(execution_id, 1))
        return entered

    def _input(self, record: Record) -> dict[str, Any]:
        return {"order_id": record.context["order_id"], "items": record.context["items"]}

    def _save(self, write: Write, expected: int) -> None:
        self.checkpoint("store_write")  # the write may fail here: then nothing is written
        self.disk.put(write, expected)
        self.checkpoint("after_save")

    def _charge_due(self, execution_id: str, now: int) -> None:
        """Charges a record in `charging` until its charge is answered."""
        while (record := self.disk.records[execution_id]).state == "charging":
            outcome = self.charge(self._input(record), record.key)
            self.checkpoint("after_charge")
            write = self._answered(execution_id, record, outcome, now)
            try:
                self._save(write, record.version)
            except Conflict:
                continue  # another worker moved it on: read it again

    def _answered(self, execution_id: str, record: Record, outcome: ToolOutcome,
                  now: int) -> Write:
        """Gives the write an answer to the charge makes: paid, a retry, or failed."""
        answers = f"{execution_id}/charge#{record.attempt}"
        output = outcome.output if isinstance(outcome, Success) else None
        if isinstance(output, Mapping) and isinstance(output.get("charge_id"), str):
            context = {**record.context, "charge_id": output["charge_id"]}
            paid = self._entered(execution_id, "paid", record, context, now)
            result = Event(f"{answers}/result", STEP_SUCCEEDED, "tool", dict(output), answers)
            return Write(execution_id, paid, result, now, "charging", STEP_SUCCEEDED)
        category = outcome.category if isinstance(outcome, Failure) else "invalid_output"
        result = Event(f"{answers}/result", STEP_FAILED, "tool", {"category": category},
                       answers)
        if category in RETRIED and record.attempt < ATTEMPTS_MAX:
            attempt = record.attempt + 1
            retry = replace(record, version=record.version + 1, attempt=attempt,
                            key=self.key_of(execution_id, attempt))
            return Write(execution_id, retry, result, now, effect=self._input(record))
        failed = self._entered(execution_id, "failed", record, record.context, now)
        return Write(execution_id, failed, result, now, "charging", STEP_FAILED)


# -- the wrapper: what the harness calls -------------------------------------------------------


class CartMachine:
    """`CartRuntime` as a machine under test. The disk is what survives `crash()`; the runtime
    object is the memory a crash loses."""

    definition = DEFINITION  # what `fsmharness fuzz module:CartMachine` runs
    crash_points: Sequence[str] = ("after_save", "after_charge")
    runtime_class: type[CartRuntime] = CartRuntime  # a variant may run another

    def __init__(self, definition: WorkflowDefinition, tools: Mapping[str, Tool],
                 probe: Probe, *, disk: Disk | None = None) -> None:
        # the runtime implements DEFINITION by hand: it reads nothing of `definition`
        self._tools, self._probe = tools, probe
        self.disk = Disk() if disk is None else disk
        self.runtime = self._runtime()

    def _runtime(self) -> CartRuntime:
        return self.runtime_class(self.disk, self._tools["payments.charge"], self._probe)

    def start(self, execution_id: str, context: Mapping[str, Any], now: int) -> str | None:
        return self.runtime.open(execution_id, context, now)

    def deliver(self, execution_id: str, event: Event, now: int) -> str | None:
        return self.runtime.handle(execution_id, event, now)

    def advance(self, now: int) -> None:
        self.runtime.tick(now)

    def complete(self, execution_id: str, call_id: str, now: int) -> None:
        pass  # the runtime charges synchronously: no call is left in flight

    def crash(self) -> None:
        self.runtime = self._runtime()  # a new process: the disk is all that is left

    def recover(self, now: int) -> None:
        self.runtime.resume(now)

    def observe(self, execution_id: str) -> Observation:
        record = self.disk.records[execution_id]
        status = ("final" if record.state in OUTCOMES else
                  "waiting" if record.state == "cart" else "running")
        timers = () if record.timer is None else (record.timer,)
        return Observation(record.state, status, record.version, OUTCOMES.get(record.state),
                           timers)

    def worker(self) -> CartMachine:
        return type(self)(DEFINITION, self._tools, self._probe, disk=self.disk)

    def watch(self, on_commit: Callable[[Commit, int | StoreError], None],
              on_record: Callable[[str, str, Event], None]) -> None:
        """Tells the harness each write, as the reference store's `Commit` (optional). The
        runtime records a charge's answer in the write that moves on, so `on_record` (a result
        kept apart, in an outbox) is never called."""

        def told(write: Write) -> None:
            on_commit(_commit(write), write.record.version)

        self.disk.watchers.append(told)


def _commit(write: Write) -> Commit:
    """Gives a write as the `Commit` `on_commit` takes: the record after it, the move, and the
    charge it commands (under the key the runtime will call the tool with)."""
    record = write.record
    status = (Status.FINAL if record.state in OUTCOMES else
              Status.WAITING if record.state == "cart" else Status.RUNNING)
    execution = Execution(id=write.execution_id, definition=DEFINITION.name,
                          version=DEFINITION.version, state=record.state, status=status,
                          outcome=OUTCOMES.get(record.state), context=record.context)
    commands = () if write.effect is None else (RunEffect(
        effect_id=f"{write.execution_id}/charge#{record.attempt}", key=record.key,
        state="charging", tool="payments.charge", input=write.effect, attempt=record.attempt,
        timeout_ms=None, idempotent=True),)
    moved = Transition(write.source, write.moved, record.state) if write.moved else None
    return Commit(execution_id=write.execution_id, expected_version=record.version - 1,
                  event=write.event, decision="accepted", at=write.at, execution=execution,
                  commands=commands, transition=moved)
