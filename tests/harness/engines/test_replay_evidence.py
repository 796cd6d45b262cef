"""A replay file is evidence: one whose rule, seed or schedule was edited breaks its checksum;
one edited (and its checksum made again) to name another machine or module, to relabel its
actions or to hold a choice no run can draw is refused (exit 2, the reason), never turned
into a verdict; and a module it names is imported only when it is the user's, and said."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hostile import ROOT, Case
from planted import PLANTED

from harness import FuzzOptions, fuzz
from harness.engines.replay import checksum_of, user_module

PLANTED_YAML = ROOT / "tests" / "data" / "workflows" / "planted.yaml"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The replay file of the key-per-attempt bug, as the fuzzer saved it."""
    machine, _ = PLANTED["key_per_attempt"]
    report = fuzz(PLANTED_YAML, FuzzOptions(runs=500, replay_dir=tmp_path_factory.mktemp("r")),
                  machine=machine)
    path = report.failures[0].replay_file
    assert path is not None
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _edited(data: dict[str, Any], edit: Callable[[dict[str, Any]], None], *,
            sealed: bool = True) -> str:
    """Gives the file edited; `sealed`, its checksum made again, as one who knows the format
    would: the schedule's own checks must still refuse it."""
    copy = json.loads(json.dumps(data))
    edit(copy)
    if sealed:
        copy["checksum"] = checksum_of(copy)
    return json.dumps(copy)


def _relabel(data: dict[str, Any]) -> None:
    step = sorted(data["actions"], key=int)[1]
    data["actions"][step] = "start x9"


def _impossible(data: dict[str, Any]) -> None:
    data["choices"].append([1, "b", 10**30, 0.5])


EDITS: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("another machine", lambda d: d.update(machine="os:system"),
     "names the module 'os', which is the standard library's or an installed package's"),
    ("a library import", lambda d: d.update(imports=["subprocess"]),
     "names the module 'subprocess'"),
    ("a library's function through one's own module",
     lambda d: d.update(machine="harness.engines.replay:os.system"),
     "the machine 'harness.engines.replay:os.system' is os's"),
    ("a relabelled action", _relabel,
     "the schedule cannot be carried out as recorded: step "),
    ("an impossible choice", _impossible,
     "the schedule cannot be carried out as recorded: the choice [1, 'b', "
     "1000000000000000000000000000000] was never drawn"),
    ("a choice out of range", lambda d: d["choices"].append([1, "b", 0, 1e30]),
     "choices["),
    ("a plan's faults as text", lambda d: d["options"]["plan"].update(faults="crash"),
     "options.plan: <plan>: faults: Input should be a valid dictionary"),  # was exit 70
    ("a billion executions", lambda d: d["options"].update(executions=10**9),
     "options.executions: expected at most 1,000, got 1000000000"),  # exhausted memory
]


#: Edits to the evidence itself, the checksum left as written: each used to be judged (an
#: edited rule said "fixed", exit 0).
UNSEALED: list[tuple[str, Callable[[dict[str, Any]], None]]] = [
    ("another rule", lambda d: d.update(rule="terminal_stays_terminal")),
    ("another seed", lambda d: d.update(seed=d["seed"] + 1)),
    ("a dropped choice", lambda d: d["choices"].pop()),
    ("another step", lambda d: d.update(step=1)),
]
SEEDS = [("a negative seed", -1, "got -1"),
         ("a seed of 65 bits", 2**64, "got 18446744073709551616"),
         ("a seed of 301 bits", 2**300, "got a number of 301 bits"),
         ("a true seed", True, "got True")]


@pytest.mark.parametrize("edit", [edit for _, edit in UNSEALED],
                         ids=[name for name, _ in UNSEALED])
def test_an_edit_to_the_evidence_breaks_its_checksum(
        edit: Callable[[dict[str, Any]], None], recorded: dict[str, Any],
        hostile: Callable[[Case], Any]) -> None:
    hostile(Case("unsealed", ("replay", "r.json"), 2, "the file was edited since fsmharness "
                 "wrote it", files={"r.json": _edited(recorded, edit, sealed=False)}))


@pytest.mark.parametrize(("seed", "line"), [(seed, line) for _, seed, line in SEEDS],
                         ids=[name for name, _, _ in SEEDS])
