"""The state one conversion pass shares: what it has built so far, its finding sink, and the
parts (one per construct) that reach each other through it; with the ids and moves every part
makes (`Scope`, `unique`, `final`, `target`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reference_machine.findings import FindingSink
from reference_machine.importers.asl.analysis import maps_over_data, strings
from reference_machine.importers.asl.schemas import scalar_results
from reference_machine.importers.asl.tools import ODD_CHARACTERS

if TYPE_CHECKING:
    from reference_machine.importers.asl.choices import ChoiceRules
    from reference_machine.importers.asl.composites import CompositeStates
    from reference_machine.importers.asl.data_paths import DataPaths
    from reference_machine.importers.asl.document import DocumentConverter
    from reference_machine.importers.asl.expressions import Expressions
    from reference_machine.importers.asl.retries import RetriesAndCatchers
    from reference_machine.importers.asl.states import LeafStates

__all__ = ["Conversion", "Part", "Scope", "StateHandler", "duration", "safe_id"]

# a key may hold hyphens (`$.detail-type`, on every EventBridge event)
_ROOT_READ = re.compile(r"\$\.([A-Za-z_][A-Za-z0-9_\-]*)")


@dataclass
class Scope:
    """Where a state list lives: the top level, a parallel branch (region) or a map's items."""

    prefix: str  # ASL location prefix, `States.` or `States.P.Branches[0].States.`
    parent: str | None  # native parent of its states
    ids: dict[str, str]  # ASL state name -> native id
    key: str  # unique key for synthesized finals
    finals: dict[str, str] = field(default_factory=dict)
    #: ASL state name -> the native id a move to it enters, where that is not its own (a Map
    #: with an ItemReader is entered through the synthetic state drawing its items)
    entry: dict[str, str] = field(default_factory=dict)


#: What converts one state of a type: (native id, the ASL state, its scope, its location, the
#: native state being built, whether it reads JSONata).
StateHandler = Callable[[str, Mapping[str, Any], Scope, str, dict[str, Any], bool], None]


def safe_id(text: str) -> str:
    """Gives the native id of an ASL name: odd characters as `_`, never a leading digit."""
    cleaned = ODD_CHARACTERS.sub("_", text).strip("_")
    if cleaned and not re.match(r"^[A-Za-z_]", cleaned):
        cleaned = "s_" + cleaned
    return cleaned


def duration(value: float) -> str:
    """Gives the native duration of ASL seconds, written with its unit."""
    if value == int(value):
        return f"{int(value)}s"
    return f"{round(value * 1000)}ms"


