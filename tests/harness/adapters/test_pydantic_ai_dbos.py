"""pydantic-ai agents run durably on DBOS (`durable="dbos"`, on SQLite in-process): DBOS
replays the model's recorded answers and re-runs function tools after a crash, a crash at
the record of a model's answer asks the model again, a second executor re-runs the live
run beside it, and campaigns on scenarios/pydantic_ai/refund_dbos.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.tools import DeferredToolRequests

from fault_injection import FaultKind, FaultPlan, FaultRate, SimulatedCrash
from harness import SimOptions
from harness.adapters.peers import AdapterError
from harness.adapters.pydantic_ai import AgentBox, Call, Script, pydantic_ai_target
from harness.adapters.pydantic_ai.machine import PydanticAIMachine, ToolRaised
from harness.adapters.replay_units import ToolFailed
from harness.engines.fuzz import FuzzOptions, fuzz
from harness.engines.replay import replay
from scenarios.pydantic_ai import refund, refund_dbos
from tests.harness.adapters.test_pydantic_ai_adapter import (
    Calls,
    _breaking,
    grant,
    machine_of,
    refunds,
)

ROOT = Path(__file__).resolve().parents[3]
#: The model, asked its refund turn a second time, asks for 400 under another call id.
ASKS_OTHERWISE = Script(turns=refund.SCRIPT.turns, final=refund.SCRIPT.final,
                        again={1: [Call("refund", {"order_id": "o-1", "amount": 400},
                                        "call-9")]})


MAIL = Script(turns=[[Call("look_up", {"order_id": "o-1"}, "c-0")],
                     [Call("send", {"order_id": "o-1"}, "c-1")],
                     [Call("audit", {"what": "sent"}, "c-2")]], final="sent")


def mailer(box: AgentBox) -> Agent[None, Any]:
    """A user's agent of async tools: a look-up, a send that needs approval, an audit."""
    agent: Agent[None, Any] = Agent(None, output_type=[str, DeferredToolRequests],
                                    name="mailer")

    @agent.tool_plain
    async def look_up(order_id: str) -> str:
        return json.dumps(box.call("orders.get", {"order_id": order_id}), default=str)

    @agent.tool_plain(requires_approval=True)
    async def send(order_id: str) -> str:
        box.call("payments.refund", {"order_id": order_id})
        return "sent"

    @agent.tool_plain
    async def audit(what: str) -> str:
        box.call("orders.get", {"order_id": what})
        return "noted"
    return agent


def wrapping(box: AgentBox) -> Agent[None, Any]:
    """A user's agent whose look-up wraps the failure it met in an error of its own."""
    agent: Agent[None, Any] = Agent(None, output_type=[str, DeferredToolRequests],
                                    name="wrapping")

    @agent.tool_plain
    def look_up(order_id: str) -> str:
        try:
            box.call("orders.get", {"order_id": order_id})
        except ToolFailed as error:
            raise RuntimeError("the order service refused the look-up") from error
        return "found"

    @agent.tool_plain(requires_approval=True)
    def send(order_id: str) -> str:
        box.call("payments.refund", {"order_id": order_id})
        return "sent"
    return agent


_MAIL_TOOLS = {"orders.get": {"repeatable": True}, "payments.refund": {}}
async_mailer = pydantic_ai_target(mailer, script=MAIL, name="async_mailer", prompt="mail",
                                  tools=_MAIL_TOOLS, gates={"send": "payments.refund"},
                                  durable="dbos")
wrapping_mailer = pydantic_ai_target(wrapping, script=MAIL, name="wrapping_mailer",
                                     prompt="mail", tools=_MAIL_TOOLS,
                                     gates={"send": "payments.refund"}, durable="dbos")


@pytest.fixture
def made() -> Any:
    """Gives `make(target, calls)`, a machine whose DBOS is closed after the test."""
    machines: list[PydanticAIMachine] = []

    def make(target: Any, calls: Calls) -> PydanticAIMachine:
        machine = machine_of(target, calls)
        machines.append(machine)
        return machine
    yield make
    for machine in machines:
        machine.close()


def _crash_and_recover(machine: PydanticAIMachine, act: Any) -> None:
    with pytest.raises(SimulatedCrash):
        act()
    machine.crash()
    machine.recover(1000)


