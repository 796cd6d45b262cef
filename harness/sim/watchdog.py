"""A bound on the wall time of one step: a machine that loops (busy, or asleep) inside a step,
or in `recover()`, is stopped there and reported `hung`, with the stack where it was.

The operations bound (`SimOptions.ops_max`) counts only what the machine asks of the world
(tool calls, probe points); a loop that asks nothing passes it forever. This one is a timer:
`SIGALRM`, armed as a step begins and disarmed as it ends (two system calls a step), whose
handler raises `Overran` in the code that was running. It can only work in the main thread of
a process whose `SIGALRM` is free (a handler that is not the default one, pytest-timeout's for
instance, is left alone): elsewhere, `Watchdog.armed` is false and steps are unbounded in time.
Code that never returns to the interpreter (a blocking call in C) is out of its reach.
"""

from __future__ import annotations

import signal
import threading
import traceback
from pathlib import Path
from types import FrameType

__all__ = ["Overran", "Watchdog"]

_STACK_FRAMES = 12  # the innermost frames kept of where a step hung


class Overran(BaseException):
    """A step ran past the watchdog's bound; `stack` is where the machine was then."""

    def __init__(self, seconds: float, stack: str, where: str) -> None:
        super().__init__(f"a step ran past {seconds:g} s of wall time (the watchdog's bound, "
                         f"step_timeout_s) without returning; it was at {where}")
        self.stack = stack


class Watchdog:
    """Raises `Overran` in a step that runs longer than `seconds` (0: never)."""

    _current: Watchdog | None = None  # the watchdog whose timer is armed

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.armed = seconds > 0 and self._claim()
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
            return signal.getitimer(signal.ITIMER_REAL)[0] == 0  # a timer running: theirs
        except (ValueError, OSError, AttributeError):  # no SIGALRM on this platform
            return False

    def start(self) -> None:
        """Starts the bound on a step."""
        self.overran = None
        if self.armed and threading.current_thread() is threading.main_thread():
            Watchdog._current = self
            signal.setitimer(signal.ITIMER_REAL, self.seconds)

    def stop(self) -> None:
        """Ends the bound on a step."""
        if Watchdog._current is self:
            signal.setitimer(signal.ITIMER_REAL, 0)
            Watchdog._current = None

    @staticmethod
    def _fire(signum: int, frame: FrameType | None) -> None:
        current = Watchdog._current
        if current is None:  # a timer that is not ours, or one that ended: nothing to stop
            return
        Watchdog._current = None
        frames = traceback.extract_stack(frame)[-_STACK_FRAMES:] if frame else []
        where = (f"{Path(frames[-1].filename).name}:{frames[-1].lineno}, in {frames[-1].name}"
                 if frames else "an unknown place")
        current.overran = Overran(current.seconds, "".join(traceback.format_list(frames)), where)
        raise current.overran
