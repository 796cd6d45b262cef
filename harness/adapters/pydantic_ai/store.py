"""What survives a crash for a pydantic-ai agent under the harness (`Disk`): per execution, the
record an app that uses deferred tools keeps between the agent's request for approval and the
human's answer (`Record`: the message history as JSON, the request pending, the decisions
taken, the event ids taken), saved as JSON; the runs accepted (a job queue); and, outside the
app, what the model provider saw (how often each turn was asked) and the harness's journal."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.adapters.replay_units import Journal

__all__ = ["Disk", "Record", "Request"]


@dataclass
class Request:
    """An approval request the app asked a human: its id, the tool call it is for, the
    call's arguments and their action hash, and when it expires."""

    id: str
    call: str
    tool: str
    args: dict[str, Any]
    hash: str
    expires_at: int


@dataclass
class Record:
    """One execution's record, as the app stores it (see the module). `decisions` holds each
    decision taken: by request id when approvals are bound to their action, by tool call id
    when they are plain booleans (pydantic-ai's `DeferredToolResults.approvals`)."""

    prompt: str
    history: str = ""  # ModelMessagesTypeAdapter JSON; "" before the first save
    request: Request | None = None
    asked: int = 0  # approval requests asked so far
    runs: int = 0  # agent runs whose outcome was saved (on DBOS, the next run's number - 1)
    decisions: dict[str, dict[str, Any]] = field(default_factory=dict)
    seen: list[str] = field(default_factory=list)
    outcome: str = ""  # success, failure once the run ended
    said: str = ""  # the final output, or why the run failed

    def dumps(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def loads(cls, text: str) -> Record:
        data = json.loads(text)
        request = data.pop("request")
        return cls(**data, request=Request(**request) if request else None)


class Disk:
    """What survives a crash (see the module); its workers share it."""

    def __init__(self) -> None:
        self.records: dict[str, str] = {}  # execution id -> its Record as JSON
        self.accepted: dict[str, str] = {}  # execution id -> its prompt, in start order
        self.journal = Journal()  # what the harness saw of each tool call's runs: it explains
        self.asked: dict[tuple[str, int], int] = {}  # the model's side: turn asks per run
        self.minted = 0
        self.life: Any = None  # on DBOS: the system database's process (on_dbos.DBOSLife)

    def load(self, execution_id: str) -> Record | None:
        text = self.records.get(execution_id)
        return None if text is None else Record.loads(text)

    def write(self, execution_id: str, record: Record) -> None:
        self.records[execution_id] = record.dumps()

    def mint(self) -> int:
        """Gives the run's next number, for the ids pydantic-ai would draw at random."""
        self.minted += 1
        return self.minted
