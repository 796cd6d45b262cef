"""Steps, tools and budgets: a step's tool, retry policy, compensation and escalation, each
tool's output check, the compiled step, and the budgets' bounds and targets."""

from __future__ import annotations

from collections.abc import Mapping

from reference_machine._definition.compiled import CompiledCompensation, CompiledStep, Guard
from reference_machine._definition.context import Compilation
from reference_machine._definition.events import payload_check
from reference_machine._definition.expressions import compile_guard, compile_template
from reference_machine._definition.hierarchy import same_scope, target_exists
from reference_machine._expr import ExpressionSyntaxError, compile_expression
from reference_machine._spec import Category, StepSpec, ToolSpec
from reference_machine.findings import did_you_mean
from reference_machine.secrecy import named_secret

__all__ = ["check_budgets", "check_step", "check_tools", "compile_step", "declared_tool"]


def check_tools(ctx: Compilation) -> None:
    """Compiles each tool's output check into `ctx.output_checks`."""
    secrets = frozenset(ctx.spec.secrets)
    read = ctx.read

    def hidden(key: str) -> bool:  # a tool output's secret fields are references
        return key in secrets or (read is not None and key not in read
                                  and named_secret(key))

    ctx.output_checks = {
        name: payload_check(ctx, tool.output, f"tools.{name}.output", hidden)
        for name, tool in ctx.spec.tools.items()
    }


def declared_tool(ctx: Compilation, name: str, location: str) -> ToolSpec | None:
    """Gives the tool declared as `name` (None, and an error, when none is)."""
    tool = ctx.spec.tools.get(name)
    if tool is None:
        hint = did_you_mean(name, ctx.spec.tools)
        declared = ", ".join(sorted(ctx.spec.tools)) or "none"
        ctx.sink.error("unknown-tool", location,
                       f"tool {name!r} is not declared under `tools:`{hint} (declared: {declared})",
                       name)
    return tool


def check_step(ctx: Compilation, name: str, step: StepSpec,
               leaf_of: Mapping[str, str | None]) -> None:
    """Checks the step of state `name` (tool, retry, timeout, cost, compensation, escalation,
    approval, handlers) and compiles its inputs into `ctx.templates`."""
    location = f"states.{name}.step"
    tool = declared_tool(ctx, step.tool, f"{location}.tool")
    retry = step.retry
    rloc = f"{location}.retry"
    if retry.attempts_max < 1:
        ctx.sink.error("retry-bounds", f"{rloc}.attempts_max",
                       f"attempts_max must be at least 1, got {retry.attempts_max}", name)
    elif retry.attempts_max > 100:
        ctx.sink.error("retry-bounds", f"{rloc}.attempts_max",
                       f"attempts_max of {retry.attempts_max} is over the sane bound of 100", name)
    if retry.delay_initial > retry.delay_max:
        ctx.sink.error("retry-bounds", f"{rloc}.delay_initial",
                       f"delay_initial ({retry.delay_initial} ms) exceeds delay_max "
                       f"({retry.delay_max} ms)", name)
    if retry.multiplier < 1:
        ctx.sink.error("retry-bounds", f"{rloc}.multiplier",
                       f"multiplier must be at least 1, got {retry.multiplier}", name)
    if not 0 <= retry.jitter <= 1:
        ctx.sink.error("retry-bounds", f"{rloc}.jitter",
                       f"jitter is a fraction from 0 to 1, got {retry.jitter}", name)
    if Category.PERMANENT in retry.retry_on:
        ctx.sink.error("retry-bounds", f"{rloc}.retry_on",
                       "a permanent failure must not be retried", name)
    if tool is not None and not (tool.idempotency_keys or tool.repeatable) and (
            "retry_on" in retry.model_fields_set and Category.TIMEOUT in retry.retry_on):
        # by default a timeout of such a tool is ambiguous and never retried; saying
        # otherwise explicitly is a mistake worth stopping
        ctx.sink.error("blind-retry", f"{rloc}.retry_on",
                       f"tool {step.tool!r} neither honours idempotency keys nor is repeatable, "
                       "so retrying a timeout may apply it twice; drop `timeout` from retry_on "
                       "(an ambiguous failure then goes to escalate_to, or step.failed)",
                       name, step.tool)
    if step.timeout is not None and step.timeout <= 0:
        ctx.sink.error("step-timeout", f"{location}.timeout", "a step timeout must be positive",
                       name)
    if step.cost < 0:
        ctx.sink.error("step-cost", f"{location}.cost", "a step's cost may not be negative", name)
    if step.compensation is not None:
        declared_tool(ctx, step.compensation.tool, f"{location}.compensation.tool")
        if step.compensation.attempts_max < 1:
            ctx.sink.error("retry-bounds", f"{location}.compensation.attempts_max",
                           "compensation attempts_max must be at least 1", name)
        if ctx.spec.compensation_failed is None:
            ctx.sink.error("compensation-failed-missing", "compensation_failed",
                           f"state {name!r} declares a compensation, so the definition needs "
                           "`compensation_failed: <state>` asking a human when one fails", name)
    if step.escalate_to is not None and target_exists(ctx, step.escalate_to,
                                                      f"{location}.escalate_to"):
        same_scope(ctx, name, step.escalate_to, f"{location}.escalate_to")
    scope = ctx.scope_of.get(name)
    if scope is not None and retry.on_exhausted == "compensate":
        ctx.sink.error("compensate-in-scope", f"{rloc}.on_exhausted",
                       f"step {name!r} is in {ctx.scope_word(scope)} {scope!r}, whose failure "
                       "the parallel or map state undoes for every region at once; end the "
                       "failure in a final state (on_exhausted: fail)", name)
    if isinstance(step.needs_approval, str):
        compile_guard(ctx, step.needs_approval, f"{location}.needs_approval")
    if retry.on_exhausted == "escalate" and step.escalate_to is None:
        ctx.sink.error("escalate-target", f"{location}.escalate_to",
                       f"on_exhausted is escalate, so state {name!r} needs `escalate_to`", name)
    if not ctx.handles(name, "step.succeeded"):
        ctx.sink.error("unhandled-step", f"states.{name}.on",
                       f"state {name!r} runs a step but has no `step.succeeded` transition", name)
    if retry.on_exhausted != "escalate" and not ctx.handles(name, "step.failed"):
        ctx.sink.error("unhandled-step", f"states.{name}.on",
                       f"state {name!r} runs a step that can fail (on_exhausted: "
                       f"{retry.on_exhausted}) but has no `step.failed` transition", name)
    if retry.on_exhausted == "escalate" and "step.failed" in ctx.states[name].on:
        ctx.sink.warning("escalate-shadows", f"states.{name}.on.step.failed",
                         f"on_exhausted is escalate, so every failure of step {name!r} goes to "
                         f"escalate_to {step.escalate_to!r}: this `step.failed` transition is "
                         "never taken (drop it, or set on_exhausted: fail)", name)
    if not step.reversible and not step.needs_approval and step.compensation is None:
        ctx.sink.warning("irreversible-unguarded", location,
                         f"step {name!r} is irreversible with neither approval nor compensation",
                         name, step.tool)
    ctx.templates[f"{location}.input"] = compile_template(
        ctx, step.input, f"{location}.input")
    if step.compensation is not None:
        where = f"{location}.compensation.input"
        ctx.templates[where] = compile_template(ctx, step.compensation.input, where)


