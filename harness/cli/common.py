"""What the CLI's commands share: exit codes, the one-line user error, reading targets, the
start context given at the command line, writing an output whole, the progress bar."""

from __future__ import annotations

import difflib
import importlib
import json
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harness.adapters.targets import Target, TargetError, resolve_targets
from harness.adapters.targets import definition_files as _definition_files
from harness.errors import HarnessError, short_repr
from harness.files import write_output
from reference_machine import WorkflowDefinition
from reference_machine.documents import (
    NESTING_MAX,
    TooManyDigits,
    bounded_integer,
    deeper_than,
    document_problem,
    read_document,
)
from reference_machine.errors import DefinitionError

EXIT_OK, EXIT_FOUND, EXIT_USAGE = 0, 1, 2


class UsageProblem(click.ClickException):
    """A user's mistake: one line on stderr, exit 2."""

    exit_code = EXIT_USAGE

    def show(self, file: object = None) -> None:
        click.echo(f"fsmharness: error: {self.format_message()}", err=True)


class Finite(click.FloatRange):
    """A number in a range that is a number: `nan` and `inf` are refused (nan passes every
    comparison a range makes)."""

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


#: What `--format` names: how a definition file is read (by default, as its name tells).
INPUT_FORMATS = ("native", "asl", "xstate", "scxml")
#: The largest `--context-file` read: a start context is a few values, not a data set.
CONTEXT_BYTES_MAX = 1_000_000


def input_format_option(*names: str) -> Any:
    """The option naming how definition files are read (`--format asl`), for the commands
    that read them."""
    return click.option(*(names or ("--format", "--input-format")), "input_format",
                        type=click.Choice(INPUT_FORMATS), default=None,
                        help="Read the definition files as this format (by default as each "
                             "name tells: *.asl.json/.asl.yaml Step Functions, *.xstate.json "
                             "XState, *.scxml SCXML, else native YAML/JSON).")


def make_console(**options: Any) -> Console:
    """Gives a console for the CLI's output: no emoji codes (a target named
    `module:traffic_light` printed as a traffic light) and no guessed highlighting."""
    return Console(emoji=False, **{"highlight": False, **options})


def definition_files(paths: Iterable[str]) -> list[Path]:
    """Gives the definition files named by `paths`, a folder giving those directly in it."""
    try:
        return _definition_files(paths)
    except TargetError as exc:
        raise UsageProblem(str(exc)) from exc


def import_modules(modules: Iterable[str]) -> None:
    """Imports the user's modules (for the functions they register), or exits 2 naming one."""
    if modules and "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # as `python -m` would: the user's own modules
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as exc:  # the user's module failed, not fsmharness
            raise UsageProblem(f"--import {module}: {type(exc).__name__}: {exc}") from exc
        except SystemExit as exc:  # its exit code is not the run's verdict
            raise UsageProblem(f"--import {module}: the module called sys.exit("
                               f"{short_repr(exc.code)}) as it was imported") from exc


def context_options(command: Any) -> Any:
    """The options giving the executions' start context, for the commands that run them:
    `--context KEY=VALUE` (repeatable) and `--context-file FILE`."""
    for option in reversed([
        click.option("--context", "context_pairs", multiple=True, metavar="KEY=VALUE",
                     help="A value of the executions' start context (repeatable): VALUE is "
                          "read as JSON when it is JSON (40, true, null, [1, 2], "
                          "'{\"a\": 1}'), else as text; a dotted KEY (customer.email) sets a "
                          "field of a mapping. Given over --context-file; keys not given "
                          "keep the definition's `context:` defaults."),
        click.option("--context-file", "context_path", metavar="FILE",
                     help="The executions' start context from a file: a YAML or JSON mapping "
                          "of context keys to values."),
    ]):
        command = option(command)
    return command


def start_context(pairs: Sequence[str], path: str | None) -> dict[str, Any]:
    """Gives the start context `--context-file` and the `--context` pairs give (the pairs
    over the file, in order), or exits 2 naming what is wrong."""
    context: dict[str, Any] = {} if path is None else _context_file(path)
    for pair in pairs:
        key, equals, text = pair.partition("=")
        if not equals or not key.strip():
            raise UsageProblem(f"--context {pair!r}: expected KEY=VALUE (order_id=o-1, "
                               f"amount=40, customer.email=ada@example.com)")
        *parents, leaf = key.strip().split(".")
        if not all(parents) or not leaf:
            raise UsageProblem(f"--context {pair!r}: {key!r} is no key: a dotted key names "
                               "a field in a mapping (customer.email)")
        node = context
        for depth, part in enumerate(parents):
            inner = node.setdefault(part, _Fields())
            if not isinstance(inner, dict):
                taken = ".".join(parents[:depth + 1])
                raise UsageProblem(f"--context {pair!r}: {taken} is {json.dumps(inner)}, "
                                   "not a mapping with fields")
            node = inner
        node[leaf] = _context_value(pair, text)
    return context


class _Fields(dict[str, Any]):
    """A mapping a dotted `--context` key made: fields to set in the definition's mapping,
    which `context_for` refuses where the definition's default is no mapping."""


