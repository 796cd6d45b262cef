"""One example database for a fleet (harness.engines.fleet): the specs it opens and refuses, failing
seeds saved and replayed first by another campaign, against a real Redis server, and the
plugin's `fsm_example_db` in real pytest sessions."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis.database import DirectoryBasedExampleDatabase, InMemoryExampleDatabase
from planted import WORKFLOW, ApprovalFromAgent
from user_project import NAIVE_MACHINE
from user_project import WORKFLOW as WORKFLOW_TEXT

from harness import FuzzOptions, SimOptions, fuzz
from harness.engines.fleet import FailingSeeds, example_database
from harness.errors import HarnessError

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestAssertRewriteWarning")

SHARED = InMemoryExampleDatabase()  # for the module:attribute spec


def test_a_folder_or_an_example_database_attribute_opens(tmp_path: Path) -> None:
    assert isinstance(example_database(str(tmp_path / "db")), DirectoryBasedExampleDatabase)
    assert example_database(f"{__name__}:SHARED") is SHARED


@pytest.mark.parametrize(("spec", "message"), [
    ("  ", "expected redis://host:port/db, a folder or module:attribute, got nothing"),
    ("os:sep", "expected a hypothesis.database.ExampleDatabase, got str"),
    ("no_such_module_here:db", "cannot import it"),
    ("redis://127.0.0.1:1/0", "cannot reach Redis"),
])
def test_a_database_that_cannot_be_opened_is_one_clear_error(spec: str, message: str) -> None:
    with pytest.raises(HarnessError, match=message) as caught:
        example_database(spec)
    assert "\n" not in str(caught.value)


def test_a_file_is_not_a_database_folder(tmp_path: Path) -> None:
    path = tmp_path / "file"
    path.write_text("x")
    with pytest.raises(HarnessError, match="a file, expected a folder"):
        example_database(str(path))


def test_failing_seeds_are_kept_per_definition_and_machine_and_dropped_once_they_hold() -> None:
    database = InMemoryExampleDatabase()
    one, other = FailingSeeds(database, "d1", "m"), FailingSeeds(database, "d2", "m")
    one.update([7, 3], [])
    assert one.load() == [3, 7] and other.load() == []
    one.update([], [3])
    assert one.load() == [7]


def test_a_seed_one_worker_found_failing_is_replayed_first_by_another(redis_url: str) -> None:
    """Two campaigns, each with a client of its own to the same Redis: the second, over seeds
    that hold, runs the first's failing seed before its own and reports it."""
    first = fuzz(WORKFLOW, FuzzOptions(runs=2000, replay_dir=None, shrink=False,
                                       example_db=example_database(redis_url)),
                 machine=ApprovalFromAgent)
    assert first.failures, "the planted bug was not found: nothing to share"
    found = first.failures[0].seed
    alone = fuzz(WORKFLOW, FuzzOptions(runs=3, seed=50_020, replay_dir=None, shrink=False),
                 machine=ApprovalFromAgent)
    assert not alone.failures  # these seeds alone do not find it
    shared = fuzz(WORKFLOW, FuzzOptions(runs=3, seed=50_020, replay_dir=None, shrink=False,
                                        example_db=example_database(redis_url)),
                  machine=ApprovalFromAgent)
    assert [failure.seed for failure in shared.failures] == [found]
    assert shared.runs == 1  # replayed first: the campaign stopped at it


def _failing_seed(result: pytest.RunResult) -> int:
    # the failure is printed in full, and again in the short summary when pytest does not
    # truncate it (it does not when the CI environment variable is set)
    (seed,) = set(re.findall(r"shrunk to \d+ steps \(from \d+\), seed (\d+):",
                             result.stdout.str()))
    return int(seed)


def test_the_plugin_shares_failures_through_the_fleets_database(pytester: pytest.Pytester,
                                                                redis_url: str) -> None:
    """A session with `fsm_example_db` saves the fuzz campaign's failing seed (and its replay
    file goes to `fsm_replay_dir`); another session, on other seeds (another CI worker),
    replays it first and fails on it."""
    pytester.makefile(".yaml", workflow_pay=WORKFLOW_TEXT)
    pytester.makepyfile(naive_machine=NAIVE_MACHINE)
    pytester.makeini(f"[pytest]\nfsm_runs = 20\nfsm_machine = naive_machine:KeyPerAttempt\n"
                     f"pythonpath = .\nfsm_example_db = {redis_url}\n"
                     f"fsm_replay_dir = shared/replays\n")
    first = pytester.runpytest("-k", "fuzz", "--fsm-seed", "1")
    first.assert_outcomes(failed=1, deselected=2)
    # the replay file goes to the folder the fleet shares, named as the failure says
    (replay,) = (pytester.path / "shared" / "replays").glob("*.json")
    first.stdout.fnmatch_lines([f"replay: fsmharness replay shared/replays/{replay.name}"])
    second = pytester.runpytest("-k", "fuzz", "--fsm-seed", "90000")
    second.assert_outcomes(failed=1, deselected=2)
    assert _failing_seed(second) == _failing_seed(first)
    alone = pytester.runpytest("-k", "fuzz", "--fsm-seed", "90000", "-o", "fsm_example_db=")
    assert _failing_seed(alone) != _failing_seed(first)  # on its own seeds it fails elsewhere


def test_a_database_the_plugin_cannot_open_stops_the_session(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nfsm_example_db = redis://127.0.0.1:1/0\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*fsm_example_db: example database redis://127.0.0.1:1/0: "
                                 "cannot reach Redis*"])


def test_a_session_with_the_fleets_database_gives_hypothesis_its_profile_back(
        pytester: pytest.Pytester, tmp_path: Path) -> None:
    from hypothesis import settings

    before = settings.default.database
    pytester.makeini(f"[pytest]\nfsm_example_db = {tmp_path / 'shared'}\n")
    pytester.makepyfile(test_db="""
        from hypothesis import settings
        from hypothesis.database import DirectoryBasedExampleDatabase

        def test_the_fleets_database_is_hypothesis_default():
            assert isinstance(settings.default.database, DirectoryBasedExampleDatabase)
            assert str(settings.default.database.path).endswith("shared")
    """)
    pytester.runpytest().assert_outcomes(passed=1)
    assert settings.default.database == before


def test_a_seed_saved_under_other_options_is_neither_replayed_nor_dropped() -> None:
    """A seed's run depends on the options that shape it (here the executions a run starts):
    a campaign under other options neither runs the saved seed nor drops it when its own runs
    hold; a campaign under the first options still replays it first."""
    database = InMemoryExampleDatabase()
    first = fuzz(WORKFLOW, FuzzOptions(runs=2000, replay_dir=None, shrink=False,
                                       example_db=database), machine=ApprovalFromAgent)
    assert first.failures, "the planted bug was not found: nothing to share"
    found = first.failures[0].seed
    other = fuzz(WORKFLOW, FuzzOptions(runs=3, seed=50_020, replay_dir=None, shrink=False,
                                       example_db=database, sim=SimOptions(executions=1)),
                 machine=ApprovalFromAgent)
    aimed = sum(part["runs"] for part in other.aimed.values())
    assert other.runs == 3 + aimed and found not in range(50_020, 50_023)
    again = fuzz(WORKFLOW, FuzzOptions(runs=3, seed=50_020, replay_dir=None, shrink=False,
                                       example_db=database), machine=ApprovalFromAgent)
    assert [failure.seed for failure in again.failures] == [found]
    assert again.runs == 1
