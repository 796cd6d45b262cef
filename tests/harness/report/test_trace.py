"""A trace as a person reads it: every step numbered without gaps, a step that changed nothing
saying so in one word, a start context's lists told by length, never by value."""

from __future__ import annotations

from harness.report.trace import describe_steps
from harness.sim.history import Healed, Started, TimerFired


def test_steps_run_without_gaps_and_an_empty_one_says_nothing() -> None:
    """Steps 2 and 3 left no record anyone reads: they are still printed, as `nothing`, so
    step numbers match a replay's and a schedule's."""
    history = [Started(1, 0, "x1", {}), TimerFired(4, 5_000, 5_000, 5_000, 0)]
    assert describe_steps(history) == [
        "step 1 (t=0s): start x1",
        "step 2 (t=0s): nothing",
        "step 3 (t=0s): nothing",
        "step 4 (t=5s): clock to 5s, timers due fire"]


def test_the_last_step_asked_for_ends_the_trace() -> None:
    history = [Started(1, 0, "x1", {}), Healed(3, 0), TimerFired(5, 1_000, 1_000, 1_000, 0)]
    assert describe_steps(history, last=3) == [
        "step 1 (t=0s): start x1", "step 2 (t=0s): nothing",
        "step 3 (t=0s): faults healed (liveness phase)"]
    assert describe_steps(history, last=0) == []


def test_a_start_context_tells_its_lists_by_length_only() -> None:
    """A shrunk run may start with fewer items than the definition's: the trace says how
    many, and no value (a context may hold a secret)."""
    history = [Started(1, 0, "x1", {"attachments": [{"id": "a"}], "tags": ["p", "q"],
                                    "api_key": "sk-live-123"})]
    (line,) = describe_steps(history)
    assert line == "step 1 (t=0s): start x1 (attachments: 1 item, tags: 2 items)"
    assert "sk-live" not in line
