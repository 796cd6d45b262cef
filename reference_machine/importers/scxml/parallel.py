"""SCXML's own algorithm over a `<parallel>` subtree, worked out at import.

A native parallel state runs its regions as separate executions joined at `done:`; SCXML's
regions share one configuration, one datamodel and one microstep, may be left from inside,
and take eventless transitions together. The importer gives a chart that SCXML meaning by
flattening each outermost `<parallel>`: each configuration its subtree can be in becomes one
native state, and each way a configuration can take an event (which transitions SCXML's
selection picks, given which conditions hold) becomes one native transition whose actions are
the exits, the transition bodies and the entries in SCXML's order.

This module is that algorithm and nothing else: states and transitions by id, no XML and no
native format (the importer's `flattening` turns its answers into native states). It follows
the W3C recommendation's Appendix D (`selectTransitions`, `removeConflictingTransitions`,
`computeExitSet`, `computeEntrySet`, `enterStates`), with conditions left open: a selection is
made for each combination of condition outcomes that changes it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum

from reference_machine.errors import ReferenceMachineError

__all__ = ["ATOMIC_MAX", "CONFIGURATIONS_MAX", "OUTSIDE", "SELECTIONS_MAX", "Entered", "Kind",
           "Move", "NotFlat", "Place", "Selection", "Subtree"]

#: The most configurations one flattened subtree may have; past it the chart keeps the native
#: parallel state (whose regions run apart).
CONFIGURATIONS_MAX = 128
#: The most selections one configuration may make for one event (each a combination of
#: condition outcomes).
SELECTIONS_MAX = 64
#: The most atomic states one configuration may hold (regions active at once).
ATOMIC_MAX = 64

#: A transition's domain above the flattened subtree: it leaves the subtree's root.
OUTSIDE = "\x00outside"


class NotFlat(ReferenceMachineError):
    """The subtree cannot be flattened here; the message says why."""


class Kind(Enum):
    """How a selection moves: `STAY` leaves and enters nothing, `MOVE` stays inside the
    subtree, `REENTER` leaves its root and enters it again, `LEAVE` goes outside."""

    STAY = "stay"
    MOVE = "move"
    REENTER = "reenter"
    LEAVE = "leave"


@dataclass(frozen=True, slots=True)
class Place:
    """A state of the subtree: `kind` is state, parallel or final; `parent` None for the
    root; `initial` the ids a compound state enters by default."""

    ident: str
    kind: str
    parent: str | None
    children: tuple[str, ...]
    initial: tuple[str, ...]
    order: int


@dataclass(frozen=True, slots=True)
class Move:
    """A transition declared on a state of the subtree (its root included): `events` None
    when it is eventless; `targets` empty when it has none; a target outside the subtree is
    named as the chart names it."""

    index: int
    source: str
    events: tuple[str, ...] | None
    guarded: bool
    targets: tuple[str, ...]
    internal: bool


@dataclass(frozen=True, slots=True)
class Entered:
    """A state entered, and the `done.state.ID` events entering it raises (the first with
    the state's own `<donedata>` when it is a final)."""

    ident: str
    done: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Selection:
    """One way a configuration takes an event.

    `conditions` are what must hold (move index, outcome); `moves` the transitions taken, in
    the order their bodies run; `target` the configuration after (for `LEAVE`, the one
    before: the native move does the exits); `exits` and `entries` include the root when the
    kind is `REENTER`; `leaving` is the move whose targets are outside (`LEAVE`), else -1."""

    conditions: tuple[tuple[int, bool], ...]
    moves: tuple[int, ...]
    kind: Kind
    exits: tuple[str, ...]
    entries: tuple[Entered, ...]
    target: frozenset[str]
    leaving: int = -1


class Subtree:
    """A `<parallel>` subtree and the SCXML semantics of its configurations.

    A configuration is the frozenset of the subtree's active states, its root included."""

    def __init__(self, root: str, places: dict[str, Place], moves: list[Move],
                 matches: Callable[[tuple[str, ...], str], bool]) -> None:
        self.root = root
        self.places = places
        self.moves = moves
        self.matches = matches
        self._by_source: dict[str, list[Move]] = {}
        for move in moves:
            self._by_source.setdefault(move.source, []).append(move)
        self._domains: dict[int, str | None] = {}

    # -- the tree ----------------------------------------------------------------------------

    def ancestors(self, ident: str) -> list[str]:
        """Gives the proper ancestors of `ident` inside the subtree, innermost first."""
        out = []
        parent = self.places[ident].parent
        while parent is not None:
            out.append(parent)
            parent = self.places[parent].parent
        return out

    def is_descendant(self, ident: str, ancestor: str) -> bool:
        """Tells whether `ident` is a proper descendant of `ancestor`."""
        return ident in self.places and ancestor in self.ancestors(ident)

    def add(self, move: Move) -> None:
        """Adds a transition the converter found late (an invoke's `<finalize>`)."""
        self.moves.append(move)
        self._by_source.setdefault(move.source, []).append(move)

    def _is_compound(self, ident: str) -> bool:
        place = self.places[ident]
        return place.kind == "state" and bool(place.children)

    def in_final(self, ident: str, config: Iterable[str]) -> bool:
        """SCXML's isInFinalState within `config`."""
        active = set(config)
        place = self.places[ident]
        if place.kind == "parallel":
            return all(self.in_final(child, active) for child in place.children)
        if self._is_compound(ident):
            return any(child in active and self.places[child].kind == "final"
                       for child in place.children)
        return False

    def ordered(self, idents: Iterable[str]) -> list[str]:
        """Gives `idents` in document order."""
        return sorted(idents, key=lambda ident: self.places[ident].order)

    # -- entering ----------------------------------------------------------------------------

    def default(self) -> frozenset[str]:
        """The configuration the root enters by default."""
        return self.entered(())

    def entered(self, targets: tuple[str, ...]) -> frozenset[str]:
        """The configuration a transition from outside entering `targets` (ids inside the
        subtree; none for the default) makes."""
        into: set[str] = set()
        for target in targets:
            self._descendants(target, into)
        for target in targets:
            self._ancestors_into(target, None, into)
        if not targets:
            self._descendants(self.root, into)
        into.add(self.root)
        entered = frozenset(into)
        self.check_legal(entered)
        return entered

    def _descendants(self, ident: str, into: set[str]) -> None:
        into.add(ident)
        place = self.places[ident]
        if self._is_compound(ident):
            for target in place.initial:  # all descendants first, then ancestors (the spec)
                self._descendants(target, into)
            for target in place.initial:
                self._ancestors_into(target, ident, into)
        elif place.kind == "parallel":
            for child in place.children:
                if not any(s == child or self.is_descendant(s, child) for s in into):
                    self._descendants(child, into)

    def _ancestors_into(self, ident: str, stop: str | None, into: set[str]) -> None:
        for ancestor in self.ancestors(ident):
            if ancestor == stop:
                return
            into.add(ancestor)
            if self.places[ancestor].kind == "parallel":
                for child in self.places[ancestor].children:
                    if not any(s == child or self.is_descendant(s, child) for s in into):
                        self._descendants(child, into)

    def entry_order(self, entering: Iterable[str], before: Iterable[str]) -> tuple[Entered, ...]:
        """Gives the states `entering` in document order with the done events each raises,
        entered into the configuration `before` (SCXML's enterStates)."""
        config = set(before)
        out = []
        for ident in self.ordered(entering):
            config.add(ident)
            done: list[str] = []
            place = self.places[ident]
            if place.kind == "final" and place.parent is not None:
                done.append(place.parent)
                grandparent = self.places[place.parent].parent
                if grandparent is not None and self.places[grandparent].kind == "parallel" \
                        and all(self.in_final(child, config)
                                for child in self.places[grandparent].children):
                    done.append(grandparent)
            out.append(Entered(ident, tuple(done)))
        return tuple(out)

    # -- selecting ---------------------------------------------------------------------------

    def atomic(self, config: frozenset[str]) -> list[str]:
        """Gives the atomic states of `config` in document order."""
        return self.ordered(s for s in config if not self.places[s].children)

    def _candidates(self, atomic: str, event: str | None) -> list[Move]:
        found = []
        for state in (atomic, *self.ancestors(atomic)):
            for move in self._by_source.get(state, ()):
                if event is None:
                    if move.events is None:
                        found.append(move)
                elif move.events is not None and self.matches(move.events, event):
                    found.append(move)
        return found

    def selections(self, config: frozenset[str], event: str | None) -> list[Selection]:
        """Gives each way `config` takes `event` (None: its eventless transitions), for each
        combination of condition outcomes that selects something; when none holds the
        chart's states above the subtree are asked, as SCXML does."""
        atomic = self.atomic(config)
        if len(atomic) > ATOMIC_MAX:
            raise NotFlat(f"more than {ATOMIC_MAX} regions are active at once")
        chains = [self._candidates(a, event) for a in atomic]
        combos: list[tuple[dict[int, bool], list[int]]] = []
        self._combine(chains, 0, {}, [], combos)
        out = []
        for conditions, chosen in combos:
            unique = list(dict.fromkeys(chosen))
            if not unique:
                continue
            kept = self._without_conflicts(unique, config)
            out.append(self._microstep(config, kept, conditions))
        return out

    def _combine(self, chains: list[list[Move]], at: int, conditions: dict[int, bool],
                 chosen: list[int], out: list[tuple[dict[int, bool], list[int]]]) -> None:
        if at == len(chains):
            if len(out) >= SELECTIONS_MAX:
                raise NotFlat(f"more than {SELECTIONS_MAX} combinations of conditions select "
                              "transitions for one event in one configuration")
            out.append((conditions, chosen))
            return
        known = dict(conditions)
        for move in chains[at]:
            outcome = known.get(move.index)
            if outcome is False:
                continue
            if not move.guarded or outcome is True:
                self._combine(chains, at + 1, known, [*chosen, move.index], out)
                return
            self._combine(chains, at + 1, {**known, move.index: True},
                          [*chosen, move.index], out)
            known = {**known, move.index: False}
        self._combine(chains, at + 1, known, chosen, out)

    def domain(self, move: Move) -> str | None:
        """SCXML's transition domain: None for a targetless transition, `OUTSIDE` for one
        whose domain is above the root."""
        if move.index in self._domains:
            return self._domains[move.index]
        found: str | None
        if not move.targets:
            found = None
        elif any(t not in self.places for t in move.targets):
            found = OUTSIDE
        elif move.internal and self._is_compound(move.source) and all(
                self.is_descendant(t, move.source) for t in move.targets):
            found = move.source
        else:
            found = OUTSIDE
            for ancestor in self.ancestors(move.source):
                if self._is_compound(ancestor) and all(
                        self.is_descendant(t, ancestor) for t in move.targets):
                    found = ancestor
                    break
        self._domains[move.index] = found
        return found

    def exit_set(self, move: Move, config: frozenset[str]) -> frozenset[str]:
        domain = self.domain(move)
        if domain is None:
            return frozenset()
        if domain == OUTSIDE:
            return config
        return frozenset(s for s in config if self.is_descendant(s, domain))

    def _without_conflicts(self, chosen: list[int], config: frozenset[str]) -> list[int]:
        kept: list[int] = []
        for index in chosen:
            move = self.moves[index]
            exits = self.exit_set(move, config)
            preempted = False
            removed = []
            for other in kept:
                if exits & self.exit_set(self.moves[other], config):
                    if self.is_descendant(move.source, self.moves[other].source):
                        removed.append(other)
                    else:
                        preempted = True
                        break
            if not preempted:
                kept = [k for k in kept if k not in removed] + [index]
        return kept

    def _microstep(self, config: frozenset[str], kept: list[int],
                   conditions: dict[int, bool]) -> Selection:
        ordered = tuple(sorted(conditions.items()))
        moves = [self.moves[i] for i in kept]
        leaving = [m for m in moves if self.domain(m) == OUTSIDE
                   and any(t not in self.places for t in m.targets)]
        if leaving:
            if any(t in self.places for t in leaving[0].targets):
                raise NotFlat(f"a transition of {leaving[0].source!r} targets states both "
                              "inside and outside the parallel state")
            return Selection(ordered, tuple(kept), Kind.LEAVE, (), (), config, leaving[0].index)
        exits: set[str] = set()
        for move in moves:
            exits |= self.exit_set(move, config)
        into: set[str] = set()
        for move in moves:
            if not move.targets:
                continue
            for target in move.targets:
                self._descendants(target, into)
            domain = self.domain(move)
            for target in move.targets:
                self._ancestors_into(target, None if domain == OUTSIDE else domain, into)
        if any(self.domain(m) == OUTSIDE for m in moves):
            into.add(self.root)
            exits.add(self.root)
        if not exits and not into:
            return Selection(ordered, tuple(kept), Kind.STAY, (), (), config)
        after = frozenset((config - exits) | into)
        self.check_legal(after)
        kind = Kind.REENTER if self.root in exits else Kind.MOVE
        exit_order = tuple(reversed(self.ordered(exits)))
        entries = self.entry_order(into, config - exits)
        return Selection(ordered, tuple(kept), kind, exit_order, entries, after)

    def check_legal(self, config: frozenset[str]) -> None:
        """Raises `NotFlat` unless `config` is one SCXML allows: each active compound state
        with one active child, each active parallel state with all of them (targets naming
        two states of one region make one it does not)."""
        for ident in config:
            place = self.places[ident]
            active = [child for child in place.children if child in config]
            if (place.kind == "parallel" and len(active) != len(place.children)) or (
                    self._is_compound(ident) and len(active) != 1):
                raise NotFlat(f"its transitions or initial states make {ident!r} active with "
                              f"{len(active)} active children, which SCXML does not allow")
