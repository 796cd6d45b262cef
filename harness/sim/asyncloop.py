"""The protocol's async form: a machine whose methods are coroutines, driven on an event loop of
the run's own, so that its runs stay deterministic.

`RunLoop` owns one `VirtualLoop` (the run's; a second worker gets one of its own, as another
process would) and makes each call of the machine on it, to its end:

- **Virtual time.** The loop's `time()` is the machine's clock (the `now` the simulator tells
  it, in seconds), and nothing on it waits for real: when no callback is ready, the clock jumps
  to the next timer. A sleep inside a call moves the loop's clock only: the call takes no time
  on the simulator's clock (a tool called after the sleep is stamped with the step's time, and
  a frozen wall clock, `freeze_clock`, stays where the call began), and the next call starts at
  the simulator's time again, or where the loop's clock got to if that is later (the loop's
  clock never goes back).
- **An order fixed by the seed.** The tasks ready at one turn of the loop run in an order drawn
  from the run's choices (`order(n)` gives which of the `n` left goes next; 0 every time is
  the order asyncio would take). Plain callbacks (`call_soon`) keep their first-in, first-out
  order, as asyncio promises.
- **Nothing left behind.** A task still pending when the call returns, a callback left
  scheduled, or a coroutine never awaited is the machine failing (`LoopFailure`); so is a call
  that waits on what nothing will complete (no callback ready, no timer: a deadlock) or that
  turns the loop `TURNS_MAX` times. What is left is cancelled, and run to its end, before the
  failure is raised.
- **Faults behave as for a synchronous machine.** An exception leaving the call (an injected
  crash or store failure included) cancels the tasks still pending and runs them to their
  end, with `hush` keeping faults off meanwhile, and is raised again. An injected crash or the
  per-step bound raised inside a task nobody awaits still ends the call: `fatal()` tells the
  loop of one at each turn.

No I/O: `run_in_executor` (and so `asyncio.to_thread`) runs the function there and then, and
a coroutine waiting on a socket or a thread is told as a deadlock.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import gc
import inspect
import re
import sys
import warnings
from collections import deque
from collections.abc import Callable, Coroutine, Generator
from concurrent.futures import Executor
from pathlib import Path
from typing import Any, TypeVar, TypeVarTuple

from harness.errors import trace_of, words_of

__all__ = ["PROTOCOL_METHODS", "TURNS_MAX", "AsyncCalls", "LoopFailure", "RunLoop",
           "VirtualLoop", "is_async"]

#: The turns of the loop one call may take before it is called hung (a task that never ends).
TURNS_MAX = 100_000
#: The methods of the protocol that may be coroutine functions.
PROTOCOL_METHODS = ("start", "deliver", "advance", "complete", "crash", "recover", "observe",
                    "worker", "replay")
_UNAWAITED = r"coroutine .* was never awaited"
_NAMED_MAX = 5  # tasks named in one message
_DEFAULT_NAME = re.compile(r"Task-\d+")  # asyncio's own: a process-wide count, not the task's
_T = TypeVar("_T")
_Ts = TypeVarTuple("_Ts")


class LoopFailure(BaseException):
    """A call on the loop left work behind or could not end; `problem` and `error` are those
    of the `MachineFailed` record it becomes (`leaked` or `hung`; `PendingTask`,
    `PendingCallback`, `UnawaitedCoroutine`, `Deadlock` or `LoopBound`; or `raised` and the
    type of what a task nobody awaited raised, with its `trace`).

    A `BaseException`, as the simulator's own signals are, so that a machine's `except
    Exception` around a second worker's call cannot swallow it."""

    def __init__(self, problem: str, error: str, message: str, trace: str = "") -> None:
        super().__init__(message)
        self.problem, self.error, self.message, self.trace = problem, error, message, trace


def is_async(machine: object) -> bool:
    """Tells whether some method of the protocol is a coroutine function on `machine`."""
    return any(inspect.iscoroutinefunction(getattr(machine, name, None))
               for name in PROTOCOL_METHODS)


