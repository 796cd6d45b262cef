"""One seed run again in a fresh interpreter with another hash seed, to catch what one
interpreter hides: a machine whose behaviour follows the order of a set of strings (hash
randomization) or `id()` gives the same history twice in one process (a fork copies its hash
seed and its memory), and another history in a process of its own.

The fresh interpreter (`python -m harness.engines.elsewhere`) is told, on its standard input,
where the definition was loaded from (or that the machine carries it) and its digest, the
machine's `module:name`, the
modules the definition's functions live in, the run's options and the seed; it prints the
history's lines. A machine or definition a fresh interpreter cannot find again (a local
class, a definition built in code) is not checked so: `begin` gives None.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.checks.checkers import Violation
from harness.checks.determinism import difference
from harness.sim.history import HistoryRecord, dump_line
from harness.sim.identity import definition_digest, machine_path
from harness.sim.machine import MachineFactory
from harness.sim.simulator import SimOptions
from reference_machine import WorkflowDefinition

__all__ = ["Elsewhere", "begin"]

#: How long the fresh interpreter may take, past the run's own bound, before it is given up
#: on (no verdict: the check is a second opinion, not a run of the campaign).
_SLACK_S = 60.0


class Elsewhere:
    """The run of a seed in a fresh interpreter, under way: `difference(first)` waits for it
    and compares its history with `first`, this process's history of the seed."""

    def __init__(self, process: subprocess.Popen[str], request: str, seed: int,
                 hash_seed: str, bound: float) -> None:
        self.process, self.request = process, request  # it starts up while it waits for it
        self.seed, self.hash_seed, self.bound = seed, hash_seed, bound

    def difference(self, first: Sequence[HistoryRecord]) -> Violation | None:
        """Gives how the fresh interpreter's history differs from `first` (None: the same,
        or no history came back, which is no verdict)."""
        try:
            out, _ = self.process.communicate(self.request, timeout=self.bound)
        except (subprocess.TimeoutExpired, OSError):
            self.cancel()
            return None
        if self.process.returncode != 0:
            return None
        found = difference(first, out.splitlines())
        if found is None:
            return None
        return Violation(found.rule, found.message.replace(
            "the same seed gave two histories", f"seed {self.seed} gave another history in a "
            f"fresh interpreter (PYTHONHASHSEED={self.hash_seed}) than here").replace(
            "the first time and", "here and").replace(
            "the second;", "there;"), found.execution, found.step, found.records)

    def cancel(self) -> None:
        with contextlib.suppress(OSError):
            self.process.kill()
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            self.process.communicate(timeout=5)


def begin(definition: WorkflowDefinition, machine: MachineFactory, options: SimOptions,
          seed: int, imports: list[str]) -> Elsewhere | None:
    """Starts the run of `seed` in a fresh interpreter with another hash seed than this
    one's; None when a fresh interpreter could not find the machine or the definition."""
    where = machine_path(machine)
    carried = getattr(machine, "definition", None) is definition  # an adapter's target
    source = Path(definition.source)
    if not where or not (carried or source.is_file()):
        return None
    ours = os.environ.get("PYTHONHASHSEED", "")
    theirs = "1" if ours == "0" else "0"  # 0: no randomization; ours is random, or another
    request = {"definition": None if carried else str(source.resolve()),
               "digest": definition_digest(definition),
               "machine": where, "imports": imports, "options": options.to_dict(),
               "seed": seed}
    env = {**os.environ, "PYTHONHASHSEED": theirs,
           "PYTHONPATH": os.pathsep.join(path or os.getcwd() for path in sys.path)}
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "harness.engines.elsewhere"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True,
            encoding="utf-8", errors="surrogateescape")
    except OSError:
        return None
    steps = options.steps_max + options.liveness_steps
    bound = _SLACK_S + (steps * options.step_timeout_s if options.step_timeout_s else 0)
    return Elsewhere(process, json.dumps(request), seed, theirs, bound)


def _main() -> int:
    """Runs the seed the standard input asks for and prints its history's lines; exit 3
    when the machine or the definition cannot be found again as they were."""
    import importlib

    from harness.sim.simulator import Simulator
    from reference_machine import load_definition

    request: dict[str, Any] = json.loads(sys.stdin.read())
    sys.stdout.flush()
    out = os.fdopen(os.dup(1), "w", encoding="utf-8", errors="surrogateescape")
    os.dup2(2, 1)  # what the machine prints goes to stderr: stdout is the history's
    try:
        for module in request["imports"]:
            importlib.import_module(module)
        module_name, _, attribute = request["machine"].partition(":")
        target: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            target = getattr(target, part)
        definition = (target.definition if request["definition"] is None
                      else load_definition(request["definition"]))
    except Exception:
        return 3
    if definition_digest(definition) != request["digest"]:
        return 3
    result = Simulator(definition, SimOptions.from_dict(request["options"]), target).run(
        request["seed"])
    for record in result.history:
        out.write(dump_line(record) + "\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_main())
