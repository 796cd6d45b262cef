"""The report rendered as one self-contained HTML page: inline CSS and SVG (each workflow drawn
by `drawing`, a campaign's coverage growth by `plot`), no script, nothing fetched. Everything
that came from the user (names, messages, traces) is escaped.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from harness.report.document import (
    ReportError,
    checked_line,
    coverage_line,
    doc_verdict,
    target_verdict,
    trace_heading,
)
from harness.report.drawing import svg
from harness.report.mermaid import mermaid
from harness.report.plot import growth_svg

__all__ = ["render_html"]


_CSS = """
body{font:14px/1.45 -apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0;color:#1d1d1f;
background:#fafafa}
header{padding:18px 28px;background:#1d2433;color:#fff}
header h1{margin:0;font-size:20px}.held{color:#7ee787}.broken{color:#ff7b72}
main{padding:8px 28px 40px}
section.target{background:#fff;border:1px solid #ddd;border-radius:8px;margin:18px 0;
padding:6px 20px 16px}
h2{font-size:17px}h3{font-size:15px;margin-top:18px}
table{border-collapse:collapse;margin:6px 0 12px;font-size:13px}
th,td{border:1px solid #ddd;padding:3px 9px;text-align:left;vertical-align:top}
th{background:#f2f2f2}td.n{text-align:right;font-variant-numeric:tabular-nums}
.diagram svg.workflow{display:block}
.diagram{overflow:auto;border:1px solid #eee;border-radius:6px;padding:8px;background:#fff}
.legend span{display:inline-block;margin-right:16px;font-size:12px}
.sw{display:inline-block;width:22px;height:0;border-top:3px solid;vertical-align:middle;
margin-right:5px}
ul.trace{list-style:none;font:12px/1.5 ui-monospace,Menlo,Consolas,monospace;background:#f6f8fa;
padding:10px 10px 10px 44px;border-radius:6px}
code{font:12px ui-monospace,Menlo,Consolas,monospace;background:#f0f0f0;padding:1px 4px}
.grid{display:flex;flex-wrap:wrap;gap:24px}
.missing{color:#8a6d00;font-size:12px}
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _table(head: Sequence[str], rows: Sequence[Sequence[Any]], numeric: Sequence[int] = ()
           ) -> str:
    """Gives an HTML table; an empty `head` gives one of label-value rows."""
    if not rows:
        return "<p>none</p>"
    cells = "".join(
        "<tr>" + "".join(f'<td class="n">{_e(v)}</td>' if i in numeric else
                         f"<th>{_e(v)}</th>" if not head and i == 0 else f"<td>{_e(v)}</td>"
                         for i, v in enumerate(row)) + "</tr>" for row in rows)
    top = "<tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr>" if head else ""
    return f"<table>{top}{cells}</table>"


def _duration(ms: float) -> str:
    """Gives virtual milliseconds in the unit that reads best."""
    for unit, size in (("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms >= size:
            return f"{ms / size:.1f} {unit}"
    return f"{ms:.0f} ms"


def _html_section(index: int, section: Mapping[str, Any]) -> str:
    verdict = target_verdict(section)
    parts = [f'<section class="target" id="target-{index}">',
             f'<h2>{_e(section["name"])} <small>({_e(section["engine"])}, '
             f'<span class="{"held" if section["held"] else "broken"}-t">{verdict}</span>)'
             f'</small></h2>']
    # what broke, its shrunk trace and the replay come first: the diagram is below the facts
    for failure in section["failures"]:
        parts.append(f'<h3 class="broken-t">Violated: {_e(failure.get("rule", "?"))}</h3>'
                     f'<p>{_e(failure.get("message", ""))}</p>')
        if failure.get("trace"):
            steps = "".join(f"<li>{_e(line)}</li>" for line in failure["trace"])
            heading = trace_heading(section, failure)
            parts.append(f'<p>{_e(heading[0].upper() + heading[1:])}:</p>'
                         f'<ul class="trace">{steps}</ul>')
        if failure.get("replay_command"):
            parts.append(f'<p>Replay: <code>{_e(failure["replay_command"])}</code></p>')
    definition = section["definition"]
    facts = [("test", section["test"])] if section.get("test") else []
    if section.get("expected"):
        expected = section["expected"]
        facts.append(("expected to break", ", ".join(expected["invariants"])
                      + ("" if expected["met"] else " (it did not break as expected)")))
    facts += [("definition", f"{definition['name']} {definition['version']}"),
              ("machine", section["machine"]), ("runs", f"{section['runs']:,}")]
    if section["engine"] == "explore":
        facts.append(("distinct states", f"{section['states_explored']:,}"))
    else:
        facts += [("steps", f"{section['steps']:,}"),
                  ("steps/s", f"{section['steps_per_second']:,.0f}")]
    facts += [("time", f"{section['elapsed_s']:.2f} s"),
              ("invariants checked", checked_line(section) if section["engine"] == "fuzz"
               else len(section["invariants"]))]
    if section["verdict"] and not section["failures"]:  # a violation is told below
        facts.append(("verdict", section["verdict"]))
    if not section["failures"]:
        facts += [("untested", f"{gap['what']}; how: {gap['how']}")
                  for gap in section.get("untested", ())]
    facts += [("note", note) for note in section.get("notes", ())]
    parts.append(_table([], facts))
    try:
        drawing = svg(section["diagram"])
    except ReportError as exc:  # pragma: no cover - Graphviz always draws an SVG
        drawing = f"<pre>{_e(mermaid(section['diagram']))}</pre><p>{_e(exc)}</p>"
    parts += ['<h3>Workflow</h3><div class="legend">'
              '<span><i class="sw" style="border-color:#2c7a2c"></i>covered</span>'
              '<span><i class="sw" style="border-color:#9a9a9a;border-top-style:dashed"></i>'
              'never taken</span>'
              '<span><i class="sw" style="border-color:#d62728"></i>counterexample</span>'
              '<span><i class="sw" style="border-color:#9a9a9a;border-top-style:dotted"></i>'
              'forced move</span></div>',
              f'<div class="diagram">{drawing}</div>']
    coverage = section["coverage"]
    rows = [(name, part["reached"], part["of"],
             f"{100 * part['reached'] / part['of']:.0f}%" if part["of"] else "-")
            for name, part in coverage.items()]
    parts.append('<div class="grid"><div><h3>Coverage</h3>'
                 + _table(["dimension", "reached", "of", ""], rows, (1, 2, 3)))
    for name, part in coverage.items():
        if part["missing"]:
            shown = ", ".join(" ".join(map(str, m)) if isinstance(m, list) else str(m)
                              for m in part["missing"][:30])
            parts.append(f'<p class="missing">{_e(name)} never seen: {_e(shown)}</p>')
    if section.get("growth"):  # reports from before growth was measured lack it
        title = f"coverage growth ({section['strategy']})" if section.get("strategy") \
            else "coverage growth"
        parts.append(f'<div class="plot">{growth_svg(section["growth"], title=title)}</div>')
    parts.append("</div><div><h3>Faults injected</h3>"
                 + _table(["fault", "injected"], sorted(section["faults"].items()), (1,))
                 + "</div></div>")
    parts.append(_metrics_html(section["metrics"]))
    parts.append("</section>")
    return "".join(parts)


def _metrics_html(metrics: Mapping[str, Any]) -> str:
    if not metrics:
        return ""
    states = [(name, m["visits"], _duration(m["mean_time_ms"]), m["failures"],
               f"{100 * m['failure_rate']:.1f}%") for name, m in metrics["states"].items()]
    tools = [(name, m["calls"], m["resends"], f"{100 * m['resend_rate']:.1f}%")
             for name, m in metrics["tools"].items()]
    per = [("executions", metrics["executions"]),
           ("transitions per execution (mean / max)",
            f"{metrics['transitions']['mean']} / {metrics['transitions']['max']}"),
           ("cost per execution (mean / max)",
            f"{metrics['cost']['mean']} / {metrics['cost']['max']}"),
           ("stuck executions", metrics["stuck"])]
    return ("<h3>Metrics</h3><div class=\"grid\"><div><h4>Per state</h4>"
            + _table(["state", "visits", "mean time (virtual)", "failures", "failure rate"],
                     states, (1, 2, 3, 4))
            + "</div><div><h4>Per tool</h4>"
            + _table(["tool", "calls", "re-sends", "re-send rate"], tools, (1, 2, 3))
            + "</div><div><h4>Approvals</h4>"
            + _table(["outcome", "count"], list(metrics["approvals"].items()), (1,))
            + "<h4>Endings</h4>"
            + _table(["ending", "executions"], list(metrics["endings"].items()), (1,))
            + "<h4>Per execution</h4>" + _table([], per, (1,)) + "</div></div>")


def render_html(doc: Mapping[str, Any]) -> str:
    """Gives the report as one self-contained HTML page (inline SVG and CSS, no script)."""
    held = doc["held"]
    title = f"fsmharness {doc['command']}: {doc_verdict(doc)}"
    rows = [(s["name"], s["engine"], target_verdict(s), s["runs"], s["steps"],
             coverage_line(s["coverage"])) for s in doc["targets"]]
    body = "".join(_html_section(index, section) for index, section in enumerate(doc["targets"]))
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "style-src 'unsafe-inline'; img-src data:\">"
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>"
        f"<header><h1>fsmharness {_e(doc['command'])}: "
        f"<span class=\"{'held' if held else 'broken'}\">"
        f"{doc_verdict(doc)}</span></h1>"
        f"<div>fsmharness {_e(doc['tool']['version'])} · {_e(' '.join(doc['arguments']))}"
        "</div></header><main>"
        + _table(["target", "engine", "verdict", "runs", "steps", "coverage"], rows, (3, 4))
        + body + "</main></body></html>\n")
