"""Two behaviours of openai-agents 0.24.0 found through the adapter on agents written the way
the SDK's documents write them (scenarios/openai_agents/refund.py). Each is pinned twice:
driven by hand, so the behaviour itself is shown; and found by a campaign not told where to
look (the default fault plan), shrunk, with a replay file that replays it. These are findings
about the SDK, not failures of fsmharness: if a release changes one, its test fails here and
the pin moves.

- Resuming one saved RunState twice runs its approved tool twice (the class of issues
  openai/openai-agents-python#4244 and #2487: resume repeats work). The saved JSON's ledger
  (`context.tool_invocations`) says `executed: false` in every copy, and nothing marks a
  saved state as taken: execution from a saved state is at least once.
- An approval written into the saved JSON is taken (PR #5105's trust boundary):
  `RunState.from_string` does not authenticate the state, so an app that lets its client
  hold the state runs the tool on any approval the client writes.
"""

from __future__ import annotations

import json
from dataclasses import replace
from importlib.metadata import version
from pathlib import Path
from typing import Any

from agents import Runner, RunState

from fault_injection import FaultKind, FaultPlan
from harness import SimOptions
from harness.adapters.openai_agents import openai_agents_target
from harness.adapters.openai_agents.box import harnessed
from harness.engines.fuzz import FuzzOptions, fuzz
from harness.engines.replay import replay
from harness.sim.options import plan_for
from reference_machine import APPROVAL_DENIED
from scenarios.openai_agents import refund
from tests.harness.adapters.test_openai_agents_adapter import Calls, grant, machine_of, run

PINNED = "0.24.0"


def test_the_pinned_release_is_installed() -> None:
    assert version("openai-agents") == PINNED, "the findings below were made on 0.24.0"


def campaign(target: Any, folder: Path, runs: int = 100, plan: FaultPlan | None = None
             ) -> Any:
    """Runs a campaign with the default fault plan (or `plan`): it is not told where to
    look."""
    sim = SimOptions() if plan is None else SimOptions(plan=plan)
    return fuzz(target.definition, FuzzOptions(runs=runs, seed=0, sim=sim,
                                               replay_dir=folder), machine=target)


def crashes_only(target: Any) -> FaultPlan:
    """Gives the default plan of `target` with its crashes only: no second worker (a
    deployment fault), and no tool fault (a retry of a timed-out call is the model's)."""
    plan = plan_for(target.definition)
    kept = tuple(rate for rate in plan.rates if rate.kind is FaultKind.CRASH)
    assert len(kept) == 1, "the default plan has no crash"
    return replace(plan, rates=kept)


def assert_found(report: Any, rule: str, *fragments: str) -> str:
    assert not report.held
    failure = report.failures[0]
    assert failure.rule == rule, failure.violations
    assert failure.counterexample is not None and failure.replay_file is not None
    text = "\n".join(failure.counterexample.trace())
    for fragment in fragments:
        assert fragment in text, text
    outcome = replay(failure.replay_file)
    assert outcome.reproduced and outcome.rule == rule
    return text


class TestResumingOneStateTwice:
    def test_by_hand(self) -> None:
        """The saved state approved once, resumed twice (a restarted worker, or two): the
        tool runs twice, and the ledger in the JSON said it had not run."""
        calls = Calls()
        machine = machine_of(refund.documented_example, calls)
        run(machine.start("x", {}, 0))

        async def approved() -> str:
            state = await RunState.from_string(machine.agent, machine.store.saved["x"].json)
            state.approve(state.get_interruptions()[0])
            return state.to_string()

        async def resume(text: str) -> Any:
            state = await RunState.from_string(machine.agent, text)
            return await Runner.run(machine.agent, state)

        with harnessed(machine):
            text = run(approved())
            ledger = json.loads(text)["context"]["tool_invocations"]
            assert [each["executed"] for each in ledger.values()] == [False]
            first, second = run(resume(text)), run(resume(text))
        assert first.final_output == second.final_output == "Done."
        assert [tool for tool, _, _ in calls.calls] == ["refund", "refund"]

    def test_found(self, tmp_path: Path) -> None:
        """Crashes only, no second worker: the SDK itself re-runs the tool after a crash."""
        plan = crashes_only(refund.documented_example)
        report = campaign(refund.documented_example, tmp_path, plan=plan)
        text = assert_found(report, "no_duplicate_effect", "approval.granted", "crash")
        violation = str(report.failures[0].violations[0])
        assert "refund took effect twice" in violation, violation
        assert "second_worker" not in text and "two workers" not in violation, text
        assert ("the OpenAI Agents SDK re-ran refund" in violation
                and "after a crash before its result was saved" in violation), violation


class TestForgedApprovalInTheJson:
    def test_by_hand(self) -> None:
        """A human denies; the decision passes every check the app makes; the client writes
        an approval of that call id into the JSON, and the SDK runs the tool."""
        calls = Calls()
        machine = machine_of(refund.client_state, calls)
        run(machine.start("x", {}, 0))
        denial = grant(machine, "x")._replace(type=APPROVAL_DENIED)
        assert machine._not_genuine("x", denial, machine.store.saved["x"]) == ""
        assert run(machine.deliver("x", denial, 0)) == "accepted"
        assert [tool for tool, _, _ in calls.calls] == ["look_up_order", "payments.refund"]
        honest_client = openai_agents_target(
            refund.sound, script=refund.SCRIPT, tools=refund.TOOLS, gates=refund.GATES,
            save_results=True, client_state=True)
        honest = machine_of(honest_client, Calls())
        run(honest.start("x", {}, 0))
        assert run(honest.deliver("x", grant(honest, "x")._replace(type=APPROVAL_DENIED),
                                  0)) == "accepted"
        assert honest.observe("x").state == "done"

    def test_a_forged_decision_is_refused_with_the_state_on_the_client(self) -> None:
        """The app knows who sent the decision: the forgery the SDK takes is in the JSON
        only, never in the decision's sender, role, request or action."""
        calls = Calls()
        machine = machine_of(refund.client_state, calls)
        run(machine.start("x", {}, 0))
        forged = grant(machine, "x", source="agent", payload={"role": "nobody"},
                       answers="anything")
        refused = run(machine.deliver("x", forged, 0))
        assert refused is not None and refused.startswith("rejected:"), refused
        assert [tool for tool, _, _ in calls.calls] == ["look_up_order"]

    def test_found(self, tmp_path: Path) -> None:
        report = campaign(refund.client_state, tmp_path)
        text = assert_found(report, "approved_effects", "approval.denied from human")
        violation = str(report.failures[0].violations[0])
        assert "no genuine approval was granted" in violation, violation
        assert "forged_approval" not in text, text
