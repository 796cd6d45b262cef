"""Adequacy: what a campaign's runs exercised, against what its `held` would claim.

Every invariant holding over runs that never crashed the machine where it declares crash
points, never met a fault kind it had a place for, or never saw the moves that took it where
it went, proves less than it says. A campaign records, per run (`Exercised`, merged across
runs):

- per invariant, how many records it judged (a record of the kind it reads: an applied effect,
  a move, an approval decided, a recovery, ...), and what it needs to judge any (the machine's
  commits, its `replay`, a construct of the definition);
- per crash point the machine offers, how often the runs passed it with faults on, and how
  often they crashed it there;
- per fault kind, how often it had a place to strike (`Chances`), and how often it did.

`adequacy(...)` turns those, with the campaign's coverage (which states were reached, and by
which moves), into the campaign's `Adequacy`: the invariants that checked something, and the
gaps. A gap is one of

- `crash_point:<name>`: a crash point the machine offers (or the plan names) where no run
  crashed it, whether the runs passed it or never took the path that does;
- `fault:<kind>`: a fault kind the plan enables that had places to strike and never did;
- `outcome:success`: the definition declares a success final state, and every run that
  finished ended in another (a failure): the workflow's own path went unjudged;
- `moves:<state>`: a state the runs reached with none of the moves into it seen (a machine that
  passes through states inside one call, and reports neither its commits nor `moves`): the
  path there went unjudged. A machine that reports its commits (`watch()`) shows each move it
  commits, which `legal_transitions` judges: it has no such gap.

A gap makes the campaign's verdict `untested`, not `held`, unless the definition (or the
campaign's options: the pytest marker's `untested=`) acknowledges it, with a reason, under
`untested: {<code>: <reason>}` (`crash_point:*`, `fault:*` and `moves:*` acknowledge every gap
of the kind). A fault kind that never had a place to strike (no timer fell due, no approval
was decided, the machine never probes `store_write` or has no second worker) is not a gap: the
campaign says it could not try it. An invariant that could judge nothing is not a gap either:
it is left out of the count of invariants checked, with the reason.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fault_injection import FaultKind, FaultPlan
from harness.checks.coverage import UNSEEN_EVENT, Coverage
from harness.checks.invariants import chart_of, legal_table, per_definition
from harness.errors import HarnessError
from harness.sim.history import (
    Applied,
    Committed,
    Crashed,
    Decided,
    Delivered,
    Dispatched,
    FaultInjected,
    Finished,
    HistoryRecord,
    Observed,
    Recovered,
    Replayed,
)
from harness.sim.simulator import Chances
from reference_machine import (
    APPROVAL_DENIED,
    APPROVAL_GRANTED,
    UNTESTED_KINDS,
    WorkflowDefinition,
)
from reference_machine.findings import Finding, Severity, did_you_mean

__all__ = ["GAP_KINDS", "Adequacy", "Exercised", "Gap", "adequacy", "check_acknowledged",
           "exercised", "untested_findings"]

#: The kinds of gap, as an acknowledgement's code begins (`crash_point:after_save`).
GAP_KINDS = UNTESTED_KINDS
_CRASH = str(FaultKind.CRASH)
_APPROVALS = frozenset({APPROVAL_GRANTED, APPROVAL_DENIED})


@dataclass(frozen=True, slots=True)
class Exercised:
    """What runs exercised, summed over them (`merge`): per invariant the records it judged,
    per crash point its passes and crashes, per fault kind its chances and injections; the
    crash points the machine offered, the fault kinds it said it cannot take, and how many
    runs had commits and replays to judge."""

    runs: int = 0
    judged: Mapping[str, int] = field(default_factory=dict)
    passed: Mapping[str, int] = field(default_factory=dict)
    crashed: Mapping[str, int] = field(default_factory=dict)
    chances: Mapping[str, int] = field(default_factory=dict)
    injected: Mapping[str, int] = field(default_factory=dict)
    points: tuple[str, ...] = ()
    unoffered: frozenset[str] = frozenset()
    committed: int = 0  # runs whose machine reported its commits (watch())
    replayed: int = 0  # runs whose machine replayed its log at the end

    def merge(self, other: Exercised) -> Exercised:
        """Gives what both exercised."""
        return Exercised(self.runs + other.runs, _sum(self.judged, other.judged),
                         _sum(self.passed, other.passed), _sum(self.crashed, other.crashed),
                         _sum(self.chances, other.chances), _sum(self.injected, other.injected),
                         tuple(dict.fromkeys((*self.points, *other.points))),
                         self.unoffered | other.unoffered, self.committed + other.committed,
                         self.replayed + other.replayed)


def _sum(first: Mapping[str, int], second: Mapping[str, int]) -> dict[str, int]:
    if not second:
        return dict(first)
    total = dict(first)
    for key, count in second.items():
        total[key] = total.get(key, 0) + count
    return total


@dataclass(frozen=True, slots=True)
class Gap:
    """Something a campaign claims and did not exercise: its `code` (what an acknowledgement
    names), what was left untested, and how to reach it; `reason` is the acknowledgement's,
    when the definition or the options accept the gap."""

    code: str
    what: str
    how: str
    reason: str = ""

    def __str__(self) -> str:
        return f"{self.what}; {self.how}"

    def to_dict(self) -> dict[str, str]:
        """Gives the gap as plain JSON data."""
        return {"code": self.code, "what": self.what, "how": self.how,
                **({"reason": self.reason} if self.reason else {})}


@dataclass(frozen=True, slots=True)
class Adequacy:
    """What a campaign was worth: `gaps` (its verdict is `untested` while there is one), the
    gaps acknowledged with a reason, the acknowledgements no gap needed (`stale`), the
    invariants that checked something, those the definition gives nothing to check (`moot`:
    no compensation, no parallel state, ...), those this machine keeps from checking anything
    (`unable`: it reports no commits, or cannot replay its log) and those that found nothing
    to judge in these runs (`idle`, with what never happened), each with why; and the fault
    kinds that never had a place to strike (`untried`, with why)."""

    gaps: tuple[Gap, ...] = ()
    acknowledged: tuple[Gap, ...] = ()
    stale: tuple[str, ...] = ()
    checked: tuple[str, ...] = ()
    unable: Mapping[str, str] = field(default_factory=dict)
    idle: Mapping[str, str] = field(default_factory=dict)
    moot: Mapping[str, str] = field(default_factory=dict)
    untried: Mapping[str, str] = field(default_factory=dict)
    exercised: Exercised = field(default_factory=Exercised)

    @property
    def summary(self) -> str:
        """Gives the gaps in one line ("" when there is none)."""
        if not self.gaps:
            return ""
        return (f"{len(self.gaps)} thing{'s' if len(self.gaps) > 1 else ''} left untested: "
                + "; ".join(gap.what for gap in self.gaps))

    @property
    def counted(self) -> str:
        """Gives how many invariants checked something, of those the campaign ran: "14 of 22
        invariants checked"."""
        total = len(self.checked) + len(self.unable) + len(self.idle) + len(self.moot)
        return f"{len(self.checked)} of {total} invariants checked"

    def notes(self) -> tuple[str, ...]:
        """Gives what a verdict is read with: the invariants this machine keeps from checking
        anything, the fault kinds never tried, the gaps acknowledged (a held that left them
        says so), the stale acknowledgements (what the definition gives nothing to check is
        left to the count: it is no news)."""
        notes = []
        if self.unable:
            notes.append(f"{len(self.unable)} invariant{'s' if len(self.unable) > 1 else ''} "
                         "could check nothing on this machine: "
                         + "; ".join(f"{name} ({why})" for name, why in self.unable.items()))
        if self.untried:
            notes.append("fault kinds never tried (no place to strike): "
                         + "; ".join(f"{kind} ({why})" for kind, why in self.untried.items()))
        if self.acknowledged:
            notes.append("left untested, as acknowledged: " + "; ".join(
                f"{gap.code} ({gap.reason})" for gap in self.acknowledged))
        notes += [f"untested.{code} is acknowledged, but the campaign left no such gap: "
                  "remove the entry, or keep it for campaigns that do" for code in self.stale]
        return tuple(notes)

    def report(self) -> dict[str, Any]:
        """Gives the adequacy as plain JSON data: the gaps and what was exercised, per
        invariant, crash point and fault kind."""
        done = self.exercised
        return {
            "untested": [gap.to_dict() for gap in self.gaps],
            "acknowledged": [gap.to_dict() for gap in self.acknowledged],
            "stale": list(self.stale),
            "checked": list(self.checked),
            "invariants": {name: {"judged": done.judged.get(name, 0),
                                  **_why(name, self)}
                           for name in (*self.checked, *self.unable, *self.idle, *self.moot)},
            "crash_points": {point: {"passed": done.passed.get(point, 0),
                                     "crashed": done.crashed.get(point, 0)}
                             for point in done.points},
            "faults": {kind: {"chances": done.chances.get(kind, 0),
                              "injected": done.injected.get(kind, 0),
                              **({"untried": self.untried[kind]} if kind in self.untried
                                 else {})}
                       for kind in sorted({*done.chances, *done.injected, *self.untried})},
        }


