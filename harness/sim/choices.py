"""The choices of a run: every random decision a simulation makes goes through one object.

A run draws three kinds of choice, each tagged so that the engines can treat them apart:

- `branch` and `action` (tag `b`): what the scheduler does next (which action, which event,
  grant or deny);
- `chance` and `pick` (tag `f:<kind>`): whether a fault of that kind strikes at an
  opportunity, and which tool fault a call of a tool meets (`f:tool:<name>`);
- `random` and `below` (tag `v`): values (payloads, roles, skew amounts).

Every draw is a number `u` in [0, 1] turned into the decision the same way in every mode
(`branch(n)` is `int(u * n)`, `chance(rate)` is `u < rate`), and each is keyed by the step it
happens in, its tag and its position among that step's draws of that tag. So a run can be:

- drawn from a seed (`Choices`, the fast default);
- drawn from a seed and recorded (`RecordingChoices`): the same run, plus its schedule;
- replayed from a schedule (`ScriptedChoices`): a key the schedule lacks takes the tag's
  default (no fault, the first branch, the smallest value), which is what shrinking uses to
  drop faults and events without the rest of the run sliding out of place.

Keying by step keeps an edit local: dropping a fault in step 5 leaves step 6's draws where
they were, as Hypothesis keeps its choice sequence aligned when it shrinks.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

__all__ = [
    "BRANCH",
    "FAULT",
    "VALUE",
    "AimedChoices",
    "Choice",
    "Choices",
    "MutantChoices",
    "RecordingChoices",
    "ScriptedChoices",
    "Table",
    "default",
    "moves_label",
    "moves_of",
    "script_of",
]

BRANCH, FAULT, VALUE = "b", "f", "v"


def default(tag: str) -> float:
    """Gives what a draw of `tag` takes when the schedule has no value for it."""
    return 1.0 if tag[0] == FAULT else 0.0
_BELOW_ONE = 0.9999999999999999
#: Cumulative thresholds of the tool faults one call can meet: ((threshold, kind), ...).
Table = Sequence[tuple[float, Any]]


class Choice(NamedTuple):
    """One recorded draw: in `step`, the `n`-th draw of tag `tag`, valued `u`."""

    step: int
    tag: str
    n: int
    u: float


class Choices(random.Random):
    """Draws a run's choices from a seed, recording nothing (the fast path of fuzzing)."""

    #: Whether the run draws how readily it moves the clock (the simulator's `PATIENCE`):
    #: not where the source picks every action itself (a Hypothesis rule, a search).
    paced = True

    def __init__(self, seed: Any = 0) -> None:
        super().__init__(seed)
        self.step = 0

    def at_step(self, step: int) -> None:
        """Tells the source that step `step` begins (keys restart for it)."""
        self.step = step

    def branch(self, n: int) -> int:
        """Gives the scheduler's choice among `n` options (0 to n - 1)."""
        return int(self.random() * n)

    def flip(self, p: float) -> bool:
        """Gives a scheduler's yes or no, yes with probability `p` (grant or deny)."""
        return self.random() < p

    def below(self, n: int) -> int:
        """Gives a value from 0 to n - 1 (a role, a variant's detail, a skew amount)."""
        return int(self.random() * n)

    def chance(self, kind: str, rate: float, where: str = "") -> bool:
        """Tells whether fault `kind` strikes at this opportunity (it does with `rate`);
        `where` names the opportunity (a crash point), for engines that aim faults."""
        return self.random() < rate

    def pick(self, site: str, table: Table) -> Any:
        """Gives the tool fault a call at `site` meets, by the table's cumulative rates, or
        None."""
        u = self.random()
        for threshold, kind in table:
            if u < threshold:
                return kind
        return None

    def action(self, actions: Sequence[Any], label: Callable[[Any], str]) -> int:
        """Gives which of the enabled `actions` the step performs (`label` names one)."""
        return int(self.random() * len(actions))

    def moves(self) -> int:
        """Gives how many times a step that moves the clock moves it (timer after timer,
        nothing else between): once, unless a schedule says more."""
        return 1


