"""The fsmharness pytest plugin, registered through the `pytest11` entry point: installing the
distribution is enough, and `-p no:fsmharness` turns it off.

- Options (group `fsmharness`) and the ini keys of the same names: `--fsm-seed`, `--fsm-runs`,
  `--fsm-budget`, `--fsm-faults`, `--fsm-report`, `--fsm-depth`, `--fsm-min-coverage`; ini
  only: `fsm_definitions` (the globs of definition files to collect) and `fsm_machine`.
- Fixtures: `fsm_settings`, `fsm_fault_plan`, `fsm_simulator`, `fsm_tool_world`,
  `fsm_frozen_clock`, `fsm_fuzz`, and `fsm_report` for tests marked `fsm_fuzz`.
- The marker `@pytest.mark.fsm_fuzz(definition, machine=..., runs=..., faults=...,
  expect=...)` makes the test a fuzz campaign; the test body runs after it with the campaign's
  report. A campaign fails its test when an invariant breaks or when it is vacuous (it
  exercised nothing); with `expect=` (an invariant's name, or a list of them) it fails its test
  unless it breaks one of those, and only those.
- `fsm_fuzz(definition, ...)` runs a campaign inside a test and gives its `CampaignReport`
  without raising: the test asserts on it (`held`, `failures`, `coverage`). `check=True` fails
  the test at the call when the campaign failed; a failed campaign whose verdict the test never
  read fails the test when it ends, so a bare call cannot pass over a broken invariant.
- Files matching `fsm_definitions` (default `workflow_*.yaml workflow_*.json`) become three
  items each: lint, fuzz under every fault, and exhaustive search to `--fsm-depth`.

A campaign's seeds come from `--fsm-seed` and the test's id, so a test draws the same seeds on
any xdist worker (and different tests, so different workers, draw different ones); the workers'
results are merged into the controller's summary and report, where a test's campaign is named
by the test's id (a collected file's, by the file). Session state lives in `config.stash`, a
test's campaigns in its item's.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import zlib
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import freezegun
import pytest

from fault_injection import FaultKind, FaultPlan, default_plan, no_faults
from harness.adapters.targets import Target, resolve_machine
from harness.checks.adequacy import Gap, check_acknowledged
from harness.checks.coverage import Coverage
from harness.checks.invariants import invariants as registered_invariants
from harness.engines.campaign import (
    describe_failure,
    explore_target,
    fuzz_target,
    parse_faults,
    plan_of,
    select_faults,
)
from harness.engines.exhaustive import ExploreOptions
from harness.engines.fleet import example_database
from harness.engines.fuzz import (
    DEFAULT_STRATEGY,
    EXECUTORS,
    RUNS_DEFAULT,
    FuzzFailure,
    FuzzOptions,
    FuzzReport,
)
from harness.engines.guided import STRATEGIES
from harness.errors import HarnessError
from harness.report.document import ReportError, document, runs_told
from harness.report.writing import ensure_writable, write_reports
from harness.sim.choices import Choices
from harness.sim.machine import MachineFactory, ReferenceMachine
from harness.sim.simulator import FROZEN_EPOCH, SimOptions, Simulator
from harness.sim.world import Clock, ToolWorld
from reference_machine import (
    DefinitionError,
    DefinitionSyntaxError,
    Severity,
    WorkflowDefinition,
    lint,
    load_definition,
)

__all__ = ["CampaignFailed", "CampaignReport", "FsmSettings"]

_DEFAULT_GLOBS = "workflow_*.yaml workflow_*.json"
_SEED_SLOTS, _SEED_STRIDE = 100_000, 1_000  # a test's seeds: seed + slot(test id) * stride


# --- settings -----------------------------------------------------------------------------


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
_OPTIONS: dict[str, tuple[str, Callable[[str], Any], Any, str]] = {
    "--fsm-seed": ("fsm_seed", _whole("--fsm-seed", 0), 0,
                   "The base seed of every campaign (default 0)."),
    "--fsm-runs": ("fsm_runs", _whole("--fsm-runs", 1), RUNS_DEFAULT,
                   f"Seeded runs per fuzz campaign (default {RUNS_DEFAULT}, as the "
                   "command line's)."),
    "--fsm-budget": ("fsm_budget", _seconds("--fsm-budget"), None,
                     "A time budget in seconds per campaign (with the runs, whichever ends "
                     "first)."),
    "--fsm-faults": ("fsm_faults", _faults("--fsm-faults"), None,
                     "Fault kinds to inject: all (default), none, or a comma-separated list."),
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
class _Session:
    settings: FsmSettings
    sections: list[dict[str, Any]] = field(default_factory=list)
    files: Any = None
    example_db: Any = None  # the fleet's example database, when one is given
    hypothesis_profile: str | None = None  # the profile loaded before the fleet's


def _shared_database(spec: str) -> Any:
    """Opens the fleet's example database and makes it Hypothesis's for the session (a
    profile on top of the one loaded, so the user's other settings stay); a database that
    cannot be opened stops the session with one line."""
    from hypothesis import settings as hypothesis_settings

    try:
        database = example_database(spec)
    except HarnessError as exc:
        raise pytest.UsageError(f"fsm_example_db: {exc}") from None
    hypothesis_settings.register_profile("fsmharness-fleet", parent=hypothesis_settings.default,
                                         database=database)
    hypothesis_settings.load_profile("fsmharness-fleet")
    return database


_SESSION = pytest.StashKey[_Session]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fsmharness", "fsmharness: fuzz workflow definitions and machines")
    for option, (ini, parse, _, text) in _OPTIONS.items():
        group.addoption(option, dest=ini, type=parse, default=None, help=text)
        parser.addini(ini, f"{text} (the ini key of {option})", default=None)
    parser.addini("fsm_definitions", "Globs of workflow definition files to collect as tests "
                                     f"(default: {_DEFAULT_GLOBS}).", type="args",
                  default=_DEFAULT_GLOBS.split())
    parser.addini("fsm_machine", "The machine under test (module:attribute) that collected "
                                 "definition files run on (default: the reference machine).",
                  default=None)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "fsm_fuzz(definition, *, machine=None, runs=None, seed=None, faults=None, "
                   "executions=None, invariants=None, min_coverage=None, expect=None): run a "
                   "fuzz campaign over a definition (a path relative to the test file, a "
                   "WorkflowDefinition, or module:attribute) before the test; the test fails "
                   "when an invariant breaks or the campaign exercised nothing (or less than "
                   "min_coverage percent of the declared transitions). With expect= (an "
                   "invariant's name, or a list of them) the test fails unless the campaign "
                   "breaks one of those, and only those")
    values: dict[str, Any] = {}
    for ini, parse, default, _ in _OPTIONS.values():
        given = config.getoption(ini)
        if given is None:
            raw = config.getini(ini)
            given = parse(raw) if raw not in (None, "") else default
        values[ini.removeprefix("fsm_")] = given
    settings = FsmSettings(globs=tuple(config.getini("fsm_definitions")),
                           machine=config.getini("fsm_machine") or None, **values)
    try:  # a machine that does not import stops the session, not each test
        resolve_machine(settings.machine)
    except HarnessError as exc:
        raise pytest.UsageError(f"fsm_machine: {exc}") from None
    try:  # so do settings that do not go together
        FuzzOptions(strategy=settings.strategy, executor=settings.executor,
                    scheduler=settings.scheduler)
    except HarnessError as exc:
        raise pytest.UsageError(f"fsmharness: {exc}") from None
    session = _Session(settings)
    if settings.example_db is not None:
        from hypothesis import settings as hypothesis_settings

        session.hypothesis_profile = getattr(hypothesis_settings, "_current_profile", None)
        session.example_db = _shared_database(settings.example_db)
    config.stash[_SESSION] = session
    if settings.report is not None and getattr(config, "workerinput", None) is None:
        _check_writable(settings.report)
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistMerge(config), "fsmharness-xdist")


def pytest_unconfigure(config: pytest.Config) -> None:
    """Gives Hypothesis back the profile it had before the fleet's database (a session run
    inside another, as pytester's are, leaves the outer one as it was)."""
    session = config.stash.get(_SESSION, None)
    if session is not None and session.hypothesis_profile is not None:
        from hypothesis import settings as hypothesis_settings

        hypothesis_settings.load_profile(session.hypothesis_profile)


def _check_writable(folder: Path) -> None:
    """Refuses, before any test runs, a report folder that cannot be written."""
    try:
        ensure_writable(folder)
    except ReportError as exc:
        raise pytest.UsageError(f"--fsm-report {exc}") from None


def pytest_report_header(config: pytest.Config) -> str:
    settings = config.stash[_SESSION].settings
    faults = "all" if settings.faults is None else ",".join(settings.faults) or "none"
    # said before collection: a test's marker or `fsm_fuzz` call may set its own runs, which
    # the summary's line for that campaign tells
    return (f"fsmharness: seed {settings.seed}, {settings.runs} runs per campaign that sets "
            f"none, faults {faults}"
            + (f", report {settings.report}" if settings.report else ""))


def _settings(config: pytest.Config) -> FsmSettings:
    return config.stash[_SESSION].settings


# --- campaigns ------------------------------------------------------------------------------


class CampaignFailed(Exception):
    """An invariant broke in a campaign: the violation, the shrunk trace, the replay
    command."""

    def __init__(self, name: str, lines: Sequence[str]) -> None:
        super().__init__("\n".join(lines))
        self.name = name
        self.lines = list(lines)


@dataclass(frozen=True, slots=True)
class _CampaignOptions:
    """What a test sets for its campaign (the marker's or `fsm_fuzz`'s keywords); what it
    leaves None comes from the session's settings."""

    runs: int | None = None
    seed: int | None = None
    faults: str | tuple[FaultKind, ...] | None = None
    executions: int | None = None
    invariants: tuple[str, ...] | None = None
    min_coverage: float | None = None
    expect: tuple[str, ...] = ()  # the invariants one of which the campaign must break
    untested: Mapping[str, str] = field(default_factory=dict)  # gaps accepted, with reasons


_MARKER_KEYS = ("machine", "runs", "seed", "faults", "executions", "invariants",
                "min_coverage", "expect", "untested")


def _campaign_options(given: Mapping[str, Any]) -> _CampaignOptions:
    """Gives a test's campaign options from its keywords (`machine` aside), raising
    `HarnessError` for one the campaign would misread: an unknown keyword, fault kind or
    invariant name, or an `expect=` that names an invariant `invariants=` leaves unchecked."""
    unknown = [key for key in given if key not in _MARKER_KEYS]
    if unknown:
        msg = f"unknown option {unknown[0]!r}; the options are {', '.join(_MARKER_KEYS)}"
        raise HarnessError(msg)
    faults = given.get("faults")
    if isinstance(faults, str):
        try:
            parse_faults(faults)
        except HarnessError as exc:
            raise HarnessError(f"faults: {exc}") from None
    checked = _invariant_names("invariants", given["invariants"]) if given.get(
        "invariants") is not None else None
    expect = _invariant_names("expect", given["expect"]) if given.get(
        "expect") is not None else ()
    if checked is not None:
        unchecked = [name for name in expect if name not in checked]
        if unchecked:
            msg = (f"expect: {', '.join(unchecked)} cannot break: invariants= checks only "
                   f"{', '.join(checked)}")
            raise HarnessError(msg)
    untested = given.get("untested") or {}
    if not isinstance(untested, Mapping):
        raise HarnessError(f"untested: expected a mapping of gap codes to reasons "
                           f"({{'crash_point:after_save': 'why'}}), got {untested!r}")
    check_acknowledged(untested, where="untested=")
    return _CampaignOptions(runs=given.get("runs"), seed=given.get("seed"), faults=faults,
                            executions=given.get("executions"), invariants=checked,
                            min_coverage=given.get("min_coverage"), expect=expect,
                            untested=dict(untested))


def _invariant_names(key: str, given: Any) -> tuple[str, ...]:
    """Gives the invariant names of `key=`: one name, or a list or tuple of them, each one
    registered (a built-in, or a user's `@invariant`)."""
    names = (given,) if isinstance(given, str) else given
    if not isinstance(names, list | tuple) or not all(isinstance(n, str) for n in names):
        msg = f"{key}: expected an invariant's name or a list of them, got {given!r}"
        raise HarnessError(msg)
    if not names:
        raise HarnessError(f"{key}: expected at least one invariant's name, got none")
    try:
        registered_invariants(names)
    except HarnessError as exc:
        raise HarnessError(f"{key}: {exc}") from None
    return tuple(dict.fromkeys(names))


class CampaignReport:
    """A fuzz campaign a test ran, for the test to assert on: its verdict (`held`, `verdict`,
    `failures`, `vacuous`), `coverage` and `runs`, and everything else its engine's report
    (`fuzz_report`, a `FuzzReport`) holds, read through; `name` is what the summary and the
    report call it (the test's id). `str()` gives its failure as the terminal tells it: the
    violation, the shrunk trace, the replay command.

    A campaign that failed (and was not expected to) fails its test when the test ends if the
    test never read its verdict (`held`, `verdict`, `failures`, `vacuous` or `summary()`)."""

    __slots__ = ("_lines", "_passes", "_read", "_told", "expect", "fuzz_report", "name")

    def __init__(self, name: str, fuzz_report: FuzzReport, lines: Sequence[str] = (), *,
                 expect: tuple[str, ...] = (), passes: bool | None = None) -> None:
        self.name = name
        self.fuzz_report = fuzz_report
        self.expect = expect  # the invariants one of which it was to break
        self._lines = list(lines)  # why it failed its test, as the terminal tells it
        # whether its test may pass: it held, or it broke as `expect` says
        self._passes = fuzz_report.held if passes is None else passes
        self._read = False  # the test read its verdict
        self._told = False  # its lines are in the test's failure already

    @property
    def held(self) -> bool:
        """Tells whether every invariant held and the campaign exercised the machine."""
        self._read = True
        return self.fuzz_report.held

    @property
    def verdict(self) -> str:
        """Gives the verdict: held, violated, vacuous, untested or nondeterministic."""
        self._read = True
        return self.fuzz_report.verdict

    @property
    def failures(self) -> tuple[FuzzFailure, ...]:
        """Gives the failing seeds, each with what it broke (`rule`, `violations`) and its
        shrunk counterexample and replay file."""
        self._read = True
        return self.fuzz_report.failures

    @property
    def vacuous(self) -> str:
        """Gives why the campaign exercised nothing worth a verdict ("" when it did)."""
        self._read = True
        return self.fuzz_report.vacuous

    @property
    def untested(self) -> tuple[Gap, ...]:
        """Gives what the campaign left untested that it claims (the crash points, fault
        kinds and moves of `harness.checks.adequacy`): empty when it exercised them."""
        self._read = True
        return self.fuzz_report.adequacy.gaps

    @property
    def coverage(self) -> Coverage:
        """Gives what the campaign reached: `states`, `transitions`, guard outcomes, faults
        and crash points."""
        return self.fuzz_report.coverage

    @property
    def runs(self) -> int:
        """Gives the number of runs the campaign made."""
        return self.fuzz_report.runs

    def summary(self) -> dict[str, Any]:
        """Gives the report as plain JSON data."""
        self._read = True
        return self.fuzz_report.summary()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.fuzz_report, name)

    def __str__(self) -> str:
        return "\n".join(self._lines) if self._lines else (
            f"{self.name}: {self.fuzz_report.verdict} in {self.fuzz_report.runs:,} runs")

    def __repr__(self) -> str:  # what a failed assert on it shows, short enough to read whole
        broken = dict.fromkeys(failure.rule for failure in self.fuzz_report.failures)
        return (f"<CampaignReport {self.name}: {self.fuzz_report.verdict}"
                + (f" ({', '.join(broken)})" if broken else "") + ">")


