"""The `hostile` fixture: runs a bad-input case (`tests/support/hostile.py`) in a fresh folder
and checks the corpus's rule."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from hostile import ROOT, Case, run_case

__all__ = ["ROOT", "Case", "hostile", "run_case"]  # `from conftest import Case` works too


@pytest.fixture
def hostile(tmp_path: Path) -> Callable[[Case], subprocess.CompletedProcess[str]]:
    """Runs a `Case` in a fresh folder and checks the corpus's rule."""
    return lambda case: run_case(case, tmp_path)
