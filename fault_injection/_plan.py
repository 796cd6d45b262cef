"""Fault plans: which faults a run injects, how often, and with which parameters.

A plan file is `{faults: {kind: spec, ...}, swarm: false}`. Each spec is a bare rate
(`crash: 0.02`) or a mapping with `rate:` and the kind's parameters
(`crash: {rate: 0.02, points: [before_commit]}`).
Plans are read (YAML with a safe loader, JSON, or a dict) and validated with pydantic once, then
converted into the frozen `FaultPlan` / `FaultRate` records the simulator reads on its hot path.

With `swarm: true`, `FaultPlan.for_run` draws, per run, a random non-empty subset of the enabled
kinds (swarm testing: fewer faults at once, so the ones that are on get to interact), each at a
rate drawn from [rate/4, rate]. With `hot: true` (the default plan's), half the runs keep every
kind (a bug that needs two kinds at once meets both), and a kind that is on runs hot in half of
its runs instead, as FoundationDB's buggify has an enabled site fire often: at its hot
rate (`HOT_RATES`, or its own rate when that is higher), so that a fault whose places are rare (an
approval decided once a run, a crash point passed after the one tool call) still strikes in a
default campaign. A plan of your own runs its own rates unless it says `hot: true`.

`default_plan()` turns every kind on at a moderate rate, so a run of a few hundred steps sees a
handful of each without drowning the workflow in faults:

- crash, store_write_failure, second_worker, forged_approval: 0.02 (each costs a recovery);
- duplicate_event, tool_transient, slow_tool, timer_skew: 0.05 (cheap and common in production);
- wrong_correlation: 0.05 (a rejection only; it strikes only events that declare `correlate:`);
- late_event, reordered_events, dropped_event, tool_rate_limited, tool_permanent,
  tool_timeout_before_apply, tool_timeout_after_apply, malformed_output: 0.03.
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, ValidationError

from fault_injection._catalogue import (
    FORGED_VARIANTS,
    MALFORMED_VARIANTS,
    TOOL_FAULTS,
    FaultKind,
)
from fault_injection.errors import FaultPlanError
from reference_machine import CRASH_POINTS, DurationMs, WorkflowDefinition
from reference_machine.documents import DEFINITION_BYTES_MAX, read_document
from reference_machine.errors import DefinitionSyntaxError
from reference_machine.findings import did_you_mean

__all__ = [
    "DEFAULT_RATES",
    "HOT_RATES",
    "SPECS",
    "CrashSpec",
    "DroppedEventSpec",
    "FaultPlan",
    "FaultRate",
    "FaultSpec",
    "FaultsSpec",
    "ForgedApprovalSpec",
    "LateEventSpec",
    "MalformedOutputSpec",
    "PlanSpec",
    "SlowToolSpec",
    "TimerSkewSpec",
    "ToolFaultSpec",
    "default_plan",
    "load_plan",
    "no_faults",
]

LATENCY_MS_DEFAULT = 60_000
MAX_SKEW_MS_DEFAULT = 5_000
REDELIVER_AFTER_MS_DEFAULT = 30_000
DELAY_MS_DEFAULT = 60_000

DEFAULT_RATES: Mapping[FaultKind, float] = MappingProxyType(
    {
        FaultKind.CRASH: 0.02,
        FaultKind.DUPLICATE_EVENT: 0.05,
        FaultKind.LATE_EVENT: 0.03,
        FaultKind.REORDERED_EVENTS: 0.03,
        FaultKind.DROPPED_EVENT: 0.03,
        FaultKind.TOOL_TRANSIENT: 0.05,
        FaultKind.TOOL_RATE_LIMITED: 0.03,
        FaultKind.TOOL_PERMANENT: 0.03,
        FaultKind.TOOL_TIMEOUT_BEFORE_APPLY: 0.03,
        FaultKind.TOOL_TIMEOUT_AFTER_APPLY: 0.03,
        FaultKind.SLOW_TOOL: 0.05,
        FaultKind.MALFORMED_OUTPUT: 0.03,
        FaultKind.TIMER_SKEW: 0.05,
        FaultKind.STORE_WRITE_FAILURE: 0.02,
        FaultKind.SECOND_WORKER: 0.02,
        FaultKind.FORGED_APPROVAL: 0.02,
        FaultKind.WRONG_CORRELATION: 0.05,
    }
)
"""The rates of `default_plan()`, by kind."""

PINNED_RATE = 0.5
"""The least rate of a pinned kind in every run (`FaultPlan.pinned`)."""

HOT_RATES: Mapping[FaultKind, float] = MappingProxyType(
    {
        FaultKind.CRASH: 0.2,
        FaultKind.DUPLICATE_EVENT: 0.3,
        FaultKind.LATE_EVENT: 0.3,
        FaultKind.REORDERED_EVENTS: 0.25,
        FaultKind.DROPPED_EVENT: 0.25,
        FaultKind.TOOL_TRANSIENT: 0.15,
        FaultKind.TOOL_RATE_LIMITED: 0.15,
        FaultKind.TOOL_PERMANENT: 0.15,
        FaultKind.TOOL_TIMEOUT_BEFORE_APPLY: 0.15,
        FaultKind.TOOL_TIMEOUT_AFTER_APPLY: 0.15,
        FaultKind.SLOW_TOOL: 0.15,
        FaultKind.MALFORMED_OUTPUT: 0.15,
        FaultKind.TIMER_SKEW: 0.3,
        FaultKind.STORE_WRITE_FAILURE: 0.1,
        FaultKind.SECOND_WORKER: 0.2,
        FaultKind.FORGED_APPROVAL: 0.3,
        FaultKind.WRONG_CORRELATION: 0.25,
    }
)
"""The rate a kind runs at in a swarm run where it runs hot (per place it can strike: a crash
point passed, an event sent, a tool call, an approval decided), by kind. A tool's seven kinds
share its calls, so each stays low enough that most calls still get through."""

_ORDER = {kind: index for index, kind in enumerate(FaultKind)}
_KIND_NAMES = tuple(kind.value for kind in FaultKind)
_KNOWN_KINDS = ", ".join(_KIND_NAMES)
# spec parameter -> FaultRate field, for the durations held as whole milliseconds
_DURATION_FIELDS = {
    "latency": "latency_ms",
    "max_skew": "max_skew_ms",
    "redeliver_after": "redeliver_after_ms",
    "delay": "delay_ms",
}


# -- what users write --------------------------------------------------------------------------


def _rate(value: object) -> float:
    if (isinstance(value, bool) or not isinstance(value, int | float)
            or not math.isfinite(value) or not 0 <= value <= 1):
        raise ValueError(f"rate must be a number from 0 to 1, got {_short(value)}")
    return float(value)


def _bare_rate(value: object) -> object:
    """Lets a fault be written as its rate alone: `crash: 0.02` means `crash: {rate: 0.02}`."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return {"rate": value}
    if isinstance(value, Mapping):
        return value
    raise ValueError(
        f"expected a rate from 0 to 1, or a mapping with `rate:` and parameters, "
        f"got {_short(value)}"
    )


