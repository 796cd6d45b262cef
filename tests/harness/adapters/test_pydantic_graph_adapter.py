"""pydantic-graph graphs under the harness, end to end: what is read off a graph, a node's
run crashed at each point and recovered, a failed node retried, a sound graph holding under
every fault, the naive ones caught with a shrunk trace and a replay file, and the graphs the
adapter refuses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from adapter_campaigns import campaign
from histories import histories_of
from pydantic_graph import BaseNode, End, GraphRunContext
from pydantic_graph.graph import Graph

from fault_injection import FaultKind, FaultPlan, FaultRate, SimulatedCrash
from harness import SimOptions, Simulator
from harness.adapters.peers import AdapterError
from harness.adapters.pydantic_graph import (
    CRASH_POINTS,
    NodeBox,
    pydantic_graph_target,
)
from harness.engines.replay import replay
from harness.sim.history import Observed
from reference_machine import Event, Failure, Success
from scenarios.pydantic_graph import refund

ROOT = Path(__file__).resolve().parents[3]


def only(*kinds: FaultKind, rate: float = 0.3) -> FaultPlan:
    return FaultPlan(tuple(FaultRate(kind, rate) for kind in kinds))


class Calls:
    """Tools that record every call (one may fail once), and a probe that crashes at a
    chosen point, the n-th time it is passed."""

    def __init__(self, crash_at: str = "", nth: int = 1, fail: str = "") -> None:
        self.calls: list[tuple[str, dict[str, Any], str]] = []
        self.crash_at, self.nth, self.fail = crash_at, nth, fail
        self.passed: list[str] = []

    def tools(self, *names: str) -> dict[str, Any]:
        def tool(name: str) -> Any:
            def call(input: Mapping[str, Any], key: str) -> Success | Failure:
                self.calls.append((name, dict(input), key))
                if name == self.fail:
                    self.fail = ""
                    return Failure("transient", "try again")
                return Success({"id": "r-1"})
            return call
        return {name: tool(name) for name in names}

    def probe(self, point: str) -> None:
        self.passed.append(point)
        if point == self.crash_at:
            self.nth -= 1
            if self.nth == 0:
                raise SimulatedCrash(point)

    def keys(self, tool: str) -> list[str]:
        return [key for name, _, key in self.calls if name == tool]


TOOLS = ("payments.refund", "notify.email", "support.ticket")


def machine(calls: Calls, target: Any = refund.target) -> Any:
    return target(target.definition, calls.tools(*TOOLS), calls.probe)


def statuses(made: Any, execution: str = "x") -> list[str]:
    return [f"{s['id']}={s.get('status', 'end')}" for s in made.disk.read(execution)]


class TestDefinitionReadOffTheGraph:
    def test_nodes_are_states_and_return_annotations_the_moves(self) -> None:
        definition = refund.target.definition
        assert set(definition.states) == {"LookUp", "Charge", "Notify", "Escalate",
                                          "__end__"}
        assert definition.initial == "LookUp"
        assert definition.states["__end__"].final
        spec = definition.spec.states
        assert [t.target for t in spec["Charge"].always] == ["Notify", "Escalate"]
        assert [t.target for t in spec["Notify"].always] == ["__end__"]
        # a retry that fails again saves no new snapshot: no move back to itself is seen
        assert [t.target for t in spec["Charge"].on["retry"]] == ["Notify", "Escalate"]
        rerun = refund.key_by_snapshot_id.definition.spec.states
        # under `rerun` it starts the node on a new snapshot (the version goes up)
        assert [t.target for t in rerun["Charge"].on["retry"]] == ["Charge", "Notify",
                                                                   "Escalate"]

    def test_a_loop_is_read_with_guards_that_keep_it_loadable(self) -> None:
        """The docs' never_42 graph: Increment and Check42 call each other."""
        target = pydantic_graph_target(upstream_never_42(), start=Increment,
                                       state=lambda: Number(41))
        moves = {t.target for t in target.definition.spec.states["Check42"].always}
        assert moves == {"Increment", "__end__"}
        result = Simulator(target.definition, SimOptions(seed=1), machine=target).run()
        assert result.status == "final", result.failure
        assert {obs.state for obs in result.final.values()} == {"__end__"}


@dataclass
class Number:
    number: int = 0


