"""Running the `fsmharness` command as a user would: a subprocess, and the one-line error check."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str, cwd: Path = ROOT, path: str = "", timeout: float = 600
        ) -> subprocess.CompletedProcess[str]:
    """Runs `python -m harness.cli ARGS` in `cwd` (with `path` as PYTHONPATH, else none)."""
    env = {**os.environ, "PYTHONPATH": path} if path else {
        k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, check=False, timeout=timeout)


def one_error_line(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    """Checks a user's mistake: exit 2, one line on stderr naming each fragment, no traceback."""
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("fsmharness: error: ")
    for fragment in fragments:
        assert fragment in line, line
