"""Machines written with `transitions` or python-statemachine, as machines under test.

Users who already have a machine fuzz it as it is: `transitions_target(build)` or
`statemachine_target(build)` gives a machine factory with a `definition` attribute, so it is a
target by itself (`fsmharness fuzz orders:target`, `@pytest.mark.fsm_fuzz(orders.target)`).

- **The definition is read off the machine**: its states (final ones end the run, with the
  outcome `outcomes` names, "success" by default), its events (every trigger but the
  `to_<state>` shortcuts of `transitions`) and its transitions, so the simulator sends the
  events the machine declares and the checkers hold it to the moves it declares. Conditions
  stay the machine's own: a transition its condition refuses is an event `rejected`.
- **Effects go through the tool world.** `build(box)` makes one machine per execution; the
  `ToolBox` it is given calls the simulated tools (`box.call("pay.charge", {...})`) under the
  key `{execution id}/{state}/{version}` unless given one, and tells the callbacks the
  execution (`box.execution_id`, `box.context`), the event being delivered (`box.event`) and
  the time (`box.now`). The tools are declared with `tools=` as in a definition file.
- **Durable state is what a real deployment would store**: per execution its state, its
  version (accepted transitions) and what `persist` saves of the model; the ids of events seen
  too, when `dedupe` is on (the default: drop a redelivered event; turn it off to find out
  what a duplicate does to your callbacks). A save is a compare-and-set, as a database row's
  would be: a worker whose execution another worker saved first is told `ignored:conflict`.
  Everything else is memory: a crash drops the live machines, and the next event rebuilds one
  with `build` and puts it in the stored state (a restore, not an entry: tool calls made
  while it is rebuilt are not made). Callbacks run synchronously, so a crash can come between
  a tool call and the save (`after_tool_call`) or just before the save (`before_save`), as it
  would in production.
- **Async machines** (a `transitions` `AsyncMachine`, a python-statemachine machine with async
  callbacks) are wrapped as an `AsyncPeerMachine`, the protocol's async form: the simulator
  awaits each trigger's coroutine on the run's own event loop (`harness.sim.asyncloop`), on
  virtual time, with tasks ready together run in an order the seed fixes.

Neither library is a dependency of fsmharness: install `fsmharness[transitions]` or
`fsmharness[statemachine]`.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import re
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from harness.errors import Unsupported
from harness.sim.machine import Observation, Probe
from reference_machine import (
    RESERVED_PREFIXES,
    Event,
    Failure,
    Tool,
    ToolOutcome,
    WorkflowDefinition,
    load_definition,
)
from reference_machine import reachable_from as reach

__all__ = [
    "CRASH_POINTS",
    "AdapterError",
    "AsyncPeerMachine",
    "PeerMachine",
    "PeerTarget",
    "ToolBox",
    "statemachine_target",
    "transitions_target",
]

#: The points a peer machine can crash at, in the order a delivery passes them.
CRASH_POINTS = ("after_tool_call", "before_save")

#: save(model) -> a JSON-able value kept on the disk; load(model, value) puts it back.
Persist = tuple[Callable[[Any], Any], Callable[[Any, Any], None]]


class AdapterError(Unsupported):
    """A peer machine the adapter cannot wrap (nested states, a library that is missing), or
    a construct of it met while it runs: the user's input, never the machine's failure."""


class ToolBox:
    """What one execution's machine is given: the tools, and what is being done now."""

    __slots__ = ("_probe", "_tools", "context", "event", "execution_id", "muted", "now",
                 "state", "version")

    def __init__(self, execution_id: str, context: Mapping[str, Any],
                 tools: Mapping[str, Tool], probe: Probe) -> None:
        self.execution_id = execution_id
        self.context: dict[str, Any] = dict(context)
        self.event: Event | None = None
        self.now = 0
        self.state = ""
        self.version = 0
        #: while the adapter rebuilds a machine from the disk (or reads one to describe it):
        #: a restore is no new entry into a state, so its callbacks' calls are not made
        self.muted = False
        self._tools, self._probe = tools, probe

    def call(self, tool: str, input: Mapping[str, Any], key: str | None = None
             ) -> ToolOutcome:
        """Calls a declared tool of the simulated world; gives its outcome (a `Success` or a
        `Failure`). The key defaults to `{execution id}/{state}/{version}`: the same for every
        try of the step the machine is in, so a tool that honours keys applies it once."""
        if self.muted:
            return Failure("permanent", "no tool call while the machine is rebuilt")
        found = self._tools.get(tool)
        if found is None:
            known = ", ".join(sorted(self._tools)) or "none"
            raise AdapterError(f"tool {tool!r} is not declared (declared: {known}); "
                               f"declare it with tools={{{tool!r}: {{...}}}}")
        outcome = found(dict(input), key or f"{self.execution_id}/{self.state}/{self.version}")
        self._probe("after_tool_call")
        return outcome


