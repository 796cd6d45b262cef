"""`SimOptions(freeze_clock=True)`: a machine that reads the wall clock reads the virtual one,
so its run replays from the seed like any other."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from harness import ReferenceMachine, SimOptions, Simulator
from harness.sim.simulator import FROZEN_EPOCH
from reference_machine import Event, load_definition

SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"
REFUND = load_definition(SCENARIOS / "refund_escalation.yaml")


class WallClockReader(ReferenceMachine):
    """The reference machine, noting the wall time at each delivery as a user's code might."""

    seen: list[tuple[int, datetime, float]]

    def deliver(self, execution_id: str, event: Event, now: int) -> str | None:
        self.seen.append((now, datetime.now(UTC), time.time()))
        return super().deliver(execution_id, event, now)


def run(freeze: bool) -> list[tuple[int, datetime, float]]:
    """Runs seed 0 (four deliveries) and gives what the machine saw at each delivery."""
    made: list[WallClockReader] = []

    def factory(*args: Any) -> WallClockReader:
        machine = WallClockReader(*args)
        machine.seen = []
        made.append(machine)
        return machine

    result = Simulator(REFUND, SimOptions(seed=0, freeze_clock=freeze), machine=factory).run()
    assert result.ok, result.summary()
    return made[0].seen


def test_the_wall_clock_follows_the_machine_clock() -> None:
    """Each delivery reads exactly the epoch plus the virtual time it was given."""
    seen = run(freeze=True)
    assert seen
    for now, wall, stamp in seen:
        assert wall == FROZEN_EPOCH + timedelta(milliseconds=now)
        assert stamp == (FROZEN_EPOCH + timedelta(milliseconds=now)).timestamp()


def test_frozen_runs_repeat_and_free_runs_do_not() -> None:
    """With the clock frozen two runs read the same times; without, they read the wall."""
    assert run(freeze=True) == run(freeze=True)
    free = run(freeze=False)
    assert all(wall > FROZEN_EPOCH + timedelta(days=300) for _, wall, _ in free)


def test_a_deadline_is_kept_by_the_running_clock_not_the_frozen_one() -> None:
    """A shrinking attempt runs with a deadline on the system's monotonic clock: a frozen
    clock (which patches `time.monotonic`) once made every step look past it, so that no
    attempt ran and nothing was shrunk."""
    options = SimOptions(seed=0, freeze_clock=True)
    result = Simulator(REFUND, options).run(deadline=time.monotonic() + 600)
    assert result.status != "out_of_time", result.summary()
    assert result.ok


def test_a_machine_factory_can_ask_for_the_frozen_clock() -> None:
    """An adapter that pins its user's clock asks for the frozen clock itself
    (`freeze_clock = True` on the factory), so that one freeze serves the whole run."""
    seen: list[float] = []

    class Asks(ReferenceMachine):
        def deliver(self, execution_id: str, event: Event, now: int) -> str | None:
            seen.append(time.time())
            return super().deliver(execution_id, event, now)

    def factory(*args: Any) -> Asks:
        return Asks(*args)
    factory.freeze_clock = True  # type: ignore[attr-defined]
    Simulator(REFUND, SimOptions(seed=0), machine=factory).run()
    assert seen and all(abs(t - FROZEN_EPOCH.timestamp()) < 86_400 * 30 for t in seen)
