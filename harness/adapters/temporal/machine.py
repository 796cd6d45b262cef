"""The machine: Temporal's server for the workflows of one target, kept in memory as the
durable part (`Server`: each execution's history, its scheduled activities, timers and
workflow task), and a worker that runs the user's workflow tasks and activities against it
(`TemporalMachine`). What activities are given is `ActivityBox`."""

from __future__ import annotations

import contextvars
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fault_injection import SimulatedCrash
from harness.adapters.peers import AdapterError
from harness.adapters.replay_units import (
    Dead,
    Journal,
    Process,
    ToolFailed,
    Unit,
    UnitCalls,
    chain,
)
from harness.adapters.temporal import tasks
from harness.adapters.temporal.history import Events, first_difference
from harness.sim.machine import Call, Observation, Probe
from reference_machine import Event, Tool

if TYPE_CHECKING:
    from harness.adapters.temporal.target import TemporalTarget

__all__ = ["CRASH_POINTS", "ActivityBox", "HandlersUnfinished", "ReplayDiverged", "Server",
           "TemporalMachine", "WorkflowTaskFailed", "current_box"]

#: The points a worker can crash at: inside an activity just after a tool took effect, once
#: an activity returned and before the server has its result, and once a workflow task's
#: commands are made and before the server has them.
CRASH_POINTS = ("after_effect", "before_report_activity", "before_report_task")
RUNNING, COMPLETED, FAILED = "running", "completed", "failed"
#: How long after its last event the run's end replays a history: a worker that lost the
#: workflow from its cache replays it later than any of its tasks ran; a day and a half and
#: seven minutes (in ms), so that the day, the half of the day, the hour and the minute all
#: differ from when the tasks ran
LATER = (36 * 60 + 7) * 60_000

#: Why two workers ran one activity, in a duplicate's cause
_TWO_WORKERS = ("Temporal gave the activity to a second worker once the first stalled past "
                "its start-to-close timeout, and the first went on (an activity runs at "
                "least once)")
#: Who holds what a crashed worker held, until a worker polls again
_DEAD = object()
#: The activity attempt running now, and what it calls through
_RUNNING: contextvars.ContextVar[tuple[Unit, UnitCalls] | None] = contextvars.ContextVar(
    "fsmharness_temporal_activity", default=None)


class HandlersUnfinished(Exception):
    """The workflow ended while signal or update handlers still ran (temporalio warns of
    it): their work is abandoned."""


class WorkflowTaskFailed(Exception):
    """A workflow task failed: the workflow's code raised (not an `ApplicationError`, which
    fails the workflow). Temporal retries such a task for ever, so the workflow is stuck."""


class ActivityBox:
    """What an activity calls the world's tools through: `box.call(tool, input, key=None)`
    inside an activity the harness runs. The key defaults to `{workflow id}/{activity
    type}/{activity id}`, the same on every attempt and after every crash (the n-th call of
    an attempt adds `/n`)."""

    def call(self, tool: str, input: Mapping[str, Any], key: str | None = None) -> Any:
        """Calls a declared tool; gives its output, or raises `ToolFailed` (a retryable
        failure for Temporal, unless the tool failed for good: `category` permanent)."""
        running = _RUNNING.get()
        if running is None:
            raise AdapterError("box.call works inside an activity the harness runs only")
        unit, calls = running
        return calls.call(unit, tool, input, key)

    @property
    def attempt(self) -> int:
        running = _RUNNING.get()
        if running is None:
            raise AdapterError("box.attempt works inside an activity the harness runs only")
        return running[0].attempt


def current_box() -> ActivityBox:
    """Gives the box of the activity running now (`harness.adapters.temporal.call`)."""
    return _BOX


_BOX = ActivityBox()


@dataclass
class Activity:
    """An activity the server has scheduled and not resolved."""

    id: str
    type: str
    scheduled: int  # its ActivityTaskScheduled event
    arguments: tuple[Any, ...]
    attempts_max: int  # 0: no limit
    non_retryable: tuple[str, ...]
    attempt: int = 1
    running: object | None = None  # the worker running its attempt now


