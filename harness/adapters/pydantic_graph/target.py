"""The target: `pydantic_graph_target(graph, start=...)` and `PydanticGraphTarget`, the
machine factory that holds the user's graph and the workflow definition read off it."""

from __future__ import annotations

import copy
import importlib
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from harness.adapters.peers import AdapterError, safe_ids
from harness.adapters.pydantic_graph.box import NodeBox
from harness.adapters.pydantic_graph.common import CRASH_POINTS, END, FAILED_EVENT, RECOVERIES
from harness.adapters.pydantic_graph.machine import PydanticGraphMachine
from harness.adapters.replay_units import load_read
from harness.sim.machine import Probe
from reference_machine import Tool, WorkflowDefinition

__all__ = ["PydanticGraphTarget", "pydantic_graph_target"]


class PydanticGraphTarget:
    """A machine factory over a pydantic-graph `Graph`: `target(definition, tools, probe)`
    gives a `PydanticGraphMachine`, and `target.definition` is what was read off the
    graph."""

    crash_points: Sequence[str] = CRASH_POINTS

    def __init__(self, graph: Any, *, start: Any, state: Any, deps: Any,
                 tools: Mapping[str, Mapping[str, Any]] | None, name: str | None,
                 recovery: str, one_runner_per_run: bool, module: str | None) -> None:
        base = _require_pydantic_graph()
        if recovery not in RECOVERIES:
            raise AdapterError(f"recovery {recovery!r}: expected one of {', '.join(RECOVERIES)}")
        if not isinstance(graph, base.Graph):
            raise AdapterError(
                f"{type(graph).__name__} is not a pydantic-graph Graph of BaseNode classes (the "
                f"runner that has FileStatePersistence; the GraphBuilder API has no "
                f"persistence to test): wrap a pydantic_graph.graph.Graph")
        self.graph, self.state, self.deps = graph, state, deps
        self.recovery, self.one_runner_per_run = recovery, one_runner_per_run
        nodes = list(graph.node_defs)
        first: Any = start if isinstance(start, type) else type(start)
        if not isinstance(start, (type, base.BaseNode)) or first.get_node_id() not in nodes:
            raise AdapterError(f"start is {start!r}: give a node of the graph (an instance, or "
                               f"a class made with no arguments); its nodes: {', '.join(nodes)}")
        self.start = start
        self.next_nodes = _moves(graph)
        self.name = name or graph.name or first.get_node_id()
        self.__qualname__ = f"pydantic_graph:{self.name}"
        self.__module__ = module or __name__
        self.state_ids = safe_ids([*nodes, END])
        self.initial = self.state_ids[first.get_node_id()]
        self.definition = self._definition(nodes, tools or {})
        self.snapshot_types: Any = None  # the persistence's type adapter, made once

    def start_node(self) -> Any:
        """Gives a new start node for one run."""
        return self.start() if isinstance(self.start, type) else copy.deepcopy(self.start)

    def first_state(self) -> Any:
        """Gives the state one run starts with (a copy: nodes change it)."""
        return self.state() if callable(self.state) else copy.deepcopy(self.state)

    def deps_for(self, box: NodeBox) -> Any:
        """Gives the run's `ctx.deps`: the box itself by default, or `deps(box)`."""
        if self.deps is None:
            return box
        return self.deps(box) if callable(self.deps) else self.deps

    def _definition(self, nodes: Sequence[str], tools: Mapping[str, Mapping[str, Any]]
                    ) -> WorkflowDefinition:
        ids = self.state_ids
        states: dict[str, dict[str, Any]] = {ids[END]: {"type": "final",
                                                         "outcome": "success"}}
        for node in nodes:
            targets = [ids[t] for t in self.next_nodes[node]]
            # a node failed on a tool waits for its retry, which may take the run on; back to
            # itself only where that can be seen: a retry that fails again under `requeue` or
            # `resume` saves no new snapshot (the observed version stays), under `rerun` it
            # starts the node on a new one
            again = [ids[node]] if self.recovery == "rerun" else []
            state: dict[str, Any] = {
                "on": {FAILED_EVENT: [{"target": t} for t in dict.fromkeys([*again,
                                                                           *targets])]}}
            if targets:
                state["always"] = [{"target": t} for t in targets]
            if ids[node] == self.initial:
                state["initial"] = True
            if ids[node] != node:
                state["description"] = node
            states[ids[node]] = state
        return _loaded(self.name, tools, states)

    def __call__(self, definition: WorkflowDefinition, tools: Mapping[str, Tool],
                 probe: Probe) -> PydanticGraphMachine:
        return PydanticGraphMachine(self, tools, probe)

    def __repr__(self) -> str:
        return f"<pydantic-graph target {self.name} ({self.recovery})>"


