"""What a graph's nodes are given (`NodeBox`: the simulated tools and the node running, its
idempotency keys), and `harnessed`, pydantic-graph's runtime pinned to run under the
simulator: snapshot ids from the run's own counter, times pinned, file I/O inline."""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from harness.adapters.peers import AdapterError
from harness.adapters.pydantic_graph.persistence import PINNED_TIME, Disk
from harness.adapters.replay_units import ToolFailed, Unit, UnitCalls
from reference_machine import Tool

if TYPE_CHECKING:
    from harness.adapters.pydantic_graph.machine import PydanticGraphMachine

__all__ = ["NodeBox", "ToolFailed", "harnessed"]


class NodeBox:
    """What a graph's nodes are given (as `ctx.deps`, or through `deps=`): the simulated
    tools, and the node running now. Its calls go through the replay-unit kit (`UnitCalls`):
    one run of a node's snapshot is the unit, its place in the run the step."""

    def __init__(self, tools: Mapping[str, Tool], machine: PydanticGraphMachine | None,
                 minted: bool = False) -> None:
        self._machine = machine
        self._calls = (UnitCalls(tools, machine, machine.disk.journal, "pydantic-graph",
                                 after_effect="after_tool_call",
                                 rerun_by="the worker's recovery")
                       if machine is not None else None)
        self._minted = minted  # a re-run gets a snapshot id of its own
        self.running: Unit | None = None
        self.snapshot_id = ""  # pydantic-graph's id of the running node's snapshot

    def begin(self, execution_id: str, snapshot_id: str) -> Unit:
        """A node's snapshot starts to run: gives its unit (the run, the node, its place in
        the run, the attempt)."""
        assert self._machine is not None
        disk = self._machine.disk
        node_id, _, _ = snapshot_id.rpartition(":")
        place = disk.places.get((execution_id, snapshot_id), 0)
        attempt = 1 + disk.failures.get((execution_id, place), 0)
        minted = ((("snapshot id pydantic-graph gave the node's run", snapshot_id),)
                  if self._minted else ())
        self.running = Unit(execution_id, node_id or snapshot_id, str(place), attempt, minted)
        self.snapshot_id = snapshot_id
        return self.running

    def ended(self, unit: Unit, *, failed: bool) -> None:
        assert self._calls is not None and self._machine is not None
        if failed:
            place = (unit.execution, int(unit.step))
            failures = self._machine.disk.failures
            failures[place] = failures.get(place, 0) + 1
        self._calls.ended(unit, "failed" if failed else "done")
        self.running = None

    def unit(self) -> Unit:
        if self.running is None:
            raise AdapterError("box.call and box.key work inside a node's run only")
        return self.running

    @property
    def execution_id(self) -> str:
        """The run being driven (the execution's id)."""
        return self.unit().execution

    @property
    def node(self) -> str:
        return self.unit().name

    @property
    def step(self) -> int:
        """The node's place in the run: 1 for the start node, n + 1 for the node the n-th
        returned; a node run again (after a crash, on a retry) keeps its place."""
        return int(self.unit().step)

    @property
    def attempt(self) -> int:
        """1, then 2, ... for each retry of a node that failed at this place."""
        return self.unit().attempt

    def key(self) -> str:
        """Gives `{run}/{node}/{place}`: the same on every attempt and every re-run."""
        return UnitCalls.key_of(self.unit())

    def call(self, tool: str, input: Mapping[str, Any], key: str | None = None) -> Any:
        """Calls a declared tool; gives its output (as the tool gave it), or raises
        `ToolFailed`. The key defaults to `key()`, the second call of one run `/2`, and so
        on: the same call gets the same key on every attempt and re-run."""
        if self._calls is None:
            raise AdapterError("no tool call while the graph is read")
        return self._calls.call(self.unit(), tool, input, key)

    def saving(self, write: Callable[..., Any], snapshots: Any, saves: Unit | None) -> None:
        assert self._calls is not None
        self._calls.saving("save", write, snapshots, saves=() if saves is None else (saves,))

    def crashed(self) -> None:
        self.running = None
        if self._calls is not None:
            self._calls.crashed()


async def _inline(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """pydantic-graph's `run_in_executor`, run in the calling thread at once: each read and
    write in the order pydantic-graph awaits them (it awaits them one after another)."""
    return function(*args, **kwargs)


_PATCHING = threading.RLock()


@contextlib.contextmanager
def harnessed(disk: Disk) -> Iterator[None]:
    """Runs pydantic-graph with its snapshot ids minted by the run's counter (uuid4 in
    production), its timestamps and durations pinned, its file I/O in the calling thread."""
    basenode: Any = importlib.import_module("pydantic_graph.basenode")
    times: Any = importlib.import_module("pydantic_graph.persistence._utils")
    file: Any = importlib.import_module("pydantic_graph.persistence.file")
    utils: Any = importlib.import_module("pydantic_graph._utils")
    with _PATCHING:
        saved = (basenode.generate_snapshot_id, times.now_utc, file.perf_counter,
                 utils.run_in_executor)
        basenode.generate_snapshot_id = disk.mint
        times.now_utc = lambda: PINNED_TIME
        file.perf_counter = lambda: 0.0
        utils.run_in_executor = _inline
        try:
            yield
        finally:
            (basenode.generate_snapshot_id, times.now_utc, file.perf_counter,
             utils.run_in_executor) = saved
