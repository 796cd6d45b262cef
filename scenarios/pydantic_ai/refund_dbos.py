"""The refund agent of `refund.py`, run durably on DBOS (`durable="dbos"`): each agent run is
a DBOS workflow whose model requests are DBOS steps, on a SQLite system database of the
run's own. Its tools are function tools, not DBOS steps: DBOS re-runs them whenever it
recovers an agent run (after a crash, or when a second executor recovers a run the first
still runs), so an effect they make must be idempotent.

- `target` holds under every fault: the refund goes under the box's key, stable across
  DBOS's re-runs, to a service that honours keys;
- `refund_without_key`: the same agent on a service that ignores keys, refunded twice when
  DBOS re-runs the tool call
  (`fsmharness fuzz scenarios.pydantic_ai.refund_dbos:refund_without_key`).
"""

from __future__ import annotations

from scenarios.pydantic_ai.refund import HONOURS_KEYS, IGNORES_KEYS, refund_target

target = refund_target("refund_agent_on_dbos", HONOURS_KEYS, durable="dbos")
refund_without_key = refund_target("refund_without_key_on_dbos", IGNORES_KEYS, durable="dbos")
