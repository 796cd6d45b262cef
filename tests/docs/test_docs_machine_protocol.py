"""The machine-under-test guide (`docs/machine-protocol.md`) and its template
(`docs/examples/machine_template.py`): every registered invariant is in the guide's table, and
every method, field and record it documents is the code's; the template fuzzes to `held` with
every fault on, taking transitions; a change of one line to it makes the campaign fail with
the invariant that guards that line; and every Python block of the page runs.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from click.testing import CliRunner

import harness
from fault_injection import FaultKind
from harness import (
    ApprovalWait,
    Call,
    FuzzOptions,
    MachineUnderTest,
    Observation,
    SimOptions,
    fuzz,
)
from harness.cli.main import cli
from reference_machine import Commit, Success

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "machine-protocol.md"
TEMPLATE = "docs.examples.machine_template"
TARGET = f"{TEMPLATE}:CartMachine"
RUNS = 100
#: Fault kinds a campaign of the template must inject, so that its `held` means something.
FAULTS_MET = {"crash", "store_write_failure", "second_worker", "duplicate_event"}
BLOCK = re.compile(r"^```python\n(.*?)^```", flags=re.DOTALL | re.MULTILINE)
INCLUDE = '--8<-- "docs/examples/machine_template.py"'


def template() -> ModuleType:
    """Gives the template module, imported from the repository's root as the command line
    imports a `module:attribute` target (`docs` is a folder, not an installed package)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return importlib.import_module(TEMPLATE)


def page() -> str:
    return PAGE.read_text(encoding="utf-8")


def section(title: str) -> str:
    """Gives the text of the page's `## {title}` section."""
    text = page()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else None]


def table_names(text: str) -> list[str]:
    """Gives the code-quoted name in the first cell of each row of the tables in `text`."""
    return re.findall(r"^\| `([\w.]+)`", text, flags=re.MULTILINE)


def python_blocks() -> list[str]:
    """Gives each Python block of the page but the template's include."""
    return [code for code in BLOCK.findall(page()) if INCLUDE not in code]


def broken(runtime: str, method: str, body: Any) -> Any:
    """Gives the template's machine with one method of its runtime changed."""
    module = template()
    variant = type(runtime, (module.CartRuntime,), {method: body})
    return type(f"{runtime}Machine", (module.CartMachine,), {"runtime_class": variant})


def _key_per_attempt(self: Any, execution_id: str, attempt: int) -> str:
    return f"{execution_id}/charge/{attempt}"  # was: one key for every attempt


def _no_dedupe(self: Any, record: Any, event: Any) -> bool:
    return False  # was: `event.id in record.seen`


