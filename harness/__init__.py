"""The harness: the deterministic simulator, the tool world, the machine-under-test protocol,
histories, invariant checkers, and the engines that explore a workflow: native seeded fuzzing
(`fuzz`, with shrinking and replay files), exhaustive bounded search (`explore`), and
Hypothesis's stateful testing (`harness.stateful`); `harness.strategies` draws definitions.
"""

from harness._checkers import INVARIANTS, Invariant, StepView, Violation, check, invariant
from harness._choices import Choice, Choices, RecordingChoices, ScriptedChoices
from harness._coverage import Coverage, coverage_of
from harness._explore import ExploreOptions, ExploreReport, explore
from harness._fuzz import FuzzFailure, FuzzOptions, FuzzReport, fuzz
from harness._history import (
    Applied,
    Commanded,
    Committed,
    Crashed,
    Decided,
    Delivered,
    Dispatched,
    FaultInjected,
    Finished,
    Healed,
    HistoryRecord,
    MachineFailed,
    Observed,
    Recovered,
    Replayed,
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
from harness._replay import ReplayError, ReplayOutcome, definition_digest, replay, write_replay
from harness._shrink import Counterexample, shrink
from harness._simulator import SimOptions, SimulationResult, Simulator, simulate
from harness._trace import describe_steps
from harness._world import EffectLedger, LedgerEntry, ToolWorld
from harness.errors import HarnessError

__all__ = [
    "INVARIANTS",
    "Applied",
    "ApprovalWait",
    "Call",
    "Choice",
    "Choices",
    "Commanded",
    "Committed",
    "Counterexample",
    "Coverage",
    "Crashed",
    "Decided",
    "Delivered",
    "Dispatched",
    "EffectLedger",
    "ExploreOptions",
    "ExploreReport",
    "FaultInjected",
    "Finished",
    "FuzzFailure",
    "FuzzOptions",
    "FuzzReport",
    "HarnessError",
    "Healed",
    "HistoryRecord",
    "Invariant",
    "LedgerEntry",
    "MachineFactory",
    "MachineFailed",
    "MachineUnderTest",
    "Observation",
    "Observed",
    "Probe",
    "RecordingChoices",
    "Recovered",
    "ReferenceMachine",
    "ReplayError",
    "ReplayOutcome",
    "Replayed",
    "ResultRecorded",
    "RunStarted",
    "ScriptedChoices",
    "SimOptions",
    "SimulationResult",
    "Simulator",
    "Started",
    "StepView",
    "TimerFired",
    "ToolWorld",
    "Violation",
    "check",
    "coverage_of",
    "definition_digest",
    "describe_steps",
    "explore",
    "fuzz",
    "invariant",
    "replay",
    "shrink",
    "simulate",
    "write_replay",
]
