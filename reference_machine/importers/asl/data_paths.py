"""The data flowing through the states: reads of ASL paths, Parameters and ResultSelector
templates, the values a result or a Pass writes and where ResultPath puts them, and the ASL
variables (`Assign`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reference_machine.importers._common import input_literal as _input_literal
from reference_machine.importers._common import literal as _literal
from reference_machine.importers.asl.conversion import Part, safe_id
from reference_machine.importers.asl.expressions import jsonata_refused
from reference_machine.importers.asl.paths import NATIVE_ID, SLICE, parse_path, render

__all__ = ["DataPaths", "Expr", "Record"]

# -- values: what a result or a Pass puts into the data ---------------------------------------


@dataclass(frozen=True)
class Expr:
    """A value written as a native expression."""

    text: str


@dataclass(frozen=True)
class Record:
    """A value written as a mapping of values, key by key."""

    fields: Mapping[str, Any]  # key -> Expr | Record


class DataPaths(Part):
    """Converts what a state reads of the data and writes into it."""

    def assign(self, spec: Any, location: str, jsonata: bool) -> dict[str, str]:
        """Gives the native assignments of an `Assign` (of a state or a choice rule): each
        ASL variable as the context key `var_<name>`."""
        if not isinstance(spec, Mapping):
            self.sink.warning("asl-assign", location, "Assign is not a mapping: left out")
            return {}
        out: dict[str, str] = {}
        for key, value in spec.items():
            name = str(key)[:-2] if str(key).endswith(".$") else str(key)
            target = "var_" + safe_id(name)
            if jsonata:
                expr = self.conv.expressions.jsonata(value, f"{location}.{key}", "context")
            elif str(key).endswith(".$") and isinstance(value, str):
                expr = self._dynamic(value, f"{location}.{key}", "context", ())
            else:
                expr = _literal(value)
            if expr is None:
                self.sink.warning("asl-assign", f"{location}.{key}",
                                  f"variable {name!r} is not expressible natively: left unset")
                continue
            out[target] = expr
        return out

    def note(self, path: tuple[str | int, ...], operator: str, literal: Any) -> None:
        """Notes what a rule, a map or an input reads of the data, for the guessed schemas."""
        self.conv.compared.append((path, operator, literal))
        self.conv.reads_by_flow[-1].append((path, operator, literal))

    def _flat_prefix(self, segments: tuple[str | int, ...]) -> int | None:
        for size in range(len(segments), 1, -1):
            if segments[:size] in self.conv.flat:
                return size
        return None

    def render_read(self, segments: tuple[str | int, ...], root: str = "context") -> str:
        """Gives the expression reading `segments` of the data, under their flat key where
        a result was written below the top level."""
        if root == "context":
            size = self._flat_prefix(segments)
            if size is not None:
                key = ".".join(str(s) for s in segments[:size])
                return render(segments[size:], f"context[{key!r}]", nullable=True)
        return render(segments, root)

    def read(self, path: str, location: str, root: str = "context",
             base: tuple[str | int, ...] = ()) -> str:
        """Gives the expression reading an ASL path (`$.a.b`, `$$.Map.Item.Value`, `$var`)."""
        sliced = SLICE.match(path.strip())
        if sliced is not None:  # `$.list[1:]`: the items from the second on
            inner = self.read(sliced.group(1), location, root, base)
            bounds = [str(int(b)) if b else "None" for b in sliced.group(2, 3)]
            return f"slice({inner}, {', '.join(bounds)})"
        parsed = parse_path(path)
        if parsed is None:
            self.sink.warning("asl-path", location,
                              f"path {path!r} (filters, wildcards, slices) is not expressible "
                              "natively: read as null")
            return "None"
        kind, segments = parsed
        if kind == "$" and segments and isinstance(segments[0], int) and not base:
            # the data is an array (a Parallel's outputs, a Map's results): natively the
            # branches' data is merged into the one context
            segments = segments[1:]
            rest = "".join(f".{s}" if isinstance(s, str) else f"[{s}]" for s in segments)
            self.sink.warning("asl-parallel-result", location,
                              f"{path} reads an item of data that is an array in Step Functions "
                              "(a Parallel's or Map's outputs); natively the branches' data is "
                              f"merged: read as ${rest}")
        if kind == "$":
            if root == "context":
                self.note(base + tuple(segments), "Read", None)
            return self.render_read(base + tuple(segments), root)
        if kind == "$$":
            if tuple(segments[:3]) == ("Map", "Item", "Value"):
                return render(tuple(segments[3:]), "context")
            if tuple(segments[:2]) == ("Task", "Token") and self.conv.current is not None:
                # a token is new each time the task runs: the state's visits count them
                self.conv.token_read = True
                return (f"[{self.conv.current!r}, "
                        f"{render((f'asl_task_token_{self.conv.current}',))}]")
            if tuple(segments[:3]) == ("Map", "Item", "Index"):
                self.sink.warning("asl-context-object", location,
                                  "the map item's index is not in an item's context: read as 0")
                return "0"
            self.sink.warning("asl-context-object", location,
                              f"the context object ({path}) is not modelled: read as the text "
                              f"{path!r}")
            return repr(path)
        return render((f"var_{safe_id(kind[1:])}", *segments))

    def present(self, path: str, location: str) -> str:
        """Gives the test that the data holds what `path` reads (even a null): `has(...)`,
        or, where a flat key or another root stands in the way, that the read is not null."""
        parsed = parse_path(path)
        if parsed is None or parsed[0] != "$":
            return f"{self.read(path, location)} is not None"
        segments = tuple(parsed[1])
        if segments and isinstance(segments[0], int):  # an array's item: the merged data
            segments = segments[1:]
        if not segments:
            return "True"
        if self._flat_prefix(segments) is not None:
            return f"{self.read(path, location)} is not None"
        return f"has(context, {', '.join(repr(s) for s in segments)})"

    def _dynamic(self, text: str, location: str, root: str,
                 base: tuple[str | int, ...]) -> str | None:
        """Gives the expression of a `.$` value: a path or an intrinsic function call."""
        stripped = text.strip()
        if stripped.startswith("States."):
            return self.conv.expressions.intrinsic(stripped, location, root, base)
        if stripped.startswith("$"):
            return self.read(stripped, location, root, base)
        return None

    def template(self, params: Any, location: str, base: tuple[str | int, ...],
                 jsonata: bool) -> Any:
        """Gives the native step input of Parameters (or JSONata Arguments)."""
        if jsonata:
            if isinstance(params, str):
                expr = self.conv.expressions.jsonata(params, location, "context")
                if expr is None:
                    raise jsonata_refused(self.sink, params, location)
                return "=" + expr
            if isinstance(params, Mapping):
                return {str(k): self.template(v, f"{location}.{k}", base, True)
                        for k, v in params.items()}
            return _input_literal(params)
        if isinstance(params, Mapping):
            out: dict[str, Any] = {}
            for key, value in params.items():
                key = str(key)
                where = f"{location}.{key}"
                if key.endswith(".$"):
                    name = key[:-2]
                    expr = self._dynamic(value, where, "context", base) if isinstance(
                        value, str) else None
                    if expr is None:
                        self.sink.warning("asl-intrinsic", where,
                                          f"{value!r} is not expressible natively: sent as its "
                                          "text")
                        out[name] = _input_literal(value)
                    else:
                        out[name] = "=" + expr
                else:
                    out[key] = self.template(value, where, base, False)
            return out
        if isinstance(params, list):
            if any(isinstance(v, Mapping) and any(str(k).endswith(".$") for k in v)
                   for v in params):
                self.sink.warning("asl-parameters-list", location,
                                  "paths inside a list are sent as their text (a native step input "
                                  "evaluates no expression inside a list)")
            return params
        return _input_literal(params)

    def const(self, value: Any, location: str) -> Expr | Record | None:
        """Gives the value of a constant (a Pass's `Result`), mapping by mapping."""
        if isinstance(value, Mapping):
            fields: dict[str, Any] = {}
            for key, inner in value.items():
                converted = self.const(inner, f"{location}.{key}")
                if converted is not None:
                    fields[str(key)] = converted
            return Record(fields)
        literal = _literal(value)
        if literal is None:
            self.sink.warning("asl-result-value", location,
                              "a mapping inside a list cannot be written natively: written as null")
            return Expr("None")
        return Expr(literal)

    def value(self, spec: Any, location: str, root: str, *, jsonata: bool = False,
              base: tuple[str | int, ...] = ()) -> Expr | Record | None:
        """Gives what Parameters, ResultSelector or Output make of the data."""
        if jsonata:
            if isinstance(spec, Mapping):
                fields = {str(k): self.value(v, f"{location}.{k}", root, jsonata=True)
                          for k, v in spec.items()}
                return Record({k: v for k, v in fields.items() if v is not None})
            if isinstance(spec, str) and spec.strip().startswith("{%"):
                expr = self.conv.expressions.jsonata(spec, location, root)
                if expr is None:
                    raise jsonata_refused(self.sink, spec, location)
                return Expr(expr)
            return self.const(spec, location)
        if isinstance(spec, Mapping):
            record: dict[str, Any] = {}
            for key, value in spec.items():
                key = str(key)
                where = f"{location}.{key}"
                if key.endswith(".$"):
                    expr = self._dynamic(value, where, root, base) if isinstance(
                        value, str) else None
                    if expr is None:
                        self.sink.warning("asl-intrinsic", where,
                                          f"{value!r} is not expressible natively: written as "
                                          "its text")
                        expr = _literal(value) or "None"
                    record[key[:-2]] = Expr(expr)
                else:
                    inner = self.value(value, where, root, base=base)
                    if inner is not None:
                        record[key] = inner
            return Record(record)
        return self.const(spec, location)

    def write(self, move: dict[str, Any], value: Expr | Record | None, result_path: Any,
              location: str) -> None:
        """Adds to a move the assignments that put `value` at `result_path`."""
        if value is None or result_path is None:
            return
        if not isinstance(result_path, str):
            raise self.sink.fatal("asl-invalid", location, "ResultPath is a path or null")
        parsed = parse_path(result_path)
        if parsed is None or parsed[0] != "$" or any(isinstance(s, int) for s in parsed[1]):
            self.sink.warning("asl-result-path", location,
                              f"ResultPath {result_path!r} is not a plain path: the result is "
                              "dropped")
            return
        segments = tuple(str(s) for s in parsed[1])
        assigns: dict[str, str] = {}
        if not segments:
            # the result replaces the data: every top-level key read is set from it
            if isinstance(value, Record):
                self._flatten(assigns, (), value, location)
                for key in self.conv.roots_read:
                    if key not in value.fields:
                        assigns.setdefault(key, "None")
            else:
                for key in self.conv.roots_read:
                    assigns[key] = render((key,), value.text,
                                          nullable=value.text != "event.payload")
            for flat in sorted(self.conv.flat):
                assigns.setdefault(".".join(flat), "None") if not isinstance(
                    value, Expr) else assigns.setdefault(
                    ".".join(flat), render(flat, value.text,
                                          nullable=value.text != "event.payload"))
        else:
            self._flatten(assigns, segments, value, location)
        assigns = {k: v for k, v in assigns.items() if NATIVE_ID.match(k)}
        if assigns:
            move.setdefault("actions", []).append({"assign": assigns})

    def _flatten(self, assigns: dict[str, str], segments: tuple[str, ...],
                 value: Expr | Record, location: str) -> None:
        if isinstance(value, Expr):
            if not segments:
                return
            if len(segments) > 1:
                self.conv.written_flat.add(segments)
                key = ".".join(segments)
                if key not in assigns and (segments in self.conv.flat):
                    self.sink.warning("asl-result-flat", location,
                                      f"the value at {'$.' + key} is kept under the flat "
                                      f"context key {key!r}")
            key = ".".join(segments)
            if not NATIVE_ID.match(key):
                self.sink.warning("asl-result-path", location,
                                  f"the key {key!r} is not a native context key: dropped")
                return
            assigns[key] = value.text
            # the flat keys kept below it (`job.status` under `job`) are replaced with it, as
            # ASL replaces the whole of `$.job`: else a read of `$.job.status` saw the old value
            for flat in sorted(self.conv.flat):
                if len(flat) > len(segments) and flat[:len(segments)] == segments:
                    inner = ".".join(flat)
                    if NATIVE_ID.match(inner):
                        assigns.setdefault(inner, render(
                            flat[len(segments):], value.text,
                            nullable=value.text != "event.payload"))
            return
        if not segments and not value.fields:
            return
        if segments and not value.fields:
            assigns[".".join(segments)] = "[]"
            self.sink.warning("asl-result-value", location,
                              "an empty mapping is written as an empty list natively")
            return
        for key, inner in value.fields.items():
            self._flatten(assigns, (*segments, key), inner, location)
