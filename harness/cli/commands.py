"""The CLI's engine commands: `fuzz`, `explore`, `diagram`, `report` and `bench`; and `init`,
which starts a project.

`fuzz` and `explore` take definition files, folders of them, or `module:attribute` (a Python
definition, or a machine under test that names its definition); they print one verdict per
target, write a report (JSON, Markdown, HTML) and exit 0 when every invariant held, 1 when one
broke, 2 on bad input.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, overload

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from fault_injection import FaultKind, FaultPlan, FaultPlanError, load_plan
from harness.adapters.targets import Target, resolve_targets
from harness.bench import suite as bench
from harness.checks.adequacy import check_acknowledged
from harness.checks.determinism import RULE as DETERMINISTIC
from harness.cli.common import (
    EXIT_FOUND,
    EXIT_OK,
    Finite,
    UsageProblem,
    context_for,
    context_options,
    import_modules,
    input_format_option,
    make_console,
    start_context,
)
from harness.engines.campaign import (
    describe_failure,
    explore_target,
    fuzz_target,
    parse_faults,
    plan_of,
)
from harness.engines.exhaustive import ExploreOptions
from harness.engines.fuzz import DEFAULT_STRATEGY, EXECUTORS, RUNS_DEFAULT, FuzzOptions
from harness.engines.guided import STRATEGIES
from harness.errors import HarnessError
from harness.files import write_output
from harness.report.diagram import diagram_of
from harness.report.document import ReportError, document, load_report, runs_told
from harness.report.drawing import svg
from harness.report.mermaid import mermaid
from harness.report.writing import ensure_writable, write_reports
from harness.sim.simulator import EXECUTIONS_MAX, SimOptions

__all__ = ["bench_command", "diagram_command", "explore_command", "fuzz_command",
           "init_command", "report_command"]


def command_targets(names: Sequence[str], machine: str | None, modules: Sequence[str],
                    input_format: str | None = None) -> list[Target]:
    """Imports the user's modules, then resolves the targets; a bad one exits 2."""
    import_modules(modules)
    try:
        return resolve_targets(names, machine, input_format)
    except HarnessError as exc:
        raise UsageProblem(str(exc)) from exc


def _faults(text: str) -> tuple[FaultKind, ...] | None:
    try:
        return parse_faults(text)
    except HarnessError as exc:
        raise UsageProblem(f"--faults: {exc}") from exc


def _plan(path: str | None, targets: Sequence[Target]) -> FaultPlan | None:
    if path is None:
        return None
    try:
        plan = load_plan(path)
        for target in targets:
            plan.check(target.definition)
    except FaultPlanError as exc:
        raise UsageProblem(f"--plan {path}: {exc}") from exc
    return plan


@overload
def check_writable(folder: str) -> Path: ...
@overload
def check_writable(folder: None) -> None: ...
def check_writable(folder: str | None) -> Path | None:
    """Checks, before any work, that reports can be written to `folder` (made if missing)."""
    if folder is None:
        return None
    if not folder.strip():
        raise UsageProblem("--report: expected a folder, got an empty value")
    try:
        return ensure_writable(folder)
    except ReportError as exc:
        raise UsageProblem(f"--report {exc}") from exc


def _progress(quiet: bool) -> Progress:
    """A progress bar on stderr, off when it is not a terminal or with --quiet."""
    console = make_console(stderr=True, highlight=True)
    shown = not quiet and sys.stderr.isatty()  # a real terminal, whatever FORCE_COLOR says
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[detail]}"), TimeElapsedColumn(),
                    console=console, transient=True,
                    disable=not shown)


