"""Invariants of durability: `nothing_lost` and `replay_matches` (what was committed survives
crashes, and replays to what was stored), `delivered_once` and `versions_increase` (an event
redelivered is accepted once; versions only move up, and only by an accepted event)."""

from __future__ import annotations

from collections.abc import Iterator

from harness.checks.invariants.analysis import has_commits
from harness.checks.invariants.registry import History, Violation, builtin
from harness.sim.history import Committed, Decided, Observed, Replayed
from reference_machine import WorkflowDefinition

__all__ = [
    "delivered_once",
    "nothing_lost",
    "replay_matches",
    "versions_increase",
]


@builtin("nothing_lost", "what was committed survives crashes: no execution is seen behind its "
                         "last commit")
def nothing_lost(definition: WorkflowDefinition, history: History) -> Iterator[Violation]:
    committed: dict[str, tuple[int, int, str]] = {}  # execution -> (record, version, state)
    seen: dict[str, tuple[int, int]] = {}
    reported: set[str] = set()
    for index, record in enumerate(history):
        if type(record) is Committed and record.decision == "accepted":
            committed[record.execution] = (index, record.version, record.state)
        elif type(record) is Observed:
            eid = record.execution
            last = committed.get(eid)
            before = seen.get(eid)
            seen[eid] = (index, record.version)
            if eid in reported:
                continue
            if last is not None and (record.version < last[1] or (
                    record.version == last[1] and record.state != last[2])):
                reported.add(eid)
                yield Violation("nothing_lost",
                                f"{eid} was seen in {record.state!r} at version "
                                f"{record.version} after committing {last[2]!r} at version "
                                f"{last[1]}: a committed transition was lost", eid,
                                record.step, (last[0], index))
            elif before is not None and record.version < before[1]:
                reported.add(eid)
                yield Violation("nothing_lost",
                                f"{eid} went back from version {before[1]} to "
                                f"{record.version}", eid, record.step, (before[0], index))


@builtin("replay_matches", "replaying an execution's log reproduces its stored state",
         final_only=True)
def replay_matches(definition: WorkflowDefinition, history: History) -> Iterator[Violation]:
    for index, record in enumerate(history):
        if type(record) is Replayed and not record.ok:
            yield Violation("replay_matches", f"replaying {record.execution}'s log did not "
                                              f"reproduce its state: {record.detail}",
                            record.execution, record.step, (index,))


@builtin("delivered_once", "an event delivered twice does what it does once: one id is "
                           "accepted at most once")
def delivered_once(definition: WorkflowDefinition, history: History) -> Iterator[Violation]:
    commits = has_commits(history)
    accepted: dict[tuple[str, str], int] = {}
    for index, record in enumerate(history):
        if commits:
            if type(record) is not Committed or record.decision != "accepted":
                continue
        elif type(record) is not Decided or record.decision.partition(":")[0] != "accepted":
            continue
        key = (record.execution, record.event_id)
        first = accepted.get(key)
        if first is None:
            accepted[key] = index
            continue
        yield Violation("delivered_once",
                        f"{record.execution} accepted event {record.event_id!r} twice (steps "
                        f"{history[first].step} and {record.step}); a repeated event must be "
                        "ignored", record.execution, record.step, (first, index))


@builtin("versions_increase", "each accepted event moves an execution's version up, and nothing "
                              "else moves it")
def versions_increase(definition: WorkflowDefinition, history: History) -> Iterator[Violation]:
    last: dict[str, tuple[int, int]] = {}
    observed: dict[str, tuple[int, int]] = {}
    for index, record in enumerate(history):
        if type(record) is Committed:
            eid = record.execution
            before = last.get(eid, (-1, 0))
            if record.decision == "accepted":
                if record.version <= before[1]:
                    yield Violation("versions_increase",
                                    f"{eid} accepted {record.event_id!r} at version "
                                    f"{record.version}, not above {before[1]}", eid,
                                    record.step, (index,))
                last[eid] = (index, record.version)
            elif record.version != before[1]:
                yield Violation("versions_increase",
                                f"{eid} {record.decision} {record.event_id!r}, yet its version "
                                f"moved from {before[1]} to {record.version}", eid,
                                record.step, (index,))
        elif type(record) is Observed:
            eid = record.execution
            seen = observed.get(eid)
            observed[eid] = (index, record.version)
            if seen is not None and record.version < seen[1]:
                yield Violation("versions_increase",
                                f"{eid} was seen at version {record.version} after version "
                                f"{seen[1]}", eid, record.step, (seen[0], index))
