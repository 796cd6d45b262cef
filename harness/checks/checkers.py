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
import operator
import sys
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

from harness.errors import HarnessError
from harness.sim.history import (
    REFUSED_TIMER,
    Applied,
    Committed,
    Decided,
    Delivered,
    Dispatched,
    FaultInjected,
    Finished,
    HistoryRecord,
    MachineFailed,
    Observed,
    Replayed,
)
from reference_machine import (
    APPROVAL_DENIED,
    APPROVAL_GRANTED,
    EVENTLESS_MAX,
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
_UNDO = "/undo"  # a compensation's key is its step's key plus this (the reference's way)


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
            f" (step {self.step})" if self.step else "")  # 0: before any step, or no step known
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
    since (a run checked after each step), or a list whose records were replaced, is derived
    again."""
    last: list[Any] = []

    def derived(definition: WorkflowDefinition, history: History) -> T:
        if last and last[0] is definition and last[1] is history and (
                type(history) is tuple or (len(last[2]) == len(history)
                                           and all(map(operator.is_, last[2], history)))):
            return last[3]
        value = function(definition, history)
        last[:] = [definition, history, history if type(history) is tuple else tuple(history),
                   value]
        return value

    derived.__doc__ = function.__doc__
    return derived


#: A tool input a violation quotes whole up to this many characters; past it, its values
#: that are long are told by their size (the JSON stays whole: never cut mid-value).
QUOTED_MAX = 600


def _quoted(input_json: str) -> str:
    """Gives a tool input (canonical JSON) as a violation quotes it: whole, or, when long,
    with each long value told by its size, so the keys and the short values that tell two
    actions apart still read."""
    if len(input_json) <= QUOTED_MAX:
        return input_json
    try:
        value = json.loads(input_json)
    except ValueError:
        return input_json
    if not isinstance(value, dict):
        return f"<{len(input_json):,} characters of {type(value).__name__}>"
    shown = {key: item if len(json.dumps(item)) <= 80 else
             f"<{len(json.dumps(item)):,} characters>" for key, item in value.items()}
    return json.dumps(shown, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _short(text: str, size: int = 80) -> str:
    return text if len(text) <= size else f"{text[:size - 3]}..."


def _has_commits(history: History) -> bool:
    return any(type(record) is Committed for record in history)


class _Owner(NamedTuple):
    execution: str
    state: str  # the state whose step commanded it (a region's, for a region's effect)
    compensation: bool
    key: str = ""
    position: int = -1  # the commit that first commanded it
    #: the execution's context when it was commanded (None for a region's: not recorded)
    context: Mapping[str, Any] | None = None


@per_history
def _owners_of(definition: WorkflowDefinition, history: History) -> dict[str, _Owner]:
    return _owners(history, definition)


def _owners(history: History, definition: WorkflowDefinition | None = None
            ) -> dict[str, _Owner]:
    """Gives, for each key (and id) a commit commanded a call under, whose call it was: the
    execution, the state that commanded it (inside a parallel or map state, the region's state
    its key names), and whether it was a compensation. For effects whose key does not name
    their execution, and tools that several states use."""
    owners: dict[str, _Owner] = {}
    chart = _chart(definition) if definition is not None else None
    for index, record in enumerate(history):
        if type(record) is Committed and record.effects:
            contexts: dict[str, Mapping[str, Any]] | None = None  # made once a commit
            for effect in record.effects:
                if effect.key in owners and effect.id in owners:
                    continue
                state, context = record.state, record.context
                if chart is not None and chart.scoped and not effect.compensation and (
                        record.state in chart.scoped or record.state not in chart.states):
                    inner = _key_state(chart, effect.key)
                    if inner:
                        if contexts is None:
                            contexts = _region_contexts_of(record)
                        region = _innermost(contexts, effect.key)
                        state, context = inner, contexts[region] if region else None
                owner = _Owner(record.execution, state, effect.compensation, effect.key, index,
                               context)
                owners.setdefault(effect.key, owner)
                owners.setdefault(effect.id, owner)
    return owners


def _region_contexts_of(record: Committed) -> dict[str, Mapping[str, Any]]:
    """Gives each region's context after a commit, by region id (those recorded)."""
    return dict(zip((rid for rid, _, _ in record.regions), record.region_contexts,
                    strict=False))


def _innermost(regions: Collection[str], call: str) -> str:
    """Gives the region whose id `call` (a key or a call's id) extends, the innermost when
    regions nest ("" when none does): the longest of the call's `/`-prefixes that is a
    region's id, looked up (a map of a hundred items commands a hundred calls at once)."""
    ids = regions if isinstance(regions, Set | Mapping) else frozenset(regions)
    cut = len(call)
    while (cut := call.rfind("/", 0, cut)) > 0:
        if call[:cut] in ids:
            return call[:cut]
    return ""


# -- statecharts: what the checks derive of a definition ---------------------------------------

_INTERNAL = "internal"
_ALWAYS = "always"
_DONE = "done"
_COMPENSATED = "compensated"
_FORCED_TARGETS = ("transitions_max", "visits_max", "cost_max", "deadline")
_SCOPED_KINDS = frozenset({"parallel", "map"})


class _Chart(NamedTuple):
    """What the checks need to know of a definition's statechart constructs, derived once."""

    used: bool  # some construct is used: without one, every statechart step is skipped
    states: Mapping[str, Any]
    scoped: frozenset[str]  # the parallel and map states
    roots: Mapping[str, frozenset[str]]  # parallel/map state -> the scopes its regions run in
    owner: Mapping[str, str]  # scope (a region, or a map state) -> its parallel/map state
    starts: Mapping[str, str]  # scope -> the leaf a region or map item starts in
    landings: Mapping[str, frozenset[str]]  # declared target -> every leaf a move there enters
    onward: Mapping[str, frozenset[str]]  # state -> where its eventless moves may carry a run
    internal: frozenset[tuple[str, str]]  # (state, event) some transition without target takes
    resumed: Mapping[str, tuple[str, ...]]  # leaf -> each child of a history compound above it
    conditional: frozenset[str]  # states whose step needs an approval only when a guard holds
    results_kept: frozenset[str]  # maps whose results key no action can overwrite
    memo: dict[tuple[str, str], frozenset[str]]  # region moves' targets, filled as asked
    guarded: frozenset[tuple[str, str]]  # (state, event) whose transitions have a guard
    exiting: frozenset[str]  # parallel and map states a state inside has exit actions in


@per_definition
def _chart(definition: WorkflowDefinition) -> _Chart:
    """Gives what the statechart checks derive of a definition."""
    states = definition.states
    children: dict[str, list[str]] = defaultdict(list)
    for name, state in states.items():
        if state.parent:
            children[state.parent].append(name)
    scoped = frozenset(name for name, state in states.items() if state.kind in _SCOPED_KINDS)
    roots: dict[str, frozenset[str]] = {}
    owner: dict[str, str] = {}
    for name in scoped:
        state = states[name]
        roots[name] = (frozenset({name}) if state.kind == "map"
                       else frozenset(region for region, _ in state.regions))
        for root in roots[name]:
            owner[root] = name
    landings: dict[str, frozenset[str]] = {}

    def land(name: str) -> frozenset[str]:
        known = landings.get(name)
        if known is not None:
            return known
        state = states[name]
        child = state.initial_child
        if child is None or child not in states or state.kind in _SCOPED_KINDS:
            found = {name}
        else:
            found = set(land(child))
            if definition.scoped and state.history == "deep":
                found |= {below for below, inner in states.items() if name in inner.ancestors
                          and inner.scope == state.scope
                          and (below not in children or inner.kind in _SCOPED_KINDS)}
            elif definition.scoped and state.history == "shallow":
                for member in children[name]:
                    found |= land(member)
        landings[name] = frozenset(found)
        return landings[name]

    edges: dict[str, set[str]] = {}
    resumed: dict[str, tuple[str, ...]] = {}
    internal: set[tuple[str, str]] = set()
    for name, state in states.items():
        land(name)
        for transition in (*state.always, *state.done):
            edges.setdefault(name, set()).update(land(transition.target))
        for event, transitions in state.on.items():
            if any(transition.internal for transition in transitions):
                internal.add((name, event))
        chain = (name, *state.ancestors)
        above = tuple(chain[position - 1] for position in range(1, len(chain))
                      if states[chain[position]].history)
        if above and definition.scoped:
            resumed[name] = above
    onward: dict[str, frozenset[str]] = {}
    for name in edges:
        seen: set[str] = set()
        todo = list(edges[name])
        while todo:
            reached = todo.pop()
            if reached not in seen:
                seen.add(reached)
                todo += edges.get(reached, ())
        onward[name] = frozenset(seen)
    conditional = frozenset(name for name, state in states.items()
                            if state.step is not None and state.step.approval_when is not None)
    used = bool(scoped or internal or edges or resumed or conditional)
    guarded = frozenset((name, event) for name, state in states.items()
                        for event, transitions in state.on.items()
                        if any(transition.guard is not None for transition in transitions))
    return _Chart(used, states, scoped, roots, owner,
                  {root: scope.initial for root, scope in definition.scopes.items()},
                  landings, onward, frozenset(internal), resumed, conditional,
                  _results_kept(definition, scoped), {}, guarded,
                  frozenset(name for name in scoped if any(
                      inner.exit for inner in states.values() if name in inner.ancestors)))


def _results_kept(definition: WorkflowDefinition, scoped: frozenset[str]) -> frozenset[str]:
    """Gives the map states whose `results` key only their join writes: no action assigns it,
    no other map shares it, and no action is a function (which may assign anything)."""
    assigned: set[str] = set()
    for spec in definition.spec.states.values():
        lists = [spec.entry, spec.exit, *(t.actions for t in spec.eventless()),
                 *(t.actions for t in spec.joins()),
                 *(t.actions for event in spec.on for t in spec.transitions(event))]
        for actions in lists:
            for action in actions:
                if action.function is not None:
                    return frozenset()
                assigned.update(action.assign or ())
    keys = [definition.states[name].results for name in scoped
            if definition.states[name].kind == "map"]
    return frozenset(name for name in scoped if definition.states[name].kind == "map"
                     and definition.states[name].results not in assigned
                     and keys.count(definition.states[name].results) == 1)


