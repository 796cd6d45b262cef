"""The CLI's single-run commands: `run`, one seeded simulation of each definition with its
summary, and `replay`, one saved schedule run again to tell whether its invariant still breaks."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape

from fault_injection import FaultPlan, FaultPlanError, load_plan
from fault_injection import no_faults as no_faults_plan
from harness.checks.invariants import Violation, check
from harness.cli.common import (
    EXIT_FOUND,
    EXIT_OK,
    Finite,
    UsageProblem,
    command_targets,
    context_for,
    context_options,
    import_modules,
    input_format_option,
    make_console,
    one_line,
    start_context,
)
from harness.engines import isolation
from harness.engines.isolation import Died
from harness.engines.replay import ReplayError, replay
from harness.errors import HarnessError
from harness.files import check_output
from harness.report.redact import redact, redact_history, secret_values
from harness.sim.history import write_jsonl
from harness.sim.simulator import (
    EXECUTIONS_MAX,
    SimOptions,
    SimulationResult,
    Simulator,
    plan_for,
)
from reference_machine import DefinitionError, WorkflowDefinition, load_definition

__all__ = ["replay_command", "run_command"]


@click.command("run")
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


@click.command("replay")
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
        raise UsageProblem(f"--definition {one_line(exc)}") from exc


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
