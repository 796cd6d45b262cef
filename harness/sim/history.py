"""A simulation's history: typed records, appended in the order things happened.

Checkers read these records, never text. Every record carries the simulator `step` it happened
in and the virtual time `at` (ms). They are `NamedTuple`s, like the machine's records and for the
same reason: the simulator builds several per step, and a tuple costs a fraction of a frozen
dataclass to construct. Tell them apart by class (`type(record) is Applied`, `isinstance`, or
`match`), which a type checker narrows; `kind` names the record in its JSON line.

One history serialises to JSON lines, one record a line, keys sorted, so the same seed gives the
same bytes in any process.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, Any, Literal, NamedTuple

from harness.files import writing

__all__ = [
    "Applied",
    "Commanded",
    "Committed",
    "Crashed",
    "Decided",
    "Delivered",
    "Dispatched",
    "FaultInjected",
    "Finished",
    "Healed",
    "HistoryRecord",
    "MachineFailed",
    "Observed",
    "Recovered",
    "Replayed",
    "ResultRecorded",
    "RunStarted",
    "Started",
    "TimerFired",
    "dump_line",
    "write_jsonl",
]


class RunStarted(NamedTuple):
    """The first record: what the run was made of (the plan drawn for it, the options). The
    plan is kept as the `FaultPlan` itself and written as its `to_dict()`."""

    step: int
    at: int
    seed: int
    definition: str
    version: str
    machine: str
    options: Mapping[str, Any]
    plan: Any

    @property
    def kind(self) -> Literal["run"]:
        """Names the record in its JSON line."""
        return "run"


class Started(NamedTuple):
    """An execution was started."""

    step: int
    at: int
    execution: str
    context: Mapping[str, Any]

    @property
    def kind(self) -> Literal["started"]:
        """Names the record in its JSON line."""
        return "started"


class Delivered(NamedTuple):
    """An event was handed to the machine; `via` says how (external, approval, forged, late,
    duplicate, reordered, redelivered, retry, agent)."""

    step: int
    at: int
    execution: str
    event_id: str
    type: str
    source: str
    answers: str
    payload: Any
    via: str

    @property
    def kind(self) -> Literal["delivered"]:
        """Names the record in its JSON line."""
        return "delivered"


class Decided(NamedTuple):
    """What the machine said of a delivered event (`accepted`, `ignored:late`, ...), when it
    says anything."""

    step: int
    at: int
    execution: str
    event_id: str
    decision: str

    @property
    def kind(self) -> Literal["decided"]:
        """Names the record in its JSON line."""
        return "decided"


class Commanded(NamedTuple):
    """An effect or compensation a commit commanded: its id, tool and idempotency key."""

    id: str
    tool: str
    key: str
    compensation: bool = False


class Committed(NamedTuple):
    """The store committed one event's consequences (machines that offer `watch`).

    `state` is the state after the commit ("" when it was not accepted) and `from_state` the
    state of the execution's previous accepted commit, as the store saw them, never as the
    machine tells it. `moved` is the event type of the transition the commit made ("" for an
    accepted event that moved nothing: a retry scheduled, a compensation advanced), `forced`
    the budget or policy that forced it. `context` is the execution's context after the commit,
    `payload` the event's, and `effects` the tool calls it commanded.

    Statecharts: `via` lists the states an eventless run of moves passed through on its way to
    `state`; in a parallel or map state, `inner` holds (source, event, target) of each move a
    region (or map item) made, depth first (a source of "" is a region starting), and
    `regions` (region execution id, state, status) of every region after the commit, depth
    first, and `region_contexts` their contexts in the same order. `reason` says why the
    machine rejected the event (`action_error: ...`). Each is left out of the JSON line while
    empty."""

    step: int
    at: int
    execution: str
    event_id: str
    decision: str
    version: int
    state: str
    from_state: str = ""
    moved: str = ""
    forced: str = ""
    event_type: str = ""
    event_source: str = ""
    answers: str = ""
    payload: Mapping[str, Any] | None = None
    context: Mapping[str, Any] | None = None
    effects: tuple[Commanded, ...] = ()
    via: tuple[str, ...] = ()
    inner: tuple[tuple[str, str, str], ...] = ()
    regions: tuple[tuple[str, str, str], ...] = ()
    region_contexts: tuple[Mapping[str, Any], ...] = ()
    reason: str = ""
    #: per move of `inner`, in its order, the states its eventless path passed through on the
    #: way to its target (a region entered and finished in one step: `Pick`, `Big`)
    inner_via: tuple[tuple[str, ...], ...] = ()

    @property
    def kind(self) -> Literal["committed"]:
        """Names the record in its JSON line."""
        return "committed"


class Dispatched(NamedTuple):
    """A tool of the world was called; `during` says while the machine was doing what (a tool
    call, a compensation, a recovery, or `worker` for a second worker)."""

    step: int
    at: int
    execution: str
    tool: str
    key: str
    during: str = ""

    @property
    def kind(self) -> Literal["dispatched"]:
        """Names the record in its JSON line."""
        return "dispatched"


class Applied(NamedTuple):
    """A side effect took place at the world: the effect ledger's entry. `action` is the
    logical action an adapter named for the call (its unit of work, step and place: one
    action however often the unit re-runs), `cause` what made this call, when the adapter
    knows it (a re-run of the unit after a suspension, a crash or a retry)."""

    step: int
    at: int
    execution: str
    tool: str
    key: str
    input: str
    seq: int
    action: str = ""
    cause: str = ""

    @property
    def kind(self) -> Literal["applied"]:
        """Names the record in its JSON line."""
        return "applied"


class ResultRecorded(NamedTuple):
    """The machine recorded a tool result in its outbox (the reference machine's store)."""

    step: int
    at: int
    execution: str
    call: str
    type: str

    @property
    def kind(self) -> Literal["result_recorded"]:
        """Names the record in its JSON line."""
        return "result_recorded"


class Crashed(NamedTuple):
    """The machine's process died at `point` while doing `during`."""

    step: int
    at: int
    point: str
    during: str

    @property
    def kind(self) -> Literal["crashed"]:
        """Names the record in its JSON line."""
        return "crashed"


class Recovered(NamedTuple):
    """The machine recovered from its store; `attempts` counts the recoveries it took."""

    step: int
    at: int
    attempts: int

    @property
    def kind(self) -> Literal["recovered"]:
        """Names the record in its JSON line."""
        return "recovered"


class TimerFired(NamedTuple):
    """The machine was told the time is `now`, for timers due at `due`; `skew` is the injected
    difference between the machine's clock and the simulator's."""

    step: int
    at: int
    due: int
    now: int
    skew: int

    @property
    def kind(self) -> Literal["timer_fired"]:
        """Names the record in its JSON line."""
        return "timer_fired"


class FaultInjected(NamedTuple):
    """A fault of the plan was injected."""

    step: int
    at: int
    fault: str
    execution: str
    detail: str

    @property
    def kind(self) -> Literal["fault"]:
        """Names the record in its JSON line."""
        return "fault"


class MachineFailed(NamedTuple):
    """The machine under test raised, hung or answered nonsense: the run stops here."""

    step: int
    at: int
    problem: str
    error: str
    message: str

    @property
    def kind(self) -> Literal["machine_failed"]:
        """Names the record in its JSON line."""
        return "machine_failed"


class Observed(NamedTuple):
    """What the simulator saw of an execution after a step, when it changed: its state, status,
    version and outcome, and the approval request it waits on (with the hash to approve).

    In a parallel or map state, `approvals` holds (request id, action hash) of every request
    its regions wait on, in region order (`request` is the first); left out of the JSON line
    while empty. `moves` holds the (from, to) moves the execution made since the previous
    observation, oldest first, when its machine tells them (one that moves several times in a
    call); left out while empty too."""

    step: int
    at: int
    execution: str
    state: str
    status: str
    version: int
    outcome: str | None = None
    request: str = ""
    action_hash: str = ""
    approvals: tuple[tuple[str, str], ...] = ()
    moves: tuple[tuple[str, str], ...] = ()

    @property
    def kind(self) -> Literal["observed"]:
        """Names the record in its JSON line."""
        return "observed"


class Healed(NamedTuple):
    """The safety phase ended: from here on no fault is injected (the liveness phase)."""

    step: int
    at: int

    @property
    def kind(self) -> Literal["healed"]:
        """Names the record in its JSON line."""
        return "healed"


class Replayed(NamedTuple):
    """The machine rebuilt an execution from its log at the end of the run: `ok` when that
    reproduced the stored state, else `detail` says where it diverged."""

    step: int
    at: int
    execution: str
    ok: bool
    detail: str = ""

    @property
    def kind(self) -> Literal["replayed"]:
        """Names the record in its JSON line."""
        return "replayed"


#: What a `Finished` record's `waiting_on` names for an execution whose only timers are ones
#: the machine refuses to fire (their moves rejected each time): nothing can move it.
REFUSED_TIMER = "timer (refused)"


class Finished(NamedTuple):
    """How an execution was observed when the run ended; `waiting_on` names what could still
    move one that is not final (timer, call, approval, event, queued), empty when nothing."""

    step: int
    at: int
    execution: str
    state: str
    status: str
    outcome: str | None
    version: int
    waiting_on: tuple[str, ...] = ()

    @property
    def kind(self) -> Literal["finished"]:
        """Names the record in its JSON line."""
        return "finished"


HistoryRecord = (RunStarted | Started | Delivered | Decided | Committed | Dispatched | Applied
                 | ResultRecorded | Crashed | Recovered | TimerFired | FaultInjected
                 | Observed | Healed | Replayed | MachineFailed | Finished)


#: Fields added after the first history format: left out of a line while empty, so that a run
#: that does not use them writes the lines it did.
_LEFT_OUT_EMPTY = {"committed": ("via", "inner", "regions", "region_contexts", "reason",
                                 "inner_via"),
                   "observed": ("approvals", "moves"), "applied": ("action", "cause")}


def as_dict(record: HistoryRecord) -> dict[str, Any]:
    """Gives the record as plain JSON data, its kind first."""
    data = {"kind": record.kind, **record._asdict()}
    for name in _LEFT_OUT_EMPTY.get(record.kind, ()):
        if not data[name]:
            del data[name]
    return data


def dump_line(record: HistoryRecord) -> str:
    """Gives the record's JSON line (keys sorted, no spaces, no trailing newline)."""
    return json.dumps(as_dict(record), sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False, default=_plain)


def write_jsonl(records: Iterable[HistoryRecord], out: IO[str] | str | Path,
                what: str = "history") -> None:
    """Writes one record a line. Given a path, writes it whole or not at all (a failed run
    never leaves half a history), or through a device or FIFO as a stream; raises
    `HarnessError` naming `what` and the path when it cannot be written."""
    if isinstance(out, str | Path):
        with writing(out, what) as handle:
            write_jsonl(records, handle)
        return
    for record in records:
        out.write(dump_line(record))
        out.write("\n")


def counts(records: Iterable[HistoryRecord]) -> dict[str, int]:
    """Gives the number of records of each kind, kinds sorted."""
    tally = Counter(record.kind for record in records)
    return dict(sorted(tally.items()))


def _plain(value: object) -> object:
    to_dict = getattr(value, "to_dict", None)
    if to_dict is not None:  # a record's object written as its plain form (a fault plan)
        return to_dict()
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple | frozenset):
        return list(value) if isinstance(value, tuple) else sorted(value)
    raise TypeError(f"{type(value).__name__} is not JSON data")
