"""The getting-started page (docs/getting-started.md) as a new user lives it: each shell block
runs in order from a folder laid out as the project's root, its exit code as the page says,
and what it prints is what the page shows after it (the speed, steps a second, left out, and
a line `...` standing for the lines the page skips). The documented edit (the `diff` block) is
applied as shown. The install command is the README's, run by CI itself."""

from __future__ import annotations

import shutil
from pathlib import Path

from doc_pages import run_page

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "getting-started.md"


def test_the_getting_started_page_runs_as_written(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "scenarios", tmp_path / "scenarios")
    ran, _ = run_page(PAGE, tmp_path, tmp_path / "my_deploy.yaml",
                      skip=lambda text: "pip install" in text)
    assert ran >= 7, "the page's commands were not found"
    assert (tmp_path / "my-workflow" / "workflow_example.yaml").is_file()
