"""Line coverage as guided fuzzing's feedback (issue 20's option): the arcs a run takes through
the user's own code, measured with coverage.py, are behaviours too; bad sources are refused."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import planted
import pytest
from planted import PLANTED, WORKFLOW
from running import cli

from harness import FuzzOptions, HarnessError, fuzz
from harness.checks.lines import LineCoverage

pytest.importorskip("coverage")

BRANCHY = '''
def sign(n):
    if n < 0:
        return "negative"
    return "positive"
'''


def _module(folder: Path) -> Any:
    path = folder / "branchy_mod.py"
    path.write_text(BRANCHY, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("branchy_mod", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_measured_run_gives_the_arcs_it_took_and_only_those(tmp_path: Path) -> None:
    module = _module(tmp_path)
    lines = LineCoverage([str(tmp_path)])
    result, negative = lines.measure(lambda: module.sign(-1))
    assert result == "negative"
    _, positive = lines.measure(lambda: module.sign(1))
    assert negative and positive and negative != positive  # each run measured afresh
    assert all(arc[0] == "ln" and arc[1].endswith("branchy_mod.py") for arc in negative)
    assert ("ln", str(tmp_path / "branchy_mod.py"), 4, -2) in negative  # `return "negative"`


def test_a_tracer_already_set_is_set_again_after_a_measured_run(tmp_path: Path) -> None:
    module = _module(tmp_path)
    calls: list[str] = []

    def tracer(frame: FrameType, event: str, arg: object) -> None:
        calls.append(event)

    before = sys.gettrace()
    sys.settrace(tracer)
    try:
        LineCoverage([str(tmp_path)]).measure(lambda: module.sign(2))
        assert sys.gettrace() is tracer
    finally:
        sys.settrace(before)


def test_a_guided_campaign_steered_by_lines_reports_their_arcs_and_repeats() -> None:
    machine, _ = PLANTED["no_duplicate_check"]
    source = str(Path(planted.__file__))

    def campaign(lines: tuple[str, ...]) -> Any:
        return fuzz(WORKFLOW, FuzzOptions(runs=64, shrink=False, replay_dir=None,
                                          strategy="guided", stop_at_first=False,
                                          isolate=False, line_coverage=lines),
                    machine=machine)

    plain, steered, again = campaign(()), campaign((source,)), campaign((source,))
    assert steered.guided["line_arcs"] > 0 and "line_arcs" not in plain.guided
    assert steered.guided["line_coverage"] == [source]
    assert steered.guided["behaviours"] > plain.guided["behaviours"]
    assert steered.coverage.transitions  # it moved
    # same seed, same campaign: the arcs are the run's, not the process's
    assert (steered.guided, [f.seed for f in steered.failures]) == (
        again.guided, [f.seed for f in again.failures])


class TestBadSources:
    def test_line_coverage_is_refused_with_the_swarm_strategy(self) -> None:
        with pytest.raises(HarnessError, match="line coverage steers the guided strategies"):
            FuzzOptions(strategy="swarm", line_coverage=("harness",))

    def test_a_source_that_is_neither_a_path_nor_a_package_is_named(self) -> None:
        with pytest.raises(HarnessError, match=r"'no_such_pkg_x' is no folder, file or "
                                               r"importable package"):
            FuzzOptions(strategy="guided", line_coverage=("no_such_pkg_x",))

    def test_the_cli_says_so_with_exit_2_and_writes_nothing(self, tmp_path: Path) -> None:
        done = cli("fuzz", "scenarios/refund_escalation.yaml", "--strategy", "guided",
                   "--line-coverage", "no_such_pkg_x", "--report", str(tmp_path / "r"))
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert "'no_such_pkg_x' is no folder, file or importable package" in done.stderr
        assert not (tmp_path / "r").exists()

    def test_the_cli_takes_sources_and_reports_the_arcs(self) -> None:
        done = cli("fuzz", "scenarios/refund_escalation.yaml", "--strategy", "guided",
                   "--runs", "16", "--line-coverage", "reference_machine", "--json",
                   "--no-report")
        assert done.returncode == 0, done.stdout + done.stderr
        guided = json.loads(done.stdout)["targets"][0]["guided"]
        assert guided["line_coverage"] == ["reference_machine"] and guided["line_arcs"] > 100
