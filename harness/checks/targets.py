"""Targeted properties: a user's score over a run's history, which guided fuzzing climbs.

`@target` registers `f(definition, history) -> number` (as Hypothesis's `target()` scores a
test case): the cost a run spent, the attempts a step took, the depth a queue reached. Every
campaign reports each target's best score and the seed that reached it; the guided strategy
also keeps each run that beat a target's best as a schedule to mutate, so it climbs towards
runs that score high, where the bugs of such a measure live (a budget overrun, a retry storm).
A target only steers and reports: a high score is no failure unless an invariant says so.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

from harness.errors import HarnessError
from harness.sim.history import HistoryRecord
from reference_machine import WorkflowDefinition
from reference_machine.findings import did_you_mean

__all__ = ["TARGETS", "Target", "score", "target", "targets"]

Score = Callable[[WorkflowDefinition, Sequence[HistoryRecord]], float]


class Target(NamedTuple):
    """A registered score: its name, the function, and the module whose import registers
    it."""

    name: str
    function: Score
    module: str = ""


TARGETS: dict[str, Target] = {}
"""Every registered target by name."""


def target(name: str | None = None) -> Callable[[Score], Score]:
    """Registers a score over a run's history that guided fuzzing climbs (higher is more
    interesting); the name defaults to the function's, and registering a taken name fails."""

    def register(function: Score) -> Score:
        label = name or function.__name__
        if label in TARGETS:
            raise HarnessError(f"a target named {label!r} is registered already; give "
                               "@target(name=...) another name")
        module = sys._getframe(1).f_globals.get("__name__", "")
        TARGETS[label] = Target(label, function, module)
        return function

    return register


def targets(names: Iterable[str] | None = None) -> tuple[Target, ...]:
    """Gives the registered targets named (all of them by default), raising `HarnessError`
    for a name that is not registered."""
    if names is None:
        return tuple(TARGETS.values())
    chosen = []
    for name in names:
        found = TARGETS.get(name)
        if found is None:
            known = ", ".join(TARGETS) or "none"
            raise HarnessError(f"no target named {name!r}{did_you_mean(name, list(TARGETS))}; "
                               f"known: {known}")
        chosen.append(found)
    return tuple(chosen)


def score(chosen: Sequence[Target], definition: WorkflowDefinition,
          history: Sequence[HistoryRecord]) -> tuple[tuple[str, float | str], ...]:
    """Gives each target's score of one run: a number, or what went wrong as words (a score
    that raises or is not a finite number steers nothing and ends nothing: the campaign
    reports it)."""
    scores: list[tuple[str, float | str]] = []
    for each in chosen:
        try:
            value: Any = each.function(definition, history)
        except Exception as exc:  # the user's score: reported, not raised
            scores.append((each.name, f"raised {type(exc).__name__}: {exc}"))
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(
                value):
            scores.append((each.name, f"gave {value!r}, not a finite number"))
            continue
        scores.append((each.name, float(value)))
    return tuple(scores)