_CAMPAIGNS = pytest.StashKey[list[CampaignReport]]()  # an item's campaigns, in order


def _replay_dir(config: pytest.Config) -> Path:
    settings = _settings(config)
    if settings.replay_dir is not None:
        return settings.replay_dir
    base = settings.report if settings.report is not None else Path(config.rootpath, "reports")
    with contextlib.suppress(ValueError):  # as the user would type it, from where they are
        base = base.resolve().relative_to(Path.cwd().resolve())
    return base / "replays"


def _run_fuzz(config: pytest.Config, target: Target, test_id: str,
              given: _CampaignOptions = _CampaignOptions()
              ) -> tuple[FuzzReport, dict[str, Any]]:
    """Runs a campaign with the session's settings (each overridable by `given`); gives the
    engine's report and the campaign's report section."""
    settings = _settings(config)
    faults = given.faults
    kinds = parse_faults(faults) if isinstance(faults, str) else (
        faults if faults is not None else settings.faults)
    sim = SimOptions(plan=plan_of(target, kinds))
    if given.executions is not None:
        sim = replace(sim, executions=given.executions)
    options = FuzzOptions(
        runs=given.runs if given.runs is not None else settings.runs,
        seed=given.seed if given.seed is not None else settings.seed_for(test_id),
        time_budget_s=settings.budget, replay_dir=_replay_dir(config),
        invariants=given.invariants, sim=sim,
        coverage_min=(given.min_coverage if given.min_coverage is not None else
                      settings.min_coverage),
        strategy=settings.strategy,
        corpus_dir=settings.corpus, example_db=config.stash[_SESSION].example_db,
        executor=settings.executor, scheduler=settings.scheduler, untested=given.untested)
    return fuzz_target(target, options)


