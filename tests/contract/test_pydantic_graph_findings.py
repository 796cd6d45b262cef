"""A behaviour of pydantic-graph 1.107.10's `FileStatePersistence` found through the adapter
on a graph written the way its docs write one (scenarios/pydantic_graph/upstream.py), and the
docs' own examples under the adapter. The finding is pinned twice: driven by hand, step by
step, so the behaviour itself is shown (on pydantic-graph alone too); and found by a fuzz
campaign told only to crash anywhere, shrunk, with a replay file that replays it. It is a
finding about pydantic-graph, not a failure of fsmharness: if a release changes it, its test
fails here and the pin moves."""

from __future__ import annotations

import asyncio
import importlib.metadata
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from pydantic_graph.exceptions import GraphRuntimeError
from pydantic_graph.persistence.file import FileStatePersistence

from fault_injection import FaultKind, FaultPlan, FaultRate, SimulatedCrash
from harness import SimOptions
from harness.engines.fuzz import FuzzOptions, fuzz
from harness.engines.replay import replay
from reference_machine import Success
from scenarios.pydantic_graph import upstream

PINNED = "1.107.10"


def test_the_pinned_release_is_installed() -> None:
    assert importlib.metadata.version("pydantic-graph") == PINNED, (
        "the findings below were made on 1.107.10")


class Calls:
    """Tools that record every call, and a probe that crashes at a chosen point, the n-th
    time it is passed."""

    def __init__(self, crash_at: str = "", nth: int = 1) -> None:
        self.calls: list[tuple[str, dict[str, Any], str]] = []
        self.crash_at, self.nth = crash_at, nth

    def tools(self, *names: str) -> dict[str, Any]:
        def tool(name: str) -> Any:
            def call(input: Mapping[str, Any], key: str) -> Success:
                self.calls.append((name, dict(input), key))
                return Success({"ok": True})
            return call
        return {name: tool(name) for name in names}

    def probe(self, point: str) -> None:
        if point == self.crash_at:
            self.nth -= 1
            if self.nth == 0:
                raise SimulatedCrash(point)


def campaign(target: Any, plan: FaultPlan | None, folder: Path, runs: int = 60) -> Any:
    sim = SimOptions(plan=plan) if plan is not None else SimOptions()
    return fuzz(target.definition, FuzzOptions(runs=runs, seed=0, sim=sim, replay_dir=folder),
                machine=target)


def assert_found(report: Any, rule: str, *fragments: str) -> list[str]:
    assert not report.held
    failure = report.failures[0]
    assert failure.rule == rule, failure.violations
    assert failure.counterexample is not None and failure.replay_file is not None
    trace = failure.counterexample.trace()
    text = "\n".join(trace)
    for fragment in fragments:
        assert fragment in text, text
    outcome = replay(failure.replay_file)
    assert outcome.reproduced and outcome.rule == rule
    return trace


def crashed_machine(target: Any, point: str, nth: int = 1) -> tuple[Any, Calls]:
    calls = Calls(crash_at=point, nth=nth)
    made = target(target.definition, calls.tools("payments.charge", "notify.email"),
                  calls.probe)
    with pytest.raises(SimulatedCrash, match=f"simulated crash at {point}"):
        made.start("t", {}, 0)
    made.crash()
    return made, calls


