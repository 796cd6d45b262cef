"""A machine can neither fool nor hang the harness, on any path (issue 36): one that ends its
process with exit code 0, registers `os._exit(0)` to run at exit, ignores, blocks or swallows
the watchdog's alarm, stops itself, hangs in `__str__` or in `close()`, raises
KeyboardInterrupt, leaves a thread running or prints. `run`, `fuzz`, `explore` and `replay`
each run the machine in a child process whose heartbeat the parent watches: the verdict is
the machine's, within the step timeout plus a margin, and the exit code is the parent's.

Each row used to exit 0, hang, abort, or corrupt `--json` on at least one of these paths."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hostile import ROOT, Case

PROBE = f'''
import atexit, os, signal, threading, time
from harness import ReferenceMachine


class NeverStr(Exception):
    def __str__(self):
        while True:
            pass


def misbehave():
    mode = os.environ.get("PROBE_MODE", "")
    if mode == "raise":
        raise ValueError("boom")
    if mode == "exit0":
        os._exit(0)
    if mode == "atexit":
        atexit.register(os._exit, 0)
        raise ValueError("boom")
    if mode == "alarm ignored":
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
        time.sleep(3600)
    if mode == "alarm blocked":
        signal.pthread_sigmask(signal.SIG_BLOCK, {{signal.SIGALRM}})
        time.sleep(3600)
    if mode == "alarm swallowed":
        while True:
            try:
                time.sleep(3600)
            except BaseException:
                pass
    if mode == "stopped":
        os.kill(os.getpid(), signal.SIGSTOP)
    if mode == "str hangs":
        raise NeverStr()
    if mode == "interrupt":
        raise KeyboardInterrupt
    if mode == "thread":
        threading.Thread(target=lambda: time.sleep(3600)).start()
    if mode == "print":
        print("MACHINE PRINT")
        os.write(1, b"MACHINE WRITE\\n")


class Probe(ReferenceMachine):
    definition = {str(ROOT / "scenarios" / "refund_escalation.yaml")!r}

    def deliver(self, execution_id, event, now):
        misbehave()
        return super().deliver(execution_id, event, now)

    def close(self):
        if os.environ.get("PROBE_MODE") == "close sleeps":
            time.sleep(3600)
'''

TIMEOUT = ("--step-timeout", "1")
PATHS: dict[str, tuple[str, ...]] = {
    "run": ("run", "probe:Probe", *TIMEOUT),
    "fuzz": ("fuzz", "probe:Probe", "--runs", "1", "--no-report", *TIMEOUT),
    "explore": ("explore", "probe:Probe", "--depth", "4", "--no-report", *TIMEOUT),
    "replay": ("replay", "r.json"),  # recorded with the step timeout of 1 s
}
#: (mode, the fragment its verdict holds, the exit code, the paths it is tried on)
ROWS: list[tuple[str, str, int, tuple[str, ...]]] = [
    ("exit0", "the process exited with code 0", 1, ("run", "fuzz", "explore", "replay")),
    ("atexit", "boom", 1, ("fuzz", "explore", "replay")),  # `run` shows the traceback
    *[(mode, "it hung: a step ran past 1 s", 1, ("run", "fuzz", "explore", "replay"))
      for mode in ("alarm ignored", "alarm blocked", "alarm swallowed", "stopped")],
    ("str hangs", "it hung: a step ran past 1 s", 1, ("run", "explore")),
    ("close sleeps", "while closing the machine: close()", 1, ("run", "explore")),
    ("interrupt", "the machine raised KeyboardInterrupt", 1, ("run", "fuzz", "explore",
                                                             "replay")),
    ("thread", "", 0, ("explore", "replay")),
]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A replay file of the probe raising (its rule machine_ok), with a step timeout of 1 s:
    each mode replays that schedule with another misbehaviour."""
    folder = tmp_path_factory.mktemp("recorded")
    (folder / "probe.py").write_text(PROBE, encoding="utf-8")
    env = {**os.environ, "PROBE_MODE": "raise",
           "PYTHONPATH": os.pathsep.join([str(folder), str(ROOT / "tests" / "support")])}
    subprocess.run([sys.executable, "-m", "harness.cli", "fuzz", "probe:Probe", "--runs", "3",
                    "--report", "out", *TIMEOUT], cwd=folder, env=env, capture_output=True,
                   check=False, timeout=120)
    (saved,) = (folder / "out" / "replays").iterdir()
    return saved.read_bytes()


@pytest.mark.parametrize(("mode", "line", "code", "path"),
                         [(mode, line, code, path) for mode, line, code, paths in ROWS
                          for path in paths],
                         ids=[f"{mode}-{path}" for mode, _, _, paths in ROWS for path in paths])
