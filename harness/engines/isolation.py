"""Running a machine under test in a process of its own, so that its death is its verdict.

A machine can end the process it runs in (`os._exit`, a signal, a crash in C). Run in the
harness's own process, that ends the campaign with no word and no report; run in a pool, its
task never comes back. Here each piece of work runs in a forked child that sends its result
back through a pipe: a child that ends without one raises `Died` with how it ended, and the
harness, whose process is untouched, reports it. The child's standard output goes to standard
error, so a machine's prints never mix into what the harness writes (`--json`).

Only where the platform can fork; elsewhere the work runs in this process (`available()`).
"""

from __future__ import annotations

import collections
import contextlib
import copyreg
import gc
import multiprocessing
import os
import pickle
import signal
import sys
import tracemalloc
import types
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from multiprocessing.connection import Connection, wait
from typing import Any, TypeVar

from harness.errors import trace_of, words_of
from harness.sim.watchdog import Heartbeat

__all__ = ["Died", "Pool", "Running", "Worker", "available", "begin", "call", "map_ordered",
           "tell"]

T = TypeVar("T")
R = TypeVar("R")


class Died(Exception):
    """The child ended before it sent its result: `code` is its exit code, or minus the signal
    that killed it; `hung`, when the parent ended it, the step's bound and what the machine
    was doing."""

    def __init__(self, code: int | None, hung: tuple[float, str] | None = None) -> None:
        self.code = code
        self.hung = hung
        super().__init__(self.how)

    @property
    def how(self) -> str:
        """Says how the process ended, as a person reads it."""
        if self.hung is not None:
            bound, note = self.hung
            return (f"it hung: a step ran past {bound:g} s of wall time (step_timeout_s), "
                    f"while {note or 'a step'}, and neither returned nor let the watchdog "
                    f"stop it; fsmharness ended the process after {bound + _margin(bound):g} s")
        if self.code is None:
            return "the process ended without a result"
        if self.code < 0:
            try:
                name = signal.Signals(-self.code).name
            except ValueError:
                name = f"signal {-self.code}"
            return f"the process was killed by {name}"
        return f"the process exited with code {self.code}"


#: How often a parent looks at its children's heartbeats while it waits for them (seconds).
_POLL = 0.2


def _margin(bound: float) -> float:
    """Gives how long past a step's bound a parent waits before it ends the child: enough for
    the child's own watchdog (a quarter of the bound) to stop the step first."""
    return max(1.0, bound / 2)


def _overdue(beat: Heartbeat, process: Any) -> tuple[float, str] | None:
    """Ends `process` when its step ran past its bound plus the margin; gives why, else None."""
    hung = beat.overdue(_margin)
    if hung is not None:
        with contextlib.suppress(OSError, ValueError):
            process.kill()  # SIGKILL: it ends a stopped process too
    return hung


def available() -> bool:
    """Tells whether work can run in forked children here."""
    return "fork" in multiprocessing.get_all_start_methods()


# results cross the pipe pickled; read-only mappings (a counterexample's actions) pickle as
# the mappings they show
def _proxy(shown: dict[Any, Any]) -> types.MappingProxyType[Any, Any]:
    return types.MappingProxyType(shown)


copyreg.pickle(types.MappingProxyType, lambda proxy: (_proxy, (dict(proxy),)))


class _Raised:
    """An exception the child's work raised, carried back to be raised again."""

    def __init__(self, exc: BaseException) -> None:
        self.exc: BaseException
        try:  # an exception whose own __init__ takes other arguments pickles, and then does
            pickle.loads(pickle.dumps(exc))  # not load: try the whole way
            self.exc = exc
        except Exception:  # one that cannot cross comes back as its words and its traceback
            self.exc = RuntimeError(f"{type(exc).__name__}: {words_of(exc)}\n"
                                    f"(raised in a worker process:)\n{trace_of(exc)}")


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):  # a fork copies what is still in the buffers
        with contextlib.suppress(OSError, ValueError):
            stream.flush()


