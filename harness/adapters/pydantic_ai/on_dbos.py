"""A pydantic-ai agent run durably on DBOS (`durable="dbos"`): each agent run is a DBOS
workflow (pydantic-ai's `DBOSAgent`) whose model requests are DBOS steps, in-process on a
SQLite system database of the run's own (no server, no network).

- `DBOSLife`: the DBOS of one simulated run. Its process dies with the machine
  (`DBOS.destroy`) and comes back as a new executor (`launch` under the next executor id);
  recovery then re-enqueues the workflows a dead executor left pending, one at a time, and
  waits for each, as DBOS's recovery of a dead executor's workflows does. A second executor
  re-enqueues the live executor's pending workflows while it runs them: DBOS's
  duplicate-execution class (the re-run's steps run again beside the first run's).
- `durable_agent`: the user's agent wrapped once per target as a `DBOSAgent` whose model is
  the script and whose tools are watched; both find the machine that runs the workflow now
  by the workflow's id (`running`), because DBOS runs a recovered workflow on threads of its
  own, outside any context the harness sets.
- Crash points: `before_record_step` and `after_record_step`, around DBOS's record of a
  model answer (a step's output).

DBOS is a process singleton: one run on DBOS at a time in a process (`AdapterError` on a
second). Everything it writes lives in a temporary folder, removed when the run closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from fault_injection import SimulatedCrash
from harness.adapters.peers import AdapterError
from harness.adapters.pydantic_ai.model import lent_here
from harness.adapters.replay_units import Dead
from harness.errors import words_of

__all__ = ["RECORD_POINTS", "DBOSLife", "durable_agent", "running"]

#: The crash points around DBOS's record of a step's output (a model's answer).
RECORD_POINTS = ("before_record_step", "after_record_step")
_POLL_S = 0.005  # how often the harness looks whether a recovered workflow ended
_RECOVERY_BOUND_S = 120.0  # a recovered workflow that runs longer is DBOS's failure
_QUEUE_POLL_S = 0.01  # DBOS's internal queue, notifications and scheduler poll this often
_TERMINAL = ("SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")


class Runner(Protocol):
    """The machine a workflow runs for: where its crash points strike."""

    dead: bool
    died_at: str

    def passing(self, point: str) -> None: ...


#: workflow id -> (the machine recovering it, its execution): a recovered workflow runs on
#: DBOS's threads, outside the harness's context
_RUNNING: dict[str, tuple[Any, str]] = {}
#: (the machine, the execution, the workflow) of the run the harness started in this context
_HERE: contextvars.ContextVar[tuple[Any, str, str] | None] = contextvars.ContextVar(
    "fsmharness_dbos_run", default=None)
_ONE_DBOS = threading.Lock()  # DBOS is a process singleton: one life at a time
_NAMES: set[str] = set()  # the DBOSAgent names registered in this process
#: workflow id -> what stopped its run on DBOS's threads other than an exception (a crash,
#: the harness's bound on a step's operations): DBOS records no outcome for it
_STOPPED: dict[str, BaseException] = {}
#: workflow id -> the last exception a tool call or a model answer of its run raised, as
#: raised (DBOS records the one that ends the run pickled, without its causes)
_FAILED: dict[str, BaseException] = {}


def running(workflow_id: str | None) -> tuple[Any, str]:
    """Gives the machine that runs the workflow now and the workflow's execution: the one
    that started it in this context, else the one that recovers it."""
    here = _HERE.get()
    if here is not None and here[2] == workflow_id:
        return here[0], here[1]
    found = _RUNNING.get(workflow_id or "")
    if found is None:
        raise AdapterError(f"workflow {workflow_id!r} runs for no machine of the harness: an "
                           f"agent on DBOS runs under the adapter only")
    return found


def recovered_by(machine: Any, workflow_id: str, execution_id: str) -> None:
    """Says that `machine` recovers workflow `workflow_id` of execution `execution_id`."""
    _RUNNING[workflow_id] = (machine, execution_id)


@contextlib.contextmanager
def noting(workflow_id: str | None) -> Iterator[None]:
    """Notes what a tool call or a model answer of the workflow's run raised: an exception
    as raised, with its causes (DBOS records the one that ends the run pickled, without
    them: see `failure_of`), and what stops the run other than an exception, so that the
    harness waiting for it on another thread can raise it (see `DBOSLife._wait`)."""
    try:
        yield
    except BaseException as error:
        if workflow_id and isinstance(error, Exception):
            _FAILED[workflow_id] = error
        elif workflow_id:
            _STOPPED.setdefault(workflow_id, error)
        raise


def failure_of(workflow_id: str, recorded: BaseException) -> BaseException:
    """Gives the exception the workflow's run ended with as it was raised, with its causes
    (`recorded` is DBOS's copy of it: unpickled without its causes, or, where pickling
    failed, an `Exception` of the type's name and the words)."""
    live = _FAILED.get(workflow_id)
    if live is None:
        return recorded
    said, named = words_of(recorded), type(live).__name__
    same = ((type(recorded).__name__ == named and said == words_of(live))
            or said == f"{named}: {words_of(live)}")
    return live if same else recorded


def workflow_id(execution_id: str, run: int) -> str:
    """The id of an execution's `run`-th agent run: the app starts it under this id, so a
    restarted app finds the run DBOS recorded."""
    return f"{execution_id}/run/{run}"


def execution_of(workflow: str) -> str:
    return workflow.rsplit("/run/", 1)[0]


def durable_agent(agent: Any, name: str, model: Callable[..., Any],
                  watch: Callable[[Any], Any]) -> Any:
    """Wraps `agent` as a `DBOSAgent` named `name` (made unique in the process: DBOS refuses
    a name registered twice), whose model is `FunctionModel(model)` and whose toolsets are
    `watch(toolset)`. Tools run one at a time (`sequential`), in the order the model gave."""
    try:
        from pydantic_ai.durable_exec.dbos import DBOSAgent
    except ImportError as error:
        raise AdapterError("durable='dbos' needs DBOS: pip install 'pydantic-ai-slim[dbos]'"
                           ) from error
    from pydantic_ai.models.function import FunctionModel
    unique, n = name, 1
    while unique in _NAMES:
        n += 1
        unique = f"{name}_{n}"
    _NAMES.add(unique)
    agent.model = FunctionModel(model)
    wrapped = DBOSAgent(agent, name=unique, parallel_execution_mode="sequential")
    wrapped._toolsets = [watch(each) for each in wrapped._toolsets]
    return wrapped


class DBOSLife:
    """The DBOS of one simulated run (see the module). Its workers share it."""

    def __init__(self) -> None:
        self.folder = ""
        self.lives = 0  # executors launched so far; the live one is the last
        self.live = False

    @property
    def executor(self) -> str:
        return f"fsmharness-{self.lives}"

    def start(self) -> None:
        """Launches DBOS as the next executor, on the run's system database."""
        if self.live:
            return
        if not _ONE_DBOS.acquire(blocking=False):
            raise AdapterError("another run on DBOS is going on in this process; DBOS is a "
                               "process singleton: run one at a time")
        try:
            from dbos import DBOS
            from dbos._dbos import _get_dbos_instance
            if not self.lives:  # a new simulated run: nothing of an earlier one is known
                _RUNNING.clear()
                _STOPPED.clear()
                _FAILED.clear()
            if not self.folder:
                self.folder = tempfile.mkdtemp(prefix="fsmharness-dbos-")
            self.lives += 1
            DBOS(config={
                "name": "fsmharness", "log_level": "CRITICAL",
                "system_database_url": f"sqlite:///{self.folder}/system.sqlite",
                "executor_id": self.executor, "application_version": "fsmharness",
                "notification_listener_polling_interval_sec": _QUEUE_POLL_S,
                "scheduler_polling_interval_sec": _QUEUE_POLL_S,
            })
            instance = _get_dbos_instance()
            instance._registry.get_internal_queue()._polling_interval_sec = _QUEUE_POLL_S
            DBOS.launch()
            _watch_writes(instance._sys_db)
            self.live = True
        except BaseException:
            _ONE_DBOS.release()
            raise

    def stop(self) -> None:
        """The process dies: DBOS stops (its executor's threads are not waited for: a run
        still unwinding there writes nothing, see `_watch_writes`); what it recorded
        stays."""
        if not self.live:
            return
        from dbos import DBOS
        try:
            DBOS.destroy(destroy_registry=False)
        finally:
            self.live = False
            _ONE_DBOS.release()

    def close(self) -> None:
        self.stop()
        if self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = ""
        for workflow in [w for w, (machine, _) in _RUNNING.items()
                         if getattr(machine, "disk", None) is not None
                         and getattr(machine.disk, "life", None) is self]:
            del _RUNNING[workflow]
            _STOPPED.pop(workflow, None)
            _FAILED.pop(workflow, None)

    def recover(self, machine: Runner, executors: Sequence[str]) -> None:
        """Re-enqueues the workflows `executors` left pending, in the order of their ids,
        one at a time, each run for `machine` and waited for; a crash in one raises here."""
        from dbos._dbos import _get_dbos_instance
        from dbos._recovery import _recover_workflow
        from dbos._utils import GlobalParams
        instance = _get_dbos_instance()
        pending = [each for executor in executors for each in
                   instance._sys_db.get_pending_workflows(executor, GlobalParams.app_version)]
        for each in sorted(pending, key=lambda p: p.workflow_id):
            workflow = each.workflow_id
            before = _RUNNING.get(workflow)  # a second executor's: the live one's run
            recovered_by(machine, workflow, execution_of(workflow))
            running_before = _running_count(instance, workflow)
            _STOPPED.pop(workflow, None)
            try:
                _recover_workflow(instance, each, list(executors))
                self._wait(machine, workflow, running_before)
            finally:
                if before is not None:  # the first run goes on, for the first executor
                    _RUNNING[workflow] = before

    def _wait(self, machine: Runner, workflow: str, running_before: int) -> None:
        """Waits until DBOS ran the recovered workflow to its end and its run stopped (the
        runs of it that were going on before may still be: a second executor's re-run
        beside the first's); raises the crash it met. Nothing of the recovery runs on after
        this returns: a second worker acting inside it has ended too."""
        from dbos import DBOS
        from dbos._dbos import _get_dbos_instance
        instance = _get_dbos_instance()
        began = time.monotonic()
        while True:
            stopped = _running_count(instance, workflow) <= running_before
            if machine.dead and stopped:
                raise SimulatedCrash(machine.died_at or RECORD_POINTS[0])
            status = DBOS.get_workflow_status(workflow)
            ended = status is not None and status.status in _TERMINAL
            if ended and stopped and not machine.dead:
                return
            if stopped and not ended and workflow in _STOPPED:  # a bound of the harness
                raise _STOPPED.pop(workflow)
            if time.monotonic() - began > _RECOVERY_BOUND_S:
                raise AdapterError(f"the recovered workflow {workflow!r} did not end within "
                                   f"{_RECOVERY_BOUND_S:.0f} s (DBOS did not run it, or the "
                                   f"agent's code did not return)")
            time.sleep(_POLL_S)

    def dead_executors(self) -> list[str]:
        return [f"fsmharness-{n}" for n in range(1, self.lives)]


def _running_count(instance: Any, workflow: str) -> int:
    """Gives how many runs of the workflow DBOS has going on in the process."""
    active = instance._active_workflows_set
    with active._lock:
        return len(active._m.get(workflow, ()))


def _watch_writes(system_db: Any) -> None:
    """Puts the crash points around DBOS's record of a model's answer (a step's output), and
    keeps a dead process from writing: a run that unwinds after its crash records nothing
    (its workflow stays pending, as when the process dies)."""
    record, outcome = system_db.record_operation_result, system_db.update_workflow_outcome

    def recording(result: Any, **options: Any) -> None:
        workflow = result.get("workflow_uuid")
        machine, _ = running(workflow)
        if machine.dead:
            raise Dead
        if "__model.request" not in str(result.get("function_name", "")):
            return record(result, **options)
        # DBOS writes on a thread of its own; the harness waits on it
        with lent_here(), noting(workflow):
            machine.passing(RECORD_POINTS[0])
            record(result, **options)
            machine.passing(RECORD_POINTS[1])
        return None

    def ending(workflow: str, *arguments: Any, **options: Any) -> Any:
        if running(workflow)[0].dead:
            raise Dead
        return outcome(workflow, *arguments, **options)
    system_db.record_operation_result = recording
    system_db.update_workflow_outcome = ending


async def _run_workflow(agent: Any, workflow: str, prompt: str | None, history: Any,
                        results: Any) -> Any:
    from dbos import SetWorkflowID
    with SetWorkflowID(workflow):
        return await agent.run(prompt, message_history=history,
                               deferred_tool_results=results)


def run_workflow(machine: Any, execution_id: str, workflow: str, prompt: str | None,
                 history: Any, results: Any) -> Any:
    """Runs one agent run of `machine` under its workflow id, in a loop of its own: DBOS
    gives the recorded outcome of a run that already ended."""
    token = _HERE.set((machine, execution_id, workflow))
    try:
        return asyncio.run(_run_workflow(machine.target.dbos_agent, workflow, prompt,
                                         history, results))
    finally:
        _HERE.reset(token)
