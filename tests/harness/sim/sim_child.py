"""A child process for the determinism tests: runs seeded simulations and writes their histories.

Run as `python sim_child.py DEFINITION SEED MODE [OUT]`, MODE being `default` (the default
plan) or `swarm`: the history's JSON lines go to the file OUT, or to standard output when OUT is
left out. Each argument may list several values, comma-separated (`a.yaml,b.yaml 0,7 default,
swarm`), to spare a process start per run: then every combination is run, OUT is a folder, and
each history goes to `OUT/{definition stem}-{mode}-{seed}.jsonl`. The parent compares the bytes
across processes started with different PYTHONHASHSEED values.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from harness import SimOptions, Simulator  # noqa: E402
from harness.sim.history import dump_line  # noqa: E402
from harness.sim.simulator import plan_for  # noqa: E402
from reference_machine import load_definition  # noqa: E402

MODES = ("default", "swarm")
USAGE = "usage: sim_child.py DEFINITION[,...] SEED[,...] default|swarm[,...] [OUT]"


def history_bytes(definition_path: str, seed: int, mode: str) -> bytes:
    """Gives the history of one run as JSON lines, one record a line."""
    definition = load_definition(definition_path)
    options = SimOptions(seed=seed, plan=plan_for(definition, swarm=mode == "swarm"))
    result = Simulator(definition, options).run()
    return "".join(f"{dump_line(record)}\n" for record in result.history).encode("utf-8")


def out_name(definition_path: str, mode: str, seed: int) -> str:
    """Gives the file name a run's history takes in an OUT folder."""
    return f"{Path(definition_path).stem}-{mode}-{seed}.jsonl"


def main(argv: list[str]) -> int:
    if len(argv) not in (3, 4):
        print(USAGE, file=sys.stderr)
        return 2
    definitions, modes = argv[0].split(","), argv[2].split(",")
    seeds = [int(seed) for seed in argv[1].split(",")]
    if not set(modes) <= set(MODES):
        print(USAGE, file=sys.stderr)
        return 2
    runs = [(d, seed, mode) for d in definitions for mode in modes for seed in seeds]
    out = Path(argv[3]) if len(argv) == 4 else None
    if len(runs) > 1:
        if out is None or not out.is_dir():
            print("sim_child.py: several runs need an OUT folder", file=sys.stderr)
            return 2
        for definition, seed, mode in runs:
            (out / out_name(definition, mode, seed)).write_bytes(
                history_bytes(definition, seed, mode))
        return 0
    data = history_bytes(*runs[0])
    if out is not None:
        out.write_bytes(data)
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
