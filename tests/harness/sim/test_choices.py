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
    TimerFired,
)
from harness.sim.choices import BRANCH, labels_of
from harness.sim.history import dump_line
from harness.sim.simulator import PATIENCE, plan_for
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


def test_a_schedule_of_only_the_faults_that_struck_replays_the_run() -> None:
    """A fault draw that did not strike decides what its default decides: the schedule
    without it (what the shrinker keeps) runs the same history, and it keeps every fault
    that struck."""
    simulator = Simulator(WORKFLOW, SimOptions(plan=plan_for(WORKFLOW)))
    for seed in range(20):
        recording = RecordingChoices(seed)
        recorded = simulator.run(seed, choices=recording)
        kept = [c for c in recording.recorded
                if not c.tag.startswith("f") or (c.step, c.tag, c.n) in recording.struck]
        struck = sum(1 for r in recorded.history if type(r) is FaultInjected)
        assert len(recording.struck) <= struck  # a crash strikes once, tells twice at most
        replayed = simulator.run(seed, choices=ScriptedChoices(kept, recording.actions))
        assert lines(replayed) == lines(recorded), f"seed {seed}"
        assert len(kept) < len(recording.recorded), "nothing left out: the test proves nothing"


def test_each_run_draws_its_patience_and_a_schedule_without_the_draw_is_uniform() -> None:
    """Runs draw how readily they move the clock; a held-back run moves it less often. A
    schedule written before the draw existed (no branch of step 0) replays as uniform, so an
    old replay file still replays."""
    simulator = Simulator(WORKFLOW, SimOptions(plan=plan_for(WORKFLOW)))
    drawn = set()
    for seed in range(30):
        run = simulator.begin(seed)
        drawn.add(run.patience)
    assert drawn == set(PATIENCE)
    recording = RecordingChoices(5)
    simulator.run(5, choices=recording)
    without = [c for c in recording.recorded if (c.step, c.tag) != (0, BRANCH)]
    assert simulator.begin(5, choices=ScriptedChoices(without)).patience == 1.0


def test_a_held_back_run_moves_the_clock_less_often() -> None:
    """Over the same seeds, runs of the smallest patience take fewer clock steps per step
    than runs that pick every action alike (the scheduler's swarm is real)."""
    simulator = Simulator(WORKFLOW, SimOptions(plan=plan_for(WORKFLOW)))
    moved: dict[float, list[float]] = {}
    for seed in range(120):
        run = simulator.begin(seed)
        result = run.execute()
        steps = max(r.step for r in result.history)
        clock = sum(1 for r in result.history if type(r) is TimerFired)
        moved.setdefault(run.patience, []).append(clock / steps)
    assert sum(moved[0.05]) / len(moved[0.05]) < sum(moved[1.0]) / len(moved[1.0]) / 2
