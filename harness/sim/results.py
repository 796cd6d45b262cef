"""What a simulated run gives back: its history, ledger and last observations
(`SimulationResult`), and where it could have injected faults (`Chances`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from fault_injection import FaultPlan
from harness.sim.history import FaultInjected, HistoryRecord, MachineFailed, counts, write_jsonl
from harness.sim.machine import Observation
from harness.sim.world import LedgerEntry

__all__ = ["Chances", "SimulationResult"]


class Chances(NamedTuple):
    """Where a run could have injected a fault, counted while faults were on (the safety
    phase), whether or not its plan had that kind on: `passed` is how often the machine passed
    each of its crash points ("between_steps" for a machine that names none), `chances` how
    often each fault kind had a place to strike (a send, a tool call, a probe, a timer due, an
    approval decided), `unoffered` the kinds the machine said it cannot take (no second
    worker)."""

    passed: Mapping[str, int]
    chances: Mapping[str, int]
    unoffered: frozenset[str] = frozenset()
    points: tuple[str, ...] = ()  # the crash points the run's machine offered


@dataclass(frozen=True, slots=True)
class SimulationResult:
    """What a run did: its history, the effect ledger, how it ended, and what was seen last.

    `status` is `final` (every execution ended), `quiescent` (nothing could happen),
    `step_bound` (steps ran out) or `machine_failed`."""

    seed: int
    status: str
    steps: int
    at: int
    plan: FaultPlan
    history: tuple[HistoryRecord, ...]
    ledger: tuple[LedgerEntry, ...]
    final: Mapping[str, Observation]
    failure: MachineFailed | None = None
    traceback: str = ""
    chances: Chances = field(default_factory=lambda: Chances({}, {}))

    @property
    def ok(self) -> bool:
        """Tells whether the machine held up (it did not fail; invariants are checked apart)."""
        return self.failure is None

    def summary(self) -> dict[str, Any]:
        """Gives counts of records by kind, faults injected by kind, and the final states."""
        faults = Counter(str(r.fault) for r in self.history if isinstance(r, FaultInjected))
        return {
            "seed": self.seed,
            "status": self.status,
            "steps": self.steps,
            "virtual_ms": self.at,
            "records": counts(self.history),
            "faults": dict(sorted(faults.items())),
            "effects_applied": len(self.ledger),
            "final": {eid: {"state": o.state, "status": o.status, "outcome": o.outcome}
                      for eid, o in self.final.items()},
            "failure": None if self.failure is None else self.failure._asdict(),
        }

    def write_history(self, path: str | Path) -> None:
        """Writes the history as JSON lines (all or nothing)."""
        write_jsonl(self.history, path)