class RecordingChoices(Choices):
    """Draws exactly what `Choices(seed)` draws, and records each draw as a `Choice`, and
    (unless `labels` is false: guided fuzzing's runs, which shrink from their draws) each
    step's action by its label (`actions`)."""

    def __init__(self, seed: Any = 0, *, labels: bool = True) -> None:
        super().__init__(seed)
        self.recorded: list[Choice] = []
        self.actions: dict[int, str] = {}
        self._counts: dict[str, int] = {}
        self._labels = labels
        #: The keys of the fault draws that struck: a fault draw that did not strike decides
        #: what the tag's default decides, so a schedule may leave it out (as shrinking does).
        self.struck: set[tuple[int, str, int]] = set()

    def action(self, actions: Sequence[Any], label: Callable[[Any], str]) -> int:
        index = int(self._draw(BRANCH) * len(actions))
        if self._labels:
            self.actions[self.step] = labels_of(actions, label)[index]
        return index

    def at_step(self, step: int) -> None:
        self.step = step
        self._counts = {}

    def _draw(self, tag: str) -> float:
        return self._record(tag, random.Random.random(self))

    def _record(self, tag: str, u: float) -> float:
        """Records `u` as the step's next draw of `tag`, and gives it."""
        n = self._counts.get(tag, 0)
        self._counts[tag] = n + 1
        self.recorded.append(_choice(Choice, (self.step, tag, n, u)))
        return u

    def random(self) -> float:
        return self._draw(VALUE)

    def branch(self, n: int) -> int:
        return int(self._draw(BRANCH) * n)

    def flip(self, p: float) -> bool:
        return self._draw(BRANCH) < p

    def below(self, n: int) -> int:
        return int(self._draw(VALUE) * n)

    def chance(self, kind: str, rate: float, where: str = "") -> bool:
        tag = f"f:{kind}"
        struck = self._draw(tag) < rate
        if struck:
            self.struck.add((self.step, tag, self._counts[tag] - 1))
        return struck

    def pick(self, site: str, table: Table) -> Any:
        tag = f"f:{site}"
        u = self._draw(tag)
        for threshold, kind in table:
            if u < threshold:
                self.struck.add((self.step, tag, self._counts[tag] - 1))
                return kind
        return None


class MutantChoices(RecordingChoices):
    """Draws a mutant of a recorded run (guided fuzzing): each draw whose key `script` holds
    takes that value, every other draw is drawn from the seed `fresh`; all of it is recorded,
    so the run replays exactly from its record (`ScriptedChoices(recorded)`), as any other.
    With an empty script it draws exactly what `RecordingChoices(fresh)` draws."""

    def __init__(self, script: Mapping[tuple[int, str, int], float], fresh: Any = 0, *,
                 labels: bool = True) -> None:
        super().__init__(fresh, labels=labels)
        self.script = script

    def _draw(self, tag: str) -> float:
        n = self._counts.get(tag, 0)
        self._counts[tag] = n + 1
        u = self.script.get((self.step, tag, n))
        if u is None:
            u = random.Random.random(self)
        elif tag == VALUE:
            u = min(max(u, 0.0), _BELOW_ONE)
        self.recorded.append(_choice(Choice, (self.step, tag, n, u)))
        return u

    def branch(self, n: int) -> int:
        return min(int(self._draw(BRANCH) * n), n - 1)


