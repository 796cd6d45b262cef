"""What survives a crash: the checkpointer's file, reached through the saver that lets
LangGraph's writes land when `durability` says and past the crash points, and the runs
accepted (`Disk`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.adapters.langgraph.common import Dead
from harness.adapters.peers import AdapterError

if TYPE_CHECKING:
    from harness.adapters.langgraph.machine import LangGraphMachine

__all__ = ["Disk", "saver_class", "sqlite_saver"]


class Disk:
    """What survives a crash: the checkpointer's file, the runs accepted (a job queue) and
    the ids of the events the API in front of the graph took."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.accepted: dict[str, Any] = {}  # thread id -> the run's input, in start order
        self.seen: set[str] = set()


def saver_class() -> type:
    from langgraph.checkpoint.base import BaseCheckpointSaver

    class HarnessSaver(BaseCheckpointSaver):
        """Wraps a real saver: reads go to it, writes reach it when `durability` says, past
        the machine's crash points; nothing reaches it once the machine has died."""

        def __init__(self, inner: Any, machine: LangGraphMachine) -> None:
            super().__init__(serde=inner.serde)
            self.inner, self.machine = inner, machine
            self.held: list[tuple[str, tuple[Any, ...]]] = []  # not yet on the file

        def get_tuple(self, config: Any) -> Any:
            return self.inner.get_tuple(config)

        def list(self, config: Any, **kwargs: Any) -> Iterator[Any]:
            return self.inner.list(config, **kwargs)

        def get_next_version(self, current: Any, channel: Any) -> Any:
            return self.inner.get_next_version(current, channel)

        def delete_thread(self, thread_id: str) -> None:
            self.inner.delete_thread(thread_id)

        def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = ""
                       ) -> None:
            if self.machine.dead:
                raise Dead
            self.held.append(("put_writes", (config, list(writes), task_id, task_path)))
            if self.machine.durability == "exit":
                self.land()

        def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
            if self.machine.dead:
                raise Dead
            held = [write for write in self.held if write[0] == "put"]
            if held and self.machine.durability == "async":
                self.land()  # the checkpoint before this one is on the file by now
            if any(kind == "put_writes" for kind, _ in self.held):
                self.machine.passing("put_ahead_of_writes", ahead=(config, checkpoint,
                                                                   metadata, new_versions))
            self.held.append(("put", (config, checkpoint, metadata, new_versions)))
            if self.machine.durability != "async":
                self.land()
            return {"configurable": {**config["configurable"],
                                     "checkpoint_id": checkpoint["id"]}}

        def land(self) -> None:
            """Brings every held write to the file, in the order LangGraph made them."""
            while self.held:
                kind, arguments = self.held.pop(0)
                self.machine.passing(f"before_{kind}")
                getattr(self.inner, kind)(*arguments)
                self.machine.passing(f"after_{kind}")

    return HarnessSaver


def sqlite_saver(connection: sqlite3.Connection) -> Any:
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver
    except ImportError as error:
        raise AdapterError("langgraph-checkpoint-sqlite is not installed: pip install "
                           "'fsmharness[langgraph]'") from error
    return SqliteSaver(connection)