def _key_state(chart: _Chart, key: str) -> str:
    """Gives the state a region's effect key names (`{region}/{state}/{visit}`, with or without
    `/undo`), or "" when the key names no state inside a region or map item."""
    if key.endswith(_UNDO):
        key = key[:-len(_UNDO)]
    head, _, visit = key.rpartition("/")
    state = head.rpartition("/")[2]
    inner = chart.states.get(state)
    if inner is None or inner.scope is None or not visit.isdigit():
        return ""
    return state


def _region_identity(chart: _Chart, key: str) -> str:
    """Gives the region (or map item) a region effect's key belongs to, without its visit
    numbers (`{execution}/{P}/{region}`): what makes two effects of one input two actions.
    "" for a key of no region."""
    if not _key_state(chart, key):
        return ""
    parts = (key[:-len(_UNDO)] if key.endswith(_UNDO) else key).split("/")[:-2]
    kept: list[str] = []
    while len(parts) >= 3 and parts[-3] in chart.scoped and parts[-2].isdigit():
        kept[:0] = (parts[-3], parts[-1])
        del parts[-3:]
    return "/".join((*parts, *kept)) if kept else ""


def _visit_prefixes(regions: tuple[tuple[str, str, str], ...]) -> set[str]:
    """Gives the visits of parallel and map states a commit's region snapshot shows active
    (`{execution}/{P}/{visit}/`, nested ones too)."""
    return {rid[:rid.rindex("/") + 1] for rid, _, _ in regions if "/" in rid}


def _own_visits(regions: tuple[tuple[str, str, str], ...], base: str) -> set[str]:
    """Gives the visits (`{base}{visit}/`) of one parallel or map state (`base` is
    `{execution}/{state}/`) that a region snapshot shows, its nested states' left out."""
    return {prefix for prefix in _visit_prefixes(regions)
            if prefix.startswith(base) and prefix.count("/") == base.count("/") + 1}


def _resumes(chart: _Chart, leaf: str, visited: set[str]) -> bool:
    """Tells whether a run that was in `visited` may resume `leaf` through history: some
    child of a history compound above `leaf` (on its way to it) was active before."""
    states = chart.states
    for child in chart.resumed.get(leaf, ()):
        for seen in visited:
            inner = states.get(seen)
            if seen == child or (inner is not None and child in inner.ancestors):
                return True
    return False


# -- side effects --------------------------------------------------------------------------


@_builtin("no_duplicate_effect", "no logical action takes effect twice: the same tool, "
                                 "execution (region, map item) and input applied once (the "
                                 "same key, for a tool whose `action` is `call`; tools marked "
                                 "repeatable excepted; an effect its compensation undid may be "
                                 "done again)")
