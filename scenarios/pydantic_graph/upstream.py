"""Graphs written the way pydantic-graph's docs and users write them, each with the tool call
that makes what it does a side effect the ledger sees. On pydantic-graph 1.107.10 the harness
finds (tests/contract/test_pydantic_graph_findings.py pins it: a finding about
pydantic-graph, not a failure of fsmharness):

- `running_snapshot_lost`: a two-node payment run on `FileStatePersistence`, recovered as
  pydantic-graph's docs resume a run (`iter_from_persistence`, `recovery="resume"`). A crash
  while a node runs leaves its snapshot `running` on the file (a crash inside a write leaves
  the file's lock held, or the node `success` with its successor unsaved); resume runs only a
  `created` snapshot, so it raises `GraphRuntimeError('Unable to restore snapshot from state
  persistence.')` (a held lock: `TimeoutError`), and the run is lost.

And the docs' own examples under the adapter, with the default recovery (`requeue`):

- `vending_machine`: the docs' vending machine (`InsertCoin`, `CoinsInserted`,
  `SelectProduct`, `Purchase`), its `Prompt.ask` answers scripted in the state and the
  purchase dispensed through a tool that ignores keys: a crash after the dispense and before
  `Purchase`'s successor is saved dispenses again (`no_duplicate_effect`): pydantic-graph
  gives a node no key stable across re-runs of its own, and the docs' example uses none.
- `email_feedback`: the docs' GenAI example (`WriteEmail`, `Feedback`, a loop until the
  feedback agent is content), its two agents as model calls (repeatable tools): it holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic_graph import BaseNode, End, GraphRunContext
from pydantic_graph.graph import Graph

from harness.adapters.pydantic_graph import NodeBox, pydantic_graph_target

#: A service that does not honour idempotency keys, and a model call (no side effect).
PLAIN = {"idempotency_keys": False}
KEYED = {"idempotency_keys": True}
MODEL = {"repeatable": True}


# -- the run the memo's demo drives: charge, then notify


@dataclass
class Payment:
    order_id: str = "o-1"


@dataclass
class Charge(BaseNode[Payment, NodeBox, str]):
    async def run(self, ctx: GraphRunContext[Payment, NodeBox]) -> Notify:
        ctx.deps.call("payments.charge", {"order_id": ctx.state.order_id})
        return Notify()


@dataclass
class Notify(BaseNode[Payment, NodeBox, str]):
    async def run(self, ctx: GraphRunContext[Payment, NodeBox]) -> End[str]:
        ctx.deps.call("notify.email", {"order_id": ctx.state.order_id})
        return End("done")


payment_graph = Graph(nodes=(Charge, Notify), name="pay")


# -- the docs' vending machine (graph.md, "Stateful Graphs")

PRODUCT_PRICES = {"water": 1.25, "soda": 1.50, "crisps": 1.75, "chocolate": 2.00}


@dataclass
class MachineState:
    user_balance: float = 0.0
    product: str | None = None
    # what `Prompt.ask` would read, in turn: coins inserted, products selected
    coins: list[float] = field(default_factory=lambda: [1.0, 1.0])
    choices: list[str] = field(default_factory=lambda: ["tea", "soda"])


@dataclass
class InsertCoin(BaseNode[MachineState, NodeBox]):
    async def run(self, ctx: GraphRunContext[MachineState, NodeBox]) -> CoinsInserted:
        return CoinsInserted(ctx.state.coins.pop(0))


@dataclass
class CoinsInserted(BaseNode[MachineState, NodeBox]):
    amount: float

    async def run(self, ctx: GraphRunContext[MachineState, NodeBox]
                  ) -> SelectProduct | Purchase:
        ctx.state.user_balance += self.amount
        if ctx.state.product is not None:
            return Purchase(ctx.state.product)
        return SelectProduct()


@dataclass
class SelectProduct(BaseNode[MachineState, NodeBox]):
    async def run(self, ctx: GraphRunContext[MachineState, NodeBox]) -> Purchase:
        return Purchase(ctx.state.choices.pop(0))


@dataclass
class Purchase(BaseNode[MachineState, NodeBox, None]):
    product: str

    async def run(self, ctx: GraphRunContext[MachineState, NodeBox]
                  ) -> End | InsertCoin | SelectProduct:
        if price := PRODUCT_PRICES.get(self.product):
            ctx.state.product = self.product
            if ctx.state.user_balance >= price:
                ctx.state.user_balance -= price
                ctx.deps.call("vending.dispense", {"product": self.product})
                return End(None)
            return InsertCoin()  # not enough money: insert more
        return SelectProduct()  # no such product: try again


vending_machine_graph: Graph[MachineState, NodeBox, None] = Graph(
    nodes=[InsertCoin, CoinsInserted, SelectProduct, Purchase])


# -- the docs' GenAI example (graph.md, "GenAI Example"), its agents as model calls


@dataclass
class User:
    name: str = "John Doe"
    email: str = "john.joe@example.com"
    interests: list[str] = field(default_factory=lambda: ["Haskel", "Lisp", "Fortran"])


@dataclass
class Email:
    subject: str
    body: str


@dataclass
class EmailState:
    user: User = field(default_factory=User)
    write_agent_messages: list[str] = field(default_factory=list)


@dataclass
class WriteEmail(BaseNode[EmailState, NodeBox]):
    email_feedback: str | None = None

    async def run(self, ctx: GraphRunContext[EmailState, NodeBox]) -> Feedback:
        prompt = (f"Write a welcome email for {ctx.state.user.name}"
                  + (f"; feedback: {self.email_feedback}" if self.email_feedback else ""))
        ctx.deps.call("email_writer_agent.run", {"prompt": prompt})
        ctx.state.write_agent_messages.append(prompt)
        return Feedback(Email(subject="Welcome", body=prompt))


@dataclass
class Feedback(BaseNode[EmailState, NodeBox, Email]):
    email: Email

    async def run(self, ctx: GraphRunContext[EmailState, NodeBox]
                  ) -> WriteEmail | End[Email]:
        ctx.deps.call("feedback_agent.run", {"email": self.email.body})
        if len(ctx.state.write_agent_messages) < 2:  # the first draft is never good enough
            return WriteEmail(email_feedback="mention their interests")
        return End(self.email)


feedback_graph = Graph(nodes=(WriteEmail, Feedback))


running_snapshot_lost = pydantic_graph_target(
    payment_graph, start=Charge, state=Payment, name="running_snapshot_lost",
    tools={"payments.charge": KEYED, "notify.email": KEYED}, recovery="resume")
vending_machine = pydantic_graph_target(
    vending_machine_graph, start=InsertCoin, state=MachineState, name="vending_machine",
    tools={"vending.dispense": PLAIN})
email_feedback = pydantic_graph_target(
    feedback_graph, start=WriteEmail, state=EmailState, name="email_feedback",
    tools={"email_writer_agent.run": MODEL, "feedback_agent.run": MODEL})
