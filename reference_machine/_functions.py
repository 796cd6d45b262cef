"""Registered Python callables that definitions name as guards or actions (`function: name`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

_REGISTRY: dict[str, Callable[..., Any]] = {}


def register_function(name: str) -> Callable[[F], F]:
    """Gives a decorator registering a guard `(context, event) -> bool` or an action
    `(context, event) -> Mapping | None` under `name`, for definitions that say `function: name`."""
    if not isinstance(name, str) or not name:
        msg = f"register_function needs a non-empty name, got {name!r}"
        raise TypeError(msg)

    def decorate(function: F) -> F:
        if not callable(function):
            msg = f"register_function({name!r}) needs a callable, got {type(function).__name__}"
            raise TypeError(msg)
        _REGISTRY[name] = function
        return function

    return decorate


def registered_functions() -> dict[str, Callable[..., Any]]:
    """Gives a copy of the functions registered so far, by name."""
    return dict(_REGISTRY)
