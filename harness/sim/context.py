"""What every part of a run shares: its seeded environment (the choices, the virtual clock, the
history it appends to), what it knows of each execution, what it is doing at the moment, and
how a part says the machine failed the run (`Hung`, `Nonsense`).

A part holds what never changes hands (the clock, the history, the observations) itself;
what changes as the run goes (the choices, once healed; the activity) it reads from here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from harness.sim.choices import Choices
from harness.sim.history import FaultInjected, HistoryRecord
from harness.sim.machine import Observation
from harness.sim.world import Clock
from reference_machine import Event, WorkflowDefinition

if TYPE_CHECKING:
    from harness.sim.simulator import Simulator

__all__ = ["Hung", "Nonsense", "RunContext", "check_said"]

_DECISIONS = frozenset({"accepted", "ignored", "rejected"})


class Hung(BaseException):
    """The machine passed the per-step bound of operations."""


class Nonsense(Exception):
    """The machine answered something that cannot be."""


def check_said(said: object, call: str) -> None:
    """Raises `Nonsense` unless a machine's answer to `call` is a decision or None."""
    if said is not None and (not isinstance(said, str) or said.partition(":")[0] not in
                             _DECISIONS):
        shown = repr(said)
        shown = shown if len(shown) <= 120 else f"{shown[:117]}..."
        raise Nonsense(f"{call} answered {shown}; expected accepted, ignored[:reason], "
                       "rejected[:reason] or None")


class RunContext:
    """The state a run's parts share: the simulator and its options, the run's choices
    (`rng`, replaced by the liveness phase's when the run heals), its clock and history, the
    executions (`ids`, those not started yet, each one's last observation), whether faults
    are healed, and what the step is doing: the `activity` under way, the execution acted on
    (`acting`), the event type sent (`topic`) and the event being delivered (`current`)."""

    __slots__ = ("acting", "activity", "clock", "current", "definition", "emit", "healed",
                 "history", "ids", "obs", "options", "rng", "seed", "serial", "sim", "topic",
                 "unstarted")

    def __init__(self, simulator: Simulator, seed: int, rng: Choices) -> None:
        self.sim, self.options, self.seed = simulator, simulator.options, seed
        self.definition: WorkflowDefinition = simulator.definition
        self.rng = rng
        self.clock = Clock()
        self.history: list[HistoryRecord] = []
        self.emit: Callable[[HistoryRecord], None] = self.history.append
        self.ids = [f"x{n}" for n in range(1, simulator.options.executions + 1)]
        self.obs: dict[str, Observation] = {}
        self.unstarted = list(self.ids)
        self.serial = 0
        self.healed = False
        self.topic = ""  # the type of the event being sent or delivered, for aimed faults
        self.activity = ""
        self.acting = ""  # the execution this step acts on ("" when the clock moves)
        self.current: tuple[str, Event] | None = None

    def aim(self) -> tuple[str, str]:
        """Gives what the run is doing, for aimed faults: the state of the execution acted
        on, and the event sent or delivered (else the activity)."""
        current = self.current
        eid = current[0] if current is not None else self.acting
        obs = self.obs.get(eid)
        return (obs.state if obs is not None else "",
                current[1].type if current is not None else self.topic or self.activity)

    def execution_of(self, key: str) -> str:
        """The execution an idempotency key belongs to: its part before the first `/` when
        that names one (the protocol's convention), else unknown ("")."""
        head = key.split("/", 1)[0]
        return head if head in self.obs or head in self.unstarted else ""

    def new_id(self) -> str:
        """Gives a fresh event id (the serial is shared with queued deliveries)."""
        self.serial += 1
        return f"ev{self.serial}"

    def fault(self, kind: str, eid: str, detail: str) -> None:
        """Records a fault injected (against the execution acted on, when `eid` is "")."""
        self.emit(FaultInjected(self.clock.step, self.clock.now, kind, eid or self.acting,
                                detail))
