"""The choice source: a run drawn from a seed, recorded, and replayed from its record is the same
run, byte for byte; a schedule's edits stay local; labels tell actions apart."""

from __future__ import annotations

from pathlib import Path

import pytest
from planted import PLANTED, WORKFLOW

from harness import (
    Choice,
    Choices,
    FaultInjected,
    RecordingChoices,
    ScriptedChoices,
    SimOptions,
    Simulator,
)
from harness.sim.choices import labels_of
from harness.sim.history import dump_line
from harness.sim.simulator import plan_for
from reference_machine import load_definition

ROOT = Path(__file__).resolve().parents[3]
REFUND = load_definition(ROOT / "scenarios" / "refund_escalation.yaml")


def lines(result: object) -> list[str]:
    return [dump_line(record) for record in result.history]  # type: ignore[attr-defined]


@pytest.mark.parametrize("swarm", [False, True], ids=["default", "swarm"])
@pytest.mark.parametrize(("definition", "machine"), [
    (REFUND, None), (WORKFLOW, None), (WORKFLOW, PLANTED["forward_compensation"][0]),
    (WORKFLOW, PLANTED["late_timer_applied"][0])], ids=["refund", "planted", "forward",
                                                       "late_timer"])
def test_seeded_recorded_and_replayed_runs_are_the_same(definition: object, machine: object,
                                                        swarm: bool) -> None:
    """For 30 seeds: plain, recording and replaying the record give identical histories."""
    options = SimOptions(plan=plan_for(definition, swarm=swarm))  # type: ignore[arg-type]
    simulator = (Simulator(definition, options) if machine is None  # type: ignore[arg-type]
                 else Simulator(definition, options, machine))  # type: ignore[arg-type]
    for seed in range(30):
        recording = RecordingChoices(seed)
        recorded = simulator.run(seed, choices=recording)
        plain = simulator.run(seed)
        replayed = simulator.run(seed, choices=ScriptedChoices(recording.recorded,
                                                               recording.actions))
        assert lines(plain) == lines(recorded) == lines(replayed), f"seed {seed}"


def test_a_schedule_without_faults_injects_none() -> None:
    """Draws a schedule lacks take their defaults: no fault strikes, under every kind."""
    simulator = Simulator(WORKFLOW, SimOptions(plan=plan_for(WORKFLOW)))
    recording = RecordingChoices(3)
    simulator.run(3, choices=recording)
    kept = [c for c in recording.recorded if not c.tag.startswith("f")]
    result = simulator.run(3, choices=ScriptedChoices(kept, recording.actions))
    assert not [r for r in result.history if type(r) is FaultInjected]
    faulty = simulator.run(3)
    assert [r for r in faulty.history if type(r) is FaultInjected]  # the seed does inject


def test_a_planned_action_that_is_not_enabled_is_skipped() -> None:
    """A step performs the next planned action that is enabled; the others move up."""
    simulator = Simulator(WORKFLOW, SimOptions(executions=1, plan=plan_for(WORKFLOW),
                                               liveness_steps=0, steps_max=3))
    plan = {1: "complete x1 pay.charge | x1/charging/1#1", 2: "start x1",
            3: "approve x1"}
    choices = ScriptedChoices({}, plan)
    result = simulator.run(0, choices=choices)
    assert choices.actions == {1: "start x1", 2: "approve x1",
                               3: "complete x1 pay.charge | x1/charging/1#1"}
    assert result.final["x1"].state == "reserving"


def test_a_label_matches_by_what_it_does_when_the_detail_differs() -> None:
    """The part before ` | ` is enough: another attempt of the call, another timer."""
    simulator = Simulator(WORKFLOW, SimOptions(executions=1, plan=plan_for(WORKFLOW),
                                               liveness_steps=0, steps_max=3))
    choices = ScriptedChoices({}, {1: "start x1", 2: "approve x1",
                                   3: "complete x1 pay.charge | x1/charging/9#9"})
    simulator.run(0, choices=choices)
    assert choices.actions[3] == "complete x1 pay.charge | x1/charging/1#1"


def test_labels_are_unique_among_the_enabled_actions() -> None:
    """Two actions that read alike are numbered, so a replay picks the same one."""
    assert labels_of(["a", "b", "a", "a"], str) == ["a", "b", "a #2", "a #3"]


def test_each_mode_turns_a_draw_into_the_same_decision() -> None:
    """`branch(n)` is `int(u * n)` and `chance(rate)` is `u < rate`, recorded or replayed."""
    plain, recording = Choices(11), RecordingChoices(11)
    draws = [(plain.branch(7), recording.branch(7)), (plain.chance("crash", 0.5),
                                                      recording.chance("crash", 0.5)),
             (plain.below(3), recording.below(3)), (plain.flip(0.3), recording.flip(0.3))]
    assert all(a == b for a, b in draws)
    assert [c.tag for c in recording.recorded] == ["b", "f:crash", "v", "b"]
    replaying = ScriptedChoices(recording.recorded)
    assert [replaying.branch(7), replaying.chance("crash", 0.5), replaying.below(3),
            replaying.flip(0.3)] == [d[0] for d in draws]


def test_a_value_out_of_range_in_a_schedule_is_kept_in_range() -> None:
    """An edited schedule cannot make a branch or a value fall outside its range."""
    choices = ScriptedChoices([Choice(0, "b", 0, 1.0), Choice(0, "v", 0, 7.5)])
    assert choices.branch(4) == 3
    assert 0.0 <= choices.random() < 1.0
