"""The XState state nodes as read from a machine config, before anything is written."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["StateNode"]


@dataclass(eq=False)
class StateNode:
    """One XState state node, as read."""

    key: str
    path: tuple[str, ...]
    loc: str                     # `states.a.states.b`; "" for the root
    config: Mapping[str, Any]
    parent: StateNode | None
    kind: str                    # atomic, compound, parallel, final, history
    children: list[StateNode] = field(default_factory=list)
    native: str = ""             # the native state's name ("" for the root and history nodes)
    initial_read: bool = False   # its `initial` was read (and any finding about it made)

    def at(self, key: str) -> str:
        """Gives the location of `key` of this node."""
        return f"{self.loc}.{key}" if self.loc else key

    def ancestors(self) -> list[StateNode]:
        chain, current = [], self.parent
        while current is not None:
            chain.append(current)
            current = current.parent
        return chain

    def region(self) -> StateNode | None:
        """Gives the region (a parallel state's child) this node is in or is, if any."""
        current: StateNode | None = self
        while current is not None and current.parent is not None:
            if current.parent.kind == "parallel":
                return current
            current = current.parent
        return None

    def within(self, other: StateNode) -> bool:
        return self is other or other in self.ancestors()
