"""The bench's arithmetic: ratios to the floor and to the peers, the aims, the comparison
with a baseline, and what happens when a peer library is missing. No timing is asserted:
the figures here are made up."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from harness.bench import scaling, shapes, suite, timing
from harness.errors import HarnessError


def figure(group: str, contender: str, per_op_us: float, **extra: float) -> timing.Measured:
    return timing.Measured(group, contender, "transition", per_op_us / 1e6, 5, dict(extra))


SHAPE = "shape: 8-state cycle (cycle8, 8 transitions a round)"


def test_ratios_are_to_the_group_floor_and_from_each_peer() -> None:
    doc = suite.document([figure(SHAPE, "dict FSM (floor)", 0.2),
                           figure(SHAPE, "reference decide", 2.0),
                           figure(SHAPE, "transitions", 10.0),
                           figure(SHAPE, "python-statemachine", 100.0)],
                          seconds=0.5, quick=False)
    decide = doc["results"][1]
    assert decide["x_floor"] == 10.0
    assert decide["speedup_vs"] == {"transitions": 5.0, "python-statemachine": 50.0}
    assert doc["aims"] == [{"aim": "decide faster than transitions (8-state cycle)",
                            "measured": 5.0, "target": ">= 6", "met": False}]


def test_every_aim_is_judged_from_its_figures() -> None:
    durable = "durable: SQLite NORMAL, commit per event (ping-pong)"
    doc = suite.document([
        figure(durable, "bare sqlite3 loop (floor)", 100.0),
        figure(durable, "reference runtime", 190.0),
        figure("engines: x", "native fuzz (floor)", 200.0),
        figure("engines: x", "hypothesis machine", 2400.0),
        figure("checkers: 1k records of x", "read each record (floor)", 0.1),
        figure("checkers: 1k records of x", "all invariants", 2.0,
               peak_bytes_per_record=30.0),
        figure("checkers: 100k records of x", "read each record (floor)", 0.2),
        figure("checkers: 100k records of x", "all invariants", 5.0,
               peak_bytes_per_record=60.0),
    ], seconds=0.5, quick=False)
    assert [(aim["measured"], aim["met"]) for aim in doc["aims"]] == [
        (1.9, True),  # the runtime within 2x of the bare loop
        (12.0, True),  # native fuzz 12x the Hypothesis machine's steps per second
        (1.25, True),  # 25x the bare pass at 100k against 20x at 1k
        (2.0, False),  # peak memory per record doubled
    ]


def test_issue_21s_aims_are_judged_from_their_groups() -> None:
    """The simulated step per logged event, group commit, processes (a speed-up: one over the
    time ratio) and the exhaustive search per state, each from its own group."""
    grouped = "durable: SQLite NORMAL, group commit of 100 (ping-pong)"
    per_event = "simulator: x, per logged event, 3 executions a run"
    processes = "scaling: processes, 300 fuzz runs of x"
    exhaustive = "exhaustive: x, depth 5, 1 fault"
    doc = suite.document([
        figure("simulator: x, 3 executions a run", "simulate, no faults (floor)", 90.0),
        figure("simulator: x, 3 executions a run", "simulate, every fault", 100.0),
        figure(grouped, "bare sqlite3 loop (floor)", 40.0),
        figure(grouped, "reference runtime", 80.0),
        figure(per_event, "runtime deliver, the same events (floor)", 20.0),
        figure(per_event, "simulate, every fault", 50.0),
        figure(processes, "1 process (floor)", 100.0),
        figure(processes, "2 processes", 50.0),
        figure(exhaustive, "bare BFS, a simulated step per edge (floor)", 100.0),
        figure(exhaustive, "exhaustive search, per distinct state", 1500.0),
    ], seconds=0.5, quick=False)
    assert [(aim["aim"].split(" (")[0], aim["measured"], aim["met"]) for aim in doc["aims"]] == [
        ("SQLite runtime over the bare sqlite3 loop", 2.0, False),
        ("simulated step over the runtime's deliver, per logged event", 2.5, True),
        ("2 processes over 1", 2.0, True),
        ("exhaustive search: time per distinct state over a bare BFS of the same graph", 15.0,
         False),
    ]


def test_compare_flags_a_ratio_that_grew_past_the_tolerance(tmp_path: Path) -> None:
    then = suite.document([figure(SHAPE, "dict FSM (floor)", 0.2),
                            figure(SHAPE, "reference decide", 2.0),
                            figure(SHAPE, "transitions", 10.0)], seconds=0.5, quick=False)
    now = suite.document([figure(SHAPE, "dict FSM (floor)", 0.4),  # a slower machine
                           figure(SHAPE, "reference decide", 4.4),  # 11x the floor: +10%
                           figure(SHAPE, "transitions", 40.0)],  # 100x the floor: +100%
                          seconds=0.5, quick=False)
    path = tmp_path / "base.json"
    path.write_text(json.dumps(then))
    compared = suite.compare(now, suite.load_baseline(path), tolerance=0.3)
    assert [(row["contender"], row["change"], row["regressed"]) for row in compared] == [
        ("reference decide", 0.1, False), ("transitions", 1.0, True)]


@pytest.mark.parametrize(("content", "message"), [
    ("not json", "cannot read a bench document"),
    ('{"kind": "fsmharness.report"}', "not an fsmharness bench document"),
    ('{"kind": "fsmharness.bench", "format": 2, "results": []}', "bench format 2"),
    ('{"kind": "fsmharness.bench", "format": 1, "results": [{"group": "g"}]}',
     "'results' must be a list of rows"),
])
def test_a_baseline_that_is_not_one_is_refused(tmp_path: Path, content: str,
                                                message: str) -> None:
    path = tmp_path / "base.json"
    path.write_text(content)
    with pytest.raises(HarnessError, match=message):
        suite.load_baseline(path)


def test_without_the_peer_libraries_the_shapes_run_on_ours_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shapes, "importable", lambda module: False)
    names = [c.name for c in shapes.contenders_of(shapes.cycle8())]
    assert names == ["dict FSM (floor)", "reference decide", "runtime, memory store",
                     "runtime, SQLite NORMAL", "runtime, SQLite FULL"]
    group = shapes.shape_group(shapes.cycle8(), "shape: 8-state cycle")
    doc = suite.document(timing.measure(group, 0.001, rounds=1), seconds=0.001, quick=True)
    assert all("speedup_vs" not in row for row in doc["results"])
    assert doc["aims"] == []  # no peer, so no aim against one


def test_the_runtime_contenders_close_what_they_open(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    shape = shapes.cycle8()
    with contextlib.ExitStack() as stack:
        walk = shapes.reference_runtime(shape, "FULL")(stack)
        assert walk() == walk() == "a"  # rounds follow one another on one execution
        (folder,) = tmp_path.iterdir()
        assert (folder / "store.db").is_file()
    assert list(tmp_path.iterdir()) == []  # the store closed and its folder removed


def test_the_machines_own_ceiling_splits_the_same_work_over_the_processes() -> None:
    """The ceiling group's contenders run the same rounds in all, on one child or split over
    two, and each call gives that count (so the two are timed per the same unit)."""
    group = scaling.ceiling_group()
    assert [c.name for c in group.contenders] == ["1 process (floor)", "2 processes"]
    one, two = scaling.split_work(1, 1000), scaling.split_work(2, 1000)
    assert one() == two() == 1000
    assert scaling._busy(7) == 7
