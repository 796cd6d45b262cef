"""What `fsmharness bench` and `tests/benchmarks/` measure: machine shapes, the contenders that
walk them, and a side-by-side timer.

A **shape** is a definition and a walk: the events one round delivers, each with the state it
must lead to. Every contender of a shape walks the same path and must end where the others do,
so the ratio of two contenders' times per transition is the price of what one does and the other
does not. The shapes:

- `cycle8`: eight states in a ring driven by `next`; the edge out of `d` has a guard
  (`context.n >= 0`), the edge out of `h` an action (`n = n + 1`). A round: 8 transitions.
- `ring<N>` (8, 200, 2,000 states): a ring with chords, three events per state (`next` to
  the following state, `skip` over it, `back` to the one before); a round walks it once as
  `skip, back` pairs: 2N transitions, every state entered twice.
- a scenario (by default `scenarios/refund_escalation.yaml`): the events one execution of a
  fault-free seeded run accepted, approvals and tool results included. `decide` folds the real
  events (guards, actions, effects, timers); the others walk the same states, and where one
  (state, event) pair leads to more than one state, a condition picks the recorded one.

The **contenders**: a hand-written dict FSM (the floor), the reference `decide`, the reference
`Runtime` over a `MemoryStore` and over a `SQLiteStore` (synchronous NORMAL and FULL, one commit
per event), `transitions` and python-statemachine. Guards and actions are plain Python callables
for the floor and the peers, and the definition's own compiled expressions for `decide`.

Beside the shapes: the durable groups (the runtime over SQLite beside a bare sqlite3 loop that
writes the same rows under the same commit policy), simulated steps per second with and without
faults, native fuzzing beside the Hypothesis machine on the same workflow, checker throughput
(and peak memory) over 1k and 100k history records, a fuzz campaign on 1 and 2 processes, and
(in `harness.bench.langgraph_group`) node runs of a LangGraph graph invoked bare beside the
same graph under the adapter and the simulator, over the same saver.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sqlite3
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from fault_injection import no_faults
from harness.adapters.targets import Target
from harness.checks.invariants import check
from harness.engines.fuzz import FuzzOptions, fuzz
from harness.errors import HarnessError
from harness.sim.history import HistoryRecord
from harness.sim.machine import MachineFactory, ReferenceMachine
from harness.sim.simulator import SimOptions, Simulator, plan_for
from reference_machine import (
    Accepted,
    DefinitionSyntaxError,
    Event,
    Execution,
    MemoryStore,
    Runtime,
    SQLiteStore,
    WorkflowDefinition,
    decide,
    load_definition,
    new_execution,
    start_event,
)
from reference_machine._load import document_problem, read_document
from reference_machine._sqlite import Synchronous

__all__ = [
    "Aim",
    "BareLoop",
    "Contender",
    "Group",
    "Measured",
    "Shape",
    "contenders_of",
    "cycle8",
    "measure",
    "ping_pong",
    "ring",
    "scenario",
]

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_SCENARIO = ROOT / "scenarios" / "refund_escalation.yaml"

# A guard or action of the floor and the peers: reads or changes the context dict.
Guard = Callable[[dict[str, Any]], bool]
Action = Callable[[dict[str, Any]], None]


# -- shapes -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    """A definition and one round's walk through it (see the module)."""

    name: str
    definition: WorkflowDefinition
    #: (state, event type) -> the targets, each with its guard and action (None: none)
    table: dict[tuple[str, str], tuple[tuple[str, Guard | None, Action | None], ...]]
    #: one round: (event type, the state it leads to)
    walk: tuple[tuple[str, str], ...]
    #: the same round as events for `decide` and the runtime
    events: tuple[Event, ...]
    start: str
    context: dict[str, Any] = field(default_factory=dict)
    #: False when the walk's events carry tool results only the runtime can make (a scenario)
    deliverable: bool = True
    #: the started execution `decide` folds from (None: a fresh start) and each event's time
    begin: Execution | None = None
    times: tuple[int, ...] = ()
    #: whether some (state, event) pair leads to more than one state, so that the floor and
    #: the peers are told the recorded one (`context["__route__"]`) before each event
    routed: bool = False

    @property
    def states(self) -> list[str]:
        """Gives the states the floor and the peers declare, the start first."""
        names = dict.fromkeys([self.start])
        for state, _ in self.table:
            names[state] = None
        for targets in self.table.values():
            for target, _, _ in targets:
                names[target] = None
        return list(names)

    @property
    def transitions(self) -> int:
        return len(self.walk)


def cycle8() -> Shape:
    """Gives the 8-state cycle with one guard and one action."""
    names = "abcdefgh"
    states: dict[str, Any] = {}
    table: dict[tuple[str, str], tuple[tuple[str, Guard | None, Action | None], ...]] = {}
    for index, name in enumerate(names):
        following = names[(index + 1) % len(names)]
        transition: dict[str, Any] = {"target": following}
        guard: Guard | None = None
        action: Action | None = None
        if name == "d":
            transition["guard"] = "context.n >= 0"
            guard = _n_not_negative
        if name == "h":
            transition["actions"] = [{"assign": {"n": "context.n + 1"}}]
            action = _count
        states[name] = {"on": {"next": transition, "stop": "done"}}
        table[(name, "next")] = ((following, guard, action),)
    states["a"]["initial"] = True
    states["done"] = {"type": "final", "outcome": "success"}
    definition = load_definition({
        "name": "cycle8", "context": {"n": 0},
        "events": {"next": {}, "stop": {}}, "states": states,
    })
    walk = tuple(("next", names[(index + 1) % 8]) for index in range(8))
    return Shape("cycle8", definition, table, walk, _events(walk), "a", {"n": 0})


def _n_not_negative(context: dict[str, Any]) -> bool:
    return bool(context["n"] >= 0)


def _count(context: dict[str, Any]) -> None:
    context["n"] += 1


def ring(count: int) -> Shape:
    """Gives a ring of `count` states with chords (see the module)."""
    if count < 3:
        raise HarnessError(f"a ring needs at least 3 states, got {count}")
    name = [f"s{index}" for index in range(count)]
    states: dict[str, Any] = {}
    table: dict[tuple[str, str], tuple[tuple[str, Guard | None, Action | None], ...]] = {}
    for index, state in enumerate(name):
        moves = {"next": name[(index + 1) % count], "skip": name[(index + 2) % count],
                 "back": name[(index - 1) % count]}
        states[state] = {"on": {**moves, "stop": "done"}}
        for event, target in moves.items():
            table[(state, event)] = ((target, None, None),)
    states[name[0]]["initial"] = True
    states["done"] = {"type": "final", "outcome": "success"}
    definition = load_definition({
        "name": f"ring{count}", "events": {e: {} for e in ("next", "skip", "back", "stop")},
        "states": states,
    })
    walk: list[tuple[str, str]] = []
    for index in range(count):  # s_i --skip--> s_{i+2} --back--> s_{i+1}
        walk += [("skip", name[(index + 2) % count]), ("back", name[(index + 1) % count])]
    return Shape(f"ring{count}", definition, table, tuple(walk), _events(tuple(walk)), name[0])


def _events(walk: Sequence[tuple[str, str]]) -> tuple[Event, ...]:
    return tuple(Event(f"e{index}", event, "agent") for index, (event, _) in enumerate(walk))


def scenario(path: str | Path | WorkflowDefinition = DEFAULT_SCENARIO, seeds: int = 32
             ) -> Shape:
    """Gives the longest walk among the single executions of fault-free runs from seeds
    0 to `seeds - 1` (the lowest seed of the longest), short of its final state."""
    definition = path if isinstance(path, WorkflowDefinition) else load_definition(path)
    best: tuple[Execution, list[tuple[Event, int]], list[tuple[str, str]]] | None = None
    for seed in range(seeds):
        begin, timed, walk = _walk_of(definition, seed)
        if begin is not None and (best is None or len(walk) > len(best[2])):
            best = (begin, timed, walk)
    if best is None or len(best[2]) < 2:
        raise HarnessError(f"{definition.name}: no fault-free run accepted two events after "
                           f"the start; nothing to walk")
    begin, timed, walk = best
    while walk and definition.states[walk[-1][1]].final:
        # a round ends short of the final state, so every contender can walk it again (a
        # python-statemachine machine that reached a final state takes no more events)
        walk, timed = walk[:-1], timed[:-1]
    table = _leaf_table(definition)
    state = begin.state
    for event, target in walk:  # moves the definition makes without declaring them
        targets = table.setdefault((state, event), ())
        if target not in [t for t, _, _ in targets]:
            table[(state, event)] = (*targets, (target, None, None))
        state = target
    return Shape(definition.name, definition, _routed(table), tuple(walk),
                 tuple(event for event, _ in timed), begin.state, deliverable=False,
                 begin=begin, times=tuple(now for _, now in timed),
                 routed=any(len(targets) > 1 for targets in table.values()))


