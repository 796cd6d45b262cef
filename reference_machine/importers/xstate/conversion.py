"""The shared state of one XState conversion, and `Part`, the base of the parts that each read
one construct over it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from reference_machine.findings import FindingSink
from reference_machine.importers.xstate.nodes import StateNode

if TYPE_CHECKING:
    from reference_machine.importers.xstate.actions import ActionReader
    from reference_machine.importers.xstate.events import EventCatalog
    from reference_machine.importers.xstate.functions import FunctionReader
    from reference_machine.importers.xstate.hierarchy import Hierarchy
    from reference_machine.importers.xstate.invoke import InvokeReader
    from reference_machine.importers.xstate.parallel import ParallelReader
    from reference_machine.importers.xstate.states import StateTree
    from reference_machine.importers.xstate.timers import TimerReader
    from reference_machine.importers.xstate.transitions import TransitionReader

__all__ = ["Conversion", "Part"]


class Conversion:
    """What the parts of one conversion share: its findings, the state nodes as read, and the
    native definition as it is written."""

    def __init__(self, lines: Mapping[str, int], source: str,
                 delays: Mapping[str, int] | None = None) -> None:
        self.sink = FindingSink(lines)
        self.source = source
        #: the named delays of the machine's implementations; None where they are unknown
        #: (a JSON config: they are given in JavaScript, with `.provide()` or `setup()`)
        self.delays = None if delays is None else dict(delays)
        self.ids: dict[str, StateNode] = {}
        self.nodes: list[StateNode] = []
        self.used: set[str] = set()
        self.states: dict[str, dict[str, Any]] = {}
        self.events: dict[str, dict[str, Any]] = {}
        self.event_names: dict[str, str] = {}   # XState event -> native event
        self.tools: dict[str, dict[str, Any]] = {}
        self.history_via: set[int] = set()      # ids of compounds entered through a history node
        self.direct_to: dict[int, str] = {}     # compound with history -> a location targeting it
        self.error_finals: dict[str | None, str] = {}
        self.compound_after: dict[str, dict[str, Any]] = {}
        self.compound_always: dict[str, list[Any]] = {}
        self.root_on: dict[str, list[Any]] = {}
        self.used_context: set[str] = set()
        self.reactive = False
        self.root: StateNode | None = None
        self.flat: dict[int, bool] = {}
        #: while a region's transitions are read into a product: the region and its parallel
        self.product_source: tuple[StateNode, StateNode] | None = None

    def fresh(self, name: str) -> str:
        """Gives `name`, or `name_2`, `name_3`... where it is taken, and takes it."""
        candidate, count = name, 1
        while candidate in self.used:
            count += 1
            candidate = f"{name}_{count}"
        self.used.add(candidate)
        return candidate


class Part:
    """One construct's share of a conversion: the shared state (`ctx`), its findings (`sink`),
    and the other parts, linked when the converter is assembled (`machine.MachineConverter`)."""

    tree: StateTree
    catalog: EventCatalog
    transitions: TransitionReader
    functions: FunctionReader
    actions: ActionReader
    invocations: InvokeReader
    timers: TimerReader
    parallel: ParallelReader
    hierarchy: Hierarchy

    def __init__(self, ctx: Conversion) -> None:
        self.ctx = ctx
        self.sink = ctx.sink

    def link(self, whole: Part) -> None:
        """Takes the other parts from the assembled converter."""
        self.tree = whole.tree
        self.catalog = whole.catalog
        self.transitions = whole.transitions
        self.functions = whole.functions
        self.actions = whole.actions
        self.invocations = whole.invocations
        self.timers = whole.timers
        self.parallel = whole.parallel
        self.hierarchy = whole.hierarchy
