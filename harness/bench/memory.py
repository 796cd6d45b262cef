"""The memory group of `fsmharness bench` (`--only memory`): the peak memory of a short fuzz
campaign beside one thirty times longer, which should not grow.
"""

from __future__ import annotations

from typing import Any

from harness.bench.engines import native_fuzz
from harness.bench.timing import Contender, Group, peak_bytes
from harness.sim.machine import MachineFactory, ReferenceMachine
from reference_machine import WorkflowDefinition

__all__ = [
    "campaign_peak",
    "memory_group",
]

def campaign_peak(definition: WorkflowDefinition, runs: int,
                  machine: MachineFactory = ReferenceMachine, strategy: str | None = None
                  ) -> int:
    """Gives the peak of memory the campaign's own process allocates over a fuzz campaign of
    `runs` runs (tracemalloc's count; the runs' worker processes have their own), after a
    campaign of a few runs has made what is made once (tables, caches)."""
    native_fuzz(definition, 8, machine=machine, strategy=strategy)()
    return peak_bytes(native_fuzz(definition, runs, machine=machine, strategy=strategy))


def memory_group(definition: WorkflowDefinition, machine: MachineFactory, quick: bool
                 ) -> Group:
    """Gives a short campaign beside one thirty times longer (ten when `quick`: too short for
    the peak to settle, a check that the group runs), with the peak memory of each: a
    campaign keeps what its runs add up to, not each run, so the peak should not grow."""
    short, long = (20, 200) if quick else (1_000, 30_000)

    names = {short: f"{short:,} runs (floor)", long: f"{long:,} runs"}

    def extra() -> dict[str, dict[str, Any]]:
        return {names[count]: {"peak_bytes": campaign_peak(definition, count, machine),
                               "runs": count}
                for count in (short, long)}

    return Group(f"memory: fuzz campaigns of {definition.name}", (
        Contender(names[short],
                  lambda stack: native_fuzz(definition, short, machine=machine), 0, "step"),
        Contender(names[long],
                  lambda stack: native_fuzz(definition, long, machine=machine), 0, "step")),
        extra=extra)
