"""The CLI's campaign commands: `fuzz` and `explore`, and `report`, which renders a campaign's
report again.

`fuzz` and `explore` take definition files, folders of them, or `module:attribute` (a Python
definition, or a machine under test that names its definition); they print one verdict per
target, write a report (JSON, Markdown, HTML) and exit 0 when every invariant held, 1 when one
broke, 2 on bad input.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, overload

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress

from fault_injection import FaultKind, FaultPlan, FaultPlanError, load_plan
from harness.adapters.targets import Target
from harness.checks.adequacy import check_acknowledged
from harness.checks.determinism import RULE as DETERMINISTIC
from harness.cli.common import (
    EXIT_FOUND,
    EXIT_OK,
    Finite,
    UsageProblem,
    command_targets,
    context_for,
    context_options,
    input_format_option,
    make_console,
    progress_bar,
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
from harness.report.document import ReportError, document, load_report, runs_told
from harness.report.writing import ensure_writable, write_reports
from harness.sim.simulator import EXECUTIONS_MAX, SimOptions

__all__ = ["explore_command", "fuzz_command", "report_command"]


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


def _engine_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options `fuzz` and `explore` share."""
    for option in reversed([
        click.argument("targets", nargs=-1, required=True),
        click.option("--machine", metavar="MODULE:ATTR",
                     help="Run the definitions on this machine under test instead of the "
                          "reference machine."),
        click.option("--faults", "faults_text", default="all", show_default=True,
                     metavar="KINDS", help="Fault kinds to inject: all, none, a comma-"
                                           "separated list (crash,duplicate_event,...), or "
                                           "all less some (all,-second_worker)."),
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
    made = report_dir is not None and not Path(report_dir).exists()
    folder = check_writable(report_dir)
    sections: list[dict[str, Any]] = []
    out = make_console(soft_wrap=True)
    try:
        with progress_bar(quiet or as_json) as progress:
            for target in found:
                section = each(target, plan_of(target, faults, plan),
                               None if folder is None else folder / "replays", progress)
                sections.append(section)
                if not as_json:
                    _print_section(out, section, quiet)
    except HarnessError:
        if made and folder is not None:  # a target its adapter refused as it ran: the
            _remove_if_empty(folder)  # folder made for its report goes, if nothing is in it
        raise
    _finish(out, command, sections, folder, as_json)


def _remove_if_empty(folder: Path) -> None:
    for each in (folder / "replays", folder):
        with contextlib.suppress(OSError):
            each.rmdir()


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
    if unsaved and any(failure.get("rule") == DETERMINISTIC for failure in section["failures"]):
        out.print("      (no replay file: the same seed gave two histories, so no failure of "
                  "this campaign replays from its seed; make the machine deterministic first)",
                  markup=False)
    elif "--no-report" not in sys.argv[1:]:
        return  # the replay files were written, or the report says why not
    elif any(failure.get("mutant") for failure in unsaved):
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
