"""Writing a report: its JSON document and the Markdown and HTML renderings of it into one
folder, all or nothing (every file is staged beside its final name, and put in place only when
all three are whole).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.report.document import ReportError
from harness.report.html_page import render_html
from harness.report.markdown_page import render_markdown

__all__ = ["ReportFiles", "ensure_writable", "write_reports"]


@dataclass(frozen=True, slots=True)
class ReportFiles:
    """Where a report went."""

    json: Path
    markdown: Path
    html: Path


def ensure_writable(folder: str | os.PathLike[str]) -> Path:
    """Makes `folder` if missing and checks a file can be written there, before any work;
    raises `ReportError` saying why not."""
    path = Path(folder)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".fsmharness-probe-{os.getpid()}"
        probe.write_text("", encoding="utf-8")
        probe.unlink()
    except OSError as exc:
        raise ReportError(f"{folder}: cannot write there: {exc.strerror or exc}") from exc
    return path


def write_reports(doc: Mapping[str, Any], folder: str | os.PathLike[str],
                  stem: str = "fsmharness") -> ReportFiles:
    """Writes `stem`.json, .md and .html into `folder` (made if missing): every file is
    written beside its final name first, and only when all three are whole do they replace
    what was there."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportError(f"{folder}: cannot make the report folder: "
                          f"{exc.strerror or exc}") from exc
    text = json.dumps(doc, indent=2, sort_keys=True) + "\n"
    canonical = json.loads(text)  # render what a reader of the JSON gets, keys sorted
    texts = {".json": text, ".md": render_markdown(canonical), ".html": render_html(canonical)}
    finals = {suffix: folder / f"{stem}{suffix}" for suffix in texts}
    with _all_or_nothing(folder) as stage:
        for suffix, text in texts.items():
            stage(finals[suffix], text)
    return ReportFiles(finals[".json"], finals[".md"], finals[".html"])


@contextlib.contextmanager
def _all_or_nothing(folder: Path) -> Iterator[Any]:
    """Stages files beside their final names; at the end puts them all in place, or, when one
    cannot go, puts back what every final name held before."""
    staged: list[tuple[Path, Path]] = []
    placed: list[tuple[Path, Path | None]] = []  # final name, and the backup of what it held

    def stage(given: Path, text: str) -> None:
        final = Path(os.path.realpath(given))  # a link is written through, never replaced
        if final.exists() and not final.is_file():
            raise ReportError(f"{given}: not a regular file; a report is written whole beside "
                              "its name, so it cannot go there")
        temporary = final.parent / f".{final.name}.{os.getpid()}.tmp"
        staged.append((temporary, final))
        with open(temporary, "w", encoding="utf-8") as out:  # the umask's mode, as any file
            out.write(text)

    try:
        yield stage
        for temporary, final in staged:
            backup = None
            if final.is_file():
                backup = final.with_name(f".{final.name}.{os.getpid()}.previous")
                os.replace(final, backup)
            placed.append((final, backup))
            os.replace(temporary, final)
    except (OSError, ReportError) as exc:
        for final, backup in reversed(placed):
            with contextlib.suppress(OSError):
                if backup is not None:
                    os.replace(backup, final)
                elif final.is_file():
                    os.unlink(final)
        for temporary, _ in staged:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        if isinstance(exc, ReportError):
            raise
        raise ReportError(f"{folder}: cannot write the report: {exc.strerror or exc}") from exc
    for _, backup in placed:
        if backup is not None:
            with contextlib.suppress(OSError):
                os.unlink(backup)
