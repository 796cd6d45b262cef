"""The target: `langgraph_target(build)` and `LangGraphTarget`, the machine factory that
builds the user's graph and holds the workflow definition read off it."""

from __future__ import annotations

import importlib
import itertools
import os
import shutil
import sqlite3
import sys
import tempfile
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.adapters.langgraph.box import GraphBox
from harness.adapters.langgraph.common import (
    ANSWER_EVENT,
    CRASH_POINTS,
    DURABILITIES,
    END,
    FAILED_EVENT,
    START,
)
from harness.adapters.langgraph.machine import LangGraphMachine
from harness.adapters.langgraph.reading import (
    async_nodes,
    error_handlers,
    read_graph,
    read_node,
)
from harness.adapters.langgraph.saver import sqlite_saver
from harness.adapters.peers import AdapterError, safe_ids
from harness.adapters.replay_units import FOREVER, load_read
from harness.sim.machine import Probe
from reference_machine import (
    Event,
    Tool,
    WorkflowDefinition,
)

__all__ = ["LangGraphTarget", "langgraph_target"]


class LangGraphTarget:
    """A machine factory over a LangGraph graph: `target(definition, tools, probe)` gives a
    `LangGraphMachine`, and `target.definition` is what was read off the graph."""

    crash_points: Sequence[str] = CRASH_POINTS

    def __init__(self, build: Callable[[GraphBox], Any], *, name: str | None,
                 tools: Mapping[str, Mapping[str, Any]] | None, input: Any,
                 durability: str, saver: Callable[[sqlite3.Connection], Any] | None,
                 interrupts: Sequence[str] | None, answers: Mapping[str, Any] | None,
                 dedupe: bool, recursion_limit: int, resubmit: bool,
                 one_runner_per_thread: bool, async_saver: Callable[[Any], Any] | None,
                 tool_nodes: Sequence[str] | None, asks_again: Sequence[str] | None,
                 module: str | None) -> None:
        _require_langgraph()
        if durability not in DURABILITIES:
            raise AdapterError(f"durability {durability!r}: expected one of "
                               f"{', '.join(DURABILITIES)}")
        self.build, self.durability, self.input = build, durability, input
        self.saver = saver or sqlite_saver
        self.answers = dict(answers) if answers else {"approve": True, "deny": False}
        self.dedupe, self.recursion_limit = dedupe, recursion_limit
        self.resubmit, self.one_runner_per_thread = resubmit, one_runner_per_thread
        builder = self.builder(GraphBox({}, None))
        nodes, moves, asking = read_graph(builder, interrupts)
        self.name = name or getattr(build, "__name__", "graph").strip("_<>") or "graph"
        self.__qualname__ = f"langgraph:{self.name}"
        self.__module__ = module or getattr(build, "__module__", None) or __name__
        self.state_ids = safe_ids([START, *nodes, END])
        self.asking = asking
        codes = {str(name): read_node(spec) for name, spec in builder.nodes.items()}
        named = {"tool_nodes": tool_nodes or (), "asks_again": asks_again or ()}
        for what, names in named.items():
            unknown = sorted(set(names) - set(nodes))
            if unknown:
                raise AdapterError(f"{what} names nodes the graph lacks: {', '.join(unknown)}")
        # the nodes that may fail on a tool (a retry then runs them again), and those that
        # may ask their human again after an answer
        self.failing = frozenset(node for node in nodes if codes[node].may_fail) | frozenset(
            tool_nodes or ())
        self.asks_again = frozenset(node for node in asking if codes[node].asks_again
                                    ) | frozenset(asks_again or ())
        self.next_nodes = {source: frozenset(targets) for source, targets in moves.items()}
        self.handles = error_handlers(builder)
        self.async_saver = async_saver
        # a graph with an async node runs through `astream`, as does one with an async saver
        self.asynchronous = bool(async_nodes(builder)) or async_saver is not None
        self.definition = self._definition(nodes, moves, asking, tools or {})
        self._files: tuple[int, Path, Iterator[int]] | None = None

    def builder(self, box: GraphBox) -> Any:
        """Gives the `StateGraph` `build(box)` makes (a compiled graph's builder)."""
        built = self.build(box)
        graph = getattr(built, "builder", built)
        if not (hasattr(graph, "compile") and hasattr(graph, "nodes")
                and hasattr(graph, "edges")):
            raise AdapterError(f"build gave {type(built).__name__}, not a LangGraph StateGraph "
                               f"(or a graph compiled from one)")
        return graph

    def input_of(self, context: Mapping[str, Any]) -> Any:
        if callable(self.input):
            return self.input(dict(context))
        return dict(context) if self.input is None else self.input

    def answer(self, decision: str, event: Event) -> Any:
        """Gives the resume value of a human's `decision`."""
        found = self.answers[decision]
        return found(event) if callable(found) else found

    def new_file(self) -> Path:
        """Gives a new SQLite file for one run's machine (its workers share it; the machine
        removes it as the run ends), in a folder of this process's."""
        if (self._files is None or self._files[0] != os.getpid()
                or not self._files[1].is_dir()):
            folder = Path(tempfile.mkdtemp(prefix="fsmharness-langgraph-"))
            self._files = (os.getpid(), folder, itertools.count(1))
            weakref.finalize(self, shutil.rmtree, folder, True)  # what a machine left open
        _, folder, numbers = self._files
        return folder / f"run-{next(numbers)}.sqlite"

    def _definition(self, nodes: Sequence[str], moves: Mapping[str, Sequence[str]],
                    asking: frozenset[str], tools: Mapping[str, Mapping[str, Any]]
                    ) -> WorkflowDefinition:
        ids = self.state_ids
        states: dict[str, dict[str, Any]] = {
            ids[START]: {"initial": True, "always": _always(moves.get(START, ()), ids)},
            ids[END]: {"type": "final", "outcome": "success"},
        }
        siblings: dict[str, list[str]] = {}  # nodes one superstep may run side by side
        for targets in moves.values():
            for target in targets:
                siblings.setdefault(target, []).extend(ids[t] for t in targets)
        for node in nodes:
            targets = [ids[t] for t in moves.get(node, ())]
            # a retry, or a look at a thread whose superstep runs several nodes, may show it
            # in any of them
            again = [{"target": t} for t in dict.fromkeys([ids[node], *targets,
                                                           *siblings.get(node, ())])]
            # a node that may fail on a tool waits for a retry; one that asks, for its
            # human's answer as long as it takes. Back to itself only where it may be seen
            # to: a retry that fails again saves no checkpoint (nothing moves), an answer is
            # asked again only where the node asks in a loop (or twice)
            onward = [move for move in again
                      if move["target"] != ids[node] or ids[node] in targets]
            state: dict[str, Any] = {"on": {FAILED_EVENT: onward} if node in self.failing
                                     else {}}
            if node in asking:
                state.update(type="wait", after={"delay": FOREVER, "target": ids[END]})
                state["on"][ANSWER_EVENT] = again if node in self.asks_again else onward
            elif targets:
                state["always"] = _always(moves[node], ids)
            if ids[node] != node:
                state["description"] = node
            states[ids[node]] = state
        return _loaded(self.name, tools, states, sorted(self.answers))

    def __call__(self, definition: WorkflowDefinition, tools: Mapping[str, Tool],
                 probe: Probe) -> LangGraphMachine:
        return LangGraphMachine(self, tools, probe)

    def __repr__(self) -> str:
        return f"<langgraph target {self.name} ({self.durability})>"