Rate = Annotated[float, BeforeValidator(_rate)]


class FaultSpec(BaseModel):
    """One fault kind as written in a plan: how often it strikes (0 never, 1 at every chance)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    rate: Rate = Field(description="Chance, 0 to 1, that the fault strikes at each opportunity.")


class CrashSpec(FaultSpec):
    points: list[str] | None = Field(
        None, description="Crash points to crash at; every point the machine names when left out."
    )


class ToolFaultSpec(FaultSpec):
    tools: list[str] | None = Field(
        None, description="Tools the fault strikes; every tool of the definition when left out."
    )


class SlowToolSpec(ToolFaultSpec):
    latency: DurationMs = Field(LATENCY_MS_DEFAULT, description="Extra time a slow call takes.")


class MalformedOutputSpec(ToolFaultSpec):
    variants: list[str] | None = Field(
        None, description=f"Subset of {', '.join(MALFORMED_VARIANTS)}; all when left out."
    )


class TimerSkewSpec(FaultSpec):
    max_skew: DurationMs = Field(
        MAX_SKEW_MS_DEFAULT, description="Largest amount a timer fires early or late by."
    )


class DroppedEventSpec(FaultSpec):
    redeliver_after: DurationMs = Field(
        REDELIVER_AFTER_MS_DEFAULT, description="When a dropped event is delivered again."
    )


class LateEventSpec(FaultSpec):
    delay: DurationMs = Field(DELAY_MS_DEFAULT, description="How late a late event arrives.")


class ForgedApprovalSpec(FaultSpec):
    variants: list[str] | None = Field(
        None, description=f"Subset of {', '.join(FORGED_VARIANTS)}; all when left out."
    )


SPECS: Mapping[FaultKind, type[FaultSpec]] = MappingProxyType(
    {
        FaultKind.CRASH: CrashSpec,
        FaultKind.DUPLICATE_EVENT: FaultSpec,
        FaultKind.LATE_EVENT: LateEventSpec,
        FaultKind.REORDERED_EVENTS: FaultSpec,
        FaultKind.DROPPED_EVENT: DroppedEventSpec,
        FaultKind.TOOL_TRANSIENT: ToolFaultSpec,
        FaultKind.TOOL_RATE_LIMITED: ToolFaultSpec,
        FaultKind.TOOL_PERMANENT: ToolFaultSpec,
        FaultKind.TOOL_TIMEOUT_BEFORE_APPLY: ToolFaultSpec,
        FaultKind.TOOL_TIMEOUT_AFTER_APPLY: ToolFaultSpec,
        FaultKind.SLOW_TOOL: SlowToolSpec,
        FaultKind.MALFORMED_OUTPUT: MalformedOutputSpec,
        FaultKind.TIMER_SKEW: TimerSkewSpec,
        FaultKind.STORE_WRITE_FAILURE: FaultSpec,
        FaultKind.SECOND_WORKER: FaultSpec,
        FaultKind.FORGED_APPROVAL: ForgedApprovalSpec,
        FaultKind.WRONG_CORRELATION: FaultSpec,
    }
)
"""The pydantic model of each kind's spec."""


