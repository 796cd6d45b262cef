"""What the regions of a parallel or map state hold and give their parent: the calls, timers
and approvals they wait on, their completed steps, the context and `done` payload of a join,
and the first `done:` transition whose guard holds."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from reference_machine._decide.shared import FINAL
from reference_machine._decide.undos import with_undo
from reference_machine._definition import CompiledState, CompiledTransition
from reference_machine._records import (
    CompletedStep,
    Event,
    Execution,
    PendingApproval,
    PendingEffect,
    Rejected,
    RejectReason,
    Timer,
)

__all__ = [
    "answered_of",
    "completed_of",
    "first_held",
    "holds",
    "merged",
    "own_timers",
    "pending_approval",
    "pending_effect",
]


def holds(region: Execution, answers: str) -> bool:
    """Tells whether `answers` names a call, timer or approval of `region` (or of its own
    regions)."""
    effect = region.effect
    if effect is not None and effect.effect_id == answers:
        return True
    approval = region.approval
    if approval is not None and approval.request_id == answers:
        return True
    if any(timer.id == answers for timer in region.timers):
        return True
    return any(holds(inner, answers) for inner in region.regions)


def own_timers(ex: Execution) -> tuple[Timer, ...]:
    """Gives the parent's own timers (its deadline, its state's `after:`), not the regions'."""
    theirs = {t.id for r in ex.regions for t in r.timers}
    return tuple(t for t in ex.timers if t.id not in theirs)


def completed_of(ex: Execution, regions: list[Execution]) -> tuple[CompletedStep, ...]:
    """Gives the parent's completed steps with the regions' new ones appended in the order
    they completed (so that undoing goes newest first across regions)."""
    completed = ex.completed
    for region in regions:
        for step in region.completed:
            if step not in completed:  # new, or a better-planned undo of a known key
                completed = with_undo(completed, step)
    return completed


def answered_of(ex: Execution, regions: list[Execution]) -> str:
    for before, after in zip(ex.regions, regions, strict=False):
        if after.answered != before.answered:
            return after.answered
    return ex.answered


def merged(state: CompiledState, ex: Execution, regions: tuple[Execution, ...]
           ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Gives the parent's context with its regions' work merged in (a parallel state: the
    keys each region changed, in region order; a map: one result per item), and the `done`
    event's payload."""
    if state.kind == "parallel":
        context = dict(ex.context)
        for region in regions:  # each region's changes, in region order
            for key, value in region.context.items():
                if key not in ex.context or ex.context[key] != value:
                    context[key] = value
        failed: list[Any] = [r.definition for r in regions
                             if r.status == FINAL and r.outcome != "success"]
        outcomes: dict[str, Any] = {r.definition: r.outcome for r in regions}
    else:
        context = {**ex.context, state.results: [
            dict(r.context) if r.status == FINAL and r.outcome == "success" else None
            for r in regions]}
        failed = [index for index, r in enumerate(regions)
                  if r.status == FINAL and r.outcome != "success"]
        outcomes = {str(index): r.outcome for index, r in enumerate(regions)}
    failing = (len(failed) > state.tolerated_failures) if state.kind == "map" else bool(failed)
    return context, {"failed": failed, "outcomes": outcomes, "failing": failing}


def first_held(transitions: tuple[CompiledTransition, ...], context: Mapping[str, Any],
               event: Event, where: str) -> CompiledTransition | Rejected:
    """Gives the first transition whose guard holds, or the rejection `take` would give."""
    for transition in transitions:
        if transition.guard is None:
            return transition
        try:
            if transition.guard(context, event):
                return transition
        except Exception as exc:  # a user's guard must not crash the machine
            return Rejected(RejectReason.GUARD_ERROR,
                            f"guard {transition.guard_text!r} on {where!r} failed: "
                            f"{type(exc).__name__}: {exc}")
    texts = ", ".join(repr(t.guard_text) for t in transitions)
    return Rejected(RejectReason.GUARD_FALSE,
                    f"no guard held for 'done' in state {where!r} ({texts})")


def pending_approval(execution: Execution, request_id: str) -> PendingApproval | None:
    """Gives the approval request (the execution's, or one of its regions') `request_id`
    names, or None."""
    for ex in _with_regions(execution):
        if ex.approval is not None and ex.approval.request_id == request_id:
            return ex.approval
    return None


def pending_effect(execution: Execution, effect_id: str) -> PendingEffect | None:
    """Gives the effect in flight (the execution's, or one of its regions') `effect_id`
    names, or None."""
    for ex in _with_regions(execution):
        if ex.effect is not None and ex.effect.effect_id == effect_id:
            return ex.effect
    return None


def _with_regions(execution: Execution) -> Iterator[Execution]:
    """Gives the execution, then each of its regions' (depth first)."""
    yield execution
    for region in execution.regions:
        yield from _with_regions(region)
