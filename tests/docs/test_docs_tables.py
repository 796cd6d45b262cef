"""The importing page's tables of the corpus (docs/importing.md: the Step Functions survey, the
W3C SCXML summary) are what the one command that makes each prints now: an importer that
changes changes them, and this test says so until the page is brought up to date (`python
tests/docs/test_docs_tables.py` rewrites them)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

if __name__ == "__main__":  # run as a script: the support folder pytest puts on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
from corpus import CORPUS

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "importing.md"  # the page that shows the tables

#: marker on the page -> the command whose output goes between its two lines
TABLES = {
    "survey: step-functions": ("import", "--survey", str(CORPUS / "step-functions")),
    "w3c: summary": ("import", "--w3c", str(CORPUS / "scxml-w3c")),
}


def printed(marker: str) -> str:
    """Gives what the page shows between the marker's two lines, as the command prints it
    now (the W3C report's summary: its counts and reasons, not the test-by-test list)."""
    done = subprocess.run([sys.executable, "-m", "harness.cli", *TABLES[marker]], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    text = done.stdout
    if marker.startswith("w3c"):
        text = text.split("\n\n", 1)[1]  # its heading is the page's section
        text = text.split("\n| test | imported | reason |", 1)[0].rstrip("\n") + "\n"
    return text.rstrip("\n") + "\n"


def block(text: str, marker: str) -> str:
    found = re.search(rf"<!-- {re.escape(marker)} -->\n(.*?)<!-- /", text, flags=re.DOTALL)
    assert found is not None, f"{PAGE.name} has no <!-- {marker} --> block"
    return found.group(1)


@pytest.mark.parametrize("marker", sorted(TABLES))
def test_the_readme_shows_what_the_command_prints(marker: str) -> None:
    if not CORPUS.is_dir():
        pytest.skip(f"the corpus is not here ({CORPUS})")
    assert block(PAGE.read_text(encoding="utf-8"), marker) == printed(marker), (
        f"{PAGE.name}'s {marker!r} table is out of date: python {Path(__file__).relative_to(ROOT)}")


def rewrite() -> None:
    """Writes each table into the page as its command prints it now."""
    text = PAGE.read_text(encoding="utf-8")
    for marker in TABLES:
        old = block(text, marker)
        text = text.replace(f"<!-- {marker} -->\n{old}", f"<!-- {marker} -->\n{printed(marker)}",
                            1)
    PAGE.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    rewrite()