class FaultsSpec(BaseModel):
    """The `faults:` mapping: one optional spec per kind, keyed by the kind's value."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    crash: Annotated[CrashSpec | None, BeforeValidator(_bare_rate)] = None
    duplicate_event: Annotated[FaultSpec | None, BeforeValidator(_bare_rate)] = None
    late_event: Annotated[LateEventSpec | None, BeforeValidator(_bare_rate)] = None
    reordered_events: Annotated[FaultSpec | None, BeforeValidator(_bare_rate)] = None
    dropped_event: Annotated[DroppedEventSpec | None, BeforeValidator(_bare_rate)] = None
    tool_transient: Annotated[ToolFaultSpec | None, BeforeValidator(_bare_rate)] = None
    tool_rate_limited: Annotated[ToolFaultSpec | None, BeforeValidator(_bare_rate)] = None
    tool_permanent: Annotated[ToolFaultSpec | None, BeforeValidator(_bare_rate)] = None
    tool_timeout_before_apply: Annotated[ToolFaultSpec | None, BeforeValidator(_bare_rate)] = None
    tool_timeout_after_apply: Annotated[ToolFaultSpec | None, BeforeValidator(_bare_rate)] = None
    slow_tool: Annotated[SlowToolSpec | None, BeforeValidator(_bare_rate)] = None
    malformed_output: Annotated[MalformedOutputSpec | None, BeforeValidator(_bare_rate)] = None
    timer_skew: Annotated[TimerSkewSpec | None, BeforeValidator(_bare_rate)] = None
    store_write_failure: Annotated[FaultSpec | None, BeforeValidator(_bare_rate)] = None
    second_worker: Annotated[FaultSpec | None, BeforeValidator(_bare_rate)] = None
    forged_approval: Annotated[ForgedApprovalSpec | None, BeforeValidator(_bare_rate)] = None
    wrong_correlation: Annotated[FaultSpec | None, BeforeValidator(_bare_rate)] = None


class PlanSpec(BaseModel):
    """A fault plan file: the faults to inject and whether swarm mode draws a subset per run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    faults: FaultsSpec = Field(default_factory=FaultsSpec)
    swarm: StrictBool = Field(
        False, description="Draw a random non-empty subset of the faults, at lower rates, per run."
    )
    hot: StrictBool = Field(
        False, description="In swarm mode, run a kind that is on hot in half of its runs (at "
                           "least its HOT_RATES rate), as the default plan does.",
    )
    pinned: list[str] = Field(
        default_factory=list,
        description="Kinds of `faults` on in every run, at least at `PINNED_RATE` (a campaign "
                    "pins a kind it left untested in the runs it aims at it).",
    )
    pinned_points: list[str] = Field(
        default_factory=list,
        description="Crash points where a crash strikes at least at `PINNED_RATE` in every run "
                    "(elsewhere at the run's own crash rate): a campaign's runs aimed at a "
                    "crash point it left untested.",
    )


