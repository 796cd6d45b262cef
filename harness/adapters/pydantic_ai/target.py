"""The target: `pydantic_ai_target(build_agent, script=...)` and `PydanticAITarget`, the machine
factory that builds the user's agent and holds the workflow definition read off it."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from harness.adapters.peers import AdapterError, safe_ids
from harness.adapters.pydantic_ai.machine import (
    APPROVALS,
    CRASH_POINTS,
    DONE,
    FAILED,
    RUNNING,
    AgentBox,
    PydanticAIMachine,
    dbos_answer,
    watched,
)
from harness.adapters.pydantic_ai.model import Script
from harness.adapters.pydantic_ai.on_dbos import RECORD_POINTS, durable_agent
from harness.adapters.replay_units import load_read
from harness.sim.machine import Probe
from reference_machine import (
    Tool,
    WorkflowDefinition,
    step_action_hash,
)

__all__ = ["PydanticAITarget", "pydantic_ai_target"]

_FOREVER = 10 * 365 * 24 * 3_600_000  # an approval waits for its human: no expiry
#: Where the agent's runs are durable: the app's saved history, or DBOS workflows
DURABLE = ("app", "dbos")


class PydanticAITarget:
    """A machine factory over a pydantic-ai agent: `target(definition, tools, probe)` gives a
    `PydanticAIMachine`, and `target.definition` is what was read off the agent."""

    crash_points: Sequence[str] = CRASH_POINTS

    def __init__(self, build_agent: Callable[[AgentBox], Any], *,
                 script: Script | Callable[..., Any], name: str | None,
                 tools: Mapping[str, Mapping[str, Any]] | None, prompt: Any,
                 approvals: str, gates: Mapping[str, str] | None,
                 routes: Mapping[str, str] | None, roles: Sequence[str],
                 one_runner_per_execution: bool, module: str | None,
                 durable: str = "app") -> None:
        _require_pydantic_ai()
        if durable not in DURABLE:
            raise AdapterError(f"durable {durable!r}: expected one of {', '.join(DURABLE)}")
        if approvals not in APPROVALS:
            raise AdapterError(f"approvals {approvals!r}: expected one of "
                               f"{', '.join(APPROVALS)}")
        if not roles:
            raise AdapterError("roles is empty: name who may decide, roles=('approver',)")
        self.build_agent, self.script, self.prompt = build_agent, script, prompt
        self.approvals, self.roles = approvals, tuple(roles)
        self.routes = dict(routes or {})
        self.one_runner_per_execution = one_runner_per_execution
        self.expires_after = _FOREVER
        declared = dict(tools or {})
        unknown = sorted(set(self.routes.values()) - set(declared))
        if unknown:
            raise AdapterError(f"routes name tools that are not declared: "
                               f"{', '.join(unknown)}; declare them with tools={{...}}")
        agent = self.agent(AgentBox(None))
        needing = _needing_approval(agent)
        worlds = self._gates(needing, gates or {}, declared)
        self.name = name or getattr(build_agent, "__name__", "agent").strip("_<>") or "agent"
        self.__qualname__ = f"pydantic_ai:{self.name}"
        self.__module__ = module or getattr(build_agent, "__module__", None) or __name__
        ids = safe_ids([RUNNING, DONE, FAILED, *(f"awaiting_{t}" for t in needing),
                        *needing])
        if any(ids[each] != each for each in (RUNNING, DONE, FAILED)):
            raise AdapterError("a tool's name takes a state's id the adapter needs")
        #: per tool that needs approval, the state that waits for it and the state it runs in
        self.awaiting = {tool: ids[f"awaiting_{tool}"] for tool in needing}
        self.gated = {tool: ids[tool] for tool in needing}
        self.worlds = worlds
        self.definition = self._definition(declared)
        self.durable = durable
        self.dbos_agent: Any = None
        if durable == "dbos":  # registered with DBOS once, before any launch
            if not agent.name:  # as pydantic-ai's DBOSAgent refuses it
                raise AdapterError("an agent needs a unique name to run on DBOS (DBOS names "
                                   "its workflows and steps by it): Agent(..., name='support')")
            self.crash_points = (*CRASH_POINTS, *RECORD_POINTS)
            self.dbos_agent = durable_agent(self.agent(AgentBox(None)), agent.name,
                                            dbos_answer, watched)

    def agent(self, box: AgentBox) -> Any:
        """Gives the agent `build_agent(box)` makes."""
        agent = self.build_agent(box)
        from pydantic_ai import Agent
        from pydantic_ai.tools import DeferredToolRequests
        if not isinstance(agent, Agent):
            raise AdapterError(f"build_agent gave {type(agent).__name__}, not a pydantic-ai "
                               f"Agent")
        output = agent.output_type
        kinds = output if isinstance(output, Sequence) and not isinstance(output, str) else [
            output]
        if DeferredToolRequests not in kinds:
            raise AdapterError("the agent's output_type lacks DeferredToolRequests, so a tool "
                               "that needs approval cannot stop the run: "
                               "Agent(..., output_type=[str, DeferredToolRequests])")
        return agent

    def prompt_of(self, context: Mapping[str, Any]) -> str:
        if callable(self.prompt):
            return str(self.prompt(dict(context)))
        if self.prompt is None:
            return json.dumps(dict(context), sort_keys=True, default=str)
        return str(self.prompt)

    def action_hash(self, tool: str, args: Mapping[str, Any]) -> str:
        """Gives the hash of the exact action a human approves: the gated state, the world's
        tool and the call's arguments (what the tool world's ledger shows as its input)."""
        step = self.definition.states[self.gated[tool]].step
        if step is None:  # the definition gives each gated state a step: never here
            raise AdapterError(f"the state {self.gated[tool]!r} runs no step")
        return step_action_hash(step, dict(args))

    def _gates(self, needing: Sequence[str], gates: Mapping[str, str],
               declared: Mapping[str, Any]) -> dict[str, str]:
        """Gives, per tool that needs approval, the world's tool whose effect it is."""
        extra = sorted(set(gates) - set(needing))
        if extra:
            raise AdapterError(f"gates names tools that need no approval: {', '.join(extra)}")
        worlds = {}
        for tool in needing:
            world = gates.get(tool) or self.routes.get(tool) or (
                tool if tool in declared else None)
            if world is None or world not in declared:
                raise AdapterError(
                    f"tool {tool!r} needs approval, but no declared tool of the world is its "
                    f"effect: name it, gates={{{tool!r}: 'payments.refund'}}, and declare it "
                    f"in tools=; it must be called with the tool call's own arguments")
            worlds[tool] = world
        return worlds

    def _definition(self, declared: Mapping[str, Mapping[str, Any]]) -> WorkflowDefinition:
        routes = [{"target": each, "guard": f"context.route == {each!r}"}
                  for each in (*self.awaiting.values(), DONE, FAILED)]
        states: dict[str, dict[str, Any]] = {
            RUNNING: {"initial": True, "always": routes},
            DONE: {"type": "final", "outcome": "success"},
            FAILED: {"type": "final", "outcome": "failure"},
        }
        for tool, waiting in self.awaiting.items():
            runs = self.gated[tool]
            states[waiting] = {
                "type": "wait", "description": f"waits for a human's decision on {tool}",
                "approval": {"for_state": runs, "summary": f"Run {tool}?",
                             "roles": list(self.roles), "expires_after": self.expires_after},
                "on": {"approval.granted": runs, "approval.denied": RUNNING}}
            states[runs] = {
                "description": f"runs {tool}, approved",
                "step": {"tool": self.worlds[tool], "input": {}, "needs_approval": True,
                         "reversible": False},
                "on": {"step.succeeded": RUNNING, "step.failed": RUNNING}}
        spec = {"name": self.name, "version": 1, "context": {"route": ""},
                "tools": {tool: dict(each) for tool, each in declared.items()},
                "states": states}
        return load_read(spec, "agent")

    def __call__(self, definition: WorkflowDefinition, tools: Mapping[str, Tool],
                 probe: Probe) -> PydanticAIMachine:
        return PydanticAIMachine(self, tools, probe)

    def __repr__(self) -> str:
        return (f"<pydantic-ai target {self.name} (approvals {self.approvals}, durable "
                f"{self.durable})>")


