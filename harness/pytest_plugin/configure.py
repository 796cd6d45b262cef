"""Starting and ending the plugin's session: `pytest_configure` reads the settings, refuses
a machine or settings that do not go together, opens the fleet's example database,
checks the report folder and, under xdist, registers the merge of the workers'
results; `pytest_unconfigure` gives Hypothesis back its profile.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.adapters.targets import resolve_machine
from harness.engines.fleet import example_database
from harness.engines.fuzz import FuzzOptions
from harness.errors import HarnessError
from harness.pytest_plugin.settings import OPTIONS, SESSION, FsmSettings, SessionState
from harness.pytest_plugin.summary import XdistMerge
from harness.report.document import ReportError
from harness.report.writing import ensure_writable


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
    for ini, parse, default, _ in OPTIONS.values():
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
    session = SessionState(settings)
    if settings.example_db is not None:
        from hypothesis import settings as hypothesis_settings

        session.hypothesis_profile = getattr(hypothesis_settings, "_current_profile", None)
        session.example_db = _shared_database(settings.example_db)
    config.stash[SESSION] = session
    if settings.report is not None and getattr(config, "workerinput", None) is None:
        _check_writable(settings.report)
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(XdistMerge(config), "fsmharness-xdist")


def pytest_unconfigure(config: pytest.Config) -> None:
    """Gives Hypothesis back the profile it had before the fleet's database (a session run
    inside another, as pytester's are, leaves the outer one as it was)."""
    session = config.stash.get(SESSION, None)
    if session is not None and session.hypothesis_profile is not None:
        from hypothesis import settings as hypothesis_settings

        hypothesis_settings.load_profile(session.hypothesis_profile)


def _check_writable(folder: Path) -> None:
    """Refuses, before any test runs, a report folder that cannot be written."""
    try:
        ensure_writable(folder)
    except ReportError as exc:
        raise pytest.UsageError(f"--fsm-report {exc}") from None
