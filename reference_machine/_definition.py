"""From a `WorkflowSpec` to an immutable, checked `WorkflowDefinition`.

Every check runs once here, at load: structure is pydantic's job, consistency is this module's.
Each finding names its location (`states.awaiting_approval.after`) and the ids at fault. The
compiled definition precomputes what `decide` needs (transitions per leaf state with the parents'
merged in, targets resolved to leaf states, guards compiled) so the hot path only looks things up.
"""

from __future__ import annotations

import ast
import re
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import jsonschema
import referencing
from pydantic import BaseModel, ValidationError

from reference_machine._expr import ExpressionSyntaxError, compile_expression
from reference_machine._functions import registered_functions
from reference_machine._records import (
    APPROVAL_GRANTED,
    BUILTIN_EVENTS,
    TRANSITION_EVENTS,
    Transition,
)
from reference_machine._schema import compile_fast_check, generation_problem
from reference_machine._secrets import is_reference, named_secret
from reference_machine._spec import (
    ActionSpec,
    Category,
    FunctionRef,
    StateSpec,
    StepSpec,
    ToolSpec,
    WorkflowSpec,
)
from reference_machine.errors import DefinitionError
from reference_machine.findings import (
    CODES,
    IGNORE_CODES,
    Acknowledged,
    Finding,
    LintReport,
    Severity,
    did_you_mean,
)

Guard = Callable[[Mapping[str, Any], Any], Any]
Action = Callable[[Mapping[str, Any], Any], Mapping[str, Any] | None]
PayloadCheck = Callable[[Mapping[str, Any]], str | None]
_RESERVED_PREFIXES = ("execution.", "step.", "approval.", "timer.", "compensation.")
#: The kinds of gap a definition may accept a campaign leaves untested (`untested:`).
UNTESTED_KINDS = ("crash_point", "fault", "moves", "outcome")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SCHEMA_DATA = frozenset({"enum", "const", "default", "examples"})


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
    #: a region's or map item's own definition (same states; its initial; no budgets), by scope
    scopes: Mapping[str, WorkflowDefinition] = field(default_factory=dict)
    #: the scope these executions run in ("" at the top)
    scope: str = ""
    #: derived: by state, then by event, what `decide` knows at once of a user event (see
    #: `_plain_moves`)
    plain_moves: Mapping[str, Mapping[str, OpenMove]] = field(init=False, default_factory=dict,
                                                         compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "plain_moves", _plain_moves(self))

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


def _plain_moves(definition: WorkflowDefinition) -> Mapping[str, Mapping[str, OpenMove]]:
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


def compile_definition(
    spec: WorkflowSpec,
    *,
    functions: Mapping[str, Callable[..., Any]] | None = None,
    source: str = "<definition>",
    lines: Mapping[str, int] | None = None,
) -> WorkflowDefinition:
    """Gives the checked definition, or raises `DefinitionError` listing every error found."""
    builder = _Builder(spec, functions, lines or {})
    definition = builder.build(source)
    errors = [f for f in _by_line(builder.findings) if f.severity is Severity.ERROR]
    if errors or definition is None:
        raise DefinitionError(errors, source)
    return definition


def check_spec(
    spec: WorkflowSpec,
    *,
    functions: Mapping[str, Callable[..., Any]] | None = None,
    lines: Mapping[str, int] | None = None,
) -> list[Finding]:
    """Gives every finding (errors and warnings) of the load-time checks, raising nothing;
    the warnings the definition acknowledges (`lint: ignore:`) are left out."""
    return list(lint_spec(spec, functions=functions, lines=lines).findings)


def lint_spec(
    spec: WorkflowSpec,
    *,
    functions: Mapping[str, Callable[..., Any]] | None = None,
    lines: Mapping[str, int] | None = None,
) -> LintReport:
    """Gives the findings of the load-time checks and, apart, the warnings the definition
    acknowledges under `lint: ignore:`, raising nothing."""
    builder = _Builder(spec, functions, lines or {})
    builder.build("<lint>")
    return LintReport(tuple(_by_line(builder.findings)),
                      tuple(sorted(builder.acknowledged,
                                   key=lambda a: (a.finding.line is None, a.finding.line or 0))))


def _by_line(findings: list[Finding]) -> list[Finding]:
    """Gives findings in file order; those without a line keep their order, last."""
    return sorted(findings, key=lambda f: (f.line is None, f.line or 0))


