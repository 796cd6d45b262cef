"""The machine wrapper: one worker driving a LangGraph graph's threads under the simulator
(`LangGraphMachine`), and what it reads off a thread's snapshot."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import sqlite3
from collections.abc import Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from fault_injection import SimulatedCrash
from harness.adapters.langgraph.box import GraphBox, ToolFailed, harnessed, in_turn, inline_loop
from harness.adapters.langgraph.common import (
    ANSWER_EVENT,
    CRASH_POINTS,
    END,
    FAILED_EVENT,
    START,
    Dead,
)
from harness.adapters.langgraph.moves import Moves
from harness.adapters.langgraph.saver import Disk, saver_class
from harness.adapters.peers import AdapterError
from harness.adapters.replay_units import Process, chain
from harness.sim.machine import Observation, Probe
from reference_machine import Event, Tool

if TYPE_CHECKING:
    from harness.adapters.langgraph.target import LangGraphTarget

__all__ = ["LangGraphMachine"]

T = TypeVar("T")


class LangGraphMachine(Process):
    """One worker running a LangGraph graph under the harness (see the module)."""

    crash_points: Sequence[str] = CRASH_POINTS

    def __init__(self, target: LangGraphTarget, tools: Mapping[str, Tool], probe: Probe,
                 disk: Disk | None = None,
                 moves: dict[str, list[tuple[str, str]]] | None = None) -> None:
        self.target, self._tools, self.probe = target, tools, probe
        self.durability = target.durability
        # the points a run can pass: after a tool call only where the graph has tools; a
        # checkpoint ahead of its writes only where writes wait (with `exit` they land at once)
        self.crash_points = tuple(
            point for point in CRASH_POINTS
            if (tools or point != "after_tool_call")
            and (self.durability != "exit" or point != "put_ahead_of_writes"))
        self.owner = disk is None  # the first worker made the file, and removes it as it ends
        self.disk = disk if disk is not None else Disk(target.new_file())
        self.dead = False
        self.died_at = ""  # the crash point the process died at
        self.graph: Any = None
        self._connection: sqlite3.Connection | None = None
        self._saver: Any = None
        # an async graph's: its event loop, and the aiosqlite connection of an async saver
        self._loop: asyncio.AbstractEventLoop | None = None
        self._aconnection: Any = None
        self.box = GraphBox(tools, self)
        # per thread, the moves (state ids) its runs made since it was last observed (a second
        # worker's too): what the processes watched, lost in a crash
        self._moves: dict[str, list[tuple[str, str]]] = moves if moves is not None else {}
        self.watching: Moves | None = None  # the moves of the call running
        self._open()

    # memory: the compiled graph, its saver and connection
    def _open(self) -> None:
        self.dead = False
        # opened as SqliteSaver.from_conn_string opens its own: a save of several rows is one
        # transaction, committed once
        self._connection = sqlite3.connect(self.disk.path, check_same_thread=False)
        try:
            inner = self.target.saver(self._connection)
            awaited = False
            if self.target.asynchronous:
                self._loop = inline_loop()
                if self.target.async_saver is not None:
                    inner = self._await(self._async_saver())
                    awaited = True
            self._saver = saver_class()(inner, self, awaited)
            built = self.target.builder(self.box)
            self.graph = built.compile(checkpointer=self._saver)
        except BaseException:
            self._disconnect()
            raise

    def _await(self, work: Coroutine[Any, Any, T]) -> T:
        """Runs `work` to its end in the graph's loop (see `in_turn`)."""
        loop = self._loop
        assert loop is not None
        return in_turn(lambda: loop.run_until_complete(work))

    async def _async_saver(self) -> Any:
        """Opens the async saver the target names on the run's file, in the graph's loop."""
        import aiosqlite
        assert self.target.async_saver is not None
        self._aconnection = await aiosqlite.connect(self.disk.path)
        return self.target.async_saver(self._aconnection)

    def _disconnect(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        loop, self._loop = self._loop, None
        if loop is not None:
            connection, self._aconnection = self._aconnection, None
            in_turn(lambda: _stop(loop, connection))

    def close(self) -> None:
        """The run has ended (the simulator calls it once): closes the file, and the worker
        that made it removes it, with SQLite's journals beside it."""
        self._disconnect()
        self.graph = self._saver = None
        if self.owner:
            path = self.disk.path
            for each in (path, *(path.with_name(path.name + end)
                                 for end in ("-wal", "-shm", "-journal"))):
                each.unlink(missing_ok=True)
            with contextlib.suppress(OSError):  # the process's folder, once it is empty
                path.parent.rmdir()

    def _config(self, execution_id: str) -> dict[str, Any]:
        return {"configurable": {"thread_id": execution_id},
                "recursion_limit": self.target.recursion_limit}

    def _run(self, execution_id: str, given: Any) -> None:
        """Runs the thread with `given` (input, `Command`, or None to carry on) in a context of
        its own (a second worker's run is not a subgraph of the first's), to its end."""
        context = contextvars.Context()
        if self._loop is not None:
            context.run(self._await, self._astream(execution_id, given))
        else:
            context.run(self._stream, execution_id, given)

    def _stream(self, execution_id: str, given: Any) -> None:
        watch = self.watching = Moves(self.target, self._moves.setdefault(execution_id, []))
        with harnessed(self._tools, self.box):
            try:
                try:
                    for _ in self.graph.stream(given, self._config(execution_id),
                                               durability=self.durability,
                                               stream_mode="updates"):
                        self.passing("after_task")
                        most = self._saver.step_done()
                        if most is not None:
                            self._saver.land(most)
                finally:  # LangGraph waits for its saves as the call ends, however it ends
                    self.watching = None
                    if not self.dead:
                        self._saver.land()
                watch.refuse_undeclared()
            except (SimulatedCrash, Dead):
                self.dead = True
            except Exception as error:
                self._ended(error)
        self._crashed_out()

    async def _astream(self, execution_id: str, given: Any) -> None:
        """`_stream`, for a graph with async nodes or an async saver: `astream` in the
        machine's loop, whose default executor runs a sync node inline, in turn."""
        watch = self.watching = Moves(self.target, self._moves.setdefault(execution_id, []))
        with harnessed(self._tools, self.box):
            try:
                try:
                    async for _ in self.graph.astream(given, self._config(execution_id),
                                                      durability=self.durability,
                                                      stream_mode="updates"):
                        self.passing("after_task")
                        most = self._saver.step_done()
                        if most is not None:
                            await self._saver.aland(most)
                finally:
                    self.watching = None
                    if not self.dead:
                        await self._saver.aland()
                watch.refuse_undeclared()
            except (SimulatedCrash, Dead):
                self.dead = True
            except Exception as error:
                self._ended(error)
        self._crashed_out()

    def _ended(self, error: Exception) -> None:
        """A call of the graph raised: what the dead process did on its way out does not
        count; a tool's failure is the graph's own (the thread waits for a retry); anything
        else is raised."""
        if not self.dead and not _tool_failure(error):
            raise error

    def _crashed_out(self) -> None:
        if self.dead:
            raise SimulatedCrash(self.died_at or "after_task")

    def start(self, execution_id: str, context: Mapping[str, Any], now: int) -> str | None:
        if execution_id in self.disk.accepted:
            return "ignored:duplicate"
        given = self.target.input_of(context)
        self.disk.accepted[execution_id] = given
        self._run(execution_id, given)
        return "accepted"

    def deliver(self, execution_id: str, event: Event, now: int) -> str | None:
        if execution_id not in self.disk.accepted:
            return "rejected:unknown execution"
        if self.target.dedupe and event.id in self.disk.seen:
            return "ignored:duplicate"
        from langgraph.types import Command
        snapshot = self._snapshot(execution_id)
        if event.type == FAILED_EVENT:
            if snapshot is None or _asks(snapshot) or not _failed(snapshot):
                return "rejected:nothing failed"
            given: Any = None
        elif event.type == ANSWER_EVENT:
            decision = event.payload.get("decision") if isinstance(event.payload,
                                                                    Mapping) else None
            if not isinstance(decision, str) or decision not in self.target.answers:
                # checked at the boundary, as the reference checks a payload
                return (f"rejected:invalid_payload: decision {decision!r} is not one of "
                        f"{', '.join(sorted(self.target.answers))}")
            if snapshot is None or not _asks(snapshot):
                return "rejected:no interrupt pending"
            value = self.target.answer(decision, event)
            pending = [each for task in snapshot.tasks
                       for each in getattr(task, "interrupts", None) or ()]
            # several interrupts pending at once (parallel nodes asking): the answer is the
            # first's, by its id, as LangGraph asks; one alone takes the plain value
            given = Command(resume={pending[0].id: value} if len(pending) > 1 else value)
        else:
            return f"rejected:{event.type} is not an event the graph takes"
        if self.target.dedupe:
            self.disk.seen.add(event.id)  # the API in front of the graph keeps what it took
        self._run(execution_id, given)
        if event.type == ANSWER_EVENT and snapshot is not None:
            self._asks_again(execution_id, _asks(snapshot))
        return "accepted"

    def _asks_again(self, execution_id: str, asked: str) -> None:
        """Refuses a node that asked again after its answer where its code was not read to
        (the definition would then judge the graph by a move it lacks)."""
        now = self._snapshot(execution_id)
        if (now is not None and _asks(now) == asked and not _failed(now)
                and asked not in self.target.asks_again and not self.dead):
            raise AdapterError(
                f"node {asked!r} asked its human again after an answer, which the adapter "
                f"did not read off its code (an interrupt() in a loop, or two): name it, "
                f"langgraph_target(..., asks_again=[{asked!r}])")

    def advance(self, now: int) -> None:
        pass  # LangGraph keeps no timers

    def complete(self, execution_id: str, call_id: str, now: int) -> None:
        pass  # nodes call their tools synchronously: no call is left in flight

    def crash(self) -> None:
        self.dead = True
        self._disconnect()
        self.graph = self._saver = None
        self._moves.clear()
        self.box.crashed()

    def recover(self, now: int) -> None:
        self._disconnect()
        self._open()
        for execution_id, given in list(self.disk.accepted.items()):
            stored = self._stored(execution_id)
            # a run accepted and never saved is run again from its input (the queue's copy),
            # unless the target says to carry it on as LangGraph's docs do: invoke(None)
            try:
                self._run(execution_id, None if stored or not self.target.resubmit else given)
            except Exception as error:
                if stored or type(error).__name__ != "EmptyInputError":
                    raise
                raise type(error)(
                    f"{error}: LangGraph lost the run. The crash came before the thread's "
                    f"first checkpoint reached the file (durability {self.durability!r}), "
                    f"and invoke(None) cannot carry on a thread with none (langgraph#8764: "
                    f"the cause is LangGraph's; a queue that keeps the input and runs it "
                    f"again recovers it: resubmit=True)") from error

    def worker(self) -> LangGraphMachine | None:
        if self.target.one_runner_per_thread:
            return None  # the deployment never runs a thread in two workers at once
        return LangGraphMachine(self.target, self._tools, self.probe, disk=self.disk,
                                moves=self._moves)

    def _stored(self, execution_id: str) -> bool:
        """Tells whether the thread has a checkpoint on the file."""
        config = self._config(execution_id)
        if self._loop is not None:
            return self._await(self._saver.aget_tuple(config)) is not None
        return self._saver.get_tuple(config) is not None

    def _snapshot(self, execution_id: str) -> Any:
        """Gives the thread's state, or None for a thread with no checkpoint (LangGraph then
        gives a snapshot with no metadata): one read of the file."""
        config = self._config(execution_id)
        if self._loop is not None:
            snapshot = self._await(self.graph.aget_state(config))
        else:
            snapshot = self.graph.get_state(config)
        return None if snapshot.metadata is None else snapshot

    def observe(self, execution_id: str) -> Observation:
        # sorted: the order LangGraph writes a task's edges in follows a set's
        moves = tuple(sorted(self._moves.pop(execution_id, ())))
        snapshot = self._snapshot(execution_id)
        if snapshot is None:  # nothing saved yet: no move to show
            return Observation(START, "running", 0)
        version = int((snapshot.metadata or {}).get("step", -1)) + 2
        ids = self.target.state_ids
        asking = _asks(snapshot)
        if asking and asking not in self.target.asking:
            raise AdapterError(
                f"node {asking!r} waits on an interrupt() the adapter did not find in its "
                f"source (a method, a tool or a helper more than three calls down calling "
                f"it): name it, langgraph_target(..., interrupts=[{asking!r}]), so that it "
                f"is a wait state a human answers")
        if asking:
            return Observation(ids.get(asking, START), "waiting", version, moves=moves)
        if snapshot.next:
            node = snapshot.next[0]
            failed = _failed(snapshot)
            if failed and failed not in self.target.failing:
                raise AdapterError(
                    f"node {failed!r} failed on a tool, which the adapter did not read off "
                    f"its code (a call through a method or an object): name it, "
                    f"langgraph_target(..., tool_nodes=[{failed!r}]), so that it waits for a "
                    f"retry")
            return Observation(ids.get(node, START), "waiting" if failed
                               else "running", version, moves=moves)
        return Observation(END, "final", version, "success", moves=moves)


def _stop(loop: asyncio.AbstractEventLoop, connection: Any) -> None:
    """Closes an async graph's loop, and its aiosqlite connection; what a dead process left
    running in it is cancelled."""
    with contextlib.suppress(Exception):
        if connection is not None:
            loop.run_until_complete(connection.close())
        left = asyncio.all_tasks(loop)
        for task in left:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
    loop.close()


def _asks(snapshot: Any) -> str:
    """Gives the node whose interrupt the thread waits on ("" for none)."""
    for task in snapshot.tasks:
        if getattr(task, "interrupts", None):
            return str(task.name)
    return ""


def _failed(snapshot: Any) -> str:
    """Gives the node whose task failed ("" for none)."""
    for task in snapshot.tasks:
        if getattr(task, "error", None) is not None:
            return str(task.name)
    return ""


def _tool_failure(error: BaseException) -> bool:
    return any(isinstance(each, ToolFailed) for each in chain(error))