@dataclass
class Run:
    """One workflow execution, as the server keeps it."""

    events: Events
    activities: dict[str, Activity] = field(default_factory=dict)
    timers: dict[str, tuple[int, int]] = field(default_factory=dict)  # id -> (event, fire at)
    closed: str = ""  # completed, failed
    task: tuple[int, int, object] | None = None  # a started workflow task: ids and worker
    task_attempt: int = 1
    wanted: bool = False  # new events wait for a workflow task
    signals: list[str] = field(default_factory=list)  # the ids of the events signalled
    answered: set[str] = field(default_factory=set)  # those whose sender heard back
    live: list[tuple[Any, ...]] = field(default_factory=list)  # the commands sent live
    task_of: dict[int, int] = field(default_factory=dict)  # a command's place -> its task
    tasks: int = 0
    diverged: str = ""  # where a replay first did not do what the workflow did live
    stuck: str = ""  # what the workflow task keeps failing with
    moves: list[tuple[str, str]] = field(default_factory=list)  # since last observed


@dataclass
class Server:
    """Temporal's server, in memory: it outlives any worker's crash."""

    runs: dict[str, Run] = field(default_factory=dict)
    journal: Journal = field(default_factory=Journal)


class TemporalMachine(Process):
    """One worker of a Temporal task queue running a target's workflows and activities
    against the simulated server (see the package)."""

    def __init__(self, target: TemporalTarget, tools: Mapping[str, Tool], probe: Probe,
                 server: Server | None = None) -> None:
        self.target, self._tools, self.probe = target, tools, probe
        self.crash_points: Sequence[str] = tuple(
            point for point in CRASH_POINTS if tools or point != "after_effect")
        self.server = server if server is not None else Server()
        self.calls = UnitCalls(tools, self, self.server.journal, "Temporal",
                               rerun_by="Temporal's retry of the activity",
                               two_workers=_TWO_WORKERS)
        self.dead = False
        self.died_at = ""

    # the protocol
    def start(self, execution_id: str, context: Mapping[str, Any], now: int) -> str | None:
        if execution_id in self.server.runs:
            return "ignored:duplicate"  # the server refuses a second start of one id
        events = Events(execution_id, self.target.workflow_name, self.target.task_queue,
                        self.target.arguments(context), now)
        run = self.server.runs[execution_id] = Run(events)
        self._wanted(run, now)
        return "accepted"

    def deliver(self, execution_id: str, event: Event, now: int) -> str | None:
        run = self.server.runs.get(execution_id)
        if run is None:
            return "rejected:unknown execution"
        if run.closed:
            return f"rejected:workflow execution already {run.closed}"
        signal = self.target.signals.get(event.type)
        if signal is None:
            return f"rejected:{event.type} is not a signal of the workflow"
        # a sender that sends again after its signal was answered makes a new request
        # (temporalio's client mints a request id per call): the server records the signal
        # again, and the workflow's handler takes it again; whether that is once too often
        # is the handler's to say, not the server's (a copy is not said accepted). A delivery
        # that was never answered (the worker died in the task the signal began, or a second
        # worker took it meanwhile) is still the same request: the server has it once.
        copies = run.signals.count(event.id)
        if copies and event.id not in run.answered:
            return "ignored:duplicate"
        run.signals.append(event.id)
        from temporalio.api.common.v1 import Payloads
        run.events.add("workflow_execution_signaled", now, signal_name=signal,
                       input=Payloads(payloads=self.target.signal_arguments(event)),
                       identity="fsmharness",
                       request_id=event.id if not copies else f"{event.id}/{copies + 1}")
        self._wanted(run, now)
        run.answered.add(event.id)
        return None if copies else "accepted"

    def advance(self, now: int) -> None:
        for run in self.server.runs.values():
            due = sorted((fire_at, event, timer) for timer, (event, fire_at)
                         in run.timers.items() if fire_at <= now)
            if run.closed or not due:
                continue
            for _, _, timer in due:
                started, _ = run.timers.pop(timer)
                run.events.add("timer_fired", now, timer_id=timer, started_event_id=started)
            self._wanted(run, now)

    def complete(self, execution_id: str, call_id: str, now: int) -> None:
        run = self.server.runs.get(execution_id)
        activity = run.activities.get(call_id) if run is not None else None
        if run is None or activity is None or activity.running is not None or run.closed:
            return
        self._attempt(run, activity, now)

    def crash(self) -> None:
        """The worker dies: the server sees its activity attempts and its workflow task time
        out (an activity is tried again, with the next attempt number; the task is given to
        the next worker that polls)."""
        self.dead = True
        self.calls.crashed()
        for run in self.server.runs.values():
            for activity in run.activities.values():
                if activity.running is self:
                    activity.running = _DEAD
            if run.task is not None and run.task[2] is self:
                run.task = (*run.task[:2], _DEAD)

    def recover(self, now: int) -> None:
        """A worker polls the task queue: it takes the workflow tasks waiting, those of a
        dead or stalled worker included (their timeout passed), and a stalled worker's
        activity attempts (tried again)."""
        self.dead = False
        for run in list(self.server.runs.values()):
            for activity in list(run.activities.values()):
                if activity.running is not None and activity.running is not self:
                    self._timed_out(run, activity, now)  # its start-to-close timeout passed
            if run.task is not None and run.task[2] is not self:
                self._let_go(run, run.task[2], now)
            if run.wanted:
                self._task(run, now)

    def worker(self) -> TemporalMachine:
        return TemporalMachine(self.target, self._tools, self.probe, server=self.server)

    def observe(self, execution_id: str) -> Observation:
        run = self.server.runs[execution_id]
        moves = tuple(run.moves)
        run.moves.clear()
        version = len(run.events)
        if run.closed:
            return Observation(run.closed, "final", version,
                               "success" if run.closed == COMPLETED else "failure",
                               moves=moves)
        timers = tuple(sorted((timer, fire_at) for timer, (_, fire_at) in run.timers.items()))
        calls = tuple(Call(activity.id, activity.type) for activity in run.activities.values()
                      if activity.running is None)
        return Observation(RUNNING, "running", version, timers=timers, calls=calls,
                           moves=moves)

    def replay(self, execution_id: str) -> None:
        """Replays the execution's whole history through Temporal's `Replayer`, a day and a
        half after its last event (`LATER`), and raises where it does not do what the
        workflow did live: the Replayer's own nondeterminism error, or a command whose
        input, duration or result differ (which the Replayer does not compare). Then the
        same under each later version of the workflow the target names (`replay_with`): a
        deployment of it replays the histories its predecessor wrote."""
        run = self.server.runs[execution_id]
        if run.diverged:
            raise ReplayDiverged(run.diverged)
        for workflow, runner in ((self.target.workflow, self.target.runner),
                                 *self.target.later_versions):
            replayed = tasks.replay(workflow, runner, run.events,
                                    run.events.last_time() + LATER, later=True)
            under = ("" if workflow is self.target.workflow else
                     f"under {workflow.__module__}.{workflow.__qualname__}, ")
            # a task that failed for ever as it ran was said then (the machine's failure); a
            # replay that fails where the live run did not, or a later version that fails on
            # a history its predecessor wrote, is a finding
            if replayed.nondeterminism or (replayed.failure and (under or not run.stuck)):
                raise ReplayDiverged(f"{under}Temporal's Replayer failed: {replayed.failure}")
            if replayed.signatures[:len(run.live)] != tuple(run.live):
                raise ReplayDiverged(under + first_difference(run.live, replayed.signatures,
                                                              run.task_of))

    # the workflow's tasks
    def _wanted(self, run: Run, now: int) -> None:
        """New events wait for a workflow task: this worker runs it now, unless one is
        under way (the events go to the next)."""
        run.wanted = True
        if run.task is None:
            self._task(run, now)

    def _let_go(self, run: Run, worker: object, now: int) -> None:
        """The server times out what `worker` held of `run`: its activity attempts and its
        workflow task."""
        for activity in list(run.activities.values()):
            if activity.running is worker:
                self._timed_out(run, activity, now)
        if run.task is not None and run.task[2] is worker:
            scheduled, started, _ = run.task
            run.events.add("workflow_task_timed_out", now, scheduled_event_id=scheduled,
                           started_event_id=started, timeout_type=1)  # start to close
            run.task, run.wanted = None, True
            run.task_attempt += 1

    def _timed_out(self, run: Run, activity: Activity, now: int) -> None:
        """An attempt timed out (its worker died or stalled): the server tries the activity
        again, or, its attempts spent, records the timeout, which the workflow takes as an
        `ActivityError` in its next task."""
        activity.running = None
        if activity.attempts_max == 0 or activity.attempt < activity.attempts_max:
            activity.attempt += 1
            return
        from temporalio.api.enums.v1 import RetryState, TimeoutType
        from temporalio.api.failure.v1 import Failure, TimeoutFailureInfo
        del run.activities[activity.id]
        events = run.events
        started = events.add("activity_task_started", now, scheduled_event_id=activity.scheduled,
                             identity="fsmharness", attempt=activity.attempt,
                             request_id=f"{activity.scheduled}/{activity.attempt}")
        failure = Failure(message="activity StartToClose timeout",
                          timeout_failure_info=TimeoutFailureInfo(
                              timeout_type=TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE))
        events.add("activity_task_timed_out", now, scheduled_event_id=activity.scheduled,
                   started_event_id=started, failure=failure,
                   retry_state=RetryState.RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED)
        run.wanted = True

    def _task(self, run: Run, now: int) -> None:
        """Runs a workflow task: the server schedules and starts it, the history replays
        up to it and the task runs live; its commands reach the server (unless this worker
        dies first, or another took the task)."""
        if run.closed or run.stuck or run.task is not None or not run.wanted:
            return
        events = run.events
        scheduled = events.add("workflow_task_scheduled", now, task_queue=_queue(
            events.task_queue), start_to_close_timeout=_duration(10_000),
            attempt=run.task_attempt)
        started = events.add("workflow_task_started", now, scheduled_event_id=scheduled,
                             identity="fsmharness", request_id=f"{scheduled}")
        run.task, run.wanted = (scheduled, started, self), False
        replayed = tasks.replay(self.target.workflow, self.target.runner, events, now)
        if replayed.nondeterminism and not run.diverged:
            run.diverged = (f"workflow task {run.tasks + 1} replayed the history before it, "
                            f"and Temporal's Replayer failed: {replayed.failure}")
        elif not run.diverged and replayed.signatures[:len(run.live)] != tuple(run.live):
            run.diverged = first_difference(run.live, replayed.signatures, run.task_of)
        if replayed.failure:
            run.stuck = replayed.failure
            run.task = None
            if replayed.nondeterminism:
                return  # the replay check says it; the workflow makes no more progress
            raise WorkflowTaskFailed(
                f"{events.workflow_id}: workflow task {run.tasks + 1} failed: "
                f"{replayed.failure} (Temporal retries such a task for ever: the workflow is "
                f"stuck; raise an ApplicationError to fail the workflow instead)")
        new = replayed.commands[len(run.live):]
        self.passing("before_report_task")
        if run.task is None or run.task[2] is not self:
            return  # another worker took the task: the server refuses this one's report
        completed = events.task_completed(scheduled, started, now)
        run.task, run.task_attempt = None, 1
        run.tasks += 1
        for mark in replayed.signatures[len(run.live):]:
            run.task_of[len(run.live)] = run.tasks
            run.live.append(mark)
        for command in _as_sent(new):
            self._apply(run, command, completed, now)
        if run.closed and replayed.unfinished:
            raise HandlersUnfinished(
                f"{events.workflow_id}: the workflow ended while handlers still ran: "
                f"{' '.join(replayed.unfinished)} (what they had left to do is abandoned; "
                f"wait for them before the run returns: await workflow.wait_condition("
                f"workflow.all_handlers_finished))")
        if run.wanted:  # events came while the task ran: the next task takes them
            self._task(run, now)

    def _apply(self, run: Run, command: Any, completed: int, now: int) -> None:
        """The server records one command of a completed workflow task."""
        kind = command.WhichOneof("variant")
        body = getattr(command, kind)
        events = run.events
        if run.closed:
            return  # nothing runs after the workflow's end
        if kind == "schedule_activity":
            from temporalio.api.common.v1 import ActivityType, Payloads
            scheduled = events.add(
                "activity_task_scheduled", now, activity_id=body.activity_id,
                activity_type=ActivityType(name=body.activity_type),
                task_queue=_queue(body.task_queue or events.task_queue),
                input=Payloads(payloads=list(body.arguments)),
                schedule_to_close_timeout=body.schedule_to_close_timeout,
                start_to_close_timeout=body.start_to_close_timeout,
                heartbeat_timeout=body.heartbeat_timeout, retry_policy=body.retry_policy,
                workflow_task_completed_event_id=completed)
            policy = body.retry_policy
            run.activities[body.activity_id] = Activity(
                body.activity_id, body.activity_type, scheduled, tuple(body.arguments),
                policy.maximum_attempts, tuple(policy.non_retryable_error_types))
        elif kind == "start_timer":
            timer = str(body.seq)
            event = events.add("timer_started", now, timer_id=timer,
                               start_to_fire_timeout=body.start_to_fire_timeout,
                               workflow_task_completed_event_id=completed)
            run.timers[timer] = (event, now + body.start_to_fire_timeout.ToMilliseconds())
        elif kind == "cancel_timer":
            found = run.timers.pop(str(body.seq), None)
            if found is not None:
                events.add("timer_canceled", now, timer_id=str(body.seq),
                           started_event_id=found[0],
                           workflow_task_completed_event_id=completed, identity="fsmharness")
        elif kind == "complete_workflow_execution":
            from temporalio.api.common.v1 import Payloads
            result = [body.result] if body.HasField("result") else []
            events.add("workflow_execution_completed", now,
                       result=Payloads(payloads=result),
                       workflow_task_completed_event_id=completed)
            self._close(run, COMPLETED)
        elif kind == "fail_workflow_execution":
            events.add("workflow_execution_failed", now, failure=body.failure,
                       workflow_task_completed_event_id=completed)
            self._close(run, FAILED)
        else:
            raise AdapterError(
                f"{events.workflow_id}: the workflow sent a {kind} command, which the history "
                f"mode does not model (it models activities, timers, signals, completion and "
                f"failure)")

    @staticmethod
    def _close(run: Run, how: str) -> None:
        run.closed = how
        run.moves.append((RUNNING, how))
        run.activities.clear()
        run.timers.clear()

    # activities
    def _attempt(self, run: Run, activity: Activity, now: int) -> None:
        """Runs one attempt of an activity and reports its result to the server: a result
        or a final failure resolves it (and the workflow takes it in a task); a failure that
        Temporal retries leaves it scheduled, with the next attempt number."""
        events = run.events
        unit = Unit(events.workflow_id, activity.type, activity.id, activity.attempt)
        fn = self.target.activities.get(activity.type)
        if fn is None:
            known = ", ".join(sorted(self.target.activities)) or "none"
            raise AdapterError(f"{events.workflow_id}: the workflow scheduled activity "
                               f"{activity.type!r}, which the target does not register "
                               f"(registered: {known})")
        activity.running = self
        token = _RUNNING.set((unit, self.calls))
        error: BaseException | None = None
        try:
            result = tasks.attempt(fn, self.target.activity_arguments(activity.type,
                                                                      activity.arguments),
                                   self._info(run, activity), now)
        except (SimulatedCrash, Dead):
            self.dead = True
            raise
        except Exception as raised:  # the activity failed: Temporal's retry policy decides
            misuse = next((each for each in chain(raised) if isinstance(each, AdapterError)),
                          None)
            if misuse is not None:  # an undeclared tool: the user's to fix, not to retry
                raise misuse from raised
            error = raised
        finally:
            _RUNNING.reset(token)
        payloads: list[Any] = []
        if error is None:
            try:  # a result the converter cannot encode fails the attempt, as on a worker
                payloads = list(self.target.converter.to_payloads([result]))
            except Exception as unencoded:
                error = unencoded
        self.calls.ended(unit, "failed" if error is not None else "done")
        self.passing("before_report_activity")
        if run.activities.get(activity.id) is not activity or activity.running is not self:
            return  # the server gave the attempt to another worker: this report is refused
        activity.running = None
        if error is not None and self._retried(activity, error):
            activity.attempt += 1
            return
        del run.activities[activity.id]
        started = events.add("activity_task_started", now, scheduled_event_id=activity.scheduled,
                             identity="fsmharness", attempt=activity.attempt,
                             request_id=f"{activity.scheduled}/{activity.attempt}")
        if error is None:
            from temporalio.api.common.v1 import Payloads
            events.add("activity_task_completed", now, scheduled_event_id=activity.scheduled,
                       started_event_id=started, identity="fsmharness",
                       result=Payloads(payloads=payloads))
        else:
            events.add("activity_task_failed", now, scheduled_event_id=activity.scheduled,
                       started_event_id=started, identity="fsmharness",
                       failure=self.target.failure(error),
                       retry_state=_retry_state(activity, error))
        self._wanted(run, now)

    def _retried(self, activity: Activity, error: BaseException) -> bool:
        """Tells whether Temporal tries the activity again after `error`."""
        return (not _non_retryable(activity, error)
                and (activity.attempts_max == 0 or activity.attempt < activity.attempts_max))

    def _info(self, run: Run, activity: Activity) -> dict[str, Any]:
        events = run.events
        return {"activity_id": activity.id, "activity_type": activity.type,
                "attempt": activity.attempt, "workflow_id": events.workflow_id,
                "workflow_run_id": events.run_id, "workflow_type": self.target.workflow_name,
                "task_queue": events.task_queue, "is_local": False}


