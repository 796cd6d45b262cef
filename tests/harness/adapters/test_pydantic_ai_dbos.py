"""pydantic-ai agents run durably on DBOS (`durable="dbos"`, on SQLite in-process): DBOS
replays the model's recorded answers and re-runs function tools after a crash, a crash at
the record of a model's answer asks the model again, a second executor re-runs the live
run beside it, and campaigns on scenarios/pydantic_ai/refund_dbos.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fault_injection import FaultKind, FaultPlan, FaultRate, SimulatedCrash
from harness import SimOptions
from harness.adapters.peers import AdapterError
from harness.adapters.pydantic_ai import Call, Script, pydantic_ai_target
from harness.adapters.pydantic_ai.machine import PydanticAIMachine
from harness.engines.fuzz import FuzzOptions, fuzz
from harness.engines.replay import replay
from scenarios.pydantic_ai import refund, refund_dbos
from tests.harness.adapters.test_pydantic_ai_adapter import (
    Calls,
    grant,
    machine_of,
    refunds,
)

ROOT = Path(__file__).resolve().parents[3]
#: The model, asked its refund turn a second time, asks for 400 under another call id.
ASKS_OTHERWISE = Script(turns=refund.SCRIPT.turns, final=refund.SCRIPT.final,
                        again={1: [Call("refund", {"order_id": "o-1", "amount": 400},
                                        "call-9")]})


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
        calls = Calls(crash_at="before_record_step", times=1)
        target = pydantic_ai_target(refund.refund_agent, script=ASKS_OTHERWISE,
                                    name="asks_otherwise", prompt=refund.PROMPT,
                                    tools={"orders.get": {"repeatable": True},
                                           "payments.refund": {}},
                                    gates={"refund": "payments.refund"}, durable="dbos")
        machine = made(target, calls)
        _crash_and_recover(machine, lambda: machine.start("x1", {}, 0))
        # the look-up's answer was never recorded: the model answers turn 0 again
        assert machine.disk.asked[("x1", 0)] == 2
        assert machine.observe("x1").state == "awaiting_refund"

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
        machine.probe = probe  # type: ignore[method-assign]
        worker.probe = lambda point: None  # type: ignore[method-assign]
        assert machine.deliver("x1", event, 500) == "accepted"
        assert [key for _, key in refunds(calls)] == ["x1/refund/1/call-1"] * 2
        assert machine.observe("x1").state == "done"

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
run = Simulator(target.definition, SimOptions(), machine=target).run(17)
print(hashlib.sha256("\\n".join(map(repr, run.history)).encode()).hexdigest())
"""


def test_a_seed_gives_the_same_history_in_every_process() -> None:
    """DBOS's threads, ids and clocks never reach the history: the same seed gives the same
    history in two interpreters with different hash seeds."""
    digests = set()
    for seed in ("0", "1"):
        out = subprocess.run([sys.executable, "-c", _HISTORY.format(root=str(ROOT))],
                             capture_output=True, text=True, check=True, timeout=300,
                             env={**os.environ, "PYTHONHASHSEED": seed})
        digests.add(out.stdout.strip())
    assert len(digests) == 1, digests


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
        assert "DBOS's recovery (a function tool is no DBOS step" in (
            failure.violations[0].message)
        assert failure.replay_file is not None and replay(failure.replay_file).reproduced

    def test_a_second_executor_runs_a_refund_twice(self, tmp_path: Path) -> None:
        plan = FaultPlan((FaultRate(FaultKind.SECOND_WORKER, 0.5),))
        report = _campaign(refund_dbos.refund_without_key, tmp_path, 24, plan)
        assert not report.held
        message = report.failures[0].violations[0].message
        assert "two workers ran refund" in message
        assert report.failures[0].replay_file is not None
