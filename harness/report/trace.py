"""A run's history told as readable steps: what the scheduler did, which faults struck, what the
machine committed and what took effect at the world."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.sim.history import (
    Applied,
    Committed,
    Crashed,
    Decided,
    Delivered,
    Dispatched,
    FaultInjected,
    Healed,
    HistoryRecord,
    MachineFailed,
    Recovered,
    Started,
    TimerFired,
)

__all__ = ["describe_steps"]

_DUE, _EACH = ", timers due fire", ", timers due fire at each"


def describe_steps(history: Sequence[HistoryRecord], *, last: int | None = None) -> list[str]:
    """Gives one line per step of `history` (up to step `last`), each naming what happened:
    every step from the first, a step that changed nothing one can see saying `nothing`, so
    that the numbers run without gaps (a replay's and a shrunk schedule's steps are told by
    their number)."""
    lines: list[str] = []
    parts: list[str] = []
    step, at = 0, 0
    for record in history:
        if record.step != step:
            if step:
                lines.append(_line(step, at, parts))
            if last is not None and record.step > last:
                step = 0
                break
            lines += [_line(gap, at, []) for gap in range(step + 1, record.step)]
            step, parts = record.step, []
        if record.at > at:
            at = record.at  # a step's time is where its clock ended
        if step == 0:
            continue
        text = _part(record)
        if not text:
            continue
        if type(record) is TimerFired and parts and parts[-1].endswith(_DUE):
            # a schedule's clock moves made one step: the times in a row
            parts[-1] = parts[-1].replace(_DUE, "") + f", {_seconds(record.at)}{_EACH}"
        elif type(record) is TimerFired and parts and parts[-1].endswith(_EACH):
            parts[-1] = parts[-1].replace(_EACH, "") + f", {_seconds(record.at)}{_EACH}"
        else:
            parts.append(text)
    if step and (last is None or step <= last):
        lines.append(_line(step, at, parts))
    return lines


def _line(step: int, at: int, parts: list[str]) -> str:
    return f"step {step} (t={_seconds(at)}): " + ("; ".join(parts) or "nothing")


def _seconds(ms: int) -> str:
    return f"{ms / 1000:g}s"


def _part(record: HistoryRecord) -> str:
    if type(record) is Started:
        return f"start {record.execution}" + _lists(record.context)
    if type(record) is Delivered:
        source = f" from {record.source}"
        via = "" if record.via in ("external", "approval") else f" ({record.via})"
        return f"deliver {record.type}{source} to {record.execution}{via}"
    if type(record) is Decided:
        return "" if record.decision == "accepted" else f"{record.decision}"
    if type(record) is Committed:
        if record.decision == "rejected" and record.reason:  # the machine said why
            what = (f"the answer ({record.event_type}) to call {record.answers}"
                    if record.answers and record.event_type.startswith("step.") else
                    f"{record.event_type} ({record.answers})" if record.answers
                    else record.event_type)
            code, _, detail = record.reason.partition(": ")
            return (f"{record.execution} rejected {what}: {code.replace('_', ' ')}"
                    + (f": {detail}" if detail else ""))
        if record.decision != "accepted" and record.answers and record.event_type.startswith(
                "step."):  # a tool's answer the machine would not take, no reason told
            return (f"{record.execution} {record.decision} the answer ({record.event_type}) to "
                    f"call {record.answers}: stale or already answered")
        if record.decision != "accepted" or not record.moved:
            return ""
        return _move(record)
    if type(record) is Dispatched:
        during = "" if record.during in ("tool call", "compensation") else (
            f" during {record.during}")
        return f"call {record.tool}{during}"
    if type(record) is Applied:
        return f"{record.tool} takes effect (key {record.key})"
    if type(record) is FaultInjected:
        return f"FAULT {record.fault}" + (f" ({record.detail})" if record.detail else "")
    if type(record) is Crashed:
        return f"crash at {record.point} during {record.during}"
    if type(record) is Recovered:
        return "recovered"
    if type(record) is TimerFired:
        return f"clock to {_seconds(record.at)}{_DUE}"
    if type(record) is Healed:
        return "faults healed (liveness phase)"
    if type(record) is MachineFailed:
        return f"machine {record.problem}: {record.error}: {record.message}"
    return ""


def _lists(context: Mapping[str, Any]) -> str:
    """Tells how long each list its start context sets is (a shrunk run may start with
    fewer items than the definition's), the values themselves left out: they may be secret."""
    told = [f"{key}: {len(value)} item{'s' * (len(value) != 1)}"
            for key, value in sorted(context.items()) if isinstance(value, list)]
    return f" ({', '.join(told)})" if told else ""


def _move(record: Committed) -> str:
    """Tells a committed move: from where to where on what; for a statechart, the states an
    eventless run passed through and what the regions did (a region's move alone leaves the
    parallel or map state where it was)."""
    inner = [f"{source or '(start)'} -> {target}" + (f" on {event}" if event != record.moved
                                                      else "")
             for source, event, target in record.inner]
    if record.forced == "internal":
        return f"{record.execution}: {record.state} on {record.moved} (internal)"
    if (inner and record.from_state == record.state and not record.via and not record.forced
            and all(source for source, _, _ in record.inner)):
        return f"{record.execution}: in {record.state}, {', '.join(inner)} on {record.moved}"
    forced = f", forced by {record.forced}" if record.forced else ""
    via = f" via {', '.join(record.via)}" if record.via else ""
    regions = f" (regions: {', '.join(inner)})" if inner else ""
    return (f"{record.execution}: {record.from_state or '(start)'} -> {record.state} "
            f"on {record.moved}{via}{forced}{regions}")
