"""LangGraph graphs written the way users write them, which the adapter once judged wrongly or
refused as a failure of the graph: keys of their own making, inputs that differ on a re-run,
async nodes and `AsyncSqliteSaver`, an `interrupt()` it cannot see, and a deployment that runs
one runner per thread."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.config import get_config
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt
from running import cli, one_error_line

from fault_injection import FaultKind, FaultPlan, FaultRate
from harness import SimOptions, Simulator
from harness.adapters import AdapterError, GraphBox, langgraph_target
from harness.engines.fuzz import FuzzOptions, fuzz
from harness.engines.replay import replay
from harness.sim.history import Applied
from reference_machine import Success

ROOT = Path(__file__).resolve().parents[3]
HONOURS = {"payments.refund": {"idempotency_keys": True}}


class Order(TypedDict, total=False):
    order: str
    ok: bool
    tries: int


def campaign(target: Any, plan: FaultPlan | None, folder: Path | None, runs: int = 100) -> Any:
    sim = SimOptions(plan=plan) if plan is not None else SimOptions()
    return fuzz(target.definition, FuzzOptions(runs=runs, seed=0, sim=sim, replay_dir=folder),
                machine=target)


def crashes(*points: str) -> FaultPlan:
    return FaultPlan((FaultRate(FaultKind.CRASH, 0.5, points=points),))


def keyed_by(suffix: str) -> Any:
    """A refund keyed `{thread}:refund:{...}` by the graph itself, not by the box."""
    def build(box: GraphBox) -> StateGraph:
        def refund(state: Order) -> dict[str, Any]:
            configurable = get_config()["configurable"]
            tail = (configurable["__pregel_task_id"] if suffix == "task"
                    else state["order"])
            box.call("payments.refund", {"order": state["order"]},
                     key=f"{configurable['thread_id']}:refund:{tail}")
            return {"ok": True}

        graph = StateGraph(Order)
        graph.add_node("refund", refund)
        graph.add_edge(START, "refund")
        graph.add_edge("refund", END)
        return graph
    return build


class TestEffectsKnownByTheAdapter:
    """The adapter knows the thread and the node's step of every call it routes: an effect is
    attributed to them, whatever key the graph built, and two effects of one call are one
    action done twice, whatever their inputs."""

    def test_a_key_the_graph_built_is_attributed_to_its_thread(self) -> None:
        target = langgraph_target(keyed_by("order"), input={"order": "o-1"}, tools=HONOURS)
        options = SimOptions(seed=0, executions=1, plan=FaultPlan(()))
        result = Simulator(target.definition, options, machine=target).run()
        (applied,) = [r for r in result.history if type(r) is Applied]
        assert applied.key == "x1:refund:o-1"  # no `x1/` prefix to read the thread from
        assert applied.execution == "x1"
        assert applied.action == "refund at step 1, call 1"

    def test_a_key_from_the_task_id_is_found_with_its_cause(self, tmp_path: Path) -> None:
        """Under `async` durability a crash in the first node leaves no checkpoint: the run
        starts again, the node gets a new task id, and a key built from it applies twice."""
        target = langgraph_target(keyed_by("task"), name="task_keyed", input={"order": "o-1"},
                                  durability="async", tools=HONOURS,
                                  one_runner_per_thread=True)
        report = campaign(target, crashes("after_tool_call"), tmp_path, runs=40)
        assert not report.held
        failure = report.failures[0]
        assert failure.rule == "no_duplicate_effect"
        message = failure.violations[0].message
        assert "for one logical action (refund at step 1, call 1)" in message
        assert "under two keys" in message
        assert ("the key is built from the task id LangGraph gave the node's run, minted anew "
                "on each run") in message
        assert failure.replay_file is not None
        assert replay(failure.replay_file, machine=target).reproduced

    def test_the_same_graph_keyed_by_its_order_holds(self) -> None:
        target = langgraph_target(keyed_by("order"), input={"order": "o-1"}, tools=HONOURS,
                                  durability="async")
        report = campaign(target, None, None, runs=60)
        assert report.held, [f.violations for f in report.failures]

    def test_a_re_run_with_another_input_is_still_the_same_action(self) -> None:
        """A node whose input differs on its re-run (it reads a count its first run bumped in
        the worker's memory) pays twice: judged by identity, not by byte-equal input."""
        def build(box: GraphBox) -> StateGraph:
            def review(state: Order) -> dict[str, Any]:
                tries = box.tries = getattr(box, "tries", 0) + 1  # type: ignore[attr-defined]
                box.call("payments.refund", {"order": state["order"], "try": tries})
                return {"ok": bool(interrupt("refund sent: confirm?"))}

            graph = StateGraph(Order)
            graph.add_node("review", review)
            graph.add_edge(START, "review")
            graph.add_edge("review", END)
            return graph

        target = langgraph_target(build, input={"order": "o-1"},
                                  tools={"payments.refund": {"idempotency_keys": False}})
        report = campaign(target, FaultPlan(()), None, runs=5)
        assert not report.held
        message = report.failures[0].violations[0].message
        assert report.failures[0].rule == "no_duplicate_effect"
        assert "for one logical action (review at step 1, call 1)" in message
        assert "effect before suspension: review (step 1) made this call and then suspended" \
            in message
        assert "the re-run decided differently from the first run" in message


def async_refund(box: GraphBox, notify_first: bool = False) -> StateGraph:
    async def look_up(state: Order) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {}

    async def review(state: Order) -> dict[str, Any]:
        if notify_first:
            box.call("notify.email", {"order": state["order"]})
        return {"ok": bool(interrupt({"order": state["order"]}))}

    def refund(state: Order) -> dict[str, Any]:  # a sync node beside async ones
        if state.get("ok"):
            box.call("payments.refund", {"order": state["order"]})
        return {}

    graph = StateGraph(Order)
    graph.add_node("look_up", look_up)
    graph.add_node("review", review)
    graph.add_node("refund", refund)
    graph.add_edge(START, "look_up")
    graph.add_edge("look_up", "review")
    graph.add_edge("review", "refund")
    graph.add_edge("refund", END)
    return graph


ASYNC_TOOLS = {"payments.refund": {"idempotency_keys": True},
               "notify.email": {"idempotency_keys": False}}


class TestAsyncGraphs:
    """A graph with `async def` nodes runs through `astream`, on SqliteSaver or on
    `AsyncSqliteSaver`, and replays from its seed."""

    @pytest.mark.parametrize("saver", [None, AsyncSqliteSaver], ids=["sqlite", "aiosqlite"])
    def test_a_sound_async_graph_holds(self, saver: Any) -> None:
        target = langgraph_target(async_refund, input={"order": "o-1"}, tools=ASYNC_TOOLS,
                                  async_saver=saver)
        assert target.asynchronous
        report = campaign(target, None, None, runs=40)
        assert report.held, [f.violations for f in report.failures]
        assert report.faults.get("crash", 0) > 0 and report.faults.get("second_worker", 0) > 0

    def test_a_naive_async_graph_fails_and_replays(self, tmp_path: Path) -> None:
        target = langgraph_target(lambda box: async_refund(box, notify_first=True),
                                  name="async_notify", input={"order": "o-1"},
                                  tools=ASYNC_TOOLS, async_saver=AsyncSqliteSaver)
        report = campaign(target, FaultPlan(()), tmp_path, runs=10)
        failure = report.failures[0]
        assert failure.rule == "no_duplicate_effect"
        assert "effect before suspension" in failure.violations[0].message
        assert failure.replay_file is not None
        assert replay(failure.replay_file, machine=target).reproduced

    def test_two_processes_give_the_same_history(self) -> None:
        paths = [str(ROOT), str(Path(__file__).parent), str(ROOT / "tests" / "support")]
        script = (f"import sys; sys.path[:0] = {paths!r}\n"
                  "from test_langgraph_user_graphs import async_refund, ASYNC_TOOLS\n"
                  "from harness import SimOptions, Simulator\n"
                  "from harness.adapters import langgraph_target\n"
                  "from harness.sim.history import dump_line\n"
                  "from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver\n"
                  "t = langgraph_target(async_refund, input={'order': 'o-1'}, "
                  "tools=ASYNC_TOOLS, async_saver=AsyncSqliteSaver)\n"
                  "r = Simulator(t.definition, SimOptions(seed=3), machine=t).run()\n"
                  "print('\\n'.join(dump_line(x) for x in r.history))\n")
        outs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                               env={**os.environ, "PYTHONHASHSEED": seed}, check=True).stdout
                for seed in ("0", "1")]
        assert outs[0] == outs[1] and outs[0].count("\n") > 10


