"""Reports: one versioned JSON document per run of the CLI or the plugin, rendered as a Markdown
summary (with the workflow as a Mermaid `stateDiagram-v2`, the counterexample's path styled on
it) and as one self-contained HTML file.

The JSON document holds everything the renderers need (the workflow's graph included), so
`fsmharness report REPORT.json` renders again from it alone. Its JSON Schema is
`harness/report/report.schema.json` (`fsmharness schema --report`). The HTML page draws the workflow
with Graphviz, which the `pygraphviz` wheel of the `diagrams` extra carries (without it, as a
table of states and transitions in pure Python, which says so): the SVG is made when the report
is written, so the page needs no script and no network. Everything that came from the user (names,
messages, traces) is escaped; values of the definition's secret keys are redacted. The three
files are written all or nothing.
"""

from __future__ import annotations

import contextlib
import html
import itertools
import json
import os
import re
import shlex
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Protocol

from harness.checks.coverage import (
    UNSEEN_EVENT,
    Coverage,
    _universe,
    transition_label,
)
from harness.checks.invariants import Violation
from harness.errors import HarnessError
from harness.report.plot import growth_caption, growth_svg
from harness.report.redact import REDACTED, redact, secret_values
from harness.sim.history import Committed
from harness.sim.identity import definition_digest
from harness.sim.simulator import SimulationResult
from reference_machine import TIMER_FIRED, DefinitionSyntaxError, WorkflowDefinition
from reference_machine._load import document_problem, read_document

__all__ = ["REPORT_FORMAT", "ReportError", "ReportFiles", "diagram_of", "ensure_writable",
           "load_report",
           "mermaid", "render_html", "render_markdown", "report_schema", "svg",
           "target_section", "trace_heading", "write_reports"]

REPORT_KIND, REPORT_FORMAT = "fsmharness.report", 1


class ReportError(HarnessError):
    """A report that cannot be written, or a document that is not a report."""


@dataclass(frozen=True, slots=True)
class ReportFiles:
    """Where a report went."""

    json: Path
    markdown: Path
    html: Path


def tool_version() -> str:
    """Gives fsmharness's installed version."""
    try:
        return version("fsmharness")
    except PackageNotFoundError:  # pragma: no cover - run from a checkout without installing
        return "0+unknown"


# --- the document -------------------------------------------------------------------------


def diagram_of(definition: WorkflowDefinition, coverage: Coverage | None = None,
               path: Sequence[tuple[str, str, str]] = ()) -> dict[str, Any]:
    """Gives the workflow's graph: its states (grouped by their compound parents; a parallel
    state's children are its regions), every declared transition (eventless `always` and join
    `done` edges with their guards, internal transitions as self-loops, a transition into a
    compound with history drawn to its history marker) and every move a run made that no event
    declares (forced moves), each marked covered or not and on the counterexample's path or
    not. Keys added for statecharts are left out where they hold nothing, so a definition with
    no statechart construct gives the graph it always gave."""
    universe = _universe(definition)
    declared = _declared_edges(definition, universe["transitions"])
    chart = _ChartIndex(definition, declared)
    taken = set(coverage.transitions) if coverage is not None else set()
    states_reached = coverage.states if coverage is not None else frozenset()
    covered, seen_only = chart.marked(taken)
    moves = set(path)
    on_path, path_only = chart.marked(moves)
    extra = path_only | {t for t in seen_only if t[0] and t[2] and t[1] != UNSEEN_EVENT}
    # a run only passes through a choice (it never rests there): one left was reached
    passed = {key[0] for key in covered if definition.states[key[0]].kind == "choice"}
    states = []
    for name, state in definition.states.items():
        entry: dict[str, Any] = {"name": name, "parent": state.parent or "",
                                 "final": state.final, "outcome": state.outcome or "",
                                 "reached": name in states_reached or name in passed}
        states.append({**entry, **_state_extras(definition, name)})
    edges: list[dict[str, Any]] = []
    for key in sorted(set(declared) | {(*t, "", "") for t in extra}):
        source, event, target, kind, history = key
        edge: dict[str, Any] = {
            "source": source, "event": event, "target": target,
            "declared": key in declared,
            "covered": key in covered or (key not in declared and key[:3] in taken),
            "on_path": key in on_path or (key not in declared and key[:3] in moves)}
        if kind:
            edge["kind"] = kind
        if declared.get(key):
            edge["guard"] = declared[key]
        if history:
            edge["history"] = history
        edges.append(edge)
    return {
        "initial": definition.initial,
        "states": states,
        "transitions": edges,
        "path": [list(step) for step in path],
    }


#: A drawn edge: (source, event, target, kind, history). `kind` is "", "always", "done" or
#: "internal"; `history` names the compound whose history marker the edge is drawn to ("" when
#: none). Coverage keys are (source, event, target) triples.
EdgeKey = tuple[str, str, str, str, str]

_SCOPED_KINDS = ("parallel", "map")


def _declared_edges(definition: WorkflowDefinition,
                    universe: Iterable[tuple[str, str, str]]) -> dict[EdgeKey, str]:
    """Gives every transition the definition declares, as drawn edges with their guards' text
    ("" for an edge whose kind shows no guard, or that some unguarded transition also takes).
    A leaf holds what it inherits; a parallel or map state holds its own transitions (those
    leave it, abandoning the regions), its `done` joins and its eventless moves."""
    parents = {state.parent for state in definition.states.values() if state.parent}
    guards: dict[EdgeKey, list[str]] = {}

    def add(source: str, event: str, target: str, kind: str = "", declared_target: str = "",
            guard: str = "") -> None:
        aimed = definition.states.get(declared_target)
        history = declared_target if (aimed is not None and aimed.history
                                      and declared_target != target) else ""
        guards.setdefault((source, event, target, kind, history), []).append(guard)

    for name, state in definition.states.items():
        if state.final:
            continue
        if name not in parents or state.kind in _SCOPED_KINDS:
            for event, transitions in state.on.items():
                for transition in transitions:
                    if transition.internal:
                        add(name, event, name, "internal")
                    else:
                        add(name, event, transition.target_leaf, "", transition.target)
            if state.after_target is not None:
                spec = definition.spec.states.get(name)
                after = spec.after if spec is not None else None
                add(name, TIMER_FIRED, state.after_target, "",
                    after.target if after is not None else "")
        for transition in (*state.always, *state.done):
            add(name, transition.event, transition.target_leaf, transition.event,
                transition.target, transition.guard_text)
    leaves = _leaves_below(definition)
    drawn = {alias for key in guards for alias in _aliases(key, leaves)}
    for source, event, target in universe:  # whatever else the checks count as declared
        if target and (source, event, target) not in drawn:
            add(source, event, target)
    return {key: (" or ".join(dict.fromkeys(texts)) if key[3] in ("always", "done")
                  and all(texts) else "")
            for key, texts in guards.items()}


def _leaves_below(definition: WorkflowDefinition) -> dict[str, set[str]]:
    """Gives each compound state's leaves, however deep."""
    leaves: dict[str, set[str]] = {}
    parents = {state.parent for state in definition.states.values() if state.parent}
    for name, state in definition.states.items():
        if name not in parents:
            for ancestor in state.ancestors:
                leaves.setdefault(ancestor, set()).add(name)
    return leaves


def _aliases(edge: EdgeKey, leaves: Mapping[str, set[str]]) -> set[tuple[str, str, str]]:
    """Gives the coverage keys that name a drawn edge: its own; for an internal transition,
    one with no target or `forced:internal`; for one into a compound with history, one to
    each leaf the compound can resume."""
    source, event, target, kind, history = edge
    aliases = {(source, event, end) for end in {target} | leaves.get(history, set())}
    if kind == "internal":
        aliases |= {(source, event, ""), (source, "forced:internal", source)}
    return aliases


