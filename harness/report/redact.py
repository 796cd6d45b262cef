"""Keeping secrets out of what fsmharness writes for people to read: reports, histories, and
the text of replay files (their options keep the run's context, which replaying needs).

A secret is a value a run's context held under one of the definition's `secrets` keys, or under
a key whose name says it is one (password, token, api_key, ...), and what a tool was handed in
an input field computed from one. The value is replaced by `REDACTED`, the marker the
reference machine's store uses too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from harness.sim.history import Applied, Committed, HistoryRecord, RunStarted, Started
from reference_machine import WorkflowDefinition
from reference_machine.secrecy import (
    REDACTED,
    SECRET_NAMES,
    SHORTEST,
    as_texts,
    is_reference,
    named_secret,
    scrub,
)

__all__ = ["REDACTED", "redact", "redact_history", "secret_values"]

def _is_secret_key(definition: WorkflowDefinition, key: object) -> bool:
    return isinstance(key, str) and (key in definition.secrets or named_secret(key))


def secret_values(definition: WorkflowDefinition,
                  history: Sequence[HistoryRecord] = ()) -> frozenset[str]:
    """Gives the values held under secret keys, as text (those long enough to be told apart
    from ordinary words; also as they read inside JSON): in the definition's own context, in
    every run's start context, and in each tool input field the definition computes from a
    secret (a tool's own input names may say nothing of it)."""
    contexts: list[Mapping[str, Any]] = [definition.initial_context]
    contexts += [record.context for record in history if type(record) is Started]
    found: set[str] = set()
    for context in contexts:
        for key, value in context.items():
            if _is_secret_key(definition, key) and not is_reference(value):
                found |= as_texts(value)
    fields = _secret_inputs(definition)
    for record in history:
        if type(record) is Applied:
            found |= _input_secrets(definition, fields.get(record.tool, frozenset()),
                                    record.input)
    return frozenset(text for text in found if len(text) >= SHORTEST)


def _secret_inputs(definition: WorkflowDefinition) -> dict[str, frozenset[str]]:
    """Gives, per tool, the input fields whose expressions read a secret context key."""
    if not definition.secrets:
        return {}
    keys = "|".join(re.escape(key) for key in sorted(definition.secrets))
    reads = re.compile(rf"\bcontext\.(?:{keys})\b")
    fields: dict[str, set[str]] = {}
    for state in definition.spec.states.values():
        step = state.step
        if step is None:
            continue
        calls = [(step.tool, step.input)]
        if step.compensation is not None:
            calls.append((step.compensation.tool, step.compensation.input))
        for tool, template in calls:
            for name, expression in template.items():
                if any(reads.search(text) for text in _strings(expression)):
                    fields.setdefault(tool, set()).add(name)
    return {tool: frozenset(names) for tool, names in fields.items()}


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _input_secrets(definition: WorkflowDefinition, fields: frozenset[str], text: str) -> set[str]:
    """Gives the secret values in one tool input (its JSON text): those of `fields`, and of
    any key named like a secret."""
    if not fields and not SECRET_NAMES.search(text):
        return set()  # no need to read the JSON
    try:
        given = json.loads(text)
    except ValueError:
        return set()
    found: set[str] = set()
    stack = [given]
    while stack:
        value = stack.pop()
        if isinstance(value, Mapping):
            for key, item in value.items():
                if (value is given and key in fields) or _is_secret_key(definition, key):
                    found |= as_texts(item)
                else:
                    stack.append(item)
        elif isinstance(value, list):
            stack.extend(value)
    return found


def redact(data: Any, values: frozenset[str]) -> Any:
    """Gives `data` with every occurrence of a secret value replaced, in every string it holds
    (keys are the report's own, and are left alone)."""
    if not values:
        return data
    if isinstance(data, str):
        return scrub(data, values)
    if isinstance(data, Mapping):
        return {key: redact(value, values) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [redact(item, values) for item in data]
    return data


def redact_history(definition: WorkflowDefinition,
                   history: Sequence[HistoryRecord]) -> Sequence[HistoryRecord]:
    """Gives the history as it may be written: every secret value replaced by `REDACTED` in
    every record (a tool's input as the world saw it, a start context, a fault's detail), and
    the value under a secret key of a context replaced whole, whatever its type. A history
    with no secret to hide is given back as it is."""
    values = secret_values(definition, history)
    if not values and not definition.secrets:
        return history
    return [_redact_record(definition, record, values) for record in history]


def _redact_record(definition: WorkflowDefinition, record: HistoryRecord,
                   values: frozenset[str]) -> HistoryRecord:
    if type(record) is Started:
        return record._replace(context=_hide(definition, record.context, values))
    if type(record) is RunStarted:
        return record._replace(options=_hide(definition, record.options, values))
    if type(record) is Committed and record.reason:
        # the machine's reason may quote a value of the event it refused: the values under
        # the secret keys of the record's own payload and context go too
        values = values | _under_secret_keys(definition, (record.payload, record.context))
    changed = {}
    for name, value in record._asdict().items():
        if isinstance(value, str | Mapping | tuple):
            hidden = _hide(definition, value, values)
            if hidden != value:
                changed[name] = hidden
    return record._replace(**changed) if changed else record


def _under_secret_keys(definition: WorkflowDefinition, data: Any) -> frozenset[str]:
    """Gives the texts of the values held under secret keys anywhere in `data`."""
    found: set[str] = set()
    stack = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, Mapping):
            for key, item in value.items():
                if _is_secret_key(definition, key) and not is_reference(item):
                    found |= as_texts(item)
                else:
                    stack.append(item)
        elif isinstance(value, list | tuple):
            stack.extend(value)
    return frozenset(found)


def _hide(definition: WorkflowDefinition, data: Any, values: frozenset[str]) -> Any:
    """Gives `data` with secret values scrubbed from its strings and the value under each
    secret key of its mappings replaced (a vault reference stays: it tells nothing)."""
    if isinstance(data, str):
        return scrub(data, values)
    if isinstance(data, Mapping):
        return {key: (REDACTED if _is_secret_key(definition, key) and item is not None
                      and not is_reference(item) and not isinstance(item, Mapping)
                      else _hide(definition, item, values))
                for key, item in data.items()}
    if isinstance(data, list):
        return [_hide(definition, item, values) for item in data]
    if isinstance(data, tuple):
        items = [_hide(definition, item, values) for item in data]
        return type(data)(*items) if hasattr(data, "_fields") else tuple(items)
    return data
