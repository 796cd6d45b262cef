"""True verdicts on statecharts (issue 17): fuzz campaigns with every fault kind over definitions
using parallel regions, a map, choices and eventless moves, an internal transition, entry and
exit actions, history, a correlated event and a conditional approval. The reference machine
holds with real coverage (transitions taken, region states reached, each construct's own
coverage), and machines made from it with one statechart bug planted (an early join, map items
sharing a key, a choice's branches tried in the wrong order, eventless moves ignored) are
caught by the rule that bug breaks."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import jsonschema
import pytest

from harness import FuzzOptions, ReferenceMachine, SimOptions, fuzz
from harness.report.document import document, report_schema, target_section
from harness.sim.simulator import plan_for
from reference_machine import (
    Accepted,
    CompiledState,
    Decision,
    Event,
    Execution,
    RunEffect,
    Runtime,
    WorkflowDefinition,
    decide,
    load_definition,
)
from reference_machine._decide import join

FINAL = {"type": "final", "outcome": "success"}
FAILED = {"type": "final", "outcome": "failure"}


def log(text: str) -> dict[str, Any]:
    return {"assign": {"log": f"context.log + [{text!r}]"}}


#: Two regions fetched side by side (a call with retries and a timeout, then a hold that is
#: undone if the other region fails), entry and exit actions, the parallel state's own event
#: that abandons them, a join on the regions' outcomes into a choice, and a credit whose
#: approval is asked only over 100 (the amount one region fetched).
PARALLEL = load_definition({
    "name": "chart_parallel",
    "context": {"log": [], "amount": 0, "tier": "none"},
    "tools": {
        "crm": {"idempotency_keys": True, "repeatable": True, "output": {
            "type": "object", "required": ["tier"],
            "properties": {"tier": {"enum": ["free", "pro"]}}}},
        "billing": {"idempotency_keys": True, "repeatable": True, "output": {
            "type": "object", "required": ["amount"],
            "properties": {"amount": {"type": "integer", "minimum": 1, "maximum": 400}}}},
        "hold": {"idempotency_keys": True},
        "release": {"idempotency_keys": True},
        "credit": {"idempotency_keys": True},
    },
    "events": {"cancel": {"sources": ["human"], "sends_max": 1}},
    "compensation_failed": "stuck",
    "states": {
        "fetch": {"initial": True, "type": "parallel", "entry": [log("enter fetch")],
                  "exit": [log("exit fetch")], "on": {"cancel": "cancelled"},
                  "done": [{"target": "route", "guard": "not event.payload.failed"},
                           "failed"]},
        "crm": {"parent": "fetch", "exit": [log("exit crm")]},
        "crm_get": {"parent": "crm", "initial": True,
                    "step": {"tool": "crm", "timeout": "5s", "retry": {"attempts_max": 2}},
                    "on": {"step.succeeded": {"target": "crm_hold", "actions": [
                        {"assign": {"tier": "event.payload.tier"}}]},
                        "step.failed": "crm_failed"}},
        "crm_hold": {"parent": "crm", "step": {"tool": "hold", "timeout": "5s",
                                               "compensation": {"tool": "release"}},
                     "on": {"step.succeeded": "crm_done", "step.failed": "crm_failed"}},
        "crm_done": {"parent": "crm", **FINAL},
        "crm_failed": {"parent": "crm", **FAILED},
        "bill": {"parent": "fetch"},
        "bill_get": {"parent": "bill", "initial": True,
                     "step": {"tool": "billing", "timeout": "5s",
                              "retry": {"attempts_max": 3}},
                     "on": {"step.succeeded": {"target": "bill_done", "actions": [
                         {"assign": {"amount": "event.payload.amount"}}]},
                         "step.failed": "bill_failed"}},
        "bill_done": {"parent": "bill", **FINAL},
        "bill_failed": {"parent": "bill", **FAILED},
        "route": {"type": "choice", "always": [
            {"target": "ask", "guard": "context.amount > 100"}, "issue"]},
        "ask": {"type": "wait", "approval": {
            "for_state": "issue", "summary": "credit {amount}", "roles": ["supervisor"],
            "expires_after": "1h"},
            "on": {"approval.granted": "issue", "approval.denied": "refused"}},
        "issue": {"step": {"tool": "credit", "input": {"amount": "=context.amount"},
                           "reversible": False, "timeout": "5s",
                           "needs_approval": "context.amount > 100"},
                  "on": {"step.succeeded": "done", "step.failed": "refused"}},
        "done": FINAL,
        "refused": FAILED,
        "failed": FAILED,
        "cancelled": {"type": "final", "outcome": "cancelled"},
        "stuck": FAILED,
    },
})

#: A map over three attachments, two at a time: each is read, then filed (the filing is undone
#: when the batch fails); one failure is tolerated, and a choice after the join tells a batch
#: filed whole from one filed in part (on the join's event).
MAP = load_definition({
    "name": "chart_map",
    "context": {"attachments": [{"id": "a1"}, {"id": "a2"}, {"id": "a3"}], "texts": []},
    "tools": {
        "ocr": {"idempotency_keys": True, "repeatable": True, "output": {
            "type": "object", "required": ["chars"],
            "properties": {"chars": {"type": "integer", "minimum": 1, "maximum": 9}}}},
        "file": {"idempotency_keys": True},
        "unfile": {"idempotency_keys": True},
    },
    "compensation_failed": "stuck",
    "states": {
        "each": {"initial": True, "type": "map", "items": "context.attachments",
                 "concurrency_max": 2, "tolerated_failures": 1, "results": "texts",
                 "done": [{"target": "failed", "guard": "event.payload.failing"},
                          "filed_all"]},
        "reading": {"parent": "each", "initial": True,
                    "step": {"tool": "ocr", "input": {"id": "=context.id"}, "timeout": "5s",
                             "retry": {"attempts_max": 2}},
                    "on": {"step.succeeded": {"target": "filing", "actions": [
                        {"assign": {"chars": "event.payload.chars"}}]},
                        "step.failed": "unreadable"}},
        "filing": {"parent": "each",
                   "step": {"tool": "file", "input": {"id": "=context.id"}, "timeout": "5s",
                            "retry": {"attempts_max": 2},
                            "compensation": {"tool": "unfile", "input": {"id": "=context.id"}}},
                   "on": {"step.succeeded": "filed", "step.failed": "not_filed"}},
        "filed": {"parent": "each", **FINAL},
        "unreadable": {"parent": "each", **FAILED},
        "not_filed": {"parent": "each", **FAILED},
        "filed_all": {"type": "choice", "always": [
            {"target": "done", "guard": "len(event.payload.failed) == 0"}, "partly"]},
        "done": FINAL,
        "partly": {"type": "final", "outcome": "partial"},
        "failed": FAILED,
        "stuck": FAILED,
    },
})

#: A quote, then a compound with deep history (entry and exit actions, an internal note, a
#: pause that resumes where it was), a webhook correlated on the ticket, an eventless move and
#: a choice, and the conditional approval of the credit the quote priced.
FLOW = load_definition({
    "name": "chart_flow",
    "context": {"ticket": "T-7", "amount": 0, "notes": 0, "log": []},
    "tools": {
        "quote": {"idempotency_keys": True, "repeatable": True, "output": {
            "type": "object", "required": ["amount"],
            "properties": {"amount": {"type": "integer", "minimum": 1, "maximum": 300}}}},
        "credit": {"idempotency_keys": True},
    },
    "events": {
        "next": {"sources": ["human"]},
        "note": {"sources": ["human"], "sends_max": 2},
        "pause": {"sources": ["human"], "sends_max": 1},
        "resume": {"sources": ["human"]},
        "ci.finished": {"payload": {"type": "object",
                                    "properties": {"ticket": {"type": "string"}},
                                    "required": ["ticket"]},
                        "correlate": {"ticket": "context.ticket"}},
    },
    "states": {
        "quoting": {"initial": True,
                    "step": {"tool": "quote", "timeout": "5s", "retry": {"attempts_max": 3}},
                    "on": {"step.succeeded": {"target": "work", "actions": [
                        {"assign": {"amount": "event.payload.amount"}}]},
                        "step.failed": "failed"}},
        "work": {"history": "deep", "entry": [log("enter work")], "exit": [log("exit work")],
                 "on": {"pause": "paused"}},
        "drafting": {"parent": "work", "initial": True, "type": "wait",
                     "after": {"delay": 3600, "target": "gave_up"},
                     "on": {"next": "checking",
                            "note": {"actions": [{"assign": {"notes": "context.notes + 1"}}]}}},
        "checking": {"parent": "work", "type": "wait",
                     "after": {"delay": 3600, "target": "gave_up"},
                     "on": {"ci.finished": "review"}},
        "paused": {"type": "wait", "after": {"delay": 3600, "target": "gave_up"},
                   "on": {"resume": "work"}},
        "review": {"always": [{"target": "route", "actions": [log("reviewed")]}]},
        "route": {"type": "choice", "always": [
            {"target": "ask", "guard": "context.amount > 100"}, "issue"]},
        "ask": {"type": "wait", "approval": {
            "for_state": "issue", "summary": "credit {amount}", "roles": ["supervisor"],
            "expires_after": "1h"},
            "on": {"approval.granted": "issue", "approval.denied": "refused"}},
        "issue": {"step": {"tool": "credit", "input": {"amount": "=context.amount"},
                           "reversible": False, "timeout": "5s",
                           "needs_approval": "context.amount > 100"},
                  "on": {"step.succeeded": "done", "step.failed": "refused"}},
        "done": FINAL,
        "refused": FAILED,
        "gave_up": {"type": "final", "outcome": "abandoned"},
        "failed": FAILED,
    },
})


def campaign(definition: WorkflowDefinition, runs: int, tmp_path: Path, *,
             machine: Any = ReferenceMachine, swarm: bool = False) -> Any:
    """Fuzzes with every fault kind the definition can take (in every run, or swarm)."""
    options = FuzzOptions(runs=runs, swarm=swarm, replay_dir=tmp_path,
                          sim=SimOptions(plan=plan_for(definition)))
    return fuzz(definition, options, machine=machine)


def reached(report: Any) -> dict[str, tuple[int, int]]:
    return {name: (part["reached"], part["of"])
            for name, part in report.summary()["coverage"].items()}


class TestTheReferenceHolds:
    @pytest.mark.parametrize("swarm", [False, True])
    def test_a_parallel_state_its_join_a_choice_and_a_conditional_approval(
            self, swarm: bool, tmp_path: Path) -> None:
        report = campaign(PARALLEL, 150, tmp_path, swarm=swarm)
        assert report.held, report.summary()["failures"]
        coverage = report.summary()["coverage"]
        assert coverage["transitions"]["reached"] >= 15, coverage  # every one, the joins too
        assert coverage["transitions"]["missing"] == []
        assert set(coverage["states"]["missing"]) <= {"stuck"}  # no undo failed past retries
        assert reached(report)["regions"] == (2, 2) and reached(report)["approvals"] == (2, 2)
        assert coverage["guards"]["missing"] == []

    def test_a_map_its_items_results_and_undoing_a_failed_batch(self, tmp_path: Path
                                                                 ) -> None:
        report = campaign(MAP, 150, tmp_path)
        assert report.held, report.summary()["failures"]
        coverage = report.summary()["coverage"]
        assert coverage["transitions"]["reached"] == 8 and coverage["regions"]["reached"] == 1
        assert coverage["transitions"]["missing"] == [] and coverage["states"]["missing"] == []
        assert coverage["eventless"]["missing"] == [] and coverage["guards"]["missing"] == []

    def test_history_an_internal_note_a_correlated_webhook_and_eventless_moves(
            self, tmp_path: Path) -> None:
        report = campaign(FLOW, 150, tmp_path)
        assert report.held, report.summary()["failures"]
        coverage = reached(report)
        assert coverage["transitions"] == (18, 18), coverage  # the internal note's included
        assert coverage["states"] == (12, 12) and coverage["eventless"] == (3, 3)
        assert coverage["history"] == (1, 1) and coverage["approvals"] == (2, 2), coverage
        assert "wrong_correlation" in report.faults

    def test_the_report_with_statechart_coverage_keeps_its_schema(self, tmp_path: Path
                                                                   ) -> None:
        """The coverage keys a statechart adds have the shape every coverage key has."""
        report = campaign(PARALLEL, 20, tmp_path)
        section = target_section("chart_parallel", "fuzz", PARALLEL, "reference",
                                 report.summary(), report.coverage)
        written = document("fuzz", [section])
        jsonschema.validate(written, report_schema())
        assert {"regions", "eventless", "approvals"} <= set(written["targets"][0]["coverage"])


# -- planted bugs ------------------------------------------------------------------------------


class _EarlyJoinRuntime(Runtime):
    @staticmethod
    def decide(definition: WorkflowDefinition, execution: Execution, event: Event, now: int,
               **kwargs: Any) -> Decision:
        decision = decide(definition, execution, event, now, **kwargs)
        after = decision.execution if isinstance(decision, Accepted) else None
        if (after is not None and execution.regions and after.regions
                and decision.transition is not None  # type: ignore[union-attr]
                and any(region.status == "final" for region in after.regions)):
            # the bug: the first region to finish ends the parallel state
            return join(definition, after, list(decision.commands),  # type: ignore[union-attr]
                        event, now, False, None, decision.transition.inner)  # type: ignore[union-attr]
        return decision


class EarlyJoin(ReferenceMachine):
    """Joins a parallel or map state as soon as one region (item) is final."""

    runtime_class = _EarlyJoinRuntime


def _shared_key(key: str) -> str:
    """`x1/each/1/0/reading/1` -> `x1/each/1/reading/1`: the item's index left out."""
    parts = key.split("/")
    return "/".join(parts[:3] + parts[4:]) if len(parts) >= 6 and parts[1] == "each" else key