def _start(process: Any) -> None:
    """Forks `process` with the parent's objects frozen (`gc.freeze`): the child's collector
    then never walks them, and so never copies the memory that holds them (a child made per
    Hypothesis example ran at a third of the speed without)."""
    if gc.get_freeze_count():  # the caller froze some: what is frozen is theirs to undo
        process.start()
        return
    gc.freeze()
    try:
        process.start()
    finally:
        gc.unfreeze()


def _send(out: Connection, result: Any) -> None:
    try:
        out.send(result)
    except Exception as exc:  # a result that cannot be pickled is the harness's bug: say so
        out.send(_Raised(RuntimeError(f"cannot send a result back: {words_of(exc)}")))


class _Told:
    """Something the child's work tells its parent on the way (`tell`), before its result."""

    def __init__(self, item: Any) -> None:
        self.item = item


_TOLD_TO: Connection | None = None  # in a child `begin` made: the pipe to its parent


def tell(item: Any) -> None:
    """Sends `item` to the parent, whose `Running.result(told)` hands it to `told` (progress
    on long work); does nothing outside a child."""
    if _TOLD_TO is not None:
        _TOLD_TO.send(_Told(item))


def _child(work: Callable[[], Any], out: Connection, beat: Heartbeat) -> None:
    global _TOLD_TO
    _started(beat)
    _TOLD_TO = out
    try:
        result: Any = work()
    except BaseException as exc:  # the harness's own errors travel back; the parent decides
        result = _Raised(exc)
    _send(out, result)
    out.close()
    _flush()  # what the machine printed, before the exit
    os._exit(0)


class Running:
    """Work running in a forked child (see `begin`): `result()` waits for it, `cancel()` ends
    it when its result is not wanted any more."""

    def __init__(self, work: Callable[[], Any]) -> None:
        _flush()
        reader, writer = multiprocessing.Pipe(duplex=False)
        self.reader = reader
        _parent_keeps(reader)
        self.beat = Heartbeat()
        self.process = multiprocessing.get_context("fork").Process(
            target=_child, args=(work, writer, self.beat), daemon=True)
        _start(self.process)
        writer.close()  # only the child holds the writing end: its death is an end of file
        #: how the child ended (`multiprocessing`'s exit code), once `result` or `cancel` saw
        #: it end; the process handle is let go of then
        self.exitcode: int | None = None

    def _ended(self) -> int | None:
        """Waits for the child's end, notes its exit code and lets go of its handle."""
        if self.exitcode is None:
            self.process.join()
            self.exitcode = self.process.exitcode
            _let_go(self.process)
        return self.exitcode

    def result(self, told: Callable[[Any], object] | None = None) -> Any:
        """Waits for the child's result, handing `told` what it tells on the way; raises
        `Died` when it ends without one, or when a step of its ran past its bound and the
        parent ended it. Interrupted (Ctrl-C, an error here), it ends the child before it lets
        go."""
        hung = None
        try:
            while True:
                while not self.reader.poll(_POLL):
                    hung = hung or _overdue(self.beat, self.process)
                got = self.reader.recv()
                if not isinstance(got, _Told):
                    break
                if told is not None:
                    told(got.item)
        except (EOFError, OSError):
            raise Died(self._ended(), hung) from None
        except BaseException:
            self.process.kill()
            self._ended()
            raise
        finally:
            self.reader.close()
        self._ended()
        if isinstance(got, _Raised):
            raise got.exc
        return got

    def cancel(self) -> None:
        """Ends the child if it still runs, and lets go of its pipe (its result is lost)."""
        if self.exitcode is None and self.process.is_alive():
            self.process.kill()
        self._ended()
        self.reader.close()


def begin(work: Callable[[], Any]) -> Running:
    """Starts `work()` in a forked child and gives the handle whose `result()` waits for it:
    the caller goes on meanwhile."""
    return Running(work)


