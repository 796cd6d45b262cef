"""Secrets stay secret everywhere: no history, store, report or replay file holds a value a
definition declares secret in clear, wherever the value came from (the context, a tool's
error, a tool's output)."""

from __future__ import annotations

import html
import json
import shlex
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from hostile import Case

from fault_injection import no_faults as no_faults_plan
from harness.report.redact import REDACTED, redact_history
from harness.sim.history import Applied, dump_line
from harness.sim.simulator import SimOptions, Simulator
from reference_machine import (
    EventStore,
    MemoryStore,
    SQLiteStore,
    load_definition,
)
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


class TestNamedLikeASecret:
    """A tool output field or context key named like a secret (`api_token`) but not declared
    one: the reports redacted it while the store kept it in clear (issue 36). Where nothing
    of the definition reads it, the store keeps text under it as a reference too; where an
    expression reads it, it stays what the expression reads."""

    LOGIN = {
        "name": "login",
        "context": {"user": "ann", "db_password": "hunter2-hunter2", "token_count": 0},
        "tools": {"auth.login": {"idempotency_keys": True, "output": {
            "type": "object", "required": ["api_token", "token_count"],
            "properties": {"api_token": {"type": "string", "minLength": 8},
                           "token_count": {"type": "integer"}}}}},
        "states": {
            "logging_in": {"initial": True,
                           "step": {"tool": "auth.login", "input": {"user": "=context.user"}},
                           "on": {"step.succeeded": "done", "step.failed": "failed"}},
            "done": {"type": "final", "outcome": "success"},
            "failed": {"type": "final", "outcome": "failure"},
        },
    }
    TOKEN = "sk_live_4242424242"

    def _run(self, tmp_path: Path, spec: Mapping[str, Any], output: Mapping[str, Any]
             ) -> tuple[SQLiteStore, Runtime]:
        definition = load_definition(dict(spec))
        store = SQLiteStore(tmp_path / "store.db")
        runtime = Runtime(store, [definition], {"auth.login": lambda p, k: Success(output)})
        runtime.start(definition, "x1")
        return store, runtime

    def test_text_no_expression_reads_is_stored_as_a_reference(self, tmp_path: Path) -> None:
        store, runtime = self._run(tmp_path, self.LOGIN,
                                   {"api_token": self.TOKEN, "token_count": 3})
        execution = store.load("x1").execution
        assert execution.outcome == "success", store.history("x1").log
        assert execution.context["db_password"] == {"$secret": "x1/db_password"}
        assert runtime.vault.get("x1/db_password") == "hunter2-hunter2"
        assert runtime.replay("x1") == execution
        (done,) = [e.event for e in store.history("x1").log if e.event.type == "step.succeeded"]
        assert done.payload == {"api_token": {"$secret": "x1/api_token"}, "token_count": 3}
        stored = _everything_stored(store, tmp_path, "x1")  # a number named so is no secret
        assert self.TOKEN not in stored and "hunter2-hunter2" not in stored

    def test_the_schema_is_checked_in_clear_first(self, tmp_path: Path) -> None:
        store, _ = self._run(tmp_path, self.LOGIN, {"api_token": "sk_9", "token_count": 3})
        (failed,) = [e.event for e in store.history("x1").log if e.event.type == "step.failed"]
        assert failed.payload["error"].startswith("api_token: ")
        assert "sk_9" not in _everything_stored(store, tmp_path, "x1")

    def test_a_key_an_expression_reads_keeps_its_value(self, tmp_path: Path) -> None:
        """A guard compares it: a reference in its place would change what the run does."""
        spec = {**self.LOGIN, "states": {**self.LOGIN["states"], "logging_in": {
            **self.LOGIN["states"]["logging_in"],
            "on": {"step.succeeded": [
                {"target": "done", "guard": "event.payload.api_token != 'sk_revoked'"},
                {"target": "failed"}], "step.failed": "failed"}}}}
        store, _ = self._run(tmp_path, spec, {"api_token": self.TOKEN, "token_count": 3})
        assert store.load("x1").execution.outcome == "success"

    def test_a_schema_over_the_whole_output_is_checked_in_clear(self, tmp_path: Path) -> None:
        """A root `anyOf` on the output: checked in clear before the token became a
        reference, and not again on the reference (which it would refuse)."""
        tool = self.LOGIN["tools"]["auth.login"]
        spec = {**self.LOGIN, "tools": {"auth.login": {**tool, "output": {
            "anyOf": [{"type": "object", "required": ["api_token"],
                       "properties": {"api_token": {"type": "string"}}}]}}}}
        store, _ = self._run(tmp_path, spec, {"api_token": self.TOKEN, "token_count": 3})
        assert store.load("x1").execution.outcome == "success", store.history("x1").log
        assert self.TOKEN not in _everything_stored(store, tmp_path, "x1")

    @pytest.mark.parametrize("reads", ["=context", "=context[context.user]"])
    def test_an_expression_that_takes_the_whole_context_reads_every_key(
            self, reads: str) -> None:
        """`=context` hands a tool every key: a reference in it would reach the tool."""
        spec = {**self.LOGIN, "states": {**self.LOGIN["states"], "logging_in": {
            **self.LOGIN["states"]["logging_in"],
            "step": {"tool": "auth.login", "input": {"settings": reads}}}}}
        definition = load_definition(spec)
        assert definition.read is None
        assert not definition.conceals("db_password", "hunter2-hunter2")

    def test_a_python_guard_may_read_anything(self) -> None:
        spec = {**self.LOGIN, "states": {**self.LOGIN["states"], "logging_in": {
            **self.LOGIN["states"]["logging_in"],
            "on": {"step.succeeded": {"target": "done",
                                      "guard": lambda context, event: True},
                   "step.failed": "failed"}}}}
        definition = load_definition(spec)
        assert definition.read is None

    def test_a_function_may_read_anything(self) -> None:
        """A `function:` guard is Python: what it reads is unknown, so nothing is hidden."""
        from reference_machine import register_function

        register_function("always_secret_test")(lambda context, event: True)
        spec = {**self.LOGIN, "states": {**self.LOGIN["states"], "logging_in": {
            **self.LOGIN["states"]["logging_in"],
            "on": {"step.succeeded": {"target": "done",
                                      "guard": {"function": "always_secret_test"}},
                   "step.failed": "failed"}}}}
        definition = load_definition(spec)
        assert definition.read is None
        assert not definition.conceals("api_token", self.TOKEN)


