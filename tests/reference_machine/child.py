"""A worker process for the process-level tests: runs the refund workflow against a SQLite
store, with tools that write an effect ledger into their own SQLite file, and can be told to
SIGKILL itself at a crash point. Run as `python child.py MODE STORE LEDGER [POINT HIT]`."""

from __future__ import annotations

import os
import signal
import sqlite3
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # run as a script
from refund_world import REFUND, TOOL_OUTPUTS, finish

from reference_machine import SQLiteStore
from reference_machine._runtime import Runtime, Success, ToolOutcome


def ledger_tools(path: str) -> dict[str, Callable[[Mapping[str, Any], str], ToolOutcome]]:
    """Gives tools that record each applied effect in a ledger file, committed at once: a tool
    honouring keys applies a key once, the others apply every call."""
    db = sqlite3.connect(path, isolation_level=None, timeout=30)
    db.execute("CREATE TABLE IF NOT EXISTS applied (tool TEXT, key TEXT)")

    def make(name: str) -> Callable[[Mapping[str, Any], str], ToolOutcome]:
        honours_keys = REFUND.tools[name].idempotency_keys

        def call(payload: Mapping[str, Any], key: str) -> ToolOutcome:
            seen = db.execute("SELECT 1 FROM applied WHERE tool = ? AND key = ?",
                              (name, key)).fetchone()
            if not (honours_keys and seen):
                db.execute("INSERT INTO applied VALUES (?, ?)", (name, key))
            return Success(TOOL_OUTPUTS[name])

        return call

    return {name: make(name) for name in TOOL_OUTPUTS}


def kill_at(point: str, hit: int) -> Callable[[str], None]:
    count = {"n": 0}

    def hook(name: str) -> None:
        if name == point:
            count["n"] += 1
            if count["n"] == hit:
                os.kill(os.getpid(), signal.SIGKILL)

    return hook


def main(argv: list[str]) -> None:
    mode, store_path, ledger_path = argv[:3]
    crash = kill_at(argv[3], int(argv[4])) if mode == "crash" else None
    runtime = Runtime(SQLiteStore(store_path, synchronous="FULL"), [REFUND],
                      ledger_tools(ledger_path), crash=crash)
    if mode == "recover":
        runtime.recover(now=0)
    runtime.start(REFUND, "r1", context={"order_id": "o-1"})  # idempotent: a client's retry
    if not finish(runtime):
        raise SystemExit("the run did not finish")


if __name__ == "__main__":
    main(sys.argv[1:])
