"""The pydantic-ai adapter: the definition read off an agent, the approval mapping, the crash
points and recovery from the saved history, determinism, and campaigns on the refund
scenarios (scenarios/pydantic_ai/refund.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.tools import DeferredToolRequests
from running import cli

from fault_injection import FaultKind, FaultPlan, FaultRate, SimulatedCrash
from harness import SimOptions
from harness.adapters.peers import AdapterError
from harness.adapters.pydantic_ai import AgentBox, Script, pydantic_ai_target
from harness.adapters.pydantic_ai.machine import PydanticAIMachine, ToolRaised
from harness.adapters.pydantic_ai.model import EPOCH, in_thread, pinned
from harness.adapters.pydantic_ai.store import Disk
from harness.adapters.replay_units import ToolFailed
from harness.engines.fuzz import FuzzOptions, fuzz
from harness.engines.replay import replay
from reference_machine import (
    APPROVAL_DENIED,
    APPROVAL_GRANTED,
    Event,
    Failure,
    Success,
    step_action_hash,
)
from scenarios.pydantic_ai import refund

ROOT = Path(__file__).resolve().parents[3]


class Calls:
    """Tools that record every call (a chosen one fails its first calls), and a probe that
    crashes at a chosen point."""

    def __init__(self, crash_at: str = "", times: int = 1, fail: str = "",
                 failures: int = 0, category: str = "permanent") -> None:
        self.calls: list[tuple[str, dict[str, Any], str]] = []
        self.crash_at, self.times = crash_at, times
        self.fail, self.failures, self.category = fail, failures, category

    def tools(self, *names: str) -> dict[str, Any]:
        def tool(name: str) -> Any:
            def call(input: Mapping[str, Any], key: str) -> Success | Failure:
                if name == self.fail and self.failures > 0:
                    self.failures -= 1
                    if self.category == "timeout":  # it took effect; the answer was lost
                        self.calls.append((name, dict(input), key))
                    return Failure(self.category, "injected")
                self.calls.append((name, dict(input), key))
                return Success({"ok": True})
            return call
        return {name: tool(name) for name in names}

    def probe(self, point: str) -> None:
        if point == self.crash_at and self.times > 0:
            self.times -= 1
            raise SimulatedCrash(point)


def machine_of(target: Any, calls: Calls) -> PydanticAIMachine:
    return target(target.definition, calls.tools("orders.get", "payments.refund"), calls.probe)


def grant(number: int, machine: PydanticAIMachine, eid: str = "x1", **changed: Any) -> Event:
    wait = machine.observe(eid).approval
    assert wait is not None
    payload = {"role": "approver", "action_hash": wait.action_hash}
    fields = {"type": APPROVAL_GRANTED, "source": "human", "answers": wait.request_id,
              **changed}
    payload.update(changed.pop("payload", {}))
    return Event(f"ev{number}", fields["type"], fields["source"], payload, fields["answers"])


def refunds(calls: Calls) -> list[tuple[dict[str, Any], str]]:
    return [(input, key) for tool, input, key in calls.calls if tool == "payments.refund"]


class TestDefinition:
    def test_states_are_read_off_the_agent(self) -> None:
        """One wait state per tool that needs approval, the state it runs in, two finals."""
        definition = refund.target.definition
        assert sorted(definition.states) == ["awaiting_refund", "done", "failed", "refund",
                                             "running"]
        approval = definition.states["awaiting_refund"].approval
        assert approval is not None and approval.for_state == "refund"
        step = definition.states["refund"].step
        assert step is not None and step.tool == "payments.refund" and step.needs_approval

    def test_an_agent_without_deferred_output_is_refused(self) -> None:
        def build(box: AgentBox) -> Agent[None, Any]:
            return Agent(None, output_type=str)
        with pytest.raises(AdapterError, match="lacks DeferredToolRequests"):
            pydantic_ai_target(build, script=Script(turns=[]))

    def test_a_gated_tool_without_a_world_tool_is_refused(self) -> None:
        with pytest.raises(AdapterError, match="no declared tool of the world is its effect"):
            pydantic_ai_target(refund.refund_agent, script=refund.SCRIPT,
                               tools={"orders.get": {}})

    def test_an_unknown_way_of_keeping_decisions_is_refused(self) -> None:
        with pytest.raises(AdapterError, match="expected one of bound, by_call_id"):
            pydantic_ai_target(refund.refund_agent, script=refund.SCRIPT, approvals="maybe",
                               tools={"orders.get": {}, "payments.refund": {}},
                               gates={"refund": "payments.refund"})


class TestApprovals:
    def test_the_run_waits_on_the_hash_of_the_exact_call(self) -> None:
        """The request carries the hash of the gated state, the world's tool and the args."""
        machine = machine_of(refund.target, Calls())
        assert machine.start("x1", {}, 0) == "accepted"
        seen = machine.observe("x1")
        assert (seen.state, seen.status) == ("awaiting_refund", "waiting")
        assert seen.moves == (("running", "awaiting_refund"),)
        step = refund.target.definition.states["refund"].step
        assert step is not None
        assert seen.approval is not None and seen.approval.action_hash == step_action_hash(
            step, {"order_id": "o-1", "amount": 40})
        assert seen.approval.roles == ("approver",)

    def test_a_grant_resumes_the_agent_from_its_saved_history(self) -> None:
        calls = Calls()
        machine = machine_of(refund.target, calls)
        machine.start("x1", {}, 0)
        assert machine.deliver("x1", grant(1, machine), 0) == "accepted"
        seen = machine.observe("x1")
        assert (seen.state, seen.status, seen.outcome) == ("done", "final", "success")
        assert seen.moves == (("awaiting_refund", "refund"), ("refund", "running"),
                              ("running", "done"))
        assert refunds(calls) == [({"order_id": "o-1", "amount": 40}, "x1/refund/1/call-1")]

    def test_a_denial_runs_nothing(self) -> None:
        calls = Calls()
        machine = machine_of(refund.target, calls)
        machine.start("x1", {}, 0)
        assert machine.deliver("x1", grant(1, machine, type=APPROVAL_DENIED), 0) == "accepted"
        assert machine.observe("x1").state == "done"
        assert refunds(calls) == []

    @pytest.mark.parametrize(("changed", "why"), [
        ({"source": "agent"}, "comes from a human"),
        ({"payload": {"role": "intern"}}, "may not decide"),
        ({"payload": {"action_hash": "0" * 64}}, "another action"),
        ({"answers": "x1/call-1/0"}, "not the pending request"),
    ])
    @pytest.mark.parametrize("target", [refund.target, refund.approval_by_call_id],
                             ids=["bound", "by_call_id"])
    def test_a_forged_grant_is_refused(self, changed: dict[str, Any], why: str,
                                       target: Any) -> None:
        """Both ways of keeping a decision check who sent it, for which request and
        action."""
        machine = machine_of(target, Calls())
        machine.start("x1", {}, 0)
        said = machine.deliver("x1", grant(1, machine, **changed), 0)
        assert said is not None and said.startswith("rejected") and why in said

    def test_a_duplicate_grant_is_ignored(self) -> None:
        machine = machine_of(refund.target, Calls())
        machine.start("x1", {}, 0)
        event = grant(1, machine)
        machine.deliver("x1", event, 0)
        assert machine.deliver("x1", event, 0) == "ignored:duplicate"

    def test_a_call_sent_again_with_other_args_is_asked_again(self) -> None:
        """The refund fails, the model sends call-1 again with 400: a new request."""
        calls = Calls(fail="payments.refund", failures=1, category="transient")
        target = refund.refund_target("bound", refund.HONOURS_KEYS,
                                      script=refund.CHANGES_ITS_MIND)
        machine = machine_of(target, calls)
        machine.start("x1", {}, 0)
        first = machine.observe("x1").approval
        machine.deliver("x1", grant(1, machine), 0)
        again = machine.observe("x1").approval
        assert first is not None and again is not None
        assert again.request_id == "x1/call-1/2" and again.action_hash != first.action_hash
        assert refunds(calls) == []

    def test_by_call_id_answers_a_call_sent_again_from_its_store(self) -> None:
        """The one difference of `by_call_id`: the grant of 40, kept under call-1, runs the
        call sent again with 400, under the call's key."""
        calls = Calls(fail="payments.refund", failures=1, category="transient")
        machine = machine_of(refund.approval_by_call_id, calls)
        machine.start("x1", {}, 0)
        assert machine.deliver("x1", grant(1, machine), 0) == "accepted"
        assert machine.observe("x1").state == "done"
        assert refunds(calls) == [({"order_id": "o-1", "amount": 400}, "x1/refund/1/call-1")]

    def test_a_timeout_is_sent_again_under_the_same_key(self) -> None:
        """The refund took effect and its answer was lost: the tool sends it again under
        the same key (a service that honours keys applies it once), not a new request."""
        calls = Calls(fail="payments.refund", failures=1, category="timeout")
        machine = machine_of(refund.target, calls)
        machine.start("x1", {}, 0)
        machine.deliver("x1", grant(1, machine), 0)
        assert machine.observe("x1").state == "done"
        assert refunds(calls) == [({"order_id": "o-1", "amount": 40}, "x1/refund/1/call-1")] * 2

    def test_a_refusal_fails_the_run(self) -> None:
        calls = Calls(fail="payments.refund", failures=1)
        machine = machine_of(refund.target, calls)
        machine.start("x1", {}, 0)
        machine.deliver("x1", grant(1, machine), 0)
        seen = machine.observe("x1")
        assert (seen.state, seen.outcome) == ("failed", "failure")
        assert refunds(calls) == []


