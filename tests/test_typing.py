"""Types a checker can follow: mypy, configured as `.ci/run` runs it, accepts user code that
tells records and decisions apart by class or kind (`tests/typing/narrowed.py`), and refuses
code that reads one variant's fields without narrowing (`tests/typing/unnarrowed.py`: each line
marked `# E: code` must be reported with that code, and nothing else)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TYPING = ROOT / "tests" / "typing"

api = pytest.importorskip("mypy.api", reason="mypy is in the test extra")


def mypy(path: Path) -> list[str]:
    """Gives mypy's error lines for one file, checked with the project's configuration."""
    out, err, _ = api.run(["--config-file", str(ROOT / "pyproject.toml"), "--no-error-summary",
                           "--hide-error-context", str(path.relative_to(ROOT))])
    assert not err, err
    return [line for line in out.splitlines() if ": error: " in line]


def expected(path: Path) -> list[tuple[int, str]]:
    return [(number, match.group(1))
            for number, line in enumerate(path.read_text().splitlines(), start=1)
            if (match := re.search(r"# E: ([a-z-]+)$", line))]


def test_narrowed_user_code_type_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Narrowed by `type(...) is`, `match`, `isinstance` or `kind ==`, every field read is
    known."""
    monkeypatch.chdir(ROOT)
    assert mypy(TYPING / "narrowed.py") == []


def test_unnarrowed_reads_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each marked line is reported, with its code, and no other line is."""
    monkeypatch.chdir(ROOT)
    path = TYPING / "unnarrowed.py"
    found = [(int(line.split(":")[1]), line.rsplit("[", 1)[-1].rstrip("]"))
             for line in mypy(path)]
    assert sorted(set(found)) == expected(path)
    assert len(expected(path)) == 3
