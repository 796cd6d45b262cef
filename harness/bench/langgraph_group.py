"""The `langgraph` groups of `fsmharness bench`: a LangGraph graph under the harness beside
the same graph invoked bare over the same saver, so the adapter's overhead is a ratio.

The graph (`refund_graph`) is an approval-gated refund of four nodes: `look_up`, then
`review`, which asks a human (`interrupt()`) and routes an approval to `refund` (one tool
call, `payments.refund`) and a denial straight to `notify`, then the end. Every node counts
its runs, and the unit of every contender is one **node run**: a node's function called once.
An interrupted `review` and its run again on the resume count as two, as LangGraph runs it
twice; one node runs in each superstep of this graph, so a node run is also a superstep.

A call of each contender does the same work: `RUNS` fault-free seeded simulator runs of the
target, three threads each, and for the others the calls the adapter took in those runs
(each thread's input, each answer it accepted), read off their histories once; before
anything is measured, each contender is called once and must run the same nodes as often as
the others. The contenders, in one group per SQLite `synchronous` of the saver's connection
(FULL, SQLite's default, syncs the file at each commit; OFF leaves it to the system, so what
is not the disk shows):

- `bare invoke (floor)`: per run, a fresh SQLite file (the one before removed, as the adapter
  does), LangGraph's `SqliteSaver` on it (on a connection opened as the adapter opens its
  own), the graph compiled on that saver and, in the recorded order, `graph.invoke(input)`
  and `graph.invoke(Command(resume=answer))` on each thread under `durability="sync"`, the
  tool a plain function: LangGraph as its users run it, its saves in its background threads.
- `bare invoke, saves inline`: the same with LangGraph run as the adapter runs it (its
  background executor in the calling thread, the adapter's own patch), which is most of what
  sets the adapter apart from the floor.
- `adapter machine, no simulator`: per run, the target's machine (its saver in front of a
  `SqliteSaver` on a fresh file) driven by `start` and `deliver` in the same order, the tool
  the same plain function: over the inline floor, the adapter's own bookkeeping.
- `simulator, no faults`: the seeded runs themselves (`Simulator` with the plan that injects
  nothing): the adapter, the simulated tool world, the events the simulator sends that the
  graph refuses (a `retry` with nothing failed, an answer whose payload is invalid), the
  observation of every thread after every step (`get_state`), the history.

Without langgraph (or its SQLite saver) installed, the group is skipped with a note saying so.
"""

from __future__ import annotations

import contextlib
import importlib
import sqlite3
import tempfile
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypedDict

from fault_injection import no_faults
from harness.bench.timing import Contender, Group, Maker
from harness.errors import HarnessError
from harness.sim.history import Decided, Delivered, Started
from harness.sim.simulator import SimOptions, SimulationResult, Simulator
from reference_machine import Event, Success, Tool

__all__ = [
    "ANSWERS",
    "INPUT",
    "RUNS",
    "SYNCHRONOUS",
    "TITLE",
    "TOOL",
    "Call",
    "LangGraphGroup",
    "NodeRuns",
    "adapter_runs",
    "agreed",
    "bare_runs",
    "bench_target",
    "langgraph_group",
    "langgraph_groups",
    "missing",
    "refund_graph",
    "scripts_of",
    "simulated_runs",
    "sqlite_saver",
]

TOOL = "payments.refund"
INPUT: Mapping[str, Any] = {"order_id": "o-1", "amount": 40}
ANSWERS: Mapping[str, bool] = {"approve": True, "deny": False}
TITLE = "langgraph: refund graph, durability sync"
#: Seeded runs a call of each contender does (three threads each).
RUNS = 4
QUICK_RUNS = 2

#: How many times each node ran (by name), counted by the nodes themselves.
NodeRuns = Counter[str]


def missing() -> str:
    """Gives why the group cannot run ("" when it can): langgraph or its SQLite saver is not
    installed."""
    for module, package in (("langgraph.graph", "langgraph"),
                            ("langgraph.checkpoint.sqlite", "langgraph-checkpoint-sqlite")):
        try:
            importlib.import_module(module)
        except ImportError:
            return f"{package} is not installed: pip install 'fsmharness[langgraph]'"
    return ""


