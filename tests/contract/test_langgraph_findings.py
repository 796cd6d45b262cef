"""Four behaviours of LangGraph 1.2.22 (langgraph-checkpoint-sqlite 3.1.2) its public bug
reports describe, found through the adapter on graphs written the way the reports write them
(scenarios/langgraph/upstream.py). Each is pinned twice: driven by hand, step by step, so the
behaviour itself is shown; and found by a fuzz campaign, shrunk, with a replay file that
replays it. These are findings about LangGraph, not failures of fsmharness: if a LangGraph
release fixes one, its test fails here and the pin moves."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import langgraph
import pytest
from langgraph.version import __version__ as langgraph_version

from fault_injection import FaultKind, FaultPlan, FaultRate, SimulatedCrash
from harness import SimOptions
from harness.engines.fuzz import FuzzOptions, fuzz
from harness.engines.replay import replay
from reference_machine import Event, Success
from scenarios.langgraph import upstream

assert langgraph is not None
PINNED = "1.2.22"


def test_the_pinned_release_is_installed() -> None:
    assert langgraph_version == PINNED, "the findings below were made on 1.2.22"


class Calls:
    """Tools that record every call, and a probe that crashes at a chosen point."""

    def __init__(self, crash_at: str = "", times: int = 1) -> None:
        self.calls: list[tuple[str, dict[str, Any], str]] = []
        self.crash_at, self.times = crash_at, times

    def tools(self, *names: str) -> dict[str, Any]:
        def tool(name: str) -> Any:
            def call(input: Mapping[str, Any], key: str) -> Success:
                self.calls.append((name, dict(input), key))
                return Success({"ok": True})
            return call
        return {name: tool(name) for name in names}

    def probe(self, point: str) -> None:
        if point == self.crash_at and self.times > 0:
            self.times -= 1
            raise SimulatedCrash(point)


def answer(number: int, decision: str) -> Event:
    return Event(f"ev{number}", "answer", "human", {"decision": decision})


def campaign(target: Any, plan: FaultPlan, folder: Path, runs: int = 100) -> Any:
    return fuzz(target.definition, FuzzOptions(runs=runs, seed=0, sim=SimOptions(plan=plan),
                                               replay_dir=folder), machine=target)


def crashes(*points: str, rate: float = 0.5) -> FaultPlan:
    return FaultPlan((FaultRate(FaultKind.CRASH, rate, points=points),))


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


class TestErrorHandlerRunsAgain:  # langchain-ai/langgraph#9002
    def test_by_hand(self) -> None:
        target = upstream.error_handler_again
        calls = Calls()
        machine = target(target.definition, calls.tools("pager.page"), calls.probe)
        assert machine.start("t", {}, 0) == "accepted"
        assert [c[0] for c in calls.calls] == ["pager.page"]
        assert machine.observe("t").state == "b"  # b waits on its interrupt
        assert machine.deliver("t", answer(1, "ok"), 0) == "accepted"
        # the handler ran again on resume, and paged again
        assert [c[0] for c in calls.calls] == ["pager.page", "pager.page"]
        values = machine.graph.get_state({"configurable": {"thread_id": "t"}}).values
        assert values["log"].count("paged") == 1  # its first write was replaced
        assert machine.observe("t").status == "final"

    def test_found(self, tmp_path: Path) -> None:
        report = campaign(upstream.error_handler_again, FaultPlan(), tmp_path, runs=20)
        trace = assert_found(report, "no_duplicate_effect", "deliver answer from human")
        assert len(trace) == 2  # start, then the answer: nothing else is needed


class TestSyncCheckpointUnordered:  # langchain-ai/langgraph#8039
    def test_a_crash_inside_the_checkpoint_save_re_executes_the_step(self) -> None:
        target = upstream.sync_checkpoint
        calls = Calls(crash_at="before_put_writes")
        calls.times = 0
        machine = target(target.definition, calls.tools("effect.record"), calls.probe)
        seen: list[str] = []
        probe = calls.probe

        def crash_at_step2_writes(point: str) -> None:
            seen.append(point)
            if point == "before_put_writes" and [c[1]["step"] for c in calls.calls] == [
                    "step1", "step2"]:
                raise SimulatedCrash(point)
            probe(point)

        machine.probe = crash_at_step2_writes
        with pytest.raises(SimulatedCrash):
            machine.start("t", {}, 0)
        machine.crash()
        machine.recover(0)
        steps = [c[1]["step"] for c in calls.calls]
        assert steps == ["step1", "step2", "step2", "step3"]  # step2's effect twice

    def test_the_writes_saved_first_replay_the_step_from_an_empty_next(self) -> None:
        target = upstream.sync_checkpoint
        calls = Calls()
        machine = target(target.definition, calls.tools("effect.record"), calls.probe)

        def crash_before_step2_checkpoint(point: str) -> None:
            if point == "before_put" and [c[1]["step"] for c in calls.calls] == [
                    "step1", "step2"]:
                raise SimulatedCrash(point)

        machine.probe = crash_before_step2_checkpoint
        with pytest.raises(SimulatedCrash):
            machine.start("t", {}, 0)
        machine.crash()
        machine.probe = calls.probe
        machine._disconnect()
        machine._open()
        # the thread has not finished, yet LangGraph shows nothing next
        state = machine.graph.get_state({"configurable": {"thread_id": "t"}})
        assert state.next == ()
        assert state.values["log"] == ["step1", "step2"]
        machine.recover(0)  # invoke(None) carries on: step2 replayed from its writes
        assert [c[1]["step"] for c in calls.calls] == ["step1", "step2", "step3"]

    def test_found_only_where_the_writes_had_not_landed(self, tmp_path: Path) -> None:
        found = campaign(upstream.sync_checkpoint, crashes("before_put_writes"), tmp_path)
        assert_found(found, "no_duplicate_effect", "FAULT crash (at before_put_writes")
        replayed = campaign(upstream.sync_checkpoint,
                            crashes("after_put_writes", "before_put", "put_ahead_of_writes"),
                            tmp_path, runs=40)
        # a graph that runs to its end within one call tells each move it made (`moves`):
        # the campaign took its transitions and holds
        assert replayed.held, (replayed.vacuous, [f.violations for f in replayed.failures])
        assert replayed.faults.get("crash", 0) > 0


class TestExitLosesTheRun:  # langchain-ai/langgraph#8764
    def test_by_hand(self) -> None:
        from langgraph.errors import EmptyInputError

        target = upstream.exit_before_checkpoint
        calls = Calls(crash_at="after_tool_call")
        machine = target(target.definition, calls.tools("effect.record"), calls.probe)
        with pytest.raises(SimulatedCrash):
            machine.start("t", {}, 0)
        assert len(calls.calls) == 1  # the node's effect happened
        machine.crash()
        machine._disconnect()
        machine._open()
        assert machine._saver.inner.get_tuple({"configurable": {"thread_id": "t"}}) is None
        with pytest.raises(EmptyInputError, match="Received no input for __start__"):
            machine.recover(0)

    def test_found(self, tmp_path: Path) -> None:
        report = campaign(upstream.exit_before_checkpoint, crashes("after_tool_call"),
                          tmp_path, runs=40)
        assert_found(report, "machine_ok", "EmptyInputError", "FAULT crash (at after_tool_call")

    def test_a_queue_that_resubmits_the_input_loses_nothing(self, tmp_path: Path) -> None:
        from harness.adapters import langgraph_target

        resubmitting = langgraph_target(upstream.one_node_graph, name="exit_resubmitted",
                                        input={"log": []}, durability="exit",
                                        tools={"effect.record": {"idempotency_keys": True}})
        report = campaign(resubmitting, crashes("after_tool_call"), tmp_path, runs=40)
        assert report.held, (report.vacuous, [f.violations for f in report.failures])
        assert report.faults.get("crash", 0) > 0


class TestInterruptInALoop:  # langchain-ai/langgraph#7780
    def test_four_answers_run_the_body_ten_times(self) -> None:
        target = upstream.interrupt_in_loop
        calls = Calls()
        machine = target(target.definition, calls.tools("answers.log"), calls.probe)
        machine.start("t", {}, 0)
        for number, decision in enumerate(upstream.AGES, 1):
            assert machine.deliver("t", answer(number, decision), 0) == "accepted"
        answers = [c[1]["answer"] for c in calls.calls]
        assert len(answers) == 10  # 1 + 2 + 3 + 4: every earlier answer replayed in order
        assert answers == ["abc", "abc", -5, "abc", -5, "zz", "abc", -5, "zz", 30]
        assert machine.observe("t").status == "final"

    # about 70 s on the 2-core machine (shrinking runs whose every answer replays the loop's
    # body again spends its 60 s budget): the by-hand test above keeps the finding in the
    # default run
    @pytest.mark.slow
    def test_found(self, tmp_path: Path) -> None:
        report = campaign(upstream.interrupt_in_loop, FaultPlan(), tmp_path, runs=40)
        assert_found(report, "no_duplicate_effect", "deliver answer from human")
