"""Guided fuzzing (issue 20): a corpus of schedules that showed new behaviour, mutated; the
same seed gives the same campaign in any number of processes; a mutant's failure shrinks and
replays from its file; a kept corpus runs its failing schedule first; targets are climbed and
reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from planted import PLANTED, WORKFLOW
from running import cli

from harness import FuzzOptions, HarnessError, fuzz, replay, target
from harness.checks.behaviour import behaviours_of, bucket
from harness.checks.coverage import Coverage
from harness.checks.targets import TARGETS
from harness.engines.guided import AIM_SITES, Guide, Learnt, Trial
from harness.sim.choices import AimedChoices, MutantChoices, RecordingChoices, ScriptedChoices
from harness.sim.history import Decided, Delivered, Observed
from harness.sim.simulator import SimOptions, Simulator

HARD = "approval_from_agent"  # the suite's planted bug blind runs need the most runs for under
# the default plan without swarm (a forged approval at 2% of approvals: swarm's hot runs find
# it in a few): where guided fuzzing's aim at the sites struck least is what finds it


def _campaign(strategy: str, **options: object):  # type: ignore[no-untyped-def]
    machine, _ = PLANTED[HARD]
    given = {"runs": 3_000, "shrink": False, "replay_dir": None, "strategy": strategy,
             "swarm": False, **options}
    return fuzz(WORKFLOW, FuzzOptions(**given), machine=machine)  # type: ignore[arg-type]


class TestChoices:
    def test_a_mutant_with_no_script_draws_what_the_seed_draws(self) -> None:
        simulator = Simulator(WORKFLOW, SimOptions())
        seeded, mutant = RecordingChoices(7), MutantChoices({}, 7)
        one, two = simulator.run(7, choices=seeded), simulator.run(7, choices=mutant)
        assert one.history == two.history and seeded.recorded == mutant.recorded

    def test_a_mutant_takes_its_script_where_it_has_a_key_and_draws_the_rest(self) -> None:
        simulator = Simulator(WORKFLOW, SimOptions())
        parent = RecordingChoices(3)
        simulator.run(3, choices=parent)
        first = parent.recorded[0]
        script = {(first.step, first.tag, first.n): 0.123456}
        mutant = MutantChoices(script, 99)
        simulator.run(3, choices=mutant)
        assert mutant.recorded[0].u == 0.123456
        assert mutant.recorded[1].u != parent.recorded[1].u  # drawn from its own seed


class TestAimedChoices:
    """Faults aimed at a site (issue 20): the tag, where, the state acted on and the event."""

    FORGED = ("f:forged_approval", "", "review", "approval")

    def _simulator(self) -> Simulator:
        machine, _ = PLANTED[HARD]
        return Simulator(WORKFLOW, SimOptions(), machine)

    def test_unaimed_it_draws_what_the_seed_draws_and_names_every_site_passed(self) -> None:
        simulator = self._simulator()
        seeded, aimed = RecordingChoices(11), AimedChoices({}, 11)
        one, two = simulator.run(11, choices=seeded), simulator.run(11, choices=aimed)
        assert one.history == two.history and seeded.recorded == aimed.recorded
        fault_draws = [c for c in aimed.recorded if c.tag.startswith("f:")]
        assert aimed.sites and sum(aimed.sites.values()) <= len(fault_draws)
        assert all(site[0].startswith("f:") and len(site) == 4 for site in aimed.sites)

    def test_an_aimed_site_strikes_once_and_the_run_replays_from_its_record(self) -> None:
        simulator = self._simulator()
        seed = next(seed for seed in range(50) if self._passes_approval(simulator, seed))
        aimed = AimedChoices({}, seed, {self.FORGED: 1.0})
        result = simulator.run(seed, choices=aimed)
        forged = [r for r in result.history if type(r).__name__ == "FaultInjected"
                  and r.fault == "forged_approval"]
        assert len(forged) == 1 and aimed.sites[self.FORGED] == 1
        assert self.FORGED not in aimed.aims  # struck once: aimed no more
        again = simulator.run(seed, choices=ScriptedChoices(aimed.recorded))
        assert again.history == result.history  # the strike lies below the plan's own rate

    def test_a_site_the_run_never_passes_changes_nothing(self) -> None:
        simulator = self._simulator()
        nowhere = ("f:crash", "before_commit", "no_such_state", "no_such_event")
        plain, aimed = RecordingChoices(4), AimedChoices({}, 4, {nowhere: 1.0})
        assert simulator.run(4, choices=plain).history == simulator.run(
            4, choices=aimed).history
        assert aimed.aims == {nowhere: 1.0}

    def _passes_approval(self, simulator: Simulator, seed: int) -> bool:
        choices = AimedChoices({}, seed)
        simulator.run(seed, choices=choices)
        return self.FORGED in choices.sites


class TestAiming:
    """The guide aims each run at sites where faults struck least, a kind first."""

    def _guide(self) -> Guide:
        guide = Guide(0, "guided")
        crashes = [(("f:crash", f"p{n}", "s", "e"), 0) for n in range(40)]
        forged = [(("f:forged_approval", "", "waiting", "approval"), 0)]
        guide.learn(Trial(0), Learnt(frozenset({("s", "a", "final")}), (), (), (), 3,
                                     sites=(*crashes, *forged)))
        return guide

    def test_a_kind_with_one_site_is_aimed_at_as_often_as_one_with_forty(self) -> None:
        guide = self._guide()
        aimed = [guide._aims(None) for _ in range(200)]
        forged = sum(("f:forged_approval", "", "waiting", "approval") in aims for aims in aimed)
        assert all(0 < len(aims) <= AIM_SITES for aims in aimed)
        assert forged > 150  # drawn a kind first: nearly every run, not 1 in 41

    def test_a_site_struck_often_is_aimed_at_seldom(self) -> None:
        guide = self._guide()
        hot = ("f:crash", "p0", "s", "e")
        guide.sites[hot] = 50
        aimed = [guide._aims(frozenset({"f:crash"})) for _ in range(200)]
        assert sum(hot in aims for aims in aimed) < 20
        assert all(site[0] == "f:crash" for aims in aimed for site in aims)  # the parent's

    def test_rounds_of_seeds_are_aimed_once_sites_are_known(self) -> None:
        guide = self._guide()
        guide.corpus.clear()  # no parents: a round of seeds
        trials = guide.round(16)
        assert all(trial.how == "aim" and trial.script == {} and trial.aims
                   for trial in trials)


class TestBehaviours:
    def test_an_event_delivered_to_a_final_execution_is_a_behaviour_of_its_own(self) -> None:
        history = [Observed(1, 0, "x1", "done", "final", 3),
                   Delivered(2, 0, "x1", "ev1", "confirm", "human", "", {}, "late"),
                   Decided(2, 0, "x1", "ev1", "ignored:final")]
        seen = behaviours_of(history, Coverage())
        assert ("end", "confirm", "ignored", "late") in seen
        assert ("d", "done", "confirm", "ignored", "late") in seen
        assert ("s", "done", "final") in seen

    def test_counts_are_bucketed(self) -> None:
        assert [bucket(n) for n in (1, 2, 3, 4, 7, 8, 15, 16)] == [1, 2, 3, 4, 4, 8, 8, 16]


class TestCampaigns:
    def test_guided_finds_the_hard_planted_bug_in_fewer_runs_than_swarm(self) -> None:
        swarm, guided = _campaign("swarm"), _campaign("guided")
        assert swarm.failures[0].rule == guided.failures[0].rule == PLANTED[HARD][1]
        assert guided.runs < swarm.runs, (guided.runs, swarm.runs)
        assert guided.failures[0].mutant  # a mutant's run found it, not a seed's own
        assert guided.guided["corpus"] > 0 and sum(guided.guided["mutants"].values()) > 0

    def test_aiming_finds_the_hard_bug_no_later_than_blind_runs(self) -> None:
        """Five base seeds (deterministic), the plan fixed (no swarm): guided's median runs to
        the bug are no more than blind runs'. (Guided was three times ahead here until runs
        held the clock back: a pending approval then waits long enough for a forgery at 2%
        to meet it, and blind runs need 39 where they needed hundreds.)"""
        import statistics

        runs = {strategy: [_campaign(strategy, seed=index * 10_000).runs for index in range(5)]
                for strategy in ("swarm", "guided")}
        assert statistics.median(runs["guided"]) <= statistics.median(runs["swarm"]), runs

    def test_the_same_seed_gives_the_same_campaign_in_any_number_of_processes(self) -> None:
        one = _campaign("guided", isolate=False)
        again = _campaign("guided", isolate=False)
        two = _campaign("guided", processes=2)
        for other in (again, two):
            assert other.runs == one.runs and other.steps == one.steps
            assert [f.seed for f in other.failures] == [f.seed for f in one.failures]
            assert other.guided == one.guided and other.growth == one.growth

    def test_a_mutants_failure_shrinks_and_replays_from_its_file(self, tmp_path: Path) -> None:
        report = _campaign("guided", shrink=True, replay_dir=tmp_path)
        (failure,) = report.failures
        assert failure.mutant and failure.replay_file is not None
        assert failure.counterexample is not None
        assert failure.counterexample.steps <= failure.counterexample.original_steps
        outcome = replay(failure.replay_file, machine=PLANTED[HARD][0])
        assert outcome.reproduced and outcome.rule == PLANTED[HARD][1]

    def test_an_unshrunk_mutants_failure_still_gets_a_replay_file(self, tmp_path: Path) -> None:
        report = _campaign("guided", replay_dir=tmp_path)
        (failure,) = report.failures
        assert failure.replay_file is not None
        assert replay(failure.replay_file, machine=PLANTED[HARD][0]).reproduced

    def test_growth_is_told_a_round_at_a_time_and_never_falls(self) -> None:
        report = fuzz(WORKFLOW, FuzzOptions(runs=100, replay_dir=None, strategy="mixed"))
        runs = [point[0] for point in report.growth]
        seen = [point[1] for point in report.growth]
        assert runs[-1] == 100 and runs == sorted(runs) and seen == sorted(seen)
        assert report.summary()["growth"][-1] == [100, seen[-1]]
        assert report.held and report.summary()["strategy"] == "mixed"

    def test_swarm_keeps_no_corpus_and_tells_no_growth(self) -> None:
        report = fuzz(WORKFLOW, FuzzOptions(runs=40, replay_dir=None, strategy="swarm"))
        assert report.growth == () and report.guided == {}


class TestKeptCorpus:
    def test_a_failing_schedule_is_run_first_next_time(self, tmp_path: Path) -> None:
        corpus = tmp_path / "corpus"
        first = _campaign("guided", corpus_dir=corpus)
        assert first.failures and first.guided["saved"] > 1
        files = [json.loads(p.read_text()) for p in corpus.glob("*.json")]
        assert sum(1 for data in files if data["failing"]) == 1
        second = _campaign("guided", corpus_dir=corpus)
        assert second.runs == 1 and second.failures[0].rule == PLANTED[HARD][1]

    def test_entries_of_another_definition_or_unreadable_ones_are_passed_over(
            self, tmp_path: Path) -> None:
        corpus = tmp_path / "corpus"
        _campaign("guided", corpus_dir=corpus)
        (corpus / "broken.json").write_text("{not json")
        sound = fuzz(WORKFLOW, FuzzOptions(runs=48, replay_dir=None, strategy="guided",
                                           corpus_dir=corpus))
        assert sound.held  # the planted machine's failing schedule holds on the sound one


class TestTargets:
    @pytest.fixture
    def deliveries(self):  # type: ignore[no-untyped-def]
        @target(name="test_deliveries")
        def score(definition, history):  # type: ignore[no-untyped-def]
            return sum(1 for record in history if type(record) is Delivered)

        yield "test_deliveries"
        del TARGETS["test_deliveries"]

    def test_each_target_reports_its_best_and_the_seed_that_reached_it(self, deliveries: str
                                                                       ) -> None:
        report = fuzz(WORKFLOW, FuzzOptions(runs=64, replay_dir=None, strategy="guided",
                                            targets=(deliveries,)))
        best = report.summary()["targets"][deliveries]
        assert best["best"] > 0 and best["seed"] is not None and best["errors"] == 0

    def test_the_guided_strategy_climbs_a_target(self, deliveries: str) -> None:
        """With the same budget and plan (no swarm), the best score guided fuzzing reaches is
        at least what blind runs reach from each of five base seeds, and above it in all."""
        def best(strategy: str, seed: int) -> float:
            report = fuzz(WORKFLOW, FuzzOptions(runs=160, seed=seed, replay_dir=None,
                                                strategy=strategy, targets=(deliveries,),
                                                swarm=False))
            return float(report.targets[deliveries]["best"])

        seeds = (0, 1000, 2000, 3000, 4000)
        guided = [best("guided", seed) for seed in seeds]
        swarm = [best("swarm", seed) for seed in seeds]
        assert all(g >= s for g, s in zip(guided, swarm, strict=True)), (guided, swarm)
        assert sum(guided) > sum(swarm), (guided, swarm)

    def test_a_target_that_raises_is_reported_not_raised(self) -> None:
        @target(name="test_broken")
        def broken(definition, history):  # type: ignore[no-untyped-def]
            raise ValueError("oops")

        try:
            report = fuzz(WORKFLOW, FuzzOptions(runs=8, replay_dir=None, targets=("test_broken",)))
        finally:
            del TARGETS["test_broken"]
        told = report.targets["test_broken"]
        # each of the campaign's own runs (an aimed run reaches no score a seed gives again)
        aimed = sum(part["runs"] for part in report.aimed.values())
        assert told["errors"] == report.runs - aimed and "ValueError: oops" in told["error"]
        assert report.held

    def test_an_unknown_target_or_a_taken_name_is_refused(self, deliveries: str) -> None:
        with pytest.raises(HarnessError, match="no target named 'nope'"):
            fuzz(WORKFLOW, FuzzOptions(runs=1, targets=("nope",)))
        with pytest.raises(HarnessError, match="registered already"):
            target(name=deliveries)(lambda definition, history: 0)


class TestBadInput:
    def test_an_unknown_strategy_is_refused(self) -> None:
        with pytest.raises(HarnessError, match=r"options\.strategy: expected one of swarm, "
                                               r"guided, mixed"):
            FuzzOptions(strategy="blind")
        with pytest.raises(HarnessError, match=r"options\.strategy"):
            Guide(0, "swarm")

    def test_a_corpus_without_a_guided_strategy_is_refused(self, tmp_path: Path) -> None:
        with pytest.raises(HarnessError, match="a corpus is kept by the guided strategies"):
            FuzzOptions(strategy="swarm", corpus_dir=tmp_path)
        done = cli("fuzz", "scenarios/refund_escalation.yaml", "--corpus", str(tmp_path),
                   "--no-report")
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert "give strategy guided or mixed" in done.stderr
        assert list(tmp_path.iterdir()) == []

    def test_the_cli_refuses_an_unknown_strategy_with_exit_2(self) -> None:
        done = cli("fuzz", "scenarios/refund_escalation.yaml", "--strategy", "blind",
                   "--no-report")
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert "'blind' is not one of 'swarm', 'guided', 'mixed'" in done.stderr

    def test_the_cli_takes_a_strategy_and_keeps_a_corpus(self, tmp_path: Path) -> None:
        done = cli("fuzz", "scenarios/refund_escalation.yaml", "--strategy", "guided",
                   "--runs", "48", "--corpus", str(tmp_path / "corpus"), "--json",
                   "--no-report")
        assert done.returncode == 0, done.stdout + done.stderr
        section = json.loads(done.stdout)["targets"][0]
        assert section["strategy"] == "guided" and section["options"]["strategy"] == "guided"
        assert list((tmp_path / "corpus").glob("*.json"))


def test_a_trial_of_a_seed_records_only_when_asked() -> None:
    assert type(Trial(5).choices(record=False)).__name__ == "Choices"
    assert isinstance(Trial(5).choices(record=True), RecordingChoices)
    assert isinstance(Trial(5, {}, 1).choices(record=False), MutantChoices)


def test_a_guide_keeps_a_run_only_for_what_is_new() -> None:
    guide = Guide(0, "guided")
    learnt = Learnt(frozenset({("s", "a", "final")}), (), (), (), 3)
    assert guide.learn(Trial(0), learnt) and not guide.learn(Trial(1), learnt)
    assert len(guide.corpus) == 1 and guide.hits[("s", "a", "final")] == 2
