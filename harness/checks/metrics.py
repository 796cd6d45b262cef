"""Metrics the transition records give: time and failures per state, re-sends per tool,
approval outcomes, unfinished executions, and transitions and cost per execution.

`metrics_of(definition, history)` reads one run in one pass; `Metrics.merge` adds runs up, so a
campaign spread over processes merges them like coverage. Times are virtual milliseconds.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.checks.invariants import chart_of, states_entered
from harness.sim.history import Committed, Dispatched, Finished, HistoryRecord
from reference_machine import WorkflowDefinition

__all__ = ["Metrics", "metrics_of"]

_FAILURE_EVENT = "step.failed"
_GRANTED, _DENIED, _TIMER = "approval.granted", "approval.denied", "timer.fired"


@dataclass(slots=True)
class Metrics:
    """Sums over runs. Per state: visits, virtual ms spent, visits left by a failure (a failed
    step or a forced move: timeout, exhausted retries, a budget). Per tool: calls and re-sends
    (calls beyond the first with the same idempotency key). Approval answers by outcome,
    executions by how they ended, and per execution its transitions and cost."""

    state_visits: Counter[str] = field(default_factory=Counter)
    state_time_ms: Counter[str] = field(default_factory=Counter)
    state_failures: Counter[str] = field(default_factory=Counter)
    tool_calls: Counter[str] = field(default_factory=Counter)
    tool_resends: Counter[str] = field(default_factory=Counter)
    approvals: Counter[str] = field(default_factory=Counter)
    endings: Counter[str] = field(default_factory=Counter)
    executions: int = 0
    transitions: int = 0
    transitions_max: int = 0
    cost: float = 0.0
    cost_max: float = 0.0

    def merge(self, other: Metrics) -> Metrics:
        """Gives the sum of both (neither is changed)."""
        return Metrics(
            self.state_visits + other.state_visits, self.state_time_ms + other.state_time_ms,
            self.state_failures + other.state_failures, self.tool_calls + other.tool_calls,
            self.tool_resends + other.tool_resends, self.approvals + other.approvals,
            self.endings + other.endings, self.executions + other.executions,
            self.transitions + other.transitions,
            max(self.transitions_max, other.transitions_max), self.cost + other.cost,
            max(self.cost_max, other.cost_max))

    def report(self) -> dict[str, Any]:
        """Gives the metrics as plain JSON data (names sorted, rates rounded to 4 places)."""
        per_execution = max(self.executions, 1)
        return {
            "states": {
                name: {"visits": visits, "time_ms": self.state_time_ms[name],
                       "mean_time_ms": round(self.state_time_ms[name] / visits, 1),
                       "failures": self.state_failures[name],
                       "failure_rate": round(self.state_failures[name] / visits, 4)}
                for name, visits in sorted(self.state_visits.items())},
            "tools": {
                name: {"calls": calls, "resends": self.tool_resends[name],
                       "resend_rate": round(self.tool_resends[name] / calls, 4)}
                for name, calls in sorted(self.tool_calls.items())},
            "approvals": dict(sorted(self.approvals.items())),
            "endings": dict(sorted(self.endings.items())),
            "stuck": self.endings.get("stuck", 0),
            "executions": self.executions,
            "transitions": {"total": self.transitions,
                            "mean": round(self.transitions / per_execution, 2),
                            "max": self.transitions_max},
            "cost": {"total": round(self.cost, 4), "mean": round(self.cost / per_execution, 4),
                     "max": round(self.cost_max, 4)},
        }


def metrics_of(definition: WorkflowDefinition, history: Sequence[HistoryRecord]) -> Metrics:
    """Gives one run's metrics. In a statechart, a region's move is no move of the parallel or
    map state it runs in, nor an internal transition one of its state's: the states a region
    (map item) enters count as visits of their own."""
    states = definition.states
    metrics = Metrics()
    chart = chart_of(definition)
    previous: dict[str, Committed] = {}
    entered: dict[str, tuple[str, int]] = {}  # execution -> (state, since)
    moves: Counter[str] = Counter()
    spent: defaultdict[str, float] = defaultdict(float)
    keys: set[tuple[str, str]] = set()
    for record in history:
        if type(record) is Committed:
            if record.decision != "accepted":
                if record.event_type in (_GRANTED, _DENIED):
                    metrics.approvals["rejected"] += 1
                continue
            execution, state, at = record.execution, record.state, record.at
            target = states.get(state)
            step = None if target is None else target.step
            if step is not None:  # every attempt is paid for, retries included
                spent[execution] += sum(step.cost for effect in record.effects
                                        if effect.tool == step.tool and not effect.compensation)
            before = entered.get(execution)
            prev = previous.get(execution)
            previous[execution] = record
            if chart.used:
                for begun, event, reached in record.inner:
                    if reached and not (begun == reached and reached in chart.scoped):
                        metrics.state_visits[reached] += 1
                        if begun and event == _FAILURE_EVENT:
                            metrics.state_failures[begun] += 1
            if before is None:  # the execution's first commit: it enters its initial state
                entered[execution] = (state, at)
                metrics.state_visits[state] += 1
                continue
            if not record.moved or (chart.used and not states_entered(chart, record, prev)):
                continue
            left = before[0]
            moves[execution] += 1
            _spend(metrics, states, left, at - before[1])
            if record.event_type == _FAILURE_EVENT or record.forced:
                metrics.state_failures[left] += 1
            source = states.get(left)
            if source is not None and source.approval is not None:
                if record.forced == "approval_expired" or _expired(record.payload) or (
                        record.event_type == _TIMER):  # the request's expiry timer fired
                    metrics.approvals["expired"] += 1
                elif record.event_type == _GRANTED:
                    metrics.approvals["granted"] += 1
                elif record.event_type == _DENIED:
                    metrics.approvals["denied"] += 1
            entered[execution] = (state, at)
            metrics.state_visits[state] += 1
        elif type(record) is Dispatched:
            tool = record.tool
            metrics.tool_calls[tool] += 1
            if (tool, record.key) in keys:
                metrics.tool_resends[tool] += 1
            else:
                keys.add((tool, record.key))
        elif type(record) is Finished:
            metrics.executions += 1
            since = entered.get(record.execution)
            if since is not None:
                _spend(metrics, states, since[0], record.at - since[1])
            if record.status == "final":
                metrics.endings[record.outcome or "final"] += 1
            else:
                metrics.endings["waiting" if record.waiting_on else "stuck"] += 1
            transitions = moves[record.execution]
            metrics.transitions += transitions
            metrics.transitions_max = max(metrics.transitions_max, transitions)
            cost = spent[record.execution]
            metrics.cost += cost
            metrics.cost_max = max(metrics.cost_max, cost)
    return metrics


def _spend(metrics: Metrics, states: Mapping[str, Any], state: str, ms: int) -> None:
    """Adds time spent in a state; a final state's time is not a wait."""
    compiled = states.get(state)
    if compiled is not None and not compiled.final:
        metrics.state_time_ms[state] += ms


def _expired(payload: Mapping[str, Any] | None) -> bool:
    return isinstance(payload, Mapping) and payload.get("decision") == "expired"
