"""Machines under test that misbehave (`tests/support/hostile_machines.py`): each is that
machine's verdict, in bounded words, and the harness's own process, output and files are
untouched; a loop is stopped by the watchdog, with where it was."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hostile import Case

from harness import FuzzOptions, SimOptions, fuzz
from harness.errors import HarnessError

FAST = ("--step-timeout", "0.3")


@pytest.mark.parametrize("processes", ["1", "2"])
def test_a_machine_that_ends_its_process_fails_its_seed(processes: str,
                                                        hostile: Callable[[Case], Any]) -> None:
    """`os._exit(3)` used to end a -n 1 campaign with code 3 and no word, and to hang -n 2."""
    result = hostile(Case("exits", ("fuzz", "hostile_machines:exits", "--runs", "20", "-n",
                                    processes, "--report", "out"), 1,
                          "ended its process (the process exited with code 3) in the run of "
                          "seed 0", writes=("out", "out/*")))
    assert "1 target(s), 1 failing" in result.stdout


@pytest.mark.parametrize(("name", "processes"), [("spins", "1"), ("sleeps", "1"),
                                                 ("spins", "2")])
def test_a_machine_that_loops_in_a_step_is_hung_where_it_loops(
        name: str, processes: str, hostile: Callable[[Case], Any]) -> None:
    """A busy loop or a long sleep used to hang fuzz forever, --budget or not."""
    result = hostile(Case(name, ("fuzz", f"hostile_machines:{name}", "--runs", "4", "-n",
                                 processes, "--no-report", *FAST), 1,
                          "the machine hung (Watchdog): while external: a step ran past 0.3 s"))
    assert "it was at hostile_machines.py:" in result.stdout
    assert ", in misbehave" in result.stdout


@pytest.mark.parametrize("command", [("run", "hostile_machines:spins"),
                                     ("explore", "hostile_machines:spins", "--depth", "3",
                                      "--no-report")], ids=["run", "explore"])
def test_run_and_explore_stop_a_loop_too(command: tuple[str, ...],
                                         hostile: Callable[[Case], Any]) -> None:
    hostile(Case("spins", (*command, *FAST), 1, "hung"))


def test_run_survives_a_machine_that_ends_its_process(hostile: Callable[[Case], Any]) -> None:
    hostile(Case("exits", ("run", "hostile_machines:exits"), 1,
                 "it ended its process (the process exited with code 3)"))


def test_prints_and_a_closed_stdout_leave_the_json_whole(hostile: Callable[[Case], Any]
                                                        ) -> None:
    for name in ("prints", "closes_stdout"):
        result = hostile(Case(name, ("fuzz", f"hostile_machines:{name}", "--runs", "10",
                                     "--no-report", "--json"), 0))
        assert json.loads(result.stdout)["targets"][0]["held"], name
        if name == "prints":  # what the machine prints goes to stderr, never into the JSON
            assert "paid!" in result.stderr and "paid, at the file descriptor" in result.stderr


def test_a_machine_that_changes_folder_leaves_the_report_where_it_was_asked(
        hostile: Callable[[Case], Any], tmp_path: Any) -> None:
    hostile(Case("wanders", ("fuzz", "hostile_machines:wanders", "--runs", "10", "--report",
                             "out"), 0, writes=("out", "out/*")))
    assert (tmp_path / "out" / "fuzz.json").is_file()


@pytest.mark.parametrize(("name", "said"), [
    ("raises_unprintable", "_Unprintable: while external: <_Unprintable whose str() raised>"),
    ("raises_huge", "more characters cut"),
])
def test_an_exception_that_cannot_be_told_whole_is_told_in_bounded_words(
        name: str, said: str, hostile: Callable[[Case], Any], tmp_path: Any) -> None:
    """A `__str__` that raises was an internal error; a 50 MB message was copied whole into
    every report and replay file."""
    hostile(Case(name, ("fuzz", f"hostile_machines:{name}", "--runs", "5", "--report", "out"),
                 1, said, writes=("out", "out/*", "out/replays/*")))
    for path in (tmp_path / "out").rglob("*.json"):
        assert path.stat().st_size < 200_000, path


def test_the_watchdog_bound_is_an_option_of_the_run() -> None:
    import hostile_machines

    target = hostile_machines.sleeps
    report = fuzz(target.definition, FuzzOptions(runs=2, replay_dir=None, sim=SimOptions(
        step_timeout_s=0.2)), machine=target)
    assert report.verdict == "violated"
    assert "(Watchdog)" in report.failures[0].violations[0].message
    assert report.failures[0].counterexample is None  # a loop is not shrunk: each run waits
    with pytest.raises(HarnessError, match="step_timeout_s"):
        SimOptions(step_timeout_s=float("nan"))


def test_a_death_no_one_seed_causes_is_not_dropped() -> None:
    """A worker that dies of what its runs left behind (the tenth build in a process) used to
    be run again seed by seed, each alone and fine, and the campaign said `held`."""
    import hostile_machines

    target = hostile_machines.leaks
    report = fuzz(target.definition, FuzzOptions(runs=60, replay_dir=None), machine=target)
    assert report.verdict == "violated"
    message = report.failures[0].violations[0].message
    assert "exited with code 137" in message and "no one of them does when run alone" in message


def test_a_step_timeout_past_the_systems_timer_is_bad_input(hostile: Callable[[Case], Any]
                                                           ) -> None:
    """1e10 s overflowed the system's timer, and the OverflowError failed a correct machine."""
    hostile(Case("huge", ("fuzz", "hostile_machines:prints", "--step-timeout", "1e10"), 2,
                 "--step-timeout"))
    with pytest.raises(HarnessError, match="step_timeout_s: expected a number of seconds up"):
        SimOptions(step_timeout_s=1e10)


