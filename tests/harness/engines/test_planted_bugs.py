"""The planted-bug suite: eight machines made from the reference runtime with one classic bug
each. Every engine must catch every one (the native fuzzer with a shrunk trace of at most 12
steps and a replay file that reproduces it, the Hypothesis machine, the exhaustive search),
and the correct reference runtime must pass the same campaigns clean.

`python tools/measure_planted.py` measures how fast over ten campaign seeds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test
from planted import PLANTED, WORKFLOW

from harness import ExploreOptions, FuzzOptions, ReferenceMachine, SimOptions, explore, fuzz
from harness import replay as replay_file
from harness.stateful import InvariantViolated, workflow_machine

TRACE_MAX = 12
#: Settings for the Hypothesis campaigns here: derandomized, so CI sees the same examples. The
#: examples a bug takes to find are heavy-tailed: the forged approval took 14 to 752 over eight
#: seeds, so the budget sits above that tail (a found bug stops the campaign early).
HYPOTHESIS = settings(max_examples=1_000, stateful_step_count=20, database=None, deadline=None,
                      derandomize=True, phases=[Phase.generate, Phase.shrink],
                      suppress_health_check=list(HealthCheck), print_blob=False)


@pytest.mark.parametrize("name", PLANTED)
def test_the_fuzzer_finds_each_bug_and_shrinks_it(name: str, tmp_path: Path) -> None:
    """The first failing run breaks the bug's invariant, shrinks to at most 12 steps, and its
    replay file reproduces the same violation at the same step."""
    machine, rule = PLANTED[name]
    report = fuzz(WORKFLOW, FuzzOptions(runs=5_000, replay_dir=tmp_path), machine=machine)
    assert not report.held
    (failure,) = report.failures
    assert failure.rule == rule, [str(v) for v in failure.violations]
    example = failure.counterexample
    assert example is not None and failure.replay_file is not None
    assert 1 <= example.steps <= TRACE_MAX, example.trace()
    assert example.steps <= example.original_steps
    saved = json.loads(failure.replay_file.read_text())
    assert saved["rule"] == rule and saved["machine"] == f"planted:{machine.__qualname__}"
    assert saved["replay"] == f"fsmharness replay {failure.replay_file}"
    outcome = replay_file(failure.replay_file)  # the machine is imported from the file
    assert outcome.reproduced
    assert outcome.violation is not None and outcome.violation.step == example.steps
    assert outcome.violation.message == example.violation.message


def test_the_reference_passes_the_same_campaign(tmp_path: Path) -> None:
    """1,500 runs of the same workflow, swarm mode, every fault: the reference holds."""
    report = fuzz(WORKFLOW, FuzzOptions(runs=1_500, replay_dir=tmp_path))
    assert report.held, report.summary()["failures"]
    assert report.runs == 1_500 and report.steps > 15_000
    assert not list(tmp_path.iterdir())  # nothing to replay


@pytest.mark.parametrize("name", PLANTED)
def test_the_hypothesis_machine_catches_each_bug(name: str, tmp_path: Path) -> None:
    """Hypothesis, driving the same simulator, finds each bug and its replay file replays it
    without Hypothesis."""
    machine, rule = PLANTED[name]
    found = workflow_machine(WORKFLOW, machine=machine, options=SimOptions(executions=1),
                             replay_dir=tmp_path)
    with pytest.raises(InvariantViolated) as caught:
        run_state_machine_as_test(found, settings=HYPOTHESIS)
    assert caught.value.violations[0].rule == rule
    assert caught.value.replay_file is not None
    outcome = replay_file(caught.value.replay_file)
    assert outcome.reproduced and outcome.violation is not None
    assert outcome.violation.rule == rule


def test_the_hypothesis_machine_passes_the_reference() -> None:
    """The same Hypothesis campaign on the reference runtime finds nothing."""
    run_state_machine_as_test(workflow_machine(WORKFLOW, options=SimOptions(executions=1)),
                              settings=HYPOTHESIS)


@pytest.mark.parametrize(("name", "depth"), [
    ("key_per_attempt", 5), ("no_duplicate_check", 2), ("final_accepts_events", 4),
    ("dispatch_before_commit", 2), ("forward_compensation", 7), ("approval_from_agent", 2),
    ("late_timer_applied", 4), ("unbounded_retry", 6)])
def test_exhaustive_search_finds_each_bug_at_its_shortest(name: str, depth: int) -> None:
    """Breadth-first, the first violation has the fewest steps any schedule needs."""
    machine, rule = PLANTED[name]
    report = explore(WORKFLOW, ExploreOptions(depth=8, faults_max=1), machine=machine)
    assert not report.held
    example = report.counterexample
    assert example is not None and example.violation.rule == rule
    assert example.steps == depth, example.trace()
    assert report.summary().startswith(f"violated at depth {depth}: {rule}")


def test_exhaustive_search_proves_the_reference_within_a_bound() -> None:
    """Every schedule of up to 5 steps, with one fault: every invariant holds."""
    report = explore(WORKFLOW, ExploreOptions(depth=5, faults_max=1), machine=ReferenceMachine)
    assert report.held and report.complete
    assert report.summary() == f"held within bound 5 ({report.states} distinct states)"
    assert report.states > 500
