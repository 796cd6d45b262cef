"""What a definition acknowledges, with a reason: the warnings under `lint: ignore:` and the gaps
a campaign may leave untested (`untested:`); an entry that cannot stand is an error."""

from __future__ import annotations

from reference_machine._definition.context import Compilation
from reference_machine.findings import (
    CODES,
    IGNORE_CODES,
    Acknowledged,
    Finding,
    Severity,
    did_you_mean,
)

__all__ = ["UNTESTED_KINDS", "acknowledge", "check_untested"]


#: The kinds of gap a definition may accept a campaign leaves untested (`untested:`).
UNTESTED_KINDS = ("crash_point", "fault", "moves", "outcome")


def check_untested(ctx: Compilation) -> dict[str, str]:
    """Gives the gaps the definition accepts a campaign leaves untested (`untested:
    {code: reason}`), and reports an entry that cannot stand: a code of no gap's form, a
    state the definition lacks, no reason. (A fault kind and a crash point are the
    harness's to check: a crash point is the machine's.)"""
    accepted: dict[str, str] = {}
    for code, reason in ctx.spec.untested.items():
        location = f"untested.{code}"
        kind, _, name = code.partition(":")
        if kind not in UNTESTED_KINDS or not name:
            ctx.sink.error("untested-code", location,
                           f"{code!r} names no gap; expected crash_point:<name>, "
                           "fault:<kind>, moves:<state> or outcome:success (or <kind>:* for "
                           f"every gap of the kind){did_you_mean(kind, UNTESTED_KINDS)}", code)
        elif kind == "outcome" and name not in ("success", "*"):
            ctx.sink.error("untested-code", location,
                           f"{code!r} names no gap; the outcome gap is outcome:success", code)
        elif kind == "moves" and name != "*" and name not in ctx.states:
            ctx.sink.error("untested-code", location,
                           f"no state {name!r}"
                           f"{did_you_mean(name, list(ctx.states))}", code)
        elif reason is None or not reason.strip():
            ctx.sink.error("untested-reason", location,
                           f"leaving {code!r} untested needs a reason: `{code}: <why it is "
                           "acceptable here>`", code)
        else:
            accepted[code] = reason.strip()
    return accepted


def acknowledge(ctx: Compilation) -> None:
    """Moves the warnings the definition acknowledges (`lint: ignore: {code: reason}`) out
    of the findings, and reports the entries that cannot stand: an unknown code, an
    error's code (errors cannot be acknowledged), no reason, or a code that never fires."""
    ignore = ctx.spec.lint.ignore
    if not ignore:
        return
    broken = any(f.severity is Severity.ERROR for f in ctx.sink.findings)
    reasons: dict[str, str] = {}
    for code, reason in ignore.items():
        location = f"lint.ignore.{code}"
        severity = CODES.get(code)
        if severity is None:
            hint = did_you_mean(code, [c for c, s in CODES.items()
                                       if s is Severity.WARNING and c not in IGNORE_CODES])
            ctx.sink.error("lint-ignore-unknown", location,
                           f"{code!r} is not a finding code{hint}; `lint: ignore:` names the "
                           "code a warning ends with, in brackets", code)
        elif code in IGNORE_CODES:
            ctx.sink.error("lint-ignore-refused", location,
                           f"{code!r} is a finding about `lint: ignore:` itself and cannot be "
                           "acknowledged: fix the entry it names", code)
        elif severity is Severity.ERROR:
            ctx.sink.error("lint-ignore-refused", location,
                           f"{code!r} is an error, and errors cannot be acknowledged: fix what "
                           "it reports (only warnings may be listed here)", code)
        elif reason is None or not reason.strip():
            ctx.sink.error("lint-ignore-reason", location,
                           f"acknowledging {code!r} needs a reason: `{code}: <why it is "
                           "acceptable here>`", code)
        else:
            reasons[code] = reason.strip()
    fired = {f.code for f in ctx.sink.findings}
    kept: list[Finding] = []
    for finding in ctx.sink.findings:
        reason = reasons.get(finding.code)
        if reason is not None and finding.severity is Severity.WARNING:
            ctx.acknowledged.append(Acknowledged(finding, reason))
        else:
            kept.append(finding)
    ctx.sink.findings = kept
    if broken:
        return  # with errors some checks stop early: what did not fire may yet
    for code in reasons:
        if code not in fired:
            ctx.sink.warning("lint-ignore-stale", f"lint.ignore.{code}",
                             f"{code!r} is acknowledged but no {code!r} warning fires in this "
                             "definition; remove the entry", code)