def _engine_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options `fuzz` and `explore` share."""
    for option in reversed([
        click.argument("targets", nargs=-1, required=True),
        click.option("--machine", metavar="MODULE:ATTR",
                     help="Run the definitions on this machine under test instead of the "
                          "reference machine."),
        click.option("--faults", "faults_text", default="all", show_default=True,
                     metavar="KINDS", help="Fault kinds to inject: all, none, or a comma-"
                                           "separated list (crash,duplicate_event,...)."),
        click.option("--plan", "plan_path", type=click.Path(dir_okay=False), metavar="PLAN",
                     help="A fault plan file (rates and parameters); --faults then selects "
                          "among its kinds."),
        click.option("--executions", type=click.IntRange(min=1, max=EXECUTIONS_MAX),
                     default=None,
                     help="Executions run side by side, sharing the tools."),
        click.option("--report", "report_dir", default="reports", show_default=True,
                     metavar="DIR", help="Where the report (JSON, Markdown, HTML) and replay "
                                         "files go."),
        click.option("--no-report", is_flag=True, help="Write no report and no replay file."),
        click.option("--json", "as_json", is_flag=True,
                     help="Print the report document as JSON."),
        click.option("--quiet", "-q", is_flag=True,
                     help="No progress bar; print only failures and the summary."),
click.option("--step-timeout", type=Finite(min=0, max=1_000_000), default=10.0, show_default=True,
                     metavar="SECONDS", help="Wall time one step of the machine may take "
                                             "before the run is failed as hung (0: no bound)."),
                click.option("--import", "modules", multiple=True, metavar="MODULE",
                     help="Import a Python module first (for the functions it registers)."),
        input_format_option(),
    ]):
        command = option(command)
    return command


@click.command("fuzz")
@_engine_options
@click.option("--runs", type=click.IntRange(min=1), default=RUNS_DEFAULT, show_default=True,
              help="Seeded runs per target.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="The first seed; run i uses seed + i.")
@click.option("--budget", type=Finite(min=0, min_open=True), default=None,
              metavar="SECONDS", help="A time budget per target (with --runs, whichever ends "
                                      "first).")
@click.option("--processes", "-n", type=click.IntRange(min=1), default=1, show_default=True,
              help="Worker processes (results are the same for any number).")
@click.option("--steps", type=click.IntRange(min=1), default=1000, show_default=True,
              help="The bound on simulated steps with faults on, per run.")
@click.option("--no-swarm", is_flag=True, help="Every run uses the whole plan (swarm mode "
                                               "draws a subset of kinds per run).")
@click.option("--strategy", type=click.Choice(STRATEGIES), default=DEFAULT_STRATEGY,
              show_default=True, help="swarm: every run drawn blind from its seed; guided: "
                                      "mostly mutants of the runs that showed new behaviour; "
                                      "mixed: half each.")
@click.option("--corpus", "corpus_dir", type=click.Path(file_okay=False), default=None,
              metavar="FOLDER", help="Keep the guided strategies' corpus here between "
                                     "campaigns (failing schedules run first next time).")
@click.option("--line-coverage", "line_coverage", multiple=True, metavar="SOURCE",
              help="Steer the guided strategies by the arcs of this code too (a folder or a "
                   "package; repeatable), measured with coverage.py: several times slower.")
@click.option("--executor", type=click.Choice(EXECUTORS), default="local", show_default=True,
              help="Where the runs go: local worker processes, or tasks on a Dask cluster "
                   "(the report is the same).")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="The Dask scheduler's address (tcp://host:8786) for --executor dask; "
                   "without it, a local cluster of --processes workers.")
@click.option("--all-failures", is_flag=True,
              help="Go on after the first failing run and report every rule broken.")
@click.option("--min-coverage", type=Finite(min=0, max=100), default=None,
              metavar="PERCENT", help="Fail a target whose runs take fewer than this percent "
                                      "of its declared transitions (one that takes none always "
                                      "fails: vacuous).")
@click.option("--untested", "untested_pairs", multiple=True, metavar="CODE=REASON",
              help="Accept a gap the campaign may leave (crash_point:NAME, fault:KIND, "
                   "moves:STATE, or KIND:* for every one of the kind), with the reason; "
                   "repeatable. As a definition's `untested:` does.")
@context_options
def fuzz_command(targets: Sequence[str], machine: str | None, faults_text: str,
                 plan_path: str | None, executions: int | None, report_dir: str,
                 no_report: bool, as_json: bool, quiet: bool, modules: Sequence[str],
                 runs: int, seed: int, budget: float | None, processes: int, steps: int,
                 no_swarm: bool, strategy: str, corpus_dir: str | None,
                 line_coverage: Sequence[str], executor: str, scheduler: str | None,
                 all_failures: bool, step_timeout: float, min_coverage: float | None,
                 untested_pairs: Sequence[str], input_format: str | None,
                 context_pairs: Sequence[str], context_path: str | None) -> None:
    """Fuzz workflow definitions: many seeded simulations with faults injected, every
    invariant checked, failures shrunk to a minimal trace and saved as replay files.

    TARGETS are definition files, folders of them, or MODULE:ATTR naming a Python definition
    or a machine under test. Exit 0 when every invariant held in campaigns that exercised
    the machine and what it claims, 1 when one broke or a campaign was vacuous or left
    untested a crash point, a fault kind or the moves into a state (docs: what a held
    proves), 2 on bad input.
    """
    usable = min(processes, runs, os.cpu_count() or 1)
    if usable < processes:
        click.echo(f"fsmharness: -n {processes}: running {usable} processes (no more than the "
                   f"runs, {runs}, or the cores, {os.cpu_count() or 1})", err=True)
        processes = usable
    # the options no target changes, checked before any folder is made
    untested = _untested(untested_pairs)
    FuzzOptions(runs=runs, strategy=strategy, corpus_dir=corpus_dir,
                line_coverage=tuple(line_coverage), executor=executor, scheduler=scheduler,
                untested=untested)
    context = start_context(context_pairs, context_path)

    def each(target: Target, plan: FaultPlan, replays: Path | None, progress: Progress
             ) -> dict[str, Any]:
        sim = SimOptions(steps_max=steps, plan=plan, step_timeout_s=step_timeout,
                         context=context_for(target.definition, context))
        if executions:
            sim = replace(sim, executions=executions)
        options = FuzzOptions(runs=runs, seed=seed, time_budget_s=budget, swarm=not no_swarm,
                              processes=processes, stop_at_first=not all_failures,
                              replay_dir=replays, sim=sim, coverage_min=min_coverage,
                              strategy=strategy, corpus_dir=corpus_dir,
                              line_coverage=tuple(line_coverage), executor=executor,
                              scheduler=scheduler, untested=untested)
        task = progress.add_task(escape(target.name), total=runs, detail="")

        def advance(done: int, steps_done: int, failures: int) -> None:
            detail = f"{steps_done:,} steps" + (f", {failures} failing" if failures else "")
            progress.update(task, completed=done, detail=detail)

        section = fuzz_target(target, options, advance)[1]
        progress.remove_task(task)
        return section

    _run_engine("fuzz", targets, machine, modules, faults_text, plan_path,
                None if no_report else report_dir, as_json, quiet, each, input_format)


@click.command("explore")
@_engine_options
@click.option("--depth", type=click.IntRange(min=1), default=6, show_default=True,
              help="Explore every schedule of up to this many steps.")
@click.option("--faults-max", type=click.IntRange(min=0), default=1, show_default=True,
              help="At most this many faults on one path.")
@click.option("--states-max", type=click.IntRange(min=1), default=200_000, show_default=True,
              help="Stop (bound not covered) past this many distinct states.")
@click.option("--budget", type=Finite(min=0, min_open=True), default=None,
              metavar="SECONDS", help="Stop (bound not covered) after this long, per target.")
@context_options
def explore_command(targets: Sequence[str], machine: str | None, faults_text: str,
                    plan_path: str | None, executions: int | None, report_dir: str,
                    no_report: bool, as_json: bool, quiet: bool, modules: Sequence[str],
                    depth: int, faults_max: int, states_max: int, budget: float | None,
                    step_timeout: float, input_format: str | None,
                    context_pairs: Sequence[str], context_path: str | None) -> None:
    """Explore every schedule of each definition, breadth-first to a depth: a proof that every
    invariant holds within the bound, or the shortest trace that breaks one.

    Exit 0 when no invariant broke: every one held within the bound, or (partial) as far as
    the search went before --states-max or --budget stopped it, which the verdict says; 1 when
    one broke; 2 on bad input.
    """
    context = start_context(context_pairs, context_path)

    def each(target: Target, plan: FaultPlan, replays: Path | None, progress: Progress
             ) -> dict[str, Any]:
        options = ExploreOptions(depth=depth, faults_max=faults_max, executions=executions or 1,
                                 states_max=states_max, time_budget_s=budget, plan=plan,
                                 step_timeout_s=step_timeout,
                                 context=context_for(target.definition, context))
        task = progress.add_task(escape(target.name), total=depth, detail="")

        def advance(level: int, states: int) -> None:
            progress.update(task, completed=level, detail=f"{states:,} states")

        section = explore_target(target, options, replays, advance)[1]
        progress.remove_task(task)
        return section

    _run_engine("explore", targets, machine, modules, faults_text, plan_path,
                None if no_report else report_dir, as_json, quiet, each, input_format)


def _untested(pairs: Sequence[str]) -> dict[str, str]:
    """Reads `--untested CODE=REASON` options: the gaps a campaign may leave, with reasons."""
    accepted: dict[str, str] = {}
    for pair in pairs:
        code, equals, reason = pair.partition("=")
        if not equals:
            raise UsageProblem(f"--untested {pair!r}: expected CODE=REASON (crash_point:NAME, "
                               "fault:KIND or moves:STATE, then why the gap is acceptable)")
        accepted[code.strip()] = reason.strip()
    try:
        check_acknowledged(accepted, where="--untested ")
    except HarnessError as exc:
        raise UsageProblem(str(exc)) from exc
    return accepted


def _run_engine(command: str, names: Sequence[str], machine: str | None,
                modules: Sequence[str], faults_text: str, plan_path: str | None,
                report_dir: str | None, as_json: bool, quiet: bool,
                each: Callable[[Target, FaultPlan, Path | None, Progress], dict[str, Any]],
                input_format: str | None = None) -> None:
    """Checks every input before any work, runs `each` target under its plan with a progress
    bar, prints each verdict, writes the report and exits with the verdict's code."""
    faults = _faults(faults_text)
    found = command_targets(names, machine, modules, input_format)
    plan = _plan(plan_path, found)
    folder = check_writable(report_dir)
    sections: list[dict[str, Any]] = []
    out = make_console(soft_wrap=True)
    with _progress(quiet or as_json) as progress:
        for target in found:
            section = each(target, plan_of(target, faults, plan),
                           None if folder is None else folder / "replays", progress)
            sections.append(section)
            if not as_json:
                _print_section(out, section, quiet)
    _finish(out, command, sections, folder, as_json)


