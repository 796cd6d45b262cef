"""The outside world that sends a machine its events: the sender of external events (with a
payload made from its schema, sometimes invalid, and correlated fields that match the
execution's context unless a fault makes one wrong) and the approver (who grants or denies
what an execution waits on, unless the approval is forged).
"""

from __future__ import annotations

from typing import Any

from fault_injection import FaultKind
from harness.sim.chances import FORGED, WRONG, Rates, Tally
from harness.sim.context import RunContext
from harness.sim.delivery import Delivery
from harness.sim.machine import ApprovalWait, Observation
from harness.sim.observer import Observer
from harness.sim.payloads import correlated
from reference_machine import APPROVAL_DENIED, APPROVAL_GRANTED, Event

__all__ = ["Approver", "Sender"]


class Sender:
    """Sends executions the external events their states take. Owns how often it has sent
    each execution each event whose sends the definition bounds."""

    def __init__(self, ctx: RunContext, rates: Rates, tally: Tally, delivery: Delivery,
                 observer: Observer) -> None:
        self.ctx, self.rates, self.delivery = ctx, rates, delivery
        self.sim, self.definition, self.options = ctx.sim, ctx.definition, ctx.options
        self.chances, self.contexts = tally.chances, observer.contexts
        self.sent: dict[tuple[str, str], int] = {}  # (execution, event) -> sends of a bounded one

    def sendable(self, eid: str, obs: Observation) -> tuple[str, ...]:
        """Gives the events the sender may still send an execution so observed: those its
        transitions take, less the bounded ones it has sent as often as the bound says."""
        names = self.sim.offered(obs)
        bounds = self.sim.sends_max
        if not bounds or not names:
            return names
        sent = self.sent
        return tuple(name for name in names
                     if name not in bounds or sent.get((eid, name), 0) < bounds[name])

    def send(self, eid: str, obs: Observation) -> None:
        """Sends an execution, so observed, one of the events it may still be sent: its
        payload valid or, sometimes, not."""
        rng = self.ctx.rng
        names = self.sendable(eid, obs)
        name = names[rng.branch(len(names))]
        self.ctx.topic = name
        spec = self.definition.spec.events[name]
        generator = self.sim.payloads.get(name)
        payload: Any = {}
        broken = None
        if generator is not None:
            broken = (generator.invalid(rng, mapping_only=True)
                      if rng.chance("invalid_payload", self.options.invalid_rate) else None)
            payload = broken[0] if broken is not None else generator.valid(rng)
        wrong = ""
        correlate = self.sim.correlates.get(name) if broken is None else None
        if correlate is not None:  # the sender's event is for this run (or, faulted, another)
            if not self.ctx.healed:
                self.chances[WRONG] += 1
            payload, wrong = self._correlate(eid, name, payload, correlate, generator)
        if name in self.sim.sends_max and broken is None and not wrong:
            # a payload made invalid, or another run's, is a fault of the run, not one of the
            # sender's sends
            self.sent[(eid, name)] = self.sent.get((eid, name), 0) + 1
        sources = sorted(str(s) for s in spec.sources) if spec.sources else ["system"]
        source = sources[rng.below(len(sources))]
        event = Event(self.ctx.new_id(), name, source, payload, "")
        if wrong:
            self.ctx.fault(FaultKind.WRONG_CORRELATION, eid, f"{event.id} payload.{wrong}")
        self.delivery.send(eid, event, "external")

    def _correlate(self, eid: str, name: str, payload: Any, correlate: Any,
                   generator: Any) -> tuple[Any, str]:
        """Gives the payload with its correlated fields set from the execution's context as
        last committed (the start context for a machine that does not tell its commits), one
        of them wrong when the fault strikes; and the field made wrong ("" when none)."""
        rng = self.ctx.rng
        wrong = bool(self.rates.r_wrong) and rng.chance(FaultKind.WRONG_CORRELATION,
                                                        self.rates.r_wrong)
        context = self.contexts.get(eid, self.options.context)
        return correlated(payload, correlate, context, Event("", name, "system", payload), rng,
                          wrong=wrong, generator=generator)


class Approver:
    """Decides the approvals executions wait on, as a human approver, or forges one. Owns the
    request each execution had answered last (a stale request to forge an answer to)."""

    def __init__(self, ctx: RunContext, rates: Rates, tally: Tally, delivery: Delivery) -> None:
        self.ctx, self.rates, self.delivery = ctx, rates, delivery
        self.options, self.obs, self.chances = ctx.options, ctx.obs, tally.chances
        self.last_request: dict[str, str] = {}

    def approve(self, eid: str, approval: ApprovalWait) -> None:
        """Decides an approval: granted or denied as a human approver does, or, when the
        fault strikes, a forged grant."""
        rng = self.ctx.rng
        if not self.ctx.healed:
            self.chances[FORGED] += 1
        self.ctx.topic = "approval"
        roles = sorted(approval.roles)
        role = roles[rng.below(len(roles))] if roles else "approver"
        payload = {"role": role, "action_hash": approval.action_hash}
        if self.rates.r_forged and rng.chance(FaultKind.FORGED_APPROVAL, self.rates.r_forged):
            variants = self.rates.forged_variants
            variant = variants[rng.branch(len(variants))]
            source, answers = "human", approval.request_id
            if variant == "wrong_source":
                source = ("agent", "tool")[rng.below(2)]
            elif variant == "wrong_role":
                payload["role"] = f"not-{role}"
            elif variant == "stale_request":
                # the request last answered, unless it still waits (its answer was lost, or
                # another region asks it)
                answered = self.last_request.get(eid)
                answers = (answered if answered and not self._pending(eid, answered)
                           else f"{approval.request_id}-stale")
            else:
                payload["action_hash"] = _changed(approval.action_hash)
            event = Event(self.ctx.new_id(), APPROVAL_GRANTED, source, payload, answers)
            self.ctx.fault(FaultKind.FORGED_APPROVAL, eid, f"{variant} {event.id}")
            self.delivery.deliver(eid, event, "forged")
            return
        self.last_request[eid] = approval.request_id
        kind = APPROVAL_GRANTED if rng.flip(self.options.grant_rate) else APPROVAL_DENIED
        self.delivery.send(eid, Event(self.ctx.new_id(), kind, "human", payload,
                                      approval.request_id), "approval")

    def _pending(self, eid: str, request_id: str) -> bool:
        """Tells whether an execution was last seen waiting on approval request `request_id`."""
        obs = self.obs.get(eid)
        if obs is None:
            return False
        if obs.approval is not None and obs.approval.request_id == request_id:
            return True
        return any(each.request_id == request_id for each in obs.approvals)


def _changed(action_hash: str) -> str:
    return (action_hash[1:] + action_hash[:1]) if len(action_hash) > 1 else f"{action_hash}x"