class VirtualLoop(asyncio.BaseEventLoop):
    """An event loop on virtual time that never waits: see the module."""

    _ready: deque[asyncio.Handle]
    _scheduled: list[asyncio.TimerHandle]
    _stopping: bool

    def __init__(self, order: Callable[[int], int],
                 fatal: Callable[[], BaseException | None]) -> None:
        super().__init__()
        self._now = 0.0
        self._selector = _Turns(self)
        self._order, self._fatal = order, fatal
        self.turns = 0
        self.unwinding = False  # while left tasks are cancelled: a fault raised is theirs
        self.made: list[asyncio.Task[Any]] = []  # the tasks made since the call began

    def time(self) -> float:
        return self._now

    def begin(self, now_ms: int) -> None:
        """Starts a call at the machine's time `now_ms` (the clock never goes back)."""
        self._now = max(self._now, now_ms / 1000)
        self.turns = 0
        self.made = []

    def create_task(self, coro: Coroutine[Any, Any, _T] | Generator[Any, None, _T], *,
                    name: object = None, context: contextvars.Context | None = None
                    ) -> asyncio.Task[_T]:
        task = super().create_task(coro, name=name, context=context)
        self.made.append(task)
        return task

    def run_in_executor(self, executor: Executor | None, func: Callable[[*_Ts], _T],
                        *args: *_Ts) -> asyncio.Future[_T]:
        """Runs `func` here and now (no thread: its time and order are the run's)."""
        future = self.create_future()
        try:
            future.set_result(func(*args))
        except Exception as exc:  # what the function raised is the awaiting coroutine's
            future.set_exception(exc)
        return future

    def pending(self) -> list[asyncio.Task[Any]]:
        """Gives the tasks made in this call that have not ended, in the order they were
        made."""
        return [task for task in self.made if not task.done()]

    def left(self) -> list[asyncio.Handle]:
        """Gives the callbacks still waiting to run (ready, or on a timer)."""
        return [h for h in (*self._ready, *self._scheduled) if not h.cancelled()]

    def forget(self) -> None:
        """Drops every callback still waiting (what `left` gave)."""
        self._ready.clear()
        self._scheduled.clear()

    def _turn(self) -> None:
        """Runs where the loop would wait for I/O: counts the turn, raises a fault struck in a
        task nobody awaits, puts the ready tasks in the run's order, or moves the clock to the
        next timer; with nothing to do at all, the call is deadlocked."""
        self.turns += 1
        if self.turns > TURNS_MAX:
            raise LoopFailure("hung", "LoopBound",
                              f"the event loop turned {TURNS_MAX:,} times in one call without "
                              f"it returning: a task that never ends? {_named(self.pending())}")
        if not self.unwinding:
            fatal = self._fatal()
            if fatal is not None:
                raise fatal
        ready = self._ready
        if ready:
            if len(ready) > 1:
                self._interleave(ready)
            return
        if self._stopping:
            return
        if self._scheduled:
            self._now = max(self._now, self._scheduled[0].when())
            return
        raise LoopFailure("hung", "Deadlock",
                          f"the call waits on what nothing will complete (no task can run and "
                          f"no timer is set): {_named(self.pending())}")

    def _interleave(self, ready: deque[asyncio.Handle]) -> None:
        """Puts the tasks ready to run in the order the run's choices give, leaving the
        plain callbacks where they are."""
        slots = [index for index, handle in enumerate(ready) if _steps_a_task(handle)]
        count = len(slots)
        if count < 2:
            return
        handles = [ready[index] for index in slots]
        order = self._order
        for position in range(count - 1):
            chosen = position + order(count - position)
            if chosen != position:
                handles[position], handles[chosen] = handles[chosen], handles[position]
        for index, handle in zip(slots, handles, strict=True):
            ready[index] = handle

    def _process_events(self, event_list: Any) -> None:
        pass  # no I/O

    def _write_to_self(self) -> None:
        pass  # nothing ever waits: there is no one to wake

    def __del__(self) -> None:
        pass  # it holds no descriptor: one never closed (an abandoned run's) frees nothing


class _Turns:
    """The loop's selector: it selects nothing, and turns the loop on (`VirtualLoop._turn`)."""

    def __init__(self, loop: VirtualLoop) -> None:
        self.loop = loop

    def select(self, timeout: float | None) -> list[Any]:
        self.loop._turn()
        return []

    def close(self) -> None:
        pass


