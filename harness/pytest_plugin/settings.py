"""What a session can set: the options (group `fsmharness`) and the ini keys of the same
names, each with a parser that refuses a bad value with `pytest.UsageError`; the
`FsmSettings` they make; and the session's state in `config.stash` (`SESSION`, read
through `session_settings`).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from fault_injection import FaultKind
from harness.engines.campaign import parse_faults
from harness.engines.fuzz import DEFAULT_STRATEGY, EXECUTORS, RUNS_DEFAULT
from harness.engines.guided import STRATEGIES
from harness.errors import HarnessError

_DEFAULT_GLOBS = "workflow_*.yaml workflow_*.json"
_SEED_SLOTS, _SEED_STRIDE = 100_000, 1_000  # a test's seeds: seed + slot(test id) * stride


def _whole(name: str, low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(str(text).strip())
        except ValueError:
            raise pytest.UsageError(f"{name}: expected a whole number, got {text!r}") from None
        if value < low:
            raise pytest.UsageError(f"{name}: expected at least {low}, got {value}")
        return value
    return parse


def _seconds(name: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(str(text).strip())
        except ValueError:
            raise pytest.UsageError(f"{name}: expected seconds, got {text!r}") from None
        if not value > 0:
            raise pytest.UsageError(f"{name}: expected a positive number of seconds, got "
                                    f"{text!r}")
        return value
    return parse


def _percent(name: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(str(text).strip().removesuffix("%"))
        except ValueError:
            raise pytest.UsageError(f"{name}: expected a percent, got {text!r}") from None
        if not 0 <= value <= 100:
            raise pytest.UsageError(f"{name}: expected a percent from 0 to 100, got {text!r}")
        return value
    return parse


def _faults(name: str) -> Callable[[str], tuple[FaultKind, ...] | None]:
    def parse(text: str) -> tuple[FaultKind, ...] | None:
        try:
            return parse_faults(str(text))
        except HarnessError as exc:
            raise pytest.UsageError(f"{name}: {exc}") from None
    return parse


def _choice(name: str, choices: Sequence[str]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = str(text).strip()
        if value not in choices:
            raise pytest.UsageError(f"{name}: expected one of {', '.join(choices)}, got "
                                    f"{text!r}")
        return value
    return parse


def _text(name: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if not str(text).strip():
            raise pytest.UsageError(f"{name}: expected a value, got an empty one")
        return str(text).strip()
    return parse


def _folder(name: str) -> Callable[[str], Path]:
    def parse(text: str) -> Path:
        if not str(text).strip():
            raise pytest.UsageError(f"{name}: expected a folder, got an empty value")
        return Path(text)
    return parse


#: option -> (ini key, parser, default, help)
OPTIONS: dict[str, tuple[str, Callable[[str], Any], Any, str]] = {
    "--fsm-seed": ("fsm_seed", _whole("--fsm-seed", 0), 0,
                   "The base seed of every campaign (default 0)."),
    "--fsm-runs": ("fsm_runs", _whole("--fsm-runs", 1), RUNS_DEFAULT,
                   f"Seeded runs per fuzz campaign (default {RUNS_DEFAULT}, as the "
                   "command line's)."),
    "--fsm-budget": ("fsm_budget", _seconds("--fsm-budget"), None,
                     "A time budget in seconds per campaign (with the runs, whichever ends "
                     "first)."),
    "--fsm-faults": ("fsm_faults", _faults("--fsm-faults"), None,
                     "Fault kinds to inject: all (default), none, a comma-separated list, or all "
                     "less some (all,-second_worker)."),
    "--fsm-report": ("fsm_report", _folder("--fsm-report"), None,
                     "Write the session's report (JSON, Markdown, HTML) into this folder."),
    "--fsm-depth": ("fsm_depth", _whole("--fsm-depth", 1), 4,
                    "The depth of exhaustive search for collected definition files "
                    "(default 4)."),
    "--fsm-min-coverage": ("fsm_min_coverage", _percent("--fsm-min-coverage"), None,
                           "Fail a fuzz campaign that takes fewer than this percent of the "
                           "declared transitions (one that takes none always fails)."),
    "--fsm-strategy": ("fsm_strategy", _choice("--fsm-strategy", STRATEGIES), DEFAULT_STRATEGY,
                       f"How fuzz campaigns draw their runs: swarm, guided or mixed (default "
                       f"{DEFAULT_STRATEGY})."),
    "--fsm-executor": ("fsm_executor", _choice("--fsm-executor", EXECUTORS), "local",
                       "Where fuzz campaigns run their seeds: local (worker processes) or dask "
                       "(tasks on a Dask cluster; the results are the same)."),
    "--fsm-scheduler": ("fsm_scheduler", _text("--fsm-scheduler"), None,
                        "The Dask scheduler's address for --fsm-executor dask (without it, a "
                        "local cluster)."),
    "--fsm-example-db": ("fsm_example_db", _text("--fsm-example-db"), None,
                         "An example database the fleet shares: redis://host:port/db, a "
                         "folder, or module:attribute naming a Hypothesis ExampleDatabase. "
                         "Hypothesis tests save and replay their failing examples there, and "
                         "swarm fuzz campaigns their failing seeds (replayed first next time)."),
    "--fsm-replay-dir": ("fsm_replay_dir", _folder("--fsm-replay-dir"), None,
                         "Write replay files here (default: the report folder's replays/): a "
                         "folder the fleet shares keeps every worker's in one place."),
    "--fsm-corpus": ("fsm_corpus", _folder("--fsm-corpus"), None,
                     "Keep the guided strategies' corpus in this folder between sessions (its "
                     "entries name their definition and machine; failing schedules run first "
                     "next time)."),
}


@dataclass(frozen=True, slots=True)
class FsmSettings:
    """The session's campaign settings, from the command line, else the ini file, else the
    defaults."""

    seed: int = 0
    runs: int = RUNS_DEFAULT
    budget: float | None = None
    faults: tuple[FaultKind, ...] | None = None  # None: every kind
    report: Path | None = None
    depth: int = 4
    globs: tuple[str, ...] = tuple(_DEFAULT_GLOBS.split())
    machine: str | None = None
    min_coverage: float | None = None
    strategy: str = DEFAULT_STRATEGY
    corpus: Path | None = None
    example_db: str | None = None
    replay_dir: Path | None = None
    executor: str = "local"
    scheduler: str | None = None

    def seed_for(self, test_id: str) -> int:
        """Gives the first seed of a test's campaign: the base seed moved by the test's id,
        the same in every process."""
        return self.seed + zlib.crc32(test_id.encode()) % _SEED_SLOTS * _SEED_STRIDE


@dataclass(slots=True)
class SessionState:
    """The plugin's state for one session, kept in `config.stash[SESSION]`: its settings,
    every campaign's report section, and the report's files once written."""

    settings: FsmSettings
    sections: list[dict[str, Any]] = field(default_factory=list)
    files: Any = None
    example_db: Any = None  # the fleet's example database, when one is given
    hypothesis_profile: str | None = None  # the profile loaded before the fleet's


SESSION = pytest.StashKey[SessionState]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fsmharness", "fsmharness: fuzz workflow definitions and machines")
    for option, (ini, parse, _, text) in OPTIONS.items():
        group.addoption(option, dest=ini, type=parse, default=None, help=text)
        parser.addini(ini, f"{text} (the ini key of {option})", default=None)
    parser.addini("fsm_definitions", "Globs of workflow definition files to collect as tests "
                                     f"(default: {_DEFAULT_GLOBS}).", type="args",
                  default=_DEFAULT_GLOBS.split())
    parser.addini("fsm_machine", "The machine under test (module:attribute) that collected "
                                 "definition files run on (default: the reference machine).",
                  default=None)


def pytest_report_header(config: pytest.Config) -> str:
    settings = config.stash[SESSION].settings
    faults = "all" if settings.faults is None else ",".join(settings.faults) or "none"
    # said before collection: a test's marker or `fsm_fuzz` call may set its own runs, which
    # the summary's line for that campaign tells
    return (f"fsmharness: seed {settings.seed}, {settings.runs} runs per campaign that sets "
            f"none, faults {faults}"
            + (f", report {settings.report}" if settings.report else ""))


def session_settings(config: pytest.Config) -> FsmSettings:
    """Gives the session's settings, as `pytest_configure` read them."""
    return config.stash[SESSION].settings
