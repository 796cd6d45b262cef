"""What a graph's nodes are given (`GraphBox`: the simulated tools and the task running, its
idempotency keys; `ToolFailed`), and `harnessed`, LangGraph's runtime patched to run them
under the simulator: its executor inline, its retry sleeps free, LangChain tools named like
declared tools routed through the box."""

from __future__ import annotations

import contextlib
import importlib
import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from harness.adapters.langgraph.common import Dead
from harness.adapters.peers import AdapterError
from reference_machine import Failure, Tool

if TYPE_CHECKING:
    from harness.adapters.langgraph.machine import LangGraphMachine

__all__ = ["GraphBox", "ToolFailed", "harnessed"]


class ToolFailed(Exception):
    """A simulated tool failed (`category`: transient, rate_limited, timeout, permanent). A
    node's `RetryPolicy` retries it by default, as it would a connection error."""

    def __init__(self, tool: str, category: str, message: str = "") -> None:
        super().__init__(f"{tool} failed: {category}{': ' + message if message else ''}")
        self.tool, self.category = tool, category


class GraphBox:
    """What a graph's nodes are given: the simulated tools, and what is being run now."""

    def __init__(self, tools: Mapping[str, Tool], machine: LangGraphMachine | None) -> None:
        self._tools, self._machine = tools, machine
        # per task and attempt, the calls made in the node's run going on (a node re-run on
        # a resume counts again from its first)
        self.calls_made: dict[tuple[str, int], int] = {}

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
        made = self.calls_made[task, self.attempt] = (
            self.calls_made.get((task, self.attempt), 0) + 1)
        return self.key() if made == 1 else f"{self.key()}/{made}"

    def _ran(self, task: str) -> None:
        """A run of the task's node ended (done, failed or interrupted): a run again of it
        calls in the same order, under the same keys."""
        for made in [made for made in self.calls_made if made[0] == task]:
            del self.calls_made[made]

    def _call(self, tool: str, input: Mapping[str, Any], key: str) -> Any:
        machine = self._machine
        if machine is None:
            raise AdapterError("no tool call while the graph is read")
        if machine.dead:
            raise Dead
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
