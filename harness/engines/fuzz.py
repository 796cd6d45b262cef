"""Native seeded fuzzing: many simulations of one definition, each reproducible from its seed.

`fuzz(target, options)` runs seeds `seed, seed + 1, ...` (swarm mode on by default: each run
draws its own subset of fault kinds and rates), checks every invariant over each history, and
merges coverage and stats. Runs can be spread over processes; results are merged in seed order,
so the report, and the first failing seed, are the same whatever the number of processes (a
time budget aside, which stops wherever the clock says). A failing run is shrunk to a minimal
schedule and saved as a replay file.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import os
import time
from collections import Counter
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from fault_injection import TOOL_FAULTS, FaultKind, FaultPlan
from harness.checks.adequacy import Adequacy, Exercised, adequacy, check_acknowledged, exercised
from harness.checks.behaviour import behaviours_of
from harness.checks.coverage import Coverage, correlation_blind_spot, coverage_of, vacuity
from harness.checks.determinism import CAUSES, difference
from harness.checks.determinism import RULE as DETERMINISTIC
from harness.checks.invariants import Invariant, Violation, invariants
from harness.checks.lines import LineCoverage, check_sources
from harness.checks.metrics import Metrics, metrics_of
from harness.checks.targets import score, targets
from harness.engines import elsewhere, isolation
from harness.engines.fleet import FailingSeeds
from harness.engines.guided import ROUND, STRATEGIES, Corpus, Guide, Learnt, Trial, struck_keys
from harness.engines.isolation import Died
from harness.engines.replay import imports_needed, write_replay
from harness.engines.shrink import Counterexample, NotReproduced, shrink
from harness.errors import HarnessError
from harness.sim.choices import AimedChoices, RecordingChoices
from harness.sim.history import Delivered, FaultInjected
from harness.sim.identity import definition_digest, machine_path
from harness.sim.machine import MachineFactory, ReferenceMachine
from harness.sim.simulator import SimOptions, SimulationResult, Simulator, plan_for
from reference_machine import WorkflowDefinition, load_definition
from reference_machine.findings import ABOUT_THE_SOURCE

__all__ = ["DEFAULT_STRATEGY", "FuzzFailure", "FuzzOptions", "FuzzReport", "fuzz"]

T = TypeVar("T")

_BATCH = 8  # seeds run between two progress reports (a worker process takes this many)
#: The runs of a campaign unless told, the command line's and the pytest plugin's too: enough
#: that each bundled naive scenario breaks in at least 19 campaigns of 20 (its slowest, the
#: pull request opened twice, needs up to 473 runs over 20 base seeds; measured with
#: `python tests/simulation/measure_power.py`).
RUNS_DEFAULT = 500
EXECUTORS = ("local", "dask")
DEFAULT_STRATEGY = "swarm"
"""The strategy a campaign takes unless told, chosen by measurement (`python -m
harness.bench.hunt`, the table in the README): `mixed` finds the suite's hardest planted bug
in a third of swarm's runs, but takes 1.6 times swarm's runs on one naive scenario and, in
300 runs, misses a transition swarm takes; the default must never be the worse one."""



@dataclass(frozen=True, slots=True)
class FuzzOptions:
    """How a fuzz campaign runs. `runs` seeds from `seed` on (None: until `time_budget_s`);
    `sim` shapes each run (its `plan`, when set, replaces the default plan, and `swarm` then
    only adds swarm mode to it). With `stop_at_first` the campaign ends at the first failing
    seed; else every failure is collected (each rule shrunk once). `replay_dir` is where
    replay files go (None: nowhere). A campaign that took none of the declared transitions,
    or fewer than `coverage_min` percent of them, does not hold: it is `vacuous`. With
    `isolate` (the default where the platform can fork) the machine runs in child processes,
    so that one that ends its process fails its seed instead of ending the campaign; without
    it, in this process (a debugger's breakpoints work), and `processes` must be 1.

    `strategy` is `swarm` (each run blind, from its seed), `guided` (mostly mutants of the
    schedules that reached new behaviour, `harness.engines.guided`) or `mixed` (half each).
    `corpus_dir` keeps the guided strategies' corpus between campaigns (failing schedules
    first). `targets` names the registered `@target` scores to climb and report (None: all).
    `line_coverage` names code (folders, packages) whose arcs, measured by coverage.py, the
    guided strategies add to their feedback (`harness.checks.lines`: it costs).

    `executor` `dask` runs the batches of seeds as tasks on a Dask cluster (`scheduler`: its
    address; None: a local cluster of `processes` workers), see `harness.engines.cluster`;
    the report is the same as a local campaign's.

    `example_db` (a Hypothesis `ExampleDatabase`, see `harness.engines.fleet`) keeps the seeds that
    failed, per definition and machine: a swarm campaign runs the saved ones first (before its
    own range, where they are not run again; they count among its runs), saves its failing
    seeds, and drops the saved seeds that held.

    `untested` acknowledges gaps the campaign may leave, each with its reason, as the
    definition's `untested:` does (`harness.checks.adequacy`): a campaign with a gap neither
    acknowledges is `untested`, not `held`."""

    runs: int | None = RUNS_DEFAULT
    seed: int = 0
    time_budget_s: float | None = None
    swarm: bool = True
    processes: int = 1
    stop_at_first: bool = True
    shrink: bool = True
    shrink_runs_max: int = 1000
    shrink_time_s: float | None = 60.0
    replay_dir: str | os.PathLike[str] | None = "reports/replays"
    invariants: tuple[str, ...] | None = None
    sim: SimOptions = field(default_factory=SimOptions)
    coverage_min: float | None = None
    isolate: bool = True
    strategy: str = DEFAULT_STRATEGY
    corpus_dir: str | os.PathLike[str] | None = None
    targets: tuple[str, ...] | None = None
    line_coverage: tuple[str, ...] = ()
    example_db: Any = None  # a hypothesis ExampleDatabase the fleet shares (harness.engines.fleet)
    executor: str = "local"  # where the runs go: local processes, or a Dask cluster
    scheduler: str | None = None  # the Dask scheduler's address (None: a local cluster)
    untested: Mapping[str, str] = field(default_factory=dict)  # gap code -> why it may be

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise HarnessError(f"options.strategy: expected one of {', '.join(STRATEGIES)}, "
                               f"got {self.strategy!r}")
        if self.corpus_dir is not None and self.strategy == "swarm":
            raise HarnessError("options.corpus_dir: a corpus is kept by the guided strategies; "
                               "give strategy guided or mixed (swarm runs keep none)")
        if self.line_coverage and self.strategy == "swarm":
            raise HarnessError("options.line_coverage: line coverage steers the guided "
                               "strategies; give strategy guided or mixed (swarm runs are "
                               "blind to it)")
        if self.line_coverage:
            check_sources(self.line_coverage)
        if self.executor not in EXECUTORS:
            raise HarnessError(f"options.executor: expected one of {', '.join(EXECUTORS)}, got "
                               f"{self.executor!r}")
        if self.scheduler is not None and self.executor != "dask":
            raise HarnessError("options.scheduler: a scheduler's address goes with executor "
                               "dask")
        if self.runs is None and self.time_budget_s is None:
            raise HarnessError("options.runs: give a number of runs, a time budget, or both")
        for name, low in (("runs", 1), ("seed", 0), ("processes", 1), ("shrink_runs_max", 1)):
            value = getattr(self, name)
            if value is None and name == "runs":
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise HarnessError(f"options.{name}: expected a whole number of at least "
                                   f"{low}, got {value!r}")
        for name in ("time_budget_s", "shrink_time_s"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int | float) or value <= 0):
                raise HarnessError(f"options.{name}: expected a positive number of seconds, "
                                   f"got {value!r}")
        floor = self.coverage_min
        if floor is not None and (not isinstance(floor, int | float) or isinstance(floor, bool)
                                  or not 0 <= floor <= 100):
            raise HarnessError(f"options.coverage_min: expected a percent from 0 to 100, got "
                               f"{floor!r}")
        if not isinstance(self.isolate, bool):
            raise HarnessError(f"options.isolate: expected true or false, got "
                               f"{self.isolate!r}")
        if not self.isolate and self.processes > 1:
            raise HarnessError("options.processes: more than one process needs isolate=True")
        if not isinstance(self.sim, SimOptions):
            raise HarnessError(f"options.sim: expected SimOptions, got "
                               f"{type(self.sim).__name__}")
        if not isinstance(self.untested, Mapping):
            raise HarnessError(f"options.untested: expected a mapping of gap codes to reasons, "
                               f"got {type(self.untested).__name__}")
        check_acknowledged(self.untested, where="options.untested.")


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
    def verdict(self) -> str:
        """Gives the campaign's verdict: `nondeterministic` (a seed gave two histories),
        `violated`, `vacuous`, `untested` (a crash point, a fault kind or the moves into a
        state left untested: `adequacy.gaps`) or `held`."""
        if any(failure.rule == DETERMINISTIC for failure in self.failures):
            return "nondeterministic"
        if self.failures:
            return "violated"
        return "vacuous" if self.vacuous else "untested" if self.adequacy.gaps else "held"

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
            "machine": self.machine, "held": self.held, "verdict": self.verdict,
            "vacuous": self.vacuous,
            # what makes the verdict `untested` (the gaps of a campaign that broke a rule, or
            # exercised nothing, are in `adequacy` only)
            "untested": [gap.to_dict() for gap in self.adequacy.gaps]
            if self.verdict == "untested" else [],
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


@dataclass(frozen=True, slots=True)
class _Outcome:
    seed: int
    steps: int
    violations: tuple[Violation, ...]
    coverage: Coverage
    faults: Counter[str]
    metrics: Metrics
    overran: bool = False  # not the seed's alone (the watchdog's clock, a worker's past): not
    # run again to shrink or to check it is deterministic
    scores: tuple[tuple[str, float | str], ...] = ()
    trial: Trial | None = None  # a guided campaign's run
    learnt: Learnt | None = None
    exercised: Exercised = field(default_factory=Exercised)


class _Campaign:
    """One process's view of a campaign: the simulator and the invariants, built once."""

    def __init__(self, definition: WorkflowDefinition, machine: MachineFactory,
                 options: FuzzOptions) -> None:
        self.definition, self.machine = definition, machine
        self.plan = _plan(definition, options)
        self.sim_options = _sim_options(definition, options, self.plan)
        self.simulator = Simulator(definition, self.sim_options, machine)
        self.invariants: tuple[Invariant, ...] = invariants(options.invariants)
        self.names = tuple(rule.name for rule in self.invariants)
        self.targets = targets(options.targets)
        self.lines = LineCoverage(options.line_coverage) if options.line_coverage else None
        self.executor: dict[str, Any] = {}  # the cluster it ran on, noted as it ends

    def run(self, seed: int) -> _Outcome:
        return self._judged(seed, self.simulator.run(seed))

    def _judged(self, seed: int, result: SimulationResult) -> _Outcome:
        history = result.history
        found: list[Violation] = []
        for rule in self.invariants:
            found += rule.run(self.definition, history)
        found.sort(key=lambda v: v.step)
        faults = Counter(str(r.fault) for r in history if type(r) is FaultInjected)
        scores = score(self.targets, self.definition, history) if self.targets else ()
        return _Outcome(seed, result.steps, tuple(found), coverage_of(self.definition, history),
                        faults, metrics_of(self.definition, history), _overran(result),
                        scores, exercised=exercised(self.definition, history, result.chances,
                                                    self.names))

    def trial(self, trial: Trial) -> _Outcome:
        """Runs a guided campaign's trial, recording its draws, and learns what it did."""
        choices = trial.choices(record=True)
        arcs: frozenset[Any] = frozenset()
        if self.lines is None:
            result = self.simulator.run(trial.seed, choices=choices)
        else:
            result, arcs = self.lines.measure(
                lambda: self.simulator.run(trial.seed, choices=choices))
        outcome = self._judged(trial.seed, result)
        recorded = tuple(choices.recorded) if isinstance(choices, RecordingChoices) else ()
        history = result.history
        faults = [(r.step, _fault_tag(r)) for r in history if type(r) is FaultInjected]
        learnt = Learnt(behaviours_of(history, outcome.coverage) | arcs, recorded,
                        struck_keys(recorded, faults),
                        tuple(r.step for r in history
                              if type(r) is Delivered and r.via == "external"),
                        result.steps,
                        tuple((n, v) for n, v in outcome.scores if isinstance(v, float)),
                        tuple(choices.sites.items()) if isinstance(choices, AimedChoices)
                        else ())
        return replace(outcome, trial=trial, learnt=learnt)


