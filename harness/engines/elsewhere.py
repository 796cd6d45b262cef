"""One seed run in two fresh interpreters with two hash seeds, to catch what one interpreter
hides: a machine whose behaviour follows the order of a set of strings (hash randomization)
or `id()` gives the same history twice in one process (a fork copies its hash seed and its
memory), and another history in a process with another hash seed.

The two fresh interpreters are compared with each other, never with the campaign's process:
that one may hold what a fresh one does not (a test's monkeypatch, `-W error`, a fixture's
setup), and a difference from it proves nothing about the machine. Each
(`python -m harness.engines.elsewhere`) reads, from a file on its standard input, where the
definition was loaded from (or that the machine carries it) and its digest, the machine's
`module:name`, the modules the definition's functions live in, the run's options and the
seed; it writes the digest of the history's lines, then the lines as one JSON list, to a file
on its standard output. A
machine or definition a fresh interpreter cannot find again (a local class, a definition
built in code) is not checked so: `begin` gives None.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

from harness.checks.determinism import difference
from harness.checks.invariants import Violation
from harness.sim.history import dump_line
from harness.sim.identity import definition_digest, machine_path
from harness.sim.machine import MachineFactory
from harness.sim.simulator import SimOptions
from reference_machine import WorkflowDefinition

__all__ = ["HASH_SEEDS", "Elsewhere", "begin"]

#: The hash seeds of the two fresh interpreters (0: no randomization).
HASH_SEEDS = ("0", "1")
#: How long the fresh interpreters may take, from their start, before they are given up on
#: (no verdict: the check is a second opinion, not a run of the campaign).
_BOUND_S = 120.0
#: The exit code of a fresh interpreter that could not find the machine or the definition.
_NOT_FOUND = 3
#: The environment variable that tells a fresh interpreter the campaign's process id.
_PARENT = "FSMHARNESS_ELSEWHERE_PARENT"


class _Fresh:
    """One fresh interpreter running the seed, its output going to a file."""

    def __init__(self, request: bytes, hash_seed: str) -> None:
        self.hash_seed = hash_seed
        # files, not pipes: nothing blocks while the campaign runs; `close()` closes them
        self.asked: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115
        self.out: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115
        self.asked.write(request)
        self.asked.seek(0)
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, _PARENT: str(os.getpid()),
               "PYTHONPATH": os.pathsep.join(path or os.getcwd() for path in sys.path)}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "harness.engines.elsewhere"], stdin=self.asked,
            stdout=self.out, stderr=subprocess.DEVNULL, env=env)

    def digest(self, deadline: float) -> bytes | None:
        """Gives the digest of the history's lines (None: none came back by `deadline`, or
        the machine could not be found)."""
        try:
            code = self.process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            return None
        if code != 0:
            return None
        self.out.seek(0)
        return self.out.readline().strip() or None

    def lines(self) -> list[str] | None:
        """Gives the history's lines, after its digest (read only when two differ: a
        history's lines weigh what the campaign's whole peak does)."""
        try:
            got = json.loads(self.out.read())
        except ValueError:
            return None
        return got if isinstance(got, list) and all(isinstance(x, str) for x in got) else None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.process.kill()
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            self.process.wait(timeout=5)
        self.asked.close()
        self.out.close()


class Elsewhere:
    """The run of a seed in two fresh interpreters, under way: `difference()` waits for them
    and compares their histories; `close()` ends them (always call it)."""

    def __init__(self, fresh: list[_Fresh], seed: int, bound: float) -> None:
        self.fresh, self.seed, self.bound = fresh, seed, bound
        self.began = time.monotonic()

    def difference(self, until: float | None = None) -> Violation | None:
        """Gives how the two fresh interpreters' histories differ (None: the same, or one
        gave none by their bound or by `until`, a monotonic time, which is no verdict)."""
        deadline = self.began + self.bound if until is None else min(
            self.began + self.bound, until)
        digests = [fresh.digest(deadline) for fresh in self.fresh]
        if None in digests or digests[0] == digests[1]:
            return None
        first, second = (fresh.lines() for fresh in self.fresh)
        if first is None or second is None:
            return None
        found = difference(first, second)
        if found is None:
            return None
        one, other = (fresh.hash_seed for fresh in self.fresh)
        return Violation(found.rule, found.message.replace(
            "the same seed gave two histories", f"seed {self.seed} gave two histories in two "
            f"fresh interpreters, one with PYTHONHASHSEED={one} and one with {other}").replace(
            "the first time and", f"with {one} and").replace(
            "the second;", f"with {other};"), found.execution, found.step, found.records)

    def close(self) -> None:
        for fresh in self.fresh:
            fresh.close()


def begin(definition: WorkflowDefinition, machine: MachineFactory, options: SimOptions,
          seed: int, imports: list[str]) -> Elsewhere | None:
    """Starts the run of `seed` in two fresh interpreters (`HASH_SEEDS`); None when a fresh
    interpreter could not find the machine or the definition."""
    where = machine_path(machine)
    carried = getattr(machine, "definition", None) is definition  # an adapter's target
    source = Path(definition.source)
    if not where or not (carried or source.is_file()):
        return None
    request = json.dumps({
        "definition": None if carried else str(source.resolve()),
        "digest": definition_digest(definition), "machine": where, "imports": imports,
        "options": options.to_dict(), "seed": seed}).encode("utf-8", "surrogatepass")
    fresh: list[_Fresh] = []
    try:
        for hash_seed in HASH_SEEDS:
            fresh.append(_Fresh(request, hash_seed))
    except OSError:
        for started in fresh:
            started.close()
        return None
    return Elsewhere(fresh, seed, _BOUND_S)


def _main() -> int:
    """Runs the seed the standard input asks for and writes its history's lines; exit
    `_NOT_FOUND` when the machine or the definition cannot be found again as they were."""
    import importlib

    from harness.sim.simulator import Simulator
    from reference_machine import load_definition

    _die_with_parent()
    out = os.fdopen(os.dup(1), "w", encoding="ascii")
    os.dup2(2, 1)  # what the machine prints goes to stderr: stdout is the history's
    try:
        request: dict[str, Any] = json.loads(sys.stdin.buffer.read().decode(
            "utf-8", "surrogatepass"))
        for module in request["imports"]:
            importlib.import_module(module)
        module_name, _, attribute = request["machine"].partition(":")
        target: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            target = getattr(target, part)
        definition = (target.definition if request["definition"] is None
                      else load_definition(request["definition"]))
    except Exception:
        return _NOT_FOUND
    if definition_digest(definition) != request["digest"]:
        return _NOT_FOUND
    result = Simulator(definition, SimOptions.from_dict(request["options"]), target).run(
        request["seed"])
    lines = json.dumps([dump_line(record) for record in result.history])  # ASCII: one line
    out.write(hashlib.sha256(lines.encode("ascii")).hexdigest() + "\n" + lines)
    out.close()
    return 0


def _die_with_parent() -> None:
    """Asks Linux to end this interpreter when the campaign that started it ends (a machine
    that hangs here, past its watchdog, would otherwise outlive it); elsewhere, nothing."""
    with contextlib.suppress(Exception):
        import ctypes
        import signal

        ctypes.CDLL(None).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    if os.environ.get(_PARENT) not in (None, str(os.getppid())):  # it ended already
        os._exit(_NOT_FOUND)


if __name__ == "__main__":
    sys.exit(_main())
