"""Secrets stay secret everywhere: no history, store, report or replay file holds a value a
definition declares secret in clear, wherever the value came from (the context, a tool's
error, a tool's output)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from harness.report.redact import REDACTED
from reference_machine import EventStore, MemoryStore, SQLiteStore, load_definition
from reference_machine._runtime import Failure, Runtime, Success, ToolOutcome

CARD = "4111-1111-1111-1111"
CHARGE = {
    "name": "charge",
    "context": {"card": None, "amount": 0, "token": None},
    "secrets": ["card", "token"],
    "tools": {"payments.charge": {"idempotency_keys": True}},
    "states": {
        "charging": {
            "initial": True,
            "step": {"tool": "payments.charge",
                     "input": {"card": "=context.card", "amount": "=context.amount"},
                     "retry": {"attempts_max": 1}},
            "on": {"step.succeeded": {"target": "done",
                                      "actions": [{"assign": {"token": "event.payload.token"}}]},
                   "step.failed": "failed"},
        },
        "done": {"type": "final", "outcome": "success"},
        "failed": {"type": "final", "outcome": "failure"},
    },
}
CHARGE_YAML = f"""\
name: charge
context: {{card: "{CARD}", amount: 12}}
secrets: [card]
tools:
  payments.charge: {{idempotency_keys: true}}
states:
  charging:
    initial: true
    step: {{tool: payments.charge, input: {{card: "=context.card", amount: "=context.amount"}}}}
    on: {{step.succeeded: done, step.failed: failed}}
  done: {{type: final, outcome: success}}
  failed: {{type: final, outcome: failure}}
"""


def _stores(folder: Path) -> dict[str, Callable[[], EventStore]]:
    return {"sqlite": lambda: SQLiteStore(folder / "store.db"), "memory": MemoryStore}


def _everything_stored(store: EventStore, folder: Path, execution_id: str) -> str:
    """Gives every byte the store keeps of a run, as text: each file of the folder for
    SQLite (closed first), the log, record, outbox and transition records otherwise."""
    if isinstance(store, SQLiteStore):
        store.close()
        return "\n".join(file.read_bytes().decode("latin-1") for file in folder.iterdir())
    return repr(store.history(execution_id))


class TestToolFailureText:
    """A tool's failure text can quote what it was given; the store keeps it redacted."""

    @pytest.mark.parametrize("kind", ["sqlite", "memory"])
    @pytest.mark.parametrize("how", ["raises", "answers"])
    def test_a_card_number_in_a_tools_error_is_stored_redacted(
            self, tmp_path: Path, kind: str, how: str) -> None:
        """The error reaches the store with the card replaced by the marker, nowhere in
        clear."""
        definition = load_definition(CHARGE)

        def charge(payload: Mapping[str, Any], key: str) -> ToolOutcome:
            if how == "raises":
                raise ValueError(f"card {payload['card']} declined")
            return Failure("permanent", f"card {payload['card']} declined")

        store = _stores(tmp_path)[kind]()
        runtime = Runtime(store, [definition], {"payments.charge": charge})
        runtime.start(definition, "x1", context={"card": CARD, "amount": 12})
        assert store.load("x1").execution.outcome == "failure"
        (failed,) = [e.event for e in store.history("x1").log if e.event.type == "step.failed"]
        assert failed.payload["error"].endswith(f"card {REDACTED} declined")
        assert runtime.replay("x1") == store.load("x1").execution
        assert CARD not in _everything_stored(store, tmp_path, "x1")

    def test_a_short_secret_is_redacted_where_it_stands_alone(self, tmp_path: Path) -> None:
        """A three-digit secret goes from the text where it is a word of its own, and the
        digits of other numbers stay."""
        definition = load_definition({**CHARGE, "context": {**CHARGE["context"], "card": 0}})

        def charge(payload: Mapping[str, Any], key: str) -> ToolOutcome:
            return Failure("permanent", f"cvv {payload['card']} wrong (attempt 7123)")

        store = SQLiteStore(tmp_path / "store.db")
        Runtime(store, [definition], {"payments.charge": charge}).start(
            definition, "x1", context={"card": "123", "amount": 12})
        (failed,) = [e.event for e in store.history("x1").log if e.event.type == "step.failed"]
        assert failed.payload["error"] == f"cvv {REDACTED} wrong (attempt 7123)"


class TestSecretOutputField:
    """A tool output field named like a secret key is checked against the output schema in
    clear, and only then kept as a vault reference."""

    SCHEMA = {"type": "object", "properties": {"token": {"type": "string", "minLength": 8}},
              "required": ["token"]}

    def _run(self, tmp_path: Path, output: Mapping[str, Any]) -> tuple[SQLiteStore, Runtime]:
        spec = {**CHARGE, "tools": {"payments.charge": {"idempotency_keys": True,
                                                        "output": self.SCHEMA}}}
        definition = load_definition(spec)
        store = SQLiteStore(tmp_path / "store.db")
        runtime = Runtime(store, [definition], {"payments.charge": lambda p, k: Success(output)})
        runtime.start(definition, "x1", context={"card": CARD, "amount": 12})
        return store, runtime

    def test_a_valid_secret_output_is_taken_and_stored_as_a_reference(
            self, tmp_path: Path) -> None:
        """A string token the schema asks for is valid output: the run succeeds, and the
        token is a reference in the context and nowhere in clear."""
        store, runtime = self._run(tmp_path, {"token": "tok_SECRET_42"})
        execution = store.load("x1").execution
        assert execution.outcome == "success", store.history("x1").log
        assert execution.context["token"] == {"$secret": "x1/token"}
        assert runtime.vault.get("x1/token") == "tok_SECRET_42"
        assert runtime.replay("x1") == execution
        assert "tok_SECRET_42" not in _everything_stored(store, tmp_path, "x1")

    def test_an_invalid_secret_output_is_invalid_and_told_without_the_value(
            self, tmp_path: Path) -> None:
        """A token too short for the schema is invalid output; the failure text names the
        field, not its value."""
        store, runtime = self._run(tmp_path, {"token": "tok_9"})
        execution = store.load("x1").execution
        assert execution.outcome == "failure"
        (failed,) = [e.event for e in store.history("x1").log if e.event.type == "step.failed"]
        assert failed.payload["category"] == "invalid_output"
        assert failed.payload["error"].startswith("token: ")
        assert runtime.replay("x1") == execution
        assert "tok_9" not in _everything_stored(store, tmp_path, "x1")
