"""What survives a crash (`Disk`: one `FileStatePersistence` file per run, kept in memory as a
`RunFile`, the runs accepted, the harness's journal) and the persistence the adapter gives
pydantic-graph (`persistence_class`): the real `FileStatePersistence`, its writes brought to
the file past the crash points, its lock kept where a crash leaves it."""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from harness.adapters.replay_units import Dead, Journal, Unit

if TYPE_CHECKING:
    from harness.adapters.pydantic_graph.machine import PydanticGraphMachine

__all__ = ["PINNED_TIME", "Disk", "RunFile", "persistence_class"]

#: The time pydantic-graph stamps on a snapshot (`start_ts`, an end's `ts`) under the harness.
PINNED_TIME = datetime(2025, 1, 1, tzinfo=UTC)


class RunFile:
    """One run's `FileStatePersistence` file, held in memory: the `Path` methods
    pydantic-graph's own `_load_sync` and `_save_sync` call (`read_bytes`, `write_bytes`), so
    its serialisation runs as it is and nothing reaches the real disk (a run killed, a worker
    process that ends with `os._exit`, leave nothing behind). A write replaces the whole
    content at once, as `write_bytes` does."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.content: bytes | None = None  # None: never written (FileNotFoundError)

    def exists(self) -> bool:
        return self.content is not None

    def read_bytes(self) -> bytes:
        if self.content is None:
            raise FileNotFoundError(f"{self.name}: not written yet")
        return self.content

    def write_bytes(self, data: bytes) -> int:
        self.content = bytes(data)
        return len(self.content)

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"RunFile({self.name!r})"


class Disk:
    """What survives a crash: one JSON file per run (pydantic-graph's `FileStatePersistence`),
    the runs accepted (a job queue), the ids of the events the API in front of the graph took
    and the locks a dead process left held; beside them, what the harness knows of each
    node's runs: the journal, each snapshot's place in its run and the failures at each
    place. Those only explain and name keys: pydantic-graph never reads them."""

    def __init__(self) -> None:
        self.accepted: dict[str, RunFile] = {}  # execution id -> its run's file, start order
        self.seen: set[str] = set()
        self.locks: set[str] = set()  # files whose lock is held
        self.journal = Journal()
        self.minted = 0
        self.places: dict[tuple[str, str], int] = {}  # (execution, snapshot id) -> place
        self.failures: dict[tuple[str, int], int] = {}  # (execution, place) -> failures

    def file(self, execution_id: str) -> RunFile:
        """Gives the file of a run, a new one for a run not seen yet."""
        found = self.accepted.get(execution_id)
        return found if found is not None else RunFile(f"run-{len(self.accepted) + 1}.json")

    def mint(self, node_id: str) -> str:
        """Gives pydantic-graph's next snapshot id (a uuid4 in production): `{node}:{n}`,
        counted per simulated run, so the same seed gives the same ids."""
        self.minted += 1
        return f"{node_id}:{self.minted}"

    def read(self, execution_id: str) -> list[dict[str, Any]]:
        """Gives the run's snapshots as the file holds them (JSON), none before its first
        write."""
        path = self.accepted.get(execution_id)
        if path is None or not path.exists():
            return []
        return list(json.loads(path.read_bytes() or b"[]"))


@functools.cache
def persistence_class() -> type:
    from pydantic_graph.persistence import EndSnapshot
    from pydantic_graph.persistence.file import FileStatePersistence

    class HarnessPersistence(FileStatePersistence):
        """pydantic-graph's `FileStatePersistence` as it is, on a file kept in memory
        (`RunFile`), with each write brought to the file past the crash points `before_save`
        and `after_save` (nothing reaches it once the process died), `after_running` between
        a node's `running` write and its run, and the file lock kept in the disk, held for
        good by a process that died holding it (a real one leaves its lock file behind)."""

        def __init__(self, json_file: RunFile, machine: PydanticGraphMachine,
                     execution_id: str) -> None:
            super().__init__(cast(Path, json_file))  # a Path to pydantic-graph's code
            self.machine, self.execution_id = machine, execution_id
            self.ran: Unit | None = None  # the node that ran last: its successor saves it
            self.saves: Unit | None = None  # the unit the next write saves the result of
            self.rerun_place: int | None = None  # a node run again takes this place

        def set_graph_types(self, graph: Any) -> None:
            # building the snapshots' type adapter is costly: once per target
            target = self.machine.target
            if target.snapshot_types is None:
                super().set_graph_types(graph)
                target.snapshot_types = self._snapshots_type_adapter
            self._snapshots_type_adapter = target.snapshot_types

        # where the node a snapshot holds stands in the run
        def _place(self, node: Any) -> None:
            disk = self.machine.disk
            if self.rerun_place is not None:
                place, self.rerun_place = self.rerun_place, None
            else:
                place = int(self.ran.step) + 1 if self.ran is not None else 1
            disk.places.setdefault((self.execution_id, node.get_snapshot_id()), place)

        async def snapshot_node(self, state: Any, next_node: Any) -> None:
            self._place(next_node)
            self.saves = ran = self.ran
            await super().snapshot_node(state, next_node)
            if ran is not None:
                self.machine.moved(self.execution_id, ran.name, next_node.get_node_id())

        async def snapshot_node_if_new(self, snapshot_id: str, state: Any,
                                       next_node: Any) -> None:
            self._place(next_node)
            await super().snapshot_node_if_new(snapshot_id, state, next_node)

        async def snapshot_end(self, state: Any, end: Any) -> None:
            # EndSnapshot's own `ts` default was bound when the class was made: pinned here
            self.saves = ran = self.ran
            await self._append_save(EndSnapshot(state=state, result=end, ts=PINNED_TIME))
            if ran is not None:
                self.machine.moved(self.execution_id, ran.name, None)

        @contextlib.asynccontextmanager
        async def record_run(self, snapshot_id: str) -> AsyncIterator[None]:
            async with super().record_run(snapshot_id):  # `running` is on the file
                unit = self.ran = self.machine.box.begin(self.execution_id, snapshot_id)
                self.machine.passing("after_running")
                try:
                    yield
                except Exception:
                    self.machine.box.ended(unit, failed=True)
                    raise
                self.machine.box.ended(unit, failed=False)

        def _save_sync(self, snapshots: Any) -> None:
            saves, self.saves = self.saves, None
            self.machine.box.saving(super()._save_sync, snapshots, saves)

        @contextlib.asynccontextmanager
        async def _lock(self, *, timeout: float = 1.0) -> AsyncIterator[None]:
            locks, held = self.machine.disk.locks, str(self.json_file)
            if self.machine.dead:
                raise Dead
            if held in locks:  # pydantic-graph polls for `timeout` seconds, then gives up
                raise TimeoutError(f"the lock of {self.json_file.name} is held (pydantic-graph "
                                   f"waited {timeout:g} s for it)")
            locks.add(held)
            try:
                yield
            finally:
                if not self.machine.dead:  # a dead process never takes its lock file away
                    locks.discard(held)

    return HarnessPersistence
