"""A machine whose behaviour follows hash order (issue 36): the same in one process and its
forks, so two runs of a seed there agree; the campaign's first seed, run in two fresh
interpreters with two hash seeds, tells it (`harness.engines.elsewhere`). What only the
campaign's own process holds (a test's monkeypatch) is no such difference."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hostile import ROOT

from harness import FuzzOptions, fuzz
from harness.engines.fuzz import RUNS_DEFAULT

SUPPORT = str(ROOT / "tests" / "support")


def _fuzz(runs: str, tmp_path: Path, hash_seed: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", "fuzz", "unsteady:hashed_orders", "--runs", runs,
         "--no-report"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
        check=False, env={**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": SUPPORT})


def test_hash_order_is_told_by_two_fresh_interpreters(tmp_path: Path) -> None:
    """`hash("pay")` is even with hash seed 0 and odd with 1. This campaign's own hash seed
    (0: the machine pays, and its runs end) holds in every run of it."""
    done = _fuzz(str(RUNS_DEFAULT), tmp_path, "0")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "violated deterministic" in done.stdout
    assert ("seed 0 gave two histories in two fresh interpreters, one with "
            "PYTHONHASHSEED=0 and one with 1") in done.stdout


def test_what_only_this_process_holds_is_no_difference(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A test patches the machine's module before its campaign: a fresh interpreter runs the
    machine unpatched, and both fresh ones agree, so the campaign holds (a comparison with this
    process failed it)."""
    (tmp_path / "patched.py").write_text(
        "from harness import ReferenceMachine\n"
        "REFUSE = True\n\n\n"
        "class Patched(ReferenceMachine):\n"
        "    definition = " + repr(str(ROOT / "scenarios" / "refund_escalation.yaml")) + "\n\n"
        "    def start(self, *args, **kwargs):\n"
        "        if REFUSE:\n"
        "            raise RuntimeError('refused until the test says otherwise')\n"
        "        return super().start(*args, **kwargs)\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    import patched  # type: ignore[import-not-found]

    monkeypatch.setattr(patched, "REFUSE", False)
    report = fuzz(ROOT / "scenarios" / "refund_escalation.yaml", FuzzOptions(
        runs=RUNS_DEFAULT, replay_dir=None), machine=patched.Patched)
    assert report.held, report.failures


def test_a_line_separator_in_a_value_is_no_difference(tmp_path: Path) -> None:
    """A context value holding U+2028 (a line break to `str.splitlines`) and a lone
    surrogate: the fresh interpreters' histories come back whole, and agree."""
    text = (ROOT / "scenarios" / "refund_escalation.yaml").read_text(encoding="utf-8")
    assert "context:\n" in text
    edited = text.replace("context:\n", 'context:\n  note: "EUR\\u2028 caf\\udcc3"\n', 1)
    (tmp_path / "refund.yaml").write_text(edited, encoding="utf-8")
    report = fuzz(tmp_path / "refund.yaml", FuzzOptions(runs=RUNS_DEFAULT, replay_dir=None))
    assert report.held, report.failures
