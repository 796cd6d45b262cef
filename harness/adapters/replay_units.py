"""The replay-unit kit: what an adapter needs for an engine that re-runs a unit of work from its
top on resume and gives back the saved results of its finished parts (LangGraph's nodes,
pydantic-graph's nodes, a durable agent's steps, Temporal's activities).

Such engines fail in the same places, so each adapter names its units and the kit does the
rest:

- **Tool calls made by a unit** (`UnitCalls.call`): each call has a logical action, the unit's
  name, its logical step and the call's place in the run (the n-th call), the same however
  often the unit re-runs; the world is told the execution and that action (`MadeBy`), so an
  effect is attributed to the execution the adapter knows, whatever the key says, and two
  effects of one action are a duplicate whatever their inputs. The key defaults to
  `{execution}/{unit}/{step}` (the n-th call's `/n`). The process may crash just after a call
  took effect (the adapter's `after_effect` point).
- **Crash points around a unit's saved result** (`UnitCalls.saving`): before and after the
  write that saves it; once it is saved, the journal knows.
- **Why a call was made again** (`Journal`, harness-side knowledge that a crash does not
  lose): an effect made before the unit suspended (a human's answer pending) is made again
  when the unit re-runs on resume; a re-run after a crash before the unit's result was saved,
  or after a failed attempt, makes it again too. Those are the engine's documented behaviour:
  the user's code must make such an effect idempotent. A unit that runs again although its
  result was saved is the engine's doing, and the cause says so.
- **Keys from ids a re-run mints again**: a unit run says which ids it minted (a task id, a
  tool call id, a waiter id); a key that contains one is not stable across re-runs, and the
  cause of a duplicate under it says so.
- **Live against replay**: the calls the first run of a unit made are kept, and a re-run that
  makes the same call with another input (a unit that decides differently on replay) is said
  in the cause.

The causes reach the history on each `Applied` record (`action`, `cause`), and
`no_duplicate_effect` prints them.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, TypeVar

from fault_injection import SimulatedCrash
from harness.adapters.peers import AdapterError
from harness.sim.world import MadeBy, canonical
from reference_machine import (
    DefinitionError,
    Failure,
    Tool,
    WorkflowDefinition,
    load_definition,
)

__all__ = ["FOREVER", "Dead", "Journal", "LentLock", "Process", "ToolFailed", "Unit", "UnitCalls",
           "UnitHost", "chain", "load_read"]

T = TypeVar("T")

#: How long a wait for a human lasts where nothing times it out: ten years, in ms.
FOREVER = 10 * 365 * 24 * 3_600_000


class Dead(BaseException):
    """The simulated process has died: whatever runs after it does nothing."""


class ToolFailed(Exception):
    """A simulated tool failed (`category`: transient, rate_limited, timeout, permanent). A
    unit's retry policy retries it as it would a connection error."""

    def __init__(self, tool: str, category: str, message: str = "") -> None:
        super().__init__(f"{tool} failed: {category}{': ' + message if message else ''}")
        self.tool, self.category, self.message = tool, category, message

    def __reduce__(self) -> tuple[Any, ...]:  # an engine that records it pickles it
        return (type(self), (self.tool, self.category, self.message))


class Process:
    """The simulated process an adapter's machine is: it dies at a crash point the
    simulator's probe strikes (`passing`), and does nothing after (`Dead`). A machine sets
    `probe` and starts alive."""

    dead: bool = False
    died_at: str = ""  # the crash point it died at
    probe: Callable[[str], None]

    def passing(self, point: str) -> None:
        """The process passes a crash point: the simulator may crash it there."""
        if self.dead:
            raise Dead
        try:
            self.probe(point)
        except SimulatedCrash:
            self.dead, self.died_at = True, point
            raise


