"""`--context KEY=VALUE` and `--context-file FILE` of `fsmharness run`, `fuzz` and `explore`: the
executions' start context given at the command line, seen in the history, carried into the
replay files, and bad input refused in one line."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from running import cli, one_error_line

#: Orders that VIPs may have charged again (a new key each visit: no_duplicate_effect), and a
#: confirmation sent to the customer's address from the context.
VIP = """\
name: vip_orders
version: 1
context:
  vip: false
  customer: {name: null, email: null}
tools:
  pay.charge: {idempotency_keys: true}
  email.send: {idempotency_keys: true}
events:
  again: {sources: [human]}
states:
  charging:
    initial: true
    step: {tool: pay.charge, input: {amount: 1}}
    on:
      step.succeeded:
        - {target: waiting, guard: context.vip}
        - {target: notifying}
      step.failed: failed
  waiting:
    type: wait
    after: {delay: 1h, target: notifying}
    on: {again: charging}
  notifying:
    step: {tool: email.send, input: {to: "=context.customer.email"}}
    on: {step.succeeded: done, step.failed: failed}
  done: {type: final, outcome: success}
  failed: {type: final, outcome: failure}
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "vip.yaml").write_text(VIP)
    return tmp_path


def history(folder: Path, *args: str) -> list[dict]:
    """Runs `run vip.yaml` without faults, one execution, with `args`; gives its history."""
    result = cli("run", "vip.yaml", "--no-faults", "--executions", "1", "--history", "h.jsonl",
                 *args, cwd=folder)
    assert result.returncode == 0, result.stdout + result.stderr
    return [json.loads(line) for line in (folder / "h.jsonl").read_text().splitlines()]


def sent_to(records: list[dict]) -> list[object]:
    """Gives the addresses the confirmation went to, as the tool world applied it."""
    return [json.loads(r["input"])["to"] for r in records
            if r["kind"] == "applied" and r["tool"] == "email.send"]


class TestRun:
    def test_without_a_context_the_address_is_null(self, folder: Path) -> None:
        """What a new user saw: the definition reads a value nobody gave."""
        assert sent_to(history(folder)) == [None]

    def test_a_dotted_key_sets_a_field_and_keeps_the_others(self, folder: Path) -> None:
        """`customer.email=...` fills the field; `customer.name` keeps its default."""
        records = history(folder, "--context", "customer.email=ada@example.com")
        (started,) = [r for r in records if r["kind"] == "started"]
        assert started["context"] == {"customer": {"name": None, "email": "ada@example.com"}}
        assert sent_to(records) == ["ada@example.com"]
        committed = [r for r in records if r["kind"] == "committed"]
        assert committed[-1]["context"]["customer"]["email"] == "ada@example.com"

    def test_a_context_file_and_pairs_over_it_values_read_as_json(self, folder: Path) -> None:
        """The file first, then each pair over it; a value is JSON when it parses (40, true,
        null, a list), else text (NaN is no JSON number: text)."""
        (folder / "context.yaml").write_text(
            "customer: {name: Ada, email: old@example.com}\nvip: false\n")
        records = history(folder, "--context-file", "context.yaml",
                          "--context", "customer.email=ada@example.com",
                          "--context", "limit=40", "--context", "tags=[1, 2]",
                          "--context", "note=NaN", "--context", "flag=true",
                          "--context", "none=null")
        (started,) = [r for r in records if r["kind"] == "started"]
        assert started["context"] == {
            "customer": {"name": "Ada", "email": "ada@example.com"}, "vip": False,
            "limit": 40, "tags": [1, 2], "note": "NaN", "flag": True, "none": None}

    def test_an_undeclared_key_is_passed_on_with_a_warning(self, folder: Path) -> None:
        """A typo leaves the declared key at its default: said on stderr, the run goes on."""
        result = cli("run", "vip.yaml", "--no-faults", "--context", "vipp=true", cwd=folder)
        assert result.returncode == 0, result.stdout + result.stderr
        assert ("fsmharness: warning: --context vipp: 'vip_orders' declares no context key "
                "'vipp'; did you mean 'vip'?; passed on as given") in result.stderr
        result = cli("run", "vip.yaml", "--no-faults", "--context", "tier=gold", cwd=folder)
        assert result.returncode == 0, result.stdout + result.stderr
        assert ("fsmharness: warning: --context tier: 'vip_orders' declares no context key "
                "'tier' (its keys: customer, vip); passed on as given") in result.stderr

    def test_the_printed_replay_command_gives_the_context_again(self, folder: Path) -> None:
        """With `vip=true` the run breaks; the command it prints runs it again, context and
        all."""
        result = cli("run", "vip.yaml", "--no-faults", "--executions", "1", "--context",
                     "vip=true", cwd=folder)
        assert result.returncode == 1, result.stdout + result.stderr
        (command,) = [line for line in result.stdout.splitlines()
                      if line.startswith("replay: ")]
        assert "--context vip=true" in command
        again = cli(*shlex.split(command.removeprefix("replay: fsmharness ")), cwd=folder)
        assert again.returncode == 1 and again.stdout == result.stdout


