"""Safe guard and action expressions: parsed with `ast` against a whitelist, compiled to closures.

An expression reads `context` and `event` (`event.payload`, `event.source`, `event.type`,
`event.id`, `event.answers`) and may use literals, comparisons, boolean logic, membership,
arithmetic, conditional expressions, key access (`context.order.amount` or `context["order"]`)
and the functions `len`, `abs`, `min`, `max`, `round`, the JSON type tests (`is_number`, ...)
`at(x, 'a', 0)`, a read of `x.a[0]` that gives null where a step is missing or of another
type, `has(x, 'a', 0)`, whether it is there, and Step Functions' intrinsics: `json_text`,
`json_value`, `format`, `split`, `merge`, `number_range`, `slice`. Nothing is ever passed to
`eval`: each node becomes a small Python closure once, at load time.

What an expression builds is bounded, so that no guard or action exhausts memory or time: a
repetition (`"x" * n`, `[a] * n`) makes at most `_SIZE_MAX` items and characters, counted all
the way down (`[["x" * 9999] * 9999] * 9999` is refused at its second repetition); a list or a
concatenation at most `_BUILT_MAX`, nested at most `_DEPTH_MAX` deep; an integer product at most
`_DIGITS_MAX` digits. Past a bound evaluation raises `GuardError` (a reject); a part of an
expression that reads neither context nor event is evaluated once at load time, so a bound it
breaks is a load error.
"""

from __future__ import annotations

import ast
import json
import math
import operator
import re
from collections.abc import Callable, Mapping
from typing import Any

from reference_machine.errors import GuardError

Compiled = Callable[[Mapping[str, Any], Any], Any]

_EVENT_FIELDS = frozenset({"payload", "source", "type", "id", "answers"})
def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _at(value: Any, *path: Any) -> Any:
    """`at(x, 'a', 0, 'b')`: `x.a[0].b`, or null where a step on the way is missing or is not
    a mapping or a list (a read that neither fails nor grows with its depth's square, as a chain
    of `is not None` tests does)."""
    for key in path:
        if type(value) is dict or isinstance(value, Mapping):
            value = value.get(key)
        elif type(value) is list and type(key) is int and 0 <= key < len(value):
            value = value[key]
        else:
            return None
    return value


def _has(value: Any, *path: Any) -> bool:
    """`has(x, 'a', 0)`: whether `x.a[0]` is there (a key held, even with null; an index in
    range), where `at` gives null alike for a null and a missing value."""
    for key in path:
        if type(value) is dict or isinstance(value, Mapping):
            if key not in value:
                return False
            value = value[key]
        elif type(value) is list and type(key) is int and 0 <= key < len(value):
            value = value[key]
        else:
            return False
    return True


def _json_text(value: Any) -> str:
    """`json_text(x)`: `x` as compact JSON text (Step Functions' `States.JsonToString`)."""
    _text_within(value, "json_text")
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise GuardError(f"json_text: {exc}") from None


_NO_FALLBACK: Any = object()


def _json_value(text: Any, fallback: Any = _NO_FALLBACK) -> Any:
    """`json_value(s)`: the JSON value text `s` holds (`States.StringToJson`);
    `json_value(s, d)`: `d` where `s` is not a text or holds no JSON."""
    if fallback is not _NO_FALLBACK:
        try:
            return _json_value(text)
        except GuardError:
            return fallback
    if not isinstance(text, str):
        raise GuardError(f"json_value reads a text, got a {type(text).__name__}")
    if len(text) > _BUILT_MAX:
        raise _TooLarge(f"json_value of {len(text):,} characters is over the limit of "
                        f"{_BUILT_MAX:,}")
    try:
        value = json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except (ValueError, RecursionError) as exc:
        raise GuardError(f"json_value: not JSON text: {exc}") from None
    return _within(value, "json_value")


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{text} is past the largest number JSON text may hold here")
    return number


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _format(template: Any, *values: Any) -> str:
    """`format('{} of {}', a, b)`: each `{}` of the template replaced by the next value, a
    text as it is and any other value as JSON (`States.Format`)."""
    if not isinstance(template, str):
        raise GuardError(f"format's template is a text, got a {type(template).__name__}")
    parts = template.split("{}")
    if len(parts) != len(values) + 1:
        raise GuardError(f"format's template has {len(parts) - 1} {{}} for {len(values)} "
                         "values")
    _text_within([template, *values], "format")  # before any value is written out
    out = [parts[0]]
    for value, part in zip(values, parts[1:], strict=True):
        out.append(value if isinstance(value, str) else _json_text(value))
        out.append(part)
    text = "".join(out)
    if len(text) > _BUILT_MAX:
        raise _TooLarge(f"format to {len(text):,} characters is over the limit of "
                        f"{_BUILT_MAX:,}")
    return text


