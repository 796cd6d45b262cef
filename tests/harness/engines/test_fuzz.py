"""`fuzz`: seeded campaigns over processes, stop at the first failure or collect them all,
coverage and stats, and the options it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest
from planted import PLANTED, WORKFLOW

from harness import FuzzOptions, HarnessError, SimOptions, fuzz


def comparable(report: object) -> dict[str, object]:
    """Gives a report's summary without the wall-clock figures."""
    summary = report.summary()  # type: ignore[attr-defined]
    return {k: v for k, v in summary.items() if k not in ("elapsed_s", "steps_per_second")}


class TestCampaigns:
    def test_processes_merge_in_seed_order(self) -> None:
        """Two processes give the very report one gives (stats, coverage, faults)."""
        options = FuzzOptions(runs=120, replay_dir=None)
        one = fuzz(WORKFLOW, options)
        two = fuzz(WORKFLOW, FuzzOptions(runs=120, replay_dir=None, processes=2))
        assert comparable(one) == comparable(two)
        assert one.runs == 120 and one.held

    def test_the_first_failing_seed_does_not_depend_on_processes(self, tmp_path: Path) -> None:
        """Stopping at the first failure stops at the same seed, whatever runs in parallel."""
        machine, _ = PLANTED["approval_from_agent"]  # found after a few hundred runs
        # swarm: the failing run is then the seed's own, the seed-th run (a guided campaign's
        # sameness across processes is tested in test_guided.py)
        options = dict(runs=3_000, shrink=False, replay_dir=None, strategy="swarm")
        one = fuzz(WORKFLOW, FuzzOptions(**options), machine=machine)  # type: ignore[arg-type]
        two = fuzz(WORKFLOW, FuzzOptions(**options, processes=2),  # type: ignore[arg-type]
                   machine=machine)
        assert [f.seed for f in one.failures] == [f.seed for f in two.failures]
        assert one.runs == two.runs == one.failures[0].seed + 1

    def test_collecting_keeps_every_failure_and_shrinks_each_rule_once(self,
                                                                       tmp_path: Path) -> None:
        """Without stop_at_first every failing seed is kept; one replay file per rule."""
        machine, rule = PLANTED["unbounded_retry"]
        report = fuzz(WORKFLOW, FuzzOptions(runs=60, stop_at_first=False, replay_dir=tmp_path),
                      machine=machine)
        assert report.runs == 60 and len(report.failures) > 1
        assert {f.rule for f in report.failures} == {rule}
        shrunk = [f for f in report.failures if f.counterexample is not None]
        assert len(shrunk) == 1 and len(list(tmp_path.glob("*.json"))) == 1

    def test_a_time_budget_ends_a_campaign_without_a_run_count(self) -> None:
        """`runs=None` with a budget runs until the clock says stop."""
        report = fuzz(WORKFLOW, FuzzOptions(runs=None, time_budget_s=0.5, replay_dir=None))
        assert report.runs >= 8 and report.elapsed_s < 5

    def test_progress_is_told_after_each_batch(self) -> None:
        """The progress callback sees runs and steps grow."""
        seen: list[tuple[int, int, int]] = []
        report = fuzz(WORKFLOW, FuzzOptions(runs=20, replay_dir=None),
                      progress=lambda *a: seen.append(a))
        aimed = sum(part["runs"] for part in report.aimed.values())
        assert [runs for runs, _, _ in seen] == [8, 16, 20] + ([20 + aimed] if aimed else [])
        assert seen[-1][1] > seen[0][1] and all(failures == 0 for *_, failures in seen)


class TestReport:
    def test_coverage_and_stats(self) -> None:
        """States, transitions, guard outcomes, fault kinds and crash points reached, and the
        steps and speed of the campaign."""
        report = fuzz(WORKFLOW, FuzzOptions(runs=300, replay_dir=None))
        coverage = report.summary()["coverage"]
        assert coverage["states"]["reached"] == coverage["states"]["of"] == 10
        assert coverage["transitions"]["reached"] == coverage["transitions"]["of"] == 13
        assert coverage["faults"]["reached"] == 16
        assert coverage["crash_points"]["reached"] == 4
        assert report.steps > 3_000 and report.steps_per_second > 0
        assert set(report.faults) == {str(k) for k in report.plan.kinds}

    def test_guard_outcomes_are_covered_both_ways(self) -> None:
        """The refund's guards are seen holding and failing."""
        report = fuzz(Path(__file__).resolve().parents[3] / "scenarios"
                      / "refund_escalation.yaml", FuzzOptions(runs=200, replay_dir=None))
        guards = report.summary()["coverage"]["guards"]
        assert guards["of"] == 4 and guards["reached"] == 4


class TestOptions:
    @pytest.mark.parametrize(("options", "message"), [
        (dict(runs=0), r"options\.runs: expected a whole number of at least 1, got 0"),
        (dict(runs=None), r"give a number of runs, a time budget, or both"),
        (dict(processes=0), r"options\.processes"),
        (dict(time_budget_s=-1), r"options\.time_budget_s: expected a positive number"),
        (dict(sim={"executions": 2}), r"options\.sim: expected SimOptions, got dict"),
    ], ids=["runs", "neither", "processes", "budget", "sim"])
    def test_bad_options_are_refused(self, options: dict[str, object], message: str) -> None:
        """Each bad option names itself and what was expected."""
        with pytest.raises(HarnessError, match=message):
            FuzzOptions(**options)  # type: ignore[arg-type]

    def test_unknown_invariants_are_refused_before_any_run(self) -> None:
        """Naming an invariant that does not exist fails at once."""
        with pytest.raises(HarnessError, match=r"no invariant named 'no_dupes'"):
            fuzz(WORKFLOW, FuzzOptions(runs=1, invariants=("no_dupes",), replay_dir=None))

    def test_a_campaign_can_check_some_invariants_only(self) -> None:
        """With `invariants`, a bug other rules would catch goes unreported."""
        machine, _ = PLANTED["dispatch_before_commit"]
        report = fuzz(WORKFLOW, FuzzOptions(runs=20, invariants=("no_stuck_execution",),
                                            replay_dir=None), machine=machine)
        assert report.held and report.invariants == ("no_stuck_execution",)

    def test_the_simulation_options_shape_each_run(self) -> None:
        """`sim` sets executions and steps; swarm mode is on by default."""
        report = fuzz(WORKFLOW, FuzzOptions(runs=10, replay_dir=None,
                                            sim=SimOptions(executions=1, steps_max=5)))
        assert report.plan.swarm and report.steps <= 10 * (5 + SimOptions().liveness_steps)
