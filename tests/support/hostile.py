"""The bad-input corpus's rule, shared by the hostile tests: a hostile or careless input gets
its exit code and one clear line, never a traceback; nothing half-written is left; and nothing
in the working folder changes but the outputs the case names.

A case is a `Case`: the files it puts in a fresh working folder, the command line (`{tmp}` is
that folder), the exit code it must give, a fragment its one error line must hold (exit 2), and
the glob patterns of what it may write. `run_case` runs it and checks all of that.
"""

from __future__ import annotations

import fnmatch
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Case:
    id: str
    args: tuple[str, ...]
    exit: int
    line: str = ""  # a fragment of the one error line (exit 2), or of stdout otherwise
    files: Mapping[str, bytes | str] = field(default_factory=dict)
    writes: tuple[str, ...] = ()  # glob patterns, relative to the folder, it may write
    setup: Callable[[Path], None] | None = None  # more than files can say (a FIFO, a link)
    timeout: float = 120


def _snapshot(folder: Path) -> dict[str, bytes | str]:
    """Gives every entry under `folder`: a file's bytes, else what kind of entry it is."""
    seen: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        name = path.relative_to(folder).as_posix()
        if "__pycache__" in name or ".hypothesis" in name:
            continue
        if path.is_symlink():
            seen[name] = f"link to {os.readlink(path)}"
        elif path.is_file():
            seen[name] = path.read_bytes()
        else:
            seen[name] = "folder" if path.is_dir() else "special"
    return seen


def run_case(case: Case, folder: Path) -> subprocess.CompletedProcess[str]:
    """Runs `case` in `folder` and checks the corpus's rule; gives the finished process."""
    for name, content in case.files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    if case.setup is not None:
        case.setup(folder)
    before = _snapshot(folder)
    args = [arg.replace("{tmp}", str(folder)).replace("{root}", str(ROOT))
            for arg in case.args]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(folder), str(ROOT / "tests" / "support")])}
    result = subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=folder, env=env,
                            capture_output=True, text=True, check=False,
                            timeout=case.timeout)
    shown = f"exit {result.returncode}\nstdout:\n{result.stdout[-3000:]}\n" \
            f"stderr:\n{result.stderr[-3000:]}"
    assert result.returncode == case.exit, shown
    assert "Traceback" not in result.stderr + result.stdout, shown
    if case.exit == 2:
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("fsmharness: error: "), shown
        assert case.line in lines[0], shown
    elif case.line:
        assert case.line in result.stdout + result.stderr, shown
    after = _snapshot(folder)
    for name in sorted(set(before) | set(after)):
        if any(fnmatch.fnmatch(name, pattern) for pattern in case.writes):
            continue
        assert before.get(name) == after.get(name), f"{name} changed or appeared\n{shown}"
    leftovers = [name for name in after if name.endswith((".partial", ".tmp", ".previous"))]
    assert not leftovers, f"half-written files left: {leftovers}\n{shown}"
    return result
