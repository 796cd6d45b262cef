"""Running the user's code the way a Temporal worker does, with no server: a history through
`temporalio`'s own `Replayer`, whose last workflow task (a history that ends in a started
task) runs live, with every command the workflow sends recorded (`replay`); and one attempt
of an activity in `temporalio.testing.ActivityEnvironment` (`attempt`). Both run with the
wall clock pinned to the simulated time, so that a run replays from its seed."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, TypeVar

import freezegun

from harness.adapters.replay_units import LentLock
from harness.adapters.temporal.history import EPOCH_MS, Events, signature

__all__ = ["Replay", "attempt", "replay"]

#: How Temporal's Core SDK begins the message of a nondeterminism error
_CORE_NONDETERMINISM = "[TMPRL1100]"

T = TypeVar("T")


class Replay(NamedTuple):
    """What a replay of a history did: the commands the workflow sent, in order (`commands`
    and their `signatures`), and the failure that stopped it, if any (`failure`: a
    workflow task's, or the Replayer's own; `nondeterminism`: Core found the workflow's
    commands differ from the history's)."""

    commands: tuple[Any, ...]
    signatures: tuple[tuple[Any, ...], ...]
    failure: str = ""
    nondeterminism: bool = False
    #: what temporalio warned of as the workflow ended with handlers still running
    unfinished: tuple[str, ...] = ()


def _recording_runner(inner: Any, completions: list[Any], clock: list[Any] | None,
                      unfinished: list[str] | None = None) -> Any:
    """Gives a workflow runner that runs workflows with `inner` and keeps each activation's
    completion; with `clock` (freezegun's handle in it), each activation runs with the wall
    clock at its own timestamp."""
    from temporalio.worker import WorkflowInstance, WorkflowRunner
    from temporalio.workflow import (
        UnfinishedSignalHandlersWarning,
        UnfinishedUpdateHandlersWarning,
    )

    class Recorded(WorkflowInstance):
        def __init__(self, instance: Any) -> None:
            self.instance = instance

        def activate(self, activation: Any) -> Any:
            if clock and activation.HasField("timestamp"):
                clock[0].move_to(activation.timestamp.ToDatetime(datetime.UTC))
            with warnings.catch_warnings(record=True) as warned:
                warnings.simplefilter("always")
                completion = self.instance.activate(activation)
            if unfinished is not None:
                unfinished.extend(str(each.message) for each in warned if issubclass(
                    each.category, (UnfinishedSignalHandlersWarning,
                                    UnfinishedUpdateHandlersWarning)))
            completions.append(completion)
            return completion

        def get_serialization_context(self, *arguments: Any) -> Any:
            return self.instance.get_serialization_context(*arguments)

        def get_external_store_context(self, *arguments: Any) -> Any:
            return self.instance.get_external_store_context(*arguments)

        def get_info(self) -> Any:
            return self.instance.get_info()

        def get_thread_id(self) -> Any:
            return self.instance.get_thread_id()

    class Recording(WorkflowRunner):
        def prepare_workflow(self, defn: Any) -> None:
            inner.prepare_workflow(defn)

        def create_instance(self, det: Any) -> Any:
            return Recorded(inner.create_instance(det))

        def set_worker_level_failure_exception_types(self, types: Any) -> None:
            inner.set_worker_level_failure_exception_types(types)

    return Recording()


def replay(workflow: type, runner: Any, events: Events, now: int, *,
           later: bool = False) -> Replay:
    """Replays `events` through the `Replayer` for `workflow` on `runner` (the workflow
    runner: sandboxed or not); a history that ends in a started workflow task runs that task
    live. Gives the commands sent and how the replay ended.

    Each activation runs with the wall clock at the time its task ran, so that the replay
    the harness makes before each task gives the workflow what a worker that kept it in its
    cache would have (the values its code read when each task first ran); `later` runs them
    all at `now` instead, as a worker that replays the history after losing its cache."""
    from temporalio.worker import Replayer
    completions: list[Any] = []
    clock: list[Any] = []  # freezegun's handle, while the replay runs
    unfinished: list[str] = []
    recording = _recording_runner(runner, completions, None if later else clock, unfinished)
    # a workflow defined `sandboxed=False` runs on the unsandboxed runner: both record
    history = events.history()

    def run(frozen: Any) -> Any:
        clock.append(frozen)
        # the runtime and the replayer are dropped on return: the runtime's threads end with
        # it, so that a fork or an exit finds none
        replayer = Replayer(workflows=[workflow], workflow_runner=recording,
                            unsandboxed_workflow_runner=recording, runtime=_runtime())
        return _run(replayer.replay_workflow(history, raise_on_replay_failure=False))
    # temporalio logs a failing task with its traceback; the harness says it itself
    quiet = logging.getLogger("temporalio")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)
    try:
        result = pinned(now, run)
    finally:
        quiet.setLevel(level)
    commands: list[Any] = []
    failure = ""
    for completion in completions:
        if completion.HasField("failed"):
            failure = completion.failed.failure.message or "the workflow task failed"
            break
        commands.extend(completion.successful.commands)
    nondeterminism = False
    if result.replay_failure is not None:
        from temporalio.workflow import NondeterminismError
        said = f"{type(result.replay_failure).__name__}: {result.replay_failure}"
        nondeterminism = isinstance(result.replay_failure, NondeterminismError)
        failure = failure or said
    return Replay(tuple(commands), tuple(signature(command) for command in commands), failure,
                  nondeterminism or failure.startswith(_CORE_NONDETERMINISM),
                  tuple(unfinished))


