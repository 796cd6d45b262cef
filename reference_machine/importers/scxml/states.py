"""States and history: SCXML's states made native ones, finals, `<history>`, and the
initial child of each compound state and of the chart."""

from __future__ import annotations

from typing import Any

from reference_machine.importers.scxml.conversion import Part
from reference_machine.importers.scxml.flattening import Unflattened
from reference_machine.importers.scxml.keys import NAME
from reference_machine.importers.scxml.nodes import NS, STATES, Node
from reference_machine.importers.scxml.parallel import NotFlat
from reference_machine.importers.scxml.transitions import Transition

__all__ = ["Hierarchy"]


class Hierarchy(Part):
    """Converts the chart's states: names them, makes each a native state with its entry and exit,
    its history and its initial child."""

    def name_states(self, root: Node) -> None:
        used: set[str] = set()
        anonymous = 0
        for node in self.chart.walk(root):
            if node.namespace != NS or node.tag not in (*STATES, "history"):
                continue
            ident = node.attrs.get("id")
            if ident is None:
                anonymous += 1
                ident = f"_scxml_{node.tag}{anonymous}"
                while ident in used:
                    anonymous += 1
                    ident = f"_scxml_{node.tag}{anonymous}"
            elif ident in self.chart.by_id:
                self.chart.sink.error("scxml-duplicate-id", node, f"id {ident!r} is used twice "
                                      f"(first at line {self.chart.by_id[ident].line})", ident)
                continue
            elif not NAME.match(ident) or ident.startswith("_scxml_"):
                self.chart.sink.error("scxml-state-name", node, f"state id {ident!r} cannot be a "
                                      "native state name (letters, digits, _ . -; not starting "
                                      "_scxml_)", ident)
                continue
            used.add(ident)
            self.chart.node_by_name[ident] = node
            if "id" in node.attrs:
                self.chart.by_id[ident] = node
            self.chart.names[id(node)] = ident

    def state(self, node: Node, parent: str | None) -> None:
        name = self.chart.names.get(id(node))
        if name is None:
            return
        if id(node) in self.chart.flats:
            self.chart.planner.flat_state(node, parent)
            return
        native: dict[str, Any] = {}
        if parent is not None:
            native["parent"] = parent
        self.chart.states[name] = native
        self.chart.node_of[name] = node
        kind = node.tag
        children = node.kids(*STATES)
        entry = self.chart.content.blocks(node, "onentry", name)
        exit_ = self.chart.content.blocks(node, "onexit", name)
        if kind == "final":
            in_region = node.parent is not None and self._is_region(node.parent)
            if parent is None or in_region:
                native["type"] = "final"
                # the W3C tests' convention, and the plain meaning of the name: a top-level
                # final `fail` is a failed run (a region's final only ends its region, and a
                # failed region would fail the join SCXML makes regardless)
                native["outcome"] = "failure" if parent is None and name == "fail" else "success"
            else:
                self.chart.sink.warning("scxml-nested-final", node, f"<final> {name!r} inside "
                                        f"compound {parent!r}: a native final state ends the run, "
                                        f"so it is a state that raises done.state.{parent} on "
                                        "entry and waits there", name)
            if parent is not None:
                entry += self._done_event(node, parent)
            else:
                # entering a top-level final ends the session, which then exits it: its exit
                # actions run right after its entry actions (the native run exits nothing)
                entry, exit_ = entry + exit_, []
            for done in node.kids("donedata") if parent is None else ():
                self.chart.sink.warning("scxml-donedata", done, "<donedata> of a top-level final "
                                        "is left out: it goes to an invoking session, and the "
                                        "native run has none", name)
        elif kind == "parallel":
            native["type"] = "parallel"
        for child in node.children:
            if child.namespace != NS:
                self.chart.sink.warning("scxml-foreign", child, f"element <{child.tag}> of "
                                        f"namespace {child.namespace or '(none)'} is left out",
                                        child.tag)
            elif child.tag in STATES:
                self.state(child, name)
            elif child.tag == "history":
                self._history(child, name, node)
            elif child.tag == "transition":
                self.chart.routing.transition(child, name)
            elif child.tag in ("onentry", "onexit", "datamodel", "invoke", "initial",
                               "donedata"):
                continue
            else:
                self.chart.unknown(child)
        for invoke in node.kids("invoke"):
            started, cancelled = self.chart.invokes.invoke(invoke, name)
            entry += started
            exit_ += cancelled
        if entry:
            native["entry"] = entry
        if exit_:
            native["exit"] = exit_
        if kind == "state" and children:
            self.initial(node, name, children)
        elif kind == "state" and (node.attrs.get("initial") or node.kids("initial")):
            self.chart.sink.error("scxml-initial", node, f"atomic state {name!r} names an initial "
                                  "child it does not have", name)

    def _done_event(self, node: Node, parent: str) -> list[dict[str, Any]]:
        """Gives the actions that raise `done.state.PARENT` as `node` (a final) is entered,
        with its `<donedata>` as the event's data."""
        event = f"done.state.{parent}"
        self.chart.raised.add(event)
        actions: list[dict[str, Any]] = []
        pairs: list[str] = []
        for done in node.kids("donedata"):
            got = self.chart.outbox.pairs(done, None, parent)
            if got is None:  # SCXML raises error.execution and sends the event with no data
                actions.append(self.chart.content.static_error(done, "error.execution", None))
                self.chart.stopped = False
            else:
                pairs += got
        actions.append(self.chart.outbox.queue_action("internal", repr(event), None,
                                                      "[" + ", ".join(pairs) + "]", None))
        return actions

    def _is_region(self, node: Node) -> bool:
        return node.parent is not None and node.parent.tag == "parallel"

    def _history(self, node: Node, parent: str, owner: Node) -> None:
        kind = node.attrs.get("type", "shallow")
        if kind not in ("shallow", "deep"):
            self.chart.sink.error("scxml-history", node, f"history type {kind!r} is neither "
                                  "shallow nor deep", kind)
            return
        if owner.tag != "state":
            self.chart.sink.error("scxml-history", node, f"history in <{owner.tag}> {parent!r}: "
                                  "the native format keeps history on compound states only", parent)
            return
        state = self.chart.states[parent]
        ident = node.attrs.get("id", "")
        others = [h for h in owner.kids("history") if h is not node
                  and h.attrs.get("type", "shallow") != kind]
        if self.shallow_kept(owner):
            if kind == "shallow":
                self.chart.both_histories[parent] = owner
                self.chart.sink.warning("scxml-history-both", node, f"{parent!r} has both shallow "
                                        "and deep history: the deep one is `history: deep`; the "
                                        f"shallow one is the child active as {parent!r} is left, "
                                        f"kept in the context key '_scxml_shallow_{parent}', and a "
                                        f"transition to {ident!r} enters that child (its own "
                                        "initial state below it)", parent)
                return
            others = []  # the deep one: the native history
        if others and ident not in self.chart.targeted and any(
                h.attrs.get("id", "") in self.chart.targeted for h in others):
            self.chart.sink.warning("scxml-history-unused", node, f"history {ident!r} is the "
                                    "target of no transition: left out", parent)
            return
        if state.get("history", kind) != kind or (others and all(
                h.attrs.get("id", "") in self.chart.targeted for h in others)
                and ident in self.chart.targeted):
            self.chart.sink.error("scxml-history", node, f"{parent!r} has both shallow and deep "
                                  "history, each a transition's target; the native format keeps "
                                  "one kind per state", parent)
            return
        state["history"] = kind
        self.chart.sink.warning("scxml-history-attribute", node, "history "
                                f"{self.chart.names.get(id(node))!r} becomes `history: {kind}` on "
                                f"{parent!r}: a transition to {parent!r} itself then resumes it "
                                f"too; one to the history before {parent!r} was ever left takes "
                                "the default transition (its actions run before the entry "
                                "actions)", parent)

    def shallow_kept(self, owner: Node) -> bool:
        """Tells whether `owner` has a shallow and a deep history, each a transition's
        target, and can keep the shallow one in the context: no child is a parallel state
        (whose entry each region runs on its own copy of the context), and each shallow
        history has a default transition to one state inside `owner`."""
        targeted = [h for h in owner.kids("history")
                    if h.attrs.get("id", "") in self.chart.targeted]
        if {h.attrs.get("type", "shallow") for h in targeted} != {"shallow", "deep"} or any(
                c.tag == "parallel" for c in owner.kids(*STATES)):
            return False
        for history in owner.kids("history"):
            if history.attrs.get("type", "shallow") != "shallow":
                continue
            defaults = history.kids("transition")
            targets = defaults[0].attrs.get("target", "").split() if defaults else []
            default = self.chart.by_id.get(targets[0]) if len(targets) == 1 else None
            if default is None or not self.chart.inside(default, owner):
                return False
        return True

    def record_shallow(self) -> None:
        """Keeps, for each state with both kinds of history (`both_histories`), the child
        it had active as it is left: each child's entry tells it is the active one, and the
        state's exit keeps that one."""
        for name, owner in self.chart.both_histories.items():
            active, kept = f"_scxml_active_{name}", f"_scxml_shallow_{name}"
            self.chart.context[active] = self.chart.context[kept] = None
            for child in owner.kids(*STATES):
                child_name = self.chart.names.get(id(child))
                native = self.chart.states.get(child_name or "")
                if child_name is not None and native is not None:
                    native["entry"] = [{"assign": {active: repr(child_name)}},
                                       *native.get("entry", [])]
            state = self.chart.states[name]
            state["exit"] = [*state.get("exit", []), {"assign": {kept: f"context[{active!r}]"}}]

    def to_shallow(self, node: Node, source: str, descriptors: tuple[str, ...] | None,
                   guard: str | None, history: Node, cond_error: bool) -> None:
        """Makes a transition to a shallow history kept in the context (`record_shallow`)
        one per child of its state, each taken when that child is the one kept once the
        state was left, and one to the history's default target (with the default's actions)
        before it ever was."""
        owner = history.parent
        owner_name = self.chart.names.get(id(owner)) if owner is not None else None
        if owner is None or owner_name is None:
            return
        self.chart.left_flags.setdefault(owner_name, history)
        left = f"context[{f'_scxml_left_{owner_name}'!r}]"
        kept = f"context[{f'_scxml_shallow_{owner_name}'!r}]"
        both = f"({guard}) and " if guard else ""
        actions = self.chart.content.block(node.children, source)
        for child in owner.kids(*STATES):
            child_name = self.chart.names.get(id(child))
            if child_name is not None:
                self.chart.transitions.append(Transition(
                    node, source, descriptors, f"{both}{left} and {kept} == {child_name!r}",
                    child_name, actions, cond_error))
        default = history.kids("transition")[0]
        after = self.chart.content.block(default.children, source)
        target = self.chart.by_id[default.attrs["target"].split()[0]]
        self.chart.transitions.append(Transition(node, source, descriptors, f"{both}not {left}",
                                                 self.chart.routing.target_name(target, node),
                                                 [*actions, *after], cond_error))

    def initial(self, owner: Node, name: str | None, children: list[Node]) -> None:
        """Marks the initial child: the `initial` attribute, `<initial>` or the first child."""
        target_text = owner.attrs.get("initial")
        where = owner
        for initial in owner.kids("initial"):
            where = initial
            for transition in initial.kids("transition"):
                target_text = transition.attrs.get("target")
                actions = self.chart.content.block(transition.children, name or "")
                if actions and name is not None:
                    self.chart.sink.warning("scxml-initial-actions", transition, "the actions of "
                                            "an <initial> transition run as the compound's first "
                                            "entry actions", name)
                    state = self.chart.states[name]
                    state["entry"] = [*state.get("entry", []), *actions]
        if owner.tag == "parallel":
            return
        if not target_text:
            first = children[0]
            chain = [first]
        else:
            chains = []
            for target_id in target_text.split():
                target = self.chart.by_id.get(target_id)
                if target is not None and target.tag == "history" and target.parent is owner:
                    # the native compound resumes its history itself: start at the default,
                    # whose actions run only while nothing is recorded (before it was left)
                    default = [t.attrs.get("target", "") for t in target.kids("transition")]
                    if name is not None and target.kids("transition"):
                        self.chart.left_flags.setdefault(name, target)
                        state = self.chart.states[name]
                        state["entry"] = [*state.get("entry", []), *self.chart.content.actions(
                            target.kids("transition")[0].children,
                            f"not context[{f'_scxml_left_{name}'!r}]", name)]
                        self.chart.stopped = False
                    target = self.chart.by_id.get(default[0].split()[0]) if default and default[
                        0].split() else next(iter(children), None)
                if target is None or not self.chart.inside(target, owner):
                    self.chart.sink.error("scxml-unknown-target", where, "initial state "
                                          f"{target_id!r} is not a state inside "
                                          f"{name or 'the chart'}", target_id)
                    return
                chain = []
                current: Node | None = target
                while current is not None and current is not owner:
                    chain.append(current)
                    current = current.parent
                chains.append(list(reversed(chain)))
            if len({id(c[0]) for c in chains}) != 1 or (len(chains) > 1 and not all(
                    any(n.tag == "parallel" for n in c) for c in chains)):
                self.chart.sink.error("scxml-initial", where, f"initial {target_text!r} names "
                                      "several states that are not in the regions of one parallel "
                                      "state", *target_text.split())
                return
            chain = chains[0]
            for other in chains[1:]:
                chain += [n for n in other if n not in chain]
        first_name = self.chart.names.get(id(chain[0]))
        if first_name is None:
            return
        self.mark_initial(first_name)
        leaf = self.chart.names.get(id(chain[-1]))
        if name is None and len(chain) > 1 and leaf is not None and all(
                n.tag == "state" for n in chain[:-1]) and chain[-1].tag in STATES:
            # the states above keep their own initial children: a move enters the leaf
            self.chart.start_target = leaf
            return
        for deeper in chain[1:]:
            deeper_name = self.chart.names.get(id(deeper))
            if deeper_name is None or deeper.tag == "history":
                continue
            into = self.chart.flat_inside.get(deeper_name)
            if into is not None:  # the configuration of a flattened parallel the chain names
                targets = tuple(t for t in (target_text or "").split()
                                if t in self.chart.flat_inside)
                try:
                    into.initial = into.subtree.entered(targets or (deeper_name,))
                except NotFlat as exc:
                    raise Unflattened(into.name, str(exc)) from exc
                self.chart.sink.warning("scxml-deep-initial", where, "the chart's initial states "
                                        f"{target_text!r} are inside parallel state {into.name!r}: "
                                        f"that configuration is where {into.name!r} starts every "
                                        "time it is entered by default", into.name)
                break
            if deeper.parent is not None and deeper.parent.tag == "parallel":
                continue  # a region: entered with its parallel state
            self.mark_initial(deeper_name, where)

    def mark_initial(self, name: str, where: Node | None = None) -> None:
        state = self.chart.states.get(name)
        if state is None:
            return
        parent = state.get("parent")
        sibling = self.chart.initial_of.get(parent)
        if sibling is not None and sibling != name:
            if where is not None:
                self.chart.sink.warning("scxml-deep-initial", where, "the chart starts in "
                                        f"{name!r}, so it is the initial child of {parent!r} every "
                                        f"time, not {sibling!r}", name)
            del self.chart.states[sibling]["initial"]
        self.chart.initial_of[parent] = name
        state["initial"] = True
