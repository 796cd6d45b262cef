"""Temporal workflows the adapter's tests run (tests/harness/adapters/test_temporal_adapter.py),
in a module of their own as Temporal's sandbox wants."""

from __future__ import annotations

import contextlib
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    from harness.adapters.temporal import call


@activity.defn
def charge(order: str) -> str:
    call("payments.charge", {"order": order})
    return "charged"


@activity.defn
def audit(order: str) -> str:
    return f"audited {order}"


@workflow.defn
class Charge:
    """Charges once, waits a minute, completes."""

    @workflow.run
    async def run(self, order: str) -> str:
        done = await workflow.execute_activity(charge, order,
                                               start_to_close_timeout=timedelta(seconds=5))
        await workflow.sleep(timedelta(minutes=1))
        return done


@workflow.defn
class ReplayBranches:
    """Schedules another activity on replay than it did live: the nondeterminism Temporal's
    Replayer finds itself."""

    @workflow.run
    async def run(self, order: str) -> str:
        chosen = audit if workflow.unsafe.is_replaying() else charge
        return await workflow.execute_activity(chosen, order,
                                               start_to_close_timeout=timedelta(seconds=5))


@workflow.defn
class Raises:
    """Its code raises a plain exception: the workflow task fails, for ever."""

    @workflow.run
    async def run(self) -> str:
        raise RuntimeError("the order book is gone")


@workflow.defn
class LocalActivity:
    """Runs a local activity, which the history mode does not model."""

    @workflow.run
    async def run(self, order: str) -> str:
        return await workflow.execute_local_activity(
            audit, order, start_to_close_timeout=timedelta(seconds=5))


@workflow.defn
class Approval:
    """Waits for `approve` (an argument) or `cancel` (none)."""

    def __init__(self) -> None:
        self.decision: dict[str, Any] | None = None
        self.cancelled = False

    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: self.decision is not None or self.cancelled)
        return "cancelled" if self.cancelled else f"approved {self.decision}"

    @workflow.signal
    def approve(self, decision: dict[str, Any]) -> None:
        self.decision = decision

    @workflow.signal
    def cancel(self) -> None:
        self.cancelled = True


@workflow.defn
class Tagged:
    """Charges under a reference it draws from the workflow's own random (deterministic on
    replay)."""

    @workflow.run
    async def run(self, order: str) -> str:
        reference = str(workflow.uuid4())
        return await workflow.execute_activity(charge, f"{order}/{reference}",
                                               start_to_close_timeout=timedelta(seconds=5))


@workflow.defn(name="Tagged")
class TaggedWithJitter:
    """Version 2 of `Tagged`: it draws a jitter first, which shifts the reference drawn after
    (sdk-python#1109's class: the Replayer does not compare the activity's input)."""

    @workflow.run
    async def run(self, order: str) -> str:
        workflow.random().random()  # the added draw
        reference = str(workflow.uuid4())
        return await workflow.execute_activity(charge, f"{order}/{reference}",
                                               start_to_close_timeout=timedelta(seconds=5))


@workflow.defn(name="Tagged")
class TaggedRenamedActivity:
    """Version 2 of `Tagged` that runs another activity: the Replayer's own error."""

    @workflow.run
    async def run(self, order: str) -> str:
        return await workflow.execute_activity(audit, order,
                                               start_to_close_timeout=timedelta(seconds=5))


@activity.defn
async def pause(order: str) -> str:
    import asyncio
    await asyncio.sleep(0.01)  # a real await: the event loop's clock runs under a frozen one
    return order


@workflow.defn
class Waits:
    """Waits for `go` with a timeout, then runs an async activity, waits on a condition met
    at once (Python's SDK starts and cancels its timer in one task, and Core sends neither)
    and, in the task that ends the run, starts an activity it never waits for."""

    def __init__(self) -> None:
        self.went = False

    @workflow.run
    async def run(self) -> str:
        with contextlib.suppress(TimeoutError):  # the wait timed out: the run goes on
            await workflow.wait_condition(lambda: self.went, timeout=timedelta(minutes=5))
        done = await workflow.execute_activity(pause, "o",
                                               start_to_close_timeout=timedelta(seconds=5))
        # met at once: the timer is started and cancelled in this one task, and never sent
        await workflow.wait_condition(lambda: True, timeout=timedelta(minutes=1))
        workflow.start_activity(audit, "o", start_to_close_timeout=timedelta(seconds=5))
        return done

    @workflow.signal
    def go(self, ready: bool) -> None:
        self.went = ready


