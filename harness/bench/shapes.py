"""The shape groups of `fsmharness bench` (`--only shape`, and the rings of `scaling: states`):
machine shapes and the contenders that walk them.

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
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from fault_injection import no_faults
from harness.bench.timing import Contender, Group, Maker, importable
from harness.errors import HarnessError
from harness.sim.machine import ReferenceMachine
from harness.sim.simulator import SimOptions, Simulator
from reference_machine import (
    Accepted,
    Event,
    Execution,
    MemoryStore,
    Runtime,
    SQLiteStore,
    Synchronous,
    WorkflowDefinition,
    decide,
    load_definition,
    new_execution,
    start_event,
)

__all__ = [
    "DEFAULT_SCENARIO",
    "PEERS",
    "ROOT",
    "Action",
    "Guard",
    "Shape",
    "agree",
    "contenders_of",
    "cycle8",
    "dict_fsm",
    "prefix",
    "reference_decide",
    "reference_runtime",
    "ring",
    "scenario",
    "shape_group",
    "statemachine_peer",
    "transitions_peer",
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


# -- contenders ----------------------------------------------------------------------------------


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
            if importable(module):
                found.append(Contender(name, maker(shape), units))
    return found


PEERS = ("transitions", "python-statemachine")


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
