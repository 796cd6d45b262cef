"""The definition compiler: from a `WorkflowSpec` to an immutable, checked `WorkflowDefinition`.

`DefinitionCompiler` (in `compiler`) runs its phases in order; the checks are grouped by family,
one module each: the hierarchy and its targets (`hierarchy`), each state's shape and statechart
constructs (`states`), transitions (`transitions`), expressions, guards and actions
(`expressions`), events and payload schemas (`events`), steps, tools and budgets (`steps`),
approvals (`approvals`), context reads (`reads`), reachability, cycles and liveness (`liveness`),
and what a definition acknowledges (`acknowledged`). They share one `Compilation` (`context`) and
report through its `FindingSink`. The frozen records they compile to are in `compiled`.
"""

from reference_machine._definition.acknowledged import UNTESTED_KINDS
from reference_machine._definition.compiled import (
    Action,
    Budgets,
    CompiledApproval,
    CompiledCompensation,
    CompiledEvent,
    CompiledState,
    CompiledStep,
    CompiledTransition,
    Guard,
    OpenMove,
    PayloadCheck,
    Transitions,
    WorkflowDefinition,
)
from reference_machine._definition.compiler import (
    DefinitionCompiler,
    check_spec,
    compile_definition,
    lint_spec,
)
from reference_machine._definition.events import RESERVED_PREFIXES
from reference_machine._definition.liveness import reachable_from

__all__ = [
    "RESERVED_PREFIXES",
    "UNTESTED_KINDS",
    "Action",
    "Budgets",
    "CompiledApproval",
    "CompiledCompensation",
    "CompiledEvent",
    "CompiledState",
    "CompiledStep",
    "CompiledTransition",
    "DefinitionCompiler",
    "Guard",
    "OpenMove",
    "PayloadCheck",
    "Transitions",
    "WorkflowDefinition",
    "check_spec",
    "compile_definition",
    "lint_spec",
    "reachable_from",
]
