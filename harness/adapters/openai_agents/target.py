"""The target: `openai_agents_target(build_agent, script=...)` and `OpenAIAgentsTarget`, the
machine factory that builds the user's agent and holds the workflow definition read off it."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from harness.adapters.openai_agents.box import AgentBox
from harness.adapters.openai_agents.common import DONE, FOREVER, RUNNING, asking, calling
from harness.adapters.openai_agents.machine import OpenAIAgentsMachine
from harness.adapters.openai_agents.model import Say, ToolCall, checked
from harness.adapters.peers import AdapterError
from harness.adapters.replay_units import load_read
from harness.sim.machine import Probe
from reference_machine import (
    APPROVAL_DENIED,
    APPROVAL_GRANTED,
    Tool,
    WorkflowDefinition,
    step_action_hash,
)

__all__ = ["OpenAIAgentsTarget", "openai_agents_target"]


class OpenAIAgentsTarget:
    """A machine factory over an OpenAI Agents SDK agent: `target(definition, tools, probe)`
    gives an `OpenAIAgentsMachine`, and `target.definition` is what was read off the agent
    and its script."""

    def __init__(self, build_agent: Callable[[AgentBox], Any], *,
                 script: Sequence[ToolCall | Say], name: str | None,
                 tools: Mapping[str, Mapping[str, Any]] | None, input: Any,
                 roles: Sequence[str], gates: Mapping[str, str] | None, save_results: bool,
                 client_state: bool, client_tampers: bool, one_runner_per_execution: bool,
                 max_turns: int, module: str | None) -> None:
        _require_agents()
        self.build_agent, self.input = build_agent, input
        self.roles = tuple(sorted(roles))
        if not self.roles:
            raise AdapterError("roles is empty: name who may approve, roles=('approver',)")
        if client_tampers and not client_state:
            raise AdapterError("client_tampers=True needs client_state=True: a client can "
                               "tamper only with a state it holds")
        self.save_results, self.client_state = save_results, client_state
        self.client_tampers = client_tampers
        self.one_runner_per_execution, self.max_turns = one_runner_per_execution, max_turns
        declared = {tool: dict(each) for tool, each in (tools or {}).items()}
        agent = build_agent(AgentBox({}, None))
        names, asks = _read_agent(agent)
        self.script = checked(script, names)
        self.name = name or str(getattr(agent, "name", "") or "agent").replace(" ", "_")
        self.__qualname__ = f"openai_agents:{self.name}"
        self.__module__ = module or getattr(build_agent, "__module__", None) or __name__
        called = list(dict.fromkeys(step.tool for step in self.script
                                    if isinstance(step, ToolCall) and step.tool in asks))
        self.gates = {tool: (gates or {}).get(tool, tool) for tool in called}
        for tool, world in self.gates.items():
            if world not in declared:
                raise AdapterError(
                    f"tool {tool!r} needs approval, and its effect is the world's {world!r}, "
                    f"which tools= does not declare: declare it (tools={{{world!r}: "
                    f"{{'idempotency_keys': True}}}}), or name the declared tool its body "
                    f"calls (gates={{{tool!r}: 'payments.refund'}})")
        self.definition = _definition(self.name, declared, self.gates, self.roles)

    def input_of(self, context: Mapping[str, Any]) -> Any:
        """Gives the run's input: `input` (a value, or a function of the start context), or
        the context as JSON text."""
        if callable(self.input):
            return self.input(dict(context))
        if self.input is None:
            return json.dumps(dict(context), sort_keys=True, default=str)
        return self.input

    def action_hash(self, tool: str, arguments: str) -> str:
        """Gives the hash of the exact action a call asks approval for: its tool and its
        arguments (the reference machine's `step_action_hash` of the gated state's step)."""
        step = self.definition.states[calling(tool)].step
        assert step is not None
        try:
            given = json.loads(arguments or "{}")
        except ValueError:
            given = {"arguments": arguments}
        return step_action_hash(step, given if isinstance(given, Mapping)
                                else {"input": given})

    def __call__(self, definition: WorkflowDefinition, tools: Mapping[str, Tool],
                 probe: Probe) -> OpenAIAgentsMachine:
        return OpenAIAgentsMachine(self, tools, probe)

    def __repr__(self) -> str:
        return f"<openai-agents target {self.name}>"


def _read_agent(agent: Any) -> tuple[list[str], frozenset[str]]:
    """Gives the agent's function tools and those that need approval; refuses what the
    adapter does not model."""
    from agents import Agent
    from agents.tool import FunctionTool

    if not isinstance(agent, Agent):
        raise AdapterError(f"build_agent gave {type(agent).__name__}, not an agents.Agent")
    if agent.handoffs:
        raise AdapterError("the agent has handoffs, which the adapter does not model; fuzz "
                           "each agent alone")
    names: list[str] = []
    asks: set[str] = set()
    for tool in agent.tools:
        if not isinstance(tool, FunctionTool):
            raise AdapterError(f"tool {getattr(tool, 'name', tool)!r} is a "
                               f"{type(tool).__name__}, which runs outside the process; the "
                               f"adapter runs function tools only: wrap it in a "
                               f"@function_tool that calls box.call(...)")
        if getattr(tool, "needs_approval", False) not in (True, False):
            raise AdapterError(f"tool {tool.name!r} decides at run time whether it needs "
                               f"approval; the adapter reads a fixed answer: "
                               f"needs_approval=True or False")
        names.append(tool.name)
        if tool.needs_approval is True:
            asks.add(tool.name)
    return names, frozenset(asks)


def _definition(name: str, tools: Mapping[str, Mapping[str, Any]], gates: Mapping[str, str],
                roles: Sequence[str]) -> WorkflowDefinition:
    """Gives the definition: `running` (the model and the tools that need no approval), per
    tool that needs approval a wait state `awaiting_<tool>` and the state `calling_<tool>`
    that runs it once approved, and `done`."""
    states: dict[str, dict[str, Any]] = {
        RUNNING: {"initial": True,
                  "description": "The model's turns and the tools that need no approval.",
                  "always": [*({"target": asking(tool)} for tool in gates),
                             {"target": DONE}]},
        DONE: {"type": "final", "outcome": "success"},
    }
    for tool, world in gates.items():
        states[asking(tool)] = {
            "type": "wait",
            "approval": {"for_state": calling(tool), "roles": list(roles),
                         "summary": f"Run {tool} with the arguments the model gave.",
                         "expires_after": FOREVER, "on_expiry": "deny"},
            "on": {APPROVAL_GRANTED: calling(tool), APPROVAL_DENIED: RUNNING}}
        states[calling(tool)] = {
            "step": {"tool": world, "input": {}, "needs_approval": True},
            "on": {"step.succeeded": RUNNING, "step.failed": RUNNING}}
    spec = {"name": name, "version": 1, "context": {"route": ""},
            "tools": {tool: dict(each) for tool, each in tools.items()}, "states": states}
    return load_read(spec, "agent")


def _require_agents() -> None:
    try:
        importlib.import_module("agents")
    except ImportError as error:
        raise AdapterError("openai-agents is not installed: pip install "
                           "'fsmharness[openai-agents]'") from error


def openai_agents_target(build_agent: Callable[[AgentBox], Any], *,
                         script: Sequence[ToolCall | Say], name: str | None = None,
                         tools: Mapping[str, Mapping[str, Any]] | None = None,
                         input: Any = None, roles: Sequence[str] = ("approver",),
                         gates: Mapping[str, str] | None = None, save_results: bool = False,
                         client_state: bool = False, client_tampers: bool = False,
                         one_runner_per_execution: bool = False,
                         max_turns: int = 20) -> OpenAIAgentsTarget:
    """Wraps an OpenAI Agents SDK agent (see the package). `build_agent(box)` gives the
    `Agent` (its model is replaced by the scripted one that plays `script`), `tools` the
    simulated services (a function tool named like one calls it instead of its body),
    `input` the run's input (a value, or a function of the start context; default: the
    context as JSON), `roles` who may approve, `gates` the declared tool a tool that needs
    approval calls from its body (default: the one of its own name), `save_results` whether
    the app saves each call's result right after its effect and takes it from there when
    the call is made again, `client_state` whether the app hands the saved state to its
    client and takes it back with the decision written in (the app still checks who sent
    the decision, their role, the request and the action), `client_tampers` whether that
    client writes an approval into the JSON whenever the human denies (the JSON is trusted
    input to `RunState.from_string`: PR #5105), and
    `one_runner_per_execution` the deployment's contract that one execution is never
    resumed by two workers at once (no second worker then runs it)."""
    return OpenAIAgentsTarget(build_agent, script=script, name=name, tools=tools, input=input,
                              roles=roles, gates=gates, save_results=save_results,
                              client_state=client_state, client_tampers=client_tampers,
                              one_runner_per_execution=one_runner_per_execution,
                              max_turns=max_turns,
                              module=sys._getframe(1).f_globals.get("__name__"))