class TestNodesReadOffTheirCode:
    def test_a_node_that_calls_no_tool_takes_no_retry(self) -> None:
        target = langgraph_target(async_refund, input={"order": "o-1"}, tools=ASYNC_TOOLS)
        assert target.failing == {"review", "refund"}  # review's code may call notify.email
        assert "retry" not in target.definition.spec.states["look_up"].on

    def test_a_tool_call_the_scan_misses_is_refused_naming_the_fix(self) -> None:
        class Bank:
            def __init__(self, box: GraphBox) -> None:
                self.pay = lambda order: box.call("payments.refund", {"order": order})

        def build(box: GraphBox) -> StateGraph:
            bank = Bank(box)

            def refund(state: Order) -> dict[str, Any]:
                bank.pay(state["order"])  # an attribute of an object: not followed
                return {}

            graph = StateGraph(Order)
            graph.add_node("refund", refund)
            graph.add_edge(START, "refund")
            graph.add_edge("refund", END)
            return graph

        hidden = langgraph_target(build, input={"order": "o-1"}, tools=HONOURS)
        assert hidden.failing == frozenset()
        plan = FaultPlan((FaultRate(FaultKind.TOOL_PERMANENT, 1.0),))
        with pytest.raises(AdapterError, match=r"tool_nodes=\['refund'\]"):
            Simulator(hidden.definition, SimOptions(seed=0, plan=plan),
                      machine=hidden).run()
        named = langgraph_target(build, input={"order": "o-1"}, tools=HONOURS,
                                 tool_nodes=["refund"])
        result = Simulator(named.definition, SimOptions(seed=0, plan=plan),
                           machine=named).run()
        assert result.failure is None

    def test_a_node_that_asks_in_a_loop_may_ask_again(self) -> None:
        def build(box: GraphBox) -> StateGraph:
            def ask(state: Order) -> dict[str, Any]:
                while not interrupt("a valid answer?"):
                    pass
                return {}

            graph = StateGraph(Order)
            graph.add_node("ask", ask)
            graph.add_edge(START, "ask")
            graph.add_edge("ask", END)
            return graph

        target = langgraph_target(build, input={})
        assert target.asks_again == {"ask"}
        answers = {t.target for t in target.definition.spec.states["ask"].on["answer"]}
        assert answers == {"ask", "__end__"}

    def test_names_a_graph_lacks_are_refused(self) -> None:
        with pytest.raises(AdapterError, match="tool_nodes names nodes the graph lacks: nope"):
            langgraph_target(async_refund, input={}, tools=ASYNC_TOOLS, tool_nodes=["nope"])