class _Stored:
    """One execution on the disk."""

    __slots__ = ("context", "model", "seen", "state", "version")

    def __init__(self, state: str, context: Mapping[str, Any]) -> None:
        self.state, self.version, self.context = state, 1, dict(context)
        self.seen: set[str] = set()
        self.model: Any = None


class _Peer:
    """What the two libraries differ in: how to read a machine, fire an event, set a state."""

    library = ""

    def machine_of(self, built: Any, activate: Callable[[Any], Any] | None = None) -> Any:
        """Gives the library's machine in what `build` gave, ready to take events; an
        awaitable it needs awaited first (an async engine's entry into its initial state)
        goes to `activate` (by default, it is run to its end here)."""
        return built

    def is_async(self, machine: Any) -> bool:
        """Tells whether the machine's triggers are coroutines."""
        return False

    def model_of(self, machine: Any) -> Any:
        return machine

    def describe(self, machine: Any) -> tuple[str, list[tuple[str, bool]],
                                              list[tuple[str, str, str]]]:
        """Gives the initial state, (state, final) pairs and (source, event, target)."""
        raise NotImplementedError

    def state(self, machine: Any) -> str:
        raise NotImplementedError

    def set_state(self, machine: Any, state: str) -> None:
        raise NotImplementedError

    def fire(self, machine: Any, event: str, arguments: Mapping[str, Any]) -> str:
        """Fires `event` with `arguments` as keyword arguments; gives "accepted" or
        "rejected:<why>"."""
        raise NotImplementedError

    async def fire_async(self, machine: Any, event: str, arguments: Mapping[str, Any]) -> str:
        """Fires `event` as `fire` does, awaiting the trigger's coroutine on the loop that
        runs this one."""
        raise NotImplementedError


class _Transitions(_Peer):
    library = "transitions"

    def __init__(self) -> None:
        self.not_allowed: type[Exception] = _import("transitions", "transitions").MachineError

    def machine_of(self, built: Any, activate: Callable[[Any], Any] | None = None) -> Any:
        machine = getattr(built, "machine", built)
        if not hasattr(machine, "events") or not hasattr(machine, "set_state"):
            raise AdapterError(f"build gave {type(built).__name__}, not a transitions Machine "
                               f"(or an object with one as `.machine`)")
        if len(machine.models) != 1:
            raise AdapterError(f"the machine has {len(machine.models)} models; the adapter "
                               f"drives one model per execution")
        return machine

    def model_of(self, machine: Any) -> Any:
        return machine.models[0]

    def is_async(self, machine: Any) -> bool:
        asynchronous = _import("transitions.extensions.asyncio", "transitions").AsyncMachine
        return isinstance(machine, asynchronous)

    def describe(self, machine: Any) -> tuple[str, list[tuple[str, bool]],
                                              list[tuple[str, str, str]]]:
        states = []
        for name, state in machine.states.items():
            if getattr(state, "states", None) or getattr(state, "children", None):
                raise AdapterError(f"state {name!r} has nested states; the adapter wraps flat "
                                   f"machines only")
            states.append((str(name), bool(getattr(state, "final", False))))
        shortcuts = {f"to_{name}" for name, _ in states} if machine.auto_transitions else set()
        moves = []
        for event, spec in machine.events.items():
            if event in shortcuts:
                continue
            for source, transitions in spec.transitions.items():
                for transition in transitions:
                    target = source if transition.dest is None else transition.dest
                    moves.append((str(source), str(event), str(target)))
        return str(machine.initial), states, moves

    def state(self, machine: Any) -> str:
        return str(machine.get_model_state(machine.models[0]).name)

    def set_state(self, machine: Any, state: str) -> None:
        machine.set_state(state, machine.models[0])

    def fire(self, machine: Any, event: str, arguments: Mapping[str, Any]) -> str:
        try:  # an AsyncMachine's trigger is a coroutine: run to its end
            done = _settled(machine.models[0].trigger(event, **arguments))
        except self.not_allowed as error:
            return f"rejected:{error}"
        return "accepted" if done else "rejected:condition"

    async def fire_async(self, machine: Any, event: str, arguments: Mapping[str, Any]) -> str:
        try:
            done = machine.models[0].trigger(event, **arguments)
            if inspect.isawaitable(done):
                done = await done
        except self.not_allowed as error:
            return f"rejected:{error}"
        return "accepted" if done else "rejected:condition"


