"""An approval-gated refund agent on pydantic-ai, sound and naive.

The agent looks the order up, then asks to refund it; the refund needs a human's approval
(`requires_approval=True`). The refund goes to the payment service under the key the box
gives, the same for every send of the tool call (`{execution}/refund/{turn}/{call id}`). When
the service times out, the refund may have taken effect: the tool asks again under the same
key (`retry_on=("timeout",)`), which a service that honours keys answers with its first answer.
When the request did not reach the service (transient, rate limited), the tool asks the model
to retry (`ModelRetry`), and the model sends the call again under the same id. A refusal, or
no answer after three sends, ends the run. `target` holds under every fault: the app binds
each decision to the exact call (its request and the hash of its arguments), and the service
honours keys. Each naive variant breaks one of those, and
`fsmharness fuzz scenarios.pydantic_ai.refund:<name>` finds it:

- `approval_by_call_id`: its model, asked to retry, sends the call again under the same id
  with another amount (as models do), and the app keeps a decision as pydantic-ai takes it,
  a boolean under the tool call's id, and answers the call sent again from it: a refund of an
  amount no human approved (pydantic-ai#5536);
- `refund_without_key`: refunds through a service that ignores keys, so a refund sent again
  after a timeout, or run again when the run resumes after a crash before the history was
  saved, refunds twice.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic_ai import Agent, ModelRetry
from pydantic_ai.tools import DeferredToolRequests

from harness.adapters.pydantic_ai import (
    AgentBox,
    Call,
    PydanticAITarget,
    Script,
    pydantic_ai_target,
)
from harness.adapters.replay_units import ToolFailed

HONOURS_KEYS = {"idempotency_keys": True}
IGNORES_KEYS = {"idempotency_keys": False}
PROMPT = "Refund order o-1."
TRIES = 3  # sends of a refund that times out, under its key, before the run gives up

#: What the model says: look the order up, refund 40; asked to retry, the same again.
SCRIPT = Script(
    turns=[[Call("look_up", {"order_id": "o-1"}, "call-0")],
           [Call("refund", {"order_id": "o-1", "amount": 40}, "call-1")]],
    final="The refund is done.")
#: The naive model: asked to retry the refund, it sends call-1 again asking for 400.
CHANGES_ITS_MIND = Script(turns=SCRIPT.turns, retried={"call-1": {"amount": 400}},
                          final=SCRIPT.final)


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
        try:  # a timeout may have taken effect: sent again under its key, the same action
            box.call("payments.refund", {"order_id": order_id, "amount": amount},
                     retry_on=("timeout",), tries=TRIES)
        except ToolFailed as error:
            if error.category in ("transient", "rate_limited"):  # it never reached the bank
                raise ModelRetry(f"the refund failed ({error.category}); try again"
                                 ) from error
            raise  # refused, or its outcome unknown: the run fails, for a human to look at
        return f"refunded {amount} on {order_id}"

    return agent


def refund_target(name: str, refunds: dict[str, Any], approvals: str = "bound",
                  script: Script = SCRIPT, durable: str = "app") -> PydanticAITarget:
    """Gives the refund agent as a target: `refunds` the payment service's spec."""
    return pydantic_ai_target(refund_agent, script=script, name=name, prompt=PROMPT,
                              tools={"orders.get": {**HONOURS_KEYS, "repeatable": True},
                                     "payments.refund": refunds},
                              gates={"refund": "payments.refund"}, approvals=approvals,
                              durable=durable)


target = refund_target("refund_agent", HONOURS_KEYS)
approval_by_call_id = refund_target("approval_by_call_id", HONOURS_KEYS,
                                    approvals="by_call_id", script=CHANGES_ITS_MIND)
refund_without_key = refund_target("refund_without_key", IGNORES_KEYS)
