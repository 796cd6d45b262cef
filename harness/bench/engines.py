"""The engines group of `fsmharness bench` (`--only engines`): native fuzzing beside the
Hypothesis machine on the same workflow, and the campaigns the scaling, memory and hunt groups
time (`native_fuzz`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from harness.bench.timing import Contender, Group
from harness.engines.fuzz import FuzzOptions, fuzz
from harness.errors import HarnessError
from harness.sim.machine import MachineFactory, ReferenceMachine
from harness.sim.simulator import SimOptions
from reference_machine import WorkflowDefinition

__all__ = [
    "engines_group",
    "hypothesis_fuzz",
    "native_fuzz",
]

def native_fuzz(definition: WorkflowDefinition, runs: int, processes: int = 1, *,
                machine: MachineFactory = ReferenceMachine,
                strategy: str | None = None,
                line_coverage: tuple[str, ...] = ()) -> Callable[[], int]:
    """Gives a call that fuzzes `runs` seeded runs (every fault, one execution each, nothing
    written; the default strategy unless told, steered by `line_coverage`'s arcs too); the
    call gives the steps simulated."""
    options = FuzzOptions(runs=runs, replay_dir=None, processes=processes,
                          sim=SimOptions(executions=1))
    if strategy is not None:
        options = replace(options, strategy=strategy, line_coverage=line_coverage)

    def campaign() -> int:
        report = fuzz(definition, options, machine=machine)
        if report.failures:
            raise HarnessError(f"{definition.name}: the benchmark campaign failed: "
                               f"{report.failures[0].violations[0].message}")
        return report.steps

    return campaign


def hypothesis_fuzz(definition: WorkflowDefinition, examples: int, steps: int = 30, *,
                    machine: MachineFactory = ReferenceMachine,
                    isolate: bool = True) -> Callable[[], int]:
    """Gives a call that runs the Hypothesis machine of the same workflow for `examples`
    examples (every fault it can draw, one execution; in a child process, or with `isolate`
    false in this one); the call gives the steps simulated."""
    from hypothesis import HealthCheck, settings
    from hypothesis.stateful import run_state_machine_as_test

    from harness.engines.stateful import workflow_machine

    def campaign() -> int:
        taken = [0]
        tested = workflow_machine(definition, machine=machine,
                                  options=SimOptions(executions=1), isolate=isolate)
        teardown = tested.teardown

        def counting(self: Any) -> None:
            teardown(self)
            taken[0] += self.steps

        tested.teardown = counting  # type: ignore[method-assign]
        run_state_machine_as_test(tested, settings=settings(
            max_examples=examples, stateful_step_count=steps, database=None, deadline=None,
            derandomize=True, suppress_health_check=list(HealthCheck)))
        return taken[0]

    return campaign


def engines_group(definition: WorkflowDefinition, machine: MachineFactory, quick: bool
                  ) -> Group:
    """Gives native fuzzing beside the Hypothesis machine on a definition's machine."""
    return Group(f"engines: {definition.name}, every fault, 1 execution a run", (
        Contender("native fuzz (floor)",
                  lambda stack: native_fuzz(definition, 20 if quick else 100, machine=machine),
                  0, "step"),
        Contender("hypothesis machine",
                  lambda stack: hypothesis_fuzz(definition, 5 if quick else 25,
                                                machine=machine), 0, "step"),
        Contender("hypothesis machine, in the test's process (isolate=False)",
                  lambda stack: hypothesis_fuzz(definition, 5 if quick else 25,
                                                machine=machine, isolate=False), 0, "step")))
