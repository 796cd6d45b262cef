"""From a `WorkflowSpec` to an immutable, checked `WorkflowDefinition`.

Every check runs once here, at load: structure is pydantic's job, consistency is this module's.
Each finding names its location (`states.awaiting_approval.after`) and the ids at fault. The
compiled definition precomputes what `decide` needs (transitions per leaf state with the parents'
merged in, targets resolved to leaf states, guards compiled) so the hot path only looks things up.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import jsonschema
import referencing
from pydantic import BaseModel, ValidationError

from reference_machine._expr import ExpressionSyntaxError, compile_expression
from reference_machine._findings import Finding, Severity, did_you_mean
from reference_machine._functions import registered_functions
from reference_machine._records import BUILTIN_EVENTS, TRANSITION_EVENTS
from reference_machine._schema import compile_fast_check, generation_problem
from reference_machine._secrets import is_reference
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

Guard = Callable[[Mapping[str, Any], Any], Any]
Action = Callable[[Mapping[str, Any], Any], Mapping[str, Any] | None]
PayloadCheck = Callable[[Mapping[str, Any]], str | None]
_RESERVED_PREFIXES = ("execution.", "step.", "approval.", "timer.", "compensation.")
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
    #: entering it does nothing but move: a normal state with no step, approval or timeout
    plain: bool = False


@dataclass(frozen=True, slots=True)
class CompiledEvent:
    name: str
    sources: frozenset[str] | None
    check_payload: PayloadCheck | None


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
    `warnings` keeps the non-blocking findings of the load-time checks.
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
    warnings: tuple[Finding, ...] = field(default=())

    @property
    def final_states(self) -> tuple[str, ...]:
        """Gives the names of the final states, in definition order."""
        return tuple(name for name, state in self.states.items() if state.final)


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
    """Gives every finding (errors and warnings) of the load-time checks, raising nothing."""
    builder = _Builder(spec, functions, lines or {})
    builder.build("<lint>")
    return _by_line(builder.findings)


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
        self.states = spec.states
        self.unresolved: set[str] = set()  # states with a target we could not resolve
        self.output_checks: dict[str, PayloadCheck | None] = {}
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
        events = self._compile_events()
        self._check_tools()
        initial = self._initial(None, children, "states")
        leaves = [name for name in self.states if not children.get(name)]
        initial_child = {
            parent: self._initial(parent, children, f"states.{parent}") for parent in children
        }
        leaf_of = {name: self._leaf(name, initial_child) for name in self.states}

        own: dict[str, dict[str, tuple[CompiledTransition, ...]]] = {}
        for name, state in self.states.items():
            own[name] = self._compile_transitions(name, state, events, leaf_of)
            self._check_state(name, state, children, leaf_of)
        self._check_budgets()
        self._check_approvals()
        for index, key in enumerate(spec.secrets):
            if key not in spec.context:
                self.error("unknown-secret", f"secrets[{index}]",
                           f"secret {key!r} is not a context key; declare it under `context:` "
                           f"(known: {', '.join(sorted(spec.context)) or 'none'})", key)

        compiled_states: dict[str, CompiledState] = {}
        for name, state in self.states.items():
            ancestors = self._ancestors(name)
            merged: dict[str, tuple[CompiledTransition, ...]] = {}
            for holder in (name, *ancestors):  # the state's own first, then its parents'
                for event, transitions in own[holder].items():
                    merged[event] = merged.get(event, ()) + transitions
            step = self._compile_step(name, state.step, leaf_of)
            approval = self._compile_approval(name, state, leaf_of)
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
                       and not state.after),
            )
        if initial is not None:
            self._check_graph(leaf_of[initial], leaves, compiled_states, leaf_of)
        if any(f.severity is Severity.ERROR for f in self.findings) or initial is None:
            return None
        initial_leaf = leaf_of[initial]
        budgets = spec.budgets
        assert initial_leaf is not None
        return WorkflowDefinition(
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
            warnings=tuple(f for f in self.findings if f.severity is Severity.WARNING),
        )

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
            reasons = [f"is {parent.type}"] if parent.type != "normal" else []
            reasons += [f"has {key}" for key in ("step", "approval", "after")
                        if getattr(parent, key) is not None]
            if reasons:
                self.error("bad-parent", location,
                           f"parent {state.parent!r} {' and '.join(reasons)}; a compound parent "
                           "must be a plain normal state", state.parent, name)
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
            events[name] = CompiledEvent(name, sources, check)
        return events

    def _payload_check(self, schema: Any, location: str,
                       secrets: frozenset[str] = frozenset()) -> PayloadCheck | None:
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
        secrets = frozenset(self.spec.secrets)  # a tool output's secret fields are references
        self.output_checks = {
            name: self._payload_check(tool.output, f"tools.{name}.output", secrets)
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
            inherited = [event for parent in self._ancestors(name)
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
        elif state.step is None and state.after is None and not is_compound:
            self.warning("implicit-wait", location,
                         f"state {name!r} runs no step, so it waits for an event with no "
                         "timeout; make it `type: wait` with `after:`", name)
        if state.after is not None:
            self._target_exists(state.after.target, f"{location}.after.target")
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
        return any(event in self.states[holder].on for holder in (name, *self._ancestors(name)))

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
        if step.escalate_to is not None:
            self._target_exists(step.escalate_to, f"{location}.escalate_to")
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
        if step is None:
            return None
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
            needs_approval=step.needs_approval,
            cost=step.cost,
            escalate_to=leaf_of.get(step.escalate_to or ""),
            check_output=self.output_checks.get(step.tool),
        )

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
            if approval.escalate_to is not None:
                self._target_exists(approval.escalate_to, f"{location}.escalate_to")
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
        for key in ("on_exceeded", "on_cycle"):
            target = getattr(budgets, key)
            if target is not None:
                self._target_exists(target, f"budgets.{key}")
        if self.spec.compensation_failed is not None:
            self._target_exists(self.spec.compensation_failed, "compensation_failed")

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
                if not self._target_exists(transition.target, f"{where}.target"):
                    self.unresolved.add(name)
                    continue
                guard, guard_text = self._compile_guard(transition.guard, f"{where}.guard")
                actions = tuple(
                    action for position, spec in enumerate(transition.actions)
                    if (action := self._compile_action(spec, f"{where}.actions[{position}]"))
                )
                target_leaf = leaf_of.get(transition.target)
                if target_leaf is None:
                    self.unresolved.add(name)
                    continue
                items.append(CompiledTransition(event, name, index, transition.target,
                                                target_leaf, guard, guard_text, actions))
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
                     leaf_of: Mapping[str, str | None]) -> None:
        if initial is None:
            return
        spec = self.spec
        budgets = spec.budgets
        # every declared budget target can be reached from anywhere; but only budgets that a
        # loop must exhaust count as a way to finish: cost accrues only on steps and cycles only
        # on repeated errors, so neither guarantees an exit
        reachable_targets = [leaf_of.get(t) for t in (budgets.on_exceeded, budgets.on_cycle) if t]
        bounded = any(limit is not None for limit in (budgets.transitions_max,
                                                       budgets.visits_max, budgets.deadline))
        exits = [leaf_of.get(budgets.on_exceeded)] if bounded and budgets.on_exceeded else []
        edges: dict[str, list[str]] = {}
        for leaf in leaves:
            state = states[leaf]
            if state.final:
                edges[leaf] = []
                continue
            out: list[str | None] = [t.target_leaf for ts in state.on.values() for t in ts]
            if state.after_target:
                out.append(state.after_target)
            if state.step is not None:
                if state.step.escalate_to:
                    out.append(state.step.escalate_to)
                if state.step.compensation is not None and spec.compensation_failed:
                    out.append(leaf_of.get(spec.compensation_failed))
            if state.approval is not None and state.approval.escalate_to:
                out.append(state.approval.escalate_to)
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
        for name in self.states:
            descendants = [leaf for leaf in leaves
                           if leaf == name or name in states[leaf].ancestors]
            if not any(leaf in reachable for leaf in descendants):
                self.error("unreachable-state", f"states.{name}",
                           f"state {name!r} cannot be reached from the initial state "
                           f"{initial!r}", name)
        finals = {leaf for leaf in leaves if states[leaf].final}
        if self.spec.reactive:
            return  # it ends by design in no final state: nothing to reach
        if not finals & reachable:
            self.error("no-final", "states",
                       f"no final state can be reached from the initial state {initial!r} "
                       "(a workflow that runs until it is stopped says `reactive: true`)",
                       initial)
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
                       f"{', '.join(stuck)} forever)", leaf)


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
                expression = compile_expression(value[1:])
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


def _references_at(payload: Mapping[str, Any], secrets: frozenset[str]) -> frozenset[str]:
    """Gives the secret fields of `payload` that hold a vault reference."""
    return frozenset(key for key in secrets if is_reference(payload.get(key)))


def _json_schema_check(validator: Any, secrets: frozenset[str] = frozenset()) -> PayloadCheck:
    fast = compile_fast_check(validator.schema)

    def check(payload: Mapping[str, Any]) -> str | None:
        instance = payload if isinstance(payload, dict) else dict(payload)
        if fast is not None and fast(instance):
            return None  # the fast subset accepts only what jsonschema accepts
        try:
            errors = validator.iter_errors(instance)
            held = _references_at(instance, secrets) if secrets else frozenset()
            if held:  # checked in clear before they became references
                errors = (e for e in errors if not (e.absolute_path
                                                    and e.absolute_path[0] in held))
            error = jsonschema.exceptions.best_match(errors)
        except Exception as exc:  # a schema the checks let through must not crash decide
            return f"the schema could not be applied: {type(exc).__name__}: {exc}"
        if error is None:
            return None
        path = ".".join(str(p) for p in error.absolute_path) or "payload"
        return f"{path}: {error.message}"

    return check


def _model_check(model: type[BaseModel], secrets: frozenset[str] = frozenset()) -> PayloadCheck:
    def check(payload: Mapping[str, Any]) -> str | None:
        try:
            model.model_validate(dict(payload))
        except ValidationError as exc:
            held = _references_at(payload, secrets) if secrets else frozenset()
            found = [e for e in exc.errors() if not (e["loc"] and e["loc"][0] in held)]
            if not found:  # only secret fields, checked in clear before they were references
                return None
            first = found[0]
            path = ".".join(str(p) for p in first["loc"]) or "payload"
            return f"{path}: {first['msg']}"
        return None

    return check
