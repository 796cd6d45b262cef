"""Determinism: the same seed and options give the same history, byte for byte, in any process
(PYTHONHASHSEED differs between processes), and different seeds give different histories."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import SimOptions, Simulator
from harness.sim.history import dump_line
from harness.sim.simulator import plan_for
from reference_machine import load_definition
from scenarios import bundled

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
HASH_SEEDS = ("0", "12345")
SEEDS = (0, 7, 2024)
MODES = ("default", "swarm")
WORKFLOWS = [path.stem for path in bundled()]

sys.path.insert(0, str(HERE))
from sim_child import history_bytes, out_name  # noqa: E402

sys.path.remove(str(HERE))


def scenario(name: str) -> Path:
    return ROOT / "scenarios" / f"{name}.yaml"


def children(args_by_hash_seed: dict[str, list[str]]) -> dict[str, subprocess.CompletedProcess]:
    """Runs one child per PYTHONHASHSEED, side by side, and gives how each ended."""
    started = {hash_seed: subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE,
                                           stderr=subprocess.PIPE,
                                           env={**os.environ, "PYTHONHASHSEED": hash_seed})
               for hash_seed, args in args_by_hash_seed.items()}
    done = {}
    for hash_seed, process in started.items():
        out, err = process.communicate(timeout=300)
        done[hash_seed] = subprocess.CompletedProcess(process.args, process.returncode, out, err)
    return done


def sim_child(names: list[str], seeds: list[int], modes: list[str], *out: Path) -> list[str]:
    return [sys.executable, str(HERE / "sim_child.py"),
            ",".join(str(scenario(name)) for name in names), ",".join(map(str, seeds)),
            ",".join(modes), *map(str, out)]


@pytest.fixture(scope="module")
def child_folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Runs every workflow, mode and seed in one child per PYTHONHASHSEED; gives their folders."""
    folders = {hash_seed: tmp_path_factory.mktemp(f"hash-{hash_seed}")
               for hash_seed in HASH_SEEDS}
    ended = children({hash_seed: sim_child(WORKFLOWS, list(SEEDS), list(MODES), folder)
                      for hash_seed, folder in folders.items()})
    for process in ended.values():
        assert process.returncode == 0, process.stderr.decode()
    return folders


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", WORKFLOWS)
def test_same_seed_same_bytes_across_processes(child_folders: dict[str, Path], name: str,
                                               mode: str) -> None:
    """Children under two PYTHONHASHSEEDs and this process write the same bytes, per seed."""
    for seed in SEEDS:
        file = out_name(str(scenario(name)), mode, seed)
        first, second = (child_folders[h].joinpath(file).read_bytes() for h in HASH_SEEDS)
        assert first, f"seed {seed}: the child wrote no history"
        assert first == second, f"seed {seed}: the children's histories differ"
        assert history_bytes(str(scenario(name)), seed, mode) == first, (
            f"seed {seed}: this process's history differs from the children's")


def test_children_really_hash_differently() -> None:
    """The children's string hashing differs, so the byte comparison above means something."""
    code = "print(hash('fsmharness'))"
    ended = children({hash_seed: [sys.executable, "-c", code] for hash_seed in HASH_SEEDS})
    assert len({process.stdout for process in ended.values()}) == len(HASH_SEEDS)


def test_child_writes_standard_output_or_a_file(tmp_path: Path) -> None:
    """A child given one run writes the same bytes to standard output as to a file."""
    out = tmp_path / "history.jsonl"
    one = (["refund_escalation"], [3], ["swarm"])
    ended = children({"0": sim_child(*one, out), "12345": sim_child(*one)})
    assert all(process.returncode == 0 for process in ended.values()), ended
    assert out.read_bytes() == ended["12345"].stdout
    assert out.read_bytes() == history_bytes(str(scenario("refund_escalation")), 3, "swarm")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", WORKFLOWS)
def test_different_seeds_give_different_histories(name: str, mode: str) -> None:
    """Each of a handful of seeds gives a history of its own."""
    histories = {seed: history_bytes(str(scenario(name)), seed, mode) for seed in range(8)}
    assert len(set(histories.values())) == len(histories)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", WORKFLOWS)
def test_one_simulator_runs_alike_twice(name: str, mode: str) -> None:
    """Two run() calls on one Simulator give identical histories, ledgers and summaries."""
    definition = load_definition(scenario(name))
    plan = plan_for(definition, swarm=mode == "swarm")
    simulator = Simulator(definition, SimOptions(seed=5, plan=plan))
    first, second = simulator.run(), simulator.run()
    assert [dump_line(r) for r in first.history] == [dump_line(r) for r in second.history]
    assert first.ledger == second.ledger
    assert first.summary() == second.summary()
    assert simulator.run(6).seed == 6  # a seed given to run() wins over the options' seed,
    again = simulator.run()  # and leaves nothing behind for the next run
    assert [dump_line(r) for r in again.history] == [dump_line(r) for r in first.history]


@pytest.mark.parametrize("mode", MODES)
def test_cli_history_file_is_identical_across_processes(tmp_path: Path, mode: str) -> None:
    """`fsmharness run --history` writes the same file for a seed under two PYTHONHASHSEEDs."""
    outs = {hash_seed: tmp_path / f"history-{hash_seed}.jsonl" for hash_seed in HASH_SEEDS}
    swarm = ["--swarm"] if mode == "swarm" else []
    ended = children({hash_seed: [sys.executable, "-m", "harness.cli", "run",
                                  "scenarios/refund_escalation.yaml", "--seed", "11",
                                  "--history", str(out), *swarm]
                      for hash_seed, out in outs.items()})
    for process in ended.values():
        assert process.returncode == 0, process.stderr.decode()
    first, second = (outs[hash_seed].read_bytes() for hash_seed in HASH_SEEDS)
    assert first
    assert first == second
    assert first == history_bytes(str(scenario("refund_escalation")), 11, mode)
