"""A machine factory that keeps what it makes, so a test can read a run's store afterwards."""

from __future__ import annotations

from collections.abc import Mapping

from harness import MachineFactory, Probe, ReferenceMachine
from reference_machine import Tool, WorkflowDefinition


def recording_factory() -> tuple[MachineFactory, list[ReferenceMachine]]:
    """Gives a machine factory that keeps each machine it makes, so its store can be read."""
    made: list[ReferenceMachine] = []

    def factory(definition: WorkflowDefinition, tools: Mapping[str, Tool],
                probe: Probe) -> ReferenceMachine:
        machine = ReferenceMachine(definition, tools, probe)
        made.append(machine)
        return machine

    return factory, made
