"""The machine wrapper: one worker driving pydantic-graph runs under the simulator
(`PydanticGraphMachine`), each run on its own `FileStatePersistence` file (kept in memory:
nothing to remove as the simulated run ends)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fault_injection import SimulatedCrash
from harness.adapters.peers import AdapterError
from harness.adapters.pydantic_graph.box import NodeBox, ToolFailed, harnessed
from harness.adapters.pydantic_graph.common import CRASH_POINTS, END, FAILED_EVENT, Dead
from harness.adapters.pydantic_graph.persistence import Disk, persistence_class
from harness.adapters.replay_units import Process, chain
from harness.sim.machine import Observation, Probe
from reference_machine import Event, Tool

if TYPE_CHECKING:
    from harness.adapters.pydantic_graph.target import PydanticGraphTarget

__all__ = ["PydanticGraphMachine"]

#: The statuses a run's last snapshot may be left in that pydantic-graph does not run again.
_STUCK = ("pending", "running", "success")


class PydanticGraphMachine(Process):
    """One worker running a pydantic-graph graph's runs under the harness (see the
    package)."""

    crash_points: Sequence[str] = CRASH_POINTS

    def __init__(self, target: PydanticGraphTarget, tools: Mapping[str, Tool], probe: Probe,
                 disk: Disk | None = None) -> None:
        self.target, self._tools, self.probe = target, tools, probe
        self.crash_points = tuple(point for point in CRASH_POINTS
                                  if tools or point != "after_tool_call")
        self.disk = disk if disk is not None else Disk()  # a second worker shares it
        self.dead = False
        self.died_at = ""
        self.box = NodeBox(tools, self, minted=target.recovery == "rerun")
        # per run, the moves (state ids) made since it was last observed: lost in a crash
        self._moves: dict[str, list[tuple[str, str]]] = {}


    def moved(self, execution_id: str, source: str, target: str | None) -> None:
        """A node's run returned `target` (None: `End`) and it reached the file."""
        ids = self.target.state_ids
        went = END if target is None else target
        if went not in self.target.next_nodes.get(source, ()):
            raise AdapterError(
                f"node {source!r} returned {'End' if target is None else target!r}, which its "
                f"run method's return annotation does not name: annotate it (-> "
                f"{'End[...]' if target is None else target} | ...), so that the move is "
                f"read off the graph")
        move = (ids[source], ids[went])
        moves = self._moves.setdefault(execution_id, [])
        if move not in moves:
            moves.append(move)

    # driving a run
    def _run(self, execution_id: str, how: str) -> None:
        """Drives a run to its end or to a node's failure: `start` it from its start node,
        `resume` it from its file (`iter_from_persistence`), or `rerun` its last node."""
        try:
            with harnessed(self.disk):
                asyncio.run(self._drive(execution_id, how))
        except (SimulatedCrash, Dead):
            self.dead = True
        except Exception as error:
            # what the dead process did on its way out does not count; a tool's failure is
            # the graph's own: the snapshot is `error`, the run waits for a retry
            if not self.dead and not _tool_failure(error):
                raise
        if self.dead:
            raise SimulatedCrash(self.died_at or "after_running")

    async def _drive(self, execution_id: str, how: str) -> None:
        target = self.target
        persistence = persistence_class()(self.disk.accepted[execution_id], self,
                                          execution_id)
        deps = target.deps_for(self.box)
        if how == "resume":
            running = target.graph.iter_from_persistence(persistence, deps=deps,
                                                         infer_name=False)
        else:
            if how == "start":
                node, state = target.start_node(), target.first_state()
            else:  # the last snapshot's node, again from the state it was saved with
                persistence.set_graph_types(target.graph)
                last = (await persistence.load_all())[-1]
                node, state = last.node, last.state
                persistence.rerun_place = self.disk.places.get((execution_id, last.id), 0)
            running = target.graph.iter(node, state=state, deps=deps, persistence=persistence,
                                        infer_name=False)
        from pydantic_graph import End
        async with running as run:
            node = run.next_node
            while not isinstance(node, End):
                node = await run.next(node)

    # the protocol
    def start(self, execution_id: str, context: Mapping[str, Any], now: int) -> str | None:
        if execution_id in self.disk.accepted:
            return "ignored:duplicate"
        self.disk.accepted[execution_id] = self.disk.file(execution_id)
        self._run(execution_id, "start")
        return "accepted"

    def deliver(self, execution_id: str, event: Event, now: int) -> str | None:
        if execution_id not in self.disk.accepted:
            return "rejected:unknown execution"
        if event.type != FAILED_EVENT:
            return f"rejected:{event.type} is not an event the graph takes"
        if event.id in self.disk.seen:
            return "ignored:duplicate"
        snapshots = self.disk.read(execution_id)
        if not snapshots or snapshots[-1].get("status") != "error":
            return "rejected:nothing failed"
        self.disk.seen.add(event.id)  # the API in front of the graph keeps what it took
        self._carry_on(execution_id, snapshots)
        return "accepted"

    def advance(self, now: int) -> None:
        pass  # pydantic-graph keeps no timers

    def complete(self, execution_id: str, call_id: str, now: int) -> None:
        pass  # nodes call their tools synchronously: no call is left in flight

    def crash(self) -> None:
        self.dead = True
        self._moves.clear()
        self.box.crashed()

    def recover(self, now: int) -> None:
        """A restarted worker carries on every run accepted: one whose file holds nothing is
        started again from its start node (the queue keeps it); one with a `created`
        snapshot is resumed with `iter_from_persistence`; one stuck on a snapshot that
        pydantic-graph does not run again as `recovery` says (a failed one waits for its
        retry)."""
        self.dead = False
        for execution_id in list(self.disk.accepted):
            snapshots = self.disk.read(execution_id)
            if not snapshots:
                self._unlock(execution_id)
                self._resume(execution_id, "start")
            elif snapshots[-1].get("kind") == "node" and snapshots[-1].get("status") in _STUCK:
                self._carry_on(execution_id, snapshots)
            elif any(each.get("status") == "created" for each in snapshots):
                self._unlock(execution_id)
                self._resume(execution_id)

    def _unlock(self, execution_id: str) -> None:
        """The user's recovery takes away the lock a dead process left (one runner per run:
        nobody else holds it); pydantic-graph alone (`resume`) does not."""
        if self.target.recovery != "resume":
            self.disk.locks.discard(str(self.disk.accepted[execution_id]))

    def _carry_on(self, execution_id: str, snapshots: list[dict[str, Any]]) -> None:
        """Carries on a run whose last node snapshot pydantic-graph will not run again
        (`pending`, `running`, `error`, or `success` with its successor never saved)."""
        recovery = self.target.recovery
        self._unlock(execution_id)
        if recovery == "rerun":
            self._run(execution_id, "rerun")
            return
        if recovery == "requeue":  # back to `created`: iter_from_persistence runs it
            snapshots[-1]["status"] = "created"
            path = self.disk.accepted[execution_id]
            self.box.saving(path.write_bytes, json.dumps(snapshots, indent=2).encode(), None)
        self._resume(execution_id)

    def _resume(self, execution_id: str, how: str = "resume") -> None:
        try:
            self._run(execution_id, how)
        except (TimeoutError, RuntimeError) as error:
            if self.target.recovery != "resume" or not _lost(error):
                raise
            snapshots = self.disk.read(execution_id)
            left = (f"Its last snapshot is {snapshots[-1].get('status', 'end')!r}"
                    if snapshots else "Its file holds no snapshot yet")
            why = ("the lock a dead process held is never given back" if isinstance(
                error, TimeoutError) else "iter_from_persistence runs only a 'created' one")
            raise type(error)(
                f"{error}: pydantic-graph lost the run. {left}, and "
                f"{why}: nothing runs the run again (the cause is pydantic-graph's; a worker "
                f"that sets the snapshot back to 'created' and takes the stale lock away "
                f"recovers it: recovery='requeue')") from error

    def worker(self) -> PydanticGraphMachine | None:
        if self.target.one_runner_per_run:
            return None  # the deployment never runs one run in two workers at once
        return PydanticGraphMachine(self.target, self._tools, self.probe, disk=self.disk)

    def observe(self, execution_id: str) -> Observation:
        moves = tuple(self._moves.pop(execution_id, ()))
        snapshots = self.disk.read(execution_id)
        ids = self.target.state_ids
        if not snapshots:  # nothing saved yet
            return Observation(self.target.initial, "running", 0)
        last = snapshots[-1]
        version = len(snapshots)
        if last.get("kind") == "end":
            return Observation(ids[END], "final", version, "success", moves=moves)
        node = str(last["node"]["node_id"])
        return Observation(ids[node], "waiting" if last.get("status") == "error"
                           else "running", version, moves=moves)


def _lost(error: BaseException) -> bool:
    """Tells whether pydantic-graph refused to resume a run (nothing `created` to load, or
    its lock held for good)."""
    return isinstance(error, TimeoutError) or (
        type(error).__name__ == "GraphRuntimeError"
        and "Unable to restore snapshot" in str(error))


def _tool_failure(error: BaseException) -> bool:
    return any(isinstance(each, ToolFailed) for each in chain(error))
