"""The CLI's `bench` command: the benchmark suite's groups measured side by side, printed as
tables (or JSON, or Markdown), saved and compared with a saved run."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from harness.bench import suite as bench
from harness.cli.common import (
    EXIT_FOUND,
    EXIT_OK,
    Finite,
    UsageProblem,
    command_targets,
    input_format_option,
    make_console,
    progress_bar,
    write_atomically,
)
from harness.errors import HarnessError

__all__ = ["bench_command", "bench_markdown"]


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
    with progress_bar(quiet) as progress:
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
