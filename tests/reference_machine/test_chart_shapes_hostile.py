"""Any statechart shape, however wrong, loads or gets findings: never a crash of the loader
(parents in cycles, regions that are leaves, maps with no flow, choices pointing anywhere,
history on anything), and whatever loads is decided totally by `decide`."""

from __future__ import annotations

import copy
from typing import Any

from charts import chart
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reference_machine import (
    DefinitionError,
    Event,
    check_spec,
    decide,
    load_definition,
    new_execution,
    start_event,
)
from reference_machine._spec import WorkflowSpec

NAMES = ["a", "b", "c", "d", "e", "f"]
TYPES = ["normal", "wait", "final", "choice", "parallel", "map"]


@st.composite
def chart_specs(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=6, unique=True))
    target = st.sampled_from([*names, "nowhere"])
    guard = st.sampled_from([None, "context.n > 1", "event.payload.x", "context.n +"])
    transition = st.one_of(target, st.fixed_dictionaries(
        {"target": st.one_of(st.none(), target)}, optional={"guard": guard}))
    states: dict[str, Any] = {}
    for name in names:
        state: dict[str, Any] = {"type": draw(st.sampled_from(TYPES))}
        if draw(st.booleans()):
            state["initial"] = True
        if draw(st.booleans()):
            state["parent"] = draw(st.sampled_from(names))
        if state["type"] == "final":
            state["outcome"] = draw(st.sampled_from(["success", "failure"]))
        if draw(st.booleans()):
            state["always"] = draw(st.lists(transition, max_size=3))
        if draw(st.booleans()):
            state["on"] = {"go": draw(st.lists(transition, min_size=1, max_size=2))}
        if draw(st.booleans()):
            state["done"] = draw(transition)
        if draw(st.booleans()):
            state["history"] = draw(st.sampled_from(["shallow", "deep"]))
        if state["type"] == "map" or draw(st.booleans()):
            state["items"] = draw(st.sampled_from(["context.items", "context.n", "nope +"]))
        if draw(st.booleans()):
            state["after"] = {"delay": 1, "target": draw(target)}
        if draw(st.booleans()):
            state["entry"] = [{"assign": {"n": "context.n + 1"}}]
        if draw(st.booleans()):
            state["step"] = {"tool": "t", "needs_approval": draw(st.sampled_from(
                [False, True, "context.n > 1"]))}
        states[name] = state
    return {"name": "shape", "context": {"n": 0, "items": [1, 2]},
            "tools": {"t": {"idempotency_keys": True}}, "events": {"go": {}},
            "states": states}


@settings(max_examples=400, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(chart_specs())
def test_a_chart_of_any_shape_loads_or_gets_findings(data: dict[str, Any]) -> None:
    try:
        spec = WorkflowSpec.model_validate(data)
    except ValueError:
        return  # structure: pydantic's located errors, tested elsewhere
    check_spec(spec)  # never raises
    try:
        definition = load_definition(data)
    except DefinitionError:
        return
    ex = new_execution(definition, "x")
    for index, event in enumerate([start_event("x"), Event("g1", "go"), Event("g2", "go")]):
        decision = decide(definition, ex, event, index)
        assert decision.kind in ("accepted", "ignored", "rejected")
        if decision.kind == "accepted":
            ex = decision.execution  # type: ignore[union-attr]


def _valid_chart() -> dict[str, Any]:
    return copy.deepcopy(chart())  # a correct chart using every construct


FIELDS = ["always", "done", "history", "on_region_failure", "items", "concurrency_max",
          "tolerated_failures", "entry", "exit", "type", "parent", "initial"]
VALUES: list[Any] = [None, [], ["end"], "end", "deep", "wait", "cancel", 1, 0, True,
                     "context.items", "context.amount", [{"assign": {"amount": "1"}}],
                     [{"target": "end", "guard": "context.amount > 1"}], "both", "each"]


@st.composite
def mutated_charts(draw: st.DrawFn) -> dict[str, Any]:
    data = _valid_chart()
    for _ in range(draw(st.integers(1, 3))):
        name = draw(st.sampled_from(sorted(data["states"])))
        field = draw(st.sampled_from(FIELDS))
        value = draw(st.sampled_from(VALUES))
        if value is None:
            data["states"][name].pop(field, None)
        else:
            data["states"][name][field] = value
    return data


@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(mutated_charts(), st.lists(st.sampled_from(["go", "pause", "answer", "tick"]),
                                  max_size=8))
def test_a_mutated_chart_loads_or_gets_findings_and_decides_totally(
        data: dict[str, Any], events: list[str]) -> None:
    try:
        definition = load_definition(data)
    except (DefinitionError, ValueError):
        return
    ex = new_execution(definition, "x")
    decision = decide(definition, ex, start_event("x"), 0)
    for index, kind in enumerate(events, 1):
        if decision.kind == "accepted":
            ex = decision.execution  # type: ignore[union-attr]
        if kind == "answer" and ex.regions:
            region = next((r for r in ex.regions if r.effect is not None), None)
            answers = region.effect.effect_id if region and region.effect else ""
            event = Event(f"r{index}", "step.succeeded", "tool", {}, answers)
        elif kind == "tick" and ex.timers:
            event = Event(f"t{index}", "timer.fired", "timer", {}, ex.timers[0].id)
        else:
            event = Event(f"e{index}", "go" if kind == "go" else "pause", "system",
                          {"id": "x"})
        decision = decide(definition, ex, event, index * 120_000)
        assert decision.kind in ("accepted", "ignored", "rejected")