def _record(config: pytest.Config, section: dict[str, Any], test_id: str) -> None:
    """Keeps a campaign's report section, named by the test that ran it."""
    section["test"] = test_id
    config.stash[_SESSION].sections.append(section)


def _campaign(item: pytest.Item, target: Target, given: _CampaignOptions) -> CampaignReport:
    """Runs a test's campaign (the marker's or `fsm_fuzz`'s), named in the summary and the
    report by the test's id (a test's second campaign by its id and `#2`), and judged
    against `expect=` when given."""
    ran = item.stash.setdefault(_CAMPAIGNS, [])
    name = item.nodeid if not ran else f"{item.nodeid} #{len(ran) + 1}"
    report, section = _run_fuzz(item.config, replace(target, name=name), item.nodeid, given)
    told = [] if report.held else list(describe_failure(section))
    missed = _missed(report, given.expect) if given.expect else ""
    if given.expect:
        section["expected"] = {"invariants": list(given.expect), "met": not missed}
    _record(item.config, section, item.nodeid)
    campaign = CampaignReport(name, report, [missed, *told] if missed else told,
                              expect=given.expect,
                              passes=not missed if given.expect else report.held)
    ran.append(campaign)
    return campaign


def _missed(report: FuzzReport, expect: tuple[str, ...]) -> str:
    """Gives why a campaign expected to break one of `expect` missed it ("" when it broke
    one of them and nothing else)."""
    wanted = expect[0] if len(expect) == 1 else f"one of {', '.join(expect)}"
    if report.verdict == "held":
        aimed = sum(int(part["runs"]) for part in report.aimed.values())
        runs = (f"{report.runs - aimed:,} run{'s' if report.runs - aimed != 1 else ''}"
                + (f" + {aimed} aimed" if aimed else ""))
        return (f"expected {wanted} to break, but every invariant held in {runs} (fixed? then "
                f"drop expect= and keep the test as a guard)")
    if report.verdict == "vacuous":
        return f"expected {wanted} to break, but the campaign was vacuous: {report.vacuous}"
    if report.verdict == "untested":
        return (f"expected {wanted} to break, but nothing broke and the campaign left "
                f"untested what it could have broken at: {report.adequacy.summary}")
    if report.verdict == "nondeterministic":
        return (f"expected {wanted} to break, but the campaign was nondeterministic: the same "
                f"seed gave two histories")
    broken = list(dict.fromkeys(violation.rule for failure in report.failures
                                for violation in failure.violations))
    hit = [rule for rule in broken if rule in expect]
    other = [rule for rule in broken if rule not in expect]
    if not hit:
        return f"expected {wanted} to break, but {', '.join(other)} broke instead"
    if other:
        return (f"{', '.join(hit)} broke as expected, but {', '.join(other)} broke too (add "
                f"it to expect= if it is the same bug)")
    return ""


