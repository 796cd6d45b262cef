"""What the importers share: what an importer gives (`Imported`), and writing JSON values as
native expressions and step inputs."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reference_machine.findings import Finding


@dataclass(frozen=True)
class Imported:
    """A document read from another format: the native definition data, and what the
    importer approximated or left out (warnings, located in the source document)."""

    format: str
    data: dict[str, Any]
    findings: tuple[Finding, ...] = ()
    source: str = "<import>"
    #: registered Python callables the definition names (`function:` guards and actions)
    functions: Mapping[str, Callable[..., Any]] = field(default_factory=dict)


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
