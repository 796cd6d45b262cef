"""The timing core of `fsmharness bench`: how a measurement is taken and recorded.

A **contender** is one way to do a group's unit of work, made fresh for each measurement by
its `Maker`; a **group** holds contenders measured side by side, the first the floor the
others are divided by. `measure` times a group's contenders in turns, so that drift hits all
alike, and gives each one's median time per unit as a `Measured` figure.

The bottom of `harness.bench`: it imports no other module of it; every group builds on it.
"""

from __future__ import annotations

import contextlib
import statistics
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "QUICK_ROUNDS",
    "QUICK_SECONDS",
    "ROUNDS",
    "SECONDS",
    "Contender",
    "Group",
    "Maker",
    "Measured",
    "importable",
    "measure",
    "peak_bytes",
]

#: make(stack) -> a call that does one round (a walk gives the state it ends in); what it
#: opens (a temporary folder, a store) it leaves on the stack to close
Maker = Callable[[contextlib.ExitStack], Callable[[], Any]]


@dataclass(frozen=True)
class Contender:
    """One way to do a group's unit of work: `units` per call, named `unit` (0: the call
    gives its own count, as a simulation gives the steps it took)."""

    name: str
    make: Maker
    units: int
    unit: str = "transition"


@dataclass(frozen=True)
class Group:
    """Contenders measured side by side; the first is the floor the others are divided by."""

    name: str
    contenders: tuple[Contender, ...]
    note: str = ""
    #: extra figures measured once (peak memory), by contender name
    extra: Callable[[], dict[str, dict[str, Any]]] | None = None


@dataclass(frozen=True)
class Measured:
    """One contender's figure: the median time per unit over the rounds."""

    group: str
    contender: str
    unit: str
    per_op_s: float
    rounds: int
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return 1.0 / self.per_op_s if self.per_op_s > 0 else 0.0


ROUNDS = 5
#: Seconds a contender is timed for, unless told: in a full run, and in a quick one
SECONDS = 0.5
QUICK_SECONDS = 0.1
#: Rounds of a quick run: enough for a median, none to spare
QUICK_ROUNDS = 3


def measure(group: Group, seconds: float, rounds: int = ROUNDS) -> list[Measured]:
    """Times every contender of a group for about `seconds` each: after one warm-up call,
    `rounds` rounds that take turns between the contenders (so drift hits all alike), each a
    batch of calls sized to `seconds / rounds`; gives each one's median time per unit."""
    with contextlib.ExitStack() as stack:
        calls = [contender.make(stack) for contender in group.contenders]
        batches = []
        for call in calls:
            started = time.perf_counter()
            call()  # the warm-up, also the calibration
            once = max(time.perf_counter() - started, 1e-9)
            batches.append(max(1, int(seconds / rounds / once)))
        samples: list[list[float]] = [[] for _ in calls]
        for _ in range(rounds):
            for index, (call, batch) in enumerate(zip(calls, batches, strict=True)):
                fixed = group.contenders[index].units
                done = 0
                started = time.perf_counter()
                for _ in range(batch):
                    given = call()
                    done += fixed or given
                spent = time.perf_counter() - started
                samples[index].append(spent / max(done, 1))
    extra = group.extra() if group.extra is not None else {}
    return [Measured(group.name, contender.name, contender.unit, statistics.median(times),
                     rounds, extra.get(contender.name, {}))
            for contender, times in zip(group.contenders, samples, strict=True)]


def peak_bytes(call: Callable[[], Any]) -> int:
    """Gives the peak of memory allocated while `call` runs (tracemalloc's count)."""
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def importable(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True
