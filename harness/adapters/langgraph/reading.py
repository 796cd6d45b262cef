"""Reading the user's graph: its nodes, each node's possible next nodes, the nodes that ask a
human and the error handlers; what the adapter does not model is refused here."""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Sequence
from typing import Any

from harness.adapters.langgraph.common import END, START
from harness.adapters.peers import AdapterError

__all__ = ["error_handlers", "read_graph"]


def read_graph(builder: Any, interrupts: Sequence[str] | None
          ) -> tuple[list[str], dict[str, list[str]], frozenset[str]]:
    """Gives the graph's nodes, each node's possible next nodes (START's too) and the nodes
    that ask a human; refuses what the adapter does not model."""
    nodes = [str(name) for name in builder.nodes]
    everything = [*nodes, END]
    moves: dict[str, list[str]] = {}

    def add(source: str, target: str) -> None:
        targets = moves.setdefault(source, [])
        if target not in targets:
            targets.append(target)

    for name, spec in builder.nodes.items():
        runnable = getattr(spec, "runnable", None)
        if hasattr(runnable, "get_graph") and hasattr(runnable, "builder"):
            raise AdapterError(f"node {name!r} is a subgraph, which the adapter does not "
                               f"model; add its nodes to the graph, or fuzz the subgraph alone")
        if getattr(spec, "is_error_handler", False) or getattr(spec, "defer", False):
            pass  # an error handler or a deferred node is a node like another
        for target in getattr(spec, "ends", None) or ():
            add(str(name), str(target))
        handler = getattr(spec, "error_handler_node", None)
        if handler:  # a failure that its retries do not mend runs the node's handler
            add(str(name), str(handler))
    for source, target in sorted(builder.edges):
        add(str(source), str(target))
    for sources, target in sorted(getattr(builder, "waiting_edges", ()) or ()):
        for source in sources:
            add(str(source), str(target))
    for source, branches in builder.branches.items():
        for branch in branches.values():
            ends = getattr(branch, "ends", None)
            for target in (ends.values() if ends else everything):
                add(str(source), str(target))
    for name, spec in builder.nodes.items():  # a handler goes on as its node would have
        handler = getattr(spec, "error_handler_node", None)
        if handler:
            for target in moves.get(str(name), ()):
                if target != handler:
                    add(str(handler), target)
    for name in nodes:  # a node no edge leaves ends the run, as END does
        moves.setdefault(name, [END])
    if START not in moves:
        raise AdapterError("the graph has no edge from START; add one (graph.add_edge(START, "
                           "'first'))")
    unknown = sorted({t for targets in moves.values() for t in targets} - set(everything))
    if unknown:
        raise AdapterError(f"the graph moves to {', '.join(unknown)}, which it has no node "
                           f"for")
    named = set(interrupts or ())
    missing = sorted(named - set(nodes))
    if missing:
        raise AdapterError(f"interrupts names nodes the graph lacks: {', '.join(missing)}")
    asking = frozenset(named) | frozenset(
        name for name, spec in builder.nodes.items() if _calls_interrupt(spec))
    return nodes, moves, asking


def error_handlers(builder: Any) -> dict[str, tuple[str, ...]]:
    """Gives each error handler node and the nodes whose failures it handles."""
    handles: dict[str, list[str]] = {}
    for name, spec in builder.nodes.items():
        handler = getattr(spec, "error_handler_node", None)
        if handler:
            handles.setdefault(str(handler), []).append(str(name))
    return {handler: tuple(nodes) for handler, nodes in handles.items()}


def _calls_interrupt(spec: Any) -> bool:
    """Tells whether a node's code calls `interrupt(...)` (read off its source)."""
    function = getattr(getattr(spec, "runnable", None), "func", None)
    if function is None:
        return False
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            called = node.func
            name = called.attr if isinstance(called, ast.Attribute) else getattr(
                called, "id", "")
            if name == "interrupt":
                return True
    return False
