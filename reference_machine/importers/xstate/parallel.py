"""XState's parallel states: a native parallel state joined by its regions' final states, or,
where no region ever ends, one compound state whose children are the combinations of its
regions' states."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reference_machine.importers.xstate.common import safe
from reference_machine.importers.xstate.conversion import Part
from reference_machine.importers.xstate.nodes import StateNode

__all__ = ["ParallelReader"]

#: The most states a parallel state whose regions never end is imported as (their product).
_PRODUCT_MAX = 256


class ParallelReader(Part):
    """Writes parallel states, as native parallel states or as the product of their regions."""

    def flat(self, node: StateNode) -> bool:
        """Tells whether parallel state `node` is imported as the product of its regions:
        no region ever ends, and each is a flat set of states that only take events."""
        if node.kind != "parallel":
            return False
        known = self.ctx.flat.get(id(node))
        if known is not None:
            return known
        regions = [r for r in node.children if r.kind != "history"]
        flat = bool(regions) and all(
            r.kind == "compound" and not _has_final(r)
            and set(r.config) <= {"initial", "states", "description"}
            and all(c.kind == "atomic" and set(c.config) <= {"on", "description"}
                    for c in r.children)
            for r in regions)
        size = 1
        for region in regions:
            size *= max(len(region.children), 1)
        flat = flat and size <= _PRODUCT_MAX
        self.ctx.flat[id(node)] = flat
        return flat

    def product(self, node: StateNode, out: dict[str, Any]) -> None:
        """Writes parallel state `node`, whose regions never end, as one compound state whose
        children are the combinations of its regions' states: an event moves the one region
        that takes it, the others keep their state."""
        regions = [r for r in node.children if r.kind != "history"]
        for history in (c for c in node.children if c.kind == "history"):
            self.sink.warning("left-out", history.loc, "history of a parallel state is not "
                              "imported")
        takes: dict[str, StateNode] = {}
        moves: list[dict[str, dict[str, list[Any]]]] = []   # per region: state -> on
        for region in regions:
            per_state: dict[str, dict[str, list[Any]]] = {}
            for state in region.children:
                on: dict[str, list[Any]] = {}
                converted = self._region_on(state, region, node)
                for event, transitions in converted.items():
                    other = takes.setdefault(event, region)
                    if other is not region:
                        self.sink.error("product-conflict", f"{state.at('on')}.{event}",
                                        f"regions {other.key!r} and {region.key!r} both take "
                                        f"{event!r}: a parallel state whose regions never end is "
                                        "imported as the product of its regions, which needs each "
                                        "event taken by one region")
                    on[event] = transitions
                per_state[state.key] = on
            moves.append(per_state)
        combos: list[tuple[str, ...]] = [()]
        for region in regions:
            combos = [(*combo, c.key) for combo in combos for c in region.children]
        initial = tuple((self.tree.initial(r) or r.children[0]).key for r in regions)
        keys = [r.key for r in regions]

        def name(combo: tuple[str, ...]) -> str:
            return f"{node.native}." + ".".join(
                f"{safe(r)}_{safe(c)}" for r, c in zip(keys, combo, strict=True))

        names = {combo: self.ctx.fresh(name(combo)) for combo in combos}
        for combo in combos:
            spec: dict[str, Any] = {"parent": node.native, "description": "XState states " + (
                ", ".join(".".join((*r.path, c)) for r, c in zip(regions, combo, strict=True)))}
            if combo == initial:
                spec["initial"] = True
            on_out: dict[str, list[Any]] = {}
            for index, (key, per_state) in enumerate(zip(combo, moves, strict=True)):
                for event, transitions in per_state[key].items():
                    on_out[event] = [self._combined(t, combo, index, names)
                                     for t in transitions]
            if on_out:
                spec["on"] = on_out
                if self.ctx.reactive:
                    spec["type"] = "wait"
            self.ctx.states[names[combo]] = spec
        self.sink.warning("parallel-product", node.loc, "no region of this parallel state ever "
                          "ends, and a native parallel state joins its regions by their final "
                          f"states: it is imported as one compound state whose {len(combos)} "
                          "children are the combinations of its regions' states (an event moves "
                          "the region that takes it)")
        if node.config.get("onDone") is not None:
            self.sink.warning("done-never", node.at("onDone"), "no region ever ends, so this "
                              "onDone is never taken; it is left out")

    def _region_on(self, state: StateNode, region: StateNode, parallel: StateNode
                   ) -> dict[str, list[Any]]:
        """Gives the transitions of a state of a region taken into a product, each target
        as ("region", key) within the region or the native name of a state outside."""
        written = state.config.get("on")
        if not isinstance(written, Mapping):
            return {}
        saved, self.ctx.product_source = self.ctx.product_source, (region, parallel)
        try:
            return self.catalog.on(state)
        finally:
            self.ctx.product_source = saved

    def _combined(self, transition: dict[str, Any], combo: tuple[str, ...], index: int,
                  names: Mapping[tuple[str, ...], str]) -> dict[str, Any]:
        target = transition.get("target")
        if isinstance(target, tuple):
            moved = (*combo[:index], target[1], *combo[index + 1:])
            return {**transition, "target": names[moved]}
        return dict(transition)

    def emit(self, node: StateNode, out: dict[str, Any], on: dict[str, list[Any]]) -> None:
        for region in node.children:
            if region.kind == "history":
                continue
            if region.kind != "compound":
                self.sink.error("region-shape", region.loc, "a region of a parallel state is, "
                                "natively, a compound state with child states; this one is "
                                f"{region.kind}")
            elif not _has_final(region):
                self.sink.error("region-never-final", region.loc, "this region has no final "
                                "state: a native parallel state joins its regions when each has "
                                "reached a final state, so a region that never ends cannot be "
                                "imported (give it a final state, or make the regions one "
                                "compound state)")
        done = node.config.get("onDone")
        if done is not None:
            out["done"] = self.transitions.read(node, done, node.at("onDone"))
        elif node is self.ctx.root:
            final = self.ctx.fresh("done")
            self.ctx.states[final] = {"type": "final", "outcome": "success",
                                      "description": "the XState machine is done: every region "
                                                     "is final"}
            out["done"] = final
        else:
            rest = self.invocations.rest(node, out, on, "done")
            out["done"] = rest
            self.sink.warning("no-on-done", node.loc, "no onDone: once every region is final "
                              "XState rests in the parallel state; imported as a move to "
                              f"{rest!r}, which takes the same events")


def _has_final(node: StateNode) -> bool:
    return any(c.kind == "final" or _has_final(c) for c in node.children)