def attempt(fn: Callable[..., Any], arguments: Sequence[Any], info: dict[str, Any],
            now: int) -> Any:
    """Runs one attempt of the activity `fn` in Temporal's activity environment, `info` set
    as the worker sets it (its id, type, attempt, workflow); gives what it returns, raises
    what it raises."""
    from temporalio.testing import ActivityEnvironment
    environment = ActivityEnvironment()
    environment.info = dataclasses.replace(environment.info, **info)

    def run(frozen: Any) -> Any:
        done = environment.run(fn, *arguments)
        return _run(done) if asyncio.iscoroutine(done) else done
    return pinned(now, run)


def pinned(now: int, work: Callable[[Any], T]) -> T:
    """Runs `work` with the wall clock (`time.time()`, `datetime.now()`) at the simulated
    time `now`; `work` is given freezegun's handle, to move it. Under the simulator's frozen
    clock (the target asks for it: one freeze a run, not one a call, each of which scans
    every module loaded) the clock is moved, and put back after."""
    moment = datetime.datetime.fromtimestamp((EPOCH_MS + now) / 1000, tz=datetime.UTC)
    if freezegun.api.freeze_factories:  # the simulator's
        frozen = freezegun.api.freeze_factories[-1]
        was = frozen()
        frozen.move_to(moment)
        try:
            return work(frozen)
        finally:
            frozen.move_to(was)
    with freezegun.freeze_time(moment, tick=False, real_asyncio=True) as frozen:
        return work(frozen)


def _run(awaitable: Any) -> Any:
    """Runs a coroutine to its end: here, or in a thread of its own where this thread runs
    an event loop already (the pytest plugin under an async test)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(awaitable)
    return LentLock().in_thread(lambda: asyncio.run(awaitable))


def _runtime() -> Any:
    """Gives a Core runtime for one replay, dropped after it: its threads end with it, so
    that a process forked later (a campaign's workers) or ending finds none running. (One
    kept alive does not survive a fork, and one still running at exit can abort the
    interpreter: temporalio/sdk-python#300.) It costs about 0.2 ms. Core's own warnings (a
    failing workflow task, which the harness reports itself) stay quiet."""
    from temporalio.runtime import LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter
    quiet = LoggingConfig(filter=TelemetryFilter(core_level="ERROR", other_level="ERROR"))
    return Runtime(telemetry=TelemetryConfig(logging=quiet), worker_heartbeat_interval=None)