class LentLock:
    """A re-entrant lock over a library's runtime while an adapter has patched it, which its
    holder may lend to a thread it waits on (`in_thread`): an async library's run, or a
    second worker acting at a crash point of the first's, runs there one at a time, in the
    same order in every run, under the holder's hold."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._lent = 0  # the thread acting for the holder, which waits on it

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        if self._lent == threading.get_ident():
            yield
            return
        with self._lock:
            yield

    @contextlib.contextmanager
    def lent_here(self) -> Iterator[None]:
        """Lends the hold to this thread while the holder waits on it (a thread a library
        runs the holder's work on, such as DBOS's recovery)."""
        lent, self._lent = self._lent, threading.get_ident()
        try:
            yield
        finally:
            self._lent = lent

    def in_thread(self, work: Callable[[], T]) -> T:
        """Runs `work` in a thread of its own, waited for; what it raises is raised here."""
        done: list[T] = []
        failed: list[BaseException] = []

        def run() -> None:
            lent, self._lent = self._lent, threading.get_ident()
            try:
                done.append(work())
            except BaseException as error:  # raised again in the waiting thread
                failed.append(error)
            finally:
                self._lent = lent
        thread = threading.Thread(target=run, name="fsmharness-adapter-run")
        thread.start()
        thread.join()
        if failed:
            raise failed[0]
        return done[0]


class Unit(NamedTuple):
    """One run of a unit of work: the execution, the unit's name, its logical step (the same
    on every re-run of it: a superstep, a snapshot's id, a fan-out's place), which attempt
    this is and the ids the engine minted for this run, by what they are
    (`("task id", "…")`). A run lasts from its first call to its end (`UnitCalls.ended`) or
    the process's death."""

    execution: str
    name: str
    step: str
    attempt: int = 1
    minted: tuple[tuple[str, str], ...] = ()

    @property
    def place(self) -> tuple[str, str, str]:
        return (self.execution, self.name, self.step)


class UnitHost(Protocol):
    """The adapter's process, as the kit sees it: whether it died, and where it passes a
    crash point."""

    dead: bool

    def passing(self, point: str) -> None: ...


@dataclass
class _Place:
    """What the harness saw of one unit's runs at one step."""

    runs: int = 0
    ended: str = ""  # how the last run ended: suspended, crashed, failed, done
    saved: bool = False
    first: dict[int, tuple[str, str]] = field(default_factory=dict)  # call -> (tool, input)
    running: bool = False  # a run of it is under way
    by: int = 0  # the worker that made its last run (its number in the journal, from 1)
    before: int = 0  # the worker that made the run before it


