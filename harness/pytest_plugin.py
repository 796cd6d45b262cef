"""The fsmharness pytest plugin, registered through the `pytest11` entry point: installing the
distribution is enough, and `-p no:fsmharness` turns it off.

- Options (group `fsmharness`) and the ini keys of the same names: `--fsm-seed`, `--fsm-runs`,
  `--fsm-budget`, `--fsm-faults`, `--fsm-report`, `--fsm-depth`, `--fsm-min-coverage`; ini
  only: `fsm_definitions` (the globs of definition files to collect) and `fsm_machine`.
- Fixtures: `fsm_settings`, `fsm_fault_plan`, `fsm_simulator`, `fsm_tool_world`,
  `fsm_frozen_clock`, `fsm_fuzz`, and `fsm_report` for tests marked `fsm_fuzz`.
- The marker `@pytest.mark.fsm_fuzz(definition, machine=..., runs=..., faults=...)` makes the
  test a fuzz campaign; the test body runs after it with the campaign's report. A campaign
  fails its test when an invariant breaks or when it is vacuous (it exercised nothing).
- Files matching `fsm_definitions` (default `workflow_*.yaml workflow_*.json`) become three
  items each: lint, fuzz under every fault, and exhaustive search to `--fsm-depth`.

A campaign's seeds come from `--fsm-seed` and the test's id, so a test draws the same seeds on
any xdist worker (and different tests, so different workers, draw different ones); the workers'
results are merged into the controller's summary and report. Session state lives in
`config.stash`.
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
from harness.engines.fuzz import DEFAULT_STRATEGY, EXECUTORS, FuzzOptions, FuzzReport
from harness.engines.guided import STRATEGIES
from harness.errors import HarnessError
from harness.report.documents import ReportError, document, ensure_writable, write_reports
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

__all__ = ["CampaignFailed", "FsmSettings"]

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
    "--fsm-runs": ("fsm_runs", _whole("--fsm-runs", 1), 100,
                   "Seeded runs per fuzz campaign (default 100)."),
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
    runs: int = 100
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
                   "executions=None, invariants=None, min_coverage=None): run a fuzz campaign "
                   "over a definition (a path relative to the test file, a WorkflowDefinition, "
                   "or module:attribute) before the test; the test fails when an invariant "
                   "breaks or the campaign exercised nothing (or less than min_coverage "
                   "percent of the declared transitions)")
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
    return (f"fsmharness: seed {settings.seed}, {settings.runs} runs per campaign, "
            f"faults {faults}" + (f", report {settings.report}" if settings.report else ""))


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


def _replay_dir(config: pytest.Config) -> Path:
    settings = _settings(config)
    if settings.replay_dir is not None:
        return settings.replay_dir
    base = settings.report if settings.report is not None else Path(config.rootpath, "reports")
    with contextlib.suppress(ValueError):  # as the user would type it, from where they are
        base = base.resolve().relative_to(Path.cwd().resolve())
    return base / "replays"


def _run_fuzz(config: pytest.Config, target: Target, test_id: str, *,
              runs: int | None = None, seed: int | None = None,
              faults: str | tuple[FaultKind, ...] | None = None,
              executions: int | None = None,
              invariants: tuple[str, ...] | None = None,
              min_coverage: float | None = None) -> FuzzReport:
    """Runs a campaign with the session's settings (each overridable), records its section for
    the summary and the report; raises `CampaignFailed` when an invariant broke or the
    campaign was vacuous."""
    settings = _settings(config)
    kinds = parse_faults(faults) if isinstance(faults, str) else (
        faults if faults is not None else settings.faults)
    sim = SimOptions(plan=plan_of(target, kinds))
    if executions is not None:
        sim = replace(sim, executions=executions)
    options = FuzzOptions(
        runs=runs if runs is not None else settings.runs,
        seed=seed if seed is not None else settings.seed_for(test_id),
        time_budget_s=settings.budget, replay_dir=_replay_dir(config),
        invariants=invariants, sim=sim,
        coverage_min=min_coverage if min_coverage is not None else settings.min_coverage,
        strategy=settings.strategy,
        corpus_dir=settings.corpus, example_db=config.stash[_SESSION].example_db,
        executor=settings.executor, scheduler=settings.scheduler)
    report, section = fuzz_target(target, options)
    _record(config, section, test_id)
    if not report.held:
        raise CampaignFailed(target.name, describe_failure(section))
    return report


def _record(config: pytest.Config, section: dict[str, Any], test_id: str) -> None:
    """Keeps a campaign's report section, named by the test that ran it."""
    section["test"] = test_id
    config.stash[_SESSION].sections.append(section)


