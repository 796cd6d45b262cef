"""A pydantic-ai agent whose tools may need approval, as a machine under test:
`pydantic_ai_target(build_agent, script=...)`.

The app it models runs the agent, stops when a tool needs approval (pydantic-ai's deferred
tools: the run ends with `DeferredToolRequests`), saves the message history as JSON, asks a
human, and resumes the agent from the saved history with the decision
(`DeferredToolResults(approvals={tool_call_id: True})`, or `ToolDenied`).

- **The definition is read off the agent**: `running` (initial), one wait state
  `awaiting_<tool>` per tool with `requires_approval=True`, the state `<tool>` it runs in
  once approved (its step needs approval), `done` and `failed` (final). The human's decision
  is an approval of the reference format: `approval.granted` or `approval.denied` from a
  human holding a role, answering the request, with the hash of the exact action (the
  world's tool and the call's arguments), so the approval faults (duplicate, late,
  reordered, dropped, forged) and `approval_genuine` / `approved_effects` apply.
- **The model is a script** (`Script`, played as pydantic-ai's `FunctionModel`): which tools
  it calls, with which arguments and ids, turn by turn, then its final answer. Offline.
- **Effects go through the simulated tools**: a tool calls `box.call(tool, input,
  key=None)`, keyed by default `{execution}/{tool}/{turn}/{tool call id}`, `turn` being the
  model's answer where that call id first appears. The key and the logical action are the
  same when the model sends the call again under its id (after `ModelRetry`), when the box
  sends it again (`retry_on=("timeout",)`), and when the run re-runs the call from a saved
  history that holds it. A run re-run from its prompt (never saved) may number the model's
  answers otherwise, but no call that needs approval runs before a save. Or a tool named in
  `routes` is the world's tool, called with the call's arguments.
- **Durable state is the app's record per execution** (`store.Record`: the history JSON, the
  request pending, the decisions, the event ids taken) and the runs accepted. A crash can
  land after a tool took effect (`after_tool_call`) and before or after each save of a
  decision or a history. Recovery resumes each accepted execution from its saved history
  with the decision taken (a run never saved runs again from its prompt).
- **Deterministic**: pydantic-ai's clock, run ids and generated tool call ids are the run's
  own (`model.pinned`: their code swapped under a lock, one harness run at a time in the
  process, put back after); each agent run has a thread of its own, waited for, lent the
  lock, with pydantic-ai's worker threads off.

The modules: `target` (`pydantic_ai_target`, the definition), `machine` (the worker, the
box), `model` (the script, the pins), `store` (what survives a crash).
"""

from harness.adapters.pydantic_ai.machine import (
    APPROVALS,
    CRASH_POINTS,
    AgentBox,
    PydanticAIMachine,
)
from harness.adapters.pydantic_ai.model import Call, Script
from harness.adapters.pydantic_ai.target import PydanticAITarget, pydantic_ai_target

__all__ = ["APPROVALS", "CRASH_POINTS", "AgentBox", "Call", "PydanticAIMachine",
           "PydanticAITarget", "Script", "pydantic_ai_target"]
