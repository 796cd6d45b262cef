"""A fuzz campaign over an adapter's target, as the adapters' tests run one (`campaign`)."""

from __future__ import annotations

from typing import Any

from fault_injection import FaultPlan
from harness import SimOptions
from harness.engines.fuzz import FuzzOptions, fuzz


def campaign(target: Any, runs: int = 60, plan: FaultPlan | None = None, **options: Any
             ) -> Any:
    """Fuzzes `target` (its own definition, on itself) from seed 0: `runs` runs under `plan`
    (the default faults without one), no replay files unless `replay_dir` is given."""
    sim = SimOptions(plan=plan) if plan is not None else SimOptions()
    options.setdefault("replay_dir", None)
    return fuzz(target.definition, FuzzOptions(runs=runs, seed=0, sim=sim, **options),
                machine=target)
