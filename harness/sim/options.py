"""What a simulated run is made from: its options (`SimOptions`), the bounds they take, and the
fault plan it runs under (the default one a definition can take, `plan_for`; a plan's crash
points checked against the machine's, `check_points`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from fault_injection import (
    TOOL_FAULTS,
    FaultKind,
    FaultPlan,
    FaultPlanError,
    default_plan,
    load_plan,
)
from harness.errors import HarnessError, short_repr
from reference_machine import CRASH_POINTS, WorkflowDefinition
from reference_machine.findings import did_you_mean

__all__ = [
    "BETWEEN",
    "EXECUTIONS_MAX",
    "FROZEN_EPOCH",
    "SEED_LIMIT",
    "STEP_TIMEOUT_MAX",
    "SimOptions",
    "check_points",
    "plan_for",
]

#: The wall time virtual time 0 stands for, with `SimOptions(freeze_clock=True)`.
FROZEN_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
#: A seed is a whole number from 0 below this (the generator takes 64 bits).
SEED_LIMIT = 2**64
#: The most executions a run takes side by side: far past any concurrency a run can show, short
#: of what would exhaust memory before the first step.
EXECUTIONS_MAX = 1_000
BETWEEN = "between_steps"  # the crash point of a machine that names none

_STEP_TIMEOUT = 10.0
STEP_TIMEOUT_MAX = 1_000_000  # eleven days; past about 1e10 the system's timer overflows


@dataclass(frozen=True, slots=True)
class SimOptions:
    """How one simulated run is made. `steps_max` bounds the safety phase (faults on), then
    `liveness_steps` more run with every fault healed; `ops_max` bounds one step (tool calls
    plus probe points: a machine past it is reported as hung)."""

    seed: int = 0
    executions: int = 3
    steps_max: int = 1_000
    plan: FaultPlan | None = None  # None: every fault the definition can take, default rates
    invalid_rate: float = 0.1
    grant_rate: float = 0.7
    ops_max: int = 10_000
    recoveries_max: int = 20
    context: Mapping[str, Any] = field(default_factory=dict)
    honour_keys: Mapping[str, bool] = field(default_factory=dict)
    freeze_clock: bool = False  # wall time follows the machine's clock (freezegun)
    liveness_steps: int = 200  # after the safety phase, steps with every fault healed
    replay_check: bool = True  # at the end, have a machine that can replay its log do so
    step_timeout_s: float = _STEP_TIMEOUT  # wall time a step may take, else `hung` (0: none)

    def __post_init__(self) -> None:
        for name, low in (("seed", 0), ("executions", 1), ("steps_max", 0), ("ops_max", 1),
                          ("recoveries_max", 1), ("liveness_steps", 0)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise HarnessError(f"options.{name}: expected a whole number of at least "
                                   f"{low}, got {short_repr(value)}")
        for name, high in (("seed", SEED_LIMIT - 1), ("executions", EXECUTIONS_MAX)):
            if getattr(self, name) > high:
                raise HarnessError(f"options.{name}: expected at most {high:,}, got "
                                   f"{short_repr(getattr(self, name))}")
        for name in ("invalid_rate", "grant_rate"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool) or not (
                    0.0 <= value <= 1.0):
                raise HarnessError(f"options.{name}: expected a rate from 0 to 1, got "
                                   f"{value!r}")
        timeout = self.step_timeout_s
        if not isinstance(timeout, int | float) or isinstance(timeout, bool) or not (
                0 <= timeout <= STEP_TIMEOUT_MAX):
            raise HarnessError(f"options.step_timeout_s: expected a number of seconds up to "
                               f"{STEP_TIMEOUT_MAX:,}, 0 for no bound, got {timeout!r}")
        for name in ("freeze_clock", "replay_check"):
            if not isinstance(getattr(self, name), bool):
                raise HarnessError(f"options.{name}: expected true or false, got "
                                   f"{getattr(self, name)!r}")
        try:  # the context travels in the history and the start event: JSON data only
            json.dumps(dict(self.context), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise HarnessError(f"options.context: expected JSON data: {exc}") from exc

    def to_dict(self) -> dict[str, Any]:
        """Gives the options as plain JSON data, the plan included (`from_dict` reads it)."""
        return {"seed": self.seed, "executions": self.executions, "steps_max": self.steps_max,
                "invalid_rate": self.invalid_rate, "grant_rate": self.grant_rate,
                "ops_max": self.ops_max, "recoveries_max": self.recoveries_max,
                "context": dict(self.context), "honour_keys": dict(sorted(
                    self.honour_keys.items())), "freeze_clock": self.freeze_clock,
                "liveness_steps": self.liveness_steps, "replay_check": self.replay_check,
                "plan": None if self.plan is None else self.plan.to_dict(),
                # a bound of wall time changes no history unless one is hit: said when not
                # the default only, so that histories written before it stay the same bytes
                **({} if self.step_timeout_s == _STEP_TIMEOUT else {
                    "step_timeout_s": self.step_timeout_s})}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SimOptions:
        """Gives the options `to_dict` gave (a replay file's); raises `HarnessError` naming the
        option that is wrong."""
        if not isinstance(data, Mapping):
            raise HarnessError(f"options: expected a mapping, got {type(data).__name__}")
        known = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(data) - known)
        if unknown:
            raise HarnessError(f"options.{unknown[0]}: not an option"
                               f"{did_you_mean(unknown[0], sorted(known))}")
        values = dict(data)
        plan = values.pop("plan", None)
        if plan is not None:
            try:
                # the crash points a machine other than the reference names are checked
                # against that machine when a run builds it (check_points)
                values["plan"] = load_plan(plan, crash_points=_points_named(plan))
            except FaultPlanError as exc:
                raise HarnessError(f"options.plan: {exc}") from exc
        try:
            return cls(**values)
        except TypeError as exc:
            raise HarnessError(f"options: {exc}") from exc


def check_points(plan: FaultPlan, named: Sequence[str]) -> None:
    """Refuses a plan whose crash points (or pinned points) the machine does not name."""
    crash = plan.get(FaultKind.CRASH)
    named = tuple(dict.fromkeys(named))
    where = [(f"faults.crash.points[{index}]", point)
             for index, point in enumerate(crash.points if crash is not None else ())]
    where += [(f"pinned_points[{index}]", point) for index, point in
              enumerate(plan.pinned_points) if named or point != BETWEEN]
    for location, point in where:
        if point not in named:
            known = ", ".join(named) or "none (it is crashed between steps)"
            raise FaultPlanError(location, f"the machine under test has no crash point "
                                           f"{point!r}; its points: {known}")


def plan_for(definition: WorkflowDefinition, *, swarm: bool = False) -> FaultPlan:
    """Gives the default plan less what the definition cannot take (tool faults without
    tools, wrong correlations without an event that declares `correlate:`, forged approvals
    without an approval)."""
    plan = default_plan(swarm=swarm)
    tools = bool(definition.tools)
    correlates = any(event.correlate for event in definition.events.values())
    approvals = any(state.approval is not None for state in definition.states.values())
    if tools and correlates and approvals:
        return plan
    return replace(plan, rates=tuple(
        r for r in plan.rates if (tools or r.kind not in TOOL_FAULTS)
        and (correlates or r.kind is not FaultKind.WRONG_CORRELATION)
        and (approvals or r.kind is not FaultKind.FORGED_APPROVAL)))


def _points_named(plan: Any) -> tuple[str, ...]:
    """Gives the reference's crash points and those a recorded plan's crash fault names."""
    faults = plan.get("faults") if isinstance(plan, Mapping) else None
    crash = faults.get("crash") if isinstance(faults, Mapping) else None  # load_plan says why
    named = crash.get("points") if isinstance(crash, Mapping) else None
    extra = [p for p in named if isinstance(p, str)] if isinstance(named, list) else []
    return tuple(dict.fromkeys([*CRASH_POINTS, *extra]))