class TestRunningSnapshotIsNeverResumed:
    def test_on_pydantic_graph_alone(self, tmp_path: Path) -> None:
        """No harness: a file whose snapshot a dead process left `running` cannot be
        resumed, and there is nothing else to run it with."""
        class Crash(BaseException):
            pass

        graph = upstream.payment_graph
        path = tmp_path / "run.json"

        class Box(Any):  # the node's deps: a charge that dies after its effect
            def call(self, tool: str, input: Mapping[str, Any]) -> None:
                if tool == "payments.charge":
                    raise Crash("the process died after the charge")

        async def first() -> None:
            async with graph.iter(upstream.Charge(), state=upstream.Payment(), deps=Box(),
                                  persistence=FileStatePersistence(path)) as run:
                await run.next()

        with pytest.raises(Crash, match="the process died after the charge"):
            asyncio.run(first())

        async def resume() -> None:
            async with graph.iter_from_persistence(FileStatePersistence(path)):
                pass

        with pytest.raises(GraphRuntimeError, match="Unable to restore snapshot from state "
                                                    "persistence"):
            asyncio.run(resume())

    @pytest.mark.parametrize("point", ["after_running", "after_tool_call"])
    def test_by_hand_a_crash_in_the_node_loses_the_run(self, point: str) -> None:
        made, calls = crashed_machine(upstream.running_snapshot_lost, point)
        assert [s.get("status") for s in made.disk.read("t")] == ["running"]
        with pytest.raises(GraphRuntimeError, match=r"Unable to restore snapshot from state "
                           r"persistence.: pydantic-graph lost the run. Its last snapshot is "
                           r"'running'.*the cause is pydantic-graph's"):
            made.recover(0)
        assert len(calls.calls) == (point == "after_tool_call")  # the charge ran, or not

    def test_by_hand_a_crash_inside_a_write_leaves_the_lock_held(self) -> None:
        """A crash inside the `running` write (the file's lock held) leaves the lock: a
        resume waits for it, then gives up."""
        made, calls = crashed_machine(upstream.running_snapshot_lost, "before_save", nth=2)
        assert [s.get("status") for s in made.disk.read("t")] == ["created"]
        with pytest.raises(TimeoutError, match=r"the lock of run-1\.json is held.*pydantic-graph "
                                               r"lost the run.*the cause is pydantic-graph's"):
            made.recover(0)
        assert calls.calls == []

    def test_by_hand_a_crash_before_the_successor_is_saved(self) -> None:
        made, calls = crashed_machine(upstream.running_snapshot_lost, "after_save", nth=3)
        assert [s.get("status") for s in made.disk.read("t")] == ["success"]
        made.disk.locks.clear()  # the lock aside: nothing is `created`
        with pytest.raises(GraphRuntimeError, match="last snapshot is 'success'"):
            made.recover(0)
        assert len(calls.calls) == 1  # the charge took effect, and nothing goes on from it

    def test_found(self, tmp_path: Path) -> None:
        """A plan that crashes at any point, not told which: the campaign finds the run lost,
        in one step."""
        plan = FaultPlan((FaultRate(FaultKind.CRASH, 0.5),))
        report = campaign(upstream.running_snapshot_lost, plan, tmp_path, runs=40)
        trace = assert_found(report, "machine_ok", "pydantic-graph lost the run",
                             "the cause is pydantic-graph's", "FAULT crash (at ")
        assert len(trace) == 1

    def test_a_worker_that_requeues_the_snapshot_loses_nothing(self, tmp_path: Path) -> None:
        from harness.adapters.pydantic_graph import pydantic_graph_target

        requeued = pydantic_graph_target(upstream.payment_graph, start=upstream.Charge,
                                         state=upstream.Payment, name="pay_requeued",
                                         tools={"payments.charge": upstream.KEYED,
                                                "notify.email": upstream.KEYED})
        plan = FaultPlan((FaultRate(FaultKind.CRASH, 0.5),))
        report = campaign(requeued, plan, tmp_path, runs=40)
        assert report.held, (report.vacuous, [f.violations for f in report.failures])
        assert report.faults.get("crash", 0) > 0


class TestTheDocsExamples:
    def test_the_vending_machine_dispenses_again_after_a_crash(self) -> None:
        """A crash after `Purchase` dispensed and its `success` reached the file, before its
        End did: the requeued node dispenses again (the example keys nothing)."""
        calls = Calls(crash_at="after_save", nth=27)  # Purchase's `success` write
        made = upstream.vending_machine(upstream.vending_machine.definition,
                                        calls.tools("vending.dispense"), calls.probe)
        with pytest.raises(SimulatedCrash, match="simulated crash at after_save"):
            made.start("t", {}, 0)
        assert [c[1] for c in calls.calls] == [{"product": "soda"}]
        assert made.disk.read("t")[-1]["status"] == "success"
        made.crash()
        made.recover(0)
        assert [c[1] for c in calls.calls] == [{"product": "soda"}] * 2
        assert made.observe("t").status == "final"

    def test_the_vending_machine_is_caught(self, tmp_path: Path) -> None:
        report = campaign(upstream.vending_machine, None, tmp_path, runs=60)
        assert_found(report, "no_duplicate_effect", "FAULT crash (at ")

    def test_the_email_feedback_loop_holds(self, tmp_path: Path) -> None:
        report = campaign(upstream.email_feedback, None, tmp_path, runs=40)
        assert report.held, (report.vacuous, [f.violations for f in report.failures])
        missing = report.summary()["coverage"]["transitions"]["missing"]
        assert missing == [], missing