def _split(text: Any, delimiters: Any) -> list[str]:
    """`split(s, d)`: the non-empty pieces of `s` between any of the characters of `d`
    (`States.StringSplit`)."""
    if not isinstance(text, str) or not isinstance(delimiters, str) or not delimiters:
        raise GuardError("split takes a text and a non-empty text of delimiters")
    pieces = re.split("|".join(re.escape(c) for c in delimiters), text)
    return _built([piece for piece in pieces if piece])


def _merge(left: Any, right: Any) -> dict[str, Any]:
    """`merge(a, b)`: the keys of mapping `a`, then `b`'s over them (`States.JsonMerge`, not
    deep)."""
    if not isinstance(left, Mapping) or not isinstance(right, Mapping):
        raise GuardError("merge takes two mappings")
    return _within({**left, **right}, "merge")


def _text_within(value: Any, what: str) -> None:
    """Refuses a value whose JSON text would pass `_BUILT_MAX` characters, told before it is
    written (a number counts its digits: a list of long integers is short in items)."""
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str:
            total += len(item) + 2
        elif kind is list or kind is tuple or kind is dict:
            total += 2
            stack.extend(item)
            if kind is dict:
                stack.extend(item.values())
        elif kind is int:
            total += item.bit_length() * 3 // 10 + 2
        else:
            total += 24
        if total > _BUILT_MAX:
            raise _TooLarge(f"{what} of more than {_BUILT_MAX:,} characters is over the limit")


def _within(value: Any, what: str) -> Any:
    """Gives `value` once it is within `_BUILT_MAX` items and characters and `_DEPTH_MAX`
    levels."""
    if _size(value, _BUILT_MAX) > _BUILT_MAX:
        raise _TooLarge(f"{what} of more than {_BUILT_MAX:,} items and characters is over the "
                        "limit")
    return value


def _number_range(start: Any, end: Any, step: Any = 1) -> list[int]:
    """`number_range(a, b, step)`: the whole numbers from `a` to `b`, both included, `step`
    apart, at most 1,000 of them (`States.ArrayRange`)."""
    if not all(type(n) is int for n in (start, end, step)) or step == 0:
        raise GuardError("number_range takes whole numbers and a step other than 0")
    count = (end - start) // step + 1
    if count > _RANGE_MAX:
        raise _TooLarge(f"number_range of {count:,} numbers is over the limit of {_RANGE_MAX:,}")
    return list(range(start, end + (1 if step > 0 else -1), step)) if count > 0 else []


def _slice(value: Any, start: Any, end: Any = None) -> Any:
    """`slice(x, 1)`, `slice(x, 0, 2)`: the items (or characters) of `x` from `start` up to
    `end` (null: to its end), as Python slices; null where `x` is not a list or text."""
    if not all(n is None or type(n) is int for n in (start, end)):
        raise GuardError("slice takes whole numbers (or null) for its start and end")
    if type(value) is list:
        return _built(value[start:end])
    if type(value) is str:
        return value[start:end]
    return None