def _walk_of(definition: WorkflowDefinition, seed: int
             ) -> tuple[Execution | None, list[tuple[Event, int]], list[tuple[str, str]]]:
    """Gives the started execution of one fault-free run, then the events its log accepted
    (with their times) and the states they led to."""
    made: list[ReferenceMachine] = []

    def keeping(definition: WorkflowDefinition, tools: Any, probe: Any) -> ReferenceMachine:
        machine = ReferenceMachine(definition, tools, probe)
        made.append(machine)
        return machine

    Simulator(definition, SimOptions(executions=1, plan=no_faults()), keeping).run(seed)
    store = made[-1].store
    (execution_id,) = store.execution_ids()
    execution = new_execution(definition, execution_id)
    begin: Execution | None = None
    timed: list[tuple[Event, int]] = []
    walk: list[tuple[str, str]] = []
    for entry in store.log(execution_id):
        decision = decide(definition, execution, entry.event, entry.at)
        if not isinstance(decision, Accepted):
            continue
        execution = decision.execution
        if begin is None:
            begin = execution  # the start event puts it in its first state
            continue
        timed.append((entry.event, entry.at))
        walk.append((entry.event.type, execution.state))
    return begin, timed, walk


def _leaf_table(definition: WorkflowDefinition
                ) -> dict[tuple[str, str], tuple[tuple[str, Guard | None, Action | None], ...]]:
    """Gives each leaf state's moves, inherited ones included, as flat (state, event) pairs."""
    table: dict[tuple[str, str], tuple[tuple[str, Guard | None, Action | None], ...]] = {}
    for name, state in definition.states.items():
        if state.final or any(other.parent == name for other in definition.states.values()):
            continue
        for owner in (name, *state.ancestors):
            for event, transitions in definition.states[owner].on.items():
                targets = list(table.get((name, event), ()))
                for transition in transitions:
                    if transition.target_leaf not in [t for t, _, _ in targets]:
                        targets.append((transition.target_leaf, None, None))
                table[(name, event)] = tuple(targets)
    return table


_ROUTE = "__route__"  # the context key a routed walk sets to the target it expects


def _routed(table: dict[tuple[str, str], tuple[tuple[str, Guard | None, Action | None], ...]]
            ) -> dict[tuple[str, str], tuple[tuple[str, Guard | None, Action | None], ...]]:
    """Gives every target of an ambiguous (state, event) pair a guard that the route picks."""
    routed = {}
    for key, targets in table.items():
        if len(targets) > 1:
            targets = tuple((target, _route_to(target), action)
                            for target, _, action in targets)
        routed[key] = targets
    return routed


def _route_to(target: str) -> Guard:
    def chosen(context: dict[str, Any]) -> bool:
        return bool(context.get(_ROUTE) == target)

    return chosen


# -- contenders ---------------------------------------------------------------------------------

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


def dict_fsm(shape: Shape) -> Maker:
    """The floor: a dict of (state, event) -> targets, with plain guards and actions."""
    def make(stack: contextlib.ExitStack) -> Callable[[], str]:
        table, walk, start = shape.table, shape.walk, shape.start
        context = dict(shape.context)
        needs_route = shape.routed

        def one_round() -> str:
            state = start
            for event, expected in walk:
                if needs_route:
                    context[_ROUTE] = expected
                for target, guard, action in table[(state, event)]:
                    if guard is None or guard(context):
                        if action is not None:
                            action(context)
                        state = target
                        break
                else:
                    raise HarnessError(f"dict FSM: no move for {event} in {state}")
            return state

        return one_round

    return make


def reference_decide(shape: Shape) -> Maker:
    """The reference `decide`, folding the round's events from a started execution."""
    def make(stack: contextlib.ExitStack) -> Callable[[], str]:
        definition = shape.definition
        started = shape.begin if shape.begin is not None else _started(definition)
        timed = list(zip(shape.events, shape.times or [0] * len(shape.events), strict=True))

        def one_round() -> str:
            execution = started
            for event, now in timed:
                decision = decide(definition, execution, event, now)
                execution = decision.execution  # type: ignore[union-attr]
            return str(execution.state)

        return one_round

    return make


def _started(definition: WorkflowDefinition) -> Execution:
    decision = decide(definition, new_execution(definition, "bench"), start_event("bench"), 0)
    if not isinstance(decision, Accepted):
        raise HarnessError(f"{definition.name}: the start was not accepted: {decision}")
    return decision.execution


def reference_runtime(shape: Shape, store: Literal["memory"] | Synchronous) -> Maker:
    """The reference runtime: load, decide and commit each event, on one execution whose
    rounds follow one another (the shape's walk ends where it starts)."""
    def make(stack: contextlib.ExitStack) -> Callable[[], str]:
        definition = shape.definition
        if store == "memory":
            backing: Any = MemoryStore()
        else:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="fsmbench-")))
            backing = SQLiteStore(folder / "store.db", synchronous=store)
            stack.callback(backing.close)
        runtime = Runtime(backing, [definition], {})
        runtime.start(definition, "run", context=None, now=0)
        types = [event for event, _ in shape.walk]
        delivered = [0]

        def one_round() -> str:
            number, deliver = delivered[0], runtime.deliver
            decision: Any = None
            for kind in types:
                decision = deliver("run", Event(f"e{number}", kind, "agent"), number)
                number += 1
            delivered[0] = number
            return str(decision.execution.state)

        return one_round

    return make


def transitions_peer(shape: Shape) -> Maker:
    """`transitions`: a `Machine` with the shape's states and moves, fired by its triggers."""
    def make(stack: contextlib.ExitStack) -> Callable[[], str]:
        from transitions import Machine

        context = dict(shape.context)
        model = _Model()
        moves = []
        for (source, event), targets in shape.table.items():
            for target, guard, action in targets:
                move: dict[str, Any] = {"trigger": event, "source": source, "dest": target}
                if guard is not None:
                    move["conditions"] = [_bound(guard, context)]
                if action is not None:
                    move["after"] = [_bound(action, context)]
                moves.append(move)
        machine = Machine(model=model, states=shape.states, transitions=moves,
                          initial=shape.start, auto_transitions=False)
        walk = [(getattr(model, event), expected) for event, expected in shape.walk]
        return _firing(shape, context, walk, lambda: machine.set_state(shape.start, model),
                       lambda: str(model.state))

    return make


def _firing(shape: Shape, context: dict[str, Any], walk: list[tuple[Callable[[], Any], str]],
            reset: Callable[[], Any], state: Callable[[], str]) -> Callable[[], str]:
    """Gives a peer's round: back to the start, then each bound trigger fired in turn (the
    route set first where the shape needs one)."""
    needs_route = shape.routed

    def one_round() -> str:
        reset()
        for fire, expected in walk:
            if needs_route:
                context[_ROUTE] = expected
            fire()
        return state()

    return one_round


class _Model:
    """The object `transitions` puts its state and triggers on."""

    state: str


def _bound(function: Callable[[dict[str, Any]], Any], context: dict[str, Any]
           ) -> Callable[[], Any]:
    def call() -> Any:
        return function(context)

    return call


