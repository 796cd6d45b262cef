"""The end of a session: the report written from every campaign's section, the sections
of xdist workers merged on the controller, and the terminal summary.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from harness.pytest_plugin.settings import SESSION
from harness.report.document import ReportError, document, runs_told
from harness.report.writing import write_reports


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    state = config.stash.get(SESSION, None)
    if state is None:
        return
    workeroutput = getattr(config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: the controller merges and reports
        workeroutput["fsmharness"] = json.dumps(state.sections)
        return
    if state.settings.report is not None and state.sections:
        try:
            state.files = write_reports(document("pytest", _ordered(state.sections),
                                                  config.invocation_params.args),
                                        state.settings.report, stem="pytest")
        except ReportError as exc:
            state.files = exc


def _passes(section: Mapping[str, Any]) -> bool:
    """Tells whether a campaign's section lets its test pass: it held, or it broke as its
    `expect=` says."""
    expected = section.get("expected")
    return bool(expected["met"]) if expected else bool(section["held"])


def _ordered(sections: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Gives the sections in a stable order, whichever worker finished first."""
    return sorted(sections, key=lambda s: (s.get("test", ""), s["name"], s["engine"]))


class XdistMerge:
    """On the xdist controller: takes each worker's sections as it finishes."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        output = getattr(node, "workeroutput", {}).get("fsmharness")
        if output:
            self.config.stash[SESSION].sections.extend(json.loads(output))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int,
                            config: pytest.Config) -> None:
    state = config.stash.get(SESSION, None)
    if state is None or not state.sections or getattr(config, "workeroutput", None) is not None:
        return
    sections = _ordered(state.sections)
    write = terminalreporter.write_line
    terminalreporter.section("fsmharness")
    invariants = sorted({name for s in sections for name in s["invariants"]})
    checked = sorted({name for s in sections for name in s.get("checked", s["invariants"])})
    runs = sum(s["runs"] for s in sections)
    steps = sum(s["steps"] for s in sections)
    faults: dict[str, int] = {}
    for section in sections:
        for kind, count in section["faults"].items():
            faults[kind] = faults.get(kind, 0) + count
    failing = [s for s in sections if not _passes(s)]
    untested = [s for s in failing if s.get("untested") and not s["failures"]]
    expected = [s for s in sections if s.get("expected") and _passes(s)]
    write(f"{len(sections)} campaign(s): {len(checked)} of {len(invariants)} invariants "
          f"checked, {runs:,} runs, "
          f"{steps:,} steps, {sum(faults.values()):,} faults injected, {len(failing)} failing"
          + (f" ({len(untested)} untested)" if untested else "")
          + (f", {len(expected)} broke as expected" if expected else ""))
    write(f"  invariants checked: {', '.join(checked)}")
    if len(checked) < len(invariants):
        write(f"  checking nothing: {', '.join(n for n in invariants if n not in checked)}")
    for section in sections:
        coverage = ", ".join(f"{name} {part['reached']}/{part['of']}"
                             for name, part in section["coverage"].items())
        verdict = "held" if section["held"] else "VIOLATED" if section["failures"] else (
            "UNTESTED" if section.get("untested") else "VACUOUS")
        detail = (section["verdict"] if section["engine"] == "explore" else
                  f"{runs_told(section)}, {section['steps']:,} steps; coverage {coverage}")
        if section.get("expected"):
            names = section["expected"]["invariants"]
            if _passes(section):
                verdict = "expected"
                broken = dict.fromkeys(f["rule"] for f in section["failures"])
                detail = f"broke {', '.join(broken)} as expected; {detail}"
            else:
                wanted = names[0] if len(names) == 1 else f"one of {', '.join(names)}"
                detail = f"{detail}; expected {wanted} to break"
        write(f"  {verdict:8} {section['name']} ({section['engine']}): {detail}")
        if not section["failures"]:
            for gap in section.get("untested", ()):
                write(f"           untested: {gap['what']}; {gap['how']}")
        for note in section.get("notes", ()):
            write(f"           note: {note}")
    if faults:
        write("  faults injected: " + ", ".join(f"{kind} {count:,}"
                                                for kind, count in sorted(faults.items())))
    if isinstance(state.files, ReportError):
        write(f"  report not written: {state.files}", red=True)
    elif state.files is not None:
        write(f"  report: {state.files.html} (and {state.files.json.name}, "
              f"{state.files.markdown.name})")
