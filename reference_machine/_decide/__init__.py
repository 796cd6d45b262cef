"""The pure transition function: `decide(definition, execution, event, now) -> Decision`.

No I/O, no clock, no randomness: `now` is an input, jitter comes from `entropy` (or, when it is
not given, from a CRC of the effect id, which is stable in every process), and every id is derived
from the execution id, the state and its visit count. `decide` is total: whatever the event, it
answers Accepted, Ignored or Rejected, and a guard or action that raises becomes a rejection.

Ids: an effect's idempotency key is `{execution}/{state}/{visit}`: stable across the retries of
one entry into a state, new when the state is entered again. An attempt's effect id is
`{key}#{attempt}`; results must answer the current attempt's id.

The modules, each importing only those before it: `shared` (enum members read once, small
helpers), `hierarchy` (compound states: domains, exit and entry sets, history, running
actions), `approvals` (approval requests and the action hash), `undos` (planning
compensations), `regions` (what regions hold and give their parent), `moves` (taking
transitions and moving, with the entry and join of regions and the start of a compensation,
which call it round), `handlers` (step results, compensation results, timers, approval
decisions) and `dispatch` (`decide` and the other entry points).
"""

from reference_machine._decide.approvals import action_hash, step_action_hash
from reference_machine._decide.dispatch import decide, new_execution, start_event
from reference_machine._decide.moves import EVENTLESS_MAX, join, move, plain_move
from reference_machine._decide.regions import pending_approval, pending_effect
from reference_machine._decide.undos import compensate

__all__ = [
    "EVENTLESS_MAX",
    "action_hash",
    "compensate",
    "decide",
    "join",
    "move",
    "new_execution",
    "pending_approval",
    "pending_effect",
    "plain_move",
    "start_event",
    "step_action_hash",
]