def _marked_target(item: pytest.Item, marker: pytest.Mark) -> Target:
    if not marker.args:
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.fsm_fuzz needs a definition: a "
                                f"path, a WorkflowDefinition or module:attribute")
    given = marker.args[0]
    machine = marker.kwargs.get("machine")
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
        return Target(_relative(item.config, path), load_definition(path), factory)
    if ":" in text and not Path(text).exists():
        from harness.adapters.targets import resolve_targets
        found = resolve_targets([text], machine if isinstance(machine, str) else None)[0]
        return found if machine is None or isinstance(machine, str) else replace(
            found, machine=factory)
    return Target(text, load_definition(text), factory)


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


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Generator[None, object, object]:
    marker = pyfuncitem.get_closest_marker("fsm_fuzz")
    if marker is not None:
        try:
            target = _marked_target(pyfuncitem, marker)
            options = {key: marker.kwargs[key] for key in
                       ("runs", "seed", "faults", "executions", "invariants", "min_coverage")
                       if key in marker.kwargs}
            if isinstance(options.get("invariants"), list):
                options["invariants"] = tuple(options["invariants"])
            report, problem = _run_fuzz(pyfuncitem.config, target, pyfuncitem.nodeid,
                                        **options), ""
        except CampaignFailed as exc:
            report, problem = None, str(exc)
        except (HarnessError, DefinitionError) as exc:
            report, problem = None, f"fsm_fuzz: {exc}"
        if problem:  # failed here, not inside the handler: pytest then shows it once
            pytest.fail(problem, pytrace=False)
        if "fsm_report" in pyfuncitem.funcargs:
            pyfuncitem.funcargs["fsm_report"] = report
    return (yield)


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
def fsm_fuzz(request: pytest.FixtureRequest) -> Callable[..., FuzzReport]:
    """Runs a fuzz campaign from inside a test: `fsm_fuzz(definition, machine=None, runs=...,
    faults=..., executions=..., invariants=..., min_coverage=...)` gives the report, and fails
    the test with the shrunk trace and the replay command when an invariant breaks (or says
    what never happened when the campaign was vacuous)."""

    def run(definition: Any, machine: MachineFactory | None = None, **options: Any
            ) -> FuzzReport:
        carried = _carried_definition(definition)
        if carried is not None:  # a machine that names its definition (an adapter's target)
            definition, machine = carried, machine or definition
        target = Target(request.node.nodeid, load_definition(definition),
                        machine or ReferenceMachine)
        try:
            return _run_fuzz(request.config, target, request.node.nodeid, **options)
        except CampaignFailed as exc:
            problem = str(exc)
        pytest.fail(problem, pytrace=False)  # outside the handler: shown once

    return run


@pytest.fixture
def fsm_report() -> FuzzReport | None:
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
            _run_fuzz(self.config, target, self.nodeid)
            return
        options = ExploreOptions(depth=settings.depth, faults_max=1,
                                 plan=plan_of(target, settings.faults), states_max=50_000)
        report, section = explore_target(target, options, _replay_dir(self.config))
        _record(self.config, section, self.nodeid)
        if not report.held:
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
    runs = sum(s["runs"] for s in sections)
    steps = sum(s["steps"] for s in sections)
    faults: dict[str, int] = {}
    for section in sections:
        for kind, count in section["faults"].items():
            faults[kind] = faults.get(kind, 0) + count
    broken = [s for s in sections if not s["held"]]
    write(f"{len(sections)} campaign(s): {len(invariants)} invariants checked, {runs:,} runs, "
          f"{steps:,} steps, {sum(faults.values()):,} faults injected, {len(broken)} failing")
    write(f"  invariants: {', '.join(invariants)}")
    for section in sections:
        coverage = ", ".join(f"{name} {part['reached']}/{part['of']}"
                             for name, part in section["coverage"].items())
        verdict = "held" if section["held"] else "VIOLATED" if section["failures"] else (
            "VACUOUS")
        detail = (section["verdict"] if section["engine"] == "explore" else
                  f"{section['runs']:,} runs, {section['steps']:,} steps; coverage {coverage}")
        write(f"  {verdict:8} {section['name']} ({section['engine']}): {detail}")
    if faults:
        write("  faults injected: " + ", ".join(f"{kind} {count:,}"
                                                for kind, count in sorted(faults.items())))
    if isinstance(state.files, ReportError):
        write(f"  report not written: {state.files}", red=True)
    elif state.files is not None:
        write(f"  report: {state.files.html} (and {state.files.json.name}, "
              f"{state.files.markdown.name})")
