"""Guided fuzzing: a corpus of schedules that reached new behaviour, mutated where bugs hide.

Swarm testing draws each run blind. The guided strategy keeps what it learnt: every run is
recorded (its choices, `harness.sim.choices`), and a run that showed a behaviour no earlier run
did (`harness.checks.behaviour`), or beat a target's best score (`harness.checks.targets`),
joins the corpus. Later runs are mutants of corpus entries, each one operation on the recorded
choices:

- `prefix`: keep the draws up to a step, draw the rest afresh (explore on from a rare state);
- `havoc`: draw a few choices again (another branch, another event, another value);
- `insert`: make a fault strike at an opportunity the run passed (a crash, a duplicate, a late
  delivery, a second worker, a tool failure), the delivery faults favoured at the end of the
  run, where a late or repeated event meets a finished execution;
- `remove`, `move`: drop a fault that struck, or strike its kind a few steps earlier or later;
- `redraw`: keep a fault that struck, and draw afresh how it struck (its variant, its values);
- `splice`: one entry's draws up to a step, another's after it;
- `replan`: draw the run's fault kinds and rates again (swarm mode), keeping its schedule.

The parent is drawn by energy: an entry's rare behaviours (seen by few runs) weigh more, and
an entry tried often weighs less, as AFL's and libFuzzer's schedules favour rare paths.

**Aimed faults.** Every run names the fault sites it passes: a fault draw's tag, where (a
crash point, a tool fault's kind), the state of the execution acted on and the event sent or
delivered (or the activity). The guide counts how often a fault struck at each site, and aims
each run (a seed's, once sites are known, and every mutant) at `AIM_SITES` of them: a kind
first, so that the forty crash sites of a workflow do not crowd out the one approval a forgery
can meet, then the site by how seldom it struck (1 / (1 + strikes)^2). An aimed site strikes
with `AIM_CHANCE` where the run passes it, once a run. The bugs faults find are a fault at the
right place (a second worker before the save of a submit, a redelivery of an event the state
still takes, a forged approval from an agent): blind runs meet each place at the plan's rate,
aimed runs sweep the places. A mutant is aimed only at the kinds its parent's plan drew (those
any run from its seed passed).

Every mutant is a recorded choice sequence: it runs from its parent's seed with
`AimedChoices`, the aimed draw recorded below the plan's own rate, and its failure shrinks and
replays exactly as a seed's does. The campaign is
made in rounds of `ROUND` runs, each round's mutants drawn from the corpus as the previous
rounds left it, so the same seed gives the same campaign whatever the number of processes.

The corpus can be kept in a folder between campaigns (as Hypothesis keeps its example
database): each entry a small JSON file; the failing schedules are replayed first next time.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path

from harness.checks.behaviour import Behaviour
from harness.errors import HarnessError
from harness.files import write_output
from harness.sim.choices import (
    BRANCH,
    FAULT,
    AimedChoices,
    Choice,
    Choices,
)

__all__ = ["ROUND", "STRATEGIES", "Corpus", "Guide", "Learnt", "Strategy", "Trial", "struck_keys"]


class Strategy(StrEnum):
    """How a campaign draws its runs: `swarm` (each run blind, from its seed), `guided`
    (mostly mutants of the schedules that reached new behaviour) or `mixed` (half each)."""

    SWARM = "swarm"
    GUIDED = "guided"
    MIXED = "mixed"


#: The strategies, as the command line and the plugin name them.
STRATEGIES = tuple(strategy.value for strategy in Strategy)
ROUND = 16  # runs per round: mutants of a round are drawn from the corpus the rounds before
#: left; fixed, so a campaign does not depend on how many processes run it
CORPUS_MAX = 256  # entries past this, the ones of least energy go
AIM_SITES = 8  # fault sites each run is aimed at
AIM_CHANCE = 0.7  # that an aimed site strikes where the run passes it (once a run)
#: of a round's runs, the mutants (the rest: seeds)
_SHARE: dict[str, float] = {Strategy.GUIDED: 7 / 8, Strategy.MIXED: 1 / 2}
_DELIVERY = ("f:duplicate_event", "f:late_event", "f:reordered_events", "f:dropped_event")
_CORPUS_FORMAT = 1
#: how far into a tool's draw a struck tool fault reaches: its kinds share the call's draw, in
#: catalogue order, each below its cumulative rate, which a mutant does not know
_TOOL_SPANS = (0.01, 0.03, 0.1, 0.3)

Key = tuple[int, str, int]
#: A fault site: the draw's tag, where (a crash point), the state acted on, the event or
#: activity (`AimedChoices`)
Site = tuple[str, ...]
Script = Mapping[Key, float]


@dataclass(frozen=True, slots=True)
class Trial:
    """One run of a campaign: a seed's own (`script` None), or a mutant, which runs from
    `seed` (its parent's: the world's outputs, the liveness phase) with `script`'s draws and
    the others drawn from `fresh`. `how` names the mutation."""

    seed: int
    script: Script | None = None
    fresh: int = 0
    how: str = "seed"
    aims: tuple[Site, ...] = ()

    def choices(self, record: bool) -> Choices:
        """Gives the run's choice source: recording (and naming the fault sites it passes),
        when `record` or for a mutant; a seed's own run draws as its seed does."""
        if self.script is not None:  # a guided run shrinks from its draws: no labels
            return AimedChoices(self.script, self.fresh,
                                dict.fromkeys(self.aims, AIM_CHANCE), labels=False)
        return AimedChoices({}, self.seed, labels=False) if record else Choices(self.seed)


