"""What the CLI's commands share: exit codes, the one-line user error, reading targets."""

from __future__ import annotations

import importlib
import math
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from harness.adapters.targets import TargetError
from harness.adapters.targets import definition_files as _definition_files

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
