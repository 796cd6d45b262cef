"""The bug hunt: how many runs, and how long, each strategy takes to find each planted bug.

For each bug (a machine with one planted bug and the invariant it breaks, or a naive scenario
whose definition has one) and each strategy, a campaign from each of `seeds` base seeds runs
until its first failure (no shrinking, nothing written); the row gives the median runs and the
median seconds to it. Runs, not seconds, are the figure that holds on a noisy machine; the
seconds show what a run costs each strategy. `fsmharness bench --only hunt` runs it, and
`python -m harness.bench.hunt` prints it as a Markdown table.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fault_injection import FaultPlan
from harness.bench.engines import native_fuzz
from harness.bench.timing import Contender, Group
from harness.engines.fuzz import FuzzOptions, fuzz
from harness.errors import HarnessError
from harness.sim.machine import MachineFactory, ReferenceMachine
from harness.sim.simulator import SimOptions, plan_for
from reference_machine import WorkflowDefinition, load_definition

__all__ = ["Bug", "Hunted", "bugs", "hunt", "hunt_group", "table"]

ROOT = Path(__file__).resolve().parents[2]
NAIVE = ROOT / "scenarios" / "naive"
#: the naive scenarios and what each breaks (the calendar's needs its world's invariant)
NAIVE_RULES = {"code_agent_pr_twice": "no_duplicate_effect",
               "deploy_double_rollback": "no_duplicate_effect",
               "triage_credit_twice": "no_duplicate_effect",
               "batch_refile_on_changes": "no_duplicate_effect"}
SEED_STRIDE = 100_003
#: The crude driver's rate: every fault kind, at every chance, in every run (`crude_plan`).
CRUDE_RATE = 0.1
#: The strategies a hunt knows: the fuzzer's, and `crude`, a baseline a user would write in an
#: hour (every fault kind on at `CRUDE_RATE` in every run, no swarm, no guidance).
HUNTERS = ("swarm", "guided", "mixed", "crude")


def crude_plan(definition: WorkflowDefinition) -> FaultPlan:
    """Gives the crude driver's plan: every fault kind the definition can take, at
    `CRUDE_RATE`, in every run."""
    plan = plan_for(definition)
    return replace(plan, rates=tuple(rate.with_rate(CRUDE_RATE) for rate in plan.rates),
                   swarm=False, hot=False)


def _options(bug: Bug, strategy: str, seed: int, runs_max: int) -> FuzzOptions:
    """Gives the campaign a hunt runs: the strategy's defaults, or the crude driver's."""
    options = FuzzOptions(runs=runs_max, seed=seed, shrink=False, replay_dir=None,
                          strategy="swarm" if strategy == "crude" else strategy, isolate=False)
    if strategy != "crude":
        return options
    return replace(options, swarm=False, sim=SimOptions(plan=crude_plan(bug.definition)))


@dataclass(frozen=True, slots=True)
class Bug:
    """A planted bug: the definition, the machine, and the rule a campaign must report
    (`a|b`: either)."""

    name: str
    definition: WorkflowDefinition
    machine: MachineFactory
    rule: str


@dataclass(frozen=True, slots=True)
class Hunted:
    """One bug under one strategy: runs and seconds to the first failure, per base seed
    (a campaign that found nothing in its budget counts its whole budget)."""

    bug: str
    strategy: str
    runs: tuple[int, ...]
    seconds: tuple[float, ...]
    missed: int

    @property
    def median_runs(self) -> float:
        return statistics.median(self.runs)

    @property
    def median_seconds(self) -> float:
        return statistics.median(self.seconds)


def bugs(*, naive: bool = True) -> list[Bug]:
    """Gives the bundled bugs: the hand-rolled runtime's planted ones, and (unless `naive` is
    false) the naive scenarios found beside the package (a checkout)."""
    found: list[Bug] = []
    from harness.bench.planted import HANDROLLED, WORKFLOW

    for name, (machine, rule) in HANDROLLED.items():
        found.append(Bug(f"hand-rolled {name}", WORKFLOW, machine, rule))
    for name, rule in NAIVE_RULES.items() if naive else ():
        path = NAIVE / f"{name}.yaml"
        if path.is_file():
            found.append(Bug(f"naive {name}", load_definition(path), ReferenceMachine, rule))
    return found


def hunt(chosen: Sequence[Bug], strategies: Sequence[str] = ("swarm", "guided"), *,
         seeds: int = 10, runs_max: int = 20_000,
         progress: Callable[[str], None] | None = None) -> list[Hunted]:
    """Hunts each bug with each strategy from `seeds` base seeds; gives one `Hunted` each."""
    found = []
    for bug in chosen:
        for strategy in strategies:
            runs, seconds, missed = [], [], 0
            for index in range(seeds):
                options = _options(bug, strategy, index * SEED_STRIDE, runs_max)
                started = time.perf_counter()
                report = fuzz(bug.definition, options, machine=bug.machine)
                seconds.append(time.perf_counter() - started)
                runs.append(report.runs)
                if not report.failures:
                    missed += 1
                elif report.failures[0].rule not in bug.rule.split("|"):
                    raise HarnessError(f"{bug.name}: {strategy} from seed {options.seed} "
                                       f"broke {report.failures[0].rule}, not {bug.rule}")
            found.append(Hunted(bug.name, strategy, tuple(runs), tuple(seconds), missed))
            if progress is not None:
                progress(f"{bug.name} {strategy}: median {statistics.median(runs):g} runs")
    return found


def table(hunted: Sequence[Hunted]) -> str:
    """Gives the hunt as a Markdown table: a row per bug, each strategy's median runs and
    seconds, and swarm's runs divided by each other strategy's."""
    strategies = list(dict.fromkeys(h.strategy for h in hunted))
    by = {(h.bug, h.strategy): h for h in hunted}
    head = ["bug", *(f"{s} runs (s)" for s in strategies),
            *(f"swarm / {s}" for s in strategies[1:])]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for bug in dict.fromkeys(h.bug for h in hunted):
        cells: list[str] = [bug]
        for strategy in strategies:
            each = by[(bug, strategy)]
            missed = f", {each.missed} missed" if each.missed else ""
            cells.append(f"{each.median_runs:g} ({each.median_seconds:.2f} s{missed})")
        base = by[(bug, strategies[0])].median_runs
        cells += [f"{base / max(by[(bug, s)].median_runs, 1):.1f}x" for s in strategies[1:]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary(hunted: Sequence[Hunted]) -> dict[str, Any]:
    """Gives the hunt as JSON data, by strategy then bug."""
    data: dict[str, Any] = {}
    for each in hunted:
        data.setdefault(each.strategy, {})[each.bug] = {
            "median_runs": each.median_runs, "median_seconds": round(each.median_seconds, 4),
            "runs": list(each.runs), "missed": each.missed}
    return data


def hunt_group(definition: WorkflowDefinition, machine: MachineFactory, quick: bool) -> Group:
    """Gives the bench group of the hunt: each strategy's time per run of a campaign on the
    target (its ratio to swarm is what a run of guidance costs; the guided strategy measuring
    the machine's package's lines besides, what line coverage costs), and, measured once, each
    strategy's median runs to the first failure of each bundled bug from ten base seeds;
    when `quick`, of the hand-rolled bugs from one base seed (a naive scenario's campaign
    takes seconds), and campaigns of 30 runs a call."""
    runs = 30 if quick else 400
    strategies = ("swarm", "guided", "mixed")
    found: list[Hunted] = []

    def extra() -> dict[str, dict[str, Any]]:
        if not found:
            found.extend(hunt(bugs(naive=not quick), HUNTERS, seeds=1 if quick else 10))
        data = summary(found)
        named = {strategy: f"{strategy} ({runs} runs a call)" for strategy in strategies}
        named["crude"] = f"crude driver (every fault kind at {CRUDE_RATE:g}, every run)"
        return {named[strategy]: {
            "median_runs_to_failure": {bug: figures["median_runs"]
                                       for bug, figures in data[strategy].items()}}
            for strategy in HUNTERS}

    def contender(strategy: str, lines: tuple[str, ...] = ()) -> Any:
        label = f" + line coverage of {', '.join(lines)}" if lines else ""
        return Contender(f"{strategy}{label} ({runs} runs a call)",
                         lambda stack: _per_run(native_fuzz(definition, runs, machine=machine,
                                                            strategy=strategy,
                                                            line_coverage=lines), runs),
                         runs, "run")

    # what line coverage costs: the guided strategy measuring all of the machine's code (the
    # reference machine's is the runtime's package; another's, its module's package)
    measured = ("reference_machine" if machine is ReferenceMachine
                else machine.__module__.partition(".")[0],)
    return Group(f"hunt: fuzzing strategies on {definition.name}",
                 (*(contender(strategy) for strategy in strategies),
                  contender("guided", measured)),
                 note="median runs to each bundled bug's first failure, in the JSON document",
                 extra=extra)


def _per_run(campaign: Callable[[], int], runs: int) -> Callable[[], int]:
    return lambda: (campaign(), runs)[1]


def main(arguments: Sequence[str]) -> None:
    """Prints the hunt's table (`--quick`: three base seeds; `--strategies a,b` of
    `HUNTERS`)."""
    quick = "--quick" in arguments
    strategies: tuple[str, ...] = HUNTERS
    for argument in arguments:
        if argument.startswith("--strategies="):
            strategies = tuple(argument.partition("=")[2].split(","))
    found = hunt(bugs(), strategies, seeds=3 if quick else 10,
                 progress=lambda line: print(line, file=sys.stderr, flush=True))
    print(table(found))


if __name__ == "__main__":
    main(sys.argv[1:])