def _on_cluster(section: dict[str, Any]) -> str:
    """Says where a campaign ran, when on a cluster, and the workers it lost there."""
    executor = section.get("executor")
    if not executor:
        return ""
    lost = executor.get("workers_lost", 0)
    unguarded = executor.get("unguarded_batches", 0)
    return (f"; on Dask ({escape(str(executor.get('scheduler', '')))}, "
            f"{executor.get('workers', 0)} workers"
            + (f", {lost} lost: their batches ran again elsewhere" if lost else "")
            + (f", {unguarded} batches without the step watchdog: the workers are daemon "
               f"processes, which may not fork (start them with "
               f"DASK_DISTRIBUTED__WORKER__DAEMON=False)" if unguarded else "") + ")")


def _print_section(out: Console, section: dict[str, Any], quiet: bool) -> None:
    name = escape(section["name"])
    coverage = ", ".join(f"{dimension} {part['reached']}/{part['of']}"
                         for dimension, part in section["coverage"].items())
    if section["engine"] == "explore":  # a violation is told once, below
        what = escape(section["verdict"]) if section["held"] else (
            f"{section['states_explored']:,} distinct states explored")
    else:
        faults = sum(section["faults"].values())
        checked = f", {len(section['checked'])} of {len(section['invariants'])} invariants checked"
        what = (f"{runs_told(section)}, {section['steps']:,} steps "
                f"({section['steps_per_second']:,.0f} steps/s), {faults:,} faults injected"
                + checked + (f"; coverage {coverage}" if coverage else "")
                + _on_cluster(section))
    notes = [f"      note: {note}" for note in section.get("notes", ())]
    if section["held"]:
        partial = section["engine"] == "explore" and not section["options"].get("complete")
        if not quiet or partial or notes:  # a bound not covered is no proof: always say so
            label = "[yellow]partial[/yellow]" if partial else "[green]held[/green]"
            out.print(f"{label}  {name}: {what}")
        for line in notes:  # a blind spot in a held campaign: always said
            out.print(line, markup=False)
        return
    vacuous = not section["failures"] and section.get("vacuous")
    untested = not section["failures"] and not vacuous and section.get("untested")
    label = ("[yellow]VACUOUS[/yellow]" if vacuous else "[yellow]UNTESTED[/yellow]" if untested
             else "[red]FAIL[/red]")
    out.print(f"{label}  {name}: {what}")
    for line in describe_failure(section):
        out.print(f"      {line}", markup=False)
    for line in notes:
        out.print(line, markup=False)
    if vacuous or untested:
        return
    unsaved = [failure for failure in section["failures"]
               if not failure.get("replay_command") and failure.get("rule") != DETERMINISTIC]
    if any(failure.get("mutant") for failure in unsaved):
        out.print("      (no replay file with --no-report: this failure is a guided mutant's, "
                  "which its seed alone does not run again; run without --no-report, or with "
                  "--strategy swarm)", markup=False)
    elif unsaved:
        again = shlex.join(["fsmharness", *(arg for arg in sys.argv[1:]
                                            if arg != "--no-report")])
        out.print(f"      (no replay file with --no-report: {again} finds it again, the same "
                  "options and seed, and writes its replay file)", markup=False)


