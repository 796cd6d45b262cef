"""The fault catalogue (data), fault plans (seeded schedules, swarm mode) and the injectors that
raise a plan's faults inside a machine (crashes, store write failures)."""

from fault_injection._catalogue import (
    DESCRIPTIONS,
    FORGED_VARIANTS,
    MALFORMED_VARIANTS,
    TOOL_FAULTS,
    FaultKind,
)
from fault_injection._injectors import STORE_WRITE, ProbedStore, SimulatedCrash, StoreWriteError
from fault_injection._plan import FaultPlan, FaultRate, default_plan, load_plan, no_faults
from fault_injection.errors import FaultInjectionError, FaultPlanError

__all__ = [
    "DESCRIPTIONS",
    "FORGED_VARIANTS",
    "MALFORMED_VARIANTS",
    "STORE_WRITE",
    "TOOL_FAULTS",
    "FaultInjectionError",
    "FaultKind",
    "FaultPlan",
    "FaultPlanError",
    "FaultRate",
    "ProbedStore",
    "SimulatedCrash",
    "StoreWriteError",
    "default_plan",
    "load_plan",
    "no_faults",
]
