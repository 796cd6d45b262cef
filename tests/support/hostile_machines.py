"""Machines under test that misbehave as real ones do by mistake: each must be that machine's
failure (or, for its prints and its working folder, nothing at all), never the harness's
crash, hang or damaged output.

Each is a `transitions` machine of an order that is paid, then shipped; what goes wrong
happens when it is paid (`pay` is the first event a run sends, so every seed meets it).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from transitions import Machine

from harness.adapters import ToolBox, transitions_target

EVENTS = {"pay": {"sources": ["human"]}, "ship": {"sources": ["system"]}}
STATES: list[Any] = ["new", "paid", {"name": "shipped", "final": True}]


class _Order:
    def __init__(self, box: ToolBox) -> None:
        self.box = box
        self.machine = Machine(model=self, initial="new", states=STATES,
                               transitions=[["pay", "new", "paid"],
                                            ["ship", "paid", "shipped"]])

    def on_enter_paid(self) -> None:
        self.misbehave()

    def misbehave(self) -> None:
        """What this machine does wrong when it is paid."""


class Exits(_Order):
    def misbehave(self) -> None:
        os._exit(3)


class Spins(_Order):
    def misbehave(self) -> None:
        while True:
            pass


class Sleeps(_Order):
    def misbehave(self) -> None:
        time.sleep(3600)


class Prints(_Order):
    def misbehave(self) -> None:
        print("paid!")
        os.write(1, b"paid, at the file descriptor\n")


class ClosesStdout(_Order):
    def misbehave(self) -> None:
        sys.stdout.close()


class Wanders(_Order):
    def misbehave(self) -> None:
        os.chdir("/")


_BUILT = [0]


class Leaks(_Order):
    """Every order built in a process keeps a little; the 25th ends the process, as a leak of
    memory or descriptors ends a real one. No one run does it alone (a run builds its orders
    again after each crash: at most 11 times in the first 60 seeds)."""

    def __init__(self, box: ToolBox) -> None:
        _BUILT[0] += 1
        if _BUILT[0] >= 25:
            os._exit(137)
        super().__init__(box)


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no words for it")


class RaisesUnprintable(_Order):
    def misbehave(self) -> None:
        raise _Unprintable


class RaisesHuge(_Order):
    def misbehave(self) -> None:
        raise ValueError("x" * 50_000_000)


exits = transitions_target(Exits, name="exits", events=EVENTS)
spins = transitions_target(Spins, name="spins", events=EVENTS)
sleeps = transitions_target(Sleeps, name="sleeps", events=EVENTS)
prints = transitions_target(Prints, name="prints", events=EVENTS)
closes_stdout = transitions_target(ClosesStdout, name="closes_stdout", events=EVENTS)
wanders = transitions_target(Wanders, name="wanders", events=EVENTS)
leaks = transitions_target(Leaks, name="leaks", events=EVENTS)
raises_unprintable = transitions_target(RaisesUnprintable, name="raises_unprintable",
                                        events=EVENTS)
raises_huge = transitions_target(RaisesHuge, name="raises_huge", events=EVENTS)
