"""The `deterministic` rule: a seed run twice gives the same history, byte for byte.

Every other verdict rests on it: a failure that does not come back from its seed cannot be
shrunk or replayed, and a run that held once may not hold again. Unlike the invariants, it
compares two histories of one seed, so the engines run it (the first seeds of a campaign, and
each failing seed before it is shrunk); the violation names the first record that differs and
what usually makes a machine differ.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from harness.checks.invariants import Violation
from harness.sim.history import HistoryRecord, dump_line

__all__ = ["CAUSES", "RULE", "difference"]

RULE = "deterministic"

#: What usually makes a machine's history differ from one run of a seed to the next.
CAUSES = ("the machine reads something the simulation does not control: random numbers not "
          "drawn from the run (random.random(), uuid4()), a clock freezegun does not freeze "
          "(time.monotonic(), time.perf_counter()), the order of a set or of hash(), or state "
          "kept from one run to the next (a module-level cache, a class attribute)")

_SHOWN = 160  # characters of each record shown

#: Where an object lives in memory, as a default repr prints it (`<Box object at 0x7f...>`):
#: a machine's error message may quote one, and it differs between two runs of one process
#: without the machine doing anything differently.
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def difference(first: Sequence[HistoryRecord | str], second: Sequence[HistoryRecord | str]
               ) -> Violation | None:
    """Gives the `deterministic` violation of two histories of one seed (None: the same);
    either may be given as its lines (`dump_line`)."""
    for index, (one, other) in enumerate(zip(first, second, strict=False)):
        line, again = _line(one), _line(other)
        if line != again and _ADDRESS.sub("", line) != _ADDRESS.sub("", again):
            execution, step = _where(one)
            return Violation(
                RULE, f"the same seed gave two histories: record {index} (step {step}) was "
                      f"{_short(line)} the first time and {_short(again)} the second; {CAUSES}",
                execution, step, (index,))
    if len(first) != len(second):
        common = min(len(first), len(second))
        return Violation(
            RULE, f"the same seed gave two histories: one ended after {len(first)} records, "
                  f"the other after {len(second)}; {CAUSES}",
            "", _where(first[common - 1])[1] if common else 0, (common,))
    return None


def _line(record: HistoryRecord | str) -> str:
    return record if isinstance(record, str) else dump_line(record)


def _where(record: HistoryRecord | str) -> tuple[str, int]:
    """Gives the execution and the step of a record, or of its line."""
    if not isinstance(record, str):
        return getattr(record, "execution", ""), record.step
    try:
        fields = json.loads(record)
    except ValueError:
        return "", 0
    execution, step = fields.get("execution", ""), fields.get("step", 0)
    return (execution if isinstance(execution, str) else "",
            step if isinstance(step, int) else 0)


def _short(line: str) -> str:
    return line if len(line) <= _SHOWN else f"{line[:_SHOWN]}..."