def statemachine_peer(shape: Shape) -> Maker:
    """python-statemachine: a `StateMachine` class with the shape's states and moves, fired by
    its bound events."""
    def make(stack: contextlib.ExitStack) -> Callable[[], str]:
        from statemachine import State, StateMachine

        context = dict(shape.context)
        names = shape.states
        leaving = {source for source, _ in shape.table}
        states = {name: State(name, value=name, initial=(name == shape.start),
                              final=(name not in leaving)) for name in names}
        namespace: dict[str, Any] = {f"st_{index}": states[name]
                                     for index, name in enumerate(names)}
        events: dict[str, Any] = {}
        for (source, event), targets in shape.table.items():
            for target, guard, action in targets:
                options: dict[str, Any] = {}
                if guard is not None:
                    options["cond"] = _bound(guard, context)
                if action is not None:
                    options["after"] = _bound(action, context)
                move = states[source].to(states[target], **options)
                events[event] = move if event not in events else events[event] | move
        # an event's id is its attribute's name, which must be an identifier
        ids = {event: f"ev_{index}" for index, event in enumerate(events)}
        namespace.update({ids[event]: moves for event, moves in events.items()})
        chart = type("BenchChart", (StateMachine,), {**namespace, "__module__": __name__})
        machine = chart(allow_event_without_transition=False)
        walk = [(getattr(machine, ids[event]), expected) for event, expected in shape.walk]
        return _firing(shape, context, walk,
                       lambda: setattr(machine, "current_state_value", shape.start),
                       lambda: str(machine.current_state_value))

    return make


def contenders_of(shape: Shape, *, durable: bool = True, peers: bool = True
                  ) -> list[Contender]:
    """Gives every contender that can walk the shape, the floor first."""
    units = shape.transitions
    found = [Contender("dict FSM (floor)", dict_fsm(shape), units),
             Contender("reference decide", reference_decide(shape), units)]
    if durable and shape.deliverable:
        found += [Contender("runtime, memory store", reference_runtime(shape, "memory"), units),
                  Contender("runtime, SQLite NORMAL", reference_runtime(shape, "NORMAL"), units),
                  Contender("runtime, SQLite FULL", reference_runtime(shape, "FULL"), units)]
    if peers:
        for name, maker, module in (("transitions", transitions_peer, "transitions"),
                                    ("python-statemachine", statemachine_peer, "statemachine")):
            if _importable(module):
                found.append(Contender(name, maker(shape), units))
    return found


def _importable(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


# -- the durable floor: a bare sqlite3 loop -----------------------------------------------------

DAY_MS = 86_400_000


def ping_pong() -> WorkflowDefinition:
    """Gives two wait states that `ping` and `pong` move between, each timing out to `done`:
    every event cancels one timer and schedules another."""
    wait = {"type": "wait", "after": {"delay": "1d", "target": "done"}}
    return load_definition({
        "name": "ping-pong", "context": {"n": 0},
        "events": {"ping": {}, "pong": {}},
        "states": {
            "left": {**wait, "initial": True, "on": {"ping": "right"}},
            "right": {**wait, "on": {"pong": "left"}},
            "done": {"type": "final", "outcome": "success"},
        },
    })


def ping_pong_event(execution_id: str, number: int) -> Event:
    """Gives the `number`th event (from 0) after the start: ping, pong, ping, ..."""
    return Event(f"{execution_id}/e{number}", "ping" if number % 2 == 0 else "pong")


def ping_pong_state(events: int) -> str:
    """Gives the state a run is in after `events` ping-pong events."""
    return "right" if events % 2 else "left"


# The tables the store's transaction writes, with the same keys and the timers' index, so each
# bare statement maintains the same b-trees as the store's.
_BARE_SCHEMA = (
    "CREATE TABLE executions (id TEXT PRIMARY KEY, version INTEGER NOT NULL, "
    "final INTEGER NOT NULL, record TEXT NOT NULL)",
    "CREATE TABLE log (execution_id TEXT NOT NULL REFERENCES executions(id), "
    "sequence INTEGER NOT NULL, event TEXT NOT NULL, decision TEXT NOT NULL, "
    "at INTEGER NOT NULL, PRIMARY KEY (execution_id, sequence))",
    "CREATE TABLE consumed (execution_id TEXT NOT NULL, event_id TEXT NOT NULL, "
    "PRIMARY KEY (execution_id, event_id))",
    "CREATE TABLE timers (execution_id TEXT NOT NULL, timer_id TEXT NOT NULL, "
    "purpose TEXT NOT NULL, fire_at INTEGER NOT NULL, PRIMARY KEY (execution_id, timer_id))",
    "CREATE INDEX timers_due ON timers (fire_at, timer_id)",
    "CREATE TABLE transitions (execution_id TEXT NOT NULL, sequence INTEGER NOT NULL, "
    "definition_version TEXT NOT NULL, record TEXT NOT NULL, attempt INTEGER NOT NULL, "
    "at INTEGER NOT NULL, duration_ms INTEGER NOT NULL, tool TEXT NOT NULL, "
    "outcome TEXT NOT NULL, PRIMARY KEY (execution_id, sequence))",
)

# JSON texts of the store's sizes, made by formatting instead of encoding records.
_EVENT = '{"answers":"","id":"%s","payload":{},"source":"system","type":"%s"}'
_RECORD = (
    '{"after_compensation":"","answered":"","approval":null,"approved":[],"attempt":0,'
    '"compensating":[],"completed":[],"context":{"n":0},"cost":0.0,"definition":"ping-pong",'
    '"effect":null,"exceeded":"","failures":{},"id":"%s","last_event_id":"%s","outcome":null,'
    '"sequence":%d,"started_at":0,"state":"%s","status":"waiting","timers":[{"fire_at":%d,'
    '"id":"%s","purpose":"wait_timeout"}],"transitions":%d,"version":"1",'
    '"visits":{"left":%d,"right":%d}}'
)
_TRANSITION = '{"event":"%s","forced":"","source":"%s","target":"%s"}'


class BareLoop:
    """The durable floor: the rows of one accepted ping-pong event (a consumed id, a log row,
    the execution update, a timer deleted and one inserted, a transition row) written with
    plain sqlite3 under the same pragmas as `SQLiteStore` (or, made by `on_postgres`, with
    plain psycopg into a schema of a PostgreSQL database, as `PostgresStore` writes them)."""

    def __init__(self, path: Path, synchronous: Synchronous, execution_ids: Sequence[str],
                 *, db: Any = None) -> None:
        self.postgres = db is not None
        if db is None:
            db = sqlite3.connect(str(path), isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(f"PRAGMA synchronous={synchronous}")
            db.execute("PRAGMA foreign_keys=ON")
        self.db = db
        self.begin = "BEGIN" if self.postgres else "BEGIN IMMEDIATE"
        self.db.execute(self.begin)
        for statement in _BARE_SCHEMA:
            self.db.execute(statement)
        for execution_id in execution_ids:
            self.execute("INSERT INTO executions VALUES (?, 0, 0, ?)",
                         (execution_id, self._record(execution_id, 0)))
            self.execute("INSERT INTO timers VALUES (?, ?, 'wait_timeout', ?)",
                         (execution_id, self._timer(execution_id, 0), DAY_MS))
        self.db.execute("COMMIT")
        self.upsert_timer = (
            "INSERT INTO timers VALUES (%s, %s, 'wait_timeout', %s) ON CONFLICT "
            "(execution_id, timer_id) DO UPDATE SET fire_at = EXCLUDED.fire_at"
            if self.postgres else "INSERT OR REPLACE INTO timers VALUES (?, ?, 'wait_timeout', ?)")

    @classmethod
    def on_postgres(cls, dsn: str, schema: str, execution_ids: Sequence[str]) -> BareLoop:
        """Gives the loop over a new schema `schema` of the PostgreSQL database `dsn`."""
        import psycopg

        db = psycopg.connect(dsn, autocommit=True)
        db.execute(f"CREATE SCHEMA {schema}")
        db.execute(f"SET search_path TO {schema}")
        return cls(Path(), "NORMAL", execution_ids, db=db)

    def execute(self, sql: str, args: tuple[Any, ...]) -> Any:
        """Runs one statement written with `?` placeholders, in the driver's style."""
        return self.db.execute(sql.replace("?", "%s") if self.postgres else sql, args)

    @staticmethod
    def _timer(execution_id: str, events: int) -> str:
        return f"{execution_id}/{ping_pong_state(events)}/{events // 2 + 1}/after"

    def _record(self, execution_id: str, events: int) -> str:
        visits_right = (events + 1) // 2
        return _RECORD % (execution_id, f"{execution_id}/e{events}", events + 1,
                          ping_pong_state(events), DAY_MS + events,
                          self._timer(execution_id, events), events + 1,
                          events + 1 - visits_right, visits_right)

    def write(self, execution_id: str, number: int) -> None:
        """Writes the rows of event `number` (from 0) of one execution, in the open
        transaction (on PostgreSQL in one pipeline: the writes need no answer)."""
        if self.postgres:
            with self.db.pipeline():
                self._write(execution_id, number)
        else:
            self._write(execution_id, number)

    def _write(self, execution_id: str, number: int) -> None:
        execute = self.execute
        kind = "ping" if number % 2 == 0 else "pong"
        event_id = f"{execution_id}/e{number}"
        sequence = number + 2  # the start event is sequence 1
        execute("INSERT INTO consumed VALUES (?, ?)", (execution_id, event_id))
        execute("INSERT INTO log VALUES (?, ?, ?, 'accepted', ?)",
                (execution_id, sequence, _EVENT % (event_id, kind), number + 1))
        execute("UPDATE executions SET version = ?, final = 0, record = ? WHERE id = ? "
                "AND version = ?", (number + 1, self._record(execution_id, number + 1),
                                    execution_id, number))
        execute("DELETE FROM timers WHERE execution_id = ? AND timer_id = ?",
                (execution_id, self._timer(execution_id, number)))
        self.db.execute(self.upsert_timer, (execution_id, self._timer(execution_id, number + 1),
                                            DAY_MS + number + 1))
        source, target = ping_pong_state(number), ping_pong_state(number + 1)
        execute("INSERT INTO transitions VALUES (?, ?, '1', ?, 0, ?, 0, '', 'waiting')",
                (execution_id, sequence, _TRANSITION % (kind, source, target), number + 1))

    def count(self, table: str) -> int:
        return int(self.db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])

    def close(self) -> None:
        self.db.close()


#: Events per call in the durable groups (also the group commit's batch size).
BATCH = 100


def bare_commit_per_event(bare: BareLoop) -> Callable[[], int]:
    """Gives a call that writes the next `BATCH` events of one execution, one commit each."""
    written = [0]

    def batch() -> int:
        db, first = bare.db, written[0]
        for number in range(first, first + BATCH):
            db.execute(bare.begin)
            bare.write("run", number)
            db.execute("COMMIT")
        written[0] = first + BATCH
        return written[0]

    return batch


def bare_group_commit(bare: BareLoop, ids: Sequence[str]) -> Callable[[], int]:
    """Gives a call that writes one event of each of `BATCH` executions in one commit."""
    rounds = [0]

    def batch() -> int:
        db, number = bare.db, rounds[0]
        db.execute(bare.begin)
        for execution_id in ids:
            bare.write(execution_id, number)
        db.execute("COMMIT")
        rounds[0] = number + 1
        return rounds[0] * len(ids)

    return batch


def runtime_commit_per_event(store: Any) -> Callable[[], str]:
    """Gives a call that delivers the next `BATCH` ping-pong events to one execution through
    the runtime, one commit each."""
    definition = ping_pong()
    runtime = Runtime(store, [definition], {})
    if not isinstance(runtime.start(definition, "run"), Accepted):
        raise HarnessError("ping-pong: the start was not accepted")
    delivered = [0]

    def batch() -> str:
        first = delivered[0]
        decision: Any = None
        for number in range(first, first + BATCH):
            decision = runtime.deliver("run", ping_pong_event("run", number), number + 1)
        delivered[0] = first + BATCH
        return str(decision.execution.state)

    return batch


def runtime_group_commit(store: Any, ids: Sequence[str]) -> Callable[[], str]:
    """Gives a call that delivers one event to each of `BATCH` executions in one commit."""
    definition = ping_pong()
    runtime = Runtime(store, [definition], {})
    for execution_id in ids:
        runtime.start(definition, execution_id)
    rounds = [0]

    def batch() -> str:
        number = rounds[0]
        decisions = runtime.deliver_many(
            [(execution_id, ping_pong_event(execution_id, number)) for execution_id in ids],
            number + 1)
        rounds[0] = number + 1
        return str(decisions[-1].execution.state)  # type: ignore[union-attr]

    return batch


def _durable(synchronous: Synchronous, grouped: bool) -> tuple[Maker, Maker]:
    """Gives the makers of the bare loop and of the runtime for one commit policy."""
    ids = [f"run{index:03d}" for index in range(BATCH)] if grouped else ["run"]

    def folder(stack: contextlib.ExitStack) -> Path:
        return Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="fsmbench-")))

    def bare(stack: contextlib.ExitStack) -> Callable[[], Any]:
        loop = BareLoop(folder(stack) / "bare.db", synchronous, ids)
        stack.callback(loop.close)
        return bare_group_commit(loop, ids) if grouped else bare_commit_per_event(loop)

    def ours(stack: contextlib.ExitStack) -> Callable[[], Any]:
        store = SQLiteStore(folder(stack) / "store.db", synchronous=synchronous)
        stack.callback(store.close)
        return runtime_group_commit(store, ids) if grouped else runtime_commit_per_event(store)

    return bare, ours