def test_a_replay_that_loops_is_hung_not_a_mismatch() -> None:
    import time

    from running import ROOT

    from harness import ReferenceMachine
    from harness.checks.invariants import check
    from harness.sim.simulator import Simulator
    from reference_machine import load_definition

    class SlowReplay(ReferenceMachine):
        def replay(self, execution_id: str) -> None:
            time.sleep(2)

    definition = load_definition(ROOT / "scenarios" / "refund_escalation.yaml")
    result = Simulator(definition, SimOptions(step_timeout_s=0.2), SlowReplay).run(0)
    rules = {v.rule for v in check(definition, result.history)}
    assert "replay_matches" not in rules and "machine_ok" in rules
    assert result.failure is not None and "while replaying" in result.failure.message


def test_the_watchdog_leaves_a_timer_of_someone_elses_alone() -> None:
    """Armed once, it used to take SIGALRM for good: a timeout fixture's timer set later was
    cancelled, or the process killed by the default handler."""
    import signal

    from harness.sim.watchdog import Watchdog

    assert Watchdog(1.0).armed
    previous = signal.signal(signal.SIGALRM, lambda *_: None)  # a fixture's own
    try:
        signal.setitimer(signal.ITIMER_REAL, 30)
        assert not Watchdog(1.0).armed
        signal.signal(signal.SIGALRM, Watchdog._fire)  # ours again, but their timer runs
        assert not Watchdog(1.0).armed
        assert signal.getitimer(signal.ITIMER_REAL)[0] > 29
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_a_worker_takes_the_watchdog_whatever_its_parent_holds() -> None:
    """A fork inherits the parent's SIGALRM handler but not its timer: the watchdog used to
    stand down in every worker of a parent with a handler of its own."""
    import signal

    import hostile_machines

    previous = signal.signal(signal.SIGALRM, lambda *_: None)
    try:
        report = fuzz(hostile_machines.spins.definition, FuzzOptions(
            runs=2, replay_dir=None, sim=SimOptions(step_timeout_s=0.3)),
            machine=hostile_machines.spins)
    finally:
        signal.signal(signal.SIGALRM, previous)
    assert "(Watchdog)" in report.failures[0].violations[0].message


class _Odd(Exception):
    """An exception that cannot cross a pipe: its `__init__` takes other arguments than it
    keeps, and it holds a function defined in a function (so neither plain pickling nor the
    traceback pickling Dask's tblib installs on import can carry it)."""

    def __init__(self, seed: int, why: str) -> None:
        super().__init__(f"seed {seed}: {why}")
        self.retry = lambda: None


