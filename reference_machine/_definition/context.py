"""What the checks of one definition build share: the spec, the finding sink, the structure
found so far (each compound state's children, each state's scope) and the questions asked of it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from reference_machine._definition.compiled import PayloadCheck
from reference_machine._functions import registered_functions
from reference_machine._spec import WorkflowSpec
from reference_machine.findings import Acknowledged, FindingSink

__all__ = ["Compilation"]


class Compilation:
    """The state the checks of one build share: each check takes it as its first argument and
    reports through its `sink`.

    `children` and `scope_of` are empty until the hierarchy is read (the compiler's first
    phase); every later check asks its questions of them.
    """

    def __init__(self, spec: WorkflowSpec, functions: Mapping[str, Callable[..., Any]] | None,
                 sink: FindingSink, read: frozenset[str] | None) -> None:
        self.spec = spec
        self.functions = {**registered_functions(), **(functions or {})}
        self.sink = sink
        #: the warnings the definition acknowledges (`lint: ignore:`), moved out of the sink
        self.acknowledged: list[Acknowledged] = []
        self.states = spec.states
        self.unresolved: set[str] = set()  # states with a target we could not resolve
        #: each tool's output check, by tool
        self.output_checks: dict[str, PayloadCheck | None] = {}
        #: every word the definition's expressions hold (see `words_read`)
        self.read = read
        #: the compiled `input:` of each step and compensation, by location
        self.templates: dict[str, Callable[[Mapping[str, Any]], Mapping[str, Any]]] = {}
        #: each compound state's children, in definition order
        self.children: dict[str, list[str]] = {}
        #: the region (a parallel state's child) or map state each state runs inside, if any
        self.scope_of: dict[str, str | None] = {}
    def ancestors(self, name: str) -> tuple[str, ...]:
        """Gives the parents of `name`, the nearest first (stopping at a parent cycle)."""
        chain: list[str] = []
        current = self.states[name].parent
        while current is not None and current in self.states and current not in chain:
            if current == name:
                break
            chain.append(current)
            current = self.states[current].parent
        return tuple(chain)

    def chain(self, name: str) -> tuple[str, ...]:
        """Gives `name` and the parents whose transitions it takes: up to its region, or up to
        the child of its map state (a map's or parallel state's own transitions leave it)."""
        chain = [name]
        current = name
        for parent in self.ancestors(name):
            if self.states[current].parent is not None and self.states[
                    self.states[current].parent or ""].type == "parallel":
                break  # `current` is a region: its own transitions are its last
            if self.states[parent].type == "map":
                break
            chain.append(parent)
            current = parent
        return tuple(chain)

    def scope(self, name: str) -> str | None:
        """Gives the region (a parallel state's child) or map state `name` runs inside."""
        current, seen = name, {name}
        while True:
            parent = self.states[current].parent
            if parent is None or parent not in self.states or parent in seen:
                return None
            if self.states[parent].type == "parallel":
                return current
            if self.states[parent].type == "map":
                return parent
            seen.add(parent)
            current = parent

    def scope_roots(self) -> list[str]:
        """Gives every region and map state, in definition order."""
        return sorted({root for root in self.scope_of.values() if root is not None},
                      key=list(self.states).index)

    def leaves(self, scope: str | None) -> list[str]:
        """Gives where executions of `scope` rest: its leaves, parallel and map states."""
        return [name for name, state in self.states.items()
                if self.scope_of.get(name) == scope and name != scope
                and (not self.children.get(name) or state.type in ("parallel", "map"))]

    def handles(self, name: str, event: str) -> bool:
        """Tells whether `name`, or a parent whose transitions it takes, handles `event`."""
        return any(event in self.states[holder].on for holder in self.chain(name))

    def undoes(self, owner: str) -> bool:
        """Tells whether a region (item) of parallel (map) state `owner` runs a step with a
        compensation, which a failure of `owner` undoes."""
        return any(state.step is not None and state.step.compensation is not None
                   and owner in self.ancestors(name) for name, state in self.states.items())

    def scope_word(self, root: str) -> str:
        """Gives what to call scope `root` in a message: a region or a map state."""
        return "map state" if self.states[root].type == "map" else "region"