class _Refund(TypedDict, total=False):
    order_id: str
    amount: int
    approved: bool
    refund_id: str
    notified: bool


def refund_graph(ran: NodeRuns) -> Callable[[Any], Any]:
    """Gives `build(box)` for the bench's graph (see the module), its nodes counting their
    runs in `ran`; `box.call` is the one tool call (a `GraphBox`, or any object with a
    `call(tool, input)`)."""
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    def build(box: Any) -> Any:
        def look_up(state: _Refund) -> _Refund:
            ran["look_up"] += 1
            return {"amount": state.get("amount", 40)}

        def review(state: _Refund) -> _Refund:
            ran["review"] += 1
            approved = interrupt({"refund": state["amount"], "order": state.get("order_id")})
            return {"approved": bool(approved)}

        def refund(state: _Refund) -> _Refund:
            ran["refund"] += 1
            out = box.call(TOOL, {"order_id": state.get("order_id", ""),
                                  "amount": state["amount"]})
            return {"refund_id": str(out.get("id", "")) if isinstance(out, Mapping) else ""}

        def notify(state: _Refund) -> _Refund:
            ran["notify"] += 1
            return {"notified": True}

        graph = StateGraph(_Refund)
        graph.add_node("look_up", look_up)
        graph.add_node("review", review)
        graph.add_node("refund", refund)
        graph.add_node("notify", notify)
        graph.add_edge(START, "look_up")
        graph.add_edge("look_up", "review")
        graph.add_conditional_edges("review", _routed, {"refund": "refund", "notify": "notify"})
        graph.add_edge("refund", "notify")
        graph.add_edge("notify", END)
        return graph

    return build


def _routed(state: _Refund) -> str:
    return "refund" if state.get("approved") else "notify"


#: SQLite's `synchronous` for the saver's connection, one group each: FULL (SQLite's default)
#: syncs the file at every commit (one a save: the connection is opened as SqliteSaver opens
#: its own); OFF leaves that to the system
SYNCHRONOUS: tuple[Literal["FULL", "OFF"], ...] = ("FULL", "OFF")


def sqlite_saver(synchronous: Literal["FULL", "OFF"]) -> Callable[[sqlite3.Connection], Any]:
    """Gives `saver(connection)`: LangGraph's `SqliteSaver` on the connection, after setting
    its `synchronous`."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    def saver(connection: sqlite3.Connection) -> Any:
        connection.execute(f"PRAGMA synchronous={synchronous}")
        return SqliteSaver(connection)

    return saver


def bench_target(ran: NodeRuns, synchronous: Literal["FULL", "OFF"] = "FULL") -> Any:
    """Gives the LangGraph target of the bench's graph (`durability="sync"`, the tool keyed by
    thread, node and step, the saver a `SqliteSaver` with `synchronous`)."""
    from harness.adapters.langgraph import langgraph_target

    return langgraph_target(refund_graph(ran), name="bench_refund",
                            tools={TOOL: {"idempotency_keys": True}}, input=dict(INPUT),
                            interrupts=("review",), answers=dict(ANSWERS),
                            saver=sqlite_saver(synchronous))


@dataclass(frozen=True, slots=True)
class Call:
    """One call the adapter took in a run: a thread's input (`decision` "") or an answer."""

    thread: str
    decision: str = ""


def scripts_of(results: Sequence[SimulationResult]) -> tuple[tuple[Call, ...], ...]:
    """Gives, per run, the calls the machine took, in order: each start, and each answer it
    accepted (a refused event runs no node, so the bare graph is not given it)."""
    scripts = []
    for result in results:
        if result.failure is not None or result.status != "final":
            raise HarnessError(f"langgraph bench: seed {result.seed} ended {result.status}"
                               f"{': ' + result.failure.message if result.failure else ''}; "
                               f"a fault-free run of the bench graph must end every thread")
        answers: dict[str, Delivered] = {}
        calls: list[Call] = []
        for record in result.history:
            if isinstance(record, Started):
                calls.append(Call(record.execution))
            elif isinstance(record, Delivered):
                answers[record.event_id] = record
            elif isinstance(record, Decided) and record.decision == "accepted":
                delivered = answers[record.event_id]
                calls.append(Call(record.execution, str(delivered.payload["decision"])))
        scripts.append(tuple(calls))
    return tuple(scripts)


