"""A move the machine rejects says why, in the history and the trace; a timer whose move the
machine rejects each time it fires neither keeps the run firing it at the same instant until
the step bound nor leaves a campaign held: the execution is stuck, and the verdict says so."""

from __future__ import annotations

import json

from running import cli

from fault_injection import load_plan
from harness import FuzzOptions, SimOptions, Simulator, fuzz
from harness.checks.invariants import check
from harness.report.trace import describe_steps
from harness.sim.history import REFUSED_TIMER, Committed, Finished, as_dict
from reference_machine import Commit, Event, MemoryStore, Runtime, load_definition
from reference_machine.secrecy import REDACTED

#: After its wait, a move whose action reads a key of a text: an action error every time.
BROKEN_TIMER = {
    "name": "broken_timer", "version": "1", "context": {"note": "done"},
    "states": {
        "wait": {"initial": True, "type": "wait", "after": {"delay": "1s", "target": "report"}},
        "report": {"always": [{"target": "done",
                               "actions": [{"assign": {"x": "context.note.detail"}}]}]},
        "done": {"type": "final", "outcome": "success"},
    },
}
#: The same, its action sound: the timer moves the run on.
SOUND_TIMER = {**BROKEN_TIMER, "name": "sound_timer", "states": {
    **BROKEN_TIMER["states"],
    "report": {"always": [{"target": "done", "actions": [{"assign": {"x": "context.note"}}]}]},
}}
NO_FAULTS = load_plan({"faults": {}})


def test_a_rejected_move_says_why_in_the_history_and_the_trace() -> None:
    result = Simulator(load_definition(BROKEN_TIMER),
                       SimOptions(plan=NO_FAULTS, executions=1)).run(0)
    (rejected,) = [r for r in result.history if type(r) is Committed
                   and r.decision == "rejected"]
    assert rejected.reason.startswith("action_error: ")
    assert "cannot read 'detail' of a str" in rejected.reason
    assert as_dict(rejected)["reason"] == rejected.reason
    lines = "\n".join(describe_steps(result.history))
    assert "x1 rejected timer.fired (" in lines and "action error: " in lines
    assert "stale or already answered" not in lines
    # an accepted commit's line is as it was: no empty reason written
    accepted = next(r for r in result.history if type(r) is Committed
                    and r.decision == "accepted")
    assert "reason" not in as_dict(accepted)


def test_a_timer_refused_each_time_ends_the_run_stuck_not_at_the_step_bound() -> None:
    result = Simulator(load_definition(BROKEN_TIMER),
                       SimOptions(plan=NO_FAULTS, executions=1)).run(0)
    assert result.status == "quiescent", result.summary()
    assert result.steps < 10
    (finished,) = [r for r in result.history if type(r) is Finished]
    assert finished.waiting_on == (REFUSED_TIMER,)
    definition = load_definition(BROKEN_TIMER)
    (violation,) = check(definition, result.history)
    assert violation.rule == "no_stuck_execution"
    assert "it refuses the timer's move" in violation.message


def test_a_sound_timer_is_not_refused() -> None:
    """The control: the same wait, its move sound, ends the run final and held."""
    result = Simulator(load_definition(SOUND_TIMER),
                       SimOptions(plan=NO_FAULTS, executions=1)).run(0)
    assert result.status == "final", result.summary()
    assert not list(check(load_definition(SOUND_TIMER), result.history))


def test_a_campaign_over_crashes_does_not_call_a_sound_timer_refused() -> None:
    """A crash that cuts a timer's tick short leaves it due: it fires again after recovery,
    never counted as refused (else every crash near a timer would be a false stuck run)."""
    report = fuzz(load_definition(SOUND_TIMER), FuzzOptions(runs=120, replay_dir=None))
    assert not report.failures, [f.rule for f in report.failures]


def test_run_on_the_cli_fails_the_refused_timer_with_its_reason(tmp_path) -> None:
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(BROKEN_TIMER), encoding="utf-8")
    done = cli("run", str(path), "--no-faults", "--executions", "1")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "violated no_stuck_execution" in done.stdout
    assert "every invariant held" not in done.stdout


class _Kept(MemoryStore):
    """A store that keeps every commit it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.commits: list[Commit] = []

    def commit(self, commit: Commit) -> int:
        self.commits.append(commit)
        return super().commit(commit)


def test_a_reason_quoting_a_secret_of_the_payload_is_scrubbed() -> None:
    """A schema's complaint quotes the value it refused: under a secret key, it never reaches
    the reason a watcher (the history, the trace) is told."""
    definition = load_definition({
        "name": "login", "version": "1", "secrets": ["password"], "context": {"password": ""},
        "events": {"login": {"payload": {"type": "object", "properties": {
            "password": {"type": "string", "maxLength": 5}}}}},
        "states": {"waiting": {"initial": True, "on": {"login": "in"}},
                   "in": {"type": "final", "outcome": "success"}}})
    store = _Kept()
    runtime = Runtime(store, [definition], {})
    runtime.start(definition, "x1", now=0)
    said = runtime.deliver("x1", Event("e1", "login", "user",
                                       {"password": "hunter2-is-my-password"}), now=1)
    assert said.kind == "rejected"
    (rejected,) = [c for c in store.commits if c.decision == "rejected"]
    assert rejected.reason.startswith("invalid_payload: ")
    assert "hunter2" not in rejected.reason and REDACTED in rejected.reason
