"""What a run sees of the machine: each execution observed after a step (or, for a machine that
tells what it commits, only those that changed), each observation checked before it is
believed, and the records of what the machine committed and recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.errors import short_repr
from harness.sim.context import Nonsense, RunContext
from harness.sim.delivery import Delivery
from harness.sim.history import Commanded, Committed, Observed, ResultRecorded
from harness.sim.machine import ApprovalWait, Call, Observation
from harness.sim.machinery import Machinery
from reference_machine import Commit, Event, RunCompensation, RunEffect, StoreError

__all__ = ["Observer"]

_STATUSES = frozenset({"created", "running", "waiting", "compensating", "final"})
_VERSION_LIMIT = 2**63  # a store's version is a signed 64-bit number, as databases keep it


class Observer:
    """Observes the executions and records what the machine commits. Owns which executions
    changed since the last observation, whether the machine tells its commits (`watched`),
    and each execution's state and context at its last commit; each one's last observation
    is the run's (`RunContext.obs`)."""

    def __init__(self, ctx: RunContext, machinery: Machinery, delivery: Delivery) -> None:
        self.machinery, self.delivery = machinery, delivery
        self.clock, self.emit, self.definition, self.obs = (ctx.clock, ctx.emit,
                                                            ctx.definition, ctx.obs)
        self.changed: dict[str, None] = {}
        self.watched = False
        self.last_state: dict[str, str] = {}  # each execution's state at its last commit
        self.contexts: dict[str, Mapping[str, Any]] = {}  # each one's context at its last commit

    def observe(self) -> None:
        """Observes the executions after a step: each one, or, when the machine tells what it
        commits, those that changed."""
        if not self.watched:
            for eid in self.obs:
                self.seen(eid, self.observation(eid))
            return
        changed, obs = self.changed, self.obs
        for eid in changed:
            if eid in obs:
                self.seen(eid, self.observation(eid))
        changed.clear()

    def seen(self, eid: str, obs: Observation) -> None:
        """Keeps the observation; logs it when what it says of the execution changed."""
        before = self.obs.get(eid)
        self.obs[eid] = obs
        if (before is not None and before[:4] == obs[:4] and before.approval == obs.approval
                and before.approvals == obs.approvals and not obs.moves):
            return
        approval = obs.approval
        clock = self.clock
        self.emit(Observed(clock.step, clock.now, eid, obs.state, obs.status, obs.version,
                           obs.outcome, approval.request_id if approval is not None else "",
                           approval.action_hash if approval is not None else "",
                           tuple((a.request_id, a.action_hash) for a in obs.approvals),
                           obs.moves))

    def observation(self, eid: str) -> Observation:
        """Gives the machine's observation of an execution once checked (`Nonsense` when it
        cannot be)."""
        obs = self.machinery.calls.observe(eid)
        if not isinstance(obs, Observation):
            raise Nonsense(f"observe({eid!r}) gave {type(obs).__name__}, not an Observation")
        if obs.state not in self.definition.states:
            raise Nonsense(f"execution {eid!r} is in state {obs.state!r}, which the "
                           f"definition {self.definition.name!r} lacks")
        if obs.status not in _STATUSES:
            raise Nonsense(f"execution {eid!r} has status {obs.status!r}; expected one of "
                           f"{', '.join(sorted(_STATUSES))}")
        if not _well_formed(obs):
            raise Nonsense(f"execution {eid!r}: timers must be (id, time) pairs, calls `Call`s, "
                           f"the approval an `ApprovalWait` or None, active a tuple of state "
                           f"names, moves of (state, state) pairs and approvals of "
                           f"`ApprovalWait`s; got {obs!r}")
        for name in obs.active:
            if name not in self.definition.states:
                raise Nonsense(f"execution {eid!r} has a region in state {name!r}, which the "
                               f"definition {self.definition.name!r} lacks")
        for move in obs.moves:
            for name in move:
                if name not in self.definition.states:
                    raise Nonsense(f"execution {eid!r} moved through state {name!r}, which "
                                   f"the definition {self.definition.name!r} lacks")
        if not isinstance(obs.version, int) or isinstance(obs.version, bool) or not (
                -_VERSION_LIMIT <= obs.version < _VERSION_LIMIT):
            raise Nonsense(f"execution {eid!r} has version {short_repr(obs.version)}; "
                           "expected a whole number of 64 bits")
        before = self.obs.get(eid)
        if before is not None and obs.version < before.version:
            raise Nonsense(f"execution {eid!r} went back from version {before.version} to "
                           f"{obs.version}")
        return obs

    # -- records -----------------------------------------------------------------------------

    def committed(self, commit: Commit, result: int | StoreError) -> None:
        """Records what the machine committed (`result`: the version, or the store's error)."""
        eid = commit.execution_id
        self.changed[eid] = None
        if not isinstance(result, int):
            return
        execution, event, transition = commit.execution, commit.event, commit.transition
        previous = self.last_state.get(eid, "")
        if execution is None:
            self.emit(Committed(self.clock.step, self.clock.now, eid, event.id,
                                commit.decision, result, "", previous, "", "", event.type,
                                event.source, event.answers, event.payload,
                                reason=commit.reason if commit.decision == "rejected" else ""))
            return
        self.last_state[eid] = execution.state
        self.contexts[eid] = execution.context
        if self.delivery.outboxes is not None:
            self.delivery.sent_itself(self.delivery.outboxes, eid, execution)
        effects = tuple(Commanded(c.effect_id, c.tool, c.key, type(c) is RunCompensation)
                        for c in commit.commands if type(c) is RunEffect
                        or type(c) is RunCompensation)
        inner, vias = _inner_moves(transition.inner) if transition is not None else ((), ())
        self.emit(Committed(self.clock.step, self.clock.now, eid, event.id, commit.decision,
                            result, execution.state, previous,
                            transition.event if transition is not None else "",
                            transition.forced if transition is not None else "", event.type,
                            event.source, event.answers, event.payload, execution.context,
                            effects, transition.via if transition is not None else (),
                            inner,
                            _region_states(execution.regions),
                            _region_contexts(execution.regions),
                            inner_via=vias))

    def recorded(self, execution_id: str, command_id: str, result: Event) -> None:
        """Records a command's result the machine recorded."""
        self.changed[execution_id] = None
        self.emit(ResultRecorded(self.clock.step, self.clock.now, execution_id, command_id,
                                 result.type))


