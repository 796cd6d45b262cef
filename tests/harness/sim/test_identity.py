"""`machine_path`: the importable name a replay file gives the machine under test."""

from __future__ import annotations

import sys
import types

from harness.sim.identity import machine_path


class _Target:
    """An adapter's target: an instance, bound to a module-level name."""


def test_a_target_made_by_a_helper_elsewhere_is_found_where_it_is_bound() -> None:
    """The target's `__module__` names the helper's module, which does not bind it: the
    path names the module that does."""
    target = _Target()
    target.__module__ = "fsmharness_test_helpers"
    helpers = types.ModuleType("fsmharness_test_helpers")
    bound = types.ModuleType("fsmharness_test_scenario")
    bound.made = target  # type: ignore[attr-defined]
    sys.modules.update({helpers.__name__: helpers, bound.__name__: bound})
    try:
        assert machine_path(target) == "fsmharness_test_scenario:made"
        helpers.made_here = target  # type: ignore[attr-defined]
        assert machine_path(target) == "fsmharness_test_helpers:made_here"  # its own first
    finally:
        del sys.modules[helpers.__name__], sys.modules[bound.__name__]


def test_a_target_bound_nowhere_importable_has_no_path() -> None:
    target = _Target()
    target.__module__ = "__main__"
    assert machine_path(target) == ""
    assert machine_path(lambda: None) == ""