@dataclass(frozen=True, slots=True)
class Learnt:
    """What the guide learns of one run: its behaviours, its draws, the draws whose fault
    struck, the steps an external event was delivered in, its last step, its targets'
    scores."""

    behaviours: frozenset[Behaviour] | tuple[Behaviour, ...]
    recorded: tuple[Choice, ...]
    struck: tuple[Key, ...]
    deliveries: tuple[int, ...]
    last: int
    scores: tuple[tuple[str, float], ...] = ()
    sites: tuple[tuple[Site, int], ...] = ()  # each fault site passed, and its strikes


@dataclass(slots=True)
class _Entry:
    """A corpus entry: its run's seed and draws (packed: a corpus of hundreds of runs keeps
    a few kilobytes each), what it showed, how often it was picked, the targets it leads."""

    seed: int
    packed: bytes
    learnt: Learnt  # without its draws
    picked: int = 0
    best: frozenset[str] = frozenset()  # targets whose best this entry holds

    @property
    def script(self) -> dict[Key, float]:
        """Gives the entry's draws by key."""
        return {(step, _TAGS[tag], n): u for step, tag, n, u in _DRAW.iter_unpack(self.packed)}

    def draws(self) -> list[Choice]:
        """Gives the entry's draws in the order they were drawn."""
        return [Choice(step, _TAGS[tag], n, u) for step, tag, n, u in
                _DRAW.iter_unpack(self.packed)]


_DRAW = struct.Struct("<IHId")  # step, tag (its index in _TAGS), n, u
_TAGS: list[str] = []  # every tag packed so far, in this process
_TAG_INDEX: dict[str, int] = {}


def _pack(recorded: Iterable[Choice]) -> bytes:
    parts = []
    for choice in recorded:
        index = _TAG_INDEX.get(choice.tag)
        if index is None:
            index = _TAG_INDEX[choice.tag] = len(_TAGS)
            _TAGS.append(choice.tag)
        parts.append(_DRAW.pack(choice.step, index, choice.n, choice.u))
    return b"".join(parts)


