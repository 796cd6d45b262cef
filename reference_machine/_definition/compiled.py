"""The compiled definition: the frozen records `decide` runs on.

A `WorkflowDefinition` holds every state by name, with its parents' transitions merged in and its
targets resolved to leaf states, its events, tools and budgets, and the definitions its regions
and map items run on (`scopes`). Nothing here checks: `DefinitionCompiler` makes these once, after
every check has passed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reference_machine._records import Transition
from reference_machine._spec import ToolSpec, WorkflowSpec
from reference_machine.findings import Acknowledged, Finding
from reference_machine.secrecy import named_secret

__all__ = [
    "Action",
    "Budgets",
    "CompiledApproval",
    "CompiledCompensation",
    "CompiledEvent",
    "CompiledState",
    "CompiledStep",
    "CompiledTransition",
    "Guard",
    "OpenMove",
    "PayloadCheck",
    "Transitions",
    "WorkflowDefinition",
    "plain_moves_of",
]

#: (context, event) -> a value: a guard holds when it is true; also `items:` and `correlate:`
Guard = Callable[[Mapping[str, Any], Any], Any]
#: (context, event) -> the context keys it sets, if any
Action = Callable[[Mapping[str, Any], Any], Mapping[str, Any] | None]
#: payload -> why it does not match its schema (None when it does)
PayloadCheck = Callable[[Mapping[str, Any]], str | None]


@dataclass(frozen=True, slots=True)
class CompiledTransition:
    event: str
    declared_in: str
    index: int
    target: str
    target_leaf: str
    guard: Guard | None
    guard_text: str
    actions: tuple[Action, ...]
    #: no target: the actions run and the state is neither left nor entered (`target` is "")
    internal: bool = False


@dataclass(frozen=True, slots=True)
class CompiledCompensation:
    tool: str
    input: Callable[[Mapping[str, Any]], Mapping[str, Any]]
    attempts_max: int
    retry_safe: bool  # the undo tool honours keys or is repeatable: a timeout may be retried


@dataclass(frozen=True, slots=True)
class CompiledStep:
    state: str
    tool: str
    input: Callable[[Mapping[str, Any]], Mapping[str, Any]]
    reversible: bool
    idempotent: bool
    retry_safe: bool  # idempotent or repeatable: a timeout may be retried
    timeout_ms: int | None
    attempts_max: int
    delay_initial_ms: int
    delay_max_ms: int
    multiplier: float
    jitter: float
    retry_on: frozenset[str]
    on_exhausted: str
    compensation: CompiledCompensation | None
    needs_approval: bool
    cost: float
    escalate_to: str | None
    check_output: PayloadCheck | None
    #: `needs_approval: <expression>`: the approval is needed only when it holds on entry
    approval_when: Guard | None = None
    approval_text: str = ""


@dataclass(frozen=True, slots=True)
class CompiledApproval:
    for_state: str
    summary: str
    evidence: tuple[str, ...]
    roles: frozenset[str]
    expires_after_ms: int
    on_expiry: str
    escalate_to: str | None


@dataclass(frozen=True, slots=True)
class CompiledState:
    name: str
    kind: str
    parent: str | None
    ancestors: tuple[str, ...]
    final: bool
    outcome: str | None
    step: CompiledStep | None
    approval: CompiledApproval | None
    after_ms: int | None
    after_target: str | None
    on: Mapping[str, tuple[CompiledTransition, ...]]
    #: entering it does nothing but move: a normal state with no step, approval, timeout,
    #: entry action or eventless transition
    plain: bool = False
    entry: tuple[Action, ...] = ()
    exit: tuple[Action, ...] = ()
    #: eventless transitions, tried in order whenever the state is entered or its context changes
    always: tuple[CompiledTransition, ...] = ()
    #: parallel and map states: taken once every region (item) is final
    done: tuple[CompiledTransition, ...] = ()
    history: str | None = None
    #: a compound state's initial child
    initial_child: str | None = None
    #: parallel: (region, its initial leaf) per region; map: one ("", initial leaf of an item)
    regions: tuple[tuple[str, str], ...] = ()
    items: Guard | None = None
    items_text: str = ""
    concurrency_max: int | None = None
    tolerated_failures: int = 0
    results: str = "results"
    on_region_failure: str = "cancel"
    #: the region (a parallel state's child) or map state this state runs inside, if any
    scope: str | None = None
    #: entering it does more at once: it starts regions, or has eventless transitions
    moves_on: bool = False


@dataclass(frozen=True, slots=True)
class CompiledEvent:
    name: str
    sources: frozenset[str] | None
    check_payload: PayloadCheck | None
    #: (payload field, expression over the context it must equal, the expression's text)
    correlate: tuple[tuple[str, Guard, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Budgets:
    transitions_max: int | None = None
    visits_max: int | None = None
    deadline_ms: int | None = None
    cost_max: float | None = None
    cycle_threshold: int | None = None
    on_exceeded: str | None = None
    on_cycle: str | None = None

    #: Whether a per-transition limit (transitions, visits, cycles) is set; derived.
    any_limit: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        limits = (self.transitions_max, self.visits_max, self.cycle_threshold)
        object.__setattr__(self, "any_limit", any(limit is not None for limit in limits))


@dataclass(frozen=True, slots=True)
class WorkflowDefinition:
    """A checked, immutable workflow definition: what `decide` runs on.

    `states` holds every state by name (leaf and compound); an execution is always in a leaf.
    `warnings` keeps the non-blocking findings of the load-time checks; `acknowledged`, the
    warnings its `lint: ignore:` acknowledges, with their reasons.
    """

    name: str
    version: str
    spec: WorkflowSpec
    states: Mapping[str, CompiledState]
    initial: str
    events: Mapping[str, CompiledEvent]
    tools: Mapping[str, ToolSpec]
    budgets: Budgets
    compensation_failed: str | None
    initial_context: Mapping[str, Any]
    secrets: frozenset[str] = frozenset()
    source: str = "<definition>"
    #: every word the definition's expressions hold (None: unknown, a `function:` may read
    #: any key): a key named like a secret that none reads is stored as a reference too
    read: frozenset[str] | None = None
    warnings: tuple[Finding, ...] = field(default=())
    acknowledged: tuple[Acknowledged, ...] = field(default=())
    #: what a campaign may leave untested here (`untested:`): gap code -> reason
    untested: Mapping[str, str] = field(default_factory=dict)
    #: some state has entry or exit actions or history: moves compute what they exit and enter
    scoped: bool = False
    #: a region's or map item's own definition (same states; its initial; no budgets), by
    #: scope: every scope at the top, and in a scope's own the scopes inside it
    scopes: Mapping[str, WorkflowDefinition] = field(default_factory=dict)
    #: the scope these executions run in ("" at the top)
    scope: str = ""
    #: derived: by state, then by event, what `decide` knows at once of a user event (see
    #: `plain_moves_of`)
    plain_moves: Mapping[str, Mapping[str, OpenMove]] = field(init=False, default_factory=dict,
                                                         compare=False, repr=False)

    def __post_init__(self) -> None:
        # derived while it is made, so that a copy made by `dataclasses.replace` derives its own
        object.__setattr__(self, "plain_moves", plain_moves_of(self))

    def conceals(self, key: str, value: Any) -> bool:
        """Tells whether the runtime stores `value`, found under the context or output key
        `key`, as a vault reference: a declared secret's, or text under a key named like one
        (`api_token`) that no expression reads, so that nothing but the store can tell."""
        return key in self.secrets or (
            isinstance(value, str) and self.read is not None and key not in self.read
            and named_secret(key))

    @property
    def final_states(self) -> tuple[str, ...]:
        """Gives the names of the final states, in definition order."""
        return tuple(name for name, state in self.states.items() if state.final)


#: The transitions a state declares for one event, in order.
Transitions = tuple[CompiledTransition, ...]

#: What `decide` knows at once of a user event in a state: the transitions `_take` chooses
#: from and, where that can only be a plain move, its target and its record ("" and None).
OpenMove = tuple[tuple[CompiledTransition, ...], str, "Transition | None"]


def plain_moves_of(definition: WorkflowDefinition) -> Mapping[str, Mapping[str, OpenMove]]:
    """Gives, by state and event, the user events `decide` may take without looking at the
    event's declaration: open to every source, with no payload schema or correlation, and
    with a transition in that state. Where the first transition has no guard, no actions and
    a plain target (no step, approval or timeout) in a definition with no entry or exit
    actions, history or per-transition budget, the move is plain: `decide` takes it at once
    when the execution has no timers (what `_take` would find, without looking)."""
    plain_ok = not (definition.scoped or definition.budgets.any_limit)
    events, states = definition.events, definition.states
    moves: dict[str, dict[str, OpenMove]] = {}
    for name, state in states.items():
        for event, transitions in state.on.items():
            spec = events.get(event)
            if (spec is None or spec.sources is not None or spec.check_payload is not None
                    or spec.correlate or not transitions):
                continue
            first = transitions[0]
            target = first.target_leaf
            if (plain_ok and first.guard is None and not first.actions and not first.internal
                    and states[target].plain):
                moves.setdefault(name, {})[event] = (transitions, target,
                                                     Transition(name, event, target))
            else:
                moves.setdefault(name, {})[event] = (transitions, "", None)
    return moves  # plain dicts, read on every event: never changed once made