class _Builder:
    def __init__(
        self,
        spec: WorkflowSpec,
        functions: Mapping[str, Callable[..., Any]] | None,
        lines: Mapping[str, int],
    ) -> None:
        self.spec = spec
        self.functions = {**registered_functions(), **(functions or {})}
        self.lines = lines
        self.findings: list[Finding] = []
        self.acknowledged: list[Acknowledged] = []
        self.states = spec.states
        self.unresolved: set[str] = set()  # states with a target we could not resolve
        self.output_checks: dict[str, PayloadCheck | None] = {}
        self.read = _words_read(spec)
        self.templates: dict[str, Callable[[Mapping[str, Any]], Mapping[str, Any]]] = {}

    # -- findings ---------------------------------------------------------------------------

    def _line(self, location: str) -> int | None:
        parts = location.split(".")
        while parts:
            line = self.lines.get(".".join(parts))
            if line is not None:
                return line
            last = parts[-1]
            if "[" in last:
                parts[-1] = last[: last.index("[")]
            else:
                parts.pop()
        return None

    def error(self, code: str, location: str, message: str, *ids: str) -> None:
        self.findings.append(
            Finding(Severity.ERROR, code, location, message, ids, self._line(location))
        )

    def warning(self, code: str, location: str, message: str, *ids: str) -> None:
        self.findings.append(
            Finding(Severity.WARNING, code, location, message, ids, self._line(location))
        )

    def _target_exists(self, target: str | None, location: str) -> bool:
        if target is None:
            return False
        if target in self.states:
            return True
        hint = did_you_mean(target, self.states)
        self.error("unknown-target", location, f"target state {target!r} does not exist{hint}",
                   target)
        return False

    # -- build ----------------------------------------------------------------------------------

    def build(self, source: str) -> WorkflowDefinition | None:
        spec = self.spec
        children = self._check_hierarchy()
        self.children = children
        self.scope_of = {name: self._scope(name) for name in self.states}
        events = self._compile_events()
        self._check_tools()
        initial = self._initial(None, children, "states")
        initial_child = {
            parent: self._initial(parent, children, f"states.{parent}") for parent in children
            if self.states[parent].type != "parallel"
        }
        # a parallel or map state is where its execution rests: it resolves to itself
        descend = {parent: child for parent, child in initial_child.items()
                   if self.states[parent].type != "map"}
        leaf_of = {name: self._leaf(name, descend) for name in self.states}
        self.leaf_of = leaf_of

        own: dict[str, dict[str, tuple[CompiledTransition, ...]]] = {}
        for name, state in self.states.items():
            own[name] = self._compile_transitions(name, state, events, leaf_of)
            self._check_state(name, state, children, leaf_of)
        charted = {name: self._compile_chart(name, state, children, initial_child, leaf_of)
                   for name, state in self.states.items()}
        self._check_eventless_cycles(charted)
        self._check_budgets()
        self._check_approvals()
        self._check_context_reads()
        for index, key in enumerate(spec.secrets):
            if key not in spec.context:
                self.error("unknown-secret", f"secrets[{index}]",
                           f"secret {key!r} is not a context key; declare it under `context:` "
                           f"(known: {', '.join(sorted(spec.context)) or 'none'})", key)

        compiled_states: dict[str, CompiledState] = {}
        for name, state in self.states.items():
            ancestors = self._ancestors(name)
            merged: dict[str, tuple[CompiledTransition, ...]] = {}
            for holder in self._chain(name):  # the state's own first, then its parents'
                for event, transitions in own[holder].items():
                    merged[event] = merged.get(event, ()) + transitions
            step = self._compile_step(name, state.step, leaf_of)
            approval = self._compile_approval(name, state, leaf_of)
            chart = charted[name]
            compiled_states[name] = CompiledState(
                name=name,
                kind=state.type,
                parent=state.parent,
                ancestors=ancestors,
                final=state.type == "final",
                outcome=state.outcome,
                step=step,
                approval=approval,
                after_ms=state.after.delay if state.after else None,
                after_target=leaf_of.get(state.after.target) if state.after else None,
                on=merged,
                plain=(state.type == "normal" and step is None and approval is None
                       and not state.after and not chart["entry"] and not chart["always"]),
                moves_on=bool(chart["always"] or chart.get("regions")),
                **chart,
            )
        if initial is not None:
            self._check_graph(leaf_of[initial], self._leaves(None), compiled_states, leaf_of)
        for root in self._scope_roots():
            regions = compiled_states[root].regions
            start = (regions[0][1] if regions else None) if self.states[root].type == "map" \
                else leaf_of[root]
            if start is not None:
                self._check_graph(start, self._leaves(root), compiled_states, leaf_of, root)
        self._check_approval_entries(own, charted, leaf_of, initial)
        untested = self._check_untested()
        self._acknowledge()
        if any(f.severity is Severity.ERROR for f in self.findings) or initial is None:
            return None
        initial_leaf = leaf_of[initial]
        budgets = spec.budgets
        assert initial_leaf is not None
        definition = WorkflowDefinition(
            name=spec.name,
            version=spec.version,
            spec=spec,
            states=compiled_states,
            initial=initial_leaf,
            events=events,
            tools=MappingProxyType(dict(spec.tools)),
            budgets=Budgets(
                transitions_max=budgets.transitions_max,
                visits_max=budgets.visits_max,
                deadline_ms=budgets.deadline,
                cost_max=budgets.cost_max,
                cycle_threshold=budgets.cycle_threshold,
                on_exceeded=leaf_of.get(budgets.on_exceeded or ""),
                on_cycle=leaf_of.get(budgets.on_cycle or budgets.on_exceeded or ""),
            ),
            compensation_failed=leaf_of.get(spec.compensation_failed or ""),
            initial_context=MappingProxyType(dict(spec.context)),
            secrets=frozenset(spec.secrets),
            source=source,
            read=self.read,
            warnings=tuple(f for f in self.findings if f.severity is Severity.WARNING),
            acknowledged=tuple(self.acknowledged),
            untested=MappingProxyType(untested),
            scoped=any(s.entry or s.exit or s.history for s in compiled_states.values()),
            scopes={},
        )
        scopes = definition.scopes
        assert isinstance(scopes, dict)
        for root in self._scope_roots():
            compiled = compiled_states[root]
            start = compiled.regions[0][1] if compiled.kind == "map" else leaf_of[root]
            assert start is not None
            scopes[root] = replace(definition, initial=start, budgets=Budgets(),
                                   compensation_failed=None, scope=root, warnings=(),
                                   acknowledged=())
        return definition

    # -- scopes: parallel regions and map items ----------------------------------------------

    def _scope(self, name: str) -> str | None:
        """Gives the region (a parallel state's child) or map state `name` runs inside."""
        current, seen = name, {name}
        while True:
            parent = self.states[current].parent
            if parent is None or parent not in self.states or parent in seen:
                return None
            if self.states[parent].type == "parallel":
                return current
            if self.states[parent].type == "map":
                return parent
            seen.add(parent)
            current = parent

    def _scope_roots(self) -> list[str]:
        """Gives every region and map state, in definition order."""
        return sorted({root for root in self.scope_of.values() if root is not None},
                      key=list(self.states).index)

    def _chain(self, name: str) -> tuple[str, ...]:
        """Gives `name` and the parents whose transitions it takes: up to its region, or up to
        the child of its map state (a map's or parallel state's own transitions leave it)."""
        chain = [name]
        current = name
        for parent in self._ancestors(name):
            if self.states[current].parent is not None and self.states[
                    self.states[current].parent or ""].type == "parallel":
                break  # `current` is a region: its own transitions are its last
            if self.states[parent].type == "map":
                break
            chain.append(parent)
            current = parent
        return tuple(chain)

    def _leaves(self, scope: str | None) -> list[str]:
        """Gives where executions of `scope` rest: its leaves, parallel and map states."""
        return [name for name, state in self.states.items()
                if self.scope_of.get(name) == scope and name != scope
                and (not self.children.get(name) or state.type in ("parallel", "map"))]

    def _same_scope(self, name: str, target: str | None, location: str) -> bool:
        """Tells whether a transition of `name` to `target` stays in `name`'s scope (an error
        when it does not: a region is left only by its parallel state's own transitions)."""
        if target is None or target not in self.states:
            return True
        here = self.scope_of.get(name)
        there = self.scope_of.get(target)
        if here == there and target != here:
            return True
        where = "the top level" if here is None else f"{self._scope_word(here)} {here!r}"
        self.error("leaves-scope", location,
                   f"{name!r} is in {where} and may not move to {target!r}, which is not; a "
                   "region or map item ends in one of its own final states and the parallel "
                   "or map state's `done:` (or its own `on:`) leaves it", name, target)
        return False

    def _undoes(self, owner: str) -> bool:
        """Tells whether a region (item) of parallel (map) state `owner` runs a step with a
        compensation, which a failure of `owner` undoes."""
        return any(state.step is not None and state.step.compensation is not None
                   and owner in self._ancestors(name) for name, state in self.states.items())

    def _scope_word(self, root: str) -> str:
        return "map state" if self.states[root].type == "map" else "region"

    # -- hierarchy -------------------------------------------------------------------------------

    def _check_hierarchy(self) -> dict[str, list[str]]:
        children: dict[str, list[str]] = {}
        for name, state in self.states.items():
            if state.parent is None:
                continue
            location = f"states.{name}.parent"
            if state.parent not in self.states:
                hint = did_you_mean(state.parent, self.states)
                self.error("unknown-parent", location,
                           f"parent state {state.parent!r} does not exist{hint}", state.parent)
                continue
            parent = self.states[state.parent]
            reasons = ([f"is {parent.type}"]
                       if parent.type not in ("normal", "parallel", "map") else [])
            # a parallel or map state's own timeout leaves it, abandoning its regions
            keys = ("step", "approval") if parent.type in ("parallel", "map") else (
                "step", "approval", "after")
            reasons += [f"has {key}" for key in keys if getattr(parent, key) is not None]
            if parent.always:
                reasons.append("has always")
            if reasons:
                self.error("bad-parent", location,
                           f"parent {state.parent!r} {' and '.join(reasons)}; a compound parent "
                           "must be a plain normal, parallel or map state", state.parent, name)
            children.setdefault(state.parent, []).append(name)
        for name in self.states:
            seen = [name]
            current = self.states[name].parent
            while current is not None and current in self.states:
                if current in seen:
                    if current == name:
                        cycle = " -> ".join([*seen, current])
                        self.error("parent-cycle", f"states.{name}.parent",
                                   f"compound parents form a cycle: {cycle}", *seen)
                    break
                seen.append(current)
                current = self.states[current].parent
        return children

    def _ancestors(self, name: str) -> tuple[str, ...]:
        chain: list[str] = []
        current = self.states[name].parent
        while current is not None and current in self.states and current not in chain:
            if current == name:
                break
            chain.append(current)
            current = self.states[current].parent
        return tuple(chain)

    def _initial(self, parent: str | None, children: Mapping[str, list[str]],
                 location: str) -> str | None:
        members = children.get(parent, []) if parent else [
            n for n, s in self.states.items() if s.parent is None]
        flagged = [n for n in members if self.states[n].initial]
        where = "the top level" if parent is None else f"compound state {parent!r}"
        if len(flagged) == 1:
            return flagged[0]
        if not flagged:
            self.error("initial-count", location,
                       f"{where} has no initial state; mark exactly one of "
                       f"{', '.join(sorted(members))} with `initial: true`", *members)
        else:
            self.error("initial-count", location,
                       f"{where} has {len(flagged)} initial states "
                       f"({', '.join(flagged)}); exactly one may be initial", *flagged)
        return None

    def _leaf(self, name: str, initial_child: Mapping[str, str | None]) -> str | None:
        seen: set[str] = set()
        current: str | None = name
        while current is not None and current in initial_child:
            if current in seen:
                return None
            seen.add(current)
            current = initial_child[current]
        return current

    # -- statechart constructs --------------------------------------------------------------

    def _compile_chart(self, name: str, state: StateSpec, children: Mapping[str, list[str]],
                       initial_child: Mapping[str, str | None],
                       leaf_of: Mapping[str, str | None]) -> dict[str, Any]:
        """Gives the statechart fields of a compiled state (entry, exit, always, done, history,
        regions, map settings), checking each with its location."""
        location = f"states.{name}"
        kind = state.type
        members = children.get(name, [])

        def actions(specs: list[ActionSpec], key: str) -> tuple[Action, ...]:
            return tuple(action for index, spec in enumerate(specs)
                         if (action := self._compile_action(spec, f"{location}.{key}[{index}]")))

        always = self._compile_list(name, state.eventless(), f"{location}.always", leaf_of,
                                    "always")
        done = self._compile_list(name, state.joins(), f"{location}.done", leaf_of, "done")
        chart: dict[str, Any] = {
            "entry": actions(state.entry, "entry"),
            "exit": actions(state.exit, "exit"),
            "always": always,
            "done": done,
            "history": state.history,
            "initial_child": initial_child.get(name),
            "scope": self.scope_of.get(name),
        }
        if state.always and (state.step is not None or state.approval is not None):
            self.error("always-with-step", f"{location}.always",
                       f"state {name!r} runs a {'step' if state.step else 'approval'}; leaving "
                       "it at once by an eventless transition would abandon it", name)
        if kind == "final" and state.always:
            self.error("final-exit", f"{location}.always",
                       f"final state {name!r} may not have `always`: a final state accepts "
                       "nothing", name)
        if kind == "choice":
            for key in ("step", "approval", "after"):
                if getattr(state, key) is not None:
                    self.error("choice-shape", f"{location}.{key}",
                               f"choice state {name!r} is left at once and may not have "
                               f"`{key}`", name)
            if state.on or members:
                self.error("choice-shape", location,
                           f"choice state {name!r} is left at once: it has only `always:` "
                           "(no `on:`, no children)", name)
            if not state.always:
                self.error("choice-shape", f"{location}.always",
                           f"choice state {name!r} needs `always:`, the branches it chooses "
                           "among", name)
            elif all(t.guard is not None for t in state.eventless()):
                self.warning("choice-no-default", f"{location}.always",
                             f"no branch of choice {name!r} is unguarded: when no guard holds "
                             "the event that led there is rejected", name)
        if state.done is not None and kind not in ("parallel", "map"):
            self.error("done-not-parallel", f"{location}.done",
                       f"only parallel and map states have `done:`; {name!r} is {kind}", name)
        if state.history is not None and (not members or kind != "normal"):
            self.error("history-shape", f"{location}.history",
                       f"`history:` belongs on a compound normal state; {name!r} is "
                       f"{'a leaf' if not members else kind}", name)
        self._check_map_fields(name, state)
        if kind in ("parallel", "map"):
            for key in ("step", "approval"):
                if getattr(state, key) is not None:
                    self.error("parallel-shape", f"{location}.{key}",
                               f"{kind} state {name!r} may not have `{key}`: put it in a child",
                               name)
            if not state.done:
                self.error("join-missing", f"{location}.done",
                           f"{kind} state {name!r} needs `done:`, where the run goes once "
                           f"every {'region' if kind == 'parallel' else 'item'} is final", name)
        if kind == "parallel":
            if not members:
                self.error("parallel-shape", location,
                           f"parallel state {name!r} needs regions: child states, each a "
                           "compound state with an initial and a final child", name)
            regions = []
            for region in members:
                if not children.get(region) or self.states[region].type != "normal":
                    self.error("parallel-shape", f"states.{region}",
                               f"{region!r} is a region of parallel state {name!r}, so it must "
                               "be a compound normal state (with child states of its own)",
                               region, name)
                    continue
                if self.states[region].step is not None or self.states[region].after:
                    continue  # bad-parent says why
                start = leaf_of.get(region)
                if start is not None:
                    regions.append((region, start))
            chart["regions"] = tuple(regions)
            chart["on_region_failure"] = state.on_region_failure
        elif kind == "map":
            first = initial_child.get(name)
            start = leaf_of.get(first) if first else None
            if not members:
                self.error("map-shape", location,
                           f"map state {name!r} needs child states: the flow each item runs",
                           name)
            chart["regions"] = (("", start),) if start else ()
            guard, text = self._compile_guard(state.items, f"{location}.items") \
                if state.items else (None, "")
            chart.update(items=guard, items_text=text, concurrency_max=state.concurrency_max,
                         tolerated_failures=state.tolerated_failures, results=state.results,
                         on_region_failure=state.on_region_failure)
        return chart

    def _check_map_fields(self, name: str, state: StateSpec) -> None:
        location = f"states.{name}"
        if state.type != "map":
            for key in ("items", "concurrency_max"):
                if getattr(state, key) is not None:
                    self.error("map-only", f"{location}.{key}",
                               f"`{key}` belongs on a map state; {name!r} is {state.type}", name)
            return
        if state.items is None:
            self.error("map-items", f"{location}.items",
                       f"map state {name!r} needs `items:`, an expression giving the list it "
                       "maps over (items: context.attachments)", name)
            return
        match = re.fullmatch(r"\s*context\.([A-Za-z_][A-Za-z0-9_]*)\s*", state.items)
        if match and match.group(1) in self.spec.context:
            value = self.spec.context[match.group(1)]
            if not isinstance(value, list):
                self.error("map-not-list", f"{location}.items",
                           f"map state {name!r} maps over {state.items.strip()!r}, which the "
                           f"initial context sets to a {type(value).__name__}, not a list", name)

    def _compile_list(self, name: str, transitions: list[Any], location: str,
                      leaf_of: Mapping[str, str | None], label: str
                      ) -> tuple[CompiledTransition, ...]:
        """Compiles `always:` or `done:` transitions (they always name a target)."""
        items: list[CompiledTransition] = []
        for index, transition in enumerate(transitions):
            where = f"{location}[{index}]" if len(transitions) > 1 else location
            if transition.target is None:
                self.error("internal-eventless", f"{where}.target",
                           f"a `{label}` transition needs a target: one without would "
                           f"{'run its actions forever' if label == 'always' else 'stay'}",
                           name)
                continue
            compiled = self._compile_one(name, label, index, transition, where, leaf_of)
            if compiled is not None:
                items.append(compiled)
        return tuple(items)

    def _compile_one(self, name: str, event: str, index: int, transition: Any, where: str,
                     leaf_of: Mapping[str, str | None]) -> CompiledTransition | None:
        """Compiles one transition of `name` (None, an error said why, when its target is
        unknown or leaves its scope); a transition with no target is internal."""
        guard, guard_text = self._compile_guard(transition.guard, f"{where}.guard")
        actions = tuple(
            action for position, spec in enumerate(transition.actions)
            if (action := self._compile_action(spec, f"{where}.actions[{position}]"))
        )
        if transition.target is None:
            return CompiledTransition(event, name, index, "", "", guard, guard_text, actions,
                                      internal=True)
        if not self._target_exists(transition.target, f"{where}.target"):
            self.unresolved.add(name)
            return None
        self._same_scope(name, transition.target, f"{where}.target")
        target_leaf = leaf_of.get(transition.target)
        if target_leaf is None:
            self.unresolved.add(name)
            return None
        return CompiledTransition(event, name, index, transition.target, target_leaf, guard,
                                  guard_text, actions)

    def _check_context_reads(self) -> None:
        """Warns of an expression that reads a context key nothing gives: neither `context:`
        nor any `assign` (a typo like `context.emailid` for `email_id` reads None, silently).
        Not judged where anything may write any key (a `function:` action, a Python callable)
        nor inside a map's item flow, whose context is the item."""
        written = set(self.spec.context)
        scanned: list[tuple[str, Any]] = []
        for name, state in self.states.items():
            scope = self.scope_of.get(name)
            if scope is not None and self.states[scope].type == "map":
                continue
            if state.type == "map":
                written.add(state.results)
            scanned.append((f"states.{name}", state.model_dump(
                mode="python", exclude={"description"}, exclude_defaults=True)))
        if self.spec.events:  # `correlate:` values read the context
            scanned.append(("events", {name: event.model_dump(mode="python", exclude_defaults=True)
                                       for name, event in self.spec.events.items()}))
        reads: list[tuple[str, str]] = []
        # (where, what, inside a step's or compensation's `input:`, whose texts are sent as
        # written unless they start with `=`)
        stack = [(location, value, False) for location, value in reversed(scanned)]
        while stack:
            location, value, sent = stack.pop()
            if isinstance(value, dict):
                if value.get("function") is not None:
                    return  # a registered action or guard: it may write any key
                assign = value.get("assign")
                if isinstance(assign, dict):
                    written.update(assign)
                stack.extend((f"{location}.{key}", item, sent or key == "input")
                             for key, item in reversed(value.items()) if key != "description")
            elif isinstance(value, list | tuple):
                stack.extend((f"{location}[{index}]", item, sent)
                             for index, item in reversed(list(enumerate(value))))
            elif isinstance(value, str):
                if sent and not value.startswith("="):
                    continue
                reads.extend((location, key) for key in _context_keys(value.removeprefix("=")))
            elif callable(value) and not isinstance(value, type):
                return  # a Python guard or action: it may write any key
        warned: set[tuple[str, str]] = set()
        for location, key in reads:
            if key in written or (location, key) in warned:
                continue
            warned.add((location, key))
            hint = did_you_mean(key, written)
            self.warning("unknown-context-key", location,
                         f"reads context key {key!r}, which neither `context:` declares nor "
                         f"an `assign` writes, so it is None unless the start context gives "
                         f"it{hint}; declare it under `context:` with its default", key)

    def _check_eventless_cycles(self, charted: Mapping[str, Mapping[str, Any]]) -> None:
        """An eventless move that always comes back (each state's first eventless transition
        unguarded) is a runaway: an error. A loop through guarded ones may end: a warning."""
        first: dict[str, CompiledTransition] = {}
        edges: dict[str, list[str]] = {}
        for name, chart in charted.items():
            always = chart["always"]
            if always:
                if always[0].guard is None:
                    first[name] = always[0]
                edges[name] = [t.target_leaf for t in always]
        reported: set[str] = set()
        for start in first:
            path, current = [start], first[start].target_leaf
            while current in first and current not in path:
                path.append(current)
                current = first[current].target_leaf
            if current in path and not reported & set(path):
                loop = path[path.index(current):]
                reported |= set(loop)
                self.error("eventless-cycle", f"states.{loop[0]}.always",
                           "eventless transitions with no guard go round forever: "
                           f"{' -> '.join([*loop, loop[0]])}", *loop)
        for start in edges:
            if start in reported:
                continue
            seen, stack = set(), list(edges[start])
            while stack:
                current = stack.pop()
                if current == start:
                    self.warning("eventless-loop", f"states.{start}.always",
                                 f"eventless transitions can lead from {start!r} back to it; "
                                 "if their guards all keep holding the run is stopped as a "
                                 "runaway", start)
                    reported.add(start)
                    break
                if current not in seen:
                    seen.add(current)
                    stack.extend(edges.get(current, ()))

    # -- events and tools ------------------------------------------------------------------------

    def _compile_events(self) -> dict[str, CompiledEvent]:
        events: dict[str, CompiledEvent] = {}
        for name, event in self.spec.events.items():
            location = f"events.{name}"
            if name.startswith(_RESERVED_PREFIXES):
                self.error("reserved-event", location,
                           f"event name {name!r} uses a reserved prefix "
                           f"({', '.join(_RESERVED_PREFIXES)})", name)
            check = self._payload_check(event.payload, f"{location}.payload")
            sources = frozenset(str(s) for s in event.sources) if event.sources else None
            events[name] = CompiledEvent(name, sources, check,
                                         self._compile_correlation(name, event.correlate,
                                                                   event.payload))
        return events

    def _compile_correlation(self, name: str, correlate: Mapping[str, str], payload: Any
                             ) -> tuple[tuple[str, Guard, str], ...]:
        compiled = []
        fields = payload.get("properties") if isinstance(payload, dict) else None
        if isinstance(payload, type) and issubclass(payload, BaseModel):
            fields = payload.model_fields
        for field_name, text in correlate.items():
            location = f"events.{name}.correlate.{field_name}"
            if isinstance(fields, Mapping) and field_name not in fields:
                hint = did_you_mean(field_name, fields)
                self.error("correlate-field", location,
                           f"event {name!r} correlates payload field {field_name!r}, which its "
                           f"payload schema does not declare{hint}", name, field_name)
            guard, _ = self._compile_guard(text, location)
            if guard is not None:
                compiled.append((field_name, guard, text))
        return tuple(compiled)

    def _payload_check(self, schema: Any, location: str,
                       secrets: Callable[[str], bool] | None = None) -> PayloadCheck | None:
        """Gives the check of a payload against `schema`; fields under `secrets` that hold a
        vault reference pass (the runtime checked their values in clear first)."""
        if schema is None:
            return None
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            return _model_check(schema, secrets)
        try:
            validator_class = jsonschema.validators.validator_for(schema)
            validator_class.check_schema(schema)
        except jsonschema.SchemaError as exc:
            self.error("bad-schema", location, f"not a valid JSON Schema: {exc.message}")
            return None
        problem = _unresolvable_reference(schema)
        if problem is not None:
            self.error("bad-schema", location, problem)
            return None
        costly = generation_problem(schema)
        if costly is not None:
            self.error("costly-schema", f"{location}.{costly[0]}", costly[1])
        # an empty registry: no reference is ever fetched, so checking a payload does no I/O
        return _json_schema_check(validator_class(schema, registry=referencing.Registry()),
                                  secrets)

    def _check_tools(self) -> None:
        secrets = frozenset(self.spec.secrets)
        read = self.read

        def hidden(key: str) -> bool:  # a tool output's secret fields are references
            return key in secrets or (read is not None and key not in read
                                      and named_secret(key))

        self.output_checks = {
            name: self._payload_check(tool.output, f"tools.{name}.output", hidden)
            for name, tool in self.spec.tools.items()
        }

    def _tool(self, name: str, location: str) -> ToolSpec | None:
        tool = self.spec.tools.get(name)
        if tool is None:
            hint = did_you_mean(name, self.spec.tools)
            declared = ", ".join(sorted(self.spec.tools)) or "none"
            self.error("unknown-tool", location,
                       f"tool {name!r} is not declared under `tools:`{hint} (declared: {declared})",
                       name)
        return tool

    # -- states ----------------------------------------------------------------------------------

    def _check_state(self, name: str, state: StateSpec, children: Mapping[str, list[str]],
                     leaf_of: Mapping[str, str | None]) -> None:
        location = f"states.{name}"
        is_compound = bool(children.get(name))
        if state.type == "final":
            for key in ("on", "after", "step", "approval"):
                if getattr(state, key):
                    self.error("final-exit", f"{location}.{key}",
                               f"final state {name!r} may not have `{key}`: a final state "
                               "accepts nothing", name)
            if state.outcome is None:
                self.error("final-outcome", f"{location}.outcome",
                           f"final state {name!r} needs an outcome (success, failure, ...)", name)
            if is_compound:
                self.error("final-compound", location,
                           f"final state {name!r} may not have child states", name)
            # a region's own transitions are not a final state's: a region that is final
            # takes nothing (they apply only while the region runs)
            scope = self.scope_of.get(name)
            inherited = [event for parent in self._chain(name)[1:] if parent != scope
                         for event in self.states[parent].on]
            if inherited:
                self.error("final-exit", f"{location}.parent",
                           f"final state {name!r} would inherit transitions "
                           f"({', '.join(sorted(set(inherited)))}) from its parents; move it out "
                           "of the compound state", name, *sorted(set(inherited)))
            return
        if state.outcome is not None:
            self.error("outcome-not-final", f"{location}.outcome",
                       f"only final states have an outcome; {name!r} is {state.type}", name)
        if state.type == "wait":
            if state.step is not None:
                self.error("wait-step", f"{location}.step",
                           f"wait state {name!r} suspends the run and may not run a step; "
                           "put the step in a normal state", name)
            if state.after is None and state.approval is None and not (
                    self.spec.reactive and state.on):  # a reactive wait may wait for events
                self.error("wait-timeout", f"{location}.after",
                           f"wait state {name!r} has no timeout; expected "
                           "`after: {delay: ..., target: ...}`", name)
        elif state.approval is not None:
            self.error("approval-not-wait", f"{location}.approval",
                       f"state {name!r} has an approval but is {state.type}; approvals are "
                       "`type: wait`", name)
        elif (state.step is None and state.after is None and not is_compound
              and state.type == "normal" and not state.always):
            self.warning("implicit-wait", location,
                         f"state {name!r} runs no step, so it waits for an event with no "
                         "timeout; make it `type: wait` with `after:`", name)
        if state.after is not None and self._target_exists(state.after.target,
                                                           f"{location}.after.target"):
            self._same_scope(name, state.after.target, f"{location}.after.target")
        if state.step is not None:
            self._check_step(name, state.step, leaf_of)
        elif not is_compound:
            self._check_handlers(name, ("step.succeeded", "step.failed"), "has no step")
        if state.approval is None and not is_compound:
            self._check_handlers(name, ("approval.granted", "approval.denied"),
                                 "has no approval")

    def _check_handlers(self, name: str, events: tuple[str, ...], why: str) -> None:
        for event in events:
            if event in self.states[name].on:
                self.error("event-never-arrives", f"states.{name}.on.{event}",
                           f"state {name!r} {why}, so {event!r} never arrives there", name, event)

    def _handles(self, name: str, event: str) -> bool:
        return any(event in self.states[holder].on for holder in self._chain(name))

    def _check_step(self, name: str, step: StepSpec, leaf_of: Mapping[str, str | None]) -> None:
        location = f"states.{name}.step"
        tool = self._tool(step.tool, f"{location}.tool")
        retry = step.retry
        rloc = f"{location}.retry"
        if retry.attempts_max < 1:
            self.error("retry-bounds", f"{rloc}.attempts_max",
                       f"attempts_max must be at least 1, got {retry.attempts_max}", name)
        elif retry.attempts_max > 100:
            self.error("retry-bounds", f"{rloc}.attempts_max",
                       f"attempts_max of {retry.attempts_max} is over the sane bound of 100", name)
        if retry.delay_initial > retry.delay_max:
            self.error("retry-bounds", f"{rloc}.delay_initial",
                       f"delay_initial ({retry.delay_initial} ms) exceeds delay_max "
                       f"({retry.delay_max} ms)", name)
        if retry.multiplier < 1:
            self.error("retry-bounds", f"{rloc}.multiplier",
                       f"multiplier must be at least 1, got {retry.multiplier}", name)
        if not 0 <= retry.jitter <= 1:
            self.error("retry-bounds", f"{rloc}.jitter",
                       f"jitter is a fraction from 0 to 1, got {retry.jitter}", name)
        if Category.PERMANENT in retry.retry_on:
            self.error("retry-bounds", f"{rloc}.retry_on",
                       "a permanent failure must not be retried", name)
        if tool is not None and not (tool.idempotency_keys or tool.repeatable) and (
                "retry_on" in retry.model_fields_set and Category.TIMEOUT in retry.retry_on):
            # by default a timeout of such a tool is ambiguous and never retried; saying
            # otherwise explicitly is a mistake worth stopping
            self.error("blind-retry", f"{rloc}.retry_on",
                       f"tool {step.tool!r} neither honours idempotency keys nor is repeatable, "
                       "so retrying a timeout may apply it twice; drop `timeout` from retry_on "
                       "(an ambiguous failure then goes to escalate_to, or step.failed)",
                       name, step.tool)
        if step.timeout is not None and step.timeout <= 0:
            self.error("step-timeout", f"{location}.timeout", "a step timeout must be positive",
                       name)
        if step.cost < 0:
            self.error("step-cost", f"{location}.cost", "a step's cost may not be negative", name)
        if step.compensation is not None:
            self._tool(step.compensation.tool, f"{location}.compensation.tool")
            if step.compensation.attempts_max < 1:
                self.error("retry-bounds", f"{location}.compensation.attempts_max",
                           "compensation attempts_max must be at least 1", name)
            if self.spec.compensation_failed is None:
                self.error("compensation-failed-missing", "compensation_failed",
                           f"state {name!r} declares a compensation, so the definition needs "
                           "`compensation_failed: <state>` asking a human when one fails", name)
        if step.escalate_to is not None and self._target_exists(step.escalate_to,
                                                                f"{location}.escalate_to"):
            self._same_scope(name, step.escalate_to, f"{location}.escalate_to")
        scope = self.scope_of.get(name)
        if scope is not None and retry.on_exhausted == "compensate":
            self.error("compensate-in-scope", f"{rloc}.on_exhausted",
                       f"step {name!r} is in {self._scope_word(scope)} {scope!r}, whose failure "
                       "the parallel or map state undoes for every region at once; end the "
                       "failure in a final state (on_exhausted: fail)", name)
        if isinstance(step.needs_approval, str):
            self._compile_guard(step.needs_approval, f"{location}.needs_approval")
        if retry.on_exhausted == "escalate" and step.escalate_to is None:
            self.error("escalate-target", f"{location}.escalate_to",
                       f"on_exhausted is escalate, so state {name!r} needs `escalate_to`", name)
        if not self._handles(name, "step.succeeded"):
            self.error("unhandled-step", f"states.{name}.on",
                       f"state {name!r} runs a step but has no `step.succeeded` transition", name)
        if retry.on_exhausted != "escalate" and not self._handles(name, "step.failed"):
            self.error("unhandled-step", f"states.{name}.on",
                       f"state {name!r} runs a step that can fail (on_exhausted: "
                       f"{retry.on_exhausted}) but has no `step.failed` transition", name)
        if retry.on_exhausted == "escalate" and "step.failed" in self.states[name].on:
            self.warning("escalate-shadows", f"states.{name}.on.step.failed",
                         f"on_exhausted is escalate, so every failure of step {name!r} goes to "
                         f"escalate_to {step.escalate_to!r}: this `step.failed` transition is "
                         "never taken (drop it, or set on_exhausted: fail)", name)
        if not step.reversible and not step.needs_approval and step.compensation is None:
            self.warning("irreversible-unguarded", location,
                         f"step {name!r} is irreversible with neither approval nor compensation",
                         name, step.tool)
        self.templates[f"{location}.input"] = self._compile_template(
            step.input, f"{location}.input")
        if step.compensation is not None:
            where = f"{location}.compensation.input"
            self.templates[where] = self._compile_template(step.compensation.input, where)

    def _compile_template(self, template: Mapping[str, Any], location: str
                          ) -> Callable[[Mapping[str, Any]], Mapping[str, Any]]:
        def report(where: str, exc: ExpressionSyntaxError) -> None:
            col = f" at column {exc.col}" if exc.col is not None else ""
            self.error("bad-expression", where, f"expression{col}: {exc}")

        return _compile_template(template, report, location)

    def _compile_step(self, name: str, step: StepSpec | None,
                      leaf_of: Mapping[str, str | None]) -> CompiledStep | None:
        if step is None or f"states.{name}.step.input" not in self.templates:
            return None  # not checked (a final state may not run one): an error says why
        tool = self.spec.tools.get(step.tool, ToolSpec())
        compensation = None
        if step.compensation is not None:
            compensation_tool = self.spec.tools.get(step.compensation.tool, ToolSpec())
            compensation = CompiledCompensation(
                step.compensation.tool,
                self.templates[f"states.{name}.step.compensation.input"],
                step.compensation.attempts_max,
                compensation_tool.idempotency_keys or compensation_tool.repeatable,
            )
        retry = step.retry
        return CompiledStep(
            state=name,
            tool=step.tool,
            input=self.templates[f"states.{name}.step.input"],
            reversible=step.reversible,
            idempotent=tool.idempotency_keys,
            retry_safe=tool.idempotency_keys or tool.repeatable,
            timeout_ms=step.timeout,
            attempts_max=retry.attempts_max,
            delay_initial_ms=retry.delay_initial,
            delay_max_ms=retry.delay_max,
            multiplier=retry.multiplier,
            jitter=retry.jitter,
            retry_on=frozenset(str(c) for c in retry.retry_on),
            on_exhausted=retry.on_exhausted,
            compensation=compensation,
            needs_approval=bool(step.needs_approval),
            cost=step.cost,
            escalate_to=leaf_of.get(step.escalate_to or ""),
            check_output=self.output_checks.get(step.tool),
            approval_when=self._approval_condition(step),
            approval_text=step.needs_approval if isinstance(step.needs_approval, str) else "",
        )

    def _approval_condition(self, step: StepSpec) -> Guard | None:
        if not isinstance(step.needs_approval, str):
            return None
        try:
            return compile_expression(step.needs_approval)
        except ExpressionSyntaxError:
            return None  # reported by _check_step

    def _compile_approval(self, name: str, state: StateSpec,
                          leaf_of: Mapping[str, str | None]) -> CompiledApproval | None:
        approval = state.approval
        if approval is None:
            return None
        return CompiledApproval(
            for_state=approval.for_state,
            summary=approval.summary,
            evidence=tuple(approval.evidence),
            roles=frozenset(approval.roles),
            expires_after_ms=approval.expires_after,
            on_expiry=approval.on_expiry,
            escalate_to=leaf_of.get(approval.escalate_to or ""),
        )

    def _check_approvals(self) -> None:
        approved_states: set[str] = set()
        for name, state in self.states.items():
            approval = state.approval
            if approval is None:
                continue
            location = f"states.{name}.approval"
            approved_states.add(approval.for_state)
            target = self.states.get(approval.for_state)
            if target is None:
                hint = did_you_mean(approval.for_state, self.states)
                self.error("unknown-target", f"{location}.for_state",
                           f"approval is for state {approval.for_state!r}, which does not "
                           f"exist{hint}", approval.for_state)
            elif target.step is None:
                self.error("approval-without-step", f"{location}.for_state",
                           f"approval is for state {approval.for_state!r}, which runs no step",
                           name, approval.for_state)
            elif not target.step.needs_approval:
                self.warning("approval-unneeded", f"{location}.for_state",
                             f"approval is for state {approval.for_state!r}, whose step does not "
                             "declare `needs_approval: true`", name, approval.for_state)
            if approval.expires_after <= 0:
                self.error("approval-expiry", f"{location}.expires_after",
                           "an approval must expire after a positive delay", name)
            if approval.on_expiry == "escalate" and approval.escalate_to is None:
                self.error("escalate-target", f"{location}.escalate_to",
                           "on_expiry is escalate, so the approval needs `escalate_to`", name)
            if approval.escalate_to is not None and self._target_exists(
                    approval.escalate_to, f"{location}.escalate_to"):
                self._same_scope(name, approval.escalate_to, f"{location}.escalate_to")
            for key in _PLACEHOLDER.findall(approval.summary):
                if key not in self.spec.context:
                    self.warning("summary-placeholder", f"{location}.summary",
                                 f"summary names {{{key}}}, which the initial context lacks; it "
                                 "shows empty unless an action sets it", name, key)
            for event in ("approval.granted", "approval.denied"):
                if not self._handles(name, event):
                    self.error("unhandled-approval", f"states.{name}.on",
                               f"approval state {name!r} has no {event!r} transition", name)
        for name, state in self.states.items():
            if state.step is not None and state.step.needs_approval and name not in approved_states:
                self.error("approval-missing", f"states.{name}.step.needs_approval",
                           f"step {name!r} needs approval, but no approval state names it in "
                           "`for_state`", name)

    # -- approval gates --------------------------------------------------------------------------

    def _check_approval_entries(self, own: Mapping[str, Mapping[str, Transitions]],
                                charted: Mapping[str, Mapping[str, Any]],
                                leaf_of: Mapping[str, str | None], initial: str | None) -> None:
        """A step that needs approval (`needs_approval: true`) is entered only by the
        `approval.granted` transition of its approval state. Any other way in (a transition,
        a timeout, an escalation, a budget, the start) bypasses the approval: the machine
        refuses the move, or runs the step on an earlier grant still unspent. A conditional
        approval (an expression) is decided on entry, so a direct way in is its design. A
        return to a compound with `history` may resume a gated step rather than enter its
        initial state, depending on the path that left it: lint follows no paths there, and
        `decide` refuses any entry with no grant."""
        approves = {name: state.approval.for_state for name, state in self.states.items()
                    if state.approval is not None}
        gates: dict[str, list[str]] = {}
        for name, step in approves.items():
            gates.setdefault(step, []).append(name)
        gated = {name: gates[name] for name, state in self.states.items()
                 if state.step is not None and state.step.needs_approval is True
                 and name in gates}  # with no approval state, approval-missing says so
        if not gated:
            return

        def bypass(location: str, how: str, target: str, *ids: str) -> None:
            leaf = leaf_of.get(target)
            if leaf is None or leaf not in gated:
                return
            ways = " or ".join(repr(gate) for gate in gated[leaf])
            into = f"enters {leaf!r}" if leaf == target else (
                f"enters {leaf!r} (the initial state of {target!r})")
            self.error("approval-bypass", location,
                       f"{how} {into} without its approval; expected only `approval.granted` "
                       f"of {ways} to enter {leaf!r}, whose step needs approval: go to "
                       f"{gated[leaf][0]!r} instead, which asks for it",
                       *ids, leaf, *gated[leaf])

        for name, events in own.items():
            state = self.states[name]
            for event, transitions in events.items():
                written = len(state.transitions(event))
                for transition in transitions:
                    where = f"states.{name}.on.{event}" + (
                        f"[{transition.index}]" if written > 1 else "")
                    if transition.internal:
                        continue
                    if event == APPROVAL_GRANTED:
                        stray = self._stray_grant(name, leaf_of.get(transition.target),
                                                  approves)
                        if stray is None:
                            continue
                        how = (f"`approval.granted` of {name!r}, taken also when approval "
                               f"state {stray!r} (an approval of {approves[stray]!r}) is "
                               "granted," if stray != name else f"`approval.granted` of {name!r}")
                    else:
                        how = f"`{event}` of {name!r}"
                    bypass(f"{where}.target", how, transition.target, name, event)
            for key, label, count in (
                    ("always", "an `always` transition", len(state.eventless())),
                    ("done", "the `done` transition", len(state.joins()))):
                for transition in charted[name][key]:
                    where = f"states.{name}.{key}" + (
                        f"[{transition.index}]" if count > 1 else "")
                    bypass(f"{where}.target", f"{label} of {name!r}", transition.target, name)
            if state.after is not None:
                bypass(f"states.{name}.after.target", f"the timeout (`after:`) of {name!r}",
                       state.after.target, name)
            if state.step is not None and state.step.escalate_to is not None:
                bypass(f"states.{name}.step.escalate_to", f"the escalation of step {name!r}",
                       state.step.escalate_to, name)
            if state.approval is not None and state.approval.escalate_to is not None:
                bypass(f"states.{name}.approval.escalate_to",
                       f"the expiry escalation of approval {name!r}",
                       state.approval.escalate_to, name)
        budgets = self.spec.budgets
        for key, target in (("budgets.on_exceeded", budgets.on_exceeded),
                            ("budgets.on_cycle", budgets.on_cycle),
                            ("compensation_failed", self.spec.compensation_failed)):
            if target is not None:
                bypass(key, f"`{key}`", target)
        starts: list[tuple[str | None, str]] = [(initial, "the run starts in it and")]
        for name, state in self.states.items():
            if state.type == "parallel":
                starts += [(region, f"region {region!r} of parallel state {name!r} starts "
                                    "in it and") for region in self.children.get(name, [])]
            elif state.type == "map":
                first = next((child for child in self.children.get(name, [])
                              if self.states[child].initial), None)
                starts.append((first, f"each item of map state {name!r} starts in it and"))
        for start, how in starts:
            leaf = leaf_of.get(start or "")
            if leaf in gated:
                self.error("approval-bypass", f"states.{leaf}.initial",
                           f"{leaf!r} needs approval for its step, but {how} runs it with "
                           f"no approval; expected only `approval.granted` of "
                           f"{' or '.join(repr(gate) for gate in gated[leaf])} to enter it: "
                           f"start in {gated[leaf][0]!r} instead", leaf, *gated[leaf])

    def _stray_grant(self, holder: str, entered: str | None, approves: Mapping[str, str]
                     ) -> str | None:
        """Gives the approval state whose grant takes `holder`'s `approval.granted` transition
        into `entered` though it approves another step: `holder` itself, or an approval state
        below it that inherits the transition (None when every grant taking it approves
        `entered`)."""
        takers = [name for name in approves
                  if holder in self._chain(name) and self._inherits(name, holder)]
        return next((taker for taker in takers if approves[taker] != entered), None)

    def _inherits(self, name: str, holder: str) -> bool:
        """Tells whether an `approval.granted` of `name` may fall through to the one its
        ancestor `holder` declares: no state between them declares an unguarded one."""
        for state in self._chain(name):
            if state == holder:
                return True
            if any(t.guard is None for t in self.states[state].transitions(APPROVAL_GRANTED)):
                return False
        return False

    # -- untested ---------------------------------------------------------------------------------

    def _check_untested(self) -> dict[str, str]:
        """Gives the gaps the definition accepts a campaign leaves untested (`untested:
        {code: reason}`), and reports an entry that cannot stand: a code of no gap's form, a
        state the definition lacks, no reason. (A fault kind and a crash point are the
        harness's to check: a crash point is the machine's.)"""
        accepted: dict[str, str] = {}
        for code, reason in self.spec.untested.items():
            location = f"untested.{code}"
            kind, _, name = code.partition(":")
            if kind not in UNTESTED_KINDS or not name:
                self.error("untested-code", location,
                           f"{code!r} names no gap; expected crash_point:<name>, "
                           "fault:<kind>, moves:<state> or outcome:success (or <kind>:* for "
                           f"every gap of the kind){did_you_mean(kind, UNTESTED_KINDS)}", code)
            elif kind == "outcome" and name not in ("success", "*"):
                self.error("untested-code", location,
                           f"{code!r} names no gap; the outcome gap is outcome:success", code)
            elif kind == "moves" and name != "*" and name not in self.states:
                self.error("untested-code", location,
                           f"no state {name!r}"
                           f"{did_you_mean(name, list(self.states))}", code)
            elif reason is None or not reason.strip():
                self.error("untested-reason", location,
                           f"leaving {code!r} untested needs a reason: `{code}: <why it is "
                           "acceptable here>`", code)
            else:
                accepted[code] = reason.strip()
        return accepted

    # -- lint: ignore ----------------------------------------------------------------------------

    def _acknowledge(self) -> None:
        """Moves the warnings the definition acknowledges (`lint: ignore: {code: reason}`) out
        of the findings, and reports the entries that cannot stand: an unknown code, an
        error's code (errors cannot be acknowledged), no reason, or a code that never fires."""
        ignore = self.spec.lint.ignore
        if not ignore:
            return
        broken = any(f.severity is Severity.ERROR for f in self.findings)
        reasons: dict[str, str] = {}
        for code, reason in ignore.items():
            location = f"lint.ignore.{code}"
            severity = CODES.get(code)
            if severity is None:
                hint = did_you_mean(code, [c for c, s in CODES.items()
                                           if s is Severity.WARNING and c not in IGNORE_CODES])
                self.error("lint-ignore-unknown", location,
                           f"{code!r} is not a finding code{hint}; `lint: ignore:` names the "
                           "code a warning ends with, in brackets", code)
            elif code in IGNORE_CODES:
                self.error("lint-ignore-refused", location,
                           f"{code!r} is a finding about `lint: ignore:` itself and cannot be "
                           "acknowledged: fix the entry it names", code)
            elif severity is Severity.ERROR:
                self.error("lint-ignore-refused", location,
                           f"{code!r} is an error, and errors cannot be acknowledged: fix what "
                           "it reports (only warnings may be listed here)", code)
            elif reason is None or not reason.strip():
                self.error("lint-ignore-reason", location,
                           f"acknowledging {code!r} needs a reason: `{code}: <why it is "
                           "acceptable here>`", code)
            else:
                reasons[code] = reason.strip()
        fired = {f.code for f in self.findings}
        kept: list[Finding] = []
        for finding in self.findings:
            reason = reasons.get(finding.code)
            if reason is not None and finding.severity is Severity.WARNING:
                self.acknowledged.append(Acknowledged(finding, reason))
            else:
                kept.append(finding)
        self.findings = kept
        if broken:
            return  # with errors some checks stop early: what did not fire may yet
        for code in reasons:
            if code not in fired:
                self.warning("lint-ignore-stale", f"lint.ignore.{code}",
                             f"{code!r} is acknowledged but no {code!r} warning fires in this "
                             "definition; remove the entry", code)

    def _check_budgets(self) -> None:
        budgets = self.spec.budgets
        limits = ("transitions_max", "visits_max", "deadline", "cost_max")
        for key in limits:
            value = getattr(budgets, key)
            if value is not None and value <= 0:
                self.error("budget-bounds", f"budgets.{key}", f"{key} must be positive, got "
                           f"{value}")
        if any(getattr(budgets, key) is not None for key in limits) and budgets.on_exceeded is None:
            self.error("budget-target", "budgets.on_exceeded",
                       "a budget is set, so `on_exceeded: <state>` must say where an exceeded "
                       "run goes")
        if budgets.cycle_threshold is not None:
            if budgets.cycle_threshold < 2:
                self.error("budget-bounds", "budgets.cycle_threshold",
                           f"cycle_threshold must be at least 2, got {budgets.cycle_threshold}")
            if budgets.on_cycle is None and budgets.on_exceeded is None:
                self.error("budget-target", "budgets.on_cycle",
                           "cycle_threshold is set, so `on_cycle` (or `on_exceeded`) must name a "
                           "state")
        for key, target in (("budgets.on_exceeded", budgets.on_exceeded),
                            ("budgets.on_cycle", budgets.on_cycle),
                            ("compensation_failed", self.spec.compensation_failed)):
            if target is not None and self._target_exists(target, key) and self.scope_of.get(
                    target) is not None:
                self.error("leaves-scope", key,
                           f"{key} names {target!r}, which is inside "
                           f"{self._scope_word(self.scope_of[target] or '')} "
                           f"{self.scope_of[target]!r}; it must be a state at the top level",
                           target)

    # -- transitions -----------------------------------------------------------------------------

    def _compile_transitions(self, name: str, state: StateSpec, events: Mapping[str, Any],
                             leaf_of: Mapping[str, str | None]
                             ) -> dict[str, tuple[CompiledTransition, ...]]:
        compiled: dict[str, tuple[CompiledTransition, ...]] = {}
        for event in state.on:
            transitions = state.transitions(event)
            location = f"states.{name}.on.{event}"
            if event not in events and event not in TRANSITION_EVENTS:
                if event in BUILTIN_EVENTS:
                    self.error("unknown-event", location,
                               f"{event!r} is handled by the machine itself and cannot label a "
                               "transition", event)
                else:
                    hint = did_you_mean(event, [*events, *TRANSITION_EVENTS])
                    self.error("unknown-event", location,
                               f"event {event!r} is not declared under `events:`{hint}", event)
            items: list[CompiledTransition] = []
            for index, transition in enumerate(transitions):
                where = f"{location}[{index}]" if len(transitions) > 1 else location
                if transition.target is None and event in TRANSITION_EVENTS:
                    self.error("internal-builtin", f"{where}.target",
                               f"{event!r} ends a step or an approval, so its transition "
                               "must leave the state: give it a target", name, event)
                    continue
                one = self._compile_one(name, event, index, transition, where, leaf_of)
                if one is not None:
                    items.append(one)
            compiled[event] = tuple(items)
        return compiled

    def _compile_guard(self, guard: object, location: str) -> tuple[Guard | None, str]:
        if guard is None:
            return None, ""
        if isinstance(guard, str):
            try:
                return compile_expression(guard), guard
            except ExpressionSyntaxError as exc:
                col = f" at column {exc.col}" if exc.col is not None else ""
                self.error("bad-guard", location, f"guard {guard!r}{col}: {exc}")
                return None, guard
        if isinstance(guard, FunctionRef):
            function = self._function(guard.function, location)
            return function, f"function:{guard.function}"
        if callable(guard):
            return guard, f"function:{getattr(guard, '__qualname__', repr(guard))}"
        self.error("bad-guard", location, f"a guard is an expression or a function, got {guard!r}")
        return None, ""

    def _function(self, name: str, location: str) -> Callable[..., Any] | None:
        function = self.functions.get(name)
        if function is None:
            hint = did_you_mean(name, self.functions)
            self.error("unknown-function", location,
                       f"function {name!r} is not registered{hint}; pass it in `functions=` or "
                       "decorate it with @register_function", name)
        return function

    def _compile_action(self, action: ActionSpec, location: str) -> Action | None:
        if (action.assign is None) == (action.function is None):
            self.error("bad-action", location,
                       "an action has exactly one of `assign` or `function`")
            return None
        if action.function is not None:
            if callable(action.function):
                return action.function
            return self._function(action.function, f"{location}.function")
        assert action.assign is not None
        compiled: list[tuple[str, Guard]] = []
        for key, text in action.assign.items():
            try:
                compiled.append((key, compile_expression(text)))
            except ExpressionSyntaxError as exc:
                col = f" at column {exc.col}" if exc.col is not None else ""
                self.error("bad-expression", f"{location}.assign.{key}",
                           f"expression {text!r}{col}: {exc}", key)
        if len(compiled) == 1:
            ((only_key, only_value),) = compiled
            return lambda context, event: {only_key: only_value(context, event)}
        pairs = tuple(compiled)
        return lambda context, event: {key: value(context, event) for key, value in pairs}

    # -- graph -----------------------------------------------------------------------------------

    def _check_graph(self, initial: str | None, leaves: list[str],
                     states: Mapping[str, CompiledState],
                     leaf_of: Mapping[str, str | None], scope: str | None = None) -> None:
        """Checks that every state of `scope` (the top level, a region or a map's item flow)
        can be reached from `initial`, and that a final state can be reached from each."""
        if initial is None:
            return
        spec = self.spec
        budgets = spec.budgets
        top = scope is None
        # every declared budget target can be reached from anywhere; but only budgets that a
        # loop must exhaust count as a way to finish: cost accrues only on steps and cycles only
        # on repeated errors, so neither guarantees an exit
        reachable_targets = [leaf_of.get(t) for t in (budgets.on_exceeded, budgets.on_cycle)
                             if t] if top else []
        bounded = any(limit is not None for limit in (budgets.transitions_max,
                                                       budgets.visits_max, budgets.deadline))
        exits = [leaf_of.get(budgets.on_exceeded)] if (
            top and bounded and budgets.on_exceeded) else []
        edges: dict[str, list[str]] = {}
        for leaf in leaves:
            state = states[leaf]
            if state.final:
                edges[leaf] = []
                continue
            out: list[str | None] = [t.target_leaf for ts in state.on.values() for t in ts
                                     if not t.internal]
            out += [t.target_leaf for t in (*state.always, *state.done)]
            if state.after_target:
                out.append(state.after_target)
            if state.step is not None:
                if state.step.escalate_to:
                    out.append(state.step.escalate_to)
                if state.step.compensation is not None and spec.compensation_failed and top:
                    out.append(leaf_of.get(spec.compensation_failed))
            if state.approval is not None and state.approval.escalate_to:
                out.append(state.approval.escalate_to)
            if state.regions and spec.compensation_failed and top and self._undoes(leaf):
                out.append(leaf_of.get(spec.compensation_failed))
            edges[leaf] = [t for t in out if t]
            if not edges[leaf] and leaf not in self.unresolved:
                self.error("trap-state", f"states.{leaf}",
                           f"state {leaf!r} is not final and has no way out (no transition, "
                           "timeout or escalation leaves it)", leaf)
            edges[leaf].extend(t for t in exits if t)

        reachable = _reach(initial, edges)
        for target in reachable_targets:
            if target:
                reachable |= _reach(target, edges)
        where = f"the initial state {initial!r}" if top else (
            f"{initial!r}, where {self._scope_word(scope or '')} {scope!r} starts")
        for name in self.states:
            if self.scope_of.get(name) != scope or name == scope:
                continue
            descendants = [leaf for leaf in leaves
                           if leaf == name or name in states[leaf].ancestors]
            if not any(leaf in reachable for leaf in descendants):
                self.error("unreachable-state", f"states.{name}",
                           f"state {name!r} cannot be reached from {where}", name)
        finals = {leaf for leaf in leaves if states[leaf].final}
        if top and self.spec.reactive:
            return  # it ends by design in no final state: nothing to reach
        owner = scope if scope is None or self.states[scope].type == "map" else (
            self.states[scope].parent)
        never = "" if top else (f", so {self.states[owner or ''].type} state {owner!r} never "
                                "gets to `done`")
        if not finals & reachable:
            if top:
                self.error("no-final", "states",
                           f"no final state can be reached from the initial state {initial!r} "
                           "(a workflow that runs until it is stopped says `reactive: true`)",
                           initial)
            else:
                self.error("join-never", f"states.{scope}",
                           f"{self._scope_word(scope or '')} {scope!r} has no final state that "
                           f"can be reached from {initial!r}{never}", scope or "", initial)
            return
        reverse: dict[str, list[str]] = {}
        for source, targets in edges.items():
            for target in targets:
                reverse.setdefault(target, []).append(source)
        can_finish: set[str] = set()
        for final in finals:
            can_finish |= _reach(final, reverse)
        stuck = sorted(leaf for leaf in reachable if leaf not in can_finish)
        for leaf in stuck:
            self.error("no-way-to-final", f"states.{leaf}",
                       f"no final state can be reached from state {leaf!r} (it loops among "
                       f"{', '.join(stuck)} forever){never}", leaf)


