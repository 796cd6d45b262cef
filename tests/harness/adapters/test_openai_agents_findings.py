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
from importlib.metadata import version
from pathlib import Path
from typing import Any

from agents import Runner, RunState

from harness import SimOptions
from harness.adapters.openai_agents.box import harnessed
from harness.engines.fuzz import FuzzOptions, fuzz
from harness.engines.replay import replay
from scenarios.openai_agents import refund
from tests.harness.adapters.test_openai_agents_adapter import Calls, grant, machine_of, run

PINNED = "0.24.0"


def test_the_pinned_release_is_installed() -> None:
    assert version("openai-agents") == PINNED, "the findings below were made on 0.24.0"


def campaign(target: Any, folder: Path, runs: int = 100) -> Any:
    """Runs a campaign with the default fault plan: it is not told where to look."""
    return fuzz(target.definition, FuzzOptions(runs=runs, seed=0, sim=SimOptions(),
                                               replay_dir=folder), machine=target)


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
        report = campaign(refund.documented_example, tmp_path)
        text = assert_found(report, "no_duplicate_effect", "approval.granted")
        violation = report.failures[0].violations[0]
        assert "refund took effect twice" in str(violation), violation
        assert "FAULT" in text  # a crash after the effect, or a second worker


class TestForgedApprovalInTheJson:
    def test_by_hand(self) -> None:
        """An approval no human gave, written into the saved JSON, runs the tool."""
        calls = Calls()
        machine = machine_of(refund.client_state, calls)
        run(machine.start("x", {}, 0))
        forged = grant(machine, "x", source="agent", payload={"role": "nobody"},
                       answers="anything")
        assert run(machine.deliver("x", forged, 0)) == "accepted"
        assert [tool for tool, _, _ in calls.calls] == ["look_up_order", "payments.refund"]
        sound = machine_of(refund.target, Calls())
        run(sound.start("x", {}, 0))
        refused = run(sound.deliver("x", grant(sound, "x", source="agent"), 0))
        assert refused is not None and refused.startswith("rejected:")

    def test_found(self, tmp_path: Path) -> None:
        report = campaign(refund.client_state, tmp_path)
        assert_found(report, "approval_genuine", "forged_approval")

