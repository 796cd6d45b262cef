"""Measures, per planted bug, the median runs and seconds to the first failure of each fuzzing
strategy over ten base seeds, side by side (issue 20): the test suite's planted machines, the
hand-rolled runtime's (`harness.bench.planted`) and the naive scenarios.

Run from the project's root: `python tools/measure_guided.py` (`--quick`: three
seeds; `--seeds=30`: thirty, as the README's table). It prints the Markdown table the README shows.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))

from planted import PLANTED, WORKFLOW

from harness.bench.hunt import Bug, bugs, hunt, table


def main() -> None:
    chosen = [Bug(name, WORKFLOW, machine, rule) for name, (machine, rule) in PLANTED.items()]
    chosen += bugs()
    seeds = 3 if "--quick" in sys.argv else 10
    for argument in sys.argv[1:]:
        if argument.startswith("--seeds="):
            seeds = int(argument.partition("=")[2])
    found = hunt(chosen, ("swarm", "guided", "mixed"), seeds=seeds,
                 progress=lambda line: print(line, file=sys.stderr, flush=True))
    print(table(found))


if __name__ == "__main__":
    main()
