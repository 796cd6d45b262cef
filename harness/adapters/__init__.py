"""Machines of other libraries as machines under test (`transitions` and python-statemachine
in `peers`; LangGraph graphs in `langgraph`, pydantic-graph graphs in `pydantic_graph`,
pydantic-ai agents in `pydantic_ai` and OpenAI Agents SDK agents in `openai_agents`, all four
on the replay-unit kit, `replay_units`), and resolving the targets a user names (`targets`:
definition files, folders, `module:attribute`). Each framework's library is imported only
when a target of it is made.

Of `harness`, it imports only `harness.sim` and `harness.errors`. The names below are the
public ones.
"""

from harness.adapters.langgraph import GraphBox, langgraph_target
from harness.adapters.openai_agents import openai_agents_target
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
from harness.adapters.pydantic_ai import pydantic_ai_target
from harness.adapters.pydantic_graph import NodeBox, pydantic_graph_target
from harness.adapters.replay_units import ToolFailed

__all__ = [
    "CRASH_POINTS",
    "AdapterError",
    "AsyncPeerMachine",
    "GraphBox",
    "NodeBox",
    "PeerMachine",
    "PeerTarget",
    "ToolBox",
    "ToolFailed",
    "langgraph_target",
    "openai_agents_target",
    "pydantic_ai_target",
    "pydantic_graph_target",
    "statemachine_target",
    "transitions_target",
]