def no_duplicate_effect(definition: WorkflowDefinition, history: History
                        ) -> Iterator[Violation]:
    repeatable = {name for name, tool in definition.tools.items() if tool.repeatable}
    per_call = {name for name, tool in definition.tools.items()
                if getattr(tool, "action", "input") == "call"}
    first: dict[tuple[str, str, str], int] = {}
    undone_at: dict[int, int] | None = None  # effect -> the undo that took it back
    undoing: dict[int, int] = {}  # undo -> the effect it took back
    chart = _chart(definition)
    for index, record in enumerate(history):
        if type(record) is not Applied or record.tool in repeatable:
            continue
        # an effect whose execution is unknown is one logical action per key; two regions
        # (two map items) of one run are two actions, whatever their inputs
        region = _region_identity(chart, record.key) if chart.scoped and record.execution \
            else ""
        action = ((region or record.execution, record.tool,
                   record.key if record.tool in per_call else record.input)
                  if record.execution else ("", record.tool, record.key))
        seen = first.get(action)
        if seen is None:
            first[action] = index
            continue
        if undone_at is None:  # built only when a repeat is seen: the common case pays nothing
            pairs = [pair for found in _undos(definition, history).pairs.values()
                     for pair in found]
            undone_at = {pair.forward: pair.position for pair in pairs}
            undoing = {pair.position: pair.forward for pair in pairs}
        if undone_at.get(seen, index) < index:  # undone before: doing it again is a new action
            first[action] = index
            continue
        if undoing.get(seen, -1) != undoing.get(index, -1) and index in undoing:
            first[action] = index  # an undo of an effect done again: undoing it is new too
            continue
        earlier = history[seen]
        assert type(earlier) is Applied
        yield Violation(
            "no_duplicate_effect",
            f"{record.tool} took effect twice with input {_quoted(record.input)}: ledger "
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
    budget, a policy, "internal" or "") is what forced it. `moved` may be `always` (the
    state's eventless transitions) or `done` (a parallel or map state's join); a target that
    is a compound with history gives every leaf it may resume."""
    return _legal_table(definition).get((source, moved, forced), frozenset())


@per_definition
def _budgeted(definition: WorkflowDefinition) -> bool:
    """Tells whether the definition sets any budget (a cost budget included)."""
    budgets = definition.budgets
    return budgets.any_limit or budgets.cost_max is not None or budgets.deadline_ms is not None


Table = dict[tuple[str, str, str], frozenset[str]]


def _legal_table(definition: WorkflowDefinition) -> Table:
    """Gives every (source, event, forced) -> targets the definition allows (built once)."""
    return _tables(definition)[0]


def _plain_table(definition: WorkflowDefinition) -> Table:
    """Gives `_legal_table` without the leaves only history can resume: where each declared
    transition goes the first time."""
    return _tables(definition)[1]


@per_definition
def _tables(definition: WorkflowDefinition) -> tuple[Table, Table]:
    """Gives the legal table and the plain one (see `_plain_table`)."""
    chart = _chart(definition)
    legal: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    plain: dict[tuple[str, str, str], set[str]] = defaultdict(set)

    def add(key: tuple[str, str, str], leaf: str, declared: str = "") -> None:
        plain[key].add(leaf)
        legal[key].add(leaf)
        if declared:
            legal[key].update(chart.landings.get(declared, ()))

    def onward(key: tuple[str, str, str], transitions: Iterable[CompiledTransition]) -> None:
        # where a run goes once undone was chosen when undoing began, eventless moves after
        # it included (the choice is kept, not the path)
        for transition in transitions:
            for leaf in chart.landings.get(transition.target, {transition.target_leaf}):
                add(key, leaf)
                for later in chart.onward.get(leaf, ()):
                    add(key, later)

    add(("", STARTED, ""), definition.initial)
    budgets = definition.budgets
    for reason in _FORCED_TARGETS:
        if budgets.on_exceeded:  # the first step may already be over a budget (its cost)
            add(("", "*", reason), budgets.on_exceeded)
    for name, state in definition.states.items():
        if state.final:
            continue
        for event, transitions in state.on.items():
            for transition in transitions:
                if transition.internal:
                    add((name, event, _INTERNAL), name)
                else:
                    add((name, event, ""), transition.target_leaf, transition.target)
        for transition in state.always:
            add((name, _ALWAYS, ""), transition.target_leaf, transition.target)
        for transition in state.done:
            add((name, _DONE, ""), transition.target_leaf, transition.target)
        if state.done:
            onward((name, "*", _COMPENSATED), state.done)
        if state.after_target is not None:
            add((name, TIMER_FIRED, ""), state.after_target)
        for reason in _FORCED_TARGETS:
            if budgets.on_exceeded:
                add((name, "*", reason), budgets.on_exceeded)
        if budgets.on_cycle:
            add((name, "*", "cycle"), budgets.on_cycle)
        if definition.compensation_failed:
            add((name, "*", "compensation_failed"), definition.compensation_failed)
        step = state.step
        if step is not None:
            if step.escalate_to:
                add((name, "*", "ambiguous_failure"), step.escalate_to)
                add((name, "*", "retries_exhausted"), step.escalate_to)
            onward((name, "*", _COMPENSATED), state.on.get("step.failed", ()))
            # where the run goes once undone is chosen when undoing begins: a budget
            # exceeded then sends it to the budget's state
            for target in (budgets.on_exceeded, budgets.on_cycle):
                if target and _budgeted(definition):
                    add((name, "*", _COMPENSATED), target)
        if state.approval is not None and state.approval.escalate_to:
            add((name, "*", "approval_expired"), state.approval.escalate_to)
    return ({key: frozenset(targets) for key, targets in legal.items()},
            {key: frozenset(targets) for key, targets in plain.items()})


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
                               "a timeout's, or a budget's or policy's forced move), and so is "
                               "every eventless move, join, history resume and region move a "
                               "statechart made")
def legal_transitions(definition: WorkflowDefinition, history: History
                      ) -> Iterator[Violation]:
    table = _legal_table(definition)
    chart = _chart(definition)
    committed: set[str] = set()
    last_seen: dict[str, tuple[int, str]] = {}
    visited: dict[str, set[str]] = {}  # per execution, the states it was in (for history)
    reach = None
    for index, record in enumerate(history):
        if type(record) is Committed:
            if record.decision != "accepted":
                continue
            eid = record.execution
            committed.add(eid)
            if chart.used:
                seen = visited.get(eid)
                if seen is None:
                    seen = visited[eid] = set()
                problem = _move_problem(definition, chart, record, seen) if record.moved else ""
                if not problem:
                    problem = next(filter(None, (_region_move_problem(definition, chart, move)
                                                 for move in record.inner)), "")
                seen.update(record.via)
                seen.add(record.state)
                if problem:
                    yield Violation("legal_transitions", f"{eid} {problem}", eid, record.step,
                                    (index,))
                continue
            if not record.moved:
                continue
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
            for source, target in record.moves:  # each move its machine told it made
                if definition.states[source].final:
                    continue  # a final state left: terminal_stays_terminal tells of it
                reach = reach or _reachable(definition)
                if target not in reach[source]:
                    yield Violation(
                        "legal_transitions",
                        f"{eid} moved from {source!r} to {target!r}, which no sequence of the "
                        "definition's transitions reaches", eid, record.step, (index,))
                    break
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


def _move_problem(definition: WorkflowDefinition, chart: _Chart, record: Committed,
                  visited: set[str]) -> str:
    """Gives why a committed move is not one the definition declares ("" when it is): the
    event's transition (or the forced move) from where the run was, then each eventless move
    through `via` (an `always`, or a parallel or map state's join), each landing where its
    target, or the target's history, leads."""
    source, moved, forced, state = record.from_state, record.moved, record.forced, record.state
    states = definition.states
    if source and source in states and states[source].final:
        return ""  # terminal_stays_terminal tells of it
    if source == state and source in chart.scoped:
        return ""  # a region moved (its moves are judged apart), or the join began undoing
    legal, plain = _tables(definition)
    nodes = (*record.via, state)
    how = f"forced by {forced}" if forced and forced != _INTERNAL else f"on {moved}"
    through = (f" through {', '.join(map(repr, record.via))}" if record.via else "")
    if forced == _INTERNAL:
        if (source, moved) not in chart.internal or nodes[0] != source:
            return (f"made an internal transition in {source!r} on {moved} and ended in "
                    f"{state!r}{through}; {source!r} has no transition without a target on "
                    f"{moved}" if (source, moved) not in chart.internal else
                    f"made an internal transition in {source!r} on {moved}, yet its path "
                    f"starts in {nodes[0]!r}: an internal transition leaves nothing")
    else:
        keys = [(source, "*" if forced else moved, forced)]
        if forced:  # a budget may have struck on an eventless move after the event's
            keys.append((source, moved, ""))
        landed = nodes[0]
        if not any(landed in legal.get(key, ()) for key in keys):
            allowed = sorted({target for key in keys for target in legal.get(key, ())})
            if not record.via:
                return (f"moved from {source or '(start)'!r} to {state!r} {how}; the definition "
                        f"allows {', '.join(map(repr, allowed)) or 'no such transition'}")
            return (f"moved from {source or '(start)'!r} to {state!r} {how}{through}; its first "
                    f"move, to {landed!r}, is none the definition allows (it allows "
                    f"{', '.join(map(repr, allowed)) or 'no such transition'})")
        if not any(landed in plain.get(key, ()) for key in keys) and not _resumes(
                chart, landed, visited):
            return (f"moved from {source or '(start)'!r} to {landed!r} {how}, a state its "
                    "target's history could resume only had the run been there before")
    visited.add(nodes[0])  # an eventless path may leave a compound and resume it at once
    for position in range(1, len(nodes)):
        before, landed = nodes[position - 1], nodes[position]
        keys = [(before, _ALWAYS, ""), (before, _DONE, "")]
        if forced and forced != _INTERNAL:
            keys.append((before, "*", forced))
        if not any(landed in legal.get(key, ()) for key in keys):
            allowed = sorted({target for key in keys for target in legal.get(key, ())})
            return (f"moved from {source or '(start)'!r} to {state!r} {how}{through}; "
                    f"{before!r} -> {landed!r} is no eventless move the definition declares "
                    f"(from {before!r} it allows "
                    f"{', '.join(map(repr, allowed)) or 'none'})")
        if not any(landed in plain.get(key, ()) for key in keys) and not _resumes(
                chart, landed, visited):
            return (f"moved from {source or '(start)'!r} to {state!r} {how}{through}; "
                    f"{before!r} -> {landed!r} resumes a history the run never made")
        visited.add(landed)
    return ""


def _region_move_problem(definition: WorkflowDefinition, chart: _Chart,
                         move: tuple[str, str, str]) -> str:
    """Gives why a move a region (or map item) made is not one its flow declares ("" when it
    is): a region starts in its initial leaf, and moves as the transitions of its states (its
    region's included) say, with the eventless moves after them."""
    source, event, target = move
    states = definition.states
    if not source:
        scope = states[target].scope if target in states else None
        start = chart.starts.get(scope or "")
        if start is None:
            return (f"started a region in {target!r}, which is in no region or map item")
        if target == start or target in chart.onward.get(start, ()):
            return ""
        return (f"started a region of {chart.owner.get(scope or '', '?')!r} in {target!r}; "
                f"{scope!r} starts in {start!r}")
    if source in chart.scoped and target == source:
        return ""  # a region of a nested parallel or map state moved
    inner = states.get(source)
    if inner is None or inner.scope is None:
        return (f"had a region move from {source!r} to {target!r} on {event}, but "
                f"{source!r} is in no region or map item")
    if inner.final:
        return ""  # terminal_stays_terminal's kind of fault, told by the join's rule
    allowed = _region_targets(definition, chart, source, event)
    if target in allowed:
        return ""
    return (f"had a region of {chart.owner.get(inner.scope, '?')!r} move from {source!r} to "
            f"{target!r} on {event}; the definition allows "
            f"{', '.join(map(repr, sorted(allowed))) or 'no such transition'}")


def _region_targets(definition: WorkflowDefinition, chart: _Chart, source: str, event: str
                    ) -> frozenset[str]:
    """Gives where a region in `source` may move on `event`: its transitions, a forced move
    of its step or approval (a region records no reason), an internal transition, a nested
    join, each followed by the eventless moves it may lead on to."""
    known = chart.memo.get((source, event))
    if known is not None:
        return known
    legal = _legal_table(definition)
    first = set(legal.get((source, event, ""), ()))
    for reason in ("ambiguous_failure", "retries_exhausted", "approval_expired"):
        first.update(legal.get((source, "*", reason), ()))
    if (source, event) in chart.internal:
        first.add(source)
    found = set(first)
    for reached in first:
        found.update(chart.onward.get(reached, ()))
    chart.memo[(source, event)] = frozenset(found)
    return chart.memo[(source, event)]


@_builtin("guards_held", "a guarded transition is crossed only when its guard held, and the "
                         "first transition whose guard holds is the one taken (an eventless "
                         "move's, a choice's and a join's included)")
def guards_held(definition: WorkflowDefinition, history: History) -> Iterator[Violation]:
    for index, record, judged in _judgements(definition, history):
        if judged.problem:
            eid = record.execution
            yield Violation("guards_held", f"{eid} {judged.problem}", eid, record.step,
                            (index,))


GuardOutcome = tuple[str, str, int, bool]  # (state, event or always/done, index, held)


class _Judged(NamedTuple):
    outcomes: tuple[GuardOutcome, ...]
    problem: str
    #: the eventless moves and the join on the path were judged too (else coverage infers
    #: their outcomes from the path)
    whole: bool = False


_NOTHING = _Judged((), "")


@per_history
def _judgements(definition: WorkflowDefinition, history: History
                ) -> list[tuple[int, Committed, _Judged]]:
    """Gives, for each accepted commit whose guards can be evaluated again, the outcomes of the
    guards its move was chosen by and what was wrong with the choice."""
    found: list[tuple[int, Committed, _Judged]] = []
    last: dict[str, Committed] = {}
    chart = _chart(definition)
    for index, record in enumerate(history):
        if type(record) is not Committed or record.decision != "accepted":
            continue
        prev = last.get(record.execution)
        last[record.execution] = record
        if record.moved:
            judged = _judged(definition, record, prev)
            if record.inner and chart.used:
                inside = _judged_regions(definition, chart, record, prev)
                if inside is not _NOTHING:
                    judged = _Judged((*judged.outcomes, *inside.outcomes),
                                     judged.problem or inside.problem, judged.whole)
            if judged is not _NOTHING:
                found.append((index, record, judged))
    return found


def _judged(definition: WorkflowDefinition, record: Committed, prev: Committed | None
            ) -> _Judged:
    """Evaluates again the guards a committed move was chosen by, on the context the previous
    commit recorded: its event's transitions from where the run was, and then (a statechart)
    each eventless transition on its path and the join's `done:` (replaying the context the
    moves' actions made; those are judged only when the replay gives the context the commit
    recorded, so nothing is judged on a context the run never had)."""
    chart = _chart(definition)
    states = definition.states
    moved, source, forced = record.moved, record.from_state, record.forced
    if forced and forced != _INTERNAL:
        return _NOTHING  # a forced move, chosen by no guard
    if not chart.used and (source, moved) not in chart.guarded:
        return _NOTHING  # no guard chose the move (the common case: checked first)
    if source and (source not in states or states[source].final):
        return _NOTHING
    if source == record.state and source in chart.scoped and moved != _DONE:
        return _NOTHING  # a region moved: its context is not recorded
    if moved == _DONE and source in chart.scoped:
        return _judged_join(definition, chart, record, prev) if chart.used else _NOTHING
    if moved != record.event_type:
        return _NOTHING  # a substituted event (a timeout, an invalid output)
    event = Event(record.event_id, record.event_type, record.event_source,
                  record.payload or {}, record.answers)
    nodes = (*record.via, record.state)
    if not source:
        if moved != STARTED or not chart.used:
            return _NOTHING
        before: Mapping[str, Any] = {**definition.initial_context, **(record.payload or {})}
        first: CompiledTransition | None = None
        target = definition.initial
    elif prev is None or prev.context is None:
        return _NOTHING
    else:
        before = prev.context
        candidates = states[source].on.get(moved, ())
        outcomes: list[GuardOutcome] = []
        if not candidates:
            after = states[source].after_target
            if moved != TIMER_FIRED or after is None or not chart.used:
                return _NOTHING
            first, target = None, after
        else:
            chosen, problem = _first_held(candidates, before, event, source, moved, outcomes)
            said = f"moved {source!r} -> {record.state!r} on {moved}"
            guarded = any(transition.guard is not None for transition in candidates)
            if problem:
                return _Judged(tuple(outcomes), f"{said}, but {problem}")
            if chosen is None:
                texts = ", ".join(repr(t.guard_text) for t in candidates)
                return _Judged(tuple(outcomes), f"{said} though no guard held ({texts})")
            if chosen.internal != (forced == _INTERNAL):
                return _Judged(tuple(outcomes), (
                    f"{said}, but the first transition whose guard holds "
                    + (f"is internal: the run stays in {source!r}" if chosen.internal else
                       f"goes to {chosen.target_leaf!r}")
                    + (f" (guard {chosen.guard_text!r})" if chosen.guard_text else "")))
            if guarded and not chosen.internal and nodes[0] != chosen.target_leaf and (
                    nodes[0] not in chart.landings.get(chosen.target, ())):
                return _Judged(tuple(outcomes), (
                    f"{said}, but the first transition whose guard holds goes to "
                    f"{chosen.target_leaf!r}"
                    + (f" (guard {chosen.guard_text!r})" if chosen.guard_text else "")))
            if not chart.used:
                return _Judged(tuple(outcomes), "") if guarded else _NOTHING
            first, target = chosen, chosen.target
        base = tuple(outcomes)
        replayed = _replay(definition, chart, record, before, event, first, target)
        return _Judged((*base, *replayed.outcomes), replayed.problem, replayed.whole) if (
            base or replayed is not _NOTHING) else _NOTHING
    return _replay(definition, chart, record, before, event, first, target)


def _judged_regions(definition: WorkflowDefinition, chart: _Chart, record: Committed,
                    prev: Committed | None) -> _Judged:
    """Evaluates again the guards that chose where a parallel state's regions went in a
    commit: a region's first eventless choice as it starts (on the context it starts with,
    the execution's, when no entry action ran on the way in), and the transitions a region
    took on the commit's event (on the region's context the previous commit recorded). A
    region that went where no transition whose guard held could lead (its eventless moves
    and forced moves after it included) is told. Map items are not judged (they share their
    states, and a move is not told by item)."""
    states = definition.states
    event = Event(record.event_id, record.event_type, record.event_source,
                  record.payload or {}, record.answers)
    outcomes: list[GuardOutcome] = []
    problem = ""
    # regions start with the event the execution entered with: the commit's own, unless it
    # was substituted (a timeout's or an invalid output's failure, an expiry's denial) or a
    # join's `done` on the way; and on the context it entered with, unless the path entered
    # the parallel state twice (each visit's regions start anew)
    starts_judged = record.moved == record.event_type and record.from_state not in (
        chart.scoped) and not any(node in chart.scoped for node in record.via)
    for source, moved, target in record.inner:
        scope = states[target].scope if target in states else None
        owner = chart.owner.get(scope or "")
        if scope is None or owner is None or states[owner].kind != "parallel":
            continue
        if not source:  # a region starting, with the execution entering its parallel state
            node = chart.starts.get(scope, "")
            if (not starts_judged or owner != record.state or record.context is None
                    or node not in states or any(
                        states[name].entry for name in _chain_below(states, node, owner))):
                continue
            context: Mapping[str, Any] | None = record.context
            candidates, label = states[node].always, _ALWAYS
        else:
            if (moved != record.event_type or source not in states or source in chart.scoped
                    or states[source].final):
                continue  # a substituted event (a timeout, an invalid output), a nested join
            node, context = source, _region_before(prev, scope, source)
            candidates, label = states[source].on.get(moved, ()), moved
        if context is None or not any(t.guard is not None for t in candidates):
            continue
        chosen, raised = _first_held(candidates, context, event, node, label, outcomes)
        if raised or problem:
            continue
        allowed = _region_reach(definition, chart, node, chosen, bool(source))
        if allowed is not None and target not in allowed:
            region = f"a region of {owner!r}"
            how = (f"started in {target!r}" if not source else
                   f"moved {source!r} -> {target!r} on {moved}")
            problem = (f"{region} {how}, but " + (
                f"the first {'eventless ' if not source else ''}transition of {node!r} whose "
                f"guard holds goes to {chosen.target_leaf!r}"
                + (f" (guard {chosen.guard_text!r})" if chosen.guard_text else "")
                if chosen is not None else "no guard of " + ", ".join(
                    repr(t.guard_text) for t in candidates) + " held"))
    return _Judged(tuple(outcomes), problem) if outcomes or problem else _NOTHING


def _region_before(prev: Committed | None, scope: str, state: str
                   ) -> Mapping[str, Any] | None:
    """Gives the context the previous commit recorded for the region of `scope` in `state`
    (None when not exactly one region is found so)."""
    if prev is None or len(prev.regions) != len(prev.region_contexts):
        return None
    found = [context for (rid, at, _), context in zip(prev.regions, prev.region_contexts,
                                                        strict=True)
             if at == state and rid.rpartition("/")[2] == scope]
    return found[0] if len(found) == 1 else None


def _region_reach(definition: WorkflowDefinition, chart: _Chart, node: str,
                  chosen: CompiledTransition | None, evented: bool) -> frozenset[str] | None:
    """Gives the leaves a region may be in after `chosen` (None: no judgement): its target's
    landings and the eventless moves on from them; for an event's move, also a forced move on
    that event (a region records no reason: an escalation, retries exhausted, an approval
    expired) and where it leads, chosen or not. With no transition chosen, a starting region
    stays where its eventless choice is, an evented move goes only where a forced one does."""
    if chosen is not None and chosen.internal:
        return None
    first: set[str] = set()
    if chosen is not None:
        first = set(chart.landings.get(chosen.target, ())) or {chosen.target_leaf}
    elif not evented:
        first = {node}
    reach = set(first)
    for leaf in first:
        reach.update(chart.onward.get(leaf, ()))
    if evented:  # forced whatever the guards say
        for reason in ("ambiguous_failure", "retries_exhausted", "approval_expired"):
            forced = _legal_table(definition).get((node, "*", reason), ())
            reach.update(forced)
            for leaf in forced:
                reach.update(chart.onward.get(leaf, ()))
    return frozenset(reach)


def _first_held(candidates: Sequence[CompiledTransition], context: Mapping[str, Any],
                event: Event, state: str, label: str, outcomes: list[GuardOutcome]
                ) -> tuple[CompiledTransition | None, str]:
    """Gives the first transition whose guard holds (or a sentence if a guard raised), adding
    the outcome of each guard tried to `outcomes`."""
    for position, transition in enumerate(candidates):
        if transition.guard is None:
            return transition, ""
        try:
            held = bool(transition.guard(context, event))
        except Exception as exc:  # the machine should have rejected the event
            return None, (f"guard {transition.guard_text!r} raises {type(exc).__name__}: "
                          f"{exc} on what was recorded")
        outcomes.append((state, label, position, held))
        if held:
            return transition, ""
    return None, ""


def _replay(definition: WorkflowDefinition, chart: _Chart, record: Committed,
            context: Mapping[str, Any], event: Event, first: CompiledTransition | None,
            target: str, *, acted_max: int | None = None) -> _Judged:
    """Replays a committed path's context from `context`: its first move (`first`, or a
    timeout's or the start's move to `target`), then each eventless move on to where it
    settled, judging each eventless choice. Gives the outcomes and the first wrong choice,
    or nothing when the replay does not give the context the commit recorded (a region's
    merge, a function that is not pure: then the guards' context is not known). With
    `acted_max`, a path that ran more actions than that is not judged either."""
    states = definition.states
    nodes = (*record.via, record.state)
    acted = [0]
    if first is not None and first.internal:
        ctx = _run_actions(context, event, first.actions, acted)
    else:
        ctx = _moved_context(definition, context, event, record.from_state,
                             first.declared_in if first is not None else "", target, nodes[0],
                             first.actions if first is not None else (), acted)
    outcomes: list[GuardOutcome] = []
    problem = ""
    for position, node in enumerate(nodes):
        if ctx is None:
            return _NOTHING
        ahead = nodes[position + 1] if position + 1 < len(nodes) else None
        if node in chart.scoped:
            if ahead is None:
                break  # entered a parallel or map state: its regions start apart
            return _NOTHING  # a join on entering: the regions' contexts are not recorded
        eventless = states[node].always if node in states else ()
        taken, raised = _first_held(eventless, ctx, event, node, _ALWAYS, outcomes)
        if raised:
            return _NOTHING  # the machine would have refused: judged on a replay, not told
        if ahead is None:
            if taken is not None and not problem:
                problem = (f"settled in {node!r} on {record.moved}, though its eventless "
                           f"transition to {taken.target!r} holds"
                           + (f" (guard {taken.guard_text!r})" if taken.guard_text else ""))
            break
        made = taken if taken is not None and (ahead == taken.target_leaf or ahead in (
            chart.landings.get(taken.target, ()))) else next(
            (t for t in eventless if ahead == t.target_leaf
             or ahead in chart.landings.get(t.target, ())), None)
        if made is None:
            return _NOTHING  # no declared eventless move: legal_transitions tells of it
        if made is not taken and not problem:
            problem = (f"moved on from {node!r} to {ahead!r} on {record.moved}, but "
                       + (f"the first eventless transition whose guard holds goes to "
                          f"{taken.target_leaf!r}" if taken is not None else
                          "no guard of its eventless transitions held ("
                          + ", ".join(repr(t.guard_text) for t in eventless) + ")"))
        ctx = _moved_context(definition, ctx, event, node, made.declared_in, made.target,
                             ahead, made.actions, acted)
    if ctx is None or ctx != record.context or (acted_max is not None and acted[0] > acted_max):
        return _NOTHING
    return _Judged(tuple(outcomes), problem, True)


def _moved_context(definition: WorkflowDefinition, context: Mapping[str, Any], event: Event,
                   leaving: str, declared: str, target: str, landed: str,
                   actions: Sequence[Any], acted: list[int]) -> dict[str, Any] | None:
    """Gives the context after a move from the leaf `leaving` (none: a start) to `landed` by
    a transition declared in `declared` to `target`: exit actions innermost first, the
    transition's, then entry actions outermost first, below the lowest compound state that
    holds both its source and its target (SCXML's order); None when an action raises."""
    states = definition.states
    exits: tuple[str, ...] = ()
    entries: tuple[str, ...] = ()
    if definition.scoped and landed in states:
        domain = _domain(states, declared or leaving, target if target in states else landed)
        if leaving in states:
            exits = _chain_below(states, leaving, domain)
        entries = tuple(reversed(_chain_below(states, landed, domain)))
    steps = [action for name in exits for action in states[name].exit]
    steps += actions
    steps += [action for name in entries for action in states[name].entry]
    return _run_actions(context, event, steps, acted)


def _run_actions(context: Mapping[str, Any], event: Event, actions: Sequence[Any],
                 acted: list[int]) -> dict[str, Any] | None:
    updated = dict(context)
    for action in actions:
        acted[0] += 1
        try:
            changed = action(updated, event)
        except Exception:  # the machine would have refused the event
            return None
        if changed:
            updated.update(changed)
    return updated


def _domain(states: Mapping[str, Any], source: str, target: str) -> str | None:
    """Gives the lowest compound state that is a proper ancestor of both (None: the top)."""
    if not source or source not in states:
        return None
    above = states[target].ancestors
    for ancestor in states[source].ancestors:
        if ancestor in above:
            return ancestor
    return None


def _chain_below(states: Mapping[str, Any], leaf: str, domain: str | None) -> tuple[str, ...]:
    """Gives `leaf` and its ancestors below `domain`, innermost first."""
    chain = (leaf, *states[leaf].ancestors)
    return chain[:chain.index(domain)] if domain in chain else chain


def _judged_join(definition: WorkflowDefinition, chart: _Chart, record: Committed,
                 prev: Committed | None) -> _Judged:
    """Evaluates again the `done:` guards of a join, on the event the regions' outcomes make
    (`failed`, `outcomes`, `failing`) and the context the join merged: a map's is the one
    before plus its results; a parallel state's is known only when no action ran on the way
    out, when it is the one recorded."""
    source = record.from_state
    state = definition.states[source]
    if source in chart.exiting:
        return _NOTHING  # the join runs its regions' exit actions after it chose: not recorded
    view = _join_view(definition, chart, record, prev, source)
    if view is None or view.outcomes is None or prev is None or prev.context is None or (
            record.context is None):
        return _NOTHING
    if state.kind == "map":
        if source not in chart.results_kept:
            return _NOTHING
        context: Mapping[str, Any] = {**prev.context,
                                      state.results: record.context.get(state.results)}
        failed: list[Any] = [int(name) for name, outcome in view.outcomes
                             if outcome is not None and outcome != "success"]
        acted_max = None
    else:
        context = record.context
        failed = [name for name, outcome in view.outcomes
                  if outcome is not None and outcome != "success"]
        acted_max = 0
    payload = {"failed": failed, "outcomes": dict(view.outcomes), "failing": view.failing}
    event = Event(record.event_id, _DONE, record.event_source, payload, record.answers)
    outcomes: list[GuardOutcome] = []
    chosen, problem = _first_held(state.done, context, event, source, _DONE, outcomes)
    said = f"joined {source!r} and moved to {record.state!r}"
    if problem:
        return _Judged(tuple(outcomes), f"{said}, but {problem}") if acted_max is None else (
            _NOTHING)
    if chosen is None:
        texts = ", ".join(repr(t.guard_text) for t in state.done)
        judged = _Judged(tuple(outcomes), f"{said} though no guard of its done: held ({texts})")
        return judged if acted_max is None else _NOTHING
    landed = (*record.via, record.state)[0]
    if record.state == source:
        return _Judged(tuple(outcomes), "")  # undoing first: where it goes is kept for later
    if landed != chosen.target_leaf and landed not in chart.landings.get(chosen.target, ()):
        wrong = _Judged(tuple(outcomes), (
            f"{said}, but the first done transition whose guard holds goes to "
            f"{chosen.target_leaf!r}" + (f" (guard {chosen.guard_text!r})"
                                          if chosen.guard_text else "")
            + f" (failed: {failed!r})"))
        if acted_max is None:
            return wrong
        replayed = _replay(definition, chart, record, context, event, None, landed,
                           acted_max=acted_max)
        return wrong if replayed is not _NOTHING else _NOTHING
    replayed = _replay(definition, chart, record, context, event, chosen, chosen.target,
                       acted_max=acted_max)
    if replayed is _NOTHING:
        return _Judged(tuple(outcomes), "") if acted_max is None else _NOTHING
    return _Judged((*outcomes, *replayed.outcomes), replayed.problem, True)


class _JoinView(NamedTuple):
    """What a parallel or map state's regions (items) had come to when it joined."""

    regions: int
    final: int
    failed: int
    failing: bool
    #: (region name or item index, outcome: None while not final), in order, when each move
    #: could be told to its region
    outcomes: tuple[tuple[str, str | None], ...] | None
    #: the state was entered by the commit that joined it (its regions were never recorded)
    instant: bool


def _join_view(definition: WorkflowDefinition, chart: _Chart, record: Committed,
               prev: Committed | None, parallel: str) -> _JoinView | None:
    """Gives what the regions of `parallel` (a parallel or map state the commit joined) had
    come to: their states after the previous commit, and the moves this commit made in them
    (a region by its scope, an item by the call, timer or request its event answers, or by
    being the only one where the move began). None when the previous commit did not record
    the regions, or when the commit's path entered `parallel` again after joining it (the new
    visit's regions start in the same commit: its moves cannot be told from the old ones')."""
    if record.from_state == parallel and parallel in (*record.via, record.state):
        return None
    states = definition.states
    state = states[parallel]
    roots = chart.roots.get(parallel, frozenset())
    base = f"{record.execution}/{parallel}/"
    rows: list[list[str]] = []  # [name, id, state, status]
    instant = record.from_state != parallel or prev is None or prev.state != parallel
    if not instant:
        assert prev is not None
        for rid, at, status in prev.regions:
            if rid.startswith(base):
                visit, _, name = rid[len(base):].partition("/")
                if visit.isdigit() and name and "/" not in name:
                    rows.append([name, rid, at, status])
        if not rows:
            return None
    elif state.kind == "parallel":
        rows = [[region, "", "", "created"] for region, _ in state.regions]
    if state.kind == "map":
        rows.sort(key=lambda row: int(row[0]) if row[0].isdigit() else -1)
    by_name = {row[0]: row for row in rows}
    moved: set[int] = set()
    exact = True
    loose: list[str] = []  # targets of moves no region could be told for
    for source, _, target in record.inner:
        inner = states.get(target)
        if inner is None or inner.scope not in roots:
            continue
        row: list[str] | None = None
        if state.kind == "parallel":
            row = by_name.get(inner.scope or "")
        elif not source:
            row = next((r for r in rows if r[3] == "created" and id(r) not in moved), None)
            if row is None and instant:
                row = [str(len(rows)), "", "", "created"]
                rows.append(row)
        else:
            answered = [r for r in rows if r[1] and record.answers.startswith(f"{r[1]}/")]
            if len(answered) != 1:
                answered = [r for r in rows if r[2] == source and r[3] != "final"
                            and id(r) not in moved]
            row = answered[0] if len(answered) == 1 else None
        if row is None:
            exact = False
            loose.append(target)
            continue
        moved.add(id(row))
        row[2], row[3] = target, "final" if inner.final else "running"
    # a map item still waiting to start when its map joined either could not start (its input
    # failed: a failed item) or was left unstarted by a failure: finished, either way, of
    # an outcome the records do not tell
    unstarted = sum(1 for row in rows if row[3] == "created") if state.kind == "map" else 0
    final = sum(1 for row in rows if row[3] == "final") + sum(
        1 for target in loose if states[target].final) + unstarted
    failed = sum(1 for row in rows if row[3] == "final" and _outcome(states, row[2]) != "success"
                 ) + sum(1 for target in loose if states[target].final
                         and states[target].outcome != "success")
    failing = (failed + unstarted > state.tolerated_failures if state.kind == "map"
               else failed > 0)
    outcomes = tuple((row[0], _outcome(states, row[2]) if row[3] == "final" else None)
                     for row in rows) if exact and not unstarted else None
    return _JoinView(len(rows), final, failed, failing, outcomes, instant)


def _outcome(states: Mapping[str, Any], state: str) -> str | None:
    """Gives the outcome of a region that ended in `state`: a map item that could not start
    rests nowhere, and failed."""
    inner = states.get(state)
    return inner.outcome if inner is not None else "failure"


def guard_outcomes(definition: WorkflowDefinition, history: History
                   ) -> Iterator[tuple[str, str, int, bool]]:
    """Gives (state, event, transition index, held) for each guard the history shows evaluated
    (for coverage): by an accepted transition (the guards before the one taken did not hold),
    by an event the machine refused because no guard held (`rejected:guard_false`), by an
    eventless move (event `always`) or a join (`done`) evaluated again on a replayed context,
    and, inside regions (whose contexts are not recorded), by the transition a region's move
    took (the guards before it did not hold)."""
    contexts: dict[str, Mapping[str, Any]] = {}
    states: dict[str, str] = {}
    delivered: dict[tuple[str, str], Delivered] = {}
    judged = {index: found for index, _, found in _judgements(definition, history)}
    chart = _chart(definition)
    for index, record in enumerate(history):
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
        if record.context is not None:
            contexts[record.execution] = record.context
        states[record.execution] = record.state
        found = judged.get(index)
        if found is not None:
            yield from found.outcomes
        if chart.used:
            if record.moved and (found is None or not found.whole):
                yield from _inferred_outcomes(chart, record)
            for source, event, target in record.inner:
                inner = chart.states.get(source)
                if inner is not None:
                    yield from _taken(chart, source, event, inner.on.get(event, ()), target)


def _inferred_outcomes(chart: _Chart, record: Committed) -> Iterator[GuardOutcome]:
    """Gives the outcomes of the eventless and `done:` guards a committed path shows, told by
    where each move went (for coverage, where the context they read is not known)."""
    states = chart.states
    nodes = (*record.via, record.state)
    source = record.from_state
    if source in chart.scoped and source != record.state and (
            record.moved == _DONE or record.forced == _COMPENSATED):
        yield from _taken(chart, source, _DONE, states[source].done, nodes[0])
    for position, node in enumerate(nodes[:-1]):
        inner = states.get(node)
        if inner is not None:
            label = _DONE if node in chart.scoped else _ALWAYS
            yield from _taken(chart, node, label, inner.done if label == _DONE
                              else inner.always, nodes[position + 1])


def _taken(chart: _Chart, state: str, label: str, candidates: Sequence[CompiledTransition],
           landed: str) -> Iterator[GuardOutcome]:
    """Gives the guard outcomes a move from `state` that ended in `landed` shows: the
    transition whose target leads there held, the guarded ones before it did not."""
    if not any(transition.guard is not None for transition in candidates):
        return
    for position, transition in enumerate(candidates):
        lands = (state,) if transition.internal else chart.landings.get(
            transition.target, (transition.target_leaf,))
        taken = landed in lands or any(landed in chart.onward.get(leaf, ()) for leaf in lands)
        if transition.guard is not None:
            yield state, label, position, taken
        if taken or transition.guard is None:
            return


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


#: the faults in the middle of a delivery after which the machine may rightly answer that the
#: event is a duplicate: a crash or a failed write after its commit, or a second worker that
#: took the event first
_MIDWAY = frozenset({"crash", "store_write_failure", "second_worker"})


def _each_approval_decision(definition: WorkflowDefinition, history: History
                            ) -> Iterator[tuple[int, str, Event, str, str]]:
    commits = _has_commits(history)
    chart = _chart(definition)
    requests: dict[str, Observed] = {}
    states: dict[str, str] = {}
    contexts: dict[str, Mapping[str, Any]] = {}
    regions: dict[str, tuple[tuple[str, str, str], ...]] = {}
    delivered: dict[tuple[str, str], Delivered] = {}
    # without commits: the state each delivery met, and the deliveries no answer came back for
    # (the machine crashed in them), whose copy it may later call a duplicate
    met: dict[tuple[str, str], tuple[str, Observed | None, int]] = {}
    delivered_at: dict[tuple[str, str], int] = {}
    awaiting: set[tuple[str, str]] = set()  # delivered, not answered yet
    unanswered: set[tuple[str, str]] = set()
    taken: set[tuple[str, str]] = set()  # the deliveries counted as accepted
    for index, record in enumerate(history):
        if type(record) is Observed:
            requests[record.execution] = record
            if not commits:
                states[record.execution] = record.state
            continue
        if type(record) is FaultInjected and not commits and record.fault in _MIDWAY:
            unanswered.update(key for key in awaiting if key[0] == record.execution)
            continue  # a delivery cut midway: its answer may be a duplicate's
        if type(record) is Delivered:
            sent_key = (record.execution, record.event_id)
            if not commits:
                if sent_key in awaiting:  # sent again: the one before got no answer
                    unanswered.add(sent_key)
                elif sent_key not in delivered:  # its first delivery
                    met[sent_key] = (states.get(record.execution, ""),
                                     requests.get(record.execution), index)
                awaiting.add(sent_key)
                delivered_at[sent_key] = index
            delivered[sent_key] = record
            continue
        if type(record) is Committed:
            if record.decision != "accepted":
                continue
            eid = record.execution
            before_state, before_context = states.get(eid, ""), contexts.get(eid)
            before_regions = regions.get(eid, ())
            states[eid] = record.state
            regions[eid] = record.regions
            if record.context is not None:
                contexts[eid] = record.context
            if record.event_type not in _APPROVALS:
                continue
            event = Event(record.event_id, record.event_type, record.event_source,
                          record.payload or {}, record.answers)
            state = record.from_state or before_state
            if state in chart.scoped:  # a region's request: the region in it decides
                asking = [(rid, at) for rid, at, _ in before_regions
                          if record.answers.startswith(f"{rid}/")]
                if asking:
                    state, before_context = max(asking, key=lambda pair: len(pair[0]))[1], None
        elif type(record) is Decided and not commits:
            eid = record.execution
            sent_key = (eid, record.event_id)
            awaiting.discard(sent_key)
            first_crashed = sent_key in unanswered
            unanswered.discard(sent_key)
            request = requests.get(eid)
            # the grant counts from its delivery: a machine that crashed in it may have
            # recovered and acted on it (dispatched its effect) before it answered
            at = delivered_at.get(sent_key, index)
            if record.decision.partition(":")[0] == "accepted":
                state = states.get(eid, "")
                taken.add(sent_key)
            elif (record.decision == "ignored:duplicate" and first_crashed
                  and sent_key not in taken):
                # a delivery cut midway may have been taken (committed, then no answer, or
                # taken by a second worker): the copy is then a duplicate. Judged as of its
                # first delivery, and counted only when it was a genuine grant then: the
                # machine may as well have refused it (nothing tells, without commits)
                state, request, at = met.get(sent_key, ("", None, index))
                sent = delivered.get(sent_key)
                if sent is None or sent.type not in _APPROVALS:
                    continue
                event = Event(sent.event_id, sent.type, sent.source, sent.payload or {},
                              sent.answers)
                if not _not_genuine(definition, event, state, request, None):
                    taken.add(sent_key)
                    yield at, eid, event, state, ""
                continue
            else:
                continue
            sent = delivered.get(sent_key)
            if sent is None or sent.type not in _APPROVALS:
                continue
            event = Event(sent.event_id, sent.type, sent.source, sent.payload or {},
                          sent.answers)
            yield at, eid, event, state, _not_genuine(definition, event, state, request, None)
            continue
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
    pending = {seen.request: seen.action_hash} if seen is not None and seen.request else {}
    if seen is not None:  # inside a parallel or map state, every region's request
        pending.update(dict(getattr(seen, "approvals", ()) or ()))
    if seen is None or not pending:
        return "no approval request was pending"
    if event.answers not in pending:
        return f"it answers request {event.answers!r}, not the current {seen.request!r}"
    expected = pending[event.answers]
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
            if not state.step.needs_approval or state.step.approval_when is not None:
                ungated.add(state.step.tool)
    if not gated:
        return
    owners = _owners_of(definition, history)
    conditional = _chart(definition).conditional
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
            if owner.state in conditional and not _approval_needed(definition, history,
                                                                     owner):
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
                            f"with input {_quoted(record.input)} (ledger #{record.seq}), but "
                            f"{why}", execution, record.step, (index,))
            continue
        available.remove(match)
        done[action] = index


