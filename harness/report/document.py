"""The report as a document: one versioned JSON document per run of the CLI or the plugin. It
holds everything the renderers need (the workflow's graph included), so `fsmharness report
REPORT.json` renders again from it alone. Its JSON Schema is `harness/report/report.schema.json`
(`fsmharness schema --report`). Values of the definition's secret keys are redacted. Here too
are the words every rendering tells a document in: a target's verdict and the report's, its
runs, the invariants it checked, its coverage.

The renderers are apart: `markdown_page` (with `mermaid`) and `html_page` (with `drawing`);
`writing` writes the three files, all or nothing.
"""

from __future__ import annotations

import itertools
import json
import os
import shlex
from collections.abc import Mapping, Sequence
from importlib import resources
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Protocol

from harness.checks.coverage import Coverage, transition_label
from harness.checks.invariants import Violation
from harness.errors import HarnessError
from harness.report.diagram import SCOPED_KINDS, diagram_of
from harness.report.redact import REDACTED, redact, secret_values
from harness.sim.history import Committed
from harness.sim.identity import definition_digest
from harness.sim.simulator import SimulationResult
from reference_machine import DefinitionSyntaxError, WorkflowDefinition
from reference_machine.documents import document_problem, read_document

__all__ = ["REPORT_BYTES_MAX", "REPORT_FORMAT", "REPORT_KIND", "Counterexample", "ReportError",
           "broke_as_expected", "checked_line", "counterexample_path", "coverage_line",
           "doc_verdict", "document", "load_report", "report_schema", "runs_told",
           "target_section", "target_verdict", "tool_version", "trace_heading"]

REPORT_KIND, REPORT_FORMAT = "fsmharness.report", 1


class ReportError(HarnessError):
    """A report that cannot be written, or a document that is not a report."""


def tool_version() -> str:
    """Gives fsmharness's installed version."""
    try:
        return version("fsmharness")
    except PackageNotFoundError:  # pragma: no cover - run from a checkout without installing
        return "0+unknown"


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
            and kinds.get(record.state) in SCOPED_KINDS):
        return inner  # a region moved; the parallel or map state stayed
    chain = [record.from_state, *record.via, record.state]
    hops = [(source, transition_label(record) if index == 0 else
             "done" if kinds.get(source) in SCOPED_KINDS else "always", target)
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


def target_verdict(section: Mapping[str, Any]) -> str:
    """Gives a target's verdict in a word: held, violated, broke as expected (a campaign of
    the plugin's `expect=` that broke as it said), untested (it left untested what it claims:
    a crash point, a fault kind, the moves into a state) or vacuous."""
    if section["held"]:
        return "held"
    if broke_as_expected(section):
        return "broke as expected"
    if section["failures"]:
        return "violated"
    return "untested" if section.get("untested") else "vacuous"


def broke_as_expected(section: Mapping[str, Any]) -> bool:
    return bool(section.get("expected", {}).get("met")) and bool(section["failures"])


def doc_verdict(doc: Mapping[str, Any]) -> str:
    """Gives the report's verdict in words: every invariant held, violations found, left
    untested (no violation, and a target that left untested what it claims) or nothing
    exercised (no violation, and a target that exercised nothing)."""
    if doc["held"]:
        return "every invariant held"
    broken = [section for section in doc["targets"] if not section["held"]]
    if broken and all(broke_as_expected(section) for section in broken):
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


def checked_line(section: Mapping[str, Any]) -> str:
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


def coverage_line(coverage: Mapping[str, Any]) -> str:
    return ", ".join(f"{name} {part['reached']}/{part['of']}"
                     for name, part in coverage.items()) or "-"
