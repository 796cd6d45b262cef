"""The whole document: `ChartConverter` assembles the parts of one chart's conversion and runs
them in order; `convert` is the importer's entry point."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from reference_machine.documents import NESTING_MAX
from reference_machine.errors import DefinitionError
from reference_machine.findings import Finding, Severity
from reference_machine.importers._common import Imported
from reference_machine.importers.scxml.actions import ExecutableContent
from reference_machine.importers.scxml.checks import converted, native_checks
from reference_machine.importers.scxml.conversion import Conversion
from reference_machine.importers.scxml.datamodel import Datamodel
from reference_machine.importers.scxml.files import SRC_FILES_MAX, SrcFiles
from reference_machine.importers.scxml.flattening import ParallelFlattener, ParallelPlanner
from reference_machine.importers.scxml.invoke import Invokes
from reference_machine.importers.scxml.keys import (
    CHILDREN,
    NAME,
    OUTBOX,
    SYSTEM_DEFAULTS,
    SYSTEM_KEYS,
)
from reference_machine.importers.scxml.nodes import NS, STATES, Node, parse
from reference_machine.importers.scxml.outbox import Outbox
from reference_machine.importers.scxml.states import Hierarchy
from reference_machine.importers.scxml.transitions import Routing

__all__ = ["ChartConverter", "convert"]

#: The choice state a run starts in when data are bound as it starts (or its first state is
#: below the top).
_START = "_scxml_start"


class ChartConverter:
    """Converts one chart: assembles its `Conversion` and the parts, then `run` gives the
    native definition data."""

    def __init__(self, root: Node, name: str, *, invoked: bool = False,
                 files: SrcFiles | None = None, here: tuple[str, ...] = (),
                 native_parallels: frozenset[str] = frozenset(),
                 memo: dict[tuple[Any, ...], Any] | None = None) -> None:
        chart = Conversion(root, name, invoked=invoked, files=files, here=here,
                           native_parallels=native_parallels, memo=memo)
        chart.converter_type = ChartConverter
        chart.hierarchy = Hierarchy(chart)
        chart.routing = Routing(chart)
        chart.content = ExecutableContent(chart)
        chart.outbox = Outbox(chart)
        chart.invokes = Invokes(chart)
        chart.data = Datamodel(chart)
        chart.planner = ParallelPlanner(chart)
        chart.flattener = ParallelFlattener(chart)
        self.chart = chart

    def run(self) -> dict[str, Any]:
        root = self.chart.root
        if root.tag != "scxml" or root.namespace not in (NS, ""):
            self.chart.sink.error("scxml-root", root, f"the root element is <{root.tag}>, not "
                                  f"<scxml> in namespace {NS}", root.tag)
            raise DefinitionError(self.chart.sink.errors, self.chart.source)
        if self.chart.datamodel not in ("python", "null", "ecmascript"):
            self.chart.sink.error("scxml-datamodel", root, f"datamodel {self.chart.datamodel!r} is "
                                  "refused: its expressions are of a language the import does not "
                                  "translate (the python, ecmascript and null datamodels are "
                                  "imported)", self.chart.datamodel)
            raise DefinitionError(self.chart.sink.errors, self.chart.source)
        if root.attrs.get("binding", "early") != "early":
            self.chart.sink.warning("scxml-binding", root, "binding 'late' is approximated as "
                                    "early: every data item is set when the run starts", "binding")
        self._refuse_everywhere(root)
        self.chart.hierarchy.name_states(root)
        self.chart.planner.plan(root)
        for data in self.chart.elements(root, "data"):
            self.chart.data.item(data)
        for script in root.kids("script"):  # run as the document loads, after the data
            for ident, text in self.chart.scripts.get(id(script), []):
                self.chart.data.bind(ident, text, script, "script")
        for child in root.children:
            if child.namespace == NS and child.tag in STATES:
                self.chart.hierarchy.state(child, None)
            elif child.namespace == NS and child.tag not in ("datamodel", "script"):
                self.chart.unknown(child)
        tops = [c for c in root.kids(*STATES)]
        if not tops:
            self.chart.sink.error("scxml-empty", root, "the chart has no state", "scxml")
        else:
            self.chart.hierarchy.initial(root, None, tops)
        self.chart.routing.place_transitions()
        self.chart.flattener.flatten_all()
        for state in self.chart.states.values():
            if state.get("always"):
                state["always"] = self.chart.routing.errors_raised(state["always"])
            if state.get("done"):
                state["done"] = self.chart.routing.errors_raised(state["done"])
        self.chart.routing.push_eventless_down()
        self.chart.routing.in_flags()
        for name in self.chart.left_flags:
            key = f"_scxml_left_{name}"
            self.chart.context[key] = False
            self.chart.states[name]["exit"] = [*self.chart.states[name].get("exit", []),
                                               {"assign": {key: "True"}}]
        if self.chart.sink.errors:
            raise DefinitionError(self.chart.sink.errors, self.chart.source)
        if self.chart.uses_outbox:
            self.chart.context[OUTBOX] = list(self.chart.startup)
        if self.chart.children:
            self.chart.context[CHILDREN] = self.chart.children
        for name, where in self.chart.system_used.items():
            # a run started with no payload (the simulator's) still has the values SCXML
            # guarantees: a session id, and this processor
            self.chart.context.setdefault(SYSTEM_KEYS[name], SYSTEM_DEFAULTS[name])
            self.chart.sink.warning("scxml-system-variable", where, f"{name} is read from the "
                                    f"context key {SYSTEM_KEYS[name]!r}, which whoever starts the "
                                    "run sets in the start event's payload (the W3C driver does); "
                                    f"otherwise it is {SYSTEM_DEFAULTS[name]!r}", name)
        self.chart.hierarchy.record_shallow()
        if self.chart.deferred or self.chart.start_target is not None:
            self._bind_at_start()
        events = self.chart.routing.event_names()
        self.chart.routing.expand(events)
        native: dict[str, Any] = {
            "name": self._workflow_name(),
            "version": str(root.attrs.get("version", "1")),
            "description": "imported from SCXML " + self.chart.source.replace("\\", "/").rsplit(
                "/", 1)[-1],
            "context": self.chart.context,
            "events": {event: {} for event in sorted(events)},
            "states": self.chart.states,
        }
        return native

    def _bind_at_start(self) -> None:
        """Starts the run in a choice state, initial, whose one eventless transition binds
        the data that read what only the run knows and goes on to the chart's initial state
        (its entry actions run after them, as SCXML binds data before entering anything): the
        top state, or the deeper one the chart's `initial` names (`start_target`)."""
        first = next(n for n, st in self.chart.states.items() if st.get("initial")
                     and st.get("parent") is None)
        del self.chart.states[first]["initial"]
        move: dict[str, Any] = {"target": self.chart.start_target or first}
        if self.chart.deferred:
            move["actions"] = [{"assign": {ident: expression}}
                               for ident, expression in self.chart.deferred]
        self.chart.states = {_START: {"type": "choice", "initial": True, "always": [move]},
                             **self.chart.states}
        if self.chart.start_target is not None:
            self.chart.sink.warning("scxml-deep-initial", self.chart.root, "the chart starts in "
                                    f"{self.chart.start_target!r}, below the top: the run starts "
                                    f"in the choice state {_START!r}, whose eventless move enters "
                                    "it", _START)
        if not self.chart.deferred:
            return
        names = ", ".join(ident for ident, _ in self.chart.deferred)
        self.chart.sink.warning("scxml-bound-at-start", self.chart.root, f"data {names} read what "
                                "only the run knows: they are bound by the eventless move out of "
                                f"the choice state {_START!r} the run starts in", _START)

    def _workflow_name(self) -> str:
        name = self.chart.chart_name or re.sub(r"\.scxml$", "", self.chart.source.replace("\\", "/")
                                               .rsplit("/", 1)[-1])
        name = re.sub(r"[^A-Za-z0-9_.\-]", "_", name) or "scxml"
        return name if NAME.match(name) else f"scxml_{name}"

    def _refuse_everywhere(self, root: Node) -> None:
        for node in self.chart.elements(root, "script"):
            assignments = self.chart.data.script(node)
            if assignments is not None:
                self.chart.scripts[id(node)] = assignments
                names = {name for name, _ in assignments}
                self.chart.declared |= names
                self.chart.assigned |= names


def convert(data: str, lines: Mapping[str, int], name: str, *,
            directory: str | os.PathLike[str] | None = None) -> Imported:
    """Gives the native definition data of an SCXML document, with a warning for each feature
    approximated; raises `DefinitionError` (located) for what cannot be imported.

    `directory` is the one the document's file is in: a `src=` may name a file in it or
    below it (see `SrcFiles`). Without it (a document given as text), every `src=` is
    refused."""
    del lines  # SCXML is located by its own parse
    root = parse(data, name)
    files = SrcFiles(directory)
    memo: dict[tuple[Any, ...], Any] = {}
    try:
        converter, native = converted(
            lambda kept: ChartConverter(root, name, files=files, native_parallels=kept,
                                        memo=memo))
        native, checked = native_checks(native, converter, name)
    except RecursionError as exc:  # each file src= names nests within the last
        raise DefinitionError([Finding(
            Severity.ERROR, "scxml-nesting", "scxml",
            "the charts this one invokes, inline and by src=, nest too deeply to import "
            f"(each file at most {NESTING_MAX} levels, at most {SRC_FILES_MAX} files)")],
            name) from exc
    return Imported(format="scxml", data=native,
                    findings=(*converter.chart.sink.warnings, *checked), source=name)