def _approval_needed(definition: WorkflowDefinition, history: History, owner: _Owner) -> bool:
    """Tells whether a conditional approval (`needs_approval: <expression>`) held on the
    context the step's state was entered with (the commit that commanded its call, and its
    event); one that raises asks for a person, as the machine does. A region's step is judged
    on its region's context, when the history records it (else not judged: False)."""
    step = definition.states[owner.state].step
    if step is None or step.approval_when is None:
        return True
    entered = history[owner.position] if owner.position >= 0 else None
    if owner.context is None or type(entered) is not Committed:
        return False
    event = Event(entered.event_id, entered.event_type, entered.event_source,
                  entered.payload or {}, entered.answers)
    try:
        return bool(step.approval_when(owner.context, event))
    except Exception:  # the safe side of a broken condition is to ask a person
        return True


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
    chart = _chart(definition)
    in_regions: dict[str, set[str]] = defaultdict(set)  # a region's key -> its effect ids
    for index, record in enumerate(history):
        if type(record) is not Committed or record.decision != "accepted":
            continue
        eid = record.execution
        if record.moved:
            attempts[eid] = set()
        step = definition.states[record.state].step if record.state in definition.states \
            else None
        for effect in record.effects:
            inner = _key_state(chart, effect.key) if chart.scoped and (
                not effect.compensation) and (step is None or step.tool != effect.tool) else ""
            if inner:  # a region's step: its key is one entry into its state
                seen = in_regions[effect.key]
                seen.add(effect.id)
                bounded = definition.states[inner].step
                if bounded is not None and bounded.tool == effect.tool and (
                        len(seen) > bounded.attempts_max) and (eid, effect.key) not in reported:
                    reported.add((eid, effect.key))
                    yield Violation("retries_within_bounds",
                                    f"{eid} attempted {effect.tool} in {inner!r} (a region's, "
                                    f"key {effect.key!r}) {len(seen)} times in one entry into "
                                    f"the state; attempts_max is {bounded.attempts_max}", eid,
                                    record.step, (index,))
                continue
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
    chart = _chart(definition)
    previous: dict[str, Committed] = {}
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
        entered = _entered(chart, record, previous.get(eid)) if record.moved else ()
        previous[eid] = record
        for state in entered:
            transitions[eid] += 1
            visits[eid][state] += 1
            if not record.forced or record.forced == _INTERNAL:
                if budgets.transitions_max is not None and (
                        transitions[eid] > budgets.transitions_max):
                    problem = (f"made transition {transitions[eid]}; transitions_max is "
                               f"{budgets.transitions_max}")
                elif budgets.visits_max is not None and (
                        visits[eid][state] > budgets.visits_max):
                    problem = (f"entered {state!r} {visits[eid][state]} times; "
                               f"visits_max is {budgets.visits_max}")
            if problem:
                break
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


