"""What every module of the OpenAI Agents adapter shares: the crash points, the ids of the
states and events the definition read off an agent has, and `Dead`."""

from __future__ import annotations

from harness.adapters.replay_units import Dead

__all__ = ["CRASH_POINTS", "DONE", "ERROR_TEXT", "FOREVER", "RESULT_POINTS", "RUNNING",
           "Dead", "asking", "calling"]

#: The points an agent's worker can crash at, in the order one turn passes them.
CRASH_POINTS = ("after_tool_call", "before_state_write", "after_state_write")
#: The points around the write of a call's result (`save_results=True` only).
RESULT_POINTS = ("before_result_write", "after_result_write")
RUNNING, DONE = "running", "done"
#: An approval request waits for its human as long as it takes.
FOREVER = 10 * 365 * 24 * 3_600_000
#: What the SDK tells the model when a tool raised (`default_tool_error_function`).
ERROR_TEXT = "An error occurred while running the tool"


def asking(tool: str) -> str:
    """Gives the wait state of a tool's approval."""
    return f"awaiting_{tool}"


def calling(tool: str) -> str:
    """Gives the state that runs a tool once its call is approved."""
    return f"calling_{tool}"
