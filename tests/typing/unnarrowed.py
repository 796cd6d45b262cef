"""Code a type checker must refuse: a field read off a record whose class (or `kind`) was never
checked, one variant's field read after checking for another, and a decision's execution read
without knowing it was accepted."""

from __future__ import annotations

from collections.abc import Sequence

from harness import HistoryRecord
from reference_machine import Decision


def tools(history: Sequence[HistoryRecord]) -> list[str]:
    return [record.tool for record in history]  # E: union-attr


def decisions(history: Sequence[HistoryRecord]) -> list[str]:
    return [record.tool for record in history if record.kind == "committed"]  # E: attr-defined


def state_after(decision: Decision) -> str:
    return decision.execution.state  # E: union-attr