class RunLoop:
    """The machine's calls on one loop: each runs to its end, and is checked for what it left
    behind (see the module). `clock()` gives the machine's time in ms; `order`, `fatal` as
    `VirtualLoop`'s; `hush()` keeps faults off while left tasks unwind."""

    def __init__(self, clock: Callable[[], int], order: Callable[[int], int],
                 fatal: Callable[[], BaseException | None],
                 hush: Callable[[], contextlib.AbstractContextManager[None]]) -> None:
        self.loop = VirtualLoop(order, fatal)
        self._clock, self._fatal, self._hush = clock, fatal, hush
        # every call starts from the context of the run, not of the call it is made in (a
        # second worker's, made inside one of the machine's callbacks, is another process's)
        self._context = contextvars.copy_context()

    def call(self, function: Callable[..., Any], *args: Any) -> Any:
        """Gives what the coroutine `function(*args)` returns, run to its end on the loop
        (from inside another loop's callback too: that one waits)."""
        loop = self.loop
        loop.begin(self._clock())
        outer = asyncio._get_running_loop()
        if outer is not None:
            asyncio._set_running_loop(None)
        depth = sys.get_coroutine_origin_tracking_depth()
        if depth < 1:
            sys.set_coroutine_origin_tracking_depth(1)  # where an unawaited one was made
        name = getattr(function, "__name__", "call")
        caught: list[warnings.WarningMessage] = []
        # no collection runs during the call, and the youngest generation is collected as it
        # ends: a coroutine the call made and dropped in a reference cycle is told by this
        # call, whatever the process's heap (else the collector's timing decides which call,
        # if any, is blamed)
        collecting = gc.isenabled()
        gc.disable()
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.filterwarnings("always", _UNAWAITED, RuntimeWarning)
                try:
                    result = self._run(name, function, args)
                finally:
                    gc.collect(0)
        finally:
            if collecting:
                gc.enable()
            sys.set_coroutine_origin_tracking_depth(depth)
            asyncio._set_running_loop(outer)
            unawaited = _unawaited_among(caught)
        if unawaited:
            raise LoopFailure("leaked", "UnawaitedCoroutine",
                              f"a coroutine was never awaited while {name} ran: "
                              f"{_unawaited(unawaited[0])}"
                              + (f" (and {len(unawaited) - 1} more)" if len(unawaited) > 1
                                 else ""))
        return result

    def _run(self, name: str, function: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        loop = self.loop
        task = loop.create_task(function(*args), context=self._context.copy())
        try:
            result = loop.run_until_complete(task)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            self._unwind(exc)
            _consume(loop.made)  # the call's exception says it all
            raise
        fatal = self._fatal()  # struck in a task nobody awaits, in the last turn
        if fatal is not None:
            self._unwind(fatal)
            _consume(loop.made)
            raise fatal
        pending = loop.pending()
        if pending:
            message = (f"{_count(pending, 'task')} still pending when {name} returned (nothing "
                       f"awaited it to its end; cancelled): {_named(pending)}")
            self._unwind(None)
            raise LoopFailure("leaked", "PendingTask", message)
        left = loop.left()
        if left:
            loop.forget()
            raise LoopFailure("leaked", "PendingCallback",
                              f"{_count(left, 'callback')} left scheduled when {name} returned "
                              f"(dropped): {', '.join(_callback(h) for h in left[:_NAMED_MAX])}")
        for made in loop.made:  # an exception asyncio would only log, when collected
            error = (made.exception() if made.done() and getattr(made, "_log_traceback", False)
                     else None)
            if error is not None:
                raise LoopFailure("raised", type(error).__name__,
                                  f"a task nobody awaited raised ({_where(made)}): "
                                  f"{words_of(error)}", trace_of(error)) from error
        return result

    def _unwind(self, cause: BaseException | None) -> None:
        """Cancels the tasks left and runs the loop until they end, with faults off; raises
        `LoopFailure` (from `cause`) if some will not."""
        loop = self.loop
        pending = loop.pending()
        if not pending:
            loop.forget()
            return
        for task in pending:
            task.cancel()
        loop.unwinding, loop.turns = True, 0
        try:
            with self._hush(), warnings.catch_warnings():
                warnings.filterwarnings("ignore", _UNAWAITED, RuntimeWarning)  # cut short
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        except LoopFailure as failure:
            stuck = loop.pending()
            for task in stuck:  # left to the collector, which need not say so
                task._log_destroy_pending = False  # type: ignore[attr-defined]
            raise LoopFailure(failure.problem, failure.error,
                              f"{_count(stuck, 'task')} would not end when cancelled: "
                              f"{_named(stuck)}") from cause
        finally:
            loop.unwinding = False
            loop.forget()

    def close(self) -> None:
        """Closes the loop (a run's end)."""
        if not self.loop.is_running():
            self.loop.close()


class AsyncCalls:
    """A machine as the simulator calls it when some of its methods are coroutine functions:
    those are run to their end on `loop`; the others are the machine's own."""

    def __init__(self, machine: Any, loop: RunLoop) -> None:
        self._machine, self._loop = machine, loop

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._machine, name)
        called = _driven(self._loop, method) if inspect.iscoroutinefunction(method) else method
        setattr(self, name, called)  # decided once per name
        return called