class _ChartIndex:
    """Tells which drawn edges a set of coverage keys (or a path's moves) took. A key names an
    edge by (source, event, target); an internal transition may be keyed with no target or as
    `forced:internal`; a move into a compound with history lands on whichever leaf it resumed;
    a key that skips the states an eventless run passed through (a choice, a join's next
    state) is the one route of declared edges that explains it; a parallel or map state that
    stays where it is while one of its regions moved is no move of its own."""

    def __init__(self, definition: WorkflowDefinition, declared: Mapping[EdgeKey, str]) -> None:
        self.kinds = {name: state.kind for name, state in definition.states.items()}
        leaves = _leaves_below(definition)
        self.by_key: dict[tuple[str, str, str], list[EdgeKey]] = {}
        self.by_pair: dict[tuple[str, str], list[EdgeKey]] = {}
        self.starts: dict[tuple[str, str], list[EdgeKey]] = {}
        self.eventless: dict[str, list[EdgeKey]] = {}
        self.ends: dict[EdgeKey, set[str]] = {}
        for edge in declared:
            source, event, target, kind, history = edge
            ends = {target} | leaves.get(history, set())
            self.ends[edge] = ends
            for alias in _aliases(edge, leaves):
                self.by_key.setdefault(alias, []).append(edge)
            for end in ends:
                self.by_pair.setdefault((source, end), []).append(edge)
            if kind != "internal":
                self.starts.setdefault((source, event), []).append(edge)
            if kind in ("always", "done"):
                self.eventless.setdefault(source, []).append(edge)

    def marked(self, keys: set[tuple[str, str, str]]
               ) -> tuple[set[EdgeKey], set[tuple[str, str, str]]]:
        """Gives the drawn edges `keys` took, and the keys no declared edge explains."""
        hit: set[EdgeKey] = set()
        left: set[tuple[str, str, str]] = set()
        for key in keys:
            source, event, target = key
            if event == UNSEEN_EVENT:  # seen from outside: any edge between the two states
                hit.update(self.by_pair.get((source, target), ()))
                continue
            if key in self.by_key:
                hit.update(self.by_key[key])
                continue
            explained = self._explain(key)
            if explained is None:
                left.add(key)
            else:
                hit |= explained
        return hit, left

    def _explain(self, key: tuple[str, str, str]) -> set[EdgeKey] | None:
        """Gives the edges a key that names no edge took (none, when it is a region's move or
        more than one route explains it), or None when nothing declared explains it."""
        source, event, target = key
        if self.kinds.get(source) in _SCOPED_KINDS and target == source:
            return set()
        routes: list[list[EdgeKey]] = []
        for first in self.starts.get((source, event), ()):
            for rest in self._routes(first[2], target, {source, first[2]}):
                routes.append([first, *rest])
                if len(routes) > 1:
                    return set()
        return set(routes[0]) if routes else None

    def _routes(self, start: str, target: str, seen: set[str]) -> Iterator[list[EdgeKey]]:
        """Gives each way eventless edges lead from `start` to `target`, visiting no state
        twice."""
        for edge in self.eventless.get(start, ()):
            if target in self.ends[edge]:
                yield [edge]
            elif edge[2] not in seen:
                for rest in self._routes(edge[2], target, seen | {edge[2]}):
                    yield [edge, *rest]


def _state_extras(definition: WorkflowDefinition, name: str) -> dict[str, Any]:
    """Gives what a diagram tells of a state's statechart constructs (nothing for a plain
    state): its kind, history, regions and their initial leaves, a map's items, a conditional
    approval, entry and exit actions."""
    state = definition.states[name]
    extras: dict[str, Any] = {}
    if state.kind in ("choice", *_SCOPED_KINDS):
        extras["kind"] = state.kind
    if state.history:
        extras["history"] = state.history
    if state.kind in _SCOPED_KINDS:
        extras["regions"] = [[region, leaf] for region, leaf in state.regions]
        if state.on_region_failure != "cancel":
            extras["on_region_failure"] = state.on_region_failure
    if state.kind == "map":
        extras.update(items=state.items_text, concurrency_max=state.concurrency_max,
                      tolerated_failures=state.tolerated_failures)
    if state.step is not None and state.step.approval_text:
        extras["approval_if"] = state.step.approval_text
    spec = definition.spec.states.get(name)
    for when in ("entry", "exit"):
        actions = getattr(spec, when, None) or []
        if actions:
            extras[when] = [_action_text(action) for action in actions]
    return extras


def _action_text(action: Any) -> str:
    """Gives an entry or exit action in a few words: the keys it assigns, or the function it
    calls."""
    if getattr(action, "assign", None):
        return "assign " + ", ".join(action.assign)
    function = getattr(action, "function", None)
    if isinstance(function, str):
        return function
    return str(getattr(function, "__name__", "") or "function")


class Counterexample(Protocol):
    """What a report reads of a shrunk failure (`harness.Counterexample` is one): the report
    describes the engines' results without importing the engines."""

    @property
    def seed(self) -> int: ...
    @property
    def violation(self) -> Violation: ...
    @property
    def result(self) -> SimulationResult: ...
    @property
    def steps(self) -> int: ...
    @property
    def original_steps(self) -> int: ...
    @property
    def faults(self) -> int: ...
    def trace(self) -> list[str]: ...


def trace_heading(section: Mapping[str, Any], failure: Mapping[str, Any]) -> str:
    """Says where a failure's trace comes from: shrunk from a seeded run (fuzz), or the
    shortest failing schedule breadth-first search met (explore: no seed, nothing shrunk)."""
    if section.get("engine") == "explore":
        return (f"the shortest failing schedule, {failure.get('shrunk_steps')} steps "
                "(breadth-first)")
    return (f"shrunk to {failure.get('shrunk_steps')} steps (from "
            f"{failure.get('original_steps')}), seed {failure.get('seed')}")


def counterexample_path(counterexample: Counterexample,
                        definition: WorkflowDefinition | None = None
                        ) -> list[tuple[str, str, str]]:
    """Gives the moves the counterexample made, up to the violation, in order (of the violating
    execution, when the violation names one). A statechart's macrostep is told move by move:
    what its regions did, then the move its event made and each eventless move after it (an
    `always`, or a join's `done` out of a parallel or map state)."""
    execution = counterexample.violation.execution
    last = counterexample.violation.step
    kinds = {name: state.kind for name, state in definition.states.items()} if definition \
        else {}
    moves: list[tuple[str, str, str]] = []
    for r in counterexample.result.history:
        if (type(r) is Committed and r.step <= last and r.decision == "accepted" and r.moved
                and (not execution or r.execution == execution)):
            moves += _record_moves(r, kinds)
    return moves


def _record_moves(record: Committed, kinds: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """Gives the moves one committed macrostep made, keyed as the diagram's edges are."""
    inner = [move for move in record.inner if move[0]]  # "": a region starting
    if record.forced == "internal":
        return [(record.from_state, record.moved, record.from_state)] if record.from_state \
            else []
    if (inner and record.from_state == record.state and not record.via
            and kinds.get(record.state) in _SCOPED_KINDS):
        return inner  # a region moved; the parallel or map state stayed
    chain = [record.from_state, *record.via, record.state]
    hops = [(source, transition_label(record) if index == 0 else
             "done" if kinds.get(source) in _SCOPED_KINDS else "always", target)
            for index, (source, target) in enumerate(itertools.pairwise(chain))
            if source]
    return [*inner, *hops]


def target_section(name: str, engine: str, definition: WorkflowDefinition, machine: str,
                   summary: Mapping[str, Any], coverage: Coverage | None,
                   counterexamples: Sequence[tuple[Counterexample | None, Path | None]] = (),
                   options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Gives one target's part of the report: what the engine says (`summary`), the workflow's
    graph with coverage and the first counterexample's path on it, and each failure's replay
    command."""
    failures = []
    for index, (counterexample, replay_file) in enumerate(counterexamples):
        given = summary.get("failures", [{}])[index] if summary.get("failures") else {}
        if counterexample is None:  # not shrunk: told by its first violation
            first_found = (given.get("violations") or [None])[0]
            message = str(Violation(**first_found)) if first_found else given.get("rule", "")
            failures.append({**given, "message": message, "replay_command": ""})
            continue
        violation = counterexample.violation
        failures.append({
            "seed": counterexample.seed, "rule": violation.rule,
            "mutant": str(given.get("mutant", "")),
            "violation": violation.to_dict(), "message": str(violation),
            "shrunk_steps": counterexample.steps, "original_steps": counterexample.original_steps,
            "faults": counterexample.faults, "trace": counterexample.trace(),
            "path": [list(step) for step in counterexample_path(counterexample, definition)],
            "replay_file": str(replay_file) if replay_file else None,
            # quoted as a shell reads it: a path with a space or a quote pastes as it is
            "replay_command": shlex.join(["fsmharness", "replay", str(replay_file)])
            if replay_file else "",
        })
    first = next((c for c, _ in counterexamples if c is not None), None)
    path = counterexample_path(first, definition) if first is not None else []
    secrets = secret_values(definition, first.result.history if first else ())
    section = {
        "name": name, "engine": engine,
        "definition": {"name": definition.name, "version": definition.version,
                       "source": definition.source, "digest": definition_digest(definition)},
        "machine": machine, "held": bool(summary.get("held", not failures)),
        "options": dict(options or {}),
        "runs": int(summary.get("runs", 0)), "steps": int(summary.get("steps", 0)),
        "states_explored": int(summary.get("states", 0)),
        "elapsed_s": float(summary.get("elapsed_s", 0.0)),
        "steps_per_second": float(summary.get("steps_per_second", 0.0)),
        "verdict": str(summary.get("verdict", "")),
        "vacuous": str(summary.get("vacuous", "")),
        "untested": [dict(gap) for gap in summary.get("untested", [])],
        "notes": [str(note) for note in summary.get("notes", [])],
        "invariants": list(summary.get("invariants", [])),
        "checked": list(summary.get("checked", summary.get("invariants", []))),
        "faults": dict(summary.get("faults", {})),
        "coverage": dict(summary.get("coverage", {})),
        "metrics": dict(summary.get("metrics", {})),
        "failures": failures,
        "diagram": diagram_of(definition, coverage, path),
    }
    if engine == "fuzz":  # how the campaign drew its runs, and what its guidance found
        section["adequacy"] = dict(summary.get("adequacy", {}))
        section.update({"strategy": str(summary.get("strategy", "swarm")),
                        "growth": [list(point) for point in summary.get("growth", [])],
                        "targets": dict(summary.get("targets", {})),
                        "guided": dict(summary.get("guided", {}))})
        if summary.get("executor"):  # the cluster it ran on, and the workers it lost
            section["executor"] = dict(summary["executor"])
    return redact(section, secrets)


def _without_context_values(arguments: Sequence[str]) -> list[str]:
    """Gives the command's arguments with each `--context KEY=VALUE`'s value redacted: a value
    may be a secret, and which keys are secret is each definition's to say (the runs' start
    contexts, which replaying needs, are in the replay files)."""
    shown: list[str] = []
    after_flag = False
    for argument in arguments:
        if after_flag and "=" in argument:
            argument = argument.partition("=")[0] + "=" + REDACTED
        elif argument.startswith("--context=") and argument.count("=") >= 2:
            argument = argument.rsplit("=", argument.count("=") - 1)[0] + "=" + REDACTED
        after_flag = argument == "--context"
        shown.append(argument)
    return shown


def document(command: str, sections: Sequence[Mapping[str, Any]],
             arguments: Sequence[str] = ()) -> dict[str, Any]:
    """Gives the whole report: what ran, and one section per target."""
    return {
        "kind": REPORT_KIND, "format": REPORT_FORMAT,
        "tool": {"name": "fsmharness", "version": tool_version()},
        "command": command, "arguments": _without_context_values(arguments),
        "held": all(section["held"] for section in sections),
        "targets": list(sections),
    }


# --- reading and writing ----------------------------------------------------------------------


def report_schema() -> dict[str, Any]:
    """Gives the JSON Schema of report documents."""
    text = resources.files("harness.report").joinpath("report.schema.json").read_text("utf-8")
    return json.loads(text)


#: A report holds a target's counterexamples and coverage: 100 MB is far past any campaign's.
REPORT_BYTES_MAX = 100_000_000


def load_report(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Reads a report document, checked against its schema; raises `ReportError` naming the
    file and the first problem."""
    import jsonschema

    name = str(path)
    try:
        data, _ = read_document(path, what="a report", bytes_max=REPORT_BYTES_MAX,
                                yaml_ok=False)
    except OSError as exc:
        raise ReportError(f"{name}: cannot read: {exc.strerror}") from exc
    except DefinitionSyntaxError as exc:
        raise ReportError(f"{name}: {document_problem(exc, 'not a JSON report')}") from exc
    if not isinstance(data, dict) or data.get("kind") != REPORT_KIND:
        raise ReportError(f"{name}: not an fsmharness report (expected kind {REPORT_KIND!r})")
    if data.get("format") != REPORT_FORMAT:
        raise ReportError(f"{name}: report format {data.get('format')!r}; this fsmharness "
                          f"reads format {REPORT_FORMAT}")
    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(report_schema()).iter_errors(data))
    if error is not None:
        where = "/".join(str(part) for part in error.absolute_path) or "(document)"
        raise ReportError(f"{name}: {where}: {error.message}")
    for index, section in enumerate(data["targets"]):
        problem = _inconsistent(section["diagram"])
        if problem:
            raise ReportError(f"{name}: targets/{index}/diagram: {problem}")
    return data