# -- the records the simulator reads ---------------------------------------------------------


@dataclass(frozen=True, slots=True, repr=False)
class FaultRate:
    """One enabled fault kind: its rate and parameters (those of other kinds are ignored).

    `points` left empty means every crash point the machine names; `variants` left empty are
    filled with all of them; `tools` of None means every tool.
    """

    kind: FaultKind
    rate: float
    points: tuple[str, ...] = ()
    tools: tuple[str, ...] | None = None
    variants: tuple[str, ...] = ()
    latency_ms: int = LATENCY_MS_DEFAULT
    max_skew_ms: int = MAX_SKEW_MS_DEFAULT
    redeliver_after_ms: int = REDELIVER_AFTER_MS_DEFAULT
    delay_ms: int = DELAY_MS_DEFAULT

    def __post_init__(self) -> None:
        try:
            kind = FaultKind(self.kind)
        except ValueError as exc:
            raise FaultPlanError(f"faults.{self.kind}", _unknown_kind(str(self.kind))) from exc
        object.__setattr__(self, "kind", kind)
        try:
            object.__setattr__(self, "rate", _rate(self.rate))
        except ValueError as exc:
            raise FaultPlanError(f"faults.{kind}.rate", str(exc)) from exc
        if kind is FaultKind.MALFORMED_OUTPUT and not self.variants:
            object.__setattr__(self, "variants", MALFORMED_VARIANTS)
        elif kind is FaultKind.FORGED_APPROVAL and not self.variants:
            object.__setattr__(self, "variants", FORGED_VARIANTS)

    def with_rate(self, rate: float) -> FaultRate:
        """Gives this fault at another rate (from 0 to 1): `dataclasses.replace`, less its
        look at the fields and the checks the rest already passed (a swarm plan draws one
        per kind for every run)."""
        made = object.__new__(FaultRate)
        for name in _FIELDS:
            object.__setattr__(made, name, getattr(self, name))
        object.__setattr__(made, "rate", _rate(rate))
        return made

    def __repr__(self) -> str:
        """Gives the kind, the rate and the parameters this kind reads (the others are noise)."""
        parameters = "".join(
            f", {name}={getattr(self, name)!r}"
            for name in (_DURATION_FIELDS.get(key, key) for key in SPECS[self.kind].model_fields)
        )
        return f"FaultRate(FaultKind.{self.kind.name}{parameters})"

    def to_dict(self) -> dict[str, Any]:
        """Gives the plain-JSON spec of this fault, durations as `"Nms"` strings."""
        result: dict[str, Any] = {"rate": self.rate}
        for name in SPECS[self.kind].model_fields:
            if name == "rate":
                continue
            if name in _DURATION_FIELDS:
                result[name] = f"{getattr(self, _DURATION_FIELDS[name])}ms"
            else:
                value = getattr(self, name)
                if value:  # None and () both mean all
                    result[name] = list(value)
        return result