def call(work: Callable[[], R], told: Callable[[Any], object] | None = None) -> R:
    """Runs `work()` in a forked child and gives what it returned (or raises what it
    raised), handing `told` what it tells on the way (`tell`); raises `Died` when the child
    ends without a result."""
    result: R = Running(work).result(told)
    return result


#: Batches a `map_ordered` worker holds at once: the next one waits in its pipe while it runs
#: one, so it never waits for the parent (which merges results and hands out work between
#: batches). Only for small batches (seeds): one that does not fit in the pipe's buffer would
#: block the parent while the child blocks sending its result to it.
_DEPTH = 2


class Worker:
    """A child that runs batches it is sent, in order, until it is sent `None`."""

    def __init__(self, work: Callable[[Sequence[Any]], list[Any]]) -> None:
        _flush()
        tasks_out, self.tasks = multiprocessing.Pipe(duplex=False)
        self.results, results_in = multiprocessing.Pipe(duplex=False)
        _parent_keeps(self.tasks, self.results)
        self.beat = Heartbeat()
        self.hung: tuple[float, str] | None = None  # why the parent ended it, if it did
        self.process = multiprocessing.get_context("fork").Process(
            target=_serve, args=(work, tasks_out, results_in, self.beat), daemon=True)
        _start(self.process)
        tasks_out.close()
        results_in.close()  # only the child holds it: its death is an end of file here
        #: the batches given and not answered yet, oldest (the one running) first
        self.given: collections.deque[tuple[int, Sequence[Any]]] = collections.deque()

    def give(self, index: int, batch: Sequence[Any]) -> None:
        self.given.append((index, batch))
        with contextlib.suppress(OSError):  # it died holding a batch: `take` tells, and the
            self.tasks.send(batch)  # batches it never began are given again

    def take(self, told: Callable[[Any], object] | None = None, *, watched: bool = False
             ) -> list[Any]:
        """Gives the result of the oldest batch given (which `given` still holds), handing
        `told` what the batch told on the way (`tell`); raises `Died` when the child ended.
        `watched`: watching the child while it waits (see `watch`)."""
        while True:
            while watched and not self.results.poll(_POLL):
                self.watch()
            try:
                got = self.results.recv()
            except (EOFError, OSError):
                self.process.join()
                raise Died(self.process.exitcode, self.hung) from None
            if not isinstance(got, _Told):
                break
            if told is not None:
                told(got.item)
        if isinstance(got, _Raised):
            raise got.exc
        return got

    def watch(self) -> None:
        """Ends the child when a step of its ran past its bound (its pipe then ends)."""
        self.hung = self.hung or _overdue(self.beat, self.process)

    def take_watched(self, told: Callable[[Any], object] | None = None) -> list[Any]:
        """`take`, watching the child meanwhile (for a caller with one worker to wait for)."""
        return self.take(told, watched=True)

    def close(self) -> None:
        """Ends the child: it is told to stop after the batches it holds, or, when the results
        of those are not wanted any more (the work stopped early), killed at once."""
        with contextlib.suppress(ValueError):  # closed already: its handle was let go of
            if not self.given:
                with contextlib.suppress(OSError):
                    self.tasks.send(None)
                self.process.join(timeout=5)
            if self.process.is_alive():
                self.process.kill()
                self.process.join()
        _let_go(self.process)
        self.tasks.close()
        self.results.close()


