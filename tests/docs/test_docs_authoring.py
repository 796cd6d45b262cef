"""The definition authoring guide (`docs/authoring.md`) and its worked example, the stages under
`docs/examples/authoring/`: every stage lints with no finding, fuzzes to `held` taking
transitions, and its campaign reaches what the page's section on it explains; every definition
written on the page loads; every file the page includes is there; and the expression section's
examples are accepted and rejected as the page says, with the error it quotes.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from harness import Committed, FuzzOptions, fuzz, simulate
from harness.cli.main import cli
from reference_machine import DefinitionError, lint, load_definition

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "authoring.md"
EXAMPLES = ROOT / "docs" / "examples" / "authoring"
STAGES = sorted(EXAMPLES.glob("*.yaml"))
RUNS = 200
SNIPPET = re.compile(r'^--8<-- "([^"]+)"$', flags=re.MULTILINE)
VERDICT = re.compile(r"^(\w+)\s+\S+: .*; coverage states (\d+)/(\d+), transitions (\d+)/(\d+)",
                     flags=re.MULTILINE)

#: What each stage's campaign must reach: the moves (source, event or `forced:<reason>`,
#: target) that show the construct its section explains at work.
REACHES: dict[str, set[tuple[str, str, str]]] = {
    "refund_1_lookup.yaml": {
        ("looking_up", "step.succeeded", "refundable"),  # the output kept by `assign`
        ("looking_up", "step.succeeded", "not_refundable"),  # a guard on the output
    },
    "refund_2_propose.yaml": {
        ("looking_up", "step.succeeded", "proposing"),
        ("proposing", "step.succeeded", "not_refundable"),  # the proposal over what was paid
        ("proposing", "step.succeeded", "proposed"),
    },
    "refund_3_return.yaml": {
        ("awaiting_return", "carrier.parcel_returned", "returned"),  # the webhook
        ("awaiting_return", "timer.fired", "not_returned"),  # its timeout, `after:`
        ("awaiting_return", "customer.withdrew", "withdrawn"),
    },
    "refund_4_approval.yaml": {
        ("awaiting_return", "carrier.parcel_returned", "awaiting_approval"),
        ("awaiting_approval", "approval.granted", "refunding"),
        ("awaiting_approval", "approval.denied", "rejected"),
        ("refunding", "step.succeeded", "refunded"),
    },
    "refund_5_budgets.yaml": {
        ("awaiting_return", "ticket.updated", "proposing"),  # the loop the budgets bound
        ("awaiting_return", "forced:visits_max", "needs_human"),
        ("proposing", "forced:cost_max", "needs_human"),
        ("needs_human", "case.closed", "refunded"),
    },
    "refund_6_escalation.yaml": {  # the four ways to a person
        ("awaiting_return", "timer.fired", "needs_human"),
        ("awaiting_approval", "forced:approval_expired", "needs_human"),
        ("refunding", "forced:retries_exhausted", "needs_human"),
        ("notifying", "forced:ambiguous_failure", "needs_human"),
    },
    "refund_7_compensation.yaml": {
        ("refunding", "step.succeeded", "recording"),
        # in `recording` the refund's undo is always recorded, so its failure compensates
        ("recording", "step.failed", "failed"),
    },
    "refund_8_statechart.yaml": {
        ("routing", "always", "awaiting_approval"),  # the choice, both ways
        ("routing", "always", "refunding"),
        ("awaiting_return", "customer.message", "awaiting_return"),  # internal, from `open`
        ("paused", "case.resumed", "awaiting_approval"),  # history: back where it left
        ("paused", "case.resumed", "awaiting_return"),
    },
    "refund_9_parallel.yaml": {
        ("checking", "done", "proposing"),  # the join
        ("checking", "done", "not_refundable"),
        ("scoring", "step.succeeded", "scored"),
        ("restock", "step.succeeded", "line_restocked"),
        ("restocking", "done", "routing"),
    },
}


def page() -> str:
    return PAGE.read_text(encoding="utf-8")


def section(title: str) -> str:
    """Gives the text of the page's `## title` section, up to the next `## ` heading."""
    found = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", page(),
                      flags=re.DOTALL | re.MULTILINE)
    assert found is not None, f"no section '## {title}' on {PAGE.name}"
    return found.group(1)


def fenced(language: str) -> list[tuple[str, str]]:
    """Gives (the line just above it, the block) for each fenced block of `language` on the
    page, as written (a block inside a list item is dedented)."""
    text = page()
    found = []
    for block in re.finditer(rf"^( *)```{language}\n(.*?)^\1```", text,
                             flags=re.DOTALL | re.MULTILINE):
        indent = len(block.group(1))
        body = "".join(line[indent:] for line in block.group(2).splitlines(keepends=True))
        before = text[:block.start()].rstrip("\n").rsplit("\n", 1)[-1]
        found.append((before, body))
    return found


def code_spans(cell: str) -> list[str]:
    """Gives the text of each `code span` of a table cell."""
    return re.findall(r"`([^`]+)`", cell)