def _finish(out: Console, command: str, sections: list[dict[str, Any]], folder: Path | None,
            as_json: bool) -> None:
    doc = document(command, sections, sys.argv[1:])
    files = None
    if folder is not None:
        try:
            files = write_reports(doc, folder, stem=command)
        except ReportError as exc:
            raise UsageProblem(str(exc)) from exc
    if as_json:
        click.echo(json.dumps(doc, indent=2, sort_keys=True))
    else:
        broken = sum(1 for section in sections if section["failures"])
        untested = sum(1 for section in sections if not section["held"] and not
                       section["failures"] and section.get("untested")
                       and not section.get("vacuous"))
        vacuous = sum(1 for section in sections if not section["held"] and not
                      section["failures"]) - untested
        partial = sum(1 for section in sections if section["held"] and section["engine"] ==
                      "explore" and not section["options"].get("complete"))
        verdict = ("[red]violations found[/red]" if broken else
                   "[yellow]nothing exercised[/yellow]" if vacuous else
                   "[yellow]left untested[/yellow]" if untested else
                   "[green]every invariant held[/green]")
        if vacuous and broken:
            verdict += f" [yellow]({vacuous} vacuous: nothing exercised)[/yellow]"
        if untested and (broken or vacuous):
            verdict += f" [yellow]({untested} untested)[/yellow]"
        if partial and not broken:
            verdict += f" [yellow](as far as explored: {partial} bound(s) not covered)[/yellow]"
        counted = (f", {vacuous} vacuous" if vacuous else "") + (
            f", {untested} untested" if untested else "")
        out.print(f"{len(sections)} target(s), {broken} failing{counted}: {verdict}")
        if files is not None:
            out.print(f"report: {escape(str(files.html))} (and {escape(files.json.name)}, "
                      f"{escape(files.markdown.name)})")
    sys.exit(EXIT_FOUND if not doc["held"] else EXIT_OK)


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


def write_atomically(output: str, text: str, what: str = "--output") -> None:
    """Writes `--output` whole or not at all (through a device or FIFO as a stream), or
    exits 2 saying why it cannot."""
    try:
        write_output(output, text, what)
    except HarnessError as exc:
        raise UsageProblem(str(exc)) from exc


@click.command("report")
@click.argument("path", metavar="REPORT.json")
@click.option("--report", "report_dir", default=None, metavar="DIR",
              help="Where to write the Markdown and HTML (default: beside the JSON).")
def report_command(path: str, report_dir: str | None) -> None:
    """Render a report's JSON document again as Markdown and HTML (after an upgrade, or from a
    CI artifact). Exit 0 when the report says every invariant held, 1 when not, 2 when the
    file is not a report."""
    try:
        doc = load_report(path)
    except ReportError as exc:
        raise UsageProblem(str(exc)) from exc
    folder = check_writable(report_dir) if report_dir else Path(path).parent
    try:
        files = write_reports(doc, folder, stem=Path(path).stem)
    except ReportError as exc:
        raise UsageProblem(str(exc)) from exc
    click.echo(f"report: {files.html} (and {files.markdown.name})")
    sys.exit(EXIT_OK if doc["held"] else EXIT_FOUND)


@click.command("bench")
@click.argument("targets", nargs=-1)
@click.option("--seconds", type=Finite(min=0, min_open=True, max=3600), default=None,
              help=f"Time to spend on each contender of each group  [default: "
                   f"{bench.SECONDS}; {bench.QUICK_SECONDS} with --quick]")
@click.option("--quick", is_flag=True,
              help="Less work per group (a 10k history, smaller campaigns, fewer rounds): "
                   "a check that the suite runs, not a measurement.")
@click.option("--only", "only", multiple=True, metavar="TEXT",
              help="Run only the sections whose title holds TEXT (repeatable): shape, "
                   "durable, simulator, engines, checkers, scaling, memory, hunt, "
                   "langgraph, cluster, or a finer title such as 'shape: 8-state cycle'.")
@click.option("--cluster", is_flag=True,
              help="Also run the cluster section, which starts local Dask clusters (needs "
                   "the dask extra); --only cluster runs it alone.")
@click.option("--check-aims", is_flag=True,
              help="Exit 1 when a measured aim is missed (the aims are targets the project "
                   "works toward; without this flag they are only shown). Not with --quick, "
                   "whose figures are too short to judge.")
@click.option("--json", "as_json", is_flag=True, help="Print the bench document as JSON.")
@click.option("--markdown", is_flag=True, help="Print the tables as Markdown.")
@click.option("--save", "save", is_flag=False, flag_value="", default=None, metavar="NAME",
              help="Write the document to reports/benchmarks/NAME.json (a path ending in "
                   ".json as given; no NAME: the date and time).")
@click.option("--compare", "baseline_path", type=click.Path(dir_okay=False), metavar="FILE",
              help="Compare with a saved document; exit 1 if a ratio to its floor grew by "
                   "more than --tolerance.")
@click.option("--tolerance", type=Finite(min=0), default=0.3, show_default=True,
              help="How much a ratio to the floor may grow before --compare calls it a "
                   "regression (0.3: 30%).")
@click.option("--quiet", "-q", is_flag=True,
              help="No progress bar (on a terminal) or progress lines (elsewhere).")
@click.option("--import", "modules", multiple=True, metavar="MODULE",
              help="Import a Python module first (for the functions it registers).")