class AimedChoices(MutantChoices):
    """A mutant's draws (or a seed's, with an empty script) whose faults can be aimed. Each
    fault draw names its site: its tag, `where` (a crash point, a tool fault's kind) and what
    the run is doing (`context`, set by the simulator: the state acted on, the event or the
    activity). `sites` counts, for each site passed, how often a fault struck there. A site
    `aims` holds strikes with that chance where the run passes it, until it struck once; the
    draw recorded for it lies below the plan's own rate, so the run replays from its record
    as any other (guided fuzzing aims at the sites where faults struck least)."""

    def __init__(self, script: Mapping[tuple[int, str, int], float], fresh: Any = 0,
                 aims: Mapping[tuple[str, ...], float] | None = None, *,
                 labels: bool = True) -> None:
        super().__init__(script, fresh, labels=labels)
        self.aims = dict(aims) if aims else {}
        self.context: Callable[[], tuple[str, str]] = _nowhere
        self.sites: dict[tuple[str, ...], int] = {}

    def _fault(self, tag: str, site: tuple[str, ...] | None, low: float, high: float
               ) -> float:
        """Draws a fault's `u`: in [low, high) (struck) when `site` is aimed and its chance
        comes up, else as a mutant draws it."""
        n = self._counts.get(tag, 0)
        self._counts[tag] = n + 1
        aim = self.aims.get(site) if site is not None else None
        if aim is not None and random.Random.random(self) < aim:
            del self.aims[site]  # type: ignore[arg-type]
            u = low + random.Random.random(self) * (high - low)
        else:
            scripted = self.script.get((self.step, tag, n))
            u = random.Random.random(self) if scripted is None else scripted
        self.recorded.append(_choice(Choice, (self.step, tag, n, u)))
        return u

    def chance(self, kind: str, rate: float, where: str = "") -> bool:
        tag = f"f:{kind}"
        site = (tag, where, *self.context())
        struck = self._fault(tag, site, 0.0, rate) < rate
        self.sites[site] = self.sites.get(site, 0) + struck
        return struck

    def pick(self, site: str, table: Table) -> Any:
        tag = f"f:{site}"
        context = self.context()
        aimed, low, high, below = None, 0.0, 0.0, 0.0
        for threshold, kind in table:  # a tool's faults share one draw: aim at one's span
            named = (tag, str(kind), *context)
            if named in self.aims:
                aimed, low, high = named, below, threshold
                break
            below = threshold
        u = self._fault(tag, aimed, low, high)
        found = None
        sites = self.sites
        for threshold, kind in table:
            named = (tag, str(kind), *context)
            struck = found is None and u < threshold
            if struck:
                found = kind
            sites[named] = sites.get(named, 0) + struck
        return found


def _nowhere() -> tuple[str, str]:
    return ("", "")


