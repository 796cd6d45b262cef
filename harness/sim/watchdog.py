"""A bound on the wall time of one step: a machine that loops (busy, or asleep) inside a step,
or in `recover()`, is stopped there and reported `hung`, with the stack where it was.

The operations bound (`SimOptions.ops_max`) counts only what the machine asks of the world
(tool calls, probe points); a loop that asks nothing passes it forever. This one is a timer:
a periodic `SIGALRM` (every quarter of the bound, at least 50 ms) whose handler raises `Overran`
in the code that was running when the step it interrupts began longer ago than the bound. A
step only notes when it began: arming and disarming a timer at every step cost two system calls
a step, a tenth of a simulated step's time. A tick that finds no step running stops the timer
(the next step starts it again), and a run that ends stops it, so no signal outlives the work.
A step is stopped between `seconds` and `seconds` plus a period after it began. It can only
work in the main thread of a process whose `SIGALRM` is free (a handler that is not the default
one, pytest-timeout's for instance, is left alone): elsewhere, `Watchdog.armed` is false and
steps are unbounded in time. Code that never returns to the interpreter (a blocking call in C)
is out of its reach.

So is a machine that ignores, blocks or takes `SIGALRM`, swallows `Overran`, or stops its own
process. For those, a run in a child process (`harness.engines.isolation`) also keeps a
heartbeat in memory its parent reads (`Heartbeat`): when the step that is running began, its
bound, and what the machine was doing. The parent, whose process the machine cannot touch,
ends a child whose step ran past its bound plus a margin.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from types import FrameType

__all__ = ["Heartbeat", "Overran", "Watchdog", "monotonic_now"]

_STACK_FRAMES = 12  # the innermost frames kept of where a step hung
_PERIOD_MIN = 0.05  # seconds: the timer ticks no faster than this
_MAIN_THREAD = threading.main_thread().ident  # the one thread a signal handler runs in


def _forked() -> None:
    """In a forked child, the thread that forked is the main one (a Dask worker forks from a
    task thread), and no timer of the parent's runs."""
    global _MAIN_THREAD
    _MAIN_THREAD = threading.get_ident()
    Watchdog._current = None
    Watchdog._period = 0.0




class Heartbeat:
    """What a child process's runs tell its parent, in memory they share: when the step running
    began (monotonic seconds; 0 when none runs), its bound in seconds, and what the machine
    was doing. Made by the parent before it forks; `install` makes it the child's."""

    _NOTE_BYTES = 120

    def __init__(self) -> None:
        self.times = multiprocessing.RawArray("d", 2)
        self.note = multiprocessing.RawArray("c", self._NOTE_BYTES)

    def install(self) -> None:
        """Makes this the heartbeat the runs of this process keep (in the forked child)."""
        global _BEAT
        _BEAT = self

    def overdue(self, margin: Callable[[float], float]) -> tuple[float, str] | None:
        """Gives the bound and what the machine was doing when the step running began longer
        ago than its bound plus `margin(bound)`; else None."""
        began, bound = self.times[0], self.times[1]
        if began <= 0 or bound <= 0 or monotonic_now() - began <= bound + margin(bound):
            return None
        return bound, self.note.value.decode("utf-8", "replace")


_BEAT: Heartbeat | None = None  # this process's, in a child a parent watches


def monotonic_now() -> float:
    """Gives the system's monotonic clock, as a parent reads it: a run that freezes time
    (`freeze_clock`, freezegun) patches `time.monotonic`, not this."""
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def apart() -> bool:
    """Tells whether this process is a child a parent watches (`Heartbeat`)."""
    return _BEAT is not None


def beat(seconds: float) -> None:
    """A step (or a machine's `close()`) begins, bounded by `seconds` (0: none)."""
    if _BEAT is not None and seconds > 0:
        _BEAT.times[1] = seconds
        _BEAT.times[0] = monotonic_now()


def rest() -> None:
    """No step runs."""
    if _BEAT is not None:
        _BEAT.times[0] = 0.0


