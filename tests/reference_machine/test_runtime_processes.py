"""Real processes: a worker is SIGKILLed at each crash point and a new process recovers; two
processes advance one execution on one SQLite file at once."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reference_machine import Event, SQLiteStore, load_definition
from reference_machine._runtime import CRASH_POINTS, Runtime, Success

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
REFUND = load_definition(ROOT / "scenarios" / "refund_escalation.yaml")


def child(*args: str) -> subprocess.CompletedProcess[str]:
    """Runs the worker process and gives how it ended."""
    return subprocess.run([sys.executable, str(HERE / "child.py"), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)


def applied(ledger: Path) -> list[tuple[str, str]]:
    """Gives every effect the tools applied, in order."""
    with sqlite3.connect(ledger) as db:
        return db.execute("SELECT tool, key FROM applied ORDER BY rowid").fetchall()


@pytest.mark.parametrize("point", CRASH_POINTS)
@pytest.mark.parametrize("hit", [2, 4])
def test_sigkill_at_crash_point_then_recover(tmp_path: Path, point: str, hit: int) -> None:
    """SIGKILL at `point`, then a new process recovers: each effect applied once, the run
    finishes, and its log replays to the stored record."""
    store, ledger = tmp_path / "run.db", tmp_path / "ledger.db"
    killed = child("crash", str(store), str(ledger), point, str(hit))
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    recovered = child("recover", str(store), str(ledger))
    assert recovered.returncode == 0, recovered.stderr
    effects = applied(ledger)
    assert len(effects) == len(set(effects)), f"an effect was applied twice: {effects}"
    assert [tool for tool, _ in effects] == [
        "crm.lookup_order", "agent.plan_refund", "payments.refund", "payments.get_refund",
        "email.send"]
    runtime = Runtime(SQLiteStore(store), [REFUND], {})
    execution = runtime.store.load("r1").execution
    assert execution.outcome == "success" or execution.state == "needs_human"
    assert runtime.replay("r1") == execution


def test_two_processes_advance_one_execution_without_double_application(tmp_path: Path) -> None:
    """Two workers deliver the same 30 bump events to one execution at once: every event is
    consumed once, every accepted bump applies exactly one effect, and the log replays."""
    store, ledger = tmp_path / "counter.db", tmp_path / "ledger.db"
    counter = load_definition(HERE.parent / "data" / "workflows" / "counter.yaml")
    with sqlite3.connect(ledger) as db:
        db.execute("CREATE TABLE applied (tool TEXT, key TEXT)")
    setup = Runtime(SQLiteStore(store), [counter], {"counter.bump": lambda p, k: Success({})})
    setup.start(counter, "c1")
    workers = [subprocess.Popen([sys.executable, str(HERE / "bumper.py"), str(store),
                                 str(ledger), order], cwd=ROOT, stderr=subprocess.PIPE,
                                text=True) for order in ("forward", "backward")]
    ready = [Path(f"{store}.ready-{order}") for order in ("forward", "backward")]
    for _ in range(6000):
        if all(path.exists() for path in ready):
            break
        time.sleep(0.01)
    Path(f"{store}.go").touch()
    for worker in workers:
        _, errors = worker.communicate(timeout=120)
        assert worker.returncode == 0, errors
    runtime = Runtime(SQLiteStore(store), [counter], {})
    log = runtime.store.log("c1")
    event_ids = [entry.event.id for entry in log]
    assert len(event_ids) == len(set(event_ids)), "an event was applied twice"
    assert {f"bump-{n}" for n in range(30)} <= set(event_ids)
    effects = applied(ledger)
    accepted_bumps = [e for e in log if e.event.type == "bump" and e.decision == "accepted"]
    assert len(effects) == len(set(effects)) == len(accepted_bumps)
    execution = runtime.store.load("c1").execution
    assert execution.context["n"] == len(accepted_bumps)

    assert runtime.replay("c1") == execution


def test_loser_of_the_version_check_reloads_and_decides_again(tmp_path: Path) -> None:
    """Deterministic interleaving: runtime A loads the counter, then (at its before_commit
    point) runtime B commits a bump on the same file; A's commit meets a conflict, reloads,
    decides again on B's state and is refused as illegal mid-step, never applying twice."""
    store = tmp_path / "counter.db"
    counter = load_definition(HERE.parent / "data" / "workflows" / "counter.yaml")
    effects: list[str] = []

    def bump(payload: object, key: str) -> Success:
        effects.append(key)
        return Success({})

    other = Runtime(SQLiteStore(store), [counter], {"counter.bump": bump})
    other.start(counter, "c1")
    interleaved = []

    def let_other_commit_first(point: str) -> None:
        if point == "before_commit" and not interleaved:
            interleaved.append(True)
            other.deliver("c1", Event("bump-b", "bump", "system"), 1)

    runtime = Runtime(SQLiteStore(store), [counter], {"counter.bump": bump},
                      crash=let_other_commit_first)
    decision = runtime.deliver("c1", Event("bump-a", "bump", "system"), 2)
    assert interleaved == [True]
    assert decision.kind == "accepted"  # re-decided on B's finished bump: open again, accepted
    log = runtime.store.log("c1")
    assert [e.event.id for e in log].count("bump-a") == 1
    assert effects == ["c1/bumping/1", "c1/bumping/2"]
    assert runtime.store.load("c1").execution.context["n"] == 2
    assert runtime.replay("c1") == runtime.store.load("c1").execution
