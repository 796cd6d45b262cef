"""`lint: ignore:` in a definition: a warning acknowledged with a reason is counted, not shown;
an error, an unknown code, a missing reason and a code that never fires are findings."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from small_workflow import base, step_of

from harness.sim.identity import definition_digest
from harness.sim.simulator import SimOptions, Simulator, plan_for
from reference_machine import (
    Acknowledged,
    DefinitionError,
    Finding,
    LintReport,
    Severity,
    WorkflowSpec,
    lint,
    lint_report,
    load_definition,
)
from reference_machine.findings import CODES, IGNORE_CODES

ROOT = Path(__file__).resolve().parents[2]
REASON = "the call is a read; doing it twice is harmless"


def warned() -> dict[str, Any]:
    """Gives the small workflow with one warning: its step is irreversible and unguarded."""
    data = base()
    step_of(data)["reversible"] = False
    return data


def ignoring(data: dict[str, Any], **ignore: str | None) -> dict[str, Any]:
    """Gives `data` with `lint: {ignore: ...}` (codes written with `_` for `-`)."""
    data["lint"] = {"ignore": {code.replace("_", "-"): why for code, why in ignore.items()}}
    return data


def codes(findings: tuple[Finding, ...] | list[Finding]) -> list[str]:
    return [finding.code for finding in findings]


class TestAcknowledged:
    def test_the_warning_fires_without_an_ignore(self) -> None:
        """The base of these cases has exactly the one warning they acknowledge."""
        assert codes(lint(warned())) == ["irreversible-unguarded"]

    def test_an_acknowledged_warning_is_kept_apart_with_its_reason(self) -> None:
        """lint shows nothing; lint_report keeps the finding and the reason given."""
        data = ignoring(warned(), irreversible_unguarded=REASON)
        assert lint(data) == []
        report = lint_report(data)
        assert report.findings == ()
        [acknowledged] = report.acknowledged
        assert acknowledged.reason == REASON
        assert acknowledged.finding.code == "irreversible-unguarded"
        assert acknowledged.finding.severity is Severity.WARNING
        assert acknowledged.finding.location == "states.work.step"

    def test_loading_accepts_it_and_the_definition_keeps_it(self) -> None:
        """load_definition takes the `lint:` key; the warning moves to `acknowledged`."""
        definition = load_definition(ignoring(warned(), irreversible_unguarded=REASON))
        assert definition.warnings == ()
        assert [a.finding.code for a in definition.acknowledged] == ["irreversible-unguarded"]
        assert lint_report(definition) == LintReport((), definition.acknowledged)

    def test_other_warnings_still_show(self) -> None:
        """Only the code named is acknowledged; another warning is still reported."""
        data = ignoring(warned(), irreversible_unguarded=REASON)
        data["states"]["start"] = {"initial": True, "on": {"go": "work"}}  # implicit-wait
        assert codes(lint(data)) == ["implicit-wait"]
        assert [a.finding.code for a in lint_report(data).acknowledged] == [
            "irreversible-unguarded"]

    def test_every_occurrence_of_the_code_is_acknowledged(self) -> None:
        """A code acknowledged covers each state it fires in, each listed apart."""
        data = warned()
        data["states"]["work"]["on"]["step.succeeded"] = "again"
        data["states"]["again"] = {"step": {"tool": "svc.call", "reversible": False},
                                   "on": {"step.succeeded": "done", "step.failed": "failed"}}
        assert codes(lint(data)) == ["irreversible-unguarded"] * 2
        report = lint_report(ignoring(data, irreversible_unguarded=REASON))
        assert report.findings == ()
        assert [a.finding.location for a in report.acknowledged] == [
            "states.work.step", "states.again.step"]

    def test_the_reason_is_read_from_yaml_with_the_line(self) -> None:
        """In a YAML file, the acknowledged finding keeps the line of what it is about."""
        text = textwrap.dedent("""\
            name: wf
            tools:
              svc.call: {idempotency_keys: true}
            events:
              go: {}
            lint:
              ignore:
                irreversible-unguarded: the call only reads
            states:
              start:
                initial: true
                type: wait
                after: {delay: 1h, target: failed}
                on: {go: work}
              work:
                step: {tool: svc.call, reversible: false}
                on: {step.succeeded: done, step.failed: failed}
              done: {type: final, outcome: success}
              failed: {type: final, outcome: failure}
            """)
        report = lint_report(text)
        assert report.findings == ()
        assert report.acknowledged == (Acknowledged(
            Finding(Severity.WARNING, "irreversible-unguarded", "states.work.step",
                    "step 'work' is irreversible with neither approval nor compensation",
                    ("work", "svc.call"), 16), "the call only reads"),)


class TestRefused:
    def test_an_error_cannot_be_acknowledged(self) -> None:
        """Naming an error's code is itself an error, and the error still shows."""
        data = ignoring(base(), unknown_tool="we add it later")
        step_of(data)["tool"] = "svc.missing"
        findings = lint(data)
        assert sorted(codes(findings)) == ["lint-ignore-refused", "unknown-tool"]
        [refused] = [f for f in findings if f.code == "lint-ignore-refused"]
        assert refused.severity is Severity.ERROR
        assert refused.location == "lint.ignore.unknown-tool"
        assert refused.ids == ("unknown-tool",)
        assert "errors cannot be acknowledged" in refused.message

    def test_an_error_code_is_refused_even_where_it_does_not_fire(self) -> None:
        """The refusal does not depend on the error firing: loading fails, naming the entry."""
        with pytest.raises(DefinitionError,
                           match=r"lint\.ignore\.approval-bypass: 'approval-bypass' is an "
                                 r"error, and errors cannot be acknowledged"):
            load_definition(ignoring(base(), approval_bypass="we know"))

    @pytest.mark.parametrize("code", sorted(IGNORE_CODES))
    def test_the_ignore_lists_own_codes_are_refused(self, code: str) -> None:
        """A finding about `lint: ignore:` cannot be acknowledged in it."""
        findings = lint(ignoring(base(), **{code.replace("-", "_"): "hush"}))
        assert codes(findings) == ["lint-ignore-refused"]
        assert "about `lint: ignore:` itself" in findings[0].message

    def test_an_unknown_code_is_an_error_with_a_suggestion(self) -> None:
        """A code no check reports is refused, with the closest warning's code."""
        findings = lint(ignoring(warned(), irreversible_unguardd=REASON))
        assert sorted(codes(findings)) == ["irreversible-unguarded", "lint-ignore-unknown"]
        [unknown] = [f for f in findings if f.code == "lint-ignore-unknown"]
        assert unknown.severity is Severity.ERROR
        assert unknown.location == "lint.ignore.irreversible-unguardd"
        assert "(did you mean 'irreversible-unguarded'?)" in unknown.message

    @pytest.mark.parametrize("reason", [None, "", "   "])
    def test_a_reason_is_required(self, reason: str | None) -> None:
        """No reason, or a blank one, is an error; the warning is not acknowledged."""
        report = lint_report(ignoring(warned(), irreversible_unguarded=reason))
        assert sorted(codes(report.findings)) == ["irreversible-unguarded", "lint-ignore-reason"]
        assert report.acknowledged == ()
        with pytest.raises(DefinitionError, match=r"acknowledging 'irreversible-unguarded' "
                                                  r"needs a reason"):
            load_definition(ignoring(warned(), irreversible_unguarded=reason))

    def test_a_reason_must_be_text(self) -> None:
        """A reason that is not a string is a schema error at its location."""
        data = warned()
        data["lint"] = {"ignore": {"irreversible-unguarded": ["a", "list"]}}
        [finding] = lint(data)
        assert finding.code == "schema"
        assert finding.location == "lint.ignore.irreversible-unguarded"

    def test_an_unknown_key_under_lint_is_a_schema_error(self) -> None:
        """`lint:` holds only `ignore:`; a misspelling gets a suggestion."""
        data = warned()
        data["lint"] = {"ignroe": {"irreversible-unguarded": REASON}}
        [finding] = lint(data)
        assert finding.code == "schema"
        assert "unknown key 'ignroe' (did you mean 'ignore'?)" in finding.message


