"""A fast check for the common subset of JSON Schema, in front of `jsonschema`.

`decide` checks every tool output and event payload against its schema, and `jsonschema` costs
tens of microseconds a call even for a three-field object. Most schemas in definitions use a
small subset (types, properties, required, enums, bounds, lengths, items), which compiles into a
few closures once. The compiled check only ever says "valid" when the payload is: it answers
True or False, and on False (or for a schema outside the subset, which compiles to None) the
caller asks `jsonschema`, which has the last word and the error message.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sized
from typing import Any

__all__ = ["GENERATED_LENGTH_MAX", "GENERATED_SIZE_MAX", "compile_fast_check",
           "generation_problem"]

#: The longest string (characters) and the longest array (items) a simulator generates for a
#: schema: a `minLength` or `minItems` over it is refused when the definition is loaded.
GENERATED_LENGTH_MAX = 10_000
#: The most items and characters one generated value may hold in all, nested arrays
#: multiplying: an array of 1,000 strings of at least 1,000 characters is refused.
GENERATED_SIZE_MAX = 100_000
#: Keywords whose values are data, not schemas: a "minLength" inside an enum is a value.
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})
#: Keywords whose schemas describe the items of an array, which its minItems multiplies.
_ITEM_KEYWORDS = frozenset({"items", "prefixItems", "contains", "additionalItems"})

Check = Callable[[Any], bool]

#: Keywords that say nothing about validity (annotations) and may appear anywhere.
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$schema", "$id",
                          "$comment", "format", "deprecated", "readOnly", "writeOnly"})
_SUPPORTED = _ANNOTATIONS | frozenset({
    "type", "properties", "required", "additionalProperties", "enum", "const", "minimum",
    "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "items",
    "minItems", "maxItems", "anyOf", "allOf",
})
_TYPES: Mapping[str, Check] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    # JSON has no booleans among numbers; an integer is a whole number (2.0 included, but the
    # fast check keeps to int and lets jsonschema decide a float)
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
}


class _Unsupported(Exception):
    """The schema uses a keyword outside the fast subset."""


def compile_fast_check(schema: object) -> Check | None:
    """Gives a check that says True only for payloads the schema accepts, or None when the
    schema uses keywords outside the subset (then only `jsonschema` can tell)."""
    try:
        return _compile(schema)
    except _Unsupported:
        return None


def _compile(schema: object) -> Check:
    if schema is True or schema == {}:
        return lambda value: True
    if not isinstance(schema, dict) or not _SUPPORTED.issuperset(schema):
        raise _Unsupported
    checks: list[Check] = []
    if "type" in schema:
        checks.append(_type(schema["type"]))
    if "enum" in schema:
        checks.append(_one_of_values(schema["enum"]))
    if "const" in schema:
        checks.append(_one_of_values([schema["const"]]))
    checks += _number_bounds(schema)
    checks += _lengths(schema, "minLength", "maxLength", str)
    checks += _lengths(schema, "minItems", "maxItems", list)
    if "items" in schema:
        item = _compile(schema["items"])
        checks.append(lambda v: not isinstance(v, list) or all(item(x) for x in v))
    if {"properties", "required", "additionalProperties"} & schema.keys():
        checks.append(_object(schema))
    if "anyOf" in schema:
        branches = [_compile(branch) for branch in _list(schema["anyOf"])]
        checks.append(lambda v: any(branch(v) for branch in branches))
    if "allOf" in schema:
        checks += [_compile(branch) for branch in _list(schema["allOf"])]
    if len(checks) == 1:
        return checks[0]
    return lambda value: all(check(value) for check in checks)


def _list(value: object) -> list[Any]:
    if not isinstance(value, list) or not value:
        raise _Unsupported
    return value


def _type(declared: object) -> Check:
    names = declared if isinstance(declared, list) else [declared]
    checks = []
    for name in names:
        check = _TYPES.get(name) if isinstance(name, str) else None
        if check is None:
            raise _Unsupported
        checks.append(check)
    if len(checks) == 1:
        return checks[0]
    return lambda value: any(check(value) for check in checks)


def _one_of_values(values: object) -> Check:
    if not isinstance(values, list) or not all(
            isinstance(v, str | bool | int | float) or v is None for v in values):
        raise _Unsupported  # objects and arrays compared by value: leave it to jsonschema
    # equal and of the same type: JSON tells 1 from true (Python does not); a mismatch of int
    # and float only sends the payload on to jsonschema
    allowed = [(type(v), v) for v in values]
    return lambda value: (type(value), value) in allowed


def _number_bounds(schema: dict[str, Any]) -> list[Check]:
    checks: list[Check] = []
    for keyword, holds in (("minimum", operator.ge), ("maximum", operator.le),
                           ("exclusiveMinimum", operator.gt), ("exclusiveMaximum", operator.lt)):
        if keyword not in schema:
            continue
        bound = schema[keyword]
        if isinstance(bound, bool) or not isinstance(bound, int | float):
            raise _Unsupported
        checks.append(_number_bound(holds, bound))
    return checks


def _number_bound(holds: Callable[[Any, Any], bool], bound: float) -> Check:
    """Gives the check that a number `holds` against `bound` (anything else passes: a bound on
    numbers says nothing of a string)."""
    return lambda value: not _is_number(value) or holds(value, bound)


def _length_bound(holds: Callable[[Any, Any], bool], bound: int, kind: type[Sized]) -> Check:
    """Gives the check that the length of a `kind` value `holds` against `bound` (a value of
    another type passes)."""
    return lambda value: not isinstance(value, kind) or holds(len(value), bound)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _lengths(schema: dict[str, Any], low: str, high: str, kind: type[Sized]) -> list[Check]:
    checks: list[Check] = []
    for keyword, holds in ((low, operator.ge), (high, operator.le)):
        if keyword not in schema:
            continue
        bound = schema[keyword]
        if isinstance(bound, bool) or not isinstance(bound, int):
            raise _Unsupported
        checks.append(_length_bound(holds, bound, kind))
    return checks


def _object(schema: dict[str, Any]) -> Check:
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if not isinstance(properties, dict) or not isinstance(required, list) or not all(
            isinstance(name, str) for name in required):
        raise _Unsupported
    fields = [(name, _compile(sub)) for name, sub in properties.items()]
    extra_check = None if extra is True else _compile(extra) if isinstance(extra, dict) else (
        (lambda value: False) if extra is False else None)
    if extra_check is None and extra is not True:
        raise _Unsupported
    known = frozenset(properties)

    def check(value: Any) -> bool:
        if not isinstance(value, dict):
            return True  # `type` says whether it must be an object
        for name in required:
            if name not in value:
                return False
        for name, field in fields:
            if name in value and not field(value[name]):
                return False
        if extra_check is not None:
            for name, item in value.items():
                if name not in known and not extra_check(item):
                    return False
        return True

    return check


def generation_problem(schema: object) -> tuple[str, str] | None:
    """Gives where (`properties.s.minLength`) and why a schema asks for values larger than a
    simulator generates (`GENERATED_LENGTH_MAX`, `GENERATED_SIZE_MAX`), or None when it does not.

    Only what the schema forces counts: a `minLength` or `minItems`, multiplied by the
    `minItems` of every array around it. A large `maxLength` or `maxItems` is no problem."""
    stack: list[tuple[object, str, int]] = [(schema, "", 1)]
    while stack:
        node, where, times = stack.pop()
        if isinstance(node, list):
            stack.extend((item, f"{where}[{index}]", times) for index, item in enumerate(node))
            continue
        if not isinstance(node, dict):
            continue
        for keyword, unit in (("minLength", "characters a generated string"),
                              ("minItems", "items a generated array")):
            least = node.get(keyword)
            if isinstance(least, bool) or not isinstance(least, int | float):
                continue
            at = f"{where}.{keyword}" if where else keyword
            if least > GENERATED_LENGTH_MAX:
                return at, (f"{keyword} {least:,} is over the {GENERATED_LENGTH_MAX:,} {unit} "
                            "may have")
            if least * times > GENERATED_SIZE_MAX:
                return at, (f"{keyword} {least:,} within arrays of at least {times:,} items "
                            f"makes values of {int(least * times):,} items and characters, over "
                            f"the {GENERATED_SIZE_MAX:,} a generated value may hold")
        least_items = node.get("minItems")
        inner = times * max(1, int(least_items)) if isinstance(least_items, int | float) and (
            not isinstance(least_items, bool)) else times
        for key, value in node.items():
            if key in _DATA_KEYWORDS or not isinstance(value, dict | list):
                continue
            path = f"{where}.{key}" if where else str(key)
            stack.append((value, path, inner if key in _ITEM_KEYWORDS else times))
    return None