TWO_STEPS = """\
name: two
context: {card: "CARD", token: null, amount: 12}
secrets: [card, token]
tools:
  payments.authorize:
    idempotency_keys: true
    output: {type: object, properties: {token: {type: string, minLength: 6}}, required: [token]}
  payments.capture: {idempotency_keys: true}
states:
  authorizing:
    initial: true
    step: {tool: payments.authorize, input: {pan: "=context.card", amount: "=context.amount"}}
    on:
      step.succeeded: {target: capturing, actions: [{assign: {token: event.payload.token}}]}
      step.failed: failed
  capturing:
    step: {tool: payments.capture, input: {auth: "=context.token"}}
    on: {step.succeeded: done, step.failed: failed}
  done: {type: final, outcome: success}
  failed: {type: final, outcome: failure}
""".replace("CARD", CARD)


class TestHistory:
    """`run --history` writes the history with every secret redacted, as reports do."""

    @pytest.mark.parametrize("case", [
        Case("secret default", ("run", "charge.yaml", "--seed", "3", "--history", "h.jsonl"),
             0, "every invariant held", {"charge.yaml": CHARGE_YAML}, ("h.jsonl",)),
        Case("secret under another input name, and one a tool returned",
             ("run", "two.yaml", "--no-faults", "--history", "h.jsonl"), 0,
             "x1: done [final] (success)", {"two.yaml": TWO_STEPS}, ("h.jsonl",)),
    ], ids=lambda case: case.id)
    def test_no_applied_record_holds_a_secret(self, hostile: Callable[[Case], Any],
                                              tmp_path: Path, case: Case) -> None:
        """Each tool input field computed from a secret reads as the marker."""
        hostile(case)
        text = (tmp_path / "h.jsonl").read_text()
        assert CARD not in text
        records = [json.loads(line) for line in text.splitlines()]
        inputs = [json.loads(r["input"]) for r in records if r["kind"] == "applied"]
        assert inputs
        for given in inputs:
            for name in ("card", "pan", "auth"):
                assert given.get(name, REDACTED) == REDACTED, given

    def test_a_tool_returned_secret_is_in_no_record(self, tmp_path: Path) -> None:
        """The token a simulated tool made up (a secret output field) is in the history in
        memory, where the checkers need it, and in no line written."""
        (tmp_path / "two.yaml").write_text(TWO_STEPS)
        definition = load_definition(tmp_path / "two.yaml")
        result = Simulator(definition, SimOptions(seed=1, plan=no_faults_plan())).run()
        tokens = {json.loads(r.input)["auth"] for r in result.history
                  if type(r) is Applied and r.tool == "payments.capture"}
        assert tokens and all(len(token) >= 6 for token in tokens)
        written = "".join(dump_line(r) for r in redact_history(definition, result.history))
        assert not [token for token in tokens if token in written]
        assert CARD not in written

    def test_a_history_without_secrets_is_written_as_it_is(self) -> None:
        """No secret, no copy: the records are the simulator's own."""
        definition = load_definition({k: v for k, v in CHARGE.items() if k != "secrets"}
                                     | {"context": {"card": None, "amount": 0, "n": None}})
        result = Simulator(definition, SimOptions(seed=0, plan=no_faults_plan())).run()
        assert redact_history(definition, result.history) is result.history


