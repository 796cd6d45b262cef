"""The benchmark suite behind `fsmharness bench`: its sections (`suite`, each building the
groups of one module below it), the JSON document of a run (`document`), the aims it is
judged by (`AIMS`), and the comparison with a saved run (`load_baseline`, `compare`).

The top of `harness.bench`: it imports the group modules and the timing core, none of which
imports it. The core's names the CLI reads (`measure`, `Group`, `Measured`, the rounds and
seconds) are given here too.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.adapters.targets import Target
from harness.bench.checkers import checker_groups
from harness.bench.durable import POSTGRES_DSN_VARIABLE, durable_groups, postgres_groups
from harness.bench.engines import engines_group
from harness.bench.exhaustive import exhaustive_group
from harness.bench.hunt import hunt_group
from harness.bench.langgraph_group import langgraph_groups
from harness.bench.memory import memory_group
from harness.bench.scaling import ceiling_group, cluster_group, process_group
from harness.bench.shapes import DEFAULT_SCENARIO, PEERS, cycle8, ring, scenario, shape_group
from harness.bench.simulator import simulator_group, step_group
from harness.bench.timing import (
    QUICK_ROUNDS,
    QUICK_SECONDS,
    ROUNDS,
    SECONDS,
    Group,
    Measured,
    measure,
)
from harness.errors import HarnessError
from harness.sim.machine import ReferenceMachine
from reference_machine import DefinitionSyntaxError, WorkflowDefinition, load_definition
from reference_machine.documents import document_problem, read_document

__all__ = [
    "AIMS",
    "BASELINE_BYTES_MAX",
    "BENCH_FORMAT",
    "BENCH_KIND",
    "CLUSTER",
    "QUICK_ROUNDS",
    "QUICK_SECONDS",
    "ROUNDS",
    "SECONDS",
    "SECTIONS",
    "Aim",
    "Figure",
    "Group",
    "Measured",
    "Results",
    "aims",
    "compare",
    "document",
    "load_baseline",
    "measure",
    "missed",
    "suite",
]

#: What `--only` matches: the section titles `suite` gives, in the order they run.
SECTIONS = ("shape: 8-state cycle", "shape: 200-state ring", "shape: scenario", "durable",
            "simulator", "engines", "exhaustive", "checkers", "scaling: states",
            "scaling: processes", "scaling: cluster", "memory", "hunt", "langgraph")
#: The section that starts local Dask clusters: run only when asked (`suite`'s `cluster`).
CLUSTER = "scaling: cluster"


def _listed(make: Callable[..., Group], *args: Any) -> Callable[[], list[Group]]:
    """Gives a section's groups: the one group `make(*args)` builds, built when chosen."""
    return lambda: [make(*args)]


def _scenario_shape_group(definition: WorkflowDefinition) -> Group:
    return shape_group(scenario(definition), "shape: scenario")


