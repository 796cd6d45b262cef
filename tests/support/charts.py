"""Statechart definitions the tests share."""

from __future__ import annotations

from typing import Any

WAIT = {"type": "wait", "after": {"delay": 60, "target": "end"}}
END = {"type": "final", "outcome": "success"}


def chart() -> dict[str, Any]:
    """A correct chart using a parallel state, a map, a choice and history."""
    return {
        "name": "chart",
        "context": {"items": [1, 2], "amount": 0},
        "tools": {"t": {"idempotency_keys": True}},
        "events": {"go": {"payload": {"type": "object",
                                      "properties": {"id": {"type": "string"}}}},
                   "pause": {}},
        "states": {
            "both": {"initial": True, "type": "parallel", "done": "each"},
            "left": {"parent": "both"},
            "l1": {"parent": "left", "initial": True, **WAIT, "after": {"delay": 60,
                                                                        "target": "l2"}},
            "l2": {"parent": "left", **END},
            "right": {"parent": "both"},
            "r1": {"parent": "right", "initial": True, "step": {"tool": "t"},
                   "on": {"step.succeeded": "r2", "step.failed": "r2"}},
            "r2": {"parent": "right", **END},
            "each": {"type": "map", "items": "context.items", "done": "route"},
            "work": {"parent": "each", "initial": True, "step": {"tool": "t"},
                     "on": {"step.succeeded": "worked", "step.failed": "worked"}},
            "worked": {"parent": "each", **END},
            "route": {"type": "choice", "always": [
                {"target": "end", "guard": "context.amount > 1"}, "resumable"]},
            "resumable": {"history": "shallow", "on": {"pause": "end"}},
            "r_a": {"parent": "resumable", "initial": True, **WAIT, "on": {"go": "r_b"}},
            "r_b": {"parent": "resumable", **WAIT},
            "end": END,
        },
    }
