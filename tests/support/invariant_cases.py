"""Histories and planted machines the invariant checkers' tests share: a commit record made by
hand (`commit`), one rule checked alone (`only`), and the reference machine with its compiled
states changed in every scope (`ChangedMachine`), the way a bug is planted inside a region."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import Any

from harness import (
    Commanded,
    Committed,
    HistoryRecord,
    ReferenceMachine,
    SimOptions,
    Simulator,
    Violation,
    check,
)
from reference_machine import WorkflowDefinition

CONTEXT = {"order": "o-1", "amount": 40, "sku": "sku-9", "round": 0}


def commit(step: int, state: str, *, execution: str = "x1", event: str = "e",
           decision: str = "accepted", version: int = 1, source: str = "", moved: str = "",
           forced: str = "", event_type: str = "", event_source: str = "system",
           answers: str = "", payload: Any = None, context: Any = None,
           effects: tuple[Commanded, ...] = ()) -> Committed:
    """Gives a commit record (the defaults: an accepted event that moved nothing)."""
    return Committed(step, 0, execution, event, decision, version, state, source, moved,
                     forced, event_type or moved, event_source, answers, payload or {},
                     context if context is not None else CONTEXT, effects)


def only(rule: str, definition: Any, history: list[HistoryRecord]) -> list[Violation]:
    return check(definition, history, only=[rule])


FINAL = {"type": "final", "outcome": "success"}


WAITING_REGION = {
    "rb": {"parent": "par"},
    "rb1": {"parent": "rb", "initial": True, "type": "wait",
            "after": {"delay": 60, "target": "rb_ok"}},
    "rb_ok": {"parent": "rb", **FINAL},
}


def changed(definition: WorkflowDefinition, change: Any) -> WorkflowDefinition:
    """The definition with each compiled state changed, in every scope (regions, map items) as
    well: a region runs on its scope's definition, not the top level's states."""
    memo: dict[int, WorkflowDefinition] = {}

    def one(d: WorkflowDefinition) -> WorkflowDefinition:
        if id(d) in memo:
            return memo[id(d)]
        new = dataclasses.replace(d, states=MappingProxyType(
            {name: change(state) for name, state in d.states.items()}))
        memo[id(d)] = new
        object.__setattr__(new, "scopes", {root: one(s) for root, s in d.scopes.items()})
        return new

    return one(definition)


def reverse_choices(state: Any) -> Any:
    return dataclasses.replace(state, always=state.always[::-1]) if state.kind == "choice" \
        else state


class ChangedMachine(ReferenceMachine):
    change: Any = None

    def __init__(self, definition: WorkflowDefinition, tools: Any, probe: Any = None,
                 **kwargs: Any) -> None:
        super().__init__(changed(definition, type(self).change), tools, probe, **kwargs)


def history_of(definition: WorkflowDefinition, machine: Any, seed: int) -> Any:
    return Simulator(definition, SimOptions(seed=seed, executions=1), machine=machine).run(
    ).history
