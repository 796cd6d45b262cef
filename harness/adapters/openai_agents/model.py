"""The scripted model: what the agent's model says, written down (`call`, `say`), and
`ScriptedModel`, the SDK `Model` that plays it.

The model picks its reply from the history it is shown, not from a counter of its own: a
fresh model after a crash, or a second worker's, carries on where the saved state stands.
A call whose output is the SDK's error text (the tool raised) is made again, up to its
`retries`, as a model retries a failed call; a call id the script does not give is minted
anew for each response, as a real model's is."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness.adapters.openai_agents.common import ERROR_TEXT
from harness.adapters.peers import AdapterError

if TYPE_CHECKING:
    from harness.adapters.openai_agents.store import Store

__all__ = ["Say", "ToolCall", "call", "checked", "model_class", "next_step", "say"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """The model calls `tool` with `arguments` (call id `call_id`, or one minted per
    response), and calls it again up to `retries` times while the tool fails."""

    tool: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    call_id: str | None = None
    retries: int = 2


@dataclass(frozen=True, slots=True)
class Say:
    """The model answers with its final text: the run ends."""

    text: str


def call(tool: str, arguments: Mapping[str, Any] | None = None, *, call_id: str | None = None,
         retries: int = 2) -> ToolCall:
    """Gives a scripted tool call."""
    return ToolCall(tool, dict(arguments or {}), call_id, retries)


def say(text: str) -> Say:
    """Gives the scripted final answer."""
    return Say(text)


def checked(script: Sequence[ToolCall | Say], tools: Sequence[str]) -> tuple[ToolCall | Say, ...]:
    """Gives the script, refused where the model could not play it."""
    steps = tuple(script)
    for index, step in enumerate(steps):
        if isinstance(step, ToolCall):
            if step.tool not in tools:
                known = ", ".join(tools) or "none"
                raise AdapterError(f"script step {index} calls {step.tool!r}, which the agent "
                                   f"has no tool for (its tools: {known})")
            if not isinstance(step.arguments, Mapping) or step.retries < 0:
                raise AdapterError(f"script step {index}: arguments must be a mapping and "
                                   f"retries at least 0")
        elif isinstance(step, Say):
            if index != len(steps) - 1:
                raise AdapterError(f"script step {index} is a final answer, but steps follow "
                                   f"it: say(...) ends the script")
        else:
            raise AdapterError(f"script step {index} is {type(step).__name__}: write the "
                               f"script with call(...) and say(...)")
    if not steps or not isinstance(steps[-1], Say):
        steps = (*steps, Say("done"))
    return steps


def _items(given: Any) -> list[Mapping[str, Any]]:
    if isinstance(given, str):
        return []
    return [item for item in given if isinstance(item, Mapping)]


def next_step(script: Sequence[ToolCall | Say], store: Store, given: Any) -> tuple[int, int]:
    """Gives the script step the model plays next and its attempt, read off the history."""
    items = _items(given)
    last = ""
    outputs: dict[str, str] = {}
    for item in items:
        if item.get("type") == "function_call":
            last = str(item.get("call_id", ""))
        elif item.get("type") == "function_call_output":
            outputs[str(item.get("call_id", ""))] = str(item.get("output", ""))
    if not last:
        return 0, 1
    made = store.calls.get(last)
    if made is None:
        raise AdapterError(f"the history holds call {last!r}, which the scripted model did not "
                           f"make: resume only states the harness saved")
    step, attempt = made
    planned = script[step]
    failed = outputs.get(last, "").startswith(ERROR_TEXT)
    if failed and isinstance(planned, ToolCall) and attempt <= planned.retries:
        return step, attempt + 1
    return step + 1, 1


def model_class() -> type:
    """Gives `ScriptedModel`, made when the SDK is there (imported on first use)."""
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    class Scripted(Model):
        """Plays the script (see the module)."""

        def __init__(self, script: Sequence[ToolCall | Say], store: Store) -> None:
            self.script, self.store = tuple(script), store

        async def get_response(self, system_instructions: Any, input: Any,
                               model_settings: Any, tools: Any, output_schema: Any,
                               handoffs: Any, tracing: Any, *, previous_response_id: Any,
                               conversation_id: Any, prompt: Any) -> Any:
            step, attempt = next_step(self.script, self.store, input)
            store = self.store
            store.responses += 1
            planned = self.script[min(step, len(self.script) - 1)]
            output: list[Any]
            if isinstance(planned, ToolCall):
                given = planned.call_id
                call_id = (store.call_id() if given is None
                           else given if attempt == 1 else f"{given}_{attempt}")
                store.calls[call_id] = (step, attempt)
                output = [ResponseFunctionToolCall(
                    id=f"fc_{call_id}", call_id=call_id, type="function_call",
                    name=planned.tool,
                    arguments=json.dumps(dict(planned.arguments), sort_keys=True))]
            else:
                output = [ResponseOutputMessage(
                    id=f"msg_{store.responses:04d}", type="message", role="assistant",
                    status="completed",
                    content=[ResponseOutputText(type="output_text", text=planned.text,
                                                annotations=[], logprobs=[])])]
            return ModelResponse(output=output, usage=Usage(requests=1, input_tokens=1,
                                                            output_tokens=1, total_tokens=2),
                                 response_id=f"resp_{store.responses:04d}")

        def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            raise AdapterError("the harness drives Runner.run, not Runner.run_streamed")

    return Scripted

