"""Hand-made histories of statecharts, as the reference machine's store tells them (keys
`{execution}/{P}/{visit}/{region}/{state}/{visit}`, region moves in `inner`, region states in
`regions`): a parallel state of two regions and a map of three items, with the records
they are made of. The checkers' tests share them."""

from __future__ import annotations

from typing import Any

from harness import Commanded, Committed, HistoryRecord
from reference_machine import load_definition

FINAL = {"type": "final", "outcome": "success"}
FAILED = {"type": "final", "outcome": "failure"}


def commit(step: int, state: str, *, source: str = "", moved: str = "", forced: str = "",
           event_type: str = "", answers: str = "", payload: Any = None,
           context: Any = None, effects: tuple[Commanded, ...] = (),
           via: tuple[str, ...] = (), inner: tuple[tuple[str, str, str], ...] = (),
           regions: tuple[tuple[str, str, str], ...] = (), execution: str = "x1",
           event_source: str = "system", decision: str = "accepted") -> Committed:
    """Gives a commit record (the defaults: an accepted event that moved nothing)."""
    return Committed(step, 0, execution, f"e{step}", decision, step, state, source, moved,
                     forced, event_type or moved, event_source, answers, payload or {},
                     context if context is not None else {}, effects, via, inner, regions)


def call(key: str, tool: str, attempt: int = 1) -> Commanded:
    return Commanded(f"{key}#{attempt}", tool, key)


PARALLEL = load_definition({
    "name": "fetch_both",
    "tools": {"crm": {"idempotency_keys": True}, "billing": {"idempotency_keys": True},
              "hold": {"idempotency_keys": True}, "release": {"idempotency_keys": True},
              "reserve": {"idempotency_keys": True}, "unreserve": {"idempotency_keys": True}},
    "events": {"cancel": {}},
    "compensation_failed": "stuck",
    "states": {
        "reserving": {"initial": True, "step": {"tool": "reserve",
                                                "compensation": {"tool": "unreserve"}},
                      "on": {"step.succeeded": "fetch", "step.failed": "failed"}},
        "fetch": {"type": "parallel", "on": {"cancel": "failed"},
                  "done": [{"target": "joined", "guard": "not event.payload.failed"},
                           "failed"]},
        "crm": {"parent": "fetch"},
        "crm_get": {"parent": "crm", "initial": True,
                    "step": {"tool": "crm", "retry": {"attempts_max": 2},
                             "compensation": {"tool": "release"}},
                    "on": {"step.succeeded": "crm_hold", "step.failed": "crm_failed"}},
        "crm_hold": {"parent": "crm", "step": {"tool": "hold",
                                               "compensation": {"tool": "release"}},
                     "on": {"step.succeeded": "crm_done", "step.failed": "crm_failed"}},
        "crm_done": {"parent": "crm", **FINAL},
        "crm_failed": {"parent": "crm", **FAILED},
        "bill": {"parent": "fetch"},
        "bill_get": {"parent": "bill", "initial": True, "step": {"tool": "billing"},
                     "on": {"step.succeeded": "bill_done", "step.failed": "bill_failed"}},
        "bill_done": {"parent": "bill", **FINAL},
        "bill_failed": {"parent": "bill", **FAILED},
        "joined": FINAL,
        "failed": FAILED,
        "stuck": FAILED,
    },
})
CRM = "x1/fetch/1/crm"
BILL = "x1/fetch/1/bill"


def regions(crm: str, bill: str, crm_status: str = "running", bill_status: str = "running"
            ) -> tuple[tuple[str, str, str], ...]:
    return ((CRM, crm, crm_status), (BILL, bill, bill_status))


