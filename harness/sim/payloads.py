"""JSON values from a JSON Schema, valid or deliberately broken, for the deterministic simulator.

A schema is compiled once into small closures; `valid` and `invalid` then only draw from the
caller's `random.Random`. Realistic strings come from small pools that Faker fills at compile time
from the generator's seed, so equal seeds give equal values in any process.

`correlated` ties a drawn payload to the run it is for: each field an event's `correlate:`
names takes the value its expression gives on that execution's context (or, for the
`wrong_correlation` fault, one field takes another value of the same type).
"""

from __future__ import annotations

import copy
import functools
import json
import math
import random
import re
import re._parser as re_parser  # type: ignore[import-not-found]  # private, no stub; 3.11+
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

from pydantic import BaseModel

from reference_machine.fast_schema import GENERATED_LENGTH_MAX, GENERATED_SIZE_MAX

__all__ = ["Correlation", "PayloadGenerator", "correlated", "schema_of"]

Gen = Callable[[random.Random], Any]
#: (payload field, the expression `(context, event) -> value` it must equal, its text): a
#: compiled event's `correlate`
Correlation = tuple[str, Callable[[Mapping[str, Any], Any], Any], str]
Break = tuple[str, Gen, bool]  # how it breaks, what makes the value, whether that is a mapping

HOWS = ("missing_field", "wrong_type", "out_of_range", "not_in_enum", "extra_field", "wrong_shape")
_KINDS = ("string", "integer", "number", "boolean", "null", "object", "array")
_ANY_KIND, _OBJECT_ONLY = frozenset(_KINDS), frozenset({"object"})
# a value of each kind for a field of another kind ("42" is how an LLM gets a number wrong)
_WRONG: dict[str, Gen] = {
    "string": lambda rng: "42", "integer": lambda rng: 42, "number": lambda rng: 2.5,
    "boolean": lambda rng: True, "null": lambda rng: None, "object": lambda rng: {},
    "array": lambda rng: []}
_UNSUPPORTED = (
    "multipleOf", "not", "if", "then", "else", "patternProperties", "propertyNames",
    "dependentRequired", "dependentSchemas", "minProperties", "maxProperties", "uniqueItems",
    "contains", "prefixItems", "unevaluatedProperties", "unevaluatedItems", "$dynamicRef")
# allOf members may disagree on these, as they do not constrain values: the first one wins
_ANNOTATIONS = frozenset((
    "title", "description", "default", "examples", "$comment", "deprecated", "readOnly",
    "writeOnly", "format", "discriminator", "$schema", "$id", "$defs", "definitions"))
_TIGHTER = {"minimum": max, "exclusiveMinimum": max, "minLength": max, "minItems": max,
            "maximum": min, "exclusiveMaximum": min, "maxLength": min, "maxItems": min}
_OPTIONAL_P, _POOL_SIZE = 0.7, 16
# an array draws at most this many items past its minItems, whatever its maxItems: a step's
# payload stays cheap to make when maxItems only means "no real limit"
_ITEMS_SPAN_MAX = 100
_FORMATS = {"email": "email", "idn-email": "email", "uri": "url", "url": "url", "iri": "url",
            "date-time": "date-time", "date": "date", "uuid": "uuid"}
_TEXT_WORDS = ("text", "message", "note", "body", "reason", "summary", "description", "comment")
_FIRST_DAY, _LAST_DAY = datetime(2020, 1, 1, tzinfo=UTC), datetime(2025, 12, 31, tzinfo=UTC)
_MAKERS: dict[str, Callable[[Any], str]] = {  # fixed dates: Faker's default ends today
    "email": lambda f: f.email(), "name": lambda f: f.name(), "url": lambda f: f.url(),
    "date-time": lambda f: f.date_time_between_dates(_FIRST_DAY, _LAST_DAY, UTC).isoformat(),
    "date": lambda f: f.date_between_dates(_FIRST_DAY.date(), _LAST_DAY.date()).isoformat(),
    "uuid": lambda f: f.uuid4(), "text": lambda f: f.sentence(),
    "currency": lambda f: f.currency_code(), "word": lambda f: f.word()}