def test_a_misbehaving_machine_is_its_own_verdict(
        mode: str, line: str, code: int, path: str, recorded: bytes,
        hostile: Callable[[Case], Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROBE_MODE", mode)
    hostile(Case(f"{mode} on {path}", PATHS[path], code, line,
                 {"probe.py": PROBE, "r.json": recorded}, timeout=60))


@pytest.mark.parametrize("path", ["explore", "replay"])
def test_a_machine_that_prints_leaves_json_whole(
        path: str, recorded: bytes, hostile: Callable[[Case], Any],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Its prints go to stderr; stdout is the harness's document."""
    monkeypatch.setenv("PROBE_MODE", "print")
    result = hostile(Case(f"print on {path}", (*PATHS[path], "--json"),
                          0, "",
                          {"probe.py": PROBE, "r.json": recorded}, timeout=60))
    json.loads(result.stdout)
    assert "MACHINE PRINT" in result.stderr and "MACHINE WRITE" in result.stderr


def test_the_parent_ends_a_hung_child_within_the_bound_and_its_margin(
        tmp_path: Path) -> None:
    """The heartbeat: a child whose step began longer ago than its bound plus the margin is
    ended by its parent, with the bound and what it was doing."""
    from harness.engines import isolation
    from harness.sim.watchdog import beat, doing

    def work() -> None:
        doing("a test", work)
        beat(0.2)
        os.kill(os.getpid(), 19)  # SIGSTOP: nothing in the child runs any more

    with pytest.raises(isolation.Died) as died:
        isolation.call(work)
    assert died.value.hung == (0.2, "a test: work()")
    assert "it hung: a step ran past 0.2 s of wall time" in died.value.how


@pytest.mark.parametrize("mode", ["exit0", "atexit", "thread"])
def test_the_plugin_keeps_its_exit_code(mode: str, tmp_path: Path) -> None:
    """A collected definition fuzzed and explored on such a machine: pytest ended mid-session
    with exit 0, or hung on the thread after it; now each item is the machine's verdict."""
    (tmp_path / "probe.py").write_text(PROBE, encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\nfsm_machine = probe:Probe\n",
                                         encoding="utf-8")
    (tmp_path / "workflow_refund.yaml").write_bytes(
        (ROOT / "scenarios" / "refund_escalation.yaml").read_bytes())
    env = {**os.environ, "PROBE_MODE": mode, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "-p",
                           "no:cacheprovider", "-q", "--fsm-runs", "5", "--fsm-depth", "5"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    shown = done.stdout[-3000:] + done.stderr[-2000:]
    if mode == "thread":  # its thread is the child's: nothing of it is left to wait for
        assert done.returncode == 0 and "3 passed" in done.stdout, shown
    else:
        assert done.returncode == 1 and "2 failed, 1 passed" in done.stdout, shown


def test_a_frozen_clock_does_not_hide_a_hang() -> None:
    """A run with `freeze_clock` froze `time.monotonic`, which the heartbeat read: its step
    never looked overdue, and the campaign hung (found by review)."""
    import signal
    import time

    from harness import FuzzOptions, ReferenceMachine, SimOptions, fuzz

    class Blocker(ReferenceMachine):
        def deliver(self, execution_id: str, event: Any, now: int) -> Any:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
            time.sleep(3600)

    definition = ROOT / "scenarios" / "refund_escalation.yaml"
    report = fuzz(definition, FuzzOptions(runs=1, replay_dir=None, shrink=False, sim=SimOptions(
        freeze_clock=True, step_timeout_s=0.5)), machine=lambda *a, **k: Blocker(*a, **k))
    assert "it hung: a step ran past 0.5 s" in str(report.failures[0].violations[0])


def test_a_slow_close_is_no_hang(hostile: Callable[[Case], Any],
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A teardown may take longer than a step (a pool, a schema dropped): close() is bounded
    at five step timeouts, not one."""
    slow = PROBE.replace("if os.environ.get(\"PROBE_MODE\") == \"close sleeps\":\n"
                         "            time.sleep(3600)", "time.sleep(1.6)")
    assert slow != PROBE
    monkeypatch.setenv("PROBE_MODE", "")
    hostile(Case("slow close", ("run", "probe:Probe", *TIMEOUT), 0, "every invariant held",
                 {"probe.py": slow}, timeout=60))


def test_an_explore_the_machine_ended_says_how_far_it_got(tmp_path: Path) -> None:
    """The depth it finished and its states, as the child told them, not zeros."""
    from harness import ExploreOptions, ReferenceMachine, explore

    class LateExit(ReferenceMachine):
        delivered = [0]  # across the search's runs, all in its one child

        def deliver(self, execution_id: str, event: Any, now: int) -> Any:
            self.delivered[0] += 1
            if self.delivered[0] > 40:
                os._exit(0)
            return super().deliver(execution_id, event, now)

    found = explore(ROOT / "scenarios" / "refund_escalation.yaml", ExploreOptions(depth=8),
                    machine=lambda *a, **k: LateExit(*a, **k))
    assert not found.held and "exited with code 0" in found.died
    assert found.depth >= 1 and found.states > 1, found


def test_a_replay_may_run_in_this_process(tmp_path: Path) -> None:
    """`isolate=False`: what the machine factory does stays visible to the caller."""
    from planted import PLANTED

    from harness import FuzzOptions, fuzz, replay

    machine, _ = PLANTED["key_per_attempt"]
    report = fuzz(ROOT / "tests" / "data" / "workflows" / "planted.yaml",
                  FuzzOptions(runs=200, replay_dir=tmp_path), machine=machine)
    made: list[object] = []

    def counting(*args: Any, **kwargs: Any) -> Any:
        made.append(machine(*args, **kwargs))
        return made[-1]

    assert replay(report.failures[0].replay_file, machine=counting, isolate=False).reproduced
    assert made