def _round(number: Any, ndigits: Any = None) -> Any:
    """`round`, its digits bounded: an integer rounded to a place far to the left of it
    (`round(5, -1000000000)`) costs time that grows with the place."""
    if _is_number(ndigits) and abs(ndigits) > _DIGITS_MAX:
        raise _TooLarge(f"round to {ndigits:,} digits is over the limit of {_DIGITS_MAX:,}")
    return round(number, ndigits)


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "len": len,
    "at": _at,
    "has": _has,
    "abs": abs,
    "min": min,
    "max": max,
    "round": _round,
    # JSON type tests: a comparison can ask the type first (`is_number(x) and x > 5`)
    "is_number": _is_number,
    "is_string": lambda value: isinstance(value, str),
    "is_bool": lambda value: isinstance(value, bool),
    "is_list": lambda value: isinstance(value, list),
    "is_object": lambda value: isinstance(value, dict),
    # JSON and text, as Step Functions' intrinsic functions give them
    "json_text": _json_text,
    "json_value": _json_value,
    "format": _format,
    "split": _split,
    "merge": _merge,
    "number_range": _number_range,
    "slice": _slice,
}
_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: lambda a, b: _modulo(a, b),
}
_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}
_LENGTH_MAX = 1_000  # longer guards are not guards; and deep nesting would exhaust the stack
_SIZE_MAX = 10_000  # caps `"x" * n` so an expression cannot exhaust memory
_BUILT_MAX = 100_000  # items and characters in a list or concatenation an expression builds
_DEPTH_MAX = 50  # how deep what an expression builds may nest (a context read back by JSON)
_RANGE_MAX = 1_000  # numbers number_range() gives (Step Functions' ArrayRange limit)
_DIGITS_MAX = 1_000  # digits of an integer product (squaring each step grows without end)
_BITS_MAX = int(_DIGITS_MAX * 3.33)  # bit_length() is the cheap measure of those digits


class _TooLarge(GuardError):
    """What an expression would build is over one of its bounds."""


class ExpressionSyntaxError(ValueError):
    """An expression uses syntax or names outside the whitelist; `col` is 1-based."""

    def __init__(self, message: str, col: int | None = None) -> None:
        self.col = col
        super().__init__(message)


def compile_expression(text: str, *, reads_event: bool = True) -> Compiled:
    """Gives a function `(context, event) -> value` for a whitelisted expression; one that
    may not read the event (`reads_event=False`: a step's input) is refused if it does."""
    if not isinstance(text, str) or not text.strip():
        raise ExpressionSyntaxError("expected a non-empty expression")
    if len(text) > _LENGTH_MAX:
        raise ExpressionSyntaxError(f"expression is {len(text)} characters long; the limit is "
                                    f"{_LENGTH_MAX}")
    indent = len(text) - len(text.lstrip())
    try:
        tree = ast.parse(text.strip(), mode="eval")
        for node in ast.walk(tree):  # `context.x`, `context["x"]`: read through, not copied
            if isinstance(node, ast.Attribute | ast.Subscript):
                node.value._read_through = True  # type: ignore[attr-defined]
            if not reads_event and isinstance(node, ast.Name) and node.id == "event":
                raise _fail(node, "a step's input reads only context: no event is at hand "
                                  "when the step is called (copy what it needs from the event "
                                  "into the context with an assign on the transition)")
        compiled = _compile(tree.body)
        _fold_constants(tree.body)
        return compiled
    except RecursionError as exc:
        raise ExpressionSyntaxError("expression is nested too deeply") from exc
    except ExpressionSyntaxError as exc:
        if exc.col is not None:
            # ast counts UTF-8 bytes; people count characters, from the text as written
            before = text.strip().encode()[: exc.col - 1].decode(errors="ignore")
            exc.col = len(before) + 1 + indent
        raise
    except (SyntaxError, ValueError) as exc:
        if not isinstance(exc, SyntaxError):
            raise ExpressionSyntaxError(f"invalid syntax: {exc}") from exc
        detail = exc.msg if exc.msg.startswith("invalid syntax") else f"invalid syntax: {exc.msg}"
        raise ExpressionSyntaxError(detail, exc.offset + indent if exc.offset else None) from exc


def _fail(node: ast.AST, what: str) -> ExpressionSyntaxError:
    col = getattr(node, "col_offset", None)
    return ExpressionSyntaxError(what, None if col is None else col + 1)


def _key(container: Any, key: Any) -> Any:
    if type(container) is dict:  # the common case, without the slower ABC check
        return container.get(key)
    if isinstance(container, Mapping):
        return container.get(key)
    if isinstance(container, list | tuple | str) and isinstance(key, int):
        return container[key] if -len(container) <= key < len(container) else None
    raise GuardError(f"cannot read {key!r} of a {type(container).__name__}")


