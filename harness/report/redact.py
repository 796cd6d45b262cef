"""Keeping secrets out of what fsmharness writes for people to read: reports, and the text of
replay files (their options keep the run's context, which replaying needs).

A secret is a value a run's context held under one of the definition's `secrets` keys, or under
a key whose name says it is one (password, token, api_key, ...).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from harness.sim.history import HistoryRecord, Started
from reference_machine import WorkflowDefinition

__all__ = ["REDACTED", "redact", "secret_values"]

REDACTED = "[redacted]"
_SECRET_NAMES = re.compile(r"(password|passwd|secret|token|api_?key|card_number|ssn)", re.I)
_SHORTEST = 4  # shorter values would redact ordinary words and numbers


def secret_values(definition: WorkflowDefinition,
                  history: Sequence[HistoryRecord] = ()) -> frozenset[str]:
    """Gives the values held under secret keys, as text (those long enough to be told apart
    from ordinary words): in the definition's own context and in every run's start context."""
    contexts: list[Mapping[str, Any]] = [definition.initial_context]
    contexts += [record.context for record in history if type(record) is Started]
    found: set[str] = set()
    for context in contexts:
        for key, value in context.items():
            if (key in definition.secrets or _SECRET_NAMES.search(key)) and value is not None \
                    and not isinstance(value, Mapping | list | bool):
                text = str(value)
                if len(text) >= _SHORTEST:
                    found.add(text)
    return frozenset(found)


def redact(data: Any, values: frozenset[str]) -> Any:
    """Gives `data` with every occurrence of a secret value replaced, in every string it holds
    (keys are the report's own, and are left alone)."""
    if not values:
        return data
    if isinstance(data, str):
        for value in values:
            if value in data:
                data = data.replace(value, REDACTED)
        return data
    if isinstance(data, Mapping):
        return {key: redact(value, values) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [redact(item, values) for item in data]
    return data
