"""Fuzz campaigns on a Dask cluster (harness.engines.cluster) against real local clusters: the
same report as a local campaign, a worker killed mid-campaign losing nothing, and a scheduler
that cannot be reached as one clear line."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from planted import WORKFLOW, ApprovalFromAgent
from slow_machine import SlowMachine

from harness import FuzzOptions, fuzz
from harness.errors import HarnessError

distributed = pytest.importorskip("distributed")
SUPPORT = Path(__file__).resolve().parents[2] / "support"
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def importable(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cluster's worker processes import the test machines by name, as a user's workers
    import theirs: from the path they are started with."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(SUPPORT), str(ROOT), os.environ.get("PYTHONPATH", "")]))


def _same(report: Any) -> dict[str, Any]:
    """The report's summary less what depends on where and how fast it ran."""
    summary = report.summary()
    for key in ("elapsed_s", "steps_per_second", "executor"):
        summary.pop(key, None)
    return summary


def test_a_campaign_on_a_cluster_reports_what_a_local_one_does(importable: None) -> None:
    """The same failures, first failing seed, shrunk trace, coverage and counts, whatever ran
    the batches; the report names the cluster and its workers."""
    options = FuzzOptions(runs=600, replay_dir=None, processes=2)
    local = fuzz(WORKFLOW, options, machine=ApprovalFromAgent)
    assert local.failures, "the planted bug was not found: nothing to compare"
    on_dask = fuzz(WORKFLOW, FuzzOptions(runs=600, replay_dir=None, processes=2,
                                         executor="dask"), machine=ApprovalFromAgent)
    assert _same(on_dask) == _same(local)
    assert on_dask.summary()["executor"] == {"kind": "dask", "scheduler": "local cluster",
                                             "unguarded_batches": 0,
                                             "workers": 2, "workers_lost": 0}


def test_a_guided_campaign_on_a_cluster_reports_what_a_local_one_does(importable: None
                                                                       ) -> None:
    """Each round's trials (drawn from the corpus the rounds before left) run as tasks; the
    rounds are the same whatever ran them, so the report is the local one's."""
    options = FuzzOptions(runs=96, replay_dir=None, processes=2, strategy="guided")
    local = fuzz(WORKFLOW, options, machine=ApprovalFromAgent)
    on_dask = fuzz(WORKFLOW, FuzzOptions(runs=96, replay_dir=None, processes=2,
                                         strategy="guided", executor="dask"),
                   machine=ApprovalFromAgent)
    assert local.guided["behaviours"] > 0  # the guidance had something to go on
    assert _same(on_dask) == _same(local)


def test_a_worker_killed_mid_campaign_loses_nothing(importable: None) -> None:
    """One of two workers is killed while the campaign runs: its tasks run again on the other
    (and on the worker its nanny starts again); the report is the local one's and says a
    worker was lost."""
    import dask

    daemonless = dask.config.set({"distributed.worker.daemon": False})  # as the README says,
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None, silence_logs=40)
    client = distributed.Client(cluster, set_as_default=False)
    killed: list[int] = []

    def kill_one() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # once the campaign's tasks are running
            if any(client.processing().values()):
                break
            time.sleep(0.05)
        time.sleep(0.3)
        pids = client.run(os.getpid)
        victim = pids[sorted(pids)[0]]
        os.kill(victim, 9)
        killed.append(victim)

    try:
        killer = threading.Thread(target=kill_one)
        killer.start()
        options = FuzzOptions(runs=240, replay_dir=None, executor="dask",
                              scheduler=cluster.scheduler_address)
        on_dask = fuzz(WORKFLOW, options, machine=SlowMachine)
        killer.join()
    finally:
        client.close()
        cluster.close()
        daemonless.__exit__(None, None, None)  # held while the nanny may start a worker again
    assert killed, "no worker was killed: the test tested nothing"
    local = fuzz(WORKFLOW, FuzzOptions(runs=240, replay_dir=None, processes=2),
                 machine=SlowMachine)
    assert on_dask.runs == 240
    assert _same(on_dask) == _same(local)
    assert on_dask.executor["workers_lost"] >= 1
    assert on_dask.executor["unguarded_batches"] == 0


def test_daemon_workers_run_batches_without_the_watchdog_and_say_so(importable: None) -> None:
    """Workers Dask starts as daemons (its default) may not fork: their batches run in the
    task's thread, without the step watchdog, and the verdict line says so and how to start
    them instead."""
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None, silence_logs=40)
    try:
        result = subprocess.run([sys.executable, "-m", "harness.cli", "fuzz",
                                 str(ROOT / "scenarios" / "refund_escalation.yaml"), "--runs",
                                 "20", "--executor", "dask", "--scheduler",
                                 cluster.scheduler_address, "--no-report"],
                                capture_output=True, text=True, timeout=300)
    finally:
        cluster.close()
    assert result.returncode == 0, result.stderr
    said = " ".join(result.stdout.split())
    assert re.search(r"\d+ batches without the step watchdog: the workers are daemon "
                     r"processes", said), said
    assert "DASK_DISTRIBUTED__WORKER__DAEMON=False" in said


