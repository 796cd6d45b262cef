"""Safe guard and action expressions: parsed with `ast` against a whitelist, compiled to closures.

An expression reads `context` and `event` (`event.payload`, `event.source`, `event.type`,
`event.id`, `event.answers`) and may use literals, comparisons, boolean logic, membership,
arithmetic, conditional expressions, key access (`context.order.amount` or `context["order"]`)
and the functions `len`, `abs`, `min`, `max`, `round`. Nothing is ever passed to `eval`: each
node becomes a small Python closure once, at load time.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from typing import Any

from reference_machine.errors import GuardError

Compiled = Callable[[Mapping[str, Any], Any], Any]

_EVENT_FIELDS = frozenset({"payload", "source", "type", "id", "answers"})
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "len": len,
    "abs": abs,
    "min": min,
    "max": max,
    "round": round,
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


class ExpressionSyntaxError(ValueError):
    """An expression uses syntax or names outside the whitelist; `col` is 1-based."""

    def __init__(self, message: str, col: int | None = None) -> None:
        self.col = col
        super().__init__(message)


def compile_expression(text: str) -> Compiled:
    """Gives a function `(context, event) -> value` for a whitelisted expression."""
    if not isinstance(text, str) or not text.strip():
        raise ExpressionSyntaxError("expected a non-empty expression")
    if len(text) > _LENGTH_MAX:
        raise ExpressionSyntaxError(f"expression is {len(text)} characters long; the limit is "
                                    f"{_LENGTH_MAX}")
    indent = len(text) - len(text.lstrip())
    try:
        tree = ast.parse(text.strip(), mode="eval")
        return _compile(tree.body)
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
            return lambda c, e: c
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
        return lambda c, e: [item(c, e) for item in items]
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
            allowed = ", ".join(sorted(_FUNCTIONS))
            raise _fail(node, f"only these functions may be called: {allowed}")
        if node.keywords:
            raise _fail(node, "keyword arguments are not allowed")
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
        size = len(sequence) * count
        if size > _SIZE_MAX:
            raise GuardError(f"repetition to {size} items is over the limit of {_SIZE_MAX}")
    return left * right
