"""The children the harness forks (`harness.engines.isolation`) leave nothing behind (issue
43: "tests left two orphaned processes"): a child waiting for work ends when its parent is
killed, though other children were forked after it, and a child that died leaves no open
pipe in the parent, even while something keeps the `Died` raised for it (Hypothesis keeps a
failing example's exception, traceback and all).

Both were found on the Hypothesis path: a session killed by a timeout left its kept child
waiting for ever on a copy of its own task pipe's writing end, and the session held 1,600
pipes after a few hundred examples whose machine ended its process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.engines import isolation

pytestmark = pytest.mark.skipif(not isolation.available(), reason="no fork here")

#: Two workers, the second forked while the parent holds the first's pipes; their pids told.
PARENT = """
import time
from harness.engines import isolation

def echo(batch):
    return list(batch)

first = isolation.Worker(echo)
second = isolation.Worker(echo)
first.give(0, [1])
assert first.take() == [1]
print(first.process.pid, second.process.pid, flush=True)
time.sleep(600)
"""


def _ended(pid: int) -> bool:
    """Tells whether process `pid` is gone or a zombie (ended, not reaped yet)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in status


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_children_waiting_for_work_end_when_their_parent_is_killed() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert parent.stdout is not None
        pids = [int(word) for word in parent.stdout.readline().split()]
        assert len(pids) == 2 and not any(_ended(pid) for pid in pids)
    finally:
        parent.kill()
        parent.wait()
    # a bound on a hang, not on speed: each child sees the end of its pipe at once
    waited = 0.0
    while not all(_ended(pid) for pid in pids) and waited < 60:
        time.sleep(0.1)
        waited += 0.1
    left = [pid for pid in pids if not _ended(pid)]
    for pid in left:  # never leave them to the next test
        os.kill(pid, 9)
    assert not left, f"children {left} outlived their killed parent"


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="reads /proc")
def test_a_child_that_died_leaves_no_pipe_open_while_its_death_is_kept() -> None:
    def dies(batch: list[int]) -> list[int]:
        os._exit(0)

    def fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    kept: list[BaseException] = []  # as Hypothesis keeps a failing example's exception
    before = fds()
    for _ in range(20):
        worker = isolation.Worker(dies)
        worker.give(0, [1])
        with pytest.raises(isolation.Died, match="exited with code 0") as died:
            worker.take()
        worker.close()
        kept.append(died.value)
        with pytest.raises(isolation.Died, match="exited with code 0") as ended:
            isolation.call(lambda: os._exit(0))
        kept.append(ended.value)
    assert fds() - before < 10, f"{fds() - before} descriptors left open by 40 dead children"
