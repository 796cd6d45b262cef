"""What XState's hierarchy means natively: history pseudo-states as their parent's `history:`,
and a compound state's transitions, timer and eventless transitions given to the states below
it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reference_machine.importers.xstate.conversion import Part
from reference_machine.importers.xstate.nodes import StateNode

__all__ = ["Hierarchy"]


class Hierarchy(Part):
    """Writes history, and moves parents' transitions onto their children."""

    def history_node(self, node: StateNode) -> None:
        parent = node.parent
        kind = node.config.get("history", "shallow")
        if kind not in ("shallow", "deep"):
            self.sink.error("bad-history", node.at("history"), f"history is shallow or deep, got "
                            f"{kind!r}")
            return
        if parent is None or parent.kind != "compound" or (
                parent is self.ctx.root and not parent.native):
            self.sink.error("history-shape", node.loc, "a history state belongs in a compound "
                            "state")
            return
        spec = self.ctx.states.get(parent.native)
        if spec is None:
            return
        if spec.get("history") not in (None, kind):
            self.sink.warning("history-several", node.loc, "the native history is one attribute of "
                              "the compound state: the deep one is kept")
            kind = "deep"
        spec["history"] = kind
        target = node.config.get("target")
        if target is not None:
            resolved = self.transitions.resolve(parent, f".{str(target).lstrip('.')}"
                                                if not str(target).startswith("#") else str(target),
                                                node.at("target"))
            if resolved is not None and resolved is not self.tree.initial(parent):
                self.sink.warning("history-default", node.at("target"), "a native history with "
                                  "nothing recorded enters the compound state's initial state; "
                                  "this default target is left out")

    def check_history(self) -> None:
        for node in self.ctx.nodes:
            if id(node) in self.ctx.direct_to and id(node) in self.ctx.history_via:
                self.sink.warning("history-everywhere", self.ctx.direct_to[id(node)], "natively "
                                  "every transition to a compound state with history resumes it; "
                                  "this one, which XState takes to its initial state, resumes it "
                                  "too")

    def push_down(self, root: StateNode, wrapped: bool) -> None:
        """Moves a compound state's transitions onto its children where the native format
        asks (a final state may not inherit any; the root is no native state), after each
        child's own: the same transitions, tried in the same order."""
        children: dict[str | None, list[str]] = {}
        for name, spec in self.ctx.states.items():
            children.setdefault(spec.get("parent"), []).append(name)
        compound_after = self.ctx.compound_after

        def finals_below(name: str) -> bool:
            return any(self.ctx.states[c].get("type") == "final" or finals_below(c)
                       for c in children.get(name, []))

        def give(name: str, on: Mapping[str, list[Any]], after: dict[str, Any] | None) -> None:
            spec = self.ctx.states[name]
            if spec.get("type") in ("final", "choice"):
                return
            if on:
                merged = dict(spec.get("on", {}))
                for event, transitions in on.items():
                    merged[event] = [*merged.get(event, []), *transitions]
                spec["on"] = merged
            if after is not None and not children.get(name) and "after" not in spec:
                spec["after"] = dict(after)
            elif after is not None and children.get(name) and spec.get("type") != "parallel":
                for child in children[name]:
                    give(child, {}, after)
            elif after is not None and spec.get("type") == "parallel" and "after" not in spec:
                spec["after"] = dict(after)

        root_on = self.ctx.root_on
        if root_on:
            for name in children.get(None, []):
                give(name, root_on, None)
        for name in list(self.ctx.states):
            spec = self.ctx.states[name]
            after = compound_after.get(name)
            if after is not None:
                for child in children.get(name, []):
                    give(child, {}, after)
            if spec.get("on") and children.get(name) and spec.get("type") not in (
                    "parallel",) and not self._is_region(name) and finals_below(name):
                on = spec.pop("on")
                for child in children[name]:
                    give(child, on, None)

    def give_always(self) -> None:
        """Gives each compound state's eventless transitions to the states below it (leaves
        and choices, not finals), after their own, innermost compound first."""
        if not self.ctx.compound_always:
            return
        children: dict[str | None, list[str]] = {}
        for name, spec in self.ctx.states.items():
            children.setdefault(spec.get("parent"), []).append(name)

        def below(name: str) -> list[str]:
            found = []
            for child in children.get(name, []):
                found.extend(below(child) if children.get(child) else [child])
            return found

        def depth(name: str) -> int:
            parent = self.ctx.states[name].get("parent")
            return 0 if parent is None else 1 + depth(parent)

        for name in sorted(self.ctx.compound_always, key=depth, reverse=True):
            for leaf in below(name):
                spec = self.ctx.states[leaf]
                if spec.get("type") == "final":
                    continue
                spec["always"] = [*spec.get("always", []), *self.ctx.compound_always[name]]
                if spec.get("type") == "wait":
                    del spec["type"]

    def _is_region(self, name: str) -> bool:
        parent = self.ctx.states[name].get("parent")
        return parent is not None and self.ctx.states[parent].get("type") == "parallel"
