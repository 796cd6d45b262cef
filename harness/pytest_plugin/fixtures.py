"""The fixtures that build pieces for a test to drive itself: `fsm_settings`,
`fsm_fault_plan`, `fsm_simulator`, `fsm_tool_world` and `fsm_frozen_clock` (`fsm_fuzz`
and `fsm_report` run campaigns, so they live in `campaigns`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import freezegun
import pytest

from fault_injection import FaultPlan, default_plan, no_faults
from harness.adapters.targets import Target
from harness.engines.campaign import plan_of, select_faults
from harness.pytest_plugin.settings import FsmSettings, session_settings
from harness.sim.choices import Choices
from harness.sim.machine import MachineFactory, ReferenceMachine
from harness.sim.simulator import FROZEN_EPOCH, SimOptions, Simulator
from harness.sim.world import Clock, ToolWorld
from reference_machine import WorkflowDefinition, load_definition


@pytest.fixture
def fsm_settings(request: pytest.FixtureRequest) -> FsmSettings:
    """The session's campaign settings (seed, runs, budget, faults, report folder)."""
    return session_settings(request.config)


@pytest.fixture
def fsm_fault_plan(fsm_settings: FsmSettings) -> FaultPlan:
    """The fault plan `--fsm-faults` selects, at the default rates."""
    return select_faults(default_plan(), fsm_settings.faults)


@pytest.fixture
def fsm_simulator(request: pytest.FixtureRequest, fsm_settings: FsmSettings
                  ) -> Callable[..., Simulator]:
    """Builds a simulator: `fsm_simulator(definition, machine=None, **sim_options)`, seeded
    from the session's seed and the test's id, under the session's fault selection."""

    def build(definition: Any, machine: MachineFactory | None = None,
              **options: Any) -> Simulator:
        target = Target(request.node.nodeid, load_definition(definition),
                        machine or ReferenceMachine)
        options.setdefault("seed", fsm_settings.seed_for(request.node.nodeid))
        options.setdefault("plan", plan_of(target, fsm_settings.faults))
        return Simulator(target.definition, SimOptions(**options), target.machine)

    return build


class SimulatedWorld(ToolWorld):
    """A tool world on its own, as `fsm_tool_world` builds it: `tools` to call, `ledger` of
    what took effect, `records` of what happened, `clock` to move."""

    def __init__(self, definition: WorkflowDefinition, plan: FaultPlan, seed: int) -> None:
        self.clock = Clock()
        self.records: list[Any] = []
        super().__init__(definition, plan, Choices(seed), self.clock, self.records.append,
                         seed=seed)


@pytest.fixture
def fsm_tool_world(request: pytest.FixtureRequest, fsm_settings: FsmSettings
                   ) -> Callable[..., SimulatedWorld]:
    """Builds the simulated tools of a definition: `fsm_tool_world(definition, faults=False)`
    (with `faults=True`, the session's fault selection strikes the calls)."""

    def build(definition: Any, faults: bool = False) -> SimulatedWorld:
        target = Target(request.node.nodeid, load_definition(definition))
        plan = plan_of(target, fsm_settings.faults) if faults else no_faults()
        return SimulatedWorld(target.definition, plan,
                              fsm_settings.seed_for(request.node.nodeid))

    return build


@pytest.fixture
def fsm_frozen_clock() -> Iterator[Any]:
    """Freezes wall time (`datetime.now()`, `time.time()`) at fsmharness's epoch for code
    under test that reads it; `fsm_frozen_clock.tick(seconds)` moves it."""
    with freezegun.freeze_time(FROZEN_EPOCH) as frozen:
        yield frozen