def _inconsistent(diagram: Mapping[str, Any]) -> str:
    """Tells what in a diagram names a state it does not hold ("" when nothing does)."""
    names = {state["name"] for state in diagram["states"]}
    if diagram["initial"] not in names:
        return f"initial state {diagram['initial']!r} is not among the states"
    for state in diagram["states"]:
        if state["parent"] and state["parent"] not in names:
            return f"state {state['name']!r} has an unknown parent {state['parent']!r}"
        for region, leaf in state.get("regions", ()):
            for named in (region, leaf):
                if named and named not in names:
                    return (f"state {state['name']!r} has a region or initial leaf {named!r} "
                            "that is not among the states")
    for edge in diagram["transitions"]:
        for end in ("source", "target", "history"):
            if end in edge and edge[end] not in names:
                return f"a transition's {end} {edge[end]!r} is not among the states"
    return ""


def ensure_writable(folder: str | os.PathLike[str]) -> Path:
    """Makes `folder` if missing and checks a file can be written there, before any work;
    raises `ReportError` saying why not."""
    path = Path(folder)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".fsmharness-probe-{os.getpid()}"
        probe.write_text("", encoding="utf-8")
        probe.unlink()
    except OSError as exc:
        raise ReportError(f"{folder}: cannot write there: {exc.strerror or exc}") from exc
    return path


