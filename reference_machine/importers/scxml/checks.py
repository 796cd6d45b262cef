"""What was made, checked: the conversion run again with each `<parallel>` it cannot flatten
kept native, and the native load-time checks, their findings located in the SCXML document."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from reference_machine._definition import check_spec
from reference_machine.documents import validate
from reference_machine.errors import DefinitionError, ReferenceMachineError
from reference_machine.findings import Finding, Severity
from reference_machine.importers.scxml.flattening import Unflattened

if TYPE_CHECKING:
    from reference_machine.importers.scxml.chart import ChartConverter

__all__ = ["converted", "in_file", "native_checks"]


def in_file(finding: Finding, shown: str, where: str, line: int) -> Finding:
    """Gives a finding about a file `src=` names located at the attribute naming it (`where`,
    at `line` of the chart), the file and its own place in the message."""
    place = ", ".join(p for p in (f"line {finding.line}" if finding.line else "",
                                  finding.location) if p)
    return Finding(finding.severity, finding.code, where,
                   f"in {shown}{f' ({place})' if place else ''}: {finding.message}",
                   finding.ids, line)


def converted(make: Callable[[frozenset[str]], ChartConverter]
              ) -> tuple[ChartConverter, dict[str, Any]]:
    """Runs the converter `make` gives, which flattens each `<parallel>` to give it SCXML's
    meaning; one it cannot flatten (`Unflattened`) is kept native, said so, and the chart
    converted again."""
    kept: dict[str, str] = {}
    while True:
        converter = make(frozenset(kept))
        try:
            native = converter.run()
        except Unflattened as exc:
            if exc.parallel in kept:  # a parallel kept native is never flattened again
                raise ReferenceMachineError(f"parallel {exc.parallel!r} refused twice") from exc
            kept[exc.parallel] = exc.reason
            continue
        for parallel, reason in kept.items():
            converter.chart.sink.warning("scxml-parallel-native", converter.chart.node_by_name.get(
                parallel, converter.chart.root), f"parallel state {parallel!r} keeps the native "
                f"meaning, its regions run as separate executions joined by done: ({reason}); "
                "SCXML's regions share one configuration and one datamodel", parallel)
        return converter, native


def native_checks(native: dict[str, Any], converter: ChartConverter, name: str
                  ) -> tuple[dict[str, Any], list[Finding]]:
    """Runs the native load-time checks on what was made: states no transition reaches are
    left out (with a warning: they cannot change a run), a chart that need not end is
    `reactive`, and any other native error is raised, located in the SCXML document."""
    notes: list[Finding] = []
    for _ in range(len(native["states"]) + 2):
        try:
            spec = validate(native, {}, name)
        except DefinitionError as exc:
            raise DefinitionError([_relocated(f, converter) for f in exc.findings],
                                  name) from exc
        findings = check_spec(spec)
        errors = [f for f in findings if f.severity is Severity.ERROR]
        unreachable = [f.ids[0] for f in errors if f.code == "unreachable-state" and f.ids]
        if unreachable:
            for state in unreachable:
                node = converter.chart.node_of.get(state)
                removed = native["states"].pop(state, None) or {}
                siblings = [n for n, st in native["states"].items()
                            if st.get("parent") == removed.get("parent")]
                if removed.get("initial") and removed.get("parent") and siblings:
                    # its parent is entered only through states inside it: which child is
                    # initial changes nothing, but the native format wants one
                    native["states"][siblings[0]]["initial"] = True
                if node is not None:
                    notes.append(Finding(Severity.WARNING, "scxml-unreachable", node.path,
                                         f"state {state!r} cannot be reached: left out",
                                         (state,), node.line))
            continue
        if any(f.code in ("no-final", "no-way-to-final") for f in errors) and not native.get(
                "reactive"):
            native["reactive"] = True
            notes.append(Finding(Severity.WARNING, "scxml-reactive", "scxml",
                                 "some state can reach no top-level final state: the chart is "
                                 "imported as `reactive: true` (an SCXML chart need not end)",
                                 (), converter.chart.root.line))
            continue
        if errors:
            raise DefinitionError([_relocated(f, converter) for f in errors], name)
        return native, notes
    raise DefinitionError([Finding(Severity.ERROR, "scxml-native", "scxml",
                                   "the native checks did not settle", (), None)], name)


def _relocated(finding: Finding, converter: ChartConverter) -> Finding:
    """Gives a native finding located in the SCXML document (the state it names)."""
    parts = finding.location.split(".")
    node = converter.chart.node_of.get(parts[1]) if len(parts) > 1 and parts[0] == "states" \
        else None
    location = node.path if node is not None else "scxml"
    line = node.line if node is not None else converter.chart.root.line
    return Finding(finding.severity, finding.code, location,
                   f"native check ({finding.location}): {finding.message}", finding.ids, line)
