"""The tool world: simulated services built from a definition's tools, and the effect ledger.

Each tool of the definition becomes a callable the machine is given. A call draws its outcome
from the fault plan (one draw against the tool's cumulative rates): success, with an output
generated from the tool's declared output schema; or transient, rate limited, permanent,
timeout before apply, timeout after apply (applied, but the caller sees a timeout), slow (the
caller times out, the service applies it later) or malformed output. A tool that honours
idempotency keys applies a key once and answers its first output again; one that does not
applies every call. Every application is an entry of the ledger: the ground truth for
side-effect checks, whatever the machine believes it did.

A service that honours keys keeps one contract for every state of a key, as real idempotent
APIs do (see `_ANSWERS`):

- a key applied answers its first result: a fault that is the service's own answer
  (permanent, malformed) does not strike it;
- a key refused (answered `permanent`) is refused again, and never applies: as an idempotent
  service keeps the first answer to a key, failure included (Stripe does);
- a key in flight (a slow call the service has not applied yet) is held until that call lands,
  and answered its result: the held call lands at once (blocking services answer so; a
  retryable conflict would say no more). A fault that is the service's own answer does not
  strike it either: a `permanent` refusal of a request the service is about to apply would
  contradict what the key does;
- a fault before the request reaches the service (transient, rate limited, timeout before
  apply) strikes any call: nothing is said about the key. A timeout after apply lands the key
  and loses its answer; a slow call is held past the caller's timeout, and the key still
  applies once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from fault_injection import MALFORMED_VARIANTS, FaultKind, FaultPlan
from harness.errors import HarnessError
from harness.sim.choices import Choices
from harness.sim.history import Applied, Dispatched, FaultInjected, HistoryRecord
from harness.sim.payloads import PayloadGenerator
from reference_machine import Failure, Success, Tool, ToolOutcome, WorkflowDefinition

__all__ = ["EffectLedger", "LedgerEntry", "MadeBy", "ToolWorld"]

#: What a tool fault makes the caller see (category, message), and whether it applied.
_FAILURES: Mapping[FaultKind, tuple[str, str, bool]] = {
    FaultKind.TOOL_TRANSIENT: ("transient", "injected: service unavailable", False),
    FaultKind.TOOL_RATE_LIMITED: ("rate_limited", "injected: 429 too many requests", False),
    FaultKind.TOOL_PERMANENT: ("permanent", "injected: request refused", False),
    FaultKind.TOOL_TIMEOUT_BEFORE_APPLY: ("timeout", "injected: timed out before applying",
                                          False),
    FaultKind.TOOL_TIMEOUT_AFTER_APPLY: ("timeout", "injected: timed out after applying", True),
}
_TOOL_KINDS = (*_FAILURES, FaultKind.SLOW_TOOL, FaultKind.MALFORMED_OUTPUT)

#: The faults that are the service's own answer, not the network's: a service that honours keys
#: answers a key it already applied with its first answer instead. A fault before the request
#: reaches it (transient, rate limited, timeout before apply), or after it answered (timeout
#: after apply, slow), still strikes a retry.
_ANSWERS = frozenset({FaultKind.TOOL_PERMANENT, FaultKind.MALFORMED_OUTPUT})
#: The faults that strike before the request reaches the service: they say nothing of its key.
_BEFORE = frozenset({FaultKind.TOOL_TRANSIENT, FaultKind.TOOL_RATE_LIMITED,
                     FaultKind.TOOL_TIMEOUT_BEFORE_APPLY})


class LedgerEntry(NamedTuple):
    """One side effect that took place: the `seq`-th application at the world."""

    seq: int
    at: int
    execution: str
    tool: str
    key: str
    input: str  # canonical JSON


class EffectLedger:
    """Every applied effect, in the order applied."""

    def __init__(self) -> None:
        self.entries: list[LedgerEntry] = []

    def append(self, at: int, execution: str, tool: str, key: str, input: str) -> LedgerEntry:
        entry = LedgerEntry(len(self.entries) + 1, at, execution, tool, key, input)
        self.entries.append(entry)
        return entry

    def __len__(self) -> int:
        return len(self.entries)


class MadeBy(NamedTuple):
    """Who made a tool call, as an adapter knows it (a keyword of the world's tools, which a
    machine calling `tool(input, key)` never gives): the execution, the logical action (one
    per unit of work, step and place, however often the unit re-runs) and what made this
    call, when known. The world then reads none of it off the key."""

    execution: str
    action: str = ""
    cause: str = ""


class _Landing(NamedTuple):
    due: int
    execution: str
    tool: str
    key: str
    input: Mapping[str, Any]
    made_by: MadeBy | None


class Clock:
    """The simulator's virtual time and step, shared with the world so records carry both."""

    __slots__ = ("now", "step")

    def __init__(self) -> None:
        self.now = 0
        self.step = 0