@dataclass
class Increment(BaseNode[Number, NodeBox]):
    async def run(self, ctx: GraphRunContext[Number, NodeBox]) -> Check42:
        ctx.state.number += 1
        return Check42()


@dataclass
class Check42(BaseNode[Number, NodeBox, int]):
    async def run(self, ctx: GraphRunContext[Number, NodeBox]) -> Increment | End[int]:
        if ctx.state.number == 42:
            return Increment()
        return End(ctx.state.number)


def upstream_never_42() -> Graph[Number, NodeBox, int]:
    nodes: Any = (Increment, Check42)
    return Graph(nodes=nodes)


class TestByHand:
    def test_a_run_saves_each_snapshot_and_tells_its_moves(self) -> None:
        calls = Calls()
        made = machine(calls)
        assert made.start("x", {}, 0) == "accepted"
        assert statuses(made) == ["LookUp:1=success", "Charge:2=success", "Notify:3=success",
                                  "end:4=end"]
        seen = made.observe("x")
        assert (seen.state, seen.status, seen.outcome) == ("__end__", "final", "success")
        assert seen.moves == (("LookUp", "Charge"), ("Charge", "Notify"),
                              ("Notify", "__end__"))
        assert calls.keys("payments.refund") == ["x/Charge/2"]
        assert made.start("x", {}, 0) == "ignored:duplicate"

    @pytest.mark.parametrize("point", CRASH_POINTS)
    def test_a_crash_anywhere_in_the_charge_is_recovered_under_one_key(self, point: str
                                                                       ) -> None:
        # the charge is the second node: its points come after the look-up's
        nth = {"after_running": 2, "after_tool_call": 1, "before_save": 5,
               "after_save": 5}[point]
        calls = Calls(crash_at=point, nth=nth)
        made = machine(calls)
        with pytest.raises(SimulatedCrash, match=f"simulated crash at {point}"):
            made.start("x", {}, 0)
        made.crash()
        made.recover(0)
        assert made.observe("x").status == "final"
        keys = calls.keys("payments.refund")
        assert set(keys) == {"x/Charge/2"}  # a re-run calls under the same key
        assert calls.keys("notify.email") == ["x/Notify/3"]

    def test_a_crash_after_the_effect_leaves_the_snapshot_running_and_requeue_reruns_it(
            self) -> None:
        calls = Calls(crash_at="after_tool_call")
        made = machine(calls)
        with pytest.raises(SimulatedCrash, match="simulated crash at after_tool_call"):
            made.start("x", {}, 0)
        assert statuses(made) == ["LookUp:1=success", "Charge:2=running"]
        assert made.observe("x").state == "Charge"
        made.crash()
        made.recover(0)
        assert calls.keys("payments.refund") == ["x/Charge/2", "x/Charge/2"]
        assert statuses(made)[:2] == ["LookUp:1=success", "Charge:2=success"]

    def test_a_failed_node_waits_for_its_retry(self) -> None:
        calls = Calls(fail="payments.refund")
        made = machine(calls)
        assert made.start("x", {}, 0) == "accepted"
        assert statuses(made) == ["LookUp:1=success", "Charge:2=error"]
        seen = made.observe("x")
        assert (seen.state, seen.status) == ("Charge", "waiting")
        made.crash()
        made.recover(0)  # a failed node is not run again by recovery: it waits
        assert len(calls.calls) == 1
        retry = Event("ev1", "retry", "system", {})
        assert made.deliver("x", retry, 0) == "accepted"
        assert made.observe("x").status == "final"
        assert calls.keys("payments.refund") == ["x/Charge/2", "x/Charge/2"]
        assert made.deliver("x", retry, 0) == "ignored:duplicate"
        assert made.deliver("x", Event("ev2", "retry", "system", {}), 0) == (
            "rejected:nothing failed")
        assert made.deliver("x", Event("ev3", "answer", "human", {}), 0) == (
            "rejected:answer is not an event the graph takes")

    def test_rerun_gives_the_node_a_new_snapshot_id_in_the_same_place(self) -> None:
        calls = Calls(crash_at="after_tool_call")
        made = machine(calls, refund.key_by_snapshot_id)
        with pytest.raises(SimulatedCrash, match="simulated crash at after_tool_call"):
            made.start("x", {}, 0)
        made.crash()
        made.recover(0)
        # the re-run keeps the place (its default key would be the same); the naive key,
        # pydantic-graph's snapshot id, is minted anew
        assert calls.keys("payments.refund") == ["Charge:2", "Charge:3"]
        assert statuses(made)[:3] == ["LookUp:1=success", "Charge:2=running",
                                      "Charge:3=success"]
        assert made.disk.places[("x", "Charge:3")] == made.disk.places[("x", "Charge:2")] == 2
        assert made.observe("x").status == "final"


