"""A behaviour of pydantic-ai-slim 1.107.10 its public bug report describes (pydantic-ai#5536:
an approval is a plain boolean under the tool call id, bound to no arguments, so a call sent
again under that id runs on it), found through the adapter on an app that keeps decisions the
way `DeferredToolResults.approvals` takes them (scenarios/pydantic_ai/refund.py). Pinned twice:
driven by hand, and found by a fuzz campaign that is not told where it is, shrunk, with a
replay file that replays it. If a release binds approvals to their arguments, the by-hand test
of pydantic-ai itself fails here and the pin moves."""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import version
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults

from harness.engines.fuzz import FuzzOptions, fuzz
from harness.engines.replay import replay
from harness.sim.history import Applied
from reference_machine import APPROVAL_GRANTED, Event, Failure, Success
from scenarios.pydantic_ai import refund

PINNED = "1.107.10"


class Calls:
    """Tools that record every call; the refund fails (transient: it never reached the
    bank) `failures` times first."""

    def __init__(self, failures: int = 0) -> None:
        self.calls: list[tuple[str, dict[str, Any], str]] = []
        self.failures = failures

    def tool(self, name: str) -> Any:
        def call(input: Mapping[str, Any], key: str) -> Success | Failure:
            if name == "payments.refund" and self.failures > 0:
                self.failures -= 1
                return Failure("transient", "service unavailable")
            self.calls.append((name, dict(input), key))
            return Success({"ok": True})
        return call


def grant(machine: Any) -> Event:
    wait = machine.observe("x1").approval
    return Event("ev1", APPROVAL_GRANTED, "human",
                 {"role": "approver", "action_hash": wait.action_hash}, wait.request_id)


def test_the_pinned_release_is_installed() -> None:
    assert version("pydantic-ai-slim") == PINNED, "the finding below was made on 1.107.10"


class TestApprovalIsAPlainBoolean:
    """pydantic-ai#5536."""

    def test_pydantic_ai_runs_a_stored_approval_on_other_arguments(self) -> None:
        """pydantic-ai alone: a run whose model sends call-1 with 5 takes the approval given
        to call-1 with 100."""
        amounts: list[int] = []
        asked = {"amount": 100}

        def model(messages: list[Any], info: Any) -> ModelResponse:
            if any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
                return ModelResponse(parts=[TextPart("sent")])
            return ModelResponse(parts=[ToolCallPart("transfer", dict(asked),
                                                     tool_call_id="call-1")])

        agent: Agent[None, Any] = Agent(FunctionModel(model),
                                        output_type=[str, DeferredToolRequests])

        @agent.tool_plain(requires_approval=True)
        def transfer(amount: int) -> str:
            amounts.append(amount)
            return "ok"

        first = agent.run_sync("pay")
        assert isinstance(first.output, DeferredToolRequests)
        approved = DeferredToolResults(approvals={"call-1": True})  # the human saw 100
        asked["amount"] = 5
        again = agent.run_sync("pay again")
        assert isinstance(again.output, DeferredToolRequests)
        agent.run_sync(message_history=again.all_messages(), deferred_tool_results=approved)
        assert amounts == [5]

    def test_by_hand_the_app_refunds_an_amount_no_human_approved(self) -> None:
        """The refund of 40 is approved and does not reach the bank; asked to retry, the model
        sends call-1 again with 400, and the app answers it from its store: 400 is refunded,
        under the call's key."""
        calls = Calls(failures=1)
        target = refund.approval_by_call_id
        machine = target(target.definition, {name: calls.tool(name) for name in
                                             ("orders.get", "payments.refund")},
                         lambda point: None)
        machine.start("x1", {}, 0)
        assert machine.deliver("x1", grant(machine), 0) == "accepted"
        assert machine.observe("x1").state == "done"
        assert [(i, k) for t, i, k in calls.calls if t == "payments.refund"] == [
            ({"order_id": "o-1", "amount": 400}, "x1/refund/1/call-1")]

    def test_found_by_a_campaign(self, tmp_path: Path) -> None:
        target = refund.approval_by_call_id
        report = fuzz(target.definition, FuzzOptions(runs=100, seed=0, replay_dir=tmp_path),
                      machine=target)
        assert not report.held
        failure = report.failures[0]
        assert failure.rule == "approved_effects", failure.violations
        assert '"amount":400' in failure.violations[0].message
        assert failure.counterexample is not None and failure.replay_file is not None
        trace = "\n".join(failure.counterexample.trace())
        assert "payments.refund takes effect (key x1/refund/1/call-1)" in trace
        causes = [r.cause for r in failure.counterexample.result.history
                  if type(r) is Applied and r.tool == "payments.refund"]
        assert any("pydantic-ai#5536" in cause for cause in causes), causes
        outcome = replay(failure.replay_file)
        assert outcome.reproduced and outcome.rule == "approved_effects"
