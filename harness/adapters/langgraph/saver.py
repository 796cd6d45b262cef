"""What survives a crash: the checkpointer's file, reached through the saver that lets
LangGraph's writes land when `durability` says and past the crash points, and the runs
accepted (`Disk`)."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fault_injection import SimulatedCrash
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

        def __init__(self, inner: Any, machine: LangGraphMachine, awaited: bool = False
                     ) -> None:
            super().__init__(serde=inner.serde)
            self.inner, self.machine = inner, machine
            self.awaited = awaited  # the inner saver is written by awaiting it (aiosqlite)
            self.held: list[tuple[str, tuple[Any, ...]]] = []  # not yet on the file
            self.step_old = 0  # under `async`, how many of those are a step old

        # -- reads go to the file as it is
        def get_tuple(self, config: Any) -> Any:
            return self.inner.get_tuple(config)

        def list(self, config: Any, **kwargs: Any) -> Iterator[Any]:
            return self.inner.list(config, **kwargs)

        async def aget_tuple(self, config: Any) -> Any:
            if self.awaited:
                return await self.inner.aget_tuple(config)
            return self.inner.get_tuple(config)

        async def alist(self, config: Any, **kwargs: Any) -> AsyncIterator[Any]:
            if self.awaited:
                async for each in self.inner.alist(config, **kwargs):
                    yield each
            else:
                for each in self.inner.list(config, **kwargs):
                    yield each

        def get_next_version(self, current: Any, channel: Any) -> Any:
            return self.inner.get_next_version(current, channel)

        def delete_thread(self, thread_id: str) -> None:
            self.inner.delete_thread(thread_id)

        async def adelete_thread(self, thread_id: str) -> None:
            if self.awaited:
                await self.inner.adelete_thread(thread_id)
            else:
                self.inner.delete_thread(thread_id)

        # -- writes are held, and land when `durability` says
        def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = ""
                       ) -> None:
            if self._hold_writes(config, writes, task_id, task_path):
                self.land()

        async def aput_writes(self, config: Any, writes: Any, task_id: str,
                              task_path: str = "") -> None:
            if self._hold_writes(config, writes, task_id, task_path):
                await self.aland()

        def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
            arguments = (config, checkpoint, metadata, new_versions)
            try:
                lands = self._hold(arguments)
            except SimulatedCrash:
                self.inner.put(*arguments)  # the crash lands with the checkpoint saved
                raise
            if lands:
                self.land()
            return _saved_at(config, checkpoint)

        async def aput(self, config: Any, checkpoint: Any, metadata: Any,
                       new_versions: Any) -> Any:
            arguments = (config, checkpoint, metadata, new_versions)
            try:
                lands = self._hold(arguments)
            except SimulatedCrash:
                if self.awaited:
                    await self.inner.aput(*arguments)
                else:
                    self.inner.put(*arguments)
                raise
            if lands:
                await self.aland()
            return _saved_at(config, checkpoint)

        def _hold_writes(self, config: Any, writes: Any, task_id: str, task_path: str
                         ) -> bool:
            """Holds a task's writes; tells whether they land now."""
            if self.machine.dead:
                raise Dead
            self.held.append(("put_writes", (config, list(writes), task_id, task_path)))
            return self.machine.durability == "exit"

        def _hold(self, arguments: tuple[Any, ...]) -> bool:
            """Holds a checkpoint, past `put_ahead_of_writes` when writes wait before it;
            tells whether it lands now."""
            if self.machine.dead:
                raise Dead
            if any(kind == "put_writes" for kind, _ in self.held):
                self.machine.passing("put_ahead_of_writes")
            self.held.append(("put", arguments))
            return self.machine.durability != "async"

        def land(self, most: int | None = None) -> None:
            """Brings every held write (the `most` first) to the file, in the order LangGraph
            made them."""
            for kind, arguments in self._landing(most):
                self.machine.box.saving(kind, getattr(self.inner, kind), arguments)

        async def aland(self, most: int | None = None) -> None:
            """`land`, awaiting the inner saver's writes when it is written so."""
            for kind, arguments in self._landing(most):
                if self.awaited:
                    await self.machine.box.asaving(kind, getattr(self.inner, f"a{kind}"),
                                                   arguments)
                else:
                    self.machine.box.saving(kind, getattr(self.inner, kind), arguments)

        def _landing(self, most: int | None) -> Iterator[tuple[str, tuple[Any, ...]]]:
            landing = len(self.held) if most is None else min(most, len(self.held))
            for _ in range(landing):
                yield self.held.pop(0)
            self.step_old = len(self.held)  # what is left was held in this step

        def step_done(self) -> int | None:
            """The call streamed a step's update: gives how many held writes land now (None:
            `durability` is not `async`). Under `async` the saves LangGraph started before
            the step reach the file now, a step late: a crash in a step (the first node's
            included) loses the saves of the step before, the input's checkpoint too."""
            return self.step_old if self.machine.durability == "async" else None

    return HarnessSaver


def _saved_at(config: Any, checkpoint: Any) -> dict[str, Any]:
    return {"configurable": {**config["configurable"], "checkpoint_id": checkpoint["id"]}}


def sqlite_saver(connection: sqlite3.Connection) -> Any:
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver
    except ImportError as error:
        raise AdapterError("langgraph-checkpoint-sqlite is not installed: pip install "
                           "'fsmharness[langgraph]'") from error
    return SqliteSaver(connection)
