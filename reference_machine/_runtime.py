"""The durable runtime: persist before effect, then dispatch; recover and replay from the store.

For each delivered event, one store transaction holds everything `decide` produced (the event
consumed and logged, the new execution under a version check, its outbox and timers). Only then
are commands dispatched to tools. Each tool result is recorded in the outbox before it is
delivered as the next event, so a crash anywhere leaves either a command with no result (sent
again under the same idempotency key, or, for a tool that honours no keys, reported as an
ambiguous timeout so the definition's policy sends it to a human) or a recorded result (delivered).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from reference_machine._decide import (
    decide,
    new_execution,
    pending_approval,
    pending_effect,
    start_event,
)
from reference_machine._definition import WorkflowDefinition
from reference_machine._records import (
    COMPENSATION_FAILED,
    COMPENSATION_SUCCEEDED,
    STEP_FAILED,
    STEP_SUCCEEDED,
    TIMER_FIRED,
    Accepted,
    Decision,
    Event,
    Execution,
    Ignored,
    IgnoreReason,
    RequestApproval,
    RunCompensation,
    RunEffect,
    Status,
)
from reference_machine._spec import Category, Source
from reference_machine._store import (
    Commit,
    ConflictError,
    DuplicateEventError,
    EventStore,
    ExecutionExistsError,
    OutboxEntry,
    StoredExecution,
)
from reference_machine.errors import ReferenceMachineError
from reference_machine.secrecy import (
    MemoryVault,
    Vault,
    as_texts,
    conceal,
    named_secret,
    reveal,
    revealed_values,
    scrub,
)

#: Event ids the runtime derives start with this; callers' events may not.
RESERVED_ID_PREFIX = "~"
_CACHE_MAX = 10_000  # executions whose last committed record this runtime keeps

#: The named places where a crash hook is called, in the order a delivery passes them.
CRASH_POINTS = (
    "before_commit",
    "after_commit_before_dispatch",
    "after_apply_before_record",
    "after_record_before_event",
)


@dataclass(frozen=True, slots=True)
class Success:
    """A tool call that succeeded, with its output."""

    output: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Failure:
    """A tool call that failed, with its category (transient, rate_limited, timeout, permanent)."""

    category: str
    message: str = ""


ToolOutcome = Success | Failure


class Tool(Protocol):
    """A tool the runtime calls: the same idempotency key for every retry of one step."""

    def __call__(self, input: Mapping[str, Any], idempotency_key: str) -> ToolOutcome:
        """Calls the tool and gives its outcome."""


class EngineError(ReferenceMachineError):
    """The runtime could not go on (unknown definition, unknown tool, replay mismatch)."""


class UnknownDefinitionError(EngineError, KeyError):
    """No definition with this (name, version) is registered."""

    def __init__(self, name: str, version: str) -> None:
        self.name, self.version = name, version
        super().__init__(f"no definition {name!r} version {version!r} is registered")

    def __str__(self) -> str:
        return str(self.args[0])


class ReplayMismatchError(EngineError):
    """Replaying the log did not reproduce the stored execution."""

    def __init__(self, execution_id: str, sequence: int, detail: str) -> None:
        self.execution_id, self.sequence, self.detail = execution_id, sequence, detail
        super().__init__(f"replay of {execution_id!r} diverges at sequence {sequence}: {detail}")


class Registry:
    """Definitions by (name, version), so old runs keep the version they started on."""

    def __init__(self, definitions: Iterable[WorkflowDefinition] = ()) -> None:
        self._definitions: dict[tuple[str, str], WorkflowDefinition] = {}
        for definition in definitions:
            self.register(definition)

    def register(self, definition: WorkflowDefinition) -> None:
        """Adds a definition; registering another one under the same (name, version) fails."""
        key = (definition.name, definition.version)
        known = self._definitions.get(key)
        if known is not None and known.spec != definition.spec:
            msg = (f"definition {definition.name!r} version {definition.version!r} is already "
                   "registered with different content; give the new one a new version")
            raise EngineError(msg)
        self._definitions[key] = definition

    def get(self, name: str, version: str) -> WorkflowDefinition:
        """Gives the definition, or raises `UnknownDefinitionError`."""
        definition = self._definitions.get((name, version))
        if definition is None:
            raise UnknownDefinitionError(name, version)
        return definition


class Runtime:
    """Runs executions durably against an `EventStore`, calling the tools it is given.

    `crash` is called with each name in `CRASH_POINTS` as a delivery passes it; a fault injector
    raises there (or kills the process) to test recovery. `notify` receives approval requests.

    With `defer_effects`, committed effects and compensations are not called at once: they stay
    in flight in the outbox until `complete` calls them, so that a simulator can let timers,
    other events and crashes happen while a tool works (the call and its landing are apart).

    `decide` is the transition function the runtime commits the decisions of (the reference
    `decide`); a subclass may replace it, to run a variant under the same durability.
    """

    decide = staticmethod(decide)

    def __init__(
        self,
        store: EventStore,
        definitions: Registry | Iterable[WorkflowDefinition],
        tools: Mapping[str, Tool],
        *,
        crash: Callable[[str], None] | None = None,
        notify: Callable[[str, RequestApproval], None] | None = None,
        vault: Vault | None = None,
        conflict_retries: int = 16,
        defer_effects: bool = False,
    ) -> None:
        self.store = store
        self.registry = definitions if isinstance(definitions, Registry) else Registry(
            definitions)
        self.tools = dict(tools)
        self._crash = crash or (lambda point: None)
        self._notify = notify or (lambda execution_id, request: None)
        self._conflict_retries = conflict_retries
        self._defer = defer_effects
        self.vault: Vault = vault if vault is not None else MemoryVault()
        self._cache: dict[str, StoredExecution] = {}
        #: the store's claims, when its executions are shared by workers (see `_holding`)
        self._claim: Callable[..., bool] | None = getattr(store, "claim", None)

    # -- delivering --------------------------------------------------------------------------

    def start(self, definition: WorkflowDefinition, execution_id: str, *,
              context: Mapping[str, Any] | None = None, now: int = 0) -> Decision:
        """Creates an execution and starts it; the context travels in the start event, so the
        log alone rebuilds the run. Idempotent, so a client can retry a start it saw no answer
        to: a second start of a started run is ignored as a duplicate."""
        missing = sorted(set(definition.tools) - set(self.tools))
        if missing:
            msg = (f"definition {definition.name!r} uses tools that were not given to the "
                   f"runtime: {', '.join(missing)}")
            raise EngineError(msg)
        self.registry.register(definition)
        # created before a crash, maybe started too: the start event's id decides
        hidden: dict[str, Any] = {}
        # every secret key, defaults included, is a reference from the first record on
        merged = {**definition.initial_context, **(context or {})}
        kept = frozenset(key for key, value in merged.items() if definition.conceals(key, value))
        if kept:
            hidden = conceal(execution_id, {k: merged[k] for k in kept}, kept, self.vault)
            context = {**(context or {}), **hidden}
        with contextlib.suppress(ExecutionExistsError):
            self.store.create(new_execution(definition, execution_id, context=hidden))
        return self.deliver(execution_id, start_event(execution_id, context), now)

    def deliver(self, execution_id: str, event: Event, now: int) -> Decision:
        """Decides and commits `event`, then dispatches what it commanded, delivering each
        tool result in turn (a loop, not recursion: a long chain of steps is fine).

        Ids starting with `~` are reserved for the events the runtime derives (tool results,
        timer firings), so that no caller's event can take one of their ids first."""
        if isinstance(event.id, str) and event.id.startswith(RESERVED_ID_PREFIX):
            msg = (f"event id {event.id!r} starts with {RESERVED_ID_PREFIX!r}, which is "
                   "reserved for the results and timer firings the runtime derives")
            raise EngineError(msg)
        return self._deliver(execution_id, event, now)

    def _deliver(self, execution_id: str, event: Event, now: int) -> Decision:
        if self._claim is None:  # one worker: nothing to hold
            return self._deliver_held(execution_id, event, now)
        with self._holding(execution_id, wait=True):
            return self._deliver_held(execution_id, event, now)

    def _deliver_held(self, execution_id: str, event: Event, now: int) -> Decision:
        decision = self._commit_one(execution_id, event, now)
        queue = self._dispatch(execution_id, decision)
        while queue:
            next_id, result = queue.pop(0)
            queue += self._dispatch(next_id, self._commit_one(next_id, result, now))
        return decision

    @contextlib.contextmanager
    def _holding(self, execution_id: str, *, wait: bool) -> Iterator[bool]:
        """Holds the execution against the store's other workers while this one commits and
        dispatches for it, when the store shares executions (`claim`, `release`: the
        PostgreSQL store); gives whether it is held. `wait`: until the worker that holds it
        lets go; else at once, False when another holds it (it is that worker's to finish).
        A store without claims has one worker: always held."""
        claim = self._claim
        if claim is None:
            yield True
            return
        if not claim(execution_id, wait=wait):
            yield False
            return
        try:
            yield True
        finally:
            self.store.release(execution_id)  # type: ignore[attr-defined]

    def _commit_one(self, execution_id: str, event: Event, now: int) -> Decision:
        """Decides and commits one event, deciding again after a version conflict."""
        for _ in range(self._conflict_retries):
            stored = self._load(execution_id)
            definition = self._definition(stored.execution)
            decision = self.decide(definition, stored.execution, event, now)
            commit = _told(_commit(execution_id, stored.version, event, decision, now),
                           definition)
            self._crash("before_commit")
            try:
                version = self.store.commit(commit)
            except ConflictError:
                self._cache.pop(execution_id, None)
                continue  # another worker moved first: reload and decide again
            except DuplicateEventError as exc:
                return Ignored(IgnoreReason.DUPLICATE, str(exc))
            self._remember(execution_id, commit, version)
            self._crash("after_commit_before_dispatch")
            return decision
        msg = (f"execution {execution_id!r}: {self._conflict_retries} version conflicts in a "
               "row; another worker keeps advancing it")
        raise EngineError(msg)

    def deliver_many(self, deliveries: Sequence[tuple[str, Event]], now: int) -> list[Decision]:
        """Delivers one event to each of many executions with one store transaction (group
        commit: one fsync for the batch), then dispatches. A delivery that meets a version
        conflict is delivered again on its own; a duplicate is ignored. With a store whose
        executions workers share, every one of them is held meanwhile (taken in id order)."""
        if self._claim is None:
            return self._deliver_many(deliveries, now)
        with contextlib.ExitStack() as held:
            for execution_id in sorted({execution_id for execution_id, _ in deliveries}):
                held.enter_context(self._holding(execution_id, wait=True))
            return self._deliver_many(deliveries, now)

    def _deliver_many(self, deliveries: Sequence[tuple[str, Event]], now: int
                      ) -> list[Decision]:
        staged = []
        for execution_id, event in deliveries:
            stored = self._load(execution_id)
            definition = self._definition(stored.execution)
            decision = self.decide(definition, stored.execution, event, now)
            staged.append((execution_id, event, decision, _told(_commit(
                execution_id, stored.version, event, decision, now), definition)))
        self._crash("before_commit")
        results = self.store.commit_many([commit for *_, commit in staged])
        self._crash("after_commit_before_dispatch")
        decisions: list[Decision] = []
        failed: list[Exception] = []
        queue: list[tuple[str, Event]] = []
        for (execution_id, event, decision, commit), result in zip(staged, results,
                                                                   strict=True):
            if isinstance(result, DuplicateEventError):
                decisions.append(Ignored(IgnoreReason.DUPLICATE, str(result)))
            elif isinstance(result, ConflictError):
                self._cache.pop(execution_id, None)
                decisions.append(self._deliver(execution_id, event, now))
            elif isinstance(result, Exception):
                failed.append(result)  # the others were committed: dispatch them first
                decisions.append(Ignored(IgnoreReason.DUPLICATE, str(result)))
            else:
                self._remember(execution_id, commit, result)
                queue += self._dispatch(execution_id, decision)
                decisions.append(decision)
        while queue:
            next_id, event = queue.pop(0)
            queue += self._dispatch(next_id, self._commit_one(next_id, event, now))
        if failed:
            raise failed[0]
        return decisions

    def _load(self, execution_id: str) -> StoredExecution:
        """Gives the execution as this runtime last committed it, or as the store has it. A
        stale copy is safe: the store's version check refuses a decision made on it."""
        cached = self._cache.get(execution_id)
        return cached if cached is not None else self.store.load(execution_id)

    def _remember(self, execution_id: str, commit: Commit, version: int) -> None:
        if commit.execution is not None:
            self._cache[execution_id] = StoredExecution(commit.execution, version)
            if len(self._cache) > _CACHE_MAX:
                self._cache.pop(next(iter(self._cache)))

    def tick(self, now: int) -> list[Decision]:
        """Fires every timer due at `now`, oldest first, as `timer.fired` events."""
        decisions = []
        for execution_id, timer in self.store.due_timers(now):
            event = Event(f"{RESERVED_ID_PREFIX}fired:{timer.id}", TIMER_FIRED, Source.TIMER, {},
                          timer.id)
            with self._holding(execution_id, wait=False) as held:
                if held:  # else another worker has the run: its next tick fires this one
                    decisions.append(self._deliver(execution_id, event, now))
        return decisions

    # -- dispatching -------------------------------------------------------------------------

    def _dispatch(self, execution_id: str, decision: Decision) -> list[tuple[str, Event]]:
        """Runs an accepted decision's commands; gives the results to deliver next."""
        if not isinstance(decision, Accepted):
            return []
        results = []
        for command in decision.commands:
            if isinstance(command, RunEffect | RunCompensation):
                if self._defer:
                    continue  # in flight until `complete`
                results.append((execution_id, self._call(execution_id, command)))
            elif isinstance(command, RequestApproval):
                self._notify(execution_id, command)
        return results

    def in_flight(self, execution_id: str) -> list[str]:
        """Gives the effects and compensations of an execution that were committed but whose
        result is not recorded yet, oldest first: with `defer_effects`, the calls `complete`
        can finish (a superseded one too: a slow tool still lands, and its result is late)."""
        return [entry.command_id for entry in self.store.pending(execution_id)
                if entry.result is None and not isinstance(entry.command, RequestApproval)]

    def complete(self, execution_id: str, call_id: str, now: int) -> Decision | None:
        """Lets one call in flight reach its tool, records the result and delivers it (or
        delivers the result another worker recorded); gives None when the call is no longer
        pending (another worker finished it)."""
        with self._holding(execution_id, wait=True):
            return self._complete(execution_id, call_id, now)

    def _complete(self, execution_id: str, call_id: str, now: int) -> Decision | None:
        entry = next((e for e in self.store.pending(execution_id) if e.command_id == call_id),
                     None)
        if entry is None or isinstance(entry.command, RequestApproval):
            return None
        result = entry.result
        if result is None:
            command = entry.command
            execution = self.store.load(execution_id).execution
            effect = pending_effect(execution, call_id)
            if effect is None and (not command.idempotent
                                   or not _key_pending(execution, command.key)):
                # the run moved on (the step timed out, or escalated, or its region was
                # abandoned) before this call went out; it is not sent after the fact: its
                # effect would come behind the back of whoever has the run now (after the
                # undo planned for it, even). Only a retry under the same key may still be
                # answered by an older attempt of a tool that honours keys.
                result = self._record(execution_id, command, Failure(
                    Category.TIMEOUT, "superseded before it was sent: not sent"))
            else:
                result = self._call(execution_id, command)
        return self._deliver(execution_id, result, now)

    def _call(self, execution_id: str, command: RunEffect | RunCompensation,
              resent: bool = False) -> Event:
        """Calls the tool and records its result; gives the result that was recorded first
        (another worker's, when one got there before). A call `resent` after its first answer
        was lost records a failure as uncertain: the first call may have taken effect."""
        tool = self.tools.get(command.tool)
        if tool is None:
            msg = f"no tool {command.tool!r} was given to the runtime"
            raise EngineError(msg)
        payload = reveal(command.input, self.vault)  # a lost secret is no tool failure
        try:
            outcome = tool(payload, command.key)
        except Exception as exc:  # a tool that raises may have applied: ambiguous
            outcome = Failure(Category.TIMEOUT, f"the tool raised {type(exc).__name__}: {exc}")
        self._crash("after_apply_before_record")
        return self._record(execution_id, command, outcome, resent)

    def _record(self, execution_id: str, command: RunEffect | RunCompensation,
                outcome: ToolOutcome, resent: bool = False) -> Event:
        execution = self._load(execution_id).execution
        definition = self._definition(execution)
        if definition.secrets or definition.read is not None:
            outcome = self._checked_in_clear(definition, execution, command, outcome)
        result = _result_event(command, outcome, execution_id, definition, self.vault, resent)
        recorded = self.store.record_result(execution_id, command.effect_id, result)
        self._crash("after_record_before_event")
        return recorded  # another worker's, when it recorded one first

    def _checked_in_clear(self, definition: WorkflowDefinition, execution: Execution,
                          command: RunEffect | RunCompensation,
                          outcome: ToolOutcome) -> ToolOutcome:
        """For a definition with secrets: gives a failure whose text holds no secret the run
        knows (a tool's error can quote what it was given), and checks a step's output
        against its schema while its secret fields are still in clear (they are stored as
        references, which no schema of the value itself accepts); an output that fails is
        an invalid output, told without the secrets."""
        if isinstance(outcome, Failure):
            if not outcome.message:
                return outcome
            values = revealed_values([command.input, *_contexts(execution)], self.vault)
            return Failure(outcome.category, scrub(outcome.message, values))
        effect = pending_effect(execution, command.effect_id)
        state = definition.states.get(effect.state) if effect is not None else None
        step = state.step if state is not None else None
        kept = [] if not isinstance(outcome.output, Mapping) else [
            value for key, value in outcome.output.items() if definition.conceals(key, value)]
        if (isinstance(command, RunCompensation) or step is None or step.check_output is None
                or effect is None or not kept):
            return outcome  # decide checks it as it is stored
        problem = step.check_output(outcome.output)
        if problem is None:
            return outcome
        values = revealed_values([command.input, *_contexts(execution)], self.vault)
        for value in kept:
            values |= as_texts(value)
        return Failure(Category.INVALID_OUTPUT, scrub(problem, values))

    # -- recovering --------------------------------------------------------------------------

    def recover(self, now: int) -> list[str]:
        """Finishes, for every unfinished execution, what was committed but not done; gives
        the ids of the executions it touched."""
        touched = []
        failures: list[Exception] = []
        for execution_id in self.store.execution_ids(unfinished=True):
            with self._holding(execution_id, wait=False) as held:
                if not held:
                    continue  # another worker is finishing it
                entries = self.store.pending(execution_id)
                if entries:
                    touched.append(execution_id)
                try:
                    for entry in entries:
                        self._resume(entry, now)
                except Exception as exc:  # one run's trouble must not strand the others
                    failures.append(exc)
        if failures:
            raise failures[0]
        return touched

    def _resume(self, entry: OutboxEntry, now: int) -> None:
        execution_id, command = entry.execution_id, entry.command
        execution = self.store.load(execution_id).execution
        if isinstance(command, RequestApproval):
            if pending_approval(execution, command.request_id) is not None:
                self._notify(execution_id, command)  # idempotent by request id
            return
        if pending_effect(execution, command.effect_id) is None:
            return  # superseded: the run moved on, and decide would ignore its result
        if entry.result is not None:
            result = entry.result  # recorded but never delivered
        elif command.idempotent:
            # the same key: at most one effect, but a failure now may hide the lost success
            result = self._call(execution_id, command, resent=True)
        else:
            # the tool may or may not have applied it and honours no key: never a blind
            # retry; report the ambiguous outcome and let the step's policy decide (a result
            # another worker recorded meanwhile wins)
            failure = Failure(Category.TIMEOUT, "crashed before the result was recorded")
            result = self._record(execution_id, command, failure)
        self._deliver(execution_id, result, now)

    # -- replaying ---------------------------------------------------------------------------

    def replay(self, execution_id: str) -> Execution:
        """Gives the execution rebuilt from its log alone, checked against the stored record
        and transition records; raises `ReplayMismatchError` naming the first divergence."""
        history = self.store.history(execution_id)  # one consistent read
        stored = history.stored.execution
        definition = self._definition(stored)
        records = {r.sequence: r.transition for r in history.transitions}
        execution = new_execution(definition, execution_id)
        for entry in history.log:
            decision = self.decide(definition, execution, entry.event, entry.at)
            if decision.kind != entry.decision:
                raise ReplayMismatchError(execution_id, entry.sequence,
                                          f"logged {entry.decision}, replayed {decision.kind}")
            if isinstance(decision, Accepted):
                execution = decision.execution
                logged = records.get(execution.sequence)
                if decision.transition is not None and logged != decision.transition:
                    raise ReplayMismatchError(
                        execution_id, entry.sequence,
                        f"recorded transition {logged}, replayed {decision.transition}")
        if execution != stored:
            raise ReplayMismatchError(execution_id, len(history.log),
                                      "the replayed execution differs from the stored record")
        return execution

    def _definition(self, execution: Execution) -> WorkflowDefinition:
        return self.registry.get(execution.definition, execution.version)


