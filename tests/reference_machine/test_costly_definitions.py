"""Lint-clean definitions that cost too much: schemas that ask for gigabyte strings, arrays of
a hundred million items, expressions that nest repetition. Each is refused where it can be
seen (lint names the tool and the schema path, and the bound), else when it runs, with a clear
error: never a hang or a MemoryError.
"""

from __future__ import annotations

import random
import subprocess
from collections.abc import Callable
from typing import Any

import pytest
from hostile import Case

from harness.sim.payloads import PayloadGenerator
from reference_machine import GuardError, load_definition
from reference_machine._expr import ExpressionSyntaxError, compile_expression
from reference_machine.fast_schema import (
    GENERATED_LENGTH_MAX,
    GENERATED_SIZE_MAX,
    generation_problem,
)


def _definition(output: str, guard: str = "context.n >= 0") -> str:
    return f"""\
name: costly
version: 1
context: {{n: 0}}
tools:
  t.big:
    idempotency_keys: true
    output: {output}
events:
  go: {{sources: [human]}}
states:
  idle:
    initial: true
    on:
      go: {{target: call, guard: "{guard}"}}
  call:
    step: {{tool: t.big}}
    on:
      step.succeeded: done
      step.failed: failed
  done: {{type: final, outcome: success}}
  failed: {{type: final, outcome: failure}}
"""


_LONG_STRING = _definition(
    "{type: object, required: [s], properties: {s: {type: string, minLength: 1000000000}}}")
_MANY_ITEMS = _definition("{type: object, properties: {a: {type: array, minItems: 100000000}}}")
_NESTED_ITEMS = _definition(
    "{type: array, minItems: 1000, items: {type: array, minItems: 1000}}")
_REPEATED = _definition("{type: object}", "[[['x' * 9999] * 9999] * 9999] == context.n")

