"""What every module of the LangGraph adapter shares: the crash points and durabilities, the
ids of the states and events the definition read off a graph has, and `Dead`."""

from __future__ import annotations

from harness.adapters.replay_units import Dead

__all__ = ["ANSWER_EVENT", "CRASH_POINTS", "DURABILITIES", "END", "FAILED_EVENT", "START",
           "Dead"]


#: The points a LangGraph machine can crash at, in the order one step passes them.
CRASH_POINTS = ("after_tool_call", "after_task", "before_put_writes", "after_put_writes",
                "put_ahead_of_writes", "before_put", "after_put")
DURABILITIES = ("sync", "async", "exit")
START, END, FAILED_EVENT, ANSWER_EVENT = "__start__", "__end__", "retry", "answer"

