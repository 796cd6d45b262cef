"""Statechart definitions and a driver the tests share."""

from __future__ import annotations

from typing import Any

from reference_machine import (
    Accepted,
    Event,
    Execution,
    RunCompensation,
    RunEffect,
    WorkflowDefinition,
    decide,
    new_execution,
    start_event,
)
from reference_machine._codec import decode_execution, encode_execution

WAIT = {"type": "wait", "after": {"delay": 60, "target": "end"}}
END = {"type": "final", "outcome": "success"}


def chart() -> dict[str, Any]:
    """A correct chart using a parallel state, a map, a choice and history."""
    return {
        "name": "chart",
        "context": {"items": [1, 2], "amount": 0},
        "tools": {"t": {"idempotency_keys": True}},
        "events": {"go": {"payload": {"type": "object",
                                      "properties": {"id": {"type": "string"}}}},
                   "pause": {}},
        "states": {
            "both": {"initial": True, "type": "parallel", "done": "each"},
            "left": {"parent": "both"},
            "l1": {"parent": "left", "initial": True, **WAIT, "after": {"delay": 60,
                                                                        "target": "l2"}},
            "l2": {"parent": "left", **END},
            "right": {"parent": "both"},
            "r1": {"parent": "right", "initial": True, "step": {"tool": "t"},
                   "on": {"step.succeeded": "r2", "step.failed": "r2"}},
            "r2": {"parent": "right", **END},
            "each": {"type": "map", "items": "context.items", "done": "route"},
            "work": {"parent": "each", "initial": True, "step": {"tool": "t"},
                     "on": {"step.succeeded": "worked", "step.failed": "worked"}},
            "worked": {"parent": "each", **END},
            "route": {"type": "choice", "always": [
                {"target": "end", "guard": "context.amount > 1"}, "resumable"]},
            "resumable": {"history": "shallow", "on": {"pause": "end"}},
            "r_a": {"parent": "resumable", "initial": True, **WAIT, "on": {"go": "r_b"}},
            "r_b": {"parent": "resumable", **WAIT},
            "end": END,
        },
    }


def log(text: str, key: str = "log") -> dict[str, Any]:
    """An action that appends `text` to `context.log` (or another list)."""
    return {"assign": {key: f"context.{key} + [{text!r}]"}}


class Driver:
    """Feeds events to one execution, keeping what each accepted decision said."""

    def __init__(self, definition: WorkflowDefinition, context: dict[str, Any] | None = None
                 ) -> None:
        self.definition = definition
        self.ex: Execution = new_execution(definition, "e", context=context)
        self.commands: list[Any] = []
        self.transitions: list[Any] = []
        self.serial = 0

    def send(self, event: Event, now: int = 0) -> Any:
        decision = decide(self.definition, self.ex, event, now)
        if isinstance(decision, Accepted):
            # every stored form gives back the same execution
            assert decode_execution(encode_execution(decision.execution)) == decision.execution
            self.ex = decision.execution
            self.commands += decision.commands
            self.transitions.append(decision.transition)
        return decision

    def start(self, payload: dict[str, Any] | None = None) -> Any:
        return self.send(start_event("e", payload))

    def event(self, kind: str, payload: dict[str, Any] | None = None, source: str = "system",
              now: int = 0) -> Any:
        self.serial += 1
        return self.send(Event(f"ev{self.serial}", kind, source, payload or {}), now)

    def answer(self, tool: str, payload: dict[str, Any] | None = None, *, ok: bool = True,
               now: int = 0) -> Any:
        """Answers the newest call to `tool` still unanswered."""
        call = [c for c in self.commands if isinstance(c, RunEffect | RunCompensation)
                and c.tool == tool][-1]
        self.serial += 1
        kind = "step.succeeded" if ok else "step.failed"
        body = payload if payload is not None else ({} if ok else {"category": "permanent"})
        kind = kind if isinstance(call, RunEffect) else kind.replace("step", "compensation")
        return self.send(Event(f"ev{self.serial}", kind, "tool", body, call.effect_id), now)

    def calls(self, tool: str) -> list[Any]:
        return [c for c in self.commands if isinstance(c, RunEffect | RunCompensation)
                and c.tool == tool]
