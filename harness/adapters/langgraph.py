"""A LangGraph graph as a machine under test, as it is: `langgraph_target(build)`.

`build(box)` gives the user's `StateGraph` (or the graph compiled; its builder is used). The
adapter compiles it with a checkpointer the harness controls, a real `SqliteSaver` on one file
per machine by default, and drives one thread per execution:

- **The definition is read off the graph.** Nodes are states, `START` the initial state
  `__start__`, `END` the final state `__end__`; edges, conditional edges (their path maps),
  `Command` destinations and `Send` targets are the moves. A node whose code calls
  `interrupt()` (read off its source, or named in `interrupts=`) is a wait state that takes
  a human's `answer` (payload `{"decision": ...}`, one of `answers`; faults: duplicate, late,
  reordered and dropped answers), which the adapter sends as `Command(resume=value)`. A
  node that failed on a tool (its `ToolFailed` left the call) takes `retry`, sent as
  `invoke(None)`.
- **Effects go through the simulated tools**: a node calls `box.call(tool, input, key=None)`;
  the key defaults to `{thread}/{node}/{step}` (the same on every attempt and every re-run of
  that step), `box.attempt` is the attempt number. LangChain tools (`BaseTool`, so
  `ToolNode` too) named like a declared tool go through the tool world as they are.
- **Durable state is the checkpointer's file** and the set of runs accepted (a job queue);
  everything else is memory. A crash drops the compiled graph and the saver, and stops the
  saver and the tools at that instant: nothing after it reaches the file or the world.
  Recovery compiles a fresh graph on the same file and calls `invoke(None, config)` on every
  accepted thread, as a restarted worker would.
- **Where a crash can land** (`crash_points`): inside a node just after a tool took effect
  (`after_tool_call`), after a task's writes are applied in memory (`after_task`), and at the
  checkpointer: before and after each `put_writes` and `put` reaches the file, and, when a
  step's task writes have not yet reached it as its checkpoint does (LangGraph orders a
  checkpoint after the previous checkpoint, not after those writes), with the checkpoint
  saved ahead of the writes (`put_ahead_of_writes`).

LangGraph's background saves run in the calling thread, in the order LangGraph submits them,
so a run replays from its seed; the order in which they reach the file is modelled by
`durability`: under `sync` a step's writes and checkpoint reach it before the next step, under
`async` one step later (a crash in the next step loses them), under `exit` when the call
returns. RetryPolicy's sleeps take no time.
"""

from __future__ import annotations

import ast
import contextlib
import contextvars
import importlib
import inspect
import itertools
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import textwrap
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from fault_injection import SimulatedCrash
from harness.adapters.peers import AdapterError, safe_ids
from harness.sim.machine import Observation, Probe
from reference_machine import (
    DefinitionError,
    Event,
    Failure,
    Tool,
    WorkflowDefinition,
    load_definition,
)

__all__ = ["CRASH_POINTS", "DURABILITIES", "GraphBox", "LangGraphMachine", "LangGraphTarget",
           "ToolFailed", "langgraph_target"]

#: The points a LangGraph machine can crash at, in the order one step passes them.
CRASH_POINTS = ("after_tool_call", "after_task", "before_put_writes", "after_put_writes",
                "put_ahead_of_writes", "before_put", "after_put")
DURABILITIES = ("sync", "async", "exit")
START, END, FAILED_EVENT, ANSWER_EVENT = "__start__", "__end__", "retry", "answer"
_FOREVER = 10 * 365 * 24 * 3_600_000  # an interrupt waits for its human: no timeout


class ToolFailed(Exception):
    """A simulated tool failed (`category`: transient, rate_limited, timeout, permanent). A
    node's `RetryPolicy` retries it by default, as it would a connection error."""

    def __init__(self, tool: str, category: str, message: str = "") -> None:
        super().__init__(f"{tool} failed: {category}{': ' + message if message else ''}")
        self.tool, self.category = tool, category