def test_a_seed_out_of_range_is_refused(seed: object, line: str, recorded: dict[str, Any],
                                        hostile: Callable[[Case], Any]) -> None:
    hostile(Case("seed", ("replay", "r.json"), 2, f"'seed': expected a whole number from 0 "
                 f"below 2**64, {line}", files={"r.json": _edited(
                     recorded, lambda d: d.update(seed=seed))}))


def test_a_file_without_a_checksum_is_replayed_as_before(
        recorded: dict[str, Any], hostile: Callable[[Case], Any]) -> None:
    """Files written before there was one are still evidence, guarded by the other checks."""
    hostile(Case("older", ("replay", "r.json"), 1, "reproduced no_duplicate_effect", files={
        "r.json": _edited(recorded, lambda d: d.pop("checksum"), sealed=False)}))


def test_an_unsealed_file_that_no_longer_fails_says_it_is_unsealed(
        recorded: dict[str, Any], hostile: Callable[[Case], Any]) -> None:
    """Its checksum dropped and its rule edited: it is judged as an older file would be, and
    the verdict says the evidence was never sealed."""
    def unseal(data: dict[str, Any]) -> None:
        data.pop("checksum")
        data["rule"] = "terminal_stays_terminal"

    result = hostile(Case("older, edited", ("replay", "r.json"), 0, "no longer fails", files={
        "r.json": _edited(recorded, unseal, sealed=False)}))
    assert "the file has no checksum (an older fsmharness wrote it)" in result.stdout


@pytest.mark.parametrize(("edit", "line"), [(e, line) for _, e, line in EDITS],
                         ids=[name for name, _, _ in EDITS])
def test_an_edited_replay_file_is_refused_not_judged(
        edit: Callable[[dict[str, Any]], None], line: str, recorded: dict[str, Any],
        hostile: Callable[[Case], Any]) -> None:
    """Each used to print "no longer fails ... held" and exit 0."""
    hostile(Case("edited", ("replay", "r.json"), 2, line,
                 files={"r.json": _edited(recorded, edit)}))


def test_the_untouched_file_reproduces_and_says_what_it_imported(
        recorded: dict[str, Any], hostile: Callable[[Case], Any]) -> None:
    result = hostile(Case("as saved", ("replay", "r.json"), 1, "reproduced no_duplicate_effect",
                          files={"r.json": json.dumps(recorded)}))
    assert "fsmharness: imported planted, which the replay file names" in result.stderr


def test_a_module_named_on_the_command_line_is_trusted(recorded: dict[str, Any],
                                                       hostile: Callable[[Case], Any]) -> None:
    """The rule refuses what the user did not name; naming it with --import is consent."""
    hostile(Case("trusted", ("replay", "r.json", "--import", "json"), 1, "reproduced",
                 files={"r.json": _edited(recorded, lambda d: d.update(imports=["json"]))}))


def test_the_rule_reads_where_a_module_lives(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A module of the user's own, wherever `sys.path` finds it (here a folder that is neither
    the working folder nor on PYTHONPATH, as a script's `sys.path.insert` makes it), is theirs;
    the standard library and installed packages are not."""
    (tmp_path / "mine.py").write_text("x = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert user_module("mine") and user_module("harness.sim") and user_module("scenarios")
    assert not user_module("os") and not user_module("json.decoder")
    assert not user_module("sys")  # built in
    assert not user_module("pytest")  # an installed package


def test_a_replay_file_that_is_a_fifo_is_refused(hostile: Callable[[Case], Any]) -> None:
    """It blocked forever waiting for a writer; now it waits 10 s for one."""
    hostile(Case("fifo", ("replay", "pipe"), 2, "nothing came through it for 10 s",
                 setup=lambda folder: os.mkfifo(folder / "pipe"), timeout=60))


def test_a_context_with_whole_number_keys_keeps_its_checksum(tmp_path: Path) -> None:
    """From Python a context may have keys 2 and 10, which the file holds as text and sorts
    otherwise: the checksum is of what the file holds (found by review)."""
    from harness import ExploreOptions, explore, replay, write_replay

    machine, _ = PLANTED["late_timer_applied"]
    found = explore(PLANTED_YAML, ExploreOptions(depth=5, context={2: "a", 10: "b"}),
                    machine=machine)
    assert found.counterexample is not None
    assert replay(write_replay(found.counterexample, tmp_path)).reproduced
