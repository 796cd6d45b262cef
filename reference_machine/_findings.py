"""Findings of the load-time checks: errors block loading, warnings do not."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem in a definition: where it is, what is wrong, and the ids at fault."""

    severity: Severity
    code: str
    location: str
    message: str
    ids: tuple[str, ...] = ()
    line: int | None = None

    def render(self) -> str:
        """Gives the one-line form `line 12: states.x.after: message [code]`."""
        where = f"line {self.line}: " if self.line is not None else ""
        location = f"{self.location}: " if self.location else ""
        return f"{where}{location}{self.message} [{self.code}]"


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """Gives ` (did you mean 'x'?)` when a candidate is close to `word`, else an empty string."""
    close = difflib.get_close_matches(word, sorted(set(candidates)), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
