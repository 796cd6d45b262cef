"""Machines of other libraries as machines under test (`transitions` and python-statemachine
today, in `peers`), and resolving the targets a user names (`targets`: definition files,
folders, `module:attribute`).

Of `harness`, it imports only `harness.sim` and `harness.errors`. The names below are the
public ones.
"""

from harness.adapters.peers import (
    CRASH_POINTS,
    AdapterError,
    PeerMachine,
    PeerTarget,
    ToolBox,
    statemachine_target,
    transitions_target,
)

__all__ = [
    "CRASH_POINTS",
    "AdapterError",
    "PeerMachine",
    "PeerTarget",
    "ToolBox",
    "statemachine_target",
    "transitions_target",
]
