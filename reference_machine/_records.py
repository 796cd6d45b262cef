"""The fast records `decide` reads and writes: executions, events, commands and decisions.

These are `typing.NamedTuple`s rather than frozen dataclasses on purpose: they are built on every
transition, and on CPython 3.11 a frozen dataclass of twenty fields costs about twenty times a
tuple to construct (each field goes through `object.__setattr__`). A tuple is immutable all the
same; change one with `._replace(...)`. Times are whole milliseconds of virtual time.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

EMPTY: Mapping[str, Any] = MappingProxyType({})

#: Event types the machine itself produces or understands; users may not declare them.
STARTED = "execution.started"
STEP_SUCCEEDED = "step.succeeded"
STEP_FAILED = "step.failed"
COMPENSATION_SUCCEEDED = "compensation.succeeded"
COMPENSATION_FAILED = "compensation.failed"
APPROVAL_GRANTED = "approval.granted"
APPROVAL_DENIED = "approval.denied"
TIMER_FIRED = "timer.fired"
BUILTIN_EVENTS = frozenset({
    STARTED, STEP_SUCCEEDED, STEP_FAILED, COMPENSATION_SUCCEEDED, COMPENSATION_FAILED,
    APPROVAL_GRANTED, APPROVAL_DENIED, TIMER_FIRED,
})
#: Built-in events a user may name in a state's `on:`.
TRANSITION_EVENTS = frozenset({STEP_SUCCEEDED, STEP_FAILED, APPROVAL_GRANTED, APPROVAL_DENIED})


class Status(StrEnum):
    CREATED = "created"
    RUNNING = "running"
    WAITING = "waiting"
    COMPENSATING = "compensating"
    FINAL = "final"


class TimerPurpose(StrEnum):
    WAIT_TIMEOUT = "wait_timeout"
    APPROVAL_EXPIRY = "approval_expiry"
    RETRY = "retry"
    STEP_TIMEOUT = "step_timeout"
    DEADLINE = "deadline"


class IgnoreReason(StrEnum):
    DUPLICATE = "duplicate"
    LATE = "late"
    STALE = "stale"


class RejectReason(StrEnum):
    ILLEGAL = "illegal"
    GUARD_FALSE = "guard_false"
    GUARD_ERROR = "guard_error"
    ACTION_ERROR = "action_error"
    INVALID_PAYLOAD = "invalid_payload"
    TERMINAL = "terminal"
    UNAUTHORIZED = "unauthorized"
    UNKNOWN_EVENT = "unknown_event"
    #: a payload field that must equal a context value (`correlate:`) does not
    UNCORRELATED = "uncorrelated"
    #: eventless transitions kept moving past their bound without settling
    RUNAWAY = "runaway"


class Event(NamedTuple):
    """A fact delivered to an execution. `answers` names the effect, timer or approval request
    it answers (empty for events that answer nothing)."""

    id: str
    type: str
    source: str = "system"
    payload: Mapping[str, Any] = EMPTY
    answers: str = ""


class Timer(NamedTuple):
    id: str
    purpose: TimerPurpose
    fire_at: int


class PendingEffect(NamedTuple):
    """The effect (or compensation) in flight: its result must answer `effect_id`."""

    effect_id: str
    key: str
    state: str
    tool: str
    attempt: int
    compensation: bool = False


class PendingApproval(NamedTuple):
    request_id: str
    state: str
    action_hash: str
    roles: tuple[str, ...]
    expires_at: int


class CompletedStep(NamedTuple):
    """A finished step that declared a compensation, kept until undone or the run ends."""

    state: str
    key: str
    tool: str
    input: Mapping[str, Any]
    attempts_max: int
    retry_safe: bool = False  # unknown means unsafe: an undo is then never retried on timeout


class VisitCounts(Mapping[str, int]):
    """The visit counts of a long-lived execution, shared with the executions before it.

    An execution is immutable, so each transition gives a new visit-count map. Copying a dict
    costs as much as the states visited so far (about 5 us at 1,000 states), so past 128
    states visited `decide` keeps the counts here instead: a frozen `base` shared by every
    execution after it, and a small `top` of newer counts, copied on each visit and folded
    into a new base every `FOLD` visits. A visit then costs a copy of `top` and, amortised, a
    `FOLD`th of a base copy: 32 times less than a dict's. It reads, compares, pickles and
    encodes (through the store's codec) as the dict it stands for; `json.dumps` wants
    `dict(counts)`."""

    __slots__ = ("_base", "_length", "_top")
    FOLD = 32

    def __init__(self, base: Mapping[str, int], top: Mapping[str, int],
                 length: int | None = None) -> None:
        self._base, self._top = base, top
        self._length = (len(base) + sum(1 for key in top if key not in base)
                        if length is None else length)

    def bumped(self, key: str, value: int) -> VisitCounts:
        """Gives the counts with `key` set to `value`."""
        top = self._top
        length = self._length if key in top or key in self._base else self._length + 1
        top = {**top, key: value}
        if len(top) >= self.FOLD:
            return VisitCounts({**self._base, **top}, {}, length)
        return VisitCounts(self._base, top, length)

    def get(self, key: str, default: Any = None) -> Any:
        value = self._top.get(key)
        return self._base.get(key, default) if value is None else value

    def __getitem__(self, key: str) -> int:
        value = self._top.get(key)
        return self._base[key] if value is None else value

    def __iter__(self) -> Iterator[str]:
        return iter({**self._base, **self._top})

    def __len__(self) -> int:
        return self._length

    def __repr__(self) -> str:
        return repr({**self._base, **self._top})

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, ({**self._base, **self._top},))  # a copy elsewhere is a plain dict


class Execution(NamedTuple):
    """The state of one run of a workflow, as stored after each accepted event.

    `failures` counts error signatures for cycle detection; `exceeded` names the budget that
    forced the run (after which budgets no longer apply, so the run can be finished by hand);
    `uncertain` says an attempt of the current step ended without telling whether its effect
    took place (a timeout, an unusable output), so undoing the run must undo that step too.

    In a parallel or map state, `regions` holds one execution per region (per item), each
    naming its region (its map state) in `definition`; the parent's `timers` then also hold
    every region's, and its `approval` the first region's pending one, so that whoever
    watches the parent sees all that is due. `history` keeps, per compound state with
    `history:`, the child (shallow) or leaf (deep) that was active when it was last left.
    """

    id: str
    definition: str
    version: str
    state: str = ""
    status: Status = Status.CREATED
    outcome: str | None = None
    context: Mapping[str, Any] = EMPTY
    sequence: int = 0
    started_at: int = 0
    transitions: int = 0
    visits: Mapping[str, int] = EMPTY
    attempt: int = 0
    effect: PendingEffect | None = None
    timers: tuple[Timer, ...] = ()
    approval: PendingApproval | None = None
    approved: tuple[str, ...] = ()
    completed: tuple[CompletedStep, ...] = ()
    compensating: tuple[CompletedStep, ...] = ()
    after_compensation: str = ""
    cost: float = 0.0
    failures: Mapping[str, int] = EMPTY
    exceeded: str = ""
    answered: str = ""
    last_event_id: str = ""
    uncertain: bool = False
    regions: tuple[Execution, ...] = ()
    history: Mapping[str, str] = EMPTY


_EXECUTION_INDEX = {name: index for index, name in enumerate(Execution._fields)}


def _execution_replace(self: Execution, /, **changes: Any) -> Execution:
    """`Execution._replace`: the record with `changes`, as `namedtuple`'s gives it (a
    `ValueError` for a name that is no field), in about half its time (it pops every one of
    the 27 fields from the changes, in Python; an execution is replaced on most events)."""
    values = list(self)
    index = _EXECUTION_INDEX
    for name, value in changes.items():
        position = index.get(name)
        if position is None:
            unexpected = [n for n in changes if n not in index]
            raise ValueError(f"Got unexpected field names: {unexpected!r}")
        values[position] = value
    return tuple.__new__(Execution, values)


Execution._replace = _execution_replace  # type: ignore[method-assign,assignment]


class RunEffect(NamedTuple):
    """Call `tool` with `input` under idempotency `key` (the same across retries)."""

    effect_id: str
    key: str
    state: str
    tool: str
    input: Mapping[str, Any]
    attempt: int
    timeout_ms: int | None
    idempotent: bool


class RunCompensation(NamedTuple):
    """Undo the step whose effect had key `compensates`."""

    effect_id: str
    key: str
    state: str
    tool: str
    input: Mapping[str, Any]
    attempt: int
    compensates: str
    idempotent: bool = False  # the undo tool honours keys (or is repeatable)


class ScheduleTimer(NamedTuple):
    timer_id: str
    purpose: TimerPurpose
    fire_at: int


class CancelTimer(NamedTuple):
    timer_id: str


class RequestApproval(NamedTuple):
    request_id: str
    state: str
    for_state: str
    summary: str
    evidence: Mapping[str, Any]
    roles: tuple[str, ...]
    action_hash: str
    expires_at: int


Command = RunEffect | RunCompensation | ScheduleTimer | CancelTimer | RequestApproval


class Transition(NamedTuple):
    """What an accepted event did to the state; `forced` names a budget or cycle that forced it."""

    source: str
    event: str
    target: str
    forced: str = ""
    #: the states an eventless move passed through on the way to `target`, in order
    via: tuple[str, ...] = ()
    #: in a parallel or map state: what the event did in each region it moved (their
    #: `source` and `target` are the regions' states)
    inner: tuple[Transition, ...] = ()


class Accepted(NamedTuple):
    execution: Execution
    commands: tuple[Command, ...] = ()
    transition: Transition | None = None

    @property
    def kind(self) -> Literal["accepted"]:
        """Names the kind of decision."""
        return "accepted"


class Ignored(NamedTuple):
    reason: IgnoreReason
    detail: str

    @property
    def kind(self) -> Literal["ignored"]:
        """Names the kind of decision."""
        return "ignored"


class Rejected(NamedTuple):
    reason: RejectReason
    detail: str

    @property
    def kind(self) -> Literal["rejected"]:
        """Names the kind of decision."""
        return "rejected"


Decision = Accepted | Ignored | Rejected
