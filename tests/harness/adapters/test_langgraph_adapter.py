"""LangGraph graphs under the harness, end to end: what is read off a graph, a sound graph
holding under every fault, the naive ones caught with a shrunk trace and a replay file, and the
graphs the adapter refuses."""

from __future__ import annotations

import operator
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any, Literal, TypedDict

import pytest
from adapter_campaigns import campaign
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command, Send, interrupt

from fault_injection import FaultKind, FaultPlan, FaultRate
from harness import SimOptions, Simulator
from harness.adapters import AdapterError, GraphBox, langgraph_target
from harness.engines.replay import replay
from harness.sim.history import Applied, Dispatched, Observed
from scenarios.langgraph import refund

ROOT = Path(__file__).resolve().parents[3]


def only(*kinds: FaultKind, rate: float = 0.3) -> FaultPlan:
    return FaultPlan(tuple(FaultRate(kind, rate) for kind in kinds))


class TestDefinitionReadOffTheGraph:
    def test_nodes_edges_and_path_maps_are_the_moves(self) -> None:
        definition = refund.target.definition
        assert set(definition.states) == {"__start__", "look_up", "review", "refund",
                                          "__end__"}
        assert definition.initial == "__start__"
        assert definition.states["__end__"].final
        review = definition.spec.states["review"]
        assert review.type == "wait"  # it calls interrupt(): it waits for a human
        # it asks once, not in a loop: an answer never leaves it asking again
        assert {t.target for t in review.on["answer"]} == {"refund", "__end__"}
        # it calls no tool: it never fails on one, so it takes no retry
        assert "retry" not in review.on
        assert {t.target for t in definition.spec.states["refund"].on["retry"]} == {
            "__end__"}
        assert [t.target for t in definition.spec.states["look_up"].always] == ["review"]

    def test_a_loop_is_read_with_guards_that_keep_it_loadable(self) -> None:
        class Count(TypedDict):
            n: int

        def build(box: GraphBox) -> StateGraph:
            graph = StateGraph(Count)
            graph.add_node("tick", lambda state: {"n": state["n"] + 1})
            graph.add_edge(START, "tick")
            graph.add_conditional_edges("tick", lambda s: END if s["n"] > 3 else "tick")
            return graph

        target = langgraph_target(build, input={"n": 0})
        moves = {t.target for t in target.definition.spec.states["tick"].always}
        assert moves == {"tick", "__end__"}  # no path map: any node, or the end
        result = Simulator(target.definition, SimOptions(seed=1), machine=target).run()
        assert result.status == "final", result.failure
        assert {obs.state for obs in result.final.values()} == {"__end__"}


class Fan(TypedDict):
    items: list[int]
    out: Annotated[list[int], operator.add]


def fan_out(box: GraphBox) -> StateGraph:
    """START -> split -> (one `work` task per item, by Send) -> join -> END, and `audit`
    beside `split` from START: a superstep of three `work` tasks, one of two nodes."""
    graph = StateGraph(Fan)
    graph.add_node("split", lambda state: {})
    graph.add_node("audit", lambda state: {})
    graph.add_node("work", lambda state: {"out": [state["x"]]})
    graph.add_node("join", lambda state: {})
    graph.add_edge(START, "split")
    graph.add_edge(START, "audit")
    graph.add_conditional_edges(
        "split", lambda state: [Send("work", {"x": i}) for i in state["items"]], ["work"])
    graph.add_edge("work", "join")
    graph.add_edge("join", END)
    graph.add_edge("audit", END)
    return graph