def table(text: str, heading: str) -> tuple[list[str], list[list[str]]]:
    """Gives the header cells and the rows' cells of the Markdown table in `text` whose header
    holds `heading`."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines)
                 if line.startswith("| ") and heading in line)
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("| "):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
    return [cell.strip() for cell in lines[start].strip().strip("|").split(" | ")], rows


def test_the_example_has_its_stages() -> None:
    """Every stage is linked from the page, in order, with the fuzz command the tests run."""
    names = [path.name for path in STAGES]
    assert names == sorted(REACHES), names
    text = page()
    assert f"--runs {RUNS} --no-report" in text
    places = [text.index(f"(examples/authoring/{name})") for name in names]
    assert places == sorted(places), "the stages' table lists them out of order"


class TestStages:
    @pytest.mark.parametrize("path", STAGES, ids=[path.name for path in STAGES])
    def test_lints_clean(self, path: Path) -> None:
        """`fsmharness lint` finds no error and no warning."""
        assert lint(path) == []
        result = CliRunner().invoke(cli, ["lint", str(path)])
        assert result.exit_code == 0, result.output
        assert "1 file(s): 0 error(s), 0 warning(s)" in result.output, result.output

    @pytest.mark.parametrize("path", STAGES, ids=[path.name for path in STAGES])
    def test_fuzzes_to_held_taking_transitions(self, path: Path) -> None:
        """`fsmharness fuzz FILE --runs 100 --no-report` exits 0, `held`, taking transitions."""
        result = CliRunner().invoke(cli, ["fuzz", str(path), "--runs", str(RUNS), "--no-report"])
        assert result.exit_code == 0, result.output
        verdict = VERDICT.search(result.output)
        assert verdict is not None, result.output
        held, states, _, transitions, _ = verdict.groups()
        assert held == "held", result.output
        assert int(states) > 1 and int(transitions) > 0, result.output

    @pytest.mark.parametrize("path", STAGES, ids=[path.name for path in STAGES])
    def test_campaign_reaches_what_its_section_explains(self, path: Path) -> None:
        """The campaign takes the moves that show the construct the stage's section explains."""
        report = fuzz(path, FuzzOptions(runs=RUNS, replay_dir=None))
        assert report.held, report.verdict
        missing = REACHES[path.name] - set(report.coverage.transitions)
        assert not missing, f"{path.name}: the campaign never took {sorted(missing)}"
        if path.name == "refund_8_statechart.yaml":
            assert "open" in report.coverage.resumes
            assert {("refunding", "asked"), ("refunding", "not asked")} <= (
                report.coverage.approvals)
        if path.name == "refund_9_parallel.yaml":
            assert {"order", "risk", "restocking"} <= report.coverage.regions

    def test_compensation_voids_the_refund(self) -> None:
        """Stage 7's runs void the refund when the ledger refuses it, and then fail."""
        definition = load_definition(EXAMPLES / "refund_7_compensation.yaml")
        undone = [record for seed in range(RUNS) for record in simulate(definition, seed).history
                  if isinstance(record, Committed) and record.forced == "compensated"]
        assert undone, "no run compensated"
        assert {(record.from_state, record.state) for record in undone} == {
            ("recording", "failed")}


class TestPage:
    def test_every_definition_on_the_page_loads(self) -> None:
        """An inline YAML block loads with no warning, unless its first line is `# fragment`."""
        definitions = 0
        for _, block in fenced("yaml"):
            if SNIPPET.match(block.strip()):
                continue  # a stage's file, or part of one: tested above
            parsed = yaml.safe_load(block)
            if block.startswith("# fragment"):
                continue
            assert isinstance(parsed, dict) and "states" in parsed, (
                f"a YAML block that is no definition must start with '# fragment':\n{block}")
            assert load_definition(block).warnings == ()
            definitions += 1
        assert definitions >= 1

    def test_every_snippet_is_there(self) -> None:
        """Every `--8<--` include names a file and, after `:`, a section the file marks once."""
        text = page()
        included = SNIPPET.findall(text)
        assert included
        for target in included:
            path, _, name = target.partition(":")
            assert (ROOT / path).is_file(), target
            if name:
                source = (ROOT / path).read_text(encoding="utf-8")
                for mark in (f"# --8<-- [start:{name}]", f"# --8<-- [end:{name}]"):
                    assert source.count(mark) == 1, f"{target}: {mark!r}"
        for stage in STAGES:
            assert f"(examples/authoring/{stage.name})" in text, stage.name

    def test_the_expression_section_examples(self) -> None:
        """Each row's line is in the stage, and its change fails with the error the row quotes."""
        # a row: the syntax, a line of the stage as written, the line written instead, and the
        # loader's error; both syntaxes (`=` in a step's input, an expression alone) have rows
        header, rows = table(section("The expression language"), "Written instead")
        (name,) = re.findall(r"refund_\w+\.yaml", " ".join(header))
        path = EXAMPLES / name
        text = path.read_text(encoding="utf-8")
        load_definition(path)
        assert rows
        syntaxes = set()
        for syntax, written, instead, error in rows:
            (written_line,), (instead_line,), (quoted,) = (
                code_spans(written), code_spans(instead), code_spans(error))
            syntaxes.add("input" if syntax.startswith("`=`") else "bare")
            assert text.count(written_line) == 1, f"{name} does not hold {written_line!r} once"
            with pytest.raises(DefinitionError, match=re.escape(quoted)):
                load_definition(text.replace(written_line, instead_line))
        assert syntaxes == {"input", "bare"}


def test_the_python_example_runs(tmp_path: Path) -> None:
    """The page's Python example runs as written, from the project's root."""
    (code,) = [block for before, block in fenced("python")
               if "test_docs_authoring.py::test_the_python_example_runs" in before]
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