def _fault_tag(record: FaultInjected) -> str:
    """Gives the tag a fault's draw was made under (a tool's faults share `f:tool:<name>`)."""
    if record.fault in TOOL_FAULTS:
        return f"f:tool:{record.detail.partition(' ')[0]}"
    return f"f:{record.fault}"


def _overran(result: SimulationResult) -> bool:
    """Tells whether the watchdog stopped one of the run's steps."""
    failure = result.failure
    return failure is not None and failure.problem == "hung" and failure.error == "Watchdog"


def _unexplained(outcomes: list[_Outcome], died: Died) -> list[_Outcome]:
    """Gives a batch's outcomes when its worker died but no seed of it dies alone: what runs
    leave behind in one process (a leak, a count) ended it, and the campaign says so on the
    batch's first seed (it cannot be shrunk: no one seed does it)."""
    first = outcomes[0]
    seeds = f"seeds {first.seed} to {outcomes[-1].seed}"
    violation = Violation("machine_ok", f"the machine ended its process ({died.how}) in a "
                                        f"worker running {seeds}, but no one of them does "
                                        "when run alone: what runs leave behind in one "
                                        "process (memory, files, a count) ends it")
    return [replace(first, violations=(violation, *first.violations), overran=True),
            *outcomes[1:]]


def _died(seed: int, died: Died) -> _Outcome:
    """Gives the outcome of a seed whose run ended the process it ran in."""
    violation = Violation("machine_ok", f"the machine ended its process ({died.how}) in the "
                                        f"run of seed {seed}; the run's history ended with it")
    return _Outcome(seed, 0, (violation,), Coverage(), Counter(), Metrics(),
                    exercised=Exercised(runs=1))


