"""`approval-bypass`: a step that needs approval (`needs_approval: true`) is entered only by
the `approval.granted` transition of its approval state; every other way in is an error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from small_workflow import base, step_of

from reference_machine import DefinitionError, Finding, Severity, lint, load_definition

ROOT = Path(__file__).resolve().parents[2]
APPROVAL = {"for_state": "work", "summary": "Run the call", "roles": ["supervisor"],
            "expires_after": "1h"}


def gated() -> dict[str, Any]:
    """Gives the small workflow with `work` gated: start -go-> approve -granted-> work."""
    data = base()
    data["states"]["start"]["on"] = {"go": "approve"}
    data["states"]["approve"] = {
        "type": "wait", "approval": dict(APPROVAL),
        "on": {"approval.granted": "work", "approval.denied": "failed"},
    }
    step_of(data)["needs_approval"] = True
    return data


def bypasses(data: dict[str, Any]) -> list[Finding]:
    """Gives the approval-bypass findings of a definition."""
    return [finding for finding in lint(data) if finding.code == "approval-bypass"]


def only_bypass(data: dict[str, Any]) -> Finding:
    """Gives the one finding of a definition, checking it is the approval-bypass error."""
    findings = lint(data)
    assert [f.code for f in findings] == ["approval-bypass"], findings
    assert findings[0].severity is Severity.ERROR
    return findings[0]


class TestThroughTheGate:
    def test_the_gated_base_is_clean(self) -> None:
        """Entered only by its approval state's grant, the gated step is fine."""
        assert lint(gated()) == []

    def test_a_grant_declared_on_the_gates_parent_is_the_gate(self) -> None:
        """`approval.granted` inherited from a compound parent of the approval state is its
        grant."""
        data = gated()
        data["states"]["approve"]["parent"] = "asking"
        data["states"]["approve"]["initial"] = True
        data["states"]["approve"]["on"] = {"approval.denied": "failed"}
        data["states"]["asking"] = {"on": {"approval.granted": "work"}}
        data["states"]["start"]["on"] = {"go": "asking"}
        assert lint(data) == []

    def test_a_conditional_approval_may_be_entered_directly(self) -> None:
        """`needs_approval: <expression>` is decided on entry: a direct way in is its design."""
        data = gated()
        step_of(data)["needs_approval"] = "context.count > 100"
        data["states"]["start"]["on"] = {"go": "approve", "submit": "work"}
        assert lint(data) == []

    def test_the_bundled_gates_are_clean(self) -> None:
        """Every bundled scenario with a gated step enters it only through its gate."""
        scenarios = sorted((ROOT / "scenarios").rglob("*.yaml"))
        gated_ones = [path for path in scenarios if "needs_approval: true" in path.read_text()]
        assert len(gated_ones) >= 3
        for path in scenarios:
            assert [f for f in lint(path) if f.code == "approval-bypass"] == [], path