class _SharedKeyRuntime(Runtime):
    @staticmethod
    def decide(definition: WorkflowDefinition, execution: Execution, event: Event, now: int,
               **kwargs: Any) -> Decision:
        decision = decide(definition, execution, event, now, **kwargs)
        if not isinstance(decision, Accepted):
            return decision
        # the bug: a map item's calls go out under the map's key, not the item's
        commands = tuple(command._replace(key=_shared_key(command.key))
                         if isinstance(command, RunEffect) else command
                         for command in decision.commands)
        return decision._replace(commands=commands)


class SharedItemKeys(ReferenceMachine):
    """Sends every map item's call under one key: a service that honours keys answers the
    second item with the first's result, and its attachment is never filed."""

    runtime_class = _SharedKeyRuntime


def _changed(definition: WorkflowDefinition,
             change: Callable[[CompiledState], CompiledState]) -> WorkflowDefinition:
    """Gives the definition with each compiled state changed (what a machine that reads its
    definition wrongly runs on, under the same state names)."""
    states = {name: change(state) for name, state in definition.states.items()}
    return dataclasses.replace(definition, states=MappingProxyType(states))


class ReversedChoices(ReferenceMachine):
    """Tries a choice's branches last first: the default before the guarded ones."""

    def __init__(self, definition: WorkflowDefinition, tools: Any, probe: Any = None,
                 **kwargs: Any) -> None:
        super().__init__(_changed(definition, lambda state: dataclasses.replace(
            state, always=state.always[::-1]) if state.kind == "choice" else state),
            tools, probe, **kwargs)