def test_a_scheduler_that_cannot_be_reached_is_one_clear_line(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Within Dask's connect timeout (2 s here; Dask's default is 30 s), in Python and at
    the command line."""
    import dask

    monkeypatch.setenv("DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT", "2s")
    monkeypatch.setitem(dask.config.config["distributed"]["comm"]["timeouts"], "connect", "2s")
    with pytest.raises(HarnessError, match=re.escape("cannot reach the Dask scheduler at "
                                                     "tcp://127.0.0.1:1")):
        fuzz(WORKFLOW, FuzzOptions(runs=5, replay_dir=None, executor="dask",
                                   scheduler="tcp://127.0.0.1:1"))
    result = subprocess.run([sys.executable, "-m", "harness.cli", "fuzz",
                             str(ROOT / "scenarios" / "refund_escalation.yaml"), "--runs", "5",
                             "--executor", "dask", "--scheduler", "tcp://127.0.0.1:1",
                             "--no-report"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert "cannot reach the Dask scheduler at tcp://127.0.0.1:1" in result.stderr


@pytest.mark.parametrize(("options", "message"), [
    ({"executor": "ray"}, "options.executor: expected one of local, dask"),
    ({"scheduler": "tcp://h:1"}, "a scheduler's address goes with executor dask"),
])
def test_executor_options_that_do_not_fit_are_refused(options: dict[str, Any],
                                                      message: str) -> None:
    with pytest.raises(HarnessError, match=message):
        FuzzOptions(**options)


def test_the_plugin_runs_campaigns_on_a_cluster(pytester: pytest.Pytester,
                                                importable: None) -> None:
    """`fsm_executor = dask` in the ini: the collected definition's campaign runs on a local
    Dask cluster and holds as it does locally; a scheduler without it stops the session."""
    from user_project import WORKFLOW as WORKFLOW_TEXT

    pytester.makefile(".yaml", workflow_pay=WORKFLOW_TEXT)
    pytester.makeini("[pytest]\nfsm_runs = 40\nfsm_executor = dask\n")
    result = pytester.runpytest_subprocess("-k", "fuzz", "--fsm-report", "out")
    result.assert_outcomes(passed=1, deselected=2)
    import json

    (section,) = json.loads((pytester.path / "out" / "pytest.json").read_text())["targets"]
    assert section["runs"] == 40
    assert (section["executor"]["kind"], section["executor"]["workers_lost"]) == ("dask", 0)
    refused = pytester.runpytest_subprocess("--fsm-executor", "local", "--fsm-scheduler",
                                            "tcp://h:1")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*a scheduler's address goes with executor dask*"])


def test_the_command_line_says_where_the_campaign_ran(importable: None) -> None:
    result = subprocess.run([sys.executable, "-m", "harness.cli", "fuzz",
                             str(ROOT / "scenarios" / "refund_escalation.yaml"), "--runs", "20",
                             "--executor", "dask", "-n", "2", "--no-report"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "20 runs" in result.stdout
    assert "on Dask (local cluster, 2 workers)" in " ".join(result.stdout.split())


@pytest.mark.parametrize("name", ["exits", "sleeps", "spins"])
def test_a_misbehaving_machine_gets_its_local_verdict_on_a_cluster(
        importable: None, name: str) -> None:
    """A batch runs in a forked child of its worker: a machine that ends its process ends the
    child (the batch then runs here seed by seed, to name the seed), and one that sleeps or
    loops in a step is stopped by the watchdog, which needs the child's main thread (a
    worker's task thread has none). Each fails `machine_ok` at the seed it fails locally."""
    import hostile_machines

    from harness import SimOptions

    machine = getattr(hostile_machines, name)
    options = FuzzOptions(runs=4, replay_dir=None, shrink=False,
                          sim=SimOptions(step_timeout_s=1.0))
    local = fuzz(machine.definition, options, machine=machine)
    got: list[Any] = []
    # a guard against the hang this test is about, not a measure of speed: each step the
    # watchdog stops takes a second, and the campaign a few
    campaign = threading.Thread(target=lambda: got.append(fuzz(
        machine.definition, replace(options, executor="dask", processes=2), machine=machine)),
        daemon=True)
    campaign.start()
    campaign.join(timeout=120)
    assert got, "the campaign on the cluster never ended: the machine hung its worker"
    (on_dask,) = got
    assert local.failures and on_dask.failures
    assert ([(v.rule, v.message) for f in on_dask.failures for v in f.violations]
            == [(v.rule, v.message) for f in local.failures for v in f.violations])
    assert on_dask.failures[0].seed == local.failures[0].seed


def test_a_user_invariant_the_workers_import_is_checked_there_one_they_cannot_is_refused(
        importable: None) -> None:
    """The workers check the campaign's invariants by name: a user's invariant registered by
    a module on their path is imported and checked there (the report is the local one's); one
    whose module they cannot import stops the campaign, naming it, where it was checked
    nowhere and reported as checked."""
    import charge_rules  # noqa: F401  (registers one_charge_per_order, as --import does)
    from charge_checks import charged_twice

    from harness import INVARIANTS, invariant

    try:
        options = FuzzOptions(runs=40, replay_dir=None, processes=2)
        local = fuzz(WORKFLOW, options, machine=ApprovalFromAgent)
        on_dask = fuzz(WORKFLOW, replace(options, executor="dask"), machine=ApprovalFromAgent)
        assert "one_charge_per_order" in on_dask.checked
        assert _same(on_dask) == _same(local)
        invariant(name="only_here")(charged_twice)  # registered by this test module alone
        with pytest.raises(HarnessError, match=r"the cluster's workers cannot check invariant "
                                               r"'only_here'"):
            fuzz(WORKFLOW, replace(options, executor="dask"), machine=ApprovalFromAgent)
    finally:
        INVARIANTS.pop("only_here", None)
        INVARIANTS.pop("one_charge_per_order", None)