# -- groups and the timer -----------------------------------------------------------------------


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


def agree(shape: Shape, *, durable: bool = False) -> dict[str, str]:
    """Walks one round with every contender (those on a disk too, with `durable`); gives where
    each ended, so a caller can check they agree (a contender that walks elsewhere measures
    something else)."""
    ended = {}
    with contextlib.ExitStack() as stack:
        for contender in contenders_of(shape, durable=durable):
            ended[contender.name] = contender.make(stack)()
    return ended


def prefix(shape: Shape, length: int) -> Shape:
    """Gives the shape with its walk cut to its first `length` moves."""
    return replace(shape, walk=shape.walk[:length], events=shape.events[:length],
                   times=shape.times[:length])


# -- the simulator, the engines, the checkers ---------------------------------------------------


def simulate_seeds(simulator: Simulator, seeds: range) -> Callable[[], int]:
    """Gives a call that runs every seed; the call gives the steps taken in all."""
    def run() -> int:
        return sum(simulator.run(seed).steps for seed in seeds)

    return run


def history_of(definition: WorkflowDefinition, records_min: int,
               machine: MachineFactory = ReferenceMachine) -> tuple[HistoryRecord, ...]:
    """Gives a history of at least `records_min` records, faults on: seeded runs one after
    another, each run's executions renamed apart (`s7.x1`) and its steps moved after the last
    run's, so the checkers see one long history."""
    simulator = Simulator(definition, SimOptions(executions=10), machine)
    records: list[HistoryRecord] = []
    seed = 0
    while len(records) < records_min:
        offset = records[-1].step if records else 0
        for record in simulator.run(seed).history:
            moved: Any = record._replace(step=record.step + offset)
            execution = getattr(record, "execution", "")
            if execution:  # each record that names an execution takes its run's name for it
                moved = moved._replace(execution=f"s{seed}.{execution}")
            records.append(moved)
        seed += 1
    return tuple(records)


def read_types(history: Sequence[HistoryRecord]) -> int:
    """The cheapest pass over a history: look at each record's type."""
    seen: dict[type, int] = {}
    for record in history:
        kind = type(record)
        seen[kind] = seen.get(kind, 0) + 1
    return len(history)


def checked(definition: WorkflowDefinition, history: Sequence[HistoryRecord]) -> int:
    """Checks every built-in invariant over a history; gives its length."""
    found = check(definition, history)
    if found:
        raise HarnessError(f"{definition.name}: the benchmark history breaks "
                           f"{found[0].rule}: {found[0].message}")
    return len(history)