def _test_target(item: pytest.Item, given: Any, machine: Any = None) -> Target:
    """Gives the target a test names, for the marker and `fsm_fuzz` alike: a definition (a
    path relative to the test file, else to the working folder; a `WorkflowDefinition` or its
    data), a machine that carries its definition, or `module:attribute`; `machine` is a
    factory or `module:attribute`."""
    factory: MachineFactory = (resolve_machine(machine) if isinstance(machine, str) else
                               machine or ReferenceMachine)
    if isinstance(given, WorkflowDefinition | Mapping):
        return Target(item.nodeid, load_definition(given), factory)
    carried = _carried_definition(given)
    if carried is not None:  # a machine that names its definition (an adapter's target)
        return Target(item.nodeid, carried, given if machine is None else factory)
    text = str(given)
    path = Path(item.path).parent / text
    if path.exists():
        return Target(item.nodeid, load_definition(path), factory)
    if ":" in text and not Path(text).exists():
        from harness.adapters.targets import resolve_targets
        found = resolve_targets([text], machine if isinstance(machine, str) else None)[0]
        return found if machine is None or isinstance(machine, str) else replace(
            found, machine=factory)
    return Target(item.nodeid, load_definition(given), factory)


def _carried_definition(given: Any) -> WorkflowDefinition | None:
    """Gives the definition a machine factory carries in its `definition` attribute."""
    named = getattr(given, "definition", None)
    return named if callable(given) and isinstance(named, WorkflowDefinition) else None