def _reach(start: str, edges: Mapping[str, list[str]]) -> set[str]:
    seen = {start}
    queue = deque([start])
    while queue:
        for target in edges.get(queue.popleft(), ()):
            if target not in seen:
                seen.add(target)
                queue.append(target)
    return seen


def _compile_template(
    template: Mapping[str, Any],
    report: Callable[[str, ExpressionSyntaxError], None],
    location: str,
) -> Callable[[Mapping[str, Any]], Mapping[str, Any]]:
    """Gives `context -> input`: literals kept, strings starting with '=' evaluated."""
    resolvers: list[tuple[str, Callable[[Mapping[str, Any]], Any]]] = []
    dynamic = False
    for key, value in template.items():
        where = f"{location}.{key}"
        if isinstance(value, str) and value.startswith("="):
            dynamic = True
            try:
                expression = compile_expression(value[1:], reads_event=False)
            except ExpressionSyntaxError as exc:
                report(where, exc)
                continue
            resolvers.append((key, _evaluated(expression)))
        elif isinstance(value, Mapping):
            inner = _compile_template(value, report, where)
            dynamic = True
            resolvers.append((key, inner))
        else:
            resolvers.append((key, _constant(value)))
    if not dynamic:
        frozen = MappingProxyType(dict(template))
        return lambda context: frozen
    pairs = tuple(resolvers)
    return lambda context: {key: resolve(context) for key, resolve in pairs}


