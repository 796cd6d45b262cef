"""The output schemas guessed from what a document reads: of a tool's result, a callback's
payload, the execution input and a map's items (lenient, so that the simulator's outputs take
every branch)."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from reference_machine.importers.asl.analysis import data_key

__all__ = ["ITEMS_MAX", "SCALAR_FIELD", "data_schema", "infer_schemas", "scalar_results"]

#: The output field a result compared whole is drawn in: a native output is a mapping.
SCALAR_FIELD = "asl_result"
ITEMS_MAX = 3  # the items drawn for a map's list: a few, so that a run stays short


def infer_schemas(writes: list[tuple[str, tuple[str, ...], tuple[str | int, ...],
                                    dict[str, tuple[str | int, ...]] | None]],
                  compared: list[tuple[tuple[str | int, ...], str, Any]],
                  items_min: int = 0) -> dict[str, dict[str, Any]]:
    """Gives, per tool (`tool:name`) or callback event (`event:name`), an output schema
    holding the fields the Choice rules compare and the lists the Map states read, at the
    place the result lands: a guess, so that the simulator's outputs take the branches."""
    schemas: dict[str, dict[str, Any]] = {}
    # lists first, then the deepest paths (a field read deeper must be an object, not a
    # guessed text), on one path comparisons before tests of presence and type, and reads
    # last: the first guess placed wins
    ordered = sorted(compared, key=lambda c: (
        0 if c[1] == "Items" else 1, -len(c[0]),
        2 if c[1] == "Read" else 1 if c[1].startswith("Is") else 0))
    # the values several rules compare one path to are all guessed (a status tested for
    # TRAINED, then HOSTED): the first rule's leaf takes the others' values
    leaves: dict[tuple[str | int, ...], dict[str, Any]] = {}
    for path, operator, literal in ordered:
        leaf = _leaf_schema(operator, literal, items_min)
        first = leaves.setdefault(path, leaf)
        if first is not leaf and "anyOf" in first and "anyOf" in leaf:
            values = first["anyOf"][0]["enum"]
            values.extend(v for v in leaf["anyOf"][0]["enum"] if v not in values)
    for target, landing, prefix, selector in writes:
        for path in leaves:
            if landing and tuple(path[:len(landing)]) != landing:
                continue
            rest = tuple(path[len(landing):])
            if not rest or isinstance(rest[0], int):
                # the whole result compared (a text, a number) or read as a list: a native
                # output is a mapping, so the result is its field SCALAR_FIELD (see
                # `scalar_results`)
                if landing and selector is None and not prefix:
                    root = schemas.setdefault(target, {"type": "object", "properties": {}})
                    _place(root, (SCALAR_FIELD, *rest), copy.deepcopy(leaves[path]))
                continue
            if selector is not None:
                if not rest or rest[0] not in selector:
                    continue
                inner = selector[str(rest[0])] + rest[1:]
            else:
                inner = prefix + rest
            if not inner:
                continue
            root = schemas.setdefault(target, {"type": "object", "properties": {}})
            _place(root, inner, copy.deepcopy(leaves[path]))
    return schemas


def scalar_results(schemas: Mapping[str, Mapping[str, Any]]) -> frozenset[str]:
    """Gives the tools (`tool:name`) and callback events whose whole result a Choice compares
    as a text or number, or reads as a list, where it lands (`ResultPath: $.kind`, then
    `Variable: $.kind`; `ResultPath: $.list`, then `Variable: $.list[0]`)."""
    return frozenset(target for target, schema in schemas.items()
                     if set(schema.get("properties", {})) == {SCALAR_FIELD})


def _leaf_schema(operator: str, literal: Any, items_min: int = 0) -> dict[str, Any]:
    if operator == "Items":  # `literal`: the items' schema (see data_schema)
        items = copy.deepcopy(literal) if isinstance(literal, Mapping) else _identified({
            "type": "object", "properties": {}})
        listed: dict[str, Any] = {"type": "array", "maxItems": ITEMS_MAX, "items": items}
        if items_min:
            listed["minItems"] = items_min
        return listed
    if operator in ("Read", "IsPresent", "IsNull"):
        return {}
    if operator.startswith("String") and "Matches" not in operator and isinstance(literal, str
                                                                                  ) and not \
            operator.endswith("Path"):
        return {"anyOf": [{"enum": [literal, literal + "_other"]}, {"type": "string"}]}
    if operator == "StringMatches" and isinstance(literal, str):
        # a text the pattern matches (each `*` as `x`), and one it does not
        example = re.sub(r"\\(.)|\*", lambda m: m.group(1) or "x", literal)
        return {"anyOf": [{"enum": [example, "_" + example + "_other"]}, {"type": "string"}]}
    if operator.startswith("Numeric") and not operator.endswith("Path") and isinstance(
            literal, int | float) and not isinstance(literal, bool):
        return {"anyOf": [{"enum": sorted({literal - 1, literal, literal + 1})},
                          {"type": "number"}]}
    if operator.startswith(("Boolean", "IsBoolean")):
        return {"type": "boolean"}
    if operator.startswith(("Numeric", "IsNumeric")):
        return {"type": "number"}
    return {"type": "string"}


def _place(node: dict[str, Any], path: tuple[str | int, ...], leaf: dict[str, Any]) -> None:
    """Puts `leaf` at `path` in an object schema, making the objects and arrays on the way;
    what is already there is kept (the first guess wins). Nothing is required and no value
    is refused that ASL would take: the guess shapes what the simulator draws, and a real
    output it did not foresee still passes."""
    head, rest = path[0], path[1:]
    if isinstance(head, int):
        if node.get("type") != "array":
            return
        node["minItems"] = max(node.get("minItems", 0), head + 1)
        child = node.setdefault("items", {} if rest else leaf)
    else:
        if node.get("type") != "object":
            return
        properties = node.setdefault("properties", {})
        if head not in properties:
            properties[head] = leaf if not rest else (
                {"type": "array"} if isinstance(rest[0], int) else
                {"type": "object", "properties": {}})
        child = properties[head]
    if rest:
        if not child:
            child.update({"type": "array"} if isinstance(rest[0], int) else
                         {"type": "object", "properties": {}})
        _place(child, rest, leaf)


def _identified(shape: dict[str, Any]) -> dict[str, Any]:
    """Gives an item's object schema with an `id` (unless the flow reads one of its own):
    records of their own, an id tells one item from the next."""
    properties = shape.setdefault("properties", {})
    if "id" not in properties:
        properties["id"] = {"type": "integer", "minimum": 1, "maximum": 10**9}
        shape["required"] = [*shape.get("required", ()), "id"]
    return shape


def data_schema(reads: list[tuple[tuple[str | int, ...], str, Any]], keys: set[str],
                flat: frozenset[tuple[str, ...]], *, items_min: int = 0, identified: bool = False
                ) -> dict[str, Any]:
    """Gives the object schema of data (the execution input, a map's item) of which a flow
    reads the context `keys` before writing them: the reads under those keys placed as for
    a tool's output (lenient: nothing required, any value of the type taken)."""
    entries = [r for r in reads if r[0] and isinstance(r[0][0], str)
               and data_key(r[0], flat) in keys]
    shape = infer_schemas([("data", (), (), None)], entries, items_min).get(
        "data", {"type": "object", "properties": {}})
    for key in sorted(k for k in keys if "." not in k):
        shape["properties"].setdefault(key, {})
    return _identified(shape) if identified else shape