def doing(activity: str, call: object = None) -> None:
    """Notes what the machine is asked to do (`call`, the method), for the parent to say if it
    has to end it."""
    if _BEAT is not None:
        if call is not None:
            activity = f"{activity}: {getattr(call, '__name__', 'a call')}()"
        _BEAT.note.value = activity.encode("utf-8", "replace")[:Heartbeat._NOTE_BYTES - 1]


class Overran(BaseException):
    """A step ran past the watchdog's bound; `stack` is where the machine was then."""

    def __init__(self, seconds: float, stack: str, where: str) -> None:
        super().__init__(f"a step ran past {seconds:g} s of wall time (the watchdog's bound, "
                         f"step_timeout_s) without returning; it was at {where}")
        self.stack = stack


class Watchdog:
    """Raises `Overran` in a step that runs longer than `seconds` (0: never)."""

    _current: Watchdog | None = None  # the watchdog whose step is running
    _period = 0.0  # the interval of the timer ours ticks at (0: not ticking)

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.period = min(seconds, max(seconds / 4, _PERIOD_MIN))
        self.armed = seconds > 0 and self._claim()
        self.began = 0.0  # when the step running began (monotonic seconds)
        #: what the timer raised in the step running (an async machine's task may keep it)
        self.overran: Overran | None = None

    @classmethod
    def _claim(cls) -> bool:
        """Takes SIGALRM for this run when it is free: the default handler (or ours) and no
        timer of someone else's running. Asked again for every run, so that a handler or a
        timer set since the last one (a timeout fixture) is left alone."""
        if threading.current_thread() is not threading.main_thread():
            return False
        try:
            handler = signal.getsignal(signal.SIGALRM)
            if handler is not cls._fire:
                if handler not in (signal.SIG_DFL, None):
                    return False  # someone else's: leave it
                signal.signal(signal.SIGALRM, cls._fire)
            remaining, interval = signal.getitimer(signal.ITIMER_REAL)
            if remaining == 0:  # none runs (a forked worker inherits no timer)
                Watchdog._period = 0.0
                return True
            return cls._period > 0 and interval == cls._period  # ours ticking, else theirs
        except (ValueError, OSError, AttributeError):  # no SIGALRM on this platform
            return False

    def start(self) -> None:
        """Starts the bound on a step."""
        self.overran = None
        if self.armed and threading.get_ident() == _MAIN_THREAD:
            self.began = monotonic_now()
            Watchdog._current = self
            if not 0 < Watchdog._period <= self.period:
                Watchdog._period = self.period
                signal.setitimer(signal.ITIMER_REAL, self.period, self.period)

    def stop(self) -> None:
        """Ends the bound on a step (the timer ticks on, for the next step)."""
        if Watchdog._current is self:
            Watchdog._current = None

    def release(self) -> None:
        """Ends the bound and stops the timer: the run is over."""
        self.stop()
        if self.armed and Watchdog._current is None and Watchdog._period > 0:
            Watchdog._halt()

    @staticmethod
    def _halt() -> None:
        Watchdog._period = 0.0
        with contextlib.suppress(ValueError, OSError):  # not the main thread: it ticks once
            signal.setitimer(signal.ITIMER_REAL, 0)

    @staticmethod
    def _fire(signum: int, frame: FrameType | None) -> None:
        current = Watchdog._current
        if current is None:  # no step running: ours stops ticking (another's is let be)
            if Watchdog._period > 0:
                Watchdog._halt()
            return
        if monotonic_now() - current.began < current.seconds:
            return
        Watchdog._current = None
        frames = traceback.extract_stack(frame)[-_STACK_FRAMES:] if frame else []
        where = (f"{Path(frames[-1].filename).name}:{frames[-1].lineno}, in {frames[-1].name}"
                 if frames else "an unknown place")
        current.overran = Overran(current.seconds, "".join(traceback.format_list(frames)), where)
        raise current.overran


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)
