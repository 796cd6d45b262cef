"""What the CLI and the pytest plugin share: reading a fault selection, building the plan a
target runs under, and running a target through an engine into a report section.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from fault_injection import TOOL_FAULTS, FaultKind, FaultPlan, no_faults
from harness.adapters.targets import Target
from harness.engines.exhaustive import ExploreOptions, ExploreReport, explore
from harness.engines.fuzz import FuzzOptions, FuzzReport, fuzz
from harness.engines.replay import write_replay
from harness.engines.shrink import Counterexample
from harness.errors import HarnessError
from harness.report.document import target_section, trace_heading
from harness.sim.simulator import plan_for

__all__ = ["FAULT_NAMES", "explore_target", "fuzz_target", "parse_faults", "plan_of",
           "select_faults"]

FAULT_NAMES = tuple(kind.value for kind in FaultKind)


def parse_faults(text: str) -> tuple[FaultKind, ...] | None:
    """Reads a fault selection: `all` (None: every kind the target can take), `none`, kinds
    separated by commas, or `all` less some kinds (`all,-second_worker`; a selection that
    starts with `-kind` starts from `all`), in catalogue order; raises `HarnessError` naming
    what it cannot read."""
    text = text.strip()
    if text == "all":
        return None
    if text == "none":
        return ()
    parts = [part.strip() for part in text.split(",")]
    subtracted = [part[1:].strip() for part in parts if part.startswith("-")]
    chosen = [part for part in parts if not part.startswith("-")]
    for name in (*chosen, *subtracted):
        if name not in FAULT_NAMES and not (name in ("all", "none") and subtracted):
            raise HarnessError(f"unknown fault kind {name!r}; expected all, none, a comma-"
                               f"separated list, or all less some kinds (all,-second_worker) "
                               f"of: {', '.join(FAULT_NAMES)}")
    if subtracted:
        if chosen not in ([], ["all"]):
            raise HarnessError(f"{text!r}: kinds are taken away from all only "
                               f"(all,-{subtracted[0]}), not from a list")
        return tuple(kind for kind in FaultKind if kind.value not in subtracted)
    kinds: list[FaultKind] = []
    for name in chosen:
        if FaultKind(name) not in kinds:
            kinds.append(FaultKind(name))
    return tuple(kinds)


def plan_of(target: Target, faults: tuple[FaultKind, ...] | None = None,
            plan: FaultPlan | None = None) -> FaultPlan:
    """Gives the plan a target runs under: `plan` (or the default plan for its definition),
    keeping only the kinds `faults` selects; a tool fault selected for a definition without
    tools is left out."""
    base = plan if plan is not None else plan_for(target.definition)
    if faults and not target.definition.tools:
        faults = tuple(kind for kind in faults if kind not in TOOL_FAULTS) or ()
    return select_faults(base, faults)


def select_faults(plan: FaultPlan, faults: tuple[FaultKind, ...] | None) -> FaultPlan:
    """Gives `plan` with only the kinds `faults` selects (None: all of them, (): none)."""
    if faults == ():
        return no_faults()
    if faults is None:
        return plan
    return replace(plan, rates=tuple(rate for rate in plan.rates if rate.kind in faults))


def fuzz_target(target: Target, options: FuzzOptions,
                progress: Callable[[int, int, int], None] | None = None
                ) -> tuple[FuzzReport, dict[str, Any]]:
    """Fuzzes one target; gives the engine's report and the target's report section."""
    report = fuzz(target.definition, options, machine=target.machine, progress=progress)
    told = {"vacuous": f"vacuous: {report.vacuous}",
            "untested": f"untested: {report.adequacy.summary}",
            "nondeterministic": "nondeterministic: the same seed gave two histories"}
    summary = {**report.summary(), "verdict": told.get(report.verdict, "")}
    section = target_section(
        target.name, "fuzz", target.definition, target.machine_name, summary, report.coverage,
        [(failure.counterexample, failure.replay_file) for failure in report.failures],
        {"runs": options.runs, "seed": options.seed, "time_budget_s": options.time_budget_s,
         "swarm": options.swarm, "strategy": options.strategy, "processes": options.processes,
         "executions": options.sim.executions, "steps_max": options.sim.steps_max,
         "faults": sorted(str(kind) for kind in report.plan.kinds),
         "coverage_min": options.coverage_min})
    return report, section


def explore_target(target: Target, options: ExploreOptions,
                   replay_dir: str | os.PathLike[str] | None = "reports/replays",
                   progress: Callable[[int, int], None] | None = None
                   ) -> tuple[ExploreReport, dict[str, Any]]:
    """Explores one target exhaustively to the options' bound; gives the engine's report and
    the target's report section (a counterexample gets a replay file)."""
    report = explore(target.definition, options, machine=target.machine, progress=progress)
    counterexample = report.counterexample
    replay_file: Path | None = None
    if counterexample is not None and replay_dir is not None:
        replay_file = write_replay(counterexample, replay_dir)
    summary: dict[str, Any] = {
        "held": report.held, "vacuous": report.vacuous, "runs": report.runs, "steps": 0,
        "states": report.states, "elapsed_s": round(report.elapsed_s, 3),
        "steps_per_second": round(report.states_per_second), "verdict": report.summary()}
    told: list[tuple[Counterexample | None, Path | None]] = (
        [(counterexample, replay_file)] if counterexample is not None else [])
    if report.died and report.violation is not None:  # no schedule: told by its violation
        summary["failures"] = [{"rule": "machine_ok",
                                "violations": [report.violation.to_dict()]}]
        told = [(None, None)]
    plan = options.plan if options.plan is not None else plan_for(target.definition)
    section = target_section(
        target.name, "explore", target.definition, target.machine_name, summary, None, told,
        {"depth": options.depth, "faults_max": options.faults_max,
         "executions": options.executions, "states_max": options.states_max,
         "faults": sorted(str(kind) for kind in plan.kinds), "complete": report.complete})
    return report, section


def describe_failure(section: dict[str, Any]) -> Sequence[str]:
    """Gives a failing target's lines for a terminal: the violation, the shrunk trace as
    numbered steps, and the replay command."""
    lines: list[str] = []
    if section.get("vacuous") and not section["failures"]:
        lines.append(f"vacuous: {section['vacuous']}")
    elif section.get("untested") and not section["failures"]:
        for gap in section["untested"]:
            lines += [f"untested: {gap['what']}", f"  how: {gap['how']}"]
    for failure in section["failures"]:
        lines.append(f"violated {failure.get('message') or failure.get('rule')}")
        if failure.get("trace"):
            lines.append(f"{trace_heading(section, failure)}:")
            lines += [f"  {line}" for line in failure["trace"]]
        if failure.get("replay_command"):
            lines.append(f"replay: {failure['replay_command']}")
    return lines