class _Dead(BaseException):
    """The simulated process has died: whatever runs after it does nothing."""


class _Disk:
    """What survives a crash: the checkpointer's file, the runs accepted (a job queue) and
    the ids of the events the API in front of the graph took."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.accepted: dict[str, Any] = {}  # thread id -> the run's input, in start order
        self.seen: set[str] = set()


class GraphBox:
    """What a graph's nodes are given: the simulated tools, and what is being run now."""

    def __init__(self, tools: Mapping[str, Tool], machine: LangGraphMachine | None) -> None:
        self._tools, self._machine = tools, machine
        # per task and attempt, the calls made in the node's run going on (a node re-run on
        # a resume counts again from its first)
        self._calls: dict[tuple[str, int], int] = {}

    @property
    def execution_id(self) -> str:
        """The thread being run (the execution's id)."""
        return str(_config()["configurable"].get("thread_id", ""))

    @property
    def node(self) -> str:
        return str(_config().get("metadata", {}).get("langgraph_node", ""))

    @property
    def step(self) -> int:
        """LangGraph's superstep: the same on every attempt and re-run of one task."""
        return int(_config().get("metadata", {}).get("langgraph_step", 0))

    @property
    def attempt(self) -> int:
        """The attempt of the task running now (1, then 2, ... under its RetryPolicy)."""
        runtime = _config().get("configurable", {}).get("__pregel_runtime")
        info = getattr(runtime, "execution_info", None)
        return int(getattr(info, "node_attempt", 1) or 1)

    def key(self) -> str:
        """Gives `{thread}/{node}/{step}`, and for a task a `Send` made, its place among the
        sends (`/send{i}`): one key per task, the same on every attempt and every re-run."""
        path: Sequence[Any] = _config().get("metadata", {}).get("langgraph_path") or ()
        sent = f"/send{path[1]}" if len(path) > 1 and path[0] == "__pregel_push" else ""
        return f"{self.execution_id}/{self.node}/{self.step}{sent}"

    def call(self, tool: str, input: Mapping[str, Any], key: str | None = None) -> Any:
        """Calls a declared tool; gives its output (as the tool gave it: a malformed one is
        not made right), or raises `ToolFailed`. The key defaults to the task's (`key()`),
        the second call of one attempt's then `/2`, and so on: each call its own key, the
        same for the same call on every attempt and re-run."""
        if key is None:
            key = self._nth_key()
        return self._call(tool, input, key)

    def _nth_key(self) -> str:
        task = str(_config().get("configurable", {}).get("__pregel_task_id", ""))
        made = self._calls[task, self.attempt] = self._calls.get((task, self.attempt), 0) + 1
        return self.key() if made == 1 else f"{self.key()}/{made}"

    def _ran(self, task: str) -> None:
        """A run of the task's node ended (done, failed or interrupted): a run again of it
        calls in the same order, under the same keys."""
        for made in [made for made in self._calls if made[0] == task]:
            del self._calls[made]

    def _call(self, tool: str, input: Mapping[str, Any], key: str) -> Any:
        machine = self._machine
        if machine is None:
            raise AdapterError("no tool call while the graph is read")
        if machine.dead:
            raise _Dead
        found = self._tools.get(tool)
        if found is None:
            known = ", ".join(sorted(self._tools)) or "none"
            raise AdapterError(f"tool {tool!r} is not declared (declared: {known}); declare it "
                               f"with tools={{{tool!r}: {{...}}}}")
        outcome = found(dict(input), key)
        machine.passing("after_tool_call")
        if isinstance(outcome, Failure):
            raise ToolFailed(tool, outcome.category, outcome.message)
        output = outcome.output
        return dict(output) if isinstance(output, Mapping) else output


def _config() -> Mapping[str, Any]:
    from langgraph.config import get_config
    try:
        return get_config()
    except RuntimeError as error:
        raise AdapterError("box.call and box.key work inside a node only") from error


