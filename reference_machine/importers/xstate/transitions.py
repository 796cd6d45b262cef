"""The transitions of an XState machine: each read with its guard and actions, its target
resolved as XState resolves it, and checked against the regions it may cross."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reference_machine.findings import did_you_mean
from reference_machine.importers.xstate.common import STRINGIFIED, item_location
from reference_machine.importers.xstate.conversion import Part
from reference_machine.importers.xstate.nodes import StateNode

__all__ = ["TransitionReader"]

_TRANSITION_KEYS = frozenset({"target", "guard", "cond", "actions", "reenter", "internal",
                              "description", "meta"})


class TransitionReader(Part):
    """Reads transitions (`on`, `always`, `onDone`, ...) and resolves their targets."""

    def always(self, node: StateNode, always: Any) -> list[Any]:
        """Gives a state's eventless transitions, refusing one without a target."""
        transitions = self.read(node, always, node.at("always"))
        for index, transition in enumerate(transitions):
            if "target" not in transition:
                self.sink.error("always-internal", item_location(node.at("always"), index, always),
                                "an eventless transition without a target runs its actions again "
                                "on every change; the native format refuses it")
        return transitions

    def read(self, node: StateNode, written: Any, loc: str) -> list[Any]:
        items = written if isinstance(written, list) else [written]
        out: list[Any] = []
        for index, item in enumerate(items):
            where = item_location(loc, index, written)
            one = self._transition(node, item, where)
            if one is not None:
                out.append(one)
        return out

    def _transition(self, node: StateNode, item: Any, loc: str) -> dict[str, Any] | None:
        if item is None:
            return {}  # a forbidden transition: the event is taken and nothing happens
        if isinstance(item, str):
            found = self.resolve(node, item, loc)
            if found is None:
                return None
            if self._stays(node, found, False, loc):
                return {}
            target = self._target(node, found, loc)
            return None if target is None else {"target": target}
        if not isinstance(item, Mapping):
            self.sink.error("bad-transition", loc, "a transition is a target name, an object "
                            f"{{target, guard, actions}} or a list of them, got {item!r}")
            return None
        if not item:
            self.sink.warning("empty-transition", loc, "an empty transition object takes the event "
                              "and does nothing; if it was written with a guard or actions, they "
                              f"were lost{STRINGIFIED}")
        for key in item:
            if key not in _TRANSITION_KEYS:
                self.sink.warning("unknown-key", f"{loc}.{key}", f"{key!r} is not a key of an "
                                  f"XState transition{did_you_mean(str(key), _TRANSITION_KEYS)}; "
                                  "it is left out")
        out: dict[str, Any] = {}
        reenter = item.get("reenter") is True
        target = item.get("target")
        if isinstance(target, list):
            if len(target) != 1:
                self.sink.error("multiple-targets", f"{loc}.target", "a transition to several "
                                "targets at once has no native counterpart")
                return None
            target = target[0]
        if target is not None:
            if not isinstance(target, str):
                self.sink.error("bad-target", f"{loc}.target", "a target is a string, got "
                                f"{target!r}")
                return None
            found = self.resolve(node, target, f"{loc}.target")
            if found is None:
                return None
            if not self._stays(node, found, reenter, f"{loc}.target"):
                resolved = self._target(node, found, f"{loc}.target")
                if resolved is None:
                    return None
                out["target"] = resolved
        guard_key = "guard" if "guard" in item else "cond" if "cond" in item else None
        if guard_key == "cond":
            self.sink.warning("v4-key", f"{loc}.cond", "`cond` is XState v4's name for `guard`; "
                              "read as the guard")
        if guard_key is not None and item[guard_key] is not None:
            guard = self.functions.guard(item[guard_key], f"{loc}.{guard_key}")
            if guard is not None:
                out["guard"] = guard
        actions = self.actions.read(item.get("actions"), f"{loc}.actions")
        if actions:
            out["actions"] = actions
        if "internal" in item:
            self.sink.warning("reenter", f"{loc}.internal", "`internal` is XState v4's; the native "
                              "machine chooses what is left and entered as SCXML does (a "
                              "transition to its own compound state leaves and enters it again); "
                              "it is not imported")
        if isinstance(item.get("description"), str):
            out["description"] = item["description"]
        return out

    def _stays(self, node: StateNode, found: StateNode, reenter: bool, loc: str) -> bool:
        """Tells whether a transition from `node` to `found` stays in `node`, as XState v5's
        default `reenter: false` has it: to the atomic state itself, it is natively internal
        (no target: actions run, the state is neither left nor entered, its step and timer
        kept). To a compound or parallel state itself or a state below, XState leaves and
        enters only the states below the source, which no native transition says: imported
        as today, warned."""
        if reenter:
            return False
        if found is node and node.kind == "atomic":
            return True
        if found.within(node) and (node is not self.ctx.root or self.ctx.root.native):
            self.sink.warning("reenters", loc, f"XState v5 (no `reenter: true`) does not leave "
                              f"{'.'.join(node.path) or 'the root'} for this target, so its entry "
                              "and exit do not run again nor its invoke restart; natively the "
                              "transition leaves and enters it, so its entry and exit actions "
                              "re-run")
        return False

    def _target(self, node: StateNode, found: StateNode, loc: str) -> Any:
        if self.ctx.product_source is not None:
            region, parallel = self.ctx.product_source
            if found.parent is region:
                return ("region", found.key)
            if found.within(parallel):
                self.sink.error("product-target", loc, "in a parallel state imported as the "
                                "product of its regions, a transition moves within its own region "
                                "or leaves the parallel state")
                return None
            self._check_scope(parallel, found, loc)
            return found.native
        if found is self.ctx.root and not self.ctx.root.native:
            self.sink.error("root-target", loc, "the machine's root is not a state of the native "
                            "definition; target its initial state instead")
            return None
        if found.kind == "history":
            compound = found.parent
            if compound is None or compound.kind != "compound":
                self.sink.error("history-shape", loc, "a history state belongs in a compound state")
                return None
            self.ctx.history_via.add(id(compound))
            found = compound
        elif found.config.get("states") and any(
                c.kind == "history" for c in found.children) and not loc.startswith(
                    node.at("after")):  # a native timer enters a compound's initial state
            self.ctx.direct_to.setdefault(id(found), loc)
        self._check_scope(node, found, loc)
        return found.native

    def resolve(self, node: StateNode, text: str, loc: str) -> StateNode | None:
        body = text[1:] if text.startswith(("#", ".")) else text
        if "" in body.split("."):
            self.sink.error("bad-target", loc, f"target {text!r} has an empty name in its path: "
                            "XState writes a child '.child', a sibling 'name', any state "
                            "'#id.path'; '.' and '..' name no state")
            return None
        if text.startswith("#"):
            reference = text[1:]
            head, rest = reference, ""
            while head not in self.ctx.ids and "." in head:
                head, _, tail = head.rpartition(".")
                rest = f"{tail}.{rest}" if rest else tail
            base = self.ctx.ids.get(head)
            if base is None:
                self.sink.error("unknown-target", loc, f"no state has the id {reference!r}"
                                f"{did_you_mean(reference, self.ctx.ids)}")
                return None
            return self._descend(base, rest, text, loc)
        if text.startswith("."):
            return self._descend(node, text[1:], text, loc)
        if node.parent is None:
            self.sink.error("unknown-target", loc, f"target {text!r} on the machine's root: XState "
                            f"resolves a bare target next to the state, and the root has no "
                            f"siblings; did you mean '.{text}'?")
            return None
        return self._descend(node.parent, text, text, loc)

    def _descend(self, base: StateNode, path: str, text: str, loc: str) -> StateNode | None:
        current = base
        for part in [p for p in path.split(".") if p] if path else []:
            match = next((c for c in current.children if c.key == part), None)
            if match is None:
                keys = [c.key for c in current.children]
                where = ".".join(current.path) or "the machine's root"
                self.sink.error("unknown-target", loc, f"target {text!r} does not exist: {where} "
                                f"has no child {part!r}{did_you_mean(part, keys)}")
                return None
            current = match
        return current

    def _check_scope(self, source: StateNode, target: StateNode, loc: str) -> None:
        region = source.region()
        there = target.region()
        if region is there and target is not region:
            return
        if region is None and there is None:
            return
        if region is not None and target is not region and target.within(region):
            return
        self.sink.error("leaves-region", loc, "the native machine leaves a parallel state's region "
                        "only through the region's final states (joined by the parallel state's "
                        "onDone), and enters a region only through its initial state; this "
                        "transition crosses a region's boundary")