def _why(name: str, adequacy: Adequacy) -> dict[str, str]:
    """Gives why an invariant judged nothing, under the kind of reason, if it did not."""
    for kind, reasons in (("unable", adequacy.unable), ("moot", adequacy.moot),
                          ("idle", adequacy.idle)):
        if name in reasons:
            return {kind: reasons[name]}
    return {}


# -- one run ----------------------------------------------------------------------------------


@per_definition
def _features(definition: WorkflowDefinition) -> dict[str, Any]:
    """Gives what the invariants' judges read of a definition, derived once."""
    states = definition.states.values()
    chart = chart_of(definition)
    budgets = definition.budgets
    return {
        "guards": any(t.guard is not None for state in states
                      for ts in (*state.on.values(), state.always, state.done) for t in ts),
        "approvals": any(state.approval is not None for state in states),
        "gated": frozenset(state.step.tool for state in states
                           if state.step is not None and state.step.needs_approval),
        "undo": frozenset(state.step.compensation.tool for state in states
                          if state.step is not None and state.step.compensation is not None),
        "budgets": budgets.any_limit or budgets.cost_max is not None
        or budgets.deadline_ms is not None,
        "regions": bool(chart.scoped),
        "maps": any(state.kind == "map" for state in states),
        "eventless": bool(chart.onward),
    }