class ToolWorld:
    """The simulated services of one run, sharing one rng with the simulator.

    `honour_keys` overrides, per tool, whether the service honours idempotency keys (a
    provider that says it does and does not is a fault worth simulating)."""

    def __init__(self, definition: WorkflowDefinition, plan: FaultPlan, rng: Choices,
                 clock: Clock, emit: Callable[[HistoryRecord], None], *, seed: int,
                 honour_keys: Mapping[str, bool] | None = None,
                 executions: Callable[[str], str] | None = None,
                 outputs: Mapping[str, PayloadGenerator | None] | None = None,
                 on_call: Callable[[], None] | None = None,
                 tables: Mapping[str, tuple[tuple[float, FaultKind], ...]] | None = None,
                 activity: Callable[[], str] | None = None) -> None:
        self._rng = rng
        self._clock = clock
        self._emit = emit
        self._plan = plan
        self._execution_of = executions or _execution_of_key
        self._on_call = on_call or (lambda: None)  # the simulator counts calls per step
        self._activity = activity or (lambda: "")
        self._healed = False
        # calls made while faults were on, by tool: each a place a tool fault can strike
        self.calls: dict[str, int] = {}
        self.ledger = EffectLedger()
        self.agent_noise: list[str] = []  # executions an agent emitted an unknown event for
        self._landings: list[_Landing] = []
        self._outputs: dict[tuple[str, str], Any] = {}
        self._refused: set[tuple[str, str]] = set()  # keys the service answered `permanent`
        overrides = honour_keys or {}
        tables = tables if tables is not None else fault_tables(plan, definition)
        self.tools: dict[str, Tool] = {}
        self._generators: dict[str, PayloadGenerator | None] = {}
        self.honours: dict[str, bool] = {}
        for index, (name, spec) in enumerate(definition.tools.items()):
            self.honours[name] = honours = overrides.get(name, spec.idempotency_keys)
            self._generators[name] = (outputs[name] if outputs is not None else
                                      generator(f"tools.{name}.output", spec.output,
                                                seed * 7919 + index))
            self.tools[name] = self._tool(name, honours, tables[name])

    # -- calls -----------------------------------------------------------------------------

    def _tool(self, name: str, honours: bool,
              table: tuple[tuple[float, FaultKind], ...]) -> Tool:
        def call(input: Mapping[str, Any], idempotency_key: str, *,
                 made_by: MadeBy | None = None) -> ToolOutcome:
            return self._call(name, honours, table, input, idempotency_key, made_by)
        call.__name__ = call.__qualname__ = f"simulated {name}"
        call.knows_callers = True  # type: ignore[attr-defined]  # it takes `made_by`
        return call

    def _call(self, tool: str, honours: bool, table: tuple[tuple[float, FaultKind], ...],
              input: Mapping[str, Any], key: str, made_by: MadeBy | None) -> ToolOutcome:
        self._on_call()
        if not self._healed:
            self.calls[tool] = self.calls.get(tool, 0) + 1
        clock = self._clock
        execution = made_by.execution if made_by is not None else self._execution_of(key)
        self._emit(Dispatched(clock.step, clock.now, execution, tool, key, self._activity()))
        fault = self._rng.pick(f"tool:{tool}", table) if table and not self._healed else None
        if honours and (tool, key) in self._refused and fault not in _BEFORE:
            return self._refusal(fault, execution, f"{tool} {key}")  # as it first did
        if honours and (fault is None or fault in _ANSWERS) and self._in_flight(tool, key):
            self._land_key(tool, key)  # the service answers once the held call has landed
        if fault is None or (fault in _ANSWERS and honours and (tool, key) in self._outputs):
            return Success(self._apply(execution, tool, honours, key, input, made_by))
        self._emit(FaultInjected(clock.step, clock.now, fault, execution, f"{tool} {key}"))
        if fault is FaultKind.TOOL_PERMANENT and honours:
            self._refused.add((tool, key))
        failure = _FAILURES.get(fault)
        if failure is not None:
            category, message, applies = failure
            if applies:
                self._apply(execution, tool, honours, key, input, made_by)
            return Failure(category, message)
        if fault == FaultKind.SLOW_TOOL:
            rate = self._plan.get(FaultKind.SLOW_TOOL)
            latency = rate.latency_ms if rate is not None else 60_000
            self._landings.append(_Landing(clock.now + latency, execution, tool, key, input,
                                           made_by))
            return Failure("timeout", f"injected: no answer within the call's timeout "
                                      f"(the service applies it at +{latency}ms)")
        return self._malformed(execution, tool, honours, key, input, made_by)

    def _malformed(self, execution: str, tool: str, honours: bool, key: str,
                   input: Mapping[str, Any], made_by: MadeBy | None) -> ToolOutcome:
        output = self._apply(execution, tool, honours, key, input, made_by)
        rate = self._plan.get(FaultKind.MALFORMED_OUTPUT)
        variants = rate.variants if rate is not None and rate.variants else MALFORMED_VARIANTS
        variant = variants[self._rng.branch(len(variants))]
        if variant == "unknown_event":
            self.agent_noise.append(execution)
            return Success(output)
        generator = self._generators[tool]
        broken = generator.invalid(self._rng, mapping_only=True) if generator else None
        if variant == "wrong_shape" or broken is None:
            answer: Any = [output] if self._rng.below(2) else json.dumps(output)
        else:
            answer = broken[0]
        if honours:  # what the service sent is what it answers the key with from now on
            self._outputs[(tool, key)] = answer
        return Success(answer)

    def _apply(self, execution: str, tool: str, honours: bool, key: str,
               input: Mapping[str, Any], made_by: MadeBy | None = None) -> Any:
        if honours:
            known = self._outputs.get((tool, key))
            if known is not None:
                return known  # the service answers a repeated key with its first answer
        generator = self._generators[tool]
        output = generator.valid(self._rng) if generator is not None else {}
        clock = self._clock
        entry = self.ledger.append(clock.now, execution, tool, key, canonical(input))
        self._emit(Applied(clock.step, clock.now, execution, tool, key, entry.input, entry.seq,
                           *(made_by[1:] if made_by is not None else ())))
        if honours:
            self._outputs[(tool, key)] = output
        return output

    def _refusal(self, fault: FaultKind | None, execution: str, detail: str) -> ToolOutcome:
        """Gives the answer to a key the service refused: the refusal again, or (a fault on
        the way back, recorded as injected) a timeout; nothing applies."""
        if fault in (FaultKind.TOOL_TIMEOUT_AFTER_APPLY, FaultKind.SLOW_TOOL):
            clock = self._clock
            self._emit(FaultInjected(clock.step, clock.now, fault, execution, detail))
            return Failure("timeout", "injected: the answer was lost (the service refused "
                                      "this key before)")
        return Failure("permanent", "the service refused this key before: it answers so again")

    def _in_flight(self, tool: str, key: str) -> bool:
        """Tells whether a slow call under `key` waits to land at `tool`."""
        return any(landing.key == key and landing.tool == tool for landing in self._landings)

    def _land_key(self, tool: str, key: str) -> None:
        """Lands, now, the slow calls under `key` at `tool` (the first applies the key)."""
        held = [landing for landing in self._landings
                if landing.key == key and landing.tool == tool]
        self._landings = [landing for landing in self._landings if landing not in held]
        for landing in held:
            self._apply(landing.execution, tool, True, key, landing.input, landing.made_by)

    def heal(self, rng: Choices) -> None:
        """Stops injecting tool faults (the liveness phase) and draws from `rng` from now on."""
        self._healed = True
        self._rng = rng

    # -- slow calls landing ----------------------------------------------------------------

    @property
    def next_landing(self) -> int | None:
        """Gives the virtual time of the next slow call to land, if any."""
        return min((landing.due for landing in self._landings), default=None)

    def land(self, now: int) -> int:
        """Applies every slow call due by `now`; gives how many landed."""
        due = [landing for landing in self._landings if landing.due <= now]
        if not due:
            return 0
        self._landings = [landing for landing in self._landings if landing.due > now]
        for landing in due:
            self._apply(landing.execution, landing.tool, self.honours[landing.tool],
                        landing.key, landing.input, landing.made_by)
        return len(due)