_FIELDS = tuple(f.name for f in fields(FaultRate))


@dataclass(frozen=True, slots=True)
class FaultPlan:
    """The faults a run injects: one `FaultRate` per kind present, in catalogue order.

    With `swarm`, call `for_run` once per run to draw the plan that run actually uses.
    """

    rates: tuple[FaultRate, ...] = ()
    swarm: bool = False
    pinned: tuple[FaultKind, ...] = ()  # on in every run, at least at PINNED_RATE
    hot: bool = False  # swarm runs a kind that is on hot in half its runs (HOT_RATES)
    pinned_points: tuple[str, ...] = ()  # a crash strikes there at least at PINNED_RATE
    _by_kind: Mapping[FaultKind, FaultRate] = field(init=False, repr=False, compare=False)
    _kinds: tuple[FaultKind, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        rates = tuple(sorted(self.rates, key=lambda entry: _ORDER[entry.kind]))
        by_kind: dict[FaultKind, FaultRate] = {}
        for entry in rates:
            if entry.kind in by_kind:
                raise FaultPlanError(f"faults.{entry.kind}", "the kind is given more than once")
            by_kind[entry.kind] = entry
        object.__setattr__(self, "rates", rates)
        object.__setattr__(self, "_by_kind", MappingProxyType(by_kind))
        for index, kind in enumerate(self.pinned):
            if kind not in by_kind:
                raise FaultPlanError(f"pinned[{index}]", f"{kind} is pinned but not among the "
                                                         "plan's faults")
        if self.pinned_points and FaultKind.CRASH not in by_kind:
            raise FaultPlanError("pinned_points", "crash points are pinned but crash is not "
                                                  "among the plan's faults")
        object.__setattr__(self, "_kinds", tuple(e.kind for e in rates if e.rate > 0))

    @property
    def kinds(self) -> tuple[FaultKind, ...]:
        """Gives the enabled kinds (rate above 0), in catalogue order."""
        return self._kinds

    def rate(self, kind: FaultKind) -> float:
        """Gives the rate of `kind`, 0.0 when the plan leaves it out."""
        entry = self._by_kind.get(kind)
        return entry.rate if entry is not None else 0.0

    def get(self, kind: FaultKind) -> FaultRate | None:
        """Gives the rate and parameters of `kind`, or None when the plan leaves it out."""
        return self._by_kind.get(kind)

    def for_run(self, rng: random.Random) -> FaultPlan:
        """Gives the plan one run uses: this plan, or in swarm mode a drawn non-swarm plan.

        Swarm mode keeps each enabled kind with probability 1/2 (drawing again until at least
        one is kept) and gives each kept kind a rate drawn uniformly from [rate/4, rate]; with
        `hot`, half the runs keep every kind, and a kept kind runs hot with probability 1/2
        instead, at the higher of its rate and its hot rate (`HOT_RATES`). The draw goes in
        catalogue order, so the same rng state always gives the same plan (and a plan without
        `hot` draws as plans did before it)."""
        if not self.swarm:
            return self if not (self.pinned or self.pinned_points) else self._with_pinned(
                self.rates)
        enabled = [entry for entry in self.rates if entry.rate > 0]
        if not enabled:
            return self._with_pinned(self.rates)
        # a hot plan keeps every kind in half its runs, about half of them in the others
        keep = 1.0 if self.hot and rng.random() < 0.5 else 0.5
        kept: list[FaultRate] = []
        while not kept:
            kept = [entry for entry in enabled if rng.random() < keep]
        drawn = []
        for entry in kept:
            if self.hot and rng.random() < 0.5:
                drawn.append(entry.with_rate(max(entry.rate, HOT_RATES[entry.kind])))
                continue
            low, high = entry.rate / 4, entry.rate
            drawn.append(entry.with_rate(min(max(rng.uniform(low, high), low), high)))
        return self._with_pinned(tuple(drawn))

    def _with_pinned(self, rates: tuple[FaultRate, ...]) -> FaultPlan:
        """Gives the run's plan of `rates`, each pinned kind on at least at `PINNED_RATE` (no
        draw: the run draws as it would unpinned up to the pinned kind's first chance)."""
        if not (self.pinned or self.pinned_points):
            return FaultPlan(rates, swarm=False)
        drawn = {entry.kind: entry for entry in rates}
        for kind in self.pinned:
            entry = drawn.get(kind, self._by_kind[kind])
            drawn[kind] = entry.with_rate(max(entry.rate if kind in drawn else 0.0,
                                              PINNED_RATE))
        if self.pinned_points and FaultKind.CRASH not in drawn:
            # off in this run: a crash strikes at the pinned points alone
            drawn[FaultKind.CRASH] = self._by_kind[FaultKind.CRASH].with_rate(0.0)
        return FaultPlan(tuple(drawn.values()), swarm=False, pinned_points=self.pinned_points)

    def crash_rate(self, point: str) -> float:
        """Gives the rate a crash strikes at `point` in a run of this plan: the crash rate,
        or at least `PINNED_RATE` at a pinned point."""
        rate = self.rate(FaultKind.CRASH)
        return max(rate, PINNED_RATE) if point in self.pinned_points else rate

    def check(self, definition: WorkflowDefinition) -> None:
        """Raises `FaultPlanError` when a tool fault cannot apply to `definition`.

        That is: a tool fault is enabled but the definition declares no tools, or a fault's
        `tools:` names a tool the definition lacks.
        """
        declared = ", ".join(sorted(definition.tools)) or "none"
        for entry in self.rates:
            if entry.kind not in TOOL_FAULTS:
                continue
            location = f"faults.{entry.kind}"
            if entry.rate > 0 and not definition.tools:
                raise FaultPlanError(
                    location,
                    f"{entry.kind} is enabled but definition {definition.name!r} declares no "
                    f"tools; set its rate to 0 or leave it out",
                )
            for index, tool in enumerate(entry.tools or ()):
                if tool not in definition.tools:
                    hint = did_you_mean(tool, definition.tools)
                    raise FaultPlanError(
                        f"{location}.tools[{index}]",
                        f"definition {definition.name!r} has no tool {tool!r}{hint} "
                        f"(its tools: {declared})",
                    )

    def to_dict(self) -> dict[str, Any]:
        """Gives the plain-JSON form that `load_plan` reads back into an equal plan."""
        return {
            "faults": {str(entry.kind): entry.to_dict() for entry in self.rates},
            "swarm": self.swarm,
            # each said only when set: a plan without keeps the bytes it had
            **({"hot": True} if self.hot else {}),
            **({"pinned": [str(kind) for kind in self.pinned]} if self.pinned else {}),
            **({"pinned_points": list(self.pinned_points)} if self.pinned_points else {}),
        }


# -- constructors ----------------------------------------------------------------------------


def load_plan(
    source: str | os.PathLike[str] | Mapping[str, Any],
    *,
    crash_points: Sequence[str] = CRASH_POINTS,
) -> FaultPlan:
    """Gives the plan in a `.yaml`/`.yml`/`.json` file, or in a mapping of the same shape.

    `crash_points` are the points a `crash:` fault may name (and strikes when it names none).
    Raises `FaultPlanError`, with the location and (for YAML) the line, when the plan is wrong.
    """
    if isinstance(source, Mapping):
        data: Any = source
        lines: dict[str, int] = {}
        name = "<plan>"
    elif isinstance(source, str | os.PathLike):
        data, lines, name = _read(Path(source))
    else:
        msg = f"a fault plan is a path or a mapping, not {type(source).__name__}"
        raise TypeError(msg)
    return _compile(validate(data, lines, name), tuple(crash_points), lines, name)


def default_plan(*, swarm: bool = False) -> FaultPlan:
    """Gives a plan with every kind on at its `DEFAULT_RATES` rate (hot in swarm mode: see
    `FaultPlan.for_run`)."""
    return FaultPlan(tuple(FaultRate(kind, DEFAULT_RATES[kind]) for kind in FaultKind), swarm,
                     hot=True)


def no_faults() -> FaultPlan:
    """Gives the plan that injects nothing."""
    return FaultPlan()


# -- reading and converting ------------------------------------------------------------------


def _read(path: Path) -> tuple[Any, dict[str, int], str]:
    name = str(path)
    if path.suffix not in (".yaml", ".yml", ".json"):
        raise FaultPlanError("", "expected a .yaml, .yml or .json file", name)
    try:  # the definitions' bounded reader: size, nesting, digits, NULs are its to refuse
        data, lines = read_document(path, what="a fault plan", bytes_max=DEFINITION_BYTES_MAX)
    except FileNotFoundError as exc:
        raise FaultPlanError("", "file not found", name) from exc
    except OSError as exc:
        raise FaultPlanError("", f"cannot read: {exc.strerror or exc}", name) from exc
    except DefinitionSyntaxError as exc:
        finding = exc.findings[0]
        message = finding.message
        if message.startswith("the file is empty"):
            message = "the file is empty; expected a mapping with `faults:`"
        raise FaultPlanError(finding.location, message, name, finding.line) from exc
    return data, lines, name


def validate(data: Any, lines: Mapping[str, int], name: str) -> PlanSpec:
    if not isinstance(data, Mapping):
        raise FaultPlanError(
            "", f"expected a mapping with `faults:` and `swarm:`, got {type(data).__name__}", name
        )
    try:
        return PlanSpec.model_validate(dict(data))
    except ValidationError as exc:
        problems = [_problem(error, data, lines) for error in exc.errors()]
        # report the one nearest the top of the file; pydantic's order when lines are unknown
        location, message, line = min(
            problems, key=lambda problem: (problem[2] is None, problem[2] or 0)
        )
        raise FaultPlanError(location, message, name, line) from exc


def _unknown_kind(key: str) -> str:
    suggestion = did_you_mean(key, _KIND_NAMES)
    return f"unknown fault kind {key!r}{suggestion}; known kinds: {_KNOWN_KINDS}"


def _problem(
    error: Any, data: Mapping[str, Any], lines: Mapping[str, int]
) -> tuple[str, str, int | None]:
    kind = error["type"]
    location, parents = _data_path(error["loc"], data, kind)
    if kind == "extra_forbidden":
        key = str(error["loc"][-1])
        if parents == ("faults",):
            message = _unknown_kind(key)
        elif len(parents) == 2 and parents[0] == "faults":
            fault = FaultKind(parents[1])
            known = list(SPECS[fault].model_fields)
            message = (f"unknown parameter {key!r} for {fault}{did_you_mean(key, known)}; "
                       f"parameters: {', '.join(known)}")
        else:
            known = list(PlanSpec.model_fields)
            message = f"unknown key {key!r}{did_you_mean(key, known)}; keys: {', '.join(known)}"
    elif kind == "missing":
        message = f"missing required key {str(error['loc'][-1])!r}"
    elif kind == "value_error":  # our validators quote the value themselves
        message = error["msg"].removeprefix("Value error, ")
    else:
        message = f"{error['msg']} (got {_short(error.get('input'))})"
    return location, message, _line(lines, location)


def _data_path(loc: tuple[Any, ...], data: Any, kind: str) -> tuple[str, tuple[str, ...]]:
    """Gives the error's location in the user's data (a bare rate has no `.rate` in it), and the
    keys of the mapping holding the error's last part."""
    path = ""
    parents: list[str] = []
    node = data
    for position, part in enumerate(loc):
        last = position == len(loc) - 1
        if isinstance(node, Mapping) and part in node:
            if not last:
                parents.append(str(part))
            node = node[part]
            path = f"{path}.{part}" if path else str(part)
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
            path = f"{path}[{part}]"
        elif last and kind in ("missing", "extra_forbidden"):
            path = f"{path}.{part}" if path else str(part)
        else:
            break
    return path, tuple(parents)


def _line(lines: Mapping[str, int], location: str) -> int | None:
    """Gives the line of `location`, or of its nearest ancestor the file has a line for."""
    while location:
        if location in lines:
            return lines[location]
        cut = max(location.rfind("."), location.rfind("["))
        location = location[:cut] if cut > 0 else ""
    return None


def _compile(
    spec: PlanSpec, crash_points: tuple[str, ...], lines: Mapping[str, int], name: str
) -> FaultPlan:
    rates = []
    for kind in FaultKind:
        fault: FaultSpec | None = getattr(spec.faults, kind.value)
        if fault is None:
            continue
        values: dict[str, Any] = {}
        for parameter in type(fault).model_fields:
            value = getattr(fault, parameter)
            location = f"faults.{kind}.{parameter}"
            if parameter == "points":
                values["points"] = _names(value, location, crash_points, "crash point",
                                          lines, name)
            elif parameter == "variants":
                known = MALFORMED_VARIANTS if kind is FaultKind.MALFORMED_OUTPUT else (
                    FORGED_VARIANTS)
                values["variants"] = _names(value, location, known, "variant", lines, name)
            elif parameter == "tools":
                values["tools"] = _names(value, location, None, "tool", lines, name) or None
            elif parameter in _DURATION_FIELDS:
                values[_DURATION_FIELDS[parameter]] = value
        rates.append(FaultRate(kind, fault.rate, **values))
    pinned = []
    for index, kind_name in enumerate(spec.pinned):
        if kind_name not in _KIND_NAMES:
            raise FaultPlanError(f"pinned[{index}]", _unknown_kind(kind_name), name,
                                 lines.get(f"pinned.{index}"))
        pinned.append(FaultKind(kind_name))
    return FaultPlan(tuple(rates), spec.swarm, tuple(pinned), spec.hot,
                     tuple(spec.pinned_points))


def _names(
    values: list[str] | None,
    location: str,
    known: Sequence[str] | None,
    what: str,
    lines: Mapping[str, int],
    name: str,
) -> tuple[str, ...]:
    """Gives `values` as a tuple (empty when left out), refusing an empty list, duplicates and,
    when `known` is given, names not in it."""
    if values is None:
        return ()
    if not values:
        parameter = location.rsplit(".", 1)[-1]
        raise FaultPlanError(
            location, f"expected at least one {what}; leave out `{parameter}:` for all",
            name, _line(lines, location),
        )
    first: dict[str, int] = {}
    for index, value in enumerate(values):
        at = f"{location}[{index}]"
        if known is not None and value not in known:
            raise FaultPlanError(
                at, f"unknown {what} {value!r}{did_you_mean(value, known)}; "
                f"known {what}s: {', '.join(known)}", name, _line(lines, at),
            )
        if value in first:
            raise FaultPlanError(
                at, f"duplicate {what} {value!r} (first at [{first[value]}])",
                name, _line(lines, at),
            )
        first[value] = index
    return tuple(values)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
