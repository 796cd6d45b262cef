"""Machines whose history a seed does not fix, as users write them by mistake: each must fail
the `deterministic` rule, never hold by luck or fail in a way that cannot be replayed.

- `coin_orders`: `pay` is accepted when `random.random()` says so (the global random, not the
  run's).
- `cached_orders`: `pay` is refused for an order a module-level cache says was paid: the
  cache outlives the run, so the same seed pays the first time and not the second.
"""

from __future__ import annotations

import random
from typing import Any

from transitions import Machine

from harness.adapters import ToolBox, transitions_target

EVENTS = {"pay": {"sources": ["human"]}, "ship": {"sources": ["system"]}}
STATES: list[Any] = ["new", "paid", {"name": "shipped", "final": True}]


class _Order:
    def __init__(self, box: ToolBox) -> None:
        self.box = box
        self.machine = Machine(
            model=self, initial="new", states=STATES,
            transitions=[{"trigger": "pay", "source": "new", "dest": "paid",
                          "conditions": "may_pay"}, ["ship", "paid", "shipped"]])

    def may_pay(self) -> bool:
        raise NotImplementedError


class CoinOrder(_Order):
    def may_pay(self) -> bool:
        return random.random() < 0.5


_PAID: set[str] = set()


class CachedOrder(_Order):
    def may_pay(self) -> bool:
        if self.box.execution_id in _PAID:
            return False
        _PAID.add(self.box.execution_id)
        return True


coin_orders = transitions_target(CoinOrder, name="coin_orders", events=EVENTS)
cached_orders = transitions_target(CachedOrder, name="cached_orders", events=EVENTS)
