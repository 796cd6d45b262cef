"""A documentation page as a new user lives it: its shell blocks run in order from a folder
laid out as the project's root, each exits 0 (or 1 where the block ends `echo "exit $?"`),
and what one prints is what the page shows in the `text` block after it (the speed, steps a
second, left out; a line `...` stands for the lines the page skips); its `diff` blocks are
applied as shown."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

SPEED = re.compile(r" \([\d,.]+ steps/s\)")


def blocks(page: Path) -> list[tuple[str, str]]:
    """Gives the page's fenced blocks, (language, text), in order."""
    return re.findall(r"^```(\w+)\n(.*?)^```", page.read_text(encoding="utf-8"),
                      flags=re.DOTALL | re.MULTILINE)


def assert_shown(expected: str, printed: str, stderr: str = "") -> None:
    """Checks the page's lines were printed: each run of lines between `...` as printed, one
    after the other, the runs in order."""
    lines = [SPEED.sub("", line.rstrip()) for line in printed.splitlines()]
    runs = [[line.rstrip() for line in chunk.strip("\n").splitlines()]
            for chunk in re.split(r"^\s*\.\.\.\s*$", expected, flags=re.MULTILINE)]
    at = 0
    for run in runs:
        found = next((start for start in range(at, len(lines) - len(run) + 1)
                      if lines[start:start + len(run)] == run), None)
        assert found is not None, (f"the page shows:\n{chr(10).join(run)}\nprinted:\n"
                                   f"{printed}\nstderr:\n{stderr[-3000:]}")
        at = found + len(run)


def apply_diff(path: Path, diff: str) -> None:
    """Applies a diff block to `path` in place: its context and removed lines, once, become
    its context and added lines."""
    old = "\n".join(line[1:] for line in diff.splitlines() if not line.startswith("+"))
    new = "\n".join(line[1:] for line in diff.splitlines() if not line.startswith("-"))
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"the page's diff does not match {path.name}:\n{diff}"
    path.write_text(text.replace(old, new), encoding="utf-8")


def run_page(page: Path, folder: Path, edited: Path,
             skip: Callable[[str], bool] = lambda text: False) -> tuple[int, int]:
    """Lives the page in `folder`: its diffs applied to `edited`, its shell blocks run (but
    those `skip` names), their output checked; gives (shell blocks run, diffs applied)."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)
    found = blocks(page)
    ran = diffs = 0
    for index, (language, text) in enumerate(found):
        if language == "diff":
            apply_diff(edited, text)
            diffs += 1
            continue
        if language != "bash" or skip(text):
            continue
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", text], cwd=folder, env=env,
                              capture_output=True, text=True, timeout=600, check=False)
        ran += 1
        assert done.returncode == 0, f"{text}\n{done.stdout[-3000:]}\n{done.stderr}"
        if "echo \"exit $?\"" in text:  # the page says this one fails: exit 1
            assert done.stdout.rstrip().endswith("exit 1"), done.stdout[-2000:]
        following = found[index + 1] if index + 1 < len(found) else None
        if following is not None and following[0] == "text":
            assert_shown(following[1], done.stdout, done.stderr)
    return ran, diffs
