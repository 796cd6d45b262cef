"""The CLI's definition commands: `lint`, `import`, `schema` and `diagram`, which check, convert,
describe and draw workflow definitions without running them."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import click
from rich.markup import escape

from harness.checks.adequacy import untested_findings
from harness.cli.common import (
    EXIT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    UsageProblem,
    command_targets,
    definition_files,
    import_modules,
    input_format_option,
    make_console,
    one_line,
    write_atomically,
)
from harness.report.diagram import diagram_of
from harness.report.document import report_schema
from harness.report.drawing import svg
from harness.report.mermaid import mermaid
from reference_machine import (
    DefinitionError,
    DefinitionSyntaxError,
    Finding,
    LintReport,
    Severity,
    WorkflowSpec,
    lint_report,
    load_definition,
)

__all__ = ["diagram_command", "import_command", "lint_command", "schema_command"]


@click.command("lint")
@click.argument("paths", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Print findings as JSON.")
@click.option("--quiet", "-q", is_flag=True, help="Print only errors and the summary.")
@click.option("--import", "modules", multiple=True, metavar="MODULE",
              help="Import a Python module first, so that the functions it registers with "
                   "@register_function can be named by `function:` guards and actions.")
@input_format_option()
def lint_command(paths: Sequence[str], as_json: bool, quiet: bool,
                 modules: Sequence[str], input_format: str | None) -> None:
    """Check workflow definition files (or folders of them) for errors and warnings.

    Exit 0 when no errors (warnings allowed), 1 when errors are found, 2 when a file cannot be
    read.
    """
    import_modules(modules)
    files = definition_files(paths)
    console = make_console(soft_wrap=True)
    results: list[dict[str, object]] = []
    errors = warnings = unreadable = acknowledged = 0
    for path in files:
        try:
            report = lint_report(path, format=input_format)
        except DefinitionSyntaxError as exc:
            report, unreadable = LintReport(exc.findings), unreadable + 1
        if not report.errors:  # what fuzz checks of the definition too: lint-clean is runnable
            report = replace(report, findings=(*report.findings,
                                               *_campaign_findings(path, input_format)))
        findings = report.findings
        file_errors = report.errors
        errors += len(file_errors)
        warnings += len(findings) - len(file_errors)
        acknowledged += len(report.acknowledged)
        results.append({"file": str(path), "findings": [_finding_json(f) for f in findings],
                        "acknowledged": [{**_finding_json(a.finding), "reason": a.reason}
                                         for a in report.acknowledged]})
        if as_json:
            continue
        if not findings:
            if not quiet:
                console.print(f"[green]ok[/green]    {escape(str(path))}"
                              + _acknowledged_note(len(report.acknowledged)))
            continue
        label = "[red]FAIL[/red]" if file_errors else "[yellow]warn[/yellow]"
        console.print(f"{label}  {escape(str(path))}"
                      + _acknowledged_note(len(report.acknowledged)))
        for finding in findings:
            if quiet and finding.severity is not Severity.ERROR:
                continue
            console.print(f"  {path}:{_finding_line(finding)}", markup=False)
    summary = {"files": len(files), "errors": errors, "warnings": warnings,
               "acknowledged": acknowledged, "unreadable": unreadable}
    if as_json:
        click.echo(json.dumps({"summary": summary, "results": results}, indent=2))
    else:
        console.print(f"{len(files)} file(s): {errors} error(s), {warnings} warning(s)"
                      + (f", {acknowledged} acknowledged" if acknowledged else "")
                      + (f", {unreadable} unreadable" if unreadable else ""))
    if unreadable:
        sys.exit(EXIT_USAGE)
    sys.exit(EXIT_FOUND if errors else EXIT_OK)


def _campaign_findings(path: Path, input_format: str | None) -> tuple[Finding, ...]:
    """Gives the errors a campaign would refuse the definition for that its loader does not
    see (`untested_findings`)."""
    try:
        return untested_findings(load_definition(path, format=input_format))
    except DefinitionError:
        return ()  # told by lint_report already


def _acknowledged_note(count: int) -> str:
    """Gives ` (2 warnings acknowledged)` after a file's name, or nothing."""
    return f" ({count} warning{'s' if count != 1 else ''} acknowledged)" if count else ""


def _finding_line(finding: Finding) -> str:
    line = f"{finding.line}:" if finding.line is not None else ""
    return f"{line} {finding.severity}: {finding.location or '(file)'}: {finding.message} " \
           f"[{finding.code}]"


def _finding_json(finding: Finding) -> dict[str, object]:
    return {
        "severity": str(finding.severity),
        "code": finding.code,
        "location": finding.location,
        "line": finding.line,
        "message": finding.message,
        "ids": list(finding.ids),
    }


@click.command("import")
@click.argument("paths", nargs=-1, required=True)
@input_format_option()
@click.option("--output", "-o", type=click.Path(dir_okay=False), metavar="FILE",
              help="Write the native YAML to this file instead of standard output.")