def _relative(config: pytest.Config, path: Path) -> str:
    """Names a file as pytest does: relative to the rootdir when under it."""
    try:
        return str(path.resolve().relative_to(config.rootpath.resolve()))
    except ValueError:
        return str(path)


def _marker_options(marker: pytest.Mark) -> _CampaignOptions:
    """Gives the marker's campaign options, raising `HarnessError` for a misused marker."""
    if not marker.args:
        raise HarnessError("needs a definition: a path, a WorkflowDefinition or "
                           "module:attribute")
    return _campaign_options(marker.kwargs)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Refuses a misused `fsm_fuzz` marker when its test is collected, as pytest refuses a
    misused `parametrize`: before any campaign runs, naming the test."""
    marker = metafunc.definition.get_closest_marker("fsm_fuzz")
    if marker is None:
        return
    try:
        _marker_options(marker)
    except HarnessError as exc:
        problem = f"{metafunc.definition.nodeid}: @pytest.mark.fsm_fuzz: {exc}"
    else:
        return
    pytest.fail(problem, pytrace=False)  # outside the handler: no chained traceback


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Generator[None, object, object]:
    marker = pyfuncitem.get_closest_marker("fsm_fuzz")
    if marker is not None:
        try:
            options = _marker_options(marker)
            target = _test_target(pyfuncitem, marker.args[0], marker.kwargs.get("machine"))
            campaign = _campaign(pyfuncitem, target, options)
            problem = "" if campaign._passes else str(campaign)
            campaign._told = not campaign._passes
        except (HarnessError, DefinitionError) as exc:
            campaign, problem = None, f"fsm_fuzz: {exc}"
        if problem:  # failed here, not inside the handler: pytest then shows it once
            pytest.fail(problem, pytrace=False)
        if "fsm_report" in pyfuncitem.funcargs:
            pyfuncitem.funcargs["fsm_report"] = campaign
    outcome = yield
    unread = [campaign for campaign in pyfuncitem.stash.get(_CAMPAIGNS, [])
              if not campaign._passes and not campaign._told and not campaign._read]
    if unread:
        for campaign in unread:
            campaign._told = True
        pytest.fail("\n".join(
            f"fsm_fuzz: {campaign.name}: the campaign failed and the test never read its "
            f"verdict (assert on report.held, or pass check=True):\n{campaign}"
            for campaign in unread), pytrace=False)
    return outcome


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Adds to a test that failed on its own (an assert on `fsm_fuzz`'s report, say) a
    section per campaign of it that failed: the violation, the trace, the replay command."""
    report = yield
    if call.when == "call" and report.failed:
        for campaign in item.stash.get(_CAMPAIGNS, []):
            if not campaign._passes and not campaign._told:
                report.sections.append((f"fsmharness campaign {campaign.name}", str(campaign)))
    return report