@dataclass(slots=True)
class Guide:
    """The guided strategy's state: the corpus, how often each behaviour was seen, each
    target's best, and the campaign's own seeded source of mutations."""

    seed: int
    strategy: str = Strategy.GUIDED
    rng: random.Random = field(init=False)
    corpus: list[_Entry] = field(default_factory=list)
    hits: dict[Behaviour, int] = field(default_factory=dict)
    canon: dict[Behaviour, Behaviour] = field(default_factory=dict)  # one tuple for each
    best: dict[str, tuple[float, int]] = field(default_factory=dict)  # target -> (score, seed)
    next_seed: int = 0
    queued: list[Trial] = field(default_factory=list)  # run first (a kept corpus's)
    mutations: dict[str, int] = field(default_factory=dict)  # mutants made, by operation
    found: dict[str, int] = field(default_factory=dict)  # entries they added, by operation
    sites: dict[Site, int] = field(default_factory=dict)  # each fault site seen: strikes
    kinds: dict[int, frozenset[str]] = field(default_factory=dict)  # by seed: fault tags

    def __post_init__(self) -> None:
        if self.strategy not in _SHARE:
            raise HarnessError(f"options.strategy: expected one of {', '.join(STRATEGIES)}, "
                               f"got {self.strategy!r}")
        self.rng = random.Random(f"{self.seed}:guided")
        self.next_seed = self.seed

    # -- rounds ------------------------------------------------------------------------------

    def round(self, size: int) -> list[Trial]:
        """Gives the next round's trials: what a kept corpus queued, then seeds and mutants."""
        trials = self.queued[:size]
        del self.queued[:len(trials)]
        share = _SHARE[self.strategy] if self.corpus else 0.0
        weights = self._energies() if self.corpus else []
        while len(trials) < size:
            if self.rng.random() < share:
                trials.append(self._mutant(weights))
                continue
            seed = self.next_seed
            self.next_seed += 1
            aims = self._aims(None)
            # aimed, a seed's run is no longer its own: it runs as a mutant with no script
            trials.append(Trial(seed, {}, seed, "aim", aims) if aims else Trial(seed))
        return trials

    def _aims(self, kinds: frozenset[str] | None) -> tuple[Site, ...]:
        """Gives the fault sites a run is aimed at: up to `AIM_SITES`, each drawn a kind
        first (so the many crash points do not crowd out the one approval a forgery can meet),
        then by how seldom it struck; only of `kinds`, when given (a mutant's parent drew
        only those: its plan left the others out)."""
        by_kind: dict[str, list[Site]] = {}
        for site in self.sites:
            if kinds is None or site[0] in kinds:
                by_kind.setdefault(site[0], []).append(site)
        if not by_kind:
            return ()
        rng, struck = self.rng, self.sites
        names = sorted(by_kind)
        chosen: dict[Site, None] = {}
        for _ in range(AIM_SITES):
            among = by_kind[names[rng.randrange(len(names))]]
            weights = [1.0 / (1 + struck[site]) ** 2 for site in among]
            chosen[rng.choices(among, weights)[0]] = None
        return tuple(chosen)

    def learn(self, trial: Trial, learnt: Learnt) -> bool:
        """Counts a run's behaviours; keeps it in the corpus when it showed one never seen, or
        beat a target's best. Tells whether it was kept."""
        sites = self.sites
        for site, strikes in learnt.sites:
            sites[site] = sites.get(site, 0) + strikes
        # the kinds a seed's plan draws: those any run from it (a mutant too) passed, kept
        # for the seeds of corpus entries only (no other seed is a parent's)
        tags = frozenset(site[0] for site, _ in learnt.sites)
        known = self.kinds.get(trial.seed)
        if known is not None and not tags <= known:
            self.kinds[trial.seed] = known | tags
        hits = self.hits
        new = False
        for behaviour in learnt.behaviours:
            count = hits.get(behaviour, 0)
            if count == 0:
                new = True
                self.canon[behaviour] = behaviour
            hits[behaviour] = count + 1
        beaten = set()
        for name, value in learnt.scores:
            held = self.best.get(name)
            if held is None or value > held[0]:
                self.best[name] = (value, trial.seed)
                beaten.add(name)
        if not (new or beaten):
            return False
        for entry in self.corpus:
            entry.best = entry.best - beaten
        # kept lean: its behaviours as the tuples `hits` holds already, its draws packed
        canon = self.canon
        kept = replace(learnt, recorded=(), sites=(),
                       behaviours=tuple(canon[b] for b in learnt.behaviours))
        self.corpus.append(_Entry(trial.seed, _pack(learnt.recorded), kept,
                                  best=frozenset(beaten)))
        if known is None:
            self.kinds[trial.seed] = tags
        if new:
            self.found[trial.how] = self.found.get(trial.how, 0) + 1
        if len(self.corpus) > CORPUS_MAX:
            energies = self._energies()
            weakest = min(range(len(self.corpus)), key=lambda i: (energies[i], -i))
            gone = self.corpus.pop(weakest).seed
            if all(entry.seed != gone for entry in self.corpus):
                del self.kinds[gone]
        return True

    def _energies(self) -> list[float]:
        hits = self.hits
        energies = []
        for entry in self.corpus:
            # its rarest behaviour, not their sum: a long run shows many behaviours, each
            # common, and would crowd out the short one that shows one rare behaviour; and
            # a short run is cheaper to mutate, as AFL favours fast entries
            rare = max((1.0 / hits[b] for b in entry.learnt.behaviours if b in hits),
                       default=0.0)
            energy = ((rare + (1.0 if entry.best else 0.0)) / (1.0 + entry.picked / 8)
                      / (1.0 + entry.learnt.last / 64))
            energies.append(max(energy, 1e-6))
        return energies

    # -- mutants -----------------------------------------------------------------------------

    def _mutant(self, weights: list[float]) -> Trial:
        rng = self.rng
        index = rng.choices(range(len(self.corpus)), weights)[0]
        parent = self.corpus[index]
        parent.picked += 1
        how = rng.choice(_OPERATIONS)
        script = _MUTATE[how](self, parent)
        if script is None:  # nothing to do it to (no fault struck, one entry): draw again
            how, script = "havoc", _havoc(self, parent)
        self.mutations[how] = self.mutations.get(how, 0) + 1
        return Trial(parent.seed, script, rng.getrandbits(48), how,
                     self._aims(self.kinds.get(parent.seed)))