def simulated_runs(simulator: Simulator, seeds: range, ran: NodeRuns
                   ) -> Callable[[], int]:
    """Gives a call that runs every seed; the call gives the node runs of them all."""
    def run() -> int:
        ran.clear()
        for seed in seeds:
            result = simulator.run(seed)
            if result.failure is not None:
                raise HarnessError(f"langgraph bench: seed {seed}: {result.failure.message}")
        return ran.total()

    return run


class _PlainBox:
    """The bare graph's box: the tool is a plain function, called at once."""

    def call(self, tool: str, input: Mapping[str, Any], key: str | None = None) -> Any:
        return _refunded(input)


def _refunded(input: Mapping[str, Any]) -> dict[str, Any]:
    return {"id": f"re-{input.get('order_id', '')}", "status": "refunded"}


def _plain_tool(input: Mapping[str, Any], idempotency_key: str) -> Success:
    return Success(_refunded(input))


def _connected(path: Path) -> sqlite3.Connection:
    # as the adapter (and SqliteSaver.from_conn_string) opens its file, shared with
    # LangGraph's saver thread
    return sqlite3.connect(path, check_same_thread=False)


def bare_runs(scripts: Sequence[Sequence[Call]], folder: Path, ran: NodeRuns,
              synchronous: Literal["FULL", "OFF"] = "FULL", *, inline: bool = False
              ) -> Callable[[], int]:
    """Gives a call that does every run's calls on the bare graph (a fresh file in `folder`,
    the one before removed, a saver and the graph compiled per run); the call gives the node
    runs. With `inline`, LangGraph runs as
    the adapter runs it: its background executor (the saves) in the calling thread."""
    from langgraph.types import Command

    build, saver = refund_graph(ran), sqlite_saver(synchronous)
    made = [0]

    def runs() -> int:
        ran.clear()
        for script in scripts:
            made[0] += 1
            for old in folder.iterdir():  # the run before's file, as the adapter removes it
                old.unlink()
            connection = _connected(folder / f"bare-{made[0]}.sqlite")
            try:
                graph = build(_PlainBox()).compile(checkpointer=saver(connection))
                for call in script:
                    config: Any = {"configurable": {"thread_id": call.thread}}
                    given: Any = (dict(INPUT) if not call.decision
                                  else Command(resume=ANSWERS[call.decision]))
                    graph.invoke(given, config, durability="sync")
            finally:
                connection.close()
        return ran.total()

    if not inline:
        return runs

    def inline_runs() -> int:
        # the adapter's own patch (its executor inline, its retries without sleeps), so this
        # contender differs from the adapter's machine by the adapter's bookkeeping only
        from harness.adapters.langgraph import GraphBox, harnessed

        with harnessed({}, GraphBox({}, None)):
            return runs()

    return inline_runs


def adapter_runs(target: Any, scripts: Sequence[Sequence[Call]], ran: NodeRuns
                 ) -> Callable[[], int]:
    """Gives a call that does every run's calls on a fresh machine of the target, through
    `start` and `deliver`, with no simulator; the call gives the node runs."""
    tools: dict[str, Tool] = {TOOL: _plain_tool}
    definition = target.definition

    def probe(point: str) -> None:
        pass  # no fault: every crash point is passed

    def run() -> int:
        ran.clear()
        for script in scripts:
            machine = target(definition, tools, probe)
            try:
                for number, call in enumerate(script):
                    if not call.decision:
                        said = machine.start(call.thread, {}, 0)
                    else:
                        said = machine.deliver(call.thread, Event(
                            f"ev{number}", "answer", "human", {"decision": call.decision}), 0)
                    if said != "accepted":
                        raise HarnessError(f"langgraph bench: the machine said {said!r} to "
                                           f"{call}, which the simulated run had accepted")
            finally:
                machine.close()
        return ran.total()

    return run