class TestFuzzAndExplore:
    @pytest.mark.parametrize("engine", [["fuzz", "--runs", "50"], ["explore", "--depth", "6"]],
                             ids=["fuzz", "explore"])
    def test_the_context_reaches_every_run_and_its_replay_file(self, folder: Path,
                                                               engine: list[str]) -> None:
        """Held with the default context; with `vip=true` the double charge is found (by
        the campaign, or by the search within its bound), and the replay file carries the
        context, so `replay` breaks the rule again."""
        args = (engine[0], "vip.yaml", "--faults", "none", "--executions", "1", *engine[1:])
        held = cli(*args, "--no-report", cwd=folder)
        assert held.returncode == 0, held.stdout + held.stderr
        broken = cli(*args, "--report", "reports", "--context", "vip=true", cwd=folder)
        assert broken.returncode == 1, broken.stdout + broken.stderr
        assert "violated no_duplicate_effect" in broken.stdout
        (saved,) = (folder / "reports" / "replays").glob("*.json")
        assert json.loads(saved.read_text())["options"]["context"] == {"vip": True}
        replayed = cli("replay", str(saved), cwd=folder)
        assert replayed.returncode == 1, replayed.stdout + replayed.stderr
        assert replayed.stdout.splitlines()[-1].startswith("reproduced no_duplicate_effect")


class TestSecrets:
    def test_a_secret_given_in_the_context_stays_out_of_what_is_printed_and_reported(
            self, tmp_path: Path) -> None:
        """The card (a declared secret) given with --context: not in `run`'s printed replay
        command, nor in the fuzz report's arguments (JSON, HTML, Markdown)."""
        card = "4111111111111111"
        (tmp_path / "s.yaml").write_text(VIP.replace("context:\n", "secrets: [card]\ncontext:"
                                                     "\n  card: null\n"))
        args = ("--executions", "1", "--context", f"card={card}", "--context", "vip=true")
        ran = cli("run", "s.yaml", "--no-faults", *args, cwd=tmp_path)
        assert ran.returncode == 1, ran.stdout + ran.stderr
        assert "replay: fsmharness run s.yaml" in ran.stdout
        assert card not in ran.stdout + ran.stderr
        assert "--context card=[redacted]" in ran.stdout
        fuzzed = cli("fuzz", "s.yaml", "--faults", "none", *args, "--runs", "20", "--report",
                     "out", cwd=tmp_path)
        assert fuzzed.returncode == 1, fuzzed.stdout + fuzzed.stderr
        assert card not in fuzzed.stdout + fuzzed.stderr
        for name in ("fuzz.json", "fuzz.html", "fuzz.md"):
            assert card not in (tmp_path / "out" / name).read_text(), name
        assert "card=[redacted]" in (tmp_path / "out" / "fuzz.json").read_text()


class TestBadInput:
    @pytest.mark.parametrize(("args", "fragments"), [
        (["--context", "vip"], ["--context 'vip': expected KEY=VALUE"]),
        (["--context", "=true"], ["--context '=true': expected KEY=VALUE"]),
        (["--context", "customer..email=x"], ["'customer..email' is no key"]),
        (["--context", "vip=1", "--context", "vip.level=2"],
         ["--context 'vip.level=2': vip is 1, not a mapping"]),
        (["--context", "vip.level=2"],
         ["--context vip.level: 'vip_orders' declares vip as false, not a mapping with "
          "fields; give vip=VALUE instead"]),
        (["--context-file", "nowhere.yaml"], ["--context-file nowhere.yaml: no such file"]),
        (["--context-file", "."], ["--context-file .: is a folder"]),
    ], ids=["no-equals", "no-key", "empty-part", "not-a-mapping", "default-not-a-mapping",
            "missing-file", "folder"])
    @pytest.mark.parametrize("command", ["run", "fuzz", "explore"])
    def test_one_line_exit_2(self, folder: Path, command: str, args: list[str],
                             fragments: list[str]) -> None:
        one_error_line(cli(command, "vip.yaml", *args, cwd=folder), *fragments)

    @pytest.mark.parametrize(("text", "fragment"), [
        ("- vip\n- true\n", "expected a mapping of context keys to values, got a list"),
        ("", "expected a mapping of context keys to values, got nothing"),
        ("vip: [unclosed\n", "line 2: not YAML or JSON: while parsing"),
        ("since: 2024-01-01\n", "every value must be JSON data"),
        ("1: one\n", "context keys are text, got 1"),
    ], ids=["list", "empty", "not-yaml", "date", "number-key"])
    def test_a_context_file_that_is_no_mapping_of_json_data(
            self, folder: Path, text: str, fragment: str) -> None:
        (folder / "context.yaml").write_text(text)
        one_error_line(cli("run", "vip.yaml", "--context-file", "context.yaml", cwd=folder),
                       "--context-file context.yaml: ", fragment)
