"""The statechart checkers against statechart bugs inside regions and map items that every
invariant let through (a false `held`). Each test plants one bug in the reference machine,
makes sure (RuntimeError otherwise) the bug shows in the history, then expects a violation."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from invariant_cases import FINAL, WAITING_REGION, ChangedMachine, history_of, reverse_choices

from harness import Applied, Committed, ReferenceMachine, SimOptions, Simulator, check
from reference_machine import (
    Accepted,
    Decision,
    Event,
    Execution,
    Runtime,
    WorkflowDefinition,
    decide,
    load_definition,
)

FAILED = {"type": "final", "outcome": "failure"}

#: A region whose choice asks a supervisor for a credit over 100 (the credit's step needs the
#: approval under the same condition); the context's amount is 500.
APPROVAL = load_definition({
    "name": "region_approval",
    "context": {"amount": 500},
    "tools": {"credit": {"idempotency_keys": True}},
    "states": {
        "par": {"initial": True, "type": "parallel", "done": "end"},
        "ra": {"parent": "par"},
        "route": {"parent": "ra", "initial": True, "type": "choice", "always": [
            {"target": "ask", "guard": "context.amount > 100"}, "issue"]},
        "ask": {"parent": "ra", "type": "wait", "approval": {
            "for_state": "issue", "summary": "credit {amount}", "roles": ["supervisor"],
            "expires_after": "1h"},
            "on": {"approval.granted": "issue", "approval.denied": "ra_no"}},
        "issue": {"parent": "ra", "step": {
            "tool": "credit", "input": {"amount": "=context.amount"}, "reversible": False,
            "needs_approval": "context.amount > 100"},
            "on": {"step.succeeded": "ra_ok", "step.failed": "ra_no"}},
        "ra_ok": {"parent": "ra", **FINAL},
        "ra_no": {"parent": "ra", **FAILED},
        **WAITING_REGION,
        "end": FINAL,
    },
})


#: A map over two items, each read by `ocr`; the join puts each item's context in `res`.
MAP = load_definition({
    "name": "map_results",
    "context": {"items": [{"id": "a"}, {"id": "b"}], "res": []},
    "tools": {"ocr": {"idempotency_keys": True, "output": {
        "type": "object", "required": ["chars"],
        "properties": {"chars": {"type": "integer", "minimum": 1, "maximum": 9}}}}},
    "states": {
        "each": {"initial": True, "type": "map", "items": "context.items", "results": "res",
                 "done": "end"},
        "read": {"parent": "each", "initial": True,
                 "step": {"tool": "ocr", "input": {"id": "=context.id"}},
                 "on": {"step.succeeded": {"target": "ok", "actions": [
                     {"assign": {"chars": "event.payload.chars"}}]}, "step.failed": "ok"}},
        "ok": {"parent": "each", **FINAL},
        "end": FINAL,
    },
})


def _skip_approval(state: Any) -> Any:
    state = reverse_choices(state)
    if state.step is not None and state.step.needs_approval:
        state = dataclasses.replace(state, step=dataclasses.replace(
            state.step, needs_approval=False, approval_when=None))
    return state


class RegionSkipsApproval(ChangedMachine):
    """Inside a region, goes straight to the credit and runs it without asking anyone."""

    change = staticmethod(_skip_approval)


class _LostItemRuntime(Runtime):
    @staticmethod
    def decide(definition: WorkflowDefinition, execution: Execution, event: Event, now: int,
               **kwargs: Any) -> Decision:
        decision = decide(definition, execution, event, now, **kwargs)
        if isinstance(decision, Accepted):
            res = decision.execution.context.get("res")
            if isinstance(res, list) and len(res) > 1 and res[0] != res[1]:
                # the bug: the first item's result in every slot, the others' lost
                context = {**decision.execution.context, "res": [res[0]] * len(res)}
                decision = decision._replace(
                    execution=decision.execution._replace(context=context))
        return decision


class MapLosesItems(ReferenceMachine):
    runtime_class = _LostItemRuntime


def test_a_region_step_gated_by_a_conditional_approval_run_without_one() -> None:
    """Found as a false held (a region's context was not in the history); the history now
    records each region's context, and approved_effects judges the region's condition."""
    history = history_of(APPROVAL, RegionSkipsApproval, 1)
    credits = [r for r in history if type(r) is Applied and r.tool == "credit"]
    if not credits or any(type(r) is Committed and r.event_type == "approval.granted"
                          for r in history):
        raise RuntimeError("the planted bug did not show")
    # credit of 500 (needs approval: 500 > 100) took effect, no approval asked or granted
    assert any(v.rule == "approved_effects" for v in check(APPROVAL, history))


def test_a_map_join_whose_results_lose_an_item() -> None:
    """Was a false held (the results' shape alone was checked): an item recorded final before
    the join must have its final context as its result. An item that finishes in the joining
    commit itself was never recorded, and its result is not judged: the seed is one where item
    b finished first."""
    for seed in range(40):
        history = history_of(MAP, MapLosesItems, seed)
        joined = [r for r in history if type(r) is Committed and r.state == "end"]
        before = [r for r in history if type(r) is Committed and r.state == "each"]
        if joined and joined[-1].context is not None and {
                e["id"] for e in joined[-1].context["res"]} == {"a"} and any(
                rid.endswith("/1") and status == "final" for rid, _, status in before[-1].regions):
            break
    else:
        raise RuntimeError("the planted bug did not show")
    found = [v.message for v in check(MAP, history) if v.rule == "map_results_per_item"]
    assert len(found) == 1 and "for item 1, whose final context was {'id': 'b'" in found[0], found
    assert not check(MAP, history_of(MAP, ReferenceMachine, seed))


# -- false alarms a review found in the checks above, each on the correct reference machine ---

#: Regions started by a join's `done` on the way into `par` (the commit records another event).
JOIN_INTO_PAR = {"name": "join_into_par", "states": {
    "p1": {"initial": True, "type": "parallel", "done": "par"},
    "r1": {"parent": "p1"},
    "r1w": {"parent": "r1", "initial": True, "type": "wait",
            "after": {"delay": 60, "target": "r1ok"}},
    "r1ok": {"parent": "r1", **FINAL},
    "par": {"type": "parallel", "done": "end"},
    "ra": {"parent": "par"},
    "route": {"parent": "ra", "initial": True, "type": "choice",
              "always": [{"target": "a", "guard": "event.type == 'done'"}, "b"]},
    "a": {"parent": "ra", **FINAL}, "b": {"parent": "ra", **FINAL},
    **WAITING_REGION, "end": FINAL}}

#: Regions started by a step's timeout (recorded: timer.fired; entered on: step.failed).
TIMEOUT_INTO_PAR = {"name": "timeout_into_par", "tools": {"t": {"idempotency_keys": True}},
                    "states": {
    "s": {"initial": True, "step": {"tool": "t", "timeout": "5s", "retry": {"attempts_max": 1}},
          "on": {"step.succeeded": "end", "step.failed": "par"}},
    "par": {"type": "parallel", "done": "end"},
    "ra": {"parent": "par"},
    "route": {"parent": "ra", "initial": True, "type": "choice",
              "always": [{"target": "a", "guard": "event.type == 'step.failed'"}, "b"]},
    "a": {"parent": "ra", **FINAL}, "b": {"parent": "ra", **FINAL},
    **WAITING_REGION, "end": FINAL}}

#: `par` entered twice on one path: its first visit's regions start on another context.
TWO_ROUNDS = {"name": "par_two_rounds", "context": {"n": 0}, "states": {
    "par": {"initial": True, "type": "parallel",
            "done": [{"target": "par", "guard": "context.n == 0",
                      "actions": [{"assign": {"n": "context.n + 1"}}]}, "end"]},
    "ra": {"parent": "par"},
    "route": {"parent": "ra", "initial": True, "type": "choice",
              "always": [{"target": "ra_done", "guard": "context.n == 0"}, "ra_wait"]},
    "ra_wait": {"parent": "ra", "type": "wait", "after": {"delay": 60, "target": "ra_done"}},
    "ra_done": {"parent": "ra", **FINAL},
    "end": FINAL}}

#: A region's ambiguous failure escalates (`escalate_to`) though no step.failed guard holds.
AMBIGUOUS = {"name": "region_ambiguous", "tools": {"t": {}}, "states": {
    "par": {"initial": True, "type": "parallel", "done": "end"},
    "ra": {"parent": "par"},
    "s": {"parent": "ra", "initial": True,
          "step": {"tool": "t", "retry": {"attempts_max": 1}, "escalate_to": "check",
                   "reversible": False},
          "on": {"step.succeeded": "ok", "step.failed": [
              {"target": "given_up", "guard": "event.payload.category != 'timeout'"}]}},
    "check": {"parent": "ra", **FINAL}, "given_up": {"parent": "ra", **FAILED},
    "ok": {"parent": "ra", **FINAL},
    **WAITING_REGION, "end": FINAL}}

#: Map items whose states' exit actions run at the join, on the final contexts.
MAP_EXIT = {"name": "map_exit", "context": {"items": [{"id": "a"}, {"id": "b"}], "res": []},
            "tools": {"ocr": {"idempotency_keys": True}}, "states": {
    "each": {"initial": True, "type": "map", "items": "context.items", "results": "res",
             "done": "end"},
    "work": {"parent": "each", "initial": True, "exit": [{"assign": {"stamped": "True"}}]},
    "read": {"parent": "work", "initial": True,
             "step": {"tool": "ocr", "input": {"id": "=context.id"}},
             "on": {"step.succeeded": "ok", "step.failed": "ok"}},
    "ok": {"parent": "work", **FINAL},
    "end": FINAL}}

#: Older false alarms a second review found (the join checks, before the region ones):

#: A map joined as it is entered, an item of which could not start (no branch of its choice
#: holds): the machine counts it failed, with no move to show.
MAP_UNSTARTED = {"name": "map_unstarted", "context": {"items": [1, 9]}, "states": {
    "m": {"initial": True, "type": "map", "items": "context.items", "results": "res",
          "tolerated_failures": 1,
          "done": [{"target": "end", "guard": "not event.payload.failing"}, "failed"]},
    "c": {"parent": "m", "initial": True, "type": "choice",
          "always": [{"target": "ok", "guard": "context.item > 5"}]},
    "ok": {"parent": "m", **FINAL},
    "end": FINAL, "failed": FAILED}}

#: A region's exit action changes what a `done:` guard reads, after the join chose (SCXML).
REGION_EXIT_JOIN = {"name": "region_exit_join", "context": {"j": 0}, "states": {
    "par": {"initial": True, "type": "parallel",
            "done": [{"target": "a", "guard": "context.j == 1"}, "b"]},
    "ra": {"parent": "par", "exit": [{"assign": {"j": "1"}}]},
    "ra1": {"parent": "ra", "initial": True, "type": "wait",
            "after": {"delay": 60, "target": "ra_ok"}},
    "ra_ok": {"parent": "ra", **FINAL},
    **WAITING_REGION,
    "a": FINAL, "b": FINAL}}

#: The same for a map: an item's exit action changes its result after the join chose.
MAP_EXIT_DONE = {"name": "map_exit_done", "context": {"items": [{"id": "a"}, {"id": "b"}]},
                 "states": {
    "each": {"initial": True, "type": "map", "items": "context.items", "results": "res",
             "done": [{"target": "stamped", "guard": "context.res[0].stamped == True"},
                      "plain"]},
    "work": {"parent": "each", "initial": True, "exit": [{"assign": {"stamped": "True"}}]},
    "w": {"parent": "work", "initial": True, "type": "wait",
          "after": {"delay": 60, "target": "ok"}},
    "ok": {"parent": "work", **FINAL},
    "stamped": FINAL, "plain": FINAL}}

#: A parallel state whose `done:` enters it again: the new visit's regions start in the
#: joining commit.
PAR_AGAIN = {"name": "par_again", "context": {"j": 0}, "states": {
    "par": {"initial": True, "type": "parallel", "on_region_failure": "wait",
            "done": [{"target": "par", "guard": "context.j < 1",
                      "actions": [{"assign": {"j": "context.j + 1"}}]}, "end"]},
    "ra": {"parent": "par"},
    "ra1": {"parent": "ra", "initial": True, "type": "wait",
            "after": {"delay": 60, "target": "ra_ok"}},
    "ra_ok": {"parent": "ra", **FINAL},
    "rb": {"parent": "par"},
    "rb1": {"parent": "rb", "initial": True, "type": "wait",
            "after": {"delay": 120, "target": "rb_ok"}},
    "rb_ok": {"parent": "rb", **FINAL},
    "end": FINAL}}


@pytest.mark.parametrize(("spec", "seeds"), [
    (JOIN_INTO_PAR, range(5)), (TIMEOUT_INTO_PAR, range(30)), (TWO_ROUNDS, range(5)),
    (AMBIGUOUS, range(30)), (MAP_EXIT, range(5)), (MAP_UNSTARTED, range(3)),
    (REGION_EXIT_JOIN, range(3)), (MAP_EXIT_DONE, range(3)), (PAR_AGAIN, range(3))],
    ids=["regions-started-by-a-join", "regions-started-by-a-timeout", "parallel-entered-twice",
         "region-escalated-past-its-guards", "map-item-exit-actions", "map-item-never-started",
         "region-exit-action-after-the-join-chose", "map-item-exit-action-after-the-join-chose",
         "parallel-state-joined-into-itself"])
def test_the_correct_machine_is_not_blamed(spec: dict[str, Any], seeds: range) -> None:
    """Regions started on an event the machine made (a join's `done`, a timeout's failure),
    a parallel state entered twice on one path, a region's forced move where no guard held,
    and map items whose exit actions run at the join: each was blamed on the reference
    machine by the region checks (guards_held, map_results_per_item) when they were new. And
    older ones of the join checks: a map joined as entered with an item that never started,
    exit actions that change what a `done:` guard read after it chose, a parallel state
    joined into itself (guards_held, map_results_per_item, join_after_regions)."""
    definition = load_definition(spec)
    for seed in seeds:
        history = Simulator(definition, SimOptions(seed=seed, executions=1)).run().history
        assert [v.message for v in check(definition, history)] == [], seed


#: A region's approved credit of `amount` waits to retry while an internal transition of the
#: parallel state adds 50 to `amount`, which is pushed into the region.
PUSHED_UNDER_RETRY = load_definition({
    "name": "push_under_retry", "context": {"amount": 500},
    "events": {"bump": {"sources": ["human"]}},
    "tools": {"credit": {"idempotency_keys": True}},
    "states": {
        "par": {"initial": True, "type": "parallel", "done": "end",
                "on": {"bump": {"actions": [{"assign": {"amount": "context.amount + 50"}}]}}},
        "ra": {"parent": "par"},
        "ask": {"parent": "ra", "initial": True, "type": "wait", "approval": {
            "for_state": "issue", "summary": "credit {amount}", "roles": ["supervisor"],
            "expires_after": "1h"},
            "on": {"approval.granted": "issue", "approval.denied": "ra_ok"}},
        "issue": {"parent": "ra", "step": {
            "tool": "credit", "input": {"amount": "=context.amount"}, "needs_approval": True,
            "reversible": False, "retry": {"attempts_max": 3, "delay_initial": "1s"}},
            "on": {"step.succeeded": "ra_ok", "step.failed": "ra_ok"}},
        "ra_ok": {"parent": "ra", **FINAL},
        "end": FINAL}})


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=(
    "the reference machine's retry computes a step's input again from the context, which a "
    "parallel state's internal transition may have changed: the credit runs under its key "
    "with an input never approved"))
def test_a_retry_runs_the_input_that_was_approved() -> None:
    """Found by a review of the region checks: a true alarm, on the reference machine."""
    history = history_of(PUSHED_UNDER_RETRY, ReferenceMachine, 28)
    assert [v.message for v in check(PUSHED_UNDER_RETRY, history)] == []