def langgraph_groups(quick: bool) -> list[Group]:
    """Gives the group of each `synchronous` (see the module), after checking that its
    contenders run the nodes the runs imply; without langgraph, one group with no contenders
    and a note that says why."""
    why = missing()
    if why:
        return [Group(TITLE, (), note=f"skipped: {why}")]
    seeds = range(QUICK_RUNS if quick else RUNS)
    groups = []
    for synchronous in SYNCHRONOUS:
        made = langgraph_group(seeds, synchronous)
        agreed(made)
        groups.append(made.group)
    return groups


@dataclass(frozen=True, slots=True)
class LangGraphGroup:
    """A group, the node runs each contender's last call counted (by contender name), and
    the calls each run is made of."""

    group: Group
    ran: Mapping[str, NodeRuns]
    scripts: tuple[tuple[Call, ...], ...]

    def expected(self) -> NodeRuns:
        """Gives the node runs the scripts make: per thread `look_up` and `notify` once,
        `review` once and again for its answer, `refund` once when approved."""
        expected = NodeRuns()
        for call in (call for script in self.scripts for call in script):
            if not call.decision:
                expected.update(("look_up", "review", "notify"))
            else:
                expected.update(("review", "refund") if ANSWERS[call.decision] else ("review",))
        return expected


def langgraph_group(seeds: range, synchronous: Literal["FULL", "OFF"]) -> LangGraphGroup:
    """Gives the group over the seeded runs `seeds` (see the module)."""
    names = ("bare invoke (floor)", "bare invoke, saves inline",
             "adapter machine, no simulator", "simulator, no faults")
    ran = {name: NodeRuns() for name in names}
    simulated = bench_target(ran[names[3]], synchronous)
    simulator = Simulator(simulated.definition, SimOptions(plan=no_faults()), simulated)
    scripts = scripts_of([simulator.run(seed) for seed in seeds])
    direct = bench_target(ran[names[2]], synchronous)

    def bare(inline: bool) -> Maker:
        def make(stack: contextlib.ExitStack) -> Callable[[], int]:
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="fsmbench-lg-"))
            return bare_runs(scripts, Path(folder), ran[names[int(inline)]], synchronous,
                             inline=inline)

        return make

    threads = sum(1 for script in scripts for call in script if not call.decision)
    group = Group(f"{TITLE}, SqliteSaver synchronous {synchronous} ({len(seeds)} seeded runs, "
                  f"{threads} threads a call)", (
        Contender(names[0], bare(False), 0, "node run"),
        Contender(names[1], bare(True), 0, "node run"),
        Contender(names[2], lambda stack: adapter_runs(direct, scripts, ran[names[2]]), 0,
                  "node run"),
        Contender(names[3], lambda stack: simulated_runs(simulator, seeds, ran[names[3]]), 0,
                  "node run")))
    return LangGraphGroup(group, ran, scripts)


def agreed(made: LangGraphGroup) -> dict[str, NodeRuns]:
    """Calls every contender once; gives the nodes each ran, by contender name, after checking
    that each ran the nodes the runs make, as often (one that ran others measures other
    work)."""
    expected, found = made.expected(), {}
    with contextlib.ExitStack() as stack:
        for contender in made.group.contenders:
            total = contender.make(stack)()
            ran = found[contender.name] = NodeRuns(made.ran[contender.name])
            if total != expected.total() or ran != expected:
                raise HarnessError(f"{made.group.name}: {contender.name} ran {_shown(ran)} "
                                   f"(it said {total} in all), the runs make "
                                   f"{_shown(expected)}")
    return found


def _shown(ran: NodeRuns) -> str:
    return ", ".join(f"{node} {count}" for node, count in sorted(ran.items())) or "nothing"
