"""The model the adapter plays (`Script`, `Call`, `scripted`): a deterministic stand-in for an
LLM, given to the agent as pydantic-ai's `FunctionModel`, offline; `pinned`, the ids and
times pydantic-ai draws at random or from the wall clock, made the run's own; and `in_thread`,
which runs an agent run in a thread of its own, waited for, under the caller's hold of the
pins."""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from harness.adapters.pydantic_ai.store import Disk
from harness.adapters.replay_units import LentLock

__all__ = ["Call", "Script", "in_thread", "lent_here", "pinned", "scripted"]


class Call(NamedTuple):
    """A tool call the model makes: the tool, its arguments and its id."""

    tool: str
    args: Mapping[str, Any]
    id: str


@dataclass(frozen=True)
class Script:
    """What the model says, turn by turn. `turns` are the tool-calling turns, in order: the
    model's first answer is the first turn's calls, and each time the calls of a turn have
    all come back (returned or denied) it answers with the next turn, then with `final`.

    - `retried`: after a tool asked to be retried (`ModelRetry`), the model sends the call
      again under the same id, with the arguments updated by `retried[id]` (none: the same).
    - `again`: the calls a turn is answered with when the model is asked it again (a run
      re-run after a crash from a history that ended before that turn): a real model does
      not answer twice alike."""

    turns: Sequence[Sequence[Call]]
    final: str = "done"
    retried: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    again: Mapping[int, Sequence[Call]] = field(default_factory=dict)


def scripted(script: Script | Callable[..., Any], execution_id: str, disk: Disk
             ) -> Callable[..., Any]:
    """Gives the `FunctionModel` function that plays `script` for one execution (a function
    given as the script is played as it is)."""
    if not isinstance(script, Script):
        return script
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        RetryPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )

    def respond(messages: list[Any], info: Any) -> Any:
        last = messages[-1] if messages else None
        parts = list(getattr(last, "parts", ()))
        retry = [p for p in parts if isinstance(p, RetryPromptPart) and p.tool_call_id
                 and p.tool_name]
        if retry:  # a tool asked to be retried: the model sends it again, under its id
            sent = []
            for part in retry:
                args = dict(_args_of(messages, part.tool_call_id))
                args.update(script.retried.get(part.tool_call_id, {}))
                sent.append(ToolCallPart(str(part.tool_name), args,
                                         tool_call_id=part.tool_call_id))
            return ModelResponse(parts=sent)
        turn = sum(1 for m in messages if isinstance(m, ModelRequest)
                   and any(isinstance(p, ToolReturnPart) for p in m.parts))
        if turn >= len(script.turns):
            return ModelResponse(parts=[TextPart(script.final)])
        asked = disk.asked[(execution_id, turn)] = disk.asked.get((execution_id, turn), 0) + 1
        calls = script.again.get(turn, script.turns[turn]) if asked > 1 else script.turns[turn]
        return ModelResponse(parts=[ToolCallPart(c.tool, dict(c.args), tool_call_id=c.id)
                                    for c in calls])
    return respond


def _args_of(messages: Sequence[Any], call_id: str) -> Mapping[str, Any]:
    from pydantic_ai.messages import ModelResponse, ToolCallPart
    for message in reversed(messages):
        if isinstance(message, ModelResponse):
            for part in message.parts:
                if isinstance(part, ToolCallPart) and part.tool_call_id == call_id:
                    return part.args_as_dict()
    return {}


#: The epoch of the run's clock as pydantic-ai sees it: virtual time counts from it.
EPOCH = datetime(2025, 1, 1, tzinfo=UTC)

_STACK: list[tuple[Disk, int]] = []  # the disks and times of the runs going on, innermost last
_SAVED: dict[str, Any] = {}


def _now() -> datetime:
    return _fsmharness_pins["now"]()  # type: ignore[name-defined]  # noqa: F821


def _next() -> Any:
    return _fsmharness_pins["next"]()  # type: ignore[name-defined]  # noqa: F821


def _pinned_now() -> datetime:
    _, now = _STACK[-1]
    return EPOCH + timedelta(milliseconds=now)


def _pinned_call_id() -> str:
    disk, _ = _STACK[-1]
    return f"pyd_ai_{disk.mint():08d}"


def _pinned_uuid() -> uuid.UUID:
    disk, _ = _STACK[-1]
    # a v7 layout whose millisecond field counts ids (so a later one sorts later); Python
    # before 3.14 takes no version 7 in UUID(version=)
    return uuid.UUID(int=(disk.mint() & 0xFFFFFFFFFFFF) << 80 | 0x7 << 76 | 0b10 << 62)


#: Held while pydantic-ai's functions are swapped: one harness run at a time in the process.
_PINNING = LentLock()  # held while pydantic-ai's functions are swapped
_PINS = "_fsmharness_pins"  # the name the stand-ins find their functions under


def in_thread(run: Callable[..., Any], *arguments: Any, fresh: bool = False) -> Any:
    """Runs `run(*arguments)` in a thread of its own, waited for (pydantic-ai's `run_sync`
    owns an event loop, and a second worker may run inside the first's crash point, in the
    first's loop), with the caller's context (`fresh`: an empty one, so that a second
    worker's work is not taken for part of the DBOS workflow it acts inside of); it holds
    the pins' lock for the caller, so no other thread swaps them meanwhile. Gives what
    `run` gave, or raises what it raised."""
    context = contextvars.Context() if fresh else contextvars.copy_context()
    with _PINNING.held():
        return _PINNING.in_thread(lambda: context.run(run, *arguments))


def lent_here() -> contextlib.AbstractContextManager[None]:
    """Lends the pins' hold to this thread: a thread DBOS runs a harness run's work on,
    while the holder waits on it."""
    return _PINNING.lent_here()


@contextlib.contextmanager
def pinned(disk: Disk, now: int) -> Iterator[None]:
    """Runs pydantic-ai with its clock at virtual time `now` and its run ids, conversation
    ids and tool call ids counted on `disk`: the same seed gives the same history, byte for
    byte. pydantic-ai binds these functions by name in several modules and as dataclass
    default factories, so their code is swapped, not their names. A lock keeps other
    threads from swapping them meanwhile (runs nest in one thread, or in a thread lent the
    hold); the code and what the stand-ins read are put back and removed after."""
    with _PINNING.held():
        utils: Any = importlib.import_module("pydantic_ai._utils")
        uuids: Any = _module("pydantic_ai._uuid")
        targets: list[tuple[Any, ...]] = [
            (utils.now_utc, _now, _pinned_now, _pinned_call_id),
            (utils.generate_tool_call_id, _next, _pinned_now, _pinned_call_id)]
        if uuids is not None:
            targets.append((uuids.uuid7, _next, _pinned_now, _pinned_uuid))
        if not _STACK:
            for function, stand_in, now_of, next_of in targets:
                _SAVED[function.__qualname__ + function.__module__] = function.__code__
                function.__globals__[_PINS] = {"now": now_of, "next": next_of}
                function.__code__ = stand_in.__code__
        _STACK.append((disk, now))
        try:
            yield
        finally:
            _STACK.pop()
            if not _STACK:
                for function, *_ in targets:
                    function.__code__ = _SAVED.pop(function.__qualname__ + function.__module__)
                    function.__globals__.pop(_PINS, None)


def _module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
