"""The exhaustive group of `fsmharness bench` (`--only exhaustive`): the exhaustive search's
time per distinct state beside a bare breadth-first search of the same graph.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from harness.bench.simulator import simulate_seeds
from harness.bench.timing import Contender, Group
from harness.sim.machine import MachineFactory
from harness.sim.simulator import SimOptions, Simulator, plan_for
from reference_machine import WorkflowDefinition

__all__ = [
    "exhaustive_group",
]

def exhaustive_group(definition: WorkflowDefinition, machine: MachineFactory, quick: bool
                     ) -> Group:
    """Gives the exhaustive search's time per distinct state beside a bare breadth-first
    search of the same graph, on the same simulator, plan and machine. A bare BFS that could
    keep its states expands every edge once: one simulated step from a state already reached
    per edge, so its time per distinct state is a simulated step's times the graph's edges
    per state (the edges are the runs the search makes: one per way a step from a frontier
    state can go). The search pays, on top, the rebuilding of each path from the start, the
    fingerprints and the checks of every run."""
    from harness.engines.exhaustive import ExploreOptions, explore

    depth = 4 if quick else 5
    options = ExploreOptions(depth=depth)
    graph = explore(definition, options, machine=machine)
    sim = SimOptions(steps_max=depth, liveness_steps=0,
                     plan=replace(plan_for(definition), swarm=False))
    simulator = Simulator(definition, sim, machine)
    seeds = range(10 if quick else 40)

    def bare_bfs(stack: contextlib.ExitStack) -> Callable[[], float]:
        steps = simulate_seeds(simulator, seeds)
        return lambda: steps() * graph.states / graph.runs  # the states those steps expand

    def search(stack: contextlib.ExitStack) -> Callable[[], int]:
        return lambda: explore(definition, options, machine=machine).states

    def extra() -> dict[str, dict[str, Any]]:
        return {"exhaustive search, per distinct state": {
            "states": graph.states, "edges": graph.runs,
            "edges_per_state": round(graph.runs / max(graph.states, 1), 2)}}

    return Group(f"exhaustive: {definition.name}, depth {depth}, 1 fault", (
        Contender("bare BFS, a simulated step per edge (floor)", bare_bfs, 0, "state"),
        Contender("exhaustive search, per distinct state", search, 0, "state")), extra=extra)