@workflow.defn
class ChargeOnce:
    """Charges with at most one attempt, and says how the charge ended."""

    @workflow.run
    async def run(self, order: str) -> str:
        from temporalio.common import RetryPolicy
        from temporalio.exceptions import ActivityError
        try:
            return await workflow.execute_activity(
                charge, order, start_to_close_timeout=timedelta(seconds=5),
                retry_policy=RetryPolicy(maximum_attempts=1))
        except ActivityError as error:
            return f"gave up: {type(error.cause).__name__}"


@workflow.defn
class Updatable:
    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: False)

    @workflow.update
    def change(self, value: int) -> int:
        return value


@workflow.defn
class TwoArguments:
    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: False)

    @workflow.signal
    def set(self, key: str, value: int) -> None:
        pass


# sdk-python#1109: "adding workflow.random().randint call before workflow.uuid4 breaks
# replay". Its workflow names a child workflow by a uuid4 drawn after an activity whose retry
# policy version 2 draws from workflow.random(); here the id names the second activity's
# order instead (the history mode does not run child workflows).
@workflow.defn(name="Issue1109")
class Issue1109:
    """Version 1: the activity's retry policy is fixed."""

    @workflow.run
    async def run(self, order: str) -> str:
        from temporalio.common import RetryPolicy
        await workflow.execute_activity(
            audit, order, start_to_close_timeout=timedelta(seconds=5),
            retry_policy=RetryPolicy(initial_interval=timedelta(seconds=1)))
        reference = f"child_workflow_{workflow.uuid4()}"
        await workflow.sleep(timedelta(hours=1))
        return await workflow.execute_activity(charge, reference,
                                               start_to_close_timeout=timedelta(seconds=5))


@workflow.defn(name="Issue1109")
class Issue1109Deployed:
    """Version 2, deployed while version 1's runs sleep: the retry policy's interval is
    drawn from `workflow.random()`."""

    @workflow.run
    async def run(self, order: str) -> str:
        from temporalio.common import RetryPolicy
        jitter = workflow.random().randint(1, 5)
        await workflow.execute_activity(
            audit, order, start_to_close_timeout=timedelta(seconds=5),
            retry_policy=RetryPolicy(initial_interval=timedelta(seconds=jitter)))
        reference = f"child_workflow_{workflow.uuid4()}"
        await workflow.sleep(timedelta(hours=1))
        return await workflow.execute_activity(charge, reference,
                                               start_to_close_timeout=timedelta(seconds=5))


@workflow.defn(sandboxed=False)
class BusinessHours:
    """Waits half an hour in the morning, an hour after noon, by the wall clock (where it
    should read `workflow.now()`)."""

    @workflow.run
    async def run(self) -> str:
        import datetime as wall
        window = 30 if wall.datetime.now().hour < 12 else 60
        await workflow.sleep(timedelta(minutes=window))
        return "done"


@activity.defn(name="charge")
def misspelled(order: str) -> str:
    call("payments.chrage", {"order": order})  # a tool the target does not declare
    return "charged"


@workflow.defn
class Abandons:
    """Ends as soon as its signal handler began, while the handler still waits on an
    activity: temporalio warns that the handler's work is abandoned."""

    def __init__(self) -> None:
        self.noted = False

    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: self.noted)
        return "done"

    @workflow.signal
    async def note(self) -> None:
        self.noted = True
        await workflow.execute_activity(audit, "o", start_to_close_timeout=timedelta(seconds=5))


@workflow.defn(name="Abandons")
class WaitsForHandlers:
    """The same, ending only once every handler finished."""

    def __init__(self) -> None:
        self.noted = False

    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: self.noted)
        await workflow.wait_condition(workflow.all_handlers_finished)
        return "done"

    @workflow.signal
    async def note(self) -> None:
        self.noted = True
        await workflow.execute_activity(audit, "o", start_to_close_timeout=timedelta(seconds=5))
