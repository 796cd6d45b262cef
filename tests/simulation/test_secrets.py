"""Secret context values reach the tool in clear and are stored nowhere in clear."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from reference_machine import DefinitionError, SQLiteStore, load_definition
from reference_machine._runtime import Runtime, Success, ToolOutcome
from reference_machine._secrets import MemoryVault, SecretError, reveal

CARD = "4111-1111-1111-1111"
DEFINITION = {
    "name": "charge",
    "context": {"card": None, "amount": 0},
    "secrets": ["card"],
    "tools": {"payments.charge": {"idempotency_keys": True}},
    "states": {
        "charging": {
            "initial": True,
            "step": {"tool": "payments.charge",
                     "input": {"card": "=context.card", "amount": "=context.amount"}},
            "on": {"step.succeeded": "done", "step.failed": "failed"},
        },
        "done": {"type": "final", "outcome": "success"},
        "failed": {"type": "final", "outcome": "failure"},
    },
}


def test_secret_is_handed_to_the_tool_and_never_stored(tmp_path: Path) -> None:
    """The tool sees the card number; no byte of the store file holds it, and the log, the
    record, the outbox and the transition records carry only its reference."""
    definition = load_definition(DEFINITION)
    seen: list[Mapping[str, Any]] = []

    def charge(payload: Mapping[str, Any], key: str) -> ToolOutcome:
        seen.append(payload)
        return Success({"charge_id": "ch-1"})

    path = tmp_path / "store.db"
    store = SQLiteStore(path)
    runtime = Runtime(store, [definition], {"payments.charge": charge})
    runtime.start(definition, "x1", context={"card": CARD, "amount": 12})
    assert seen == [{"card": CARD, "amount": 12}]
    execution = store.load("x1").execution
    assert execution.outcome == "success"
    assert execution.context["card"] == {"$secret": "x1/card"}
    assert runtime.replay("x1") == execution
    store.close()
    for file in tmp_path.iterdir():
        assert CARD.encode() not in file.read_bytes(), f"{file.name} holds the card in clear"


def test_unknown_reference_is_a_secret_error() -> None:
    """A reference the vault does not hold is a SecretError naming it, not a clear value."""
    with pytest.raises(SecretError, match=r"no secret is kept under reference 'x9/card'"):
        reveal({"card": {"$secret": "x9/card"}}, MemoryVault())


def test_secret_must_be_a_context_key() -> None:
    """A secret naming no context key is a definition error at its location."""
    with pytest.raises(DefinitionError, match=r"secrets\[0\]: secret 'cvv' is not a context key"):
        load_definition({**DEFINITION, "secrets": ["cvv"]})