class _StateMachine(_Peer):
    library = "python-statemachine"

    def __init__(self) -> None:
        module = _import("statemachine", "statemachine")
        self.not_allowed: type[Exception] = module.exceptions.TransitionNotAllowed

    def machine_of(self, built: Any, activate: Callable[[Any], Any] | None = None) -> Any:
        if not hasattr(built, "send") or not hasattr(built, "states"):
            raise AdapterError(f"build gave {type(built).__name__}, not a python-statemachine "
                               f"StateMachine")
        if getattr(built, "catch_errors_as_events", False) and not any(
                str(event.id) in _ERROR_EVENTS for event in built.events):
            # a StateChart turns a callback's exception into an `error.execution` event; with
            # no move that takes one, the exception would vanish: let it be seen instead
            built.catch_errors_as_events = False
        if getattr(built, "current_state_value", None) is None:
            # an async engine enters its initial state at the first event unless told now: a
            # machine restored before that would be put back in its initial state by it
            (activate or _settled)(built.activate_initial_state())
        if getattr(built, _FIRED, None) is None:
            # a StateChart takes an event it has no move for, or whose condition fails,
            # without a word: only a listener tells whether a transition happened
            fired = _Fired()
            add = getattr(built, "add_listener", None) or built.add_observer
            add(fired)
            setattr(built, _FIRED, fired)
        return built

    def is_async(self, machine: Any) -> bool:
        engines = _import("statemachine.engines.async_", "statemachine")
        return isinstance(getattr(machine, "_engine", None), engines.AsyncEngine)

    def describe(self, machine: Any) -> tuple[str, list[tuple[str, bool]],
                                              list[tuple[str, str, str]]]:
        initial, states, moves = "", [], []
        for state in machine.states:
            if getattr(state, "states", None):
                raise AdapterError(f"state {state.id!r} has nested states; the adapter wraps "
                                   f"flat machines only")
            states.append((str(state.id), bool(state.final)))
            if state.initial:
                initial = str(state.id)
            for transition in state.transitions:
                for event in transition.events:
                    moves.append((str(state.id), str(getattr(event, "id", event)),
                                  str(transition.target.id)))
        return initial, states, moves

    def state(self, machine: Any) -> str:
        # the state's id: its value may be anything (an Enum member, with States.from_enum)
        value = machine.current_state_value
        for known in machine.states:
            if known.value == value:
                return str(known.id)
        return str(value)  # no state holds it: observe() then tells of the nonsense

    def set_state(self, machine: Any, state: str) -> None:
        values = {str(known.id): known.value for known in machine.states}
        machine.current_state_value = values[state]

    def fire(self, machine: Any, event: str, arguments: Mapping[str, Any]) -> str:
        fired = getattr(machine, _FIRED)
        before = fired.count
        try:
            _settled(machine.send(event, **arguments))
        except self.not_allowed as error:
            return f"rejected:{error}"
        return "accepted" if fired.count > before else "rejected:no transition taken"

    async def fire_async(self, machine: Any, event: str, arguments: Mapping[str, Any]) -> str:
        fired = getattr(machine, _FIRED)
        before = fired.count
        try:
            sent = machine.send(event, **arguments)  # on a running loop: a coroutine
            if inspect.isawaitable(sent):
                await sent
        except self.not_allowed as error:
            return f"rejected:{error}"
        return "accepted" if fired.count > before else "rejected:no transition taken"