class TestReportPaths:
    """Every path and option a report prints reads as the characters it holds: a report
    folder's name cannot break out of its code span into Markdown or HTML."""

    HOSTILE = "r`<b>x</b> [a](http:e) `` |"

    def test_a_backtick_in_the_report_folder_stays_in_the_replay_code_span(
            self, tmp_path: Path) -> None:
        """The Markdown's replay command is one code span holding the whole command, which a
        shell splits back into the replay file's path; no HTML or link comes out of it."""
        from markdown_it import MarkdownIt
        from planted import PLANTED, WORKFLOW

        from harness import FuzzOptions
        from harness.adapters.targets import Target
        from harness.engines.campaign import fuzz_target
        from harness.report.document import document
        from harness.report.html_page import render_html
        from harness.report.markdown_page import render_markdown

        machine, _ = PLANTED["key_per_attempt"]
        folder = tmp_path / self.HOSTILE
        report, section = fuzz_target(Target("pay.yaml", load_definition(WORKFLOW), machine),
                                      FuzzOptions(runs=50, replay_dir=folder / "replays"))
        (failure,) = report.failures
        doc = document("fuzz", [section])
        command = doc["targets"][0]["failures"][0]["replay_command"]
        assert shlex.split(command) == ["fsmharness", "replay", str(failure.replay_file)]
        tokens = [token for block in MarkdownIt("commonmark").parse(render_markdown(doc))
                  for token in [block, *(block.children or [])]]
        assert not [t for t in tokens if t.type in ("html_inline", "html_block", "link_open")]
        spans = [t.content for t in tokens if t.type == "code_inline"]
        assert command in spans, spans
        page = render_html(doc)
        assert "<b>x" not in page and html.escape(command, quote=True) in page


