"""The fsmharness pytest plugin, registered through the `pytest11` entry point: installing the
distribution is enough, and `-p no:fsmharness` turns it off.

- Options (group `fsmharness`) and the ini keys of the same names: `--fsm-seed`, `--fsm-runs`,
  `--fsm-budget`, `--fsm-faults`, `--fsm-report`, `--fsm-depth`, `--fsm-min-coverage`; ini
  only: `fsm_definitions` (the globs of definition files to collect) and `fsm_machine`.
- Fixtures: `fsm_settings`, `fsm_fault_plan`, `fsm_simulator`, `fsm_tool_world`,
  `fsm_frozen_clock`, `fsm_fuzz`, and `fsm_report` for tests marked `fsm_fuzz`.
- The marker `@pytest.mark.fsm_fuzz(definition, machine=..., runs=..., faults=...,
  expect=...)` makes the test a fuzz campaign; the test body runs after it with the campaign's
  report. A campaign fails its test when an invariant breaks or when it is vacuous (it
  exercised nothing); with `expect=` (an invariant's name, or a list of them) it fails its test
  unless it breaks one of those, and only those.
- `fsm_fuzz(definition, ...)` runs a campaign inside a test and gives its `CampaignReport`
  without raising: the test asserts on it (`held`, `failures`, `coverage`). `check=True` fails
  the test at the call when the campaign failed; a failed campaign whose verdict the test never
  read fails the test when it ends, so a bare call cannot pass over a broken invariant.
- Files matching `fsm_definitions` (default `workflow_*.yaml workflow_*.json`) become three
  items each: lint, fuzz under every fault, and exhaustive search to `--fsm-depth`.

A campaign's seeds come from `--fsm-seed` and the test's id, so a test draws the same seeds on
any xdist worker (and different tests, so different workers, draw different ones); the workers'
results are merged into the controller's summary and report, where a test's campaign is named
by the test's id (a collected file's, by the file). Session state lives in `config.stash`, a
test's campaigns in its item's.

The modules, by concern: `settings` (the options, the ini keys and `FsmSettings`, and the
session's state in `config.stash`), `configure` (the session set up and put back),
`campaigns` (the `fsm_fuzz` marker and fixture, `CampaignReport`), `fixtures` (the other
fixtures), `collection` (definition files as test items) and `summary` (the report, the xdist
merge, the terminal summary). pytest registers this module, so every hook and fixture is
re-exported here by name (the `as` imports below); no module here is registered on its own.

On top of `harness`, beside `bench`: it may import the rooms below it; none imports it.
"""

from harness.pytest_plugin.campaigns import CampaignFailed, CampaignReport
from harness.pytest_plugin.campaigns import fsm_fuzz as fsm_fuzz
from harness.pytest_plugin.campaigns import fsm_report as fsm_report
from harness.pytest_plugin.campaigns import pytest_generate_tests as pytest_generate_tests
from harness.pytest_plugin.campaigns import pytest_pyfunc_call as pytest_pyfunc_call
from harness.pytest_plugin.campaigns import (
    pytest_runtest_makereport as pytest_runtest_makereport,
)
from harness.pytest_plugin.collection import pytest_collect_file as pytest_collect_file
from harness.pytest_plugin.configure import pytest_configure as pytest_configure
from harness.pytest_plugin.configure import pytest_unconfigure as pytest_unconfigure
from harness.pytest_plugin.fixtures import fsm_fault_plan as fsm_fault_plan
from harness.pytest_plugin.fixtures import fsm_frozen_clock as fsm_frozen_clock
from harness.pytest_plugin.fixtures import fsm_settings as fsm_settings
from harness.pytest_plugin.fixtures import fsm_simulator as fsm_simulator
from harness.pytest_plugin.fixtures import fsm_tool_world as fsm_tool_world
from harness.pytest_plugin.settings import FsmSettings
from harness.pytest_plugin.settings import pytest_addoption as pytest_addoption
from harness.pytest_plugin.settings import pytest_report_header as pytest_report_header
from harness.pytest_plugin.summary import pytest_sessionfinish as pytest_sessionfinish
from harness.pytest_plugin.summary import pytest_terminal_summary as pytest_terminal_summary

__all__ = ["CampaignFailed", "CampaignReport", "FsmSettings"]