@input_format_option()
def bench_command(targets: Sequence[str], seconds: float | None, quick: bool,
                  only: Sequence[str], cluster: bool, check_aims: bool, as_json: bool,
                  markdown: bool, save: str | None, baseline_path: str | None,
                  tolerance: float, quiet: bool, modules: Sequence[str],
                  input_format: str | None) -> None:
    """Measure transition throughput beside the peers, side by side in one run: each machine
    shape (an 8-state cycle, a 200-state ring, a scenario: the TARGETS' definitions, else the
    bundled refund scenario) walked by a dict FSM (the floor), the reference decide, the
    runtime over memory and SQLite, transitions and python-statemachine; the runtime beside a
    bare sqlite3 loop; simulated steps; native fuzzing beside the Hypothesis machine;
    checkers over 1k and 100k records; how it scales (states, history, processes; a Dask
    cluster only with --cluster); and a LangGraph graph invoked bare beside the same graph
    under the adapter and the simulator; and the fuzzing strategies' time per run, with their
    runs to each bundled bug (hunt). Ratios hold on a noisy machine; absolute times do not.
    The aims are shown, not judged: exit 0 unless --compare finds a regression or
    --check-aims a missed aim."""
    if quick and check_aims:
        raise UsageProblem("--check-aims judges the aims on a full run; --quick's figures are "
                           "too short to judge them by (its memory group compares 20 runs "
                           "with 200): drop one of the two")
    found = command_targets(targets, None, modules, input_format) if targets else []
    try:
        baseline = bench.load_baseline(baseline_path) if baseline_path else None
    except HarnessError as exc:
        raise UsageProblem(str(exc)) from exc
    sections = bench.suite(found, quick=quick, only=only, cluster=cluster)
    if not sections:
        raise UsageProblem(f"--only {', '.join(only)}: no section's title holds that (the "
                           f"sections: {', '.join(bench.SECTIONS)})")
    saved = _bench_path(save) if save is not None else None  # checked, nothing made yet
    if seconds is None:
        seconds = bench.QUICK_SECONDS if quick else bench.SECONDS
    measured: list[bench.Measured] = []
    skipped: list[bench.Group] = []
    say = _bench_lines(quiet)
    started = time.perf_counter()
    with _progress(quiet) as progress:
        task = progress.add_task("bench", total=len(sections), detail="")
        for index, (title, build) in enumerate(sections, 1):
            progress.update(task, detail=title)
            say(f"[{index}/{len(sections)}] {title}")
            since = time.perf_counter()
            try:
                for group in build():  # the first group's time holds the section's set-up
                    if not group.contenders:  # what it needs is not installed: its note says
                        skipped.append(group)
                        say(f"  skipped {group.name}")
                        continue
                    measured += bench.measure(
                        group, seconds, rounds=bench.QUICK_ROUNDS if quick else bench.ROUNDS)
                    say(f"  {group.name}: {time.perf_counter() - since:.1f} s")
                    since = time.perf_counter()
            except HarnessError as exc:
                raise UsageProblem(f"{title}: {exc}") from exc
            progress.advance(task)
    say(f"done: {len(sections)} sections in {time.perf_counter() - started:.0f} s")
    doc = bench.document(measured, seconds=seconds, quick=quick, skipped=skipped)
    compared = bench.compare(doc, baseline, tolerance) if baseline is not None else None
    if compared is not None:
        doc["compared"] = {"baseline": baseline_path, "tolerance": tolerance,
                           "figures": compared}
    if saved is not None:
        try:
            saved.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageProblem(f"--save {saved.parent}: cannot make it: {exc.strerror}"
                               ) from exc
        write_atomically(str(saved), json.dumps(doc, indent=1) + "\n", "--save")
    if as_json:
        click.echo(json.dumps(doc, indent=2))
    elif markdown:
        click.echo(bench_markdown(doc))
    else:
        _bench_tables(doc)
    if saved is not None:
        click.echo(f"saved: {saved}", err=as_json or markdown)  # keep stdout parseable
    regressed = [row for row in compared or () if row["regressed"]]
    if compared is not None and not as_json:
        click.echo(f"{len(regressed)} of {len(compared)} figures regressed beyond "
                   f"{tolerance:.0%} against {baseline_path}")
    missed = bench.missed(doc) if check_aims else []
    if check_aims:
        click.echo(f"--check-aims: {len(missed)} of {len(doc['aims'])} aims missed"
                   + "".join(f"\n  missed: {aim['aim']}: {aim['measured']:,.2f}, aim "
                             f"{aim['target']}" for aim in missed), err=as_json or markdown)
    sys.exit(EXIT_FOUND if regressed or missed else EXIT_OK)


def _bench_lines(quiet: bool) -> Callable[[str], None]:
    """Gives where `bench` says what it is doing in plain lines: stderr when no progress bar
    is shown there (not a terminal: a CI log, a pipe) and not --quiet, else nowhere."""
    if quiet or sys.stderr.isatty():
        return lambda line: None
    return lambda line: click.echo(f"bench: {line}", err=True)


