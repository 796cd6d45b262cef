"""The Temporal adapter in history mode (harness.adapters.temporal): histories the harness
writes as Temporal's server, workflow tasks through temporalio's own Replayer, activities in
its activity environment; the sound refund holds, the naive ones fail, shrunk, with a
replay."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import temporal_flows as flows  # tests/support: a module of its own, which the sandbox imports
from adapter_campaigns import campaign
from histories import histories_of

from fault_injection import FaultKind, FaultPlan, FaultRate, SimulatedCrash
from harness import SimOptions, Simulator
from harness.adapters.peers import AdapterError
from harness.adapters.temporal import (
    HandlersUnfinished,
    ReplayDiverged,
    WorkflowTaskFailed,
    tasks,
    temporal_target,
)
from harness.engines.replay import replay
from reference_machine import Event, Failure, Success
from scenarios.temporal import refund

ROOT = Path(__file__).resolve().parents[3]


class Calls:
    """Tools that record every call (one may fail, `fail` times), and a probe that crashes
    at a chosen point the n-th time it is passed."""

    def __init__(self, crash_at: str = "", nth: int = 1, fail: int = 0,
                 category: str = "transient") -> None:
        self.calls: list[tuple[str, dict[str, Any], str]] = []
        self.crash_at, self.nth, self.fail, self.category = crash_at, nth, fail, category
        self.passed: list[str] = []

    def tools(self, *names: str) -> dict[str, Any]:
        def tool(name: str) -> Any:
            def call(input: Mapping[str, Any], key: str) -> Success | Failure:
                self.calls.append((name, dict(input), key))
                if self.fail:
                    self.fail -= 1
                    return Failure(self.category, "try again")
                return Success({"id": "r-1"})
            return call
        return {name: tool(name) for name in names}

    def probe(self, point: str) -> None:
        self.passed.append(point)
        if point == self.crash_at:
            self.nth -= 1
            if self.nth == 0:
                raise SimulatedCrash(point)


def charge_target(**given: Any) -> Any:
    return temporal_target(flows.Charge, [flows.charge], arguments=["o-1"],
                           tools={"payments.charge": {"idempotency_keys": True}}, **given)


def made(target: Any, calls: Calls, *tools: str) -> Any:
    return target(target.definition, calls.tools(*tools or ("payments.charge",)), calls.probe)


def kinds(machine: Any, execution: str = "x") -> list[str]:
    from temporalio.api.enums.v1 import EventType
    return [EventType.Name(e.event_type).removeprefix("EVENT_TYPE_").lower()
            for e in machine.server.runs[execution].events.events]


class TestDefinition:
    def test_signals_are_events_and_the_run_ends_completed_or_failed(self) -> None:
        definition = refund.target.definition
        assert set(definition.states) == {"running", "completed", "failed"}
        assert definition.initial == "running"
        assert set(definition.events) == {"approve"}
        assert definition.spec.events["approve"].sends_max == 1

    def test_signals_default_to_every_handler_and_unknown_ones_are_refused(self) -> None:
        target = temporal_target(flows.Approval)
        assert set(target.definition.events) == {"approve", "cancel"}
        with pytest.raises(AdapterError, match="has no such signal handler"):
            temporal_target(flows.Approval, signals={"approved": {}})

    def test_signals_may_be_named_in_a_list(self) -> None:
        assert set(temporal_target(flows.Approval, signals=["cancel"]).definition.events) \
            == {"cancel"}
        with pytest.raises(AdapterError, match="give the signals' names"):
            temporal_target(flows.Approval, signals="cancel")

    @pytest.mark.parametrize("arguments", [["o", 2], [], "o", {"order": "o"}])
    def test_arguments_that_do_not_fit_the_run_method_are_refused(self, arguments: Any
                                                                  ) -> None:
        with pytest.raises(AdapterError, match="run method takes 1 argument"):
            temporal_target(flows.Charge, [flows.charge], arguments=arguments)

    @pytest.mark.parametrize(("given", "said"), [
        ({"workflow": object}, "is not a Temporal workflow"),
        ({"workflow": flows.Charge}, "give arguments="),
        ({"workflow": flows.Charge, "arguments": ["o"], "activities": [len]},
         "is not a Temporal activity"),
    ])
    def test_what_is_not_a_workflow_is_refused(self, given: dict[str, Any], said: str
                                               ) -> None:
        with pytest.raises(AdapterError, match=said):
            temporal_target(**given)


class TestServer:
    def test_a_run_writes_the_history_temporal_writes(self) -> None:
        machine = made(charge_target(), Calls())
        assert machine.start("x", {}, 0) == "accepted"
        assert machine.observe("x").calls[0].tool == "charge"
        machine.complete("x", "1", 0)
        assert machine.observe("x").timers == (("1", 60_000),)
        machine.advance(60_000)
        seen = machine.observe("x")
        assert (seen.state, seen.status, seen.outcome) == ("completed", "final", "success")
        assert kinds(machine) == [
            "workflow_execution_started", "workflow_task_scheduled", "workflow_task_started",
            "workflow_task_completed", "activity_task_scheduled", "activity_task_started",
            "activity_task_completed", "workflow_task_scheduled", "workflow_task_started",
            "workflow_task_completed", "timer_started", "timer_fired",
            "workflow_task_scheduled", "workflow_task_started", "workflow_task_completed",
            "workflow_execution_completed"]
        machine.replay("x")  # the whole history replays through temporalio's Replayer

    def test_a_run_driven_from_inside_an_event_loop_runs_in_a_thread_of_its_own(self) -> None:
        machine = made(charge_target(), Calls())

        async def drive() -> None:  # as the pytest plugin under an async test
            machine.start("x", {}, 0)
            machine.complete("x", "1", 0)
        asyncio.run(drive())
        assert machine.observe("x").timers == (("1", 60_000),)

    def test_a_repeated_start_is_a_duplicate_and_a_resent_signal_reaches_the_workflow(
            self) -> None:
        target = temporal_target(flows.Approval)
        machine = made(target, Calls())
        assert machine.start("x", {}, 0) == "accepted"
        assert machine.start("x", {}, 0) == "ignored:duplicate"
        cancel = Event("e0", "cancel")
        assert machine.deliver("y", cancel, 1) == "rejected:unknown execution"
        approve = Event("e1", "approve", payload={"by": "ana"})
        assert machine.deliver("x", approve, 4) == "accepted"
        refunds = made(refund.target, Calls(), "payments.refund", "notify.email")
        refunds.start("r", {}, 0)
        decision = Event("e2", "approve", payload={"approved": True})
        assert refunds.deliver("r", decision, 1) == "accepted"
        # a sender that sends again makes a new request: the server records it again, and
        # the handler takes it again (refund's ignores a second decision)
        assert refunds.deliver("r", decision, 2) is None
        signaled = [e.workflow_execution_signaled_event_attributes.request_id
                    for e in refunds.server.runs["r"].events.events if e.event_type == 26]
        assert signaled == ["e2", "e2/2"]
        assert machine.observe("x").state == "completed"
        assert machine.deliver("x", approve, 6) == "rejected:workflow execution already " \
                                                   "completed"
        assert machine.deliver("y", approve, 6) == "rejected:unknown execution"
        history = machine.server.runs["x"].events.events
        completed = history[-1].workflow_execution_completed_event_attributes
        assert completed.result.payloads[0].data == b"\"approved {'by': 'ana'}\""

    def test_a_signal_whose_delivery_died_with_its_task_is_the_same_request(self) -> None:
        calls = Calls(crash_at="before_report_task", nth=2)  # the signal's task, not start's
        machine = made(refund.target, calls, "payments.refund", "notify.email")
        machine.start("x", {}, 0)
        decision = Event("e1", "approve", payload={"approved": True})
        with pytest.raises(SimulatedCrash):
            machine.deliver("x", decision, 1)
        machine.crash()
        machine.recover(2)
        # the sender never heard back and sends again: the server has the request once
        assert machine.deliver("x", decision, 3) == "ignored:duplicate"
        assert kinds(machine).count("workflow_execution_signaled") == 1
        assert machine.observe("x").calls  # the task ran again: the refund is scheduled

    def test_a_signal_without_an_argument_is_sent_none(self) -> None:
        machine = made(temporal_target(flows.Approval), Calls())
        machine.start("x", {}, 0)
        assert machine.deliver("x", Event("e1", "cancel"), 1) == "accepted"
        assert machine.observe("x").outcome == "success"
        signaled = machine.server.runs["x"].events.events[4]
        assert not signaled.workflow_execution_signaled_event_attributes.input.payloads
        assert signaled.workflow_execution_signaled_event_attributes.request_id == "e1"

    def test_a_failed_attempt_is_retried_with_the_next_attempt_number(self) -> None:
        calls = Calls(fail=2)
        machine = made(charge_target(), calls)
        machine.start("x", {}, 0)
        for _ in range(3):
            machine.complete("x", "1", 0)
        assert [key for _, _, key in calls.calls] == ["x/charge/1"] * 3  # one key throughout
        started = machine.server.runs["x"].events.events[5]
        assert started.activity_task_started_event_attributes.attempt == 3

    def test_a_permanent_failure_fails_the_activity_and_the_workflow(self) -> None:
        machine = made(charge_target(), Calls(fail=1, category="permanent"))
        machine.start("x", {}, 0)
        machine.complete("x", "1", 0)
        assert "activity_task_failed" in kinds(machine)
        seen = machine.observe("x")
        assert (seen.state, seen.outcome) == ("failed", "failure")

    def test_a_crash_after_the_effect_has_the_server_try_the_activity_again(self) -> None:
        calls = Calls(crash_at="after_effect")
        machine = made(charge_target(), calls)
        machine.start("x", {}, 0)
        with pytest.raises(SimulatedCrash):
            machine.complete("x", "1", 0)
        machine.crash()
        machine.recover(1)
        assert machine.observe("x").calls  # scheduled again
        machine.complete("x", "1", 2)
        run = machine.server.runs["x"]
        assert run.events.events[5].activity_task_started_event_attributes.attempt == 2
        assert [key for _, _, key in calls.calls] == ["x/charge/1", "x/charge/1"]

    def test_a_crash_before_the_task_is_reported_times_the_task_out(self) -> None:
        machine = made(charge_target(), Calls(crash_at="before_report_task"))
        with pytest.raises(SimulatedCrash):
            machine.start("x", {}, 0)
        machine.crash()
        machine.recover(10)
        assert kinds(machine)[3:7] == ["workflow_task_timed_out", "workflow_task_scheduled",
                                       "workflow_task_started", "workflow_task_completed"]
        assert machine.observe("x").calls
        machine.replay("x")

    def test_a_second_worker_takes_a_stalled_attempt(self) -> None:
        calls = Calls()
        first = made(charge_target(), calls)
        second = first.worker()
        first.start("x", {}, 0)

        def stall(point: str) -> None:  # the first stalls past the timeout at its report
            if point == "before_report_activity" and first.probe is stall:
                first.probe = calls.probe
                second.recover(5)
                second.complete("x", "1", 5)
        first.probe = stall
        first.complete("x", "1", 0)
        assert len(calls.calls) == 2  # both attempts took effect; one result reached the server
        assert kinds(first).count("activity_task_completed") == 1
        assert first.observe("x").timers


class TestWhatTemporalDoesThatATaskSeesNot:
    def test_a_timer_cancelled_in_its_own_task_is_never_sent(self) -> None:
        machine = made(temporal_target(flows.Waits, [flows.pause, flows.audit]), Calls())
        machine.start("x", {}, 0)
        assert machine.observe("x").timers  # the wait's timeout
        assert machine.deliver("x", Event("e1", "go", payload=True), 1) == "accepted"
        machine.complete("x", "1", 2)  # an async activity that really awaits
        seen = machine.observe("x")
        assert seen.outcome == "success"
        kinds_seen = kinds(machine)
        # the first wait's timer started, then cancelled in a later task; the second's never
        assert kinds_seen.count("timer_started") == kinds_seen.count("timer_canceled") == 1
        # the activity started beside the end is sent before it, as Core orders them
        assert kinds_seen[-2:] == ["activity_task_scheduled", "workflow_execution_completed"]
        machine.replay("x")

    def test_a_wait_that_times_out_goes_on(self) -> None:
        machine = made(temporal_target(flows.Waits, [flows.pause, flows.audit]), Calls())
        machine.start("x", {}, 0)
        machine.advance(300_000)  # the timeout fires: the run goes on without `go`
        machine.complete("x", "1", 300_001)
        assert machine.observe("x").outcome == "success"
        machine.replay("x")

    def test_the_last_attempt_timed_out_fails_the_activity(self) -> None:
        calls = Calls(crash_at="before_report_activity")
        machine = made(temporal_target(flows.ChargeOnce, [flows.charge], arguments=["o"],
                                       tools={"payments.charge": {}}), calls)
        machine.start("x", {}, 0)
        with pytest.raises(SimulatedCrash):
            machine.complete("x", "1", 0)
        machine.crash()
        machine.recover(10)
        assert len(calls.calls) == 1  # no second attempt: maximum_attempts=1
        assert "activity_task_timed_out" in kinds(machine)
        history = machine.server.runs["x"].events.events
        result = history[-1].workflow_execution_completed_event_attributes.result
        assert result.payloads[0].data == b'"gave up: TimeoutError"'
        machine.replay("x")

    def test_a_handler_of_two_arguments_and_update_handlers_are_refused(self) -> None:
        with pytest.raises(AdapterError, match="takes 2 arguments"):
            temporal_target(flows.TwoArguments)
        with pytest.raises(AdapterError, match="update handlers \\(change\\)"):
            temporal_target(flows.Updatable)


class TestReplayMatches:
    def test_a_workflow_that_decides_otherwise_on_replay_fails_in_temporals_replayer(
            self) -> None:
        machine = made(temporal_target(flows.ReplayBranches, [flows.charge, flows.audit],
                                       arguments=["o-1"]), Calls())
        machine.start("x", {}, 0)
        machine.complete("x", "1", 0)
        with pytest.raises(ReplayDiverged, match=r"Temporal's Replayer failed: "
                                                 r"NondeterminismError.*does not match"):
            machine.replay("x")

    def test_a_different_input_on_replay_is_caught_where_the_replayer_is_silent(self
                                                                                 ) -> None:
        report = campaign(refund.clock_in_signal, runs=20)
        assert not report.held
        failure = report.failures[0]
        assert failure.rule == "replay_matches", failure.violations
        said = failure.violations[0].message
        assert "schedule activity notify (id 2) with" in said and "live, and" in said

    def test_a_later_version_that_shifts_an_input_is_caught_where_the_replayer_passes(
            self) -> None:
        target = temporal_target(flows.Tagged, [flows.charge], arguments=["o-1"],
                                 tools={"payments.charge": {}},
                                 replay_with=[flows.TaggedWithJitter])
        machine = made(target, Calls())
        machine.start("x", {}, 0)
        machine.complete("x", "1", 0)
        later = tasks.replay(flows.TaggedWithJitter, target.later_versions[0][1],
                             machine.server.runs["x"].events, 0, later=True)
        assert not later.failure  # temporalio's Replayer alone accepts the history
        with pytest.raises(ReplayDiverged, match=r"under temporal_flows.TaggedWithJitter, "
                                                 r"workflow task 1 sent schedule activity "
                                                 r"charge \(id 1\) with \[\"o-1/"):
            machine.replay("x")

    def test_a_later_version_that_runs_another_activity_fails_in_the_replayer(self) -> None:
        target = temporal_target(flows.Tagged, [flows.charge], arguments=["o-1"],
                                 tools={"payments.charge": {}},
                                 replay_with=[flows.TaggedRenamedActivity])
        machine = made(target, Calls())
        machine.start("x", {}, 0)
        machine.complete("x", "1", 0)
        with pytest.raises(ReplayDiverged, match="TaggedRenamedActivity, Temporal's Replayer "
                                                 "failed: NondeterminismError"):
            machine.replay("x")

    def test_a_later_version_keeps_the_workflows_name(self) -> None:
        with pytest.raises(AdapterError, match="a later version keeps the workflow's name"):
            temporal_target(flows.Tagged, [flows.charge], arguments=["o"],
                            replay_with=[flows.Charge])

    def test_the_sound_workflow_replays_to_what_it_did(self) -> None:
        result = Simulator(refund.target.definition, SimOptions(seed=4),
                           machine=refund.target).run()
        replayed = [r for r in result.history if type(r).__name__ == "Replayed"]
        assert replayed and all(r.ok for r in replayed)


class TestTheWorkflowsOwnFailures:
    def test_a_workflow_task_that_raises_is_the_machines_failure(self) -> None:
        machine = made(temporal_target(flows.Raises), Calls())
        with pytest.raises(WorkflowTaskFailed, match=r"the order book is gone.*stuck"):
            machine.start("x", {}, 0)

    def test_a_command_the_history_mode_does_not_model_is_said(self) -> None:
        machine = made(temporal_target(flows.LocalActivity, [flows.audit], arguments=["o"]),
                       Calls())
        with pytest.raises(AdapterError, match="schedule_local_activity command"):
            machine.start("x", {}, 0)

    def test_an_activity_that_calls_an_undeclared_tool_is_said_not_retried(self) -> None:
        target = temporal_target(flows.Charge, [flows.misspelled], arguments=["o"],
                                 tools={"payments.charge": {}})
        machine = made(target, Calls())
        machine.start("x", {}, 0)
        with pytest.raises(AdapterError, match=r"'payments\.chrage' is not declared"):
            machine.complete("x", "1", 0)

    def test_a_branch_on_the_hour_of_the_wall_clock_replays_otherwise(self) -> None:
        machine = made(temporal_target(flows.BusinessHours), Calls())
        machine.start("x", {}, 0)
        assert machine.observe("x").timers == (("1", 30 * 60_000),)  # the morning's half hour
        machine.advance(30 * 60_000)
        assert machine.observe("x").outcome == "success"
        with pytest.raises(ReplayDiverged, match="start timer 1 for 1800000 ms live, and "
                                                 "start timer 1 for 3600000 ms on replay"):
            machine.replay("x")

    def test_a_workflow_that_ends_while_a_handler_still_runs_is_said(self) -> None:
        machine = made(temporal_target(flows.Abandons, [flows.audit]), Calls())
        machine.start("x", {}, 0)
        with pytest.raises(HandlersUnfinished, match=r"x: the workflow ended while handlers "
                                                     r"still ran: .*note"):
            machine.deliver("x", Event("e1", "note"), 1)
        assert machine.observe("x").outcome == "success"  # the history holds the end

    def test_one_that_waits_for_its_handlers_holds(self) -> None:
        machine = made(temporal_target(flows.WaitsForHandlers, [flows.audit]), Calls())
        machine.start("x", {}, 0)
        assert machine.deliver("x", Event("e1", "note"), 1) == "accepted"
        machine.complete("x", "1", 2)
        assert machine.observe("x").outcome == "success"
        machine.replay("x")

    def test_an_activity_not_registered_is_said(self) -> None:
        machine = made(temporal_target(flows.Charge, [], arguments=["o"]), Calls())
        machine.start("x", {}, 0)
        with pytest.raises(AdapterError, match="does not register"):
            machine.complete("x", "1", 0)


class TestCampaigns:
    def test_the_sound_refund_holds_under_every_fault(self) -> None:
        report = campaign(refund.target, runs=40)
        assert report.held, [f.violations for f in report.failures]
        assert not report.vacuous
        coverage = report.summary()["coverage"]
        assert coverage["crash_points"]["missing"] == []
        assert coverage["transitions"]["missing"] == []

    def test_a_refund_keyed_by_its_attempt_is_caught_shrunk_and_replayed(
            self, tmp_path: Path) -> None:
        plan = FaultPlan((FaultRate(FaultKind.CRASH, 0.3),))
        report = campaign(refund.key_by_attempt, runs=40, plan=plan, replay_dir=tmp_path)
        assert not report.held
        failure = report.failures[0]
        assert failure.rule == "no_duplicate_effect", failure.violations
        assert "attempt 2" in failure.violations[0].message
        shrunk = failure.counterexample
        assert shrunk is not None and shrunk.steps < shrunk.original_steps
        assert any("FAULT crash" in line for line in shrunk.trace())
        assert failure.replay_file is not None
        outcome = replay(failure.replay_file)
        assert outcome.reproduced and outcome.rule == "no_duplicate_effect"

    def test_the_same_seed_gives_the_same_history_in_any_process(self) -> None:
        first = histories_of("scenarios.temporal.refund:target", "1")
        assert '"kind":"applied"' in first
        assert first == histories_of("scenarios.temporal.refund:target", "2")

    def test_the_cli_says_a_target_that_is_not_a_workflow_without_a_traceback(
            self, tmp_path: Path) -> None:
        (tmp_path / "mine.py").write_text(
            "from harness.adapters.temporal import temporal_target\n"
            "target = temporal_target(object)\n")
        done = subprocess.run([sys.executable, "-m", "harness.cli", "fuzz", "mine:target",
                               "--runs", "2", "--no-report"], cwd=tmp_path, check=False,
                              capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert done.returncode == 2, done.stdout + done.stderr
        assert "is not a Temporal workflow" in done.stderr
        assert "Traceback" not in done.stderr
