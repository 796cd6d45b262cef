"""The `fsmharness` command line.

Exit codes: 0 all held (or clean), 1 violations or lint errors found, 2 bad input or usage, with
one clear line on stderr and no traceback. A bug in fsmharness itself shows its traceback and asks
to be reported.

The commands live one family a module: `definitions` (lint, import, schema, diagram), `runs`
(run, replay), `campaigns` (fuzz, explore, report), `bench`, and `project` (init); this module
builds the group from them.
"""

from __future__ import annotations

import contextlib
import sys
import traceback
from collections.abc import Sequence

import click

from fault_injection import FaultPlanError
from harness.cli.bench import bench_command
from harness.cli.campaigns import explore_command, fuzz_command, report_command
from harness.cli.common import EXIT_OK, EXIT_USAGE, one_line
from harness.cli.definitions import diagram_command, import_command, lint_command, schema_command
from harness.cli.project import init_command
from harness.cli.runs import replay_command, run_command
from harness.errors import HarnessError
from reference_machine import DefinitionError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="fsmharness")
def cli() -> None:
    """Test and simulate durable agent state machines."""


for _command in (lint_command, import_command, schema_command, run_command, replay_command,
                 fuzz_command, explore_command, diagram_command, report_command, bench_command,
                 init_command):
    cli.add_command(_command)


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
        click.echo(f"fsmharness: error: {one_line(exc)}", err=True)
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
