"""The page "Wrap your machine in 15 minutes" (docs/wrap-your-machine.md) as a new user lives
it: from a folder laid out as the project's root, each shell block runs in order, its exit
code as the page says, and prints what the page shows after it (the speed, steps a second,
left out, and a line `...` standing for the lines the page skips); each `diff` block is
applied, as shown, to the copy of the template the page makes. The page says what the
verdict needs (`watch()`, `moves`) before its first step, and the site leads to it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "wrap-your-machine.md"
TEMPLATE = Path("docs") / "examples" / "machine_template.py"
COPY = "my_machine.py"  # the copy of the template the page edits
SPEED = re.compile(r" \([\d,.]+ steps/s\)")


def blocks() -> list[tuple[str, str]]:
    """Gives the page's fenced blocks, (language, text), in order."""
    return re.findall(r"^```(\w+)\n(.*?)^```", PAGE.read_text(encoding="utf-8"),
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


def test_the_page_runs_as_written(tmp_path: Path) -> None:
    """Copying the template, fuzzing it, hiding its `watch()` and reporting `moves` instead
    give the verdicts the page shows: held, UNTESTED (exit 1), held."""
    (tmp_path / TEMPLATE).parent.mkdir(parents=True)
    shutil.copy(ROOT / TEMPLATE, tmp_path / TEMPLATE)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)
    found = blocks()
    ran = diffs = 0
    for index, (language, text) in enumerate(found):
        if language == "diff":
            apply_diff(tmp_path / COPY, text)
            diffs += 1
            continue
        if language != "bash":
            continue
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", text], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=600, check=False)
        ran += 1
        assert done.returncode == 0, f"{text}\n{done.stdout[-3000:]}\n{done.stderr}"
        if "echo \"exit $?\"" in text:  # the page says this one fails: exit 1
            assert done.stdout.rstrip().endswith("exit 1"), done.stdout[-2000:]
        following = found[index + 1] if index + 1 < len(found) else None
        if following is not None and following[0] == "text":
            assert_shown(following[1], done.stdout, done.stderr)
    assert (ran, diffs) == (4, 3), "the page's commands and edits were not found"


def test_the_page_names_watch_and_moves_before_its_first_step() -> None:
    """What the verdict needs of a wrapper, `watch()` and `moves` in `observe`, comes first."""
    text = PAGE.read_text(encoding="utf-8")
    first_step = text.index("\n## ")
    assert "`watch(on_commit, on_record)`" in text[:first_step]
    assert "`moves` in `observe`" in text[:first_step]


def test_the_site_leads_to_the_page() -> None:
    """The navigation lists the page, and the home page and getting started link to it
    before their second section."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert "wrap-your-machine.md" in str(config["nav"])
    for name in ("index.md", "getting-started.md"):
        text = (ROOT / "docs" / name).read_text(encoding="utf-8")
        second_section = text.index("\n## ", text.index("\n## ") + 1)
        assert "(wrap-your-machine.md)" in text[:second_section], name