# --- fixtures -------------------------------------------------------------------------------


@pytest.fixture
def fsm_settings(request: pytest.FixtureRequest) -> FsmSettings:
    """The session's campaign settings (seed, runs, budget, faults, report folder)."""
    return _settings(request.config)


@pytest.fixture
def fsm_fault_plan(fsm_settings: FsmSettings) -> FaultPlan:
    """The fault plan `--fsm-faults` selects, at the default rates."""
    return select_faults(default_plan(), fsm_settings.faults)


@pytest.fixture
def fsm_simulator(request: pytest.FixtureRequest, fsm_settings: FsmSettings
                  ) -> Callable[..., Simulator]:
    """Builds a simulator: `fsm_simulator(definition, machine=None, **sim_options)`, seeded
    from the session's seed and the test's id, under the session's fault selection."""

    def build(definition: Any, machine: MachineFactory | None = None,
              **options: Any) -> Simulator:
        target = Target(request.node.nodeid, load_definition(definition),
                        machine or ReferenceMachine)
        options.setdefault("seed", fsm_settings.seed_for(request.node.nodeid))
        options.setdefault("plan", plan_of(target, fsm_settings.faults))
        return Simulator(target.definition, SimOptions(**options), target.machine)

    return build


class SimulatedWorld(ToolWorld):
    """A tool world on its own, as `fsm_tool_world` builds it: `tools` to call, `ledger` of
    what took effect, `records` of what happened, `clock` to move."""

    def __init__(self, definition: WorkflowDefinition, plan: FaultPlan, seed: int) -> None:
        self.clock = Clock()
        self.records: list[Any] = []
        super().__init__(definition, plan, Choices(seed), self.clock, self.records.append,
                         seed=seed)


@pytest.fixture
def fsm_tool_world(request: pytest.FixtureRequest, fsm_settings: FsmSettings
                   ) -> Callable[..., SimulatedWorld]:
    """Builds the simulated tools of a definition: `fsm_tool_world(definition, faults=False)`
    (with `faults=True`, the session's fault selection strikes the calls)."""

    def build(definition: Any, faults: bool = False) -> SimulatedWorld:
        target = Target(request.node.nodeid, load_definition(definition))
        plan = plan_of(target, fsm_settings.faults) if faults else no_faults()
        return SimulatedWorld(target.definition, plan,
                              fsm_settings.seed_for(request.node.nodeid))

    return build


@pytest.fixture
def fsm_frozen_clock() -> Iterator[Any]:
    """Freezes wall time (`datetime.now()`, `time.time()`) at fsmharness's epoch for code
    under test that reads it; `fsm_frozen_clock.tick(seconds)` moves it."""
    with freezegun.freeze_time(FROZEN_EPOCH) as frozen:
        yield frozen


