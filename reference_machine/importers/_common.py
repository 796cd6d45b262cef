"""What the importers share: writing JSON values as native expressions and step inputs."""

from __future__ import annotations

import math
from typing import Any


def literal(value: Any) -> str | None:
    """Gives the native expression text of a JSON value, or None for one an expression cannot
    write (a mapping inside, a float that is not finite)."""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else None
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, list):
        items = [literal(v) for v in value]
        if any(i is None for i in items):
            return None
        return f"[{', '.join(str(i) for i in items)}]"
    return None


def input_literal(value: Any) -> Any:
    """Gives a literal step input value: a text starting with `=` would be read as an
    expression, so it is written as an expression giving the text."""
    if isinstance(value, str) and value.startswith("="):
        return "=" + repr(value)
    return value


def line_of(lines: dict[str, int] | Any, location: str) -> int | None:
    """Gives the line of a dotted location (`States.Pay.Retry[0]`), or of the nearest of its
    parents the document told a line for; None when none."""
    while location:
        if location in lines:
            return int(lines[location])
        location = location.rpartition(".")[0]
    return None