class Journal:
    """What the harness knows of each unit's runs, per execution, unit and step: it lives
    with the simulated disk (a crash does not lose it), and it only explains; the machine
    never reads it."""

    def __init__(self) -> None:
        self._places: dict[tuple[str, str, str], _Place] = {}
        self._workers: list[object] = []  # the workers seen, numbered by their place here

    def begin(self, unit: Unit, by: object) -> _Place:
        """Notes that `unit` runs in worker `by` (once per run, however many calls it
        makes)."""
        place = self._places.setdefault(unit.place, _Place())
        worker = self._number(by)
        if not place.running or place.by != worker:
            place.running = True
            place.runs += 1
            place.before, place.by = place.by, worker
        return place

    def _number(self, worker: object) -> int:
        for number, seen in enumerate(self._workers, 1):
            if seen is worker:
                return number
        self._workers.append(worker)
        return len(self._workers)

    def ended(self, unit: Unit, how: str) -> None:
        """Notes how a run of `unit` ended: `suspended` (it waits on a human), `crashed`,
        `failed` (an attempt failed), `done` (it returned)."""
        place = self._places.get(unit.place)
        if place is not None and place.running:
            place.ended, place.running = how, False

    def crashed(self) -> None:
        """The process died: every run under way ended there."""
        for place in self._places.values():
            if place.running:
                place.ended, place.running = "crashed", False

    def saved(self, unit: Unit) -> None:
        """Notes that the result of `unit`'s run reached the store."""
        place = self._places.setdefault(unit.place, _Place())
        place.saved = True

    def cause(self, unit: Unit, call: int, tool: str, input: str, key: str,
              engine: str, rerun_by: str = "", two_workers: str = "") -> str:
        """Says why the `call`-th call of `unit` is made, where a re-run explains it
        (`two_workers`: why two workers ran it, where the engine says, not the
        deployment)."""
        place = self._places[unit.place]
        reasons: list[str] = []
        again = place.runs > 1 or unit.attempt > 1
        if again and call in place.first:
            who = f"{unit.name} (step {unit.step})"
            idempotent = ("make the call idempotent: a key stable across re-runs, on a "
                          "service that honours keys; a tool that only reads: declare it "
                          "repeatable: true")
            if place.before and place.before != place.by and two_workers:
                reasons.append(f"two workers ran {who}: {two_workers} ({idempotent})")
            elif place.before and place.before != place.by:
                reasons.append(f"two workers ran {who}: a second worker took the same "
                               f"execution (a deployment that runs one runner per execution "
                               f"never does; say so to the adapter, or leave the fault out: "
                               f"--faults all,-second_worker)")
            elif place.saved:
                reasons.append(f"the cause is {engine}'s, not the code's: {engine} ran {who} "
                               f"again although its result was saved")
            elif place.ended == "suspended":
                reasons.append(f"effect before suspension: {who} made this call and then "
                               f"suspended, and {engine} re-runs a unit from its top on "
                               f"resume ({idempotent}, or make the call after the "
                               f"suspension)")
            elif place.ended == "failed" or unit.attempt > 1:
                reasons.append(f"a retry of {who} (attempt {unit.attempt}) made the call "
                               f"again ({idempotent})")
            else:
                reasons.append(f"{rerun_by or engine} re-ran {who} after a crash before its "
                               f"result was saved ({idempotent})")
            first_tool, first_input = place.first[call]
            if first_tool == tool and first_input != input:
                reasons.append(f"the re-run decided differently from the first run: "
                               f"input {first_input}, then {input}")
        for what, value in unit.minted:
            if value and value in key:
                reasons.append(f"the key is built from the {what}, minted anew on each run: "
                               f"it is not stable across re-runs")
        place.first.setdefault(call, (tool, input))
        return "; ".join(reasons)