class TestCrashes:
    def test_after_the_refund_the_run_resumes_from_the_saved_history(self) -> None:
        """The refund ran, the history was not saved: recovery runs it again, same key."""
        calls = Calls(crash_at="after_tool_call", times=2)
        machine = machine_of(refund.target, calls)
        calls.times = 0
        machine.start("x1", {}, 0)
        calls.times = 1
        with pytest.raises(SimulatedCrash, match="after_tool_call"):
            machine.deliver("x1", grant(1, machine), 0)
        machine.crash()
        assert machine.observe("x1").state == "refund"  # the decision was saved
        machine.recover(0)
        assert machine.observe("x1").state == "done"
        assert [key for _, key in refunds(calls)] == ["x1/refund/1/call-1"] * 2

    def test_a_decision_lost_before_its_save_is_asked_again(self) -> None:
        calls = Calls(crash_at="before_save_decision")
        machine = machine_of(refund.target, calls)
        machine.start("x1", {}, 0)
        with pytest.raises(SimulatedCrash, match="before_save_decision"):
            machine.deliver("x1", grant(1, machine), 0)
        machine.crash()
        machine.recover(0)
        assert machine.observe("x1").state == "awaiting_refund"
        assert refunds(calls) == []

    def test_a_run_never_saved_runs_again_from_its_prompt(self) -> None:
        calls = Calls(crash_at="before_save_history")
        machine = machine_of(refund.target, calls)
        with pytest.raises(SimulatedCrash, match="before_save_history"):
            machine.start("x1", {}, 0)
        machine.crash()
        assert machine.observe("x1").state == "running"
        machine.recover(0)
        assert machine.observe("x1").state == "awaiting_refund"
        assert [t for t, _, _ in calls.calls] == ["orders.get", "orders.get"]

    def test_one_runner_per_execution_offers_no_second_worker(self) -> None:
        target = pydantic_ai_target(refund.refund_agent, script=refund.SCRIPT,
                                    tools={"orders.get": {}, "payments.refund": {}},
                                    gates={"refund": "payments.refund"},
                                    one_runner_per_execution=True)
        assert machine_of(target, Calls()).worker() is None
        assert machine_of(refund.target, Calls()).worker() is not None