class _Tally:
    """One pass over a run's history: the counts the invariants' judges read."""

    __slots__ = ("accepted", "after_final", "applied", "approvals", "commits", "crashed",
                 "dispatched", "finals", "finished", "gated", "moves", "recovered",
                 "redelivered", "refused", "region_commits", "replayed", "undone")

    def __init__(self, definition: WorkflowDefinition,
                 history: Sequence[HistoryRecord]) -> None:
        features = _features(definition)
        gated, undo = features["gated"], features["undo"]
        self.commits = self.accepted = self.moves = self.applied = self.gated = 0
        self.undone = self.dispatched = self.approvals = self.redelivered = 0
        self.after_final = self.finals = self.recovered = self.replayed = 0
        self.finished = self.refused = self.region_commits = 0
        self.crashed: Counter[str] = Counter()
        final: set[str] = set()
        delivered: set[tuple[str, str]] = set()
        last: dict[str, tuple[str, int]] = {}
        for record in history:
            if type(record) is Committed:
                self.commits += 1
                if record.execution in final:
                    self.after_final += 1
                if record.decision != "accepted":
                    self.refused += 1
                    continue
                self.accepted += 1
                if record.regions:
                    self.region_commits += 1
                if record.moved and record.from_state:
                    self.moves += 1
                if record.state in definition.states and definition.states[record.state].final:
                    final.add(record.execution)
            elif type(record) is Applied:
                self.applied += 1
                if record.tool in gated:
                    self.gated += 1
                if record.tool in undo:
                    self.undone += 1
            elif type(record) is Dispatched:
                if record.execution:
                    self.dispatched += 1
                    if record.execution in final:
                        self.after_final += 1
            elif type(record) is Delivered:
                key = (record.execution, record.event_id)
                if key in delivered:
                    self.redelivered += 1
                delivered.add(key)
                if record.type in _APPROVALS:
                    self.approvals += 1
                if record.execution in final:
                    self.after_final += 1
            elif type(record) is Decided:
                if record.decision.startswith("rejected"):
                    self.refused += 1
            elif type(record) is Observed:
                before = last.get(record.execution)
                last[record.execution] = (record.state, record.version)
                if record.execution in final:
                    self.after_final += 1
                elif record.status == "final":
                    final.add(record.execution)
                if record.moves:
                    self.moves += len(record.moves)
                elif before is not None and before != (record.state, record.version):
                    self.moves += 1
            elif type(record) is Crashed:
                self.crashed[record.point] += 1
            elif type(record) is Recovered:
                self.recovered += 1
            elif type(record) is Replayed:
                self.replayed += 1
            elif type(record) is Finished:
                self.finished += 1
        self.finals = len(final)


