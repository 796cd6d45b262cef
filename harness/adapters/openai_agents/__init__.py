"""An OpenAI Agents SDK agent as a machine under test: `openai_agents_target(build_agent,
script=...)`.

`build_agent(box)` gives the user's `Agent`; the adapter replaces its model with a scripted
one that plays `script` (`call(tool, arguments)` ..., then `say(text)`), runs it offline
(tracing off, no API key, no network) and drives one execution per run the way an app that
waits on a human between turns does:

- **The definition is read off the agent and its script.** `running` (the model's turns and
  the tools that need no approval) is the initial state, `done` the final one; each function
  tool with `needs_approval=True` the script calls gets a wait state `awaiting_<tool>`, whose
  approval is of the reference format (request id, roles, the hash of the tool and its exact
  arguments, expiry), and a state `calling_<tool>` that runs it once granted. A denial goes
  back to `running`, where the model carries on.
- **Effects go through the simulated tools**: a function tool named like a declared tool
  calls it with the model's arguments instead of its body; any other tool's body may call
  `box.call(tool, input, key=None)`. The key defaults to `{execution}/{tool}/{script step}`
  (the same on every attempt and every re-run of that step); `box.call_id` is the call id
  the model gave (a new one each response, unless the script fixes it), `box.attempt` the
  model's attempt (it retries a call whose tool raised).
- **Durable state is the saved RunState JSON** of each execution, written after each turn
  (the run's end, or its interruption) and when a human's decision is taken, with the ids of
  the events taken and the runs accepted; everything else is memory. A crash drops the agent
  and stops the tools and the store at that instant. Recovery resumes each accepted
  execution from its last saved JSON, as a restarted worker would (one never saved runs
  again from its input). `worker()` gives a second worker over the same saved state (the
  SDK does not stop two workers resuming one state); `one_runner_per_execution=True` says
  the deployment never does that.
- **Where a crash can land** (`crash_points`): just after a tool took effect
  (`after_tool_call`), before and after each state write (`before_state_write`,
  `after_state_write`), and with `save_results` around the write of a call's result.

The SDK's `uuid4` ids are minted from the run's counter while the harness drives it, and the
model's call ids from the same store: a seed gives one history.

The modules: `target` (`openai_agents_target`, the definition read off the agent), `machine`
(the worker), `box` (what tools are given, and the SDK patched around them), `model` (the
scripted model), `store` (what survives a crash), `common` (shared names).
"""

from harness.adapters.openai_agents.box import AgentBox, ToolFailed
from harness.adapters.openai_agents.common import CRASH_POINTS
from harness.adapters.openai_agents.machine import OpenAIAgentsMachine
from harness.adapters.openai_agents.model import Say, ToolCall, call, say
from harness.adapters.openai_agents.target import OpenAIAgentsTarget, openai_agents_target

__all__ = ["CRASH_POINTS", "AgentBox", "OpenAIAgentsMachine", "OpenAIAgentsTarget", "Say",
           "ToolCall", "ToolFailed", "call", "openai_agents_target", "say"]