class TestSoundGraph:
    def test_holds_under_every_fault_and_reaches_every_crash_point(self) -> None:
        report = campaign(refund.target, runs=60)
        assert report.held, [f.violations for f in report.failures]
        assert not report.vacuous
        assert report.faults.get("crash", 0) > 10
        coverage = report.summary()["coverage"]
        assert coverage["crash_points"]["missing"] == []
        taken = coverage["transitions"]
        assert taken["missing"] == [] and taken["reached"] == 10, taken  # every move

    def test_the_same_seed_gives_the_same_history_in_any_process(self) -> None:
        first = histories_of("scenarios.pydantic_graph.refund:target", "1")
        assert '"moves":' in first
        assert first == histories_of("scenarios.pydantic_graph.refund:target", "2") \
            == histories_of("scenarios.pydantic_graph.refund:target", "12345")


class TestNaiveGraphs:
    @pytest.mark.parametrize(("name", "plan"), [
        ("key_by_snapshot_id", only(FaultKind.CRASH, rate=0.3)),
        ("charge_ignoring_keys", only(FaultKind.TOOL_TIMEOUT_AFTER_APPLY, rate=0.5)),
    ])
    def test_caught_shrunk_and_replayed(self, name: str, plan: FaultPlan | None,
                                        tmp_path: Path) -> None:
        report = campaign(getattr(refund, name), runs=60, plan=plan, replay_dir=tmp_path)
        assert not report.held
        failure = report.failures[0]
        assert failure.rule == "no_duplicate_effect", failure.violations
        assert failure.counterexample is not None
        assert len(failure.counterexample.trace()) <= 3
        assert failure.replay_file is not None
        outcome = replay(failure.replay_file)
        assert outcome.reproduced and outcome.rule == "no_duplicate_effect"

    def test_the_cause_names_the_snapshot_id(self) -> None:
        plan = only(FaultKind.CRASH, rate=0.5)
        report = campaign(refund.key_by_snapshot_id, runs=40, plan=plan)
        assert not report.held
        said = " ".join(v.message for v in report.failures[0].violations)
        assert "the key is built from the snapshot id pydantic-graph gave the node's run" in said


@dataclass
class Empty:
    n: int = 0


@dataclass
class Wanders(BaseNode[Empty, NodeBox, int]):
    async def run(self, ctx: GraphRunContext[Empty, NodeBox]) -> Elsewhere:
        return Stray()  # type: ignore[return-value]  # not what it annotates


@dataclass
class Elsewhere(BaseNode[Empty, NodeBox, int]):
    async def run(self, ctx: GraphRunContext[Empty, NodeBox]) -> Stray:
        return Stray()


@dataclass
class Stray(BaseNode[Empty, NodeBox, int]):
    async def run(self, ctx: GraphRunContext[Empty, NodeBox]) -> End[int]:
        return End(1)


@dataclass
class Forever(BaseNode[Empty, NodeBox]):
    async def run(self, ctx: GraphRunContext[Empty, NodeBox]) -> Forever:
        return Forever()


class TestRefused:
    def test_not_a_graph(self) -> None:
        with pytest.raises(AdapterError, match="dict is not a pydantic-graph Graph"):
            pydantic_graph_target({}, start=Stray)

    def test_the_builder_api(self) -> None:
        from pydantic_graph import GraphBuilder

        builder = GraphBuilder(state_type=Empty, output_type=int)
        with pytest.raises(AdapterError, match="the GraphBuilder API has no persistence"):
            pydantic_graph_target(builder, start=Stray)

    def test_a_start_outside_the_graph_or_an_unknown_recovery(self) -> None:
        graph = Graph(nodes=(Stray,))
        with pytest.raises(AdapterError, match="give a node of the graph"):
            pydantic_graph_target(graph, start=Wanders)
        with pytest.raises(AdapterError, match="recovery 'retry': expected one of"):
            pydantic_graph_target(graph, start=Stray, recovery="retry")

    def test_a_graph_that_never_ends(self) -> None:
        with pytest.raises(AdapterError, match="no node of the graph can end the run"):
            pydantic_graph_target(Graph(nodes=(Forever,)), start=Forever)

    def test_a_move_its_annotation_does_not_name(self) -> None:
        target = pydantic_graph_target(Graph(nodes=(Wanders, Elsewhere, Stray)),
                                       start=Wanders, state=Empty)
        options = SimOptions(seed=0, executions=1, plan=FaultPlan(()))
        # what the adapter cannot model is the user's input: the run stops on it
        with pytest.raises(AdapterError, match="node 'Wanders' returned 'Stray', which its "
                                               "run method's return annotation does not name"):
            Simulator(target.definition, options, machine=target).run()

    def test_a_tool_called_outside_a_node(self) -> None:
        made = machine(Calls())
        with pytest.raises(AdapterError, match="inside a node's run only"):
            made.box.call("payments.refund", {})


