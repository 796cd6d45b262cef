"""Machines a campaign cannot exercise, as users write them by mistake: the verdict must be
`vacuous`, never `held`.

`stuck_orders` is a `transitions` machine whose `pay` condition never holds (a missing event
argument the library swallows looks the same from outside): every event is refused, nothing
ever moves.
"""

from __future__ import annotations

from transitions import Machine

from harness.adapters import ToolBox, transitions_target


class StuckOrder:
    def __init__(self, box: ToolBox) -> None:
        self.box = box
        self.machine = Machine(
            model=self, initial="new",
            states=["new", "paid", {"name": "shipped", "final": True}],
            transitions=[{"trigger": "pay", "source": "new", "dest": "paid",
                          "conditions": "has_card"},
                         ["ship", "paid", "shipped"]])

    def has_card(self) -> bool:
        return False


stuck_orders = transitions_target(StuckOrder, name="stuck_orders",
                                  events={"pay": {"sources": ["human"]},
                                          "ship": {"sources": ["system"]}})