class TestThePage:
    """The page documents what the code has, all of it."""

    def test_every_registered_invariant_is_in_the_table(self) -> None:
        """Each built-in invariant of `harness.INVARIANTS` has its row, and no row names one
        that is not registered."""
        registered = {name for name, rule in harness.INVARIANTS.items() if rule.builtin}
        rows = table_names(section("What each invariant needs"))
        assert len(rows) == len(set(rows)), "an invariant has two rows"
        assert set(rows) == registered, (f"missing: {sorted(registered - set(rows))}; not "
                                         f"registered: {sorted(set(rows) - registered)}")

    def test_every_observation_field_is_in_its_table(self) -> None:
        """`Observation`'s fields are the rows of its table, in order; `ApprovalWait`'s are
        rows of the next one; `Call`'s are named."""
        text = section("`Observation`")
        names = table_names(text)
        assert names[:len(Observation._fields)] == list(Observation._fields)
        assert [n for n in names if n in ApprovalWait._fields] == list(ApprovalWait._fields)
        assert f"`Call({', '.join(Call._fields[:2])}, compensation=False)`" in text

    def test_every_method_is_in_the_methods_table(self) -> None:
        """Each method of `MachineUnderTest`, and `watch`, has a row of the methods table."""
        rows = section("The methods").split("\n### ")[0]
        for name in ("start", "deliver", "advance", "complete", "crash", "recover", "observe",
                     "worker", "watch"):
            assert re.search(rf"^\| `{name}\(", rows, flags=re.MULTILINE), name
            if name != "watch":
                assert callable(getattr(MachineUnderTest, name)), name

    def test_every_commit_field_is_told(self) -> None:
        """Each field of `Commit` is either a row of the `watch()` table or said not read."""
        text = section("`watch()`: commits and recorded results")
        not_read = text.split("Not read:", 1)[1].split("\n\n", 1)[0]
        told = set(table_names(text)) | set(re.findall(r"`(?:Commit\.)?(\w+)`", not_read))
        missing = {field.name for field in dataclasses.fields(Commit)} - told
        assert not missing, missing

    def test_the_template_is_included_whole(self) -> None:
        """The template is included by the snippets syntax inside a Python block, and test_docs
        is told which test runs it."""
        text = page()
        assert f"```python\n{INCLUDE}\n```" in text
        above = text[:text.index(f"```python\n{INCLUDE}")].rstrip("\n").rsplit("\n", 1)[-1]
        assert above == ("<!-- docs: run by tests/docs/test_docs_machine_protocol.py::"
                         "test_the_template_fuzzes_to_held -->")

    def test_the_commands_name_the_template(self) -> None:
        """The page's command fuzzes the machine the template defines."""
        assert f"fsmharness fuzz {TARGET} --runs {RUNS}" in page()
        assert template().CartMachine.definition is template().DEFINITION

    @pytest.mark.parametrize("code", python_blocks(),
                             ids=[f"block{n}" for n in range(len(python_blocks()))])
    def test_every_python_block_runs(self, code: str, tmp_path: Path) -> None:
        """Each Python block but the include runs in a fresh process, from the root."""
        assert 0 < len(python_blocks()) <= 3, "keep the page's Python blocks few"
        script = tmp_path / "block.py"
        script.write_text(code, encoding="utf-8")
        done = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True,
                              text=True, timeout=300, check=False,
                              env={"PATH": str(Path(sys.executable).parent),
                                   "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)})
        assert done.returncode == 0, f"{code}\n{done.stderr[-3000:]}"


class TestTheTemplate:
    """The template is a sound machine, and each of its rules is there for a fault."""

    def test_is_a_machine_under_test(self) -> None:
        """An instance has every method of the protocol, `watch` too."""
        module = template()
        tools = {"payments.charge": lambda input, key: Success({"charge_id": "c-1"})}
        machine = module.CartMachine(module.DEFINITION, tools, lambda point: None)
        assert isinstance(machine, MachineUnderTest)
        assert callable(getattr(machine, "watch", None))

    @pytest.mark.parametrize("swarm", [[], ["--no-swarm"]], ids=["swarm", "whole_plan"])
    def test_the_template_fuzzes_to_held(self, swarm: list[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
        """`fsmharness fuzz docs.examples.machine_template:CartMachine --runs 100` holds, with
        every fault kind of the plan on (drawn per run, or all in each run), injecting the
        faults that test durability, and taking the declared transitions."""
        monkeypatch.chdir(ROOT)
        result = CliRunner().invoke(cli, ["fuzz", TARGET, "--runs", str(RUNS), "--no-report",
                                          "--json", *swarm])
        assert result.exit_code == 0, result.output
        (report,) = json.loads(result.stdout)["targets"]
        assert report["held"] and not report["vacuous"], report["failures"]
        coverage: Mapping[str, Any] = report["coverage"]
        assert coverage["transitions"]["reached"] > 0
        for move in (["cart", "checkout", "charging"], ["charging", "step.succeeded", "paid"]):
            assert move not in coverage["transitions"]["missing"], move  # the charge was made
        # every kind the definition can take: all but wrong_correlation (it has no `correlate:`)
        # and forged_approval (it has no approval)
        assert coverage["faults"]["of"] == len(FaultKind) - 2
        assert set(report["faults"]) >= FAULTS_MET, report["faults"]

    def test_holds_with_more_executions_and_faults(self) -> None:
        """With six executions and every fault kind at ten times its rate it still holds."""
        module = template()
        plan = harness.Simulator(module.DEFINITION).plan
        dense = dataclasses.replace(plan, rates=tuple(
            dataclasses.replace(rate, rate=min(1.0, rate.rate * 10)) for rate in plan.rates))
        report = fuzz(module.DEFINITION, FuzzOptions(
            runs=RUNS, replay_dir=None, sim=SimOptions(executions=6, plan=dense)),
            machine=module.CartMachine)
        assert report.verdict == "held", [str(f.violations[0]) for f in report.failures]

    @pytest.mark.parametrize(("machine", "rule"), [
        (broken("KeyPerAttempt", "key_of", _key_per_attempt), "no_duplicate_effect"),
        (broken("NoDedupe", "already_seen", _no_dedupe), "delivered_once"),
    ], ids=["key_per_attempt", "no_dedupe"])
    def test_one_line_changed_fails(self, machine: Any, rule: str) -> None:
        """A key minted per attempt lets a retry after a timeout charge twice; a runtime that
        does not dedupe takes a redelivered `item.added` twice: the campaign of the same runs
        fails with the invariant that guards the line."""
        report = fuzz(template().DEFINITION, FuzzOptions(runs=RUNS, replay_dir=None),
                      machine=machine)
        assert report.verdict == "violated"
        assert report.failures[0].rule == rule, [str(v) for v in report.failures[0].violations]