def _contexts(execution: Execution) -> list[Mapping[str, Any]]:
    """Gives the execution's context and its regions' (down to theirs): in a parallel or map
    state, what a region assigned (a secret a tool returned) is in the region's alone."""
    contexts = [execution.context]
    for region in execution.regions:
        contexts += _contexts(region)
    return contexts


def _commit(execution_id: str, version: int, event: Event, decision: Decision,
            now: int) -> Commit:
    """Gives the commit of one decision: an accepted one carries its record and commands."""
    if isinstance(decision, Accepted):
        return Commit(execution_id, version, event, decision.kind, now, decision.execution,
                      decision.commands, decision.transition)
    return Commit(execution_id, version, event, decision.kind, now,
                  reason=f"{decision.reason}: {decision.detail}")


def _told(commit: Commit, definition: WorkflowDefinition) -> Commit:
    """Gives the commit with its reason scrubbed of the values under the event payload's
    secret keys (a schema's complaint quotes the value it refused)."""
    payload = commit.event.payload
    if not commit.reason or not isinstance(payload, Mapping):
        return commit
    values: set[str] = set()
    stack: list[Mapping[str, Any]] = [payload]
    while stack:
        for key, value in stack.pop().items():
            if isinstance(key, str) and (key in definition.secrets or named_secret(key)):
                values |= as_texts(value)
            elif isinstance(value, Mapping):
                stack.append(value)
    return dataclasses.replace(commit, reason=scrub(commit.reason, values)) if values else commit