_GENERIC = ("0", "1", "42", "3.14", "-7", "a", "abc", "ABC", "a1", "A1", "x_y", "ok", "true")
_CLASSES = {"CATEGORY_DIGIT": "0123456789", "CATEGORY_WORD": "abcxyzABC019_",
            "CATEGORY_SPACE": " "}


class _Unsatisfiable(ValueError):
    """A schema (or an anyOf branch) that no value satisfies."""


def schema_of(payload_spec: object) -> Mapping[str, Any] | None:
    """Gives the JSON Schema a definition declares: a schema, a pydantic model's schema or None."""
    if payload_spec is None or isinstance(payload_spec, Mapping):
        return payload_spec
    if isinstance(payload_spec, type) and issubclass(payload_spec, BaseModel):
        return payload_spec.model_json_schema()
    msg = (f"a payload spec is a JSON Schema mapping, a pydantic model class or None, "
           f"not {type(payload_spec).__name__}")
    raise TypeError(msg)


class PayloadGenerator:
    """Generates values for one JSON Schema (None = anything goes: an object)."""

    __slots__ = ("_gen", "_groups", "_mapping_groups")

    def __init__(self, schema: Mapping[str, Any] | None, *, seed: int) -> None:
        root = {} if schema is None else schema
        node = _Compiler(root, seed).node(root, "", "#")
        self._gen, breaks = node.gen, list(node.breaks)
        if node.kinds == _OBJECT_ONLY:  # at the top, an object's own wrong kinds are shapes
            breaks = [b for b in breaks if b[2]] + [
                ("wrong_shape", lambda rng: [node.gen(rng)], False),
                ("wrong_shape", lambda rng: json.dumps(node.gen(rng)), False)]
        self._groups = _group(breaks)
        self._mapping_groups = _group([b for b in breaks if b[2]])

    def valid(self, rng: random.Random) -> Any:
        """A value the schema accepts; for an object schema a new dict each call."""
        return self._gen(rng)

    def invalid(
        self, rng: random.Random, *, mapping_only: bool = False
    ) -> tuple[Any, str] | None:
        """A value the schema refuses and how it was broken (one of `HOWS`), or None if none is.

        With mapping_only the value is a dict and 'wrong_shape' is not used."""
        groups = self._mapping_groups if mapping_only else self._groups
        if not groups:
            return None
        how, makers = groups[int(rng.random() * len(groups))]
        return makers[int(rng.random() * len(makers))](rng), how


def correlated(payload: Any, correlate: Sequence[Correlation], context: Mapping[str, Any],
               event: Any, rng: random.Random, *, wrong: bool = False,
               generator: PayloadGenerator | None = None) -> tuple[Any, str]:
    """Gives the payload with each correlated field set to what its expression gives on
    `context` (`event` is what the expression reads as `event`), and the field made wrong.

    With `wrong`, one field (drawn) instead holds another value of the same type: one the
    generator draws when it has one (so the payload still fits its schema), else the
    expected value changed. A field whose expression raises is left alone, and so is a payload
    that is not a mapping; the field made wrong is "" when none could be."""
    if not isinstance(payload, Mapping) or not correlate:
        return payload, ""
    made = dict(payload)
    fields: list[tuple[str, Any]] = []
    for name, expression, _ in correlate:
        try:
            expected = expression(context, event)
        except Exception:  # the machine's to refuse (a guard error), not the sender's
            continue
        made[name] = _copied(expected)
        fields.append((name, expected))
    if not wrong or not fields:
        return made, ""
    name, expected = fields[int(rng.random() * len(fields))] if len(fields) > 1 else fields[0]
    made[name] = _other(expected, _drawn(generator, name, rng), rng)
    return made, name


