"""What a graph's nodes are given (`GraphBox`: the simulated tools and the task running, its
idempotency keys; `ToolFailed`), and `harnessed`, LangGraph's runtime patched to run them
under the simulator: its executor inline, its retry sleeps free, LangChain tools named like
declared tools routed through the box."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import types
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from harness.adapters.peers import AdapterError
from harness.adapters.replay_units import LentLock, ToolFailed, Unit, UnitCalls
from reference_machine import Tool

if TYPE_CHECKING:
    from harness.adapters.langgraph.machine import LangGraphMachine

__all__ = ["GraphBox", "ToolFailed", "harnessed", "in_turn", "inline_loop"]

T = TypeVar("T")


class GraphBox:
    """What a graph's nodes are given: the simulated tools, and what is being run now. Its
    calls go through the replay-unit kit (`UnitCalls`): a node's task is the unit."""

    def __init__(self, tools: Mapping[str, Tool], machine: LangGraphMachine | None) -> None:
        self._machine = machine
        self._calls = (UnitCalls(tools, machine, machine.disk.journal, "LangGraph",
                                 after_effect="after_tool_call")
                       if machine is not None else None)
        # the unit of each task a node ran, by LangGraph's task id: what its saved writes save
        self.units: dict[str, Unit] = {}

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
        return UnitCalls.key_of(self.unit())

    def unit(self) -> Unit:
        """Gives the task running now as a unit of the kit: the thread, the node, the
        superstep (and the place of a `Send`'s task), the attempt and LangGraph's task id."""
        config = _config()
        metadata = config.get("metadata", {})
        path: Sequence[Any] = metadata.get("langgraph_path") or ()
        sent = f"/send{path[1]}" if len(path) > 1 and path[0] == "__pregel_push" else ""
        task = str(config.get("configurable", {}).get("__pregel_task_id", ""))
        unit = Unit(self.execution_id, self.node,
                    f"{int(metadata.get('langgraph_step', 0))}{sent}", self.attempt,
                    (("task id LangGraph gave the node's run", task),) if task else ())
        if task:
            self.units[task] = unit
        return unit

    def call(self, tool: str, input: Mapping[str, Any], key: str | None = None) -> Any:
        """Calls a declared tool; gives its output (as the tool gave it: a malformed one is
        not made right), or raises `ToolFailed`. The key defaults to the task's (`key()`),
        the second call of one attempt's then `/2`, and so on: each call its own key, the
        same for the same call on every attempt and re-run."""
        if self._calls is None:
            raise AdapterError("no tool call while the graph is read")
        return self._calls.call(self.unit(), tool, input, key)

    def _ran(self, task: str, exception: BaseException | None) -> None:
        """A run of the task's node ended (done, failed or interrupted): a run again of it
        calls in the same order, under the same keys."""
        unit = self.units.get(task)
        if unit is not None and self._calls is not None:
            self._calls.ended(unit, _how(exception))

    def saving(self, kind: str, write: Callable[..., Any], arguments: Sequence[Any]) -> None:
        """Brings one of the saver's writes (`put_writes`, `put`) to the file past its crash
        points. A task's writes save its result, unless what they save is an interrupt or
        an error (the node then runs again, as LangGraph documents)."""
        assert self._calls is not None
        self._calls.saving(kind, write, *arguments, saves=self._saves(kind, arguments))

    async def asaving(self, kind: str, write: Callable[..., Awaitable[Any]],
                      arguments: Sequence[Any]) -> None:
        """`saving`, through an async saver (`aput_writes`, `aput`)."""
        assert self._calls is not None
        await self._calls.asaving(kind, write, *arguments, saves=self._saves(kind, arguments))

    def _saves(self, kind: str, arguments: Sequence[Any]) -> tuple[Unit, ...]:
        if kind != "put_writes":
            return ()
        _, writes, task, *_ = arguments
        unit = self.units.get(str(task))
        if unit is None or any(channel in _NOT_A_RESULT for channel, _ in writes):
            return ()
        return (unit,)

    def crashed(self) -> None:
        self.units.clear()
        if self._calls is not None:
            self._calls.crashed()


#: The writes that save no result of a task: it runs again.
_NOT_A_RESULT = frozenset({"__interrupt__", "__error__", "__resume__"})


def _how(exception: BaseException | None) -> str:
    """Says how a task's run ended, for the journal."""
    if exception is None:
        return "done"
    if type(exception).__name__ in ("GraphInterrupt", "NodeInterrupt"):
        return "suspended"
    return "failed"


def _config() -> Mapping[str, Any]:
    from langgraph.config import get_config
    try:
        return get_config()
    except RuntimeError as error:
        raise AdapterError("box.call and box.key work inside a node only") from error


