"""The moves one call of a graph makes, read off the writes of each task LangGraph commits
(`Moves`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from harness.adapters.langgraph.common import END
from harness.adapters.peers import AdapterError

if TYPE_CHECKING:
    from harness.adapters.langgraph.target import LangGraphTarget

__all__ = ["Moves"]


class Moves:
    """Reads the moves one call makes off the writes of each task LangGraph commits: a write
    to `branch:to:<node>` (an edge, the branch a conditional edge chose, a `Command`'s goto),
    a `Send` (a fan-out task) or a waiting edge's `join:` channel names where the task went; a
    task that ended writing none of them went to END (where its node may). A task that failed
    or waits on an interrupt did not move; an error handler was moved to from its node."""

    def __init__(self, target: LangGraphTarget, moves: list[tuple[str, str]]) -> None:
        self.ids, self.next, self.handles = target.state_ids, target.next_nodes, target.handles
        self.moves = moves
        self.undeclared: list[tuple[str, str]] = []  # moves the graph read does not declare

    def commit(self, name: str, writes: Sequence[tuple[str, Any]],
               exception: BaseException | None) -> None:
        if exception is not None:
            return
        for node in self.handles.get(name, ()):
            self._move(node, name)
        went = False
        for channel, value in writes:
            target = _destination(channel, value)
            if target is not None:
                went = True
                self._move(name, target)
        if not went and END in self.next.get(name, ()):
            self._move(name, END)

    def _move(self, source: str, target: str) -> None:
        if source not in self.ids:
            return  # a task of LangGraph's own
        if target not in self.next.get(source, ()):
            if (source, target) not in self.undeclared:
                self.undeclared.append((source, target))
            return
        move = (self.ids[source], self.ids[target])
        if move not in self.moves:
            self.moves.append(move)

    def refuse_undeclared(self) -> None:
        """Raises `AdapterError` for a move the graph made that was not read off it: the
        definition would then judge the graph by edges it does not have."""
        if self.undeclared:
            source, target = self.undeclared[0]
            raise AdapterError(
                f"node {source!r} went to {target!r}, which the adapter did not read off the "
                f"graph (a Command(goto=...) needs its node's return annotated "
                f"Command[Literal[{target!r}, ...]], a conditional edge its path map)")


def _destination(channel: str, value: Any) -> str | None:
    """Gives the node a task's write sends the run to, or None for a write of state."""
    if channel.startswith("branch:to:"):
        return channel.removeprefix("branch:to:")
    if channel == "__pregel_tasks":  # a Send
        node = getattr(value, "node", None)
        return str(node) if node is not None else None
    if channel.startswith("join:"):
        return channel.rpartition(":")[2]
    return None
