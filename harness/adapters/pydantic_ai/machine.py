"""The machine: one worker of an app that runs a pydantic-ai agent whose tools may need
approval (`PydanticAIMachine`), what the agent's tools are given (`AgentBox`), and the app's
two ways of keeping a human's decision (`APPROVALS`)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fault_injection import SimulatedCrash
from harness.adapters.peers import AdapterError
from harness.adapters.pydantic_ai import on_dbos
from harness.adapters.pydantic_ai.model import in_thread, lent_here, pinned, scripted
from harness.adapters.pydantic_ai.store import Disk, Record, Request
from harness.adapters.replay_units import Dead, Process, ToolFailed, Unit, UnitCalls, chain
from harness.errors import words_of
from harness.sim.machine import ApprovalWait, Observation, Probe
from reference_machine import APPROVAL_DENIED, APPROVAL_GRANTED, Event, Tool

if TYPE_CHECKING:
    from harness.adapters.pydantic_ai.target import PydanticAITarget

__all__ = ["APPROVALS", "CRASH_POINTS", "AgentBox", "PydanticAIMachine"]

#: The points a run can crash at, in the order a resumed run passes them.
CRASH_POINTS = ("before_save_decision", "after_save_decision", "after_tool_call",
                "before_save_history", "after_save_history")
#: How the app keeps a human's decision: `bound` to the request and its action's hash (a
#: grant applies to that exact call only), or `by_call_id`, a plain boolean under the tool
#: call's id, as `DeferredToolResults.approvals` takes it (pydantic-ai#5536).
APPROVALS = ("bound", "by_call_id")
RUNNING, DONE, FAILED = "running", "done", "failed"
_LOOPS_MAX = 20  # decisions the app applies by itself in one call, at most

#: The tool call running now: its unit, why it may run unapproved, the calls it makes
_CURRENT: contextvars.ContextVar[tuple[Unit, str, UnitCalls] | None] = contextvars.ContextVar(
    "fsmharness_pydantic_ai_call", default=None)
#: Who re-runs a tool call on DBOS after a crash, and why
_DBOS_RERUN = ("DBOS's recovery (DBOS runs a recovered agent run again from its top: it "
               "replays the model's recorded answers and runs the tool calls again; a tool "
               "call, or a step whose result was not yet recorded, runs at least once)")


class ToolRaised(Exception):
    """A tool of the agent raised an exception of its own (a bug of the agent's code, not a
    failure of a world's tool): it names the tool, the call and the execution."""

    def __init__(self, tool: str, call_id: str, execution_id: str, said: str) -> None:
        super().__init__(f"tool {tool!r} (call {call_id} of {execution_id}) raised {said}")
        self.tool, self.call_id, self.execution_id, self.said = (tool, call_id, execution_id,
                                                                 said)

    def __reduce__(self) -> tuple[Any, ...]:  # DBOS records it pickled
        return (type(self), (self.tool, self.call_id, self.execution_id, self.said))


class AgentBox:
    """What the agent's tools are given: `call(tool, input, key=None)` calls a declared tool
    of the simulated world for the tool call running now. Its key defaults to
    `{execution}/{tool}/{turn}/{tool call id}`, `turn` being the model's answer where that
    call id first appears: the same when the model sends the call again under its id (after
    `ModelRetry`) and on every re-run of the call from a saved history that holds it."""

    def __init__(self, calls: UnitCalls | None) -> None:
        self._calls = calls

    @property
    def execution_id(self) -> str:
        return self.unit().execution

    def unit(self) -> Unit:
        """Gives the tool call running now as a unit of the replay-unit kit."""
        return self._running()[0]

    def key(self) -> str:
        """Gives the default key of the tool call running now (see the class)."""
        return UnitCalls.key_of(self.unit())

    def call(self, tool: str, input: Mapping[str, Any], key: str | None = None, *,
             retry_on: Sequence[str] = (), tries: int = 3) -> Any:
        """Calls a declared tool; gives its output, or raises `ToolFailed`. A failure whose
        category is in `retry_on` (say `("timeout",)`: the call may have taken effect) is
        sent again under the same key, as the same logical action (a new attempt), up to
        `tries` sends in all; then its last failure is raised."""
        unit, calls = self._running()
        if tries < 1:
            raise AdapterError(f"tries={tries}: a call is sent at least once")
        for attempt in range(1, tries + 1):
            try:
                with lent_here():  # on DBOS, a tool runs on a thread the harness waits on
                    return calls.call(unit, tool, input, key)
            except ToolFailed as error:
                if error.category not in retry_on or attempt == tries:
                    raise
            calls.ended(unit, "failed")  # this attempt failed: the next sends it again
            unit = unit._replace(attempt=unit.attempt + 1)
        raise AdapterError("unreachable")  # the loop returns or raises

    def _running(self) -> tuple[Unit, UnitCalls]:
        current = _CURRENT.get()
        if current is None:
            raise AdapterError("box.call works inside a tool call of the agent only")
        return current[0], current[2]  # the worker's that runs the call (on DBOS, maybe not
        # the one whose box the agent was built with)


class PydanticAIMachine(Process):
    """One worker of the app (see the module and `pydantic_ai_target`)."""

    def __init__(self, target: PydanticAITarget, tools: Mapping[str, Tool], probe: Probe,
                 disk: Disk | None = None,
                 moves: dict[str, list[tuple[str, str]]] | None = None) -> None:
        self.target, self._tools, self.probe = target, tools, probe
        self.crash_points: Sequence[str] = target.crash_points
        self.disk = disk if disk is not None else Disk()
        self.dead, self.died_at = False, ""
        self.on_dbos = target.durable == "dbos"
        self._calls = UnitCalls(_explained(tools), self, self.disk.journal,
                                "DBOS" if self.on_dbos else "pydantic-ai",
                                after_effect="after_tool_call",
                                rerun_by=_DBOS_RERUN if self.on_dbos else "")
        if self.on_dbos:
            if self.disk.life is None:
                self.disk.life = on_dbos.DBOSLife()
            self.disk.life.start()
        self.box = AgentBox(self._calls)
        self._moves = moves if moves is not None else {}
        self._where: dict[str, str] = {}  # the state each execution was last moved to
        self._ran: list[Unit] = []  # the tool calls the run going on made that returned
        self._now = 0
        self._second = False
        # on DBOS the target's agent, registered once, runs for every worker
        self.agent = None if self.on_dbos else target.agent(self.box)


    # -- the protocol
    def start(self, execution_id: str, context: Mapping[str, Any], now: int) -> str | None:
        if execution_id in self.disk.accepted:
            return "ignored:duplicate"
        prompt = self.target.prompt_of(context)
        self.disk.accepted[execution_id] = prompt
        self._where[execution_id] = RUNNING
        self._run(execution_id, Record(prompt), None, now)
        return "accepted"

    def deliver(self, execution_id: str, event: Event, now: int) -> str | None:
        if execution_id not in self.disk.accepted:
            return "rejected:unknown execution"
        record = self.disk.load(execution_id)
        if record is not None and event.id in record.seen:
            return "ignored:duplicate"
        if event.type not in (APPROVAL_GRANTED, APPROVAL_DENIED):
            return f"rejected:{event.type} is not an event the app takes"
        if record is None or record.request is None:
            return "rejected:no approval pending"
        request = record.request
        refused = self._refused(event, request)
        if refused:
            return f"rejected:{refused}"
        granted = event.type == APPROVAL_GRANTED
        decision = {"granted": granted, "hash": request.hash, "request": request.id,
                    "call": request.call}
        record.decisions[request.call if self.target.approvals == "by_call_id"
                         else request.id] = decision
        record.seen.append(event.id)
        record.request = None
        self._where[execution_id] = self.target.awaiting[request.tool]
        self._calls.saving("save_decision", self.disk.write, execution_id, record)
        self._run(execution_id, record, (request, granted), now)
        return "accepted"

    def advance(self, now: int) -> None:
        pass  # the app keeps no timers: an approval waits as long as it takes

    def complete(self, execution_id: str, call_id: str, now: int) -> None:
        pass  # tools are called synchronously: no call is left in flight

    def crash(self) -> None:
        self.dead = True
        self._where.clear()
        self._moves.clear()
        self._ran.clear()
        self._calls.crashed()
        if self.disk.life is not None:
            self.disk.life.stop()  # the process dies, and DBOS in it

    def close(self) -> None:
        if self.disk.life is not None:
            self.disk.life.close()

    def recover(self, now: int) -> None:
        self.dead, self.died_at = False, ""
        life = self.disk.life
        if life is not None:  # DBOS runs again what it left pending, before the app looks
            life.start()
            # a second executor re-enqueues what the live one runs: DBOS's duplicate execution
            executors = [life.executor] if self._second else life.dead_executors()
            self._now = now
            with pinned(self.disk, now):
                in_thread(life.recover, self, executors, fresh=True)
        for execution_id, prompt in list(self.disk.accepted.items()):
            record = self.disk.load(execution_id)
            if record is None:  # accepted, never saved: the queue's copy runs again
                self._where[execution_id] = RUNNING
                self._run(execution_id, Record(prompt), None, now)
                continue
            if record.outcome or record.request is not None:
                continue  # ended, or waiting for its human
            decided = self._decided(record)
            self._where[execution_id] = self._state_of(record)
            self._run(execution_id, record, decided, now)

    def worker(self) -> PydanticAIMachine | None:
        if self.target.one_runner_per_execution:
            return None  # the deployment never runs an execution in two workers at once
        worker = PydanticAIMachine(self.target, self._tools, self.probe, disk=self.disk,
                                   moves=self._moves)
        worker._second = True  # on DBOS: a second executor, beside the live one
        return worker

    def observe(self, execution_id: str) -> Observation:
        moves = tuple(self._moves.pop(execution_id, ()))
        record = self.disk.load(execution_id)
        if record is None:
            return Observation(RUNNING, "running", 0, moves=moves)
        version = len(record.seen) + record.asked + 1 + (1 if record.outcome else 0)
        if record.outcome:
            final = DONE if record.outcome == "success" else FAILED
            return Observation(final, "final", version, record.outcome, moves=moves)
        request = record.request
        if request is not None:
            wait = ApprovalWait(request.id, self.target.roles, request.hash,
                                request.expires_at)
            return Observation(self.target.awaiting[request.tool], "waiting", version,
                               approval=wait, moves=moves)
        return Observation(self._state_of(record), "running", version, moves=moves)

    # -- the app
    def _refused(self, event: Event, request: Request) -> str:
        """Says why the app refuses a human's decision ("" when it takes it)."""
        payload = event.payload if isinstance(event.payload, Mapping) else {}
        if event.source != "human":
            return f"a decision comes from a human, not from {event.source!r}"
        if payload.get("role") not in self.target.roles:
            return f"role {payload.get('role')!r} may not decide"
        if event.answers != request.id:
            return f"it answers {event.answers!r}, not the pending request"
        if payload.get("action_hash") != request.hash:
            return "it approves another action than the one requested"
        return ""

    def _decided(self, record: Record) -> tuple[Request, bool] | None:
        """Gives the decision taken on the request last asked, not yet acted on."""
        for decision in record.decisions.values():
            if not decision.get("done"):
                request = Request(decision["request"], decision["call"], "", {},
                                  decision["hash"], 0)
                return request, bool(decision["granted"])
        return None

    def _state_of(self, record: Record) -> str:
        decided = self._decided(record)
        if decided is None or not decided[1]:
            return RUNNING
        tool = self._tool_of(record, decided[0].call)
        return self.target.gated.get(tool, RUNNING)

    def _tool_of(self, record: Record, call_id: str) -> str:
        for message in self._history(record):
            for part in getattr(message, "parts", ()):
                if getattr(part, "tool_call_id", None) == call_id and hasattr(part, "args"):
                    return str(part.tool_name)
        return ""

    @staticmethod
    def _history(record: Record) -> list[Any]:
        if not record.history:
            return []
        from pydantic_ai.messages import ModelMessagesTypeAdapter
        return list(ModelMessagesTypeAdapter.validate_json(record.history))

    def _move(self, execution_id: str, to: str) -> None:
        where = self._where.get(execution_id, RUNNING)
        if where != to:
            self._moves.setdefault(execution_id, []).append((where, to))
            self._where[execution_id] = to

    def _run(self, execution_id: str, record: Record,
             decided: tuple[Request, bool] | None, now: int) -> None:
        """Runs the agent from the record's history (its prompt, with none) with the decision
        taken, and goes on while the app can decide by itself; saves where it stops."""
        self._now = now
        for _ in range(_LOOPS_MAX):
            results = None
            if decided is not None:
                request, granted = decided
                tool = self._tool_of(record, request.call)
                self._move(execution_id, self.target.gated[tool] if granted else RUNNING)
                results = self._results(request, granted)
                for decision in record.decisions.values():
                    if decision["request"] == request.id:
                        decision["done"] = True
            output = in_thread(self._agent_run, execution_id, record, results,
                               fresh=self.on_dbos)
            if self.dead:
                raise SimulatedCrash(self.died_at or "after_tool_call")
            decided = self._after_run(execution_id, record, output)
            if decided is None:
                return
        raise AdapterError(f"{execution_id}: the app applied {_LOOPS_MAX} decisions by "
                           f"itself in one call; the script loops")

    def _results(self, request: Request, granted: bool) -> Any:
        from pydantic_ai.tools import DeferredToolResults, ToolDenied
        return DeferredToolResults(approvals={request.call: True if granted else ToolDenied(
            "The human denied this call.")})

    def _agent_run(self, execution_id: str, record: Record, results: Any) -> Any:
        """Runs the agent once: gives its result, or the exception that ended the run. On
        DBOS the run is a workflow, its id the execution's and the run's number."""
        from pydantic_ai._utils import disable_threads
        from pydantic_ai.messages import ModelMessagesTypeAdapter
        from pydantic_ai.models.function import FunctionModel
        history = (list(ModelMessagesTypeAdapter.validate_json(record.history))
                   if record.history else None)
        prompt = None if history else record.prompt
        with contextlib.ExitStack() as stack:
            stack.enter_context(pinned(self.disk, self._now))
            stack.enter_context(disable_threads())
            agent = self.agent
            if agent is not None:
                toolsets = [_watching(each, self, execution_id) for each in agent.toolsets]
                stack.enter_context(agent.override(tools=[], toolsets=toolsets))
            try:
                if agent is None:  # on DBOS
                    workflow = on_dbos.workflow_id(execution_id, record.runs + 1)
                    try:
                        return on_dbos.run_workflow(self, execution_id, workflow, prompt,
                                                    history, results)
                    except Exception as error:  # as raised, not as DBOS recorded it
                        return on_dbos.failure_of(workflow, error)
                model = FunctionModel(scripted(self.target.script, execution_id, self.disk))
                return agent.run_sync(prompt, message_history=history, model=model,
                                      deferred_tool_results=results)
            except BaseException as error:  # a crash may come wrapped in a task group's
                if self.dead or _is_crash(error):
                    self.dead = True
                    return None
                if isinstance(error, Exception):
                    return error
                raise

    def _after_run(self, execution_id: str, record: Record, output: Any
                   ) -> tuple[Request, bool] | None:
        """Saves where the run stopped; gives a decision the app takes by itself (a request
        for a call it has a decision for, kept by call id), or None."""
        from pydantic_ai.tools import DeferredToolRequests
        record.runs += 1
        if isinstance(output, BaseException):
            if not _ended_run(output):
                raise output
            record.outcome, record.said = "failure", f"{type(output).__name__}: {output}"
            self._move(execution_id, RUNNING)
            self._save(execution_id, record, FAILED)
            return None
        from pydantic_ai.messages import ModelMessagesTypeAdapter
        record.history = ModelMessagesTypeAdapter.dump_json(output.all_messages()).decode()
        result = output.output
        if not isinstance(result, DeferredToolRequests):
            record.outcome, record.said = "success", str(result)
            self._save(execution_id, record, DONE)
            return None
        if result.calls or len(result.approvals) != 1:
            raise AdapterError(
                f"{execution_id}: the model's turn deferred {len(result.approvals)} calls for "
                f"approval and {len(result.calls)} external calls; the adapter models one "
                f"approval at a time and no external calls: give the script one call that "
                f"needs approval per turn")
        call = result.approvals[0]
        tool = str(call.tool_name)
        if tool not in self.target.awaiting:
            raise AdapterError(f"tool {tool!r} asked for approval, but it was not read as a "
                               f"tool that needs one: give it requires_approval=True "
                               f"(@agent.tool(requires_approval=True))")
        args = call.args_as_dict()
        known = record.decisions.get(call.tool_call_id)
        if self.target.approvals == "by_call_id" and known is not None:
            # the app answers from its store: a boolean under this call id
            self._move(execution_id, self.target.awaiting[tool])
            known["done"] = False
            self._save(execution_id, record, self.target.awaiting[tool])
            return (Request(known["request"], call.tool_call_id, tool, args, known["hash"], 0),
                    bool(known["granted"]))
        record.asked += 1
        record.request = Request(f"{execution_id}/{call.tool_call_id}/{record.asked}",
                                 call.tool_call_id, tool, args,
                                 self.target.action_hash(tool, args),
                                 self._now + self.target.expires_after)
        self._save(execution_id, record, self.target.awaiting[tool])
        return None

    def _save(self, execution_id: str, record: Record, state: str) -> None:
        """Saves the record past the history's crash points; the tool calls the run made
        are saved with it."""
        ran, self._ran = self._ran, []
        self._calls.saving("save_history", self.disk.write, execution_id, record,
                           saves=ran)
        self._move(execution_id, state)

    # -- what the watching toolset tells
    def calling(self, unit: Unit, tool: str) -> None:
        self._ran.append(unit)

    def called(self, unit: Unit, tool: str, how: str) -> None:
        if how != "done":  # its failure is no result: the model sends the call again
            self._ran = [each for each in self._ran if each.place != unit.place]
        self._calls.ended(unit, how)
        if tool in self.target.gated:
            self._move(unit.execution, RUNNING)

    def route(self, tool: str) -> str | None:
        return self.target.routes.get(tool)

    def approved_for(self, execution_id: str, call_id: str, tool: str,
                     args: Mapping[str, Any]) -> str:
        """Says why a gated call runs with arguments no human approved ("" when it does
        not): the decision it runs under was taken on another action."""
        if tool not in self.target.gated:
            return ""
        record = self.disk.load(execution_id)
        decision = record.decisions.get(call_id) if record is not None else None
        if decision is None or decision["hash"] == self.target.action_hash(tool, dict(args)):
            return ""
        return (f"the approval of tool call {call_id!r} was granted for other arguments: "
                f"pydantic-ai takes an approval as a plain boolean under the tool call id "
                f"(DeferredToolResults.approvals), bound to no arguments, so a call sent "
                f"again under that id runs on it (pydantic-ai#5536; bind the decision to the "
                f"action: approvals='bound', or a fingerprint of the arguments in "
                f"DeferredToolResults.metadata checked in the tool)")


def dbos_answer(messages: list[Any], info: Any) -> Any:
    """The model of an agent on DBOS: the script of the worker that runs the workflow."""
    from dbos import DBOS
    machine, execution_id = on_dbos.running(DBOS.workflow_id)
    with on_dbos.noting(DBOS.workflow_id):
        return scripted(machine.target.script, execution_id, machine.disk)(messages, info)


def watched(toolset: Any) -> Any:
    return _watching(toolset, None, "")


def _is_crash(error: BaseException) -> bool:
    return any(isinstance(each, (SimulatedCrash, Dead)) for each in chain(error))


def _ended_run(error: BaseException) -> bool:
    """Tells whether an exception out of a run is the run's own end (a tool's failure it did
    not handle, a model that broke its retries), not a bug in the harness or the app."""
    return any(isinstance(each, ToolFailed) or type(each).__name__ == "UnexpectedModelBehavior"
               for each in chain(error))


def _explained(tools: Mapping[str, Tool]) -> dict[str, Tool]:
    """Gives the world's tools, each telling the world, with the call's cause, why a gated
    call runs with arguments no human approved (see `approved_for`)."""
    def explained(tool: Tool) -> Tool:
        if not getattr(tool, "knows_callers", False):
            return tool

        def call(input: Mapping[str, Any], key: str, made_by: Any = None) -> Any:
            current = _CURRENT.get()
            if made_by is not None and current is not None and current[1]:
                cause = "; ".join(c for c in (made_by.cause, current[1]) if c)
                made_by = made_by._replace(cause=cause)
            return tool(input, key, made_by=made_by)  # type: ignore[call-arg]
        call.knows_callers = True  # type: ignore[attr-defined]
        return call  # type: ignore[return-value]  # a world's tool, `made_by` and all
    return {name: explained(tool) for name, tool in tools.items()}


def _watching_class() -> type:
    from pydantic_ai.toolsets import WrapperToolset

    class Watching(WrapperToolset[Any]):
        """The agent's toolset, each call told to the machine: which tool call runs (the
        unit of the kit), and the world's tool a routed tool calls instead of its code."""

        def __init__(self, wrapped: Any, machine: PydanticAIMachine | None,
                     execution_id: str) -> None:
            super().__init__(wrapped)
            self.machine, self.execution_id = machine, execution_id

        async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: Any,
                            tool: Any) -> Any:
            machine, execution_id = self.machine, self.execution_id
            workflow = None
            if machine is None:  # on DBOS: the worker that runs the workflow now
                from dbos import DBOS
                workflow = DBOS.workflow_id
                machine, execution_id = on_dbos.running(workflow)
            call_id = str(ctx.tool_call_id or "")
            turn, sends = _turn(ctx.messages, call_id)
            unit = Unit(execution_id, name, f"{turn}/{call_id}", sends,
                        (("tool call id pydantic-ai generated", call_id),)
                        if call_id.startswith("pyd_ai_") else ())
            why = machine.approved_for(execution_id, call_id, name, tool_args)
            token = _CURRENT.set((unit, why, machine._calls))
            machine.calling(unit, name)
            how = "failed"
            call = super().call_tool

            async def perform() -> Any:
                try:
                    world = machine.route(name)
                    if world is not None:
                        return machine.box.call(world, tool_args)
                    return await call(name, tool_args, ctx, tool)
                except Exception as error:
                    if isinstance(error, ToolFailed) or type(error).__module__.startswith(
                            "pydantic_ai"):
                        raise  # the world's failure, or pydantic-ai's own control flow
                    raise ToolRaised(name, call_id, execution_id,
                                     f"{type(error).__name__}: {words_of(error)}") from error
            try:
                if workflow is None:
                    output = await perform()
                else:  # off DBOS's loop: a second executor acting at a crash point of the
                    # call waits there for DBOS, whose loop must go on meanwhile
                    with on_dbos.noting(workflow):
                        output = await asyncio.to_thread(asyncio.run, perform())
                how = "done"
                return output
            finally:
                _CURRENT.reset(token)
                if not machine.dead:
                    machine.called(unit, name, how)
    return Watching


_WATCHING: list[type] = []


def _watching(wrapped: Any, machine: PydanticAIMachine | None, execution_id: str) -> Any:
    """The toolset `wrapped`, watched for `machine` (None: for the worker that runs the DBOS
    workflow of the call, found when the call is made)."""
    if not _WATCHING:
        _WATCHING.append(_watching_class())
    return _WATCHING[0](wrapped, machine, execution_id)


def _turn(messages: Sequence[Any], call_id: str) -> tuple[int, int]:
    """Gives the place of the model's answer where the call's id first appears (its n-th
    answer), and how many answers sent it (the attempt: more than one after a
    `ModelRetry`). The place is the same when the model sends the call again under its id,
    and on every re-run of the call from a saved history that holds it."""
    answers = [m for m in messages if getattr(m, "kind", "") == "response"]
    sent = [index for index, answer in enumerate(answers)
            if any(getattr(p, "tool_call_id", None) == call_id for p in answer.parts)]
    return (sent[0], len(sent)) if sent else (len(answers), 1)
