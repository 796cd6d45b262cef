"""The injectors: what a fault plan's decisions are raised through, inside a machine's process.

A machine reports named points to a *probe* (`Callable[[str], None]`): the reference runtime
passes its crash points; `ProbedStore` adds `store_write` before every write. The probe a
simulator gives decides, from its seeded plan, whether anything happens there: it raises
`SimulatedCrash` (the process dies), raises `StoreWriteError` (the disk refused the write), or
lets a second worker run first. Nothing here draws randomness; the probe does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from reference_machine import (
    Commit,
    Event,
    EventStore,
    History,
    LogEntry,
    OutboxEntry,
    StoredExecution,
    StoreError,
    Timer,
    TransitionRecord,
)
from reference_machine import Execution as _Execution

__all__ = ["STORE_WRITE", "ProbedStore", "SimulatedCrash", "StoreWriteError"]

#: The point `ProbedStore` reports before each write.
STORE_WRITE = "store_write"

Probe = Callable[[str], None]


class SimulatedCrash(BaseException):
    """The simulated process died at `point`: everything in memory is gone.

    A `BaseException`, like `KeyboardInterrupt`, so that a machine's `except Exception` cannot
    swallow its own death."""

    def __init__(self, point: str) -> None:
        self.point = point
        super().__init__(f"simulated crash at {point}")


class StoreWriteError(StoreError):
    """An injected store failure: the write was refused and nothing of it was written."""

    def __init__(self, operation: str) -> None:
        self.operation = operation
        super().__init__(f"injected store write failure during {operation}")


class ProbedStore:
    """An `EventStore` that calls `probe(STORE_WRITE)` before each write (which may raise and
    write nothing) and tells `on_commit` and `on_record` what was written."""

    def __init__(self, store: EventStore, probe: Probe,
                 on_commit: Callable[[Commit, int | StoreError], None] | None = None,
                 on_record: Callable[[str, str, Event], None] | None = None) -> None:
        self.inner = store
        self._probe = probe
        self._on_commit = on_commit or (lambda commit, result: None)
        self._on_record = on_record or (lambda execution_id, command_id, result: None)

    def watch(self, on_commit: Callable[[Commit, int | StoreError], None],
              on_record: Callable[[str, str, Event], None]) -> None:
        """Replaces the observers of what is written."""
        self._on_commit, self._on_record = on_commit, on_record

    def create(self, execution: _Execution) -> None:
        self._probe(STORE_WRITE)
        self.inner.create(execution)

    def load(self, execution_id: str) -> StoredExecution:
        return self.inner.load(execution_id)

    def commit(self, commit: Commit) -> int:
        self._probe(STORE_WRITE)
        version = self.inner.commit(commit)
        self._on_commit(commit, version)
        return version

    def commit_many(self, commits: Sequence[Commit]) -> list[int | StoreError]:
        self._probe(STORE_WRITE)
        results = self.inner.commit_many(commits)
        for commit, result in zip(commits, results, strict=True):
            self._on_commit(commit, result)
        return results

    def record_result(self, execution_id: str, command_id: str, result: Event) -> Event:
        self._probe(STORE_WRITE)
        kept = self.inner.record_result(execution_id, command_id, result)
        if kept == result:  # the first recorded result wins: tell only of one the store kept
            self._on_record(execution_id, command_id, result)
        return kept

    def pending(self, execution_id: str | None = None) -> list[OutboxEntry]:
        return self.inner.pending(execution_id)

    def outbox(self, execution_id: str) -> list[OutboxEntry]:
        return self.inner.outbox(execution_id)

    def log(self, execution_id: str) -> list[LogEntry]:
        return self.inner.log(execution_id)

    def history(self, execution_id: str) -> History:
        return self.inner.history(execution_id)

    def due_timers(self, now: int) -> list[tuple[str, Timer]]:
        return self.inner.due_timers(now)

    def execution_ids(self, *, unfinished: bool = False) -> list[str]:
        return self.inner.execution_ids(unfinished=unfinished)

    def transitions(self, execution_id: str) -> list[TransitionRecord]:
        return self.inner.transitions(execution_id)

    def close(self) -> None:
        self.inner.close()
