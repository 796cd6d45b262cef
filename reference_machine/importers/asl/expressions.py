"""Expressions inside the data: ASL's intrinsic functions (`States.Format(...)`) and a safe
subset of JSONata, translated into native expression text or refused at their location."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from reference_machine._expr import ExpressionSyntaxError, compile_expression
from reference_machine.findings import Fatal, FindingSink
from reference_machine.importers._common import literal as _literal
from reference_machine.importers.asl.conversion import Part, safe_id
from reference_machine.importers.asl.paths import coalesce, render

__all__ = ["Expressions", "jsonata_refused"]


class Expressions(Part):
    """Converts intrinsic function calls and JSONata expressions."""

    def intrinsic(self, text: str, location: str, root: str,
                  base: tuple[str | int, ...]) -> str | None:
        """Gives the expression of an intrinsic function call (`States.Format(...)`), or
        None where an argument is not expressible; refuses a call that is not translated."""
        try:
            call, rest = _parse_intrinsic(text, 0)
        except ValueError:
            call, rest = None, 0
        if call is None or text[rest:].strip():
            raise self.sink.fatal("asl-intrinsic", location,
                                  f"{text!r} is not an intrinsic function call Step "
                                  "Functions would take")
        return self._lower_call(call, location, root, base)

    def _lower_call(self, node: Any, location: str, root: str,
                    base: tuple[str | int, ...]) -> str | None:
        if isinstance(node, tuple) and node[0] == "path":
            return self.conv.data_paths.read(node[1], location, root, base)
        if isinstance(node, tuple) and node[0] == "lit":
            return _literal(node[1])
        name, args = node
        lowered = [self._lower_call(a, location, root, base) for a in args]
        if any(a is None for a in lowered):
            return None
        a = [str(x) for x in lowered]
        if name == "States.Array":
            return f"[{', '.join(a)}]"
        if name == "States.ArrayLength" and len(a) == 1:
            return f"len({coalesce(a[0], '[]')})"
        if name == "States.ArrayGetItem" and len(a) == 2:
            return f"{coalesce(a[0], '[]')}[{a[1]}]"
        if name == "States.ArrayContains" and len(a) == 2:
            return f"{a[1]} in {coalesce(a[0], '[]')}"
        if name == "States.MathAdd" and len(a) == 2:
            return f"{coalesce(a[0], '0')} + {coalesce(a[1], '0')}"
        if name == "States.JsonToString" and len(a) == 1:
            return f"json_text({a[0]})"
        # null-safe, as the importer's reads are (Step Functions would fail the run on data
        # that is missing or of another type; a run on drawn data must not)
        if name == "States.StringToJson" and len(a) == 1:
            return f"json_value({a[0]}, None)"
        if name == "States.JsonMerge" and len(a) == 3:
            if a[2] != "False":
                raise self.sink.fatal("asl-intrinsic", location,
                                      "States.JsonMerge's third argument must be false "
                                      "(a shallow merge: Step Functions refuses true)")
            return f"(merge({a[0]}, {a[1]}) if is_object({a[0]}) and is_object({a[1]}) else None)"
        if name == "States.StringSplit" and len(a) == 2:
            return f"(split({a[0]}, {a[1]}) if is_string({a[0]}) else None)"
        if name == "States.ArrayRange" and len(a) == 3:
            whole = " and ".join(f"is_number({x}) and {x} == round({x})" for x in a
                                 if not x.lstrip("-").isdigit())
            made = f"number_range({a[0]}, {a[1]}, {a[2]})"
            return f"({made} if {whole} else None)" if whole else made
        if name == "States.Format" and a:
            return f"format({', '.join(a)})"
        if name == "States.UUID" and not a and self.conv.current is not None:
            # unique to the state's visit, as a token: drawn the same way in every run
            self.conv.token_read = True
            self.sink.warning("asl-intrinsic", location,
                              "States.UUID is a text unique to the state's visit (the state's name "
                              "and visit), the same in every run: not random")
            return (f"format('{{}}-{{}}', {self.conv.current!r}, "
                    f"{coalesce(render((f'asl_task_token_{self.conv.current}',)), '0')})")
        raise self.sink.fatal("asl-intrinsic", location,
                              f"{name} with {len(a)} argument(s) is not translated (the "
                              "intrinsics translated: States.Format, StringToJson, "
                              "JsonToString, Array, ArrayLength, ArrayGetItem, ArrayContains, "
                              "ArrayRange, JsonMerge, StringSplit, MathAdd, UUID)")

    def jsonata(self, text: Any, location: str, root: str) -> str | None:
        """Gives the native expression of a small, safe subset of JSONata, or None."""
        if not isinstance(text, str):
            return _literal(text) if text is not None else None
        stripped = text.strip()
        if not (stripped.startswith("{%") and stripped.endswith("%}")):
            return repr(text)
        body = stripped[2:-2].strip()
        out: list[str] = []
        for token in _jsonata_tokens(body):
            if token is None:
                return None
            if token.startswith("$states.input"):
                segments = token[len("$states.input"):].split(".")[1:]
                out.append(self.conv.data_paths.render_read(tuple(segments)))
            elif token.startswith("$states.result"):
                segments = token[len("$states.result"):].split(".")[1:]
                out.append(render(tuple(segments), "event.payload"))
            elif token.startswith("$states"):
                return None
            elif token.startswith("$"):
                name, _, rest = token[1:].partition(".")
                out.append(render((f"var_{safe_id(name)}",
                                   *(rest.split(".") if rest else ()))))
            else:
                out.append(token)
        expr = " ".join(out)
        try:
            compile_expression(expr)
        except ExpressionSyntaxError:
            return None
        return expr


def _parse_intrinsic(text: str, pos: int) -> tuple[Any, int]:
    """Parses `States.Name(arg, ...)`; an argument is a literal, a path or a call."""
    match = re.compile(r"\s*(States\.[A-Za-z]+)\s*\(").match(text, pos)
    if match is None:
        raise ValueError(text)
    name, pos = match.group(1), match.end()
    args: list[Any] = []
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos < len(text) and text[pos] == ")":
            return (name, args), pos + 1
        if text.startswith("States.", pos):
            arg, pos = _parse_intrinsic(text, pos)
        elif pos < len(text) and text[pos] == "'":
            end, buf = pos + 1, ""
            while end < len(text) and text[end] != "'":
                if text[end] == "\\" and end + 1 < len(text):
                    end += 1
                buf += text[end]
                end += 1
            if end >= len(text):
                raise ValueError(text)
            arg, pos = ("lit", buf), end + 1
        else:
            token = re.compile(r"[^,()\s]+").match(text, pos)
            if token is None:
                raise ValueError(text)
            raw, pos = token.group(0), token.end()
            if raw.startswith("$"):
                arg = ("path", raw)
            else:
                try:
                    arg = ("lit", json.loads(raw))
                except json.JSONDecodeError as exc:
                    raise ValueError(raw) from exc
        args.append(arg)
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos < len(text) and text[pos] == ",":
            pos += 1
        elif pos < len(text) and text[pos] == ")":
            continue
        else:
            raise ValueError(text)


_JSONATA_TOKEN = re.compile(
    r"\s*(?:(?P<path>\$[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)"
    r"|(?P<num>\d+(?:\.\d+)?)|(?P<str>'[^'\\]*'|\"[^\"\\]*\")"
    r"|(?P<op>!=|<=|>=|=|<|>|\(|\)|\[|\]|,|\+|-|\*|/)"
    r"|(?P<word>and|or|true|false|null|in)\b)")


def jsonata_refused(sink: FindingSink, text: Any, location: str) -> Fatal:
    """Reports the refusal of a JSONata expression outside the subset translated (a function
    call such as `$count(...)`, a filter, `$states.context`: nothing of it is evaluated), and
    gives the exception that stops the conversion there."""
    shown = text if len(str(text)) <= 80 else f"{str(text)[:77]}..."
    return sink.fatal("asl-invalid", location,
                      f"JSONata {shown!r} is outside what is translated safely (paths "
                      "of $states.input, $states.result and variables, comparisons, "
                      "and/or, literals)")


def _jsonata_tokens(body: str) -> Iterator[str | None]:
    """Gives native tokens of a JSONata expression, None at the first one outside the subset
    (function calls such as `$count(...)` included)."""
    position = 0
    words = {"and": "and", "or": "or", "true": "True", "false": "False", "null": "None",
             "in": "in"}
    while position < len(body.rstrip()):
        match = _JSONATA_TOKEN.match(body, position)
        if match is None:
            yield None
            return
        position = match.end()
        if match.group("path"):
            if body[position:position + 1] == "(":
                yield None
                return
            yield match.group("path")
        elif match.group("num"):
            yield match.group("num")
        elif match.group("str"):
            yield repr(match.group("str")[1:-1])
        elif match.group("op"):
            op = match.group("op")
            yield "==" if op == "=" else op
        else:
            yield words[match.group("word")]
