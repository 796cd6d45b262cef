"""Invariants of compensation: `compensation_order`, `compensation_complete`."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from harness.checks.invariants.analysis import (
    COMPENSATED,
    DONE,
    Chart,
    chart_of,
    has_commits,
    saga_of,
)
from harness.checks.invariants.registry import History, Violation, builtin
from harness.sim.history import Committed, Dispatched, Finished, Observed
from reference_machine import WorkflowDefinition

__all__ = [
    "compensation_complete",
    "compensation_order",
]


@builtin("compensation_order", "completed steps are undone newest first (a step is newer than "
                               "another when it began after that one was answered: steps of "
                               "regions that ran side by side may be undone in either order)")
def compensation_order(definition: WorkflowDefinition, history: History
                       ) -> Iterator[Violation]:
    saga = saga_of(definition, history)
    for eid, undos in saga.pairs.items():
        for position, later in enumerate(undos):
            for earlier in undos[:position]:
                # an older effect was undone while a newer one, applied before that undo,
                # still waited for its own
                if later.forward < earlier.position and saga.newer(
                        history, later.forward, earlier.forward):
                    old, new = history[earlier.forward], history[later.forward]
                    yield Violation(
                        "compensation_order",
                        f"{eid} undid {old.tool} (applied at step {old.step}) before "  # type: ignore[union-attr]
                        f"{new.tool} (applied later, at step {new.step}); compensations "  # type: ignore[union-attr]
                        "run newest first", eid, history[later.position].step,
                        (earlier.forward, later.forward, earlier.position, later.position))
                    break


@builtin("compensation_complete", "once compensation begins, every compensable effect applied "
                                  "before it is undone by the end, or a human is asked (a "
                                  "parallel or map state's failure undoes its own regions' "
                                  "effects)", final_only=True)
def compensation_complete(definition: WorkflowDefinition, history: History
                          ) -> Iterator[Violation]:
    saga = saga_of(definition, history)
    if not saga.undo_tools:
        return
    pairs, forward = saga.pairs, saga.forward
    chart = chart_of(definition)
    begun: dict[str, list[tuple[int, str]]] = defaultdict(list)  # (first undo sent, scope)
    undoing: dict[str, str | None] = {}  # per execution, the scope of the undoing under way
    waiting: dict[str, str] = {}  # an undoing begun whose first undo was not sent yet
    humans: set[str] = set()
    finished: dict[str, int] = {}
    commits = has_commits(history)
    for index, record in enumerate(history):
        if type(record) is Committed and record.decision == "accepted":
            eid = record.execution
            if record.forced in (COMPENSATED, "compensation_failed"):
                undoing.pop(eid, None)
            elif record.effects and eid not in undoing and any(
                    e.compensation for e in record.effects):
                scope = _undo_scope(chart, record)
                undoing[eid] = waiting[eid] = scope
        if type(record) is Dispatched and record.tool in saga.undo_tools:
            owner = saga.owners.get(record.key)
            if owner is None or owner.compensation:
                eid = saga.execution_of(record)
                if not commits:
                    if not begun[eid]:
                        begun[eid].append((index, ""))
                elif eid in waiting:
                    begun[eid].append((index, waiting.pop(eid)))
        elif isinstance(record, Committed | Observed) and definition.compensation_failed and (
                getattr(record, "state", "") == definition.compensation_failed):
            humans.add(record.execution)
        elif type(record) is Finished and record.status == "final":
            finished[record.execution] = index
    for eid, episodes in begun.items():
        if eid not in finished or eid in humans:
            continue
        undone = {pair.forward for pair in pairs.get(eid, ())}
        for start, scope in episodes:
            left = [i for i in forward.get(eid, ()) if i < start and i not in undone
                    and history[i].key.startswith(scope)]  # type: ignore[union-attr]
            if not left:
                continue
            names = ", ".join(f"{history[i].tool} (step {history[i].step})"  # type: ignore[union-attr]
                              for i in left)
            end = history[finished[eid]]
            what = f" the regions of {scope.split('/')[-3]!r}" if scope else ""
            human = definition.compensation_failed or "(none declared)"
            yield Violation("compensation_complete",
                            f"{eid} began compensating{what} at step {history[start].step} and "
                            f"ended in {end.state!r} with {names} not undone, and no human was "  # type: ignore[union-attr]
                            f"asked (state {human!r})",
                            eid, end.step, (start, *left, finished[eid]))
            break


def _undo_scope(chart: Chart, record: Committed) -> str:
    """Gives what the undoing a commit began covers: a parallel or map state's failure (its
    join) undoes the effects of that visit's regions (keys `{execution}/{state}/{visit}/`);
    any other undoing, every effect the run applied ("")."""
    source = record.from_state
    if record.moved != DONE or source not in chart.scoped:
        return ""
    base = f"{record.execution}/{source}/"
    for effect in record.effects:
        if effect.compensation and effect.key.startswith(base):
            visit = effect.key[len(base):].split("/", 1)[0]
            if visit.isdigit():
                return f"{base}{visit}/"
    return ""
