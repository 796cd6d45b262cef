"""The definition compiler: from a `WorkflowSpec` to an immutable, checked `WorkflowDefinition`.

Every check runs once here, at load: structure is pydantic's job, consistency is the checks'.
Each finding names its location (`states.awaiting_approval.after`) and the ids at fault. The
compiled definition precomputes what `decide` needs (transitions per leaf state with the parents'
merged in, targets resolved to leaf states, guards compiled) so the hot path only looks things up.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from reference_machine._definition.acknowledged import acknowledge, check_untested
from reference_machine._definition.approvals import (
    check_approval_entries,
    check_approvals,
    compile_approval,
)
from reference_machine._definition.compiled import (
    Budgets,
    CompiledEvent,
    CompiledState,
    CompiledTransition,
    Transitions,
    WorkflowDefinition,
)
from reference_machine._definition.context import Compilation
from reference_machine._definition.events import compile_events
from reference_machine._definition.hierarchy import check_hierarchy, initial_state, resolve_leaf
from reference_machine._definition.liveness import check_eventless_cycles, check_graph
from reference_machine._definition.reads import check_context_reads, check_secrets, words_read
from reference_machine._definition.states import check_state, compile_chart
from reference_machine._definition.steps import check_budgets, check_tools, compile_step
from reference_machine._definition.transitions import compile_transitions
from reference_machine._spec import WorkflowSpec
from reference_machine.errors import DefinitionError
from reference_machine.findings import Acknowledged, Finding, FindingSink, LintReport, Severity

__all__ = ["DefinitionCompiler", "check_spec", "compile_definition", "lint_spec"]


class DefinitionCompiler:
    """Compiles one spec into a `WorkflowDefinition`, checking it on the way (see `build`).

    The checks share `compilation`: the spec, the sink their findings go to, and the hierarchy
    read first. What the phases compile on the way is kept here, for the phases after them.
    """

    def __init__(
        self,
        spec: WorkflowSpec,
        functions: Mapping[str, Callable[..., Any]] | None = None,
        lines: Mapping[str, int] | None = None,
        imported: Sequence[Finding] = (),
    ) -> None:
        #: the warnings an importer gave about the document this spec was made from
        self.imported = tuple(imported)
        self.compilation = Compilation(spec, functions, FindingSink(lines), words_read(spec))
        self.events: dict[str, CompiledEvent] = {}
        #: the top level's initial state (None: an initial-count error says why)
        self.initial: str | None = None
        #: each compound state's initial child (not a parallel state's: it starts every region)
        self.initial_child: dict[str, str | None] = {}
        #: the leaf state each state resolves to; a parallel or map state resolves to itself
        self.leaf_of: dict[str, str | None] = {}
        #: the transitions each state declares itself, by event
        self.own: dict[str, dict[str, Transitions]] = {}
        #: each state's statechart fields (entry, exit, always, done, regions, ...)
        self.charted: dict[str, dict[str, Any]] = {}
        self.compiled_states: dict[str, CompiledState] = {}
        #: the gaps the definition accepts a campaign leaves untested, with their reasons
        self.untested: dict[str, str] = {}

    @property
    def findings(self) -> list[Finding]:
        """Gives the findings so far, in the order found (acknowledged warnings left out)."""
        return self.compilation.sink.findings

    @property
    def acknowledged(self) -> list[Acknowledged]:
        """Gives the warnings the definition acknowledges (`lint: ignore:`), with reasons."""
        return self.compilation.acknowledged

    def build(self, source: str = "<definition>") -> WorkflowDefinition | None:
        """Gives the checked definition, or None when a check found an error (in `findings`)."""
        self._read_hierarchy()  # parents, children, each state's scope
        self._compile_events()  # and each tool's output check
        self._resolve_initial_states()  # and the leaf each state resolves to
        self._compile_transitions()  # and check each state's shape
        self._compile_statecharts()  # entry, exit, always, done, history, regions, map
        self._check_definition()  # eventless cycles, budgets, approvals, reads, secrets
        self._compile_states()
        self._check_liveness()  # per scope: every state reached, a final state reachable
        self._check_approval_gates()  # a gated step entered only by its approval's grant
        self.untested = check_untested(self.compilation)
        acknowledge(self.compilation)  # last: every warning it may acknowledge is in
        if any(f.severity is Severity.ERROR for f in self.findings) or self.initial is None:
            return None
        return self._definition(source, self.initial)

    # -- phases, in the order `build` runs them ---------------------------------------------

    def _read_hierarchy(self) -> None:
        ctx = self.compilation
        ctx.children = check_hierarchy(ctx)
        ctx.scope_of = {name: ctx.scope(name) for name in ctx.states}

    def _compile_events(self) -> None:
        self.events = compile_events(self.compilation)
        check_tools(self.compilation)

    def _resolve_initial_states(self) -> None:
        ctx = self.compilation
        children = ctx.children
        self.initial = initial_state(ctx, None, children, "states")
        self.initial_child = {
            parent: initial_state(ctx, parent, children, f"states.{parent}")
            for parent in children if ctx.states[parent].type != "parallel"
        }
        # a parallel or map state is where its execution rests: it resolves to itself
        descend = {parent: child for parent, child in self.initial_child.items()
                   if ctx.states[parent].type != "map"}
        self.leaf_of = {name: resolve_leaf(name, descend) for name in ctx.states}

    def _compile_transitions(self) -> None:
        ctx = self.compilation
        for name, state in ctx.states.items():
            self.own[name] = compile_transitions(ctx, name, state, self.events, self.leaf_of)
            check_state(ctx, name, state, ctx.children, self.leaf_of)

    def _compile_statecharts(self) -> None:
        ctx = self.compilation
        self.charted = {
            name: compile_chart(ctx, name, state, ctx.children, self.initial_child, self.leaf_of)
            for name, state in ctx.states.items()
        }

    def _check_definition(self) -> None:
        ctx = self.compilation
        check_eventless_cycles(ctx, self.charted)
        check_budgets(ctx)
        check_approvals(ctx)
        check_context_reads(ctx)
        check_secrets(ctx)

    def _compile_states(self) -> None:
        ctx, own, charted, leaf_of = self.compilation, self.own, self.charted, self.leaf_of
        for name, state in ctx.states.items():
            ancestors = ctx.ancestors(name)
            merged: dict[str, tuple[CompiledTransition, ...]] = {}
            for holder in ctx.chain(name):  # the state's own first, then its parents'
                for event, transitions in own[holder].items():
                    merged[event] = merged.get(event, ()) + transitions
            step = compile_step(ctx, name, state.step, leaf_of)
            approval = compile_approval(name, state, leaf_of)
            chart = charted[name]
            self.compiled_states[name] = CompiledState(
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

    def _check_liveness(self) -> None:
        ctx, compiled_states, leaf_of = self.compilation, self.compiled_states, self.leaf_of
        if self.initial is not None:
            check_graph(ctx, leaf_of[self.initial], ctx.leaves(None), compiled_states, leaf_of)
        for root in ctx.scope_roots():
            regions = compiled_states[root].regions
            start = (regions[0][1] if regions else None) if ctx.states[root].type == "map" \
                else leaf_of[root]
            if start is not None:
                check_graph(ctx, start, ctx.leaves(root), compiled_states, leaf_of, root)

    def _check_approval_gates(self) -> None:
        check_approval_entries(self.compilation, self.own, self.charted, self.leaf_of,
                               self.initial)

    def _definition(self, source: str, initial: str) -> WorkflowDefinition:
        """Gives the definition, made once and whole: each scope's own definition is made
        first, the innermost first, so that each holds the scopes inside it when made."""
        ctx, compiled_states, leaf_of = self.compilation, self.compiled_states, self.leaf_of
        spec = ctx.spec
        initial_leaf = leaf_of[initial]
        budgets = spec.budgets
        assert initial_leaf is not None
        # what a region's or map item's definition shares with the whole one
        shared: dict[str, Any] = {
            "name": spec.name,
            "version": spec.version,
            "spec": spec,
            "states": compiled_states,
            "events": self.events,
            "tools": MappingProxyType(dict(spec.tools)),
            "initial_context": MappingProxyType(dict(spec.context)),
            "secrets": frozenset(spec.secrets),
            "source": source,
            "read": ctx.read,
            "untested": MappingProxyType(self.untested),
            "scoped": any(s.entry or s.exit or s.history for s in compiled_states.values()),
        }
        roots = ctx.scope_roots()
        scopes: dict[str, WorkflowDefinition] = {}
        for root in sorted(roots, key=lambda root: -len(ctx.ancestors(root))):
            compiled = compiled_states[root]
            start = compiled.regions[0][1] if compiled.kind == "map" else leaf_of[root]
            assert start is not None
            inner = {other: scopes[other] for other in roots if root in ctx.ancestors(other)}
            scopes[root] = WorkflowDefinition(
                **shared, initial=start, budgets=Budgets(), compensation_failed=None,
                warnings=(), acknowledged=(), scopes=MappingProxyType(inner), scope=root)
        return WorkflowDefinition(
            **shared,
            initial=initial_leaf,
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
            warnings=(*self.imported,
                      *(f for f in self.findings if f.severity is Severity.WARNING)),
            acknowledged=tuple(self.acknowledged),
            scopes=MappingProxyType({root: scopes[root] for root in roots}),
        )


def compile_definition(
    spec: WorkflowSpec,
    *,
    functions: Mapping[str, Callable[..., Any]] | None = None,
    source: str = "<definition>",
    lines: Mapping[str, int] | None = None,
    imported: Sequence[Finding] = (),
) -> WorkflowDefinition:
    """Gives the checked definition, or raises `DefinitionError` listing every error found.

    `imported` are the warnings of the importer that made `spec` from another format: the
    definition's warnings list them first."""
    compiler = DefinitionCompiler(spec, functions, lines or {}, imported)
    definition = compiler.build(source)
    errors = [f for f in _by_line(compiler.findings) if f.severity is Severity.ERROR]
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
    compiler = DefinitionCompiler(spec, functions, lines or {})
    compiler.build("<lint>")
    return LintReport(tuple(_by_line(compiler.findings)),
                      tuple(sorted(compiler.acknowledged,
                                   key=lambda a: (a.finding.line is None, a.finding.line or 0))))


def _by_line(findings: list[Finding]) -> list[Finding]:
    """Gives findings in file order; those without a line keep their order, last."""
    return sorted(findings, key=lambda f: (f.line is None, f.line or 0))
