"""An approval-gated refund agent on LangGraph, sound and naive.

`target` holds under every fault: the refund runs after the human's answer, through a tool
that honours idempotency keys, under the key `{thread}/{node}/{step}` the box gives (the same
on every attempt, every re-run after a crash, every resume). Each naive variant breaks one of
those, and `fsmharness fuzz scenarios.langgraph.refund:<name>` finds it:

- `notify_before_interrupt`: e-mails the customer before `interrupt()`, so every resume (and
  every recovery) sends the e-mail again: a node re-runs from its first line;
- `charge_with_retry`: a node with a `RetryPolicy` calls a card service that ignores keys, so
  a timeout after the charge took effect charges again;
- `key_per_attempt`: keys its call with the attempt number, so the retry is a new call to a
  service that does honour keys.
"""

from __future__ import annotations

from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import RetryPolicy, interrupt

from harness.adapters import GraphBox, langgraph_target

HONOURS_KEYS = {"idempotency_keys": True}
IGNORES_KEYS = {"idempotency_keys": False}
INPUT = {"order_id": "o-1", "amount": 40}


class Refund(TypedDict, total=False):
    order_id: str
    amount: int
    approved: bool
    refund_id: str


def refund_graph(box: GraphBox, *, notify_first: bool = False, retry: bool = False,
                 per_attempt: bool = False) -> StateGraph:
    """Builds the agent: look the order up, ask a human, refund if approved."""

    def look_up(state: Refund) -> dict[str, Any]:
        return {"amount": state.get("amount", 0)}

    def review(state: Refund) -> dict[str, Any]:
        approved = interrupt({"refund": state["amount"], "order": state["order_id"]})
        return {"approved": bool(approved)}

    def notify_and_review(state: Refund) -> dict[str, Any]:
        # naive: an effect before interrupt() runs again on every resume
        box.call("notify.email", {"order_id": state["order_id"], "about": "review"})
        approved = interrupt({"refund": state["amount"], "order": state["order_id"]})
        return {"approved": bool(approved)}

    def refund(state: Refund) -> dict[str, Any]:
        key = f"{box.key()}/{box.attempt}" if per_attempt else None
        out = box.call("payments.refund", {"order_id": state["order_id"],
                                           "amount": state["amount"]}, key=key)
        return {"refund_id": str(out.get("id", "")) if isinstance(out, dict) else ""}

    graph = StateGraph(Refund)
    graph.add_node("look_up", look_up)
    graph.add_node("review", notify_and_review if notify_first else review)
    graph.add_node("refund", refund,
                   retry_policy=RetryPolicy(max_attempts=3) if retry or per_attempt else None)
    graph.add_edge(START, "look_up")
    graph.add_edge("look_up", "review")
    graph.add_conditional_edges("review", _route, {"refund": "refund", END: END})
    graph.add_edge("refund", END)
    return graph


def _route(state: Refund) -> str:
    return "refund" if state.get("approved") else END


def sound(box: GraphBox) -> StateGraph:
    return refund_graph(box, retry=True)


def notifying(box: GraphBox) -> StateGraph:
    return refund_graph(box, notify_first=True)


def retrying(box: GraphBox) -> StateGraph:
    return refund_graph(box, retry=True)


def keyed_per_attempt(box: GraphBox) -> StateGraph:
    return refund_graph(box, per_attempt=True)


target = langgraph_target(sound, name="refund_agent", input=INPUT,
                          tools={"payments.refund": HONOURS_KEYS})
notify_before_interrupt = langgraph_target(
    notifying, name="notify_before_interrupt", input=INPUT,
    tools={"payments.refund": HONOURS_KEYS, "notify.email": IGNORES_KEYS})
charge_with_retry = langgraph_target(retrying, name="charge_with_retry", input=INPUT,
                                     tools={"payments.refund": IGNORES_KEYS})
key_per_attempt = langgraph_target(keyed_per_attempt, name="key_per_attempt", input=INPUT,
                                   tools={"payments.refund": HONOURS_KEYS})
