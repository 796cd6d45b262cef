"""An order workflow written with `transitions` and with python-statemachine, as users write
them, in a correct and a naive version each: the machines the adapter tests fuzz.

new --pay--> paid --ship--> shipped (final); cancel from new or paid --> cancelled (final).
Entering `paid` charges the card through the simulated `pay.charge`. The correct versions
charge a service that honours idempotency keys, under the adapter's default key (one per
step); the naive ones charge a service that ignores keys, so the charge sent again after a
crash between the call and the save, or by a second worker, is a second charge.
"""

from __future__ import annotations

from typing import Any

from statemachine import State, StateMachine
from transitions import Machine

from harness.adapters import ToolBox, statemachine_target, transitions_target
from reference_machine import Success

TOOLS = {"pay.charge": {"idempotency_keys": True}}
KEYLESS = {"pay.charge": {"idempotency_keys": False}}
EVENTS = {"pay": {"sources": ["human"]}, "ship": {"sources": ["system"]},
          "cancel": {"sources": ["human"]}}
OUTCOMES = {"cancelled": "failure"}


class Order:
    """The `transitions` version: the model owns its machine."""

    def __init__(self, box: ToolBox, *, cancel_anywhere: bool = False) -> None:
        self.box, self.charges = box, 0
        sources: Any = "*" if cancel_anywhere else ["new", "paid"]
        self.machine = Machine(
            model=self, initial="new",
            states=["new", "paid", {"name": "shipped", "final": True},
                    {"name": "cancelled", "final": True}],
            transitions=[["pay", "new", "paid"], ["ship", "paid", "shipped"],
                         ["cancel", sources, "cancelled"]])

    def on_enter_paid(self) -> None:
        self.box.call("pay.charge", {"order": self.box.execution_id})
        self.charges += 1


class OrderChart(StateMachine):
    """The python-statemachine version."""

    new = State(initial=True)
    paid = State()
    shipped = State(final=True)
    cancelled = State(final=True)

    pay = new.to(paid)
    ship = paid.to(shipped)
    cancel = new.to(cancelled) | paid.to(cancelled)

    def __init__(self, box: ToolBox) -> None:
        self.box = box
        super().__init__()

    def on_enter_paid(self) -> None:
        self.box.call("pay.charge", {"order": self.box.execution_id})


def _options(name: str, tools: dict[str, Any] = TOOLS) -> dict[str, Any]:
    return {"name": name, "tools": tools, "events": EVENTS, "outcomes": OUTCOMES}


orders = transitions_target(Order, **_options("orders"))
naive_orders = transitions_target(Order, **_options("naive_orders", KEYLESS))
resurrecting_orders = transitions_target(lambda box: Order(box, cancel_anywhere=True),
                                         **_options("resurrecting_orders"))
chart_orders = statemachine_target(OrderChart, **_options("chart_orders"))
naive_chart_orders = statemachine_target(OrderChart, **_options("naive_chart_orders", KEYLESS))


class RetryingOrder:
    """Charges on entering `paid`, retrying a failed charge there and then, under a new key
    each attempt: a charge that timed out after it applied is made again (the per-attempt key
    bug). Its tools are called while it takes the event, so no call is left in flight."""

    def __init__(self, box: ToolBox) -> None:
        self.box = box
        self.machine = Machine(model=self, initial="new",
                               states=["new", "paid", {"name": "shipped", "final": True}],
                               transitions=[["pay", "new", "paid"], ["ship", "paid", "shipped"]])

    def on_enter_paid(self) -> None:
        for attempt in range(1, 4):
            outcome = self.box.call("pay.charge", {"order": self.box.execution_id},
                                    key=f"{self.box.execution_id}/charge/{attempt}")
            if isinstance(outcome, Success):
                return


retrying_orders = transitions_target(RetryingOrder, name="retrying_orders", tools=TOOLS,
                                     events={"pay": {"sources": ["human"]},
                                             "ship": {"sources": ["system"]}})