def _inner_moves(inner: tuple[Any, ...]) -> tuple[tuple[tuple[str, str, str], ...],
                                                  tuple[tuple[str, ...], ...]]:
    """Gives (source, event, target) of each region move, depth first, and, in the same order,
    the states each passed through on its way (() for them all when none did), in one walk."""
    moves: list[tuple[str, str, str]] = []
    vias: list[tuple[str, ...]] = []
    stack = list(reversed(inner))
    while stack:
        move = stack.pop()
        moves.append((move.source, move.event, move.target))
        vias.append(tuple(move.via))
        stack.extend(reversed(move.inner))
    return tuple(moves), (tuple(vias) if any(vias) else ())


def _region_states(regions: tuple[Any, ...]) -> tuple[tuple[str, str, str], ...]:
    """Gives (region id, state, status) of every region, depth first."""
    states: list[tuple[str, str, str]] = []
    for region in regions:
        states.append((region.id, region.state, str(region.status)))
        states += _region_states(region.regions)
    return tuple(states)


def _region_contexts(regions: tuple[Any, ...]) -> tuple[Mapping[str, Any], ...]:
    """Gives the context of every region, depth first (as `_region_states` orders them)."""
    contexts: list[Mapping[str, Any]] = []
    for region in regions:
        contexts.append(region.context)
        contexts += _region_contexts(region.regions)
    return tuple(contexts)


def _well_formed(obs: Observation) -> bool:
    """Tells whether an observation's timers, calls and approval have their types."""
    timers, calls, approval = obs.timers, obs.calls, obs.approval
    active, approvals, moves = obs.active, obs.approvals, obs.moves
    if (type(timers) is not tuple or type(calls) is not tuple or type(active) is not tuple
            or type(approvals) is not tuple or type(moves) is not tuple):
        return False
    for name in active:
        if type(name) is not str:
            return False
    for move in moves:
        if (type(move) is not tuple or len(move) != 2 or type(move[0]) is not str
                or type(move[1]) is not str):
            return False
    for each in approvals:
        if type(each) is not ApprovalWait:
            return False
    for timer in timers:
        if type(timer) is not tuple or len(timer) != 2 or type(timer[1]) is not int:
            return False
    for call in calls:
        if type(call) is not Call:
            return False
    return approval is None or type(approval) is ApprovalWait
