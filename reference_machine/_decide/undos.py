"""Planning undos: the compensation command of a completed step, the undo of a step's effect,
the completed steps with an undo in its place, and the undos of calls abandoned regions left
in flight."""

from __future__ import annotations

from reference_machine._decide.shared import FINAL, input_failed
from reference_machine._definition import CompiledStep, WorkflowDefinition
from reference_machine._records import (
    CompletedStep,
    Execution,
    PendingEffect,
    Rejected,
    RunCompensation,
)

__all__ = ["compensate", "in_flight_undos", "undo_of", "with_undo"]


def compensate(step: CompletedStep, attempt: int) -> tuple[PendingEffect, RunCompensation]:
    key = f"{step.key}/undo"
    effect_id = f"{key}#{attempt}"
    return (PendingEffect(effect_id, key, step.state, step.tool, attempt, True),
            RunCompensation(effect_id, key, step.state, step.tool, step.input, attempt, step.key,
                            step.retry_safe))


def undo_of(ex: Execution, step: CompiledStep, key: str) -> CompletedStep | Rejected:
    """Gives the undo of the step's effect under `key`, planned from the context now."""
    compensation = step.compensation
    assert compensation is not None
    try:
        undo_input = compensation.input(ex.context)
    except Exception as exc:  # the undo's input is user expressions: a failure is a reject
        return input_failed(ex.state, "compensation input", exc)
    return CompletedStep(ex.state, key, compensation.tool, undo_input, compensation.attempts_max,
                         compensation.retry_safe)


def with_undo(completed: tuple[CompletedStep, ...], undo: CompletedStep
              ) -> tuple[CompletedStep, ...]:
    """Gives `completed` with `undo` in the place of an earlier one for its key, else last."""
    for index, step in enumerate(completed):
        if step.key == undo.key:
            return (*completed[:index], undo, *completed[index + 1:])
    return (*completed, undo)


def in_flight_undos(definition: WorkflowDefinition, regions: tuple[Execution, ...]
                    ) -> tuple[CompletedStep, ...]:
    """Gives the undo of each abandoned region's call in flight whose step declares one: the
    call may land all the same, so its compensation (safe for an effect that did not happen)
    runs first."""
    undos: list[CompletedStep] = []
    for region in regions:
        effect = region.effect
        if region.status == FINAL or (effect is not None and effect.compensation):
            continue
        if region.regions:
            undos += in_flight_undos(definition, region.regions)
            continue
        if effect is None:
            continue  # an attempt that ended uncertain left its undo with the completed ones
        state, key = effect.state, effect.key
        step = definition.states[state].step
        compensation = step.compensation if step is not None else None
        if compensation is None:
            continue
        try:
            undo_input = compensation.input(region.context)
        except Exception:  # an undo that cannot be planned is skipped, not a crash
            continue
        undos.append(CompletedStep(state, key, compensation.tool, undo_input,
                                   compensation.attempts_max, compensation.retry_safe))
    return tuple(undos)
