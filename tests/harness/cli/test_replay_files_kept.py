"""Replay files written by an earlier fsmharness still replay: the files in `tests/data/replays`
were written by `fsmharness fuzz` before `harness/` was split into subpackages (a reference
machine over a naive scenario, a planted machine bug, a `transitions` machine through its
adapter), and each must break the same rule again, with the same violation, after any move."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from running import cli

from harness import replay

ROOT = Path(__file__).resolve().parents[3]
KEPT = sorted((ROOT / "tests" / "data" / "replays").glob("*.json"))
SUPPORT = str(ROOT / "tests" / "support")


def test_the_kept_files_are_there() -> None:
    """One file per kind of machine: the reference machine, a planted machine, an adapter."""
    machines = {json.loads(path.read_text())["machine"] for path in KEPT}
    assert machines == {"harness:ReferenceMachine", "planted:NoDuplicateCheck",
                        "peers:naive_orders"}


@pytest.mark.parametrize("path", KEPT, ids=[path.stem for path in KEPT])
class TestKeptReplayFile:
    def test_replays_from_the_command_line(self, path: Path) -> None:
        """`fsmharness replay FILE`, run where the file was written, breaks its rule again."""
        rule = json.loads(path.read_text())["rule"]
        result = cli("replay", str(path.relative_to(ROOT)), path=SUPPORT)
        assert result.returncode == 1, result.stdout + result.stderr
        assert result.stdout.splitlines()[-1].startswith(f"reproduced {rule} ")

    def test_replays_the_same_violation(self, path: Path, monkeypatch: pytest.MonkeyPatch
                                        ) -> None:
        """`harness.replay` gives the violation the file recorded, word for word."""
        monkeypatch.chdir(ROOT)
        monkeypatch.syspath_prepend(SUPPORT)
        data = json.loads(path.read_text())
        outcome = replay(path)
        assert outcome.reproduced and outcome.violation is not None
        assert outcome.violation.message == data["violation"]
        assert outcome.violation.step == data["step"]
        assert outcome.trace() == data["trace"]
