"""Invariant checkers: pure functions over (definition, history) that give violations.

Each checker reads the typed records of one run, never text, and trusts the ground truth over the
machine's word: side effects come from the world's ledger (`Applied`), where an execution came
from is the state of its previous commit as the store wrote it (`Committed.from_state`), and
guards and approval hashes are evaluated again here, with the definition, on what was recorded.

Some checks need what only a machine that offers `watch()` records (its commits, with contexts
and commanded effects); on another machine's history they check what they can from deliveries,
observations and the ledger, or nothing. `final_only` checkers read the end of a run (what could
still move each execution, whether replaying the log reproduced it); the others hold of every
prefix of a history, so they can run after each step.

Users add their own with `@invariant`: over the whole history, or per step.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

from harness.errors import HarnessError
from harness.sim.history import (
    Applied,
    Committed,
    Decided,
    Delivered,
    Dispatched,
    Finished,
    HistoryRecord,
    MachineFailed,
    Observed,
    Replayed,
)
from reference_machine import (
    APPROVAL_DENIED,
    APPROVAL_GRANTED,
    STARTED,
    TIMER_FIRED,
    CompiledTransition,
    Event,
    WorkflowDefinition,
)
from reference_machine._decide import _action_hash
from reference_machine._findings import did_you_mean

__all__ = [
    "INVARIANTS",
    "Invariant",
    "StepView",
    "Violation",
    "check",
    "invariant",
    "invariants",
]

History = Sequence[HistoryRecord]
T = TypeVar("T")
_BUDGET_REASONS = frozenset({"transitions_max", "visits_max", "cost_max", "deadline", "cycle"})
_APPROVALS = frozenset({APPROVAL_GRANTED, APPROVAL_DENIED})


@dataclass(frozen=True, slots=True)
class Violation:
    """A broken invariant: the rule, one sentence on what happened, the execution and step it
    happened in, and the positions in the history of the records involved."""

    rule: str
    message: str
    execution: str = ""
    step: int = 0
    records: tuple[int, ...] = ()

    def __str__(self) -> str:
        where = f" ({self.execution}, step {self.step})" if self.execution else (
            f" (step {self.step})")
        return f"{self.rule}{where}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        """Gives the violation as plain JSON data."""
        return {"rule": self.rule, "message": self.message, "execution": self.execution,
                "step": self.step, "records": list(self.records)}


class StepView(NamedTuple):
    """What a per-step invariant sees after each step: the step's records, each execution's
    latest observation, and every effect applied so far (the ledger's entries)."""

    step: int
    at: int
    records: tuple[HistoryRecord, ...]
    observed: Mapping[str, Observed]
    applied: tuple[Applied, ...]


CheckResult = Iterable[Violation | str]


@dataclass(frozen=True, slots=True)
class Invariant:
    """A registered invariant: `check(definition, history)` gives violations (or sentences,
    made into violations of this rule). `final_only` ones read the end of a run."""

    name: str
    check: Callable[[WorkflowDefinition, History], CheckResult]
    description: str = ""
    final_only: bool = False
    builtin: bool = False
    module: str = ""  # where a user's invariant is defined: what a replay imports to find it

    def run(self, definition: WorkflowDefinition, history: History) -> list[Violation]:
        """Gives this invariant's violations of `history`; a sentence it yields is placed at
        the first step where the invariant breaks (see `_placed`)."""
        found: list[Violation] = []
        sentences = self._collect(definition, history, found)
        if sentences:
            found += self._placed(definition, history, sentences)
        return found

    def _collect(self, definition: WorkflowDefinition, history: History,
                 found: list[Violation]) -> list[str]:
        """Adds the violations the check yields over `history` to `found`; gives its
        sentences."""
        sentences = []
        for item in self.check(definition, history):
            if isinstance(item, Violation):
                found.append(item)
            elif isinstance(item, str):
                sentences.append(item)
            else:
                msg = (f"invariant {self.name!r} gave {type(item).__name__}; an invariant "
                       "yields Violation objects or sentences (str)")
                raise HarnessError(msg)
        return sentences

    def _breaks_prefix(self, definition: WorkflowDefinition, prefix: History) -> bool:
        """Tells whether the invariant yields a sentence over a prefix of a run; one that
        cannot read a prefix (it raised: it expects the end of a run) does not break there."""
        try:
            return bool(self._collect(definition, prefix, []))
        except Exception:
            return False

    def _placed(self, definition: WorkflowDefinition, history: History,
                sentences: list[str]) -> list[Violation]:
        """Gives sentences as violations at the step where the invariant breaks: the end of
        the shortest prefix of whole steps over which it yields one (found by bisection), so
        the failure shrinks and replays to that step; a final-only invariant, which reads the
        end of a run, breaks at its last step."""
        if not history:
            return [Violation(self.name, sentence) for sentence in sentences]
        ends = [index + 1 for index in range(len(history))
                if index + 1 == len(history) or history[index + 1].step != history[index].step]
        low, high = (len(ends) - 1, len(ends) - 1) if self.final_only else (0, len(ends) - 1)
        while low < high:  # the whole history breaks it: find the first prefix that does
            middle = (low + high) // 2
            if self._breaks_prefix(definition, history[:ends[middle]]):
                high = middle
            else:
                low = middle + 1
        step = history[ends[low] - 1].step
        return [Violation(self.name, sentence, step=step) for sentence in sentences]


INVARIANTS: dict[str, Invariant] = {}
"""Every registered invariant by name: the built-in ones, then the users'."""


def invariant(name: str | None = None, *, per_step: bool = False, final_only: bool = False,
              description: str = "") -> Callable[[Callable[..., CheckResult]],
                                                 Callable[..., CheckResult]]:
    """Registers a user invariant, checked with the built-in ones on every run.

    Over a history: `f(definition, history)` yields `Violation`s or sentences. Per step
    (`per_step=True`): `f(definition, view)` is called after each step with a `StepView`.
    The name defaults to the function's; registering a taken name fails."""

    def register(function: Callable[..., CheckResult]) -> Callable[..., CheckResult]:
        rule = name or function.__name__
        if rule in INVARIANTS:
            msg = (f"an invariant named {rule!r} is registered already; give "
                   "@invariant(name=...) another name")
            raise HarnessError(msg)
        check = _per_step(rule, function) if per_step else function
        # the module whose import registers it (where `@invariant` or the call stands, which
        # may not be where the function is defined): what a replay imports to find it
        module = sys._getframe(1).f_globals.get("__name__", "")
        INVARIANTS[rule] = Invariant(rule, check, description or (function.__doc__ or "")
                                     .strip().split("\n")[0], final_only, module=module)
        return function

    if per_step and final_only:
        raise HarnessError("an invariant is per step or final only, not both")
    return register


def invariants(names: Iterable[str] | None = None) -> tuple[Invariant, ...]:
    """Gives the registered invariants named (all of them by default), raising
    `HarnessError` for a name that is not registered."""
    if names is None:
        return tuple(INVARIANTS.values())
    chosen = []
    for name in names:
        found = INVARIANTS.get(name)
        if found is None:
            msg = (f"no invariant named {name!r}{did_you_mean(name, list(INVARIANTS))}; known: "
                   f"{', '.join(INVARIANTS)}")
            raise HarnessError(msg)
        chosen.append(found)
    return tuple(chosen)


def check(definition: WorkflowDefinition, history: History, *,
          only: Iterable[str] | Sequence[Invariant] | None = None,
          complete: bool = True) -> list[Violation]:
    """Gives every violation of the invariants (all registered ones unless `only` names
    some) in `history`, by rule then position. With `complete=False` the history is a prefix
    of a run, and the checkers that read its end are left out."""
    if only is None:
        chosen: Sequence[Invariant] = tuple(INVARIANTS.values())
    else:
        given = list(only)
        rules = [rule for rule in given if isinstance(rule, Invariant)]
        chosen = rules if len(rules) == len(given) else invariants(str(name) for name in given)
    found: list[Violation] = []
    for rule in chosen:
        if rule.final_only and not complete:
            continue
        found += rule.run(definition, history)
    return found


def _builtin(name: str, description: str, *, final_only: bool = False
             ) -> Callable[[Callable[[WorkflowDefinition, History], Iterator[Violation]]],
                           Callable[[WorkflowDefinition, History], Iterator[Violation]]]:
    def register(function: Callable[[WorkflowDefinition, History], Iterator[Violation]]
                 ) -> Callable[[WorkflowDefinition, History], Iterator[Violation]]:
        INVARIANTS[name] = Invariant(name, function, description, final_only, builtin=True)
        return function
    return register


def _per_step(rule: str, function: Callable[..., CheckResult]
              ) -> Callable[[WorkflowDefinition, History], Iterator[Violation]]:
    """Runs a per-step invariant after each step of a history."""

    def over_history(definition: WorkflowDefinition, history: History) -> Iterator[Violation]:
        observed: dict[str, Observed] = {}
        applied: list[Applied] = []
        start = 0
        for end in range(len(history) + 1):
            if end < len(history) and history[end].step == history[start].step:
                record = history[end]
                if type(record) is Observed:
                    observed[record.execution] = record
                elif type(record) is Applied:
                    applied.append(record)
                continue
            if start == end:
                break
            first = history[start]
            view = StepView(first.step, history[end - 1].at, tuple(history[start:end]),
                            dict(observed), tuple(applied))
            for item in function(definition, view):
                yield (item if isinstance(item, Violation)
                       else Violation(rule, str(item), step=first.step,
                                      records=tuple(range(start, end))))
            start = end
            if end < len(history):
                record = history[end]
                if type(record) is Observed:
                    observed[record.execution] = record
                elif type(record) is Applied:
                    applied.append(record)

    return over_history


def per_definition(function: Callable[[WorkflowDefinition], T]
                   ) -> Callable[[WorkflowDefinition], T]:
    """Caches what a function derives from a definition (definitions are immutable but not
    hashable: they are told apart by identity), for the last few definitions seen."""
    cached: dict[int, tuple[WorkflowDefinition, T]] = {}

    def derived(definition: WorkflowDefinition) -> T:
        entry = cached.get(id(definition))
        if entry is not None and entry[0] is definition:
            return entry[1]
        if len(cached) >= 64:
            cached.pop(next(iter(cached)))
        value = function(definition)
        cached[id(definition)] = (definition, value)
        return value

    derived.__doc__ = function.__doc__
    return derived


def per_history(function: Callable[[WorkflowDefinition, History], T]
                ) -> Callable[[WorkflowDefinition, History], T]:
    """Keeps what a function derives from the last (definition, history) it saw, so that the
    checkers of one `check` that read the same derived pass share it. A history that grew
    since (a run checked after each step) is derived again."""
    last: list[Any] = []

    def derived(definition: WorkflowDefinition, history: History) -> T:
        if last and last[0] is definition and last[1] is history and last[2] == len(history):
            return last[3]
        value = function(definition, history)
        last[:] = [definition, history, len(history), value]
        return value

    derived.__doc__ = function.__doc__
    return derived


def _short(text: str, size: int = 80) -> str:
    return text if len(text) <= size else f"{text[:size - 3]}..."


def _has_commits(history: History) -> bool:
    return any(type(record) is Committed for record in history)


class _Owner(NamedTuple):
    execution: str
    state: str
    compensation: bool


@per_history
def _owners_of(definition: WorkflowDefinition, history: History) -> dict[str, _Owner]:
    return _owners(history)


def _owners(history: History) -> dict[str, _Owner]:
    """Gives, for each key (and id) a commit commanded a call under, whose call it was: the
    execution, the state that commanded it, and whether it was a compensation. For effects
    whose key does not name their execution, and tools that several states use."""
    owners: dict[str, _Owner] = {}
    for record in history:
        if type(record) is Committed and record.effects:
            for effect in record.effects:
                owner = _Owner(record.execution, record.state, effect.compensation)
                owners.setdefault(effect.key, owner)
                owners.setdefault(effect.id, owner)
    return owners


# -- side effects --------------------------------------------------------------------------


@_builtin("no_duplicate_effect", "no logical action takes effect twice: the same tool, "
                                 "execution and input applied once (tools marked repeatable "
                                 "excepted; an effect its compensation undid may be done again)")
def no_duplicate_effect(definition: WorkflowDefinition, history: History
                        ) -> Iterator[Violation]:
    repeatable = {name for name, tool in definition.tools.items() if tool.repeatable}
    first: dict[tuple[str, str, str], int] = {}
    undone_at: dict[int, int] | None = None  # effect -> the undo that took it back
    for index, record in enumerate(history):
        if type(record) is not Applied or record.tool in repeatable:
            continue
        # an effect whose execution is unknown is one logical action per key
        action = ((record.execution, record.tool, record.input) if record.execution
                  else ("", record.tool, record.key))
        seen = first.get(action)
        if seen is None:
            first[action] = index
            continue
        if undone_at is None:  # built only when a repeat is seen: the common case pays nothing
            undone_at = {pair.forward: pair.position for pairs in
                         _undos(definition, history).pairs.values() for pair in pairs}
        if undone_at.get(seen, index) < index:  # undone before: doing it again is a new action
            first[action] = index
            continue
        earlier = history[seen]
        assert type(earlier) is Applied
        yield Violation(
            "no_duplicate_effect",
            f"{record.tool} took effect twice with input {_short(record.input)}: ledger "
            f"#{earlier.seq} (key {earlier.key!r}, step {earlier.step}) and #{record.seq} "
            f"(key {record.key!r}); one logical action, two side effects",
            record.execution, record.step, (seen, index))


@_builtin("persist_before_effect", "a tool is called only for a command already committed (the "
                                   "machines that tell their commits)")
def persist_before_effect(definition: WorkflowDefinition, history: History
                          ) -> Iterator[Violation]:
    if not _has_commits(history):
        return
    commanded: dict[str, set[str]] = defaultdict(set)  # execution -> committed ids and keys
    for index, record in enumerate(history):
        if type(record) is Committed:
            if record.effects:
                known = commanded[record.execution]
                for effect in record.effects:
                    known.add(effect.key)
                    known.add(effect.id)
        elif type(record) is Dispatched and record.execution and (
                record.key not in commanded[record.execution]):
            yield Violation("persist_before_effect",
                            f"{record.execution} called {record.tool} (key {record.key!r}) "
                            "before committing the decision that commands it: a crash there "
                            "leaves an effect no record knows of", record.execution,
                            record.step, (index,))
            return  # the first is the one to fix


# -- terminal states -----------------------------------------------------------------------


@_builtin("terminal_stays_terminal", "a final execution accepts nothing, changes nothing and "
                                     "calls no tool")
def terminal_stays_terminal(definition: WorkflowDefinition, history: History
                            ) -> Iterator[Violation]:
    ended: dict[str, int] = {}  # execution -> the record that showed it final
    reported: set[str] = set()
    states = definition.states
    commits = _has_commits(history)  # then a decision says nothing the commits do not
    for index, record in enumerate(history):
        if type(record) is Committed:
            eid = record.execution
            if eid in ended:
                if record.decision == "accepted" and eid not in reported:
                    reported.add(eid)
                    yield _after_final(history, ended[eid], index, eid,
                                       f"accepted {record.event_type} {record.event_id!r} "
                                       f"and moved to {record.state!r}")
            elif record.decision == "accepted" and record.state in states and (
                    states[record.state].final):
                ended[eid] = index
        elif type(record) is Observed:
            eid = record.execution
            if eid in ended:
                if eid not in reported and _moved_on(history[ended[eid]], record):
                    reported.add(eid)
                    yield _after_final(history, ended[eid], index, eid,
                                       f"was seen in {record.state!r} ({record.status}) at "
                                       f"version {record.version}")
            elif record.status == "final":
                ended[eid] = index
        elif type(record) is Decided and not commits:
            eid = record.execution
            if (eid in ended and record.decision.partition(":")[0] == "accepted"
                    and eid not in reported):
                reported.add(eid)
                yield _after_final(history, ended[eid], index, eid,
                                   f"accepted event {record.event_id!r}")
        elif type(record) is Dispatched:
            eid = record.execution
            if eid in ended and eid not in reported:
                reported.add(eid)
                yield _after_final(history, ended[eid], index, eid,
                                   f"called {record.tool} (key {record.key!r})")


def _moved_on(final: HistoryRecord, seen: Observed) -> bool:
    """Tells whether an observation shows an execution changed since it was seen final (by an
    observation, or by the commit that made it final)."""
    if type(final) is Observed:
        return (final.state, final.version) != (seen.state, seen.version)
    if type(final) is Committed:
        return final.state != seen.state or seen.version > final.version
    raise TypeError(f"an execution is seen final by a commit or an observation, not {final!r}")


def _after_final(history: History, ended: int, index: int, eid: str, what: str) -> Violation:
    final = history[ended]
    state = getattr(final, "state", "?")
    return Violation("terminal_stays_terminal",
                     f"{eid} ended in {state!r} at step {final.step}, then {what}; a final "
                     "execution accepts nothing", eid, history[index].step, (ended, index))


# -- transitions ---------------------------------------------------------------------------


def legal_targets(definition: WorkflowDefinition, source: str, moved: str, forced: str
                  ) -> frozenset[str]:
    """Gives the states a transition from `source` on `moved` may reach when `forced` (a
    budget, a policy or "") is what forced it."""
    return _legal_table(definition).get((source, moved, forced), frozenset())


@per_definition
def _budgeted(definition: WorkflowDefinition) -> bool:
    """Tells whether the definition sets any budget (a cost budget included)."""
    budgets = definition.budgets
    return budgets.any_limit or budgets.cost_max is not None or budgets.deadline_ms is not None


def _legal_table(definition: WorkflowDefinition
                 ) -> dict[tuple[str, str, str], frozenset[str]]:
    """Gives every (source, event, forced) -> targets the definition allows (built once)."""
    table: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    table[("", STARTED, "")].add(definition.initial)
    budgets = definition.budgets
    for reason in ("transitions_max", "visits_max", "cost_max", "deadline"):
        if budgets.on_exceeded:  # the first step may already be over a budget (its cost)
            table[("", "*", reason)].add(budgets.on_exceeded)
    for name, state in definition.states.items():
        if state.final:
            continue
        for event, transitions in state.on.items():
            for transition in transitions:
                table[(name, event, "")].add(transition.target_leaf)
        if state.after_target is not None:
            table[(name, TIMER_FIRED, "")].add(state.after_target)
        for reason in ("transitions_max", "visits_max", "cost_max", "deadline"):
            if budgets.on_exceeded:
                table[(name, "*", reason)].add(budgets.on_exceeded)
        if budgets.on_cycle:
            table[(name, "*", "cycle")].add(budgets.on_cycle)
        if definition.compensation_failed:
            table[(name, "*", "compensation_failed")].add(definition.compensation_failed)
        step = state.step
        if step is not None:
            if step.escalate_to:
                table[(name, "*", "ambiguous_failure")].add(step.escalate_to)
                table[(name, "*", "retries_exhausted")].add(step.escalate_to)
            for transition in state.on.get("step.failed", ()):
                table[(name, "*", "compensated")].add(transition.target_leaf)
            # where the run goes once undone is chosen when undoing begins: a budget
            # exceeded then sends it to the budget's state
            for target in (budgets.on_exceeded, budgets.on_cycle):
                if target and _budgeted(definition):
                    table[(name, "*", "compensated")].add(target)
        if state.approval is not None and state.approval.escalate_to:
            table[(name, "*", "approval_expired")].add(state.approval.escalate_to)
    return {key: frozenset(targets) for key, targets in table.items()}


@per_definition
def _reachable(definition: WorkflowDefinition) -> dict[str, frozenset[str]]:
    """Gives, per state, every state some sequence of legal transitions reaches."""
    edges: dict[str, set[str]] = defaultdict(set)
    for (source, _, _), targets in _legal_table(definition).items():
        edges[source] |= targets
    reach: dict[str, frozenset[str]] = {}
    for start in definition.states:
        seen: set[str] = set()
        todo = list(edges.get(start, ()))
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo += edges.get(name, ())
        reach[start] = frozenset(seen)
    return reach


@_builtin("legal_transitions", "every transition is one the definition declares (an event's, "
                               "a timeout's, or a budget's or policy's forced move)")
def legal_transitions(definition: WorkflowDefinition, history: History
                      ) -> Iterator[Violation]:
    table = _legal_table(definition)
    committed: set[str] = set()
    last_seen: dict[str, tuple[int, str]] = {}
    reach = None
    for index, record in enumerate(history):
        if type(record) is Committed:
            if record.decision != "accepted" or not record.moved:
                continue
            eid = record.execution
            committed.add(eid)
            source, moved, forced = record.from_state, record.moved, record.forced
            key = (source, "*" if forced else moved, forced)
            if record.state in table.get(key, ()):
                continue
            if source and definition.states.get(source) is not None and (
                    definition.states[source].final):
                continue  # terminal_stays_terminal tells of it
            how = f"forced by {forced}" if forced else f"on {moved}"
            allowed = sorted(table.get(key, ()))
            yield Violation(
                "legal_transitions",
                f"{eid} moved from {source or '(start)'!r} to {record.state!r} {how}; the "
                f"definition allows {', '.join(map(repr, allowed)) or 'no such transition'}",
                eid, record.step, (index,))
        elif type(record) is Observed and record.execution not in committed:
            # a machine that tells no commits: each observed change must be reachable
            eid = record.execution
            before = last_seen.get(eid)
            last_seen[eid] = (index, record.state)
            if before is None or before[1] == record.state:
                continue
            if definition.states[before[1]].final:
                continue  # terminal_stays_terminal tells of it
            reach = reach or _reachable(definition)
            if record.state not in reach[before[1]]:
                yield Violation(
                    "legal_transitions",
                    f"{eid} went from {before[1]!r} to {record.state!r}, which no sequence of "
                    "the definition's transitions reaches", eid, record.step,
                    (before[0], index))


@_builtin("guards_held", "a guarded transition is crossed only when its guard held, and the "
                         "first transition whose guard holds is the one taken")
def guards_held(definition: WorkflowDefinition, history: History) -> Iterator[Violation]:
    contexts: dict[str, Mapping[str, Any]] = {}
    for index, record in enumerate(history):
        if type(record) is not Committed or record.decision != "accepted":
            continue
        eid = record.execution
        before = contexts.get(eid)
        if record.context is not None:
            contexts[eid] = record.context
        moved, source = record.moved, record.from_state
        if (not moved or record.forced or moved != record.event_type or before is None
                or source not in definition.states):
            continue  # a forced move, a substituted event (a timeout, an invalid output)
        candidates = definition.states[source].on.get(moved, ())
        if not candidates or all(t.guard is None for t in candidates):
            continue
        event = Event(record.event_id, record.event_type, record.event_source,
                      record.payload or {}, record.answers)
        chosen, problem = _first_holding(candidates, before, event)
        if problem:
            yield Violation("guards_held", f"{eid} moved {source!r} -> {record.state!r} on "
                                           f"{moved}, but {problem}", eid, record.step,
                            (index,))
        elif chosen is None:
            texts = ", ".join(repr(t.guard_text) for t in candidates)
            yield Violation("guards_held", f"{eid} moved {source!r} -> {record.state!r} on "
                                           f"{moved} though no guard held ({texts})", eid,
                            record.step, (index,))
        elif chosen.target_leaf != record.state:
            yield Violation(
                "guards_held",
                f"{eid} moved {source!r} -> {record.state!r} on {moved}, but the first "
                f"transition whose guard holds goes to {chosen.target_leaf!r}"
                + (f" (guard {chosen.guard_text!r})" if chosen.guard_text else ""),
                eid, record.step, (index,))


def _first_holding(candidates: Sequence[CompiledTransition], context: Mapping[str, Any],
                   event: Event) -> tuple[CompiledTransition | None, str]:
    """Gives the first transition whose guard holds, or a sentence if a guard raised."""
    for transition in candidates:
        if transition.guard is None:
            return transition, ""
        try:
            if transition.guard(context, event):
                return transition, ""
        except Exception as exc:  # the machine should have rejected the event
            return None, (f"guard {transition.guard_text!r} raises {type(exc).__name__}: "
                          f"{exc} on what was recorded")
    return None, ""


def guard_outcomes(definition: WorkflowDefinition, history: History
                   ) -> Iterator[tuple[str, str, int, bool]]:
    """Gives (state, event, transition index, held) for each guard the history shows evaluated
    (for coverage): by an accepted transition (the guards before the one taken did not hold),
    and by an event the machine refused because no guard held (`rejected:guard_false`)."""
    contexts: dict[str, Mapping[str, Any]] = {}
    states: dict[str, str] = {}
    delivered: dict[tuple[str, str], Delivered] = {}
    for record in history:
        if type(record) is Delivered:
            delivered[(record.execution, record.event_id)] = record
            continue
        if type(record) is Decided:
            sent = delivered.get((record.execution, record.event_id))
            source = states.get(record.execution, "")
            before = contexts.get(record.execution)
            if (record.decision == _GUARD_FALSE and sent is not None and before is not None
                    and source in definition.states):
                yield from _guards_tried(definition, source, before, Event(
                    sent.event_id, sent.type, sent.source, sent.payload or {}, sent.answers))
            continue
        if type(record) is not Committed or record.decision != "accepted":
            continue
        before = contexts.get(record.execution)
        if record.context is not None:
            contexts[record.execution] = record.context
        states[record.execution] = record.state
        moved, source = record.moved, record.from_state
        if (not moved or record.forced or moved != record.event_type or before is None
                or source not in definition.states):
            continue
        yield from _guards_tried(definition, source, before, Event(
            record.event_id, record.event_type, record.event_source, record.payload or {},
            record.answers))


_GUARD_FALSE = "rejected:guard_false"


def _guards_tried(definition: WorkflowDefinition, state: str, context: Mapping[str, Any],
                  event: Event) -> Iterator[tuple[str, str, int, bool]]:
    """Gives the outcome of each guard of `state`'s transitions on `event`, in order, up to
    the first that holds (the one an interpreter takes)."""
    for position, transition in enumerate(definition.states[state].on.get(event.type, ())):
        if transition.guard is None:
            break
        try:
            held = bool(transition.guard(context, event))
        except Exception:  # guards_held tells of it
            break
        yield state, event.type, position, held
        if held:
            break


# -- approvals -----------------------------------------------------------------------------


class _Grant(NamedTuple):
    position: int  # the decision's record
    action_hash: str


@_builtin("approval_genuine", "an approval decision is taken only from a human holding a listed "
                              "role, for the current request and its exact action")
def approval_genuine(definition: WorkflowDefinition, history: History) -> Iterator[Violation]:
    for index, eid, event, state, problem in _approval_decisions(definition, history):
        if problem:
            yield Violation("approval_genuine",
                            f"{eid} took {event.type} {event.id!r} in {state!r} although "
                            f"{problem}", eid, history[index].step, (index,))


@per_history
def _approval_decisions(definition: WorkflowDefinition, history: History
                        ) -> list[tuple[int, str, Event, str, str]]:
    """Gives (position, execution, event, state, problem) for each accepted approval decision;
    `problem` says why it was not genuine ("" when it was)."""
    return list(_each_approval_decision(definition, history))


def _each_approval_decision(definition: WorkflowDefinition, history: History
                            ) -> Iterator[tuple[int, str, Event, str, str]]:
    commits = _has_commits(history)
    requests: dict[str, Observed] = {}
    states: dict[str, str] = {}
    contexts: dict[str, Mapping[str, Any]] = {}
    delivered: dict[tuple[str, str], Delivered] = {}
    for index, record in enumerate(history):
        if type(record) is Observed:
            requests[record.execution] = record
            if not commits:
                states[record.execution] = record.state
            continue
        if type(record) is Delivered:
            delivered[(record.execution, record.event_id)] = record
            continue
        if type(record) is Committed:
            if record.decision != "accepted":
                continue
            eid = record.execution
            before_state, before_context = states.get(eid, ""), contexts.get(eid)
            states[eid] = record.state
            if record.context is not None:
                contexts[eid] = record.context
            if record.event_type not in _APPROVALS:
                continue
            event = Event(record.event_id, record.event_type, record.event_source,
                          record.payload or {}, record.answers)
            state = record.from_state or before_state
        elif type(record) is Decided and not commits:
            if record.decision.partition(":")[0] != "accepted":
                continue
            eid = record.execution
            sent = delivered.get((eid, record.event_id))
            if sent is None or sent.type not in _APPROVALS:
                continue
            event = Event(sent.event_id, sent.type, sent.source, sent.payload or {},
                          sent.answers)
            state, before_context = states.get(eid, ""), None
        else:
            continue
        yield index, eid, event, state, _not_genuine(definition, event, state,
                                                     requests.get(eid), before_context)


def _not_genuine(definition: WorkflowDefinition, event: Event, state: str,
                 seen: Observed | None, context: Mapping[str, Any] | None) -> str:
    """Tells why an accepted approval decision was not genuine, or "" when it was."""
    compiled = definition.states.get(state)
    approval = compiled.approval if compiled is not None else None
    if approval is None:
        return f"{state!r} asks for no approval"
    if event.source != "human":
        return f"it came from source {event.source!r}, not from a human"
    payload = event.payload if isinstance(event.payload, Mapping) else {}
    role = payload.get("role")
    if role not in approval.roles:
        return f"role {role!r} may not decide it (roles: {', '.join(sorted(approval.roles))})"
    if seen is None or not seen.request:
        return "no approval request was pending"
    if event.answers != seen.request:
        return f"it answers request {event.answers!r}, not the current {seen.request!r}"
    expected = seen.action_hash
    if context is not None and not definition.secrets:
        try:
            gated = definition.states[approval.for_state].step
            if gated is not None:
                expected = _action_hash(gated, gated.input(context))
        except Exception:  # an input that cannot be built: the machine's hash stands
            expected = seen.action_hash
    if payload.get("action_hash") != expected:
        return (f"it approves action {str(payload.get('action_hash'))[:12]}, not the "
                f"requested {expected[:12]}")
    return ""


@_builtin("approved_effects", "an effect of a step that needs approval takes place only after a "
                              "genuine grant of that exact action, one grant per action")
def approved_effects(definition: WorkflowDefinition, history: History) -> Iterator[Violation]:
    gated: dict[str, list[str]] = defaultdict(list)  # tool -> states whose step needs approval
    ungated: set[str] = set()  # tools some state runs without approval
    for name, state in definition.states.items():
        if state.step is not None:
            if state.step.needs_approval:
                gated[state.step.tool].append(name)
            else:
                ungated.add(state.step.tool)
    if not gated:
        return
    owners = _owners_of(definition, history)
    decisions = {index: (event, problem) for index, _, event, _, problem in
                 _approval_decisions(definition, history)}
    grants: dict[str, list[_Grant]] = defaultdict(list)
    done: dict[tuple[str, str, str], int] = {}
    for index, record in enumerate(history):
        decided = decisions.get(index)
        if decided is not None:
            event, problem = decided
            if event.type == APPROVAL_GRANTED and not problem:
                grants[getattr(record, "execution", "")].append(
                    _Grant(index, str(event.payload.get("action_hash"))))
            continue
        if type(record) is not Applied or record.tool not in gated:
            continue
        owner = owners.get(record.key)
        if owner is not None:  # the commit that commanded it says which state's it was
            if owner.compensation or owner.state not in gated[record.tool]:
                continue
            states, execution = [owner.state], record.execution or owner.execution
        elif record.tool in ungated:
            continue  # a tool gated in one state, not in another: cannot tell which
        else:
            states, execution = gated[record.tool], record.execution
        action = (execution, record.tool, record.input)
        if action in done:
            continue  # the same action again: no_duplicate_effect tells of it
        wanted = _hashes(definition, states, record.input)
        if wanted is None and not execution:
            continue  # neither its run nor its action can be told: nothing to judge by
        # an effect no key ties to its run may use any run's grant of that exact action
        pools = [grants[execution]] if execution else list(grants.values())
        match, available = None, grants[execution]
        for pool in pools:
            match = next((g for g in pool if wanted is None or g.action_hash in wanted), None)
            if match is not None:
                available = pool
                break
        if match is None:
            why = ("no genuine approval was granted" if not any(pools) else
                   "no genuine approval granted was for this exact action")
            yield Violation("approved_effects",
                            f"{record.tool} took effect for {execution or 'an unknown run'} "
                            f"with input {_short(record.input)} (ledger #{record.seq}), but "
                            f"{why}", execution, record.step, (index,))
            continue
        available.remove(match)
        done[action] = index


def _hashes(definition: WorkflowDefinition, states: Sequence[str], text: str
            ) -> frozenset[str] | None:
    """Gives the action hashes a ledger input stands for in the gated states (None: unknown,
    with secrets, as the hash covers references the ledger shows revealed)."""
    if definition.secrets:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return frozenset()
    hashes = set()
    for name in states:
        step = definition.states[name].step
        if step is not None and isinstance(value, Mapping):
            hashes.add(_action_hash(step, value))
    return frozenset(hashes)


# -- retries and budgets -------------------------------------------------------------------


@_builtin("retries_within_bounds", "a step is attempted at most `attempts_max` times per entry "
                                   "into its state, and a compensation at most its own bound")
def retries_within_bounds(definition: WorkflowDefinition, history: History
                          ) -> Iterator[Violation]:
    undo_bound: dict[str, int] = {}
    for state in definition.states.values():
        if state.step is not None and state.step.compensation is not None:
            tool = state.step.compensation.tool
            undo_bound[tool] = max(undo_bound.get(tool, 0), state.step.compensation.attempts_max)
    attempts: dict[str, set[str]] = {}  # execution -> effect ids in the current visit
    undos: dict[tuple[str, str], set[str]] = defaultdict(set)
    reported: set[tuple[str, str]] = set()
    for index, record in enumerate(history):
        if type(record) is not Committed or record.decision != "accepted":
            continue
        eid = record.execution
        if record.moved:
            attempts[eid] = set()
        step = definition.states[record.state].step if record.state in definition.states \
            else None
        for effect in record.effects:
            if effect.compensation:
                seen = undos[(eid, effect.key)]
                seen.add(effect.id)
                bound = undo_bound.get(effect.tool)
                if bound is not None and len(seen) > bound and (eid, effect.key) not in reported:
                    reported.add((eid, effect.key))
                    yield Violation("retries_within_bounds",
                                    f"{eid} attempted compensation {effect.tool} "
                                    f"({effect.key!r}) {len(seen)} times; its bound is {bound}",
                                    eid, record.step, (index,))
                continue
            current = attempts.setdefault(eid, set())
            current.add(effect.id)
            if step is not None and effect.tool == step.tool and (
                    len(current) > step.attempts_max):
                if (eid, record.state) in reported:
                    continue
                reported.add((eid, record.state))
                yield Violation("retries_within_bounds",
                                f"{eid} attempted {step.tool} in {record.state!r} "
                                f"{len(current)} times in one entry into the state; "
                                f"attempts_max is {step.attempts_max}", eid, record.step,
                                (index,))


@_builtin("budgets_within_bounds", "no execution passes its transitions, visits or cost budget "
                                   "without being forced to the budget's state")
def budgets_within_bounds(definition: WorkflowDefinition, history: History
                          ) -> Iterator[Violation]:
    budgets = definition.budgets
    if not _budgeted(definition):
        return
    transitions: dict[str, int] = defaultdict(int)
    visits: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    cost: dict[str, float] = defaultdict(float)
    exceeded: set[str] = set()
    for index, record in enumerate(history):
        if type(record) is not Committed or record.decision != "accepted":
            continue
        eid = record.execution
        if eid in exceeded:
            continue
        if record.forced in _BUDGET_REASONS:
            exceeded.add(eid)
            continue
        problem = ""
        if record.moved:
            transitions[eid] += 1
            visits[eid][record.state] += 1
            if not record.forced:
                if budgets.transitions_max is not None and (
                        transitions[eid] > budgets.transitions_max):
                    problem = (f"made transition {transitions[eid]}; transitions_max is "
                               f"{budgets.transitions_max}")
                elif budgets.visits_max is not None and (
                        visits[eid][record.state] > budgets.visits_max):
                    problem = (f"entered {record.state!r} {visits[eid][record.state]} times; "
                               f"visits_max is {budgets.visits_max}")
        for effect in record.effects:
            if effect.compensation:
                continue
            step = definition.states[record.state].step if record.state in (
                definition.states) else None
            if step is not None and step.tool == effect.tool:
                cost[eid] += step.cost
        if not problem and budgets.cost_max is not None and cost[eid] > budgets.cost_max:
            problem = f"spent {cost[eid]:g}; cost_max is {budgets.cost_max:g}"
        if problem:
            exceeded.add(eid)  # once is enough
            yield Violation("budgets_within_bounds",
                            f"{eid} {problem}, and was not forced to "
                            f"{budgets.on_exceeded or '(no on_exceeded state)'!r}", eid,
                            record.step, (index,))


# -- compensation --------------------------------------------------------------------------


def _compensable(definition: WorkflowDefinition) -> dict[str, tuple[str, ...]]:
    """Gives, per compensation tool, the forward tools it undoes."""
    undoes: dict[str, list[str]] = defaultdict(list)
    for state in definition.states.values():
        step = state.step
        if step is not None and step.compensation is not None and (
                step.tool not in undoes[step.compensation.tool]):
            undoes[step.compensation.tool].append(step.tool)
    return {tool: tuple(forward) for tool, forward in undoes.items()}


_UNDO = "/undo"  # a compensation's key is its step's key plus this (the reference's way)


class _Undo(NamedTuple):
    position: int  # the compensation's Applied record
    forward: int  # the Applied record of the effect it undid


class _Saga(NamedTuple):
    pairs: dict[str, list[_Undo]]  # per execution, each undo with what it undid
    forward: dict[str, list[int]]  # per execution, every compensable effect
    undo_tools: dict[str, tuple[str, ...]]
    owners: dict[str, _Owner]

    def execution_of(self, record: Applied | Dispatched) -> str:
        owner = self.owners.get(record.key)
        return record.execution or (owner.execution if owner is not None else "")


@per_history
def _undos(definition: WorkflowDefinition, history: History) -> _Saga:
    """Pairs each compensation applied with the effect it undid: the one whose key its key
    extends (`{key}/undo`), or, for a machine with other keys, the newest effect of its forward
    tools not undone yet. A compensable effect is one of a state whose step declares a
    compensation (told by the commit that commanded it, or by its tool when no state without
    a compensation uses that tool); one applied again with the same input is the same logical
    effect, which one undo covers."""
    undoes = _compensable(definition)
    compensable = {name for name, state in definition.states.items()
                   if state.step is not None and state.step.compensation is not None}
    plain = {state.step.tool for state in definition.states.values()
             if state.step is not None and state.step.compensation is None}
    forward_tools = {tool for tools in undoes.values() for tool in tools}
    owners = _owners_of(definition, history)
    saga = _Saga(defaultdict(list), defaultdict(list), undoes, owners)
    actions: set[tuple[str, str, str]] = set()
    for index, record in enumerate(history):
        if type(record) is not Applied:
            continue
        owner = owners.get(record.key)
        eid = record.execution or (owner.execution if owner is not None else "")
        if record.tool in undoes and (owner is None or owner.compensation):
            undone = {pair.forward for pair in saga.pairs[eid]}
            if record.key.endswith(_UNDO):
                # the key names what it undoes: pair exactly; an undo of an effect that
                # never took place pairs with nothing
                undoing = record.key[:-len(_UNDO)]
                target = next((i for i in reversed(saga.forward[eid]) if i not in undone
                               and history[i].key == undoing), None)  # type: ignore[union-attr]
            else:
                target = next((i for i in reversed(saga.forward[eid]) if i not in undone
                               and history[i].tool in undoes[record.tool]),  # type: ignore[union-attr]
                              None)
            if target is not None:
                saga.pairs[eid].append(_Undo(index, target))
            continue
        if record.tool not in forward_tools:
            continue
        if owner is not None:
            if owner.state not in compensable:
                continue
        elif record.tool in plain:
            continue  # a state without a compensation uses the tool too: cannot tell
        action = (eid, record.tool, record.input)
        if action not in actions:
            actions.add(action)
            saga.forward[eid].append(index)
    return saga


@_builtin("compensation_order", "completed steps are undone newest first")
def compensation_order(definition: WorkflowDefinition, history: History
                       ) -> Iterator[Violation]:
    for eid, undos in _undos(definition, history).pairs.items():
        for position, later in enumerate(undos):
            for earlier in undos[:position]:
                # an older effect was undone while a newer one, applied before that undo,
                # still waited for its own
                if earlier.forward < later.forward < earlier.position:
                    old, new = history[earlier.forward], history[later.forward]
                    yield Violation(
                        "compensation_order",
                        f"{eid} undid {old.tool} (applied at step {old.step}) before "  # type: ignore[union-attr]
                        f"{new.tool} (applied later, at step {new.step}); compensations "  # type: ignore[union-attr]
                        "run newest first", eid, history[later.position].step,
                        (earlier.forward, later.forward, earlier.position, later.position))
                    break


@_builtin("compensation_complete", "once compensation begins, every compensable effect applied "
                                   "before it is undone by the end, or a human is asked",
          final_only=True)
def compensation_complete(definition: WorkflowDefinition, history: History
                          ) -> Iterator[Violation]:
    saga = _undos(definition, history)
    if not saga.undo_tools:
        return
    pairs, forward = saga.pairs, saga.forward
    begun: dict[str, int] = {}
    humans: set[str] = set()
    finished: dict[str, int] = {}
    for index, record in enumerate(history):
        if type(record) is Dispatched and record.tool in saga.undo_tools:
            owner = saga.owners.get(record.key)
            if owner is None or owner.compensation:
                begun.setdefault(saga.execution_of(record), index)
        elif isinstance(record, Committed | Observed) and definition.compensation_failed and (
                getattr(record, "state", "") == definition.compensation_failed):
            humans.add(record.execution)
        elif type(record) is Finished and record.status == "final":
            finished[record.execution] = index
    for eid, start in begun.items():
        if eid not in finished or eid in humans:
            continue
        undone = {pair.forward for pair in pairs.get(eid, ())}
        left = [i for i in forward.get(eid, ()) if i < start and i not in undone]
        if left:
            names = ", ".join(f"{history[i].tool} (step {history[i].step})"  # type: ignore[union-attr]
                              for i in left)
            end = history[finished[eid]]
            yield Violation("compensation_complete",
                            f"{eid} began compensating at step {history[start].step} and ended "
                            f"in {end.state!r} with {names} not undone, and no human was asked "  # type: ignore[union-attr]
                            f"(state {definition.compensation_failed or '(none declared)'!r})",
                            eid, end.step, (start, *left, finished[eid]))


# -- durability ----------------------------------------------------------------------------


@_builtin("nothing_lost", "what was committed survives crashes: no execution is seen behind its "
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


@_builtin("replay_matches", "replaying an execution's log reproduces its stored state",
          final_only=True)
def replay_matches(definition: WorkflowDefinition, history: History) -> Iterator[Violation]:
    for index, record in enumerate(history):
        if type(record) is Replayed and not record.ok:
            yield Violation("replay_matches", f"replaying {record.execution}'s log did not "
                                              f"reproduce its state: {record.detail}",
                            record.execution, record.step, (index,))


@_builtin("delivered_once", "an event delivered twice does what it does once: one id is "
                            "accepted at most once")
def delivered_once(definition: WorkflowDefinition, history: History) -> Iterator[Violation]:
    commits = _has_commits(history)
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


@_builtin("versions_increase", "each accepted event moves an execution's version up, and nothing "
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


# -- liveness and the machine --------------------------------------------------------------


@_builtin("no_stuck_execution", "at the end, after a phase with every fault healed, no "
                                "execution sits in a non-final state with nothing that could "
                                "move it", final_only=True)
def no_stuck_execution(definition: WorkflowDefinition, history: History
                       ) -> Iterator[Violation]:
    for index, record in enumerate(history):
        if type(record) is Finished and record.status != "final" and not record.waiting_on:
            yield Violation("no_stuck_execution",
                            f"{record.execution} is stuck in {record.state!r} "
                            f"({record.status}): no timer, call, approval or event can move it",
                            record.execution, record.step, (index,))


@_builtin("machine_ok", "the machine under test neither raises, hangs nor answers nonsense")
def machine_ok(definition: WorkflowDefinition, history: History) -> Iterator[Violation]:
    for index, record in enumerate(history):
        if type(record) is MachineFailed:
            yield Violation("machine_ok", f"the machine {record.problem} ({record.error}): "
                                          f"{record.message}", "", record.step, (index,))


BUILTIN = tuple(INVARIANTS)
"""The names of the built-in invariants, in the order they are checked."""