_HISTORY = """
import hashlib, sys
sys.path.insert(0, {root!r})
from reference_machine import Success
from scenarios.pydantic_ai import refund
tools = {{name: (lambda input, key: Success({{"ok": True}})) for name in ("orders.get",)}}
m = refund.target(refund.target.definition, tools, lambda point: None)
m.start("x1", {{}}, 5000)
print(hashlib.sha256(m.disk.records["x1"].encode()).hexdigest())
"""


class TestDeterminism:
    def test_the_saved_history_is_the_same_in_every_process(self) -> None:
        """Timestamps, run ids and conversation ids are the run's own, whatever the seed."""
        digests = set()
        for seed in ("0", "1"):
            out = subprocess.run([sys.executable, "-c", _HISTORY.format(root=str(ROOT))],
                                 capture_output=True, text=True, check=True,
                                 env={**os.environ, "PYTHONHASHSEED": seed})
            digests.add(out.stdout.strip())
        assert len(digests) == 1

    def test_the_clock_is_virtual_and_put_back(self) -> None:
        import pydantic_ai._utils as utils
        code = utils.now_utc.__code__
        machine = machine_of(refund.target, Calls())
        machine.start("x1", {}, 90_000)
        history = json.loads(json.loads(machine.disk.records["x1"])["history"])
        assert history[0]["timestamp"] == "2025-01-01T00:01:30Z"
        assert utils.now_utc() != EPOCH + timedelta(milliseconds=90_000)
        assert utils.now_utc.__code__ is code
        assert "_fsmharness_pins" not in vars(utils)

    def test_one_run_at_a_time_swaps_the_functions(self) -> None:
        """A thread that pins while another holds the pins waits for it; the thread that
        holds them pins again at once (a second worker's run inside the first's)."""
        entered = threading.Event()
        disk = Disk()

        def other() -> None:
            with pinned(disk, 0):
                entered.set()
        with pinned(disk, 0):
            with pinned(disk, 5):  # nested, in the same thread: no deadlock
                assert in_thread(lambda: "lent") == "lent"
            thread = threading.Thread(target=other)
            thread.start()
            assert not entered.wait(0.2)  # held here: the other thread waits
        thread.join()
        assert entered.is_set()