# -- the saver: LangGraph's writes reach the file where the harness says --------------------


def _saver_class() -> type:
    from langgraph.checkpoint.base import BaseCheckpointSaver

    class HarnessSaver(BaseCheckpointSaver):
        """Wraps a real saver: reads go to it, writes reach it when `durability` says, past
        the machine's crash points; nothing reaches it once the machine has died."""

        def __init__(self, inner: Any, machine: LangGraphMachine) -> None:
            super().__init__(serde=inner.serde)
            self.inner, self.machine = inner, machine
            self.held: list[tuple[str, tuple[Any, ...]]] = []  # not yet on the file

        def get_tuple(self, config: Any) -> Any:
            return self.inner.get_tuple(config)

        def list(self, config: Any, **kwargs: Any) -> Iterator[Any]:
            return self.inner.list(config, **kwargs)

        def get_next_version(self, current: Any, channel: Any) -> Any:
            return self.inner.get_next_version(current, channel)

        def delete_thread(self, thread_id: str) -> None:
            self.inner.delete_thread(thread_id)

        def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = ""
                       ) -> None:
            if self.machine.dead:
                raise _Dead
            self.held.append(("put_writes", (config, list(writes), task_id, task_path)))
            if self.machine.durability == "exit":
                self.land()

        def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
            if self.machine.dead:
                raise _Dead
            held = [write for write in self.held if write[0] == "put"]
            if held and self.machine.durability == "async":
                self.land()  # the checkpoint before this one is on the file by now
            if any(kind == "put_writes" for kind, _ in self.held):
                self.machine.passing("put_ahead_of_writes", ahead=(config, checkpoint,
                                                                   metadata, new_versions))
            self.held.append(("put", (config, checkpoint, metadata, new_versions)))
            if self.machine.durability != "async":
                self.land()
            return {"configurable": {**config["configurable"],
                                     "checkpoint_id": checkpoint["id"]}}

        def land(self) -> None:
            """Brings every held write to the file, in the order LangGraph made them."""
            while self.held:
                kind, arguments = self.held.pop(0)
                self.machine.passing(f"before_{kind}")
                getattr(self.inner, kind)(*arguments)
                self.machine.passing(f"after_{kind}")

    return HarnessSaver