def _plan(definition: WorkflowDefinition, options: FuzzOptions) -> FaultPlan:
    """Gives the plan the campaign's runs draw from (the given one, else the definition's)."""
    plan = options.sim.plan
    plan = plan if plan is not None else plan_for(definition, swarm=options.swarm)
    return replace(plan, swarm=True) if options.swarm and not plan.swarm else plan


def _sim_options(definition: WorkflowDefinition, options: FuzzOptions,
                 plan: FaultPlan | None = None) -> SimOptions:
    """Gives the options every run of the campaign takes: the given ones, with its plan."""
    return replace(options.sim, plan=plan if plan is not None else _plan(definition, options))


def _seeds(options: FuzzOptions, deadline: float | None,
           batch: int) -> Generator[list[int], None, None]:
    seed, left = options.seed, options.runs
    while left is None or left > 0:
        if deadline is not None and time.monotonic() >= deadline:
            return
        size = batch if left is None else min(batch, left)
        yield list(range(seed, seed + size))
        seed += size
        if left is not None:
            left -= size


def fuzz(target: WorkflowDefinition | str | os.PathLike[str] | Mapping[str, Any],
         options: FuzzOptions | None = None, *, machine: MachineFactory = ReferenceMachine,
         progress: Callable[[int, int, int], None] | None = None) -> FuzzReport:
    """Fuzzes a definition (or a definition file) on a machine: runs seeded simulations with
    faults, checks every invariant, shrinks what fails and saves its replay file. A campaign
    whose runs left a fault kind or a crash point untested that some of them had a chance at
    ends with runs aimed at it (`_aimed`).

    `progress(runs, steps, failures)` is called after each batch of runs."""
    options = options if options is not None else FuzzOptions()
    definition = target if isinstance(target, WorkflowDefinition) else load_definition(
        Path(target) if isinstance(target, os.PathLike) else target)
    named = getattr(machine, "crash_points", None)  # a class says before it is built
    points = (tuple(named) or ("between_steps",)) if isinstance(named, tuple | list) else ()
    check_acknowledged(definition.untested, points)
    check_acknowledged(options.untested, points, where="options.untested.")
    campaign = _Campaign(definition, machine, options)
    started = time.monotonic()
    deadline = None if options.time_budget_s is None else started + options.time_budget_s
    # a campaign bounded by time leaves a tenth of it to the runs aimed at its gaps
    runs_until = None if options.time_budget_s is None else (
        started + RUNS_TIME_SHARE * options.time_budget_s)
    totals = _Totals()
    guide = corpus = fleet = None
    saved: list[int] = []
    if options.strategy != "swarm":
        guide = Guide(options.seed, options.strategy)
        if options.corpus_dir is not None:
            corpus = Corpus(options.corpus_dir, definition_digest(definition),
                            machine_path(machine))
            guide.queued = corpus.load()
        batches = _guided_outcomes(campaign, options, runs_until, guide)
    else:
        fleet = (FailingSeeds(options.example_db, definition_digest(definition),
                              _fleet_shape(machine, options))
                 if options.example_db is not None else None)
        saved = fleet.load() if fleet is not None else []
        batches = _outcomes(campaign, options, runs_until, saved)
    sample = _determinism_sample(campaign, options)  # before any run could leave state behind
    try:
        for batch in batches:
            stop = totals.add(batch, options.stop_at_first)
            if guide is not None:
                totals.growth.append((totals.runs, len(guide.hits)))
            if progress is not None:
                progress(totals.runs, totals.steps, len(totals.failing))
            if stop:
                break
    except BaseException:
        sample.cancel()
        raise
    batches.close()  # stops the worker processes, if any
    if fleet is not None:
        broke = {outcome.seed for outcome in totals.failing}
        fleet.update(sorted(broke), [seed for seed in saved
                                     if seed in totals.ran and seed not in broke])
    try:
        unsteady = sample.result()
        failures = _failures(campaign, options, totals.failing, unsteady)
        if not totals.failing and unsteady is None and not vacuity(
                definition, totals.covered, options.coverage_min):  # held: as much as it claims?
            ran = totals.runs
            failures += _aimed(campaign, options, totals, deadline)
            if progress is not None and totals.runs > ran:
                progress(totals.runs, totals.steps, len(failures))
        # the fresh interpreters' second opinion, last (not on a machine that hangs or ends
        # its process: they would wait out their bound on it, for no verdict the campaign lacks)
        if unsteady is None and not any(v.rule == "machine_ok" for failure in failures
                                        for v in failure.violations):
            there = sample.elsewhere(deadline)
            if there is not None:
                failures.insert(0, FuzzFailure(there[0], (there[1],)))
    finally:
        sample.cancel()
    elapsed = time.monotonic() - started
    kept = _keep(corpus, guide, totals.failing) if corpus is not None and guide is not None \
        else 0
    done = totals.done
    points = done.points or tuple(getattr(machine, "crash_points", ()) or ("between_steps",))
    return FuzzReport(definition, getattr(machine, "__qualname__", type(machine).__name__),
                      campaign.plan, totals.runs, totals.steps, elapsed,
                      tuple(failures), totals.covered, dict(totals.faults), campaign.names,
                      points, totals.metrics,
                      vacuity(definition, totals.covered, options.coverage_min),
                      options.strategy, tuple(totals.growth), totals.best,
                      _guided_summary(guide, kept, options), campaign.executor,
                      totals.adequacy(definition, campaign, options), dict(totals.aimed))


#: How many runs of a campaign a gap's aimed runs start from (seeds whose runs had a chance
#: at the fault, or passed the crash point): each runs again with the fault pinned. A campaign
#: aims at most `AIMED_BUDGET_MIN` runs (or a quarter of its runs when that is more, four times
#: its runs when that is less) at all its gaps.
AIMED_RUNS_MAX = 8
AIMED_BUDGET_MIN = 16
#: Of a time budget, the share its own runs take; the rest is for runs aimed at its gaps.
RUNS_TIME_SHARE = 0.9


class _Totals:
    """What a campaign's runs add up to, kept as the runs come (a run's outcome is not kept
    past its batch unless it failed, so memory does not grow with the runs), and, per fault
    kind and crash point, the first seeds whose runs had a chance at it."""

    def __init__(self) -> None:
        self.runs = self.steps = 0
        self.failing: list[_Outcome] = []
        self.covered = Coverage()
        self.faults: Counter[str] = Counter()
        self.metrics = Metrics()
        self.done = Exercised()
        self.best: dict[str, dict[str, Any]] = {}
        self.ran: set[int] = set()
        self.growth: list[tuple[int, int]] = []
        self.chanced: dict[str, list[int]] = {}
        self.aimed: dict[str, dict[str, Any]] = {}  # gap code -> its aimed runs

    def add(self, batch: Iterable[_Outcome], stop_at_first: bool, *, aimed: bool = False
            ) -> bool:
        """Adds a batch's outcomes (`aimed`: runs aimed at a gap, which start no aimed run
        and reach no target score a seed gives again); tells whether the campaign stops (a
        failure, with `stop_at_first`)."""
        for outcome in batch:
            self.runs += 1
            self.ran.add(outcome.seed)
            self.steps += outcome.steps
            self.covered = self.covered.merge(outcome.coverage)
            self.faults.update(outcome.faults)
            self.metrics = self.metrics.merge(outcome.metrics)
            self.done = self.done.merge(outcome.exercised)
            if not aimed:
                _best(self.best, outcome)
            if not aimed and (outcome.trial is None or outcome.trial.script is None):
                self._chances(outcome)  # a seed's own run: one an aimed run can start from
            if outcome.violations:
                self.failing.append(outcome)
                if stop_at_first:
                    return True
        return False

    def _chances(self, outcome: _Outcome) -> None:
        done = outcome.exercised
        chanced = self.chanced
        for key in (*(kind for kind, count in done.chances.items() if count),
                    *(f"crash_point:{point}" for point, count in done.passed.items() if count)):
            seeds = chanced.setdefault(key, [])
            if len(seeds) < AIMED_RUNS_MAX:
                seeds.append(outcome.seed)

    def adequacy(self, definition: WorkflowDefinition, campaign: _Campaign,
                 options: FuzzOptions) -> Adequacy:
        """Gives what the runs so far were worth."""
        return adequacy(definition, self.done, self.covered, campaign.plan, campaign.names,
                        options.untested)


def _aimed(campaign: _Campaign, options: FuzzOptions, totals: _Totals,
           deadline: float | None) -> list[FuzzFailure]:
    """Runs again, with the fault pinned on (`FaultPlan.pinned`), the seeds whose runs had a
    chance at a fault kind (or passed a crash point) the campaign left untested: each runs as
    it ran up to that chance, where the fault now strikes half the time. Gives the failures
    they found (shrunk, with replay files: their options are not the campaign's, so their
    seed alone does not run them again)."""
    failures: list[FuzzFailure] = []
    # a small campaign is not made a big one
    budget = min(max(AIMED_BUDGET_MIN, totals.runs // 4), 4 * totals.runs)
    for gap in totals.adequacy(campaign.definition, campaign, options).gaps:
        kind, _, name = gap.code.partition(":")
        key = name if kind == "fault" else gap.code
        seeds = totals.chanced.get(key, [])[:budget]
        if kind not in ("fault", "crash_point") or not seeds or _closes(totals.done, gap.code):
            continue  # nothing to aim from, or an earlier gap's aimed run exercised it too
        if deadline is not None and time.monotonic() >= deadline:
            break
        aimed = _Campaign(campaign.definition, campaign.machine,
                          replace(options, sim=replace(campaign.sim_options,
                                                       plan=_pinned(campaign.plan, gap.code))))

        def batch(seeds: Sequence[int], aimed: _Campaign = aimed, code: str = gap.code
                  ) -> list[_Outcome]:
            outcomes = []
            for seed in seeds:
                outcomes.append(aimed.run(seed))
                if outcomes[-1].violations or _closes(outcomes[-1].exercised, code):
                    break  # the gap is closed, or the campaign has what it stops at
            return outcomes

        outcomes = (next(isolation.map_ordered(batch, [seeds], 1, _died, _unexplained))
                    if _isolated(options) else batch(seeds))
        failing_before = len(totals.failing)
        totals.add(outcomes, options.stop_at_first, aimed=True)
        budget -= len(outcomes)
        totals.aimed[gap.code] = {"runs": len(outcomes), "seeds": [o.seed for o in outcomes],
                                  "closed": any(_closes(o.exercised, gap.code)
                                                for o in outcomes)}
        found = totals.failing[failing_before:]
        if found:
            failures += _failures(aimed, options, found, None, aimed=f"aimed at {gap.code}")
            if options.stop_at_first:
                break
        if budget <= 0:
            break
    return failures


def _pinned(plan: FaultPlan, code: str) -> FaultPlan:
    """Gives `plan` with the fault a gap names pinned on: a fault kind on in every run, or a
    crash at one crash point (the others keep the run's own rate, so the run draws as it did
    up to that point)."""
    kind, _, name = code.partition(":")
    if kind == "crash_point":
        return replace(plan, pinned_points=(name,))
    return replace(plan, pinned=(FaultKind(name),))


def _closes(done: Exercised, code: str) -> bool:
    """Tells whether a run exercised what a gap names (or showed that the machine cannot take
    it: a second worker it does not offer)."""
    kind, _, name = code.partition(":")
    if kind == "crash_point":
        return done.crashed.get(name, 0) > 0
    return done.injected.get(name, 0) > 0 or name in done.unoffered


def _best(best: dict[str, dict[str, Any]], outcome: _Outcome) -> None:
    """Keeps each target's best score, the seed that reached it, and its first error."""
    for name, value in outcome.scores:
        held = best.setdefault(name, {"best": None, "seed": None, "errors": 0})
        if isinstance(value, str):
            held["errors"] += 1
            held.setdefault("error", f"seed {outcome.seed}: {value}")
        elif held["best"] is None or value > held["best"]:
            held["best"], held["seed"] = value, outcome.seed
            held["mutant"] = outcome.trial is not None and outcome.trial.script is not None


def _guided_summary(guide: Guide | None, kept: int, options: FuzzOptions) -> dict[str, Any]:
    if guide is None:
        return {}
    return {"corpus": len(guide.corpus), "behaviours": len(guide.hits),
            "mutants": dict(sorted(guide.mutations.items())),
            "new_behaviour_by": dict(sorted(guide.found.items())),
            "corpus_dir": None if options.corpus_dir is None else str(options.corpus_dir),
            "saved": kept,
            **({"line_coverage": list(options.line_coverage),
                "line_arcs": sum(1 for behaviour in guide.hits if behaviour[0] == "ln")}
               if options.line_coverage else {})}


def _keep(corpus: Corpus, guide: Guide, failing: Sequence[_Outcome]) -> int:
    """Saves the campaign's corpus and its failing schedules to the corpus folder; gives how
    many entries it wrote."""
    written = 0
    for outcome in failing:
        if outcome.learnt is not None and outcome.learnt.recorded:
            corpus.save(outcome.seed, outcome.learnt.recorded, outcome.violations[0].rule)
            written += 1
    for entry in guide.corpus:
        corpus.save(entry.seed, entry.draws())
        written += 1
    return written


def _isolated(options: FuzzOptions) -> bool:
    return options.isolate and isolation.available()


def _outcomes(campaign: _Campaign, options: FuzzOptions, deadline: float | None,
              first: Sequence[int] = ()) -> Generator[list[_Outcome], None, None]:
    """Gives the outcomes batch by batch, in seed order (from child processes, if isolated;
    from a Dask cluster's workers with that executor), the `first` seeds (a fleet's saved
    failures) before the campaign's own."""
    def batches(size: int) -> Iterator[list[int]]:
        again = set(first)  # run first: not again in their place in the range
        return itertools.chain(
            (list(first[start:start + size]) for start in range(0, len(first), size)),
            (kept for seeds in _seeds(options, deadline, size)
             if (kept := [seed for seed in seeds if seed not in again])))

    def batch(seeds: Sequence[int]) -> list[_Outcome]:
        outcomes = []
        for seed in seeds:
            outcomes.append(campaign.run(seed))
            if options.stop_at_first and outcomes[-1].violations:
                break  # the campaign stops here: the seeds after it would cost for nothing
        return outcomes

    def alone(seeds: Sequence[int]) -> list[_Outcome]:
        """A batch run here, each seed in a forked child (where the platform can fork)."""
        if not isolation.available():
            return batch(seeds)
        return next(isolation.map_ordered(batch, [seeds], 1, _died, _unexplained))

    if options.executor == "dask":
        yield from _on_dask(campaign, options, batches, alone)
        return
    if not _isolated(options):
        for seeds in batches(_BATCH):
            yield batch(seeds)
        return
    yield from isolation.map_ordered(batch, batches(_BATCH), options.processes, _died,
                                     _unexplained)


def _fleet_shape(machine: MachineFactory, options: FuzzOptions) -> str:
    """Names what a seed's run depends on besides the definition, for the fleet's database:
    the machine (by its module path; one that has none by its qualified name, marked so) and
    the options that shape a run (the fault plan and simulation options, swarm, the invariants
    checked). A seed saved under other options is another run: it is neither replayed here nor
    dropped when it holds here."""
    name = machine_path(machine) or "unnamed " + str(getattr(
        machine, "__qualname__", type(machine).__qualname__))
    shape = repr((options.swarm, options.invariants, replace(options.sim, seed=0)))
    return f"{name}:{hashlib.sha256(shape.encode()).hexdigest()[:16]}"


class _Cluster:
    """A campaign's Dask executor (harness.engines.cluster): its recipe, the key its workers
    keep the built campaign under; on `close`, the cluster's workers and those lost are
    noted on the campaign (for its report)."""

    def __init__(self, campaign: _Campaign, options: FuzzOptions) -> None:
        from harness.engines.cluster import DaskExecutor

        self.campaign, self.scheduler = campaign, options.scheduler
        self.executor = DaskExecutor(options.scheduler, options.processes)
        self.workers = self.executor.workers
        # the invariants by name, and the modules that register the user's: a worker imports
        # those and checks each one, or refuses (it would otherwise check what it happens to
        # have registered, and the report would claim the rest)
        modules = sorted({rule.module for rule in campaign.invariants
                          if not rule.builtin and rule.module and rule.module != "__main__"})
        self.recipe = (campaign.definition, campaign.machine,
                       replace(options, example_db=None, executor="local", scheduler=None,
                               invariants=campaign.names), tuple(modules))
        # the same definition, machine and options: the same campaign, which a worker that
        # built it for an earlier campaign reuses
        self.key = hashlib.sha256(repr((definition_digest(campaign.definition),
                                        machine_path(campaign.machine) or id(campaign.machine),
                                        self.recipe[2])).encode()).hexdigest()[:24]

    def map_ordered(self, batches: Iterable[Sequence[Any]],
                    alone: Callable[[Sequence[Any]], list[_Outcome]], *, trials: bool = False
                    ) -> Iterator[list[_Outcome]]:
        return self.executor.map_ordered(self.key, self.recipe, batches, alone, trials=trials)

    def close(self) -> None:
        self.campaign.executor = {"kind": "dask", "scheduler": self.scheduler or "local cluster",
                                  "workers": self.workers,
                                  "workers_lost": self.executor.lost(),
                                  "unguarded_batches": self.executor.unguarded}
        self.executor.close()


def _on_dask(campaign: _Campaign, options: FuzzOptions,
             batches: Callable[[int], Iterator[list[int]]],
             alone: Callable[[Sequence[int]], list[_Outcome]]
             ) -> Generator[list[_Outcome], None, None]:
    """Gives the outcomes of the batches run as tasks on a Dask cluster, in order."""
    from harness.engines.cluster import batch_size

    cluster = _Cluster(campaign, options)
    try:
        yield from cluster.map_ordered(batches(batch_size(options.runs, cluster.workers)),
                                       alone)
    finally:
        cluster.close()


def _guided_outcomes(campaign: _Campaign, options: FuzzOptions, deadline: float | None,
                     guide: Guide) -> Generator[list[_Outcome], None, None]:
    """Gives a guided campaign's outcomes a round at a time, in batches: each round's trials
    are drawn from the corpus the rounds before it left (run in worker children, if
    isolated), so the campaign is the same for any number of processes."""
    left = options.runs
    work = functools.partial(_trials, campaign, options)
    on_dask = options.executor == "dask"
    pool = (isolation.Pool(work, options.processes, _died_trial, _unexplained)
            if _isolated(options) and not on_dask else None)
    cluster = _Cluster(campaign, options) if on_dask else None

    def alone(batch: Sequence[Trial]) -> list[_Outcome]:
        """A batch run here, each trial in a forked child (where the platform can fork)."""
        if not isolation.available():
            return work(batch)
        return next(isolation.map_ordered(work, [batch], 1, _died_trial, _unexplained))

    try:
        while left is None or left > 0:
            if deadline is not None and time.monotonic() >= deadline:
                return
            trials = guide.round(ROUND if left is None else min(ROUND, left))
            batches = [trials[start:start + _BATCH] for start in range(0, len(trials), _BATCH)]
            results = (pool.run(batches) if pool is not None
                       else list(cluster.map_ordered(batches, alone, trials=True))
                       if cluster is not None
                       else [work(batch) for batch in batches])
            for outcomes in results:
                for outcome in outcomes:
                    if outcome.learnt is not None and outcome.trial is not None:
                        guide.learn(outcome.trial, outcome.learnt)
                yield outcomes
            if left is not None:
                left -= len(trials)
    finally:
        if pool is not None:
            pool.close()
        if cluster is not None:
            cluster.close()


def _trials(campaign: _Campaign, options: FuzzOptions, trials: Sequence[Trial]
            ) -> list[_Outcome]:
    outcomes = []
    for trial in trials:
        outcomes.append(campaign.trial(trial))
        if options.stop_at_first and outcomes[-1].violations:
            break
    return outcomes


def _died_trial(trial: Trial, died: Died) -> _Outcome:
    return replace(_died(trial.seed, died), trial=trial)


def _failures(campaign: _Campaign, options: FuzzOptions, failing: Iterable[_Outcome],
              sampled: tuple[int, Violation] | None, *, aimed: str = "") -> list[FuzzFailure]:
    """Shrinks the first failure of each rule and saves its replay file, after running its
    seed twice more: a history that differs, or a failure that does not come back, is a
    `deterministic` failure, and nothing is shrunk after it (a schedule that does not come
    back cannot be made smaller). `sampled` is what the first seeds' two runs showed.
    `aimed` names the gap the runs were aimed at: as a mutant's, their seed alone under the
    campaign's options does not run them again, so each gets a replay file, shrunk or not."""
    failures = []
    unsteady = None
    if sampled is not None:
        failures.append(FuzzFailure(sampled[0], (sampled[1],)))
        unsteady = sampled[1]
    shrunk_rules: set[str] = set()
    for outcome in failing:
        rule = outcome.violations[0].rule
        counterexample = None
        path = None
        # a mutant's run is no seed's own: only its schedule, in a replay file, runs it again,
        # so one is written, shrunk or not
        mutant = aimed or ("" if outcome.trial is None or outcome.trial.script is None else
                           outcome.trial.how)
        if outcome.overran:  # run again, it would take the watchdog's bound each time
            failures.append(FuzzFailure(outcome.seed, outcome.violations, mutant=mutant))
            continue
        if unsteady is None and (options.shrink or mutant) and rule not in shrunk_rules:
            try:
                unsteady = _apart(options, functools.partial(_unsteady, campaign,
                                                             outcome.seed, outcome.trial))
            except Died:  # the seed ends its process: nothing to shrink, the failure says why
                failures.append(FuzzFailure(outcome.seed, outcome.violations, mutant=mutant))
                continue
            if unsteady is None:
                try:
                    counterexample = _shrunk(campaign, options, outcome.seed, rule,
                                             _start(outcome))
                except NotReproduced as exc:
                    unsteady = Violation(DETERMINISTIC, f"{exc.args[0]}; {CAUSES}",
                                         outcome.violations[0].execution,
                                         outcome.violations[0].step)
                except Died:
                    counterexample = None
            if unsteady is not None:
                failures.append(FuzzFailure(outcome.seed, (unsteady, *outcome.violations),
                                            mutant=mutant))
                continue
            shrunk_rules.add(rule)
            if options.replay_dir is not None and counterexample is not None:
                path = write_replay(counterexample, Path(options.replay_dir))
        failures.append(FuzzFailure(outcome.seed, outcome.violations, counterexample, path,
                                    mutant))
    return failures


def _apart(options: FuzzOptions, work: Callable[[], T]) -> T:
    """Runs `work` in a child process when the campaign is isolated (raises `Died` when the
    machine ends it), else here."""
    return isolation.call(work) if _isolated(options) else work()


def _start(outcome: _Outcome) -> dict[tuple[int, str, int], float] | None:
    """Gives the schedule a guided mutant's failure shrinks from (None: a seed's own run)."""
    if outcome.trial is None or outcome.trial.script is None or outcome.learnt is None:
        return None
    return {(c.step, c.tag, c.n): c.u for c in outcome.learnt.recorded}


def _shrunk(campaign: _Campaign, options: FuzzOptions, seed: int, rule: str,
            start: dict[tuple[int, str, int], float] | None = None) -> Counterexample:
    """Shrinks `seed`'s failure of `rule` (apart, when isolated: the definition and the
    machine stay behind, as a closure does not cross processes, and are put back here)."""
    def work() -> Counterexample:
        found = shrink(campaign.definition, seed, campaign.sim_options, rule,
                       machine=campaign.machine,
                       runs_max=options.shrink_runs_max if options.shrink else 1,
                       time_budget_s=options.shrink_time_s, start=start)
        return found if not _isolated(options) else replace(
            found, definition=None, machine=None)  # type: ignore[arg-type]

    return replace(_apart(options, work), definition=campaign.definition,
                   machine=campaign.machine)


DETERMINISM_SAMPLE = 3
"""How many of a campaign's first seeds run twice before it: one seed misses a machine that
flips a coin only now and then (two runs agree by luck); each more seed makes that rarer."""
#: A campaign of at least this many runs (the default, or an open-ended one) also runs its
#: first seed in two fresh interpreters with two hash seeds (`harness.engines.elsewhere`):
#: about a second of a core, beside the campaign (a fixed cost a short campaign would feel).
ELSEWHERE_RUNS = RUNS_DEFAULT
#: Nor a campaign bounded by less time than this (seconds): their second of CPU would take
#: the time its own runs and its aimed runs have.
ELSEWHERE_BUDGET_MIN_S = 30.0


class _Sample:
    """The determinism sample's verdict: the first seed whose two histories differ, and how
    (see `_determinism_sample`)."""

    def __init__(self, running: isolation.Running | None,
                 found: tuple[int, Violation] | bool | None = None,
                 there: elsewhere.Elsewhere | None = None) -> None:
        self.running, self.there = running, there
        self.found = found if isinstance(found, tuple) else None
        self.looped = found is False  # its first run ran past its bound, or ended its process

    def result(self) -> tuple[int, Violation] | None:
        """Gives the verdict of the sample's runs in this process (or its child)."""
        if self.running is not None:
            running, self.running = self.running, None
            try:
                got = running.result()
            except Died:  # the campaign meets the seed that ends its process, and says so
                got = False
            self.found = got if isinstance(got, tuple) else None
            self.looped = got is False
        return self.found

    def elsewhere(self, deadline: float | None) -> tuple[int, Violation] | None:
        """Gives the fresh interpreters' verdict on the first seed, waiting for them at most
        until `deadline` (a time budget's end) when one is given; None: the same history, or
        none in time. Not when the sample's first run looped or ended its process."""
        if self.looped or self.there is None:
            return None
        try:
            unsteady = self.there.difference(deadline)
            return None if unsteady is None else (self.there.seed, unsteady)
        finally:
            self._close()

    def cancel(self) -> None:
        if self.running is not None:
            self.running.cancel()
            self.running = None
        self._close()

    def _close(self) -> None:
        if self.there is not None:
            self.there.close()
            self.there = None


def _determinism_sample(campaign: _Campaign, options: FuzzOptions) -> _Sample:
    """Runs the campaign's first seeds twice each, from the state the campaign starts in (and
    the first in two fresh interpreters, see `ELSEWHERE_RUNS`); its `result()` gives the first
    seed whose two histories differ, and how. Isolated, the
    sample runs in a child of its own beside the campaign's workers (a fork of this process
    before any run, so no run of the campaign can leave state behind in it); else here,
    before the campaign."""
    sample = DETERMINISM_SAMPLE if options.runs is None else min(DETERMINISM_SAMPLE,
                                                                  options.runs)

    def work() -> tuple[int, Violation] | bool | None:
        for seed in range(options.seed, options.seed + sample):
            first = campaign.simulator.run(seed)
            if _overran(first):  # a machine that loops: the campaign says so, at less cost
                return False
            unsteady = difference(first.history, campaign.simulator.run(seed).history)
            if unsteady is not None:
                return seed, unsteady
        return None

    # the first seed in two fresh interpreters too, meanwhile: hash order and id() differ
    long_enough = ((options.runs is None or options.runs >= ELSEWHERE_RUNS)
                   and (options.time_budget_s is None
                        or options.time_budget_s >= ELSEWHERE_BUDGET_MIN_S))
    there = (elsewhere.begin(campaign.definition, campaign.machine, campaign.sim_options,
                             options.seed, imports_needed(campaign.definition, ""))
             if long_enough else None)
    try:
        if _isolated(options):
            return _Sample(isolation.begin(work), there=there)
        return _Sample(None, work(), there)
    except BaseException:
        if there is not None:
            there.close()
        raise


def _unsteady(campaign: _Campaign, seed: int, trial: Trial | None = None) -> Violation | None:
    """Gives how two runs of `seed` (or of a guided trial) differ (None: the same history,
    byte for byte, or a first run the watchdog stopped: where a loop is stopped is the
    clock's, not the seed's)."""
    def run() -> SimulationResult:
        if trial is None or trial.script is None:
            return campaign.simulator.run(seed)
        return campaign.simulator.run(trial.seed, choices=trial.choices(record=True))

    first = run()
    if _overran(first):
        return None
    return difference(first.history, run().history)
