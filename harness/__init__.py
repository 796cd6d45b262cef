"""The harness: the deterministic simulator, the tool world, the machine-under-test protocol
and histories (checkers, exploration, the pytest plugin and reports arrive with later issues).
"""

from harness._history import (
    Applied,
    Committed,
    Crashed,
    Decided,
    Delivered,
    Dispatched,
    FaultInjected,
    Finished,
    HistoryRecord,
    MachineFailed,
    Recovered,
    ResultRecorded,
    RunStarted,
    Started,
    TimerFired,
)
from harness._machine import (
    ApprovalWait,
    Call,
    MachineFactory,
    MachineUnderTest,
    Observation,
    Probe,
    ReferenceMachine,
)
from harness._simulator import SimOptions, SimulationResult, Simulator, simulate
from harness._world import EffectLedger, LedgerEntry, ToolWorld
from harness.errors import HarnessError

__all__ = [
    "Applied",
    "ApprovalWait",
    "Call",
    "Committed",
    "Crashed",
    "Decided",
    "Delivered",
    "Dispatched",
    "EffectLedger",
    "FaultInjected",
    "Finished",
    "HarnessError",
    "HistoryRecord",
    "LedgerEntry",
    "MachineFactory",
    "MachineFailed",
    "MachineUnderTest",
    "Observation",
    "Probe",
    "Recovered",
    "ReferenceMachine",
    "ResultRecorded",
    "RunStarted",
    "SimOptions",
    "SimulationResult",
    "Simulator",
    "Started",
    "TimerFired",
    "ToolWorld",
    "simulate",
]
