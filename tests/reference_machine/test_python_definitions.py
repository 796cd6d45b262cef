"""Definitions written in Python: pydantic payload models, callables as guards and actions."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from reference_machine import (
    Accepted,
    DefinitionError,
    Event,
    Rejected,
    RejectReason,
    WorkflowSpec,
    decide,
    load_definition,
    new_execution,
    register_function,
    start_event,
)


class Order(BaseModel):
    """The payload of `order.placed`."""

    order_id: str
    amount: float


def is_large(context: Any, event: Event) -> bool:
    """A guard written in Python."""
    return event.payload["amount"] > context["limit"]


def remember(context: Any, event: Event) -> dict[str, Any]:
    """An action written in Python."""
    return {"order_id": event.payload["order_id"]}


def spec(**overrides: Any) -> WorkflowSpec:
    """Gives a small spec built from Python objects."""
    data: dict[str, Any] = {
        "name": "orders",
        "context": {"limit": 100},
        "events": {"order.placed": {"payload": Order, "sources": ["agent"]}},
        "states": {
            "idle": {"initial": True, "on": {"order.placed": [
                {"target": "review", "guard": is_large, "actions": [{"function": remember}]},
                {"target": "done", "actions": [{"function": remember}]},
            ]}},
            "review": {"type": "wait", "after": {"delay": "1h", "target": "done"}},
            "done": {"type": "final", "outcome": "success"},
        },
    }
    data.update(overrides)
    return WorkflowSpec.model_validate(data)


def started(definition: Any) -> Any:
    """Gives the started execution of `definition`."""
    decision = decide(definition, new_execution(definition, "o1"), start_event("o1"), 0)
    assert isinstance(decision, Accepted)
    return decision.execution


class TestPythonObjects:
    def test_callable_guard_and_action_route_the_event(self) -> None:
        """A Python guard picks the branch and a Python action writes the context."""
        definition = load_definition(spec())
        execution = started(definition)
        large = Event("e1", "order.placed", "agent", {"order_id": "A-1", "amount": 250.0})
        decision = decide(definition, execution, large, 10)
        assert isinstance(decision, Accepted)
        assert decision.execution.state == "review"
        assert decision.execution.context["order_id"] == "A-1"
        small = Event("e2", "order.placed", "agent", {"order_id": "A-2", "amount": 5.0})
        assert decide(definition, execution, small, 10).execution.state == "done"

    def test_pydantic_payload_model_rejects_bad_payload(self) -> None:
        """A payload that fails its pydantic model is a rejected event, not a crash."""
        definition = load_definition(spec())
        bad = Event("e1", "order.placed", "agent", {"order_id": "A-1", "amount": "lots"})
        decision = decide(definition, started(definition), bad, 10)
        assert isinstance(decision, Rejected)
        assert decision.reason == RejectReason.INVALID_PAYLOAD
        assert "amount" in decision.detail

    def test_registered_function_by_name(self) -> None:
        """`function: name` finds a function registered with @register_function."""
        register_function("test_python_definitions.is_large")(is_large)
        states = spec().model_dump()["states"]
        states["idle"]["on"]["order.placed"][0]["guard"] = {
            "function": "test_python_definitions.is_large"}
        definition = load_definition(spec(states=states))
        large = Event("e1", "order.placed", "agent", {"order_id": "A-1", "amount": 250.0})
        assert decide(definition, started(definition), large, 10).execution.state == "review"

    def test_register_function_refuses_non_callables(self) -> None:
        """Registering something that is not callable fails at once, naming it."""
        with pytest.raises(TypeError, match=r"register_function\('x'\) needs a callable"):
            register_function("x")(42)  # type: ignore[type-var]

    def test_unknown_function_name_is_a_definition_error(self) -> None:
        """A guard naming an unregistered function fails at load with its location."""
        states = spec().model_dump()["states"]
        states["idle"]["on"]["order.placed"][0]["guard"] = {"function": "nowhere"}
        with pytest.raises(DefinitionError,
                           match=r"states\.idle\.on\.order\.placed\[0\]\.guard: function "
                                 r"'nowhere' is not registered"):
            load_definition(spec(states=states))