class TestStale:
    def test_a_code_that_never_fires_is_a_stale_warning(self) -> None:
        """Acknowledging a warning the definition does not have warns, and still loads."""
        data = ignoring(base(), irreversible_unguarded=REASON)
        findings = lint(data)
        assert codes(findings) == ["lint-ignore-stale"]
        assert findings[0].severity is Severity.WARNING
        assert findings[0].location == "lint.ignore.irreversible-unguarded"
        assert codes(load_definition(data).warnings) == ["lint-ignore-stale"]

    def test_no_stale_warning_while_the_definition_has_errors(self) -> None:
        """With errors some checks stop early, so what did not fire is not called stale."""
        data = ignoring(base(), irreversible_unguarded=REASON)
        step_of(data)["tool"] = "svc.missing"
        assert codes(lint(data)) == ["unknown-tool"]


class TestBehaviourUnchanged:
    def test_the_digest_leaves_the_lint_block_out(self) -> None:
        """Acknowledging a warning keeps the definition's digest (replay files stay valid)."""
        plain = load_definition(warned())
        acknowledged = load_definition(ignoring(warned(), irreversible_unguarded=REASON))
        assert definition_digest(acknowledged) == definition_digest(plain)
        assert definition_digest(load_definition(base())) != definition_digest(plain)

    def test_a_simulation_runs_the_same(self) -> None:
        """The same seed gives the same history with or without the `lint:` block."""
        histories = []
        for data in (warned(), ignoring(warned(), irreversible_unguarded=REASON)):
            definition = load_definition(data)
            simulator = Simulator(definition, SimOptions(seed=7, plan=plan_for(definition)))
            histories.append(simulator.run().history)
        assert histories[0] == histories[1]
        assert len(histories[0]) > 2

    def test_the_json_schema_describes_it(self) -> None:
        """The definitions' JSON Schema takes `lint: {ignore: {code: reason}}` and no other
        shape."""
        schema = WorkflowSpec.model_json_schema()
        validator = jsonschema.Draft202012Validator(schema)
        assert not list(validator.iter_errors(ignoring(warned(), irreversible_unguarded=REASON)))
        with pytest.raises(jsonschema.ValidationError, match="not valid under any of the given"):
            validator.validate({**warned(), "lint": {"ignore": {"implicit-wait": 3}}})
        with pytest.raises(jsonschema.ValidationError, match="Additional properties"):
            validator.validate({**warned(), "lint": {"skip": {}}})