class _Inline:
    """LangGraph's background executor, run in the calling thread at once: the saves and
    parallel tasks happen in the order LangGraph submits them, the same in every run."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        done: Future[Any] = Future()
        try:
            done.set_result(fn(*args, **kwargs))
        except BaseException as error:  # kept in the future, as a real executor would
            done.set_exception(error)
        return done

    def map(self, fn: Callable[..., Any], *iterables: Any, **kwargs: Any) -> Iterator[Any]:
        return iter([fn(*args) for args in zip(*iterables, strict=False)])

    def shutdown(self, wait: bool = True, **kwargs: Any) -> None:
        pass

    def __enter__(self) -> _Inline:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


@contextlib.contextmanager
def _inline_executor(config: Any = None) -> Iterator[_Inline]:
    yield _Inline()


class _NoSleep:
    """`time` for LangGraph's retry loop: a retry's back-off takes no wall time."""

    def __getattr__(self, name: str) -> Any:
        import time
        return getattr(time, name)

    @staticmethod
    def sleep(seconds: float) -> None:
        pass


_PATCHING = threading.RLock()
_DEPTH = [0]


@contextlib.contextmanager
def harnessed(tools: Mapping[str, Tool], box: GraphBox) -> Iterator[None]:
    """Runs LangGraph with its background executor inline, its retry sleeps free and the
    LangChain tools named like declared tools routed through the tool world."""
    executor: Any = importlib.import_module("langgraph.pregel._executor")
    retry: Any = importlib.import_module("langgraph.pregel._retry")
    runner: Any = importlib.import_module("langgraph.pregel._runner").PregelRunner
    tool_node: Any = _module("langgraph.prebuilt.tool_node")
    with _PATCHING:
        saved = (executor.get_executor_for_config, retry.time, runner.commit)
        base = _base_tool()
        invoke = base.invoke if base is not None else None
        pool = tool_node.get_executor_for_config if tool_node is not None else None
        _DEPTH[0] += 1
        executor.get_executor_for_config = _inline_executor
        if tool_node is not None:  # a ToolNode's calls of one message: in turn, here too
            tool_node.get_executor_for_config = _inline_executor
        retry.time = _NoSleep()
        runner.commit = _watched(saved[2], box)
        if base is not None and _DEPTH[0] == 1:
            base.invoke = _routed(invoke, tools, box)
        try:
            yield
        finally:
            _DEPTH[0] -= 1
            executor.get_executor_for_config, retry.time, runner.commit = saved
            if tool_node is not None:
                tool_node.get_executor_for_config = pool
            if base is not None:
                base.invoke = invoke


def _watched(commit: Callable[..., Any], box: GraphBox) -> Callable[..., Any]:
    """LangGraph's commit of a finished task, told first to the call's watcher of moves."""
    def watched(self: Any, task: Any, exception: BaseException | None) -> Any:
        machine = box._machine
        watch = machine.watching if machine is not None else None
        if watch is not None:
            watch.commit(str(task.name), list(task.writes), exception)
        box._ran(str(task.id))
        return commit(self, task, exception)
    return watched


def _module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _base_tool() -> Any:
    tools = _module("langchain_core.tools")
    return tools.BaseTool if tools is not None else None


def _routed(invoke: Any, tools: Mapping[str, Tool], box: GraphBox) -> Any:
    def routed(self: Any, input: Any, config: Any = None, **kwargs: Any) -> Any:
        if self.name not in tools:
            return invoke(self, input, config, **kwargs)
        arguments = input.get("args", input) if isinstance(input, Mapping) else {"input": input}
        call_id = input.get("id") if isinstance(input, Mapping) else None
        # a model's tool call is keyed by its id: the same on a re-run, another for each call
        output = box.call(self.name, dict(arguments),
                          key=f"{box.key()}/{call_id}" if call_id else None)
        if isinstance(input, Mapping) and input.get("type") == "tool_call":
            from langchain_core.messages import ToolMessage
            return ToolMessage(content=json.dumps(output, sort_keys=True, default=str),
                               tool_call_id=input.get("id", ""), name=self.name)
        return output
    return routed


# -- the machine ----------------------------------------------------------------------------


class LangGraphMachine:
    """One worker running a LangGraph graph under the harness (see the module)."""

    crash_points: Sequence[str] = CRASH_POINTS

    def __init__(self, target: LangGraphTarget, tools: Mapping[str, Tool], probe: Probe,
                 disk: _Disk | None = None,
                 moves: dict[str, list[tuple[str, str]]] | None = None) -> None:
        self.target, self._tools, self._probe = target, tools, probe
        self.durability = target.durability
        # the points a run can pass: after a tool call only where the graph has tools; a
        # checkpoint ahead of its writes only where writes wait (with `exit` they land at once)
        self.crash_points = tuple(
            point for point in CRASH_POINTS
            if (tools or point != "after_tool_call")
            and (self.durability != "exit" or point != "put_ahead_of_writes"))
        self.owner = disk is None  # the first worker made the file, and removes it as it ends
        self.disk = disk if disk is not None else _Disk(target.new_file())
        self.dead = False
        self.died_at = ""  # the crash point the process died at
        self.graph: Any = None
        self._connection: sqlite3.Connection | None = None
        self._saver: Any = None
        self._box = GraphBox(tools, self)
        # per thread, the moves (state ids) its runs made since it was last observed (a second
        # worker's too): what the processes watched, lost in a crash
        self._moves: dict[str, list[tuple[str, str]]] = moves if moves is not None else {}
        self.watching: _Moves | None = None  # the moves of the call running
        self._open()

    # memory: the compiled graph, its saver and connection
    def _open(self) -> None:
        self.dead = False
        # opened as SqliteSaver.from_conn_string opens its own: a save of several rows is one
        # transaction, committed once
        self._connection = sqlite3.connect(self.disk.path, check_same_thread=False)
        try:
            inner = self.target.saver(self._connection)
            self._saver = _saver_class()(inner, self)
            built = self.target.builder(self._box)
            self.graph = built.compile(checkpointer=self._saver)
        except BaseException:
            self._disconnect()
            raise

    def _disconnect(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

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

    def passing(self, point: str, ahead: tuple[Any, ...] | None = None) -> None:
        """The process passes a crash point: the simulator may crash it there. At
        `put_ahead_of_writes`, the crash lands with the checkpoint `ahead` saved."""
        if self.dead:
            raise _Dead
        try:
            self._probe(point)
        except SimulatedCrash:
            if ahead is not None:
                self._saver.inner.put(*ahead)
            self.dead, self.died_at = True, point
            raise

    def _config(self, execution_id: str) -> dict[str, Any]:
        return {"configurable": {"thread_id": execution_id},
                "recursion_limit": self.target.recursion_limit}

    def _run(self, execution_id: str, given: Any) -> None:
        """Runs the thread with `given` (input, `Command`, or None to carry on) in a context of
        its own (a second worker's run is not a subgraph of the first's), to its end."""
        context = contextvars.Context()
        context.run(self._stream, execution_id, given)

    def _stream(self, execution_id: str, given: Any) -> None:
        watch = self.watching = _Moves(self.target, self._moves.setdefault(execution_id, []))
        with harnessed(self._tools, self._box):
            try:
                try:
                    for _ in self.graph.stream(given, self._config(execution_id),
                                               durability=self.durability,
                                               stream_mode="updates"):
                        self.passing("after_task")
                finally:  # LangGraph waits for its saves as the call ends, however it ends
                    self.watching = None
                    if not self.dead:
                        self._saver.land()
                watch.refuse_undeclared()
            except (SimulatedCrash, _Dead):
                self.dead = True
            except Exception as error:
                # what the dead process did on its way out does not count; a tool's failure
                # is the graph's own: the thread waits for a retry; anything else is a bug
                if not self.dead and not _tool_failure(error):
                    raise
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
        return "accepted"

    def advance(self, now: int) -> None:
        pass  # LangGraph keeps no timers

    def complete(self, execution_id: str, call_id: str, now: int) -> None:
        pass  # nodes call their tools synchronously: no call is left in flight

    def crash(self) -> None:
        self.dead = True
        self._disconnect()
        self.graph = self._saver = None
        self._moves.clear()
        self._box._calls.clear()

    def recover(self, now: int) -> None:
        self._disconnect()
        self._open()
        for execution_id, given in list(self.disk.accepted.items()):
            stored = self._saver.inner.get_tuple(self._config(execution_id)) is not None
            # a run accepted and never saved is run again from its input (the queue's copy),
            # unless the target says to carry it on as LangGraph's docs do: invoke(None)
            self._run(execution_id, None if stored or not self.target.resubmit else given)

    def worker(self) -> LangGraphMachine:
        return LangGraphMachine(self.target, self._tools, self._probe, disk=self.disk,
                                moves=self._moves)

    def _snapshot(self, execution_id: str) -> Any:
        """Gives the thread's state, or None for a thread with no checkpoint (LangGraph then
        gives a snapshot with no metadata): one read of the file."""
        snapshot = self.graph.get_state(self._config(execution_id))
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
                f"source (a helper, a tool or a class calling it): name it, "
                f"langgraph_target(..., interrupts=[{asking!r}]), so that it is a wait state "
                f"a human answers")
        if asking:
            return Observation(ids.get(asking, START), "waiting", version, moves=moves)
        if snapshot.next:
            node = snapshot.next[0]
            return Observation(ids.get(node, START), "waiting" if _failed(snapshot)
                               else "running", version, moves=moves)
        return Observation(END, "final", version, "success", moves=moves)


class _Moves:
    """Reads the moves one call makes off the writes of each task LangGraph commits: a write
    to `branch:to:<node>` (an edge, the branch a conditional edge chose, a `Command`'s goto),
    a `Send` (a fan-out task) or a waiting edge's `join:` channel names where the task went; a
    task that ended writing none of them went to END (where its node may). A task that failed
    or waits on an interrupt did not move; an error handler was moved to from its node."""

    def __init__(self, target: LangGraphTarget, moves: list[tuple[str, str]]) -> None:
        self.ids, self.next, self.handles = target.state_ids, target.next_nodes, target.handles
        self.moves = moves
        self.undeclared: list[tuple[str, str]] = []  # moves the graph read does not declare

    def commit(self, name: str, writes: Sequence[tuple[str, Any]],
               exception: BaseException | None) -> None:
        if exception is not None:
            return
        for node in self.handles.get(name, ()):
            self._move(node, name)
        went = False
        for channel, value in writes:
            target = _destination(channel, value)
            if target is not None:
                went = True
                self._move(name, target)
        if not went and END in self.next.get(name, ()):
            self._move(name, END)

    def _move(self, source: str, target: str) -> None:
        if source not in self.ids:
            return  # a task of LangGraph's own
        if target not in self.next.get(source, ()):
            if (source, target) not in self.undeclared:
                self.undeclared.append((source, target))
            return
        move = (self.ids[source], self.ids[target])
        if move not in self.moves:
            self.moves.append(move)

    def refuse_undeclared(self) -> None:
        """Raises `AdapterError` for a move the graph made that was not read off it: the
        definition would then judge the graph by edges it does not have."""
        if self.undeclared:
            source, target = self.undeclared[0]
            raise AdapterError(
                f"node {source!r} went to {target!r}, which the adapter did not read off the "
                f"graph (a Command(goto=...) needs its node's return annotated "
                f"Command[Literal[{target!r}, ...]], a conditional edge its path map)")


def _destination(channel: str, value: Any) -> str | None:
    """Gives the node a task's write sends the run to, or None for a write of state."""
    if channel.startswith("branch:to:"):
        return channel.removeprefix("branch:to:")
    if channel == "__pregel_tasks":  # a Send
        node = getattr(value, "node", None)
        return str(node) if node is not None else None
    if channel.startswith("join:"):
        return channel.rpartition(":")[2]
    return None


def _asks(snapshot: Any) -> str:
    """Gives the node whose interrupt the thread waits on ("" for none)."""
    for task in snapshot.tasks:
        if getattr(task, "interrupts", None):
            return str(task.name)
    return ""


def _failed(snapshot: Any) -> bool:
    return any(getattr(task, "error", None) is not None for task in snapshot.tasks)


def _tool_failure(error: BaseException) -> bool:
    seen: set[int] = set()
    found: BaseException | None = error
    while found is not None and id(found) not in seen:
        if isinstance(found, ToolFailed):
            return True
        seen.add(id(found))
        found = found.__cause__ or found.__context__
    return False


def _canonical(value: Any) -> str:
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr)
    except (TypeError, ValueError):
        return repr(value)


