"""One workflow execution's event history, written as Temporal's server writes it
(`Events`), and what a workflow task's commands are, compared live against replay
(`signature`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.adapters.peers import AdapterError
from harness.sim.options import FROZEN_EPOCH

__all__ = ["EPOCH_MS", "Events", "signature"]

#: The wall time virtual time 0 stands for in a history, in ms: the simulator's own
#: (`FROZEN_EPOCH`, 2026-01-01T00:00:00Z), which its frozen clock starts at too.
EPOCH_MS = int(FROZEN_EPOCH.timestamp() * 1000)

#: The internal flags of Temporal's Core SDK a worker of this release records on its first
#: completed workflow task: with them, a replay checks activity ids and types too.
CORE_FLAGS = (1, 2, 3, 4)


class Events:
    """A workflow execution's history, one event after another, each at the simulated time
    it happened (`EPOCH_MS` + the simulator's ms)."""

    def __init__(self, workflow_id: str, workflow_type: str, task_queue: str,
                 arguments: Sequence[Any], now: int) -> None:
        from temporalio.api.common.v1 import Payloads, WorkflowType
        from temporalio.api.taskqueue.v1 import TaskQueue
        self.workflow_id, self.run_id = workflow_id, f"{workflow_id}/run-1"
        self.task_queue = task_queue
        self.events: list[Any] = []
        self.add("workflow_execution_started", now, workflow_type=WorkflowType(
            name=workflow_type), task_queue=TaskQueue(name=task_queue),
            input=Payloads(payloads=list(arguments)), attempt=1,
            original_execution_run_id=self.run_id, first_execution_run_id=self.run_id)
        self.tasks_completed = 0

    def add(self, kind: str, now: int, **attributes: Any) -> int:
        """Appends an event of `kind` (`activity_task_scheduled`, ...) with its attributes;
        gives its event id."""
        from temporalio.api.enums.v1 import EventType
        from temporalio.api.history.v1 import HistoryEvent
        event = HistoryEvent(event_id=len(self.events) + 1,
                             event_type=EventType.Value(f"EVENT_TYPE_{kind.upper()}"))
        event.event_time.FromMilliseconds(EPOCH_MS + now)
        held = getattr(event, f"{kind}_event_attributes")
        held.SetInParent()
        for name, value in attributes.items():
            if hasattr(value, "DESCRIPTOR"):
                getattr(held, name).CopyFrom(value)
            elif isinstance(value, list | tuple):
                getattr(held, name).extend(value)
            else:
                setattr(held, name, value)
        self.events.append(event)
        return event.event_id

    def task_completed(self, scheduled: int, started: int, now: int) -> int:
        """A workflow task's completion; the first carries the Core SDK's flags, as a worker
        records them."""
        from temporalio.api.sdk.v1 import WorkflowTaskCompletedMetadata
        self.tasks_completed += 1
        metadata = WorkflowTaskCompletedMetadata(
            core_used_flags=list(CORE_FLAGS) if self.tasks_completed == 1 else [])
        return self.add("workflow_task_completed", now, scheduled_event_id=scheduled,
                        started_event_id=started, identity="fsmharness", sdk_metadata=metadata)

    def last_time(self) -> int:
        """Gives the simulated time of the last event (ms)."""
        return self.events[-1].event_time.ToMilliseconds() - EPOCH_MS

    def history(self, upto: int | None = None) -> Any:
        """Gives the history (its first `upto` events) as the Replayer takes it."""
        from temporalio.client import WorkflowHistory
        return WorkflowHistory(self.workflow_id, list(self.events[:upto]))

    def __len__(self) -> int:
        return len(self.events)


def signature(command: Any) -> tuple[Any, ...]:
    """What a command does, as far as a replay must do it again: its kind, the ids and
    types it names, and the bytes of its inputs and results (the Replayer compares kinds
    and ids, not inputs, durations or results)."""
    kind = command.WhichOneof("variant")
    if kind is None:
        raise AdapterError("a workflow task sent an empty command")
    body = getattr(command, kind)
    if kind == "schedule_activity":
        return (kind, body.activity_id, body.activity_type, _data(body.arguments))
    if kind == "start_timer":
        return (kind, body.seq, body.start_to_fire_timeout.ToMilliseconds())
    if kind == "cancel_timer":
        return (kind, body.seq)
    if kind == "complete_workflow_execution":
        return (kind, body.result.data if body.HasField("result") else b"")
    if kind == "fail_workflow_execution":
        return (kind, body.failure.message)
    return (kind,)


def _data(payloads: Sequence[Any]) -> tuple[bytes, ...]:
    return tuple(payload.data for payload in payloads)


def said(mark: tuple[Any, ...]) -> str:
    """Says a command's signature for a cause: `schedule_activity charge (id 1) with
    [40]`."""
    kind = mark[0]
    if kind == "schedule_activity":
        inputs = ", ".join(part.decode(errors="replace") for part in mark[3])
        return f"schedule activity {mark[2]} (id {mark[1]}) with [{inputs}]"
    if kind == "start_timer":
        return f"start timer {mark[1]} for {mark[2]} ms"
    if kind == "cancel_timer":
        return f"cancel timer {mark[1]}"
    if kind == "complete_workflow_execution":
        return f"complete the workflow with {mark[1].decode(errors='replace') or 'nothing'}"
    if kind == "fail_workflow_execution":
        return f"fail the workflow: {mark[1]}"
    return kind.replace("_", " ")


def first_difference(live: Sequence[tuple[Any, ...]], replayed: Sequence[tuple[Any, ...]],
                     tasks: Mapping[int, int]) -> str:
    """Says where a replay's commands first differ from those the workflow sent live
    (`tasks`: the command's place to the workflow task that sent it)."""
    for place, (was, now) in enumerate(zip(live, replayed, strict=False)):
        if was != now:
            return (f"workflow task {tasks.get(place, '?')} sent {said(was)} live, and "
                    f"{said(now)} on replay")
    place = min(len(live), len(replayed))
    if len(live) > len(replayed):
        return (f"workflow task {tasks.get(place, '?')} sent {said(live[place])} live, and "
                f"nothing on replay")
    return f"the replay sent {said(replayed[place])}, which no task sent live"
