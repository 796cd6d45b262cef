"""Bad input past what any run needs, and machines' words no output can hold (issue 36): each
used to end in a traceback (exit 70), to exhaust memory, or to block forever; now exit 2 and
one line for the input, the machine's verdict for the machine."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hostile import ROOT, Case

REFUND = "{root}/scenarios/refund_escalation.yaml"
LONG = "x" * 300
DOOR = """<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" initial="a">
  <state id="a"><transition event="go" target="b"/></state>
  <final id="b"/>
</scxml>
"""
BOMB = "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 9)}]\n" for n in range(1, 9))
MACHINES = f"""
from harness import ReferenceMachine

DEFINITION = {str(ROOT / "scenarios" / "refund_escalation.yaml")!r}


class BigVersion(ReferenceMachine):
    definition = DEFINITION

    def observe(self, execution_id):
        return super().observe(execution_id)._replace(version=10**5000)


class Surrogate(ReferenceMachine):
    definition = DEFINITION

    def deliver(self, execution_id, event, now):
        raise ValueError("bad \\ud800 thing")


class SurrogateOutcome(ReferenceMachine):
    definition = DEFINITION

    def observe(self, execution_id):
        return super().observe(execution_id)._replace(outcome="\\ud800")
"""


DATED = (ROOT / "scenarios" / "refund_escalation.yaml").read_text(encoding="utf-8").replace(
    "\ncontext:\n", "\ncontext:\n  since: 2024-01-01\n", 1)

UNKNOWN_KIND = (ROOT / "scenarios" / "refund_escalation.yaml").read_text(
    encoding="utf-8") + "untested:\n  fault:no_such_kind: a reason\n"


def _fifo(folder: Path) -> None:
    os.mkfifo(folder / "pipe")


CASES = [
    # output names the file system cannot take
    Case("history name too long", ("run", REFUND, "--history", f"{LONG}.jsonl"), 2,
         "File name too long"),
    Case("history name too long with its temporary name",
         ("run", REFUND, "--history", f"{'y' * 240}.jsonl"), 2, "at most 225 bytes"),
    Case("import output name too long", ("import", "door.scxml", "-o", f"{LONG}.yaml"), 2,
         "File name too long", {"door.scxml": DOOR}),
    Case("init folder name too long", ("init", "--dir", LONG), 2,
         "cannot use it: File name too long"),
    Case("history into a FIFO nothing reads", ("run", REFUND, "--history", "pipe"), 2,
         "a FIFO with nothing reading it", setup=_fifo, timeout=60),
    Case("corpus where nothing can be made", ("fuzz", REFUND, "--runs", "3", "--no-report",
                                              "--strategy", "guided", "--corpus",
                                              "/proc/corpus"), 2,
         "cannot write the corpus there"),
    # start contexts past the bounds every file has
    Case("context nested 5,000 deep", ("run", REFUND, "--context",
                                       "reason=" + "[" * 5000 + "]" * 5000), 2,
         "nested more than 100 levels deep"),
    Case("context integer of 5,000 digits", ("run", REFUND, "--context",
                                             "amount=" + "9" * 5000), 2,
         "an integer of 5,000 digits"),
    Case("context file integer of 5,000 digits", ("run", REFUND, "--context-file", "c.yaml"),
         2, "an integer of 5,000 digits", {"c.yaml": "amount: " + "9" * 5000 + "\n"}),
    Case("context file /dev/zero", ("run", REFUND, "--context-file", "/dev/zero"), 2,
         "over the 1 MB a context file may be"),
    Case("context file a FIFO nothing writes to", ("run", REFUND, "--context-file", "pipe"), 2,
         "nothing came through it for 10 s", setup=_fifo, timeout=60),
    Case("context file an alias bomb", ("run", REFUND, "--context-file", "bomb.yaml"), 2,
         "expands to more than", {"bomb.yaml": BOMB}, timeout=60),
    Case("context file of 2 MB", ("run", REFUND, "--context-file", "big.yaml"), 2,
         "over the 1 MB a context file may be",
         {"big.yaml": "note: " + "a" * 2_000_000 + "\n"}),
    # numbers no run needs
    *[Case(f"{command} with a billion executions", (command, REFUND, "--executions",
                                                     "1000000000", "--no-report"), 2,
           "1<=x<=1000") for command in ("fuzz", "explore")],
    Case("run with a billion executions", ("run", REFUND, "--executions", "1000000000"), 2,
         "1<=x<=1000"),
    Case("bench for 1e308 seconds", ("bench", "--seconds", "1e308", "--quick"), 2,
         "0<x<=3600"),
    # modules and machines
    Case("an import that exits 0", ("run", REFUND, "--import", "quits"), 2,
         "--import quits: the module called sys.exit(0) as it was imported",
         {"quits.py": "import sys\nsys.exit(0)\n"}),
    Case("a version of 5,000 digits", ("run", "machines:BigVersion"), 1,
         "has version a number of 16,610 bits; expected a whole number of 64 bits",
         {"machines.py": MACHINES}),
    Case("an exception's lone surrogate", ("fuzz", "machines:Surrogate", "--runs", "2",
                                           "--no-report"), 1, "bad \\ud800 thing",
         {"machines.py": MACHINES}),
    Case("an outcome's lone surrogate", ("run", "machines:SurrogateOutcome"), 0, "(\\ud800)",
         {"machines.py": MACHINES}),
    # a context that is no JSON data: lint and every command refuse it alike (lint passed it
    # and fuzz stopped with a traceback)
    *[Case(f"{command} of a context holding a date",
           (command, "dated.yaml", *(("--no-report",) if command == "fuzz" else ())),
           1 if command == "lint" else 2, "'since' holds a date, which is not JSON data",
           {"dated.yaml": DATED}) for command in ("lint", "run", "fuzz", "explore")],
    Case("lint of an acknowledgement of no fault kind", ("lint", "unknown.yaml"), 1,
         "untested.fault:no_such_kind: no fault kind 'no_such_kind'",
         {"unknown.yaml": UNKNOWN_KIND}),  # lint passed it, and fuzz refused it
    Case("fuzz of an acknowledgement of no fault kind", ("fuzz", "unknown.yaml",
                                                          "--no-report"), 2,
         "untested.fault:no_such_kind: no fault kind", {"unknown.yaml": UNKNOWN_KIND}),
    Case("a W3C folder with a file not UTF-8", ("import", "--w3c", "w3c"), 0,
         "refused: cannot read it: not UTF-8 text",
         {"w3c/test1.scxml": b"<scxml \xff\xfe>"}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_bound(case: Case, hostile) -> None:  # type: ignore[no-untyped-def]
    hostile(case)


def test_a_context_file_may_be_a_pipe(tmp_path: Path) -> None:
    """`--context-file /dev/stdin` (or `<(...)`) reads what the pipe holds: refusing every
    file that is not a regular one, to stop a FIFO from blocking, refused these too."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "harness.cli", "run",
                           str(ROOT / "scenarios" / "refund_escalation.yaml"), "--context-file",
                           "/dev/stdin", "--json"], input='{"amount": 5}', cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