def test_an_exception_comes_back_from_a_worker_as_it_was_or_in_words() -> None:
    from harness.engines import isolation
    from harness.engines.shrink import NotReproduced

    def not_reproduced() -> None:
        raise NotReproduced(3, "no_duplicate_effect")

    def odd() -> None:
        raise _Odd(5, "a rule's own bug")

    with pytest.raises(NotReproduced) as caught:  # it steers the campaign: the same type
        isolation.call(not_reproduced)
    assert caught.value.seed == 3
    with pytest.raises(RuntimeError, match="_Odd: seed 5: a rule's own bug"):
        isolation.call(odd)


def test_the_watchdog_arms_its_timer_once_a_run_and_leaves_none_behind(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """It used to arm and disarm SIGALRM at every step: two system calls a step, a tenth of a
    simulated step's time. Now a step only notes when it began; the timer ticks."""
    import signal

    from running import ROOT

    from harness.sim import watchdog
    from harness.sim.simulator import Simulator
    from reference_machine import load_definition

    calls: list[tuple[float, float]] = []
    real = signal.setitimer

    def counting(which: int, seconds: float, interval: float = 0.0) -> tuple[float, float]:
        calls.append((seconds, interval))
        return real(which, seconds, interval)

    monkeypatch.setattr(watchdog.signal, "setitimer", counting)
    definition = load_definition(ROOT / "scenarios" / "refund_escalation.yaml")
    result = Simulator(definition, SimOptions(step_timeout_s=4.0)).run(0)
    assert result.steps > 10
    assert [call[0] for call in calls] == [1.0, 0], calls  # armed, then stopped at the end
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_a_watchdog_tick_with_no_step_running_stops_the_timer() -> None:
    """A run an engine leaves unfinished (the exhaustive search cuts its paths) never ends its
    watchdog: the next tick finds no step running and stops the timer."""
    import signal
    import time

    from harness.sim.watchdog import Watchdog

    dog = Watchdog(0.2)
    assert dog.armed
    dog.start()
    dog.stop()
    assert signal.getitimer(signal.ITIMER_REAL)[1] == pytest.approx(0.05)
    time.sleep(0.12)  # a tick: no step runs
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert Watchdog(0.2).armed  # free again


def _square_or_die(items: Sequence[int]) -> list[int]:
    """A batch's work: the squares, but item 13 ends the process as a machine can."""
    import os

    if 13 in items:
        os._exit(3)
    return [item * item for item in items]


@pytest.mark.parametrize("processes", [1, 2, 3])
def test_map_ordered_keeps_every_result_in_order_when_a_worker_dies_holding_more(
        processes: int) -> None:
    """A worker holds two batches at once (the next waits in its pipe): one that dies running
    the first must not take the second with it. Every batch's result comes once, in order."""
    from harness.engines import isolation

    batches = [list(range(start, start + 4)) for start in range(0, 40, 4)]
    died: list[int] = []

    def alone(item: int, death: isolation.Died) -> int:
        died.append(item)
        return -1

    got = list(isolation.map_ordered(_square_or_die, batches, processes, alone,
                                     lambda results, death: results))
    expected = [[-1 if item == 13 else item * item for item in batch] for batch in batches]
    assert got == expected
    assert died == [13]


def test_a_pool_round_gives_every_result_in_order_when_a_worker_dies() -> None:
    from harness.engines import isolation

    pool = isolation.Pool(_square_or_die, 2, lambda item, death: -1,
                          lambda results, death: results)
    try:
        batches = [list(range(start, start + 2)) for start in range(0, 24, 2)]
        for _ in range(2):  # the workers are kept for the next round
            assert pool.run(batches) == [[-1 if i == 13 else i * i for i in batch]
                                         for batch in batches]
    finally:
        pool.close()


def test_work_begun_apart_runs_beside_the_caller_and_can_be_cancelled() -> None:
    """`begin` hands back at once (the caller goes on while the child works); `result` waits
    for the child's answer, and `cancel` ends a child whose answer is not wanted."""
    import time

    from harness.engines import isolation

    slow = isolation.begin(lambda: time.sleep(60))
    done = isolation.begin(lambda: _square_or_die([3]))
    assert done.result() == [9]
    slow.cancel()
    assert slow.exitcode is not None and slow.exitcode < 0  # killed, not
    # ended by itself after its minute
    with pytest.raises(isolation.Died, match="exited with code 3"):
        isolation.begin(lambda: _square_or_die([13])).result()
