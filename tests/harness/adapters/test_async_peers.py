"""Async machines of the peer libraries through the protocol's async form: a `transitions`
`AsyncMachine` and a python-statemachine machine with async callbacks are wrapped as
`AsyncPeerMachine`s, whose trigger coroutines run on the run's own event loop (virtual time,
tasks in an order drawn from the seed), not on a loop of the adapter's."""

from __future__ import annotations

import asyncio
from typing import Any

import peers
import pytest
from statemachine import State, StateMachine
from transitions.extensions.asyncio import AsyncMachine

from fault_injection import no_faults
from harness import Dispatched, FuzzOptions, SimOptions, Simulator, fuzz
from harness.adapters import ToolBox, statemachine_target, transitions_target
from harness.adapters import peers as peers_module
from harness.adapters.peers import AsyncPeerMachine, PeerMachine

EVENTS = {"pay": {"sources": ["human"]}, "ship": {"sources": ["system"]}}
LOOPS: list[str] = []  # the kind of loop each callback ran on (in this process)


class SlowChart(StateMachine):
    """python-statemachine: charges on entering `paid`, after a minute of the service's
    latency (on the loop's clock)."""

    new = State(initial=True)
    paid = State()
    shipped = State(final=True)
    pay = new.to(paid)
    ship = paid.to(shipped)

    def __init__(self, box: ToolBox) -> None:
        self.box = box
        super().__init__()

    async def on_enter_paid(self) -> None:
        LOOPS.append(type(asyncio.get_running_loop()).__name__)
        await asyncio.sleep(60)
        self.box.call("pay.charge", {"order": self.box.execution_id})


class SlowOrder:
    """`transitions`: the same, as an AsyncMachine."""

    def __init__(self, box: ToolBox) -> None:
        self.box = box
        self.machine = AsyncMachine(
            model=self, initial="new", states=["new", "paid", {"name": "shipped", "final": True}],
            transitions=[["pay", "new", "paid"], ["ship", "paid", "shipped"]])

    async def on_enter_paid(self) -> None:
        LOOPS.append(type(asyncio.get_running_loop()).__name__)
        await asyncio.sleep(60)
        self.box.call("pay.charge", {"order": self.box.execution_id})


def chart(tools: dict[str, Any], name: str = "slow_chart") -> Any:
    return statemachine_target(SlowChart, name=name, tools=tools, events=EVENTS)


def order(tools: dict[str, Any], name: str = "slow_order") -> Any:
    return transitions_target(SlowOrder, name=name, tools=tools, events=EVENTS)


LIBRARIES = pytest.mark.parametrize("make", [chart, order], ids=["psm", "transitions"])


class TestTheAsyncForm:
    @LIBRARIES
    def test_an_async_machine_is_wrapped_in_the_async_form(self, make: Any) -> None:
        target = make(peers.TOOLS)
        assert target.asynchronous
        assert isinstance(target(target.definition, {}, lambda point: None), AsyncPeerMachine)
        sync = peers.orders  # a synchronous machine keeps the synchronous form
        assert not sync.asynchronous
        assert type(sync(sync.definition, {}, lambda point: None)) is PeerMachine

    @LIBRARIES
    def test_the_trigger_runs_on_the_run_s_loop_not_the_adapter_s(
            self, make: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        """Every callback ran on the simulator's `VirtualLoop`, and the adapter's own runner
        was handed nothing to await while the runs went on."""
        target = make(peers.TOOLS)
        settled: list[object] = []
        runner = peers_module._settled
        monkeypatch.setattr(peers_module, "_settled",
                            lambda result: settled.append(result) or runner(result))
        LOOPS.clear()
        simulator = Simulator(target.definition, SimOptions(plan=no_faults()), target)
        results = [simulator.run(seed) for seed in range(10)]
        assert all(result.ok for result in results)
        assert LOOPS and set(LOOPS) == {"VirtualLoop"}
        assert not [each for each in settled if asyncio.iscoroutine(each)]

    @LIBRARIES
    def test_a_sound_machine_holds_and_a_keyless_one_charges_twice(self, make: Any) -> None:
        """A crash in the callback, after the charge and before the save, sends the event
        again: the service that honours keys charges once and every invariant holds; the one
        that ignores them charges twice, caught as `no_duplicate_effect`."""
        sound = make(peers.TOOLS)
        report = fuzz(sound.definition, FuzzOptions(runs=200, replay_dir=None), machine=sound)
        assert report.verdict == "held", [str(f.violations[0]) for f in report.failures]
        assert report.summary()["coverage"]["transitions"]["missing"] == []
        assert report.faults.get("crash") and report.faults.get("second_worker")
        keyless = make(peers.KEYLESS, name="keyless")
        caught = fuzz(keyless.definition, FuzzOptions(runs=200, replay_dir=None),
                      machine=keyless)
        assert caught.failures and caught.failures[0].rule == "no_duplicate_effect"


class Notifying:
    """An AsyncMachine whose callback sends a notification from a task it never awaits."""

    def __init__(self, box: ToolBox) -> None:
        self.box = box
        self.machine = AsyncMachine(
            model=self, initial="new", states=["new", {"name": "paid", "final": True}],
            transitions=[["pay", "new", "paid"]])

    async def notify(self) -> None:
        await asyncio.sleep(5)
        self.box.call("pay.charge", {"order": self.box.execution_id})

    async def on_enter_paid(self) -> None:
        self.sending = asyncio.get_running_loop().create_task(self.notify())


class Twofold:
    """An AsyncMachine with two callbacks on entering `paid`: transitions gathers them."""

    def __init__(self, box: ToolBox) -> None:
        self.box = box
        self.machine = AsyncMachine(
            model=self, initial="new", states=[
                "new", {"name": "paid", "final": True,
                        "on_enter": ["charge", "receipt"]}],
            transitions=[["pay", "new", "paid"]])

    async def charge(self) -> None:
        self.box.call("pay.charge", {"order": self.box.execution_id})

    async def receipt(self) -> None:
        self.box.call("mail.send", {"order": self.box.execution_id})


class TestWhatTheLoopSees:
    def test_a_task_a_callback_leaves_pending_fails_machine_ok(self) -> None:
        target = transitions_target(Notifying, name="notifying", tools=peers.TOOLS,
                                    events={"pay": {"sources": ["human"]}})
        report = fuzz(target.definition, FuzzOptions(runs=5, replay_dir=None), machine=target)
        assert report.failures and report.failures[0].rule == "machine_ok"
        message = report.failures[0].violations[0].message
        assert message.startswith("the machine leaked (PendingTask): while external: a task "
                                  "was still pending when deliver returned")
        assert message.endswith("in Notifying.notify")

    def test_gathered_callbacks_run_in_an_order_drawn_from_the_seed(self) -> None:
        tools = {"pay.charge": {"idempotency_keys": True},
                 "mail.send": {"idempotency_keys": True}}
        target = transitions_target(Twofold, name="twofold", tools=tools,
                                    events={"pay": {"sources": ["human"]}})
        simulator = Simulator(target.definition, SimOptions(plan=no_faults()), target)

        def first_sent(seed: int) -> tuple[str, ...]:
            history = simulator.run(seed).history
            return tuple(r.tool for r in history if type(r) is Dispatched)[:2]
        assert {first_sent(seed) for seed in range(30)} == {("pay.charge", "mail.send"),
                                                            ("mail.send", "pay.charge")}
