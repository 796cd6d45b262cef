"""A user's invariant module, imported with `--import charge_rules`: it registers a rule written
as the README shows (yielding sentences), over the planted workflow's charges."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from harness import Applied, HistoryRecord, invariant


@invariant(name="one_charge_per_order")
def one_charge_per_order(definition: Any, history: Sequence[HistoryRecord]) -> Iterator[str]:
    """No order is charged twice."""
    seen: dict[str, str] = {}
    for record in history:
        if type(record) is Applied and record.tool == "pay.charge":
            if record.input in seen:
                yield f"{record.input} charged by {seen[record.input]} and {record.execution}"
            seen[record.input] = record.execution