CASES = [
    Case("lint: minLength 1e9", ("lint", "w.yaml"), 1,
         "w.yaml:7: error: tools.t.big.output.properties.s.minLength: minLength 1,000,000,000 "
         "is over the 10,000 characters a generated string may have", {"w.yaml": _LONG_STRING}),
    Case("lint: minItems 1e8", ("lint", "w.yaml"), 1,
         "tools.t.big.output.properties.a.minItems: minItems 100,000,000 is over the 10,000 "
         "items a generated array may have", {"w.yaml": _MANY_ITEMS}),
    Case("lint: minItems within minItems", ("lint", "w.yaml"), 1,
         "tools.t.big.output.items.minItems: minItems 1,000 within arrays of at least 1,000 "
         "items makes values of 1,000,000 items", {"w.yaml": _NESTED_ITEMS}),
    Case("lint: nested repetition", ("lint", "w.yaml"), 1,
         "w.yaml:14: error: states.idle.on.go.guard: guard \"[[['x' * 9999] * 9999] * 9999] == "
         "context.n\" at column 1: repetition to 99,990,000 items is over the limit of 10000",
         {"w.yaml": _REPEATED}),
    Case("fuzz: minLength 1e9", ("fuzz", "--runs", "5", "--no-report", "w.yaml"), 2,
         "w.yaml: line 7: tools.t.big.output.properties.s.minLength: minLength 1,000,000,000 is "
         "over the 10,000 characters", {"w.yaml": _LONG_STRING}),
    Case("run: minItems 1e8", ("run", "w.yaml"), 2,
         "minItems 100,000,000 is over the 10,000 items", {"w.yaml": _MANY_ITEMS}),
    Case("explore: nested repetition", ("explore", "w.yaml", "--depth", "2"), 2,
         "repetition to 99,990,000 items is over the limit", {"w.yaml": _REPEATED}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_costly_definition(case: Case,
                           hostile: Callable[[Case], subprocess.CompletedProcess[str]]) -> None:
    """A definition that asks for more than a simulator makes: refused at load, with the bound."""
    hostile(case)


class TestGenerationProblem:
    @pytest.mark.parametrize(("schema", "where"), [
        ({"type": "string", "minLength": GENERATED_LENGTH_MAX + 1}, "minLength"),
        ({"anyOf": [{"type": "null"}, {"type": "array", "minItems": 10 ** 8}]},
         "anyOf[1].minItems"),
        ({"$defs": {"big": {"minLength": 10 ** 9}}, "$ref": "#/$defs/big"},
         "$defs.big.minLength"),
        ({"type": "array", "minItems": 400, "items": {"type": "string", "minLength": 400}},
         "items.minLength"),
    ])
    def test_what_a_schema_forces_is_bounded(self, schema: dict[str, Any], where: str) -> None:
        """A forced size past a bound is named by its schema path."""
        problem = generation_problem(schema)
        assert problem is not None and problem[0] == where

    @pytest.mark.parametrize("schema", [
        {"type": "string", "maxLength": 10 ** 9},
        {"type": "array", "maxItems": 10 ** 8, "items": {"type": "string"}},
        {"enum": [{"minLength": 10 ** 9}]},  # data, not a schema
        {"type": "string", "minLength": GENERATED_LENGTH_MAX},
    ])
    def test_what_a_schema_allows_is_not_a_problem(self, schema: dict[str, Any]) -> None:
        """Large maxima and bounds written in data are fine: nothing makes them."""
        assert generation_problem(schema) is None


class TestPayloadBounds:
    """Schemas that reach the generator without a definition's checks (a pydantic model, a
    peer's events=) meet the same bounds when it is built."""

    @pytest.mark.parametrize(("schema", "message"), [
        ({"type": "string", "minLength": 10 ** 9}, r"minLength 1,000,000,000 at # is over the "
                                                   r"10,000 characters"),
        ({"type": "array", "minItems": 10 ** 8}, r"minItems 100,000,000 at # is over the "
                                                 r"10,000 items"),
        ({"$defs": {"s": {"type": "string", "minLength": 5000}}, "type": "array",
          "minItems": 5000, "items": {"$ref": "#/$defs/s"}},
         r"minItems 5,000 at # of items of up to 5,000 items and characters is over the "
         r"100,000"),
        ({"type": "string", "pattern": "^x{1000000000}$"},
         r"cannot generate a string matching pattern"),
        ({"type": "string", "pattern": "^(x{9999}){9999}$"},
         r"cannot generate a string matching pattern"),
        ({"type": "number", "minimum": float("inf")}, r"the bound inf at # is not a finite"),
    ])
    def test_a_costly_schema_is_refused_when_built(self, schema: dict[str, Any],
                                                   message: str) -> None:
        """The generator says which bound and where, instead of building the value."""
        with pytest.raises(ValueError, match=message):
            PayloadGenerator(schema, seed=0)

    def test_a_large_maximum_draws_a_bounded_array(self) -> None:
        """maxItems 100,000,000 means "no real limit": at most 100 items past minItems."""
        generator = PayloadGenerator({"type": "array", "minItems": 2, "maxItems": 10 ** 8,
                                      "items": {"type": "integer"}}, seed=0)
        rng = random.Random(0)
        sizes = [len(generator.valid(rng)) for _ in range(200)]
        assert min(sizes) >= 2 and max(sizes) <= 102

    def test_no_broken_value_is_built_past_a_large_maximum(self) -> None:
        """A value over maxLength 1e9 or maxItems 1e8 is too costly to make: none is made."""
        for schema in ({"type": "string", "maxLength": 10 ** 9},
                       {"type": "array", "maxItems": 10 ** 8}):
            generator = PayloadGenerator(schema, seed=0)
            rng = random.Random(0)
            for _ in range(100):
                broken = generator.invalid(rng)
                assert broken is None or len(str(broken[0])) < GENERATED_SIZE_MAX

    def test_nested_arrays_fit_the_size_a_value_may_hold(self) -> None:
        """Three arrays of up to 10,000 items each, nested: every value is within the bound."""
        level: dict[str, Any] = {"type": "string"}
        for _ in range(3):
            level = {"type": "array", "maxItems": 10_000, "items": level}
        generator = PayloadGenerator(level, seed=0)
        rng = random.Random(1)
        for _ in range(20):
            value = generator.valid(rng)
            assert sum(len(inner) + 1 for middle in value for inner in middle) < (
                GENERATED_SIZE_MAX)


class TestExpressionBounds:
    @pytest.mark.parametrize(("text", "message"), [
        ("[[[context.s * 9999] * 9999] * 9999]", r"repetition to 99,990,000 items"),
        ("context.n * context.n", r"a product of more than 1,000 digits"),
        ("[context.deep]", r"nested more than 50 levels deep"),
        ("context.long + context.long", r"joining text to 120,000 characters"),
        ("context.items + context.items", r"a list of more than 100,000 items and characters"),
        ("round(context.n, -1000000000)", r"round to -1,000,000,000 digits is over the limit"),
    ])
    def test_what_evaluation_would_build_is_bounded(self, text: str, message: str) -> None:
        """Past a bound, evaluation raises GuardError (decide's reject), having built nothing
        large."""
        deep: list[Any] = []
        for _ in range(60):
            deep = [deep]
        context = {"s": "x", "n": 10 ** 600, "deep": deep, "long": "x" * 60_000,
                   "items": [["x"] * 100] * 600}
        with pytest.raises(GuardError, match=message):
            compile_expression(text)(context, None)

    def test_a_constant_part_is_checked_at_load(self) -> None:
        """A part that reads no context is evaluated once, when compiled: its column is given."""
        with pytest.raises(ExpressionSyntaxError, match="repetition to 99,990,000") as info:
            compile_expression("context.n == [[['x' * 9999] * 9999] * 9999]")
        assert info.value.col == 14

    def test_ordinary_expressions_are_untouched(self) -> None:
        """Lists, concatenation and products of everyday size evaluate as before."""
        context = {"items": [1, 2], "name": "Ada", "n": 12}
        assert compile_expression("context.items + [3]")(context, None) == [1, 2, 3]
        assert compile_expression("[context.items, context.name * 2]")(context, None) == [
            [1, 2], "AdaAda"]
        assert compile_expression("context.n * context.n")(context, None) == 144

    def test_a_costly_action_that_reads_context_loads(self) -> None:
        """An action whose repetition reads context is known only when it runs: it loads."""
        text = _definition("{type: object}").replace(
            'guard: "context.n >= 0"', 'actions: [{assign: {n: "[[context.n] * 9999] * 9999"}}]')
        definition = load_definition(text)
        assert definition.name == "costly"
