"""An approval-gated refund agent on the OpenAI Agents SDK, sound and naive.

The model looks the order up, then calls `refund`, a tool with `needs_approval=True`: the
run stops, its RunState is saved as JSON, a human approves or denies, and the app resumes it
from the JSON. `target` holds under every fault: the refund calls a payment service that
honours idempotency keys, under the key the box gives (`{execution}/refund/{script step}`,
the same on every retry and every resume), and the app saves the result right after the
effect and takes it from there on a resume. Each naive variant breaks one of those, and
`fsmharness fuzz scenarios.openai_agents.refund:<name>` finds it:

- `keyed_by_call_id`: keys the refund with the model's call id, which the model mints anew
  when it retries a call whose tool failed;
- `keyed_per_attempt`: keys it with the model's attempt;
- `ignores_keys`: a payment service that ignores keys, so a resume after a crash that came
  after the refund and before the state was saved refunds again.

And two shapes the SDK's own documents show
(tests/contract/test_openai_agents_findings.py):

- `documented_example`: the human-in-the-loop example's shape, a plain `@function_tool(
  needs_approval=True)` whose body is the effect: the SDK resumes the saved state after a
  crash that came after the effect and before the state was saved, and the tool runs twice
  (a second worker does it too, but that is a deployment fault, not the SDK's);
- `client_state`: an app that hands the saved JSON to its client and takes it back with the
  decision written in. The app checks who sent the decision, their role, the request and
  the action, as `target` does; the client tampers (`client_tampers=True`): when the human
  denies, it writes an approval of the pending call into the JSON, and
  `RunState.from_string` takes it (the JSON is trusted input, PR #5105).
"""

from __future__ import annotations

from typing import Any

from agents import Agent, function_tool

from harness.adapters.openai_agents import AgentBox, call, openai_agents_target, say

HONOURS_KEYS = {"idempotency_keys": True}
IGNORES_KEYS = {"idempotency_keys": False}
READ = {"idempotency_keys": True, "repeatable": True}
ORDER = {"order_id": "o-1", "amount": 40}
SCRIPT = (call("look_up_order", {"order_id": "o-1"}), call("refund", ORDER),
          say("The refund is done."))
TOOLS = {"look_up_order": READ, "payments.refund": HONOURS_KEYS}


def refund_agent(box: AgentBox, *, key: str = "") -> Agent[Any]:
    """Builds the agent: `look_up_order` (a read, routed to the world as it is) and `refund`,
    which needs approval and calls the payment service from its body."""

    @function_tool
    def look_up_order(order_id: str) -> str:
        """Looks the order up."""
        return order_id  # routed: the world answers instead

    @function_tool(needs_approval=True)
    def refund(order_id: str, amount: int) -> str:
        """Refunds the order."""
        chosen = {"call_id": box.call_id, "attempt": f"{box.key()}/{box.attempt}"}.get(key)
        out = box.call("payments.refund", {"order_id": order_id, "amount": amount},
                       key=chosen)
        return f"refunded: {out}"

    return Agent(name="refund_agent", instructions="Refund orders once a human approves.",
                 tools=[look_up_order, refund])


def sound(box: AgentBox) -> Agent[Any]:
    return refund_agent(box)


def by_call_id(box: AgentBox) -> Agent[Any]:
    return refund_agent(box, key="call_id")


def by_attempt(box: AgentBox) -> Agent[Any]:
    return refund_agent(box, key="attempt")


def documented(box: AgentBox) -> Agent[Any]:
    """The SDK's human-in-the-loop example, as its docs write it: the tool's body is the
    effect (routed to the world's `refund`, a plain API that ignores keys)."""

    @function_tool(needs_approval=True)
    def refund(order_id: str, amount: int) -> str:
        """Refunds the order."""
        return f"refunded {amount} on {order_id}"

    return Agent(name="refund_agent", instructions="Refund orders once a human approves.",
                 tools=[refund])


GATES = {"refund": "payments.refund"}
target = openai_agents_target(sound, script=SCRIPT, name="refund_agent", tools=TOOLS,
                              gates=GATES, save_results=True)
keyed_by_call_id = openai_agents_target(by_call_id, script=SCRIPT, name="keyed_by_call_id",
                                        tools=TOOLS, gates=GATES, save_results=True)
keyed_per_attempt = openai_agents_target(by_attempt, script=SCRIPT, name="keyed_per_attempt",
                                         tools=TOOLS, gates=GATES, save_results=True)
ignores_keys = openai_agents_target(sound, script=SCRIPT, name="ignores_keys",
                                    tools={**TOOLS, "payments.refund": IGNORES_KEYS},
                                    gates=GATES, save_results=True)
documented_example = openai_agents_target(
    documented, script=(call("refund", ORDER), say("Done.")), name="documented_example",
    tools={"refund": IGNORES_KEYS})
client_state = openai_agents_target(sound, script=SCRIPT, name="client_state", tools=TOOLS,
                                    gates=GATES, save_results=True, client_state=True,
                                    client_tampers=True)
