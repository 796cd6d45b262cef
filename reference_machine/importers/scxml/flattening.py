"""Parallel states, SCXML's way: each outermost `<parallel>` flattened, each configuration its
regions reach a native state (the algorithm is `parallel`'s; here its subtree is read from the
chart and its answers made native states and transitions)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reference_machine.importers.scxml.conversion import Part
from reference_machine.importers.scxml.keys import FINALIZE, NAME, RESERVED
from reference_machine.importers.scxml.nodes import NS, STATES, Node
from reference_machine.importers.scxml.parallel import (
    CONFIGURATIONS_MAX,
    Kind,
    Move,
    NotFlat,
    Place,
    Selection,
    Subtree,
)

__all__ = ["Flat", "ParallelFlattener", "ParallelPlanner", "Unflattened"]

#: The most native transitions and actions flattening the parallel states of one chart may
#: make (each selection's transition and its actions); past it a parallel stays native.
FLAT_MADE_MAX = 20_000

#: The longest expression flattening may write (a native expression is at most 1,000
#: characters, and the user's own expressions sit inside it).
_FLAT_EXPRESSION_MAX = 900

#: The longest name of a configuration's native state before it is numbered instead.
_PRODUCT_NAME_MAX = 60


class Unflattened(Exception):
    """A `<parallel>` that cannot be flattened (see `parallel`): the chart is
    converted again with it kept native."""

    def __init__(self, parallel: str, reason: str) -> None:
        super().__init__(reason)
        self.parallel, self.reason = parallel, reason


@dataclass
class Flat:
    """A `<parallel>` given SCXML's meaning: its subtree, the native actions of each
    state's entry and exit and of each transition inside, and its configurations' native
    states (see `ParallelPlanner.flat_state`)."""

    node: Node
    name: str
    subtree: Subtree
    entry: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    exit: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    guards: dict[int, str] = field(default_factory=dict)
    bodies: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    nodes: dict[int, Node] = field(default_factory=dict)
    done_pairs: dict[str, str | None] = field(default_factory=dict)
    products: dict[frozenset[str], str] = field(default_factory=dict)
    #: configurations transitions from outside enter; the one the chart's initial names
    entries: list[frozenset[str]] = field(default_factory=list)
    initial: frozenset[str] | None = None
    reached: list[frozenset[str]] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    events_known: bool = False
    start: frozenset[str] = frozenset()

    @property
    def conf(self) -> str:
        """The context key naming the configuration the parallel state is in."""
        return f"_scxml_conf_{self.name}"

    @property
    def pending(self) -> str:
        """The context key a transition from outside sets to the configuration it enters."""
        return f"_scxml_enter_{self.name}"


def _matches(descriptors: tuple[str, ...], event: str) -> bool:
    """SCXML's event descriptor match (`*` matches every event but the driver's own)."""
    for descriptor in descriptors:
        if descriptor == "*":
            if not event.startswith(FINALIZE):
                return True
        elif event == descriptor or event.startswith(descriptor + "."):
            return True
    return False


class ParallelPlanner(Part):
    """Reads each `<parallel>` to flatten: its states and transitions as `parallel` reads them,
    their actions, and the configuration a transition into it enters."""

    def plan(self, root: Node) -> None:
        """Plans the flattening of each outermost `<parallel>` not kept native: its states
        and transitions as `parallel` reads them (their actions come later, from
        `flat_state`)."""
        for node in self._state_tree(root):
            if node.tag != "parallel" or any(
                    self.chart.inside(node, flat.node) for flat in self.chart.flats.values()):
                continue
            name = self.chart.names.get(id(node))
            if name is None or name in self.chart.native_parallels or not node.kids(*STATES):
                continue
            flat = Flat(node, name, Subtree(name, {}, [], _matches))
            self.chart.flats[id(node)] = flat
            order = 0
            for inside in self._state_tree(node):
                for history in inside.kids("history"):
                    raise Unflattened(name, f"it holds history state "
                                            f"{self.chart.names.get(id(history))!r}")
                ident = self.chart.names.get(id(inside))
                if ident is None:
                    continue
                kids = tuple(n for n in (self.chart.names.get(id(c)) for c in inside.kids(*STATES))
                             if n is not None)
                parent = None if inside is node else self.chart.names.get(id(inside.parent))
                flat.subtree.places[ident] = Place(ident, inside.tag, parent, kids,
                                                   self._flat_initial(inside, kids, name),
                                                   order)
                order += 1
                if inside is not node:
                    self.chart.flat_inside[ident] = flat

    def _state_tree(self, node: Node) -> list[Node]:
        """Gives `node` and the states below it, in document order: states only, and only
        where SCXML places them (not inside executable content or foreign elements)."""
        out = [node]
        for child in node.kids(*STATES):
            out += self._state_tree(child)
        return out

    def _flat_initial(self, node: Node, kids: tuple[str, ...], owner: str) -> tuple[str, ...]:
        """Gives the ids a compound state inside a flattened parallel enters by default."""
        if node.tag != "state" or not kids:
            return ()
        text = node.attrs.get("initial")
        for initial in node.kids("initial"):
            for transition in initial.kids("transition"):
                text = transition.attrs.get("target")
        if not text:
            return kids[:1]
        targets = tuple(text.split())
        for target in targets:
            found = self.chart.by_id.get(target)
            if found is None or found.tag == "history" or not self.chart.inside(found, node):
                raise Unflattened(owner, f"the initial state {target!r} of "
                                         f"{self.chart.names.get(id(node))!r} is not a state "
                                         "inside it")
        return targets

    def flat_state(self, node: Node, parent: str | None) -> None:
        """Gives a flattened `<parallel>` its native compound state and converts the
        actions of every state and transition inside it; its configurations become native
        states in `ParallelFlattener.flatten_all`."""
        flat = self.chart.flats[id(node)]
        name = flat.name
        native: dict[str, Any] = {"parent": parent} if parent is not None else {}
        self.chart.states[name] = native
        self.chart.node_of[name] = node
        for key in (flat.conf, flat.pending):
            self.chart.context[key] = None
        for inside in self._state_tree(node):
            ident = self.chart.names.get(id(inside))
            if ident is None:
                continue
            entry = self.chart.content.blocks(inside, "onentry", ident)
            for initial in inside.kids("initial"):
                for transition in initial.kids("transition"):
                    actions = self.chart.content.block(transition.children, ident)
                    if actions:
                        self.chart.sink.warning("scxml-initial-actions", transition, "the actions "
                                                "of an <initial> transition run as the compound's "
                                                "last entry actions, on every entry", ident)
                    entry += actions
            exit_ = self.chart.content.blocks(inside, "onexit", ident)
            for child in inside.children:
                if child.namespace != NS:
                    self.chart.sink.warning("scxml-foreign", child, f"element <{child.tag}> of "
                                            f"namespace {child.namespace or '(none)'} is left out",
                                            child.tag)
                elif child.tag == "transition":
                    self._flat_move(flat, child, ident)
                elif child.tag == "invoke":
                    started, cancelled = self.chart.invokes.invoke(child, ident)
                    entry += started
                    exit_ += cancelled
                    while self.chart.transitions and self.chart.transitions[-1].node is child:
                        finalize = self.chart.transitions.pop()
                        index = len(flat.subtree.moves)
                        flat.subtree.add(Move(index, ident, finalize.descriptors, False, (),
                                              False))
                        flat.bodies[index] = finalize.actions
                        flat.nodes[index] = child
                elif child.tag == "donedata":
                    pairs = self.chart.outbox.pairs(child, None, ident)
                    self.chart.stopped = False
                    # None: evaluating it fails whenever it runs (SCXML raises error.execution
                    # and sends the done event with no data)
                    flat.done_pairs[ident] = None if pairs is None else "[" + ", ".join(
                        pairs) + "]"
                elif child.tag not in (*STATES, "onentry", "onexit", "datamodel",
                                       "initial"):
                    self.chart.unknown(child)
            flat.entry[ident], flat.exit[ident] = entry, exit_
            place = flat.subtree.places[ident]
            if place.kind == "final" and place.parent is not None:
                self.chart.raised.add(f"done.state.{place.parent}")
                above = flat.subtree.places[place.parent].parent
                if above is not None and flat.subtree.places[above].kind == "parallel":
                    self.chart.raised.add(f"done.state.{above}")

    def _flat_move(self, flat: Flat, node: Node, source: str) -> None:
        """Adds a transition declared inside a flattened parallel (its root included)."""
        descriptors = self.chart.routing.descriptors(node, source)
        if descriptors == ():
            return
        self.chart.flat_events.update(d for d in descriptors or () if d != "*")
        guard = None
        if "cond" in node.attrs:
            guard = self.chart.data.expression(node.attrs["cond"], node, "cond", runtime=True)
            if self.chart.syntax_error:
                guard = "False"
                self.chart.sink.warning("scxml-cond-error", node, f"cond={node.attrs['cond']!r} is "
                                        f"not {self.chart.language}: the transition is never "
                                        "enabled (the error.execution SCXML raises as it is "
                                        "evaluated is not raised)", source)
            elif guard is None:
                return
        targets = tuple(node.attrs.get("target", "").split())
        for target in targets:
            found = self.chart.by_id.get(target)
            if found is None:
                self.chart.sink.error("scxml-unknown-target", node, f"target state {target!r} does "
                                      "not exist", target)
                return
            if found.tag == "history":
                raise Unflattened(flat.name, f"a transition inside it targets history state "
                                             f"{target!r}")
        outside = [t for t in targets if t not in flat.subtree.places]
        if outside and len(targets) > 1:
            self.chart.sink.error("scxml-multiple-targets", node, f"target {' '.join(targets)!r} "
                                  f"names {len(targets)} states, some outside parallel state "
                                  f"{flat.name!r}; the native format moves to one", source)
            return
        if descriptors is None and not targets:
            self.chart.sink.error("scxml-eventless-internal", node, "an eventless transition with "
                                  "no target: the native format runs eventless transitions only "
                                  "to move (one without a target would loop)", source)
            return
        index = len(flat.subtree.moves)
        flat.subtree.add(Move(index, source, descriptors, guard is not None, targets,
                              node.attrs.get("type") == "internal"))
        flat.guards[index] = guard or "True"
        flat.bodies[index] = self.chart.content.block(node.children, source)
        flat.nodes[index] = node

    def flat_target(self, targets: list[str], node: Node) -> Flat | None:
        """Gives the flattened parallel every one of `targets` is inside, or None when none
        is (a mix is refused, located)."""
        owners = {id(self.chart.flat_inside[t]) for t in targets if t in self.chart.flat_inside}
        if not owners:
            return None
        if len(owners) > 1 or any(t not in self.chart.flat_inside for t in targets):
            flat = next(self.chart.flat_inside[t] for t in targets if t in self.chart.flat_inside)
            raise Unflattened(flat.name, f"the transition at line {node.line} enters it and "
                                         "other states at once")
        return self.chart.flat_inside[targets[0]]

    def entering(self, flat: Flat, targets: tuple[str, ...]) -> tuple[str, list[dict[str, Any]]]:
        """Gives the native state a transition from outside entering `targets` (inside
        `flat`) goes to, and the action (last of its own) that tells the parallel state's
        entry which configuration that is."""
        try:
            config = flat.subtree.entered(targets)
        except NotFlat as exc:
            raise Unflattened(flat.name, str(exc)) from exc
        flat.entries.append(config)
        name = self.product(flat, config)
        return name, [{"assign": {flat.pending: repr(name)}}]

    def product(self, flat: Flat, config: frozenset[str]) -> str:
        """Gives (making it the first time) the native state of one configuration: named by
        the parallel state and its active leaves."""
        name = flat.products.get(config)
        if name is not None:
            return name
        leaves = ".".join(flat.subtree.atomic(config))
        if len(leaves) > _PRODUCT_NAME_MAX:  # many regions: numbered instead
            leaves = f"configuration{len(flat.products) + 1}"
        name = f"{flat.name}.{leaves}"
        number = 1
        while name in self.chart.states or name in self.chart.node_by_name:
            number += 1
            name = f"{flat.name}.{leaves}.{number}"
        if len(flat.products) >= CONFIGURATIONS_MAX:
            raise Unflattened(flat.name, f"its regions can be in more than "
                                         f"{CONFIGURATIONS_MAX} configurations")
        flat.products[config] = name
        self.chart.states[name] = {"parent": flat.name}
        self.chart.node_of[name] = Node("state", {}, flat.node.line, NS, path=flat.node.path)
        return name


class ParallelFlattener(Part):
    """Makes each planned `<parallel>` native: a state per configuration its regions reach, a
    transition per way one takes an event, and the parallel state's entry and exit."""

    def flatten_all(self) -> None:
        """Flattens every planned parallel: explores each one's configurations until none
        is left (a transition leaving one may enter another), then gives each its entry and
        exit."""
        names = {e for e in self.chart.raised | self.chart.flat_events
                 | {d for t in self.chart.transitions for d in t.descriptors or ()}
                 if NAME.match(e) and not e.startswith(RESERVED)}
        flats = list(self.chart.flats.values())
        while any([self._explore(flat, names) for flat in flats]):
            pass
        for flat in flats:
            self.chart.hierarchy.mark_initial(self.chart.planner.product(flat, flat.start))
            self._dispatch(flat)

    def _explore(self, flat: Flat, names: set[str]) -> bool:
        """Makes each configuration `flat` reaches (not made yet) a native state, and each
        way it takes an event a native transition; tells whether it made any."""
        subtree = flat.subtree
        if not flat.events_known:
            flat.events = sorted(e for e in names if any(
                m.events is not None and _matches(m.events, e) for m in subtree.moves))
            flat.start = flat.initial or subtree.default()
            flat.events_known = True
        queue = [flat.start, *flat.entries]
        made = False
        while queue:
            config = queue.pop(0)
            if config in flat.reached:
                continue
            flat.reached.append(config)
            made = True
            state = self.chart.states[self.chart.planner.product(flat, config)]
            for event in (None, *flat.events):
                specs = []
                try:
                    selections = subtree.selections(config, event)
                except NotFlat as exc:
                    raise Unflattened(flat.name, str(exc)) from exc
                for selection in selections:
                    if selection.kind is Kind.STAY and event is None:
                        raise Unflattened(flat.name, "an eventless transition inside it "
                                                     "has no target")
                    spec = self._selection_spec(flat, selection)
                    self.chart.flat_made += 1 + len(spec.get("actions", ()))
                    if self.chart.flat_made > FLAT_MADE_MAX:
                        raise Unflattened(flat.name, f"its native transitions and their "
                                                     f"actions would pass {FLAT_MADE_MAX}")
                    specs.append(spec)
                    if selection.kind in (Kind.MOVE, Kind.REENTER):
                        queue.append(selection.target)
                if specs and event is None:
                    state["always"] = specs
                elif specs:
                    state.setdefault("on", {})[event] = specs
        return made

    def _dispatch(self, flat: Flat) -> None:
        """Gives the parallel state's native entry the entry actions of the configuration
        it enters (the one a transition from outside named, else its default) and its exit
        the exit actions of the one it leaves, each state's under a test of the
        configuration."""
        subtree = flat.subtree
        members = {ident: tuple(flat.products[c] for c in flat.reached if ident in c)
                   for ident in subtree.places}
        order = [s for s in subtree.ordered(subtree.places) if s != flat.name]
        conf = f"context[{flat.conf!r}]"
        entry = [*flat.entry[flat.name],
                 {"assign": {flat.conf: f"context[{flat.pending!r}] if context["
                                        f"{flat.pending!r}] is not None else "
                                        f"{flat.products[flat.start]!r}"}},
                 {"assign": {flat.pending: "None"}}]
        raised_by: dict[tuple[str, str], list[str]] = {}
        for config in flat.reached:
            for entered in subtree.entry_order(config - {flat.name}, {flat.name}):
                for done in entered.done:
                    raised_by.setdefault((entered.ident, done), []).append(
                        flat.products[config])
        every = len(flat.reached)

        def active(products: tuple[str, ...] | list[str]) -> str | None:
            if len(products) == every:
                return None
            return self._short(flat, f"{conf} in {tuple(products)!r}",
                               "the test of the configurations a state is active in")

        for ident in order:
            if not members[ident]:
                continue
            entry += self._when(self._entered_actions(flat, ident, ()), active(members[ident]))
            for (state_id, done), products in raised_by.items():
                if state_id == ident:
                    entry += self._done_raise(flat, ident, done, active(products))
        exit_: list[dict[str, Any]] = []
        for ident in reversed(order):
            if members[ident]:
                exit_ += self._when(self._left_actions(flat, ident), active(members[ident]))
        native = self.chart.states[flat.name]
        self.chart.sink.warning("scxml-parallel", flat.node, f"parallel state {flat.name!r} has "
                                "SCXML's meaning (one configuration, one datamodel, one "
                                f"microstep): each of the {every} configurations its regions reach "
                                "is a native state inside it, named by its active leaves "
                                f"({flat.products[flat.start]!r} first), and the context key "
                                f"{flat.conf!r} names the one it is in", flat.name)
        native["entry"] = [*native.get("entry", []), *entry]
        native["exit"] = [*native.get("exit", []), *exit_, *flat.exit[flat.name]]

    def _selection_spec(self, flat: Flat, selection: Selection) -> dict[str, Any]:
        """Gives the native transition of one way a configuration takes an event."""
        subtree = flat.subtree
        bodies = [a for index in selection.moves for a in flat.bodies[index]]
        spec: dict[str, Any] = {}
        if selection.kind is Kind.LEAVE:
            leaving = subtree.moves[selection.leaving]
            node = flat.nodes[selection.leaving]
            into = self.chart.planner.flat_target(list(leaving.targets), node)
            if into is not None:
                target, extra = self.chart.planner.entering(into, leaving.targets)
            else:
                target, extra = self.chart.routing.target_name(
                    self.chart.by_id[leaving.targets[0]], node) or "", []
            spec = {"target": target, "actions": [*bodies, *extra]}
        elif selection.kind is Kind.STAY:
            spec = {"actions": bodies}
        else:
            actions: list[dict[str, Any]] = []
            for ident in selection.exits:
                actions += self._left_actions(flat, ident)
            actions += bodies
            for entered in selection.entries:
                actions += self._entered_actions(flat, entered.ident, entered.done)
            target = self.chart.planner.product(flat, selection.target)
            actions.append({"assign": {flat.conf: repr(target)}})
            spec = {"target": target, "actions": actions}
        if selection.conditions:
            spec["guard"] = self._short(flat, " and ".join(
                f"({flat.guards[index]})" if held else f"not ({flat.guards[index]})"
                for index, held in selection.conditions), "the conditions of one selection")
        if not spec["actions"]:
            del spec["actions"]
        return spec

    def _entered_actions(self, flat: Flat, ident: str, done: tuple[str, ...]
                         ) -> list[dict[str, Any]]:
        actions = list(flat.entry[ident])
        if ident in self.chart.in_states:
            actions.insert(0, {"assign": {f"_scxml_in_{ident}": "True"}})
        for parent in done:
            actions += self._done_raise(flat, ident, parent, None)
        return actions

    def _left_actions(self, flat: Flat, ident: str) -> list[dict[str, Any]]:
        actions = list(flat.exit[ident])
        if ident in self.chart.in_states:
            actions.append({"assign": {f"_scxml_in_{ident}": "False"}})
        return actions

    def _done_raise(self, flat: Flat, final: str, parent: str, when: str | None
                    ) -> list[dict[str, Any]]:
        """Gives the raise of `done.state.PARENT` as `final` is entered: with the final's
        `<donedata>` when PARENT is its own parent (after the error.execution its evaluation
        raises, when it cannot be evaluated)."""
        own = flat.subtree.places[final].parent == parent
        pairs = flat.done_pairs.get(final, "[]") if own else "[]"
        actions = []
        if pairs is None:
            node = self.chart.node_by_name[final].kids("donedata")[0]
            actions.append(self.chart.content.static_error(node, "error.execution", when))
            self.chart.stopped = False
        actions.append(self.chart.outbox.queue_action("internal", repr(f"done.state.{parent}"),
                                                      None, pairs or "[]", when))
        return actions

    def _short(self, flat: Flat, expression: str, what: str) -> str:
        """Gives `expression`, which flattening `flat` made, if a native expression may be
        that long; otherwise `flat` stays native."""
        if len(expression) > _FLAT_EXPRESSION_MAX:
            raise Unflattened(flat.name, f"{what} would be an expression longer than "
                                         f"{_FLAT_EXPRESSION_MAX} characters")
        return expression

    def _when(self, actions: list[dict[str, Any]], when: str | None) -> list[dict[str, Any]]:
        """Gives `actions` taking effect only when `when` holds (each assignment keeps the
        key's value otherwise); all of them when it is None."""
        if when is None:
            return actions
        out = []
        for action in actions:
            assigned = {}
            for key, value in action["assign"].items():
                self.chart.context.setdefault(key, None)
                assigned[key] = f"({value}) if ({when}) else context[{key!r}]"
            out.append({"assign": assigned})
        return out