def fetched() -> list[HistoryRecord]:
    """A correct run: reserve, both regions' calls, the crm region's hold, the join."""
    return [
        commit(1, "reserving", moved="execution.started",
               effects=(call("x1/reserving/1", "reserve"),)),
        commit(2, "fetch", source="reserving", moved="step.succeeded",
               answers="x1/reserving/1#1",
               effects=(call(f"{CRM}/crm_get/1", "crm"), call(f"{BILL}/bill_get/1", "billing")),
               inner=(("", "step.succeeded", "crm_get"), ("", "step.succeeded", "bill_get")),
               regions=regions("crm_get", "bill_get")),
        commit(3, "fetch", source="fetch", moved="step.succeeded",
               answers=f"{CRM}/crm_get/1#1", effects=(call(f"{CRM}/crm_hold/1", "hold"),),
               inner=(("crm_get", "step.succeeded", "crm_hold"),),
               regions=regions("crm_hold", "bill_get")),
        commit(4, "fetch", source="fetch", moved="step.succeeded",
               answers=f"{BILL}/bill_get/1#1", inner=(("bill_get", "step.succeeded", "bill_done"),),
               regions=regions("crm_hold", "bill_done", bill_status="final")),
        commit(5, "joined", source="fetch", moved="done", answers=f"{CRM}/crm_hold/1#1",
               inner=(("crm_hold", "step.succeeded", "crm_done"),)),
    ]


MAP = load_definition({
    "name": "attachments",
    "context": {"attachments": []},
    "tools": {"extract": {"idempotency_keys": True}},
    "states": {
        "each": {"initial": True, "type": "map", "items": "context.attachments",
                 "concurrency_max": 2, "tolerated_failures": 1, "results": "texts",
                 "done": [{"target": "done", "guard": "not event.payload.failing"}, "failed"]},
        "extract": {"parent": "each", "initial": True,
                    "step": {"tool": "extract", "input": {"url": "=context.url"},
                             "retry": {"attempts_max": 2}},
                    "on": {"step.succeeded": {"target": "extracted", "actions": [
                        {"assign": {"text": "event.payload.text"}}]},
                        "step.failed": "unreadable"}},
        "extracted": {"parent": "each", **FINAL},
        "unreadable": {"parent": "each", **FAILED},
        "done": FINAL,
        "failed": FAILED,
    },
})
ITEMS = [{"url": "u0"}, {"url": "u1"}, {"url": "u2"}]
ITEM = "x1/each/1/{}"


def items(*states: tuple[str, str]) -> tuple[tuple[str, str, str], ...]:
    return tuple((ITEM.format(index), state, status)
                 for index, (state, status) in enumerate(states))


def mapped(texts: Any = None, *, last: str = "extracted") -> list[HistoryRecord]:
    """Three attachments, two at a time: item 1 answers first and item 2 starts in its slot,
    item 0 is unreadable (one failure is tolerated), item 2 ends the map."""
    context = {"attachments": ITEMS}
    key = ITEM + "/extract/1"
    results = texts if texts is not None else [None, {"url": "u1", "text": "one"},
                                               {"url": "u2", "text": "two"}]
    return [
        commit(1, "each", moved="execution.started", context=context,
               effects=(call(key.format(0), "extract"), call(key.format(1), "extract")),
               inner=(("", "execution.started", "extract"), ("", "execution.started", "extract")),
               regions=items(("extract", "running"), ("extract", "running"), ("", "created"))),
        commit(2, "each", source="each", moved="step.succeeded", context=context,
               answers=f"{key.format(1)}#1", effects=(call(key.format(2), "extract"),),
               inner=(("extract", "step.succeeded", "extracted"),
                      ("", "step.succeeded", "extract")),
               regions=items(("extract", "running"), ("extracted", "final"),
                             ("extract", "running"))),
        commit(3, "each", source="each", moved="step.failed", context=context,
               answers=f"{key.format(0)}#1", inner=(("extract", "step.failed", "unreadable"),),
               regions=items(("unreadable", "final"), ("extracted", "final"),
                             ("extract", "running"))),
        commit(4, "done", source="each", moved="done", answers=f"{key.format(2)}#1",
               context={**context, "texts": results},
               inner=(("extract", "step.succeeded", last),)),
    ]