class TestMovesWithinACall:
    """A graph runs node after node inside one call: the machine tells each move it made
    (`Observation.moves`), so a run that ends within one call is not vacuous."""

    def test_each_superstep_moves_from_the_one_before(self) -> None:
        target = langgraph_target(fan_out, input={"items": [1, 2, 3], "out": []})
        options = SimOptions(seed=1, executions=1, plan=FaultPlan(()))
        result = Simulator(target.definition, options, machine=target).run()
        assert result.status == "final", result.failure
        (seen,) = [r for r in result.history if type(r) is Observed]
        assert seen.state == "__end__"
        # three work tasks are one move, and split and audit, siblings, no move of each other
        # (told sorted: LangGraph writes a task's edges in a set's order)
        assert seen.moves == (("__start__", "audit"), ("__start__", "split"),
                              ("audit", "__end__"), ("join", "__end__"), ("split", "work"),
                              ("work", "join"))

    def test_a_move_is_the_branch_taken_not_every_edge_that_leads_there(self) -> None:
        """`a` may go to `b` but goes to END; `route` sends the run to `b` by a Command: the
        moves told are a->END and route->b, not a->b."""
        def build(box: GraphBox) -> StateGraph:
            def route(state: Fan) -> Command[Literal["b"]]:
                return Command(goto="b")

            graph = StateGraph(Fan)
            graph.add_node("a", lambda state: {})
            graph.add_node("route", route)
            graph.add_node("b", lambda state: {})
            graph.add_edge(START, "a")
            graph.add_edge(START, "route")
            graph.add_conditional_edges("a", lambda state: END, ["b", END])
            graph.add_edge("b", END)
            return graph

        seen = self.observed(langgraph_target(build, input={"items": [], "out": []}))
        assert set(seen.moves) == {("__start__", "a"), ("__start__", "route"),
                                   ("a", "__end__"), ("route", "b"), ("b", "__end__")}

    def test_a_move_the_graph_was_not_read_to_have_is_refused(self) -> None:
        """A Command(goto=...) with no Literal annotation is not read off the graph: the move
        is the adapter's to refuse, naming the fix, never a verdict on edges the graph lacks."""
        def build(box: GraphBox) -> StateGraph:
            def route(state: Fan) -> Command:  # type: ignore[type-arg]
                return Command(goto="b")

            graph = StateGraph(Fan)
            graph.add_node("route", route)
            graph.add_node("b", lambda state: {})
            graph.add_conditional_edges(START, lambda state: "route", ["route", "b"])
            graph.add_edge("b", END)
            return graph

        target = langgraph_target(build, input={"items": [], "out": []})
        options = SimOptions(seed=1, executions=1, plan=FaultPlan(()))
        with pytest.raises(AdapterError, match=re.escape(
                "node 'route' went to 'b', which the adapter did not read off the graph (a "
                "Command(goto=...) needs its node's return annotated Command[Literal['b', "
                "...]]")):
            Simulator(target.definition, options, machine=target).run()

    @staticmethod
    def observed(target: Any) -> Observed:
        options = SimOptions(seed=1, executions=1, plan=FaultPlan(()))
        result = Simulator(target.definition, options, machine=target).run()
        assert result.status == "final", result.failure
        (seen,) = [r for r in result.history if type(r) is Observed]
        return seen

    def test_a_graph_done_in_one_call_is_held_not_vacuous(self) -> None:
        target = langgraph_target(fan_out, input={"items": [1, 2], "out": []})
        report = campaign(target, runs=5, plan=FaultPlan(()))
        assert report.verdict == "held", (report.vacuous, report.failures)
        taken = report.summary()["coverage"]["transitions"]
        # all six eventless moves, and no retry: no node calls a tool, so none fails on one
        assert taken == {"reached": 6, "of": 6, "missing": []}, taken


