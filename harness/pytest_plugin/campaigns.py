"""Running a test's fuzz campaign: the `fsm_fuzz` marker (checked at collection, run
before the test body) and the `fsm_fuzz` fixture (run inside it), the campaign options
they take, the `CampaignReport` a test asserts on, and `run_fuzz`, the one call that
runs a campaign with the session's settings (collected files use it too).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from fault_injection import FaultKind
from harness.adapters.targets import Target, resolve_machine
from harness.checks.adequacy import Gap, check_acknowledged
from harness.checks.coverage import Coverage
from harness.checks.invariants import invariants as registered_invariants
from harness.engines.campaign import describe_failure, fuzz_target, parse_faults, plan_of
from harness.engines.fuzz import FuzzFailure, FuzzOptions, FuzzReport
from harness.errors import HarnessError
from harness.pytest_plugin.settings import SESSION, session_settings
from harness.sim.machine import MachineFactory, ReferenceMachine
from harness.sim.simulator import SimOptions
from reference_machine import DefinitionError, WorkflowDefinition, load_definition


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


def replay_dir(config: pytest.Config) -> Path:
    settings = session_settings(config)
    if settings.replay_dir is not None:
        return settings.replay_dir
    base = settings.report if settings.report is not None else Path(config.rootpath, "reports")
    with contextlib.suppress(ValueError):  # as the user would type it, from where they are
        base = base.resolve().relative_to(Path.cwd().resolve())
    return base / "replays"


def run_fuzz(config: pytest.Config, target: Target, test_id: str,
              given: _CampaignOptions = _CampaignOptions()
              ) -> tuple[FuzzReport, dict[str, Any]]:
    """Runs a campaign with the session's settings (each overridable by `given`); gives the
    engine's report and the campaign's report section."""
    settings = session_settings(config)
    faults = given.faults
    kinds = parse_faults(faults) if isinstance(faults, str) else (
        faults if faults is not None else settings.faults)
    sim = SimOptions(plan=plan_of(target, kinds))
    if given.executions is not None:
        sim = replace(sim, executions=given.executions)
    options = FuzzOptions(
        runs=given.runs if given.runs is not None else settings.runs,
        seed=given.seed if given.seed is not None else settings.seed_for(test_id),
        time_budget_s=settings.budget, replay_dir=replay_dir(config),
        invariants=given.invariants, sim=sim,
        coverage_min=(given.min_coverage if given.min_coverage is not None else
                      settings.min_coverage),
        strategy=settings.strategy,
        corpus_dir=settings.corpus, example_db=config.stash[SESSION].example_db,
        executor=settings.executor, scheduler=settings.scheduler, untested=given.untested)
    return fuzz_target(target, options)


def record_section(config: pytest.Config, section: dict[str, Any], test_id: str) -> None:
    """Keeps a campaign's report section, named by the test that ran it."""
    section["test"] = test_id
    config.stash[SESSION].sections.append(section)


def _campaign(item: pytest.Item, target: Target, given: _CampaignOptions) -> CampaignReport:
    """Runs a test's campaign (the marker's or `fsm_fuzz`'s), named in the summary and the
    report by the test's id (a test's second campaign by its id and `#2`), and judged
    against `expect=` when given."""
    ran = item.stash.setdefault(_CAMPAIGNS, [])
    name = item.nodeid if not ran else f"{item.nodeid} #{len(ran) + 1}"
    report, section = run_fuzz(item.config, replace(target, name=name), item.nodeid, given)
    told = [] if report.held else list(describe_failure(section))
    missed = _missed(report, given.expect) if given.expect else ""
    if given.expect:
        section["expected"] = {"invariants": list(given.expect), "met": not missed}
    record_section(item.config, section, item.nodeid)
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
