"""The harness: the deterministic simulator, the tool world, the machine-under-test protocol,
histories, invariant checkers, and the engines that explore a workflow: native seeded fuzzing
(`fuzz`, with shrinking and replay files), exhaustive bounded search (`explore`), and
Hypothesis's stateful testing (`harness.stateful`); `harness.strategies` draws definitions.

These names, `harness.adapters`, `harness.stateful` and `harness.strategies` are the public API.
The code lives in one subpackage per concern, each importing only those before it: `sim` (the
simulated world), `checks` (invariants, coverage, metrics), `adapters`, `report`, `engines`
(fuzz, explore, the Hypothesis machine), then `bench`, the plugin and `cli` on top. (Not
`check` and `explore`: those are the functions `harness.check` and `harness.explore`.)
"""

from harness.checks.adequacy import Adequacy, Gap
from harness.checks.coverage import Coverage, coverage_of
from harness.checks.invariants import INVARIANTS, Invariant, StepView, Violation, check, invariant
from harness.checks.targets import target
from harness.engines.exhaustive import ExploreOptions, ExploreReport, explore
from harness.engines.fuzz import FuzzFailure, FuzzOptions, FuzzReport, fuzz
from harness.engines.replay import ReplayError, ReplayOutcome, replay, write_replay
from harness.engines.shrink import Counterexample, shrink
from harness.errors import HarnessError
from harness.report.trace import describe_steps
from harness.sim.choices import Choice, Choices, RecordingChoices, ScriptedChoices
from harness.sim.history import (
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
from harness.sim.identity import definition_digest
from harness.sim.machine import (
    ApprovalWait,
    AsyncMachineUnderTest,
    Call,
    MachineFactory,
    MachineUnderTest,
    Observation,
    Probe,
    ReferenceMachine,
)
from harness.sim.simulator import SimOptions, SimulationResult, Simulator, simulate
from harness.sim.world import EffectLedger, LedgerEntry, ToolWorld

__all__ = [
    "INVARIANTS",
    "Adequacy",
    "Applied",
    "ApprovalWait",
    "AsyncMachineUnderTest",
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
    "Gap",
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
    "target",
    "write_replay",
]
