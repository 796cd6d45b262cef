"""Shared pytest configuration: `pytester` for the tests of the fsmharness pytest plugin."""

pytest_plugins = ["pytester"]