class ScriptedChoices(RecordingChoices):
    """Replays a schedule: each draw takes the value recorded under its key, or the tag's
    default where the schedule has none; `recorded` holds what the run actually drew.

    With `actions` (step -> label), each step performs the next scheduled action that is
    enabled, skipping those that are not (as Hypothesis skips a rule whose precondition fails),
    and its draws take the values recorded for the scheduled step it performs. A label matches
    exactly, or else by its part before ` | ` (another attempt of the same call, the clock
    moving to another timer). So dropping a
    step from a schedule leaves the others doing what they did. Once the schedule is used up,
    the run goes on with the defaults: the first action, no fault."""

    def __init__(self, script: Sequence[Choice] | Mapping[tuple[int, str, int], float],
                 actions: Mapping[int, str] | None = None) -> None:
        super().__init__(0)
        if isinstance(script, Mapping):
            self.script = dict(script)
        else:
            self.script = {(c.step, c.tag, c.n): c.u for c in script}
        self.planned = sorted((actions or {}).items())
        self.cursor = 0
        self.source: int | None = 0  # the scheduled step whose draws this step takes
        self.used: set[tuple[int, str, int]] = set()  # the script's entries some draw took
        self.skipped: list[tuple[int, str]] = []  # scheduled actions passed over, not done
        self.wanted = ""  # the scheduled label the step performs

    def at_step(self, step: int) -> None:
        super().at_step(step)
        self.source = step if not self.planned else (0 if step == 0 else None)

    def action(self, actions: Sequence[Any], label: Callable[[Any], str]) -> int:
        if not self.planned:
            return super().action(actions, label)
        labels = labels_of(actions, label)
        found = self._next_planned(actions, labels)
        if found is not None:
            position, index = found
            self.skipped += self.planned[self.cursor:position]
            self.cursor, (self.source, self.wanted) = position + 1, self.planned[position]
        else:
            self.skipped += self.planned[self.cursor:]
            self.cursor, self.source, self.wanted, index = len(self.planned), None, "", 0
        if self.source is not None:  # the label chose the action: its draw is taken as read
            self.used.add((self.source, BRANCH, self._counts.get(BRANCH, 0)))
        self._record(BRANCH, (index + 0.5) / len(labels))
        self.actions[self.step] = labels[index]
        return index

    def moves(self) -> int:
        """A step scheduled as `advance | N moves` (a shrunk run's consecutive clock moves
        made one) moves the clock N times; its label says so."""
        count = moves_of(self.wanted)
        if count > 1:
            self.actions[self.step] = self.wanted
        return count

    def _next_planned(self, actions: Sequence[Any], labels: Sequence[str]
                      ) -> tuple[int, int] | None:
        """Gives (its position in the schedule, its index among `actions`) of the first
        scheduled action from the cursor on that is enabled now and `_fits`; None when none."""
        coarse = [text.partition(" | ")[0] for text in labels]
        for position in range(self.cursor, len(self.planned)):
            step, wanted = self.planned[position]
            found = planned_index(wanted, labels, coarse)
            if found is not None and self._fits(step, actions[found]):
                return position, found
        return None

    def _fits(self, step: int, action: Sequence[Any]) -> bool:
        """Tells whether the scheduled `step` may be performed as `action` (a replay on an
        edited definition says more)."""
        return True

    def _draw(self, tag: str) -> float:
        n = self._counts.get(tag, 0)
        self._counts[tag] = n + 1
        u = None if self.source is None else self.script.get((self.source, tag, n))
        if u is None:
            u = default(tag)
        else:
            self.used.add((self.source, tag, n))  # type: ignore[arg-type]
            if tag == VALUE:
                u = min(max(u, 0.0), _BELOW_ONE)  # a value is always below one
        self.recorded.append(_choice(Choice, (self.step, tag, n, u)))
        return u

    def branch(self, n: int) -> int:
        return min(int(self._draw(BRANCH) * n), n - 1)

    def departures(self) -> list[str]:
        """Says where the run did not do what the schedule says (a replay file that was
        edited, or no longer fits its machine): each scheduled action it passed over, and
        each recorded choice no draw took, in order."""
        said = [f"step {step}'s action {label!r} was never possible"
                for step, label in self.skipped]
        said += [f"the choice [{step}, {tag!r}, {n}] was never drawn"
                 for step, tag, n in sorted(set(self.script) - self.used)]
        return said


_choice = tuple.__new__  # a `Choice` made without its `__new__`'s Python frame (a hot path)


def moves_label(count: int) -> str:
    """Gives the label of a scheduled step that moves the clock `count` times in a row."""
    return f"advance | {count} moves"


def moves_of(label: str) -> int:
    """Gives how many times a scheduled step's label moves the clock in a row (1 but for an
    `advance | N moves` label)."""
    head, _, detail = label.partition(" | ")
    count, _, word = detail.partition(" ")
    if head != "advance" or word != "moves" or not count.isdigit():
        return 1
    return max(1, int(count))


def labels_of(actions: Sequence[Any], label: Callable[[Any], str]) -> list[str]:
    """Gives each action's label, made unique among them (a repeated label gets `#2`, `#3`)."""
    labels: list[str] = []
    seen: dict[str, int] = {}
    for action in actions:
        text = label(action)
        count = seen.get(text, 0) + 1
        seen[text] = count
        labels.append(text if count == 1 else f"{text} #{count}")
    return labels


def planned_index(wanted: str, labels: Sequence[str], coarse: Sequence[str]) -> int | None:
    """Gives the position among `labels` of the action a schedule's label names: the very
    action, or one that does the same (`coarse`: each label before its " | "); None when no
    action here does."""
    if wanted in labels:
        return labels.index(wanted)
    head = wanted.partition(" | ")[0]
    return coarse.index(head) if head in coarse else None


def script_of(recorded: Sequence[Choice]) -> dict[tuple[int, str, int], float]:
    """Gives the schedule a recorded run replays from, without the draws that are defaults."""
    return {(c.step, c.tag, c.n): c.u for c in recorded if c.u != default(c.tag)}
