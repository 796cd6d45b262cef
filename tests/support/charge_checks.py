"""A user's invariant as the README shows it (it yields sentences), over the planted workflow's
charges, unregistered: `charge_rules` registers it for the command line, and tests register it
for themselves (the registry is global)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from harness import Applied, HistoryRecord


def charged_twice(definition: Any, history: Sequence[HistoryRecord]) -> Iterator[str]:
    """No order is charged twice."""
    seen: dict[str, str] = {}
    for record in history:
        if type(record) is Applied and record.tool == "pay.charge":
            if record.input in seen:
                yield f"{record.input} charged by {seen[record.input]} and {record.execution}"
            seen[record.input] = record.execution
