"""Lint-clean means runnable (issue 36): drawn definitions, each given a context value or an
`untested:` entry of the kinds users write (a date YAML read unquoted, a set, bytes, NaN, a
fault kind misspelt, an entry with no reason), are refused by `fsmharness lint` exactly when a
campaign refuses them. Lint passed six such shapes that `fuzz` then refused or stopped on."""

from __future__ import annotations

import datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import FuzzOptions, fuzz
from harness.checks.adequacy import untested_findings
from harness.errors import HarnessError
from harness.strategies import workflow_specs
from reference_machine import DefinitionError, Severity, lint, load_definition

VALUES = st.one_of(
    st.dates(min_value=datetime.date(2000, 1, 1)), st.frozensets(st.integers(), max_size=2),
    st.binary(max_size=3), st.floats(allow_nan=True, allow_infinity=True), st.integers(),
    st.text(max_size=5), st.none(), st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.booleans(), max_size=2))
CODES = st.sampled_from(["fault:crash", "fault:tool_transient", "fault:no_such_kind", "fault:*",
                         "crash_point:*", "moves:*", "bogus", "moves:", "fault:duplicate_evnt"])
REASONS = st.sampled_from(["acceptable here", "", "  "])


@st.composite
def perturbed(draw: st.DrawFn) -> dict[str, Any]:
    """A drawn valid definition with one thing a user might write added to it."""
    spec = dict(draw(workflow_specs()))
    if draw(st.booleans()):
        spec["context"] = {**spec.get("context", {}), "given": draw(VALUES)}
    else:
        spec["untested"] = {draw(CODES): draw(REASONS)}
    return spec


def _lint_errors(spec: dict[str, Any]) -> list[str]:
    """What `fsmharness lint` says is an error: the loader's checks, then the campaign's."""
    errors = [f.render() for f in lint(spec) if f.severity is Severity.ERROR]
    if not errors:
        errors = [f.render() for f in untested_findings(load_definition(spec))]
    return errors


@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(perturbed())
def test_lint_refuses_exactly_what_a_campaign_refuses(spec: dict[str, Any]) -> None:
    errors = _lint_errors(spec)
    try:
        report = fuzz(spec, FuzzOptions(runs=2, replay_dir=None, isolate=False, shrink=False))
    except (DefinitionError, HarnessError) as refused:
        assert errors, f"lint passed what fuzz refused: {refused}"
        return
    assert not errors, f"lint refused what fuzz ran: {errors}"
    assert report.runs >= 2  # and the runs aimed at what it left untested


def test_a_tuple_in_a_python_context_is_a_list() -> None:
    """A definition built in Python may hold a tuple: JSON's list, not a refusal."""
    spec = {"name": "t", "context": {"pair": (1, 2)}, "states": {
        "idle": {"initial": True, "on": {"go": "done"}},
        "done": {"type": "final", "outcome": "success"}},
        "events": {"go": {"sources": ["human"]}}}
    assert load_definition(spec).initial_context["pair"] in ((1, 2), [1, 2])