def write_reports(doc: Mapping[str, Any], folder: str | os.PathLike[str],
                  stem: str = "fsmharness") -> ReportFiles:
    """Writes `stem`.json, .md and .html into `folder` (made if missing): every file is
    written beside its final name first, and only when all three are whole do they replace
    what was there."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportError(f"{folder}: cannot make the report folder: "
                          f"{exc.strerror or exc}") from exc
    text = json.dumps(doc, indent=2, sort_keys=True) + "\n"
    canonical = json.loads(text)  # render what a reader of the JSON gets, keys sorted
    texts = {".json": text, ".md": render_markdown(canonical), ".html": render_html(canonical)}
    finals = {suffix: folder / f"{stem}{suffix}" for suffix in texts}
    with _all_or_nothing(folder) as stage:
        for suffix, text in texts.items():
            stage(finals[suffix], text)
    return ReportFiles(finals[".json"], finals[".md"], finals[".html"])


@contextlib.contextmanager
def _all_or_nothing(folder: Path) -> Iterator[Any]:
    """Stages files beside their final names; at the end puts them all in place, or, when one
    cannot go, puts back what every final name held before."""
    staged: list[tuple[Path, Path]] = []
    placed: list[tuple[Path, Path | None]] = []  # final name, and the backup of what it held

    def stage(given: Path, text: str) -> None:
        final = Path(os.path.realpath(given))  # a link is written through, never replaced
        if final.exists() and not final.is_file():
            raise ReportError(f"{given}: not a regular file; a report is written whole beside "
                              "its name, so it cannot go there")
        temporary = final.parent / f".{final.name}.{os.getpid()}.tmp"
        staged.append((temporary, final))
        with open(temporary, "w", encoding="utf-8") as out:  # the umask's mode, as any file
            out.write(text)

    try:
        yield stage
        for temporary, final in staged:
            backup = None
            if final.is_file():
                backup = final.with_name(f".{final.name}.{os.getpid()}.previous")
                os.replace(final, backup)
            placed.append((final, backup))
            os.replace(temporary, final)
    except (OSError, ReportError) as exc:
        for final, backup in reversed(placed):
            with contextlib.suppress(OSError):
                if backup is not None:
                    os.replace(backup, final)
                elif final.is_file():
                    os.unlink(final)
        for temporary, _ in staged:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        if isinstance(exc, ReportError):
            raise
        raise ReportError(f"{folder}: cannot write the report: {exc.strerror or exc}") from exc
    for _, backup in placed:
        if backup is not None:
            with contextlib.suppress(OSError):
                os.unlink(backup)


# --- Mermaid and Markdown -------------------------------------------------------------------


def _ids(diagram: Mapping[str, Any]) -> dict[str, str]:
    """Gives each state (and compound parent) a plain identifier, in definition order."""
    ids: dict[str, str] = {}
    for state in diagram["states"]:
        ids.setdefault(state["name"], f"s{len(ids)}")
    return ids


def _plain(text: str) -> str:
    """Gives text safe inside a Mermaid label: letters, digits and a few marks."""
    return re.sub(r"[^\w .\-/]", " ", text).strip() or "-"


#: What Mermaid would take for syntax in a label, and a look-alike it shows instead: a label
#: ends at `:` or `;` (entity codes such as `#58;` are not decoded in a state diagram's labels)
_MERMAID_LOOKALIKES = {ord(":"): "\u2236", ord(";"): "\u037e"}


def _mermaid_text(text: str, *, quoted: bool = False) -> str:
    """Gives an expression (a guard, a map's items) as Mermaid shows it, on one line: `:` and
    `;` as look-alikes; a space after a `<` or `&` that a browser would read as the start of a
    tag or a character reference (`a<b`, `&lt`); `%%` (a directive) split; inside a quoted
    title, `'` for `"`."""
    text = re.sub(r"[\x00-\x1f\x7f\u2028\u2029\x85]", " ", text)
    text = re.sub(r"([<&])(?=[A-Za-z/!?#])", r"\1 ", text.translate(_MERMAID_LOOKALIKES))
    text = re.sub(r"%(?=%)", "% ", text)
    return text.replace('"', "'") if quoted else text


class _Shape:
    """What both renderers read of a diagram beyond its lists: states by name, children by
    parent, and the region or map state each state runs inside."""

    def __init__(self, diagram: Mapping[str, Any]) -> None:
        self.states = {state["name"]: state for state in diagram["states"]}
        self.children: dict[str, list[Mapping[str, Any]]] = {}
        for state in diagram["states"]:
            self.children.setdefault(state["parent"], []).append(state)
        #: a region's or map state's initial leaf
        self.starts: dict[str, str] = {}
        for state in diagram["states"]:
            for region, leaf in state.get("regions", ()):
                self.starts[region or state["name"]] = leaf

    def kind(self, name: str) -> str:
        return str(self.states[name].get("kind", "")) if name in self.states else ""

    def is_root(self, name: str) -> bool:
        """Tells whether `name` is a region (a parallel state's child) or a map state: what a
        region's or item's flow runs inside."""
        return self.kind(name) == "map" or (
            name in self.states and self.kind(self.states[name]["parent"]) == "parallel")

    def scope(self, name: str) -> str:
        """Gives the region or map state `name` runs inside ("" at the top)."""
        parent = self.states[name]["parent"] if name in self.states else ""
        while parent:
            if self.is_root(parent):
                return str(parent)
            parent = self.states[parent]["parent"] if parent in self.states else ""
        return ""

    def anchor(self, name: str) -> str:
        """Gives the leaf an edge to or from a compound `name` is drawn at (its initial one
        where known)."""
        while name in self.children:
            name = self.starts.get(name) or self.children[name][0]["name"]
        return name

    def leaving(self, name: str) -> str:
        """Gives the leaf an edge out of a compound `name` is drawn from: a final state of its
        flow (of its last region, for a parallel state), so that what follows the compound
        is laid out after it; its initial leaf when it has no final state."""
        while name in self.children:
            children = self.children[name]
            finals = [child["name"] for child in children if child["final"]]
            if finals:
                name = finals[-1]
            elif self.kind(name) == "parallel":
                name = children[-1]["name"]
            else:
                return self.anchor(name)
        return name


def _title(state: Mapping[str, Any]) -> str:
    """Gives what a compound's label adds to its name: parallel, or what a map maps over and
    how many items run at once ("" for a plain compound)."""
    kind = state.get("kind", "")
    waits = state.get("on_region_failure") == "wait"
    if kind == "parallel":
        return "parallel" + (", a failed region waits for the others" if waits else "")
    if kind != "map":
        return ""
    limit = state.get("concurrency_max")
    tolerated = int(state.get("tolerated_failures") or 0)
    words = [f"map over {state.get('items', '')}",
             f"{limit} at once" if limit else "all at once"]
    if tolerated:
        words.append(f"{tolerated} failure{'s' if tolerated > 1 else ''} tolerated")
    if waits:
        words.append("a failed item waits for the others")
    return ", ".join(words)


def _notes(state: Mapping[str, Any]) -> list[str]:
    """Gives the lines a state's box adds below its name: a conditional approval, its entry
    and exit actions."""
    notes = [f"needs approval if {state['approval_if']}"] if state.get("approval_if") else []
    notes += [f"{when} / {', '.join(state[when])}" for when in ("entry", "exit")
              if state.get(when)]
    return notes


def _history_mark(state: Mapping[str, Any]) -> str:
    return "H*" if state.get("history") == "deep" else "H"


def mermaid(diagram: Mapping[str, Any]) -> str:
    """Gives the workflow as a Mermaid `stateDiagram-v2`; an edge never covered says so in its
    label; the counterexample's path is drawn in its own style: its transitions' labels in
    bold (and marked in words), its states in the `counterexample` class (red, bold).

    Compound states are composite states; a parallel state's regions are separated by `--`
    (Mermaid's concurrency), each region (and a map's flow) holding its own start, moves and
    ends; a choice is a `<<choice>>`; a compound with history holds an `H` (shallow) or `H*`
    (deep) state that the transitions into the compound go to; a conditional approval and
    entry and exit actions are lines of the state's description."""
    ids = _ids(diagram)
    shape = _Shape(diagram)
    lines = ["stateDiagram-v2"]

    def declare(parent: str, depth: int) -> None:
        states = shape.children.get(parent, [])
        for index, state in enumerate(states):
            if index and shape.kind(parent) == "parallel":
                lines.append("    " * depth + "--")
            declare_one(state, depth)

    def declare_one(state: Mapping[str, Any], depth: int) -> None:
        pad = "    " * depth
        name, sid = state["name"], ids[state["name"]]
        if state.get("kind") == "choice":
            lines.extend([f"{pad}%% {_plain(name)}", f"{pad}state {sid} <<choice>>"])
            return
        title = _title(state)
        extra = f" ({_mermaid_text(title, quoted=True)})" if title else ""
        lines.append(f'{pad}state "{_plain(name)}{extra}" as {sid}')
        if name not in shape.children:
            lines.extend(f"{pad}{sid}: {_mermaid_text(note)}" for note in _notes(state))
            return
        lines.append(f"{pad}state {sid} {{")
        declare(name, depth + 1)
        if state.get("history"):
            lines.append(f'{pad}    state "{_history_mark(state)}" as {sid}h')
        if shape.is_root(name):
            moves(name, depth + 1)
        lines.append(f"{pad}}}")

    def moves(scope: str, depth: int) -> None:
        """Adds the start, transitions and ends of the top level or of one region's flow."""
        pad = "    " * depth
        initial = shape.starts.get(scope, "") if scope else diagram["initial"]
        if initial in ids:
            lines.append(f"{pad}[*] --> {ids[initial]}")
        for edge in diagram["transitions"]:
            if _edge_scope(shape, edge) == scope:
                target = (f"{ids[edge['history']]}h" if edge.get("history") in ids
                          else ids[edge["target"]])
                lines.append(f"{pad}{ids[edge['source']]} --> {target}: "
                             f"{_mermaid_label(edge)}")
        for state in diagram["states"]:
            if state["final"] and shape.scope(state["name"]) == scope:
                lines.append(f"{pad}{ids[state['name']]} --> [*]")

    declare("", 1)
    moves("", 1)
    # the states the counterexample passed through, in its colours (Mermaid styles no
    # composite state, and no transition: those are in bold in their labels)
    passed = dict.fromkeys(name for move in diagram.get("path", ()) for name in
                           (move[0], move[2]) if name in ids and name not in shape.children)
    if passed:
        lines += [f"    classDef {_PATH_CLASS} {_PATH_STYLE}",
                  f"    class {','.join(ids[name] for name in passed)} {_PATH_CLASS}"]
    return "\n".join(lines) + "\n"


#: The Mermaid class of the states on the counterexample's path, and how they are drawn: the
#: HTML report's colour for the path, in bold.
_PATH_CLASS = "counterexample"
_PATH_STYLE = "fill:#fde2e1,stroke:#d62728,stroke-width:3px,color:#8b0000,font-weight:bold"


def _edge_scope(shape: _Shape, edge: Mapping[str, Any]) -> str:
    """Gives the region or map state an edge runs inside ("" at the top, where an edge whose
    ends lie in different scopes is drawn too)."""
    scope = shape.scope(edge["source"])
    return scope if scope == shape.scope(edge["target"]) else ""


def _edge_text(edge: Mapping[str, Any], plain: Any = str, expression: Any = str) -> str:
    """Gives an edge's label: its event, `(internal)` after an internal transition's, and an
    eventless or join edge's guard in brackets."""
    text = plain(edge["event"])
    if edge.get("kind") == "internal":
        text += " (internal)"
    elif edge.get("guard"):
        text += f" [{expression(edge['guard'])}]"
    return str(text)


def _mermaid_label(edge: Mapping[str, Any]) -> str:
    label = _edge_text(edge, _plain, _mermaid_text)
    if edge["on_path"]:  # Mermaid draws a label's HTML bold (and lets no class style an edge)
        label = f"<b>{label}</b> (counterexample)"
    elif not edge["covered"]:
        label += " (never taken)"
    return label


_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+!|~])")


def _md(text: Any) -> str:
    """Escapes text for Markdown: no HTML, no links or images, no emphasis, no column
    breaks; it reads as the same characters."""
    escaped = _MARKDOWN.sub(r"\\\1", _one_line(text))
    return html.escape(escaped, quote=False)


def _md_code(text: Any) -> str:
    """Gives text as a Markdown code span that nothing in it can close (a path or command
    with a backtick in it): fenced by one backtick more than its longest run of them, and
    padded so that a backtick at either end stays inside. A code span shows its characters
    as they are, so nothing else needs escaping."""
    line = _one_line(text)
    fence = "`" * (max((len(run) for run in re.findall(r"`+", line)), default=0) + 1)
    return f"{fence} {line} {fence}"


def _one_line(text: Any) -> str:
    """Gives text on one line: a line break in it could end a Markdown block or table row."""
    return re.sub(r"[\r\n\u2028\u2029\x0b\x0c\x85]", " ", str(text))


def _amount(section: Mapping[str, Any]) -> str:
    """Gives how much a target's engine did: steps (fuzz) or distinct states (explore)."""
    if section["engine"] == "explore":
        return f"{section['states_explored']:,} states"
    return f"{section['steps']:,}"


def _coverage_line(coverage: Mapping[str, Any]) -> str:
    return ", ".join(f"{name} {part['reached']}/{part['of']}"
                     for name, part in coverage.items()) or "-"


def target_verdict(section: Mapping[str, Any]) -> str:
    """Gives a target's verdict in a word: held, violated, broke as expected (a campaign of
    the plugin's `expect=` that broke as it said), untested (it left untested what it claims:
    a crash point, a fault kind, the moves into a state) or vacuous."""
    if section["held"]:
        return "held"
    if _as_expected(section):
        return "broke as expected"
    if section["failures"]:
        return "violated"
    return "untested" if section.get("untested") else "vacuous"


def _as_expected(section: Mapping[str, Any]) -> bool:
    return bool(section.get("expected", {}).get("met")) and bool(section["failures"])


def doc_verdict(doc: Mapping[str, Any]) -> str:
    """Gives the report's verdict in words: every invariant held, violations found, left
    untested (no violation, and a target that left untested what it claims) or nothing
    exercised (no violation, and a target that exercised nothing)."""
    if doc["held"]:
        return "every invariant held"
    broken = [section for section in doc["targets"] if not section["held"]]
    if broken and all(_as_expected(section) for section in broken):
        return "every invariant held but the breaks expected"
    if any(section["failures"] for section in doc["targets"]):
        return "violations found"
    if any(section.get("untested") for section in broken):
        return "left untested"
    return "nothing exercised"