#: Per built-in invariant: what it needs to judge anything ("commits": a machine that reports
#: them; "replay": one that replays its log; else a feature of the definition, or nothing),
#: and the records it judges in a run's tally.
_Judge = tuple[tuple[str, ...], Callable[[_Tally], int]]
JUDGES: Mapping[str, _Judge] = {
    "no_duplicate_effect": ((), lambda t: t.applied),
    "persist_before_effect": (("commits",), lambda t: t.dispatched),
    "terminal_stays_terminal": ((), lambda t: t.finals + t.after_final),
    "legal_transitions": ((), lambda t: t.moves),
    "guards_held": (("commits", "guards"), lambda t: t.moves),
    "approval_genuine": (("approvals",), lambda t: t.approvals),
    "approved_effects": (("gated",), lambda t: t.gated),
    "retries_within_bounds": (("commits",), lambda t: t.dispatched),
    "budgets_within_bounds": (("commits", "budgets"), lambda t: t.accepted),
    "compensation_order": (("undo",), lambda t: t.undone),
    "compensation_complete": (("undo",), lambda t: t.undone),
    "nothing_lost": (("commits",), lambda t: t.recovered),
    "replay_matches": (("replay",), lambda t: t.replayed),
    "delivered_once": ((), lambda t: t.redelivered),
    "versions_increase": (("commits",), lambda t: t.commits),
    "join_after_regions": (("commits", "regions"), lambda t: t.region_commits),
    "map_results_per_item": (("commits", "maps"), lambda t: t.region_commits),
    "no_region_effect_after_leaving": (("commits", "regions"), lambda t: t.region_commits),
    "region_keys_distinct": (("commits", "regions"), lambda t: t.region_commits),
    "no_eventless_runaway": (("eventless",), lambda t: t.refused),
    "no_stuck_execution": ((), lambda t: t.finished),
    "machine_ok": ((), lambda t: 1),
}

#: Why an invariant that needs a thing judged nothing, by the thing.
_NEEDS = {
    "commits": ("the machine reports no commits (a machine of your own reports them with "
                "watch(); an adapter's target cannot)"),
    "replay": "the machine offers no replay(execution_id)",
    "guards": "the definition has no guard",
    "approvals": "the definition has no approval",
    "gated": "no step of the definition needs approval",
    "undo": "the definition has no compensation",
    "budgets": "the definition sets no budget",
    "regions": "the definition has no parallel or map state",
    "maps": "the definition has no map state",
    "eventless": "the definition has no eventless transition",
}

#: What never happened in the runs, for an invariant that could judge and judged nothing.
_IDLE = {
    "no_duplicate_effect": "no effect was applied",
    "persist_before_effect": "no tool was called",
    "terminal_stays_terminal": "no execution ended",
    "legal_transitions": "no move was seen",
    "guards_held": "no move was seen",
    "approval_genuine": "no approval was decided",
    "approved_effects": "no effect that needs approval was applied",
    "retries_within_bounds": "no tool was called",
    "budgets_within_bounds": "no event was accepted",
    "compensation_order": "nothing was compensated",
    "compensation_complete": "nothing was compensated",
    "nothing_lost": "no crash was recovered from",
    "replay_matches": "no log was replayed",
    "delivered_once": "no event was delivered twice",
    "versions_increase": "nothing was committed",
    "join_after_regions": "no region ran",
    "map_results_per_item": "no map item ran",
    "no_region_effect_after_leaving": "no region ran",
    "region_keys_distinct": "no region ran",
    "no_eventless_runaway": "no event was refused",
    "no_stuck_execution": "no run ended",
}


