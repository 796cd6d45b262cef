"""The getting-started page (docs/getting-started.md) as a new user lives it: each shell block
runs in order from a folder laid out as the project's root, its exit code as the page says,
and what it prints is what the page shows after it (the speed, steps a second, left out, and
a line `...` standing for the lines the page skips). The documented edit (the `diff` block) is
applied as shown. The install command is the README's, run by CI itself."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "getting-started.md"
SPEED = re.compile(r" \([\d,.]+ steps/s\)")


def _blocks() -> list[tuple[str, str]]:
    """Gives the page's fenced blocks, (language, text), in order."""
    return re.findall(r"^```(\w+)\n(.*?)^```", PAGE.read_text(encoding="utf-8"),
                      flags=re.DOTALL | re.MULTILINE)


def _shown(expected: str, printed: str) -> None:
    """Checks the page's lines were printed: each run of lines between `...` as printed, one
    after the other, the runs in order."""
    lines = [SPEED.sub("", line.rstrip()) for line in printed.splitlines()]
    runs = [[line.rstrip() for line in chunk.strip("\n").splitlines()]
            for chunk in re.split(r"^\s*\.\.\.\s*$", expected, flags=re.MULTILINE)]
    at = 0
    for run in runs:
        found = next((start for start in range(at, len(lines) - len(run) + 1)
                      if lines[start:start + len(run)] == run), None)
        assert found is not None, f"the page shows:\n{chr(10).join(run)}\nprinted:\n{printed}"
        at = found + len(run)


def _edit(folder: Path, diff: str, file: str) -> None:
    """Applies the page's diff to `file`: its context and removed lines, in place."""
    old = "\n".join(line[1:] for line in diff.splitlines() if not line.startswith("+"))
    new = "\n".join(line[1:] for line in diff.splitlines() if not line.startswith("-"))
    text = (folder / file).read_text(encoding="utf-8")
    assert text.count(old) == 1, "the page's diff does not match the file it edits"
    (folder / file).write_text(text.replace(old, new), encoding="utf-8")


def test_the_getting_started_page_runs_as_written(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "scenarios", tmp_path / "scenarios")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)
    blocks = _blocks()
    ran = 0
    for index, (language, text) in enumerate(blocks):
        if language == "diff":
            _edit(tmp_path, text, "my_deploy.yaml")
            continue
        if language != "bash" or "pip install" in text:
            continue
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", text], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=600, check=False)
        ran += 1
        assert done.returncode == 0, f"{text}\n{done.stdout[-3000:]}\n{done.stderr}"
        if "echo \"exit $?\"" in text:  # the page says this one fails: exit 1
            assert done.stdout.rstrip().endswith("exit 1"), done.stdout[-2000:]
        following = blocks[index + 1] if index + 1 < len(blocks) else None
        if following is not None and following[0] == "text":
            _shown(following[1], done.stdout)
    assert ran >= 7, "the page's commands were not found"
    assert (tmp_path / "my-workflow" / "workflow_example.yaml").is_file()