class TestDeploymentContract:
    def test_one_runner_per_thread_offers_no_second_worker(self) -> None:
        target = langgraph_target(keyed_by("order"), input={"order": "o-1"}, tools=HONOURS,
                                  one_runner_per_thread=True)
        machine = target(target.definition, {"payments.refund": lambda i, k: Success({})},
                         lambda point: None)
        try:
            assert machine.worker() is None
        finally:
            machine.close()
        report = campaign(target, None, None, runs=20)
        assert report.held
        assert "deployment that runs one runner per execution" in " ".join(report.notes)

    def test_a_second_worker_is_named_in_the_cause(self, tmp_path: Path) -> None:
        target = langgraph_target(keyed_by("task"), name="two_runners",
                                  input={"order": "o-1"}, tools=HONOURS)
        plan = FaultPlan((FaultRate(FaultKind.SECOND_WORKER, 0.5),))
        report = campaign(target, plan, tmp_path, runs=20)
        message = report.failures[0].violations[0].message
        assert "two workers ran refund (step 1)" in message
        assert "--faults all,-second_worker" in message


def test_a_construct_the_adapter_cannot_see_exits_2_with_no_report(tmp_path: Path) -> None:
    """An interrupt() inside a method is the user's input to name, not a FAIL of the graph:
    exit 2, the fix named, no report folder left behind."""
    (tmp_path / "hidden.py").write_text(
        "from typing import Any, TypedDict\n"
        "from langgraph.graph import END, START, StateGraph\n"
        "from langgraph.types import interrupt\n"
        "from harness.adapters import langgraph_target\n"
        "class S(TypedDict, total=False):\n    ok: bool\n"
        "class Human:\n"
        "    def ask(self) -> bool:\n        return bool(interrupt('refund?'))\n"
        "HUMAN = Human()\n"
        "def build(box: Any) -> StateGraph:\n"
        "    def review(state: S) -> dict[str, Any]:\n"
        "        return {'ok': HUMAN.ask()}\n"
        "    g = StateGraph(S)\n    g.add_node('review', review)\n"
        "    g.add_edge(START, 'review')\n    g.add_edge('review', END)\n    return g\n"
        "target = langgraph_target(build, input={})\n", encoding="utf-8")
    done = cli("fuzz", "hidden:target", "--runs", "10", "--report", str(tmp_path / "out"),
               cwd=tmp_path, path=f"{tmp_path}{os.pathsep}{ROOT}")
    one_error_line(done, "node 'review' waits on an interrupt()", "interrupts=['review']")
    assert not (tmp_path / "out").exists()