def exercised(definition: WorkflowDefinition, history: Sequence[HistoryRecord],
              chances: Chances, invariants: Iterable[str]) -> Exercised:
    """Gives what one run exercised: per invariant named the records it judged (a user's
    invariant judges its run, once), per crash point its passes and crashes, per fault kind
    its chances and injections."""
    tally = _Tally(definition, history)
    features = _features(definition)
    had = {"commits": tally.commits > 0, "replay": tally.replayed > 0}
    judged: dict[str, int] = {}
    for name in invariants:
        judge = JUDGES.get(name)
        if judge is None:
            judged[name] = 1
            continue
        needs, count = judge
        # without what it needs (the definition's construct, the machine's commits or
        # replay), an invariant judges nothing, whatever records the run holds
        if all(features[need] if need in features else had[need] for need in needs):
            judged[name] = count(tally)
        else:
            judged[name] = 0
    injected = Counter(str(record.fault) for record in history
                       if type(record) is FaultInjected)
    return Exercised(1, judged, dict(chances.passed), dict(tally.crashed),
                     dict(chances.chances), dict(injected), chances.points,
                     chances.unoffered, 1 if tally.commits else 0,
                     1 if tally.replayed else 0)


# -- the campaign -------------------------------------------------------------------------------


def adequacy(definition: WorkflowDefinition, done: Exercised, coverage: Coverage,
             plan: FaultPlan, invariants: Sequence[str],
             accepted: Mapping[str, str] | None = None) -> Adequacy:
    """Gives what a campaign that exercised `done` and reached `coverage` under `plan` was
    worth: the invariants that checked something, and the gaps (`accepted`, the
    acknowledgements of the options, adds to the definition's own)."""
    acknowledged = {**definition.untested, **(accepted or {})}
    checked, unable, idle, moot = _invariants(definition, done, invariants)
    found = [*_crash_gaps(done, plan), *_fault_gaps(done, plan)]
    if not done.committed:  # a machine that reports its commits shows every move it makes
        found += _move_gaps(definition, coverage)
    found += _outcome_gaps(definition, coverage)
    gaps, kept = [], []
    used: set[str] = set()
    for gap in found:
        code = _acknowledging(gap.code, acknowledged)
        if code is None:
            gaps.append(gap)
        else:
            used.add(code)
            kept.append(Gap(gap.code, gap.what, gap.how, acknowledged[code]))
    stale = tuple(code for code in acknowledged if code not in used)
    return Adequacy(tuple(gaps), tuple(kept), stale, checked, unable, idle, moot,
                    _untried(done, plan), done)


def _acknowledging(code: str, acknowledged: Mapping[str, str]) -> str | None:
    """Gives the acknowledgement that covers a gap's code: itself, or its kind's `*`."""
    if code in acknowledged:
        return code
    wildcard = f"{code.partition(':')[0]}:*"
    return wildcard if wildcard in acknowledged else None


def _invariants(definition: WorkflowDefinition, done: Exercised, invariants: Sequence[str]
                ) -> tuple[tuple[str, ...], dict[str, str], dict[str, str], dict[str, str]]:
    """Gives the invariants that judged something; those the machine kept from judging (and
    why); those that could and found nothing to judge (and what never happened); those the
    definition gives nothing to judge (and why)."""
    features = _features(definition)
    checked: list[str] = []
    unable: dict[str, str] = {}
    idle: dict[str, str] = {}
    moot: dict[str, str] = {}
    for name in invariants:
        if done.judged.get(name, 0) > 0:
            checked.append(name)
            continue
        needs = JUDGES[name][0] if name in JUDGES else ()
        lacking = [need for need in needs if need in features and not features[need]]
        if lacking:
            moot[name] = _NEEDS[lacking[0]]
        elif "commits" in needs and not done.committed:
            unable[name] = _NEEDS["commits"]
        elif "replay" in needs and not done.replayed:
            unable[name] = _NEEDS["replay"]
        else:
            idle[name] = _IDLE.get(name, "nothing to judge")
    return tuple(checked), unable, idle, moot