def _entered(chart: _Chart, record: Committed, prev: Committed | None) -> tuple[str, ...]:
    """Gives the states a committed move entered, one per transition it made, as the machine
    counts them against its budgets: the eventless ones on its path included; none for an
    internal transition's own move, for a region's move inside a parallel or map state (the
    state is not entered again), or for a join that began undoing."""
    if not chart.used:
        return (record.state,)
    nodes = (*record.via, record.state)
    if record.forced == _INTERNAL:
        return nodes[1:]
    source = record.from_state
    if source == record.state and source in chart.scoped and not record.via:
        if record.moved == _DONE or prev is None:
            return ()
        base = f"{record.execution}/{source}/"
        again = _own_visits(record.regions, base) - _own_visits(prev.regions, base)
        return (source,) if again else ()  # entered again: a new visit
    return nodes


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


class _Undo(NamedTuple):
    position: int  # the compensation's Applied record
    forward: int  # the Applied record of the effect it undid


class _Saga(NamedTuple):
    pairs: dict[str, list[_Undo]]  # per execution, each undo with what it undid
    forward: dict[str, list[int]]  # per execution, every compensable effect
    undo_tools: dict[str, tuple[str, ...]]
    owners: dict[str, _Owner]
    completed: dict[str, int]  # per key, the commit that took its step's success

    def execution_of(self, record: Applied | Dispatched) -> str:
        owner = self.owners.get(record.key)
        return record.execution or (owner.execution if owner is not None else "")

    def newer(self, history: History, effect: int, than: int) -> bool:
        """Tells whether the effect applied at `effect` is newer than the one at `than`: it
        was commanded once `than`'s step had succeeded (so regions running side by side are
        neither newer, nor is a step still waiting to retry an uncertain attempt), or,
        without regions, applied after it."""
        if not self.completed:  # no region ran side by side with another
            return than < effect
        later = self.owners.get(history[effect].key)  # type: ignore[union-attr]
        earlier = self.owners.get(history[than].key)  # type: ignore[union-attr]
        if later is None or earlier is None or later.position < 0 or earlier.position < 0:
            return than < effect
        answered = self.completed.get(earlier.key)
        return answered is not None and answered <= later.position