def _prefix(guide: Guide, parent: _Entry) -> dict[Key, float]:
    cut = guide.rng.randint(1, max(1, parent.learnt.last))
    return {key: u for key, u in parent.script.items() if key[0] < cut}


def _havoc(guide: Guide, parent: _Entry) -> dict[Key, float]:
    rng = guide.rng
    script = dict(parent.script)
    keys = sorted(script)
    for _ in range(min(len(keys), 1 + int(rng.expovariate(0.7)))):
        script[keys[rng.randrange(len(keys))]] = rng.random()
    return script


def _faults(parent: _Entry) -> list[Key]:
    struck = set(parent.learnt.struck)
    return sorted(key for key in parent.script if key[1][0] == FAULT and key not in struck)


def _insert(guide: Guide, parent: _Entry) -> dict[Key, float] | None:
    rng = guide.rng
    passed = _faults(parent)
    if not passed:
        return None
    late = [key for key in passed if key[1] in _DELIVERY
            and key[0] >= parent.learnt.last - max(2, parent.learnt.last // 4)]
    if late and rng.random() < 0.5:
        key = rng.choice(late)
    else:  # a kind first, then where: a kind drawn at every step (a crash point) would
        # otherwise crowd out one drawn once a run (a forged approval)
        kinds = sorted({key[1] for key in passed})
        kind = rng.choice(kinds)
        key = rng.choice([each for each in passed if each[1] == kind])
    return _struck_at(rng, parent.script, key)


def _struck_at(rng: random.Random, parent: Script, key: Key) -> dict[Key, float]:
    """Gives the parent's draws with the fault under `key` striking, and the rest of its
    step's scheduling and value draws made afresh (how the fault strikes: which variant,
    which source, what the caller sees)."""
    step = key[0]
    script = {each: u for each, u in parent.items()  # the step's action is its first draw
              if each[0] != step or each[1][0] == FAULT or each == (step, BRANCH, 0)}
    script[key] = _strike(rng, key)
    return script


def _redraw(guide: Guide, parent: _Entry) -> dict[Key, float] | None:
    """Keeps a fault that struck, and draws afresh how it struck (its variant, its values)."""
    if not parent.learnt.struck:
        return None
    return _struck_at(guide.rng, parent.script, guide.rng.choice(parent.learnt.struck))


def _strike(rng: random.Random, key: Key) -> float:
    """Gives a draw that makes the fault drawn under `key` strike: a kind strikes below its
    rate; a tool's faults share its call's draw, each below its cumulative share, so a small
    draw strikes the first and, sometimes, one of the others."""
    if not key[1].startswith("f:tool:"):
        return 0.0
    return rng.random() * rng.choice(_TOOL_SPANS)


def _remove(guide: Guide, parent: _Entry) -> dict[Key, float] | None:
    if not parent.learnt.struck:
        return None
    script = dict(parent.script)
    script[guide.rng.choice(parent.learnt.struck)] = 1.0
    return script


def _move(guide: Guide, parent: _Entry) -> dict[Key, float] | None:
    rng = guide.rng
    if not parent.learnt.struck:
        return None
    step, tag, _ = struck = rng.choice(parent.learnt.struck)
    others = [key for key in _faults(parent) if key[1] == tag and key[0] != step]
    if not others:
        return None
    others.sort(key=lambda key: (abs(key[0] - step), key))
    script = dict(parent.script)
    script[struck] = 1.0
    moved = others[min(len(others) - 1, int(rng.expovariate(0.5)))]
    script[moved] = _strike(rng, moved)
    return script


def _splice(guide: Guide, parent: _Entry) -> dict[Key, float] | None:
    rng = guide.rng
    if len(guide.corpus) < 2:
        return None
    other = guide.corpus[rng.randrange(len(guide.corpus))]
    if other is parent:
        return None
    cut = rng.randint(1, max(1, min(parent.learnt.last, other.learnt.last)))
    script = {key: u for key, u in parent.script.items() if key[0] < cut}
    script.update((key, u) for key, u in other.script.items() if key[0] >= cut)
    return script


def _replan(guide: Guide, parent: _Entry) -> dict[Key, float]:
    return {key: u for key, u in parent.script.items() if key[0] != 0}


_MUTATE = {"prefix": _prefix, "havoc": _havoc, "insert": _insert, "remove": _remove,
           "move": _move, "redraw": _redraw, "splice": _splice, "replan": _replan}
#: how often each is drawn: the fault edits and the prefix most, as the bugs sit in faults
_OPERATIONS = ("prefix", "prefix", "havoc", "insert", "insert", "insert", "remove", "move",
               "redraw", "splice", "replan")


# -- a kept corpus -------------------------------------------------------------------------------


class Corpus:
    """A folder of schedules kept between campaigns of one definition on one machine: each
    entry `<digest>.json` holds a seed and its draws (`failing` names the rule a failing one
    broke). Entries of another definition or machine, or that do not read, are passed over."""

    def __init__(self, folder: str | os.PathLike[str], definition: str, machine: str) -> None:
        self.folder = Path(folder)
        self.definition, self.machine = definition, machine

    def load(self) -> list[Trial]:
        """Gives the kept schedules as trials, the failing ones first."""
        if not self.folder.is_dir():
            return []
        failing: list[Trial] = []
        kept: list[Trial] = []
        for path in sorted(self.folder.glob("*.json")):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                if (data.get("format") != _CORPUS_FORMAT or data.get("definition")
                        != self.definition or data.get("machine") != self.machine):
                    continue
                script = {(int(s), str(t), int(n)): float(u) for s, t, n, u in data["draws"]}
                trial = Trial(int(data["seed"]), script, int(data.get("fresh", 0)), "kept")
            except (OSError, ValueError, TypeError, KeyError, AttributeError):
                continue
            (failing if data.get("failing") else kept).append(trial)
        return failing + kept

    def save(self, seed: int, draws: Iterable[Choice], failing: str = "") -> Path:
        """Writes one schedule (whole, as the file it names by its content), and gives it."""
        data = {"format": _CORPUS_FORMAT, "definition": self.definition,
                "machine": self.machine, "seed": seed, "failing": failing,
                "draws": [[c.step, c.tag, c.n, c.u] for c in draws]}
        text = json.dumps(data, sort_keys=True)
        path = self.folder / f"{hashlib.sha256(text.encode()).hexdigest()[:16]}.json"
        try:
            if not path.exists():
                self.folder.mkdir(parents=True, exist_ok=True)
                write_output(path, text, "corpus entry")
        except OSError as exc:
            raise HarnessError(f"--corpus {self.folder}: cannot write the corpus there: "
                               f"{exc.strerror or exc}") from exc
        return path


def struck_keys(recorded: Sequence[Choice], faults: Sequence[tuple[int, str]]) -> tuple[Key, ...]:
    """Gives the draws whose fault struck: for each fault of the history (its step and the
    tag its kind is drawn under), the smallest draw of that tag in that step."""
    by_step: dict[tuple[int, str], Choice] = {}
    for choice in recorded:
        if choice.tag[0] == FAULT:
            held = by_step.get((choice.step, choice.tag))
            if held is None or choice.u < held.u:
                by_step[(choice.step, choice.tag)] = choice
    keys = []
    for step, tag in faults:
        found = by_step.get((step, tag))
        if found is not None:
            keys.append((found.step, found.tag, found.n))
    return tuple(sorted(set(keys)))
