"""A refund graph on pydantic-graph, sound and naive.

`target` holds under every fault: the refund goes through a service that honours
idempotency keys, under the key `{run}/{node}/{place}` the box gives (the same on every retry
and every re-run after a crash), and a restarted worker sets a snapshot a crash left
`running` back to `created` (`recovery="requeue"`). Each naive variant breaks one of those,
and `fsmharness fuzz scenarios.pydantic_graph.refund:<name>` finds it:

- `key_by_snapshot_id`: keys the refund with pydantic-graph's snapshot id, under a worker
  that runs a stuck node again with `graph.iter` (`recovery="rerun"`): pydantic-graph gives
  the node a new snapshot id, so the re-run is a new call to a service that honours keys;
- `charge_ignoring_keys`: a card service that ignores keys; a timeout after the refund took
  effect fails the node, and its retry refunds again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic_graph import BaseNode, End, GraphRunContext
from pydantic_graph.graph import Graph

from harness.adapters.pydantic_graph import NodeBox, ToolFailed, pydantic_graph_target

HONOURS_KEYS = {"idempotency_keys": True}
IGNORES_KEYS = {"idempotency_keys": False}


@dataclass
class Refund:
    order_id: str = "o-1"
    amount: int = 40
    refund_id: str = ""


@dataclass
class Services:
    """The nodes' dependencies (`ctx.deps`): the refund and e-mail services, over the box."""

    box: NodeBox
    keyed_by_snapshot: bool = False

    def refund(self, order_id: str, amount: int) -> Any:
        key = self.box.snapshot_id if self.keyed_by_snapshot else None  # naive: re-minted
        return self.box.call("payments.refund", {"order_id": order_id, "amount": amount},
                             key=key)

    def tell(self, tool: str, about: str, order_id: str) -> None:
        self.box.call(tool, {"order_id": order_id, "about": about})


Context = GraphRunContext[Refund, Services]


@dataclass
class LookUp(BaseNode[Refund, Services, str]):
    async def run(self, ctx: Context) -> Charge:
        return Charge(amount=ctx.state.amount)


@dataclass
class Charge(BaseNode[Refund, Services, str]):
    amount: int = 0

    async def run(self, ctx: Context) -> Notify | Escalate:
        try:
            out = ctx.deps.refund(ctx.state.order_id, self.amount)
        except ToolFailed as failed:
            if failed.category != "permanent":
                raise  # the node fails: its snapshot is `error` until a retry
            return Escalate(reason=failed.category)
        ctx.state.refund_id = str(out.get("id", "")) if isinstance(out, dict) else ""
        return Notify()


@dataclass
class Notify(BaseNode[Refund, Services, str]):
    async def run(self, ctx: Context) -> End[str]:
        ctx.deps.tell("notify.email", "refunded", ctx.state.order_id)
        return End(ctx.state.refund_id or "refunded")


@dataclass
class Escalate(BaseNode[Refund, Services, str]):
    reason: str = ""

    async def run(self, ctx: Context) -> End[str]:
        ctx.deps.tell("support.ticket", self.reason, ctx.state.order_id)
        return End("escalated")


refund_graph = Graph(nodes=(LookUp, Charge, Notify, Escalate), name="refund")
TOOLS = {"payments.refund": HONOURS_KEYS, "notify.email": HONOURS_KEYS,
         "support.ticket": HONOURS_KEYS}

target = pydantic_graph_target(refund_graph, start=LookUp, state=Refund, deps=Services,
                               tools=TOOLS, name="refund_graph")
key_by_snapshot_id = pydantic_graph_target(
    refund_graph, start=LookUp, state=Refund, name="key_by_snapshot_id", tools=TOOLS,
    deps=lambda box: Services(box, keyed_by_snapshot=True), recovery="rerun")
charge_ignoring_keys = pydantic_graph_target(
    refund_graph, start=LookUp, state=Refund, deps=Services, name="charge_ignoring_keys",
    tools={**TOOLS, "payments.refund": IGNORES_KEYS})