class TestSoundGraph:
    def test_holds_under_every_fault_and_reaches_every_crash_point(self) -> None:
        # 80 blind runs reach every crash point; the mixed strategy's mutants, half of them,
        # spend their runs elsewhere and miss one (after_tool_call) in so few
        report = campaign(refund.target, runs=80, strategy="swarm")
        assert report.held, [f.violations for f in report.failures]
        assert not report.vacuous
        assert report.faults.get("crash", 0) > 10
        coverage = report.summary()["coverage"]
        assert set(coverage["crash_points"]["missing"]) <= {"put_ahead_of_writes"}
        assert coverage["transitions"]["reached"] >= 5

    @pytest.mark.parametrize("durability", ["async", "exit"])
    def test_holds_under_the_other_durabilities(self, durability: str) -> None:
        target = langgraph_target(refund.sound, name=f"refund_{durability}",
                                  input=refund.INPUT, durability=durability,
                                  tools={"payments.refund": refund.HONOURS_KEYS})
        report = campaign(target, runs=40)
        assert report.held, [f.violations for f in report.failures]
        assert report.faults.get("crash", 0) > 0

    def test_the_same_seed_gives_the_same_history(self) -> None:
        def history(seed: int) -> list[str]:
            result = Simulator(refund.target.definition, SimOptions(seed=seed),
                               machine=refund.target).run()
            return [repr(record) for record in result.history]

        for seed in (3, 11):
            assert history(seed) == history(seed)

    def test_the_same_seed_gives_the_same_history_in_any_process(self, tmp_path: Path) -> None:
        """Byte for byte across processes with other hash seeds (a set's order, the moves a
        task's writes tell, a temp file's name never reach the history)."""
        script = tmp_path / "history.py"
        script.write_text(
            "import sys\n"
            "from harness import SimOptions, Simulator\n"
            "from harness.sim.history import dump_line\n"
            "from scenarios.langgraph import refund\n"
            "from tests.harness.adapters.test_langgraph_adapter import fan_out\n"
            "from harness.adapters import langgraph_target\n"
            "for target in (refund.target, langgraph_target(fan_out, input={'items': [1, 2],"
            " 'out': []})):\n"
            "    for seed in (3, 11):\n"
            "        result = Simulator(target.definition, SimOptions(seed=seed),"
            " machine=target).run()\n"
            "        sys.stdout.write(''.join(dump_line(r) + '\\n' for r in result.history))\n")

        def run(hash_seed: str) -> str:
            # the test module it imports takes its helpers from tests/support
            path = os.pathsep.join([str(ROOT), str(ROOT / "tests" / "support")])
            env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": path}
            done = subprocess.run([sys.executable, str(script)], cwd=ROOT, env=env,
                                  capture_output=True, text=True, check=False)
            assert done.returncode == 0, done.stderr
            return done.stdout

        first = run("1")
        assert '"moves":' in first and first == run("2") == run("12345")


class TestNaiveGraphs:
    @pytest.mark.parametrize(("name", "plan"), [
        ("notify_before_interrupt", None),
        ("charge_with_retry", only(FaultKind.TOOL_TIMEOUT_AFTER_APPLY, rate=0.5)),
        ("key_per_attempt", only(FaultKind.TOOL_TIMEOUT_AFTER_APPLY, rate=0.5)),
    ])
    def test_caught_shrunk_and_replayed(self, name: str, plan: FaultPlan | None,
                                        tmp_path: Path) -> None:
        target = getattr(refund, name)
        report = campaign(target, runs=60, plan=plan, replay_dir=tmp_path)
        assert not report.held
        failure = report.failures[0]
        assert failure.rule == "no_duplicate_effect", failure.violations
        assert failure.counterexample is not None
        assert len(failure.counterexample.trace()) <= 3
        assert failure.replay_file is not None
        outcome = replay(failure.replay_file)
        assert outcome.reproduced
        assert outcome.rule == "no_duplicate_effect"

    def test_the_retry_policy_is_what_charges_twice(self) -> None:
        plan = only(FaultKind.TOOL_TIMEOUT_AFTER_APPLY, rate=1.0)
        approving = langgraph_target(refund.retrying, input=refund.INPUT,
                                     answers={"approve": True},
                                     tools={"payments.refund": refund.IGNORES_KEYS})
        result = Simulator(approving.definition, SimOptions(seed=0, plan=plan),
                           machine=approving).run()
        charges = [r for r in result.history if type(r) is Applied and r.execution == "x1"]
        # the policy's three attempts, each timed out after taking effect, under one key
        assert len(charges) >= 3
        assert {r.key for r in charges} == {"x1/refund/3"}