def _compile(node: ast.AST) -> Compiled:
    if isinstance(node, ast.Constant):
        value = node.value
        if not isinstance(value, str | int | float | bool | type(None)):
            raise _fail(node, f"literal {value!r} is not allowed")
        return lambda c, e: value
    if isinstance(node, ast.Name):
        if node.id == "context":
            if getattr(node, "_read_through", False):
                return lambda c, e: c
            # the context as a value is a copy of it: an action assigning it (or a list of it)
            # to a key would otherwise make the context hold itself
            return lambda c, e: dict(c)
        if node.id == "event":
            raise _fail(node, "use a field of event: event.payload, event.source, event.type")
        raise _fail(node, f"unknown name {node.id!r}; expressions read only context and event")
    if isinstance(node, ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id == "event":
            if node.attr not in _EVENT_FIELDS:
                allowed = ", ".join(sorted(_EVENT_FIELDS))
                raise _fail(node, f"event has no field {node.attr!r} (fields: {allowed})")
            getter = operator.attrgetter(node.attr)
            return lambda c, e: getter(e)
        if node.attr.startswith("_"):
            raise _fail(node, f"name {node.attr!r} is not allowed")
        inner = _compile(node.value)
        attr = node.attr
        return lambda c, e: _key(inner(c, e), attr)
    if isinstance(node, ast.Subscript):
        if isinstance(node.slice, ast.Slice):
            raise _fail(node, "slices are not allowed")
        inner, index = _compile(node.value), _compile(node.slice)
        return lambda c, e: _key(inner(c, e), index(c, e))
    if isinstance(node, ast.BoolOp):
        parts = tuple(_compile(v) for v in node.values)
        if isinstance(node.op, ast.And):
            return lambda c, e: all(p(c, e) for p in parts)
        return lambda c, e: any(p(c, e) for p in parts)
    if isinstance(node, ast.UnaryOp):
        operand = _compile(node.operand)
        if isinstance(node.op, ast.Not):
            return lambda c, e: not operand(c, e)
        if isinstance(node.op, ast.USub):
            return lambda c, e: -operand(c, e)
        if isinstance(node.op, ast.UAdd):
            return lambda c, e: +operand(c, e)
        raise _fail(node, f"operator {type(node.op).__name__} is not allowed")
    if isinstance(node, ast.BinOp):
        op = _BINARY.get(type(node.op))
        if op is None:
            raise _fail(node, f"operator {type(node.op).__name__} is not allowed")
        left, right = _compile(node.left), _compile(node.right)
        if isinstance(node.op, ast.Mult):
            return lambda c, e: _multiply(left(c, e), right(c, e))
        if isinstance(node.op, ast.Add):
            return lambda c, e: _add(left(c, e), right(c, e))
        return lambda c, e: op(left(c, e), right(c, e))
    if isinstance(node, ast.Compare):
        first = _compile(node.left)
        if len(node.ops) == 1:
            compare, right = _COMPARE[type(node.ops[0])], _compile(node.comparators[0])
            return lambda c, e: compare(first(c, e), right(c, e))
        steps = tuple(
            (_COMPARE[type(op)], _compile(right))
            for op, right in zip(node.ops, node.comparators, strict=True)
        )
        return lambda c, e: _chain(first(c, e), steps, c, e)
    if isinstance(node, ast.IfExp):
        test, body, orelse = _compile(node.test), _compile(node.body), _compile(node.orelse)
        return lambda c, e: body(c, e) if test(c, e) else orelse(c, e)
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        # always a list: what an action stores must come back from JSON unchanged
        items = tuple(_compile(item) for item in node.elts)
        return lambda c, e: _built([item(c, e) for item in items])
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
            allowed = ", ".join(sorted(_FUNCTIONS))
            raise _fail(node, f"only these functions may be called: {allowed}")
        if node.keywords:
            raise _fail(node, "keyword arguments are not allowed")
        if node.func.id in ("at", "has") and len(node.args) < 2:
            raise _fail(node, f"{node.func.id}() takes a value and at least one key or index: "
                              f"{node.func.id}(x, 'a', 0)")
        if node.func.id in ("at", "has") and isinstance(node.args[0], ast.Name):
            node.args[0]._read_through = True  # type: ignore[attr-defined]  # a key of it is read
        function = _FUNCTIONS[node.func.id]
        args = tuple(_compile(arg) for arg in node.args)
        return lambda c, e: function(*(arg(c, e) for arg in args))
    raise _fail(node, f"{type(node).__name__} is not allowed in an expression")


def _chain(value: Any, steps: tuple[tuple[Callable[[Any, Any], Any], Compiled], ...],
           c: Mapping[str, Any], e: Any) -> bool:
    for compare, right in steps:
        other = right(c, e)
        if not compare(value, other):
            return False
        value = other
    return True


def _modulo(left: Any, right: Any) -> Any:
    if isinstance(left, str | bytes):  # "%0999999999d" % 1 would build a huge string
        raise GuardError("string formatting with % is not allowed in an expression")
    return left % right


def _multiply(left: Any, right: Any) -> Any:
    sequence, count = (left, right) if isinstance(left, str | tuple | list) else (right, left)
    if isinstance(sequence, str | tuple | list) and isinstance(count, int):
        if count > 0:  # what is repeated counts all the way down: [["x" * 9999] * 9999]
            each = len(sequence) if isinstance(sequence, str) else _size(
                sequence, _SIZE_MAX // count + 1)
            if each * count > _SIZE_MAX:
                raise _TooLarge(f"repetition to {each * count:,} items is over the limit of "
                                f"{_SIZE_MAX}")
    elif type(left) is int and type(right) is int and (
            left.bit_length() + right.bit_length() > _BITS_MAX):
        raise _TooLarge(f"a product of more than {_DIGITS_MAX:,} digits is over the limit")
    return left * right


def _add(left: Any, right: Any) -> Any:
    if isinstance(left, str) and isinstance(right, str):
        if len(left) + len(right) > _BUILT_MAX:
            raise _TooLarge(f"joining text to {len(left) + len(right):,} characters is over "
                            f"the limit of {_BUILT_MAX:,}")
    elif isinstance(left, list) and isinstance(right, list):
        return _built(left + right)
    return left + right


def _built(value: list[Any]) -> list[Any]:
    """Gives a list an expression built, once it is known to be within `_BUILT_MAX` items and
    characters and `_DEPTH_MAX` levels (its parts may be shared: each use counts)."""
    if any(type(item) is list or type(item) is dict for item in value):
        size = _size(value, _BUILT_MAX)
        if size > _BUILT_MAX:
            raise _TooLarge(f"a list of more than {_BUILT_MAX:,} items and characters in all "
                            "is over the limit")
    elif len(value) > _BUILT_MAX:
        raise _TooLarge(f"a list of {len(value):,} items is over the limit of {_BUILT_MAX:,}")
    return value


def _size(value: Any, limit: int) -> int:
    """Gives the items and characters in `value`, counting stopped once past `limit`; raises
    `_TooLarge` when it nests more than `_DEPTH_MAX` levels deep."""
    total = 0
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind is str:
            total += len(item) or 1
        elif kind is list or kind is tuple or kind is dict:
            if depth >= _DEPTH_MAX:
                raise _TooLarge(f"a value nested more than {_DEPTH_MAX} levels deep is over "
                                "the limit")
            total += 1
            stack.extend((child, depth + 1) for child in item)  # a mapping's keys
            if kind is dict:
                stack.extend((child, depth + 1) for child in item.values())
        else:
            total += 1
        if total > limit:
            break
    return total


def _fold_constants(node: ast.AST) -> None:
    """Evaluates once each largest part of an expression that reads neither context nor event,
    so that a bound it breaks is found at load time; other failures are left to evaluation."""
    if not any(isinstance(inner, ast.Name) for inner in ast.walk(node)):
        if isinstance(node, ast.Constant):
            return
        try:
            _compile(node)({}, None)
        except _TooLarge as exc:
            raise _fail(node, str(exc)) from exc
        except Exception:  # 1 / 0 and the like: a reject when evaluated, as it always was
            pass
        return
    for child in ast.iter_child_nodes(node):
        _fold_constants(child)