class Conversion:
    """One conversion pass of a document: the native states, tools and events built so far,
    what the document reads and writes (for the guessed schemas), and the sink of its findings.

    The parts are set when the converter is assembled (`document.assemble`).
    """

    document: DocumentConverter
    leaf_states: LeafStates
    choices: ChoiceRules
    composites: CompositeStates
    retries: RetriesAndCatchers
    data_paths: DataPaths
    expressions: Expressions
    #: the converter of each ASL state type (`Task` -> `LeafStates.convert_task`)
    handlers: dict[str, StateHandler]

    def __init__(self, data: Mapping[str, Any], lines: Mapping[str, int], name: str,
                 tools_file: Mapping[str, Any], flat: frozenset[tuple[str, ...]],
                 inferred: Mapping[str, dict[str, Any]] | None = None) -> None:
        self.data = data
        self.name = name
        self.tools_file = tools_file
        self.flat = flat
        self.written_flat: set[tuple[str, ...]] = set()
        self.sink = FindingSink(lines)
        self.states: dict[str, dict[str, Any]] = {}
        self.tools: dict[str, dict[str, Any]] = {}
        self.tool_where: dict[str, str] = {}
        self.events: dict[str, dict[str, Any]] = {}
        self.taken: set[str] = set()
        self.success_moves: list[Any] = []
        self.current: str | None = None  # the native id of the state being converted
        self.token_read = False
        self.inferred = inferred or {}
        self.scalars = scalar_results(self.inferred)
        self.inferred_for: list[str] = []
        #: where results land: (tool or event, ResultPath segments, OutputPath segments,
        #: ResultSelector key -> result path segments)
        self.result_writes: list[tuple[str, tuple[str, ...], tuple[str | int, ...],
                                       dict[str, tuple[str | int, ...]] | None]] = []
        #: what Choice rules and Map states read: (data path, operator family, literal)
        self.compared: list[tuple[tuple[str | int, ...], str, Any]] = []
        #: the same, per data they read: the top level's (and its branches'), then a list per
        #: map item flow being converted (an item's data is the item)
        self.top_reads: list[tuple[tuple[str | int, ...], str, Any]] = []
        self.reads_by_flow = [self.top_reads]
        self.synthetic: set[str] = set()  # the tools the importer made up (input, item readers)
        self.regions_of: dict[str, list[str]] = {}
        self.jsonata = data.get("QueryLanguage") == "JSONata"
        self.roots_read = sorted({key for text in strings(data)
                                  for key in _ROOT_READ.findall(text)} | (
            {"items"} if maps_over_data(data) else set()))

    def unique(self, base: str) -> str:
        """Gives a native id not taken yet: `base`, else `base_2`, `base_3`, ..."""
        candidate, n = base, 2
        while candidate in self.taken:
            candidate, n = f"{base}_{n}", n + 1
        self.taken.add(candidate)
        return candidate

    def final(self, scope: Scope, outcome: str, why: str) -> str:
        """Gives the synthesized final state of a scope for an outcome, made when first used."""
        if outcome not in scope.finals:
            sid = self.unique(f"{scope.parent}__{outcome}" if scope.parent else
                              f"{scope.key}_{outcome}")
            self.states[sid] = self.with_parent(
                {"type": "final", "outcome": outcome, "description": why}, scope)
            scope.finals[outcome] = sid
        return scope.finals[outcome]

    @staticmethod
    def with_parent(state: dict[str, Any], scope: Scope) -> dict[str, Any]:
        """Gives the native state with its scope's parent, where the scope has one."""
        return {"parent": scope.parent, **state} if scope.parent else state

    def next_target(self, state: Mapping[str, Any], scope: Scope, location: str) -> str:
        """Gives the native id a state's `Next` enters, or its scope's success end for
        `End: true`."""
        if state.get("End") is True:
            return self.final(scope, "success", "the end of the flow (End: true)")
        target = state.get("Next")
        if not isinstance(target, str):
            raise self.sink.fatal("asl-invalid", f"{location}.Next",
                                  "expected Next (a state name) or End: true")
        return self.target(target, scope, f"{location}.Next")

    def target(self, target: Any, scope: Scope, location: str) -> str:
        """Gives the native id a move to the named ASL state enters; refuses a name that is
        not in the scope's state list."""
        if not isinstance(target, str) or target not in scope.ids:
            known = ", ".join(sorted(scope.ids))
            raise self.sink.fatal("asl-unknown-state", location,
                                  f"names the state {target!r}, which is not in this "
                                  f"state list (known: {known})")
        return scope.entry.get(target, scope.ids[target])

    def left_out(self, holder: Mapping[str, Any], known: frozenset[str], location: str,
                 what: str) -> None:
        """Warns of each field of `holder` the importer does not read (`asl-field-ignored`)."""
        for key in holder:
            if key not in known:
                self.sink.warning("asl-field-ignored",
                                  f"{location}.{key}" if location else str(key),
                                  f"{key} of {what} is not modelled natively: left out")


class Part:
    """A part of the converter (one construct): it reaches the shared state and the other parts
    through `conv`, and reports its findings to the conversion's sink."""

    def __init__(self, conv: Conversion) -> None:
        self.conv = conv
        self.sink = conv.sink
