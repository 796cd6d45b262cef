"""Refund runtimes written the way a user writes one: a dict for a database, no `watch()`, the
refund called inside the `deliver` that approves it (so a run passes through `refunding`
within one call), and two crash points of its own.

- `RefundBot` is sound, and says nothing of the moves it makes inside a call: a campaign sees
  `waiting` then `refunded`, never the move between. Its verdict cannot be `held`.
- `SoundRefund` is the same runtime reporting each move it makes (`Observation.moves`): keys
  kept across retries and restarts, escalation when attempts run out (its own earlier call, or
  a second worker's, may have taken effect: a first version that failed when its own attempts
  had met no timeout was caught failing with a refund made), failure only on a refusal (a
  service that honours keys refuses a refused key again, whoever calls). It must hold.
- `ForgetfulRefund` is `SoundRefund` with a one-line bug: its recovery forgets the refund key a
  committed record holds and refunds again under a new one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness import Observation, Probe
from reference_machine import Event, Failure, Success, Tool, WorkflowDefinition, load_definition

DEFINITION = load_definition("""
name: refund_bot
version: 1
context: {order: o-1, amount: 40}
tools:
  payments.refund:
    idempotency_keys: true
    output: {type: object, required: [refund_id], properties: {refund_id: {type: string}}}
events:
  approve: {sources: [human]}
  reject: {sources: [human]}
states:
  waiting:
    type: wait
    initial: true
    after: {delay: 1d, target: expired}
    on: {approve: refunding, reject: rejected}
  refunding:
    step:
      tool: payments.refund
      input: {order: "=context.order", amount: "=context.amount"}
      retry: {attempts_max: 3, retry_on: [transient, rate_limited, timeout, invalid_output],
              on_exhausted: escalate}
      escalate_to: escalated
    on: {step.succeeded: refunded, step.failed: failed}
  refunded: {type: final, outcome: success}
  failed: {type: final, outcome: failure}
  escalated: {type: final, outcome: escalated}
  rejected: {type: final, outcome: rejected}
  expired: {type: final, outcome: cancelled}
""")

DAY_MS = 86_400_000
ATTEMPTS = 3
OUTCOMES = {"refunded": "success", "failed": "failure", "escalated": "escalated",
            "rejected": "rejected", "expired": "cancelled"}


class RefundBot:
    """The runtime and its wrapper in one, as a user writes it: `db` (a dict of records) is
    what survives a crash and what a second worker shares; nothing else is kept."""

    definition = DEFINITION
    crash_points: Sequence[str] = ("after_save", "after_refund")
    reports_moves = False

    def __init__(self, definition: WorkflowDefinition, tools: Mapping[str, Tool],
                 probe: Probe, db: dict[str, dict[str, Any]] | None = None) -> None:
        self.tools, self.probe = tools, probe
        self.db: dict[str, dict[str, Any]] = {} if db is None else db

    # -- the protocol ---------------------------------------------------------------------

    def start(self, execution_id: str, context: Mapping[str, Any], now: int) -> str:
        if execution_id in self.db:
            return "ignored:duplicate"
        self._save(execution_id, {"state": "waiting", "version": 1, "seen": [],
                                  "deadline": now + DAY_MS, "key": "", "moves": []})
        return "accepted"

    def deliver(self, execution_id: str, event: Event, now: int) -> str:
        record = self.db.get(execution_id)
        if record is None:
            return "rejected:unknown execution"
        if event.id in record["seen"]:
            return "ignored:duplicate"
        if record["state"] != "waiting" or event.type not in ("approve", "reject"):
            return "rejected:not expected"
        if event.type == "reject":
            self._move(execution_id, record, "rejected", event.id)
            return "accepted"
        # the key is minted once and saved with the move, before the first call
        self._move(execution_id, record, "refunding", event.id,
                   key=f"{execution_id}/refund/{record['version'] + 1}")
        self._refund(execution_id)
        return "accepted"

    def advance(self, now: int) -> None:
        for execution_id, record in list(self.db.items()):
            if record["state"] == "waiting" and now >= record["deadline"]:
                self._move(execution_id, record, "expired", "")

    def complete(self, execution_id: str, call_id: str, now: int) -> None:
        pass  # every call is made synchronously

    def crash(self) -> None:
        pass  # nothing volatile: the db is all it keeps

    def recover(self, now: int) -> None:
        for execution_id, record in list(self.db.items()):
            if record["state"] == "refunding":
                self._recovered(execution_id, record)
                self._refund(execution_id)

    def observe(self, execution_id: str) -> Observation:
        record = self.db[execution_id]
        state = record["state"]
        moves = ()
        if self.reports_moves:
            moves, record["moves"] = tuple(record["moves"]), []
        waiting = state == "waiting"
        return Observation(state, "final" if state in OUTCOMES else
                           "waiting" if waiting else "running", record["version"],
                           OUTCOMES.get(state),
                           ((f"{execution_id}/deadline", record["deadline"]),) if waiting else (),
                           moves=moves)

    def worker(self) -> RefundBot:
        return type(self)(DEFINITION, self.tools, self.probe, self.db)

    # -- the runtime ----------------------------------------------------------------------

    def _save(self, execution_id: str, record: dict[str, Any]) -> None:
        self.db[execution_id] = record
        self.probe("after_save")

    def _move(self, execution_id: str, record: dict[str, Any], state: str, cause: str,
              **changes: Any) -> None:
        self._save(execution_id, {**record, **changes, "state": state,
                                  "version": record["version"] + 1,
                                  "seen": [*record["seen"], cause] if cause else record["seen"],
                                  "moves": [*record["moves"], (record["state"], state)]})

    def _recovered(self, execution_id: str, record: dict[str, Any]) -> None:
        """What a restart does to a record saved in `refunding` before it refunds again."""

    def _refund(self, execution_id: str) -> None:
        """Refunds under the record's key until an answer settles it: refunded; escalated
        when attempts run out; failed on a refusal."""
        record = self.db[execution_id]
        for _ in range(ATTEMPTS):
            outcome = self.tools["payments.refund"]({"order": "o-1", "amount": 40},
                                                     record["key"])
            self.probe("after_refund")
            record = self.db[execution_id]
            if record["state"] != "refunding":
                return  # a second worker settled it meanwhile
            output = outcome.output if isinstance(outcome, Success) else None
            if isinstance(output, Mapping) and isinstance(output.get("refund_id"), str):
                self._move(execution_id, record, "refunded", "")
                return
            category = outcome.category if isinstance(outcome, Failure) else "invalid_output"
            if category == "permanent":  # refused: the key never takes effect
                self._move(execution_id, record, "failed", "")
                return
        self._move(execution_id, record, "escalated", "")


class SoundRefund(RefundBot):
    """`RefundBot` that reports the moves it makes inside one call."""

    reports_moves = True


class ForgetfulRefund(SoundRefund):
    """`SoundRefund` whose restart forgets the key of the refund it committed."""

    def _recovered(self, execution_id: str, record: dict[str, Any]) -> None:
        record["key"] = f"{execution_id}/refund/recovered-{record['version']}"