_FIRED = "_fsmharness_fired"
_ERROR_EVENTS = frozenset({"error.execution", "error_execution"})  # python-statemachine's
_LOOP = threading.local()


def _settled(result: Any) -> Any:
    """Gives what a library call gave, run to its end when it is awaitable (an async
    machine's), on this thread's event loop: one call at a time, so in a fixed order."""
    if not inspect.isawaitable(result):
        return result
    if _loop_running():  # a loop of the caller's runs here (a notebook's): use a thread's own
        return _on_helper_thread(lambda: _settled(result))
    loop = getattr(_LOOP, "loop", None)
    if loop is None:
        loop = _LOOP.loop = asyncio.new_event_loop()
    return loop.run_until_complete(_awaited(result))


async def _awaited(result: Any) -> Any:
    return await result


def _outside_any_loop(call: Callable[[], Any]) -> Any:
    """Gives `call()`. Made again from inside one of an async machine's callbacks (a second
    worker injected mid-step, while that machine's event loop runs), it goes to a helper
    thread this one waits for, so the inner call ends before the callback goes on, as another
    process's would; any other call runs here (a loop of the caller's, a notebook's, running
    around a machine with no async callback needs no thread)."""
    depth = getattr(_LOOP, "depth", 0)
    if depth and _on_our_loop():
        return _on_helper_thread(call)
    _LOOP.depth = depth + 1
    try:
        return call()
    finally:
        _LOOP.depth = depth


def _on_our_loop() -> bool:
    """Tells whether this thread runs its async machines' loop (`_settled`'s) right now."""
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        return False
    return running is getattr(_LOOP, "loop", None)


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _on_helper_thread(call: Callable[[], Any]) -> Any:
    with ThreadPoolExecutor(1, thread_name_prefix="fsmharness-peer") as pool:
        return pool.submit(call).result()


class _Fired:
    """A python-statemachine listener that counts the transitions taken."""

    def __init__(self) -> None:
        self.count = 0

    def after_transition(self) -> None:
        self.count += 1


