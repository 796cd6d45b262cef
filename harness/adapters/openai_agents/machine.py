"""The machine wrapper: one worker running an OpenAI Agents SDK agent's executions under the
simulator (`OpenAIAgentsMachine`), saving each execution's RunState as JSON between turns and
resuming it from there, as an app that waits on a human between turns does."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fault_injection import SimulatedCrash
from harness.adapters.openai_agents.box import AgentBox, harnessed, wrap_tools
from harness.adapters.openai_agents.common import (
    CRASH_POINTS,
    DONE,
    FOREVER,
    RESULT_POINTS,
    RUNNING,
    Dead,
    asking,
    calling,
)
from harness.adapters.openai_agents.model import model_class
from harness.adapters.openai_agents.store import Saved, Store
from harness.adapters.replay_units import Process
from harness.sim.machine import ApprovalWait, Observation, Probe
from reference_machine import APPROVAL_DENIED, APPROVAL_GRANTED, Event, Tool

if TYPE_CHECKING:
    from harness.adapters.openai_agents.target import OpenAIAgentsTarget

__all__ = ["OpenAIAgentsMachine", "client_edit"]

_DECISIONS = (APPROVAL_GRANTED, APPROVAL_DENIED)


class OpenAIAgentsMachine(Process):
    """One worker running an agent under the harness (see the module)."""

    crash_points: Sequence[str] = CRASH_POINTS

    def __init__(self, target: OpenAIAgentsTarget, tools: Mapping[str, Tool], probe: Probe,
                 store: Store | None = None,
                 moves: dict[str, list[tuple[str, str]]] | None = None) -> None:
        self.target, self._tools, self.probe = target, tools, probe
        points = CRASH_POINTS + (RESULT_POINTS if target.save_results else ())
        self.crash_points = tuple(p for p in points if tools or p != "after_tool_call")
        self.store = store if store is not None else Store()
        self.dead = False
        self.died_at = ""
        self.execution = ""  # the execution being run now
        self.box = AgentBox(tools, self)
        # per execution, the moves its runs made since it was last observed (a second
        # worker's too): what the processes watched, lost in a crash
        self._moves = moves if moves is not None else {}
        self.agent: Any = None
        self._open()

    def _open(self) -> None:
        self.dead = False
        built = self.target.build_agent(self.box)
        routed = {name: tool for name, tool in self._tools.items()}
        model = model_class()(self.target.script, self.store)
        self.agent = built.clone(model=model, tools=wrap_tools(list(built.tools), self.box,
                                                               self, routed))


    # running the agent

    async def _load(self, text: str) -> Any:
        from agents import RunState
        with harnessed(self):
            return await RunState.from_string(self.agent, text)

    async def _run(self, execution_id: str, given: Any, now: int,
                   moves: Sequence[tuple[str, str]] = ()) -> None:
        """Runs the agent on `given` (the input, or a RunState to resume) to its end or its
        next approval, and saves the state."""
        from agents import RunConfig, Runner
        watched = self._moves.setdefault(execution_id, [])
        for move in moves:
            if move not in watched:
                watched.append(move)
        self.execution = execution_id
        result: Any = None
        loop = asyncio.get_running_loop()
        handler = loop.get_exception_handler()
        if not getattr(handler, "hushed", False):  # for the loop's life: its tasks end later
            loop.set_exception_handler(_hushed(handler))
        try:
            with harnessed(self):
                result = await Runner.run(self.agent, given, max_turns=self.target.max_turns,
                                          run_config=RunConfig(tracing_disabled=True))
                state = result.to_state()
                text = state.to_string()
        except (SimulatedCrash, Dead):
            self.dead = True
        if self.dead:
            raise SimulatedCrash(self.died_at or "after_tool_call")
        pending = list(result.interruptions)
        if moves and moves[-1][1] != RUNNING:
            self._move(execution_id, moves[-1][1], RUNNING)
        if pending:
            item = pending[0]
            saved = Saved(text, "waiting", str(item.name), str(item.call_id),
                          str(item.arguments or "{}"), now)
            self._move(execution_id, RUNNING, asking(saved.tool))
        else:
            saved = Saved(text, "done")
            self._move(execution_id, RUNNING, DONE)
        self.box.saving(self.store.save, execution_id, saved)

    def _move(self, execution_id: str, source: str, target: str) -> None:
        watched = self._moves.setdefault(execution_id, [])
        if (source, target) not in watched:
            watched.append((source, target))

    # the protocol

    async def start(self, execution_id: str, context: Mapping[str, Any], now: int
                    ) -> str | None:
        if execution_id in self.store.accepted:
            return "ignored:duplicate"
        given = self.target.input_of(context)
        self.store.accepted[execution_id] = given
        await self._run(execution_id, given, now)
        return "accepted"

    async def deliver(self, execution_id: str, event: Event, now: int) -> str | None:
        store = self.store
        if execution_id not in store.accepted:
            return "rejected:unknown execution"
        if event.id in store.seen:
            return "ignored:duplicate"
        if event.type not in _DECISIONS:
            return f"rejected:{event.type} is not an event the agent takes"
        saved = store.saved.get(execution_id)
        if saved is None or saved.status != "waiting":
            return "rejected:no approval pending"
        granted = event.type == APPROVAL_GRANTED
        # the app knows who sent the decision and what it asked, wherever the state is held
        problem = self._not_genuine(execution_id, event, saved)
        if problem:
            return f"rejected:{problem}"
        if self.target.client_state:
            text, granted = self._from_client(saved, granted)
        else:
            state = await self._load(saved.json)
            found = [each for each in state.get_interruptions()
                     if str(each.call_id) == saved.call_id]
            if not found:
                return "rejected:the saved state asks for no approval of that call"
            if granted:
                state.approve(found[0])
            else:
                state.reject(found[0])
            text = state.to_string()
        decided = saved._replace(json=text, status="decided:" + ("granted" if granted
                                                                  else "denied"))
        self.box.saving(store.save, execution_id, decided, event.id)
        resumed = await self._load(text)
        await self._run(execution_id, resumed, now, [_decided_move(decided)])
        return "accepted"

    def _from_client(self, saved: Saved, granted: bool) -> tuple[str, bool]:
        """Gives the JSON the client sends back with the human's decision, and the decision
        the SDK will read off it. The client holds the state and writes the decision into
        it; a client that tampers (`client_tampers`) writes an approval of the pending call
        whatever the human decided, and nothing in the JSON lets the app tell."""
        written = granted or self.target.client_tampers
        return client_edit(saved.json, self.agent.name, saved.tool, saved.call_id,
                           written), written

    def wait_of(self, execution_id: str, saved: Saved) -> ApprovalWait:
        """Gives the approval request a saved state waits on: its hash is the tool's and its
        exact arguments' (the reference machine's `step_action_hash`)."""
        return ApprovalWait(f"{execution_id}/{asking(saved.tool)}/{saved.call_id}",
                            self.target.roles, self.target.action_hash(saved.tool,
                                                                       saved.arguments),
                            saved.asked_at + FOREVER)

    def _not_genuine(self, execution_id: str, event: Event, saved: Saved) -> str:
        """Says why the app refuses a decision ("" when it takes it): it is a human's, of a
        listed role, for the request pending and its exact action."""
        wait = self.wait_of(execution_id, saved)
        payload = event.payload if isinstance(event.payload, Mapping) else {}
        if event.source != "human":
            return f"a decision comes from a human, not from {event.source!r}"
        if payload.get("role") not in wait.roles:
            return f"role {payload.get('role')!r} may not decide it"
        if event.answers != wait.request_id:
            return f"it answers {event.answers!r}, not the request pending"
        if payload.get("action_hash") != wait.action_hash:
            return "it approves another action than the one pending"
        return ""

    async def advance(self, now: int) -> None:
        pass  # the app keeps no timers: a request waits for its human

    async def complete(self, execution_id: str, call_id: str, now: int) -> None:
        pass  # tools are called synchronously: no call is left in flight

    def crash(self) -> None:
        self.dead = True
        self.agent = None
        self._moves.clear()
        self.box.crashed()

    async def recover(self, now: int) -> None:
        """Resumes each accepted execution from its last saved JSON, as a restarted worker
        would: one never saved runs again from its input; one a human decided carries on."""
        self._open()
        for execution_id, given in list(self.store.accepted.items()):
            saved = self.store.saved.get(execution_id)
            if saved is None:
                await self._run(execution_id, given, now)
            elif saved.status.startswith("decided"):
                resumed = await self._load(saved.json)
                await self._run(execution_id, resumed, now, [_decided_move(saved)])

    def worker(self) -> OpenAIAgentsMachine | None:
        if self.target.one_runner_per_execution:
            return None  # the deployment never resumes one execution in two workers
        return OpenAIAgentsMachine(self.target, self._tools, self.probe, store=self.store,
                                   moves=self._moves)

    def observe(self, execution_id: str) -> Observation:
        moves = tuple(self._moves.pop(execution_id, ()))
        saved = self.store.saved.get(execution_id)
        version = self.store.versions.get(execution_id, 0)
        if saved is None:
            return Observation(RUNNING, "running", version, moves=moves)
        if saved.status == "waiting":
            return Observation(asking(saved.tool), "waiting", version,
                               approval=self.wait_of(execution_id, saved), moves=moves)
        if saved.status.startswith("decided"):
            return Observation(_decided_move(saved)[1], "running", version, moves=moves)
        return Observation(DONE, "final", version, "success", moves=moves)


def _hushed(handler: Any) -> Any:
    """Gives the loop's exception handler less the SDK's report of a tool task that died with
    the simulated process (the harness says what happened)."""
    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if isinstance(context.get("exception"), SimulatedCrash | Dead):
            return
        if handler is not None:
            handler(loop, context)
        else:
            loop.default_exception_handler(context)
    handle.hushed = True  # type: ignore[attr-defined]
    return handle


def _decided_move(saved: Saved) -> tuple[str, str]:
    granted = saved.status == "decided:granted"
    return (asking(saved.tool), calling(saved.tool) if granted else RUNNING)


def client_edit(text: str, agent: str, tool: str, call_id: str, granted: bool) -> str:
    """Gives the saved JSON with a decision on `call_id` written into it, as a client that
    holds the state would write it (`context.function_tool_approvals`)."""
    data = json.loads(text)
    approvals = data.setdefault("context", {}).setdefault("function_tool_approvals", [])
    entry = next((each for each in approvals if each.get("tool_key") == tool), None)
    if entry is None:
        entry = {"agent": {"name": agent}, "tool_key": tool,
                 "decision": {"approved": [], "rejected": []}}
        approvals.append(entry)
    entry["decision"]["approved" if granted else "rejected"].append(call_id)
    return json.dumps(data, indent=2)
