"""The smallest valid workflow the definition tests start from and break."""

from __future__ import annotations

import copy
from typing import Any

_BASE: dict[str, Any] = {
    "name": "wf",
    "version": "1",
    "context": {"a": None, "count": 0, "vip": False},
    "tools": {
        "svc.call": {"idempotency_keys": True},
        "svc.undo": {"idempotency_keys": True},
    },
    "events": {"go": {}, "submit": {}},
    "states": {
        "start": {"initial": True, "type": "wait", "after": {"delay": "1h", "target": "failed"},
                  "on": {"go": "work"}},
        "work": {
            "step": {"tool": "svc.call", "input": {"n": "=context.count"}},
            "on": {"step.succeeded": "done", "step.failed": "failed"},
        },
        "done": {"type": "final", "outcome": "success"},
        "failed": {"type": "final", "outcome": "failure"},
    },
}


def base() -> dict[str, Any]:
    """Gives a fresh deep copy of the small valid workflow, for a case to break."""
    return copy.deepcopy(_BASE)


def step_of(data: dict[str, Any], state: str = "work") -> dict[str, Any]:
    """Gives a state's step (by default `work`'s), for cases that break it."""
    step: dict[str, Any] = data["states"][state]["step"]
    return step
