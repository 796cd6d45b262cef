"""Machines whose history a seed does not fix, as users write them by mistake: each must fail
the `deterministic` rule, never hold by luck or fail in a way that cannot be replayed.

- `coin_orders`: `pay` is accepted when `random.random()` says so (the global random, not the
  run's). Two runs of a seed agree by luck now and then, so a test cannot rest on it alone.
- `flip_orders`: `pay` is accepted on every other call in the process (a coin a counter outside
  the run flips): from a fresh counter, the seed that paid at once the first time is refused
  the second time.

Both keep state between runs on purpose; `forget()` clears it, so that a test sees the same
thing whatever ran before it in the process.
- `cached_orders`: `pay` is refused for an order a module-level cache says was paid: the
  cache outlives the run, so the same seed pays the first time and not the second.
- `hashed_orders`: `pay` is accepted when `hash("pay")` is even: the same in one process (and
  its forks), another in a process with another hash seed.
"""

from __future__ import annotations

import itertools
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
                          "conditions": "pay_allowed"}, ["ship", "paid", "shipped"]])

    def pay_allowed(self) -> bool:
        raise NotImplementedError


class CoinOrder(_Order):
    def pay_allowed(self) -> bool:
        return random.random() < 0.5


_FLIPS = itertools.count()


class FlipOrder(_Order):
    def pay_allowed(self) -> bool:
        return next(_FLIPS) % 2 == 0


_PAID: set[str] = set()


class CachedOrder(_Order):
    def pay_allowed(self) -> bool:
        if self.box.execution_id in _PAID:
            return False
        _PAID.add(self.box.execution_id)
        return True


coin_orders = transitions_target(CoinOrder, name="coin_orders", events=EVENTS)
flip_orders = transitions_target(FlipOrder, name="flip_orders", events=EVENTS)
def forget() -> None:
    """Clears what the machines remember between runs."""
    global _FLIPS
    _FLIPS = itertools.count()
    _PAID.clear()


cached_orders = transitions_target(CachedOrder, name="cached_orders", events=EVENTS)


class HashedOrder(_Order):
    def pay_allowed(self) -> bool:
        return hash("pay") % 2 == 0  # the same all through one process, not from one to another


hashed_orders = transitions_target(HashedOrder, name="hashed_orders", events=EVENTS)
