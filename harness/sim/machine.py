"""The machine under test: the small protocol the simulator drives, and the reference adapter.

A machine is built by a factory from the definition, the tools of the simulated world and a
probe: `factory(definition, tools, probe) -> MachineUnderTest`. It performs side effects only
through those tools, and calls `probe(name)` at the named points of its `crash_points` (and
`"store_write"` before each durable write, if it can) so the simulator can crash it or fail the
write there. Everything a machine keeps outside its durable store is volatile: `crash()` drops
it, and `recover(now)` rebuilds from the store and finishes what was committed but not done.

The protocol has an async form (`AsyncMachineUnderTest`): a method that is a coroutine function
is run to its end on an event loop the run owns, on virtual time, its ready tasks in an order
the seed fixes (`harness.sim.asyncloop`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

from fault_injection import ProbedStore
from reference_machine import (
    CRASH_POINTS,
    Commit,
    Event,
    EventStore,
    Execution,
    MemoryStore,
    OutboxEntry,
    PendingApproval,
    RunCompensation,
    RunEffect,
    Runtime,
    Status,
    StoreError,
    Tool,
    WorkflowDefinition,
)
from reference_machine.secrecy import MemoryVault, Vault

__all__ = [
    "ApprovalWait",
    "AsyncMachineUnderTest",
    "Call",
    "MachineFactory",
    "MachineUnderTest",
    "Observation",
    "Probe",
    "ReferenceMachine",
]

Probe = Callable[[str], None]


class Call(NamedTuple):
    """A tool call in flight: committed, not yet answered."""

    id: str
    tool: str
    compensation: bool = False


class ApprovalWait(NamedTuple):
    """The approval request an execution waits on."""

    request_id: str
    roles: tuple[str, ...]
    action_hash: str
    expires_at: int


class Observation(NamedTuple):
    """What the simulator can see of one execution.

    `status` is one of created, running, waiting, compensating, final; `timers` holds
    (timer id, fire time) pairs; `calls` the tool calls in flight (empty for a machine that
    calls its tools synchronously).

    In a parallel or map state (statecharts), `active` names the state each started region
    (map item) is in, nested regions' too, depth first, and `approvals` every approval
    request a region waits on, in region order (`approval` is then the first of them). A
    machine that leaves `active` empty is offered every event a state inside takes; one that
    leaves `approvals` empty has `approval` decided alone, the next one once it is.

    `moves` holds the moves the execution made since it was last observed, (from state, to
    state) pairs, oldest first, for a machine that moves more than once inside one call (a
    LangGraph graph runs node after node in one `invoke`): coverage and `legal_transitions`
    then see each move, not only where the call ended. A machine that moves once a call
    leaves it empty."""

    state: str
    status: str
    version: int
    outcome: str | None = None
    timers: tuple[tuple[str, int], ...] = ()
    approval: ApprovalWait | None = None
    calls: tuple[Call, ...] = ()
    active: tuple[str, ...] = ()
    approvals: tuple[ApprovalWait, ...] = ()
    moves: tuple[tuple[str, str], ...] = ()


@runtime_checkable
class MachineUnderTest(Protocol):
    """What the simulator needs of a machine. Decisions are `accepted`, `ignored[:reason]` or
    `rejected[:reason]`, or None for a machine that does not say."""

    crash_points: Sequence[str]

    def start(self, execution_id: str, context: Mapping[str, Any], now: int) -> str | None:
        """Creates and starts an execution (a repeated start is a duplicate, not an error)."""

    def deliver(self, execution_id: str, event: Event, now: int) -> str | None:
        """Delivers one event and does what it causes (short of calls left in flight)."""

    def advance(self, now: int) -> None:
        """Tells the machine the time is `now`: it fires the timers due."""

    def complete(self, execution_id: str, call_id: str, now: int) -> None:
        """Lets a call in flight reach its tool, and delivers its result."""

    def crash(self) -> None:
        """Drops every piece of volatile memory, as a process that dies."""

    def recover(self, now: int) -> None:
        """Rebuilds from the durable store and finishes what was committed but not done."""

    def observe(self, execution_id: str) -> Observation:
        """Gives what can be seen of an execution now."""

    def worker(self) -> MachineUnderTest | None:
        """Gives a second worker over the same durable state, or None if there is none."""


@runtime_checkable
class AsyncMachineUnderTest(Protocol):
    """The protocol's async form: what `MachineUnderTest` says, with coroutines. Any method may
    be a coroutine function or a plain one (here `crash`, `observe` and `worker` are plain);
    the simulator decides which once, when the machine is built, and runs each coroutine to its
    end on the run's event loop (a second worker's on a loop of its own). There `asyncio.sleep`
    waits on the loop's virtual clock, which starts each call at `now` (seconds, not ms), and
    tasks ready together run in an order drawn from the seed. A task still pending when the
    call returns, or a coroutine never awaited, fails the run (`machine_ok`)."""

    crash_points: Sequence[str]

    async def start(self, execution_id: str, context: Mapping[str, Any], now: int
                    ) -> str | None:
        """Creates and starts an execution (a repeated start is a duplicate, not an error)."""

    async def deliver(self, execution_id: str, event: Event, now: int) -> str | None:
        """Delivers one event and does what it causes (short of calls left in flight)."""

    async def advance(self, now: int) -> None:
        """Tells the machine the time is `now`: it fires the timers due."""

    async def complete(self, execution_id: str, call_id: str, now: int) -> None:
        """Lets a call in flight reach its tool, and delivers its result."""

    def crash(self) -> None:
        """Drops every piece of volatile memory, as a process that dies."""

    async def recover(self, now: int) -> None:
        """Rebuilds from the durable store and finishes what was committed but not done."""

    def observe(self, execution_id: str) -> Observation:
        """Gives what can be seen of an execution now."""

    def worker(self) -> MachineUnderTest | AsyncMachineUnderTest | None:
        """Gives a second worker over the same durable state, or None if there is none."""


MachineFactory = Callable[[WorkflowDefinition, Mapping[str, Tool], Probe],
                          MachineUnderTest | AsyncMachineUnderTest]


class ReferenceMachine:
    """The reference runtime as a machine under test: its store is the disk (it survives
    `crash`), its runtime and caches are memory (they do not). Effects are deferred, so calls
    stay in flight until the simulator completes them."""

    crash_points: Sequence[str] = CRASH_POINTS
    #: The runtime it runs and whether calls stay in flight (a variant may change them).
    runtime_class: type[Runtime] = Runtime
    defer_effects: bool = True

    def __init__(self, definition: WorkflowDefinition, tools: Mapping[str, Tool],
                 probe: Probe | None = None, *, store: EventStore | None = None,
                 vault: Vault | None = None) -> None:
        self.definition = definition
        if type(self).crash_points is CRASH_POINTS:  # a variant naming its own keeps them
            # the points this definition can pass: a call's two only where a state calls one
            self.crash_points = crash_points_of(definition)
        self._tools = tools
        self._probe: Probe = probe or (lambda point: None)
        self.store = ProbedStore(store if store is not None else MemoryStore(), self._probe)
        self.vault = vault if vault is not None else MemoryVault()  # kept with the disk
        self.runtime = self._runtime()

    def watch(self, on_commit: Callable[[Commit, int | StoreError], None],
              on_record: Callable[[str, str, Event], None]) -> None:
        """Has the store tell `on_commit` and `on_record` what it writes (an optional part of
        the protocol: the simulator records commits and results when a machine offers it)."""
        self.store.watch(on_commit, on_record)

    def _runtime(self) -> Runtime:
        return self.runtime_class(self.store, [self.definition], self._tools, crash=self._probe,
                                  vault=self.vault, defer_effects=self.defer_effects)

    def start(self, execution_id: str, context: Mapping[str, Any], now: int) -> str | None:
        return _said(self.runtime.start(self.definition, execution_id, context=context,
                                        now=now))

    def deliver(self, execution_id: str, event: Event, now: int) -> str | None:
        return _said(self.runtime.deliver(execution_id, event, now))

    def advance(self, now: int) -> None:
        self.runtime.tick(now)

    def complete(self, execution_id: str, call_id: str, now: int) -> None:
        self.runtime.complete(execution_id, call_id, now)

    def crash(self) -> None:
        self.runtime = self._runtime()

    def recover(self, now: int) -> None:
        self.runtime.recover(now)

    def observe(self, execution_id: str) -> Observation:
        stored = self.store.load(execution_id)
        ex = stored.execution
        approval = ex.approval
        calls: tuple[Call, ...] = ()
        if ex.status != "final":
            calls = _calls(self.store.pending(execution_id))
        regions = ex.regions
        # an execution created and never started (its start was refused: its first action
        # failed) rests where it would begin
        return Observation(
            ex.state or self.definition.initial, str(ex.status), stored.version, ex.outcome,
            tuple((t.id, t.fire_at) for t in ex.timers),
            None if approval is None else _wait(approval), calls,
            _active(regions) if regions else (),
            tuple(_wait(a) for a in _approvals(regions)) if regions else ())

    def fingerprint(self, execution_id: str, now: int) -> tuple[Any, ...]:
        """Gives what the store holds of an execution that decides what it does next (times
        relative to `now`), for the exhaustive search to tell states apart (optional)."""
        ex = self.store.load(execution_id).execution
        record = ex._replace(sequence=0, started_at=ex.started_at - now,
                             timers=tuple(t._replace(fire_at=t.fire_at - now) for t in ex.timers))
        pending = tuple((e.command_id, e.result is not None)
                        for e in self.store.pending(execution_id))
        inner = self.store.inner
        timers = (tuple((t.id, t.fire_at - now) for t in inner.timers_of(execution_id))
                  if isinstance(inner, MemoryStore) else ())
        return (repr(record), pending, timers)

    def consumed(self, execution_id: str, event_id: str) -> bool:
        """Tells whether the store consumed this event id (for the exhaustive search)."""
        inner = self.store.inner
        return isinstance(inner, MemoryStore) and inner.consumed(execution_id, event_id)

    def replay(self, execution_id: str) -> None:
        """Rebuilds the execution from its log and raises `ReplayMismatchError` where that
        diverges from the stored record (an optional part of the protocol)."""
        self.runtime.replay(execution_id)

    def worker(self) -> ReferenceMachine:
        twin = copy.copy(self)  # the same disk (store, vault), its own memory (runtime)
        twin.runtime = twin._runtime()
        return twin


def crash_points_of(definition: WorkflowDefinition) -> tuple[str, ...]:
    """Gives the reference runtime's crash points a run of `definition` can pass: all of
    `CRASH_POINTS`, less the two around a tool call when no state calls a tool (a step's, or
    a compensation's)."""
    if any(state.step is not None for state in definition.states.values()):
        return CRASH_POINTS
    return tuple(point for point in CRASH_POINTS if point not in _CALL_POINTS)


_CALL_POINTS = frozenset({"after_apply_before_record", "after_record_before_event"})


def _calls(pending: list[OutboxEntry]) -> tuple[Call, ...]:
    """Gives the tool calls and compensations in flight among an execution's pending outbox
    entries (read each step: a map's hundred items make a hundred of them)."""
    calls = []
    for entry in pending:
        command = entry.command
        kind = type(command)
        if entry.result is None and (kind is RunEffect or kind is RunCompensation):
            calls.append(Call(command.effect_id, command.tool,  # type: ignore[union-attr]
                              kind is RunCompensation))
    return tuple(calls)


def _wait(approval: PendingApproval) -> ApprovalWait:
    return ApprovalWait(approval.request_id, approval.roles, approval.action_hash,
                        approval.expires_at)


def _active(regions: tuple[Execution, ...]) -> tuple[str, ...]:
    """Gives the state of every started region, and of the regions inside it, depth first."""
    states: list[str] = []
    for region in regions:
        if region.status != Status.CREATED:  # a map item not started yet is in no state
            states.append(region.state)
            states += _active(region.regions)
    return tuple(states)


def _approvals(regions: tuple[Execution, ...]) -> list[PendingApproval]:
    """Gives every approval request the regions wait on, in region order (a region in a
    parallel or map state of its own only mirrors its regions' first: theirs are given)."""
    found: list[PendingApproval] = []
    for region in regions:
        if region.regions:
            found += _approvals(region.regions)
        elif region.approval is not None and region.status != Status.FINAL:
            found.append(region.approval)
    return found


def _said(decision: object) -> str | None:
    kind = getattr(decision, "kind", None)
    reason = getattr(decision, "reason", None)
    return kind if reason is None else f"{kind}:{reason}"
