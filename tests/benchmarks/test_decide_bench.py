"""`decide` against a hand-written dict FSM of the same shape, side by side in one run.

The shape: an 8-state cycle (a -> b -> ... -> h -> a) driven by one event, `next`; the edge out
of `d` has a guard (`context.n >= 0`) and the edge out of `h` an action (`n = n + 1`). Both
contenders walk the same 8 transitions per round, so the ratio of their means is the cost of
`decide` (validation, budgets, immutable records, commands) over a bare table lookup.
Run: `python -m pytest tests/benchmarks --benchmark-only --benchmark-group-by=group`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from reference_machine import (
    Accepted,
    Event,
    WorkflowDefinition,
    decide,
    load_definition,
    new_execution,
    start_event,
)

STATES = "abcdefgh"


def cycle_definition() -> WorkflowDefinition:
    """Gives the 8-state cycle with one guard and one action, plus a final state to exit."""
    states: dict[str, Any] = {}
    for index, name in enumerate(STATES):
        following = STATES[(index + 1) % len(STATES)]
        transition: dict[str, Any] = {"target": following}
        if name == "d":
            transition["guard"] = "context.n >= 0"
        if name == "h":
            transition["actions"] = [{"assign": {"n": "context.n + 1"}}]
        states[name] = {"on": {"next": transition, "stop": "done"}}
    states["a"]["initial"] = True
    states["done"] = {"type": "final", "outcome": "success"}
    return load_definition({
        "name": "cycle8", "context": {"n": 0},
        "events": {"next": {}, "stop": {}}, "states": states,
    })


def hand_written_fsm() -> tuple[dict[tuple[str, str], tuple[str, Any, Any]], dict[str, int]]:
    """Gives the floor: a dict of (state, event) -> (target, guard, action) and a context."""
    table: dict[tuple[str, str], tuple[str, Any, Any]] = {}
    for index, name in enumerate(STATES):
        guard = (lambda c: c["n"] >= 0) if name == "d" else None
        action = (lambda c: c.__setitem__("n", c["n"] + 1)) if name == "h" else None
        table[(name, "next")] = (STATES[(index + 1) % len(STATES)], guard, action)
    return table, {"n": 0}


def run_hand_written() -> Callable[[], str]:
    table, context = hand_written_fsm()
    state = ["a"]

    def eight_transitions() -> str:
        current = state[0]
        for _ in range(8):
            target, guard, action = table[(current, "next")]
            if guard is not None and not guard(context):
                raise RuntimeError("guard failed")
            if action is not None:
                action(context)
            current = target
        state[0] = current
        return current

    return eight_transitions


def run_decide() -> Callable[[], str]:
    definition = cycle_definition()
    accepted = decide(definition, new_execution(definition, "bench"), start_event("bench"), 0)
    assert isinstance(accepted, Accepted)
    holder = [accepted.execution]
    events = [Event(f"e{i}", "next", "agent") for i in range(8)]

    def eight_transitions() -> str:
        execution = holder[0]
        for event in events:
            decision = decide(definition, execution, event, 0)
            execution = decision.execution  # type: ignore[union-attr]
        holder[0] = execution
        return execution.state

    return eight_transitions


@pytest.mark.benchmark(group="8-state cycle, 8 transitions")
def test_hand_written_dict_fsm(benchmark: Any) -> None:
    """The floor: a hand-written dict-lookup FSM."""
    assert benchmark(run_hand_written()) == "a"


@pytest.mark.benchmark(group="8-state cycle, 8 transitions")
def test_reference_decide(benchmark: Any) -> None:
    """The reference `decide` on the same shape."""
    assert benchmark(run_decide()) == "a"


def test_decide_walk_matches_hand_written() -> None:
    """Both contenders agree on the state and counter after the same number of rounds."""
    hand, ours = run_hand_written(), run_decide()
    for _ in range(3):
        assert hand() == ours() == "a"
