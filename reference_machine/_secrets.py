"""Secret context values: the store, the log and the records hold references, never the value.

A definition lists its secret context keys (`secrets: [card_number]`). When a run starts, the
runtime puts each such value into a `Vault` and keeps `{"$secret": ref}` in its place, so the
start event, the execution record, the outbox and every error carry the reference. The value is
resolved only in the input handed to a tool, at the moment of the call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from reference_machine.errors import ReferenceMachineError

SECRET_KEY = "$secret"


class SecretError(ReferenceMachineError):
    """A secret reference could not be resolved."""


class Vault(Protocol):
    """Keeps secret values outside the store, by reference."""

    def put(self, execution_id: str, key: str, value: Any) -> str:
        """Keeps `value` and gives the reference that stands for it."""

    def get(self, reference: str) -> Any:
        """Gives the value a reference stands for; raises `SecretError` when unknown."""


class MemoryVault:
    """A vault in this process's memory; references are `{execution}/{key}`."""

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}

    def put(self, execution_id: str, key: str, value: Any) -> str:
        reference = f"{execution_id}/{key}"
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
