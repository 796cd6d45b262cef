"""The page "Wrap your machine in 15 minutes" (docs/wrap-your-machine.md) as a new user lives
it: from a folder laid out as the project's root, each shell block runs in order, its exit
code as the page says, and prints what the page shows after it (the speed, steps a second,
left out, and a line `...` standing for the lines the page skips); each `diff` block is
applied, as shown, to the copy of the template the page makes. The page says what the
verdict needs (`watch()`, `moves`) before its first step, and the site leads to it."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml
from doc_pages import run_page

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "wrap-your-machine.md"
TEMPLATE = Path("docs") / "examples" / "machine_template.py"
COPY = "my_machine.py"  # the copy of the template the page edits


def test_the_page_runs_as_written(tmp_path: Path) -> None:
    """Copying the template, fuzzing it, hiding its `watch()` and reporting `moves` instead
    give the verdicts the page shows: held, UNTESTED (exit 1), held."""
    (tmp_path / TEMPLATE).parent.mkdir(parents=True)
    shutil.copy(ROOT / TEMPLATE, tmp_path / TEMPLATE)
    ran, diffs = run_page(PAGE, tmp_path, tmp_path / COPY)
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
