"""Expressions and what runs them: guards, actions (`assign:` or a registered function) and a
step's `input:` template, compiled; a bad expression or an unknown function is an error."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from reference_machine._definition.compiled import Action, Guard
from reference_machine._definition.context import Compilation
from reference_machine._expr import ExpressionSyntaxError, compile_expression
from reference_machine._spec import ActionSpec, FunctionRef
from reference_machine.findings import did_you_mean

__all__ = ["compile_action", "compile_guard", "compile_template", "lookup_function"]


def compile_guard(ctx: Compilation, guard: object, location: str) -> tuple[Guard | None, str]:
    """Gives a guard compiled and its text (None and the text when it cannot be)."""
    if guard is None:
        return None, ""
    if isinstance(guard, str):
        try:
            return compile_expression(guard), guard
        except ExpressionSyntaxError as exc:
            col = f" at column {exc.col}" if exc.col is not None else ""
            ctx.sink.error("bad-guard", location, f"guard {guard!r}{col}: {exc}")
            return None, guard
    if isinstance(guard, FunctionRef):
        function = lookup_function(ctx, guard.function, location)
        return function, f"function:{guard.function}"
    if callable(guard):
        return guard, f"function:{getattr(guard, '__qualname__', repr(guard))}"
    ctx.sink.error("bad-guard", location, f"a guard is an expression or a function, got {guard!r}")
    return None, ""


def lookup_function(ctx: Compilation, name: str, location: str) -> Callable[..., Any] | None:
    """Gives the registered function `name` (None, and an error, when none is)."""
    function = ctx.functions.get(name)
    if function is None:
        hint = did_you_mean(name, ctx.functions)
        ctx.sink.error("unknown-function", location,
                       f"function {name!r} is not registered{hint}; pass it in `functions=` or "
                       "decorate it with @register_function", name)
    return function


def compile_action(ctx: Compilation, action: ActionSpec, location: str) -> Action | None:
    """Gives an action compiled: an `assign` or a function (None when it cannot be)."""
    if (action.assign is None) == (action.function is None):
        ctx.sink.error("bad-action", location,
                       "an action has exactly one of `assign` or `function`")
        return None
    if action.function is not None:
        if callable(action.function):
            return action.function
        return lookup_function(ctx, action.function, f"{location}.function")
    assert action.assign is not None
    compiled: list[tuple[str, Guard]] = []
    for key, text in action.assign.items():
        try:
            compiled.append((key, compile_expression(text)))
        except ExpressionSyntaxError as exc:
            col = f" at column {exc.col}" if exc.col is not None else ""
            ctx.sink.error("bad-expression", f"{location}.assign.{key}",
                           f"expression {text!r}{col}: {exc}", key)
    if len(compiled) == 1:
        ((only_key, only_value),) = compiled
        return lambda context, event: {only_key: only_value(context, event)}
    pairs = tuple(compiled)
    return lambda context, event: {key: value(context, event) for key, value in pairs}


def compile_template(ctx: Compilation, template: Mapping[str, Any], location: str
                     ) -> Callable[[Mapping[str, Any]], Mapping[str, Any]]:
    """Gives a step's or compensation's `input:` compiled, `context -> input`."""
    def report(where: str, exc: ExpressionSyntaxError) -> None:
        col = f" at column {exc.col}" if exc.col is not None else ""
        ctx.sink.error("bad-expression", where, f"expression{col}: {exc}")

    return _template_resolver(template, report, location)


def _template_resolver(
    template: Mapping[str, Any],
    report: Callable[[str, ExpressionSyntaxError], None],
    location: str,
) -> Callable[[Mapping[str, Any]], Mapping[str, Any]]:
    """Gives `context -> input`: literals kept, strings starting with '=' evaluated."""
    resolvers: list[tuple[str, Callable[[Mapping[str, Any]], Any]]] = []
    dynamic = False
    for key, value in template.items():
        where = f"{location}.{key}"
        if isinstance(value, str) and value.startswith("="):
            dynamic = True
            try:
                expression = compile_expression(value[1:], reads_event=False)
            except ExpressionSyntaxError as exc:
                report(where, exc)
                continue
            resolvers.append((key, _evaluated(expression)))
        elif isinstance(value, Mapping):
            inner = _template_resolver(value, report, where)
            dynamic = True
            resolvers.append((key, inner))
        else:
            resolvers.append((key, _constant(value)))
    if not dynamic:
        frozen = MappingProxyType(dict(template))
        return lambda context: frozen
    pairs = tuple(resolvers)
    return lambda context: {key: resolve(context) for key, resolve in pairs}


def _evaluated(expression: Callable[[Mapping[str, Any], Any], Any]
               ) -> Callable[[Mapping[str, Any]], Any]:
    """Gives `context -> value` of an input's `=expression` (it reads no event)."""
    return lambda context: expression(context, None)


def _constant(value: Any) -> Callable[[Mapping[str, Any]], Any]:
    """Gives `context -> value` of an input's literal."""
    return lambda context: value
