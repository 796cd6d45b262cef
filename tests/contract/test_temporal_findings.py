"""A behaviour of temporalio 1.35.0 found through the adapter (harness.adapters.temporal):
sdk-python#1109's class, an edit that adds a `workflow.random()` draw before a
`workflow.uuid4()`, shifts every id drawn after it on replay. Where the id names a child
workflow (the issue's form, which the history mode does not run) Core's nondeterminism error
says so, as the issue reports; where it reaches an activity's input, temporalio's `Replayer`
accepts the history and the running workflows go on with another id than the one their
history holds. Pinned twice: by hand (the Replayer alone accepts the history the first
version wrote, and the harness's comparison does not), and by a campaign told only that a
second version exists, shrunk, with a replay file that replays it. If a release changes it,
this fails and the pin moves."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path
from typing import Any

import pytest
import temporal_flows as flows

from harness import SimOptions, Simulator
from harness.adapters.temporal import ReplayDiverged, tasks, temporal_target
from harness.engines.fuzz import FuzzOptions, fuzz
from harness.engines.replay import replay

PINNED = "1.35.0"
DEPLOYED = "under temporal_flows.Issue1109Deployed, "


def target() -> Any:
    return temporal_target(flows.Issue1109, [flows.audit, flows.charge], arguments=["o-1"],
                           tools={"payments.charge": {"idempotency_keys": True}},
                           replay_with=[flows.Issue1109Deployed])


issue_1109 = target()


def test_the_pinned_release() -> None:
    assert importlib.metadata.version("temporalio") == PINNED


def test_by_hand_the_replayer_accepts_a_history_the_edit_replays_otherwise() -> None:
    made = issue_1109(issue_1109.definition, {}, lambda point: None)
    made.start("x", {}, 0)
    made.complete("x", "1", 0)
    made.advance(3_600_000)
    events = made.server.runs["x"].events
    alone = tasks.replay(flows.Issue1109Deployed, issue_1109.later_versions[0][1], events,
                         7_200_000, later=True)
    assert alone.failure == ""  # temporalio's Replayer: no nondeterminism error
    with pytest.raises(ReplayDiverged) as found:
        made.replay("x")
    said = str(found.value)
    assert said.startswith(DEPLOYED + "workflow task 3 sent schedule activity charge (id 2) "
                                      'with ["child_workflow_')
    assert "live, and schedule activity charge (id 2) with" in said


def test_a_campaign_finds_it_shrinks_it_and_replays_it(tmp_path: Path) -> None:
    report = fuzz(issue_1109.definition, FuzzOptions(runs=30, seed=0, sim=SimOptions(),
                                                     replay_dir=tmp_path), machine=issue_1109)
    assert not report.held
    failure = report.failures[0]
    assert failure.rule == "replay_matches", failure.violations
    assert DEPLOYED in failure.violations[0].message
    shrunk = failure.counterexample
    assert shrunk is not None and shrunk.steps <= shrunk.original_steps
    assert failure.replay_file is not None
    outcome = replay(failure.replay_file)
    assert outcome.reproduced and outcome.rule == "replay_matches"


def test_version_one_alone_holds() -> None:
    alone = temporal_target(flows.Issue1109, [flows.audit, flows.charge], arguments=["o-1"],
                            tools={"payments.charge": {"idempotency_keys": True}})
    for seed in range(4):
        result = Simulator(alone.definition, SimOptions(seed=seed), machine=alone).run()
        assert result.ok, result.summary()