def suite(targets: Sequence[Target] = (), *, quick: bool = False, only: Sequence[str] = (),
          cluster: bool = False) -> list[tuple[str, Callable[[], list[Group]]]]:
    """Gives the sections `fsmharness bench` runs, each a title and what builds its groups
    (building one walks its shapes and makes its histories, so only the chosen are built):
    the shapes (a scenario for each target's definition, else the bundled refund scenario),
    the durable groups, the simulator and the engines on each target's machine, the checkers
    and the scaling groups (states 8, 200, 2,000; history 1k and 100k records; 1 and 2
    processes), then a LangGraph graph bare and under the harness (a group with no
    contenders and a note when langgraph is not installed). The cluster section, which
    starts local Dask clusters, runs only when asked: with `cluster`, or an `only` text that
    holds "cluster". `only` keeps the sections whose title holds one of its texts; `quick`
    shrinks the work (a 10k history, fewer runs, smaller campaigns, the 200-state ring
    walked without the SQLite contenders), not the shapes."""
    targets = list(targets) or [
        Target(str(DEFAULT_SCENARIO), load_definition(DEFAULT_SCENARIO), ReferenceMachine)]
    first = targets[0]
    sections: list[tuple[str, Callable[[], list[Group]]]] = [
        ("shape: 8-state cycle", lambda: [shape_group(cycle8(), "shape: 8-state cycle")]),
        # quick: the SQLite contenders walk the cycle only (a round of the ring is 400 commits)
        ("shape: 200-state ring", lambda: [shape_group(ring(200), "shape: 200-state ring",
                                                       durable=not quick)]),
    ]
    for target in targets:
        definition, machine = target.definition, target.machine
        sections.append((f"shape: scenario {definition.name}",
                         _listed(_scenario_shape_group, definition)))
    sections.append(("durable", durable_groups))
    sections.append(("durable: postgres", lambda: postgres_groups(
        os.environ.get(POSTGRES_DSN_VARIABLE))))
    for target in targets:
        definition, machine = target.definition, target.machine
        sections += [
            (f"simulator {definition.name}", _listed(simulator_group, definition, machine, quick)),
            (f"simulator: per event {definition.name}", _listed(step_group, definition, quick)),
            (f"engines {definition.name}", _listed(engines_group, definition, machine, quick)),
            (f"exhaustive {definition.name}", _listed(exhaustive_group, definition, machine,
                                                      quick))]
    sections += [
        ("checkers", lambda: checker_groups(first.definition,
                                            (1_000, 10_000 if quick else 100_000),
                                            first.machine)),
        ("scaling: states", lambda: [shape_group(ring(8), "scaling: states", durable=False),
                                     shape_group(ring(2000), "scaling: states",
                                                 durable=False)]),
        ("scaling: processes", lambda: [process_group(first.definition, first.machine,
                                                      quick), ceiling_group()]),
        (CLUSTER, lambda: [cluster_group(first.definition, first.machine, quick)]),
        ("memory", lambda: [memory_group(first.definition, first.machine, quick)]),
        ("hunt", lambda: [hunt_group(first.definition, first.machine, quick)]),
        ("langgraph", lambda: langgraph_groups(quick)),
    ]
    if not (cluster or any("cluster" in text for text in only)):
        sections = [(title, build) for title, build in sections if title != CLUSTER]
    if only:
        sections = [(title, build) for title, build in sections
                    if any(text in title for text in only)]
    return sections


# -- the document, the aims, the comparison ----------------------------------------------------

BENCH_KIND = "fsmharness.bench"
BENCH_FORMAT = 1


def document(measured: Sequence[Measured], *, seconds: float, quick: bool,
             skipped: Sequence[Group] = ()) -> dict[str, Any]:
    """Gives the JSON document of a bench run: each figure with its ratio to its group's floor
    and, in the shape groups, each peer's time divided by it (how many times faster it is);
    the groups `skipped` (none measured: what they need is not installed) with their notes."""
    import platform

    floors: dict[str, float] = {}
    peers: dict[tuple[str, str], float] = {}
    for figure in measured:
        floors.setdefault(figure.group, figure.per_op_s)
        if figure.contender in PEERS:
            peers[(figure.group, figure.contender)] = figure.per_op_s
    results = []
    for figure in measured:
        row: dict[str, Any] = {
            "group": figure.group, "contender": figure.contender, "unit": figure.unit,
            "per_op_us": round(figure.per_op_s * 1e6, 4), "rate": round(figure.rate, 1),
            "x_floor": round(figure.per_op_s / floors[figure.group], 3),
        }
        speedups = {peer: round(peers[(figure.group, peer)] / figure.per_op_s, 3)
                    for peer in PEERS if (figure.group, peer) in peers}
        if speedups:
            row["speedup_vs"] = speedups
        row.update(figure.extra)
        results.append(row)
    doc: dict[str, Any] = {
        "kind": BENCH_KIND, "format": BENCH_FORMAT,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": platform.python_version(), "implementation": platform.python_implementation(),
        "platform": platform.platform(terse=True), "cpus": os.cpu_count() or 1,
        "seconds": seconds, "quick": quick, "results": results,
    }
    if skipped:
        doc["skipped"] = [{"group": group.name, "note": group.note} for group in skipped]
    doc["aims"] = aims(results)
    return doc


