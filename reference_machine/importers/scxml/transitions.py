"""Transitions and events: each `<transition>` read, placed on the native state that takes
it (eventless ones copied down to the leaves), and its event descriptors matched to the events
the chart can tell."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reference_machine.errors import DefinitionError
from reference_machine.importers.scxml.conversion import Part
from reference_machine.importers.scxml.flattening import Unflattened
from reference_machine.importers.scxml.keys import FINALIZE, NAME, RESERVED
from reference_machine.importers.scxml.nodes import NS, STATES, Node

__all__ = ["Routing", "Transition"]

_COND_ERROR = "_scxml_cond_error"  # marks, until placed, a transition whose cond is not Python

#: The most native transitions the matching of event descriptors to events may make in all
#: (each transition once for each event it matches): beyond it the import is refused, as a
#: chart whose `on:` grows that large is not one a run can be checked against
_EXPANDED_MAX = 20_000


@dataclass
class Transition:
    """A transition read from the chart, before it is placed on a native state."""

    node: Node
    source: str  # native name of the declaring state
    descriptors: tuple[str, ...] | None  # None: eventless
    guard: str | None
    target: str | None
    actions: list[dict[str, Any]]
    #: its cond is not Python: never enabled, and evaluating it raises error.execution
    cond_error: bool = False


class Routing(Part):
    """Converts the chart's transitions: reads each, places it on the native state that takes it,
    and matches event descriptors to the events the chart can tell."""

    def descriptors(self, node: Node, source: str) -> tuple[str, ...] | None:
        """Gives a transition's event descriptors (`a.*` and `a.` read as `a`), None when it
        is eventless, none after the error of an empty `event`."""
        if "event" not in node.attrs:
            return None
        descriptors = tuple(d.removesuffix(".*").removesuffix(".") or "*"
                            for d in node.attrs["event"].split())
        if not descriptors:
            self.chart.sink.error("scxml-event", node, "an empty event attribute", source)
        return descriptors

    def transition(self, node: Node, source: str) -> None:
        descriptors = self.descriptors(node, source)
        if descriptors == ():
            return
        guard = None
        cond_error = False
        if "cond" in node.attrs:
            guard = self.chart.data.expression(node.attrs["cond"], node, "cond", runtime=True)
            if self.chart.syntax_error:
                guard = "False"
                cond_error = True
                self.chart.raised.add("error.execution")
                self.chart.sink.warning("scxml-cond-error", node, f"cond={node.attrs['cond']!r} is "
                                        f"not {self.chart.language}: like SCXML the transition is "
                                        "never enabled, and the error.execution SCXML raises as "
                                        "it is evaluated is raised by the later transition of "
                                        "this state that is taken (after the exit actions; and "
                                        "not at all when none is taken: a native guard has no "
                                        "effects)", source)
            elif guard is None:
                return
        target = None
        target_text = node.attrs.get("target")
        into = self.chart.planner.flat_target(target_text.split(), node) if target_text else None
        if target_text is not None and into is not None:
            target, entering = self.chart.planner.entering(into, tuple(target_text.split()))
            self.chart.transitions.append(Transition(
                node, source, descriptors, guard, target,
                [*self.chart.content.block(node.children, source), *entering], cond_error))
            return
        if target_text is not None:
            targets = target_text.split()
            if len(targets) != 1:
                self.chart.sink.error("scxml-multiple-targets", node, f"target {target_text!r} "
                                      f"names {len(targets)} states; the native format moves to "
                                      "one", source)
                return
            target_node = self.chart.by_id.get(targets[0])
            if target_node is None:
                self.chart.sink.error("scxml-unknown-target", node, f"target state {targets[0]!r} "
                                      "does not exist", targets[0])
                return
            target = self.target_name(target_node, node)
            if (target_node.tag == "history" and target_node.parent is not None
                    and target_node.attrs.get("type", "shallow") == "shallow"
                    and self.chart.hierarchy.shallow_kept(target_node.parent)):
                self.chart.hierarchy.to_shallow(node, source, descriptors, guard, target_node,
                                                cond_error)
                return
            if target_node.tag == "history" and self._history_default(
                    node, source, descriptors, guard, target_node, cond_error):
                return
        elif descriptors is None:
            self.chart.sink.error("scxml-eventless-internal", node, "an eventless transition with "
                                  "no target: the native format runs eventless transitions only "
                                  "to move (one without a target would loop)", source)
            return
        actions = self.chart.content.block(node.children, source)
        self.chart.transitions.append(Transition(node, source, descriptors, guard, target, actions,
                                                 cond_error))

    def _history_default(self, node: Node, source: str, descriptors: tuple[str, ...] | None,
                         guard: str | None, history: Node, cond_error: bool) -> bool:
        """Makes a transition to a history two: to its state (which resumes what it
        recorded) once the state was left, else to the history's default target with the
        default transition's actions; tells whether it did (a history with one default
        target)."""
        owner = history.parent
        defaults = history.kids("transition")
        targets = defaults[0].attrs.get("target", "").split() if defaults else []
        default = self.chart.by_id.get(targets[0]) if len(targets) == 1 else None
        owner_name = self.chart.names.get(id(owner)) if owner is not None else None
        if owner is None or owner_name is None or default is None or not self.chart.inside(
                default, owner):
            return False
        flag = f"context[{f'_scxml_left_{owner_name}'!r}]"
        self.chart.left_flags.setdefault(owner_name, history)
        actions = self.chart.content.block(node.children, source)
        after = self.chart.content.block(defaults[0].children, source)
        both = (f"({guard}) and " if guard else "")
        self.chart.transitions.append(Transition(node, source, descriptors, both + flag, owner_name,
                                                 actions, cond_error))
        self.chart.transitions.append(Transition(node, source, descriptors, f"{both}not {flag}",
                                                 self.target_name(default, node),
                                                 [*actions, *after], cond_error))
        return True

    def target_name(self, node: Node, transition: Node) -> str | None:
        inside = self.chart.flat_inside.get(self.chart.names.get(id(node), ""))
        if inside is not None:  # every path into a flattened parallel goes by `planner.entering`
            raise Unflattened(inside.name, f"the transition at line {transition.line} enters "
                                           "it in a way the flattening does not follow")
        if node.tag == "history":
            owner = node.parent
            assert owner is not None
            return self.chart.names.get(id(owner))
        owner = node.parent
        if (node.tag == "state" and owner is not None and owner.tag == "parallel"
                and transition.parent is not None
                and not self.chart.inside(transition.parent, owner)):
            # entering a region enters its parallel state and every region with it
            self.chart.sink.warning("scxml-region-target", transition, "the target is region "
                                    f"{self.chart.names.get(id(node))!r}: the transition enters "
                                    f"its parallel state {self.chart.names.get(id(owner))!r}, "
                                    "which enters every region",
                                    self.chart.names.get(id(node)) or "")
            return self.chart.names.get(id(owner))
        return self.chart.names.get(id(node))

    def place_transitions(self) -> None:
        for t in self.chart.transitions:
            if t.target is None and t.descriptors is None:
                continue
            source = t.source
            spec: dict[str, Any] = {}
            if t.target is not None:
                spec["target"] = t.target
            if t.guard is not None:
                spec["guard"] = t.guard
            if t.actions:
                spec["actions"] = t.actions
            if t.cond_error:
                spec[_COND_ERROR] = True
            region = self._region_of(source)
            if region is not None and t.target is not None and not self._within(
                    t.target, region):
                parallel = self.chart.states[region]["parent"]
                if t.descriptors is None or (self._within(t.target, parallel) and t.target != \
                        parallel):
                    self.chart.sink.error("scxml-region-exit", t.node, "a transition from region "
                                          f"{region!r} to {t.target!r}: a native region is left "
                                          f"only by its parallel state {parallel!r}", source,
                                          t.target)
                    continue
                self.chart.sink.warning("scxml-region-exit", t.node, "the transition leaves "
                                        f"region {region!r}: it is made a transition of parallel "
                                        f"state {parallel!r}, tried only when no region takes the "
                                        "event", source)
                source = parallel
            if t.descriptors is None:
                if self.chart.states[source].get("type") == "final":
                    continue
                earlier = self.chart.states[source].setdefault("always", [])
                if any("guard" not in e and not e.get(_COND_ERROR) for e in earlier):
                    # SCXML takes the first enabled one: after one with no cond, none is
                    self.chart.sink.warning("scxml-never-taken", t.node, "an eventless transition "
                                            "after one with no cond is never taken: left out",
                                            source)
                    continue
                earlier.append(spec)
                continue
            if (self.chart.node_of[source].tag == "parallel"
                    and f"done.state.{source}" in t.descriptors):
                self.chart.states[source].setdefault("done", []).append(spec)
                if len(t.descriptors) > 1:
                    self.chart.sink.warning("scxml-done", t.node, "the other event descriptors of "
                                            "this done.state transition are left out: the native "
                                            "join is not an event", source)
                continue
            internal = (t.node.attrs.get("type") == "internal" and t.target is not None
                        and t.target != source and self._within(t.target, source)
                        and self.chart.states[source].get("type") != "parallel")
            self.chart.states[source].setdefault("_on", []).append(
                (t.descriptors, spec, t.node, internal))

    def errors_raised(self, specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Gives transitions tried in order with, after one whose cond is not Python, the
        error.execution its evaluation raised as the first action of each later one."""
        out: list[dict[str, Any]] = []
        erred = False
        for original in specs:
            spec = {k: v for k, v in original.items() if k != _COND_ERROR}
            if erred:
                raised = self.chart.outbox.queue_action("platform", repr("error.execution"), None,
                                                        None, None)
                spec["actions"] = [raised, *spec.get("actions", [])]
            erred = erred or bool(original.get(_COND_ERROR))
            out.append(spec)
        return out

    def _region_of(self, name: str) -> str | None:
        current: str | None = name
        while current is not None:
            parent = self.chart.states[current].get("parent")
            if parent is not None and self.chart.states[parent].get("type") == "parallel":
                return current
            current = parent
        return None

    def _within(self, name: str, ancestor: str) -> bool:
        current: str | None = name
        while current is not None:
            if current == ancestor:
                return True
            current = self.chart.states[current].get("parent")
        return False

    def _children(self, name: str) -> list[str]:
        return [n for n, s in self.chart.states.items() if s.get("parent") == name]

    def push_eventless_down(self) -> None:
        """Copies a compound state's eventless transitions to the leaves below it."""
        # innermost first (reversed document order): a leaf tries its own, then its
        # parent's, then its grandparent's, as SCXML selects transitions
        for name in reversed(list(self.chart.states)):
            state = self.chart.states[name]
            node = self.chart.node_of.get(name)
            if not state.get("always") or node is None or not node.kids(*STATES):
                continue
            pushed = state.pop("always")
            if state.get("type") == "parallel":
                self.chart.sink.error("scxml-eventless-parallel", node, "eventless transitions of "
                                      f"parallel state {name!r}: the native format has them only "
                                      "on leaf states", name)
                continue
            below = [n for n in (self.chart.names.get(id(d)) for d in self.chart.walk(node)[1:]
                                 if d.namespace == NS and d.tag in STATES)
                     if n is not None and n in self.chart.states]
            below += [product for flat in self.chart.flats.values()
                      if self.chart.inside(flat.node, node) for product in flat.products.values()]
            leaves = [n for n in below if not self.chart.node_of[n].kids(*STATES)]
            if any(self.chart.states[n].get("type") == "parallel" for n in below):
                self.chart.sink.error("scxml-eventless-parallel", node, "eventless transitions of "
                                      f"{name!r}, which holds a parallel state: a native region "
                                      "cannot take them", name)
                continue
            self.chart.sink.warning("scxml-eventless-compound", node, "the eventless transitions "
                                    f"of compound {name!r} are copied to each leaf below it (after "
                                    "the leaf's own)"
                                    + (f"; a move from a leaf to a state inside {name!r} does not "
                                       f"exit and enter {name!r} again"
                                       if (state.get("entry") or state.get("exit")) else ""),
                                    name)
            for leaf in leaves:
                if self.chart.states[leaf].get("type") == "final":
                    continue
                self.chart.states[leaf].setdefault("always", []).extend(dict(t) for t in pushed)

    def in_flags(self) -> None:
        """Sets `_scxml_in_ID` on entry and clears it on exit of each state `In()` reads."""
        for state_id, where in self.chart.in_states.items():
            node = self.chart.by_id.get(state_id)
            if node is None or node.tag == "history":
                self.chart.sink.error("scxml-unknown-target", where, f"In({state_id!r}) names no "
                                      "state", state_id)
                continue
            key = f"_scxml_in_{state_id}"
            self.chart.context.setdefault(key, False)
            native = self.chart.states.get(state_id)
            if native is None:
                continue
            native["entry"] = [{"assign": {key: "True"}}, *native.get("entry", [])]
            native["exit"] = [*native.get("exit", []), {"assign": {key: "False"}}]
            if self._region_of(state_id) is not None:
                self.chart.sink.warning("scxml-in-region", where, f"In({state_id!r}) reads a flag "
                                        "that each region keeps in its own copy of the context: "
                                        "another region does not see it change", state_id)

    def event_names(self) -> set[str]:
        """Gives every event name the chart can tell: those it raises and sends, and those its
        transitions name (so that a sender outside can send them)."""
        names = self.chart.raised | self.chart.flat_events
        for t in self.chart.transitions:
            for descriptor in t.descriptors or ():
                if descriptor != "*":
                    names.add(descriptor)
        usable = set()
        for event in names:
            if not NAME.match(event) or event.startswith(RESERVED):
                where = next((t.node for t in self.chart.transitions
                              if event in (t.descriptors or ())), self.chart.root)
                self.chart.sink.warning("scxml-event-name", where, f"event {event!r} cannot be a "
                                        "native event name; no transition takes it", event)
                continue
            usable.add(event)
        return usable

    def expand(self, events: set[str]) -> None:
        """Gives each state's `on:`: for each event name, the transitions whose descriptors
        match it (SCXML's prefix match), in document order."""
        copies: list[tuple[str, str, dict[str, Any], Node]] = []
        # each event under every dotted prefix of its name: a descriptor `a.b` matches the
        # events `a.b` and `a.b.<anything>` (`*` every event), found at once instead of by a
        # scan of every event for every descriptor of every transition
        by_prefix: dict[str, set[str]] = {}
        for event in events:
            parts = event.split(".")
            for length in range(1, len(parts) + 1):
                by_prefix.setdefault(".".join(parts[:length]), set()).add(event)
        every = sorted(e for e in events if not e.startswith(FINALIZE))  # the driver's own
        made = 0
        for name, state in self.chart.states.items():
            written = state.pop("_on", [])
            if not written:
                continue
            on: dict[str, list[dict[str, Any]]] = {}
            for descriptors, spec, node, internal in written:
                if "*" in descriptors:
                    matched = every
                else:
                    found: set[str] = set()
                    for descriptor in descriptors:
                        found |= by_prefix.get(descriptor, set())
                    matched = sorted(found)
                made += len(matched)
                self._bound_expansion(made, node, name)
                if self.chart.node_of[name].tag == "parallel":
                    matched = [e for e in matched if e != f"done.state.{name}"]
                if not matched:
                    self.chart.sink.warning("scxml-event-never", node, "no event the chart "
                                            "raises, sends or names matches "
                                            f"{' '.join(descriptors)!r}", name)
                for event in matched:
                    if not internal:
                        on.setdefault(event, []).append(dict(spec))
                        continue
                    # declared on each child, its domain is `name`, which it neither leaves
                    # nor enters: SCXML's internal transition
                    if on.get(event):
                        self.chart.sink.warning("scxml-internal-order", node, "type='internal': "
                                                f"for {event!r} it is tried before the transitions "
                                                f"{name!r} declares above it", name)
                    copies.append((name, event, spec, node))
            if on:
                state["on"] = {event: self.errors_raised(specs) for event, specs in on.items()}
        children: dict[str, list[str]] = {}
        for name, event, spec, node in copies:
            if name not in children:
                children[name] = self._children(name)
            made += len(children[name])
            self._bound_expansion(made, node, name)
            for child in children[name]:
                if self.chart.states[child].get("type") == "final":
                    continue
                self.chart.states[child].setdefault("on", {}).setdefault(event, []).append(
                    dict(spec))

    def _bound_expansion(self, made: int, node: Node, name: str) -> None:
        """Refuses, at `node`, an expansion of event descriptors past `_EXPANDED_MAX`."""
        if made > _EXPANDED_MAX:
            self.chart.sink.error("scxml-too-many-transitions", node, "matching the transitions' "
                                  "event descriptors to the chart's events makes more than "
                                  f"{_EXPANDED_MAX} native transitions (the bound of an import); "
                                  "the import stops here", name)
            raise DefinitionError(self.chart.sink.errors, self.chart.source)
