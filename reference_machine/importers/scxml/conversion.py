"""What every part of one chart's conversion shares: the `Conversion` (the chart, what was
made of it so far, the finding sink, and the parts, one per construct), and `Part`, the base of
each part."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from reference_machine.findings import FindingSink
from reference_machine.importers.scxml.files import SrcFiles
from reference_machine.importers.scxml.keys import NAME
from reference_machine.importers.scxml.nodes import NS, Node

if TYPE_CHECKING:
    from reference_machine.importers.scxml.actions import ExecutableContent
    from reference_machine.importers.scxml.chart import ChartConverter
    from reference_machine.importers.scxml.datamodel import Datamodel
    from reference_machine.importers.scxml.flattening import (
        Flat,
        ParallelFlattener,
        ParallelPlanner,
    )
    from reference_machine.importers.scxml.invoke import Invokes
    from reference_machine.importers.scxml.outbox import Outbox
    from reference_machine.importers.scxml.states import Hierarchy
    from reference_machine.importers.scxml.transitions import Routing, Transition

__all__ = ["Conversion", "Part"]


class Conversion:
    """The shared state of one chart's conversion: the document, what was made of it so far,
    the findings (`sink`), and the parts that convert each construct, which reach one another
    through it (set by `ChartConverter`)."""

    #: the parts, one per construct
    hierarchy: Hierarchy
    routing: Routing
    content: ExecutableContent
    outbox: Outbox
    invokes: Invokes
    data: Datamodel
    planner: ParallelPlanner
    flattener: ParallelFlattener
    #: converts a chart written inside this one, or in a file it names (`ChartConverter`)
    converter_type: type[ChartConverter]

    def __init__(self, root: Node, name: str, *, invoked: bool = False,
                 files: SrcFiles | None = None, here: tuple[str, ...] = (),
                 native_parallels: frozenset[str] = frozenset(),
                 memo: dict[tuple[Any, ...], Any] | None = None) -> None:
        self.root = root
        #: the charts this one holds or names, converted once for every time `converted`
        #: converts this one again (each with the findings it made)
        self.memo: dict[tuple[Any, ...], Any] = {} if memo is None else memo
        #: parallel states kept native (their flattening was refused: `Unflattened`)
        self.native_parallels = native_parallels
        #: the parallel states flattened, by id() of their node; each state inside one
        #: (its root left out) to it; the event descriptors of the transitions inside
        self.flats: dict[int, Flat] = {}
        self.flat_inside: dict[str, Flat] = {}
        self.flat_events: set[str] = set()
        #: native transitions and actions the flattening made (bounded: `FLAT_MADE_MAX`)
        self.flat_made = 0
        #: an invoked chart (inline `<content>`, or a file `src=` names): it has a parent to
        #: send to, which may set its data
        self.invoked = invoked
        #: what `src=` may read, and the directory of this document in it (names from its root)
        self.files = files or SrcFiles(None)
        self.here = here
        self.invoke_count = 0
        #: the charts this one invokes: invoke id to native definition data
        self.children: dict[str, dict[str, Any]] = {}
        self.source = name
        #: the findings, in the order found
        self.sink = FindingSink()
        self.names: dict[int, str] = {}  # id(node) -> native state name
        self.by_id: dict[str, Node] = {}
        self.node_by_name: dict[str, Node] = {}
        self.states: dict[str, dict[str, Any]] = {}
        self.node_of: dict[str, Node] = {}
        self.context: dict[str, Any] = {}
        self.uses_outbox = False
        self.temp = 0
        self.raised: set[str] = set()
        self.transitions: list[Transition] = []
        self.in_states: dict[str, Node] = {}
        self.stopped = False
        self.syntax_error = False
        self.startup: list[list[Any]] = []
        self.initial_of: dict[str | None, str] = {}  # parent (None: the top) -> initial child
        self.last_system = False
        self.system_used: dict[str, Node] = {}
        #: data bound as the run starts (they read what only the run knows), in order
        self.deferred: list[tuple[str, str]] = []
        #: the state a chart whose `initial` names a state deeper than the top starts in (the
        #: states above it keep their own initial children)
        self.start_target: str | None = None
        #: compound states with a shallow and a deep history each targeted: the deep one is
        #: the native `history: deep`, the shallow one is kept in the context (`_scxml_shallow_ID`)
        self.both_histories: dict[str, Node] = {}
        self.declared = {n.attrs.get("id", "") for n in self.elements(root, "data")}
        # what any executable content may change: a data item no one changes is a constant
        self.assigned = {re.split(r"[.\[]", n.attrs.get("location", ""), maxsplit=1)[0]
                         for n in self.elements(root, "assign")}
        for node in self.walk(root):
            for key in ("idlocation", "item", "index"):
                if key in node.attrs and node.tag in ("send", "invoke", "foreach"):
                    self.assigned.add(node.attrs[key].strip())
        # a foreach declares its item and index when they are not data (W3C test 151)
        self.declared |= {n.attrs[key].strip() for n in self.elements(root, "foreach")
                          for key in ("item", "index") if NAME.match(n.attrs.get(key, "").strip())
                          and not n.attrs[key].strip().startswith("_")}
        self.chart_name = root.attrs.get("name", "")
        #: the ids transitions target (a history no transition targets is left out)
        self.targeted = {target for n in self.elements(root, "transition")
                         for target in n.attrs.get("target", "").split()}
        #: compound states a transition to whose history enters its default target until
        #: they were first left (a context flag `_scxml_left_ID` tells)
        self.left_flags: dict[str, Node] = {}
        #: the invoke ids a `<send target="#_ID">` may name
        self.invoke_ids = {n.attrs["id"] for n in self.elements(root, "invoke") if "id" in n.attrs}
        #: each `<script>`'s assignments, (name, expression text), by id() of its node
        self.scripts: dict[int, list[tuple[str, str]]] = {}
        self.datamodel = root.attrs.get("datamodel", "python")
        #: the language of the chart's expressions, as its messages name it
        self.language = "ECMAScript" if self.datamodel == "ecmascript" else "Python"

    def elements(self, node: Node, tag: str) -> list[Node]:
        """Gives `node` and the elements below it with `tag`, in document order: this
        chart's only."""
        found = [node] if node.namespace == NS and node.tag == tag else []
        if node.tag in ("content", "scxml") and node is not self.root:
            # what a <content> holds (an invoked chart), a chart an <assign> holds, is not
            # this chart's
            return found
        for child in node.children:
            found += self.elements(child, tag)
        return found

    def walk(self, node: Node) -> list[Node]:
        """Gives `node` and every element below it, in document order: this chart's only."""
        out = [node]
        if node.tag == "content" or (node.tag == "scxml" and node is not self.root):
            return out  # an invoked chart, or one an <assign> holds, is not this chart's
        for child in node.children:
            out += self.walk(child)
        return out

    def inside(self, node: Node, owner: Node) -> bool:
        """Tells whether `node` is below `owner`."""
        current = node.parent
        while current is not None:
            if current is owner:
                return True
            current = current.parent
        return False

    def unknown(self, node: Node) -> None:
        """Reports an element that is not imported where it stands."""
        self.sink.error("scxml-element", node, f"<{node.tag}> is not imported here", node.tag)


class Part:
    """A part of a conversion: the methods that convert one construct, working on `chart`."""

    def __init__(self, chart: Conversion) -> None:
        self.chart = chart