def _key_pending(execution: Execution, key: str) -> bool:
    """Tells whether a step (or undo) under idempotency `key` is still the run's to finish:
    in flight, or waiting to retry, in the execution or one of its regions."""
    effect = execution.effect
    if effect is not None and effect.key == key:
        return True
    if execution.status != Status.FINAL and key == (
            f"{execution.id}/{execution.state}/{execution.visits.get(execution.state, 0)}"):
        return True
    return any(_key_pending(region, key) for region in execution.regions)


def _result_event(command: RunEffect | RunCompensation, outcome: ToolOutcome,
                  execution_id: str, definition: WorkflowDefinition, vault: Vault,
                  resent: bool = False) -> Event:
    """Gives the event a tool outcome becomes; its id derives from the effect id, so a result
    delivered twice is refused as a duplicate. Output fields the definition conceals (a
    secret context key's, or text named like a secret that nothing reads) are kept as vault
    references; a failure category the machine does not know is recorded as permanent (a
    tool's typo must not strand the run)."""
    compensation = isinstance(command, RunCompensation)
    if isinstance(outcome, Success) and not isinstance(outcome.output, Mapping):
        # an agent's JSON that is no object (a list, a string): invalid output, not a crash
        outcome = Failure(Category.INVALID_OUTPUT,
                          f"the tool's output is {type(outcome.output).__name__}, not an object")
    if isinstance(outcome, Success):
        kind = COMPENSATION_SUCCEEDED if compensation else STEP_SUCCEEDED
        output = dict(outcome.output)
        kept = frozenset(key for key, value in output.items()
                         if definition.conceals(key, value))
        if kept:
            output = conceal(execution_id, output, kept, vault)
        return Event(f"{RESERVED_ID_PREFIX}result:{command.effect_id}", kind, Source.TOOL,
                     output, command.effect_id)
    kind = COMPENSATION_FAILED if compensation else STEP_FAILED
    category = str(outcome.category)
    message = outcome.message or category
    if category not in _CATEGORIES:
        message = f"unknown failure category {category!r}: {message}"
        category = Category.PERMANENT
    payload: dict[str, Any] = {"category": str(category), "error": message}
    if resent:
        payload["uncertain"] = True  # the call's first answer was lost, not its effect
    return Event(f"{RESERVED_ID_PREFIX}result:{command.effect_id}", kind, Source.TOOL, payload,
                 command.effect_id)


_CATEGORIES = frozenset(str(c) for c in Category)