@pytest.fixture
def fsm_fuzz(request: pytest.FixtureRequest) -> Callable[..., CampaignReport]:
    """Runs a fuzz campaign from inside a test and gives its `CampaignReport`, for the test to
    assert on: `fsm_fuzz(definition, machine=None, *, runs=..., seed=..., faults=...,
    executions=..., invariants=..., min_coverage=..., expect=..., untested=..., check=False)`
    (`untested`: the gaps the test accepts, `{code: reason}`, as a definition's `untested:`).

    It raises only when asked: `check=True` fails the test at the call when the campaign
    failed (the shrunk trace and the replay command, or what never happened when it was
    vacuous); `expect=` (an invariant's name or a list of them) fails it unless the campaign
    broke one of those, and only those. A failed campaign whose verdict the test never read
    (`held`, `verdict`, `failures`, `vacuous`) fails the test when it ends."""

    def run(definition: Any, machine: MachineFactory | str | None = None, *,
            runs: int | None = None, seed: int | None = None,
            faults: str | tuple[FaultKind, ...] | None = None, executions: int | None = None,
            invariants: str | Sequence[str] | None = None, min_coverage: float | None = None,
            expect: str | Sequence[str] | None = None,
            untested: Mapping[str, str] | None = None, check: bool = False
            ) -> CampaignReport:
        given = {"runs": runs, "seed": seed, "faults": faults, "executions": executions,
                 "invariants": invariants, "min_coverage": min_coverage, "expect": expect,
                 "untested": untested}
        try:
            options = _campaign_options({key: value for key, value in given.items()
                                         if value is not None})
            campaign = _campaign(request.node, _test_target(request.node, definition, machine),
                                 options)
        except (HarnessError, DefinitionError) as exc:
            problem = f"fsm_fuzz: {exc}"
        else:
            if campaign._passes or not (check or options.expect):
                return campaign
            campaign._told = True
            problem = str(campaign)
        pytest.fail(problem, pytrace=False)  # outside the handler: shown once

    return run


@pytest.fixture
def fsm_report() -> CampaignReport | None:
    """In a test marked `fsm_fuzz`, the campaign's report (None elsewhere)."""
    return None


# --- collected definition files -------------------------------------------------------------


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    settings = _settings(parent.config)
    relative = _relative(parent.config, file_path)
    if not any(fnmatch.fnmatch(file_path.name, glob) or fnmatch.fnmatch(relative, glob)
               for glob in settings.globs):
        return None
    if file_path.suffix == ".json" and _written_by_fsmharness(file_path):
        return None  # a replay file or report of an earlier run, not a definition
    return WorkflowFile.from_parent(parent, path=file_path)


def _written_by_fsmharness(path: Path) -> bool:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False  # the lint item will say what is wrong with it
    return isinstance(data, dict) and str(data.get("kind", "")).startswith("fsmharness.")


class WorkflowFile(pytest.File):
    """A workflow definition file: linted, fuzzed under every fault, explored to a depth."""

    def collect(self) -> Iterator[pytest.Item]:
        for check in ("lint", "fuzz", "explore"):
            yield WorkflowItem.from_parent(self, name=check, check=check)