def _find(results: Sequence[dict[str, Any]], group_prefix: str, contender: str
          ) -> dict[str, Any] | None:
    for row in results:
        if row["group"].startswith(group_prefix) and row["contender"] == contender:
            return row
    return None


Results = Sequence[dict[str, Any]]
#: What an aim reads off a run's rows: the figure and the words it fills in the aim's text (a
#: history's size), or None when the groups it needs were not run.
Figure = Callable[[Results], tuple[float, str] | None]


@dataclass(frozen=True, slots=True)
class Aim:
    """A figure the project aims for: documentation of where it stands, not a verdict on a
    run (`fsmharness bench --check-aims` makes a missed one exit 1)."""

    text: str  # `{}` takes the words the figure gives
    target: float
    higher: bool  # the figure should be at least the target, else at most
    figure: Figure

    def judged(self, results: Results) -> dict[str, Any] | None:
        """Gives the aim as a row of the document, or None when its figures are missing."""
        found = self.figure(results)
        if found is None:
            return None
        value, words = found
        met = value >= self.target if self.higher else value <= self.target
        return {"aim": self.text.format(words), "measured": round(value, 2),
                "target": f"{'>=' if self.higher else '<='} {self.target:g}", "met": met}


def _speedup_of_decide(shape: str) -> Figure:
    def figure(results: Results) -> tuple[float, str] | None:
        row = _find(results, shape, "reference decide")
        if row is None or "transitions" not in row.get("speedup_vs", {}):
            return None
        return row["speedup_vs"]["transitions"], ""

    return figure


def _ratio_of(group_prefix: str, contender: str, *, inverse: bool = False) -> Figure:
    def figure(results: Results) -> tuple[float, str] | None:
        row = _find(results, group_prefix, contender)
        if row is None or (inverse and not row["x_floor"]):
            return None
        return (1 / row["x_floor"] if inverse else row["x_floor"]), ""

    return figure


def _per_logged_event(results: Results) -> tuple[float, str] | None:
    row = next((r for r in results if r["group"].startswith("simulator: ")
                and "per logged event" in r["group"]
                and r["contender"] == "simulate, every fault"), None)
    return (row["x_floor"], "") if row else None


def _checkers(field: str | None) -> Figure:
    """Gives the larger history's figure over the 1k one's: the ratio to the bare pass, or
    the `field` of both (peak memory per record)."""
    def figure(results: Results) -> tuple[float, str] | None:
        small = _find(results, "checkers: 1k", "all invariants")
        large = next((r for r in results if r["group"].startswith("checkers:")
                      and r["contender"] == "all invariants" and r is not small), None)
        if small is None or large is None:
            return None
        key = field or "x_floor"
        return large[key] / small[key], large["group"].split()[1]

    return figure


def _fuzz_memory(results: Results) -> tuple[float, str] | None:
    memory = [r for r in results if r["group"].startswith("memory: fuzz")]
    if len(memory) != 2 or not all("peak_bytes" in r for r in memory):
        return None
    short, long = memory
    return (long["peak_bytes"] / max(short["peak_bytes"], 1),
            f"{long['runs']:,} runs over {short['runs']:,}")


#: Issue 21's aims, and issue 8's that still hold, in the order the document lists them.
AIMS: tuple[Aim, ...] = (
    *(Aim(f"decide faster than transitions ({shape[7:]})", target, True,
          _speedup_of_decide(shape))
      for shape, target in (("shape: 8-state cycle", 6.0), ("shape: 200-state ring", 6.0),
                            ("shape: scenario", 1.5))),
    *(Aim(f"SQLite runtime over the bare sqlite3 loop ({policy})", target, False,
          _ratio_of(f"durable: SQLite {policy}", "reference runtime"))
      for policy, target in (("NORMAL, commit per event", 2.0),
                             ("FULL, commit per event", 2.0),
                             ("NORMAL, group commit of 100", 1.5))),
    Aim("simulated step over the runtime's deliver, per logged event (every fault)", 3, False,
        _per_logged_event),
    Aim("native fuzz steps/s over the Hypothesis machine's", 10, True,
        _ratio_of("engines:", "hypothesis machine")),
    Aim("2 processes over 1 (speed-up of a fuzz campaign)", 1.8, True,
        _ratio_of("scaling: processes, ", "2 processes", inverse=True)),
    Aim("exhaustive search: time per distinct state over a bare BFS of the same graph", 5,
        False, _ratio_of("exhaustive:", "exhaustive search, per distinct state")),
    # per record against a bare pass over the same records: a long history's records sit
    # farther apart in memory, which slows every pass alike and is not the checkers'
    Aim("checkers linear: time per record over a bare pass's, {} over 1k", 1.5, False,
        _checkers(None)),
    Aim("checkers bounded: peak memory per record, {} over 1k", 1.5, False,
        _checkers("peak_bytes_per_record")),
    Aim("fuzz memory bounded: peak of {}", 1.5, False, _fuzz_memory),
)


