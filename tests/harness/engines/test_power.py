"""Power at the defaults, and counterexamples read in seconds (issue 35).

Each bundled naive scenario fails within the default run count in at least 19 of 20 campaigns,
from the command line's seeds and from the seeds the pytest plugin derives from test ids
alike; its failure shrinks to at most ten steps, of one execution where one suffices, and the
replay file runs exactly what is printed. `tools/measure_power.py` gives the table
the fuzzing page shows."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from harness import ExploreOptions, FuzzOptions, SimOptions, explore, fuzz, replay
from harness.bench.hunt import NAIVE_RULES, SEED_STRIDE
from harness.engines.fuzz import RUNS_DEFAULT
from harness.pytest_plugin import FsmSettings
from harness.sim.machine import ReferenceMachine
from reference_machine import load_definition
from scenarios.calendar_world import NaiveSharedCalendar

ROOT = Path(__file__).resolve().parents[3]
NAIVE = {name: (load_definition(ROOT / "scenarios" / "naive" / f"{name}.yaml"),
                ReferenceMachine, rule) for name, rule in NAIVE_RULES.items()}
NAIVE["calendar_book_without_hold"] = (NaiveSharedCalendar.definition, NaiveSharedCalendar,
                                       "no_slot_committed_twice")
#: The shortest failure each can have, where it is more than ten steps or one execution: the
#: pull request opened again needs its whole path twice (start, the issue, plan, patch, tests,
#: the request whose answer is lost, the human's resume, plan, patch, tests, the request);
#: two agents booking one slot need two executions.
LONGEST = {"code_agent_pr_twice": 11}
EXECUTIONS = {"calendar_book_without_hold": 2}


def _options(**given: Any) -> FuzzOptions:
    return FuzzOptions(replay_dir=given.pop("replay_dir", None), **given)


#: The scenarios whose 40 campaigns take longest (30 s to 50 s each on the 2-core machine):
#: run with `-m slow`, so that the default run stays within its bound; the other two keep
#: the check in every run
_LONG = ("batch_refile_on_changes", "calendar_book_without_hold", "code_agent_pr_twice")


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.slow) if name in _LONG
                                  else name for name in sorted(NAIVE)])
def test_each_naive_scenario_fails_in_19_of_20_campaigns_at_the_defaults(name: str) -> None:
    """Twenty base seeds as the command line takes them, twenty as the plugin derives them
    from test ids: at the default run count, at most one campaign of each misses the bug."""
    definition, machine, rule = NAIVE[name]
    plugin = FsmSettings()
    seeds = {"command line": [index * SEED_STRIDE for index in range(20)],
             "pytest plugin": [plugin.seed_for(f"tests/test_{name}.py::test_flow_{index}")
                               for index in range(20)]}
    for where, chosen in seeds.items():
        missed = []
        for seed in chosen:
            report = fuzz(definition, _options(seed=seed, shrink=False), machine=machine)
            assert report.runs <= RUNS_DEFAULT
            if not any(failure.rule == rule for failure in report.failures):
                missed.append(seed)
        assert len(missed) <= 1, f"{where}: seeds {missed} missed {rule}"


@pytest.mark.parametrize("name", sorted(NAIVE))
def test_each_naive_failure_shrinks_to_a_few_steps_of_one_execution(name: str,
                                                                     tmp_path: Path) -> None:
    """The default campaign's counterexample: at most ten steps (the pull request's path
    is eleven), one execution where one suffices, every step numbered and told, and the
    replay file gives the same violation."""
    definition, machine, rule = NAIVE[name]
    report = fuzz(definition, _options(replay_dir=tmp_path), machine=machine)
    failure = next(failure for failure in report.failures if failure.rule == rule)
    example = failure.counterexample
    assert example is not None and failure.replay_file is not None
    assert example.steps <= LONGEST.get(name, 10), "\n".join(example.trace())
    assert example.options.executions == EXECUTIONS.get(name, 1)
    trace = example.trace()
    assert [int(re.match(r"step (\d+) ", line).group(1)) for line in trace] == list(  # type: ignore[union-attr]
        range(1, example.steps + 1))
    outcome = replay(failure.replay_file, machine=machine)
    assert outcome.reproduced and outcome.violation == example.violation


def test_the_pull_request_opened_twice_has_no_failure_shorter_than_eleven_steps() -> None:
    """Why LONGEST allows it eleven: breadth-first search over every schedule of ten steps of
    one execution, with a fault of any kind at any place, finds none that breaks it (at eleven
    it finds the one the shrinker gives)."""
    definition, _, _ = NAIVE["code_agent_pr_twice"]
    bounded = explore(definition, ExploreOptions(depth=LONGEST["code_agent_pr_twice"] - 1,
                                                 faults_max=1, executions=1))
    assert bounded.held and bounded.complete, bounded.summary()


def test_a_batch_shrinks_to_the_one_attachment_its_failure_needs() -> None:
    """The filing done twice needs one attachment, not the four the definition starts with:
    the shrunk run starts with one, and its trace says so."""
    definition, machine, _ = NAIVE["batch_refile_on_changes"]
    report = fuzz(definition, _options(), machine=machine)
    example = report.failures[0].counterexample
    assert example is not None and len(definition.initial_context["attachments"]) == 4
    assert example.options.context["attachments"] == definition.initial_context[
        "attachments"][:1]
    assert example.trace()[0].startswith("step 1 (t=0s): start x1 (attachments: 1 item)")


def test_a_failure_of_three_executions_is_told_with_one() -> None:
    """The pull request opened twice was found in a run of three executions interleaved; the
    counterexample is a run of one that breaks the same rule on the same tool, from a seed
    of its own, and says which."""
    definition, machine, rule = NAIVE["code_agent_pr_twice"]
    report = fuzz(definition, _options(), machine=machine)
    failure = report.failures[0]
    example = failure.counterexample
    assert example is not None and failure.rule == rule
    assert SimOptions().executions == 3 and example.options.executions == 1
    assert "forge.open_pull_request took effect twice" in example.violation.message
    assert example.original_steps > example.steps


BRIDGED = ["hand-rolled no_dedupe", "hand-rolled lost_update", "naive deploy_double_rollback",
           "naive triage_credit_twice"]


@pytest.mark.parametrize("name", BRIDGED)
def test_the_hypothesis_bridge_finds_what_fuzz_finds(name: str) -> None:
    """Each example draws its fault density and how readily the clock moves, as fuzz runs
    do: 400 examples of 40 steps (derandomized, so the test is the same every time) find the
    double delivery, the lost update, the double rollback and the double credit."""
    from hypothesis import HealthCheck, Phase, settings
    from hypothesis.stateful import run_state_machine_as_test

    from harness.bench.hunt import bugs
    from harness.stateful import InvariantViolated, workflow_machine

    (bug,) = [bug for bug in bugs() if bug.name == name]
    machine = workflow_machine(bug.definition, machine=bug.machine)
    chosen = settings(max_examples=400, stateful_step_count=40, deadline=None, database=None,
                      derandomize=True, phases=[Phase.generate],
                      suppress_health_check=list(HealthCheck))
    with pytest.raises(InvariantViolated) as caught:
        run_state_machine_as_test(machine, settings=chosen)
    assert caught.value.violations[0].rule in bug.rule.split("|")