_TIMEOUTS = FaultPlan((FaultRate(FaultKind.TOOL_TIMEOUT_AFTER_APPLY, 0.5,
                                 tools=("payments.refund",)),))


def _retrying_agent(box: AgentBox) -> Agent[None, Any]:
    """The refund agent with a tool that asks the model to retry whatever failed."""
    agent: Agent[None, Any] = Agent(None, output_type=[str, DeferredToolRequests], retries=3)

    @agent.tool_plain
    def look_up(order_id: str) -> str:
        return json.dumps(box.call("orders.get", {"order_id": order_id}), default=str)

    @agent.tool_plain(requires_approval=True)
    def refund(order_id: str, amount: int) -> str:
        try:
            box.call("payments.refund", {"order_id": order_id, "amount": amount})
        except ToolFailed as error:
            raise ModelRetry(f"the refund failed ({error.category})") from error
        return "refunded"
    return agent


def _campaign(target: Any, folder: Path, runs: int, plan: FaultPlan | None = None) -> Any:
    options = FuzzOptions(runs=runs, seed=0, replay_dir=folder,
                          sim=SimOptions(plan=plan) if plan is not None else SimOptions())
    return fuzz(target.definition, options, machine=target)


class TestCampaigns:
    def test_the_sound_agent_holds(self, tmp_path: Path) -> None:
        report = _campaign(refund.target, tmp_path, 60)
        assert report.held, [f.violations for f in report.failures]

    def test_a_refund_without_a_key_is_found_after_a_crash(self, tmp_path: Path) -> None:
        plan = FaultPlan((FaultRate(FaultKind.CRASH, 0.5, points=("after_tool_call",)),))
        report = _campaign(refund.refund_without_key, tmp_path, 60, plan)
        assert not report.held
        failure = report.failures[0]
        assert failure.rule == "no_duplicate_effect"
        assert "after a crash before its result was saved" in failure.violations[0].message
        assert failure.replay_file is not None and replay(failure.replay_file).reproduced

    def test_the_sound_agent_holds_when_refunds_time_out(self, tmp_path: Path) -> None:
        """A refund that took effect and whose answer was lost is sent again under the
        same key: the service applies it once."""
        report = _campaign(refund.target, tmp_path, 30, _TIMEOUTS)
        assert report.held, [f.violations for f in report.failures]

    def test_a_refund_sent_again_after_a_timeout_is_a_duplicate(self, tmp_path: Path) -> None:
        """The same send on a service that ignores keys: two refunds of one action."""
        report = _campaign(refund.refund_without_key, tmp_path, 30, _TIMEOUTS)
        assert not report.held
        failure = report.failures[0]
        assert failure.rule == "no_duplicate_effect"
        assert "a retry of refund (step 1/call-1)" in failure.violations[0].message

    def test_a_model_retry_after_a_timeout_is_the_same_action(self, tmp_path: Path) -> None:
        """A tool that answers a timeout with ModelRetry, whose model sends call-1 again
        with 400: under the call's one key and one action, so on a service that ignores
        keys the second refund is a duplicate (the key and action once moved with the
        model's answer, and it went unseen)."""
        target = pydantic_ai_target(_retrying_agent, script=refund.CHANGES_ITS_MIND,
                                    prompt=refund.PROMPT, name="retrying",
                                    tools={"orders.get": {"repeatable": True},
                                           "payments.refund": refund.IGNORES_KEYS},
                                    gates={"refund": "payments.refund"})
        report = _campaign(target, tmp_path, 30, _TIMEOUTS)
        assert not report.held
        failure = report.failures[0]
        assert failure.rule == "no_duplicate_effect"
        message = failure.violations[0].message
        assert re.search(r"under one key 'x\d+/refund/1/call-1'", message), message
        assert '{"amount":40,"order_id":"o-1"}' in message
        assert '{"amount":400,"order_id":"o-1"}' in message

    @pytest.mark.slow
    def test_the_sound_agent_holds_at_the_cli_defaults(self) -> None:
        out = subprocess.run([sys.executable, "-m", "harness.cli", "fuzz",
                              "scenarios.pydantic_ai.refund:target", "--no-report"],
                             capture_output=True, text=True, cwd=ROOT)
        assert out.returncode == 0, out.stdout + out.stderr
        assert "transitions 7/7" in out.stdout and "crash_points 5/5" in out.stdout