def runs_told(section: Mapping[str, Any]) -> str:
    """Gives a fuzz campaign's runs as told: "200 runs", or "200 runs + 3 aimed" when it ran
    some again aimed at what the others left untested."""
    aimed = sum(int(part.get("runs", 0))
                for part in section.get("adequacy", {}).get("aimed", {}).values())
    runs = section["runs"] - aimed
    return f"{runs:,} run{'s' if runs != 1 else ''}" + (f" + {aimed} aimed" if aimed else "")


def _checked_line(section: Mapping[str, Any]) -> str:
    """Gives how many invariants judged something in a fuzz campaign, of those it ran, and
    why the others judged nothing (the reasons in short)."""
    checked, ran = section.get("checked", []), section["invariants"]
    line = f"{len(checked)} of {len(ran)} invariants checked"
    judged = section.get("adequacy", {}).get("invariants", {})
    kinds = [(kind, sum(1 for part in judged.values() if kind in part))
             for kind in ("moot", "unable", "idle")]
    words = {"moot": "nothing to check in this definition", "unable": "kept from it by the "
             "machine", "idle": "nothing to judge in these runs"}
    told = [f"{count} {words[kind]}" for kind, count in kinds if count]
    return line + (f" ({'; '.join(told)})" if told else "")


def _held_cell(section: Mapping[str, Any]) -> str:
    if section["held"]:
        return "yes"
    if _as_expected(section):
        return f"no, as expected ({_md(', '.join(section['expected']['invariants']))})"
    return f"**no** ({target_verdict(section)})"


def render_markdown(doc: Mapping[str, Any]) -> str:
    """Gives the report as Markdown fit for a CI job summary."""
    verdict = doc_verdict(doc)
    out = [f"# fsmharness {_md(doc['command'])}: {verdict}", "",
           "| target | engine | held | runs | steps | coverage |",
           "|---|---|---|---|---|---|"]
    for section in doc["targets"]:
        out.append(f"| {_md(section['name'])} | {_md(section['engine'])} | "
                   f"{_held_cell(section)} | "
                   f"{section['runs']} | "
                   f"{_amount(section)} | {_md(_coverage_line(section['coverage']))} |")
    for section in doc["targets"]:
        out += ["", f"## {_md(section['name'])}", ""]
        if section["verdict"] and not section["failures"]:  # a violation is told below
            out += [_md(section["verdict"]), ""]
        if section.get("untested") and not section["failures"]:
            out += [f"- untested: {_md(gap['what'])}; how: {_md(gap['how'])}"
                    for gap in section["untested"]] + [""]
        if section["engine"] == "fuzz":
            out += [_md(_checked_line(section)), ""]
        out += [line for note in section.get("notes", ()) for line in (f"> note: {_md(note)}",
                                                                      "")]
        out += ["```mermaid", mermaid(section["diagram"]).rstrip(), "```", ""]
        if section.get("growth"):
            out += [_md(growth_caption(section["growth"])), ""]
        for failure in section["failures"]:
            out += [f"### violated: {_md(failure.get('rule', '?'))}", "",
                    _md(failure.get("message", "")), ""]
            if failure.get("trace"):
                out += ["```text", *[_one_line(line).replace("```", "'''")
                                     for line in failure["trace"]], "```", ""]
            if failure.get("replay_command"):
                out += [f"replay: {_md_code(failure['replay_command'])}", ""]
        if section["faults"]:
            out += ["| fault | injected |", "|---|---|"]
            out += [f"| {_md(kind)} | {count} |" for kind, count in section["faults"].items()]
            out.append("")
        for name, part in section["coverage"].items():
            if part["missing"]:
                missing = ", ".join(_md(" ".join(map(str, m)) if isinstance(m, list) else m)
                                    for m in part["missing"][:20])
                more = f" and {len(part['missing']) - 20} more" if len(part["missing"]) > 20 \
                    else ""
                out.append(f"- {_md(name)} never seen: {missing}{more}")
    return "\n".join(out).rstrip() + "\n"


# --- Graphviz and HTML ------------------------------------------------------------------------


_EDGE_STYLE = {  # (on path, covered) -> attributes
    (True, True): {"color": "#d62728", "penwidth": "3", "fontcolor": "#d62728"},
    (True, False): {"color": "#d62728", "penwidth": "3", "fontcolor": "#d62728"},
    (False, True): {"color": "#2c7a2c", "penwidth": "1.6", "fontcolor": "#2c7a2c"},
    (False, False): {"color": "#9a9a9a", "style": "dashed", "fontcolor": "#7a7a7a"},
}


def _dot_label(text: str) -> str:
    """Gives text Graphviz shows as written: backslashes are not escapes, and a value that
    starts with `<` and ends with `>` would be taken as an HTML label, so it gets a space."""
    text = text.replace("\\", "\\\\").replace("\n", " ")
    return f"{text} " if text.startswith("<") and text.endswith(">") else text


def _dot_lines(lines: Sequence[str]) -> str:
    """Gives lines Graphviz shows one under the other, each as written."""
    text = "\\n".join(line.replace("\\", "\\\\").replace("\n", " ") for line in lines)
    return f"{text} " if text.startswith("<") and text.endswith(">") else text



def _dot_padded(lines: Sequence[str]) -> str:
    """Gives lines Graphviz shows one under the other, each as written, with room around
    them: two labels side by side never touch (an HTML-like label, its text escaped)."""
    text = "<br/>".join(html.escape(line, quote=False) for line in lines)
    return (f'<<table border="0" cellborder="0" cellpadding="{_LABEL_PAD_PT}" '
            f'cellspacing="0"><tr><td>{text}</td></tr></table>>')


#: Graphviz draws in points, which a page shows at 4/3 CSS px each; labels are set in these
#: sizes (an edge label reads at 13 px when the drawing is shown at its natural size).
_PX_PER_PT = 4 / 3
_EDGE_FONT_PT, _STATE_FONT_PT = "10", "11"
#: The smallest an edge label may be shown, in CSS px: a drawing wider than the page is
#: shrunk to fit it only this far, and scrolls inside its box beyond that.
_LEGIBLE_PX = 11.5
_SHRINK_MIN = _LEGIBLE_PX / (float(_EDGE_FONT_PT) * _PX_PER_PT)
#: The width of the report's diagram box in a window 1400 px wide, in CSS px: a layout left
#: to right that does not fit it is laid out top to bottom too, and the narrower one kept.
_BOX_PX = 1260
#: Characters per line, and lines at most, of what a drawing writes: an edge's event and
#: guard, a state's name (never cut: it names the state), a note in a state's box, and a
#: compound's title. What is cut ends with an ellipsis; the element's tooltip holds it whole.
_EDGE_LINE, _EDGE_LINES = 28, 3
_NAME_LINE, _CHOICE_LINE = 24, 16
_NOTE_LINE, _NOTE_LINES = 40, 2
_TITLE_LINE, _TITLE_LINES = 48, 2
_ELLIPSIS = "\u2026"
#: The room kept around an edge label, in points.
_LABEL_PAD_PT = 3


def _wrapped(text: str, width: int, lines_max: int = 0) -> list[str]:
    """Gives `text` as lines of at most `width` characters, broken at spaces; a word longer
    than a line is broken after a run of `_ . / -` (so a long identifier breaks between its
    words), or cut where it must. With `lines_max`, at most that many lines, the last ending
    with an ellipsis when some text did not fit."""
    pieces: list[str] = []
    for word in text.split():
        parts = [word] if len(word) <= width else re.findall(r".+?(?:[_./\-]+|$)", word)
        for part in parts:
            pieces += [part[start:start + width] for start in range(0, len(part), width)]
        pieces[-1] += " "
    lines: list[str] = []
    line = ""
    for piece in pieces:
        if line and len(line) + len(piece.rstrip()) > width:
            lines.append(line.rstrip())
            line = ""
        line += piece
    lines.append(line.rstrip())
    if lines_max and len(lines) > lines_max:
        lines = lines[:lines_max]
        lines[-1] = lines[-1][:width - 1].rstrip() + _ELLIPSIS
    return lines


_CLUSTER_STYLE = {  # kind -> attributes; a region's cluster is drawn inside its parallel one
    "parallel": {"style": "rounded", "color": "#555555"},
    "map": {"style": "rounded,bold", "color": "#555555"},
    "region": {"style": "dashed", "color": "#999999"},
}