class UnitCalls:
    """Calls the world's tools for the units an adapter runs (see the module)."""

    def __init__(self, tools: Mapping[str, Tool], host: UnitHost, journal: Journal,
                 engine: str, after_effect: str = "after_effect", rerun_by: str = "",
                 two_workers: str = "") -> None:
        """`engine` names the framework in causes; `rerun_by` who runs a unit again after a
        crash (the engine, by default; "the worker's recovery" where the adapter's
        recovery does); `two_workers` why two workers ran a unit, where the engine itself
        gives one to a second (by default, the deployment let a second take it)."""
        self._tools, self._host, self.journal = tools, host, journal
        self.engine, self.after_effect, self.rerun_by = engine, after_effect, rerun_by
        self.two_workers = two_workers
        # per unit run and attempt, the calls made in the run going on (a unit re-run on a
        # resume counts again from its first)
        self.calls_made: dict[tuple[str, str, str, int], int] = {}

    @staticmethod
    def key_of(unit: Unit) -> str:
        """Gives the unit's default key, `{execution}/{unit}/{step}`: the same on every
        attempt and every re-run."""
        return f"{unit.execution}/{unit.name}/{unit.step}"

    def call(self, unit: Unit, tool: str, input: Mapping[str, Any],
             key: str | None = None, cause: str = "") -> Any:
        """Calls a declared tool for `unit`; gives its output (as the tool gave it), or
        raises `ToolFailed`. The key defaults to the unit's, the run's second call `/2`, and
        so on. `cause` adds what the adapter knows of why the call is made (an upstream
        behaviour it recognises) to what the journal says."""
        host = self._host
        if host.dead:
            raise Dead
        found = self._tools.get(tool)
        if found is None:
            known = ", ".join(sorted(self._tools)) or "none"
            raise AdapterError(f"tool {tool!r} is not declared (declared: {known}); declare it "
                               f"with tools={{{tool!r}: {{...}}}}")
        self.journal.begin(unit, host)
        counted = (*unit.place, unit.attempt)
        made = self.calls_made[counted] = self.calls_made.get(counted, 0) + 1
        if key is None:
            key = self.key_of(unit) if made == 1 else f"{self.key_of(unit)}/{made}"
        given = dict(input)
        if getattr(found, "knows_callers", False):
            action = f"{unit.name} at step {unit.step}, call {made}"
            said = self.journal.cause(unit, made, tool, canonical(given), key, self.engine,
                                      self.rerun_by, self.two_workers)
            cause = "; ".join(part for part in (said, cause) if part)
            outcome = found(given, key, made_by=MadeBy(unit.execution, action,
                                                       cause))  # type: ignore[call-arg]
        else:
            outcome = found(given, key)
        host.passing(self.after_effect)
        if isinstance(outcome, Failure):
            raise ToolFailed(tool, outcome.category, outcome.message)
        output = outcome.output
        return dict(output) if isinstance(output, Mapping) else output

    def ended(self, unit: Unit, how: str) -> None:
        """A run of `unit` ended (see `Journal.ended`): a run again of it calls in the same
        order, under the same keys."""
        self.journal.ended(unit, how)
        for counted in [c for c in self.calls_made if c[:3] == unit.place]:
            del self.calls_made[counted]

    def crashed(self) -> None:
        """The process died: the runs under way are gone (the journal keeps what it saw)."""
        self.calls_made.clear()
        self.journal.crashed()

    def saving(self, kind: str, write: Callable[..., Any], *arguments: Any,
               saves: Sequence[Unit] = ()) -> Any:
        """Writes to the store past the crash points `before_{kind}` and `after_{kind}`;
        `saves` are the units whose results the write saves (one save may hold the results
        of every call a run made)."""
        host = self._host
        host.passing(f"before_{kind}")
        written = write(*arguments)
        for unit in saves:
            self.journal.saved(unit)
        host.passing(f"after_{kind}")
        return written

    async def asaving(self, kind: str, write: Callable[..., Awaitable[Any]], *arguments: Any,
                      saves: Sequence[Unit] = ()) -> Any:
        """`saving`, for a store written by awaiting it."""
        host = self._host
        host.passing(f"before_{kind}")
        written = await write(*arguments)
        for unit in saves:
            self.journal.saved(unit)
        host.passing(f"after_{kind}")
        return written


def chain(error: BaseException) -> list[BaseException]:
    """Gives the exception, its causes and contexts, and those inside its groups: what a
    framework wrapped around the exception a unit raised."""
    found: list[BaseException] = []
    todo = [error]
    while todo:
        each = todo.pop()
        if any(each is seen for seen in found):
            continue
        found.append(each)
        todo += [e for e in (each.__cause__, each.__context__) if e is not None]
        todo += list(getattr(each, "exceptions", ()) or ())
    return found


def load_read(spec: dict[str, Any], read_off: str) -> WorkflowDefinition:
    """Loads the definition an adapter read off the user's `read_off` (a graph, an agent).
    The user's code routes, so its eventless moves are unguarded; one that loops (an agent
    calling tools until done) gets guards that only keep the format from refusing the loop
    as an eventless cycle. What else does not load is refused, naming why."""
    try:
        try:
            return load_definition(spec)
        except DefinitionError as error:
            if "eventless-cycle" not in str(error):
                raise
        spec.setdefault("context", {}).setdefault("route", "")
        for state in spec["states"].values():
            for move in state.get("always", ()):
                move["guard"] = f"context.route == {move['target']!r}"
        return load_definition(spec)
    except DefinitionError as error:
        said = "; ".join(line.strip() for line in str(error).splitlines()[1:])
        raise AdapterError(f"the definition read off the {read_off} does not load: {said}"
                           ) from error