class WorkflowItem(pytest.Item):
    """One check of a collected definition file."""

    def __init__(self, *, check: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.check = check

    def runtest(self) -> None:
        path = self.path
        if self.check == "lint":
            try:
                findings = lint(path)
            except DefinitionSyntaxError as exc:
                findings = list(exc.findings)
            errors = [f for f in findings if f.severity is Severity.ERROR]
            if errors:
                raise CampaignFailed(str(path), [
                    f"{path}:{f.line or ''}: {f.location or '(file)'}: {f.message} [{f.code}]"
                    for f in errors])
            return
        try:
            definition = load_definition(path)
        except DefinitionError as exc:
            raise CampaignFailed(str(path), [f"cannot {self.check}: the definition has "
                                             f"errors (see the lint item): {exc}"]) from None
        settings = _settings(self.config)
        machine = resolve_machine(settings.machine)
        target = Target(self._relative(), definition, machine)
        if self.check == "fuzz":
            fuzzed, section = _run_fuzz(self.config, target, self.nodeid)
            held = fuzzed.held
        else:
            options = ExploreOptions(depth=settings.depth, faults_max=1,
                                     plan=plan_of(target, settings.faults), states_max=50_000)
            explored, section = explore_target(target, options, _replay_dir(self.config))
            held = explored.held
        _record(self.config, section, self.nodeid)
        if not held:
            raise CampaignFailed(target.name, describe_failure(section))

    def _relative(self) -> str:
        return _relative(self.config, self.path)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> str:
        if isinstance(excinfo.value, CampaignFailed):
            return f"{self._relative()} ({self.check}):\n" + "\n".join(excinfo.value.lines)
        if isinstance(excinfo.value, HarnessError | DefinitionError):
            return f"{self._relative()} ({self.check}): {excinfo.value}"
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, self.name


# --- summary, report and xdist ------------------------------------------------------------


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    state = config.stash.get(_SESSION, None)
    if state is None:
        return
    workeroutput = getattr(config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: the controller merges and reports
        workeroutput["fsmharness"] = json.dumps(state.sections)
        return
    if state.settings.report is not None and state.sections:
        try:
            state.files = write_reports(document("pytest", _ordered(state.sections),
                                                  config.invocation_params.args),
                                        state.settings.report, stem="pytest")
        except ReportError as exc:
            state.files = exc


def _passes(section: Mapping[str, Any]) -> bool:
    """Tells whether a campaign's section lets its test pass: it held, or it broke as its
    `expect=` says."""
    expected = section.get("expected")
    return bool(expected["met"]) if expected else bool(section["held"])


def _ordered(sections: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Gives the sections in a stable order, whichever worker finished first."""
    return sorted(sections, key=lambda s: (s.get("test", ""), s["name"], s["engine"]))


class _XdistMerge:
    """On the xdist controller: takes each worker's sections as it finishes."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        output = getattr(node, "workeroutput", {}).get("fsmharness")
        if output:
            self.config.stash[_SESSION].sections.extend(json.loads(output))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int,
                            config: pytest.Config) -> None:
    state = config.stash.get(_SESSION, None)
    if state is None or not state.sections or getattr(config, "workeroutput", None) is not None:
        return
    sections = _ordered(state.sections)
    write = terminalreporter.write_line
    terminalreporter.section("fsmharness")
    invariants = sorted({name for s in sections for name in s["invariants"]})
    checked = sorted({name for s in sections for name in s.get("checked", s["invariants"])})
    runs = sum(s["runs"] for s in sections)
    steps = sum(s["steps"] for s in sections)
    faults: dict[str, int] = {}
    for section in sections:
        for kind, count in section["faults"].items():
            faults[kind] = faults.get(kind, 0) + count
    failing = [s for s in sections if not _passes(s)]
    untested = [s for s in failing if s.get("untested") and not s["failures"]]
    expected = [s for s in sections if s.get("expected") and _passes(s)]
    write(f"{len(sections)} campaign(s): {len(checked)} of {len(invariants)} invariants "
          f"checked, {runs:,} runs, "
          f"{steps:,} steps, {sum(faults.values()):,} faults injected, {len(failing)} failing"
          + (f" ({len(untested)} untested)" if untested else "")
          + (f", {len(expected)} broke as expected" if expected else ""))
    write(f"  invariants checked: {', '.join(checked)}")
    if len(checked) < len(invariants):
        write(f"  checking nothing: {', '.join(n for n in invariants if n not in checked)}")
    for section in sections:
        coverage = ", ".join(f"{name} {part['reached']}/{part['of']}"
                             for name, part in section["coverage"].items())
        verdict = "held" if section["held"] else "VIOLATED" if section["failures"] else (
            "UNTESTED" if section.get("untested") else "VACUOUS")
        detail = (section["verdict"] if section["engine"] == "explore" else
                  f"{runs_told(section)}, {section['steps']:,} steps; coverage {coverage}")
        if section.get("expected"):
            names = section["expected"]["invariants"]
            if _passes(section):
                verdict = "expected"
                broken = dict.fromkeys(f["rule"] for f in section["failures"])
                detail = f"broke {', '.join(broken)} as expected; {detail}"
            else:
                wanted = names[0] if len(names) == 1 else f"one of {', '.join(names)}"
                detail = f"{detail}; expected {wanted} to break"
        write(f"  {verdict:8} {section['name']} ({section['engine']}): {detail}")
        if not section["failures"]:
            for gap in section.get("untested", ()):
                write(f"           untested: {gap['what']}; {gap['how']}")
        for note in section.get("notes", ()):
            write(f"           note: {note}")
    if faults:
        write("  faults injected: " + ", ".join(f"{kind} {count:,}"
                                                for kind, count in sorted(faults.items())))
    if isinstance(state.files, ReportError):
        write(f"  report not written: {state.files}", red=True)
    elif state.files is not None:
        write(f"  report: {state.files.html} (and {state.files.json.name}, "
              f"{state.files.markdown.name})")