@per_history
def _undos(definition: WorkflowDefinition, history: History) -> _Saga:
    """Pairs each compensation applied with the effect it undid: the one whose key its key
    extends (`{key}/undo`), or, for a machine with other keys, the newest effect of its forward
    tools not undone yet. A compensable effect is one of a state whose step declares a
    compensation (told by the commit that commanded it, or by its tool when no state without
    a compensation uses that tool); one applied again with the same input is the same logical
    effect (of the same region or map item), which one undo covers."""
    undoes = _compensable(definition)
    compensable = {name for name, state in definition.states.items()
                   if state.step is not None and state.step.compensation is not None}
    plain = {state.step.tool for state in definition.states.values()
             if state.step is not None and state.step.compensation is None}
    forward_tools = {tool for tools in undoes.values() for tool in tools}
    owners = _owners_of(definition, history)
    chart = _chart(definition)
    saga = _Saga(defaultdict(list), defaultdict(list), undoes, owners, {})
    actions: dict[tuple[str, str, str], int] = {}  # each logical effect's latest application
    taken_back: set[int] = set()  # the effects an undo paired with
    for index, record in enumerate(history):
        if type(record) is Committed:
            if chart.scoped and record.answers and record.decision == "accepted" and (
                    record.event_type == "step.succeeded"):
                answered = owners.get(record.answers)
                if answered is not None and not answered.compensation and _succeeded(
                        record, answered.state):
                    saga.completed.setdefault(answered.key, index)
            continue
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
                taken_back.add(target)
            continue
        if record.tool not in forward_tools:
            continue
        if owner is not None:
            if owner.state not in compensable:
                continue
        elif record.tool in plain:
            continue  # a state without a compensation uses the tool too: cannot tell
        region = _region_identity(chart, record.key) if chart.scoped else ""
        action = (region or eid, record.tool, record.input)
        if action not in actions or actions[action] in taken_back:  # new, or done again
            actions[action] = index
            saga.forward[eid].append(index)
    return saga