class _Crew:
    """At most `processes` workers, each holding up to `depth` batches; a batch whose worker
    died is run again one item at a time (see `_rerun`), and the batches that worker held and
    never began are given back, to be given again."""

    def __init__(self, work: Callable[[Sequence[Any]], list[Any]], processes: int,
                 alone: Callable[[Any, Died], Any],
                 unexplained: Callable[[list[Any], Died], list[Any]], depth: int = 1
                 ) -> None:
        self.work, self.processes, self.depth = work, processes, depth
        self.alone, self.unexplained = alone, unexplained
        self.workers: list[Worker] = []

    def give(self, index: int, batch: Sequence[Any]) -> bool:
        """Gives a batch to a worker with room (a free one, else a new one, else one whose
        pipe has room); tells whether one took it."""
        worker = next((w for w in self.workers if not w.given), None)
        if worker is None and len(self.workers) < self.processes:
            worker = Worker(self.work)
            self.workers.append(worker)
        if worker is None:
            worker = min(self.workers, key=lambda w: len(w.given))
            if len(worker.given) >= self.depth:
                return False
        worker.give(index, batch)
        return True

    def busy(self) -> bool:
        return any(worker.given for worker in self.workers)

    def collect(self) -> tuple[dict[int, list[Any]], list[tuple[int, Sequence[Any]]]]:
        """Waits for some results; gives them by batch index, and the batches to give again."""
        done: dict[int, list[Any]] = {}
        again: list[tuple[int, Sequence[Any]]] = []
        holding: dict[Any, Worker] = {worker.results: worker for worker in self.workers
                                       if worker.given}
        ready_ones = wait(list(holding), timeout=_POLL)
        for worker in holding.values():  # each time: one that answers must not hide one hung
            worker.watch()
        for ready in ready_ones:
            worker = holding[ready]
            try:
                got = worker.take()
            except Died as died:
                index, batch = worker.given.popleft()
                again += worker.given  # never begun: another worker runs them
                worker.given.clear()
                self._drop(worker)
                done[index] = _rerun(self.work, batch, died, self.alone, self.unexplained)
            except BaseException:
                self.close()
                raise
            else:
                index, _ = worker.given.popleft()
                done[index] = got
        return done, again

    def _drop(self, worker: Worker) -> None:
        worker.close()
        self.workers.remove(worker)

    def close(self) -> None:
        for worker in self.workers:
            worker.close()
        self.workers = []


#: The ends of the children's pipes the parent keeps (the task writers, the result readers).
#: A fork copies them into every child made later; each child closes its copies first thing,
#: so that a child waiting for work sees its pipe end when the parent is gone, instead of
#: waiting for ever on a copy of the writing end it holds itself (an orphan after a parent
#: killed by a timeout).
_PARENT_ENDS: weakref.WeakSet[Connection] = weakref.WeakSet()


def _parent_keeps(*ends: Connection) -> None:
    """Notes the ends of a child's pipes the parent keeps, before the child is forked."""
    _PARENT_ENDS.update(ends)


def _let_go(process: Any) -> None:
    """Releases a joined child's process handle now: its sentinel pipes would otherwise stay
    open until the collector reaches the handle, which a kept traceback (Hypothesis keeps one
    per failing example) delays for ever: the fds leaked by the thousand."""
    with contextlib.suppress(ValueError):  # still running: its finalizer releases it later
        process.close()


def _started(beat: Heartbeat) -> None:
    """Readies a child: the parent's ends of every child's pipes closed here, its prints to
    stderr, no tracing of the parent's memory, SIGALRM free for the watchdog (a fork inherits
    the parent's handler but not its timer), and the heartbeat its parent watches."""
    for end in list(_PARENT_ENDS):
        with contextlib.suppress(OSError):
            end.close()
    _PARENT_ENDS.clear()
    beat.install()
    os.dup2(2, 1)  # the machine's prints go to stderr: stdout is the harness's
    if tracemalloc.is_tracing():  # a measure of the parent's memory (bench) is not the child's
        tracemalloc.stop()
    with contextlib.suppress(ValueError, OSError, AttributeError):
        signal.signal(signal.SIGALRM, signal.SIG_DFL)