class TestRecovery:
    def test_dbos_re_runs_a_function_tool_and_replays_the_models_answer(self, made: Any
                                                                         ) -> None:
        """A crash after the refund took effect: DBOS recovers the run, replays the model's
        recorded answer (not asked again) and runs the refund again, under its key."""
        calls = Calls(crash_at="after_tool_call", times=0)
        machine = made(refund_dbos.target, calls)
        machine.start("x1", {}, 0)
        calls.times = 1  # the refund's effect, not the look-up's
        event = grant(1, machine)
        _crash_and_recover(machine, lambda: machine.deliver("x1", event, 500))
        assert refunds(calls) == [({"order_id": "o-1", "amount": 40}, "x1/refund/1/call-1")] * 2
        assert machine.disk.asked == {("x1", 0): 1, ("x1", 1): 1}  # replayed, not asked
        assert machine.observe("x1").state == "done"

    def test_a_crash_before_the_answer_is_recorded_asks_the_model_again(self, made: Any
                                                                        ) -> None:
        """The crash strikes before DBOS records the model's refund turn: recovery asks the
        model that turn again, and it answers otherwise (400 under call-9), which is what
        the human is now asked to approve."""
        target = pydantic_ai_target(refund.refund_agent, script=ASKS_OTHERWISE,
                                    name="asks_otherwise", prompt=refund.PROMPT,
                                    tools={"orders.get": {"repeatable": True},
                                           "payments.refund": {}},
                                    gates={"refund": "payments.refund"}, durable="dbos")
        machine = made(target, Calls())
        records = []

        def probe(point: str) -> None:
            records.append(point)
            if point == "before_record_step" and records.count(point) == 2:
                raise SimulatedCrash(point)  # the second answer: the refund turn
        machine.probe = probe
        _crash_and_recover(machine, lambda: machine.start("x1", {}, 0))
        assert machine.disk.asked == {("x1", 0): 1, ("x1", 1): 2}
        wait = machine.observe("x1").approval
        assert wait is not None and wait.request_id == "x1/call-9/1"
        assert wait.action_hash == target.action_hash("refund",
                                                      {"order_id": "o-1", "amount": 400})

    def test_a_crash_after_the_answer_is_recorded_replays_it(self, made: Any) -> None:
        calls = Calls(crash_at="after_record_step", times=1)
        machine = made(refund_dbos.target, calls)
        _crash_and_recover(machine, lambda: machine.start("x1", {}, 0))
        assert machine.disk.asked[("x1", 0)] == 1  # recorded before the crash: replayed
        assert [t for t, _, _ in calls.calls] == ["orders.get"]  # the crash came before it
        assert machine.observe("x1").state == "awaiting_refund"

    def test_a_second_executor_re_runs_the_live_run(self, made: Any) -> None:
        """A second executor recovers the run the first is inside of (DBOS's
        duplicate-execution class): the refund runs in both; the first adopts the outcome
        the second recorded."""
        calls = Calls()
        machine = made(refund_dbos.target, calls)
        machine.start("x1", {}, 0)
        worker = machine.worker()
        assert worker is not None
        event = grant(1, machine)

        def probe(point: str) -> None:
            if point == "after_tool_call" and not getattr(probe, "done", False):
                probe.done = True  # type: ignore[attr-defined]
                worker.recover(600)
        machine.probe = probe
        worker.probe = lambda point: None
        assert machine.deliver("x1", event, 500) == "accepted"
        assert [key for _, key in refunds(calls)] == ["x1/refund/1/call-1"] * 2
        assert machine.observe("x1").state == "done"

    def test_a_second_executor_inside_a_recovered_run_of_async_tools(self, made: Any
                                                                       ) -> None:
        """Async tools run on DBOS's loop in a recovered run; a second executor acting at
        their crash point needs that loop to run its own re-run, so the call runs off it:
        no hang, the send made by the crashed run, the recovery and the second executor,
        each credited to its worker."""
        calls = Calls()
        machine = made(async_mailer, calls)
        machine.start("x1", {}, 0)
        worker = machine.worker()
        assert worker is not None
        event = grant(1, machine)
        sends = {"n": 0}

        def probe(point: str) -> None:
            if point != "after_tool_call":
                return
            sends["n"] += 1
            if sends["n"] == 2 and not machine.dead:  # the send: the process dies
                raise SimulatedCrash(point)
            if sends["n"] == 3:  # the send again, in the recovered run
                worker.recover(600)
        machine.probe = probe
        worker.probe = lambda point: None
        _crash_and_recover(machine, lambda: machine.deliver("x1", event, 500))
        assert [key for tool, _, key in calls.calls if tool == "payments.refund"] == [
            "x1/send/1/c-1"] * 3
        assert machine.observe("x1").state == "done"
        journal = machine.disk.journal._places[("x1", "send", "1/c-1")]
        assert (journal.runs, journal.by, journal.before) == (3, 2, 1)

    def test_the_first_run_goes_on_for_the_first_executor(self, made: Any) -> None:
        """After a second executor's re-run inside a recovered run, the first's next tool
        call is the first's: its crash point crashes the first, not the worker."""
        calls = Calls()
        machine = made(async_mailer, calls)
        machine.start("x1", {}, 0)
        worker = machine.worker()
        assert worker is not None
        event = grant(1, machine)
        seen: list[str] = []

        def probe(point: str) -> None:
            if point != "after_tool_call":
                return
            seen.append(point)
            if len(seen) == 2 and not machine.dead:
                raise SimulatedCrash(point)  # the send: the process dies
            if len(seen) == 3:
                worker.recover(600)  # the send again: a second executor re-runs the run
            if len(seen) == 4:  # the first's audit, after the second's re-run
                raise SimulatedCrash(point)
        machine.probe = probe
        worker.probe = lambda point: None
        with pytest.raises(SimulatedCrash):
            machine.deliver("x1", event, 500)
        machine.crash()
        with pytest.raises(SimulatedCrash):
            machine.recover(1000)
        assert machine.dead and not worker.dead

    def test_a_bound_that_stops_a_recovered_run_is_raised_not_waited_on(self, made: Any
                                                                        ) -> None:
        """The harness's bound on a step (its operations, its time) stops a recovered run
        on DBOS's thread: DBOS records no outcome, and recovery raises the bound at once
        instead of waiting for an outcome that never comes."""
        class Bound(BaseException):
            pass
        calls = Calls(crash_at="after_tool_call", times=0)
        machine = made(refund_dbos.target, calls)
        machine.start("x1", {}, 0)
        calls.times = 1
        event = grant(1, machine)
        with pytest.raises(SimulatedCrash):
            machine.deliver("x1", event, 500)
        machine.crash()

        def bound(point: str) -> None:
            if point == "after_tool_call":
                raise Bound
        machine.probe = bound
        with pytest.raises(Bound):
            machine.recover(1000)

    def test_a_failure_keeps_its_causes_after_a_recovery(self, made: Any) -> None:
        """A tool that wraps the refusal it met (`raise ... from error`) ends the run as
        failed, also when the run's failure comes back from DBOS's record after a crash
        (DBOS pickles it without its causes)."""
        machine = made(wrapping_mailer, Calls(fail="orders.get", failures=5))
        crashed = {"done": False}

        def probe(point: str) -> None:
            if point == "before_record_step" and not crashed["done"]:
                crashed["done"] = True
                raise SimulatedCrash(point)
        machine.probe = probe
        _crash_and_recover(machine, lambda: machine.start("x1", {}, 0))
        observed = machine.observe("x1")
        assert (observed.state, observed.outcome) == ("failed", "failure")

    def test_a_tools_own_exception_after_a_recovery_names_the_tool(self, made: Any
                                                                     ) -> None:
        """A bug of the agent's code met in a run DBOS recovered is the machine's verdict,
        naming the tool, though DBOS recorded the run's failure pickled."""
        target = pydantic_ai_target(_breaking, script=refund.SCRIPT, name="breaking_dbos",
                                    tools=_MAIL_TOOLS, gates={"refund": "payments.refund"},
                                    durable="dbos")
        machine = made(target, Calls(crash_at="before_record_step", times=1))
        with pytest.raises(SimulatedCrash):
            machine.start("x1", {}, 0)
        machine.crash()
        with pytest.raises(ToolRaised, match=r"tool 'look_up' \(call call-0 of x1\) raised "
                                             r"RuntimeError: the CRM connection was reset"):
            machine.recover(1000)

    def test_one_runner_per_execution_offers_no_second_executor(self) -> None:
        target = pydantic_ai_target(refund.refund_agent, script=refund.SCRIPT, name="one_runner",
                                    tools={"orders.get": {}, "payments.refund": {}},
                                    gates={"refund": "payments.refund"}, durable="dbos",
                                    one_runner_per_execution=True)
        machine = machine_of(target, Calls())
        try:
            assert machine.worker() is None
        finally:
            machine.close()

    def test_close_removes_the_system_database(self, made: Any) -> None:
        machine = made(refund_dbos.target, Calls())
        machine.start("x1", {}, 0)
        folder = machine.disk.life.folder
        assert Path(folder, "system.sqlite").exists()
        machine.close()
        assert not Path(folder).exists()
        again = made(refund_dbos.target, Calls())  # the process may launch DBOS again
        assert again.start("x1", {}, 0) == "accepted"


