"""A pydantic-graph graph with its state persistence as a machine under test, as it is:
`pydantic_graph_target(graph, start=...)`.

`graph` is a `pydantic_graph.graph.Graph` of `BaseNode` classes (pydantic-graph 1.x: 2.0
removed the persistence). One execution is one graph run, on its own `FileStatePersistence`
file, kept in memory: pydantic-graph's own code reads, writes and serialises it, and nothing
reaches the real disk, so no run leaves a file behind, in any process:

- **The definition is read off the graph**, from pydantic-graph's own reading of each
  node's `run` return annotation (`graph.node_defs`): each node class is a state, the start
  node the initial one, `End` the final state `__end__` (success); a node's possible next
  nodes (`next_node_edges`, `end_edge`; a bare `BaseNode`, any node) are its moves. The moves
  a run makes inside one call are told in each observation (`moves`). A node that fails on
  a tool (`ToolFailed` out of its run: pydantic-graph saves its snapshot `error`) waits for
  `retry`, which goes to its next nodes (back to itself only under `recovery="rerun"`: a
  retry that fails again otherwise saves no new snapshot, and no move is seen).
- **Effects go through the simulated tools**: a node calls `ctx.deps.call(tool, input,
  key=None)` (the box is `ctx.deps` unless `deps=` says otherwise); the key defaults to
  `{run}/{node}/{place}`, the node's place in the run (1 for the start node, n + 1 for what
  the n-th returned), the same on every attempt and every re-run of that place.
- **Durable state is the persistence file** and the runs accepted (a job queue); everything
  else is memory. A crash drops the graph run and stops the file and the tools at that
  instant, and leaves the file's lock held if it held it. Recovery carries on every accepted
  run as a restarted worker would: with `iter_from_persistence` where the file holds a
  `created` snapshot; where it does not (a crash left it `pending`, `running`, or `success`
  with its successor unsaved), as `recovery` says: `requeue` (the default) sets it back to
  `created`, `rerun` starts its node again with `graph.iter` (pydantic-graph gives it a new
  snapshot id), `resume` does what pydantic-graph alone does: `iter_from_persistence`
  raises `GraphRuntimeError` and the run is lost.
- **Where a crash can land** (`crash_points`): just after the node's `running` status reached
  the file (`after_running`), inside a node just after a tool took effect
  (`after_tool_call`), and before and after each write of the file (`before_save`,
  `after_save`).

pydantic-graph's snapshot ids (uuid4) come from the run's own counter, its timestamps and
durations are pinned, and its file reads and writes run in the calling thread in the order
it awaits them, so a run replays from its seed.

The modules: `target` (`pydantic_graph_target`, the target and the definition it builds),
`machine` (the worker that drives the runs), `box` (what nodes are given, and pydantic-graph's
runtime pinned around them), `persistence` (the file and what survives a crash), `common`
(shared names).
"""

from harness.adapters.pydantic_graph.box import NodeBox, ToolFailed, harnessed
from harness.adapters.pydantic_graph.common import CRASH_POINTS, RECOVERIES
from harness.adapters.pydantic_graph.machine import PydanticGraphMachine
from harness.adapters.pydantic_graph.target import PydanticGraphTarget, pydantic_graph_target

__all__ = ["CRASH_POINTS", "RECOVERIES", "NodeBox", "PydanticGraphMachine",
           "PydanticGraphTarget", "ToolFailed", "harnessed", "pydantic_graph_target"]