def test_the_observed_moves_cover_a_run_done_in_one_call() -> None:
    options = SimOptions(seed=1, executions=1, plan=FaultPlan(()))
    result = Simulator(refund.target.definition, options, machine=refund.target).run()
    (seen,) = [r for r in result.history if type(r) is Observed]
    assert seen.moves == (("LookUp", "Charge"), ("Charge", "Notify"), ("Notify", "__end__"))


@pytest.mark.parametrize(("isolate", "processes"), [(False, 1), (True, 2)],
                         ids=["in-process", "two-processes"])
def test_a_campaign_in_this_process_leaves_no_file_behind(
        isolate: bool, processes: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # forked workers inherit it
    report = campaign(refund.target, runs=8, isolate=isolate, processes=processes)
    assert report.held, [f.violations for f in report.failures]
    assert sorted(p.name for p in tmp_path.rglob("*")) == []


def test_nothing_reaches_the_disk() -> None:
    """The run's file is held in memory, written by pydantic-graph's own `_save_sync`."""
    made = machine(Calls())
    made.start("x", {}, 0)
    file = made.disk.accepted["x"]
    assert not isinstance(file, Path) and str(file) == "run-1.json"
    assert json.loads(file.read_bytes())[-1]["kind"] == "end"


class TestCli:
    def fuzz_cli(self, *args: str, env: Mapping[str, str] | None = None
                 ) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "harness.cli", "fuzz", *args, "-q"],
                              cwd=ROOT, capture_output=True, text=True, check=False,
                              env=None if env is None else {**os.environ, **env})

    @pytest.mark.parametrize("options", [("-n", "1"), ("-n", "2"),
                                         ("-n", "2", "--step-timeout", "0.001")],
                             ids=["forked", "two-processes", "killed-by-the-watchdog"])
    def test_a_campaign_leaves_no_file_behind(self, options: tuple[str, ...],
                                              tmp_path: Path) -> None:
        scratch = tmp_path / "tmp"
        scratch.mkdir()
        done = self.fuzz_cli("scenarios.pydantic_graph.refund:target", "--runs", "6",
                             *options, "--no-report", env={"TMPDIR": str(scratch)})
        # a run the watchdog kills fails its seed: the verdict does not matter here
        assert "Traceback" not in done.stderr, done.stderr
        if "--step-timeout" not in options:
            assert done.returncode == 0, done.stdout + done.stderr
        assert sorted(p.name for p in scratch.rglob("*")) == []

    def test_sound_holds_and_naive_fails(self, tmp_path: Path) -> None:
        held = self.fuzz_cli("scenarios.pydantic_graph.refund:target", "--runs", "20",
                             "--report", str(tmp_path))
        assert held.returncode == 0, held.stdout + held.stderr
        caught = self.fuzz_cli("scenarios.pydantic_graph.refund:key_by_snapshot_id",
                               "--runs", "20", "--faults", "crash", "--report", str(tmp_path))
        assert caught.returncode == 1, caught.stdout + caught.stderr
        assert "no_duplicate_effect" in caught.stdout
        assert "fsmharness replay" in caught.stdout


def test_the_file_is_pydantic_graphs_own() -> None:
    """The run's file is what FileStatePersistence writes: pydantic-graph reads it back."""
    made = machine(Calls())
    made.start("x", {}, 0)
    data = json.loads(made.disk.accepted["x"].read_bytes())
    assert [each["kind"] for each in data] == ["node", "node", "node", "end"]
    assert data[1]["node"] == {"amount": 40, "node_id": "Charge"}