def peak_bytes(call: Callable[[], Any]) -> int:
    """Gives the peak of memory allocated while `call` runs (tracemalloc's count)."""
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def native_fuzz(definition: WorkflowDefinition, runs: int, processes: int = 1, *,
                machine: MachineFactory = ReferenceMachine,
                strategy: str | None = None,
                line_coverage: tuple[str, ...] = ()) -> Callable[[], int]:
    """Gives a call that fuzzes `runs` seeded runs (every fault, one execution each, nothing
    written; the default strategy unless told, steered by `line_coverage`'s arcs too); the
    call gives the steps simulated."""
    options = FuzzOptions(runs=runs, replay_dir=None, processes=processes,
                          sim=SimOptions(executions=1))
    if strategy is not None:
        options = replace(options, strategy=strategy, line_coverage=line_coverage)

    def campaign() -> int:
        report = fuzz(definition, options, machine=machine)
        if report.failures:
            raise HarnessError(f"{definition.name}: the benchmark campaign failed: "
                               f"{report.failures[0].violations[0].message}")
        return report.steps

    return campaign


def hypothesis_fuzz(definition: WorkflowDefinition, examples: int, steps: int = 30, *,
                    machine: MachineFactory = ReferenceMachine,
                    isolate: bool = True) -> Callable[[], int]:
    """Gives a call that runs the Hypothesis machine of the same workflow for `examples`
    examples (every fault it can draw, one execution; in a child process, or with `isolate`
    false in this one); the call gives the steps simulated."""
    from hypothesis import HealthCheck, settings
    from hypothesis.stateful import run_state_machine_as_test

    from harness.engines.stateful import workflow_machine

    def campaign() -> int:
        taken = [0]
        tested = workflow_machine(definition, machine=machine,
                                  options=SimOptions(executions=1), isolate=isolate)
        teardown = tested.teardown

        def counting(self: Any) -> None:
            teardown(self)
            taken[0] += self.steps

        tested.teardown = counting  # type: ignore[method-assign]
        run_state_machine_as_test(tested, settings=settings(
            max_examples=examples, stateful_step_count=steps, database=None, deadline=None,
            derandomize=True, suppress_health_check=list(HealthCheck)))
        return taken[0]

    return campaign


# -- the suite ----------------------------------------------------------------------------------

PEERS = ("transitions", "python-statemachine")