class TestBypass:
    def test_an_event_into_the_step_is_an_error_located_and_explained(self) -> None:
        """An event that enters the gated step from elsewhere names the state, the event, the
        step and the gate expected."""
        data = gated()
        data["states"]["start"]["on"]["submit"] = "work"
        finding = only_bypass(data)
        assert finding.location == "states.start.on.submit.target"
        assert finding.ids == ("start", "submit", "work", "approve")
        assert finding.message == (
            "`submit` of 'start' enters 'work' without its approval; expected only "
            "`approval.granted` of 'approve' to enter 'work', whose step needs approval: go "
            "to 'approve' instead, which asks for it")

    def test_loading_refuses_it(self) -> None:
        """A bypass is an error: the definition does not load."""
        data = gated()
        data["states"]["start"]["on"]["submit"] = "work"
        with pytest.raises(DefinitionError, match=r"states\.start\.on\.submit\.target: "
                                                  r"`submit` of 'start' enters 'work' without"):
            load_definition(data)

    def test_one_of_a_list_of_transitions(self) -> None:
        """In a list, the location carries the index of the transition at fault."""
        data = gated()
        data["states"]["start"]["on"]["go"] = [{"target": "work", "guard": "context.vip"},
                                               "approve"]
        assert only_bypass(data).location == "states.start.on.go[0].target"

    def test_a_denial_into_the_step(self) -> None:
        """The gate's own `approval.denied` into the step runs it on a refusal."""
        data = gated()
        data["states"]["approve"]["on"]["approval.denied"] = "work"
        finding = only_bypass(data)
        assert finding.location == "states.approve.on.approval.denied.target"

    def test_a_retry_by_entering_the_step_again(self) -> None:
        """The step's own `step.failed` back into it would run it again with no approval."""
        data = gated()
        data["states"]["work"]["on"]["step.failed"] = "work"
        data["states"]["start"]["after"]["target"] = "failed"
        assert only_bypass(data).location == "states.work.on.step.failed.target"

    def test_a_timeout_into_the_step(self) -> None:
        """`after:` into the gated step enters it when the wait times out."""
        data = gated()
        data["states"]["start"]["after"]["target"] = "work"
        assert only_bypass(data).location == "states.start.after.target"

    def test_an_expired_approval_escalated_into_the_step(self) -> None:
        """An approval that expires and escalates into the step it was for bypasses it."""
        data = gated()
        data["states"]["approve"]["approval"].update(on_expiry="escalate", escalate_to="work")
        finding = only_bypass(data)
        assert finding.location == "states.approve.approval.escalate_to"
        assert finding.message.startswith("the expiry escalation of approval 'approve' enters")

    def test_a_steps_escalation_into_the_step(self) -> None:
        """Another step's `escalate_to` into the gated step bypasses the approval."""
        data = gated()
        data["states"]["start"]["on"]["go"] = "check"
        data["states"]["check"] = {
            "step": {"tool": "svc.undo", "escalate_to": "work",
                     "retry": {"on_exhausted": "escalate"}},
            "on": {"step.succeeded": "approve"}}
        assert only_bypass(data).location == "states.check.step.escalate_to"

    def test_an_eventless_transition_into_the_step(self) -> None:
        """A choice's `always:` branch into the gated step bypasses the approval."""
        data = gated()
        data["states"]["start"]["on"]["go"] = "pick"
        data["states"]["pick"] = {"type": "choice", "always": [
            {"target": "work", "guard": "context.vip"}, "approve"]}
        assert only_bypass(data).location == "states.pick.always[0].target"

    def test_a_budget_exceeded_into_the_step(self) -> None:
        """`budgets.on_exceeded` into the gated step runs it when a budget runs out."""
        data = gated()
        data["budgets"] = {"transitions_max": 10, "on_exceeded": "work"}
        finding = only_bypass(data)
        assert finding.location == "budgets.on_exceeded"

    def test_the_run_starting_in_the_step(self) -> None:
        """A gated step that is the initial state runs with no approval."""
        data = gated()
        data["states"]["start"]["initial"] = False
        data["states"]["work"]["initial"] = True
        data["states"]["start"]["after"]["target"] = "failed"
        data["states"]["work"]["on"]["step.failed"] = "start"
        finding = only_bypass(data)
        assert finding.location == "states.work.initial"
        assert "the run starts in it" in finding.message

    def test_a_compound_whose_initial_state_is_the_step(self) -> None:
        """A transition to a compound state enters its initial child: the gated step."""
        data = gated()
        data["states"]["phase"] = {}
        data["states"]["work"].update(parent="phase", initial=True)
        data["states"]["start"]["on"]["submit"] = "phase"
        finding = only_bypass(data)
        assert finding.location == "states.start.on.submit.target"
        assert "enters 'work' (the initial state of 'phase')" in finding.message

    def test_a_region_starting_in_the_step(self) -> None:
        """A parallel region that starts in a gated step runs it with no approval."""
        data = gated()
        data["states"]["start"]["on"]["submit"] = "both"
        data["states"]["both"] = {"type": "parallel", "done": "done"}
        data["states"]["side"] = {"parent": "both"}
        data["states"]["side_run"] = {"parent": "side", "initial": True,
                                      "step": {"tool": "svc.call", "needs_approval": True},
                                      "on": {"step.succeeded": "side_end",
                                             "step.failed": "side_end"}}
        data["states"]["side_end"] = {"parent": "side", "type": "final", "outcome": "success"}
        data["states"]["side_ask"] = {"parent": "side", "type": "wait", "approval": {
            **APPROVAL, "for_state": "side_run"}, "on": {"approval.granted": "side_run",
                                                          "approval.denied": "side_end"}}
        findings = bypasses(data)
        assert [f.location for f in findings] == ["states.side_run.initial"]
        assert "region 'side' of parallel state 'both' starts in it" in findings[0].message

    def test_the_grant_of_another_steps_approval(self) -> None:
        """The grant of an approval for one step, into another gated step, bypasses the
        other's approval (the grant is for another action)."""
        data = gated()
        data["states"]["start"]["on"]["submit"] = "approve_other"
        data["states"]["approve_other"] = {
            "type": "wait", "approval": {**APPROVAL, "for_state": "other"},
            "on": {"approval.granted": "work", "approval.denied": "failed"}}
        data["states"]["other"] = {"step": {"tool": "svc.undo", "needs_approval": True},
                                   "on": {"step.succeeded": "done", "step.failed": "failed"}}
        findings = lint(data)
        bypass = [f for f in findings if f.code == "approval-bypass"]
        assert [f.location for f in bypass] == ["states.approve_other.on.approval.granted.target"]
        assert bypass[0].message.startswith("`approval.granted` of 'approve_other' enters 'work'")

    def test_a_parents_grant_inherited_by_another_steps_approval(self) -> None:
        """A parent's `approval.granted` into the step, taken also by the grant of an approval
        for another step below it, is a bypass naming that approval state."""
        data = gated()
        data["states"]["approve"].update(parent="asking", initial=True)
        data["states"]["approve"]["on"] = {"approval.denied": "failed"}
        data["states"]["asking"] = {"on": {"approval.granted": "work"}}
        data["states"]["start"]["on"] = {"go": "asking", "submit": "approve_other"}
        data["states"]["approve_other"] = {
            "parent": "asking", "type": "wait", "approval": {**APPROVAL, "for_state": "other"},
            "on": {"approval.denied": "failed"}}
        data["states"]["other"] = {"step": {"tool": "svc.undo", "needs_approval": True},
                                   "on": {"step.succeeded": "done", "step.failed": "failed"}}
        bypass = bypasses(data)
        assert [f.location for f in bypass] == ["states.asking.on.approval.granted.target"]
        assert "taken also when approval state 'approve_other' (an approval of 'other')" in (
            bypass[0].message)

    def test_every_way_in_is_reported(self) -> None:
        """Each bypass is its own finding, in file order."""
        data = gated()
        data["states"]["start"]["on"]["submit"] = "work"
        data["states"]["start"]["after"]["target"] = "work"
        data["states"]["approve"]["on"]["approval.denied"] = "work"
        assert sorted(f.location for f in bypasses(data)) == [
            "states.approve.on.approval.denied.target", "states.start.after.target",
            "states.start.on.submit.target"]

    def test_it_cannot_be_acknowledged(self) -> None:
        """`lint: ignore:` refuses the code, and the bypass is still reported."""
        data = gated()
        data["states"]["start"]["on"]["submit"] = "work"
        data["lint"] = {"ignore": {"approval-bypass": "the shortcut is for admins"}}
        assert sorted(f.code for f in lint(data)) == ["approval-bypass", "lint-ignore-refused"]

    def test_a_yaml_file_gives_the_line(self, tmp_path: Path) -> None:
        """From a file, the finding carries the line of the transition at fault."""
        text = (ROOT / "scenarios" / "approval_gated_deploy.yaml").read_text()
        before = "    on:\n      step.succeeded: failed\n      step.failed: failed\n"
        assert text.count(before) == 1
        path = tmp_path / "deploy.yaml"
        path.write_text(text.replace(before, before.replace(
            "step.succeeded: failed", "step.succeeded: executing")))
        [finding] = lint(path)
        assert finding.code == "approval-bypass"
        assert finding.location == "states.recovery.on.step.succeeded.target"
        line = path.read_text().splitlines()[finding.line - 1]  # type: ignore[operator]
        assert line.strip() == "step.succeeded: executing"
