"""Tests of the payload generator: valid values pass their schema, broken ones fail it, equal seeds
give equal values in any process, and schemas it cannot honour fail when compiled."""

from __future__ import annotations

import inspect
import json
import os
import random
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field

from harness.sim.payloads import HOWS, PayloadGenerator, schema_of

# tool outputs and event payloads of scenarios/refund_escalation.yaml
REFUND: dict[str, Mapping[str, Any]] = {
    "crm.lookup_order": {
        "type": "object",
        "required": ["order_id", "amount", "customer_email"],
        "properties": {
            "order_id": {"type": "string"},
            "amount": {"type": "number", "minimum": 0},
            "customer_email": {"type": "string"},
        },
    },
    "agent.plan_refund": {
        "type": "object",
        "required": ["amount", "reason"],
        "properties": {
            "amount": {"type": "number", "exclusiveMinimum": 0},
            "reason": {"type": "string", "minLength": 1},
        },
    },
    "payments.refund": {
        "type": "object",
        "required": ["refund_id"],
        "properties": {"refund_id": {"type": "string"}},
    },
    "payments.get_refund": {
        "type": "object",
        "required": ["status"],
        "properties": {"status": {"enum": ["pending", "succeeded", "failed"]}},
    },
    "ticket.updated": {"type": "object", "properties": {"note": {"type": "string"}}},
}

# tool outputs and event payloads of scenarios/support_triage.yaml
TRIAGE: dict[str, Mapping[str, Any]] = {
    "agent.classify": {
        "type": "object",
        "required": ["category", "priority", "needs_info"],
        "properties": {
            "category": {"enum": ["billing", "technical", "account", "other"]},
            "priority": {"enum": ["low", "normal", "high", "urgent"]},
            "needs_info": {"type": "boolean"},
        },
    },
    "agent.draft_reply": {
        "type": "object",
        "required": ["body"],
        "properties": {"body": {"type": "string", "minLength": 1}},
    },
    "customer.replied": {
        "type": "object",
        "required": ["message"],
        "properties": {"message": {"type": "string", "minLength": 1}},
    },
    "review.changes_requested": {
        "type": "object",
        "required": ["note"],
        "properties": {"note": {"type": "string"}},
    },
}


class Address(BaseModel):
    street: str
    city: str
    postcode: str = Field(pattern=r"^\d{5}$")


class LineItem(BaseModel):
    sku: str = Field(pattern=r"^[A-Z]{3}-\d{4}$")
    quantity: int = Field(ge=1, le=99)
    price: float = Field(gt=0)


class Order(BaseModel):
    """A pydantic payload: nested models ($defs), arrays, anyOf, enums, extra='forbid'."""

    model_config = ConfigDict(extra="forbid")
    order_id: str
    status: Literal["pending", "paid", "refunded"]
    customer_email: str
    shipping: Address
    items: list[LineItem] = Field(min_length=1, max_length=5)
    note: str | None = None
    created_at: datetime
    tags: list[str] = []
    score: int | float | None = None


# keywords the scenarios do not use, each at least once
HANDWRITTEN: dict[str, Mapping[str, Any]] = {
    "type list": {
        "type": "object",
        "required": ["assignee", "attempt"],
        "properties": {
            "assignee": {"type": ["string", "null"], "maxLength": 12},
            "attempt": {"type": ["integer", "null"], "minimum": 1, "exclusiveMaximum": 10},
            "ratio": {"type": "number", "minimum": 0, "maximum": 1},
        },
    },
    "enum without type, closed object": {
        "properties": {
            "state": {"enum": ["open", "closed", 3, None]},
            "currency": {"const": "EUR"},
        },
        "required": ["state"],
        "additionalProperties": False,
    },
    "array of objects, allOf, definitions": {
        "type": "object",
        "required": ["lines"],
        "properties": {
            "lines": {
                "type": "array",
                "minItems": 1,
                "maxItems": 3,
                "items": {"$ref": "#/definitions/Line"},
            },
            "total": {"allOf": [{"type": "number"}, {"exclusiveMinimum": 0, "maximum": 100}]},
        },
        "definitions": {
            "Line": {
                "type": "object",
                "required": ["line_id", "amount"],
                "properties": {
                    "line_id": {"type": "string", "pattern": "^lin-[0-9a-f]{6}$"},
                    "amount": {"type": "integer", "exclusiveMinimum": 0},
                },
                "additionalProperties": False,
            }
        },
    },
    "anyOf of objects": {
        "anyOf": [
            {
                "type": "object",
                "required": ["kind", "url"],
                "properties": {"kind": {"const": "link"}, "url": {"type": "string"}},
            },
            {
                "type": "object",
                "required": ["kind", "created_at"],
                "properties": {
                    "kind": {"const": "stamp"},
                    "created_at": {"type": "string", "format": "date-time"},
                },
            },
        ]
    },
    "not an object": {"type": "string", "enum": ["yes", "no"]},
}