def _needing_approval(agent: Any) -> list[str]:
    """Gives the agent's function tools that need approval (`requires_approval=True`)."""
    found = []
    for toolset in agent.toolsets:
        for name, tool in (getattr(toolset, "tools", None) or {}).items():
            if getattr(tool, "requires_approval", False):
                found.append(str(name))
    return found


def _require_pydantic_ai() -> None:
    try:
        importlib.import_module("pydantic_ai")
    except ImportError as error:
        raise AdapterError("pydantic-ai is not installed: pip install pydantic-ai-slim"
                           ) from error


def pydantic_ai_target(build_agent: Callable[[AgentBox], Any], *,
                       script: Script | Callable[..., Any], name: str | None = None,
                       tools: Mapping[str, Mapping[str, Any]] | None = None,
                       prompt: Any = None, approvals: str = "bound",
                       gates: Mapping[str, str] | None = None,
                       routes: Mapping[str, str] | None = None,
                       roles: Sequence[str] = ("approver",),
                       one_runner_per_execution: bool = False,
                       durable: str = "app") -> PydanticAITarget:
    """Wraps a pydantic-ai agent whose tools may need approval (see the package).
    `build_agent(box)` gives the `Agent`; `script` is what its model says (a `Script`, or a
    `FunctionModel` function); `tools` the world's tools; `prompt` the run's prompt (a value,
    or a function of the start context; default: the context as JSON); `approvals` how the
    app keeps a human's decision (`bound` to the action, or `by_call_id`, a plain boolean);
    `gates` the world's tool each tool that needs approval takes effect through (default:
    the tool of its name, or its route); `routes` the agent's tools whose calls go to a
    world's tool of that name instead of their code; `roles` who may decide; and
    `one_runner_per_execution` the deployment's contract that no second worker runs an
    execution beside the first; `durable` where the agent's runs are durable: `app` (the
    app saves the history between runs) or `dbos` (each run a DBOS workflow, its model
    requests DBOS steps, on a SQLite system database of the run's own)."""
    return PydanticAITarget(build_agent, script=script, name=name, tools=tools, prompt=prompt,
                            approvals=approvals, gates=gates, routes=routes, roles=roles,
                            one_runner_per_execution=one_runner_per_execution,
                            module=sys._getframe(1).f_globals.get("__name__"),
                            durable=durable)