class TestRefusals:
    def test_an_unknown_durability_is_refused(self) -> None:
        with pytest.raises(AdapterError, match="durable 'temporal': expected one of app, dbos"):
            pydantic_ai_target(refund.refund_agent, script=refund.SCRIPT,
                               tools={"orders.get": {}, "payments.refund": {}},
                               gates={"refund": "payments.refund"}, durable="temporal")

    def test_an_agent_without_a_name_is_refused_as_dbos_refuses_it(self) -> None:
        def nameless(box: AgentBox) -> Agent[None, Any]:
            agent: Agent[None, Any] = Agent(None, output_type=[str, DeferredToolRequests])

            @agent.tool_plain(requires_approval=True)
            def send(order_id: str) -> str:
                return "sent"
            return agent
        with pytest.raises(AdapterError, match="an agent needs a unique name to run on DBOS"):
            pydantic_ai_target(nameless, script=MAIL, tools=_MAIL_TOOLS,
                               gates={"send": "payments.refund"}, durable="dbos")

    def test_a_second_dbos_run_in_the_process_is_refused(self, made: Any) -> None:
        machine = made(refund_dbos.target, Calls())
        machine.start("x1", {}, 0)
        with pytest.raises(AdapterError, match="DBOS is a process singleton"):
            made(refund_dbos.refund_without_key, Calls())


