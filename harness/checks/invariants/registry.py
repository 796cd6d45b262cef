"""The invariant registry: a violation, the `Invariant` record, `INVARIANTS`, and the functions
that register invariants (`@invariant` for a user's, `builtin` for the built-in ones) and run
them (`check`).

`final_only` checkers read the end of a run (what could still move each execution, whether
replaying the log reproduced it); the others hold of every prefix of a history, so they can run
after each step. Users add their own with `@invariant`: over the whole history, or per step.
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

from harness.errors import HarnessError
from harness.sim.history import Applied, HistoryRecord, Observed
from reference_machine import WorkflowDefinition
from reference_machine.findings import did_you_mean

__all__ = [
    "INVARIANTS",
    "CheckResult",
    "History",
    "Invariant",
    "StepView",
    "Violation",
    "builtin",
    "check",
    "invariant",
    "invariants",
    "per_definition",
    "per_history",
    "register_builtins",
]

History = Sequence[HistoryRecord]
T = TypeVar("T")


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


_BUILTINS: dict[Callable[..., Any], Invariant] = {}  # marked with `builtin`, not yet registered


def builtin(name: str, description: str, *, final_only: bool = False
            ) -> Callable[[Callable[[WorkflowDefinition, History], Iterator[Violation]]],
                          Callable[[WorkflowDefinition, History], Iterator[Violation]]]:
    """Gives the decorator that makes a function a built-in invariant, kept aside until
    `register_builtins` registers the built-in ones in their order."""
    def register(function: Callable[[WorkflowDefinition, History], Iterator[Violation]]
                 ) -> Callable[[WorkflowDefinition, History], Iterator[Violation]]:
        _BUILTINS[function] = Invariant(name, function, description, final_only, builtin=True)
        return function
    return register


def register_builtins(functions: Sequence[Callable[..., Any]]) -> tuple[str, ...]:
    """Registers the built-in invariants in the order of `functions`, which names each function
    marked with `builtin` once; gives their names in that order."""
    left = sorted(rule.name for function, rule in _BUILTINS.items() if function not in functions)
    strays = [getattr(function, "__name__", repr(function)) for function in functions
              if function not in _BUILTINS]
    if left or strays or len(set(functions)) != len(functions):
        msg = ("the order of the built-in invariants names each function marked with @builtin "
               f"once; left out: {', '.join(left) or 'none'}; not marked: "
               f"{', '.join(strays) or 'none'}")
        raise HarnessError(msg)
    for function in functions:
        INVARIANTS[_BUILTINS[function].name] = _BUILTINS[function]
    return tuple(_BUILTINS[function].name for function in functions)


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
