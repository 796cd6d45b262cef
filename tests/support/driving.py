"""Driving executions through `decide` in tests: a run with its virtual clock and event ids."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reference_machine import (
    APPROVAL_GRANTED,
    COMPENSATION_FAILED,
    COMPENSATION_SUCCEEDED,
    STEP_FAILED,
    STEP_SUCCEEDED,
    TIMER_FIRED,
    Accepted,
    Decision,
    Event,
    Timer,
    TimerPurpose,
    WorkflowDefinition,
    compile_definition,
    decide,
    load_spec,
    new_execution,
    start_event,
)

WORKFLOWS = Path(__file__).resolve().parents[1] / "data" / "workflows"


class Run:
    """An execution driven through `decide`, with its virtual clock and event counter."""

    def __init__(self, definition: WorkflowDefinition, execution_id: str = "x1",
                 context: Mapping[str, Any] | None = None) -> None:
        self.definition = definition
        self.ex = new_execution(definition, execution_id, context=context)
        self.now = 0
        self.count = 0

    def next_id(self) -> str:
        """Gives a fresh event id."""
        self.count += 1
        return f"{self.ex.id}-e{self.count}"

    def decide(self, event: Event, *, at: int | None = None,
               entropy: float | None = None) -> Decision:
        """Gives the decision for `event` (at `at`, when given) without applying it."""
        if at is not None:
            self.now = at
        return decide(self.definition, self.ex, event, self.now, entropy=entropy)

    def apply(self, event: Event, *, at: int | None = None,
              entropy: float | None = None) -> Accepted:
        """Applies `event`, which must be accepted, and gives the decision."""
        decision = self.decide(event, at=at, entropy=entropy)
        assert isinstance(decision, Accepted), decision
        self.ex = decision.execution
        return decision

    def start(self) -> Accepted:
        """Starts the run."""
        return self.apply(start_event(self.ex.id))

    def user(self, kind: str, payload: Any = None, source: Any = "human") -> Event:
        """Gives a user event answering nothing."""
        return Event(self.next_id(), kind, source, {} if payload is None else payload)

    def result(self, payload: Any = None, *, ok: bool = True, source: Any = "tool",
               answers: str | None = None, kind: Any = None) -> Event:
        """Gives a step result answering the pending effect (or `answers`)."""
        if answers is None:
            assert self.ex.effect is not None, "no effect pending"
            answers = self.ex.effect.effect_id
        if kind is None:
            kind = STEP_SUCCEEDED if ok else STEP_FAILED
        return Event(self.next_id(), kind, source, {} if payload is None else payload, answers)

    def failure(self, category: str, **kwargs: Any) -> Event:
        """Gives a step failure of `category`."""
        return self.result({"category": category}, ok=False, **kwargs)

    def compensation(self, category: str | None = None) -> Event:
        """Gives the pending compensation's result: success, or failure of `category`."""
        assert self.ex.effect is not None and self.ex.effect.compensation
        if category is None:
            return Event(self.next_id(), COMPENSATION_SUCCEEDED, "tool", {},
                         self.ex.effect.effect_id)
        return Event(self.next_id(), COMPENSATION_FAILED, "tool", {"category": category},
                     self.ex.effect.effect_id)

    def timer(self, purpose: TimerPurpose) -> Timer:
        """Gives the one pending timer of `purpose`."""
        (timer,) = [t for t in self.ex.timers if t.purpose == purpose]
        return timer

    def fired(self, purpose: TimerPurpose, source: str = "timer") -> tuple[Event, int]:
        """Gives the firing of the timer of `purpose` and the time it fires at."""
        timer = self.timer(purpose)
        event = Event(self.next_id(), TIMER_FIRED, source, {}, timer.id)
        return event, max(self.now, timer.fire_at)

    def fire(self, purpose: TimerPurpose, **kwargs: Any) -> Accepted:
        """Fires the timer of `purpose`, moving the clock to it."""
        event, at = self.fired(purpose)
        return self.apply(event, at=at, **kwargs)

    def approval(self, kind: str = APPROVAL_GRANTED, *, role: str = "supervisor",
                 source: str = "human", action: str | None = None,
                 answers: str | None = None) -> Event:
        """Gives an approval decision for the pending request (or the ids given)."""
        request = self.ex.approval
        assert request is not None or (action is not None and answers is not None)
        payload = {"role": role,
                   "action_hash": request.action_hash if action is None else action}
        return Event(self.next_id(), kind, source, payload,
                     request.request_id if answers is None else answers)


def load_variant(name: str, **budgets: Any) -> WorkflowDefinition:
    """Gives the workflow `tests/data/workflows/<name>.yaml`, with its budgets replaced."""
    spec, _, _ = load_spec(WORKFLOWS / f"{name}.yaml")
    merged = {"on_exceeded": spec.budgets.on_exceeded, "on_cycle": spec.budgets.on_cycle,
              **budgets}
    spec = spec.model_copy(update={"budgets": type(spec.budgets)(**merged)})
    return compile_definition(spec)