# -- LangGraph's runtime while the harness runs a graph: deterministic, routed through the box


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


class _InlinePool(ThreadPoolExecutor):
    """The default executor of an async graph's loop, to which LangGraph hands a sync node
    (and LangChain a sync tool): run at once in the loop's thread, in turn, in the same
    order in every run."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        return _Inline().submit(fn, *args, **kwargs)


def inline_loop() -> asyncio.AbstractEventLoop:
    """Gives a new event loop for an async graph: its default executor runs inline."""
    loop = asyncio.new_event_loop()
    loop.set_default_executor(_InlinePool(max_workers=1))
    return loop


class _NoSleep:
    """`time` for LangGraph's retry loop: a retry's back-off takes no wall time."""

    def __getattr__(self, name: str) -> Any:
        import time
        return getattr(time, name)

    @staticmethod
    def sleep(seconds: float) -> None:
        pass


_RUNTIME = LentLock()  # held while LangGraph's runtime is patched
_DEPTH = [0]


def in_turn(work: Callable[[], T]) -> T:
    """Runs `work`, which runs an event loop, here; or, when this thread already runs one (a
    second worker acting at a crash point of the first's async call), in a thread of its
    own, waited for, under this one's hold of the patched runtime."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return work()
    return _RUNTIME.in_thread(work)


@contextlib.contextmanager
def harnessed(tools: Mapping[str, Tool], box: GraphBox) -> Iterator[None]:
    """Runs LangGraph with its background executor inline, its retry sleeps free and the
    LangChain tools named like declared tools routed through the tool world."""
    executor: Any = importlib.import_module("langgraph.pregel._executor")
    retry: Any = importlib.import_module("langgraph.pregel._retry")
    runner: Any = importlib.import_module("langgraph.pregel._runner").PregelRunner
    tool_node: Any = _module("langgraph.prebuilt.tool_node")
    with _RUNTIME.held(), _minted_by(box):
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
        ainvoke = base.ainvoke if base is not None else None
        if base is not None and _DEPTH[0] == 1:
            base.invoke = _routed(invoke, tools, box)
            base.ainvoke = _routed_async(ainvoke, base.invoke, tools)
        try:
            yield
        finally:
            _DEPTH[0] -= 1
            executor.get_executor_for_config, retry.time, runner.commit = saved
            if tool_node is not None:
                tool_node.get_executor_for_config = pool
            if base is not None:
                base.invoke, base.ainvoke = invoke, ainvoke


@contextlib.contextmanager
def _minted_by(box: GraphBox) -> Iterator[None]:
    """LangGraph's checkpoint ids (a v6 UUID of the wall clock and random bits) and message
    ids (`uuid4`), minted from the run's own counter instead: the same seed gives the same
    ids, so the same history. They keep their order: a later checkpoint's id sorts later."""
    machine = box._machine
    if machine is None:
        yield
        return
    mint = machine.disk.mint
    checkpoints: Any = importlib.import_module("langgraph.pregel._checkpoint")
    base: Any = importlib.import_module("langgraph.checkpoint.base")
    message: Any = _module("langgraph.graph.message")
    messages: Any = _module("langgraph.pregel._messages")
    saved = (checkpoints.uuid6, base.uuid6,
             message.uuid if message is not None else None,
             messages.uuid4 if messages is not None else None)
    checkpoints.uuid6 = base.uuid6 = lambda node=None, clock_seq=None: mint(clock_seq)
    if message is not None:
        message.uuid = types.SimpleNamespace(**{**vars(uuid), "uuid4": mint})
    if messages is not None:
        messages.uuid4 = mint
    try:
        yield
    finally:
        checkpoints.uuid6, base.uuid6 = saved[:2]
        if message is not None:
            message.uuid = saved[2]
        if messages is not None:
            messages.uuid4 = saved[3]


def _watched(commit: Callable[..., Any], box: GraphBox) -> Callable[..., Any]:
    """LangGraph's commit of a finished task, told first to the call's watcher of moves."""
    def watched(self: Any, task: Any, exception: BaseException | None) -> Any:
        machine = box._machine
        watch = machine.watching if machine is not None else None
        if watch is not None:
            watch.commit(str(task.name), list(task.writes), exception)
        box._ran(str(task.id), exception)
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


def _routed_async(ainvoke: Any, routed: Any, tools: Mapping[str, Tool]) -> Any:
    """`BaseTool.ainvoke` (an async graph's tools): a declared tool through the world."""
    async def routed_async(self: Any, input: Any, config: Any = None, **kwargs: Any) -> Any:
        if self.name not in tools:
            return await ainvoke(self, input, config, **kwargs)
        return routed(self, input, config, **kwargs)
    return routed_async


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