_MINTED_KEY = '''
import uuid
from pydantic_ai import Agent
from pydantic_ai.tools import DeferredToolRequests
from harness.adapters.pydantic_ai import Call, Script, pydantic_ai_target

def build(box):
    agent = Agent(None, output_type=[str, DeferredToolRequests], name="minted")

    @agent.tool_plain(requires_approval=True)
    def refund(order_id: str) -> str:
        box.call("payments.refund", {"order_id": order_id}, key=str(uuid.uuid4()))
        return "done"
    return agent

target = pydantic_ai_target(
    build, script=Script(turns=[[Call("refund", {"order_id": "o-1"}, "c-1")]]),
    tools={"payments.refund": {"idempotency_keys": True}}, gates={"refund": "payments.refund"})
'''


def test_a_campaign_that_is_not_deterministic_says_why_it_wrote_no_replay(tmp_path: Path
                                                                           ) -> None:
    """A key drawn from uuid4 changes the history from run to run and refunds twice under
    two keys: with a report asked for, no replay file is written, and the command says it
    is because the seeds do not replay (not that --no-report was given)."""
    (tmp_path / "minted_key.py").write_text(_MINTED_KEY)
    result = cli("fuzz", "minted_key:target", "--runs", "30", "--report",
                 str(tmp_path / "report"), cwd=tmp_path, path=f"{tmp_path}:{ROOT}")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "violated deterministic" in result.stdout
    assert "violated no_duplicate_effect" in result.stdout
    assert "no replay file: the same seed gave two histories" in result.stdout
    assert "--no-report" not in result.stdout


def _breaking(box: AgentBox) -> Agent[None, Any]:
    """An agent whose look-up has a bug of its own: it raises a plain exception."""
    agent: Agent[None, Any] = Agent(None, output_type=[str, DeferredToolRequests],
                                    name="breaking")

    @agent.tool_plain
    def look_up(order_id: str) -> str:
        raise RuntimeError("the CRM connection was reset")

    @agent.tool_plain(requires_approval=True)
    def refund(order_id: str, amount: int) -> str:
        return "refunded"
    return agent


def test_a_tools_own_exception_names_the_tool() -> None:
    """A bug of the agent's code is the machine's verdict, naming the tool and the call,
    with the exception it raised as the cause."""
    target = pydantic_ai_target(_breaking, script=refund.SCRIPT, tools={
        "orders.get": {}, "payments.refund": {}}, gates={"refund": "payments.refund"})
    machine = machine_of(target, Calls())
    with pytest.raises(ToolRaised, match=r"tool 'look_up' \(call call-0 of x1\) raised "
                                         r"RuntimeError: the CRM connection was reset"
                       ) as raised:
        machine.start("x1", {}, 0)
    assert isinstance(raised.value.__cause__, RuntimeError)