@_builtin("compensation_order", "completed steps are undone newest first (a step is newer than "
                                "another when it began after that one was answered: steps of "
                                "regions that ran side by side may be undone in either order)")
def compensation_order(definition: WorkflowDefinition, history: History
                       ) -> Iterator[Violation]:
    saga = _undos(definition, history)
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


@_builtin("compensation_complete", "once compensation begins, every compensable effect applied "
                                   "before it is undone by the end, or a human is asked (a "
                                   "parallel or map state's failure undoes its own regions' "
                                   "effects)", final_only=True)
def compensation_complete(definition: WorkflowDefinition, history: History
                          ) -> Iterator[Violation]:
    saga = _undos(definition, history)
    if not saga.undo_tools:
        return
    pairs, forward = saga.pairs, saga.forward
    chart = _chart(definition)
    begun: dict[str, list[tuple[int, str]]] = defaultdict(list)  # (first undo sent, scope)
    undoing: dict[str, str | None] = {}  # per execution, the scope of the undoing under way
    waiting: dict[str, str] = {}  # an undoing begun whose first undo was not sent yet
    humans: set[str] = set()
    finished: dict[str, int] = {}
    commits = _has_commits(history)
    for index, record in enumerate(history):
        if type(record) is Committed and record.decision == "accepted":
            eid = record.execution
            if record.forced in (_COMPENSATED, "compensation_failed"):
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


def _succeeded(record: Committed, state: str) -> bool:
    """Tells whether an accepted step.succeeded took the success of `state`'s step (not an
    unusable output taken as a failure): the move it made from that state, the region's one
    inside a parallel or map state."""
    if record.from_state == state:
        return record.moved == "step.succeeded"
    return any(source == state and event == "step.succeeded"
               for source, event, _ in record.inner)


def _undo_scope(chart: _Chart, record: Committed) -> str:
    """Gives what the undoing a commit began covers: a parallel or map state's failure (its
    join) undoes the effects of that visit's regions (keys `{execution}/{state}/{visit}/`);
    any other undoing, every effect the run applied ("")."""
    source = record.from_state
    if record.moved != _DONE or source not in chart.scoped:
        return ""
    base = f"{record.execution}/{source}/"
    for effect in record.effects:
        if effect.compensation and effect.key.startswith(base):
            visit = effect.key[len(base):].split("/", 1)[0]
            if visit.isdigit():
                return f"{base}{visit}/"
    return ""


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


# -- statecharts: joins, map results, regions left, eventless runaways ------------------------


class _Join(NamedTuple):
    position: int  # the commit's record
    record: Committed
    state: str  # the parallel or map state joined
    view: _JoinView
    prev: Committed | None  # the execution's commit before: its regions as they were


def _joins(definition: WorkflowDefinition, history: History) -> Iterator[_Join]:
    """Gives each join the commits show: a commit whose move is a parallel or map state's
    `done` (or that began undoing its failure), and a state entered and joined at once on a
    commit's eventless path."""
    chart = _chart(definition)
    if not chart.scoped:
        return
    last: dict[str, Committed] = {}
    for index, record in enumerate(history):
        if type(record) is not Committed or record.decision != "accepted":
            continue
        prev = last.get(record.execution)
        last[record.execution] = record
        if not record.moved:
            continue
        nodes = (*record.via, record.state)
        joined = [node for node in nodes[:-1] if node in chart.scoped]
        if record.moved == _DONE and record.from_state in chart.scoped:
            joined.insert(0, record.from_state)
        for state in joined:
            if joined.count(state) > 1 or (state == record.from_state and state in nodes[:-1]):
                continue  # entered again on the same path: its visits cannot be told apart
            view = _join_view(definition, chart, record, prev, state)
            if view is not None:
                yield _Join(index, record, state, view, prev)


@_builtin("join_after_regions", "a parallel or map state takes its done: only once every region "
                                "(map item) is final, or, with on_region_failure: cancel, once "
                                "one failed (a map: once more than tolerated_failures failed)")
def join_after_regions(definition: WorkflowDefinition, history: History
                       ) -> Iterator[Violation]:
    for join in _joins(definition, history):
        view, state = join.view, definition.states[join.state]
        if view.final >= view.regions or (view.failing and state.on_region_failure == "cancel"):
            continue
        what = "items" if state.kind == "map" else "regions"
        eid = join.record.execution
        failure = (f"{view.failed} failed, and it tolerates {state.tolerated_failures}"
                   if state.kind == "map" else f"{view.failed} failed")
        waits = ("it waits for every one (on_region_failure: wait)"
                 if state.on_region_failure == "wait" and view.failing else
                 "no failure allows an early join")
        yield Violation("join_after_regions",
                        f"{eid} joined {join.state!r} (moving to {join.record.state!r} on "
                        f"{join.record.moved}) with {view.final} of its {view.regions} {what} "
                        f"final ({failure}); {waits}", eid, join.record.step, (join.position,))


@_builtin("map_results_per_item", "after a map state's join, its results key holds a list with "
                                  "one entry per item (the item's own final context, as "
                                  "recorded when it finished before the join; none for an "
                                  "item that failed or was abandoned)")
def map_results_per_item(definition: WorkflowDefinition, history: History
                         ) -> Iterator[Violation]:
    chart = _chart(definition)
    for join in _joins(definition, history):
        state = definition.states[join.state]
        record, view = join.record, join.view
        if state.kind != "map" or state.scope is not None or record.context is None or (
                join.state not in chart.results_kept) or (view.instant and view.failing):
            continue  # a map inside a region keeps its results in the region's context
        results = record.context.get(state.results)
        eid = record.execution
        problem = ""
        if not isinstance(results, list):
            problem = f"holds {type(results).__name__}, not a list"
        elif len(results) != view.regions:
            if not view.instant:  # joined as entered: an item that could not start shows no move
                problem = f"holds {len(results)} entries for {view.regions} items"
        elif view.outcomes is not None:
            finished = _finished_items(definition, join)
            for (index, outcome), result in zip(view.outcomes, results, strict=True):
                if outcome == "success" and not isinstance(result, Mapping):
                    problem = (f"holds {_short(repr(result), 40)} for item {index}, which "
                               "succeeded (its final context was expected)")
                elif outcome == "success" and index in finished and result != finished[index]:
                    problem = (f"holds {_short(repr(result), 40)} for item {index}, whose "
                               f"final context was {_short(repr(finished[index]), 40)}")
                elif outcome != "success" and result is not None:
                    problem = (f"holds {_short(repr(result), 40)} for item {index}, which "
                               f"{'failed' if outcome else 'never finished'} (None was "
                               "expected)")
                if problem:
                    break
        if problem:
            yield Violation("map_results_per_item",
                            f"{eid} joined map {join.state!r}, and context.{state.results} "
                            f"{problem}", eid, record.step, (join.position,))


