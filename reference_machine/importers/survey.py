"""A survey of files of other formats: which import (through the native checks) and which are
refused, and what the importers approximated, tallied by finding code.

`survey(paths)` reads each file (a folder: every file in it whose name tells a format) with
`import_definition`; `SurveyResult.markdown()` renders the tables a report or an issue quotes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from reference_machine.errors import DefinitionError
from reference_machine.importers import format_of, import_definition

__all__ = ["FileOutcome", "SurveyResult", "survey"]


@dataclass(frozen=True, slots=True)
class FileOutcome:
    """One file: imported or refused (with the first error as the reason), and the codes of
    the warnings it imported with (one entry per finding)."""

    path: str
    format: str | None
    imported: bool
    reason: str = ""
    codes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SurveyResult:
    """Every file's outcome, in the order read."""

    files: tuple[FileOutcome, ...]

    @property
    def imported(self) -> tuple[FileOutcome, ...]:
        """Gives the files that imported."""
        return tuple(f for f in self.files if f.imported)

    @property
    def refused(self) -> tuple[FileOutcome, ...]:
        """Gives the files that did not import."""
        return tuple(f for f in self.files if not f.imported)

    @property
    def rate(self) -> float:
        """Gives the share of files that imported (0 for no files)."""
        return len(self.imported) / len(self.files) if self.files else 0.0

    def findings_by_code(self) -> Counter[str]:
        """Gives, per warning code, how many findings the imported files carry."""
        return Counter(code for f in self.imported for code in f.codes)

    def files_by_code(self) -> Counter[str]:
        """Gives, per warning code, how many imported files carry it."""
        return Counter(code for f in self.imported for code in set(f.codes))

    def markdown(self) -> str:
        """Gives the survey as Markdown: the imported count, the approximations by kind,
        the refused files with their reasons."""
        total = len(self.files)
        lines = [f"Imported {len(self.imported)} of {total} files ({self.rate:.0%}).", ""]
        findings, files = self.findings_by_code(), self.files_by_code()
        if findings:
            lines += ["| approximation (warning code) | findings | files |",
                      "| --- | ---: | ---: |"]
            for code, count in sorted(findings.items(), key=lambda kv: (-kv[1], kv[0])):
                lines.append(f"| `{_cell(code)}` | {count} | {files[code]} |")
            lines.append("")
        if self.refused:
            lines += ["| refused file | reason |", "| --- | --- |"]
            for outcome in self.refused:
                lines.append(f"| `{_cell(Path(outcome.path).name)}` | {_cell(outcome.reason)} |")
            lines.append("")
        return "\n".join(lines)


def survey(paths: Iterable[str | Path]) -> SurveyResult:
    """Gives the outcome of importing each file (a folder stands for the files in it whose
    name tells a format, sorted by name)."""
    outcomes: list[FileOutcome] = []
    for path in _files(paths):
        fmt = format_of(path)
        try:
            definition = import_definition(path)
        except DefinitionError as exc:
            first = exc.findings[0].render() if exc.findings else str(exc)
            more = f" (+{len(exc.findings) - 1} more)" if len(exc.findings) > 1 else ""
            outcomes.append(FileOutcome(str(path), fmt, False, first + more))
            continue
        outcomes.append(FileOutcome(str(path), fmt, True,
                                    codes=tuple(w.code for w in definition.warnings)))
    return SurveyResult(tuple(outcomes))


def _files(paths: Iterable[str | Path]) -> list[Path]:
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found += sorted((p for p in path.iterdir() if p.is_file() and format_of(p)),
                            key=lambda p: p.name)
        else:
            found.append(path)
    return found


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'").replace("\n", " ")
