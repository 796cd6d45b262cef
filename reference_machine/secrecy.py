"""Secret context values: the store, the log and the records hold references, never the value.

A definition lists its secret context keys (`secrets: [card_number]`). When a run starts, the
runtime puts each such value into a `Vault` and keeps `{"$secret": ref}` in its place, so the
start event, the execution record, the outbox and every error carry the reference. The value is
resolved only in the input handed to a tool, at the moment of the call.

A tool's failure text can hold what the tool was given (a payment library's "card 4111...
declined"), so the runtime `scrub`s every revealed value out of it before it is stored; the
harness's reports and histories use the same marker, `REDACTED`.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Collection, Iterator, Mapping
from typing import Any, Protocol

from reference_machine.errors import ReferenceMachineError

SECRET_KEY = "$secret"
#: What stands in a text where a secret value was.
REDACTED = "[redacted]"
#: Values at least this long are redacted wherever they appear in a text; shorter ones (a
#: three-digit CVV) only where they stand alone, so that they do not redact ordinary words.
SHORTEST = 4


#: Key names that say their value is a secret. The harness redacts what such a key holds
#: wherever it writes; the runtime stores text under one as a reference where no expression of
#: the definition reads the key (`WorkflowDefinition.conceals`), as it does a declared secret.
SECRET_NAMES = re.compile(r"(password|passwd|secret|token|api_?key|card_number|ssn)", re.I)


def named_secret(key: object) -> bool:
    """Tells whether `key` is named like a secret (`api_token`, `password`)."""
    return isinstance(key, str) and _named(key)


@functools.lru_cache(maxsize=4096)
def _named(key: str) -> bool:  # asked of every field of every tool output
    return SECRET_NAMES.search(key) is not None


class SecretError(ReferenceMachineError):
    """A secret reference could not be resolved."""


class Vault(Protocol):
    """Keeps secret values outside the store, by reference."""

    def put(self, execution_id: str, key: str, value: Any) -> str:
        """Keeps `value` and gives the reference that stands for it."""

    def get(self, reference: str) -> Any:
        """Gives the value a reference stands for; raises `SecretError` when unknown."""


class MemoryVault:
    """A vault in this process's memory; references are `{execution}/{key}`, and
    `{execution}/{key}#2`, `#3`, ... for each new value a key takes later: a reference, once
    given, keeps its value, so an older event still reads what it was given (a null, a key
    not set yet, is no value to keep: the first real one takes its reference)."""

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}

    def put(self, execution_id: str, key: str, value: Any) -> str:
        reference = base = f"{execution_id}/{key}"
        version = 1
        while self._values.get(reference, value) not in (value, None):
            version += 1
            reference = f"{base}#{version}"
        self._values[reference] = value
        return reference

    def get(self, reference: str) -> Any:
        try:
            return self._values[reference]
        except KeyError:
            raise SecretError(f"no secret is kept under reference {reference!r}") from None


def conceal(execution_id: str, context: Mapping[str, Any], keys: frozenset[str],
            vault: Vault) -> dict[str, Any]:
    """Gives `context` with the values of secret `keys` replaced by vault references."""
    return {key: ({SECRET_KEY: vault.put(execution_id, key, value)} if key in keys else value)
            for key, value in context.items()}


def reveal(value: Any, vault: Vault) -> Any:
    """Gives `value` with every secret reference in it replaced by the secret itself."""
    if isinstance(value, Mapping):
        if len(value) == 1 and isinstance(value.get(SECRET_KEY), str):
            return vault.get(value[SECRET_KEY])
        return {key: reveal(item, vault) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [reveal(item, vault) for item in value]
    return value


def is_reference(value: Any) -> bool:
    """Tells whether `value` is a vault reference (`{"$secret": ref}`)."""
    return isinstance(value, Mapping) and len(value) == 1 and isinstance(
        value.get(SECRET_KEY), str)


def references(value: Any) -> Iterator[str]:
    """Gives every vault reference `value` holds, however deep."""
    if isinstance(value, Mapping):
        if is_reference(value):
            yield value[SECRET_KEY]
            return
        for item in value.values():
            yield from references(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from references(item)


def as_texts(value: Any) -> set[str]:
    """Gives the texts a secret value shows as: itself (or each of its items), and as it
    reads inside a JSON string (quotes and backslashes escaped)."""
    if value is None or isinstance(value, bool):
        return set()
    if isinstance(value, Mapping):
        return {text for item in value.values() for text in as_texts(item)}
    if isinstance(value, list | tuple | set | frozenset):
        return {text for item in value for text in as_texts(item)}
    text = str(value)
    if not text:
        return set()
    return {text, json.dumps(text, ensure_ascii=False)[1:-1]}


def scrub(text: str, values: Collection[str]) -> str:
    """Gives `text` with each secret value in it replaced by `REDACTED`: longest first (so a
    value holding another goes whole), a short value only where it stands alone."""
    if not values:
        return text
    for value in sorted(values, key=len, reverse=True):
        if value not in text:
            continue
        if len(value) >= SHORTEST:
            text = text.replace(value, REDACTED)
        else:
            text = re.sub(rf"(?<!\w){re.escape(value)}(?!\w)", REDACTED, text)
    return text


def revealed_values(value: Any, vault: Vault) -> set[str]:
    """Gives the texts of the secrets `value`'s references stand for (those the vault still
    holds)."""
    found: set[str] = set()
    for reference in references(value):
        try:
            found |= as_texts(vault.get(reference))
        except SecretError:
            continue
    return found
