"""The histories a target's simulator gives in a fresh interpreter, for the tests that show a
seed gives the same history in any process (`histories_of`)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_SCRIPT = """\
import importlib, sys
from harness import SimOptions, Simulator
from harness.sim.history import dump_line
module, _, name = sys.argv[1].partition(":")
target = getattr(importlib.import_module(module), name)
for seed in map(int, sys.argv[2:]):
    result = Simulator(target.definition, SimOptions(seed=seed), machine=target).run()
    sys.stdout.write("".join(dump_line(record) + "\\n" for record in result.history))
"""


def histories_of(target: str, hash_seed: str, seeds: Sequence[int] = (3, 11)) -> str:
    """Runs the simulator on `target` (`module:attribute`) for each of `seeds` in a fresh
    interpreter with `PYTHONHASHSEED=hash_seed`; gives the histories, one record a line."""
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", _SCRIPT, target, *map(str, seeds)],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout
