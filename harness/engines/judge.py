"""The run judge: a campaign's definition, machine and options made ready once, to run one
seed (or a guided trial) and judge its history into a `RunOutcome`; and the outcomes of runs
that ended the process they ran in.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from fault_injection import TOOL_FAULTS, FaultPlan
from harness.checks.adequacy import Exercised, exercised
from harness.checks.behaviour import behaviours_of
from harness.checks.coverage import Coverage, coverage_of
from harness.checks.invariants import Invariant, Violation, invariants
from harness.checks.lines import LineCoverage
from harness.checks.metrics import Metrics, metrics_of
from harness.checks.targets import score, targets
from harness.engines.fuzz_options import FuzzOptions
from harness.engines.guided import Learnt, Trial, struck_keys
from harness.engines.isolation import Died
from harness.sim.choices import AimedChoices, RecordingChoices
from harness.sim.history import Delivered, FaultInjected
from harness.sim.machine import MachineFactory
from harness.sim.simulator import SimOptions, SimulationResult, Simulator, plan_for
from reference_machine import WorkflowDefinition

__all__ = ["RunJudge", "RunOutcome", "batch_died", "campaign_sim_options", "seed_died",
           "trial_died", "watchdog_stopped"]


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """What one run came to: its seed, steps, violations, coverage, faults, metrics and what it
    exercised (a guided campaign's: its trial and what the guide learns of it)."""

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


class RunJudge:
    """One process's view of a campaign: the definition, machine and options made ready once
    (its plan, the simulator, the invariants, the targets), which runs a seed (`run`) or a
    guided trial (`trial`) and judges its history."""

    def __init__(self, definition: WorkflowDefinition, machine: MachineFactory,
                 options: FuzzOptions) -> None:
        self.definition, self.machine = definition, machine
        self.plan = _plan(definition, options)
        self.sim_options = campaign_sim_options(definition, options, self.plan)
        self.simulator = Simulator(definition, self.sim_options, machine)
        self.invariants: tuple[Invariant, ...] = invariants(options.invariants)
        self.names = tuple(rule.name for rule in self.invariants)
        self.targets = targets(options.targets)
        self.lines = LineCoverage(options.line_coverage) if options.line_coverage else None
        self.executor: dict[str, Any] = {}  # the cluster it ran on, noted as it ends

    def run(self, seed: int) -> RunOutcome:
        """Runs a seed and gives its judged outcome."""
        return self._judged(seed, self.simulator.run(seed))

    def _judged(self, seed: int, result: SimulationResult) -> RunOutcome:
        history = result.history
        found: list[Violation] = []
        for rule in self.invariants:
            found += rule.run(self.definition, history)
        found.sort(key=lambda v: v.step)
        faults = Counter(str(r.fault) for r in history if type(r) is FaultInjected)
        scores = score(self.targets, self.definition, history) if self.targets else ()
        return RunOutcome(seed, result.steps, tuple(found),
                          coverage_of(self.definition, history), faults,
                          metrics_of(self.definition, history), watchdog_stopped(result),
                          scores, exercised=exercised(self.definition, history,
                                                      result.chances, self.names))

    def trial(self, trial: Trial) -> RunOutcome:
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


def watchdog_stopped(result: SimulationResult) -> bool:
    """Tells whether the watchdog stopped one of the run's steps."""
    failure = result.failure
    return failure is not None and failure.problem == "hung" and failure.error == "Watchdog"


def batch_died(outcomes: list[RunOutcome], died: Died) -> list[RunOutcome]:
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


def seed_died(seed: int, died: Died) -> RunOutcome:
    """Gives the outcome of a seed whose run ended the process it ran in."""
    violation = Violation("machine_ok", f"the machine ended its process ({died.how}) in the "
                                        f"run of seed {seed}; the run's history ended with it")
    return RunOutcome(seed, 0, (violation,), Coverage(), Counter(), Metrics(),
                      exercised=Exercised(runs=1))


def _plan(definition: WorkflowDefinition, options: FuzzOptions) -> FaultPlan:
    """Gives the plan the campaign's runs draw from (the given one, else the definition's)."""
    plan = options.sim.plan
    plan = plan if plan is not None else plan_for(definition, swarm=options.swarm)
    return replace(plan, swarm=True) if options.swarm and not plan.swarm else plan


def campaign_sim_options(definition: WorkflowDefinition, options: FuzzOptions,
                         plan: FaultPlan | None = None) -> SimOptions:
    """Gives the options every run of the campaign takes: the given ones, with its plan."""
    return replace(options.sim, plan=plan if plan is not None else _plan(definition, options))


def trial_died(trial: Trial, died: Died) -> RunOutcome:
    """Gives the outcome of a guided trial whose run ended the process it ran in."""
    return replace(seed_died(trial.seed, died), trial=trial)