_HISTORY = """
import hashlib, json, sys
sys.path.insert(0, {root!r})
from harness import SimOptions
from harness.sim.simulator import Simulator
from scenarios.pydantic_ai import refund_dbos
target = refund_dbos.refund_without_key
run = Simulator(target.definition, SimOptions(), machine=target).run(5)
kinds = sorted({{getattr(getattr(r, "fault", None), "value", "") for r in run.history}} - {{""}})
print(hashlib.sha256("\\n".join(map(repr, run.history)).encode()).hexdigest(), kinds)
"""


def test_a_seed_gives_the_same_history_in_every_process() -> None:
    """DBOS's threads, ids and clocks never reach the history: the same seed (a run with
    crashes and a second executor acting inside a recovered run) gives the same history in
    two interpreters with different hash seeds."""
    digests = set()
    for seed in ("0", "1"):
        out = subprocess.run([sys.executable, "-c", _HISTORY.format(root=str(ROOT))],
                             capture_output=True, text=True, check=True, timeout=300,
                             env={**os.environ, "PYTHONHASHSEED": seed})
        digests.add(out.stdout.strip())
    assert len(digests) == 1, digests
    said = digests.pop()
    assert "'crash'" in said and "'second_worker'" in said, said


def _campaign(target: Any, folder: Path, runs: int, plan: FaultPlan) -> Any:
    options = FuzzOptions(runs=runs, seed=0, replay_dir=folder, sim=SimOptions(plan=plan))
    return fuzz(target.definition, options, machine=target)


_FAULTS = FaultPlan((FaultRate(FaultKind.CRASH, 0.2), FaultRate(FaultKind.SECOND_WORKER, 0.1)))


class TestCampaigns:
    def test_the_sound_agent_holds_on_dbos(self, tmp_path: Path) -> None:
        report = _campaign(refund_dbos.target, tmp_path, 24, _FAULTS)
        assert report.held, [f.violations for f in report.failures]

    def test_a_refund_without_a_key_is_run_again_by_dbos(self, tmp_path: Path) -> None:
        plan = FaultPlan((FaultRate(FaultKind.CRASH, 0.5, points=("after_tool_call",)),))
        report = _campaign(refund_dbos.refund_without_key, tmp_path, 24, plan)
        assert not report.held
        failure = report.failures[0]
        assert failure.rule == "no_duplicate_effect"
        assert "DBOS's recovery (DBOS runs a recovered agent run again" in (
            failure.violations[0].message)
        assert failure.replay_file is not None and replay(failure.replay_file).reproduced

    def test_a_second_executor_runs_a_refund_twice(self, tmp_path: Path) -> None:
        plan = FaultPlan((FaultRate(FaultKind.SECOND_WORKER, 0.5),))
        report = _campaign(refund_dbos.refund_without_key, tmp_path, 24, plan)
        assert not report.held
        message = report.failures[0].violations[0].message
        assert "two workers ran refund" in message
        assert report.failures[0].replay_file is not None


def test_a_failure_dbos_could_not_pickle_is_judged_as_raised() -> None:
    """Where DBOS cannot pickle the exception a run ended with, it records an `Exception`
    of the type's name and the words; the run's failure is still the one raised."""
    from harness.adapters.pydantic_ai import on_dbos
    live = ToolRaised("look_up", "c-0", "x1", "RuntimeError: reset")
    on_dbos._FAILED["x9/run/1"] = live
    try:
        assert on_dbos.failure_of("x9/run/1", Exception(f"ToolRaised: {live}")) is live
        assert on_dbos.failure_of("x9/run/1", ToolRaised("look_up", "c-0", "x1",
                                                         "RuntimeError: reset")) is live
        other = ValueError("another failure")
        assert on_dbos.failure_of("x9/run/1", other) is other
    finally:
        del on_dbos._FAILED["x9/run/1"]