def _finished_items(definition: WorkflowDefinition, join: _Join
                    ) -> dict[str, Mapping[str, Any]]:
    """Gives the final context of each map item the commit before the join recorded final
    (by item index): what the join must keep as its result. An item that finished in the
    joining commit itself was never recorded, and is not in it; nor is one the join ran exit
    actions on (its final leaf, or a state above it in the item, has some)."""
    prev = join.prev
    if join.view.instant or prev is None or len(prev.regions) != len(prev.region_contexts):
        return {}
    base = f"{join.record.execution}/{join.state}/"
    states = definition.states
    finished: dict[str, Mapping[str, Any]] = {}
    for (rid, at, status), context in zip(prev.regions, prev.region_contexts, strict=True):
        visit, _, index = rid.removeprefix(base).partition("/")
        if not (rid.startswith(base) and visit.isdigit() and index.isdigit()
                and status == "final" and at in states):
            continue
        if any(states[name].exit for name in _chain_below(states, at, join.state)):
            continue  # the join ran its exit actions on it: the result is not the recorded one
        finished[index] = context
    return finished


@_builtin("no_region_effect_after_leaving", "no region (map item) commands an effect once its "
                                            "parallel or map state was left: a visit's keys "
                                            "are closed by the commit that left it")
def no_region_effect_after_leaving(definition: WorkflowDefinition, history: History
                                   ) -> Iterator[Violation]:
    if not _chart(definition).scoped:
        return
    active: dict[str, set[str]] = {}  # per execution, the visits its regions show
    closed: dict[str, dict[str, int]] = defaultdict(dict)  # visit -> the commit that left it
    reported: set[str] = set()
    for index, record in enumerate(history):
        if type(record) is not Committed or record.decision != "accepted":
            continue
        eid = record.execution
        left = closed[eid]
        if left and eid not in reported:
            for effect in record.effects:
                if effect.compensation:
                    continue  # undoing a failed visit's steps comes after it, by design
                visit = next((prefix for prefix in left if effect.key.startswith(prefix)), "")
                if visit:
                    reported.add(eid)
                    ended = history[left[visit]]
                    yield Violation(
                        "no_region_effect_after_leaving",
                        f"{eid} commanded {effect.tool} (key {effect.key!r}) at step "
                        f"{record.step}, after the visit {visit!r} of its parallel or map "
                        f"state was left at step {ended.step}: an abandoned region acted",
                        eid, record.step, (left[visit], index))
                    break
        now = _visit_prefixes(record.regions)
        for visit in active.get(eid, set()) - now:
            left[visit] = index
        active[eid] = now


@_builtin("region_keys_distinct", "no two regions (map items) send their calls under one "
                                  "idempotency key: a service that honours keys would answer "
                                  "the second with the first's result, and its effect would "
                                  "never take place")
def region_keys_distinct(definition: WorkflowDefinition, history: History
                         ) -> Iterator[Violation]:
    chart = _chart(definition)
    if not chart.scoped:
        return
    sent: dict[str, tuple[str, str, int]] = {}  # key -> (region, effect id, record)
    regions: dict[str, tuple[str, ...]] = {}  # per execution, the region ids last recorded
    reported: set[str] = set()
    for index, record in enumerate(history):
        if type(record) is not Committed or record.decision != "accepted":
            continue
        eid = record.execution
        known = frozenset((*regions.get(eid, ()), *(rid for rid, _, _ in record.regions)))
        regions[eid] = tuple(rid for rid, _, _ in record.regions)
        if not known or not record.effects:
            continue
        for effect in record.effects:
            if effect.compensation:
                continue
            # the region whose id the call's id extends (a call's id names its region)
            region = _innermost(known, effect.id)
            if not region:
                continue
            first = sent.setdefault(effect.key, (region, effect.id, index))
            if first[0] != region and effect.key not in reported:
                reported.add(effect.key)
                yield Violation("region_keys_distinct",
                                f"{eid} sent {effect.tool} for {region!r} (call "
                                f"{effect.id!r}) under key {effect.key!r}, the key of "
                                f"{first[0]!r}'s call {first[1]!r}: two actions, one key",
                                eid, record.step, (first[2], index))


_RUNAWAY = "rejected:runaway"


@_builtin("no_eventless_runaway", "no event sets off eventless moves that never settle: a "
                                  "rejected:runaway (more than EVENTLESS_MAX moves) is the "
                                  "definition's loop of always transitions whose guards keep "
                                  "holding")
def no_eventless_runaway(definition: WorkflowDefinition, history: History
                         ) -> Iterator[Violation]:
    chart = _chart(definition)
    if not chart.onward:
        return
    told: set[tuple[str, str]] = set()
    decided = {(r.execution, r.event_id) for r in history if type(r) is Decided}
    last: dict[str, Committed] = {}
    for index, record in enumerate(history):
        if type(record) is Decided and record.decision == _RUNAWAY:
            told.add((record.execution, record.event_id))
            yield Violation("no_eventless_runaway",
                            f"{record.execution} refused event {record.event_id!r} as a "
                            f"runaway: its eventless transitions moved {EVENTLESS_MAX} times "
                            "without settling; the definition loops (always transitions whose "
                            "guards keep holding)", record.execution, record.step, (index,))
        elif type(record) is Committed:
            if record.decision == "accepted":
                last[record.execution] = record
                continue
            key = (record.execution, record.event_id)
            prev = last.get(record.execution)
            if key in told or key in decided or prev is None or prev.context is None:
                continue  # the machine said why it refused (a decision tells it)
            loop = _runs_away(definition, chart, prev, record)
            if loop:
                told.add(key)
                yield Violation("no_eventless_runaway",
                                f"{record.execution} refused {record.event_type} "
                                f"{record.event_id!r}, on which the definition's eventless "
                                f"transitions never settle ({loop} -> ...): moved "
                                f"{EVENTLESS_MAX} times from {prev.state!r}, the definition "
                                "loops", record.execution, record.step, (index,))


def _runs_away(definition: WorkflowDefinition, chart: _Chart, prev: Committed,
               record: Committed) -> str:
    """Gives the loop (its last states) when the definition's eventless moves never settle on
    an event refused without a reason told: its transition from where the run was, on the
    context then, then each first eventless transition whose guard holds ("" when they
    settle, or when that cannot be told)."""
    states = definition.states
    source = prev.state
    if source not in states or source in chart.scoped or prev.context is None:
        return ""
    event = Event(record.event_id, record.event_type, record.event_source,
                  record.payload or {}, record.answers)
    chosen, problem = _first_held(states[source].on.get(event.type, ()), prev.context, event,
                                  source, event.type, [])
    if chosen is None or problem or chosen.internal or len(
            chart.landings.get(chosen.target, ())) > 1:
        return ""
    leaf = chosen.target_leaf
    if not any(state in chart.onward.get(state, ())
               for state in (leaf, *chart.onward.get(leaf, ()))):
        return ""  # no eventless move comes back: it settles
    acted = [0]
    context = _moved_context(definition, prev.context, event, source, chosen.declared_in,
                             chosen.target, leaf, chosen.actions, acted)
    path = [leaf]
    for _ in range(EVENTLESS_MAX + 1):  # the machine takes EVENTLESS_MAX and refuses one more
        if context is None or leaf not in states:
            return ""
        taken, raised = _first_held(states[leaf].always, context, event, leaf, _ALWAYS, [])
        if taken is None or raised or len(chart.landings.get(taken.target, ())) > 1:
            return ""  # it settles, the machine refuses, or history decides where it goes
        context = _moved_context(definition, context, event, leaf, taken.declared_in,
                                 taken.target, taken.target_leaf, taken.actions, acted)
        leaf = taken.target_leaf
        path.append(leaf)
    return " -> ".join(path[-4:])


# -- liveness and the machine --------------------------------------------------------------


@_builtin("no_stuck_execution", "at the end, after a phase with every fault healed, no "
                                "execution sits in a non-final state with nothing that could "
                                "move it", final_only=True)
def no_stuck_execution(definition: WorkflowDefinition, history: History
                       ) -> Iterator[Violation]:
    for index, record in enumerate(history):
        if type(record) is Finished and record.status != "final" and (
                not record.waiting_on or record.waiting_on == (REFUSED_TIMER,)):
            why = ("its timer stayed due, the execution unchanged, each time the machine was "
                   "told its time: it refuses the timer's move (the trace tells any reason it "
                   "gave)" if record.waiting_on else
                   "no timer, call, approval or event can move it")
            yield Violation("no_stuck_execution",
                            f"{record.execution} is stuck in {record.state!r} "
                            f"({record.status}): {why}",
                            record.execution, record.step, (index,))


@_builtin("machine_ok", "the machine under test neither raises, hangs nor answers nonsense")
def machine_ok(definition: WorkflowDefinition, history: History) -> Iterator[Violation]:
    for index, record in enumerate(history):
        if type(record) is MachineFailed:
            yield Violation("machine_ok", f"the machine {record.problem} ({record.error}): "
                                          f"{record.message}", "", record.step, (index,))


BUILTIN = tuple(INVARIANTS)
"""The names of the built-in invariants, in the order they are checked."""

