"""The report rendered as Markdown fit for a CI job summary, each workflow drawn as a Mermaid
diagram. Everything that came from the user (names, messages, traces) is escaped.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from typing import Any

from harness.report.document import (
    broke_as_expected,
    checked_line,
    coverage_line,
    doc_verdict,
    target_verdict,
)
from harness.report.mermaid import mermaid
from harness.report.plot import growth_caption

__all__ = ["render_markdown"]


_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+!|~])")


def _md(text: Any) -> str:
    """Escapes text for Markdown: no HTML, no links or images, no emphasis, no column
    breaks; it reads as the same characters."""
    escaped = _MARKDOWN.sub(r"\\\1", _one_line(text))
    return html.escape(escaped, quote=False)


def _md_code(text: Any) -> str:
    """Gives text as a Markdown code span that nothing in it can close (a path or command
    with a backtick in it): fenced by one backtick more than its longest run of them, and
    padded so that a backtick at either end stays inside. A code span shows its characters
    as they are, so nothing else needs escaping."""
    line = _one_line(text)
    fence = "`" * (max((len(run) for run in re.findall(r"`+", line)), default=0) + 1)
    return f"{fence} {line} {fence}"


def _one_line(text: Any) -> str:
    """Gives text on one line: a line break in it could end a Markdown block or table row."""
    return re.sub(r"[\r\n\u2028\u2029\x0b\x0c\x85]", " ", str(text))


def _amount(section: Mapping[str, Any]) -> str:
    """Gives how much a target's engine did: steps (fuzz) or distinct states (explore)."""
    if section["engine"] == "explore":
        return f"{section['states_explored']:,} states"
    return f"{section['steps']:,}"


def _held_cell(section: Mapping[str, Any]) -> str:
    if section["held"]:
        return "yes"
    if broke_as_expected(section):
        return f"no, as expected ({_md(', '.join(section['expected']['invariants']))})"
    return f"**no** ({target_verdict(section)})"


def render_markdown(doc: Mapping[str, Any]) -> str:
    """Gives the report as Markdown fit for a CI job summary."""
    verdict = doc_verdict(doc)
    out = [f"# fsmharness {_md(doc['command'])}: {verdict}", "",
           "| target | engine | held | runs | steps | coverage |",
           "|---|---|---|---|---|---|"]
    for section in doc["targets"]:
        out.append(f"| {_md(section['name'])} | {_md(section['engine'])} | "
                   f"{_held_cell(section)} | "
                   f"{section['runs']} | "
                   f"{_amount(section)} | {_md(coverage_line(section['coverage']))} |")
    for section in doc["targets"]:
        out += ["", f"## {_md(section['name'])}", ""]
        if section["verdict"] and not section["failures"]:  # a violation is told below
            out += [_md(section["verdict"]), ""]
        if section.get("untested") and not section["failures"]:
            out += [f"- untested: {_md(gap['what'])}; how: {_md(gap['how'])}"
                    for gap in section["untested"]] + [""]
        if section["engine"] == "fuzz":
            out += [_md(checked_line(section)), ""]
        out += [line for note in section.get("notes", ()) for line in (f"> note: {_md(note)}",
                                                                      "")]
        out += ["```mermaid", mermaid(section["diagram"]).rstrip(), "```", ""]
        if section.get("growth"):
            out += [_md(growth_caption(section["growth"])), ""]
        for failure in section["failures"]:
            out += [f"### violated: {_md(failure.get('rule', '?'))}", "",
                    _md(failure.get("message", "")), ""]
            if failure.get("trace"):
                out += ["```text", *[_one_line(line).replace("```", "'''")
                                     for line in failure["trace"]], "```", ""]
            if failure.get("replay_command"):
                out += [f"replay: {_md_code(failure['replay_command'])}", ""]
        if section["faults"]:
            out += ["| fault | injected |", "|---|---|"]
            out += [f"| {_md(kind)} | {count} |" for kind, count in section["faults"].items()]
            out.append("")
        for name, part in section["coverage"].items():
            if part["missing"]:
                missing = ", ".join(_md(" ".join(map(str, m)) if isinstance(m, list) else m)
                                    for m in part["missing"][:20])
                more = f" and {len(part['missing']) - 20} more" if len(part["missing"]) > 20 \
                    else ""
                out.append(f"- {_md(name)} never seen: {missing}{more}")
    return "\n".join(out).rstrip() + "\n"
