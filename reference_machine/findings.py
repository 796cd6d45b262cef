"""Findings of the load-time checks: errors block loading, warnings do not.

Every importer and the definition compiler report a problem the same way, through a
`FindingSink`: `error(code, where, message, *ids)` and `warning(...)` with the same signature, where
`where` is a dotted location or a node that knows its path and line.

A definition may acknowledge a warning under `lint: ignore:` (code: reason); `CODES` lists every
code, with its severity, that such an entry may name.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Protocol


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


#: The importers' findings about the source itself, not about its translation: what a user of
#: the file would want to hear with any campaign's verdict (a campaign reports them).
ABOUT_THE_SOURCE = frozenset({
    "asl-callback-unbounded",  # a callback task that can wait forever
    "asl-choice-no-default",  # a Choice a run can fall through
    "asl-never-succeeds",  # no path reaches a success
})


@dataclass(frozen=True, slots=True)
class Acknowledged:
    """A warning the definition acknowledges under `lint: ignore:`, with the reason it gives."""

    finding: Finding
    reason: str


@dataclass(frozen=True, slots=True)
class LintReport:
    """What `lint_report` gives: the findings to show, and the warnings acknowledged."""

    findings: tuple[Finding, ...]
    acknowledged: tuple[Acknowledged, ...] = ()

    @property
    def errors(self) -> tuple[Finding, ...]:
        """Gives the findings that are errors."""
        return tuple(f for f in self.findings if f.severity is Severity.ERROR)


#: The codes of the `lint: ignore:` list's own findings: none of them can be acknowledged.
IGNORE_CODES = frozenset({"lint-ignore-unknown", "lint-ignore-refused", "lint-ignore-reason",
                          "lint-ignore-stale"})

_WARNING_CODES = (
    "approval-unneeded", "choice-no-default", "escalate-shadows", "eventless-loop",
    "implicit-wait", "irreversible-unguarded", "lint-ignore-stale", "summary-placeholder",
    "unknown-context-key",
)
_ERROR_CODES = (
    "always-with-step", "approval-bypass", "approval-expiry", "approval-missing",
    "approval-not-wait", "approval-without-step", "bad-action", "bad-expression", "bad-guard",
    "bad-parent", "bad-schema", "blind-retry", "budget-bounds", "budget-target", "choice-shape",
    "compensate-in-scope", "compensation-failed-missing", "correlate-field", "costly-schema",
    "done-not-parallel", "duplicate-key", "escalate-target", "event-never-arrives",
    "eventless-cycle", "final-compound", "final-exit", "final-outcome", "history-shape",
    "initial-count", "internal-builtin", "internal-eventless", "join-missing", "join-never",
    "leaves-scope", "lint-ignore-reason", "lint-ignore-refused", "lint-ignore-unknown",
    "map-items", "map-not-list", "map-only", "map-shape", "no-final", "no-way-to-final",
    "not-a-mapping", "other-format", "outcome-not-final", "parallel-shape", "parent-cycle",
    "reserved-event", "retry-bounds", "schema", "step-cost", "step-timeout", "trap-state",
    "unhandled-approval", "unhandled-step", "unknown-event", "unknown-function",
    "unknown-parent", "unknown-secret", "unknown-target", "unknown-tool", "unreachable-state",
    "unreadable", "untested-code", "untested-reason", "wait-step", "wait-timeout",
)
#: Every code the checks of a native definition report, with its severity: the codes a
#: `lint: ignore:` entry may name (only warnings are acknowledged; naming an error is refused).
CODES: Mapping[str, Severity] = MappingProxyType(
    {**dict.fromkeys(_ERROR_CODES, Severity.ERROR),
     **dict.fromkeys(_WARNING_CODES, Severity.WARNING)})


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """Gives ` (did you mean 'x'?)` when a candidate is close to `word`, else an empty string."""
    close = difflib.get_close_matches(word, sorted(set(candidates)), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def line_of(lines: Mapping[str, int], location: str) -> int | None:
    """Gives the line of a dotted location (`States.Pay.Retry[0]`), or of the nearest of its
    parents the document told a line for (`States.Pay.Retry`, then `States.Pay`); None when none."""
    parts = location.split(".")
    while parts:
        line = lines.get(".".join(parts))
        if line is not None:
            return int(line)
        last = parts[-1]
        if "[" in last:
            parts[-1] = last[: last.index("[")]
        else:
            parts.pop()
    return None


class Located(Protocol):
    """A node of a parsed document that knows where it is: its path and, when told, its line."""

    @property
    def path(self) -> str: ...

    @property
    def line(self) -> int | None: ...


class Fatal(Exception):
    """Stops a conversion where going on would only report the same fault again; the finding is
    already in the sink (`raise sink.fatal(...)`)."""


class FindingSink:
    """Collects the findings of one importer run or one definition build, in the order found.

    `where` is a dotted location, whose line comes from the document's line table, or a `Located`
    node, which brings its own path and line.
    """

    __slots__ = ("findings", "lines")

    def __init__(self, lines: Mapping[str, int] | None = None) -> None:
        self.lines: Mapping[str, int] = lines if lines is not None else {}
        self.findings: list[Finding] = []

    def error(self, code: str, where: str | Located, message: str, *ids: str) -> None:
        """Reports a problem that blocks loading."""
        self.add(Severity.ERROR, code, where, message, ids)

    def warning(self, code: str, where: str | Located, message: str, *ids: str) -> None:
        """Reports a problem that does not block loading."""
        self.add(Severity.WARNING, code, where, message, ids)

    def fatal(self, code: str, where: str | Located, message: str, *ids: str) -> Fatal:
        """Reports an error and gives the exception that stops the conversion here."""
        self.error(code, where, message, *ids)
        return Fatal(message)

    def add(self, severity: Severity, code: str, where: str | Located, message: str,
            ids: tuple[str, ...] = ()) -> None:
        """Reports a finding of the given severity."""
        if isinstance(where, str):
            location, line = where, line_of(self.lines, where)
        else:
            location, line = where.path, where.line
        self.findings.append(Finding(severity, code, location, message, ids, line))

    def extend(self, findings: Iterable[Finding]) -> None:
        """Takes findings made elsewhere (a nested document's), as they are."""
        self.findings.extend(findings)

    def located(self, finding: Finding) -> Finding:
        """Gives the finding with the line of its location, where the document told one."""
        return Finding(finding.severity, finding.code, finding.location, finding.message,
                       finding.ids, line_of(self.lines, finding.location))

    @property
    def errors(self) -> list[Finding]:
        """Gives the errors, in the order found."""
        return [f for f in self.findings if f.severity is Severity.ERROR]

    @property
    def warnings(self) -> list[Finding]:
        """Gives the warnings, in the order found."""
        return [f for f in self.findings if f.severity is Severity.WARNING]
