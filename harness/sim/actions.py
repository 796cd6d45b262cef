"""The actions a run's scheduler chooses among, one named tuple per kind, and the queued
deliveries one of them performs.

Each step performs one action enabled at that moment. An action is a `NamedTuple` whose first
field is its kind (`START` ... `ADVANCE`: the numbers the Hypothesis machine's rules count),
so it still reads as the tuple `(kind, execution, ...)` it is; code that tells the kinds apart
matches on the classes. `label_of` names an action as schedules and replay files record it.
"""

from __future__ import annotations

from typing import NamedTuple

from harness.sim.machine import ApprovalWait, Call, Observation
from reference_machine import Event

__all__ = [
    "ADVANCE",
    "APPROVE",
    "COMPLETE",
    "EXTERNAL",
    "QUEUED",
    "START",
    "Action",
    "Advance",
    "Approve",
    "Complete",
    "Deliver",
    "Queued",
    "SendEvent",
    "Start",
    "label_of",
]

START, EXTERNAL, COMPLETE, APPROVE, QUEUED, ADVANCE = range(6)


class Queued(NamedTuple):
    """An event on its way to an execution, delivered once the clock reaches `due`; `seq` is
    the order it was queued in and `via` how it travels (redelivered, duplicate, late, ...)."""

    due: int
    seq: int
    execution: str
    event: Event
    via: str


class Start(NamedTuple):
    """Start execution `execution` (kind `START`)."""

    kind: int
    execution: str


class SendEvent(NamedTuple):
    """Send an execution, so observed, one of the external events it takes (kind
    `EXTERNAL`)."""

    kind: int
    execution: str
    obs: Observation


class Complete(NamedTuple):
    """Complete an execution's tool call or compensation in flight (kind `COMPLETE`)."""

    kind: int
    execution: str
    call: Call


class Approve(NamedTuple):
    """Decide an approval an execution waits on (kind `APPROVE`). `request_id` is set only for
    a region's request other than the one the execution shows as its approval: the label
    tells it apart by that id."""

    kind: int
    execution: str
    approval: ApprovalWait
    request_id: str | None = None


class Deliver(NamedTuple):
    """Deliver a queued event that fell due, or a chart's raised event (kind `QUEUED`)."""

    kind: int
    queued: Queued


class Advance(NamedTuple):
    """Move the clock to `target`, where `what` falls due (kind `ADVANCE`)."""

    kind: int
    target: int
    what: str


Action = Start | SendEvent | Complete | Approve | Deliver | Advance


def label_of(action: Action) -> str:
    """Names an action by what it does, not by where it sits among the enabled ones; the part
    after ` | ` is the detail a replay may do without (which attempt, which timer)."""
    match action:
        case Start():
            return f"start {action.execution}"
        case Complete():
            call = action.call
            return f"complete {action.execution} {call.tool} | {call.id}"
        case Approve():  # a region's request past the first one is told apart by its id
            return f"approve {action.execution}" if action.request_id is None else (
                f"approve {action.execution} | {action.request_id}")
        case SendEvent():
            return f"event {action.execution}"
        case Deliver():
            queued = action.queued
            return f"deliver {queued.execution} {queued.event.type} {queued.via}"
    return f"advance | {action.what}"