def _import(module: str, extra: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise AdapterError(f"{module} is not installed: pip install 'fsmharness[{extra}]'"
                           ) from error


class _PeerMachines:
    """What the two forms of a peer machine share: the disk, the live machines (memory), and
    everything but taking an event."""

    crash_points: Sequence[str] = CRASH_POINTS

    def __init__(self, target: PeerTarget, tools: Mapping[str, Tool], probe: Probe,
                 disk: dict[str, _Stored] | None = None) -> None:
        self.target, self._tools, self._probe = target, tools, probe
        # the points a run can pass: after a tool call only where the machine has tools
        self.crash_points = CRASH_POINTS if tools else tuple(
            point for point in CRASH_POINTS if point != "after_tool_call")
        self.disk: dict[str, _Stored] = {} if disk is None else disk
        self._live: dict[str, tuple[int, Any, ToolBox]] = {}  # memory: lost in a crash

    def _new_box(self, execution_id: str, context: Mapping[str, Any], now: int) -> ToolBox:
        box = ToolBox(execution_id, context, self._tools, self._probe)
        box.state, box.version, box.now = self.target.initial, 1, now
        return box

    def _started(self, execution_id: str, context: Mapping[str, Any], machine: Any,
                 box: ToolBox) -> str:
        """Saves an execution just built (unless another worker started it meanwhile)."""
        self._probe("before_save")
        if execution_id in self.disk:
            return "ignored:duplicate"
        stored = self.disk[execution_id] = _Stored(self.target.initial, context)
        self._save_model(stored, machine)
        self._live[execution_id] = (stored.version, machine, box)
        return "accepted"

    def _refusal(self, stored: _Stored, event: Event) -> str | None:
        """Gives what is said of an event refused before it is fired, or None."""
        if self.target.dedupe and event.id in stored.seen:
            return "ignored:duplicate"
        return None

    def _firing(self, event: Event) -> tuple[str, dict[str, Any]] | str:
        """Gives the machine's own name of the event and the arguments it is fired with, or
        the refusal of a payload the schema declared for it refuses."""
        native = self.target.native_events.get(event.type, event.type)
        if native not in self.target.with_payload:
            return native, {}
        problem = self.target.payload_problem(event)  # checked at the boundary, as the
        if problem:  # reference machine checks it
            return f"rejected:invalid_payload: {problem}"
        return native, dict(event.payload)

    def _saved(self, execution_id: str, stored: _Stored, machine: Any, box: ToolBox,
               event: Event, seen: int, said: str) -> str:
        """Saves what the machine did with an event it took (`said`), as a compare-and-set."""
        if said != "accepted":
            self._live.pop(execution_id, None)  # a refusal after a callback moved it, too
            return said
        self._probe("before_save")
        if stored.version != seen or (self.target.dedupe and event.id in stored.seen):
            # the save is a compare-and-set, as a database row's would be: another worker
            # saved this execution first, so this worker's move is dropped
            self._live.pop(execution_id, None)
            return "ignored:conflict"
        stored.state, stored.version = self.target.peer.state(machine), stored.version + 1
        if self.target.dedupe:
            stored.seen.add(event.id)
        self._save_model(stored, machine)
        self._live[execution_id] = (stored.version, machine, box)
        return "accepted"

    def _save_model(self, stored: _Stored, machine: Any) -> None:
        if self.target.persist is not None:
            stored.model = self.target.persist[0](self.target.peer.model_of(machine))

    def _alive(self, execution_id: str, stored: _Stored) -> tuple[Any, ToolBox] | None:
        """Gives the live machine of an execution, unless there is none or another worker
        moved the execution on since."""
        live = self._live.get(execution_id)
        if live is None or live[0] != stored.version:
            return None
        live[2].state, live[2].version = stored.state, stored.version
        return live[1], live[2]

    def _restore_box(self, execution_id: str, stored: _Stored) -> ToolBox:
        box = ToolBox(execution_id, stored.context, self._tools, self._probe)
        box.state, box.version, box.muted = stored.state, stored.version, True
        return box

    def _restored(self, execution_id: str, stored: _Stored, machine: Any, box: ToolBox
                  ) -> tuple[Any, ToolBox]:
        """Puts a machine just rebuilt in the stored state, and keeps it live."""
        self.target.peer.set_state(machine, stored.state)
        if self.target.persist is not None and stored.model is not None:
            self.target.persist[1](self.target.peer.model_of(machine), stored.model)
        self._live[execution_id] = (stored.version, machine, box)
        return machine, box

    def advance(self, now: int) -> None:
        pass  # neither library keeps timers

    def complete(self, execution_id: str, call_id: str, now: int) -> None:
        pass  # callbacks call their tools synchronously: no call is left in flight

    def crash(self) -> None:
        self._live = {}

    def recover(self, now: int) -> None:
        pass  # the next event rebuilds what it needs from the disk

    def observe(self, execution_id: str) -> Observation:
        stored = self.disk[execution_id]
        outcome = self.target.outcomes.get(stored.state)
        return Observation(self.target.state_ids[stored.state],
                           "final" if outcome is not None else "waiting", stored.version,
                           outcome)


class PeerMachine(_PeerMachines):
    """A peer library's machine behind the machine-under-test protocol (see the module)."""

    def start(self, execution_id: str, context: Mapping[str, Any], now: int) -> str | None:
        return _outside_any_loop(lambda: self._start(execution_id, context, now))

    def deliver(self, execution_id: str, event: Event, now: int) -> str | None:
        return _outside_any_loop(lambda: self._deliver(execution_id, event, now))

    def _start(self, execution_id: str, context: Mapping[str, Any], now: int) -> str | None:
        if execution_id in self.disk:
            return "ignored:duplicate"
        box = self._new_box(execution_id, context, now)
        machine = self.target.build_machine(box)  # entering the initial state runs here
        return self._started(execution_id, context, machine, box)

    def _deliver(self, execution_id: str, event: Event, now: int) -> str | None:
        stored = self.disk.get(execution_id)
        if stored is None:
            return "rejected:unknown execution"
        refused = self._refusal(stored, event)
        if refused is not None:
            return refused
        machine, box = self._machine(execution_id, stored)
        box.event, box.now = event, now
        seen = stored.version
        firing = self._firing(event)
        if isinstance(firing, str):
            return firing
        try:
            said = self.target.peer.fire(machine, *firing)
        except BaseException:
            self._live.pop(execution_id, None)  # a callback raised: memory may be half moved
            raise
        return self._saved(execution_id, stored, machine, box, event, seen, said)

    def _machine(self, execution_id: str, stored: _Stored) -> tuple[Any, ToolBox]:
        """Gives the live machine of an execution, rebuilt from the disk when there is none
        or another worker moved the execution on since."""
        alive = self._alive(execution_id, stored)
        if alive is not None:
            return alive
        box = self._restore_box(execution_id, stored)
        try:
            machine = self.target.build_machine(box)
            return self._restored(execution_id, stored, machine, box)
        finally:
            box.muted = False

    def worker(self) -> PeerMachine:
        return PeerMachine(self.target, self._tools, self._probe, disk=self.disk)


class AsyncPeerMachine(_PeerMachines):
    """A peer library's async machine (a `transitions` `AsyncMachine`, a python-statemachine
    machine with async callbacks) behind the protocol's async form: `start` and `deliver` are
    coroutines, which the simulator awaits on the run's event loop, and so does every
    coroutine of the library's they await."""

    async def start(self, execution_id: str, context: Mapping[str, Any], now: int
                    ) -> str | None:
        if execution_id in self.disk:
            return "ignored:duplicate"
        box = self._new_box(execution_id, context, now)
        machine = await self.target.build_machine_async(box)  # enters the initial state
        return self._started(execution_id, context, machine, box)

    async def deliver(self, execution_id: str, event: Event, now: int) -> str | None:
        stored = self.disk.get(execution_id)
        if stored is None:
            return "rejected:unknown execution"
        refused = self._refusal(stored, event)
        if refused is not None:
            return refused
        machine, box = await self._machine(execution_id, stored)
        box.event, box.now = event, now
        seen = stored.version
        firing = self._firing(event)
        if isinstance(firing, str):
            return firing
        try:
            said = await self.target.peer.fire_async(machine, *firing)
        except BaseException:
            self._live.pop(execution_id, None)  # a callback raised: memory may be half moved
            raise
        return self._saved(execution_id, stored, machine, box, event, seen, said)

    async def _machine(self, execution_id: str, stored: _Stored) -> tuple[Any, ToolBox]:
        alive = self._alive(execution_id, stored)
        if alive is not None:
            return alive
        box = self._restore_box(execution_id, stored)
        try:
            machine = await self.target.build_machine_async(box)
            return self._restored(execution_id, stored, machine, box)
        finally:
            box.muted = False

    def worker(self) -> AsyncPeerMachine:
        return AsyncPeerMachine(self.target, self._tools, self._probe, disk=self.disk)


class PeerTarget:
    """A machine factory over a peer library's machine: `target(definition, tools, probe)`
    gives a `PeerMachine` (an `AsyncPeerMachine` for an async one: `asynchronous`), and
    `target.definition` is what was read off the machine."""

    crash_points: Sequence[str] = CRASH_POINTS

    def __init__(self, peer: _Peer, build: Callable[[ToolBox], Any], *, name: str | None,
                 tools: Mapping[str, Mapping[str, Any]] | None,
                 events: Mapping[str, Mapping[str, Any]] | None,
                 outcomes: Mapping[str, str] | None, persist: Persist | None,
                 dedupe: bool, module: str | None = None) -> None:
        self.peer, self.build, self.persist, self.dedupe = peer, build, persist, dedupe
        probe_box = ToolBox("describe", {}, {}, _no_probe)
        probe_box.muted = True
        machine = self.build_machine(probe_box)
        self.asynchronous = peer.is_async(machine)
        self.initial, states, moves = peer.describe(machine)
        # the library's names, as the definition format takes them (kept where they are)
        self.state_ids = safe_ids(state for state, _ in states)
        event_ids = safe_ids(dict.fromkeys(event for _, event, _ in moves),
                             reserved=RESERVED_PREFIXES)
        self.native_events = {ident: native for native, ident in event_ids.items()}
        self.with_payload = frozenset(event for event, spec in (events or {}).items()
                                      if spec.get("payload") is not None)
        # a state no move leaves ends a run as surely as one marked final (transitions' own
        # examples mark none); a machine with no end at all runs until stopped: reactive
        # what the initial state cannot reach, the machine never shows: left out, and said
        reached = _reached(self.initial, moves)
        self.left_out = tuple(state for state, _ in states if state not in reached)
        states = [(state, final) for state, final in states if state in reached]
        moves = [move for move in moves if move[0] in reached]
        leaving = {source for source, _, target in moves if target != source}
        finals = [state for state, final in states if final or state not in leaving]
        unknown = sorted(set(outcomes or {}) - {state for state, _ in states})
        if unknown:
            raise AdapterError(f"outcomes names states the machine lacks: {', '.join(unknown)}")
        self.outcomes = {state: "success" for state in finals} | dict(outcomes or {})
        self.name = name or type(peer.model_of(machine)).__name__.lower()
        self.__qualname__ = f"{peer.library}:{self.name}"
        # the module that made this target, so a replay file can import it back by name
        self.__module__ = module or getattr(build, "__module__", None) or __name__
        self.definition = self._definition(states, moves, tools or {}, events or {})

    def payload_problem(self, event: Event) -> str | None:
        """Says what is wrong with an event's payload against the schema `events=` declared
        for it (None: nothing)."""
        spec = self.definition.events.get(event.type)
        if not isinstance(event.payload, Mapping):
            return f"expected an object, got {type(event.payload).__name__}"
        if spec is None or spec.check_payload is None:
            return None
        return spec.check_payload(event.payload)

    def build_machine(self, box: ToolBox) -> Any:
        return self.peer.machine_of(self.build(box))

    async def build_machine_async(self, box: ToolBox) -> Any:
        """Gives a new machine as `build_machine` does, awaiting here (on the loop that runs
        this) what the library needs awaited before it takes events."""
        awaiting: list[Any] = []
        machine = self.peer.machine_of(self.build(box), activate=awaiting.append)
        for awaitable in awaiting:
            if inspect.isawaitable(awaitable):
                await awaitable
        return machine

    def _definition(self, states: list[tuple[str, bool]], moves: list[tuple[str, str, str]],
                    tools: Mapping[str, Mapping[str, Any]],
                    events: Mapping[str, Mapping[str, Any]]) -> WorkflowDefinition:
        """Gives the definition the simulator and the checkers hold the machine to."""
        ids = self.state_ids
        event_ids = {native: ident for ident, native in self.native_events.items()}
        declared: dict[str, dict[str, Any]] = {}
        for state, _ in states:
            outcome = self.outcomes.get(state)
            declared[ids[state]] = ({"type": "final", "outcome": outcome}
                                    if outcome is not None else {"on": {}})
            if ids[state] != state:  # the library's own name, as its label
                declared[ids[state]]["description"] = state
        declared[ids[self.initial]]["initial"] = True
        names: dict[str, None] = {}
        for source, event, target in moves:
            names[event] = None
            if source in self.outcomes:
                continue  # a final state ends the run: moves out of it are not declared
            targets = declared[ids[source]]["on"].setdefault(event_ids[event], [])
            if {"target": ids[target]} not in targets:
                targets.append({"target": ids[target]})
        unknown = sorted(set(events) - set(names))
        if unknown:
            raise AdapterError(f"events names events the machine lacks: {', '.join(unknown)}")
        return load_definition({
            "name": self.name, "version": 1, "reactive": not self.outcomes,
            "tools": {tool: dict(spec) for tool, spec in tools.items()},
            "events": {event_ids[event]: dict(events.get(event, {})) for event in names},
            "states": declared,
        })

    def __call__(self, definition: WorkflowDefinition, tools: Mapping[str, Tool],
                 probe: Probe) -> PeerMachine | AsyncPeerMachine:
        if self.asynchronous:
            return AsyncPeerMachine(self, tools, probe)
        return PeerMachine(self, tools, probe)

    def __repr__(self) -> str:
        return f"<{self.peer.library} target {self.name}>"


def _no_probe(point: str) -> None:
    pass


def _reached(initial: str, moves: Iterable[tuple[str, str, str]]) -> set[str]:
    """Gives the states `moves` reach from `initial`, itself included."""
    targets: dict[str, list[str]] = {}
    for source, _, target in moves:
        targets.setdefault(source, []).append(target)
    return reach(initial, targets)


_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")


def safe_ids(names: Iterable[str], reserved: Sequence[str] = ()) -> dict[str, str]:
    """Gives each name the id a definition takes: itself when it is one, else its characters
    the format refuses (a space, a colon) made `_`, with a `_` in front of a leading digit or
    a `reserved` prefix (the definition's own events: `step.next` -> `_step.next`), and a
    number after one that another name took (`new order` -> `new_order`)."""
    names = list(names)
    ids = {name: name for name in names
           if _ID.fullmatch(name) and not name.startswith(tuple(reserved))}
    taken = set(ids)
    for name in names:
        if name in ids:
            continue
        base = re.sub(r"[^A-Za-z0-9_.\-]", "_", name)
        base = (base if _ID.fullmatch(base) and not base.startswith(tuple(reserved))
                else f"_{base}")
        ident, number = base, 2
        while ident in taken:
            ident, number = f"{base}_{number}", number + 1
        ids[name] = ident
        taken.add(ident)
    return ids


def transitions_target(build: Callable[[ToolBox], Any], *, name: str | None = None,
                       tools: Mapping[str, Mapping[str, Any]] | None = None,
                       events: Mapping[str, Mapping[str, Any]] | None = None,
                       outcomes: Mapping[str, str] | None = None,
                       persist: Persist | None = None, dedupe: bool = True) -> PeerTarget:
    """Wraps a `transitions` machine: `build(box)` gives a new `Machine` (or an object with
    one as `.machine`) for one execution. `events` gives event specs by name (`{"pay":
    {"sources": ["human"]}}`), `outcomes` final states' outcomes, `persist` a (save, load)
    pair for what of the model survives a crash beside its state."""
    return PeerTarget(_Transitions(), build, name=name, tools=tools, events=events,
                      outcomes=outcomes, persist=persist, dedupe=dedupe,
                      module=_caller_module())


def statemachine_target(build: Callable[[ToolBox], Any], *, name: str | None = None,
                        tools: Mapping[str, Mapping[str, Any]] | None = None,
                        events: Mapping[str, Mapping[str, Any]] | None = None,
                        outcomes: Mapping[str, str] | None = None,
                        persist: Persist | None = None, dedupe: bool = True) -> PeerTarget:
    """Wraps a python-statemachine machine: `build(box)` gives a new `StateMachine` for one
    execution; the rest as `transitions_target`."""
    return PeerTarget(_StateMachine(), build, name=name, tools=tools, events=events,
                      outcomes=outcomes, persist=persist, dedupe=dedupe,
                      module=_caller_module())


def _caller_module() -> str | None:
    """Gives the name of the module that called the `*_target` function calling this."""
    return sys._getframe(2).f_globals.get("__name__")
