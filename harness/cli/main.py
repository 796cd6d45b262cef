"""The `fsmharness` command line.

Exit codes: 0 all held (or clean), 1 violations or lint errors found, 2 bad input or usage, with
one clear line on stderr and no traceback. A bug in fsmharness itself shows its traceback and asks
to be reported.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import sys
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape

from fault_injection import FaultPlan, FaultPlanError, load_plan
from fault_injection import no_faults as no_faults_plan
from harness.checks.adequacy import untested_findings
from harness.checks.invariants import Violation, check
from harness.cli.commands import (
    bench_command,
    command_targets,
    diagram_command,
    explore_command,
    fuzz_command,
    init_command,
    report_command,
    write_atomically,
)
from harness.cli.common import (
    EXIT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    Finite,
    UsageProblem,
    context_for,
    context_options,
    definition_files,
    import_modules,
    input_format_option,
    make_console,
    start_context,
)
from harness.engines import isolation
from harness.engines.isolation import Died
from harness.engines.replay import ReplayError, replay
from harness.errors import HarnessError
from harness.files import check_output
from harness.report.document import report_schema
from harness.report.redact import redact, redact_history, secret_values
from harness.sim.history import write_jsonl
from harness.sim.simulator import (
    EXECUTIONS_MAX,
    SimOptions,
    SimulationResult,
    Simulator,
    plan_for,
)
from reference_machine import (
    DefinitionError,
    DefinitionSyntaxError,
    Finding,
    LintReport,
    Severity,
    WorkflowDefinition,
    WorkflowSpec,
    lint_report,
    load_definition,
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="fsmharness")
def cli() -> None:
    """Test and simulate durable agent state machines."""


@cli.command("lint")
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


@cli.command("import")
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
        raise UsageProblem(_one_line(exc)) from exc
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


@cli.command("schema")
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


@cli.command("run")
@click.argument("paths", nargs=-1, required=True)
@click.option("--seed", type=int, default=0, show_default=True,
              help="The seed: the same seed gives the same history, byte for byte.")
@click.option("--plan", "plan_path", type=click.Path(dir_okay=False), metavar="PLAN",
              help="A fault plan (YAML or JSON); by default every fault the definition can "
                   "take, at the default rates.")
@click.option("--no-faults", is_flag=True, help="Inject no faults.")
@click.option("--swarm", is_flag=True,
              help="Swarm mode: draw a subset of fault kinds and rates from the seed.")
@click.option("--executions", type=click.IntRange(min=1, max=EXECUTIONS_MAX), default=3,
              show_default=True,
              help="Executions run side by side, sharing the tools.")
@click.option("--steps", type=click.IntRange(min=1), default=1000, show_default=True,
              help="The bound on simulated steps.")
@click.option("--step-timeout", type=Finite(min=0, max=1_000_000), default=10.0, show_default=True,
              metavar="SECONDS", help="Wall time one step of the machine may take before the "
                                      "run is failed as hung (0: no bound).")
@click.option("--history", "history_path", type=click.Path(dir_okay=False, writable=True),
              metavar="OUT.jsonl", help="Write the history, one JSON record a line (one "
                                        "definition file only).")
@click.option("--json", "as_json", is_flag=True, help="Print the summaries as JSON.")
@context_options
@click.option("--import", "modules", multiple=True, metavar="MODULE",
              help="Import a Python module first (for the functions it registers).")
@input_format_option()
def run_command(paths: Sequence[str], seed: int, plan_path: str | None, no_faults: bool,
                swarm: bool, executions: int, steps: int, step_timeout: float,
                history_path: str | None, as_json: bool, context_pairs: Sequence[str],
                context_path: str | None, modules: Sequence[str],
                input_format: str | None) -> None:
    """Run one seeded simulation of each workflow definition (files, folders of them, or
    MODULE:ATTR for a Python definition or a machine under test), with faults injected, and
    print what happened.

    Every invariant is checked over the run's history. Exit 0 when all held, 1 when one broke
    or the machine failed (raised, hung or answered nonsense), 2 on bad input.
    """
    if no_faults and (plan_path or swarm):
        raise UsageProblem("--no-faults cannot be combined with --plan or --swarm")
    context = start_context(context_pairs, context_path)
    targets = command_targets(paths, None, modules, input_format)
    if history_path is not None:
        if len(targets) != 1:
            raise UsageProblem(f"--history takes one definition; {len(targets)} were given")
        try:
            check_output(history_path, "--history")
        except HarnessError as exc:
            raise UsageProblem(str(exc)) from exc
    loaded = [(target.name, target.definition) for target in targets]
    try:
        given = None if plan_path is None else load_plan(plan_path)
        simulators = []
        for target in targets:
            definition = target.definition
            if given is not None:
                _check_plan(given, definition, plan_path or "")
            if no_faults:
                plan = no_faults_plan()
            elif given is not None:
                plan = replace(given, swarm=given.swarm or swarm)
            else:
                plan = plan_for(definition, swarm=swarm)
            simulators.append(Simulator(definition, SimOptions(
                seed=seed, executions=executions, steps_max=steps, plan=plan,
                step_timeout_s=step_timeout, context=context_for(definition, context)),
                target.machine))
    except (FaultPlanError, HarnessError) as exc:
        raise UsageProblem(str(exc)) from exc
    console = make_console(soft_wrap=True)
    summaries, failed = {}, False
    for (name, definition), simulator in zip(loaded, simulators, strict=True):
        try:
            result = _apart(simulator)
        except Died as died:  # the machine ended the process its run was in: its verdict
            failed = True
            summaries[name] = {"seed": seed, "status": "machine_exited",
                               "failure": {"problem": "exited", "message": died.how}}
            if not as_json:
                console.print(f"{escape(name)}: seed {seed}: [red]machine failed[/red]: it "
                              f"ended its process ({died.how}); its run's history ended with "
                              f"it" + (", and --history was not written" if history_path
                                       else ""))
            continue
        violations = [v for v in check(definition, result.history) if v.rule != "machine_ok"]
        failed = failed or result.failure is not None or bool(violations)
        if history_path is not None:
            try:
                write_jsonl(redact_history(definition, result.history), history_path,
                            "--history")
            except HarnessError as exc:
                raise UsageProblem(str(exc)) from exc
        secrets = secret_values(definition, result.history)
        summaries[name] = redact({**result.summary(),
                                  "violations": [v.to_dict() for v in violations]}, secrets)
        if not as_json:
            again = [f"--{flag}" if value is True else f"--{flag} {value}"
                     for flag, value in (("plan", plan_path), ("no-faults", no_faults),
                                         ("swarm", swarm), ("executions", executions),
                                         ("steps", steps),
                                         ("step-timeout", step_timeout != 10.0 and
                                          f"{step_timeout:g}")) if value]
            again += [f"--context-file {shlex.quote(context_path)}"] if context_path else []
            again += [f"--context {shlex.quote(pair)}" for pair in context_pairs]
            again += [f"--import {module}" for module in modules]
            _print_summary(console, name, summaries[name], result, " ".join(again),
                           violations, secrets)
    if as_json:
        single = len(summaries) == 1
        click.echo(json.dumps(next(iter(summaries.values())) if single else summaries,
                              indent=2, sort_keys=True))
    sys.exit(EXIT_FOUND if failed else EXIT_OK)


@cli.command("replay")
@click.argument("path", metavar="FILE")
@click.option("--definition", "definition_path", metavar="PATH",
              help="Replay on this definition file instead of the one the replay file "
                   "names: the same one moved elsewhere, or one edited since (to check a "
                   "fix): the recorded steps that no longer apply to it are skipped, and "
                   "said.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@click.option("--import", "modules", multiple=True, metavar="MODULE",
              help="Import a Python module first (for the functions it registers).")
def replay_command(path: str, definition_path: str | None, as_json: bool,
                   modules: Sequence[str]) -> None:
    """Replay a replay file a fuzz campaign or a Hypothesis run saved, and tell whether the
    same invariant breaks again.

    The definition is loaded from where the file says (or, run from another folder, found from
    the replay file's folder) and must not have changed since; the machine is imported from
    the file's `module:name` (the current folder is on the path). With --definition PATH, the
    recorded schedule runs on that definition, edited or not. Exit 1 when the invariant breaks
    again, 0 when it holds (fixed), 2 when the file cannot be replayed.
    """
    import_modules(modules)
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # the machine's module, as `python -m` finds it
    definition = None if definition_path is None else _given_definition(definition_path)
    try:
        outcome = replay(path, definition=definition, trusted=modules,
                         edited=definition is not None,
                         given_as="--definition PATH",
                         say=lambda line: click.echo(f"fsmharness: {line}", err=True))
    except ReplayError as exc:
        raise UsageProblem(str(exc)) from exc
    if as_json:
        click.echo(json.dumps({
            "file": path, "rule": outcome.rule, "reproduced": outcome.reproduced,
            "violation": told.to_dict() if (told := outcome.told()) else None,
            "expected": outcome.expected, "trace": outcome.trace(),
            "edited": outcome.edited, "skipped": list(outcome.skipped),
            "unscheduled": outcome.unscheduled, "sealed": outcome.sealed}, indent=2))
        sys.exit(EXIT_OK if outcome.violation is None else EXIT_FOUND)
    console = make_console(soft_wrap=True)
    for line in outcome.trace():
        console.print(f"  {line}", markup=False)
    if outcome.edited:
        _print_skipped(console, outcome.skipped, outcome.unscheduled)
    if (told := outcome.told()) is not None:  # the same rule broke, or the machine died
        label = "reproduced" if outcome.reproduced else "broke another way"
        console.print(f"[red]{label}[/red] {escape(str(told))}")
    elif outcome.edited:
        console.print(f"[green]fixed[/green]: {escape(outcome.rule)} holds on the edited "
                      f"definition (it broke as: {escape(outcome.expected)})")
        console.print(f"one schedule is not a campaign: fuzz the edited definition too "
                      f"(fsmharness fuzz {shlex.quote(definition_path or '')})", markup=False)
    else:
        console.print(f"[green]no longer fails[/green]: {escape(outcome.rule)} held "
                      f"(it broke as: {escape(outcome.expected)})")
        if not outcome.sealed:
            console.print("the file has no checksum (an older fsmharness wrote it): its rule, "
                          "seed and schedule are not sealed against edits; fuzz again to be "
                          "sure", markup=False)
    sys.exit(EXIT_OK if outcome.violation is None else EXIT_FOUND)


#: The skipped steps an edited replay prints; --json gives them all.
_SKIPPED_SHOWN = 10


def _print_skipped(console: Console, skipped: Sequence[str], unscheduled: int) -> None:
    """Prints what of the recorded schedule no longer applied to the edited definition."""
    if skipped:
        count = len(skipped)
        console.print(f"skipped {count} recorded step{'s' if count > 1 else ''} that no longer "
                      f"appl{'y' if count > 1 else 'ies'} to the edited definition:",
                      markup=False)
        for line in skipped[:_SKIPPED_SHOWN]:
            console.print(f"  {line}", markup=False)
        if count > _SKIPPED_SHOWN:
            console.print(f"  ... and {count - _SKIPPED_SHOWN} more (--json lists them all)",
                          markup=False)
    else:
        console.print("every recorded step applied to the edited definition", markup=False)
    if unscheduled:
        console.print(f"took {unscheduled} step{'s' if unscheduled > 1 else ''} the schedule "
                      f"did not have, where the edited definition offered none of its "
                      f"recorded actions", markup=False)


def _given_definition(path: str) -> WorkflowDefinition:
    """Loads the definition `--definition` names, or exits 2 saying why it cannot."""
    if not Path(path).exists():
        raise UsageProblem(f"--definition {path}: no such file")
    if Path(path).is_dir():
        raise UsageProblem(f"--definition {path}: is a folder; expected a definition file")
    try:
        return load_definition(path)
    except DefinitionError as exc:
        raise UsageProblem(f"--definition {_one_line(exc)}") from exc


def _check_plan(plan: FaultPlan, definition: WorkflowDefinition, source: str) -> None:
    """Checks the plan against the definition, naming the plan's file in the error."""
    try:
        plan.check(definition)
    except FaultPlanError as exc:
        raise FaultPlanError(exc.location, f"{exc.message} (in {definition.source})",
                             source, exc.line) from exc


def _apart(simulator: Simulator) -> SimulationResult:
    """Runs the simulation in a child process where the platform can fork (a machine that
    ends its process ends only that one: `Died`), else here."""
    return isolation.call(simulator.run) if isolation.available() else simulator.run()


#: What each kind of history record counts, in the words of `run`'s summary, in the order a
#: run goes (the run's own record, the faults and the world's applications are said apart).
_HAPPENINGS = (
    ("started", "executions started"), ("delivered", "events delivered"),
    ("decided", "decisions"), ("committed", "moves committed"),
    ("dispatched", "calls sent"), ("result_recorded", "results recorded"),
    ("timer_fired", "timers fired"), ("crashed", "crashes"), ("recovered", "recoveries"),
    ("replayed", "replays of the log"), ("observed", "observations of the machine"),
    ("healed", "stores healed"), ("machine_failed", "machine failures"),
)


def _happenings(records: Mapping[str, int]) -> str:
    """Gives the history's record counts in words: `4 executions started, 18 moves committed,
    ...` (the JSON summary's `records` keeps the kinds)."""
    said = [f"{records[kind]} {words}" for kind, words in _HAPPENINGS if records.get(kind)]
    return ", ".join(said) or "nothing"


def _print_summary(console: Console, file: str, summary: dict[str, Any],
                   result: SimulationResult, options: str,
                   violations: Sequence[Violation] = (),
                   secrets: frozenset[str] = frozenset()) -> None:
    """Prints a run's summary, every secret value redacted."""
    console.print(f"{escape(file)}: seed {summary['seed']}, {summary['steps']} steps, "
                  f"{summary['virtual_ms'] / 1000:g}s of virtual time: {summary['status']}")
    console.print(f"  what happened: {_happenings(summary['records'])}", markup=False)
    faults = ", ".join(f"{kind} {count}" for kind, count in summary["faults"].items())
    console.print(f"  faults injected: {faults or 'none'}", markup=False)
    console.print(f"  effects applied at the world: {summary['effects_applied']}")
    for eid, final in summary["final"].items():
        outcome = f" ({final['outcome']})" if final["outcome"] else ""
        console.print(f"  {eid}: {final['state']} [{final['status']}]{outcome}", markup=False)
    for violation in violations:
        console.print(f"[red]violated[/red] {escape(redact(str(violation), secrets))}")
    if result.failure is not None:
        failure = result.failure
        console.print(f"[red]machine failed[/red] at step {failure.step} ({failure.problem}): "
                      f"{escape(failure.error)}: {escape(redact(failure.message, secrets))}")
        if result.traceback:
            console.print(redact(result.traceback, secrets), markup=False)
    if result.failure is not None or violations:
        again = redact(options, secrets)  # a secret given with --context stays hidden
        console.print(f"replay: fsmharness run {file} --seed {summary['seed']} "
                      f"{again}".rstrip(), markup=False)
        if again != options:
            console.print("  (a secret given with --context is shown redacted: give it again)",
                          markup=False)
    else:
        console.print("  every invariant held")


for _command in (fuzz_command, explore_command, diagram_command, report_command, bench_command,
                 init_command):
    cli.add_command(_command)


def _one_line(error: DefinitionError) -> str:
    """Gives a definition's errors in one line: the first, and how many more `lint` shows."""
    if not error.findings:
        return str(error).splitlines()[0]
    more = len(error.findings) - 1
    return (f"{error.source}: {error.findings[0].render()}"
            + (f" (and {more} more error{'s' if more > 1 else ''}: fsmharness lint "
               f"{error.source})" if more else ""))


def main(argv: Sequence[str] | None = None) -> None:
    """Runs the CLI; user errors exit 2 with one line, harness bugs show their traceback."""
    for stream in (sys.stdout, sys.stderr):  # a machine's text may hold what UTF-8 cannot
        with contextlib.suppress(AttributeError, ValueError):  # (a lone surrogate): escaped
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    try:
        code = cli.main(args=list(argv) if argv is not None else None, prog_name="fsmharness",
                        standalone_mode=False)
    except click.UsageError as exc:  # click's own (a bad option value): one line too
        if type(exc).__name__ == "NoArgsIsHelpError":  # bare `fsmharness`: the help
            click.echo(exc.format_message())
            sys.exit(EXIT_USAGE)
        click.echo(f"fsmharness: error: {exc.format_message()}", err=True)
        sys.exit(EXIT_USAGE)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("fsmharness: aborted", err=True)
        sys.exit(EXIT_USAGE)
    except DefinitionError as exc:
        click.echo(f"fsmharness: error: {_one_line(exc)}", err=True)
        sys.exit(EXIT_USAGE)
    except (HarnessError, FaultPlanError) as exc:
        click.echo(f"fsmharness: error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    except Exception:  # a bug in fsmharness, not the user's doing
        traceback.print_exc()
        click.echo("fsmharness: internal error; this is a bug in fsmharness, please report it "
                   "with the traceback above", err=True)
        sys.exit(70)
    sys.exit(code if isinstance(code, int) else EXIT_OK)
