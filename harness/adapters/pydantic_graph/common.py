"""What every module of the pydantic-graph adapter shares: the crash points, the recoveries a
worker may make, the ids of the definition's end state and retry event, and `Dead`."""

from __future__ import annotations

from harness.adapters.replay_units import Dead

__all__ = ["CRASH_POINTS", "END", "FAILED_EVENT", "RECOVERIES", "Dead"]


#: The points a pydantic-graph machine can crash at, in the order one node passes them: the
#: snapshot's `running` write is on the file (`after_running`), a tool took effect inside the
#: node (`after_tool_call`), and before and after each write of the persistence's file.
CRASH_POINTS = ("after_running", "after_tool_call", "before_save", "after_save")
#: How a restarted worker carries on a run whose file holds no `created` snapshot.
RECOVERIES = ("requeue", "rerun", "resume")
END, FAILED_EVENT = "__end__", "retry"