def svg(diagram: Mapping[str, Any]) -> str:
    """Draws the workflow with Graphviz's dot layout; gives the SVG element (no prolog, no
    comments). Without pygraphviz (the `diagrams` extra), gives `table_svg`'s drawing instead.

    Compound states are clusters; a parallel state is a cluster holding one dashed cluster per
    region (`id` parallel-*, region-*), a map state one cluster labelled with what it maps over
    (map-*); each region and map flow has its own start; a choice is a diamond; a compound with
    history holds an H or H* marker (history-*) the transitions into it point to. Long labels
    are wrapped and cut; each state's and edge's `<title>` (its tooltip) holds its whole text.
    Edge labels are drawn after every edge and state, with room around each and a halo. A
    layout left to right too wide for the report's page is laid out top to bottom too, and
    the narrower of the two kept. The drawing takes the page's width up to its natural size
    (1 pt to 4/3 px), and shrinks only until an edge label is `_LEGIBLE_PX` high: past that,
    the report's diagram box scrolls."""
    graphviz = _pygraphviz()
    if graphviz is None:
        return table_svg(diagram)
    graph = _dot_graph(diagram, graphviz)
    text = _drawn(graph)
    if _width_pt(text) * _PX_PER_PT * _SHRINK_MIN > _BOX_PX:  # too wide even shrunk
        graph.graph_attr["rankdir"] = "TB"
        upright = _drawn(graph)
        if _width_pt(upright) < _width_pt(text):
            text = upright
    width_px = _width_pt(text) * _PX_PER_PT
    root = _labels_on_top(ET.fromstring(text), _titles(diagram))
    # as wide as the page allows, never wider than its natural size, and never narrower
    # than makes an edge label smaller than `_LEGIBLE_PX`
    root.set("class", "workflow")
    root.set("style", f"width:100%;height:auto;max-width:{width_px:.0f}px;"
                      f"min-width:{width_px * _SHRINK_MIN:.0f}px")
    return ET.tostring(root, encoding="unicode")


#: What a drawing made without Graphviz says at its top.
NO_GRAPHVIZ = "the Graphviz layout needs fsmharness's diagrams extra (pygraphviz)"
#: The table drawing's monospace font: its size and a character's width, in px.
_TABLE_FONT_PX, _TABLE_CHAR_PX = 12, 7.3
_TABLE_ROW_PX, _TABLE_PAD_PX, _TABLE_ARROW_PX = 20, 10, 44
#: Characters at most of a transition's label in the table (its tooltip holds it whole).
_TABLE_LABEL = 60
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_TABLE_CSS = ("text{font:12px ui-monospace,Menlo,Consolas,monospace;fill:#1d1d1f}"
              "text.head{font-weight:bold}text.note{fill:#8a6d00}"
              "text.unreached{fill:#888888}text.path{fill:#d62728;font-weight:bold}"
              "text.covered{fill:#2c7a2c}text.untaken{fill:#7a7a7a}")


def table_svg(diagram: Mapping[str, Any]) -> str:
    """Gives the workflow drawn in pure Python, for where Graphviz is not installed: an SVG
    element that says so on its first line, then each state on a line (initial, final with
    its outcome, choice, the compound it sits in, its notes; grey when never reached) and each
    transition on a line, source, label, an arrow styled as the Graphviz drawing's edges
    (covered green, never taken dashed grey, the counterexample's path red, a forced move
    dotted) and target. States and edges keep the drawing's ids (`state-*`, `edge-*`) and
    their whole text as a tooltip."""
    ids = _ids(diagram)
    shape = _Shape(diagram)
    state_rows = []
    for state in diagram["states"]:
        name = state["name"]
        facts = ["initial"] if name == diagram["initial"] else []
        if state["final"]:
            facts.append(f"final ({state['outcome']})" if state.get("outcome") else "final")
        if name in shape.children:
            facts.append(_title(state) or "compound")
        elif state.get("kind") == "choice":
            facts.append("choice")
        if state["parent"]:
            facts.append(f"in {state['parent']}")
        if state.get("history"):
            facts.append(f"history ({state['history']})")
        facts += _notes(state)
        if not state["reached"] and name not in shape.children:
            facts.append("never reached")
        state_rows.append((name, "; ".join(facts), state["reached"] or name in shape.children))
    name_chars = max([len("state"), *(len(name) for name, _, _ in state_rows)])
    edge_rows = []
    for index, edge in enumerate(diagram["transitions"]):
        target = f"{edge['history']} (history)" if edge.get("history") else edge["target"]
        label = _wrapped(_edge_text(edge), _TABLE_LABEL, 1)[0]
        if not edge["declared"]:
            label += " (forced)"
        edge_rows.append((index, edge, edge["source"], label, target))
    source_chars = max([len("from"), *(len(row[2]) for row in edge_rows)])
    label_chars = max([len("on"), *(len(row[3]) for row in edge_rows)])
    target_chars = max([len("to"), *(len(row[4]) for row in edge_rows)])

    def width(chars: int) -> float:
        return chars * _TABLE_CHAR_PX + 2 * _TABLE_PAD_PX

    source_x = _TABLE_PAD_PX
    label_x = source_x + width(source_chars)
    arrow_x = label_x + width(label_chars)
    target_x = arrow_x + _TABLE_ARROW_PX + _TABLE_PAD_PX
    note = (f"A table of {len(diagram['states'])} states and {len(diagram['transitions'])} "
            f"transitions, not a drawing: {NO_GRAPHVIZ}.")
    widest = max(target_x + width(target_chars), width(len(note)),
                 _TABLE_PAD_PX + width(name_chars) + width(max(
                     [len("what"), *(len(facts) for _, facts, _ in state_rows)])))
    root = ET.Element(f"{{{_SVG_NS}}}svg", {"class": "workflow table"})
    ET.SubElement(root, f"{{{_SVG_NS}}}style").text = _TABLE_CSS
    y: float = _TABLE_ROW_PX

    def text(parent: ET.Element, x: float, words: str, css: str = "") -> None:
        attributes = {"x": f"{x:.0f}", "y": f"{y:.0f}"}
        if css:
            attributes["class"] = css
        ET.SubElement(parent, f"{{{_SVG_NS}}}text", attributes).text = _CONTROL.sub(" ", words)

    text(root, _TABLE_PAD_PX, note, "note")
    y += 1.5 * _TABLE_ROW_PX
    facts_x = _TABLE_PAD_PX + width(name_chars)
    text(root, _TABLE_PAD_PX, "state", "head")
    text(root, facts_x, "what", "head")
    for name, told, reached in state_rows:
        y += _TABLE_ROW_PX
        row = ET.SubElement(root, f"{{{_SVG_NS}}}g", {"id": f"state-{ids[name]}"})
        ET.SubElement(row, f"{{{_SVG_NS}}}title").text = _CONTROL.sub(
            " ", " / ".join([name, *_notes(shape.states[name])]))
        css = "" if reached else "unreached"
        text(row, _TABLE_PAD_PX, name, css)
        text(row, facts_x, told, css)
    y += 1.5 * _TABLE_ROW_PX
    for x, head in ((source_x, "from"), (label_x, "on"), (target_x, "to")):
        text(root, x, head, "head")
    for index, edge, source, label, target in edge_rows:
        y += _TABLE_ROW_PX
        row = ET.SubElement(root, f"{{{_SVG_NS}}}g", {"id": f"edge-{index}", "class": "edge"})
        ET.SubElement(row, f"{{{_SVG_NS}}}title").text = _CONTROL.sub(" ", _edge_title(edge))
        css = "path" if edge["on_path"] else "covered" if edge["covered"] else "untaken"
        style = _EDGE_STYLE[(edge["on_path"], edge["covered"])]
        dash = {"dashed": "6,4", "dotted": "2,3"}.get(
            "dotted" if not edge["declared"] and not edge["on_path"] else style.get("style", ""))
        stroke = {"stroke": style["color"], "stroke-width": style.get("penwidth", "1.2"),
                  "fill": "none"}
        if dash:
            stroke["stroke-dasharray"] = dash
        middle = y - _TABLE_FONT_PX / 3
        end = arrow_x + _TABLE_ARROW_PX
        ET.SubElement(row, f"{{{_SVG_NS}}}path",
                      {"d": f"M{arrow_x:.0f},{middle:.0f} H{end - 6:.0f}", **stroke})
        ET.SubElement(row, f"{{{_SVG_NS}}}path",
                      {"d": f"M{end - 7:.0f},{middle - 4:.0f} L{end:.0f},{middle:.0f} "
                            f"L{end - 7:.0f},{middle + 4:.0f} Z",
                       "fill": style["color"], "stroke": "none"})
        text(row, source_x, source, css)
        text(row, label_x, label, css)
        text(row, target_x, target, css)
    height = y + _TABLE_ROW_PX
    root.set("width", f"{widest:.0f}")
    root.set("height", f"{height:.0f}")
    root.set("viewBox", f"0 0 {widest:.0f} {height:.0f}")
    return ET.tostring(root, encoding="unicode")


_SVG_NS, _XLINK_NS = "http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"
ET.register_namespace("", _SVG_NS)
ET.register_namespace("xlink", _XLINK_NS)
#: A white halo around an edge label's letters: an edge that passes under the label (they are
#: drawn after every edge) shows as a gap, never as a stroke through the text.
_LABEL_CSS = ("g.edge-label text{paint-order:stroke;stroke:#fff;stroke-width:4px;"
              "stroke-linejoin:round}")


def _shown(state: Mapping[str, Any]) -> str:
    """Gives a state's name as its box shows it: inside a compound whose name it starts with,
    as importers name nested states (`parent__child`, `parent.child`), without that prefix,
    which the compound's own title shows; the whole name is its tooltip."""
    name, parent = str(state["name"]), str(state["parent"])
    for mark in ("__", "."):
        if parent and name.startswith(parent + mark) and len(name) > len(parent + mark):
            return name[len(parent + mark):]
    return name


