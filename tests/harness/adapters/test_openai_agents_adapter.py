"""OpenAI Agents SDK agents under the harness, end to end: what is read off an agent, the
approval of the reference format, the saved RunState JSON and what a crash leaves of it, a
sound agent holding under every fault, the naive ones caught with a shrunk trace and a
replay file, and the agents the adapter refuses."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from adapter_campaigns import campaign
from agents import Agent, WebSearchTool, function_tool
from histories import histories_of

from fault_injection import FaultKind, FaultPlan, FaultRate, SimulatedCrash
from harness import SimOptions, Simulator
from harness.adapters.openai_agents import call, openai_agents_target, say
from harness.adapters.peers import AdapterError
from harness.engines.replay import replay
from reference_machine import APPROVAL_DENIED, APPROVAL_GRANTED, Event, Failure, Success
from scenarios.openai_agents import refund

ROOT = Path(__file__).resolve().parents[3]


class Calls:
    """Tools that record every call (failing the first `failing` calls of one tool), and a
    probe that crashes at a chosen point."""

    def __init__(self, crash_at: str = "", failing: str = "") -> None:
        self.calls: list[tuple[str, dict[str, Any], str]] = []
        self.crash_at, self.failing = crash_at, failing

    def tools(self, *names: str) -> dict[str, Any]:
        def tool(name: str) -> Any:
            def called(input: Mapping[str, Any], key: str) -> Success | Failure:
                self.calls.append((name, dict(input), key))
                if name == self.failing:
                    self.failing = ""
                    return Failure("transient", "try again")
                return Success({"ok": True})
            return called
        return {name: tool(name) for name in names}

    def probe(self, point: str) -> None:
        if point == self.crash_at:
            self.crash_at = ""
            raise SimulatedCrash(point)

    def made(self, name: str) -> list[str]:
        return [key for tool, _, key in self.calls if tool == name]


def machine_of(target: Any, calls: Calls) -> Any:
    return target(target.definition, calls.tools(*target.definition.spec.tools), calls.probe)


def run(coroutine: Any) -> Any:
    import asyncio
    return asyncio.run(coroutine)


def grant(machine: Any, execution: str, number: int = 1, **changes: Any) -> Event:
    wait = machine.observe(execution).approval
    event = Event(f"ev{number}", APPROVAL_GRANTED, "human",
                  {"role": "approver", "action_hash": wait.action_hash}, wait.request_id)
    return event._replace(**changes)


class TestDefinitionReadOffTheAgent:
    def test_one_wait_state_per_tool_that_needs_approval(self) -> None:
        definition = refund.target.definition
        assert set(definition.states) == {"running", "awaiting_refund", "calling_refund",
                                          "done"}
        assert definition.initial == "running"
        waiting = definition.spec.states["awaiting_refund"]
        assert waiting.type == "wait" and waiting.approval is not None
        assert waiting.approval.for_state == "calling_refund"
        step = definition.states["calling_refund"].step
        assert step is not None and step.needs_approval and step.tool == "payments.refund"
        assert definition.states["done"].final

    def test_the_action_hash_is_the_tools_and_its_exact_arguments(self) -> None:
        target = refund.target
        same = target.action_hash("refund", '{"amount": 40, "order_id": "o-1"}')
        assert same == target.action_hash("refund", '{"order_id":"o-1","amount":40}')
        assert same != target.action_hash("refund", '{"order_id":"o-1","amount":41}')


class TestByHand:
    def test_a_run_waits_then_a_grant_runs_the_tool_and_ends(self) -> None:
        calls = Calls()
        machine = machine_of(refund.target, calls)
        assert run(machine.start("x", {}, 0)) == "accepted"
        seen = machine.observe("x")
        assert (seen.state, seen.status) == ("awaiting_refund", "waiting")
        assert seen.moves == (("running", "awaiting_refund"),)
        saved = json.loads(machine.store.saved["x"].json)
        assert saved["current_step"]["type"] == "next_step_interruption"
        assert calls.made("payments.refund") == []
        assert run(machine.deliver("x", grant(machine, "x"), 0)) == "accepted"
        assert calls.made("payments.refund") == ["x/refund/1"]
        done = machine.observe("x")
        assert (done.state, done.status) == ("done", "final")
        assert done.moves == (("awaiting_refund", "calling_refund"),
                              ("calling_refund", "running"), ("running", "done"))

    def test_a_denial_never_runs_the_tool(self) -> None:
        calls = Calls()
        machine = machine_of(refund.target, calls)
        run(machine.start("x", {}, 0))
        denied = grant(machine, "x")._replace(type=APPROVAL_DENIED)
        assert run(machine.deliver("x", denied, 0)) == "accepted"
        assert calls.made("payments.refund") == []
        assert machine.observe("x").state == "done"

    @pytest.mark.parametrize(("changes", "why"), [
        ({"source": "agent"}, "from a human"),
        ({"payload": {"role": "intern"}}, "may not decide"),
        ({"answers": "x/awaiting_refund/old"}, "not the request pending"),
        ({"payload": {"role": "approver", "action_hash": "0" * 64}}, "another action"),
    ])
    def test_a_decision_not_genuine_is_refused(self, changes: dict[str, Any],
                                               why: str) -> None:
        calls = Calls()
        machine = machine_of(refund.target, calls)
        run(machine.start("x", {}, 0))
        answer = run(machine.deliver("x", grant(machine, "x", **changes), 0))
        assert answer is not None and answer.startswith("rejected:") and why in answer
        assert calls.made("payments.refund") == []

    def test_a_duplicate_and_a_late_grant_are_not_taken(self) -> None:
        calls = Calls()
        machine = machine_of(refund.target, calls)
        run(machine.start("x", {}, 0))
        event = grant(machine, "x")
        assert run(machine.deliver("x", event, 0)) == "accepted"
        assert run(machine.deliver("x", event, 0)) == "ignored:duplicate"
        late = event._replace(id="ev2")
        assert run(machine.deliver("x", late, 0)) == "rejected:no approval pending"
        assert calls.made("payments.refund") == ["x/refund/1"]

    def test_a_crash_after_the_effect_resumes_from_the_saved_json(self) -> None:
        """The grant is saved, the refund takes effect, the process dies before the state
        is saved: recovery resumes the saved JSON and calls again under the same key."""
        calls = Calls()
        machine = machine_of(refund.target, calls)
        run(machine.start("x", {}, 0))
        calls.crash_at = "after_tool_call"
        with pytest.raises(SimulatedCrash, match="after_tool_call"):
            run(machine.deliver("x", grant(machine, "x"), 0))
        machine.crash()
        assert machine.store.saved["x"].status == "decided:granted"
        run(machine.recover(0))
        assert calls.made("payments.refund") == ["x/refund/1", "x/refund/1"]
        assert machine.observe("x").state == "done"

    def test_a_result_saved_is_not_called_again_on_resume(self) -> None:
        calls = Calls()
        machine = machine_of(refund.target, calls)
        run(machine.start("x", {}, 0))
        event = grant(machine, "x")
        # the grant's own write passes first: crash at the second one, after the result
        points: list[str] = []

        def probe(point: str) -> None:
            points.append(point)
            if point == "before_state_write" and points.count(point) == 2:
                raise SimulatedCrash(point)

        machine.probe = probe
        with pytest.raises(SimulatedCrash, match="before_state_write"):
            run(machine.deliver("x", event, 0))
        machine.crash()
        run(machine.recover(0))
        assert calls.made("payments.refund") == ["x/refund/1"]  # the saved result stood

    def test_the_model_retries_a_failed_call_and_asks_again(self) -> None:
        calls = Calls(failing="payments.refund")
        machine = machine_of(refund.target, calls)
        run(machine.start("x", {}, 0))
        first = machine.observe("x").approval
        run(machine.deliver("x", grant(machine, "x"), 0))
        again = machine.observe("x")
        assert again.state == "awaiting_refund"  # a new call: a new request, the same action
        assert again.approval.request_id != first.request_id
        assert again.approval.action_hash == first.action_hash
        run(machine.deliver("x", grant(machine, "x", 2), 0))
        assert calls.made("payments.refund") == ["x/refund/1", "x/refund/1"]

    @pytest.mark.parametrize(("changes", "why"), [
        ({"source": "agent"}, "from a human"),
        ({"payload": {"role": "intern"}}, "may not decide"),
        ({"answers": "x/awaiting_refund/old"}, "not the request pending"),
        ({"payload": {"role": "approver", "action_hash": "0" * 64}}, "another action"),
    ])
    def test_a_client_held_state_does_not_spare_the_checks(self, changes: dict[str, Any],
                                                           why: str) -> None:
        calls = Calls()
        machine = machine_of(refund.client_state, calls)
        run(machine.start("x", {}, 0))
        answer = run(machine.deliver("x", grant(machine, "x", **changes), 0))
        assert answer is not None and answer.startswith("rejected:") and why in answer
        assert calls.made("payments.refund") == []

    def test_the_sdks_ids_are_restored_exactly_even_nested(self) -> None:
        import agents.run_state

        from harness.adapters.openai_agents.box import harnessed
        machine, other = machine_of(refund.target, Calls()), machine_of(refund.target, Calls())
        original = agents.run_state.uuid4
        with harnessed(machine):
            assert agents.run_state.uuid4 == machine.store.mint
            with harnessed(other):  # another run, nested in the same thread
                assert agents.run_state.uuid4 == other.store.mint
            assert agents.run_state.uuid4 == machine.store.mint
        assert agents.run_state.uuid4 is original

    def test_a_second_worker_resumes_the_same_saved_state(self) -> None:
        calls = Calls()
        machine = machine_of(refund.ignores_keys, calls)
        run(machine.start("x", {}, 0))
        run(machine.deliver("x", grant(machine, "x"), 0))
        assert machine.worker() is not None
        once = openai_agents_target(refund.sound, script=refund.SCRIPT, tools=refund.TOOLS,
                                    gates=refund.GATES, one_runner_per_execution=True)
        assert machine_of(once, Calls()).worker() is None


class TestDeterminism:
    def test_the_same_seed_gives_the_same_history_in_any_process(self) -> None:
        first = histories_of("scenarios.openai_agents.refund:target", "1")
        assert "awaiting_refund" in first
        assert first == histories_of("scenarios.openai_agents.refund:target", "2")


class TestSoundAgent:
    def test_holds_under_every_fault_and_reaches_every_crash_point(self) -> None:
        report = campaign(refund.target, runs=80)
        assert report.held, [f.violations for f in report.failures]
        coverage = report.summary()["coverage"]
        assert coverage["crash_points"]["missing"] == []
        assert coverage["transitions"]["missing"] == []
        assert report.faults.get("forged_approval", 0) > 0


class TestNaiveAgents:
    @pytest.mark.parametrize(("name", "plan"), [
        ("keyed_by_call_id", FaultPlan((FaultRate(FaultKind.TOOL_TIMEOUT_AFTER_APPLY, 0.5),))),
        ("keyed_per_attempt", FaultPlan((FaultRate(FaultKind.TOOL_TIMEOUT_AFTER_APPLY, 0.5),))),
        ("ignores_keys", FaultPlan((FaultRate(FaultKind.CRASH, 0.5,
                                              points=("after_tool_call",)),))),
    ])
    def test_caught_shrunk_and_replayed(self, name: str, plan: FaultPlan,
                                        tmp_path: Path) -> None:
        report = campaign(getattr(refund, name), runs=40, plan=plan, replay_dir=tmp_path)
        assert not report.held
        failure = report.failures[0]
        assert failure.rule == "no_duplicate_effect", failure.violations
        assert failure.counterexample is not None
        assert len(failure.counterexample.trace()) <= 4
        assert failure.replay_file is not None
        assert replay(failure.replay_file).reproduced


class TestRefused:
    def test_a_hosted_tool(self) -> None:
        with pytest.raises(AdapterError, match="runs outside the process"):
            openai_agents_target(lambda box: Agent(name="a", tools=[WebSearchTool()]),
                                 script=[say("hi")])

    def test_a_conditional_approval(self) -> None:
        def build(box: Any) -> Agent[Any]:
            @function_tool(needs_approval=lambda ctx, params, call_id: True)  # type: ignore[arg-type]
            def pay(amount: int) -> str:
                """Pays."""
                return "paid"
            return Agent(name="a", tools=[pay])

        with pytest.raises(AdapterError, match="needs_approval=True or False"):
            openai_agents_target(build, script=[call("pay", {"amount": 1})],
                                 tools={"pay": {}})

    def test_a_script_calling_a_tool_the_agent_lacks(self) -> None:
        with pytest.raises(AdapterError, match="has no tool for"):
            openai_agents_target(refund.sound, script=[call("wire", {})], tools=refund.TOOLS,
                                 gates=refund.GATES)

    def test_a_client_that_tampers_with_a_state_it_does_not_hold(self) -> None:
        with pytest.raises(AdapterError, match="needs client_state=True"):
            openai_agents_target(refund.sound, script=refund.SCRIPT, tools=refund.TOOLS,
                                 gates=refund.GATES, client_tampers=True)

    def test_an_approval_tool_whose_effect_is_not_declared(self) -> None:
        with pytest.raises(AdapterError, match="which tools= does not declare"):
            openai_agents_target(refund.sound, script=refund.SCRIPT,
                                 tools={"look_up_order": refund.READ})


class TestCli:
    def test_sound_holds_and_naive_fails(self, tmp_path: Path) -> None:
        def fuzz_cli(target: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([sys.executable, "-m", "harness.cli", "fuzz", target,
                                   "--runs", "20", "--report", str(tmp_path), "-q"],
                                  cwd=ROOT, capture_output=True, text=True, check=False)

        held = fuzz_cli("scenarios.openai_agents.refund:target")
        assert held.returncode == 0, held.stdout + held.stderr
        assert "Traceback" not in held.stderr
        caught = fuzz_cli("scenarios.openai_agents.refund:ignores_keys")
        assert caught.returncode == 1, caught.stdout + caught.stderr
        assert "no_duplicate_effect" in caught.stdout and "fsmharness replay" in caught.stdout


def test_a_run_under_the_simulator_ends_final() -> None:
    result = Simulator(refund.target.definition, SimOptions(seed=0, plan=FaultPlan()),
                       machine=refund.target).run()
    assert result.status == "final", result.failure