@click.option("--survey", is_flag=True,
              help="Import every file (folders: each file whose name tells a format) and "
                   "print a Markdown table: imported, approximated by kind, refused and why.")
@click.option("--w3c", is_flag=True,
              help="Run the W3C SCXML conformance tests of the folders on the reference "
                   "machine and print how many reach `pass`, and why each other did not.")
@click.option("--import", "modules", multiple=True, metavar="MODULE",
              help="Import a Python module first (for the functions it registers).")
def import_command(paths: Sequence[str], input_format: str | None, output: str | None,
                   survey: bool, w3c: bool, modules: Sequence[str]) -> None:
    """Read a Step Functions (ASL), XState or SCXML file and write it as a native definition
    (YAML), what was approximated or left out as comments at its head and on stderr.

    Exit 0 when what was read is a sound definition, 1 when the native checks find errors in
    it (written all the same, to edit), 2 when it cannot be imported. With --survey or --w3c,
    PATHS may be many files and folders, and the table is the output (exit 0).
    """
    from reference_machine.importers import import_document, lint_imported, to_yaml

    import_modules(modules)
    if survey or w3c:
        _import_tables(paths, survey, w3c, output)
        return
    if len(paths) != 1:
        raise UsageProblem(f"import takes one file ({len(paths)} were given); --survey "
                           f"takes many")
    path = paths[0]
    fmt = None if input_format == "native" else input_format
    try:
        imported = import_document(path, format=fmt)
    except DefinitionError as exc:
        raise UsageProblem(one_line(exc)) from exc
    errors = [f for f in lint_imported(path, format=imported.format)
              if f.severity is Severity.ERROR]
    text = to_yaml(imported)
    if output is None:
        click.echo(text, nl=False)
    else:
        write_atomically(output, text)
    for finding in [*imported.findings, *errors]:
        click.echo(f"{path}:{_finding_line(finding)}", err=True)
    sys.exit(EXIT_FOUND if errors else EXIT_OK)


def _import_tables(paths: Sequence[str], survey: bool, w3c: bool, output: str | None) -> None:
    """Prints (or writes) the survey of `paths`, or their W3C conformance, as Markdown."""
    if survey and w3c:
        raise UsageProblem("--survey and --w3c are two reports: give one")
    missing = [path for path in paths if not Path(path).exists()]
    if missing:
        raise UsageProblem(f"{missing[0]}: no such file or folder")
    if survey:
        from reference_machine.importers.survey import survey as survey_of
        text = survey_of(paths).markdown()
    else:
        from reference_machine.importers import w3c as conformance
        folders = [path for path in paths if not Path(path).is_dir()]
        if folders:
            raise UsageProblem(f"{folders[0]}: --w3c takes folders of W3C tests")
        results = [each for path in paths for each in conformance.conformance(path)]
        text = conformance.markdown(results)
    if output is None:
        click.echo(text, nl=False)
    else:
        write_atomically(output, text)


@click.command("schema")
@click.option("--output", "-o", type=click.Path(dir_okay=False, writable=True),
              help="Write the schema to this file instead of standard output.")
@click.option("--report", "of_report", is_flag=True,
              help="The schema of report documents (reports/*.json) instead.")
def schema_command(output: str | None, of_report: bool) -> None:
    """Print the JSON Schema of workflow definition files (for editors and CI)."""
    if of_report:
        schema = report_schema()
    else:
        schema = WorkflowSpec.model_json_schema()
        schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
        schema["title"] = "fsmharness workflow definition"
    text = json.dumps(schema, indent=2, sort_keys=True) + "\n"
    if output is None:
        click.echo(text, nl=False)
        return
    write_atomically(output, text)  # never a half-written schema


@click.command("diagram")
@click.argument("target")
@click.option("--format", "form", type=click.Choice(["mermaid", "svg"]), default="mermaid",
              show_default=True, help="Mermaid stateDiagram-v2 text, or an SVG: laid out by "
                                      "Graphviz with the diagrams extra (pygraphviz), else a "
                                      "table of the states and transitions.")
@click.option("--output", "-o", type=click.Path(dir_okay=False), metavar="FILE",
              help="Write to this file instead of standard output.")
@click.option("--import", "modules", multiple=True, metavar="MODULE",
              help="Import a Python module first (for the functions it registers).")
@input_format_option("--input-format")
def diagram_command(target: str, form: str, output: str | None,
                    modules: Sequence[str], input_format: str | None) -> None:
    """Draw a workflow definition as a state diagram."""
    found = command_targets([target], None, modules, input_format)
    if len(found) != 1:
        raise UsageProblem(f"{target}: diagram takes one definition; {len(found)} were found")
    graph = diagram_of(found[0].definition)
    text = mermaid(graph) if form == "mermaid" else svg(graph) + "\n"
    if output is None:
        click.echo(text, nl=False)
        return
    write_atomically(output, text)
