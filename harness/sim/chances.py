"""Where a run could inject faults and how readily it does: the rates a run draws against (its
plan's, none once healed), and the tally of the places each fault kind had to strike while
faults were on (which a run's result reports as `Chances`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from fault_injection import FORGED_VARIANTS, TOOL_FAULTS, FaultKind, FaultPlan

__all__ = [
    "ANSWERED",
    "CRASH",
    "FORGED",
    "SENT",
    "SKEW",
    "STORE",
    "WORKER",
    "WRONG",
    "Rates",
    "Tally",
]

# the fault kinds' names as Chances counts them; a send is a chance to drop or hold it back,
# an answered delivery one to copy it (duplicate, late)
CRASH, STORE, WORKER = (str(FaultKind.CRASH), str(FaultKind.STORE_WRITE_FAILURE),
                        str(FaultKind.SECOND_WORKER))
SKEW, FORGED, WRONG = (str(FaultKind.TIMER_SKEW), str(FaultKind.FORGED_APPROVAL),
                       str(FaultKind.WRONG_CORRELATION))
SENT, ANSWERED = "sent", "answered"
_ON_SEND = (str(FaultKind.DROPPED_EVENT), str(FaultKind.REORDERED_EVENTS))
_ON_ANSWER = (str(FaultKind.DUPLICATE_EVENT), str(FaultKind.LATE_EVENT))
_ON_CALL = tuple(str(kind) for kind in FaultKind if kind in TOOL_FAULTS)


class Rates:
    """The rates a run draws its faults against, and the numbers the faults take (how long a
    dropped event waits, how far a timer skews, which forgeries): the plan's, then none once
    the run heals (`set` changes them in place, so every part holding them sees it)."""

    __slots__ = ("forged_variants", "late_delay", "max_skew", "r_crash", "r_crash_at", "r_drop",
                 "r_dup", "r_forged", "r_late", "r_reorder", "r_skew", "r_store", "r_worker",
                 "r_wrong", "redeliver_after")

    def __init__(self, plan: FaultPlan) -> None:
        self.set(plan)

    def set(self, plan: FaultPlan) -> None:
        """Takes the rates of `plan` (at the start, and `no_faults()` once the run heals)."""
        self.r_crash = plan.rate(FaultKind.CRASH)
        # the points a run aimed at a crash point crashes at more often (FaultPlan.pinned_points)
        self.r_crash_at = {point: plan.crash_rate(point) for point in plan.pinned_points}
        self.r_store = plan.rate(FaultKind.STORE_WRITE_FAILURE)
        self.r_worker = plan.rate(FaultKind.SECOND_WORKER)
        self.r_drop = plan.rate(FaultKind.DROPPED_EVENT)
        self.r_reorder = plan.rate(FaultKind.REORDERED_EVENTS)
        self.r_dup = plan.rate(FaultKind.DUPLICATE_EVENT)
        self.r_late = plan.rate(FaultKind.LATE_EVENT)
        self.r_skew = plan.rate(FaultKind.TIMER_SKEW)
        self.r_forged = plan.rate(FaultKind.FORGED_APPROVAL)
        self.r_wrong = plan.rate(FaultKind.WRONG_CORRELATION)
        dropped, late = plan.get(FaultKind.DROPPED_EVENT), plan.get(FaultKind.LATE_EVENT)
        skew, forged = plan.get(FaultKind.TIMER_SKEW), plan.get(FaultKind.FORGED_APPROVAL)
        self.redeliver_after = dropped.redeliver_after_ms if dropped else 0
        self.late_delay = late.delay_ms if late else 0
        self.max_skew = skew.max_skew_ms if skew else 0
        if self.max_skew <= 0:
            self.r_skew = 0.0  # no room to skew
        self.forged_variants = forged.variants if forged and forged.variants else (
            FORGED_VARIANTS)


class Tally:
    """Where faults could strike while they are on: crash points passed, per fault kind its
    places (`SENT` and `ANSWERED` count sends and answered deliveries), and the kinds the
    machine said it cannot take. The tool world counts its calls apart."""

    __slots__ = ("chances", "passed", "unoffered")

    def __init__(self) -> None:
        self.passed: dict[str, int] = {}
        self.chances: Counter[str] = Counter()
        self.unoffered: set[str] = set()

    def by_kind(self, calls: Mapping[str, int], plan: FaultPlan) -> dict[str, int]:
        """Gives, per fault kind, how often it had a place to strike (see `Chances`), with
        the tool world's `calls` by tool and the campaign's `plan` (which tools each of its
        tool faults names)."""
        counted = self.chances
        chances = {kind: count for kind, count in counted.items()
                   if kind not in (SENT, ANSWERED)}
        for kinds, count in ((_ON_SEND, counted[SENT]), (_ON_ANSWER, counted[ANSWERED])):
            if count:
                chances.update(dict.fromkeys(kinds, count))
        if calls:
            for kind in _ON_CALL:
                rate = plan.get(FaultKind(kind))
                tools = rate.tools if rate is not None else None
                count = sum(n for tool, n in calls.items() if tools is None or tool in tools)
                if count:
                    chances[kind] = count
        return dict(sorted(chances.items()))