def _always(targets: Sequence[str], ids: Mapping[str, str]) -> list[dict[str, Any]]:
    return [{"target": ids[target]} for target in targets]


def _loaded(name: str, tools: Mapping[str, Mapping[str, Any]],
            states: dict[str, dict[str, Any]], answers: Sequence[str]) -> WorkflowDefinition:
    """Gives the definition of the graph. The graph's own code routes, so its eventless moves
    are unguarded; a graph that loops (an agent calling tools until done) gets guards that
    only keep the format from refusing the loop as an eventless cycle."""
    answer = {"type": "object", "required": ["decision"], "additionalProperties": False,
              "properties": {"decision": {"enum": list(answers)}}}
    spec = {"name": name, "version": 1, "context": {"route": ""},
            "tools": {tool: dict(each) for tool, each in tools.items()},
            "events": {FAILED_EVENT: {"sources": ["system"]},
                       ANSWER_EVENT: {"sources": ["human"], "payload": answer}},
            "states": states}
    return load_read(spec, "graph")


def _require_langgraph() -> None:
    try:
        importlib.import_module("langgraph.graph")
    except ImportError as error:
        raise AdapterError("langgraph is not installed: pip install 'fsmharness[langgraph]'"
                           ) from error


def langgraph_target(build: Callable[[GraphBox], Any], *, name: str | None = None,
                     tools: Mapping[str, Mapping[str, Any]] | None = None,
                     input: Any = None, durability: str = "sync",
                     saver: Callable[[sqlite3.Connection], Any] | None = None,
                     interrupts: Sequence[str] | None = None,
                     answers: Mapping[str, Any] | None = None, dedupe: bool = True,
                     recursion_limit: int = 50, resubmit: bool = True,
                     one_runner_per_thread: bool = False,
                     async_saver: Callable[[Any], Any] | None = None,
                     tool_nodes: Sequence[str] | None = None,
                     asks_again: Sequence[str] | None = None) -> LangGraphTarget:
    """Wraps a LangGraph graph (see the module). `input` is the run's input (a value, or a
    function of the start context; default: the context), `durability` LangGraph's
    (`sync`, `async`, `exit`), `saver(connection)` the checkpointer on the run's SQLite file
    (default `SqliteSaver`), `answers` the resume value of each decision a human may give
    (default `{"approve": True, "deny": False}`; a value, or a function of the event),
    `dedupe` whether the API in front of the graph drops an event it already took (turn it
    off to see what LangGraph does with a redelivered answer), `resubmit`
    whether recovery runs a thread that has no checkpoint from its input again (else it calls
    `invoke(None)`, which LangGraph refuses with `EmptyInputError`), and
    `one_runner_per_thread` the deployment's contract that one thread is never run by two
    workers at once (a queue with one consumer per thread, a lease): no second worker then
    runs it beside the first (the campaign says so in its notes). A graph with an `async def`
    node runs through `astream`; `async_saver(connection)` (`AsyncSqliteSaver`) is its
    checkpointer on an aiosqlite connection to the run's file, instead of `saver`.
    `tool_nodes` and `asks_again` name the nodes that call a tool, and that ask their human
    again after an answer, where the adapter cannot read it off their code (it says so as
    the graph runs, and stops)."""
    return LangGraphTarget(build, name=name, tools=tools, input=input,
                           durability=durability, saver=saver, interrupts=interrupts,
                           answers=answers, dedupe=dedupe,
                           recursion_limit=recursion_limit, resubmit=resubmit,
                           one_runner_per_thread=one_runner_per_thread,
                           async_saver=async_saver, tool_nodes=tool_nodes,
                           asks_again=asks_again,
                           module=sys._getframe(1).f_globals.get("__name__"))
