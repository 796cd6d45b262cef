"""An approval-gated refund agent on pydantic-ai, sound and naive.

The agent looks the order up, then asks to refund it; the refund needs a human's approval
(`requires_approval=True`). When the payment service fails, the tool asks the model to retry
(`ModelRetry`), and the model sends the call again under the same id with another amount, as
models do. `target` holds under every fault: the app binds each decision to the exact call
(its request and the hash of its arguments), and the refund goes through a service that
honours idempotency keys under the key the box gives. Each naive variant breaks one of those,
and `fsmharness fuzz scenarios.pydantic_ai.refund:<name>` finds it:

- `approval_by_call_id`: keeps a decision as pydantic-ai takes it, a boolean under the tool
  call's id, and answers a call sent again under that id from it: a refund of an amount no
  human approved (pydantic-ai#5536);
- `refund_without_key`: refunds through a service that ignores keys, so a crash after the
  refund, before the history is saved, refunds again when the run resumes.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic_ai import Agent, ModelRetry
from pydantic_ai.tools import DeferredToolRequests

from harness.adapters.pydantic_ai import AgentBox, Call, Script, pydantic_ai_target
from harness.adapters.replay_units import ToolFailed

HONOURS_KEYS = {"idempotency_keys": True}
IGNORES_KEYS = {"idempotency_keys": False}
PROMPT = "Refund order o-1."

#: What the model says: look the order up, refund 40; after a failed refund, ask for 400.
SCRIPT = Script(
    turns=[[Call("look_up", {"order_id": "o-1"}, "call-0")],
           [Call("refund", {"order_id": "o-1", "amount": 40}, "call-1")]],
    retried={"call-1": {"amount": 400}},
    final="The refund is done.")


def refund_agent(box: AgentBox) -> Agent[None, Any]:
    """Builds the agent: a lookup, and a refund that needs approval."""
    agent: Agent[None, Any] = Agent(None, output_type=[str, DeferredToolRequests],
                                    name="refund_agent", retries=3)

    @agent.tool_plain
    def look_up(order_id: str) -> str:
        try:
            return json.dumps(box.call("orders.get", {"order_id": order_id}), sort_keys=True,
                              default=str)
        except ToolFailed as error:
            raise ModelRetry(f"the lookup failed ({error.category}); try again") from error

    @agent.tool_plain(requires_approval=True)
    def refund(order_id: str, amount: int) -> str:
        try:
            box.call("payments.refund", {"order_id": order_id, "amount": amount})
        except ToolFailed as error:
            raise ModelRetry(f"the refund failed ({error.category}); try again") from error
        return f"refunded {amount} on {order_id}"

    return agent


def _target(name: str, refunds: dict[str, Any], approvals: str = "bound") -> Any:
    return pydantic_ai_target(refund_agent, script=SCRIPT, name=name, prompt=PROMPT,
                              tools={"orders.get": {**HONOURS_KEYS, "repeatable": True},
                                     "payments.refund": refunds},
                              gates={"refund": "payments.refund"}, approvals=approvals)


target = _target("refund_agent", HONOURS_KEYS)
approval_by_call_id = _target("approval_by_call_id", HONOURS_KEYS, approvals="by_call_id")
refund_without_key = _target("refund_without_key", IGNORES_KEYS)
