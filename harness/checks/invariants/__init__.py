"""Invariant checkers: pure functions over (definition, history) that give violations.

Each checker reads the typed records of one run, never text, and trusts the ground truth over the
machine's word: side effects come from the world's ledger (`Applied`), where an execution came
from is the state of its previous commit as the store wrote it (`Committed.from_state`), and
guards and approval hashes are evaluated again here, with the definition, on what was recorded.

Some checks need what only a machine that offers `watch()` records (its commits, with contexts
and commanded effects); on another machine's history they check what they can from deliveries,
observations and the ledger, or nothing. Some read the end of a run, the others every prefix
(`registry`). Users add their own with `@invariant`: over the whole history, or per step.

The modules: `registry` (`Invariant`, `INVARIANTS`, `check`, `@invariant`); the analyses the
checkers share, `analysis` (owners, the chart view, legal tables and reachability, the saga,
approval hashes) and `judgements` (guards evaluated again); and one module per family of
built-in invariants: `effects`, `transitions`, `guards`, `approvals`, `bounds` (retries,
budgets, eventless runaways), `compensation`, `replay` (durability: nothing lost, replays,
delivery once, versions), `regions` (joins and regions) and `liveness`. `BUILTIN` below is the
one place the order of the built-in invariants is set: the order they are registered, checked
and reported in.
"""

from harness.checks.invariants import (
    approvals,
    bounds,
    compensation,
    effects,
    guards,
    liveness,
    regions,
    replay,
    transitions,
)
from harness.checks.invariants.analysis import (
    ALWAYS,
    COMPENSATED,
    DONE,
    INTERNAL,
    Chart,
    chart_of,
    legal_table,
    plain_table,
    states_entered,
)
from harness.checks.invariants.judgements import guard_outcomes
from harness.checks.invariants.registry import (
    INVARIANTS,
    Invariant,
    StepView,
    Violation,
    check,
    invariant,
    invariants,
    per_definition,
    register_builtins,
)

__all__ = [
    "ALWAYS",
    "BUILTIN",
    "COMPENSATED",
    "DONE",
    "INTERNAL",
    "INVARIANTS",
    "Chart",
    "Invariant",
    "StepView",
    "Violation",
    "chart_of",
    "check",
    "guard_outcomes",
    "invariant",
    "invariants",
    "legal_table",
    "per_definition",
    "plain_table",
    "states_entered",
]

BUILTIN = register_builtins((
    effects.no_duplicate_effect,
    effects.persist_before_effect,
    transitions.terminal_stays_terminal,
    transitions.legal_transitions,
    guards.guards_held,
    approvals.approval_genuine,
    approvals.approved_effects,
    bounds.retries_within_bounds,
    bounds.budgets_within_bounds,
    compensation.compensation_order,
    compensation.compensation_complete,
    replay.nothing_lost,
    replay.replay_matches,
    replay.delivered_once,
    replay.versions_increase,
    regions.join_after_regions,
    regions.map_results_per_item,
    regions.no_region_effect_after_leaving,
    regions.region_keys_distinct,
    bounds.no_eventless_runaway,
    liveness.no_stuck_execution,
    liveness.machine_ok,
))
"""The names of the built-in invariants, in the order they are checked."""