def _serve(work: Callable[[Sequence[Any]], list[Any]], tasks: Connection,
           results: Connection, beat: Heartbeat) -> None:
    global _TOLD_TO
    _started(beat)
    _TOLD_TO = results  # what a batch tells comes before its result
    while True:
        try:
            batch = tasks.recv()
        except (EOFError, OSError):
            break
        if batch is None:
            break
        try:
            result: Any = work(batch)
        except BaseException as exc:
            result = _Raised(exc)
        _send(results, result)
    _flush()
    os._exit(0)


def map_ordered(work: Callable[[Sequence[T]], list[R]], batches: Iterable[Sequence[T]],
                processes: int, alone: Callable[[T, Died], R],
                unexplained: Callable[[list[R], Died], list[R]]) -> Iterator[list[R]]:
    """Runs `work(batch)` for each batch in forked worker children, at most `processes` of
    them, and yields the results in the batches' order. A batch whose worker died is run
    again one item at a time, each in a fresh child, to find the item at fault (`alone(item,
    died)` gives that item's result), and a fresh worker takes the next batches. When no item
    dies alone (the death came of what the worker's runs left behind), `unexplained(results,
    died)` gives the batch's results: the death must not vanish. Each worker holds its next
    batch while it runs one (batches must be small: seeds), and is given it before results
    are yielded, so the workers run while the caller takes them."""
    pending = iter(enumerate(batches))
    again: collections.deque[tuple[int, Sequence[T]]] = collections.deque()
    crew = _Crew(work, processes, alone, unexplained, _DEPTH)
    done: dict[int, list[R]] = {}
    following = 0

    def feed() -> None:
        while True:
            item = again.popleft() if again else next(pending, None)
            if item is None:
                return
            if not crew.give(*item):
                again.appendleft(item)
                return

    try:
        feed()
        while crew.busy():
            got, back = crew.collect()
            done.update(got)
            again.extendleft(reversed(back))
            feed()
            while following in done:
                yield done.pop(following)
                following += 1
    finally:
        crew.close()


class Pool:
    """Worker children kept between rounds: `run(batches)` runs one round of batches (each
    in some worker, at most `processes` of them) and gives every result in the batches'
    order, a dead worker's batch handled as `map_ordered` does. For an engine whose next
    round depends on this one's results (guided fuzzing): the rounds are the same whatever
    the number of processes. `close()` ends the workers."""

    def __init__(self, work: Callable[[Sequence[T]], list[R]], processes: int,
                 alone: Callable[[T, Died], R],
                 unexplained: Callable[[list[R], Died], list[R]]) -> None:
        self.crew = _Crew(work, processes, alone, unexplained)

    def run(self, batches: Sequence[Sequence[Any]]) -> list[list[Any]]:
        done: dict[int, list[Any]] = {}
        pending = collections.deque(enumerate(batches))
        try:
            while pending or self.crew.busy():
                while pending and self.crew.give(*pending[0]):
                    pending.popleft()
                got, back = self.crew.collect()
                done.update(got)
                pending.extendleft(reversed(back))
        except BaseException:
            self.crew.close()
            raise
        return [done[index] for index in range(len(batches))]

    def close(self) -> None:
        self.crew.close()


def _rerun(work: Callable[[Sequence[T]], list[R]], batch: Sequence[T], died: Died,
           alone: Callable[[T, Died], R],
           unexplained: Callable[[list[R], Died], list[R]]) -> list[R]:
    """Gives the results of a batch whose worker died: each item run again in a fresh child,
    to find the one at fault; when none dies alone, `unexplained` says so on the batch."""
    alone_died = [False]
    results = [_one(work, item, alone, alone_died) for item in batch]
    return results if alone_died[0] else unexplained(results, died)


def _one(work: Callable[[Sequence[T]], list[R]], item: T, alone: Callable[[T, Died], R],
         died_alone: list[bool]) -> R:
    try:
        (result,) = call(lambda: work([item]))
    except Died as died:
        died_alone[0] = True
        return alone(item, died)
    return result
