"""Machines under test made from the reference runtime, each with one classic bug planted.

Each is the reference machine with one thing changed, under the same durability, so that what the
harness catches is that bug and nothing else. `PLANTED` maps a short name to the machine and the
invariant a campaign must report; `WORKFLOW` is the small workflow they are fuzzed on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from harness import ReferenceMachine
from reference_machine import (
    APPROVAL_DENIED,
    APPROVAL_GRANTED,
    TIMER_FIRED,
    Accepted,
    CancelTimer,
    Commit,
    Decision,
    Event,
    Execution,
    MemoryStore,
    RunCompensation,
    RunEffect,
    Runtime,
    Status,
    Timer,
    TimerPurpose,
    WorkflowDefinition,
    decide,
    load_definition,
)
from reference_machine._decide import compensate
from reference_machine.secrecy import reveal

WORKFLOW = load_definition(Path(__file__).resolve().parents[1] / "data" / "workflows"
                           / "planted.yaml")


# -- 1. an idempotency key that changes per attempt ----------------------------------------------


class _KeyPerAttemptRuntime(Runtime):
    def _call(self, execution_id: str, command: RunEffect | RunCompensation,
              resent: bool = False) -> Event:
        # the bug: the attempt's id (key#attempt) goes to the tool as the idempotency key
        return super()._call(execution_id, command._replace(key=command.effect_id), resent)


class KeyPerAttempt(ReferenceMachine):
    """Sends each attempt under its own key: a timeout that hid a success charges twice."""

    runtime_class = _KeyPerAttemptRuntime


# -- 2. no duplicate-event check -------------------------------------------------------------


class _ForgetfulStore(MemoryStore):
    def commit(self, commit: Commit) -> int:
        run = self._run(commit.execution_id)
        run.consumed.discard(commit.event.id)  # the bug: consumed ids are not kept
        return super().commit(commit)


class _NoDedupRuntime(Runtime):
    @staticmethod
    def decide(definition: WorkflowDefinition, execution: Execution, event: Event,
               now: int, **kwargs: Any) -> Decision:
        return decide(definition, execution._replace(last_event_id=""), event, now, **kwargs)


class NoDuplicateCheck(ReferenceMachine):
    """Never checks whether an event was seen before: a redelivery is applied again."""

    runtime_class = _NoDedupRuntime

    def __init__(self, definition: WorkflowDefinition, tools: Mapping[str, Any],
                 probe: Any = None, **kwargs: Any) -> None:
        super().__init__(definition, tools, probe, store=_ForgetfulStore(), **kwargs)


# -- 3. a final state that accepts events ----------------------------------------------------


class _FinalAcceptsRuntime(Runtime):
    @staticmethod
    def decide(definition: WorkflowDefinition, execution: Execution, event: Event,
               now: int, **kwargs: Any) -> Decision:
        if execution.status == Status.FINAL:
            # the bug: no terminal check; the event goes to whichever state handles it
            for name, state in definition.states.items():
                if not state.final and event.type in state.on:
                    status = Status.WAITING if state.kind == "wait" else Status.RUNNING
                    return decide(definition, execution._replace(state=name, status=status),
                                  event, now, **kwargs)
        return decide(definition, execution, event, now, **kwargs)


class FinalAcceptsEvents(ReferenceMachine):
    """Takes events after the run ended: a late event resurrects a finished run."""

    runtime_class = _FinalAcceptsRuntime


# -- 4. dispatch before commit ---------------------------------------------------------------


class _DispatchFirstRuntime(Runtime):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._early: dict[str, Any] = {}

    def _commit_one(self, execution_id: str, event: Event, now: int) -> Decision:
        stored = self._load(execution_id)
        decision = self.decide(self._definition(stored.execution), stored.execution, event, now)
        if isinstance(decision, Accepted):
            # the bug: the tools are called before the decision is committed
            for command in decision.commands:
                if isinstance(command, RunEffect | RunCompensation):
                    tool = self.tools[command.tool]
                    self._early[command.effect_id] = tool(reveal(command.input, self.vault),
                                                          command.key)
        return super()._commit_one(execution_id, event, now)

    def _call(self, execution_id: str, command: RunEffect | RunCompensation,
              resent: bool = False) -> Event:
        outcome = self._early.pop(command.effect_id, None)
        if outcome is None:
            return super()._call(execution_id, command, resent)
        self._crash("after_apply_before_record")
        return self._record(execution_id, command, outcome, resent)


class DispatchBeforeCommit(ReferenceMachine):
    """Calls a step's tool before committing the decision that commands it."""

    runtime_class = _DispatchFirstRuntime
    defer_effects = False


