"""Correlated payloads: a drawn payload's correlated fields take the execution's context values,
so the reference machine accepts it; the `wrong_correlation` fault makes one field another
value of its type, which the machine refuses as `uncorrelated`; both follow the seed."""

from __future__ import annotations

from typing import Any

import pytest

from harness.sim.choices import Choices
from harness.sim.payloads import PayloadGenerator, correlated
from reference_machine import (
    Accepted,
    Event,
    Rejected,
    RejectReason,
    WorkflowDefinition,
    decide,
    load_definition,
    new_execution,
    start_event,
)

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"issue_id": {"type": "string"}, "run": {"type": "integer"},
                   "passed": {"type": "boolean"}, "branch": {"enum": ["main", "dev", "rc"]}},
    "required": ["issue_id", "run", "passed", "branch"],
}
CONTEXT = {"issue_id": "ISS-7", "run": 12, "branch": "dev"}


def webhook(correlate: dict[str, str]) -> WorkflowDefinition:
    """Gives a workflow waiting for `ci.finished`, whose payload correlates `correlate`."""
    return load_definition({
        "name": "webhook",
        "context": dict(CONTEXT),
        "events": {"ci.finished": {"payload": SCHEMA, "correlate": correlate}},
        "states": {
            "waiting": {"initial": True, "type": "wait", "on": {"ci.finished": "done"},
                        "after": {"delay": 60, "target": "done"}},
            "done": {"type": "final", "outcome": "success"},
        },
    })


ONE = webhook({"issue_id": "context.issue_id"})
ALL = webhook({"issue_id": "context.issue_id", "run": "context.run",
               "branch": "context.branch"})


def draw(definition: WorkflowDefinition, seed: int, *, wrong: bool = False,
         context: dict[str, Any] | None = None) -> tuple[Any, str]:
    """Draws one payload of `ci.finished` from `seed` and correlates it."""
    rng = Choices(seed)
    generator = PayloadGenerator(SCHEMA, seed=seed)
    payload = generator.valid(rng)
    correlate = definition.events["ci.finished"].correlate
    return correlated(payload, correlate, CONTEXT if context is None else context,
                      Event("e", "ci.finished", "system", payload), rng, wrong=wrong,
                      generator=generator)


def decision(definition: WorkflowDefinition, payload: Any) -> Any:
    """Gives what the reference machine decides of `ci.finished` with `payload`."""
    execution = new_execution(definition, "x1")
    started = decide(definition, execution, start_event("x1"), 0)
    assert isinstance(started, Accepted)
    return decide(definition, started.execution,
                  Event("e1", "ci.finished", "system", payload), 1)


class TestCorrelated:
    @pytest.mark.parametrize("seed", range(20))
    def test_each_correlated_field_is_the_contexts(self, seed: int) -> None:
        """Every correlated field holds the context's value; the others are as drawn; the
        machine accepts the payload."""
        payload, wrong = draw(ALL, seed)
        assert wrong == ""
        assert {k: payload[k] for k in CONTEXT} == CONTEXT
        assert isinstance(payload["passed"], bool)
        assert isinstance(decision(ALL, payload), Accepted)

    @pytest.mark.parametrize("seed", range(20))
    def test_the_fault_makes_one_field_another_value_of_its_type(self, seed: int) -> None:
        """With `wrong`, one correlated field (the one named) differs from the context, has the
        context value's type, still fits the schema; the machine refuses it as uncorrelated."""
        payload, wrong = draw(ALL, seed, wrong=True)
        assert wrong in CONTEXT
        assert payload[wrong] != CONTEXT[wrong]
        assert type(payload[wrong]) is type(CONTEXT[wrong])
        assert {k: payload[k] for k in CONTEXT if k != wrong} == {
            k: v for k, v in CONTEXT.items() if k != wrong}
        check = ALL.events["ci.finished"].check_payload
        assert check is not None and check(payload) is None
        refused = decision(ALL, payload)
        assert isinstance(refused, Rejected) and refused.reason == RejectReason.UNCORRELATED
        assert f"payload.{wrong} is" in refused.detail

    def test_the_fault_strikes_every_field_across_seeds(self) -> None:
        """Which field is made wrong is drawn: each of the three is, on some seed."""
        assert {draw(ALL, seed, wrong=True)[1] for seed in range(40)} == set(CONTEXT)

    def test_an_enum_field_is_made_another_member(self) -> None:
        """A field the schema bounds to an enum takes another member, not a made-up value."""
        for seed in range(20):
            payload, wrong = draw(webhook({"branch": "context.branch"}), seed, wrong=True)
            assert wrong == "branch" and payload["branch"] in ("main", "rc")

    @pytest.mark.parametrize("seed", range(5))
    def test_the_same_seed_gives_the_same_payload(self, seed: int) -> None:
        """The draw is the seed's: equal seeds give equal payloads, with or without the
        fault."""
        for wrong in (False, True):
            assert draw(ALL, seed, wrong=wrong) == draw(ALL, seed, wrong=wrong)
        assert len({repr(draw(ALL, seed, wrong=True)) for seed in range(10)}) > 1

    @pytest.mark.parametrize(("expected", "kind"), [
        ("", str), (0, int), (-3, int), (2.5, float), (True, bool), (False, bool),
        ([1, 2], list), ([], list), ({"a": 1}, dict), ({}, dict), (None, str)])
    def test_a_value_without_a_generator_is_changed_within_its_type(
            self, expected: Any, kind: type) -> None:
        """With no schema to draw from, the expected value is changed: same type, not equal
        (None has no other value of its type: a string stands for it)."""
        correlate = ONE.events["ci.finished"].correlate
        for seed in range(5):
            payload, wrong = correlated({}, correlate, {"issue_id": expected},
                                        Event("e", "ci.finished"), Choices(seed), wrong=True)
            assert wrong == "issue_id"
            assert type(payload["issue_id"]) is kind and payload["issue_id"] != expected

    def test_a_field_whose_expression_raises_is_left_alone(self) -> None:
        """An expression that cannot be evaluated leaves its field as drawn (the machine's
        guard error to report), and the fault then has no field to strike."""
        definition = webhook({"issue_id": "context.issue_id.deeper"})
        payload, wrong = draw(definition, 0, wrong=True, context={"issue_id": 7})
        assert wrong == ""
        assert payload == PayloadGenerator(SCHEMA, seed=0).valid(Choices(0))

    def test_a_payload_that_is_no_mapping_is_left_alone(self) -> None:
        """A payload made no mapping (a broken one) is handed back as it is."""
        correlate = ONE.events["ci.finished"].correlate
        assert correlated(["x"], correlate, CONTEXT, Event("e", "ci.finished"), Choices(0),
                          wrong=True) == (["x"], "")

    def test_the_payload_is_a_copy(self) -> None:
        """The drawn payload and a container taken from the context are not shared."""
        context = {"issue_id": {"id": [1]}}
        correlate = ONE.events["ci.finished"].correlate
        drawn = {"run": 1}
        payload, _ = correlated(drawn, correlate, context, Event("e", "ci.finished"),
                                Choices(0))
        assert drawn == {"run": 1}
        assert payload["issue_id"] == {"id": [1]} and payload["issue_id"] is not context[
            "issue_id"]