def generator(location: str, schema: Mapping[str, Any] | None,
              seed: int) -> PayloadGenerator | None:
    """Gives the generator of a schema's values (None: no schema), or a clear error naming
    `location` for a schema it cannot serve."""
    if not schema:
        return None
    try:
        return PayloadGenerator(schema, seed=seed)
    except ValueError as exc:
        raise HarnessError(f"{location}: the simulator cannot generate values for this "
                           f"schema: {exc}") from exc


def canonical(value: Any) -> str:
    """Gives the canonical JSON of a tool input (keys sorted, no spaces)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)


def _execution_of_key(key: str) -> str:
    """The reference machine's keys are `{execution}/{state}/{visit}`."""
    return key.split("/", 1)[0]


def fault_tables(plan: FaultPlan, definition: WorkflowDefinition
                 ) -> dict[str, tuple[tuple[float, FaultKind], ...]]:
    """Gives, per tool of the definition, the cumulative thresholds of its tool faults."""
    return {tool: _table(plan, tool) for tool in definition.tools}


def _table(plan: FaultPlan, tool: str) -> tuple[tuple[float, FaultKind], ...]:
    """Gives the cumulative thresholds of the tool faults that apply to `tool`."""
    table = []
    total = 0.0
    for kind in _TOOL_KINDS:
        rate = plan.get(kind)
        if rate is None or rate.rate <= 0 or (rate.tools and tool not in rate.tools):
            continue
        total += rate.rate
        table.append((min(total, 1.0), kind))
    return tuple(table)