# -- the target: what is read off the graph ------------------------------------------------


class LangGraphTarget:
    """A machine factory over a LangGraph graph: `target(definition, tools, probe)` gives a
    `LangGraphMachine`, and `target.definition` is what was read off the graph."""

    crash_points: Sequence[str] = CRASH_POINTS

    def __init__(self, build: Callable[[GraphBox], Any], *, name: str | None,
                 tools: Mapping[str, Mapping[str, Any]] | None, input: Any,
                 durability: str, saver: Callable[[sqlite3.Connection], Any] | None,
                 interrupts: Sequence[str] | None, answers: Mapping[str, Any] | None,
                 dedupe: bool,
                 recursion_limit: int, resubmit: bool, module: str | None) -> None:
        _require_langgraph()
        if durability not in DURABILITIES:
            raise AdapterError(f"durability {durability!r}: expected one of "
                               f"{', '.join(DURABILITIES)}")
        self.build, self.durability, self.input = build, durability, input
        self.saver = saver or _sqlite_saver
        self.answers = dict(answers) if answers else {"approve": True, "deny": False}
        self.dedupe, self.recursion_limit = dedupe, recursion_limit
        self.resubmit = resubmit
        builder = self.builder(GraphBox({}, None))
        nodes, moves, asking = _read(builder, interrupts)
        self.name = name or getattr(build, "__name__", "graph").strip("_<>") or "graph"
        self.__qualname__ = f"langgraph:{self.name}"
        self.__module__ = module or getattr(build, "__module__", None) or __name__
        self.state_ids = safe_ids([START, *nodes, END])
        self.asking = asking
        self.next_nodes = {source: frozenset(targets) for source, targets in moves.items()}
        self.handles = _handlers(builder)
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
            state: dict[str, Any] = {"on": {FAILED_EVENT: again}}
            if node in asking:  # it waits for its human's answer, as long as it takes
                state.update(type="wait", after={"delay": _FOREVER, "target": ids[END]})
                state["on"][ANSWER_EVENT] = again
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
    try:
        return load_definition(spec)
    except DefinitionError as error:
        if "eventless-cycle" not in str(error):
            said = "; ".join(line.strip() for line in str(error).splitlines()[1:])
            raise AdapterError(f"the definition read off the graph does not load: {said}"
                               ) from error
    for state in states.values():
        for move in state.get("always", ()):
            move["guard"] = f"context.route == {move['target']!r}"
    return load_definition(spec)


