"""Machines of other libraries as machines under test (`transitions` and python-statemachine
in `peers`, LangGraph graphs in `langgraph`), and resolving the targets a user names
(`targets`: definition files, folders, `module:attribute`).

Of `harness`, it imports only `harness.sim` and `harness.errors`. The names below are the
public ones.
"""

from harness.adapters.langgraph import GraphBox, ToolFailed, langgraph_target
from harness.adapters.peers import (
    CRASH_POINTS,
    AdapterError,
    AsyncPeerMachine,
    PeerMachine,
    PeerTarget,
    ToolBox,
    statemachine_target,
    transitions_target,
)

__all__ = [
    "CRASH_POINTS",
    "AdapterError",
    "AsyncPeerMachine",
    "GraphBox",
    "PeerMachine",
    "PeerTarget",
    "ToolBox",
    "ToolFailed",
    "langgraph_target",
    "statemachine_target",
    "transitions_target",
]
