"""The shared calendar's world, and the invariant a user writes for it.

The simulated tool world answers each tool from its declared output schema; it knows no slots.
A calendar has rules: a slot held by one agent cannot be held by another, only the holder can
commit it, and a release frees it. `Calendar` wraps the simulated tools with those rules (every
call still goes through the simulated tool, so its faults, latency and ledger apply), and
`SharedCalendar` is the reference machine running on them: a machine under test built the way
a user wraps their own, naming its definition so `fsmharness fuzz
scenarios.calendar_world:SharedCalendar` runs it. `NaiveSharedCalendar` runs the naive
variant, which books without holding first.

`no_slot_committed_twice` is registered on import with `@invariant`, as a user would: over the
ledger (what took effect at the world), no slot is booked by two executions.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from harness import Applied, Probe, ReferenceMachine, Violation, invariant
from reference_machine import Failure, Tool, ToolOutcome, WorkflowDefinition, load_definition

__all__ = ["Calendar", "NaiveSharedCalendar", "SharedCalendar", "no_slot_committed_twice"]

_HERE = Path(__file__).parent
_BOOKINGS = frozenset({"calendar.commit", "calendar.create_event"})  # what books a slot
_TAKEN = "permanent"  # a refused hold is no transient error: retrying will not help


class Calendar:
    """One team calendar shared by every execution of a run: who holds and who booked each
    slot. A call is checked against the rules first; an allowed one goes to the simulated tool.
    A call that may have applied (it succeeded, or timed out) changes the calendar."""

    def __init__(self, tools: Mapping[str, Tool]) -> None:
        self.held: dict[str, str] = {}  # slot -> execution
        self.booked: dict[str, str] = {}
        self.tools = dict(tools)
        for name, rule in (("calendar.hold", self._hold), ("calendar.commit", self._commit),
                           ("calendar.release", self._release)):
            if name in tools:
                self.tools[name] = self._ruled(tools[name], rule)

    def _ruled(self, tool: Tool, rule: Any) -> Tool:
        def call(input: Mapping[str, Any], idempotency_key: str) -> ToolOutcome:
            execution = idempotency_key.split("/", 1)[0]
            slot = str(input.get("slot"))
            refused = rule(slot, execution, before=True)
            if refused:
                return Failure(_TAKEN, refused)
            outcome = tool(input, idempotency_key)
            if not isinstance(outcome, Failure) or outcome.category == "timeout":
                rule(slot, execution, before=False)  # it may have taken effect
            return outcome
        return call

    def _hold(self, slot: str, execution: str, *, before: bool) -> str:
        owner = self.booked.get(slot) or self.held.get(slot)
        if before:
            return f"slot {slot} is taken" if owner not in (None, execution) else ""
        self.held[slot] = execution
        return ""

    def _commit(self, slot: str, execution: str, *, before: bool) -> str:
        if before:
            if self.booked.get(slot, execution) != execution:
                return f"slot {slot} is booked by another"
            return "" if self.held.get(slot) == execution or (
                self.booked.get(slot) == execution) else f"slot {slot} is not held by you"
        self.booked[slot] = execution
        return ""

    def _release(self, slot: str, execution: str, *, before: bool) -> str:
        if not before and self.held.get(slot) == execution and slot not in self.booked:
            del self.held[slot]
        return ""


class SharedCalendar(ReferenceMachine):
    """The reference machine on the shared calendar's rules."""

    definition = load_definition(_HERE / "calendar" / "shared_calendar.yaml")

    def __init__(self, definition: WorkflowDefinition, tools: Mapping[str, Tool],
                 probe: Probe | None = None, **kwargs: Any) -> None:
        self.calendar = Calendar(tools)  # the world's: a second worker shares it
        super().__init__(definition, self.calendar.tools, probe, **kwargs)


class NaiveSharedCalendar(SharedCalendar):
    """The naive variant: it books the slot it found, with an API that accepts overlapping
    events (no hold, so the calendar's rules never come into it)."""

    definition = load_definition(_HERE / "naive" / "calendar_book_without_hold.yaml")


@invariant(name="no_slot_committed_twice")
def no_slot_committed_twice(definition: WorkflowDefinition, history: Any
                            ) -> Iterator[Violation]:
    """No calendar slot is booked by two executions."""
    booked: dict[str, tuple[str, int]] = {}  # slot -> (execution, position in the history)
    for index, record in enumerate(history):
        if type(record) is Applied and record.tool in _BOOKINGS:
            slot = json.loads(record.input).get("slot")
            first, at = booked.setdefault(slot, (record.execution, index))
            if first != record.execution:
                yield Violation("no_slot_committed_twice",
                                f"slot {slot} booked by {first} and by {record.execution}",
                                record.execution, record.step, (at, index))