def aims(results: Results, table: Sequence[Aim] | None = None) -> list[dict[str, Any]]:
    """Gives each aim of `table` (by default `AIMS`) with the figure this run measured and
    whether it was met; an aim whose figures are missing (a peer not installed, a section
    not run) is left out."""
    judged = (aim.judged(results) for aim in (AIMS if table is None else table))
    return [row for row in judged if row is not None]


def missed(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Gives the aims a bench document says were missed."""
    return [aim for aim in doc["aims"] if not aim["met"]]


#: A bench document is a few hundred rows: 16 MB is far past any.
BASELINE_BYTES_MAX = 16_000_000


def load_baseline(path: str | Path) -> dict[str, Any]:
    """Reads a saved bench document; a file that is not one raises `HarnessError`."""
    try:
        data, _ = read_document(path, what="a bench document", bytes_max=BASELINE_BYTES_MAX,
                                yaml_ok=False)
    except FileNotFoundError as exc:
        raise HarnessError(f"{path}: no such file") from exc
    except OSError as exc:
        raise HarnessError(f"{path}: cannot read a bench document: {exc.strerror}") from exc
    except DefinitionSyntaxError as exc:
        problem = document_problem(exc, "cannot read a bench document")
        raise HarnessError(f"{path}: {problem}") from exc
    if not isinstance(data, dict) or data.get("kind") != BENCH_KIND:
        raise HarnessError(f'{path}: not an fsmharness bench document (expected "kind": '
                           f'"{BENCH_KIND}")')
    if data.get("format") != BENCH_FORMAT:
        raise HarnessError(f"{path}: bench format {data.get('format')!r}; this fsmharness "
                           f"reads format {BENCH_FORMAT}")
    rows = data.get("results")
    if not isinstance(rows, list) or not all(
            isinstance(r, dict) and isinstance(r.get("group"), str)
            and isinstance(r.get("contender"), str)
            and isinstance(r.get("x_floor"), int | float)
            and isinstance(r.get("per_op_us"), int | float) for r in rows):
        raise HarnessError(f"{path}: 'results' must be a list of rows with group, contender, "
                           f"per_op_us and x_floor")
    return data


def compare(doc: Mapping[str, Any], baseline: Mapping[str, Any], tolerance: float
            ) -> list[dict[str, Any]]:
    """Gives, for every figure in both runs, how its ratio to the floor moved (the ratio, not
    the time, so that a baseline from another machine still compares); a figure whose ratio
    grew by more than `tolerance` (0.3: 30%) regressed. A floor's ratio is always 1."""
    then = {(r["group"], r["contender"]): r for r in baseline["results"]}
    found = []
    for row in doc["results"]:
        old = then.get((row["group"], row["contender"]))
        if old is None or (row["x_floor"] == 1 and old["x_floor"] == 1):
            continue
        change = row["x_floor"] / old["x_floor"] - 1 if old["x_floor"] else 0.0
        found.append({"group": row["group"], "contender": row["contender"],
                      "x_floor_then": old["x_floor"], "x_floor_now": row["x_floor"],
                      "per_op_us_then": old["per_op_us"], "per_op_us_now": row["per_op_us"],
                      "change": round(change, 3), "regressed": change > tolerance})
    return found