def _context_value(pair: str, text: str) -> Any:
    """Gives a `--context` value: JSON when it is JSON (NaN and Infinity aside), else the text
    itself; exits 2 for JSON past the bounds every file read has (its digits, its nesting)."""
    def refuse(constant: str) -> Any:
        raise ValueError(constant)

    bound = f"--context {pair[:40]!r}{'...' if len(pair) > 40 else ''}"
    try:
        value = json.loads(text, parse_constant=refuse, parse_int=bounded_integer)
    except RecursionError as exc:
        raise UsageProblem(f"{bound}: nested more than {NESTING_MAX} levels deep") from exc
    except TooManyDigits as exc:
        raise UsageProblem(f"{bound}: {exc}") from exc
    except ValueError:
        return text
    if isinstance(value, list | dict) and deeper_than(value, NESTING_MAX):
        raise UsageProblem(f"{bound}: nested more than {NESTING_MAX} levels deep")
    return value


def _context_file(path: str) -> dict[str, Any]:
    """Gives the mapping a `--context-file` holds, or exits 2 saying why it cannot (read with
    the bounds of every file fsmharness reads: size, nesting, digits, YAML aliases)."""
    where = f"--context-file {path}"
    try:
        data, _ = read_document(path, what="a context file", bytes_max=CONTEXT_BYTES_MAX)
    except FileNotFoundError as exc:
        raise UsageProblem(f"{where}: no such file") from exc
    except IsADirectoryError as exc:
        raise UsageProblem(f"{where}: is a folder; expected a YAML or JSON file") from exc
    except OSError as exc:
        raise UsageProblem(f"{where}: cannot read it: {exc.strerror}") from exc
    except DefinitionError as exc:
        if "the file is empty" not in str(exc):  # an empty one holds nothing: said below
            raise UsageProblem(f"{where}: {document_problem(exc, 'not YAML or JSON')}") from exc
        data = None
    if not isinstance(data, dict):
        got = "nothing" if data is None else f"a {type(data).__name__}"
        raise UsageProblem(f"{where}: expected a mapping of context keys to values, got {got}")
    keys = [key for key in data if not isinstance(key, str)]
    if keys:
        raise UsageProblem(f"{where}: context keys are text, got {keys[0]!r}")
    try:
        json.dumps(data, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise UsageProblem(f"{where}: every value must be JSON data (text, numbers, true, "
                           f"false, null, lists, mappings; quote a date): {exc}") from exc
    return data


def context_for(definition: WorkflowDefinition, given: Mapping[str, Any]) -> dict[str, Any]:
    """Gives the start context of `definition`'s executions: each key given, a mapping merged
    field by field over the definition's default for it; a key the definition does not
    declare is passed on all the same, with a warning on stderr (a typo leaves the declared
    key at its default). Exits 2 when a dotted key sets a field of a default that is no
    mapping (`amount.x=1` where `amount` defaults to 40)."""
    declared = definition.initial_context
    for key in given:
        if key not in declared:
            known = ", ".join(sorted(declared)) or "none"
            near = difflib.get_close_matches(key, list(declared), n=1)
            hint = f"; did you mean {near[0]!r}?" if near else f" (its keys: {known})"
            click.echo(f"fsmharness: warning: --context {key}: {definition.name!r} declares "
                       f"no context key {key!r}{hint}; passed on as given", err=True)
    return {key: _merged(declared.get(key), value, key, definition.name)
            for key, value in given.items()}


def _merged(default: Any, value: Any, path: str, workflow: str) -> Any:
    """Gives `value` merged field by field over `default` where both are mappings."""
    if not isinstance(value, Mapping):
        return value
    if isinstance(value, _Fields) and default is not None and not isinstance(default, Mapping):
        field = next(iter(value))
        raise UsageProblem(f"--context {path}.{field}: {workflow!r} declares {path} as "
                           f"{json.dumps(default, default=str)}, not a mapping with fields; give "
                           f"{path}=VALUE instead")
    base = default if isinstance(default, Mapping) else {}
    return {**base, **{key: _merged(base.get(key), inner, f"{path}.{key}", workflow)
                       for key, inner in value.items()}}


def one_line(error: DefinitionError) -> str:
    """Gives a definition's errors in one line: the first, and how many more `lint` shows."""
    if not error.findings:
        return str(error).splitlines()[0]
    more = len(error.findings) - 1
    return (f"{error.source}: {error.findings[0].render()}"
            + (f" (and {more} more error{'s' if more > 1 else ''}: fsmharness lint "
               f"{error.source})" if more else ""))


def command_targets(names: Sequence[str], machine: str | None, modules: Sequence[str],
                    input_format: str | None = None) -> list[Target]:
    """Imports the user's modules, then resolves the targets; a bad one exits 2."""
    import_modules(modules)
    try:
        return resolve_targets(names, machine, input_format)
    except HarnessError as exc:
        raise UsageProblem(str(exc)) from exc


def write_atomically(output: str, text: str, what: str = "--output") -> None:
    """Writes `--output` whole or not at all (through a device or FIFO as a stream), or
    exits 2 saying why it cannot."""
    try:
        write_output(output, text, what)
    except HarnessError as exc:
        raise UsageProblem(str(exc)) from exc


def progress_bar(quiet: bool) -> Progress:
    """A progress bar on stderr, off when it is not a terminal or with --quiet."""
    console = make_console(stderr=True, highlight=True)
    shown = not quiet and sys.stderr.isatty()  # a real terminal, whatever FORCE_COLOR says
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[detail]}"), TimeElapsedColumn(),
                    console=console, transient=True,
                    disable=not shown)
