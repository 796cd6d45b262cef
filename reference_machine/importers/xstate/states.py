"""The states of an XState machine: its tree of state nodes read and named, then each written
as a native state (final, moving, a compound's initial child)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reference_machine.findings import did_you_mean
from reference_machine.importers._common import literal as _literal
from reference_machine.importers.xstate.common import safe
from reference_machine.importers.xstate.conversion import Part
from reference_machine.importers.xstate.nodes import StateNode

__all__ = ["StateTree"]

_STATE_KEYS = frozenset({"id", "type", "initial", "states", "on", "always", "after", "entry",
                         "exit", "invoke", "history", "target", "output", "description", "meta",
                         "tags", "onDone"})


class StateTree(Part):
    """Reads the tree of state nodes, names each native state, and writes them."""

    def read(self, config: Any, key: str, path: tuple[str, ...], loc: str,
             parent: StateNode | None, machine_id: str) -> StateNode:
        if not isinstance(config, Mapping):
            raise self.sink.fatal("not-a-state", loc, f"state {key!r} is a JSON object, got "
                                  f"{type(config).__name__}")
        if parent is not None:
            for k in config:
                if k not in _STATE_KEYS:
                    self.sink.warning("unknown-key", f"{loc}.{k}", f"{k!r} is not a key of an "
                                      f"XState state{did_you_mean(str(k), _STATE_KEYS)}; it is "
                                      "left out")
        written = config.get("type")
        states = config.get("states")
        if states is not None and not isinstance(states, Mapping):
            raise self.sink.fatal("not-a-state", f"{loc}.states" if loc else "states",
                                  "`states` is a JSON object of state nodes")
        if written not in (None, "atomic", "compound", "parallel", "final", "history"):
            raise self.sink.fatal("bad-type", f"{loc}.type" if loc else "type",
                                  f"state type {written!r}: expected atomic, compound, parallel, "
                                  "final or history")
        kind = str(written) if written in ("parallel", "final", "history") else (
            "compound" if states else "atomic")
        node = StateNode(key, path, loc, config, parent, kind)
        self.ctx.nodes.append(node)
        default_id = ".".join((machine_id, *path))
        self.ctx.ids.setdefault(default_id, node)
        own = config.get("id")
        if isinstance(own, str) and parent is not None:
            if own in self.ctx.ids and self.ctx.ids[own] is not node:
                self.sink.error("duplicate-id", f"{loc}.id", f"state id {own!r} is used twice")
            self.ctx.ids[own] = node
        for tag in ("meta", "tags"):
            if config.get(tag):
                self.sink.warning("left-out", node.at(tag), f"`{tag}` has no native counterpart; "
                                  "it is left out")
        for child_key, child in (states or {}).items():
            child_loc = f"{loc}.states.{child_key}" if loc else f"states.{child_key}"
            node.children.append(self.read(child, str(child_key), (*path, str(child_key)),
                                           child_loc, node, machine_id))
        return node

    def name_all(self, root: StateNode) -> None:
        nodes = [n for n in self.ctx.nodes if n is not root and n.kind != "history"]
        counts: dict[str, int] = {}
        for node in nodes:
            counts[safe(node.key)] = counts.get(safe(node.key), 0) + 1
        for node in nodes:
            candidate = safe(node.key)
            if counts[candidate] > 1:
                candidate = ".".join(safe(part) for part in node.path)
            node.native = self.ctx.fresh(candidate)

    def emit(self, root: StateNode, wrapped: bool) -> None:
        self.ctx.root = root
        if wrapped:
            self._emit_node(root)
        else:
            if root.config.get("on"):
                # the root's transitions apply everywhere: pushed down to the top-level states
                self.ctx.root_on = self.catalog.on(root)
            for child in root.children:
                self._emit_node(child)

    def _emit_node(self, node: StateNode) -> None:
        config = node.config
        if node.kind == "history":
            self.hierarchy.history_node(node)
            return
        out: dict[str, Any] = {}
        self.ctx.states[node.native] = out
        parent = node.parent
        if parent is not None and parent.native:
            out["parent"] = parent.native
        if parent is not None and parent.kind != "parallel" and self.initial(parent) is node:
            out["initial"] = True
        if node is self.ctx.root:
            out["initial"] = True
        where = ".".join(node.path) or "(root)"
        description = config.get("description")
        out["description"] = f"XState state {where}" + (
            f": {description}" if isinstance(description, str) and description else "")
        if node.kind == "final":
            self._final(node, out)
        elif self.dead_end(node):
            self.sink.warning("dead-end", node.loc, "nothing leaves this state: XState rests in it "
                              "for good; imported as a final state (outcome success)")
            self._final(node, out)
        else:
            self._moving(node, out)
        if not self.parallel.flat(node):
            for child in node.children:
                self._emit_node(child)

    def dead_end(self, node: StateNode) -> bool:
        """Tells whether `node` is a top-level atomic state nothing leaves."""
        if node.kind != "atomic" or node.parent is not self.ctx.root or self.ctx.root is None or (
                self.ctx.root.native):
            return False
        leaves = ("on", "after", "always", "invoke")
        return not any(node.config.get(k) for k in leaves) and not self.ctx.root.config.get("on")

    def initial(self, node: StateNode) -> StateNode | None:
        initial = node.config.get("initial")
        members = [c for c in node.children if c.kind != "history"]
        if not members:
            return None
        loc = node.at("initial")
        first = not node.initial_read
        node.initial_read = True
        if initial is None:
            if first:
                where = ".".join(node.path) or "(root)"
                self.sink.warning("initial-missing", loc, f"compound state {where} names no "
                                  f"`initial`; its first child {members[0].key!r} is taken")
            return members[0]
        if isinstance(initial, Mapping):
            initial = initial.get("target")
        if isinstance(initial, str):
            for child in members:
                if child.key == initial.lstrip("."):
                    return child
        if first:
            keys = [c.key for c in members]
            self.sink.error("unknown-target", loc, f"initial state {initial!r} is not a child "
                            f"({', '.join(keys)}){did_you_mean(str(initial), keys)}")
        return None

    def _final(self, node: StateNode, out: dict[str, Any]) -> None:
        config = node.config
        parent = node.parent
        for key in ("on", "after", "always", "invoke"):
            if config.get(key):
                self.sink.warning("left-out", node.at(key), "a final state takes nothing: its "
                                  f"`{key}` is left out")
        entry = self.actions.read(config.get("entry"), node.at("entry"))
        exits = self.actions.read(config.get("exit"), node.at("exit"))
        nested = parent is not None and parent is not self.ctx.root and node.region() is not parent
        if nested and parent is not None and parent.config.get("onDone") is not None:
            # XState raises done.state.<parent> at once: a choice taking the parent's onDone
            out["type"] = "choice"
            always = self.transitions.read(parent, parent.config["onDone"], parent.at("onDone"))
            out["always"] = always
            if always and all("guard" in t for t in always):
                self.sink.warning("done-guarded", parent.at("onDone"), "every onDone transition is "
                                  "guarded: when none holds XState rests in the final state, the "
                                  "native choice rejects the event that led there")
            if config.get("output") is not None:
                self.sink.warning("left-out", node.at("output"), "the output of a nested final "
                                  "state is not imported")
        else:
            out["type"] = "final"
            out["outcome"] = "success"
            if nested:
                self.sink.warning("nested-final", node.loc, "this final state's parent has no "
                                  "onDone: XState rests in it, the native run (or region) ends "
                                  "there")
            output = config.get("output")
            if output is not None:
                literal = _literal(output)
                if literal is None:
                    self.sink.warning("left-out", node.at("output"), "the output is not a literal "
                                      "JSON value the native assign can write; it is left out")
                else:
                    entry.append({"assign": {"output": literal}})
                    self.ctx.used_context.add("output")
                    self.sink.warning("output-in-context", node.at("output"), "the final state's "
                                      "output is stored in context.output as the state is entered")
        if entry:
            out["entry"] = entry
        if exits:
            out["exit"] = exits

    def _moving(self, node: StateNode, out: dict[str, Any]) -> None:
        config = node.config
        kind = node.kind
        on = self.catalog.on(node)
        if kind == "parallel" and self.parallel.flat(node):
            self.parallel.product(node, out)
        elif kind == "parallel":
            out["type"] = "parallel"
            self.parallel.emit(node, out, on)
        if config.get("onDone") is not None and kind == "compound":
            if not any(c.kind == "final" for c in node.children):
                self.sink.warning("done-never", node.at("onDone"), "this compound state has no "
                                  "final child, so its onDone is never taken; it is left out")
            elif node.region() is node:
                self.sink.warning("left-out", node.at("onDone"), "a region's onDone is not "
                                  "imported: a region ends in its final state and the parallel "
                                  "state's onDone joins them")
        elif config.get("onDone") is not None and kind == "atomic":
            self.sink.warning("left-out", node.at("onDone"), "an atomic state is never done; its "
                              "onDone is left out")
        if kind == "atomic" and config.get("invoke") is not None:
            self.invocations.invoke(node, out, on)
        elif config.get("invoke") is not None:
            self.sink.error("invoke-compound", node.at("invoke"), "an invoke on a compound or "
                            "parallel state has no native counterpart (a step runs in a leaf "
                            "state); move it to a child state")
        if on:
            out["on"] = on
        entry = self.actions.read(config.get("entry"), node.at("entry"))
        exits = self.actions.read(config.get("exit"), node.at("exit"))
        if entry:
            out["entry"] = entry
        if exits:
            out["exit"] = exits
        always = config.get("always")
        if always is not None:
            if kind == "parallel" or self.parallel.flat(node):
                self.sink.error("always-compound", node.at("always"), "`always` on a parallel "
                                "state has no native counterpart; put it on its regions' states")
            elif kind == "compound":
                transitions = self.transitions.always(node, always)
                self.ctx.compound_always[node.native] = transitions
                self.sink.warning("always-compound", node.at("always"), "a compound state's "
                                  "eventless transitions are tried, as XState tries them, after "
                                  "those of the active child: natively they are given to each of "
                                  "its states that is not final, after the state's own")
            else:
                transitions = self.transitions.always(node, always)
                out["always"] = transitions
                if not on and not config.get("after") and config.get("invoke") is None and any(
                        "guard" not in t for t in transitions):
                    out["type"] = "choice"
        if config.get("after") is not None:
            self.timers.after(node, out)
        if (self.ctx.reactive and kind == "atomic" and "type" not in out and "step" not in out
                and "after" not in out and on):
            out["type"] = "wait"  # a reactive machine's state waits for events, no timeout

    def stay_by_self_target(self) -> None:
        """In a machine that runs until stopped, writes a state's targetless transitions
        as transitions to itself where the state takes events only that way and has
        nothing its re-entry would run again (no entry, exit, step, timer or eventless
        move): the same run, and the native checks see it is no trap."""
        for name, spec in self.ctx.states.items():
            on = spec.get("on")
            if not on or spec.get("type") in ("final", "choice", "parallel") or any(
                    key in spec for key in ("entry", "exit", "step", "after", "always")) or any(
                    other.get("parent") == name for other in self.ctx.states.values()):
                continue
            if any("target" in t for ts in on.values() for t in ts):
                continue
            for transitions in on.values():
                for transition in transitions:
                    transition["target"] = name
            self.sink.warning("reactive-self", self._where(name), f"state {name!r} only takes "
                              "events without leaving (targetless transitions) in a machine that "
                              "runs until stopped; they are imported as transitions to the state "
                              "itself, which has no entry, exit, step or timer to run again, so "
                              "nothing changes but that the native checks see it is no trap")

    def _where(self, native: str) -> str:
        node = next((n for n in self.ctx.nodes if n.native == native), None)
        return "" if node is None else node.loc