def _as_sent(commands: Sequence[Any]) -> list[Any]:
    """Gives a task's commands as Temporal's Core SDK sends them to the server: a timer or
    an activity the same task cancels is never sent (nor is its cancellation: a
    `wait_condition` with a timeout met at once), and the command that ends the workflow
    goes last."""
    def place(command: Any) -> tuple[str, int]:
        kind = command.WhichOneof("variant")
        return kind, getattr(command, kind).seq
    started = {place(c) for c in commands if c.WhichOneof("variant") in _STARTS}
    undone = {(_CANCELS[kind], seq) for kind, seq in
              (place(c) for c in commands if c.WhichOneof("variant") in _CANCELS)} & started
    kept = [c for c in commands if not (
        (c.WhichOneof("variant") in _STARTS and place(c) in undone)
        or (c.WhichOneof("variant") in _CANCELS
            and (_CANCELS[place(c)[0]], place(c)[1]) in undone))]
    return ([c for c in kept if c.WhichOneof("variant") not in _TERMINAL]
            + [c for c in kept if c.WhichOneof("variant") in _TERMINAL])


#: A cancelling command and what it cancels; the commands that end a workflow
_CANCELS = {"cancel_timer": "start_timer", "request_cancel_activity": "schedule_activity"}
_STARTS = frozenset(_CANCELS.values())
_TERMINAL = frozenset({"complete_workflow_execution", "fail_workflow_execution",
                       "continue_as_new_workflow_execution", "cancel_workflow_execution"})


class ReplayDiverged(Exception):
    """Replaying a workflow's history did not do what the workflow did live."""


def _non_retryable(activity: Activity, error: BaseException) -> bool:
    from temporalio.exceptions import ApplicationError
    if isinstance(error, ToolFailed):
        return error.category == "permanent"
    if isinstance(error, ApplicationError):
        return error.non_retryable or error.type in activity.non_retryable
    return type(error).__name__ in activity.non_retryable


def _retry_state(activity: Activity, error: BaseException) -> int:
    from temporalio.api.enums.v1 import RetryState
    if _non_retryable(activity, error):
        return RetryState.RETRY_STATE_NON_RETRYABLE_FAILURE
    return RetryState.RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED


def _queue(name: str) -> Any:
    from temporalio.api.taskqueue.v1 import TaskQueue
    return TaskQueue(name=name)


def _duration(ms: int) -> Any:
    from google.protobuf.duration_pb2 import Duration
    duration = Duration()
    duration.FromMilliseconds(ms)
    return duration