def _sqlite_saver(connection: sqlite3.Connection) -> Any:
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver
    except ImportError as error:
        raise AdapterError("langgraph-checkpoint-sqlite is not installed: pip install "
                           "'fsmharness[langgraph]'") from error
    return SqliteSaver(connection)


def _require_langgraph() -> None:
    try:
        importlib.import_module("langgraph.graph")
    except ImportError as error:
        raise AdapterError("langgraph is not installed: pip install 'fsmharness[langgraph]'"
                           ) from error


def _read(builder: Any, interrupts: Sequence[str] | None
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


def _handlers(builder: Any) -> dict[str, tuple[str, ...]]:
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


def langgraph_target(build: Callable[[GraphBox], Any], *, name: str | None = None,
                     tools: Mapping[str, Mapping[str, Any]] | None = None,
                     input: Any = None, durability: str = "sync",
                     saver: Callable[[sqlite3.Connection], Any] | None = None,
                     interrupts: Sequence[str] | None = None,
                     answers: Mapping[str, Any] | None = None, dedupe: bool = True,
                     recursion_limit: int = 50, resubmit: bool = True) -> LangGraphTarget:
    """Wraps a LangGraph graph (see the module). `input` is the run's input (a value, or a
    function of the start context; default: the context), `durability` LangGraph's
    (`sync`, `async`, `exit`), `saver(connection)` the checkpointer on the run's SQLite file
    (default `SqliteSaver`), `answers` the resume value of each decision a human may give
    (default `{"approve": True, "deny": False}`; a value, or a function of the event),
    `dedupe` whether the API in front of the graph drops an event it already took (turn it
    off to see what LangGraph does with a redelivered answer), `resubmit`
    whether recovery runs a thread that has no checkpoint from its input again (else it calls
    `invoke(None)`, which LangGraph refuses with `EmptyInputError`)."""
    return LangGraphTarget(build, name=name, tools=tools, input=input,
                           durability=durability, saver=saver, interrupts=interrupts,
                           answers=answers, dedupe=dedupe,
                           recursion_limit=recursion_limit, resubmit=resubmit,
                           module=sys._getframe(1).f_globals.get("__name__"))
