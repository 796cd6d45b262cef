"""A worker for the two-process test: delivers `bump` events to one counter execution on a
shared SQLite store, each effect recorded in a ledger. `python bumper.py STORE LEDGER ORDER`."""

from __future__ import annotations

import sqlite3
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reference_machine import Event, SQLiteStore, load_definition
from reference_machine._runtime import Runtime, Success, ToolOutcome

COUNTER = load_definition(Path(__file__).resolve().parents[1] / "data" / "workflows"
                          / "counter.yaml")
BUMPS = 30


def main(store_path: str, ledger_path: str, order: str) -> None:
    ledger = sqlite3.connect(ledger_path, isolation_level=None, timeout=30)

    def bump(payload: Mapping[str, Any], key: str) -> ToolOutcome:
        ledger.execute("INSERT INTO applied VALUES (?, ?)", ("counter.bump", key))
        return Success({})

    runtime = Runtime(SQLiteStore(store_path), [COUNTER], {"counter.bump": bump})
    # a barrier: both workers are up before either delivers, so their deliveries overlap
    Path(f"{store_path}.ready-{order}").touch()
    deadline = time.monotonic() + 60
    while not Path(f"{store_path}.go").exists():
        if time.monotonic() > deadline:
            raise SystemExit("no go signal")
        time.sleep(0.005)
    ids = list(range(BUMPS)) if order == "forward" else list(reversed(range(BUMPS)))
    for number in ids:
        runtime.deliver("c1", Event(f"bump-{number}", "bump", "system"), number)


if __name__ == "__main__":
    main(*sys.argv[1:])
