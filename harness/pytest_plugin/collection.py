"""Definition files collected as tests: each file matching `fsm_definitions` becomes three
items, `lint`, `fuzz` (under every fault) and `explore` (to `--fsm-depth`).
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.adapters.targets import Target, resolve_machine
from harness.engines.campaign import describe_failure, explore_target, plan_of
from harness.engines.exhaustive import ExploreOptions
from harness.errors import HarnessError
from harness.pytest_plugin.campaigns import CampaignFailed, record_section, replay_dir, run_fuzz
from harness.pytest_plugin.settings import session_settings
from reference_machine import (
    DefinitionError,
    DefinitionSyntaxError,
    Severity,
    lint,
    load_definition,
)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    settings = session_settings(parent.config)
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


def _relative(config: pytest.Config, path: Path) -> str:
    """Names a file as pytest does: relative to the rootdir when under it."""
    try:
        return str(path.resolve().relative_to(config.rootpath.resolve()))
    except ValueError:
        return str(path)


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
        settings = session_settings(self.config)
        machine = resolve_machine(settings.machine)
        target = Target(self._relative(), definition, machine)
        if self.check == "fuzz":
            fuzzed, section = run_fuzz(self.config, target, self.nodeid)
            held = fuzzed.held
        else:
            options = ExploreOptions(depth=settings.depth, faults_max=1,
                                     plan=plan_of(target, settings.faults), states_max=50_000)
            explored, section = explore_target(target, options, replay_dir(self.config))
            held = explored.held
        record_section(self.config, section, self.nodeid)
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
