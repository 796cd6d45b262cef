"""What survives a crash: the checkpointer's file, reached through the saver that lets
LangGraph's writes land when `durability` says and past the crash points, and the runs
accepted (`Disk`)."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.adapters.peers import AdapterError
from harness.adapters.replay_units import Dead, Journal

if TYPE_CHECKING:
    from harness.adapters.langgraph.machine import LangGraphMachine

__all__ = ["Disk", "saver_class", "sqlite_saver"]


class Disk:
    """What survives a crash: the checkpointer's file, the runs accepted (a job queue) and
    the ids of the events the API in front of the graph took; beside them, the harness's
    journal of the nodes' runs (`Journal`), which only explains what happened."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.accepted: dict[str, Any] = {}  # thread id -> the run's input, in start order
        self.seen: set[str] = set()
        self.journal = Journal()  # what the harness saw of each node's runs: it explains
        self.minted = 0

    def mint(self, clock_seq: int | None = None) -> uuid.UUID:
        """Gives the run's next id, for LangGraph's checkpoints and messages: a v6 UUID
        whose time is the count of ids minted (so a later one sorts later), the same in
        every run of a seed."""
        self.minted += 1
        timestamp = 0x01B21DD213814000 + self.minted  # 100 ns after 1970, per id
        value = ((timestamp >> 12) & 0xFFFFFFFFFFFF) << 80 | (timestamp & 0x0FFF) << 64
        value |= ((clock_seq or 0) & 0x3FFF) << 48
        from langgraph.checkpoint.base.id import UUID  # Python's own takes version 1 to 5
        return UUID(int=value, version=6)


def saver_class() -> type:
    from langgraph.checkpoint.base import BaseCheckpointSaver

    class HarnessSaver(BaseCheckpointSaver):
        """Wraps a real saver: reads go to it, writes reach it when `durability` says (`sync`
        before the next step, `async` a step later, `exit` as the call returns), past the
        machine's crash points; nothing reaches it once the machine has died."""

        def __init__(self, inner: Any, machine: LangGraphMachine) -> None:
            super().__init__(serde=inner.serde)
            self.inner, self.machine = inner, machine
            self.held: list[tuple[str, tuple[Any, ...]]] = []  # not yet on the file
            self.step_old = 0  # under `async`, how many of those are a step old

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
            if any(kind == "put_writes" for kind, _ in self.held):
                self.machine.passing("put_ahead_of_writes", ahead=(config, checkpoint,
                                                                   metadata, new_versions))
            self.held.append(("put", (config, checkpoint, metadata, new_versions)))
            if self.machine.durability != "async":
                self.land()
            return {"configurable": {**config["configurable"],
                                     "checkpoint_id": checkpoint["id"]}}

        def land(self, most: int | None = None) -> None:
            """Brings every held write (the `most` first) to the file, in the order LangGraph
            made them."""
            landing = len(self.held) if most is None else min(most, len(self.held))
            for _ in range(landing):
                kind, arguments = self.held.pop(0)
                self.machine.box.saving(kind, getattr(self.inner, kind), arguments)
            self.step_old = 0

        def step_done(self) -> None:
            """The call streamed a step's update. Under `async` the saves LangGraph started
            before it reach the file now, a step late: a crash in a step (the first node's
            included) loses the saves of the step before, the input's checkpoint too."""
            if self.machine.durability == "async":
                self.land(self.step_old)
                self.step_old = len(self.held)

    return HarnessSaver


def sqlite_saver(connection: sqlite3.Connection) -> Any:
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver
    except ImportError as error:
        raise AdapterError("langgraph-checkpoint-sqlite is not installed: pip install "
                           "'fsmharness[langgraph]'") from error
    return SqliteSaver(connection)
