"""Records to JSON text and back, for stores: the same record always gives the same bytes.

Every record is a NamedTuple; its JSON form is an object of its fields (enums as their values),
and a command carries its kind. Decoding rebuilds the exact record, so a stored execution
compares equal to the one `decide` produced.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from reference_machine._records import (
    CancelTimer,
    Command,
    CompletedStep,
    Event,
    Execution,
    PendingApproval,
    PendingEffect,
    RequestApproval,
    RunCompensation,
    RunEffect,
    ScheduleTimer,
    Status,
    Timer,
    TimerPurpose,
    Transition,
)

_COMMANDS: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in (RunEffect, RunCompensation, ScheduleTimer, CancelTimer, RequestApproval)
}


#: `json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`, made once:
#: `json.dumps` with options makes an encoder at every call.
_ENCODE = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode


def dumps(value: Any) -> str:
    """Gives canonical JSON text (sorted keys, no spaces) for a JSON-able value."""
    return _ENCODE(value)


#: Record fields that hold users' data: stored only if JSON holds them exactly.
_DATA_FIELDS = frozenset({"context", "payload", "input", "evidence"})


_SCALARS = frozenset({int, float, bool, type(None)})


def _plain(value: Any) -> Any:
    """Gives the JSON form of a record or container (NamedTuples become objects). Checks go
    by exact type first: an `isinstance(x, Mapping)` ABC check costs ~0.5 us on CPython 3.11."""
    kind = type(value)
    if kind is str or kind in _SCALARS:
        return value
    if isinstance(value, str):
        return str(value)  # StrEnum members become their plain values
    if isinstance(value, tuple):
        fields = getattr(value, "_fields", None)
        if fields is None:
            return [_plain(item) for item in value]
        return _fields_plain(value, fields)
    if kind is dict or kind is MappingProxyType or isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if kind is list:
        return [_plain(item) for item in value]
    return value


def _fields_plain(record: tuple[Any, ...], fields: tuple[str, ...]) -> dict[str, Any]:
    """Gives the JSON object of a NamedTuple: what `_plain` gives each field, with the common
    fields (text, numbers, empty tuples) done inline (a call per field was two thirds of a
    commit's encoding)."""
    plain: dict[str, Any] = {}
    for key, item in zip(fields, record, strict=True):
        kind = type(item)
        if kind is str or kind in _SCALARS:
            plain[key] = item
        elif key in _DATA_FIELDS:  # before the tuples: users' data holds none
            plain[key] = _data(item, key)
        elif kind is tuple and not item:
            plain[key] = []
        else:
            plain[key] = _plain(item)
    return plain


_EXECUTION_FIELDS = Execution._fields


def _data(value: Any, where: str) -> Any:
    """Gives users' data as JSON, or raises ValueError where JSON would change it (a tuple
    would come back a list, a number key a text key): refused, never silently altered."""
    kind = type(value)
    if kind is str or kind in _SCALARS:
        return value
    if kind is dict or kind is MappingProxyType or (
            kind is not list and isinstance(value, Mapping)):
        plain = {}
        for key, item in value.items():
            if not isinstance(key, str):
                msg = f"{where}: key {key!r} is not text; JSON would store it as {str(key)!r}"
                raise ValueError(msg)
            plain[str(key)] = _data(item, where)
        return plain
    if kind is list:
        return [_data(item, where) for item in value]
    if isinstance(value, str):
        return str(value)
    msg = (f"{where}: a {type(value).__name__} cannot be stored exactly; use a list, a mapping "
           "with text keys, text, a number, true/false or null")
    raise ValueError(msg)


#: Fields added after the first store format: left out while empty, so that an execution
#: that does not use them encodes as it did.
_ADDED_EXECUTION = ("regions", "history")


def encode_execution(execution: Execution) -> str:
    """Gives the canonical JSON text of an execution."""
    return dumps(_execution_plain(execution))


def _execution_plain(execution: Execution) -> dict[str, Any]:
    # a region's own empty additions stay: harmless
    plain = _fields_plain(execution, _EXECUTION_FIELDS)
    for key in _ADDED_EXECUTION:
        if not plain[key]:
            del plain[key]
    return plain


def decode_execution(text: str) -> Execution:
    """Gives the execution a text from `encode_execution` describes."""
    return _execution(json.loads(text))


def _execution(data: Mapping[str, Any]) -> Execution:
    effect = data["effect"]
    approval = data["approval"]
    return Execution(
        id=data["id"],
        definition=data["definition"],
        version=data["version"],
        state=data["state"],
        status=Status(data["status"]),
        outcome=data["outcome"],
        context=data["context"],
        sequence=data["sequence"],
        started_at=data["started_at"],
        transitions=data["transitions"],
        visits=data["visits"],
        attempt=data["attempt"],
        effect=None if effect is None else PendingEffect(**effect),
        timers=tuple(_timer(t) for t in data["timers"]),
        approval=None if approval is None else PendingApproval(
            **{**approval, "roles": tuple(approval["roles"])}),
        approved=tuple(data["approved"]),
        completed=tuple(CompletedStep(**s) for s in data["completed"]),
        compensating=tuple(CompletedStep(**s) for s in data["compensating"]),
        after_compensation=data["after_compensation"],
        cost=data["cost"],
        failures=data["failures"],
        exceeded=data["exceeded"],
        answered=data["answered"],
        last_event_id=data["last_event_id"],
        uncertain=data.get("uncertain", False),  # records written before it was kept
        regions=tuple(_execution(region) for region in data.get("regions", ())),
        history=data.get("history", {}),
    )


def _timer(data: Mapping[str, Any]) -> Timer:
    return Timer(data["id"], TimerPurpose(data["purpose"]), data["fire_at"])


def encode_event(event: Event) -> str:
    """Gives the canonical JSON text of an event."""
    return dumps(_plain(event))


def decode_event(text: str) -> Event:
    """Gives the event a text from `encode_event` describes."""
    data = json.loads(text)
    return Event(data["id"], data["type"], data["source"], data["payload"], data["answers"])


def encode_command(command: Command) -> str:
    """Gives the canonical JSON text of a command, with its kind."""
    return dumps({"kind": type(command).__name__, **_plain(command)})


def decode_command(text: str) -> Command:
    """Gives the command a text from `encode_command` describes."""
    data = json.loads(text)
    kind = data.pop("kind")
    cls = _COMMANDS.get(kind)
    if cls is None:
        msg = f"unknown command kind {kind!r} in stored outbox"
        raise ValueError(msg)
    if cls is ScheduleTimer:
        return ScheduleTimer(data["timer_id"], TimerPurpose(data["purpose"]), data["fire_at"])
    if cls is RequestApproval:
        data["roles"] = tuple(data["roles"])
    return cls(**data)


def encode_transition(transition: Transition) -> str:
    """Gives the canonical JSON text of a transition record (`via` only when it has some)."""
    return dumps(_transition_plain(transition))


def _transition_plain(transition: Transition) -> dict[str, Any]:
    plain: dict[str, Any] = _plain(transition)
    for key in ("via", "inner"):
        if not plain[key]:
            del plain[key]
    return plain


def decode_transition(text: str) -> Transition:
    """Gives the transition a text from `encode_transition` describes."""
    return _transition(json.loads(text))


def _transition(data: Mapping[str, Any]) -> Transition:
    return Transition(data["source"], data["event"], data["target"], data["forced"],
                      tuple(data.get("via", ())),
                      tuple(_transition(inner) for inner in data.get("inner", ())))