def _crash_gaps(done: Exercised, plan: FaultPlan) -> list[Gap]:
    """Gives a gap per crash point the campaign could crash and never did."""
    crash = plan.get(FaultKind.CRASH)
    if crash is None or crash.rate <= 0 or not done.runs:
        return []
    gaps = []
    for point in crash.points or done.points:
        if done.crashed.get(point, 0):
            continue
        passed = done.passed.get(point, 0)
        if passed:
            what = (f"crash point {point!r} was passed {passed:,} times with faults on and "
                    "never crashed there")
            how = ("give more runs (--runs), or crash more often there: a plan with "
                   f"`crash: {{rate: 0.2, points: [{point}]}}` (--plan)")
        else:
            what = (f"crash point {point!r} was never passed: no run took the path that "
                    f"calls probe({point!r})")
            how = ("give more runs (--runs), or steer the runs there (--context, "
                   "--executions); if no run can pass it, acknowledge it: "
                   f"`untested: {{crash_point:{point}: <why>}}`")
        gaps.append(Gap(f"crash_point:{point}", what, how))
    return gaps


def _fault_gaps(done: Exercised, plan: FaultPlan) -> list[Gap]:
    """Gives a gap per fault kind the plan enables that had places to strike and never did
    (a crash is judged per crash point)."""
    gaps = []
    for kind in plan.kinds:
        name = str(kind)
        if name == _CRASH or name in done.unoffered or done.injected.get(name, 0):
            continue
        chances = done.chances.get(name, 0)
        if chances:
            gaps.append(Gap(f"fault:{name}",
                            f"fault {name} had {chances:,} places to strike and was never "
                            "injected",
                            f"give more runs (--runs), or raise its rate (a plan: "
                            f"`{name}: 0.3`, --plan); or leave it out (--faults)"))
    return gaps


#: Why a fault kind had no place to strike, by kind.
_NO_PLACE = {
    str(FaultKind.DUPLICATE_EVENT): "no event was answered",
    str(FaultKind.LATE_EVENT): "no event was answered",
    str(FaultKind.REORDERED_EVENTS): "no event was sent",
    str(FaultKind.DROPPED_EVENT): "no event was sent",
    str(FaultKind.TIMER_SKEW): "no timer fell due, or the plan's max_skew is 0",
    str(FaultKind.STORE_WRITE_FAILURE): "the machine never calls probe('store_write')",
    str(FaultKind.SECOND_WORKER): "the machine passed no point a second worker can act at",
    str(FaultKind.FORGED_APPROVAL): "no approval was decided",
    str(FaultKind.WRONG_CORRELATION): "no event with `correlate:` was sent",
    _CRASH: "the machine passed no crash point",
}


def _untried(done: Exercised, plan: FaultPlan) -> dict[str, str]:
    """Gives the fault kinds the plan enables that never had a place to strike, and why."""
    untried = {}
    for kind in plan.kinds:
        name = str(kind)
        if name in done.unoffered:
            untried[name] = ("the machine offers no second worker (worker() gave None: a "
                             "deployment that runs one runner per execution)")
        elif not done.chances.get(name, 0) and not done.injected.get(name, 0) and done.runs:
            untried[name] = _NO_PLACE.get(name, "no tool was called")
    return untried


@per_definition
def _moves_into(definition: WorkflowDefinition) -> tuple[frozenset[str], frozenset[tuple[str,
                                                                                       str]]]:
    """Gives the states a run begins in (the start, each region's and map item's first leaf),
    and every (source, target) one declared or forced move makes (a source's ancestors'
    moves included)."""
    chart = chart_of(definition)
    entries = frozenset({definition.initial, *chart.starts.values()})
    targets: dict[str, set[str]] = {}
    for (source, _, _), landed in legal_table(definition).items():
        if source:
            targets.setdefault(source, set()).update(landed)
    pairs = {(name, target) for name, state in definition.states.items()
             for holder in (name, *state.ancestors) for target in targets.get(holder, ())}
    return entries, frozenset(pairs)


def _move_gaps(definition: WorkflowDefinition, coverage: Coverage) -> list[Gap]:
    """Gives a gap per state the runs reached with no move into it seen: only jumps from
    where it was last seen to where it is, which no one move makes."""
    entries, pairs = _moves_into(definition)
    seen: dict[str, set[tuple[str, str]]] = {}
    for source, label, target in coverage.transitions:
        seen.setdefault(target, set()).add((source, label))
    gaps = []
    for state in sorted(coverage.states):
        if state in entries or state not in definition.states:
            continue
        into = seen.get(state, set())
        if any(label != UNSEEN_EVENT or source == state or (source, state) in pairs
               for source, label in into):
            continue
        jumps = ", ".join(f"{source} -> {state}" for source, _ in sorted(into)) or "none"
        gaps.append(Gap(f"moves:{state}",
                        f"state {state!r} was reached but no move into it was seen (seen: "
                        f"{jumps}, which no one transition makes): the moves that led there "
                        "went unjudged",
                        "the machine moves through states inside one call: report each move "
                        "in Observation.moves, or give it watch()"))
    return gaps