def _moves(graph: Any) -> dict[str, tuple[str, ...]]:
    """Gives each node's possible next nodes, as pydantic-graph read them off the return
    annotation of its `run` (`End` is `__end__`; a bare `BaseNode`, any node)."""
    nodes = list(graph.node_defs)
    moves: dict[str, tuple[str, ...]] = {}
    for node, spec in graph.node_defs.items():
        targets = list(nodes) if spec.returns_base_node else list(spec.next_node_edges)
        if spec.end_edge is not None:
            targets.append(END)
        moves[node] = tuple(dict.fromkeys(targets))
    if not any(END in targets for targets in moves.values()):
        raise AdapterError("no node of the graph can end the run (none returns End[...]): "
                           "the adapter needs a run that ends")
    return moves


def _loaded(name: str, tools: Mapping[str, Mapping[str, Any]],
            states: dict[str, dict[str, Any]]) -> WorkflowDefinition:
    """Gives the definition of the graph. The nodes' own code routes, so the eventless moves
    are unguarded; a graph that loops gets guards that only keep the format from refusing
    the loop as an eventless cycle."""
    spec = {"name": name, "version": 1, "context": {"route": ""},
            "tools": {tool: dict(each) for tool, each in tools.items()},
            "events": {FAILED_EVENT: {"sources": ["system"]}}, "states": states}
    return load_read(spec, "graph")


def _require_pydantic_graph() -> Any:
    try:
        graph = importlib.import_module("pydantic_graph.graph")
        importlib.import_module("pydantic_graph.persistence.file")
    except ImportError as error:
        raise AdapterError("pydantic-graph 1.x is not installed (2.x has no persistence): pip "
                           "install 'pydantic-graph<2'") from error
    return graph


def pydantic_graph_target(graph: Any, *, start: Any, state: Any = None, deps: Any = None,
                          tools: Mapping[str, Mapping[str, Any]] | None = None,
                          name: str | None = None, recovery: str = "requeue",
                          one_runner_per_run: bool = True) -> PydanticGraphTarget:
    """Wraps a pydantic-graph `Graph` (see the package). `start` is the node each run starts
    from (an instance, copied per run, or a class), `state` the state it starts with (a
    value, copied per run, or a function giving one), `deps` the nodes' `ctx.deps` (default:
    the `NodeBox`; a function of the box, or a value), `tools` the simulated tools as in a
    definition file, `recovery` what a restarted worker does with a run whose last snapshot
    pydantic-graph will not run again (`requeue`: sets it back to `created`, then
    `iter_from_persistence`; `rerun`: starts its node again from its saved state with
    `graph.iter`, a new snapshot; `resume`: `iter_from_persistence` alone, as pydantic-graph
    does, which raises), and `one_runner_per_run` the deployment's contract that one run is
    never driven by two workers at once (a second worker otherwise takes the same run)."""
    return PydanticGraphTarget(graph, start=start, state=state, deps=deps, tools=tools,
                               name=name, recovery=recovery,
                               one_runner_per_run=one_runner_per_run,
                               module=sys._getframe(1).f_globals.get("__name__"))