def _labels_on_top(root: ET.Element, titles: Mapping[str, str]) -> ET.Element:
    """Gives Graphviz's drawing with each state's and edge's `<title>` (its tooltip) saying
    its whole text, and each edge's label taken out of the edge into a group of its own
    (`edge-N-label`) drawn after every edge and state, with a halo: no edge is drawn over a
    label."""
    tag = f"{{{_SVG_NS}}}"
    graph = root.find(f"{tag}g")
    if graph is None:  # pragma: no cover - Graphviz always draws the graph's group
        raise ReportError("Graphviz drew no graph")
    style = ET.Element(f"{tag}style")
    style.text = _LABEL_CSS
    root.insert(0, style)
    lifted = []
    for group in graph.iter(f"{tag}g"):
        name = group.get("id", "")
        title, anchor = group.find(f"{tag}title"), group.find(f"{tag}g/{tag}a")
        # Graphviz titles a group with its node's name (s3, cluster_s0): the tooltip says
        # what the element is instead
        told = titles.get(name) or (anchor.get(f"{{{_XLINK_NS}}}title") if anchor is not None
                                    else None)
        if told and title is not None:
            title.text = told
        if group.get("class") != "edge":
            continue
        for child in list(group):
            if child.tag == f"{tag}g" and child.get("id", "").endswith("-label"):
                group.remove(child)
                label = ET.Element(f"{tag}g", {"id": f"{name}-label", "class": "edge-label"})
                ET.SubElement(label, f"{tag}title").text = titles.get(name, "")
                label.append(child)
                lifted.append(label)
    graph.extend(lifted)
    return root


def _drawn(graph: Any) -> str:
    """Gives Graphviz's SVG element of a graph, without prolog or comments."""
    with _quiet_stderr():
        drawn = graph.draw(format="svg", prog="dot")
    text = drawn.decode("utf-8") if isinstance(drawn, bytes) else str(drawn)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    start = text.find("<svg")
    if start < 0:  # pragma: no cover - Graphviz always answers with an SVG element
        raise ReportError("Graphviz drew no SVG")
    return text[start:].strip()


def _width_pt(text: str) -> float:
    """Gives the width of Graphviz's SVG element, in points."""
    found = re.match(r'<svg width="([\d.]+)pt"', text)
    return float(found[1]) if found else 0.0


def _titles(diagram: Mapping[str, Any]) -> dict[str, str]:
    """Gives each drawn state's and edge's whole text by its SVG id: what its tooltip says
    where its label was wrapped or cut."""
    ids = _ids(diagram)
    titles = {}
    for state in diagram["states"]:
        lines = [state["name"], *_notes(state)]
        titles[f"state-{ids[state['name']]}"] = "\n".join(lines)
    for index, edge in enumerate(diagram["transitions"]):
        titles[f"edge-{index}"] = _edge_title(edge)
    return titles


def _edge_title(edge: Mapping[str, Any]) -> str:
    """Gives an edge's whole text: where it goes and its label unwrapped."""
    target = f"{edge['history']} (history)" if edge.get("history") else edge["target"]
    return f"{edge['source']} -> {target}: {_edge_text(edge)}"


def _pygraphviz() -> Any:
    """Gives the `pygraphviz` module, or None where the `diagrams` extra is not installed."""
    try:
        import pygraphviz
    except ImportError:
        return None
    return pygraphviz