class NoEventlessMoves(ReferenceMachine):
    """Ignores `always:` on a state that is not a choice: the run rests where it should move
    on."""

    def __init__(self, definition: WorkflowDefinition, tools: Any, probe: Any = None,
                 **kwargs: Any) -> None:
        super().__init__(_changed(definition, lambda state: dataclasses.replace(
            state, always=()) if state.kind != "choice" else state), tools, probe, **kwargs)


PLANTED: Mapping[str, tuple[Any, WorkflowDefinition, str]] = {
    "early_join_parallel": (EarlyJoin, PARALLEL, "join_after_regions"),
    "early_join_map": (EarlyJoin, MAP, "join_after_regions"),
    "shared_item_keys": (SharedItemKeys, MAP, "region_keys_distinct"),
    "choice_branches_reversed": (ReversedChoices, MAP, "guards_held"),
    "eventless_moves_ignored": (NoEventlessMoves, FLOW, "guards_held"),
}


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_a_planted_statechart_bug_is_caught_by_its_rule(name: str, tmp_path: Path) -> None:
    machine, definition, rule = PLANTED[name]
    report = campaign(definition, 200, tmp_path, machine=machine, swarm=True)
    assert not report.held
    rules = {failure.rule for failure in report.failures}
    assert rule in rules, [str(v) for f in report.failures for v in f.violations]
    (failure,) = [f for f in report.failures if f.rule == rule]
    assert failure.counterexample is not None and failure.counterexample.steps <= 12