def _evaluated(expression: Callable[[Mapping[str, Any], Any], Any]
               ) -> Callable[[Mapping[str, Any]], Any]:
    """Gives `context -> value` of an input's `=expression` (it reads no event)."""
    return lambda context: expression(context, None)


def _constant(value: Any) -> Callable[[Mapping[str, Any]], Any]:
    """Gives `context -> value` of an input's literal."""
    return lambda context: value


def _unresolvable_reference(schema: Any) -> str | None:
    """Gives why a `$ref` in `schema` cannot be resolved without I/O, or None when all can."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node is not schema and isinstance(node.get("$id"), str):
                return (f"$id {node['$id']!r} inside the schema starts a new base for "
                        "references; keep one schema with local '#/$defs/...' references")
            reference = node.get("$ref")
            if isinstance(reference, str):
                if reference != "#" and not reference.startswith("#/"):
                    return (f"$ref {reference!r} is not a local JSON pointer; only references "
                            "such as '#/$defs/name' are allowed, so checks do no I/O")
                target: Any = schema
                for part in reference[1:].split("/")[1:]:
                    part = part.replace("~1", "/").replace("~0", "~")
                    if isinstance(target, dict) and part in target:
                        target = target[part]
                    elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                        target = target[int(part)]
                    else:
                        return f"$ref {reference!r} points to nothing in the schema"
            # data (enum, const, default, examples) is not schema: a "$ref" there is a value
            stack.extend(value for key, value in node.items() if key not in _SCHEMA_DATA)
        elif isinstance(node, list):
            stack.extend(node)
    return None


_SCANNED_TEXT_MAX = 4_000


def _context_keys(text: str) -> list[str]:
    """Gives the context keys an expression reads by a name written out: `context.key`,
    `context['key']`, `at(context, 'key', ...)`, `has(context, 'key', ...)`; nothing for a
    text that is no expression (a duration, a sentence) or a text within one."""
    if len(text) > _SCANNED_TEXT_MAX:  # no expression is this long (the limit is 1,000)
        return []
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    keys: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_context(node.value):
            keys.append(node.attr)
        elif isinstance(node, ast.Subscript) and _is_context(node.value):
            keys += _named(node.slice)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("at", "has") and len(node.args) >= 2
              and _is_context(node.args[0])):
            keys += _named(node.args[1])
    return keys


def _is_context(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "context"


def _named(node: ast.AST) -> list[str]:
    """Gives the key a subscript or an `at` argument writes out, if it is a text."""
    return [node.value] if isinstance(node, ast.Constant) and isinstance(node.value, str) else []


def _words_read(spec: WorkflowSpec) -> frozenset[str] | None:
    """Gives every word the definition's expressions hold (outside its context's defaults, its
    tools' schemas, and what the linter and campaigns are told): a key none names is read by
    none. None when what is read cannot be known: a Python callable or a `function:` may read
    any key, and so may an expression that takes the whole context or payload
    (`=context`, `event.payload`, `context[name]`)."""
    stack: list[Any] = [spec.model_dump(mode="python", exclude={
        "name", "version", "description", "context", "tools", "secrets", "lint", "untested"})]
    words: set[str] = set()
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            if value.get("function") is not None:
                return None
            stack.extend(value.values())
        elif isinstance(value, list | tuple):
            stack.extend(value)
        elif isinstance(value, str):
            if _takes_whole(value):
                return None
            words.update(_WORD.findall(value))
        elif isinstance(value, type):
            continue  # a payload's model: a schema, which reads nothing
        elif callable(value):
            return None
    return frozenset(words)


#: An expression that takes a whole mapping, or one of its keys by a name computed: `context`,
#: `payload` or `event` not followed by `.name` or `['name']`.
_WHOLE = re.compile(r"\b(?:context|payload|event)\b(?!\s*(?:\.\s*[A-Za-z_]|\[\s*['\"]))")
#: `at(context, 'key', ...)` and `has(context, 'key', ...)` read the key named next, when it
#: is one text written out (`at(context, 'a' + context.s)` computes it)
_KEYED = re.compile(r"\s*,\s*(?:'[^'\\]*'|\"[^\"\\]*\")\s*[,)]")


def _takes_whole(text: str) -> bool:
    """Tells whether an expression takes a whole mapping (see `_WHOLE`)."""
    for match in _WHOLE.finditer(text):
        if not (text[:match.start()].endswith(("at(", "has("))
                and _KEYED.match(text, match.end())):
            return True
    return False
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _references_at(payload: Mapping[str, Any], secrets: Callable[[str], bool]
                   ) -> frozenset[str]:
    """Gives the secret fields of `payload` that hold a vault reference."""
    return frozenset(key for key, value in payload.items()
                     if is_reference(value) and secrets(key))


def _json_schema_check(validator: Any, secrets: Callable[[str], bool] | None = None
                       ) -> PayloadCheck:
    fast = compile_fast_check(validator.schema)

    def check(payload: Mapping[str, Any]) -> str | None:
        instance = payload if isinstance(payload, dict) else dict(payload)
        if fast is not None and fast(instance):
            return None  # the fast subset accepts only what jsonschema accepts
        if secrets is not None and _references_at(instance, secrets):
            return None  # checked whole, in clear, before its secrets became references
        try:
            error = jsonschema.exceptions.best_match(validator.iter_errors(instance))
        except Exception as exc:  # a schema the checks let through must not crash decide
            return f"the schema could not be applied: {type(exc).__name__}: {exc}"
        if error is None:
            return None
        path = ".".join(str(p) for p in error.absolute_path) or "payload"
        return f"{path}: {error.message}"

    return check


def _model_check(model: type[BaseModel], secrets: Callable[[str], bool] | None = None
                 ) -> PayloadCheck:
    def check(payload: Mapping[str, Any]) -> str | None:
        try:
            model.model_validate(dict(payload))
        except ValidationError as exc:
            if secrets is not None and _references_at(payload, secrets):
                return None  # checked whole, in clear, before its secrets became references
            first = exc.errors()[0]
            path = ".".join(str(p) for p in first["loc"]) or "payload"
            return f"{path}: {first['msg']}"
        return None

    return check
