"""A Temporal workflow and its activities as a machine under test, with no server (history
mode): `temporal_target(Workflow, activities=[...])`.

The harness is Temporal's server for the simulated run: it writes each workflow execution's
event history as the server would, and a worker runs the user's code against it, through
`temporalio`'s own machinery:

- **Workflow tasks run through the `Replayer`**: the history up to a task replays, and the
  task itself runs live (a history that ends in a started workflow task), so each task is
  what a worker with an empty cache does (`max_cached_workflows=0`), with Temporal's Core SDK
  building every activation. The commands the task sends become the history's next events:
  activities scheduled, timers started and cancelled, the workflow completed or failed.
- **Replay matches**: each task replays every task before it, and the run's end replays the
  whole history; where Temporal's Replayer fails (its nondeterminism error), or a command
  replays with another input, timer duration or result than the workflow sent live (which
  the Replayer does not compare), the execution breaks `replay_matches`, saying the first
  command that differs.
- **Activities run in `temporalio.testing.ActivityEnvironment`**, one attempt at a time, with
  `activity.info()` as a worker sets it (the attempt number included). They reach the
  world's tools through the `ActivityBox` (`box.call(tool, input, key=None)`; the key
  defaults to `{workflow id}/{activity type}/{activity id}`, the same on every attempt). A
  failure is retried as the activity's retry policy says (a `ToolFailed` of category
  `permanent`, and a non-retryable `ApplicationError`, are not), with the next attempt
  number; the history holds the last attempt, as the server writes it.
- **Signals** are the definition's events (one per `@workflow.signal` handler): a handler
  that takes an argument is given the event's payload. A copy sent again is a new request,
  which the server records and the handler takes again; a signal to a closed workflow is
  rejected.
- **Timers** fire when the simulated clock passes them (`advance`): late when the simulator
  skews or delays the clock.
- **Faults** (`crash_points`): a worker dies inside an activity just after a tool took
  effect (`after_effect`), once an activity returned and before the server has its result
  (`before_report_activity`: the server times the attempt out and tries the activity again),
  or once a workflow task's commands are made and before the server has them
  (`before_report_task`: the task times out and the next worker runs it). A second worker
  on the task queue takes what the first has started, as the server does once the first
  stalls past a start-to-close timeout: its attempt's report is then refused.

The wall clock (`time.time()`, `datetime.now()`) reads the simulated time while the user's
code runs, so a run replays from its seed, and a workflow that reads it where it should read
`workflow.now()` replays differently when time has passed.

The modules: `target` (`temporal_target`, the definition read off the workflow), `machine`
(the server and the worker), `tasks` (the Replayer and the activity environment), `history`
(the events, and commands compared live against replay).
"""

from collections.abc import Mapping
from typing import Any

from harness.adapters.replay_units import ToolFailed
from harness.adapters.temporal.machine import (
    CRASH_POINTS,
    ActivityBox,
    HandlersUnfinished,
    ReplayDiverged,
    TemporalMachine,
    WorkflowTaskFailed,
    current_box,
)
from harness.adapters.temporal.target import TemporalTarget, temporal_target

__all__ = ["CRASH_POINTS", "ActivityBox", "HandlersUnfinished", "ReplayDiverged",
           "TemporalMachine", "TemporalTarget", "ToolFailed", "WorkflowTaskFailed", "call",
           "current_box", "temporal_target"]


def call(tool: str, input: Mapping[str, Any], key: str | None = None) -> Any:
    """Calls a declared tool from inside an activity the harness runs (`ActivityBox.call`)."""
    return current_box().call(tool, input, key)
