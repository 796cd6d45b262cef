"""A LangGraph graph as a machine under test, as it is: `langgraph_target(build)`.

`build(box)` gives the user's `StateGraph` (or the graph compiled; its builder is used). The
adapter compiles it with a checkpointer the harness controls, a real `SqliteSaver` on one file
per machine by default, and drives one thread per execution:

- **The definition is read off the graph.** Nodes are states, `START` the initial state
  `__start__`, `END` the final state `__end__`; edges, conditional edges (their path maps),
  `Command` destinations and `Send` targets are the moves. A node whose code calls
  `interrupt()` (read off its source, or named in `interrupts=`) is a wait state that takes
  a human's `answer` (payload `{"decision": ...}`, one of `answers`; faults: duplicate, late,
  reordered and dropped answers), which the adapter sends as `Command(resume=value)`. A
  node that failed on a tool (its `ToolFailed` left the call) takes `retry`, sent as
  `invoke(None)`.
- **Effects go through the simulated tools**: a node calls `box.call(tool, input, key=None)`;
  the key defaults to `{thread}/{node}/{step}` (the same on every attempt and every re-run of
  that step), `box.attempt` is the attempt number. LangChain tools (`BaseTool`, so
  `ToolNode` too) named like a declared tool go through the tool world as they are.
- **Durable state is the checkpointer's file** and the set of runs accepted (a job queue);
  everything else is memory. A crash drops the compiled graph and the saver, and stops the
  saver and the tools at that instant: nothing after it reaches the file or the world.
  Recovery compiles a fresh graph on the same file and calls `invoke(None, config)` on every
  accepted thread, as a restarted worker would.
- **Where a crash can land** (`crash_points`): inside a node just after a tool took effect
  (`after_tool_call`), after a task's writes are applied in memory (`after_task`), and at the
  checkpointer: before and after each `put_writes` and `put` reaches the file, and, when a
  step's task writes have not yet reached it as its checkpoint does (LangGraph orders a
  checkpoint after the previous checkpoint, not after those writes), with the checkpoint
  saved ahead of the writes (`put_ahead_of_writes`).

LangGraph's background saves run in the calling thread, in the order LangGraph submits them,
so a run replays from its seed; the order in which they reach the file is modelled by
`durability`: under `sync` a step's writes and checkpoint reach it before the next step, under
`async` one step later (a crash in the next step loses them), under `exit` when the call
returns. RetryPolicy's sleeps take no time.

The modules: `target` (`langgraph_target`, the target and the definition it builds), `reading`
(what is read off the user's graph), `machine` (the worker that drives the graph), `box` (what
nodes are given, and LangGraph's runtime patched around them), `saver` (the checkpointer's
file and what survives a crash), `moves` (the moves a call made), `common` (shared names).
"""

from harness.adapters.langgraph.box import GraphBox, ToolFailed, harnessed
from harness.adapters.langgraph.common import CRASH_POINTS, DURABILITIES
from harness.adapters.langgraph.machine import LangGraphMachine
from harness.adapters.langgraph.target import LangGraphTarget, langgraph_target

__all__ = ["CRASH_POINTS", "DURABILITIES", "GraphBox", "LangGraphMachine", "LangGraphTarget",
           "ToolFailed", "harnessed", "langgraph_target"]
