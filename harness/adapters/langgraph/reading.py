"""Reading the user's graph: its nodes, each node's possible next nodes, the nodes that ask a
human and the error handlers; what the adapter does not model is refused here."""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Sequence
from typing import Any, NamedTuple

from harness.adapters.langgraph.common import END, START
from harness.adapters.peers import AdapterError

__all__ = ["NodeCode", "async_nodes", "error_handlers", "read_graph", "read_node"]


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
        name for name, spec in builder.nodes.items() if read_node(spec).asks)
    return nodes, moves, asking


def async_nodes(builder: Any) -> list[str]:
    """Gives the nodes whose code is `async def` (LangGraph runs them only through
    `ainvoke`/`astream`)."""
    return [str(name) for name, spec in builder.nodes.items()
            if getattr(getattr(spec, "runnable", None), "func", True) is None
            and getattr(spec.runnable, "afunc", None) is not None]


def error_handlers(builder: Any) -> dict[str, tuple[str, ...]]:
    """Gives each error handler node and the nodes whose failures it handles."""
    handles: dict[str, list[str]] = {}
    for name, spec in builder.nodes.items():
        handler = getattr(spec, "error_handler_node", None)
        if handler:
            handles.setdefault(str(handler), []).append(str(name))
    return {handler: tuple(nodes) for handler, nodes in handles.items()}


#: What a node calls to reach a tool: the box's `call`, a LangChain tool's `invoke`, ...
_TOOL_CALLS = frozenset({"call", "invoke", "ainvoke", "run", "arun", "batch", "abatch",
                         "stream", "astream"})


class NodeCode(NamedTuple):
    """What a node's code was read to do (its source and that of the functions it calls by
    name, three calls deep): whether it asks a human (`interrupt()`), may ask again after an
    answer (an `interrupt()` in a loop, or two), and may fail on a tool."""

    asks: bool
    asks_again: bool
    may_fail: bool


def read_node(spec: Any) -> NodeCode:
    """Reads a node's code (see `NodeCode`); a node whose code cannot be read may do
    anything but ask (the adapter then tells as the graph runs)."""
    runnable = getattr(spec, "runnable", None)
    if type(runnable).__name__ == "ToolNode":
        return NodeCode(False, False, True)
    function = getattr(runnable, "func", None) or getattr(runnable, "afunc", None)
    if function is None:
        return NodeCode(False, False, True)
    found = _Found()
    _read(function, 3, set(), found, False)
    return NodeCode(found.asks > 0, found.asks > 1 or found.looped,
                    found.unread or bool(found.called & _TOOL_CALLS))


class _Found:
    def __init__(self) -> None:
        self.asks, self.looped, self.unread = 0, False, False
        self.called: set[str] = set()


def _read(function: Any, depth: int, seen: set[int], found: _Found, looping: bool) -> None:
    function = inspect.unwrap(function)
    if id(function) in seen or not inspect.isfunction(function):
        return
    seen.add(id(function))
    if function.__module__.startswith("langgraph."):
        return  # LangGraph's own code: its `interrupt` is what the user calls
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        found.unread = True
        return
    names = _names_of(function)
    loops = [node for node in ast.walk(tree)
             if isinstance(node, ast.For | ast.AsyncFor | ast.While)]
    in_loop = {id(inner) for loop in loops for inner in ast.walk(loop)}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        called = node.func
        name = called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", "")
        found.called.add(name)
        looped = looping or id(node) in in_loop
        if name == "interrupt":
            found.asks += 1
            found.looped = found.looped or looped
        elif depth > 1 and isinstance(called, ast.Name):
            _read(names.get(called.id), depth - 1, seen, found, looped)


def _names_of(function: Any) -> dict[str, Any]:
    """Gives what the names a function calls are bound to: its module's globals, its
    closure's cells."""
    names = dict(getattr(function, "__globals__", {}))
    code = function.__code__
    for name, cell in zip(code.co_freevars, function.__closure__ or (), strict=False):
        try:
            names[name] = cell.cell_contents
        except ValueError:  # a cell not yet filled
            continue
    return names