SCHEMAS: dict[str, Mapping[str, Any] | None] = {
    **REFUND,
    **TRIAGE,
    **HANDWRITTEN,
    "pydantic Order": schema_of(Order),
}

seeds = st.integers(min_value=0, max_value=2**32 - 1)
examples = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def check(schema: Mapping[str, Any] | None) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator({} if schema is None else schema)


class TestValid:
    @pytest.mark.parametrize("name", list(SCHEMAS))
    @examples
    @given(seed=seeds, rng_seed=seeds)
    def test_accepted(self, name: str, seed: int, rng_seed: int) -> None:
        """valid() gives values the schema accepts."""
        validator, generator = check(SCHEMAS[name]), PayloadGenerator(SCHEMAS[name], seed=seed)
        rng = random.Random(rng_seed)
        for _ in range(20):
            value = generator.valid(rng)
            assert validator.is_valid(value), (value, validator.iter_errors(value))

    def test_new_dict_each_call(self) -> None:
        """valid() gives a new dict each call for an object schema."""
        generator, rng = PayloadGenerator(REFUND["crm.lookup_order"], seed=1), random.Random(0)
        assert generator.valid(rng) is not generator.valid(rng)

    @pytest.mark.parametrize("schema", [None, {}])
    def test_anything_is_a_dict(self, schema: Mapping[str, Any] | None) -> None:
        """valid() gives a dict for a schema of None or {}."""
        generator, rng = PayloadGenerator(schema, seed=1), random.Random(0)
        assert all(isinstance(generator.valid(rng), dict) for _ in range(20))

    def test_realistic_strings(self) -> None:
        """Emails contain '@', ids look like 'ord-1a2b3c', currencies are three capitals."""
        schema = {
            "type": "object",
            "required": ["customer_email", "order_id", "currency"],
            "properties": {
                "customer_email": {"type": "string"},
                "order_id": {"type": "string"},
                "currency": {"type": "string"},
            },
        }
        generator, rng = PayloadGenerator(schema, seed=5), random.Random(5)
        for _ in range(20):
            value = generator.valid(rng)
            assert "@" in value["customer_email"]
            assert value["order_id"].startswith("ord-") and len(value["order_id"]) == 10
            assert len(value["currency"]) == 3 and value["currency"].isupper()

    def test_optional_fields_sometimes(self) -> None:
        """Optional properties appear in some values and not in others."""
        generator, rng = PayloadGenerator(REFUND["ticket.updated"], seed=2), random.Random(2)
        seen = Counter("note" in generator.valid(rng) for _ in range(200))
        assert 100 < seen[True] < 180


class TestInvalid:
    @pytest.mark.parametrize("name", list(SCHEMAS))
    @examples
    @given(seed=seeds, rng_seed=seeds)
    def test_refused(self, name: str, seed: int, rng_seed: int) -> None:
        """invalid() gives values the schema refuses, with mapping_only giving dicts."""
        validator, generator = check(SCHEMAS[name]), PayloadGenerator(SCHEMAS[name], seed=seed)
        rng = random.Random(rng_seed)
        for mapping_only in [False, True] * 10:
            broken = generator.invalid(rng, mapping_only=mapping_only)
            if broken is None:
                assert mapping_only and name == "not an object"
                continue
            value, how = broken
            assert how in HOWS
            assert not validator.is_valid(value), (value, how)
            if mapping_only:
                assert isinstance(value, dict) and how != "wrong_shape", (value, how)

    def test_every_breakage(self) -> None:
        """A schema that allows all six breakages gets each of them."""
        generator, rng = PayloadGenerator(schema_of(Order), seed=3), random.Random(3)
        hows = Counter(generator.invalid(rng)[1] for _ in range(600))  # type: ignore[index]
        assert sorted(hows) == sorted(HOWS)
        assert min(hows.values()) > 50

    @pytest.mark.parametrize("schema", [None, {}, {"type": "object"}])
    def test_nothing_to_break(self, schema: Mapping[str, Any] | None) -> None:
        """invalid(mapping_only=True) gives None when no mapping breaks the schema."""
        assert PayloadGenerator(schema, seed=1).invalid(random.Random(0), mapping_only=True) is None

    def test_wrong_shape(self) -> None:
        """An object schema is broken by a list or a string, but not with mapping_only."""
        generator, rng = PayloadGenerator({"type": "object"}, seed=1), random.Random(0)
        shapes = {type(generator.invalid(rng)[0]) for _ in range(50)}  # type: ignore[index]
        assert shapes == {list, str}