def _outcome_gaps(definition: WorkflowDefinition, coverage: Coverage) -> list[Gap]:
    """Gives the gap of a campaign whose runs finished, none in success, though the
    definition declares a success: every invariant holding over runs that all fail says
    little of the path the workflow is for."""
    states = definition.states
    finals = sorted(name for name, state in states.items() if state.final
                    and not _in_region(definition, name))
    if not any(states[name].outcome == "success" for name in finals):
        return []
    ended = [name for name in finals if name in coverage.states]
    if not ended or any(states[name].outcome == "success" for name in ended):
        return []
    how = ", ".join(f"{name} ({states[name].outcome})" for name in ended)
    wins = ", ".join(name for name in finals if states[name].outcome == "success")
    return [Gap("outcome:success",
                f"no run ended in success: every run that finished ended in {how}, none in "
                f"{wins}; the workflow's own path went unjudged",
                "see why a run fails in its trace (`fsmharness run <target> --seed N`): an "
                "input or a tool's output the definition never takes, a guard that never "
                "holds; steer the runs (`--context`, a side file's tool outputs), or, when "
                "failing is the point, acknowledge it: `untested: {outcome:success: <why>}`")]


def _in_region(definition: WorkflowDefinition, name: str) -> bool:
    """Tells whether a state is inside a region of a parallel or map state (its final ends
    the region, not the execution)."""
    parent = definition.states[name].parent
    while parent is not None:
        state = definition.states[parent]
        if state.kind in ("parallel", "map"):
            return True
        parent = state.parent
    return False


def untested_findings(definition: WorkflowDefinition) -> tuple[Finding, ...]:
    """Gives, as lint findings, what a campaign refuses in the definition's `untested:` that
    its loader does not see: an entry naming no gap kind or fault kind, or giving no reason
    (the crash points it names are the machine's, checked when a campaign knows it)."""
    try:
        check_acknowledged(definition.untested)
    except HarnessError as exc:
        location, _, message = str(exc).partition(": ")
        return (Finding(Severity.ERROR, "untested-unknown", location, message),)
    return ()


def check_acknowledged(acknowledged: Mapping[str, str], points: Sequence[str] = (),
                       where: str = "untested.") -> None:
    """Raises `HarnessError` for an acknowledgement that cannot stand: a fault kind that is
    none, a crash point the machine does not offer (when `points` are known), no reason.
    Each message begins with `where` and the code (`untested.fault:x`)."""
    kinds = [str(kind) for kind in FaultKind]
    for code, reason in acknowledged.items():
        kind, _, name = code.partition(":")
        location = f"{where}{code}"
        if kind not in GAP_KINDS or not name:
            raise HarnessError(f"{location}: expected {', '.join(f'{k}:<name>' for k in GAP_KINDS)}"
                               f" (or <kind>:*){did_you_mean(kind, GAP_KINDS)}")
        if not isinstance(reason, str) or not reason.strip():
            raise HarnessError(f"{location}: acknowledging a gap needs a reason: `{code}: <why "
                               "it is acceptable here>`")
        if name == "*":
            continue
        if kind == "fault" and name not in kinds:
            raise HarnessError(f"{location}: no fault kind {name!r}"
                               f"{did_you_mean(name, kinds)}; known: {', '.join(kinds)}")
        if kind == "outcome" and name != "success":
            raise HarnessError(f"{location}: the outcome gap is outcome:success")
        if kind == "fault" and name == _CRASH:
            raise HarnessError(f"{location}: crashes are judged per crash point: acknowledge "
                               "crash_point:<name>, or crash_point:* for every one")
        if kind == "crash_point" and points and name not in points:
            raise HarnessError(f"{location}: the machine offers no crash point {name!r}"
                               f"{did_you_mean(name, points)}; its points: "
                               f"{', '.join(points)}")