def compile_step(ctx: Compilation, name: str, step: StepSpec | None,
                 leaf_of: Mapping[str, str | None]) -> CompiledStep | None:
    """Gives the compiled step of state `name` (None when it runs none or was not checked)."""
    if step is None or f"states.{name}.step.input" not in ctx.templates:
        return None  # not checked (a final state may not run one): an error says why
    tool = ctx.spec.tools.get(step.tool, ToolSpec())
    compensation = None
    if step.compensation is not None:
        compensation_tool = ctx.spec.tools.get(step.compensation.tool, ToolSpec())
        compensation = CompiledCompensation(
            step.compensation.tool,
            ctx.templates[f"states.{name}.step.compensation.input"],
            step.compensation.attempts_max,
            compensation_tool.idempotency_keys or compensation_tool.repeatable,
        )
    retry = step.retry
    return CompiledStep(
        state=name,
        tool=step.tool,
        input=ctx.templates[f"states.{name}.step.input"],
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
        check_output=ctx.output_checks.get(step.tool),
        approval_when=_approval_condition(step),
        approval_text=step.needs_approval if isinstance(step.needs_approval, str) else "",
    )


def _approval_condition(step: StepSpec) -> Guard | None:
    if not isinstance(step.needs_approval, str):
        return None
    try:
        return compile_expression(step.needs_approval)
    except ExpressionSyntaxError:
        return None  # reported by _check_step


def check_budgets(ctx: Compilation) -> None:
    """Checks the budgets' bounds and that their targets (and `compensation_failed`) are
    states at the top level."""
    budgets = ctx.spec.budgets
    limits = ("transitions_max", "visits_max", "deadline", "cost_max")
    for key in limits:
        value = getattr(budgets, key)
        if value is not None and value <= 0:
            ctx.sink.error("budget-bounds", f"budgets.{key}", f"{key} must be positive, got "
                           f"{value}")
    if any(getattr(budgets, key) is not None for key in limits) and budgets.on_exceeded is None:
        ctx.sink.error("budget-target", "budgets.on_exceeded",
                       "a budget is set, so `on_exceeded: <state>` must say where an exceeded "
                       "run goes")
    if budgets.cycle_threshold is not None:
        if budgets.cycle_threshold < 2:
            ctx.sink.error("budget-bounds", "budgets.cycle_threshold",
                           f"cycle_threshold must be at least 2, got {budgets.cycle_threshold}")
        if budgets.on_cycle is None and budgets.on_exceeded is None:
            ctx.sink.error("budget-target", "budgets.on_cycle",
                           "cycle_threshold is set, so `on_cycle` (or `on_exceeded`) must name a "
                           "state")
    for key, target in (("budgets.on_exceeded", budgets.on_exceeded),
                        ("budgets.on_cycle", budgets.on_cycle),
                        ("compensation_failed", ctx.spec.compensation_failed)):
        if target is not None and target_exists(ctx, target, key) and ctx.scope_of.get(
                target) is not None:
            ctx.sink.error("leaves-scope", key,
                           f"{key} names {target!r}, which is inside "
                           f"{ctx.scope_word(ctx.scope_of[target] or '')} "
                           f"{ctx.scope_of[target]!r}; it must be a state at the top level",
                           target)