# -- 5. compensation in forward order --------------------------------------------------------


class _ForwardUndoRuntime(Runtime):
    @staticmethod
    def decide(definition: WorkflowDefinition, execution: Execution, event: Event,
               now: int, **kwargs: Any) -> Decision:
        decision = decide(definition, execution, event, now, **kwargs)
        after = getattr(decision, "execution", None)
        if (isinstance(decision, Accepted) and after is not None
                and after.status == Status.COMPENSATING
                and execution.status != Status.COMPENSATING):
            # the bug: completed steps are undone oldest first
            queue = tuple(execution.completed)
            effect, command = compensate(queue[0], 1)
            commands = tuple(c for c in decision.commands if not isinstance(c, RunCompensation))
            return decision._replace(execution=after._replace(compensating=queue, effect=effect),
                                     commands=(*commands, command))
        return decision


class ForwardCompensation(ReferenceMachine):
    """Undoes completed steps in the order they were done, not newest first."""

    runtime_class = _ForwardUndoRuntime


# -- 6. an approval accepted from an agent ---------------------------------------------------


class _AgentApprovesRuntime(Runtime):
    @staticmethod
    def decide(definition: WorkflowDefinition, execution: Execution, event: Event,
               now: int, **kwargs: Any) -> Decision:
        if event.type in (APPROVAL_GRANTED, APPROVAL_DENIED) and event.source in ("agent",
                                                                                  "tool"):
            event = event._replace(source="human")  # the bug: the source is not checked
        return decide(definition, execution, event, now, **kwargs)


class ApprovalFromAgent(ReferenceMachine):
    """Takes an approval from an agent or a tool as if a person gave it."""

    runtime_class = _AgentApprovesRuntime


# -- 7. a timer that fires after its wait ended, and is applied ------------------------------

_STALE = {"after": TimerPurpose.WAIT_TIMEOUT, "expiry": TimerPurpose.APPROVAL_EXPIRY}


class _StaleTimerRuntime(Runtime):
    @staticmethod
    def decide(definition: WorkflowDefinition, execution: Execution, event: Event,
               now: int, **kwargs: Any) -> Decision:
        purpose = _STALE.get(event.answers.rsplit("/", 1)[-1]) if event.answers else None
        if (event.type == TIMER_FIRED and purpose is not None and execution.status
                != Status.FINAL and all(t.id != event.answers for t in execution.timers)):
            # the bug: the wait that set this timer is over, but its timeout is applied
            # as if the run were still in that wait
            state = event.answers.split("/")[1]
            execution = execution._replace(
                state=state, status=Status.WAITING,
                timers=(*execution.timers, Timer(event.answers, purpose, now)))
        decision = decide(definition, execution, event, now, **kwargs)
        if isinstance(decision, Accepted):
            # and timers are never cancelled when their wait ends
            decision = decision._replace(commands=tuple(
                c for c in decision.commands if not isinstance(c, CancelTimer)))
        return decision


class LateTimerApplied(ReferenceMachine):
    """Keeps a wait's timers when the wait ends, and applies one that fires later."""

    runtime_class = _StaleTimerRuntime


# -- 8. retry without bound ------------------------------------------------------------------


def _unbounded(definition: WorkflowDefinition) -> WorkflowDefinition:
    """Gives the definition as a machine that never counts its attempts runs it."""
    states = {name: replace(state, step=replace(state.step, attempts_max=10**6))
              if state.step is not None else state for name, state in definition.states.items()}
    return replace(definition, states=MappingProxyType(states))


class UnboundedRetry(ReferenceMachine):
    """Retries a failing step for ever: its retry loop has no bound."""

    def __init__(self, definition: WorkflowDefinition, tools: Mapping[str, Any],
                 probe: Any = None, **kwargs: Any) -> None:
        super().__init__(_unbounded(definition), tools, probe, **kwargs)


#: Each planted bug: its machine, and the invariant that must catch it.
PLANTED: dict[str, tuple[type[ReferenceMachine], str]] = {
    "key_per_attempt": (KeyPerAttempt, "no_duplicate_effect"),
    "no_duplicate_check": (NoDuplicateCheck, "delivered_once"),
    "final_accepts_events": (FinalAcceptsEvents, "terminal_stays_terminal"),
    "dispatch_before_commit": (DispatchBeforeCommit, "persist_before_effect"),
    "forward_compensation": (ForwardCompensation, "compensation_order"),
    "approval_from_agent": (ApprovalFromAgent, "approval_genuine"),
    "late_timer_applied": (LateTimerApplied, "legal_transitions"),
    "unbounded_retry": (UnboundedRetry, "retries_within_bounds"),
}
