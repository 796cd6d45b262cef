"""Machines written by hand in the protocol's async form, a sound one and its faulty twins: the
machines the async simulation tests drive.

new --pay--> paid --ship--> shipped (final). Taking `pay`, the machine charges the card and
mails a receipt at once (two tasks gathered, each after a quarter second of the service's
latency, on the loop's virtual clock), under keys of the execution, tool and version: the
services honour keys, so a retry after a crash applies nothing new. Its disk survives a crash;
it keeps nothing else.

Run as a script (`python async_machines.py SEED`), it prints the history of one run of
`AsyncOrders` as JSON lines, for the test that compares processes.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Mapping
from typing import Any

from harness import Observation, SimOptions, Simulator
from harness.sim.history import dump_line
from reference_machine import Event, Tool, WorkflowDefinition, load_definition

DEFINITION = load_definition({
    "name": "async_orders", "version": 1,
    "tools": {"pay.charge": {"idempotency_keys": True},
              "mail.send": {"idempotency_keys": True}},
    "events": {"pay": {"sources": ["human"]}, "ship": {"sources": ["system"]}},
    "states": {
        "new": {"initial": True, "on": {"pay": "paid"}},
        "paid": {"on": {"ship": "shipped"}},
        "shipped": {"type": "final", "outcome": "success"},
    },
})
MOVES = {("new", "pay"): "paid", ("paid", "ship"): "shipped"}


class AsyncOrders:
    """The sound machine: every method that waits is a coroutine."""

    definition = DEFINITION
    crash_points = ("after_tool_call", "before_save")

    def __init__(self, definition: WorkflowDefinition | None, tools: Mapping[str, Tool],
                 probe: Any, disk: dict[str, list[Any]] | None = None) -> None:
        self.tools, self.probe = tools, probe
        self.disk: dict[str, list[Any]] = {} if disk is None else disk  # id -> [state, version,
        # seen event ids]

    async def start(self, execution_id: str, context: Mapping[str, Any], now: int
                    ) -> str | None:
        if execution_id in self.disk:
            return "ignored:duplicate"
        self.probe("before_save")
        self.disk[execution_id] = ["new", 1, set()]
        return "accepted"

    async def deliver(self, execution_id: str, event: Event, now: int) -> str | None:
        row = self.disk.get(execution_id)
        if row is None:
            return "rejected:unknown execution"
        if event.id in row[2]:
            return "ignored:duplicate"
        target = MOVES.get((row[0], event.type))
        if target is None:
            return "rejected"
        version = row[1]
        if target == "paid":
            await self.pay(execution_id, version)
        self.probe("before_save")
        if row[1] != version or event.id in row[2]:
            return "ignored:conflict"  # another worker saved it first
        row[0], row[1] = target, version + 1
        row[2].add(event.id)
        return "accepted"

    async def pay(self, execution_id: str, version: int) -> None:
        await asyncio.gather(self.call(execution_id, "pay.charge", version),
                             self.call(execution_id, "mail.send", version))

    async def call(self, execution_id: str, tool: str, version: int,
                   latency: float = 0.25) -> None:
        await asyncio.sleep(latency)
        self.tools[tool]({"order": execution_id}, f"{execution_id}/{tool}/{version}")
        self.probe("after_tool_call")

    async def advance(self, now: int) -> None:
        pass  # no timers

    async def complete(self, execution_id: str, call_id: str, now: int) -> None:
        pass  # tools are called while an event is taken: no call is left in flight

    def crash(self) -> None:
        pass  # nothing volatile

    async def recover(self, now: int) -> None:
        pass  # the disk is all there is

    def worker(self) -> AsyncOrders:
        return type(self)(None, self.tools, self.probe, disk=self.disk)

    def observe(self, execution_id: str) -> Observation:
        state, version, _ = self.disk[execution_id]
        final = state == "shipped"
        return Observation(state, "final" if final else "waiting", version,
                           "success" if final else None)


class LeavesATask(AsyncOrders):
    """Mails the receipt from a task it never awaits (fire and forget), which the mail
    service's latency keeps pending past the charge."""

    async def pay(self, execution_id: str, version: int) -> None:
        self.mailing = asyncio.get_running_loop().create_task(
            self.call(execution_id, "mail.send", version, latency=5))
        await self.call(execution_id, "pay.charge", version)


class ForgetsToAwait(AsyncOrders):
    """Calls the mailing coroutine and drops it: the receipt is never sent."""

    async def pay(self, execution_id: str, version: int) -> None:
        self.call(execution_id, "mail.send", version)  # type: ignore[unused-coroutine]
        await self.call(execution_id, "pay.charge", version)


class SleepsLong(AsyncOrders):
    """Waits eleven days of the loop's clock in every delivery, and notes the loop's time
    before and after (with the `now` it was told)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.slept: list[tuple[int, float, float]] = []

    async def deliver(self, execution_id: str, event: Event, now: int) -> str | None:
        loop = asyncio.get_running_loop()
        before = loop.time()
        await asyncio.sleep(10**6)
        self.slept.append((now, before, loop.time()))
        return await super().deliver(execution_id, event, now)


def history_lines(seed: int, machine: Any = AsyncOrders) -> bytes:
    """Gives the history of one run as JSON lines, one record a line."""
    result = Simulator(DEFINITION, SimOptions(seed=seed), machine=machine).run()
    return "".join(f"{dump_line(record)}\n" for record in result.history).encode("utf-8")


if __name__ == "__main__":
    sys.stdout.buffer.write(history_lines(int(sys.argv[1])))