def _dot_graph(diagram: Mapping[str, Any], pygraphviz: Any = None) -> Any:
    """Gives the workflow as a Graphviz graph (a `pygraphviz.AGraph`), not laid out yet."""
    pygraphviz = pygraphviz or _pygraphviz()
    if pygraphviz is None:
        raise ReportError(f"drawing the workflow with Graphviz needs pygraphviz: {NO_GRAPHVIZ}")
    ids = _ids(diagram)
    shape = _Shape(diagram)
    graph = pygraphviz.AGraph(directed=True, strict=False, compound=True, rankdir="LR")
    graph.graph_attr.update(fontname="Helvetica", fontsize=_STATE_FONT_PT, nodesep="0.35",
                            ranksep="0.45", bgcolor="transparent")
    graph.node_attr.update(shape="box", style="rounded,filled", fontname="Helvetica",
                           fontsize=_STATE_FONT_PT, fillcolor="#ffffff", color="#555555")
    graph.edge_attr.update(fontname="Helvetica", fontsize=_EDGE_FONT_PT, arrowsize="0.7")
    clusters: dict[str, Any] = {"": graph}

    def holder(name: str) -> Any:
        if name in clusters:
            return clusters[name]
        state = shape.states[name]
        title = _title(state)
        shown = _shown(state)
        lines = _wrapped(f"{shown} ({title})" if title else shown, _TITLE_LINE, _TITLE_LINES)
        lines += [part for note in _notes(state)
                  for part in _wrapped(note, _TITLE_LINE, _NOTE_LINES)]
        whole = " / ".join([f"{name} ({title})" if title else name, *_notes(state)])
        attributes = {"label": _dot_lines(lines), "style": "rounded,dashed",
                      "color": "#777777", "fontname": "Helvetica",
                      "fontsize": _STATE_FONT_PT, "tooltip": _dot_label(whole)}
        kind = "region" if shape.kind(state["parent"]) == "parallel" else state.get("kind")
        if kind in _CLUSTER_STYLE:
            attributes.update(_CLUSTER_STYLE[str(kind)], id=f"{kind}-{ids[name]}")
        cluster = holder(state["parent"]).add_subgraph(name=f"cluster_{ids[name]}",
                                                        **attributes)
        clusters[name] = cluster
        return cluster

    def end(name: str, side: str) -> tuple[str, dict[str, str]]:
        """Gives the node an edge is drawn at, and where a compound's it clips at its box.
        An edge into a compound is drawn to the start of its flow (of its first region's),
        at the top of its box, and one out of it from a final state, at the bottom: so the
        edge's label lies outside the box."""
        if name not in shape.children:
            return ids[name], {}
        clip = {side: f"cluster_{ids[name]}"}
        if side == "ltail":
            return ids[shape.leaving(name)], clip
        inner = name
        while inner in shape.children:
            if shape.is_root(inner) and inner in shape.starts:
                return f"start_{ids[inner]}", clip
            inner = shape.starts.get(inner) or shape.children[inner][0]["name"]
        return ids[inner], clip

    graph.add_node("start", label="", shape="circle", width="0.18", style="filled",
                   fillcolor="#333333")
    for state in diagram["states"]:
        name = state["name"]
        if name in shape.children:
            cluster = holder(name)
            sid = ids[name]
            if state.get("history"):
                mark = _history_mark(state)
                cluster.add_node(f"{sid}h", label=mark, shape="circle", width="0.3",
                                 fixedsize="true", fontsize="9", id=f"history-{sid}",
                                 tooltip=_dot_label(f"{name}: history ({state['history']})"))
            if shape.is_root(name) and name in shape.starts:
                cluster.add_node(f"start_{sid}", label="", shape="circle", width="0.12",
                                 style="filled", fillcolor="#333333", id=f"start-{sid}")
            continue
        lines = _wrapped(_shown(state),
                        _CHOICE_LINE if state.get("kind") == "choice" else _NAME_LINE)
        lines += [part for note in _notes(state)
                  for part in _wrapped(note, _NOTE_LINE, _NOTE_LINES)]
        attributes = {"label": _dot_lines(lines), "id": f"state-{ids[name]}",
                      "tooltip": _dot_label(" / ".join([name, *_notes(state)]))}
        if state.get("kind") == "choice":
            attributes.update(shape="diamond", style="filled", fontsize=_EDGE_FONT_PT)
        if state["final"]:
            attributes.update(peripheries="2", fillcolor="#eef3fb")
        if not state["reached"]:
            attributes.update(fillcolor="#f4f4f4", fontcolor="#888888", color="#aaaaaa")
        holder(state["parent"]).add_node(ids[name], **attributes)
    head, clip = end(diagram["initial"], "lhead")
    graph.add_edge("start", head, color="#333333", **clip)
    for root, leaf in shape.starts.items():
        if root in shape.children and leaf in ids:
            head, clip = end(leaf, "lhead")
            graph.add_edge(f"start_{ids[root]}", head, color="#333333", **clip)
    for index, edge in enumerate(diagram["transitions"]):
        style = dict(_EDGE_STYLE[(edge["on_path"], edge["covered"])])
        if not edge["declared"] and not edge["on_path"]:
            style["style"] = "dotted"
        if shape.states[edge["target"]]["final"]:
            # an edge into a final state (a failure many states share) weighs nothing: else
            # each of them pulls the final state toward itself, and the flow drifts aside
            # rank after rank, a staircase twice as wide as it needs
            style["weight"] = "0"
        tail, tail_clip = end(edge["source"], "ltail")
        head_clip: dict[str, str] = {}
        if edge.get("history") in ids:
            head = f"{ids[edge['history']]}h"
        else:
            head, head_clip = end(edge["target"], "lhead")
        whole = _dot_label(_edge_title(edge))
        graph.add_edge(tail, head, key=str(index),
                       label=_dot_padded(_wrapped(_edge_text(edge), _EDGE_LINE, _EDGE_LINES)),
                       id=f"edge-{index}", tooltip=whole, labeltooltip=whole,
                       **style, **tail_clip, **head_clip)
    return graph


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Keeps Graphviz's and fontconfig's notices (written by C code to fd 2) off the user's
    terminal."""
    try:
        saved = os.dup(2)
    except OSError:  # pragma: no cover - no stderr to keep quiet
        yield
        return
    try:
        with open(os.devnull, "w") as sink:
            os.dup2(sink.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


_CSS = """
body{font:14px/1.45 -apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0;color:#1d1d1f;
background:#fafafa}
header{padding:18px 28px;background:#1d2433;color:#fff}
header h1{margin:0;font-size:20px}.held{color:#7ee787}.broken{color:#ff7b72}
main{padding:8px 28px 40px}
section.target{background:#fff;border:1px solid #ddd;border-radius:8px;margin:18px 0;
padding:6px 20px 16px}
h2{font-size:17px}h3{font-size:15px;margin-top:18px}
table{border-collapse:collapse;margin:6px 0 12px;font-size:13px}
th,td{border:1px solid #ddd;padding:3px 9px;text-align:left;vertical-align:top}
th{background:#f2f2f2}td.n{text-align:right;font-variant-numeric:tabular-nums}
.diagram svg.workflow{display:block}
.diagram{overflow:auto;border:1px solid #eee;border-radius:6px;padding:8px;background:#fff}
.legend span{display:inline-block;margin-right:16px;font-size:12px}
.sw{display:inline-block;width:22px;height:0;border-top:3px solid;vertical-align:middle;
margin-right:5px}
ul.trace{list-style:none;font:12px/1.5 ui-monospace,Menlo,Consolas,monospace;background:#f6f8fa;
padding:10px 10px 10px 44px;border-radius:6px}
code{font:12px ui-monospace,Menlo,Consolas,monospace;background:#f0f0f0;padding:1px 4px}
.grid{display:flex;flex-wrap:wrap;gap:24px}
.missing{color:#8a6d00;font-size:12px}
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _table(head: Sequence[str], rows: Sequence[Sequence[Any]], numeric: Sequence[int] = ()
           ) -> str:
    """Gives an HTML table; an empty `head` gives one of label-value rows."""
    if not rows:
        return "<p>none</p>"
    cells = "".join(
        "<tr>" + "".join(f'<td class="n">{_e(v)}</td>' if i in numeric else
                         f"<th>{_e(v)}</th>" if not head and i == 0 else f"<td>{_e(v)}</td>"
                         for i, v in enumerate(row)) + "</tr>" for row in rows)
    top = "<tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr>" if head else ""
    return f"<table>{top}{cells}</table>"


def _duration(ms: float) -> str:
    """Gives virtual milliseconds in the unit that reads best."""
    for unit, size in (("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms >= size:
            return f"{ms / size:.1f} {unit}"
    return f"{ms:.0f} ms"


def _html_section(index: int, section: Mapping[str, Any]) -> str:
    verdict = target_verdict(section)
    parts = [f'<section class="target" id="target-{index}">',
             f'<h2>{_e(section["name"])} <small>({_e(section["engine"])}, '
             f'<span class="{"held" if section["held"] else "broken"}-t">{verdict}</span>)'
             f'</small></h2>']
    # what broke, its shrunk trace and the replay come first: the diagram is below the facts
    for failure in section["failures"]:
        parts.append(f'<h3 class="broken-t">Violated: {_e(failure.get("rule", "?"))}</h3>'
                     f'<p>{_e(failure.get("message", ""))}</p>')
        if failure.get("trace"):
            steps = "".join(f"<li>{_e(line)}</li>" for line in failure["trace"])
            heading = trace_heading(section, failure)
            parts.append(f'<p>{_e(heading[0].upper() + heading[1:])}:</p>'
                         f'<ul class="trace">{steps}</ul>')
        if failure.get("replay_command"):
            parts.append(f'<p>Replay: <code>{_e(failure["replay_command"])}</code></p>')
    definition = section["definition"]
    facts = [("test", section["test"])] if section.get("test") else []
    if section.get("expected"):
        expected = section["expected"]
        facts.append(("expected to break", ", ".join(expected["invariants"])
                      + ("" if expected["met"] else " (it did not break as expected)")))
    facts += [("definition", f"{definition['name']} {definition['version']}"),
              ("machine", section["machine"]), ("runs", f"{section['runs']:,}")]
    if section["engine"] == "explore":
        facts.append(("distinct states", f"{section['states_explored']:,}"))
    else:
        facts += [("steps", f"{section['steps']:,}"),
                  ("steps/s", f"{section['steps_per_second']:,.0f}")]
    facts += [("time", f"{section['elapsed_s']:.2f} s"),
              ("invariants checked", _checked_line(section) if section["engine"] == "fuzz"
               else len(section["invariants"]))]
    if section["verdict"] and not section["failures"]:  # a violation is told below
        facts.append(("verdict", section["verdict"]))
    if not section["failures"]:
        facts += [("untested", f"{gap['what']}; how: {gap['how']}")
                  for gap in section.get("untested", ())]
    facts += [("note", note) for note in section.get("notes", ())]
    parts.append(_table([], facts))
    try:
        drawing = svg(section["diagram"])
    except ReportError as exc:  # pragma: no cover - Graphviz always draws an SVG
        drawing = f"<pre>{_e(mermaid(section['diagram']))}</pre><p>{_e(exc)}</p>"
    parts += ['<h3>Workflow</h3><div class="legend">'
              '<span><i class="sw" style="border-color:#2c7a2c"></i>covered</span>'
              '<span><i class="sw" style="border-color:#9a9a9a;border-top-style:dashed"></i>'
              'never taken</span>'
              '<span><i class="sw" style="border-color:#d62728"></i>counterexample</span>'
              '<span><i class="sw" style="border-color:#9a9a9a;border-top-style:dotted"></i>'
              'forced move</span></div>',
              f'<div class="diagram">{drawing}</div>']
    coverage = section["coverage"]
    rows = [(name, part["reached"], part["of"],
             f"{100 * part['reached'] / part['of']:.0f}%" if part["of"] else "-")
            for name, part in coverage.items()]
    parts.append('<div class="grid"><div><h3>Coverage</h3>'
                 + _table(["dimension", "reached", "of", ""], rows, (1, 2, 3)))
    for name, part in coverage.items():
        if part["missing"]:
            shown = ", ".join(" ".join(map(str, m)) if isinstance(m, list) else str(m)
                              for m in part["missing"][:30])
            parts.append(f'<p class="missing">{_e(name)} never seen: {_e(shown)}</p>')
    if section.get("growth"):  # reports from before growth was measured lack it
        title = f"coverage growth ({section['strategy']})" if section.get("strategy") \
            else "coverage growth"
        parts.append(f'<div class="plot">{growth_svg(section["growth"], title=title)}</div>')
    parts.append("</div><div><h3>Faults injected</h3>"
                 + _table(["fault", "injected"], sorted(section["faults"].items()), (1,))
                 + "</div></div>")
    parts.append(_metrics_html(section["metrics"]))
    parts.append("</section>")
    return "".join(parts)


def _metrics_html(metrics: Mapping[str, Any]) -> str:
    if not metrics:
        return ""
    states = [(name, m["visits"], _duration(m["mean_time_ms"]), m["failures"],
               f"{100 * m['failure_rate']:.1f}%") for name, m in metrics["states"].items()]
    tools = [(name, m["calls"], m["resends"], f"{100 * m['resend_rate']:.1f}%")
             for name, m in metrics["tools"].items()]
    per = [("executions", metrics["executions"]),
           ("transitions per execution (mean / max)",
            f"{metrics['transitions']['mean']} / {metrics['transitions']['max']}"),
           ("cost per execution (mean / max)",
            f"{metrics['cost']['mean']} / {metrics['cost']['max']}"),
           ("stuck executions", metrics["stuck"])]
    return ("<h3>Metrics</h3><div class=\"grid\"><div><h4>Per state</h4>"
            + _table(["state", "visits", "mean time (virtual)", "failures", "failure rate"],
                     states, (1, 2, 3, 4))
            + "</div><div><h4>Per tool</h4>"
            + _table(["tool", "calls", "re-sends", "re-send rate"], tools, (1, 2, 3))
            + "</div><div><h4>Approvals</h4>"
            + _table(["outcome", "count"], list(metrics["approvals"].items()), (1,))
            + "<h4>Endings</h4>"
            + _table(["ending", "executions"], list(metrics["endings"].items()), (1,))
            + "<h4>Per execution</h4>" + _table([], per, (1,)) + "</div></div>")


def render_html(doc: Mapping[str, Any]) -> str:
    """Gives the report as one self-contained HTML page (inline SVG and CSS, no script)."""
    held = doc["held"]
    title = f"fsmharness {doc['command']}: {doc_verdict(doc)}"
    rows = [(s["name"], s["engine"], target_verdict(s), s["runs"], s["steps"],
             _coverage_line(s["coverage"])) for s in doc["targets"]]
    body = "".join(_html_section(index, section) for index, section in enumerate(doc["targets"]))
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "style-src 'unsafe-inline'; img-src data:\">"
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>"
        f"<header><h1>fsmharness {_e(doc['command'])}: "
        f"<span class=\"{'held' if held else 'broken'}\">"
        f"{doc_verdict(doc)}</span></h1>"
        f"<div>fsmharness {_e(doc['tool']['version'])} · {_e(' '.join(doc['arguments']))}"
        "</div></header><main>"
        + _table(["target", "engine", "verdict", "runs", "steps", "coverage"], rows, (3, 4))
        + body + "</main></body></html>\n")
