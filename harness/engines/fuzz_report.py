"""What a fuzz campaign found: `FuzzReport` (runs, failures, coverage, what the runs were
worth, the verdict) and each `FuzzFailure` (a failing seed, shrunk, with its replay file).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from fault_injection import FaultPlan
from harness.checks.adequacy import Adequacy
from harness.checks.coverage import Coverage, correlation_blind_spot
from harness.checks.determinism import RULE as DETERMINISTIC
from harness.checks.invariants import Violation
from harness.checks.metrics import Metrics
from harness.engines.shrink import Counterexample
from reference_machine import WorkflowDefinition
from reference_machine.findings import ABOUT_THE_SOURCE

__all__ = ["FuzzFailure", "FuzzReport", "Verdict"]


class Verdict(StrEnum):
    """A campaign's verdict (`FuzzReport.verdict`), written to reports as its value."""

    HELD = "held"
    VIOLATED = "violated"
    VACUOUS = "vacuous"
    UNTESTED = "untested"
    NONDETERMINISTIC = "nondeterministic"


@dataclass(frozen=True, slots=True)
class FuzzFailure:
    """A failing seed: what it broke, and (when shrunk) its minimal counterexample."""

    seed: int
    violations: tuple[Violation, ...]
    counterexample: Counterexample | None = None
    replay_file: Path | None = None
    mutant: str = ""  # the mutation whose run it was ("": the seed's own run, which replays it)

    @property
    def rule(self) -> str:
        """Gives the rule of the first violation (the one shrunk)."""
        return self.violations[0].rule


@dataclass(frozen=True, slots=True)
class FuzzReport:
    """What a campaign did: runs, steps and time; failures; coverage; faults injected."""

    definition: WorkflowDefinition
    machine: str
    plan: FaultPlan
    runs: int
    steps: int
    elapsed_s: float
    failures: tuple[FuzzFailure, ...]
    coverage: Coverage
    faults: Mapping[str, int]
    invariants: tuple[str, ...]
    crash_points: tuple[str, ...] = ()
    metrics: Metrics = field(default_factory=Metrics)
    vacuous: str = ""  # why the campaign tested nothing worth a verdict ("" when it did)
    strategy: str = "swarm"
    growth: tuple[tuple[int, int], ...] = ()  # (runs, behaviours seen) after each round
    targets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    guided: Mapping[str, Any] = field(default_factory=dict)  # the corpus and its mutations
    executor: Mapping[str, Any] = field(default_factory=dict)  # a cluster's workers, lost ones
    adequacy: Adequacy = field(default_factory=Adequacy)  # what the runs exercised, the gaps
    aimed: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # gap -> its runs

    @property
    def held(self) -> bool:
        """Tells whether every invariant held in every run of a campaign that exercised the
        machine, and exercised what it claims (a vacuous or untested campaign does not
        hold)."""
        return not self.failures and not self.vacuous and not self.adequacy.gaps

    @property
    def verdict(self) -> Verdict:
        """Gives the campaign's verdict: `nondeterministic` (a seed gave two histories),
        `violated`, `vacuous`, `untested` (a crash point, a fault kind or the moves into a
        state left untested: `adequacy.gaps`) or `held`."""
        if any(failure.rule == DETERMINISTIC for failure in self.failures):
            return Verdict.NONDETERMINISTIC
        if self.failures:
            return Verdict.VIOLATED
        return (Verdict.VACUOUS if self.vacuous else Verdict.UNTESTED if self.adequacy.gaps
                else Verdict.HELD)

    @property
    def checked(self) -> tuple[str, ...]:
        """Gives the invariants that judged something in the campaign's runs (those that
        could check nothing, or found nothing to judge, are left out)."""
        return self.adequacy.checked

    @property
    def notes(self) -> tuple[str, ...]:
        """Gives what a verdict should be read with: where the runs were blind (events sent
        with values that could not match, see `correlation_blind_spot`), the importer's
        findings about the source file (`ABOUT_THE_SOURCE`), the invariants that
        could check nothing here, the fault kinds never tried."""
        blind = correlation_blind_spot(self.definition, self.coverage)
        source = tuple(f"about the source: {finding.render()}"
                       for finding in self.definition.warnings
                       if finding.code in ABOUT_THE_SOURCE)
        return ((blind,) if blind else ()) + source + self.adequacy.notes()

    @property
    def steps_per_second(self) -> float:
        """Gives simulated steps per second of wall time (checking included)."""
        return self.steps / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def summary(self) -> dict[str, Any]:
        """Gives the report as plain JSON data."""
        return {
            "definition": self.definition.name, "version": self.definition.version,
            "machine": self.machine, "held": self.held, "verdict": self.verdict.value,
            "vacuous": self.vacuous,
            # what makes the verdict `untested` (the gaps of a campaign that broke a rule, or
            # exercised nothing, are in `adequacy` only)
            "untested": [gap.to_dict() for gap in self.adequacy.gaps]
            if self.verdict is Verdict.UNTESTED else [],
            "notes": list(self.notes), "runs": self.runs,
            "steps": self.steps, "elapsed_s": round(self.elapsed_s, 3),
            "steps_per_second": round(self.steps_per_second),
            "invariants": list(self.invariants), "checked": list(self.checked),
            "adequacy": {**self.adequacy.report(), "aimed": dict(self.aimed)},
            "faults": dict(sorted(self.faults.items())),
            "coverage": self.coverage.report(self.definition, self.plan, self.crash_points),
            "metrics": self.metrics.report(),
            "strategy": self.strategy,
            "growth": [list(point) for point in self.growth],
            "targets": {name: dict(best) for name, best in sorted(self.targets.items())},
            "guided": dict(self.guided),
            **({"executor": dict(self.executor)} if self.executor else {}),
            "failures": [{
                "seed": f.seed, "rule": f.rule, "mutant": f.mutant,
                "violations": [v.to_dict() for v in f.violations],
                "shrunk_steps": f.counterexample.steps if f.counterexample else None,
                "trace": f.counterexample.trace() if f.counterexample else [],
                "replay_file": str(f.replay_file) if f.replay_file else None,
            } for f in self.failures],
        }