def _bench_path(save: str) -> Path:
    """Gives where --save writes, after checking it can: reports/benchmarks/NAME.json."""
    if save.endswith(".json"):
        path = Path(save)
    elif "/" in save or save in (".", ".."):
        raise UsageProblem(f"--save {save!r}: expected a name or a path ending in .json")
    else:
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        path = Path("reports") / "benchmarks" / f"{save or stamp}.json"
    if path.is_dir():
        raise UsageProblem(f"--save {path}: is a folder; expected a file path")
    # the nearest folder that exists must be one this process can write in; what is missing
    # below it is made only when the document is written
    existing = path.parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise UsageProblem(f"--save {path}: {existing} is not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageProblem(f"--save {path}: cannot write in {existing}")
    return path


def _ratio(value: float | None) -> str:
    return "" if value is None else f"{value:,.2f}x"


def _bench_rows(doc: dict[str, Any]) -> list[tuple[str, str, str, str, str, str]]:
    rows = []
    for row in doc["results"]:
        speedups = row.get("speedup_vs", {})
        rows.append((row["group"], row["contender"],
                     f"{row['per_op_us']:,.2f} µs", _ratio(row["x_floor"]),
                     _ratio(speedups.get("transitions")),
                     _ratio(speedups.get("python-statemachine"))))
    return rows


_BENCH_COLUMNS = ("group", "contender", "per op", "x floor", "vs transitions",
                  "vs statemachine")
#: The aims are documentation: where the project stands against its targets, not a verdict
_AIMS_TITLE = "aims: targets, not a verdict"
_AIMS_CAPTION = "where the project stands; --check-aims exits 1 on a missed one"


def _bench_tables(doc: dict[str, Any]) -> None:
    """Prints one table per group, then the aims and the comparison with a baseline."""
    console = make_console()
    groups: dict[str, list[tuple[str, ...]]] = {}
    units = {row["group"]: row["unit"] for row in doc["results"]}
    for group, *cells in _bench_rows(doc):
        groups.setdefault(group, []).append(tuple(cells))
    for group, rows in groups.items():
        with_peers = any(row[3] or row[4] for row in rows)
        columns = ("contender", f"per {units[group]}", *_BENCH_COLUMNS[3:6 if with_peers else 4])
        table = Table(*columns, title=escape(group), title_justify="left")
        for row in rows:
            table.add_row(*map(escape, row[:len(columns)]))
        console.print(table)
    for each in doc.get("skipped", ()):
        console.print(f"{escape(each['group'])}: {escape(each['note'])}")
    aims = Table("aim", "measured", "target", "met", title=_AIMS_TITLE, title_justify="left",
                 caption=_AIMS_CAPTION, caption_justify="left")
    for aim in doc["aims"]:
        aims.add_row(aim["aim"], f"{aim['measured']:,.2f}", aim["target"],
                     "yes" if aim["met"] else "not yet")
    console.print(aims)
    compared = doc.get("compared")
    if compared:
        changes = Table("group", "contender", "x floor then", "now", "change",
                        title=f"against {escape(compared['baseline'])}", title_justify="left")
        for row in compared["figures"]:
            changes.add_row(escape(row["group"]), escape(row["contender"]),
                            _ratio(row["x_floor_then"]), _ratio(row["x_floor_now"]),
                            f"{row['change']:+.0%}" + (" REGRESSED" if row["regressed"] else ""))
        console.print(changes)


def bench_markdown(doc: dict[str, Any]) -> str:
    """Gives the bench tables as Markdown (for a README or a CI step summary)."""
    lines = [f"| {' | '.join(_BENCH_COLUMNS)} |", f"|{' --- |' * len(_BENCH_COLUMNS)}"]
    last = ""
    for group, *cells in _bench_rows(doc):
        shown = group if group != last else ""
        lines.append(f"| {' | '.join([_md(shown), *map(_md, cells)])} |")
        last = group
    for each in doc.get("skipped", ()):
        lines += ["", f"{_md(each['group'])}: {_md(each['note'])}"]
    lines += ["", f"{_AIMS_TITLE[0].upper()}{_AIMS_TITLE[1:]} ({_AIMS_CAPTION}):", "",
              "| aim | measured | target | met |", "| --- | --- | --- | --- |"]
    lines += [f"| {_md(aim['aim'])} | {aim['measured']:,.2f} | {aim['target']} | "
              f"{'yes' if aim['met'] else 'not yet'} |" for aim in doc["aims"]]
    return "\n".join(lines)


def _md(text: str) -> str:
    return text.replace("|", "\\|")


#: What `fsmharness init` writes: a definition skeleton, its test, and a CI workflow.
INIT_DEFINITION = "workflow_example.yaml"
INIT_TEST = "test_workflow_example.py"
INIT_CI = ".github/workflows/fsmharness.yml"

_INIT_TEXTS = {
    INIT_DEFINITION: """\
# A workflow definition to start from, written by `fsmharness init`: an agent checks an order,
# a person approves the charge, the payment runs once under an idempotency key, the customer is
# told. Edit it into your own, then:
#   fsmharness lint workflow_example.yaml     (errors and warnings, each with its location)
#   fsmharness fuzz workflow_example.yaml     (many seeded runs, faults injected, every invariant)
# `fsmharness schema` prints the JSON Schema of this format, for your editor.
name: example_order
version: 1
description: An order checked by an agent, approved by a person, charged once, confirmed.
context:                       # each execution's data; give values with --context key=value
  order_id: null
  customer_email: null
  amount: 0

tools:                         # the services the steps call (simulated while fuzzing)
  agent.check_order:
    description: The LLM checks the order and proposes the amount (structured output).
    idempotency_keys: true
    repeatable: true           # checking again charges nothing: no duplicate side effect
    output:
      type: object
      required: [amount]
      properties:
        amount: {type: number, exclusiveMinimum: 0}
  payments.charge:
    description: Charges the customer; honours idempotency keys, as payment APIs do.
    idempotency_keys: true
  email.send:
    description: Tells the customer the order was charged.
    idempotency_keys: true

events:                        # what the outside world sends
  order.cancelled:
    description: The customer cancelled the order before it was charged.
    sources: [human]

budgets:
  transitions_max: 30
  deadline: 3d
  on_exceeded: failed

states:
  checking:
    initial: true
    step:                      # run on entry; the outcome comes back as an event
      tool: agent.check_order
      input: {order_id: "=context.order_id"}
      timeout: 30s
      retry: {attempts_max: 3, retry_on: [transient, rate_limited, timeout, invalid_output]}
    on:
      step.succeeded:
        target: awaiting_approval
        actions:
          - assign: {amount: event.payload.amount}
      step.failed: failed

  awaiting_approval:
    type: wait
    approval:                  # only a person holding the role, for this exact charge
      for_state: charging
      summary: "Charge {amount} on order {order_id} to {customer_email}"
      evidence: [order_id, amount, customer_email]
      roles: [supervisor]
      expires_after: 24h
      on_expiry: deny
    on:
      approval.granted: charging
      approval.denied: rejected
      order.cancelled: cancelled

  charging:
    step:
      tool: payments.charge
      input: {order_id: "=context.order_id", amount: "=context.amount"}
      reversible: false
      needs_approval: true
      timeout: 30s
      retry: {attempts_max: 5, delay_initial: 1s, delay_max: 30s}
    on:
      step.succeeded: notifying
      step.failed: failed

  notifying:
    step:
      tool: email.send
      input: {to: "=context.customer_email", template: order_charged}
      timeout: 15s
      retry: {attempts_max: 3}
    on:
      step.succeeded: done
      step.failed: failed

  done: {type: final, outcome: success}
  rejected: {type: final, outcome: rejected}
  cancelled: {type: final, outcome: cancelled}
  failed: {type: final, outcome: failure}
""",
    INIT_TEST: '''\
"""The workflow's tests, written by `fsmharness init`.

The fsmharness pytest plugin runs a fuzz campaign for each test marked `fsm_fuzz`: seeded runs
with faults injected (crashes, duplicate and late events, tool failures, timer skew...), every
invariant checked. A broken invariant fails the test with the shrunk trace and the command that
replays it. The plugin also collects `workflow_*.yaml` files as lint, fuzz and explore tests.
"""

import pytest


@pytest.mark.fsm_fuzz("workflow_example.yaml", runs=100)
def test_every_invariant_holds(fsm_report):
    """The campaign exercised the workflow and every invariant held."""
    assert fsm_report.held
''',
    INIT_CI: """\
# Written by `fsmharness init`: runs the workflow tests on every push and pull request, shows
# the report's Markdown (verdicts, diagrams, any shrunk trace) as the job's summary, and keeps
# the replay files of a failure as an artifact, to replay where you fix it.
name: fsmharness
on: [push, pull_request]
jobs:
  workflows:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with: {python-version: "3.12"}
@@install@@
      - run: python -m pytest --fsm-report fsm-reports
      - if: always()
        run: cat fsm-reports/pytest.md >> "$GITHUB_STEP_SUMMARY"
      - if: failure()
        uses: actions/upload-artifact@v4
        with: {name: fsmharness-replays, path: fsm-reports/replays/}
""",
}

_INIT_WHAT = {
    INIT_DEFINITION: "a workflow definition to edit",
    INIT_TEST: "a pytest test that fuzzes it, by the fsm_fuzz marker",
    INIT_CI: "a GitHub Actions workflow: the tests, the report as the job's summary",
}


@dataclass(frozen=True, slots=True)
class CiInstall:
    """The CI workflow's step that installs fsmharness: its shell command (None where what
    fsmharness was installed from here is out of CI's reach) and why, for the comment above
    it."""

    command: str | None
    why: str


def ci_install(direct_url: Mapping[str, Any] | None, version: str,
               origin: tuple[str, str] | None = None) -> CiInstall:
    """Gives how CI installs the fsmharness installed here: from what pip recorded of where it
    came from (PEP 610's `direct_url.json`: None when it came from a package index) and, for
    a local folder, the URL of the git remote `origin` of the checkout it is in with its path
    there ("" at the top), or None."""
    if direct_url is None:
        return CiInstall(f"pip install {shlex.quote(f'fsmharness=={version}')}",
                         f"fsmharness {version} was installed here from a package index: CI "
                         f"must reach the same index (pip's --index-url, or PIP_INDEX_URL)")
    url = _without_credentials(str(direct_url.get("url", "")))
    subdirectory = str(direct_url.get("subdirectory") or "")
    vcs = direct_url.get("vcs_info")
    if isinstance(vcs, Mapping) and vcs.get("vcs") and vcs.get("commit_id"):
        spec = f"fsmharness @ {vcs['vcs']}+{url}@{vcs['commit_id']}" + _subdirectory(subdirectory)
        return CiInstall(f"pip install {shlex.quote(spec)}",
                         f"the commit of {url} that fsmharness was installed here from")
    if url.startswith(("https://", "http://")):
        return CiInstall(f"pip install {shlex.quote(f'fsmharness @ {url}')}",
                         "the archive fsmharness was installed here from")
    where = _local_path(url) or "an unknown place"
    cloned = _without_credentials(origin[0]) if origin else ""
    remote = _pip_git_url(cloned) if origin else None
    if origin and remote:
        spec = f"fsmharness @ git+{remote}" + _subdirectory(origin[1].strip("/"))
        return CiInstall(f"pip install {shlex.quote(spec)}",
                         f"fsmharness was installed here from the checkout {where}, cloned "
                         f"from {cloned}: this installs that repository's default branch "
                         f"(add @TAG or @COMMIT after its URL to pin one)")
    return CiInstall(None, f"fsmharness was installed here from {where}, which CI cannot reach: "
                           f"replace this step's lines with how CI installs it (a wheel it can "
                           f"download, or pip install 'fsmharness @ git+https://HOST/REPO@TAG'), "
                           f"or write this file with fsmharness init --install COMMAND")


def _without_credentials(url: str) -> str:
    """Gives `url` without the password or token in its user part (a remote cloned as
    `https://x-access-token:TOKEN@host/...`), which a file meant to be committed must not
    hold; an ssh user name with no password (`ssh://git@host/...`) stays."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url
    user, _, host = parts.netloc.rpartition("@")
    name, colon, _ = user.partition(":")
    kept = f"{name}@" if parts.scheme == "ssh" and name and not colon else ""
    return urllib.parse.urlunsplit(parts._replace(netloc=kept + host))


def _local_path(url: str) -> str:
    """Gives the folder a `file://` URL names ("" for another URL), its %-escapes decoded."""
    if not url.startswith("file://"):
        return ""
    return urllib.request.url2pathname(urllib.parse.urlsplit(url).path)


def _subdirectory(path: str) -> str:
    return f"#subdirectory={path}" if path else ""


def _pip_git_url(remote: str) -> str | None:
    """Gives a git remote's URL as pip takes it after `git+` (scp-like `user@host:path` as
    ssh://), or None for a remote CI cannot reach (a local path)."""
    if re.match(r"(https?|ssh|git)://", remote):
        return remote
    scp = re.fullmatch(r"([\w.-]+@)?([\w.-]+):(?!/)(.+)", remote)
    return f"ssh://{scp[1] or ''}{scp[2]}/{scp[3]}" if scp else None


def _installed_here() -> CiInstall:
    """Gives how CI installs the fsmharness that runs this command, from what pip recorded."""
    versions = []
    for found in importlib.metadata.distributions(name="fsmharness"):
        versions.append(found.version)
        text = found.read_text("direct_url.json")
        if not text:  # a source tree's egg-info, or an install from an index
            continue
        try:
            direct_url = json.loads(text)
        except ValueError:
            continue
        folder = _local_path(str(direct_url.get("url", "")))
        origin = _git_origin(Path(folder)) if folder else None
        return ci_install(direct_url, found.version, origin)
    if not versions:
        return CiInstall(None, "fsmharness runs here from its source, not installed: CI "
                               "cannot install it from here; replace this step's lines with "
                               "how CI installs it, or write this file with fsmharness init "
                               "--install COMMAND")
    return ci_install(None, versions[0])


def _git_origin(folder: Path) -> tuple[str, str] | None:
    """Gives the URL of the git remote `origin` of the checkout `folder` is in, and the
    folder's path in it, or None."""
    try:
        done = subprocess.run(["git", "-C", str(folder), "rev-parse", "--show-prefix"],
                              capture_output=True, text=True, timeout=30, check=False)
        remote = subprocess.run(["git", "-C", str(folder), "remote", "get-url", "origin"],
                                capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):  # no git here
        return None
    if done.returncode or remote.returncode or not remote.stdout.strip():
        return None
    return remote.stdout.strip(), done.stdout.strip()


def _install_lines(install: CiInstall) -> str:
    """Gives the CI workflow's install steps: pytest's, then a comment that says where the
    command that installs fsmharness comes from, and that command (or, not knowing one, one
    that fails saying so)."""
    why = re.sub(r"[\x00-\x1f\x7f]", " ", install.why)
    lines = ["      - run: pip install pytest"]
    lines += textwrap.wrap(why, 90, initial_indent="      # ", subsequent_indent="      # ",
                           break_on_hyphens=False, break_long_words=False)
    commands = install.command.splitlines() if install.command else [
        "echo 'fsmharness: this step does not say how CI installs fsmharness (see the "
        "comment above it)' >&2", "exit 1"]
    lines.append("      - run: |")
    lines += [f"          {command}" for command in commands]
    return "\n".join(lines)


@click.command("init")
@click.option("--dir", "folder", default=".", show_default=True, metavar="DIR",
              help="Write into this folder (made if missing) instead of the current one.")
@click.option("--install", "install", metavar="COMMAND",
              help="The shell command the CI workflow installs fsmharness with. By default, "
                   "from what pip recorded of where the fsmharness here came from: a git "
                   "commit, an archive's URL, the git remote of a local checkout, or a package "
                   "index.")
def init_command(folder: str, install: str | None) -> None:
    """Start a project: write a workflow definition skeleton (workflow_example.yaml), a pytest
    test that fuzzes it, and a GitHub Actions workflow (.github/workflows/fsmharness.yml) that
    installs fsmharness the way it was installed here (or by --install) and runs the tests.

    Overwrites nothing: when one of the files exists, exit 2 naming it, and write none. Exit 0
    when all are written.
    """
    if install is not None and not install.strip():
        raise UsageProblem("--install: give the shell command CI installs fsmharness with")
    step = (CiInstall(install.strip(), "as fsmharness init --install was told")
            if install is not None else _installed_here())
    texts = {**_INIT_TEXTS,
             INIT_CI: _INIT_TEXTS[INIT_CI].replace("@@install@@", _install_lines(step))}
    base = Path(folder)
    try:
        if base.exists() and not base.is_dir():
            raise UsageProblem(f"--dir {folder}: is a file, not a folder")
        targets = [base / name for name in _INIT_TEXTS]
        taken = [str(path) for path in targets if os.path.lexists(path)]
    except OSError as exc:  # a name too long for the file system
        raise UsageProblem(f"--dir {folder}: cannot use it: {exc.strerror}") from exc
    if taken:
        raise UsageProblem(f"init: {', '.join(taken)} exist{'s' if len(taken) == 1 else ''} "
                           f"already; init overwrites nothing and wrote nothing (move "
                           f"{'it' if len(taken) == 1 else 'them'} away, or init into "
                           f"another folder with --dir)")
    written: list[Path] = []
    made: list[Path] = []  # folders made here, removed again when a file cannot be written
    try:
        for path, text in zip(targets, texts.values(), strict=True):
            missing = [p for p in (path.parent, *path.parent.parents) if not p.exists()]
            path.parent.mkdir(parents=True, exist_ok=True)
            made += reversed(missing)
            with open(path, "x", encoding="utf-8") as out:  # never over a file made meanwhile
                written.append(path)
                out.write(text)
    except OSError as exc:
        for path in written:
            path.unlink(missing_ok=True)
        for made_folder in reversed(made):
            with contextlib.suppress(OSError):
                made_folder.rmdir()
        raise UsageProblem(f"init: cannot write {exc.filename or folder}: "
                           f"{exc.strerror or exc}; wrote nothing") from exc
    for path, name in zip(targets, _INIT_TEXTS, strict=True):
        click.echo(f"wrote {path}  ({_INIT_WHAT[name]})")
    definition = shlex.quote(str(base / INIT_DEFINITION))
    tests = "" if base == Path(".") else f" {shlex.quote(folder)}"
    click.echo(f"next: fsmharness lint {definition} && fsmharness fuzz {definition}")
    click.echo(f"then: python -m pytest{tests}")
    if step.command is None:
        click.echo(f"note: {base / INIT_CI} does not know how CI installs fsmharness, and "
                   f"fails until its install step says it (or init with --install COMMAND)")
    root = next((above for above in base.resolve().parents if (above / ".git").exists()), None)
    if root is not None and not (base / ".git").exists():
        click.echo(f"note: GitHub runs the workflows of {root / '.github' / 'workflows'} only: "
                   f"move {INIT_CI} there (and give its steps `working-directory: "
                   f"{base.resolve().relative_to(root)}`)")
