"""The refund workflow and its activities on Temporal (the module a worker imports, kept apart
from the targets as Temporal's sandbox wants: it re-imports a workflow's module for each run).
`refund` names the sound and naive variants."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from harness.adapters.temporal import call

RETRIES = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=5)


@activity.defn
def refund(order_id: str, amount: int) -> str:
    out = call("payments.refund", {"order_id": order_id, "amount": amount})
    return str(out.get("id", "")) if isinstance(out, dict) else "refunded"


@activity.defn(name="refund")
def refund_by_attempt(order_id: str, amount: int) -> str:
    info = activity.info()
    out = call("payments.refund", {"order_id": order_id, "amount": amount},
               key=f"{info.workflow_id}/refund/{info.attempt}")  # naive: a new key per attempt
    return str(out.get("id", "")) if isinstance(out, dict) else "refunded"


@activity.defn
def notify(order_id: str, approved_at: float) -> None:
    call("notify.email", {"order_id": order_id, "approved_at": approved_at})


class _Refund:
    """The refund's steps, which both workflow classes run."""

    def __init__(self) -> None:
        self.approved: bool | None = None
        self.approved_at = 0.0

    async def refund(self, order_id: str, amount: int) -> str:
        if amount > 100:
            await workflow.wait_condition(lambda: self.approved is not None)
            if not self.approved:
                return "denied"
        refund_id = await workflow.execute_activity(
            refund, args=[order_id, amount], start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RETRIES)
        await workflow.sleep(timedelta(hours=1))  # the cooling-off hour
        await workflow.execute_activity(notify, args=[order_id, self.approved_at],
                                        start_to_close_timeout=timedelta(seconds=30),
                                        retry_policy=RETRIES)
        return refund_id


@workflow.defn
class RefundWorkflow(_Refund):
    @workflow.run
    async def run(self, order_id: str, amount: int) -> str:
        return await self.refund(order_id, amount)

    @workflow.signal
    def approve(self, decision: dict[str, Any]) -> None:
        if self.approved is None:
            self.approved = bool(decision.get("approved"))
            self.approved_at = workflow.now().timestamp()


@workflow.defn(name="RefundWorkflow", sandboxed=False)
class ClockInSignal(_Refund):
    @workflow.run
    async def run(self, order_id: str, amount: int) -> str:
        return await self.refund(order_id, amount)

    @workflow.signal
    def approve(self, decision: dict[str, Any]) -> None:
        if self.approved is None:
            self.approved = bool(decision.get("approved"))
            self.approved_at = time.time()  # naive: the wall clock, read again on replay