def _driven(loop: RunLoop, method: Callable[..., Any]) -> Callable[..., Any]:
    """Gives `method` (a coroutine function) as a plain one: each call runs on `loop`."""
    call = loop.call

    def driven(*args: Any) -> Any:
        return call(method, *args)

    return driven


def _steps_a_task(handle: asyncio.Handle) -> bool:
    """Tells whether a ready callback runs a task on (its step, or its wakeup)."""
    return isinstance(getattr(getattr(handle, "_callback", None), "__self__", None),
                      asyncio.Task)


def _consume(tasks: list[asyncio.Task[Any]]) -> None:
    """Marks the exceptions of ended tasks as read (asyncio would log them when collected)."""
    for task in tasks:
        if task.done() and not task.cancelled():
            task.exception()


def _count(items: list[Any], noun: str) -> str:
    return f"a {noun} was" if len(items) == 1 else f"{len(items)} {noun}s were"


def _named(tasks: list[asyncio.Task[Any]]) -> str:
    """Names tasks by their coroutines and where each is (`file:line, in function`)."""
    if not tasks:
        return "no task is left"
    named = "; ".join(_where(task) for task in tasks[:_NAMED_MAX])
    more = len(tasks) - _NAMED_MAX
    return named + (f"; and {more} more" if more > 0 else "")


def _where(task: asyncio.Task[Any]) -> str:
    coro = task.get_coro()
    code = getattr(coro, "cr_code", None)
    name = task.get_name()
    called = "" if _DEFAULT_NAME.fullmatch(name) else f"task {name!r}: "
    if code is None:
        return f"{called}{type(coro).__name__}"
    frame = getattr(coro, "cr_frame", None)
    line = frame.f_lineno if frame is not None else code.co_firstlineno
    return f"{called}{Path(code.co_filename).name}:{line}, in {code.co_qualname}"


def _callback(handle: asyncio.Handle) -> str:
    function = getattr(handle, "_callback", None)
    while hasattr(function, "func"):  # a functools.partial
        function = function.func  # type: ignore[union-attr]
    code = getattr(function, "__code__", None)
    name = getattr(function, "__qualname__", type(function).__name__)
    if code is None:
        return str(name)
    return f"{name} ({Path(code.co_filename).name}:{code.co_firstlineno})"


def _unawaited_among(caught: list[warnings.WarningMessage]) -> list[warnings.WarningMessage]:
    """Gives the warnings of coroutines never awaited; tells the others as they would have
    been told."""
    found = []
    for warning in caught:
        if issubclass(warning.category, RuntimeWarning) and re.match(_UNAWAITED,
                                                                     str(warning.message)):
            found.append(warning)
        else:  # not ours to judge
            warnings.warn_explicit(warning.message, warning.category, warning.filename,
                                   warning.lineno, source=warning.source)
    return found


def _unawaited(warning: warnings.WarningMessage) -> str:
    """Names the coroutine never awaited, and where it was made (or dropped)."""
    coro = warning.source
    name = getattr(coro, "__qualname__", None) or str(warning.message).split("'")[1]
    origin = getattr(coro, "cr_origin", None)
    if origin:
        filename, line, function = origin[0]
        return f"{name}, made at {Path(filename).name}:{line}, in {function}"
    return f"{name}, dropped at {Path(warning.filename).name}:{warning.lineno}"
