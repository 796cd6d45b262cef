"""Events and payload schemas: declared events with their sources, payload checks and
correlation, and the checks a JSON Schema or a pydantic model gives (local references only, so
checking a payload does no I/O)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jsonschema
import referencing
from pydantic import BaseModel, ValidationError

from reference_machine._definition.compiled import CompiledEvent, Guard, PayloadCheck
from reference_machine._definition.context import Compilation
from reference_machine._definition.expressions import compile_guard
from reference_machine.fast_schema import compile_fast_check, generation_problem
from reference_machine.findings import did_you_mean
from reference_machine.secrecy import is_reference

__all__ = ["RESERVED_PREFIXES", "compile_correlation", "compile_events", "payload_check"]

#: The prefixes of the events the machine itself sends: no declared event may use one.
RESERVED_PREFIXES = ("execution.", "step.", "approval.", "timer.", "compensation.")

_SCHEMA_DATA = frozenset({"enum", "const", "default", "examples"})


def compile_events(ctx: Compilation) -> dict[str, CompiledEvent]:
    """Gives each declared event compiled: its sources, payload check and correlation."""
    events: dict[str, CompiledEvent] = {}
    for name, event in ctx.spec.events.items():
        location = f"events.{name}"
        if name.startswith(RESERVED_PREFIXES):
            ctx.sink.error("reserved-event", location,
                           f"event name {name!r} uses a reserved prefix "
                           f"({', '.join(RESERVED_PREFIXES)})", name)
        check = payload_check(ctx, event.payload, f"{location}.payload")
        sources = frozenset(str(s) for s in event.sources) if event.sources else None
        events[name] = CompiledEvent(name, sources, check,
                                     compile_correlation(ctx, name, event.correlate,
                                                         event.payload))
    return events


def compile_correlation(ctx: Compilation, name: str, correlate: Mapping[str, str], payload: Any
                        ) -> tuple[tuple[str, Guard, str], ...]:
    """Gives an event's `correlate:` compiled, (payload field, expression, text) each."""
    compiled = []
    fields = payload.get("properties") if isinstance(payload, dict) else None
    if isinstance(payload, type) and issubclass(payload, BaseModel):
        fields = payload.model_fields
    for field_name, text in correlate.items():
        location = f"events.{name}.correlate.{field_name}"
        if isinstance(fields, Mapping) and field_name not in fields:
            hint = did_you_mean(field_name, fields)
            ctx.sink.error("correlate-field", location,
                           f"event {name!r} correlates payload field {field_name!r}, which its "
                           f"payload schema does not declare{hint}", name, field_name)
        guard, _ = compile_guard(ctx, text, location)
        if guard is not None:
            compiled.append((field_name, guard, text))
    return tuple(compiled)


def payload_check(ctx: Compilation, schema: Any, location: str,
                  secrets: Callable[[str], bool] | None = None) -> PayloadCheck | None:
    """Gives the check of a payload against `schema`; fields under `secrets` that hold a
    vault reference pass (the runtime checked their values in clear first)."""
    if schema is None:
        return None
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return _model_check(schema, secrets)
    try:
        validator_class = jsonschema.validators.validator_for(schema)
        validator_class.check_schema(schema)
    except jsonschema.SchemaError as exc:
        ctx.sink.error("bad-schema", location, f"not a valid JSON Schema: {exc.message}")
        return None
    problem = _unresolvable_reference(schema)
    if problem is not None:
        ctx.sink.error("bad-schema", location, problem)
        return None
    costly = generation_problem(schema)
    if costly is not None:
        ctx.sink.error("costly-schema", f"{location}.{costly[0]}", costly[1])
    # an empty registry: no reference is ever fetched, so checking a payload does no I/O
    return _json_schema_check(validator_class(schema, registry=referencing.Registry()),
                              secrets)


def _unresolvable_reference(schema: Any) -> str | None:
    """Gives why a `$ref` in `schema` cannot be resolved without I/O, or None when all can."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node is not schema and isinstance(node.get("$id"), str):
                return (f"$id {node['$id']!r} inside the schema starts a new base for "
                        "references; keep one schema with local '#/$defs/...' references")
            reference = node.get("$ref")
            if isinstance(reference, str):
                if reference != "#" and not reference.startswith("#/"):
                    return (f"$ref {reference!r} is not a local JSON pointer; only references "
                            "such as '#/$defs/name' are allowed, so checks do no I/O")
                target: Any = schema
                for part in reference[1:].split("/")[1:]:
                    part = part.replace("~1", "/").replace("~0", "~")
                    if isinstance(target, dict) and part in target:
                        target = target[part]
                    elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                        target = target[int(part)]
                    else:
                        return f"$ref {reference!r} points to nothing in the schema"
            # data (enum, const, default, examples) is not schema: a "$ref" there is a value
            stack.extend(value for key, value in node.items() if key not in _SCHEMA_DATA)
        elif isinstance(node, list):
            stack.extend(node)
    return None


def _references_at(payload: Mapping[str, Any], secrets: Callable[[str], bool]
                   ) -> frozenset[str]:
    """Gives the secret fields of `payload` that hold a vault reference."""
    return frozenset(key for key, value in payload.items()
                     if is_reference(value) and secrets(key))


def _json_schema_check(validator: Any, secrets: Callable[[str], bool] | None = None
                       ) -> PayloadCheck:
    fast = compile_fast_check(validator.schema)

    def check(payload: Mapping[str, Any]) -> str | None:
        instance = payload if isinstance(payload, dict) else dict(payload)
        if fast is not None and fast(instance):
            return None  # the fast subset accepts only what jsonschema accepts
        if secrets is not None and _references_at(instance, secrets):
            return None  # checked whole, in clear, before its secrets became references
        try:
            error = jsonschema.exceptions.best_match(validator.iter_errors(instance))
        except Exception as exc:  # a schema the checks let through must not crash decide
            return f"the schema could not be applied: {type(exc).__name__}: {exc}"
        if error is None:
            return None
        path = ".".join(str(p) for p in error.absolute_path) or "payload"
        return f"{path}: {error.message}"

    return check


def _model_check(model: type[BaseModel], secrets: Callable[[str], bool] | None = None
                 ) -> PayloadCheck:
    def check(payload: Mapping[str, Any]) -> str | None:
        try:
            model.model_validate(dict(payload))
        except ValidationError as exc:
            if secrets is not None and _references_at(payload, secrets):
                return None  # checked whole, in clear, before its secrets became references
            first = exc.errors()[0]
            path = ".".join(str(p) for p in first["loc"]) or "payload"
            return f"{path}: {first['msg']}"
        return None

    return check