def _copied(value: Any) -> Any:
    """Gives a copy of a context value to put in a payload (a scalar is its own copy)."""
    if value is None or isinstance(value, str | int | float):
        return value
    try:
        return copy.deepcopy(value)
    except TypeError:  # a read-only view: handed as it is, which a payload only reads
        return value


def _drawn(generator: PayloadGenerator | None, name: str, rng: random.Random,
           tries: int = 4) -> list[Any]:
    """Gives the values of field `name` in a few payloads the generator draws."""
    if generator is None:
        return []
    values = []
    for _ in range(tries):
        drawn = generator.valid(rng)
        if isinstance(drawn, Mapping) and name in drawn:
            values.append(drawn[name])
    return values


def _other(expected: Any, drawn: Sequence[Any], rng: random.Random) -> Any:
    """Gives a value of the type of `expected` that is not equal to it: one of `drawn` if any
    fits, else `expected` changed (None has no other value of its type: a string then)."""
    for value in drawn:
        if type(value) is type(expected) and value != expected:
            return value
    if isinstance(expected, bool):
        return not expected
    if isinstance(expected, int):
        return expected + 1 + int(rng.random() * 9)
    if isinstance(expected, float):
        return expected + 1.0 + rng.random() if math.isfinite(expected) else 0.0
    if isinstance(expected, str):
        return f"{expected}-other" if expected else "other"
    if isinstance(expected, list | tuple):
        return type(expected)([*expected, expected[0] if expected else None])
    if isinstance(expected, Mapping):
        key = next(k for k in (f"other{n}" if n else "other" for n in range(len(expected) + 1))
                   if k not in expected)
        return {**expected, key: True}
    return "other"


class _Node(NamedTuple):
    """A compiled schema: its value maker, the JSON kinds it accepts, the ways to break it."""

    gen: Gen
    kinds: frozenset[str]
    breaks: tuple[Break, ...]
    dicts: Gen | None = None  # a maker of the objects it accepts, if it accepts objects
    required: tuple[str, ...] = ()  # the keys all those objects have
    size: int = 1  # at most how many items and characters a value it makes holds