class TestReportsAndReplays:
    """A secret a tool made up, handed to the next tool, is redacted in the report and the
    replay file's texts, as a secret of the start context already was."""

    def test_a_tool_returned_token_is_in_no_report_or_replay_text(self, tmp_path: Path) -> None:
        """The violation quotes the ledger's input, which holds the token in clear; no
        report file and no text of the replay file does."""
        from planted import PLANTED

        from fault_injection import load_plan
        from harness import FuzzOptions
        from harness.adapters.targets import Target
        from harness.engines.campaign import fuzz_target
        from harness.report.document import document
        from harness.report.writing import write_reports

        machine, _ = PLANTED["key_per_attempt"]
        definition = load_definition(TWO_STEPS)
        # the capture's answer lost after it applied: retried under a new key, it applies twice
        plan = load_plan({"faults": {"tool_timeout_after_apply": {
            "rate": 0.3, "tools": ["payments.capture"]}}})
        report, section = fuzz_target(Target("two.yaml", definition, machine),
                                      FuzzOptions(runs=300, replay_dir=tmp_path / "replays",
                                                  sim=SimOptions(plan=plan)))
        failure = report.failures[0]
        shrunk = failure.counterexample
        tokens = {json.loads(r.input)["auth"] for r in shrunk.result.history
                  if type(r) is Applied and r.tool == "payments.capture"}
        assert any(token in shrunk.violation.message for token in tokens)
        tokens.add(CARD)
        files = write_reports(document("fuzz", [section]), tmp_path / "out")
        saved = json.loads(failure.replay_file.read_text())
        texts = {written.name: written.read_text()
                 for written in (files.json, files.markdown, files.html)}
        texts["replay"] = json.dumps({k: v for k, v in saved.items() if k != "options"})
        for name, text in texts.items():
            assert not [token for token in tokens if token in text], name


LEAKY = '''
from harness import invariant


@invariant("leaky_rule")
def leaky_rule(definition, history):
    """A user's rule whose sentence quotes what a tool was handed."""
    for record in history:
        if record.kind == "applied":
            yield f"charged with {record.input}"
            return
'''


@pytest.mark.parametrize("json_flag", [(), ("--json",)], ids=["text", "json"])
def test_what_run_prints_of_a_violation_is_redacted(
        json_flag: tuple[str, ...], hostile: Callable[[Case], Any]) -> None:
    """A violation's words quote the tool's input, card and all; `run` printed it in clear."""
    result = hostile(Case("leaky", ("run", "charge.yaml", "--seed", "3", "--import", "leaky",
                                    *json_flag), 1, "charged with",
                          {"charge.yaml": CHARGE_YAML, "leaky.py": LEAKY}))
    assert CARD not in result.stdout + result.stderr
    assert "[redacted]" in result.stdout


def test_a_vault_reference_keeps_its_value_when_the_key_takes_another() -> None:
    """The memory vault reused `{execution}/{key}`: a new token overwrote the old one, and an
    older event read back the new value."""
    from reference_machine.secrecy import MemoryVault

    vault = MemoryVault()
    assert vault.put("x1", "token", None) == "x1/token"  # not set yet
    first = vault.put("x1", "token", "tok-1")
    assert vault.put("x1", "token", "tok-1") == first == "x1/token"  # the same value: the same
    second = vault.put("x1", "token", "tok-2")
    assert second == "x1/token#2" and vault.put("x1", "token", "tok-3") == "x1/token#3"
    assert (vault.get(first), vault.get(second)) == ("tok-1", "tok-2")


OPEN_CHARGE_YAML = CHARGE_YAML.replace(f'card: "{CARD}"', "api_token: null, card: null").replace(
    "secrets: [card]\n", "").replace("=context.card", "=context.api_token")


@pytest.mark.parametrize("json_flag", [(), ("--json",)], ids=["text", "json"])
def test_what_replay_prints_of_a_violation_is_redacted(
        json_flag: tuple[str, ...], hostile: Callable[[Case], Any], tmp_path: Path) -> None:
    """A secret given with `--context` (its key says it is one) and quoted by the violation:
    the replay file holds it redacted, and `replay` printed it in clear (issue 36)."""
    files = {"charge.yaml": OPEN_CHARGE_YAML, "leaky.py": LEAKY}
    hostile(Case("found", ("fuzz", "charge.yaml", "--import", "leaky", "--runs", "5",
                           "--context", f"api_token={CARD}", "--report", "out"), 1,
                  "violated leaky_rule", files, writes=("out", "out/*", "out/*/*")))
    (saved,) = (tmp_path / "out" / "replays").iterdir()
    result = hostile(Case("replayed", ("replay", str(saved), "--import", "leaky", *json_flag),
                          1, "charged with"))
    assert CARD not in result.stdout + result.stderr
    assert "[redacted]" in result.stdout
