"""What an agent's tools are given (`AgentBox`: the simulated tools, the call running and its
idempotency key), and `harnessed`: the SDK's ids minted from the run's counter while the
harness drives it, and its function tools wrapped so that each call is known (and, when named
like a declared tool, routed through the tool world)."""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import json
import logging
import threading
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from harness.adapters.openai_agents.common import ERROR_TEXT
from harness.adapters.peers import AdapterError
from harness.adapters.replay_units import ToolFailed, Unit, UnitCalls
from harness.sim.world import canonical
from reference_machine import Tool

if TYPE_CHECKING:
    from harness.adapters.openai_agents.machine import OpenAIAgentsMachine

__all__ = ["AgentBox", "Running", "ToolFailed", "harnessed", "wrap_tools"]


class Running(NamedTuple):
    """The tool call running now: its execution, tool, call id, script step and attempt."""

    execution: str
    tool: str
    call_id: str
    step: int
    attempt: int


_RUNNING: contextvars.ContextVar[Running | None] = contextvars.ContextVar(
    "fsmharness_openai_agents_call", default=None)


class AgentBox:
    """What an agent's tools are given: the simulated tools, and the call running now. Its
    calls go through the replay-unit kit (`UnitCalls`): one tool call of the script is the
    unit, named by its tool and its script step (the same on every attempt and re-run)."""

    def __init__(self, tools: Mapping[str, Tool], machine: OpenAIAgentsMachine | None) -> None:
        self._machine = machine
        self._calls = (UnitCalls(tools, machine, machine.store.journal, "the OpenAI Agents SDK",
                                 after_effect="after_tool_call")
                       if machine is not None else None)
        self.ran: list[Unit] = []  # the units run since the state was last saved
        self.done: set[Unit] = set()  # those of them that gave a result

    @staticmethod
    def running() -> Running:
        found = _RUNNING.get()
        if found is None:
            raise AdapterError("box.call and box.key work inside a tool call only")
        return found

    @property
    def execution_id(self) -> str:
        return self.running().execution

    @property
    def call_id(self) -> str:
        """The call id the model gave this call (a new one on each retry and re-run, unless
        the script fixes it)."""
        return self.running().call_id

    @property
    def attempt(self) -> int:
        """The model's attempt at this call: 1, then 2, ... as it retries a failed call."""
        return self.running().attempt

    def unit(self) -> Unit:
        now = self.running()
        return Unit(now.execution, now.tool, str(now.step), now.attempt,
                    (("call id the model gave", now.call_id),))

    def key(self) -> str:
        """Gives `{execution}/{tool}/{script step}`: the same on every attempt and re-run."""
        return UnitCalls.key_of(self.unit())

    def call(self, tool: str, input: Mapping[str, Any], key: str | None = None) -> Any:
        """Calls a declared tool; gives its output, or raises `ToolFailed`. The key defaults
        to `key()` (the call's second world call `/2`, and so on). With `save_results`, a
        result saved before is given back without a call."""
        machine = self._machine
        if machine is None or self._calls is None:
            raise AdapterError("no tool call while the agent is read")
        unit = self.unit()
        if unit not in self.ran:
            self.ran.append(unit)
        saving = machine.target.save_results
        where = f"{UnitCalls.key_of(unit)}->{tool}:{canonical(dict(input))}"
        if saving and where in machine.store.results:
            return machine.store.results[where]
        output = self._calls.call(unit, tool, input, key)
        if saving:
            self._calls.saving("result_write", machine.store.results.__setitem__, where,
                               output, saves=(unit,))
        return output

    def ended(self, how: str) -> None:
        """The tool call running now ended (`done`, `failed`)."""
        if self._calls is not None:
            unit = self.unit()
            self._calls.ended(unit, how)
            if how == "done":
                self.done.add(unit)

    def saved(self) -> None:
        """The state saved holds the result of every call that gave one since the last save
        (a failed call's is no result: the model calls again)."""
        if self._calls is not None:
            for unit in self.ran:
                if unit in self.done:
                    self._calls.journal.saved(unit)
        self.ran.clear()
        self.done.clear()

    def saving(self, write: Any, *arguments: Any) -> None:
        """Writes an execution's state past `before_state_write` and `after_state_write`."""
        if self._calls is None:
            raise AdapterError("no state is written while the agent is read")
        self._calls.saving("state_write", write, *arguments)
        self.saved()

    def crashed(self) -> None:
        self.ran.clear()
        self.done.clear()
        if self._calls is not None:
            self._calls.crashed()


def wrap_tools(tools: list[Any], box: AgentBox, machine: OpenAIAgentsMachine,
               routed: Mapping[str, Tool]) -> list[Any]:
    """Gives copies of the agent's function tools (the user's own are left as they are): the
    call is known to the box while it runs; one named like a declared tool calls the world
    instead of its body."""
    import dataclasses

    from agents.tool import FunctionTool, default_tool_error_function

    wrapped: list[Any] = []
    for tool in tools:
        if not isinstance(tool, FunctionTool):
            wrapped.append(tool)
            continue
        body = tool.on_invoke_tool
        name = tool.name

        async def invoke(context: Any, arguments: str, *, _body: Any = body,
                         _name: str = name) -> Any:
            call_id = str(getattr(context, "tool_call_id", ""))
            step, attempt = machine.store.calls.get(call_id, (0, 1))
            token = _RUNNING.set(Running(machine.execution, _name, call_id, step, attempt))
            try:
                if _name in routed:
                    try:
                        given = json.loads(arguments or "{}")
                        output = box.call(_name, given if isinstance(given, dict)
                                          else {"input": given})
                    except ToolFailed as error:
                        box.ended("failed")
                        return default_tool_error_function(context, error)
                    box.ended("done")
                    return json.dumps(output, sort_keys=True, default=str)
                result = await _body(context, arguments)
                failed = isinstance(result, str) and result.startswith(ERROR_TEXT)
                box.ended("failed" if failed else "done")
                return result
            finally:
                _RUNNING.reset(token)

        wrapped.append(dataclasses.replace(tool, on_invoke_tool=invoke))
    return wrapped


#: The SDK modules that bind `uuid4` at import time.
_MINTING = ("agents.run", "agents.run_context", "agents.run_state", "agents.items",
            "agents.run_internal.run_loop", "agents.run_internal.run_grouping",
            "agents.run_internal.items")


#: Held while the SDK's `uuid4` is rebound: one run at a time patches the modules, and a
#: second worker nested in the same thread takes it again (re-entrant).
_PATCHING = threading.RLock()


@contextlib.contextmanager
def harnessed(machine: OpenAIAgentsMachine) -> Iterator[None]:
    """Mints the SDK's `uuid4` ids from the run's counter while it runs: the same seed gives
    the same ids (tracing, the other source, is off in every run the harness makes). The
    SDK's logger is quiet meanwhile. The modules are patched under a lock and restored
    exactly as they were found, a nested run's patch included."""
    modules = [importlib.import_module(name) for name in _MINTING]
    with _PATCHING:
        found = [(module, module.__dict__["uuid4"]) for module in modules
                 if "uuid4" in module.__dict__]
        # the SDK logs a simulated crash in a tool as a fatal error of its own: the harness
        # says what happened
        logger = logging.getLogger("openai.agents")
        quiet = logger.disabled
        logger.disabled = True
        for module, _ in found:
            module.uuid4 = machine.store.mint  # type: ignore[attr-defined]
        try:
            yield
        finally:
            logger.disabled = quiet
            for module, original in found:
                module.uuid4 = original  # type: ignore[attr-defined]
