"""What users write: the pydantic models of a workflow definition file.

These describe and validate input only. `compile_definition` turns a `WorkflowSpec` into the
immutable `WorkflowDefinition` that `decide` runs on; nothing on the hot path touches pydantic.
Durations are written as seconds (`30`, `1.5`) or with a unit (`250ms`, `30s`, `5m`, `2h`, `1d`)
and held as whole milliseconds.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    SerializerFunctionWrapHandler,
    WithJsonSchema,
    field_validator,
    model_serializer,
)
from pydantic.json_schema import SkipJsonSchema

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, None: 1000}
NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_.\-]*$"


def parse_duration_ms(value: object) -> int:
    """Gives whole milliseconds for `30`, `1.5`, `"250ms"`, `"30s"`, `"5m"`, `"2h"` or `"1d"`."""
    try:
        return _duration_ms(value)
    except OverflowError as exc:  # pydantic reports ValueErrors with their location
        raise ValueError(f"duration {str(value)[:40]!r} is too large") from exc


def _duration_ms(value: object) -> int:
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 30, '30s', '5m', '2h' or '1d', not a boolean")
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ValueError(f"expected a finite duration, got {value}")
        if value < 0:
            raise ValueError(f"expected a duration of zero or more, got {value}")
        return round(value * 1000)
    if isinstance(value, str):
        match = _DURATION.match(value)
        if match:
            return round(float(match.group(1)) * _UNIT_MS[match.group(2)])
    raise ValueError(f"expected a duration such as 30, '30s', '5m', '2h' or '1d', got {value!r}")


DurationMs = Annotated[
    int,
    BeforeValidator(parse_duration_ms),
    # dumped as "Nms" so that a dumped spec validates back to the same durations
    PlainSerializer(lambda ms: f"{ms}ms", return_type=str),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "minimum": 0, "description": "seconds"},
                {"type": "string", "pattern": r"^\s*\d+(\.\d+)?\s*(ms|s|m|h|d)?\s*$"},
            ]
        }
    ),
]
Name = Annotated[str, Field(pattern=NAME_PATTERN)]


class Category(StrEnum):
    """Why a tool call failed; the retry policy says which of these are retried."""

    TRANSIENT = "transient"
    RATE_LIMITED = "rate_limited"
    TIMEOUT = "timeout"
    PERMANENT = "permanent"
    INVALID_OUTPUT = "invalid_output"


class Source(StrEnum):
    """Who an event comes from."""

    TOOL = "tool"
    HUMAN = "human"
    TIMER = "timer"
    SYSTEM = "system"
    AGENT = "agent"


class _Spec(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, arbitrary_types_allowed=True, allow_inf_nan=False
    )

    #: Fields added after the first definition format: a dump leaves each out while it holds
    #: its default, so a definition that does not use them dumps, and digests, as it did (a
    #: replay file written before the field existed still replays).
    _added: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _unused_additions_left_out(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if self._added and isinstance(data, dict):
            fields = type(self).model_fields
            for name in self._added:
                if name in data and getattr(self, name) == fields[name].get_default(
                        call_default_factory=True):
                    del data[name]
        return data


class FunctionRef(_Spec):
    """A registered Python callable, by name (`functions=` at load, or `register_function`)."""

    function: Name


class RetryPolicySpec(_Spec):
    attempts_max: int = Field(3, description="Attempts in all, the first included.")
    delay_initial: DurationMs = 1000
    delay_max: DurationMs = 60_000
    multiplier: float = 2.0
    jitter: float = Field(0.0, description="Fraction of the delay drawn at random, 0 to 1.")
    retry_on: list[Category] = Field(
        default_factory=lambda: [Category.TRANSIENT, Category.RATE_LIMITED, Category.TIMEOUT]
    )
    on_exhausted: Literal["fail", "compensate", "escalate"] = "fail"


class CompensationSpec(_Spec):
    tool: Name
    input: dict[str, Any] = Field(default_factory=dict)
    attempts_max: int = 3


class StepSpec(_Spec):
    """The effect a state runs on entry; its outcome returns as `step.succeeded`/`step.failed`."""

    tool: Name
    input: dict[str, Any] = Field(
        default_factory=dict,
        description="Literal values; a string starting with '=' is an expression (=context.x).",
    )
    reversible: bool = True
    timeout: DurationMs | None = None
    retry: RetryPolicySpec = Field(default_factory=RetryPolicySpec)
    compensation: CompensationSpec | None = None
    needs_approval: bool | str = Field(
        False,
        description="true, or an expression over the context (`context.amount > 100`): the step "
                    "then needs an approval only when it holds as the state is entered.",
    )
    cost: float = 0.0
    escalate_to: Name | None = Field(
        None, description="State for `on_exhausted: escalate` and ambiguous failures."
    )


class ToolSpec(_Spec):
    description: str = ""
    idempotency_keys: bool = Field(False, description="The tool honours idempotency keys.")
    repeatable: bool = Field(False, description="Applying it twice is not a duplicate effect.")
    output: dict[str, Any] | None = Field(None, description="JSON Schema of a success output.")
    action: Literal["input", "call"] = Field(
        "input",
        description="What one logical action of the tool is, to `no_duplicate_effect`: `input` "
                    "(the same input applied twice in one execution is one action done twice) "
                    "or `call` (each call the definition makes, by its idempotency key: a "
                    "later visit sending the same input is a new action, a key applied twice "
                    "is still a duplicate). Imported Step Functions tasks are `call`.",
    )

    _added = ("action",)


class EventSpec(_Spec):
    description: str = ""
    payload: dict[str, Any] | SkipJsonSchema[type[BaseModel]] | None = Field(
        None, description="JSON Schema (or, from Python, a pydantic model) of the payload."
    )
    sources: list[Source] | None = Field(None, description="Sources allowed; any when absent.")
    sends_max: int | None = Field(
        None, ge=1,
        description="The most times the sender sends this event to one execution (1: a one-shot "
                    "webhook); no limit when absent. Duplicate, late, reordered and redelivered "
                    "copies are faults on top of these.",
    )

    correlate: dict[Name, str] = Field(
        default_factory=dict,
        description="Payload fields that must equal context values: `{issue_id: "
                    "context.issue_id}`. A payload that does not match is rejected; the simulator "
                    "draws matching payloads, and mismatched ones as the wrong_correlation fault.",
    )

    _added = ("sends_max", "correlate")


class ActionSpec(_Spec):
    """`assign: {key: expression}` sets context keys; `function: name` calls a registered one."""

    assign: dict[Name, str] | None = None
    function: Name | SkipJsonSchema[Callable[..., Any]] | None = None


GuardSpec = str | FunctionRef | SkipJsonSchema[Callable[..., Any]]


class TransitionSpec(_Spec):
    target: Name | None = Field(
        None, description="Where it goes; with no target the transition is internal: its "
                          "actions run and the state is neither left nor entered again.")
    guard: GuardSpec | None = None
    actions: list[ActionSpec] = Field(default_factory=list)
    description: str = ""

    _added = ("target",)


#: A transition written as a bare target, one mapping, or a list tried in order.
TransitionsWritten = Name | TransitionSpec | list[Name | TransitionSpec]


class AfterSpec(_Spec):
    delay: DurationMs
    target: Name


class ApprovalSpec(_Spec):
    for_state: Name = Field(description="The state whose step this approval authorizes.")
    summary: str
    evidence: list[Name] = Field(default_factory=list, description="Context keys shown.")
    roles: list[Name] = Field(min_length=1)
    expires_after: DurationMs
    on_expiry: Literal["deny", "escalate"] = "deny"
    escalate_to: Name | None = None


StateType = Literal["normal", "wait", "final", "choice", "parallel", "map"]


class StateSpec(_Spec):
    type: StateType = Field(
        "normal",
        description="normal (runs an optional step), wait (suspended until an event, an "
                    "approval or its `after:`), final (with an outcome), choice (only "
                    "`always:`: left at once), parallel (its children are regions, run at "
                    "once, joined by `done:`), map (its children's flow runs once per item "
                    "of `items:`, joined by `done:`).",
    )
    initial: bool = False
    parent: Name | None = None
    outcome: Name | None = Field(None, description="Final states only: success, failure, ...")
    description: str = ""
    step: StepSpec | None = None
    approval: ApprovalSpec | None = None
    after: AfterSpec | None = None
    on: dict[str, TransitionsWritten] = Field(default_factory=dict)
    entry: list[ActionSpec] = Field(
        default_factory=list, description="Actions run as the state is entered (outermost first).")
    exit: list[ActionSpec] = Field(
        default_factory=list, description="Actions run as the state is left (innermost first).")
    always: TransitionsWritten = Field(
        default_factory=list,
        description="Eventless transitions: tried in order as soon as the state is entered or "
                    "its context changes; the first whose guard holds is taken.",
    )
    done: TransitionsWritten | None = Field(
        None,
        description="Parallel and map states: where the run goes once every region (or item) "
                    "has reached a final state; guards read `event.payload.failed`.",
    )
    history: Literal["shallow", "deep"] | None = Field(
        None, description="Compound states: entering again resumes the child (shallow) or the "
                          "leaf (deep) that was active when it was left.")
    on_region_failure: Literal["cancel", "wait"] = Field(
        "cancel", description="Parallel and map states: on a region's failure, abandon the "
                              "others at once (cancel) or let them finish (wait).")
    items: str | None = Field(None, description="Map states: an expression giving the list.")
    concurrency_max: int | None = Field(
        None, ge=1, description="Map states: items run at once; all of them when absent.")
    tolerated_failures: int = Field(
        0, ge=0, description="Map states: items that may fail before the map fails.")
    results: Name = Field(
        "results", description="Map states: the context key that gets one result per item.")

    _added = ("entry", "exit", "always", "done", "history", "on_region_failure", "items",
              "concurrency_max", "tolerated_failures", "results")

    @field_validator("on", mode="after")
    @classmethod
    def _as_lists(cls, value: dict[str, TransitionsWritten]) -> dict[str, list[TransitionSpec]]:
        return {event: _listed(written) for event, written in value.items()}

    @field_validator("always", "done", mode="after")
    @classmethod
    def _listed(cls, value: TransitionsWritten | None) -> list[TransitionSpec] | None:
        return None if value is None else _listed(value)

    def transitions(self, event: str) -> list[TransitionSpec]:
        """Gives the transitions declared for `event`, in order (a list, however written)."""
        return self.on.get(event, [])  # type: ignore[return-value]  # normalised by _as_lists

    def eventless(self) -> list[TransitionSpec]:
        """Gives the `always:` transitions, in order."""
        return self.always  # type: ignore[return-value]  # normalised by _listed

    def joins(self) -> list[TransitionSpec]:
        """Gives the `done:` transitions, in order (none when absent)."""
        return self.done or []  # type: ignore[return-value]  # normalised by _listed


def _listed(written: TransitionsWritten) -> list[TransitionSpec]:
    """Gives a transition written as a bare target, one mapping or a list, as a list."""
    def one(item: str | TransitionSpec) -> TransitionSpec:
        return TransitionSpec(target=item) if isinstance(item, str) else item

    return [one(item) for item in written] if isinstance(written, list) else [one(written)]


class BudgetSpec(_Spec):
    transitions_max: int | None = None
    visits_max: int | None = Field(None, description="Entries into any one state.")
    deadline: DurationMs | None = None
    cost_max: float | None = None
    cycle_threshold: int | None = Field(
        None, description="The same state, event and error seen this many times pauses the run."
    )
    on_exceeded: Name | None = None
    on_cycle: Name | None = Field(None, description="Defaults to on_exceeded.")


class LintSpec(_Spec):
    """What the definition tells the linter: the warnings it acknowledges, each with a reason."""

    ignore: dict[str, str | None] = Field(
        default_factory=dict,
        description="Warnings acknowledged, by code, each with the reason it is acceptable "
                    "here (`irreversible-unguarded: a second email is harmless`). An "
                    "acknowledged warning is counted, not shown; an error cannot be "
                    "acknowledged.",
    )


class WorkflowSpec(_Spec):
    """A workflow definition file, as written."""

    name: Name
    version: Annotated[
        str, WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "integer"}]})
    ] = "1"
    description: str = ""
    context: dict[str, Any] = Field(default_factory=dict)
    tools: dict[Name, ToolSpec] = Field(default_factory=dict)
    events: dict[Name, EventSpec] = Field(default_factory=dict)
    states: dict[Name, StateSpec] = Field(min_length=1)
    budgets: BudgetSpec = Field(default_factory=BudgetSpec)
    compensation_failed: Name | None = Field(
        None, description="State that asks a human when a compensation fails."
    )
    secrets: list[Name] = Field(
        default_factory=list,
        description="Context keys whose values are secret: stored as references, resolved only "
                    "in the input handed to a tool.",
    )
    reactive: bool = Field(
        False,
        description="The workflow runs for as long as it is asked to and ends by design in no "
                    "final state (a traffic light, a queue consumer): no final state need be "
                    "reachable, a wait state may wait for its events with no timeout, and "
                    "liveness asks only that something can still move each execution.",
    )

    untested: dict[str, str | None] = Field(
        default_factory=dict,
        # like `lint:`, what a campaign is told changes nothing the machine does
        exclude=True,
        description="What a campaign may leave untested here, each with the reason it is "
                    "acceptable: `untested: {crash_point:<name>: <reason>}`, `fault:<kind>`, "
                    "`moves:<state>` or `outcome:success` (`<kind>:*` for every one of the "
                    "kind). A campaign with a "
                    "gap not listed here is `untested`, not `held`.",
    )
    lint: LintSpec = Field(
        default_factory=LintSpec,
        # what the linter is told changes nothing the machine does: it stays out of dumps, so
        # out of the definition's digest (acknowledging a warning keeps replay files valid)
        exclude=True,
        description="What the linter is told: `ignore: {<warning code>: <reason>}`.",
    )

    _added = ("reactive",)

    @field_validator("context", mode="after")
    @classmethod
    def _context_is_json(cls, value: dict[str, Any]) -> dict[str, Any]:
        """Every value is JSON data: a run's history and reports are JSON, and a date YAML read
        unquoted (or a set, or bytes) passed lint and stopped `fuzz` with a traceback."""
        stack: list[tuple[str, Any]] = [(key, item) for key, item in value.items()]
        while stack:
            path, item = stack.pop()
            if isinstance(item, dict):
                if not all(isinstance(key, str) for key in item):
                    raise ValueError(f"{path!r}: the keys of a mapping must be text")
                stack += [(f"{path}.{key}", inner) for key, inner in item.items()]
            elif isinstance(item, list | tuple):  # a tuple from Python: a list in JSON
                stack += [(f"{path}[{index}]", inner) for index, inner in enumerate(item)]
            elif (item is not None and not isinstance(item, str | int | float | bool)) or (
                    isinstance(item, float) and not math.isfinite(item)):
                what = repr(item) if isinstance(item, float) else f"a {type(item).__name__}"
                hint = " (quote it: '2024-01-01')" if hasattr(item, "isoformat") else ""
                raise ValueError(f"{path!r} holds {what}, which is not JSON data: text, "
                                 f"numbers, true, false, null, lists or mappings{hint}")
        return value

    @field_validator("version", mode="before")
    @classmethod
    def _version_as_text(cls, value: object) -> object:
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        return value


def spec_keywords() -> frozenset[str]:
    """Gives every key a definition file may use, for "did you mean" on unknown keys."""
    models: tuple[type[BaseModel], ...] = (
        FunctionRef, RetryPolicySpec, CompensationSpec, StepSpec, ToolSpec, EventSpec,
        ActionSpec, TransitionSpec, AfterSpec, ApprovalSpec, StateSpec, BudgetSpec, LintSpec,
        WorkflowSpec,
    )
    return frozenset(name for model in models for name in model.model_fields)
