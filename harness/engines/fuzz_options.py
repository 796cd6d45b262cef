"""How a fuzz campaign runs: `FuzzOptions`, checked when made, and the defaults the command
line and the pytest plugin share (`RUNS_DEFAULT`, `DEFAULT_STRATEGY`, `EXECUTORS`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from harness.checks.adequacy import check_acknowledged
from harness.checks.lines import check_sources
from harness.engines.guided import STRATEGIES, Strategy
from harness.errors import HarnessError
from harness.sim.simulator import SimOptions

__all__ = ["DEFAULT_STRATEGY", "EXECUTORS", "RUNS_DEFAULT", "ExecutorKind", "FuzzOptions"]

#: The runs of a campaign unless told, the command line's and the pytest plugin's too: enough
#: that each bundled naive scenario breaks in at least 19 campaigns of 20 (its slowest, the
#: pull request opened twice, needs up to 473 runs over 20 base seeds; measured with
#: `python tools/measure_power.py`).
RUNS_DEFAULT = 500


class ExecutorKind(StrEnum):
    """Where a campaign's runs go (`FuzzOptions.executor`): local worker processes (or this
    process), or tasks on a Dask cluster."""

    LOCAL = "local"
    DASK = "dask"


#: The executors a campaign can take, as the command line and the plugin name them.
EXECUTORS = tuple(kind.value for kind in ExecutorKind)
DEFAULT_STRATEGY = Strategy.SWARM.value
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
    executor: str = ExecutorKind.LOCAL.value  # where the runs go: local processes or a Dask cluster
    scheduler: str | None = None  # the Dask scheduler's address (None: a local cluster)
    untested: Mapping[str, str] = field(default_factory=dict)  # gap code -> why it may be

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise HarnessError(f"options.strategy: expected one of {', '.join(STRATEGIES)}, "
                               f"got {self.strategy!r}")
        if self.corpus_dir is not None and self.strategy == Strategy.SWARM:
            raise HarnessError("options.corpus_dir: a corpus is kept by the guided strategies; "
                               "give strategy guided or mixed (swarm runs keep none)")
        if self.line_coverage and self.strategy == Strategy.SWARM:
            raise HarnessError("options.line_coverage: line coverage steers the guided "
                               "strategies; give strategy guided or mixed (swarm runs are "
                               "blind to it)")
        if self.line_coverage:
            check_sources(self.line_coverage)
        if self.executor not in EXECUTORS:
            raise HarnessError(f"options.executor: expected one of {', '.join(EXECUTORS)}, got "
                               f"{self.executor!r}")
        if self.scheduler is not None and self.executor != ExecutorKind.DASK:
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
