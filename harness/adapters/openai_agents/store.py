"""What survives a crash (`Store`): the runs accepted (a job queue), each execution's last saved
RunState JSON with what it waits on, the ids of the events the app took and, with
`save_results`, each call's result; beside them, what the harness itself keeps: the journal of
the tool calls' runs and the scripted model's record of the calls it made."""

from __future__ import annotations

import uuid
from typing import Any, NamedTuple

from harness.adapters.replay_units import Journal

__all__ = ["Saved", "Store"]


class Saved(NamedTuple):
    """One execution's saved state: the RunState JSON, how it stands (`waiting` on a human,
    `decided` by one and not yet run on, `done`), the pending call (tool, call id, arguments as
    JSON) when it waits, and the time the request was made."""

    json: str
    status: str
    tool: str = ""
    call_id: str = ""
    arguments: str = ""
    asked_at: int = 0


class Store:
    """The simulated disk of one run's workers (see the module)."""

    def __init__(self) -> None:
        self.accepted: dict[str, Any] = {}  # execution -> the run's input, in start order
        self.saved: dict[str, Saved] = {}
        self.versions: dict[str, int] = {}  # execution -> saves made
        self.seen: set[str] = set()  # the ids of the events the app took
        self.results: dict[str, Any] = {}  # call key -> its result (save_results)
        # the harness's own knowledge, never read by the app: it explains and it scripts
        self.journal = Journal()
        self.calls: dict[str, tuple[int, int]] = {}  # call id -> (script step, attempt)
        self.minted = 0
        self.responses = 0

    def save(self, execution_id: str, saved: Saved, event_id: str = "") -> None:
        """Writes an execution's state (and the event it took) in one write."""
        self.saved[execution_id] = saved
        self.versions[execution_id] = self.versions.get(execution_id, 0) + 1
        if event_id:
            self.seen.add(event_id)

    def mint(self) -> uuid.UUID:
        """Gives the run's next id, for the SDK's `uuid4` while the harness drives it: the
        same in every run of a seed."""
        self.minted += 1
        return uuid.UUID(int=self.minted, version=4)

    def call_id(self) -> str:
        """Gives a call id the model mints: a new one for each response."""
        self.minted += 1
        return f"call_{self.minted:04d}"