class TestLangChainTools:
    def test_a_tool_node_goes_through_the_tool_world(self) -> None:
        @tool("payments.refund")
        def refund_tool(order_id: str, amount: int) -> str:
            """Refunds an order."""
            raise AssertionError("the real tool is never called under the harness")

        class Chat(TypedDict):
            messages: list[Any]

        def build(box: GraphBox) -> StateGraph:
            def agent(state: Chat) -> dict[str, Any]:
                from langchain_core.messages import AIMessage
                return {"messages": [AIMessage("", tool_calls=[{
                    "name": "payments.refund", "args": {"order_id": "o-1", "amount": 5},
                    "id": "call-1"}])]}

            graph = StateGraph(Chat)
            graph.add_node("agent", agent)
            graph.add_node("tools", ToolNode([refund_tool]))
            graph.add_edge(START, "agent")
            graph.add_edge("agent", "tools")
            graph.add_edge("tools", END)
            return graph

        target = langgraph_target(build, input={"messages": []},
                                  tools={"payments.refund": {"idempotency_keys": True}})
        result = Simulator(target.definition, SimOptions(seed=0, plan=FaultPlan()),
                           machine=target).run()
        applied = [r for r in result.history if type(r) is Applied]
        assert applied and all(r.tool == "payments.refund" for r in applied)
        assert result.status == "final"

    def test_two_tool_calls_of_one_message_are_two_effects(
            self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Each of a model's tool calls is keyed by its id: two refunds in one message both
        land under a keyed tool, and run in the calling thread."""
        import threading

        @tool("payments.refund")
        def refund_tool(order_id: str) -> str:
            """Refunds an order."""
            raise AssertionError("the real tool is never called under the harness")

        class Chat(TypedDict):
            messages: list[Any]

        threads: set[str] = set()

        def build(box: GraphBox) -> StateGraph:
            def agent(state: Chat) -> dict[str, Any]:
                from langchain_core.messages import AIMessage
                return {"messages": [AIMessage("", tool_calls=[
                    {"name": "payments.refund", "args": {"order_id": order}, "id": f"c-{order}"}
                    for order in ("o-1", "o-2")])]}

            graph = StateGraph(Chat)
            graph.add_node("agent", agent)
            graph.add_node("tools", ToolNode([refund_tool]))
            graph.add_edge(START, "agent")
            graph.add_edge("agent", "tools")
            graph.add_edge("tools", END)
            return graph

        calling = GraphBox.call

        def call(box: GraphBox, *args: Any, **kwargs: Any) -> Any:
            threads.add(threading.current_thread().name)
            return calling(box, *args, **kwargs)

        monkeypatch.setattr(GraphBox, "call", call)
        target = langgraph_target(build, input={"messages": []},
                                  tools={"payments.refund": {"idempotency_keys": True}})
        options = SimOptions(seed=0, executions=1, plan=FaultPlan(()))
        result = Simulator(target.definition, options, machine=target).run()
        applied = [r for r in result.history if type(r) is Applied]
        assert sorted(r.key for r in applied) == ["x1/tools/2/c-o-1", "x1/tools/2/c-o-2"]
        assert threads == {threading.current_thread().name}


class TestDefaultKeys:
    """A node's calls keyed by default (`box.call(tool, input)`): one key per call, the same
    for that call on every re-run."""

    def test_each_send_task_and_each_call_of_a_run_has_its_own_key(self) -> None:
        def build(box: GraphBox) -> StateGraph:
            def refund(state: dict[str, Any]) -> dict[str, Any]:
                box.call("payments.refund", {"order": state["x"]})
                box.call("payments.refund", {"order": state["x"], "fee": True})
                return {"out": [state["x"]]}

            graph = StateGraph(Fan)
            graph.add_node("split", lambda state: {})
            graph.add_node("refund", refund)
            graph.add_edge(START, "split")
            graph.add_conditional_edges(
                "split", lambda state: [Send("refund", {"x": i}) for i in state["items"]],
                ["refund"])
            graph.add_edge("refund", END)
            return graph

        target = langgraph_target(build, input={"items": [1, 2, 3], "out": []},
                                  tools={"payments.refund": {"idempotency_keys": True}})
        options = SimOptions(seed=0, executions=1, plan=FaultPlan(()))
        result = Simulator(target.definition, options, machine=target).run()
        keys = sorted(r.key for r in result.history if type(r) is Applied)
        assert keys == [f"x1/refund/2/send{i}{n}" for i in range(3) for n in ("", "/2")]

    def test_a_node_run_again_on_resume_calls_under_the_same_keys(self) -> None:
        """A node that asks a human runs again from its top on the resume: its call before
        the interrupt is made again under the key of the first run, so a keyed tool takes it
        once."""
        def build(box: GraphBox) -> StateGraph:
            def review(state: Fan) -> dict[str, Any]:
                box.call("notify.send", {"what": "review"})
                interrupt("approve?")
                return {}

            graph = StateGraph(Fan)
            graph.add_node("review", review)
            graph.add_edge(START, "review")
            graph.add_edge("review", END)
            return graph

        target = langgraph_target(build, input={"items": [], "out": []},
                                  tools={"notify.send": {"idempotency_keys": True}})
        options = SimOptions(seed=0, executions=1, plan=FaultPlan(()))
        result = Simulator(target.definition, options, machine=target).run()
        assert result.status == "final", result.failure
        dispatched = [r.key for r in result.history if type(r) is Dispatched]
        assert len(dispatched) >= 2 and set(dispatched) == {"x1/review/1"}


class TestInterrupts:
    def test_two_nodes_asking_at_once_are_answered_one_by_one(self) -> None:
        def build(box: GraphBox) -> StateGraph:
            def asker(name: str) -> Any:
                def ask(state: Fan) -> dict[str, Any]:
                    interrupt(f"{name}?")
                    return {"out": [len(name)]}
                return ask

            graph = StateGraph(Fan)
            graph.add_node("legal", asker("legal"))
            graph.add_node("finance", asker("finance"))
            graph.add_edge(START, "legal")
            graph.add_edge(START, "finance")
            graph.add_edge("legal", END)
            graph.add_edge("finance", END)
            return graph

        target = langgraph_target(build, input={"items": [], "out": []})
        report = campaign(target, runs=10)
        assert report.verdict == "held", (report.vacuous, [f.violations for f in
                                                           report.failures])

    def test_an_interrupt_in_a_helper_is_read_off_its_source(self) -> None:
        def ask(prompt: str) -> Any:
            return interrupt(prompt)

        def build(box: GraphBox) -> StateGraph:
            def review(state: Fan) -> dict[str, Any]:
                ask("approve?")
                return {}

            graph = StateGraph(Fan)
            graph.add_node("review", review)
            graph.add_edge(START, "review")
            graph.add_edge("review", END)
            return graph

        target = langgraph_target(build, input={"items": [], "out": []})
        assert target.asking == {"review"}
        report = campaign(target, runs=10, plan=FaultPlan(()))
        assert report.verdict == "held", (report.vacuous, report.failures)

    def test_an_interrupt_the_source_scan_misses_is_refused_naming_the_fix(self) -> None:
        class Human:
            def ask(self, prompt: str) -> Any:
                return interrupt(prompt)

        human = Human()

        def build(box: GraphBox) -> StateGraph:
            def review(state: Fan) -> dict[str, Any]:
                human.ask("approve?")  # a method: the scan does not follow it
                return {}

            graph = StateGraph(Fan)
            graph.add_node("review", review)
            graph.add_edge(START, "review")
            graph.add_edge("review", END)
            return graph

        hidden = langgraph_target(build, input={"items": [], "out": []})
        options = SimOptions(seed=0, executions=1, plan=FaultPlan(()))
        with pytest.raises(AdapterError, match=re.escape("interrupts=['review']")):
            Simulator(hidden.definition, options, machine=hidden).run()
        named = langgraph_target(build, input={"items": [], "out": []}, interrupts=["review"])
        result = Simulator(named.definition, options, machine=named).run()
        assert result.status == "final", result.failure


class Empty(TypedDict):
    n: int


def _graph(*nodes: str) -> StateGraph:
    graph = StateGraph(Empty)
    for node in nodes:
        graph.add_node(node, lambda state: {})
    return graph


class TestRefused:
    def test_a_subgraph_node(self) -> None:
        def build(box: GraphBox) -> StateGraph:
            inner = _graph("a")
            inner.add_edge(START, "a")
            graph = StateGraph(Empty)
            graph.add_node("inner", inner.compile())
            graph.add_edge(START, "inner")
            return graph

        with pytest.raises(AdapterError, match="node 'inner' is a subgraph"):
            langgraph_target(build)

    def test_not_a_graph(self) -> None:
        with pytest.raises(AdapterError, match="build gave dict, not a LangGraph StateGraph"):
            langgraph_target(lambda box: {})

    def test_no_entry(self) -> None:
        with pytest.raises(AdapterError, match="no edge from START"):
            langgraph_target(lambda box: _graph("a"))

    def test_an_unknown_durability_or_interrupt_node(self) -> None:
        def build(box: GraphBox) -> StateGraph:
            graph = _graph("a")
            graph.add_edge(START, "a")
            return graph

        with pytest.raises(AdapterError, match="durability 'never'"):
            langgraph_target(build, durability="never")
        with pytest.raises(AdapterError, match="interrupts names nodes the graph lacks: b"):
            langgraph_target(build, interrupts=["b"])

    def test_a_node_that_raises_is_the_graphs_failure(self) -> None:
        def build(box: GraphBox) -> StateGraph:
            def boom(state: Empty) -> dict[str, Any]:
                raise KeyError("no such order")

            graph = StateGraph(Empty)
            graph.add_node("boom", boom)
            graph.add_edge(START, "boom")
            return graph

        target = langgraph_target(build, input={"n": 0})
        result = Simulator(target.definition, SimOptions(seed=0), machine=target).run()
        assert result.status == "machine_failed"
        assert result.failure is not None and result.failure.error == "KeyError"


def test_an_interrupting_node_is_found_in_its_source() -> None:
    def build(box: GraphBox) -> StateGraph:
        def ask(state: Empty) -> dict[str, Any]:
            return {"n": interrupt("how many?")}

        graph = StateGraph(Empty)
        graph.add_node("ask", ask)
        graph.add_edge(START, "ask")
        graph.add_edge("ask", END)
        return graph

    target = langgraph_target(build, input={"n": 0}, answers={"three": 3})
    assert target.definition.spec.states["ask"].type == "wait"
    result = Simulator(target.definition, SimOptions(seed=0, plan=FaultPlan()),
                       machine=target).run()
    assert result.status == "final"
    assert {obs.state for obs in result.final.values()} == {"__end__"}


class TestCli:
    def fuzz_cli(self, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "harness.cli", "fuzz", *args, "-q"],
                              cwd=cwd, capture_output=True, text=True, check=False)

    def test_a_campaign_leaves_no_file_behind(self, tmp_path: Path) -> None:
        """Each run's SQLite file (and its journals) is removed as the run ends, in worker
        processes too (they end with os._exit: no finalizer runs there)."""
        scratch = tmp_path / "tmp"
        scratch.mkdir()
        done = subprocess.run(
            [sys.executable, "-m", "harness.cli", "fuzz", "scenarios.langgraph.refund:target",
             "--runs", "6", "-n", "2", "--no-report", "-q"], cwd=ROOT, capture_output=True,
            text=True, check=False, env={**os.environ, "TMPDIR": str(scratch)})
        assert done.returncode == 0, done.stdout + done.stderr
        assert sorted(p.name for p in scratch.rglob("*")) == []

    def test_sound_holds_and_naive_fails(self, tmp_path: Path) -> None:
        held = self.fuzz_cli("scenarios.langgraph.refund:target", "--runs", "20",
                             "--report", str(tmp_path), cwd=ROOT)
        assert held.returncode == 0, held.stdout + held.stderr
        caught = self.fuzz_cli("scenarios.langgraph.refund:notify_before_interrupt",
                               "--runs", "20", "--report", str(tmp_path), cwd=ROOT)
        assert caught.returncode == 1, caught.stdout + caught.stderr
        assert "no_duplicate_effect" in caught.stdout
        assert "fsmharness replay" in caught.stdout

    def test_a_graph_it_cannot_read_is_one_line(self, tmp_path: Path) -> None:
        (tmp_path / "nested.py").write_text(
            "from typing import TypedDict\n"
            "from langgraph.graph import START, StateGraph\n"
            "from harness.adapters import langgraph_target\n"
            "class S(TypedDict):\n    n: int\n"
            "def build(box):\n"
            "    inner = StateGraph(S)\n    inner.add_node('a', lambda s: {})\n"
            "    inner.add_edge(START, 'a')\n"
            "    graph = StateGraph(S)\n    graph.add_node('inner', inner.compile())\n"
            "    graph.add_edge(START, 'inner')\n    return graph\n"
            "target = langgraph_target(build)\n")
        result = self.fuzz_cli("nested:target", "--runs", "2", cwd=tmp_path)
        assert result.returncode == 2, result.stdout + result.stderr
        assert "Traceback" not in result.stderr
        assert "is a subgraph" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