def shape_group(shape: Shape, title: str, *, durable: bool = True) -> Group:
    """Gives the group of every contender on one shape, after checking they walk alike."""
    # the whole walk, and a part of it that ends away from where the walk starts (a round of
    # the cycle and of a ring ends where it began, which a contender that never moved would)
    for walked in (shape, prefix(shape, len(shape.walk) // 2 + 1)):
        ended = agree(walked, durable=durable)
        if set(ended.values()) != {walked.walk[-1][1]}:
            raise HarnessError(f"{shape.name}: the walk ends in {walked.walk[-1][1]!r}, the "
                               f"contenders end in different states: {ended}")
    return Group(f"{title} ({shape.name}, {shape.transitions} transitions a round)",
                 tuple(contenders_of(shape, durable=durable)))


def durable_groups() -> list[Group]:
    """Gives the runtime over SQLite beside the bare loop, per commit policy."""
    groups = []
    policies: tuple[tuple[str, Synchronous, bool], ...] = (
            ("durable: SQLite NORMAL, commit per event", "NORMAL", False),
            ("durable: SQLite FULL, commit per event", "FULL", False),
            ("durable: SQLite NORMAL, group commit of 100", "NORMAL", True))
    for title, synchronous, grouped in policies:
        bare, ours = _durable(synchronous, grouped)
        groups.append(Group(f"{title} (ping-pong)", (
            Contender("bare sqlite3 loop (floor)", bare, BATCH, "event"),
            Contender("reference runtime", ours, BATCH, "event"))))
    return groups


#: Where the PostgreSQL groups run (a libpq connection string); without it they are skipped
POSTGRES_DSN_VARIABLE = "FSMHARNESS_POSTGRES_DSN"


def postgres_groups(dsn: str | None) -> list[Group]:
    """Gives the runtime over PostgreSQL beside a bare psycopg loop writing the same rows, a
    commit per event and group commit of 100, each contender in a schema of its own (dropped
    after); with no `dsn`, the groups with a note saying what they need."""
    titles = (("durable: PostgreSQL, commit per event (ping-pong)", False),
              ("durable: PostgreSQL, group commit of 100 (ping-pong)", True))
    if not dsn:
        note = (f"skipped: no PostgreSQL server (set {POSTGRES_DSN_VARIABLE} to a connection "
                "string, and install the postgres extra)")
        return [Group(title, (), note=note) for title, _ in titles]
    return [Group(title, (Contender("bare psycopg loop (floor)",
                                    _postgres_maker(dsn, grouped, bare=True), BATCH, "event"),
                          Contender("reference runtime", _postgres_maker(dsn, grouped, bare=False),
                                    BATCH, "event")))
            for title, grouped in titles]


def _postgres_maker(dsn: str, grouped: bool, *, bare: bool) -> Maker:
    ids = [f"run{index:03d}" for index in range(BATCH)] if grouped else ["run"]

    def make(stack: contextlib.ExitStack) -> Callable[[], Any]:
        import uuid

        import psycopg

        from reference_machine import PostgresStore

        schema = f"fsmbench_{uuid.uuid4().hex[:12]}"

        def drop() -> None:
            with psycopg.connect(dsn, autocommit=True) as db:
                db.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")

        stack.callback(drop)
        if bare:
            loop = BareLoop.on_postgres(dsn, schema, ids)
            stack.callback(loop.close)
            return bare_group_commit(loop, ids) if grouped else bare_commit_per_event(loop)
        store = PostgresStore(dsn, schema=schema)
        stack.callback(store.close)
        return runtime_group_commit(store, ids) if grouped else runtime_commit_per_event(store)

    return make


def simulator_group(definition: WorkflowDefinition, machine: MachineFactory, quick: bool
                    ) -> Group:
    """Gives simulated steps with and without faults on a definition's machine."""
    seeds = range(5 if quick else 20)
    quiet = Simulator(definition, SimOptions(plan=no_faults()), machine)
    faulty = Simulator(definition, SimOptions(), machine)
    return Group(f"simulator: {definition.name}, 3 executions a run", (
        Contender("simulate, no faults (floor)",
                  lambda stack: simulate_seeds(quiet, seeds), 0, "step"),
        Contender("simulate, every fault", lambda stack: simulate_seeds(faulty, seeds), 0,
                  "step")))


#: One logged execution: its id, then each event its store logged with the time it came.
EventLog = tuple[str, tuple[tuple[Event, int], ...]]


def event_logs(definition: WorkflowDefinition, seeds: range,
               options: SimOptions | None = None) -> list[tuple[EventLog, ...]]:
    """Runs the seeds on the reference machine (every fault, unless `options` say else);
    gives, run by run, each execution's logged events in the order its store logged them."""
    made: list[ReferenceMachine] = []

    def keeping(definition: WorkflowDefinition, tools: Any, probe: Any) -> ReferenceMachine:
        machine = ReferenceMachine(definition, tools, probe)
        made.append(machine)
        return machine

    simulator = Simulator(definition, options or SimOptions(), keeping)
    runs: list[tuple[EventLog, ...]] = []
    for seed in seeds:
        simulator.run(seed)
        store = made[-1].store
        runs.append(tuple((execution_id, tuple((entry.event, entry.at)
                                               for entry in store.log(execution_id)))
                          for execution_id in store.execution_ids()))
    return runs


def logged_events(runs: Sequence[tuple[EventLog, ...]]) -> int:
    """Gives how many events the runs' stores logged in all."""
    return sum(len(log) for run in runs for _, log in run)


def redeliver(definition: WorkflowDefinition, runs: Sequence[tuple[EventLog, ...]]
              ) -> Callable[[], int]:
    """Gives a call that delivers every logged event again, in its order and at its time, to
    the reference runtime over a fresh memory store per run (effects deferred, as the
    simulator has them): the machine's own work on those events, with nothing around it. The
    call gives the events delivered."""
    events = logged_events(runs)

    def run() -> int:
        for logs in runs:
            runtime = Runtime(MemoryStore(), [definition], {}, defer_effects=True)
            store, deliver = runtime.store, runtime._deliver  # `deliver` refuses derived ids
            for execution_id, log in logs:
                store.create(new_execution(definition, execution_id))
                for event, now in log:
                    deliver(execution_id, event, now)
        return events

    return run


def step_group(definition: WorkflowDefinition, quick: bool) -> Group:
    """Gives simulated runs (every fault, the reference machine over a memory store) beside
    the runtime delivering the events those runs' stores logged, per logged event: what the
    simulator costs over the machine's own work."""
    seeds = range(5 if quick else 20)
    logs = event_logs(definition, seeds)
    events = logged_events(logs)
    faulty = Simulator(definition, SimOptions())
    return Group(f"simulator: {definition.name}, per logged event, 3 executions a run", (
        Contender("runtime deliver, the same events (floor)",
                  lambda stack: redeliver(definition, logs), events, "event"),
        Contender("simulate, every fault", lambda stack: simulate_seeds(faulty, seeds), events,
                  "event")))


def exhaustive_group(definition: WorkflowDefinition, machine: MachineFactory, quick: bool
                     ) -> Group:
    """Gives the exhaustive search's time per distinct state beside a bare breadth-first
    search of the same graph, on the same simulator, plan and machine. A bare BFS that could
    keep its states expands every edge once: one simulated step from a state already reached
    per edge, so its time per distinct state is a simulated step's times the graph's edges
    per state (the edges are the runs the search makes: one per way a step from a frontier
    state can go). The search pays, on top, the rebuilding of each path from the start, the
    fingerprints and the checks of every run."""
    from harness.engines.exhaustive import ExploreOptions, explore

    depth = 4 if quick else 5
    options = ExploreOptions(depth=depth)
    graph = explore(definition, options, machine=machine)
    sim = SimOptions(steps_max=depth, liveness_steps=0,
                     plan=replace(plan_for(definition), swarm=False))
    simulator = Simulator(definition, sim, machine)
    seeds = range(10 if quick else 40)

    def bare_bfs(stack: contextlib.ExitStack) -> Callable[[], float]:
        steps = simulate_seeds(simulator, seeds)
        return lambda: steps() * graph.states / graph.runs  # the states those steps expand

    def search(stack: contextlib.ExitStack) -> Callable[[], int]:
        return lambda: explore(definition, options, machine=machine).states

    def extra() -> dict[str, dict[str, Any]]:
        return {"exhaustive search, per distinct state": {
            "states": graph.states, "edges": graph.runs,
            "edges_per_state": round(graph.runs / max(graph.states, 1), 2)}}

    return Group(f"exhaustive: {definition.name}, depth {depth}, 1 fault", (
        Contender("bare BFS, a simulated step per edge (floor)", bare_bfs, 0, "state"),
        Contender("exhaustive search, per distinct state", search, 0, "state")), extra=extra)


def engines_group(definition: WorkflowDefinition, machine: MachineFactory, quick: bool
                  ) -> Group:
    """Gives native fuzzing beside the Hypothesis machine on a definition's machine."""
    return Group(f"engines: {definition.name}, every fault, 1 execution a run", (
        Contender("native fuzz (floor)",
                  lambda stack: native_fuzz(definition, 20 if quick else 100, machine=machine),
                  0, "step"),
        Contender("hypothesis machine",
                  lambda stack: hypothesis_fuzz(definition, 5 if quick else 25,
                                                machine=machine), 0, "step"),
        Contender("hypothesis machine, in the test's process (isolate=False)",
                  lambda stack: hypothesis_fuzz(definition, 5 if quick else 25,
                                                machine=machine, isolate=False), 0, "step")))


def checker_groups(definition: WorkflowDefinition, sizes: Sequence[int],
                   machine: MachineFactory = ReferenceMachine) -> list[Group]:
    """Gives a pass of every invariant beside a bare read of the records, per history size,
    with the peak memory of a checking pass per record."""
    groups = []
    for size in sizes:
        history = history_of(definition, size, machine)
        label = f"{size // 1000}k" if size >= 1000 else str(size)

        def extra(history: tuple[HistoryRecord, ...] = history) -> dict[str, dict[str, Any]]:
            peak = peak_bytes(lambda: checked(definition, history))
            return {"all invariants": {"peak_bytes_per_record": peak / len(history),
                                       "records": len(history)}}

        groups.append(Group(f"checkers: {label} records of {definition.name}", (
            Contender("read each record (floor)", _calling(read_types, history), len(history),
                      "record"),
            Contender("all invariants", _calling(checked, definition, history), len(history),
                      "record")), extra=extra))
    return groups


def process_group(definition: WorkflowDefinition, machine: MachineFactory, quick: bool
                  ) -> Group:
    """Gives one campaign on one process beside the same on two."""
    runs = 40 if quick else 300
    return Group(f"scaling: processes, {runs} fuzz runs of {definition.name}", (
        Contender("1 process (floor)",
                  lambda stack: native_fuzz(definition, runs, 1, machine=machine), 0, "step"),
        Contender("2 processes",
                  lambda stack: native_fuzz(definition, runs, 2, machine=machine), 0,
                  "step")))


def cluster_group(definition: WorkflowDefinition, machine: MachineFactory, quick: bool
                  ) -> Group:
    """Gives one campaign on one local process beside the same as tasks on a local Dask
    cluster of two workers: made for each campaign (its start-up counted, as `--executor
    dask` alone pays it) and kept between campaigns (a scheduler given by address)."""
    runs = 40 if quick else 300
    title = f"scaling: cluster, {runs} fuzz runs of {definition.name}"
    if not _importable("distributed"):
        return Group(title, (), note="skipped: Dask's distributed is not installed (pip "
                                     "install 'fsmharness[dask]')")

    def campaign(scheduler: str | None) -> Callable[[], int]:
        options = FuzzOptions(runs=runs, replay_dir=None, processes=2, executor="dask",
                              scheduler=scheduler, sim=SimOptions(executions=1))

        def call() -> int:
            report = fuzz(definition, options, machine=machine)
            if report.failures:
                raise HarnessError(f"{definition.name}: the benchmark campaign failed")
            return report.steps

        return call

    def kept(stack: contextlib.ExitStack) -> Callable[[], int]:
        import dask
        from distributed import LocalCluster

        # workers that may fork, as `--executor dask` makes them: each batch runs in a child
        stack.enter_context(dask.config.set({"distributed.worker.daemon": False}))
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                               dashboard_address=None, silence_logs=40)
        stack.callback(cluster.close)
        return campaign(cluster.scheduler_address)

    return Group(title, (
        Contender("1 process (floor)",
                  lambda stack: native_fuzz(definition, runs, 1, machine=machine), 0, "step"),
        Contender("Dask, a local cluster of 2 made per campaign",
                  lambda stack: campaign(None), 0, "step"),
        Contender("Dask, a local cluster of 2 kept", kept, 0, "step")))


#: Rounds of the bare loop a ceiling call runs in all (about a 300-run campaign's time)
CEILING_WORK = 2_000_000


def _busy(rounds: int) -> int:
    """Plain interpreter work (dict stores, integer arithmetic): what any Python process does
    and nothing shared between processes."""
    table: dict[int, int] = {}
    for number in range(rounds):
        table[number & 1023] = number
    return rounds


def split_work(processes: int, rounds: int = CEILING_WORK) -> Callable[[], int]:
    """Gives a call that runs `rounds` of the bare loop split evenly over `processes` forked
    children, and waits for them all; the call gives the rounds run."""
    context = multiprocessing.get_context("fork")

    def run() -> int:
        children = [context.Process(target=_busy, args=(rounds // processes,))
                    for _ in range(processes)]
        for child in children:
            child.start()
        for child in children:
            child.join()
        return rounds

    return run


def ceiling_group() -> Group:
    """Gives the same plain work on one process beside it split over two: what this machine
    itself gives two processes (on shared or busy cores, less than 2), which no campaign
    can beat."""
    return Group("scaling: processes, bare CPU work split the same way (this machine's ceiling)",
                 (Contender("1 process (floor)", lambda stack: split_work(1), 0, "round"),
                  Contender("2 processes", lambda stack: split_work(2), 0, "round")))


def campaign_peak(definition: WorkflowDefinition, runs: int,
                  machine: MachineFactory = ReferenceMachine, strategy: str | None = None
                  ) -> int:
    """Gives the peak of memory the campaign's own process allocates over a fuzz campaign of
    `runs` runs (tracemalloc's count; the runs' worker processes have their own), after a
    campaign of a few runs has made what is made once (tables, caches)."""
    native_fuzz(definition, 8, machine=machine, strategy=strategy)()
    return peak_bytes(native_fuzz(definition, runs, machine=machine, strategy=strategy))


def memory_group(definition: WorkflowDefinition, machine: MachineFactory, quick: bool
                 ) -> Group:
    """Gives a short campaign beside one thirty times longer (ten when `quick`: too short for
    the peak to settle, a check that the group runs), with the peak memory of each: a
    campaign keeps what its runs add up to, not each run, so the peak should not grow."""
    short, long = (20, 200) if quick else (1_000, 30_000)

    names = {short: f"{short:,} runs (floor)", long: f"{long:,} runs"}

    def extra() -> dict[str, dict[str, Any]]:
        return {names[count]: {"peak_bytes": campaign_peak(definition, count, machine),
                               "runs": count}
                for count in (short, long)}

    return Group(f"memory: fuzz campaigns of {definition.name}", (
        Contender(names[short],
                  lambda stack: native_fuzz(definition, short, machine=machine), 0, "step"),
        Contender(names[long],
                  lambda stack: native_fuzz(definition, long, machine=machine), 0, "step")),
        extra=extra)


#: What `--only` matches: the section titles `suite` gives, in the order they run.
SECTIONS = ("shape: 8-state cycle", "shape: 200-state ring", "shape: scenario", "durable",
            "simulator", "engines", "exhaustive", "checkers", "scaling: states",
            "scaling: processes", "scaling: cluster", "memory", "hunt", "langgraph")
#: The section that starts local Dask clusters: run only when asked (`suite`'s `cluster`).
CLUSTER = "scaling: cluster"


def _calling(work: Callable[..., Any], *args: Any) -> Maker:
    """Gives a maker whose unit of work is `work(*args)` (nothing to set up)."""
    return lambda stack: lambda: work(*args)


def _listed(make: Callable[..., Group], *args: Any) -> Callable[[], list[Group]]:
    """Gives a section's groups: the one group `make(*args)` builds, built when chosen."""
    return lambda: [make(*args)]


def _scenario_shape_group(definition: WorkflowDefinition) -> Group:
    return shape_group(scenario(definition), "shape: scenario")


def _hunt_group(definition: WorkflowDefinition, machine: MachineFactory, quick: bool
                ) -> Group:
    from harness.bench.hunt import hunt_group  # it builds on this module's groups

    group: Group = hunt_group(definition, machine, quick)
    return group


def _langgraph_groups(quick: bool) -> list[Group]:
    # imported when chosen: the module builds on this one's groups and contenders
    from harness.bench.langgraph_group import langgraph_groups

    return langgraph_groups(quick)


def suite(targets: Sequence[Target] = (), *, quick: bool = False, only: Sequence[str] = (),
          cluster: bool = False) -> list[tuple[str, Callable[[], list[Group]]]]:
    """Gives the sections `fsmharness bench` runs, each a title and what builds its groups
    (building one walks its shapes and makes its histories, so only the chosen are built):
    the shapes (a scenario for each target's definition, else the bundled refund scenario),
    the durable groups, the simulator and the engines on each target's machine, the checkers
    and the scaling groups (states 8, 200, 2,000; history 1k and 100k records; 1 and 2
    processes), then a LangGraph graph bare and under the harness (a group with no
    contenders and a note when langgraph is not installed). The cluster section, which
    starts local Dask clusters, runs only when asked: with `cluster`, or an `only` text that
    holds "cluster". `only` keeps the sections whose title holds one of its texts; `quick`
    shrinks the work (a 10k history, fewer runs, smaller campaigns, the 200-state ring
    walked without the SQLite contenders), not the shapes."""
    targets = list(targets) or [
        Target(str(DEFAULT_SCENARIO), load_definition(DEFAULT_SCENARIO), ReferenceMachine)]
    first = targets[0]
    sections: list[tuple[str, Callable[[], list[Group]]]] = [
        ("shape: 8-state cycle", lambda: [shape_group(cycle8(), "shape: 8-state cycle")]),
        # quick: the SQLite contenders walk the cycle only (a round of the ring is 400 commits)
        ("shape: 200-state ring", lambda: [shape_group(ring(200), "shape: 200-state ring",
                                                       durable=not quick)]),
    ]
    for target in targets:
        definition, machine = target.definition, target.machine
        sections.append((f"shape: scenario {definition.name}",
                         _listed(_scenario_shape_group, definition)))
    sections.append(("durable", durable_groups))
    sections.append(("durable: postgres", lambda: postgres_groups(
        os.environ.get(POSTGRES_DSN_VARIABLE))))
    for target in targets:
        definition, machine = target.definition, target.machine
        sections += [
            (f"simulator {definition.name}", _listed(simulator_group, definition, machine, quick)),
            (f"simulator: per event {definition.name}", _listed(step_group, definition, quick)),
            (f"engines {definition.name}", _listed(engines_group, definition, machine, quick)),
            (f"exhaustive {definition.name}", _listed(exhaustive_group, definition, machine,
                                                      quick))]
    sections += [
        ("checkers", lambda: checker_groups(first.definition,
                                            (1_000, 10_000 if quick else 100_000),
                                            first.machine)),
        ("scaling: states", lambda: [shape_group(ring(8), "scaling: states", durable=False),
                                     shape_group(ring(2000), "scaling: states",
                                                 durable=False)]),
        ("scaling: processes", lambda: [process_group(first.definition, first.machine,
                                                      quick), ceiling_group()]),
        (CLUSTER, lambda: [cluster_group(first.definition, first.machine, quick)]),
        ("memory", lambda: [memory_group(first.definition, first.machine, quick)]),
        ("hunt", lambda: [_hunt_group(first.definition, first.machine, quick)]),
        ("langgraph", lambda: _langgraph_groups(quick)),
    ]
    if not (cluster or any("cluster" in text for text in only)):
        sections = [(title, build) for title, build in sections if title != CLUSTER]
    if only:
        sections = [(title, build) for title, build in sections
                    if any(text in title for text in only)]
    return sections


# -- the document, the aims, the comparison ----------------------------------------------------

BENCH_KIND = "fsmharness.bench"
BENCH_FORMAT = 1


def document(measured: Sequence[Measured], *, seconds: float, quick: bool,
             skipped: Sequence[Group] = ()) -> dict[str, Any]:
    """Gives the JSON document of a bench run: each figure with its ratio to its group's floor
    and, in the shape groups, each peer's time divided by it (how many times faster it is);
    the groups `skipped` (none measured: what they need is not installed) with their notes."""
    import platform

    floors: dict[str, float] = {}
    peers: dict[tuple[str, str], float] = {}
    for figure in measured:
        floors.setdefault(figure.group, figure.per_op_s)
        if figure.contender in PEERS:
            peers[(figure.group, figure.contender)] = figure.per_op_s
    results = []
    for figure in measured:
        row: dict[str, Any] = {
            "group": figure.group, "contender": figure.contender, "unit": figure.unit,
            "per_op_us": round(figure.per_op_s * 1e6, 4), "rate": round(figure.rate, 1),
            "x_floor": round(figure.per_op_s / floors[figure.group], 3),
        }
        speedups = {peer: round(peers[(figure.group, peer)] / figure.per_op_s, 3)
                    for peer in PEERS if (figure.group, peer) in peers}
        if speedups:
            row["speedup_vs"] = speedups
        row.update(figure.extra)
        results.append(row)
    doc: dict[str, Any] = {
        "kind": BENCH_KIND, "format": BENCH_FORMAT,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": platform.python_version(), "implementation": platform.python_implementation(),
        "platform": platform.platform(terse=True), "cpus": os.cpu_count() or 1,
        "seconds": seconds, "quick": quick, "results": results,
    }
    if skipped:
        doc["skipped"] = [{"group": group.name, "note": group.note} for group in skipped]
    doc["aims"] = aims(results)
    return doc


def _find(results: Sequence[dict[str, Any]], group_prefix: str, contender: str
          ) -> dict[str, Any] | None:
    for row in results:
        if row["group"].startswith(group_prefix) and row["contender"] == contender:
            return row
    return None


Results = Sequence[dict[str, Any]]
#: What an aim reads off a run's rows: the figure and the words it fills in the aim's text (a
#: history's size), or None when the groups it needs were not run.
Figure = Callable[[Results], tuple[float, str] | None]


@dataclass(frozen=True, slots=True)
class Aim:
    """A figure the project aims for: documentation of where it stands, not a verdict on a
    run (`fsmharness bench --check-aims` makes a missed one exit 1)."""

    text: str  # `{}` takes the words the figure gives
    target: float
    higher: bool  # the figure should be at least the target, else at most
    figure: Figure

    def judged(self, results: Results) -> dict[str, Any] | None:
        """Gives the aim as a row of the document, or None when its figures are missing."""
        found = self.figure(results)
        if found is None:
            return None
        value, words = found
        met = value >= self.target if self.higher else value <= self.target
        return {"aim": self.text.format(words), "measured": round(value, 2),
                "target": f"{'>=' if self.higher else '<='} {self.target:g}", "met": met}


def _speedup_of_decide(shape: str) -> Figure:
    def figure(results: Results) -> tuple[float, str] | None:
        row = _find(results, shape, "reference decide")
        if row is None or "transitions" not in row.get("speedup_vs", {}):
            return None
        return row["speedup_vs"]["transitions"], ""

    return figure


def _ratio_of(group_prefix: str, contender: str, *, inverse: bool = False) -> Figure:
    def figure(results: Results) -> tuple[float, str] | None:
        row = _find(results, group_prefix, contender)
        if row is None or (inverse and not row["x_floor"]):
            return None
        return (1 / row["x_floor"] if inverse else row["x_floor"]), ""

    return figure


def _per_logged_event(results: Results) -> tuple[float, str] | None:
    row = next((r for r in results if r["group"].startswith("simulator: ")
                and "per logged event" in r["group"]
                and r["contender"] == "simulate, every fault"), None)
    return (row["x_floor"], "") if row else None


def _checkers(field: str | None) -> Figure:
    """Gives the larger history's figure over the 1k one's: the ratio to the bare pass, or
    the `field` of both (peak memory per record)."""
    def figure(results: Results) -> tuple[float, str] | None:
        small = _find(results, "checkers: 1k", "all invariants")
        large = next((r for r in results if r["group"].startswith("checkers:")
                      and r["contender"] == "all invariants" and r is not small), None)
        if small is None or large is None:
            return None
        key = field or "x_floor"
        return large[key] / small[key], large["group"].split()[1]

    return figure


def _fuzz_memory(results: Results) -> tuple[float, str] | None:
    memory = [r for r in results if r["group"].startswith("memory: fuzz")]
    if len(memory) != 2 or not all("peak_bytes" in r for r in memory):
        return None
    short, long = memory
    return (long["peak_bytes"] / max(short["peak_bytes"], 1),
            f"{long['runs']:,} runs over {short['runs']:,}")


#: Issue 21's aims, and issue 8's that still hold, in the order the document lists them.
AIMS: tuple[Aim, ...] = (
    *(Aim(f"decide faster than transitions ({shape[7:]})", target, True,
          _speedup_of_decide(shape))
      for shape, target in (("shape: 8-state cycle", 6.0), ("shape: 200-state ring", 6.0),
                            ("shape: scenario", 1.5))),
    *(Aim(f"SQLite runtime over the bare sqlite3 loop ({policy})", target, False,
          _ratio_of(f"durable: SQLite {policy}", "reference runtime"))
      for policy, target in (("NORMAL, commit per event", 2.0),
                             ("FULL, commit per event", 2.0),
                             ("NORMAL, group commit of 100", 1.5))),
    Aim("simulated step over the runtime's deliver, per logged event (every fault)", 3, False,
        _per_logged_event),
    Aim("native fuzz steps/s over the Hypothesis machine's", 10, True,
        _ratio_of("engines:", "hypothesis machine")),
    Aim("2 processes over 1 (speed-up of a fuzz campaign)", 1.8, True,
        _ratio_of("scaling: processes, ", "2 processes", inverse=True)),
    Aim("exhaustive search: time per distinct state over a bare BFS of the same graph", 5,
        False, _ratio_of("exhaustive:", "exhaustive search, per distinct state")),
    # per record against a bare pass over the same records: a long history's records sit
    # farther apart in memory, which slows every pass alike and is not the checkers'
    Aim("checkers linear: time per record over a bare pass's, {} over 1k", 1.5, False,
        _checkers(None)),
    Aim("checkers bounded: peak memory per record, {} over 1k", 1.5, False,
        _checkers("peak_bytes_per_record")),
    Aim("fuzz memory bounded: peak of {}", 1.5, False, _fuzz_memory),
)


def aims(results: Results, table: Sequence[Aim] | None = None) -> list[dict[str, Any]]:
    """Gives each aim of `table` (by default `AIMS`) with the figure this run measured and
    whether it was met; an aim whose figures are missing (a peer not installed, a section
    not run) is left out."""
    judged = (aim.judged(results) for aim in (AIMS if table is None else table))
    return [row for row in judged if row is not None]


def missed(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Gives the aims a bench document says were missed."""
    return [aim for aim in doc["aims"] if not aim["met"]]


#: A bench document is a few hundred rows: 16 MB is far past any.
BASELINE_BYTES_MAX = 16_000_000


def load_baseline(path: str | Path) -> dict[str, Any]:
    """Reads a saved bench document; a file that is not one raises `HarnessError`."""
    try:
        data, _ = read_document(path, what="a bench document", bytes_max=BASELINE_BYTES_MAX,
                                yaml_ok=False)
    except FileNotFoundError as exc:
        raise HarnessError(f"{path}: no such file") from exc
    except OSError as exc:
        raise HarnessError(f"{path}: cannot read a bench document: {exc.strerror}") from exc
    except DefinitionSyntaxError as exc:
        problem = document_problem(exc, "cannot read a bench document")
        raise HarnessError(f"{path}: {problem}") from exc
    if not isinstance(data, dict) or data.get("kind") != BENCH_KIND:
        raise HarnessError(f'{path}: not an fsmharness bench document (expected "kind": '
                           f'"{BENCH_KIND}")')
    if data.get("format") != BENCH_FORMAT:
        raise HarnessError(f"{path}: bench format {data.get('format')!r}; this fsmharness "
                           f"reads format {BENCH_FORMAT}")
    rows = data.get("results")
    if not isinstance(rows, list) or not all(
            isinstance(r, dict) and isinstance(r.get("group"), str)
            and isinstance(r.get("contender"), str)
            and isinstance(r.get("x_floor"), int | float)
            and isinstance(r.get("per_op_us"), int | float) for r in rows):
        raise HarnessError(f"{path}: 'results' must be a list of rows with group, contender, "
                           f"per_op_us and x_floor")
    return data


def compare(doc: Mapping[str, Any], baseline: Mapping[str, Any], tolerance: float
            ) -> list[dict[str, Any]]:
    """Gives, for every figure in both runs, how its ratio to the floor moved (the ratio, not
    the time, so that a baseline from another machine still compares); a figure whose ratio
    grew by more than `tolerance` (0.3: 30%) regressed. A floor's ratio is always 1."""
    then = {(r["group"], r["contender"]): r for r in baseline["results"]}
    found = []
    for row in doc["results"]:
        old = then.get((row["group"], row["contender"]))
        if old is None or (row["x_floor"] == 1 and old["x_floor"] == 1):
            continue
        change = row["x_floor"] / old["x_floor"] - 1 if old["x_floor"] else 0.0
        found.append({"group": row["group"], "contender": row["contender"],
                      "x_floor_then": old["x_floor"], "x_floor_now": row["x_floor"],
                      "per_op_us_then": old["per_op_us"], "per_op_us_now": row["per_op_us"],
                      "change": round(change, 3), "regressed": change > tolerance})
    return found