def _emitted(path: Path) -> dict[str, set[Severity]]:
    """Gives each finding code a module reports, with the severities it reports it with:
    `sink.error("code", ...)`, `sink.warning("code", ...)`, `Finding(Severity.X, "code", ...)`.
    """
    found: dict[str, set[Severity]] = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call) or len(node.args) < 2:
            continue
        func, first, second = node.func, node.args[0], node.args[1]
        if isinstance(func, ast.Attribute) and func.attr in ("error", "warning") and isinstance(
                first, ast.Constant) and isinstance(first.value, str):
            severity = Severity.ERROR if func.attr == "error" else Severity.WARNING
            found.setdefault(first.value, set()).add(severity)
        elif isinstance(func, ast.Name) and func.id == "Finding" and isinstance(
                first, ast.Attribute) and isinstance(second, ast.Constant):
            found.setdefault(str(second.value), set()).add(Severity[first.attr])
    return found


class TestCodes:
    def test_the_codes_are_those_the_checks_report(self) -> None:
        """CODES lists exactly the codes the native checks report, each with its severity."""
        emitted: dict[str, set[Severity]] = {}
        package = ROOT / "reference_machine"
        modules = [*sorted((package / "_definition").glob("*.py")),
                   package / "_load.py", package / "documents.py"]
        for module in modules:
            for code, severities in _emitted(module).items():
                emitted.setdefault(code, set()).update(severities)
        assert len(emitted) > 60  # the parse found the checks
        assert {code: {severity} for code, severity in CODES.items()} == emitted
