"""Secret context values reach the tool in clear and are stored nowhere in clear."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from reference_machine import DefinitionError, SQLiteStore, load_definition
from reference_machine._runtime import Runtime, Success, ToolOutcome
from reference_machine.secrecy import MemoryVault, SecretError, reveal

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


def test_group_commit_refuses_only_the_event_json_cannot_hold(tmp_path: Path) -> None:
    """In a batch, an event whose payload JSON cannot hold exactly is refused alone; the
    other executions' events are written."""
    from reference_machine import Event, StoreError

    definition = load_definition({
        "name": "pingpong", "events": {"ping": {}},
        "states": {"a": {"initial": True, "type": "wait", "after": {"delay": 60, "target": "z"},
                         "on": {"ping": "z"}},
                   "z": {"type": "final", "outcome": "success"}},
    })
    store = SQLiteStore(tmp_path / "batch.db")
    runtime = Runtime(store, [definition], {})
    runtime.start(definition, "a1")
    runtime.start(definition, "b1")
    results = store.commit_many([
        _commit_of(runtime, "a1", Event("a1/ping", "ping", "system", {})),
        _commit_of(runtime, "b1", Event("b1/ping", "ping", "system", {"pair": (1, 2)})),
    ])
    assert results[0] == 2
    assert isinstance(results[1], StoreError)
    assert "cannot be stored" in str(results[1])
    assert store.load("a1").execution.state == "z"
    assert store.load("b1").version == 1


def _commit_of(runtime: Runtime, execution_id: str, event: Any) -> Any:
    """Gives the commit that delivering `event` would write."""
    from reference_machine import decide
    from reference_machine._runtime import _commit

    stored = runtime.store.load(execution_id)
    definition = runtime.registry.get(stored.execution.definition, stored.execution.version)
    decision = decide(definition, stored.execution, event, 1)
    return _commit(execution_id, stored.version, event, decision, 1)