class _Compiler:
    """Turns one root schema into `_Node`s, with the string pools of one seed."""

    def __init__(self, root: Mapping[str, Any], seed: int) -> None:
        self.root, self.seed = root, seed
        self.active: list[str] = []  # the $refs being compiled: meeting one again is a cycle
        self.pools: dict[str, tuple[str, ...]] = {}

    def node(self, schema: Any, name: str, where: str) -> _Node:
        mark = len(self.active)
        try:
            return self._build(self.flat(schema, where), name, where)
        finally:
            del self.active[mark:]

    def flat(self, schema: Any, where: str) -> dict[str, Any]:
        """Gives the schema with its $ref and allOf merged in."""
        if schema is True or schema is None:
            return {}
        if schema is False:
            raise _Unsatisfiable(f"the schema at {where} is false: no value satisfies it")
        if not isinstance(schema, Mapping):
            raise ValueError(f"the schema at {where} is a {type(schema).__name__}, not a mapping")
        parts = [self.flat(sub, f"{where}/allOf/{i}")
                 for i, sub in enumerate(schema.get("allOf", ()))]
        if "$ref" in schema:
            parts.insert(0, self.flat(self.deref(schema["$ref"], where), schema["$ref"]))
        return _merge({k: v for k, v in schema.items() if k not in ("$ref", "allOf")}, parts, where)

    def deref(self, ref: str, where: str) -> Any:
        if ref != "#" and not ref.startswith("#/"):
            raise ValueError(f"unsupported $ref {ref!r} at {where}: only local refs such as "
                             f"'#/$defs/Name' are followed")
        if ref in self.active:
            raise ValueError(f"recursive $ref {ref!r} at {where} is not supported")
        self.active.append(ref)
        target: Any = self.root
        for part in ref[2:].split("/") if ref != "#" else ():
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, Mapping) or part not in target:
                raise ValueError(f"$ref {ref!r} at {where} points at nothing")
            target = target[part]
        return target

    def _build(self, s: dict[str, Any], name: str, where: str) -> _Node:
        bad = [key for key in _UNSUPPORTED if key in s]
        if bad:
            raise ValueError(f"unsupported keyword(s) {', '.join(bad)} in the schema at {where}")
        if "const" in s or "enum" in s:
            return _enum(s, where)
        if "anyOf" in s or "oneOf" in s:
            rest = {k: v for k, v in s.items() if k not in ("anyOf", "oneOf")}
            nodes, errors = [], []
            for i, branch in enumerate(s["anyOf"] if "anyOf" in s else s["oneOf"]):
                try:  # an impossible branch is dropped: the union needs one possible branch
                    nodes.append(self.node({"allOf": [rest, branch]}, name, f"{where}/anyOf/{i}"))
                except _Unsatisfiable as e:
                    errors.append(e)
            if not nodes:
                raise errors[0] if errors else _Unsatisfiable(f"empty anyOf at {where}")
            kinds = frozenset().union(*(n.kinds for n in nodes))
            size = max(n.size for n in nodes)
            breaks, objects = _kind_breaks(kinds), [n for n in nodes if "object" in n.kinds]
            if not objects or not all(n.dicts for n in objects):
                return _Node(_pick([n.gen for n in nodes]), kinds, tuple(breaks), size=size)
            # a key every branch requires: an object without it is refused by all of them
            dicts = _pick([n.dicts for n in objects if n.dicts])
            common = tuple(k for k in objects[0].required if all(k in n.required for n in objects))
            breaks += [("missing_field", _edit(dicts, key), True) for key in common]
            return _Node(_pick([n.gen for n in nodes]), kinds, tuple(breaks), dicts, common,
                         size)
        types, kinds = _types(s.get("type")), _ANY_KIND
        if types:
            kinds = frozenset(types) | ({"integer"} if "number" in types else set())
        types = types or ["object"]
        parts = [self._typed(s, kind, name, where) for kind in types]
        breaks = [b for _, part_breaks, _ in parts for b in part_breaks] + _kind_breaks(kinds)
        objects_made = parts[types.index("object")][0] if "object" in types else None
        return _Node(_pick([gen for gen, _, _ in parts]), kinds, tuple(breaks), objects_made,
                     tuple(s.get("required", ())), max(size for _, _, size in parts))

    def _typed(self, s: dict[str, Any], kind: str, name: str, where: str
               ) -> tuple[Gen, list[Break], int]:
        """Gives the maker of a kind's values, the ways to break them and their largest size."""
        if kind in ("integer", "number"):
            return (*_number(s, kind == "integer", where), 1)
        if kind in ("string", "array", "object"):
            made: tuple[Gen, list[Break], int] = getattr(self, f"_{kind}")(s, name, where)
            return made
        if kind in ("null", "boolean"):
            return (lambda rng: None if kind == "null" else rng.random() < 0.5), [], 1
        raise ValueError(f"unknown type {kind!r} in the schema at {where}")

    def pool(self, kind: str) -> tuple[str, ...]:
        """Gives the realistic strings of a kind ('email', 'id:ord', ...) for this seed."""
        if kind not in self.pools:
            fake = _faker()
            fake.seed_instance(f"{self.seed}:{kind}")  # a str seed goes through sha512: stable
            made = [f"{kind[3:]}-{fake.hexify('^^^^^^')}" if kind.startswith("id:")
                    else _MAKERS[kind](fake) for _ in range(_POOL_SIZE)]
            self.pools[kind] = tuple(v for v in made if v.isascii()) or ("value",)
        return self.pools[kind]

    def _string(self, s: dict[str, Any], name: str, where: str) -> tuple[Gen, list[Break], int]:
        low, high = s.get("minLength", 0), s.get("maxLength")
        if high is not None and low > high:
            raise _Unsatisfiable(f"minLength {low} > maxLength {high} at {where}")
        if low > GENERATED_LENGTH_MAX:
            raise ValueError(f"minLength {low:,} at {where} is over the "
                             f"{GENERATED_LENGTH_MAX:,} characters a generated string may have")
        pool = [_fit(v, low, high) for v in self.pool(_pool_kind(name, s.get("format")))]
        if "pattern" in s:
            pool = self._matching(s["pattern"], pool, low, high, where)
        breaks: list[Break] = []
        if low > 0:
            breaks.append(("out_of_range", lambda rng: "x" * (low - 1), False))
        if high is not None and high < GENERATED_LENGTH_MAX:  # longer is too costly to make
            breaks.append(("out_of_range", lambda rng: "x" * (high + 1), False))
        return _choice(pool), breaks, max(1, *(len(v) for v in pool))

    def _matching(self, pattern: str, pool: list[str], low: int, high: int | None, where: str
                  ) -> list[str]:
        """Gives the candidates that match `pattern`, the pool's own first if any."""
        try:
            regex, parsed = re.compile(pattern), re_parser.parse(pattern)
        except re.error as e:
            raise ValueError(f"pattern {pattern!r} at {where} is not a regex: {e}") from e
        def matching(tries: list[str | None]) -> list[str]:
            return [v for v in dict.fromkeys(tries) if v and regex.search(v) and low <= len(v)
                    and (high is None or len(v) <= high)]

        rng = random.Random(f"{self.seed}:{pattern}")
        samples = [_sample(parsed, rng) for _ in range(4 * _POOL_SIZE)]
        found = matching([*pool, *samples, *_GENERIC]) or matching(
            [v for kind in _MAKERS for v in self.pool(kind)])  # the other pools: slower to fill
        if not found:
            raise ValueError(f"cannot generate a string matching pattern {pattern!r} "
                             f"(minLength {low}, maxLength {high}) at {where}")
        return [v for v in found if v in pool] or found[:_POOL_SIZE]

    def _array(self, s: dict[str, Any], name: str, where: str) -> tuple[Gen, list[Break], int]:
        low = s.get("minItems", 0)
        high = 0 if s.get("items") is False else s.get("maxItems", low + 3)
        if low > high:
            raise _Unsatisfiable(f"no array at {where} has between {low} and {high} items")
        if low > GENERATED_LENGTH_MAX:
            raise ValueError(f"minItems {low:,} at {where} is over the "
                             f"{GENERATED_LENGTH_MAX:,} items a generated array may have")
        if high == 0:
            return (lambda rng: []), [("out_of_range", lambda rng: [None], False)], 1
        item = self.node(s.get("items", True), name, f"{where}/items")
        if 1 + low * item.size > GENERATED_SIZE_MAX:
            raise ValueError(f"minItems {low:,} at {where} of items of up to {item.size:,} "
                             f"items and characters is over the {GENERATED_SIZE_MAX:,} a "
                             "generated value may hold")
        # the most items drawn: within the span, and within the size a value may hold
        top = max(low, min(high, low + _ITEMS_SPAN_MAX, (GENERATED_SIZE_MAX - 1) // item.size))
        each, span = item.gen, top - low + 1

        def gen(rng: random.Random, least: int = 0) -> list[Any]:
            return [each(rng) for _ in range(max(least, low + int(rng.random() * span)))]

        def one_broken(make: Gen) -> Gen:
            def broken(rng: random.Random) -> list[Any]:
                items = gen(rng, 1)
                items[int(rng.random() * len(items))] = make(rng)
                return items
            return broken

        breaks: list[Break] = [(how, one_broken(make), False) for how, make, _ in item.breaks]
        if low > 0:
            breaks.append(("out_of_range", lambda rng: gen(rng)[: low - 1], False))
        if "maxItems" in s and 1 + (high + 1) * item.size <= GENERATED_SIZE_MAX:
            breaks.append(("out_of_range", lambda rng: gen(rng, high + 1), False))
        return gen, breaks, 1 + top * item.size

    def _object(self, s: dict[str, Any], name: str, where: str) -> tuple[Gen, list[Break], int]:
        properties, required = s.get("properties", {}), list(s.get("required", ()))
        extra = s.get("additionalProperties", True)
        nodes = {key: self.node(sub, key, f"{where}/properties/{key}")
                 for key, sub in properties.items() if sub is not False or key in required}
        for key in (k for k in required if k not in properties):
            if extra is False:
                raise _Unsatisfiable(f"{key!r} is required but not allowed at {where}")
            nodes[key] = self.node(extra, key, f"{where}/{key}")
        fields = tuple((key, node.gen, key in required) for key, node in nodes.items())
        words = self.pool("word")
        free = not properties and extra is not False  # a free-form object gets a few entries
        value_node = self.node(extra if isinstance(extra, Mapping) else {"type": "string"}, "",
                               f"{where}/additionalProperties")
        value = value_node.gen
        size = 1 + sum(1 + node.size for node in nodes.values()) + (
            3 * (1 + value_node.size) if free else 0)
        if size > GENERATED_SIZE_MAX:
            raise ValueError(f"the objects at {where} hold up to {size:,} items and characters, "
                             f"over the {GENERATED_SIZE_MAX:,} a generated value may hold")

        def gen(rng: random.Random) -> dict[str, Any]:
            out = {words[int(rng.random() * len(words))]: value(rng)
                   for _ in range(int(rng.random() * 3))} if free else {}
            for key, make, needed in fields:
                if needed or rng.random() < _OPTIONAL_P:
                    out[key] = make(rng)
            return out

        breaks = [(how, _edit(gen, key, make), True)
                  for key, node in nodes.items() for how, make, _ in node.breaks]
        breaks += [("missing_field", _edit(gen, key), True) for key in required]
        if extra is False:
            key = next(k for k in ("comment", "debug", "extra", "x_extra") if k not in properties)
            breaks.append(("extra_field", _edit(gen, key, value), True))
        return gen, breaks, size


def _edit(base: Gen, key: str, make: Gen | None = None) -> Gen:
    """Gives a maker of `base`'s objects with `key` set to what `make` gives, or removed."""
    def edit(rng: random.Random) -> dict[str, Any]:
        out = base(rng)
        if make is None:
            del out[key]
        else:
            out[key] = make(rng)
        return out
    return edit


def _pick(gens: list[Gen]) -> Gen:
    """Gives a maker that uses one of `gens`, chosen uniformly."""
    choices = tuple(gens)
    return gens[0] if len(gens) == 1 else lambda rng: choices[int(rng.random() * len(choices))](rng)


def _choice(values: list[Any]) -> Gen:
    choices = tuple(values)
    return lambda rng: choices[int(rng.random() * len(choices))]


def _kind_breaks(kinds: frozenset[str]) -> list[Break]:
    return [("wrong_type", _WRONG[k], k == "object") for k in _KINDS if k not in kinds]


def _kinds_of(value: Any) -> tuple[str, ...]:
    if isinstance(value, bool) or value is None:
        return ("boolean",) if value is not None else ("null",)
    if isinstance(value, int | float):
        return ("integer", "number") if value == math.floor(value) else ("number",)
    return ("string",) if isinstance(value, str) else (
        ("array",) if isinstance(value, list | tuple) else ("object",))


def _enum(s: dict[str, Any], where: str) -> _Node:
    types = _types(s.get("type"))
    values = [v for v in ([s["const"]] if "const" in s else s["enum"])
              if not types or any(k in types for k in _kinds_of(v))]
    if not values:
        raise _Unsatisfiable(f"no value of the enum/const at {where} is a {types}")
    gen = _choice(values)
    if not all(isinstance(v, str | int | float | bool) or v is None for v in values):
        shared = gen  # a list or dict member must not be shared between values

        def gen(rng: random.Random) -> Any:
            return json.loads(json.dumps(shared(rng)))

    kinds = frozenset(k for v in values for k in _kinds_of(v))
    size = max(len(json.dumps(v, default=str)) for v in values)
    # an enum value in capitals is a realistic slip; numbers are missed by a larger number
    numbers = [v for v in values if _kinds_of(v)[-1] == "number"]
    outside = [v.upper() for v in values if isinstance(v, str)]
    outside += [max(numbers) + 1] if numbers else ["unknown"]
    missed = [v for v in outside if v not in values]
    breaks = [("not_in_enum", _choice(missed), False)] if missed else []
    return _Node(gen, kinds, tuple(breaks + _kind_breaks(kinds)), size=size)


def _number(s: dict[str, Any], integer: bool, where: str) -> tuple[Gen, list[Break]]:
    low, low_open = _bound(s, "minimum", "exclusiveMinimum", max)
    high, high_open = _bound(s, "maximum", "exclusiveMaximum", min)
    for bound in (low, high):
        if isinstance(bound, float) and not math.isfinite(bound):
            raise ValueError(f"the bound {bound} at {where} is not a finite number")
    if integer:  # integer bounds can be closed
        low = None if low is None else math.floor(low) + 1 if low_open else math.ceil(low)
        high = None if high is None else math.ceil(high) - 1 if high_open else math.floor(high)
        low_open = high_open = False
    a = low if low is not None else 0 if high is None else high - 1000
    b = high if high is not None else a + 1000

    def ok(v: float) -> bool:
        return (v > a or (v == a and not low_open)) and (v < b or (v == b and not high_open))

    middle = a if integer else (a + b) / 2
    if a > b or not ok(middle):
        raise _Unsatisfiable(f"no {'integer' if integer else 'number'} at {where} is in bounds")
    breaks: list[Break] = []
    if low is not None:
        breaks.append(("out_of_range", lambda rng: a - max(1, abs(a)) - int(rng.random() * 99),
                       False))
    if high is not None:
        breaks.append(("out_of_range", lambda rng: b + max(1, abs(b)) + int(rng.random() * 99),
                       False))
    if integer:
        return (lambda rng: min(a + int(rng.random() * (b - a + 1)), b)), breaks

    first, last = 1, 0
    if max(abs(a), abs(b)) < 1e12:  # whole cents: amounts look like amounts
        first, last = math.ceil(a * 100), math.floor(b * 100)
        first, last = first + (not ok(first / 100)), last - (not ok(last / 100))
    if first <= last and ok(first / 100) and ok(last / 100):
        return (lambda rng: (first + int(rng.random() * (last - first + 1))) / 100), breaks

    def gen(rng: random.Random) -> float:  # no whole cent in bounds
        x = a + (b - a) * rng.random()
        return x if ok(x) else middle

    return gen, breaks


def _bound(s: dict[str, Any], closed: str, open_: str, tighter: Callable[..., Any]
           ) -> tuple[Any, bool]:
    """Gives the bound the schema sets and whether it is exclusive (on a tie it is)."""
    if open_ in s and (closed not in s or tighter(s[closed], s[open_]) == s[open_]):
        return s[open_], True
    return s.get(closed), False


def _types(declared: Any) -> list[str]:
    return [declared] if isinstance(declared, str) else list(declared or ())


def _merge(own: dict[str, Any], parts: list[dict[str, Any]], where: str) -> dict[str, Any]:
    """Gives the one schema that `own` and all `parts` make (simple cases only)."""
    out = dict(own)
    for part in parts:
        for key, value in part.items():
            mine = out.setdefault(key, value)
            if mine is value:
                continue
            if key == "properties":
                both = {k: {"allOf": [v, value[k]]} if k in value else v for k, v in mine.items()}
                out[key] = {**both, **{k: v for k, v in value.items() if k not in mine}}
            elif key == "required":
                out[key] = list(dict.fromkeys([*mine, *value]))
            elif key == "type":
                out[key] = _meet(_types(mine), _types(value), where)
            elif key in _TIGHTER:
                out[key] = _TIGHTER[key](mine, value)
            elif key == "additionalProperties":
                out[key] = False if value is False or mine is False else mine
            elif key == "enum":
                out[key] = [v for v in mine if v in value]
            elif mine != value and key not in _ANNOTATIONS:
                raise ValueError(f"allOf/$ref members disagree on {key!r} at {where}: "
                                 f"only simple merges are supported")
    return out


def _meet(mine: list[str], theirs: list[str], where: str) -> list[str]:
    both = [t for t in mine if t in theirs or (t == "integer" and "number" in theirs)]
    both += [t for t in theirs if t == "integer" and "number" in mine and t not in both]
    if not both:
        raise _Unsatisfiable(f"types {mine} and {theirs} at {where} have nothing in common")
    return both


def _group(breaks: list[Break]) -> tuple[tuple[str, tuple[Gen, ...]], ...]:
    """Gives the makers of each way of breaking, in the fixed order of `HOWS`."""
    return tuple((how, tuple(make for h, make, _ in breaks if h == how))
                 for how in HOWS if any(h == how for h, _, _ in breaks))


def _fit(value: str, low: int, high: int | None) -> str:
    return value.ljust(low, "x")[:high]


def _pool_kind(name: str, fmt: str | None) -> str:
    """Gives the pool a string draws from, by its format, else by its property's name."""
    low = name.lower()
    if fmt in _FORMATS or "email" in low:
        return _FORMATS.get(fmt or "", "email")
    if low == "id" or low.endswith("_id"):
        return "id:" + (low[:-3].rsplit("_", 1)[-1][:3] or "id")
    for kind, fits in (("url", low.endswith(("url", "uri"))), ("currency", "currency" in low),
                       ("name", low == "name" or low.endswith("_name")),
                       ("date-time", low.endswith("_at")),
                       ("text", any(w in low for w in _TEXT_WORDS))):
        if fits:
            return kind
    return "word"


@functools.cache
def _faker() -> Any:
    """Gives the process's one Faker: making one is slow, so each generator reseeds it."""
    import faker  # only schemas with strings pay for the import

    return faker.Faker("en_US")


def _sample(items: Any, rng: random.Random, budget: list[int] | None = None) -> str | None:
    """Gives a string that may match the parsed regex (callers check), or None; None too when
    it would be longer than a generated string may be (`x{1000000000}`, nested repeats)."""
    left = [GENERATED_LENGTH_MAX] if budget is None else budget  # characters still allowed
    out = []
    for op, arg in items:
        kind = str(op)
        if kind in ("LITERAL", "IN", "ANY"):
            left[0] -= 1
            if left[0] < 0:
                return None
        if kind == "LITERAL":
            out.append(chr(arg))
        elif kind == "IN":
            char_op, char = arg[int(rng.random() * len(arg))]
            out.append(chr(char) if str(char_op) == "LITERAL" else chr(rng.randint(*char))
                       if str(char_op) == "RANGE" else rng.choice(_CLASSES.get(str(char), "a")))
        elif kind in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            if arg[0] > left[0]:
                left[0] = -1
                return None
            parts = []
            for _ in range(rng.randint(arg[0], arg[0] + 3)):
                parts.append(_sample(arg[2], rng, left) or "")
                if left[0] < 0:
                    return None
            out += parts[: arg[1]]
        elif kind in ("SUBPATTERN", "ATOMIC_GROUP", "BRANCH"):
            out.append(_sample(arg[-1] if kind != "BRANCH" else rng.choice(arg[1]), rng, left)
                       or "")
            if left[0] < 0:
                return None
        elif kind == "ANY":
            out.append("a")
        elif kind not in ("AT", "ASSERT", "ASSERT_NOT"):  # assertions are left to the check
            return None
    return "".join(out)