def fifty_values(schemas: list[Any]) -> list[Any]:
    """Gives 5 valid and 5 invalid values of each of five schemas (run here and in subprocesses)."""
    values = []
    for schema in schemas:
        generator, rng = PayloadGenerator(schema, seed=11), random.Random(7)
        values += [generator.valid(rng) for _ in range(5)]
        values += [generator.invalid(rng) for _ in range(5)]
    return values


SCRIPT = f"""
import json, random, sys
from typing import Any
from harness.sim.payloads import PayloadGenerator
{inspect.getsource(fifty_values)}
print(json.dumps(fifty_values(json.loads(sys.argv[1]))))
"""


class TestDeterminism:
    def test_same_seeds_same_values(self) -> None:
        """Equal seeds give equal values; another seed gives other values."""

        def values(seed: int) -> list[Any]:
            generator, rng = PayloadGenerator(schema_of(Order), seed=seed), random.Random(4)
            return [generator.valid(rng) for _ in range(20)] + [
                generator.invalid(rng) for _ in range(20)
            ]

        assert values(1) == values(1)
        assert values(1) != values(2)

    def test_same_in_other_processes(self) -> None:
        """Processes with other PYTHONHASHSEEDs give the same 50 values as this one."""
        schemas = [
            REFUND["crm.lookup_order"],
            TRIAGE["agent.classify"],
            HANDWRITTEN["array of objects, allOf, definitions"],
            HANDWRITTEN["anyOf of objects"],
            schema_of(Order),
        ]
        here = json.loads(json.dumps(fifty_values(schemas)))
        assert len(here) == 50
        root = Path(__file__).resolve().parents[3]
        for hash_seed in ("1", "2"):
            done = subprocess.run(
                [sys.executable, "-c", SCRIPT, json.dumps(schemas)],
                capture_output=True, text=True, check=True, cwd=root,
                env={**os.environ, "PYTHONHASHSEED": hash_seed},
            )
            assert json.loads(done.stdout) == here


class TestBadSchemas:
    def test_unsatisfiable_pattern(self) -> None:
        """A pattern no candidate matches raises ValueError naming the pattern."""
        schema = {"properties": {"code": {"type": "string", "pattern": "^(?!x)x$"}}}
        with pytest.raises(ValueError, match=r"pattern '\^\(\?!x\)x\$'"):
            PayloadGenerator(schema, seed=1)

    def test_remote_ref(self) -> None:
        """A $ref outside the schema raises ValueError naming it."""
        schema = {"properties": {"who": {"$ref": "https://example.com/person.json"}}}
        with pytest.raises(ValueError, match=re.escape("https://example.com/person.json")):
            PayloadGenerator(schema, seed=1)

    def test_recursive_ref(self) -> None:
        """A $ref that leads back to itself raises ValueError naming it."""
        schema = {"$defs": {"Node": {"properties": {"next": {"$ref": "#/$defs/Node"}}}},
                  "$ref": "#/$defs/Node"}
        with pytest.raises(ValueError, match=r"recursive.*#/\$defs/Node"):
            PayloadGenerator(schema, seed=1)

    def test_unsupported_keyword(self) -> None:
        """A keyword the generator does not honour raises ValueError naming it and its place."""
        schema = {"properties": {"n": {"type": "integer", "multipleOf": 5}}}
        with pytest.raises(ValueError, match=r"multipleOf.*#/properties/n"):
            PayloadGenerator(schema, seed=1)

    def test_pattern_honoured(self) -> None:
        """A string with a pattern gets values that match it."""
        schema = {"type": "string", "pattern": r"^[A-Z]{2}-\d{4}$"}
        generator, rng = PayloadGenerator(schema, seed=1), random.Random(0)
        assert all(check(schema).is_valid(generator.valid(rng)) for _ in range(50))


class TestSchemaOf:
    def test_model(self) -> None:
        """A pydantic model gives its JSON Schema."""
        assert schema_of(Order) == Order.model_json_schema()

    @pytest.mark.parametrize("spec", [None, {"type": "object"}])
    def test_schema_or_none(self, spec: Mapping[str, Any] | None) -> None:
        """A schema or None is given back as it is."""
        assert schema_of(spec) is spec

    def test_other(self) -> None:
        """Anything else raises TypeError."""
        with pytest.raises(TypeError, match="not int"):
            schema_of(3)
