"""The Hypothesis path (`workflow_machine`) on a misbehaving machine (issue 36): each example's
run is held in a child process, so a machine that ends its process or hangs it is that
example's `machine_ok` failure, never the session's end or a hang; a hang is reported as
found, not shrunk (each rerun of it would take the step's bound).

On the machine run in pytest's own process, `os._exit(0)` ended the session with exit 0 and
no word, the alarm-proof hangs hung pytest, KeyboardInterrupt aborted the session, and a hang
the watchdog did stop was shrunk for minutes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hostile import ROOT
from test_escapes import PROBE

#: Each entry into a misbehaviour leaves a line in `entered.txt`: how many runs met it.
COUNTED = PROBE.replace('    mode = os.environ.get("PROBE_MODE", "")\n',
                        '    mode = os.environ.get("PROBE_MODE", "")\n'
                        '    with open("entered.txt", "a") as out:\n'
                        '        out.write(mode + "\\n")\n')

TEST_FILE = '''
from hypothesis import settings
from harness import SimOptions
from harness.stateful import workflow_machine
from reference_machine import load_definition
from probe import Probe

Refund = workflow_machine(
    load_definition({definition!r}), machine=Probe,
    options=SimOptions(step_timeout_s=1), replay_dir="replays",
    settings=settings(max_examples=8, stateful_step_count=8, database=None))
TestRefund = Refund.TestCase
'''

#: (mode, a fragment of the failure, the failure's kind); None: the test passes.
ROWS: list[tuple[str, str | None, str]] = [
    ("exit0", "the process exited with code 0", "InvariantViolated"),
    ("atexit", "ValueError", "InvariantViolated"),
    ("alarm ignored", "it hung: a step ran past 1 s", "MachineHung"),
    ("alarm blocked", "it hung: a step ran past 1 s", "MachineHung"),
    ("alarm swallowed", "it hung: a step ran past 1 s", "MachineHung"),
    ("stopped", "it hung: a step ran past 1 s", "MachineHung"),
    ("str hangs", "it hung: a step ran past 1 s", "MachineHung"),
    ("interrupt", "the machine raised KeyboardInterrupt", "InvariantViolated"),
    ("thread", None, ""),
]


def _session(folder: Path, mode: str, probe: str = COUNTED
             ) -> subprocess.CompletedProcess[str]:
    """Runs the probe's Hypothesis test in a pytest of its own. Its time is Hypothesis's
    search and shrinking, each example in a child process: 12 s to 90 s on a loaded machine,
    so the bound is only against a hang."""
    (folder / "probe.py").write_text(probe, encoding="utf-8")
    (folder / "test_probe.py").write_text(TEST_FILE.format(
        definition=str(ROOT / "scenarios" / "refund_escalation.yaml")), encoding="utf-8")
    env = {**os.environ, "PROBE_MODE": mode, "PYTHONPATH": str(folder)}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "-p",
                           "no:cacheprovider", "-p", "no:randomly", "-q", "test_probe.py"],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=600,
                          check=False)


@pytest.mark.parametrize(("mode", "fragment", "kind"), ROWS, ids=[row[0] for row in ROWS])
def test_a_misbehaving_machine_fails_its_example(mode: str, fragment: str | None, kind: str,
                                                 tmp_path: Path) -> None:
    done = _session(tmp_path, mode)
    shown = f"exit {done.returncode}\n{done.stdout[-4000:]}\n{done.stderr[-2000:]}"
    if fragment is None:  # the thread is the child's: nothing of it is left to wait for
        assert done.returncode == 0 and "1 passed" in done.stdout, shown
        return
    assert done.returncode == 1 and "1 failed" in done.stdout, shown
    assert fragment in done.stdout and kind in done.stdout, shown
    if kind == "MachineHung":  # found once, not shrunk: no other run met the hang
        entered = (tmp_path / "entered.txt").read_text(encoding="utf-8").splitlines()
        assert entered.count(mode) == 1, shown
        assert ": deliver(), and neither returned" in done.stdout or mode == "str hangs", shown


@pytest.mark.parametrize("mode", ["exit0", "alarm ignored"])
def test_the_replay_file_of_an_example_that_died_reproduces_it(mode: str,
                                                               tmp_path: Path) -> None:
    """Its draws came back as it drew them, the step it died in included."""
    done = _session(tmp_path, mode)
    (written,) = (tmp_path / "replays").iterdir()
    assert f"replay: fsmharness replay replays/{written.name}" in done.stdout, done.stdout
    again = subprocess.run([sys.executable, "-m", "harness.cli", "replay", str(written)],
                           cwd=tmp_path, capture_output=True, text=True, timeout=120,
                           check=False, env={**os.environ, "PROBE_MODE": mode,
                                             "PYTHONPATH": str(tmp_path)})
    assert again.returncode == 1 and "reproduced machine_ok" in again.stdout, (
        f"{again.stdout}\n{again.stderr}")


def test_a_hang_the_watchdog_stops_is_not_shrunk(tmp_path: Path) -> None:
    """A loop the alarm can stop: found once and reported, where Hypothesis shrank it run
    after run, each taking the step's bound."""
    spinning = COUNTED.replace('    if mode == "raise":',
                               '    if mode == "spin":\n        while True:\n            pass\n'
                               '    if mode == "raise":')
    assert spinning != COUNTED
    done = _session(tmp_path, "spin", spinning)
    shown = f"{done.stdout[-4000:]}\n{done.stderr[-2000:]}"
    assert done.returncode == 1 and "MachineHung" in done.stdout, shown
    assert "the machine hung (Watchdog)" in done.stdout, shown
    entered = (tmp_path / "entered.txt").read_text(encoding="utf-8").splitlines()
    assert entered.count("spin") == 1, shown
