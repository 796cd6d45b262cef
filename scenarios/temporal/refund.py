"""A refund workflow on Temporal, sound and naive.

`target` holds under every fault: a refund over 100 waits for a human's `approve` signal,
the refund activity calls the payment service under the box's key (`{workflow id}/{activity
type}/{activity id}`, the same on every attempt and after every crash), a timer gives the
customer a cooling-off hour, and the e-mail says when the refund was approved as
`workflow.now()` tells it. Each naive variant breaks one of those, and `fsmharness fuzz
scenarios.temporal.refund:<name>` finds it:

- `key_by_attempt`: keys the refund with `activity.info().attempt`, so the attempt Temporal
  makes after a worker died past the refund (or after a failed attempt) refunds again;
- `clock_in_signal`: an unsandboxed workflow whose signal handler reads `time.time()`: a
  replay runs the handler at another time, and the e-mail activity it schedules replays with
  another input than it was sent with live.
"""

from __future__ import annotations

from harness.adapters.temporal import temporal_target
from scenarios.temporal.workflows import (
    ClockInSignal,
    RefundWorkflow,
    notify,
    refund,
    refund_by_attempt,
)

HONOURS_KEYS = {"idempotency_keys": True}
TOOLS = {"payments.refund": HONOURS_KEYS, "notify.email": HONOURS_KEYS}
APPROVE = {"approve": {"payload": {"type": "object", "required": ["approved"],
                                   "properties": {"approved": {"type": "boolean"}}}}}

ORDER = ["o-1", 150]
target = temporal_target(RefundWorkflow, [refund, notify], tools=TOOLS, signals=APPROVE,
                         arguments=ORDER, name="refund_workflow")
key_by_attempt = temporal_target(RefundWorkflow, [refund_by_attempt, notify], tools=TOOLS,
                                 signals=APPROVE, arguments=ORDER, name="key_by_attempt")
clock_in_signal = temporal_target(ClockInSignal, [refund, notify], tools=TOOLS,
                                  signals=APPROVE, arguments=ORDER, name="clock_in_signal")
