"""The HTML report in a real browser (headless Chromium): the workflow diagram is drawn, the
counterexample's path is on it, nothing is fetched and nothing logs an error; the busiest
workflows at hand stay legible in a window 1400 px wide; and user data in the report is
escaped, secrets redacted."""

from __future__ import annotations

import errno
import html
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from corpus import CORPUS
from planted import PLANTED, WORKFLOW
from running import ROOT

from harness import FuzzOptions, SimOptions, fuzz, replay
from harness.adapters.targets import Target
from harness.engines.campaign import fuzz_target
from harness.report.document import ReportError, document, target_section
from harness.report.html_page import render_html
from harness.report.redact import redact
from harness.report.writing import write_reports
from reference_machine import DefinitionError, WorkflowDefinition, load_definition
from reference_machine.importers import import_definition

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("FSMHARNESS_REQUIRE_CHROMIUM"),
    reason="no chromium here (.ci/run installs Debian's and sets FSMHARNESS_REQUIRE_CHROMIUM)")

# A page beside the report that loads it in a frame and writes what it measured into its own
# DOM, which `--dump-dom` prints: the report itself carries no script (its CSP forbids them).
PROBE = """<!DOCTYPE html><html><body><iframe id="r" src="fuzz.html" width="1400" height="900">
</iframe><pre id="out">pending</pre><script>
document.getElementById("r").addEventListener("load", () => {
  const doc = document.getElementById("r").contentDocument;
  const svg = doc.querySelector("svg.workflow");
  const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
  const red = [...doc.querySelectorAll("svg.workflow g.edge path")]
      .filter(p => p.getAttribute("stroke") === "#d62728").length;
  document.getElementById("out").textContent = JSON.stringify({
    width: box.width, height: box.height,
    nodes: doc.querySelectorAll("svg.workflow g.node").length,
    edges: doc.querySelectorAll("svg.workflow g.edge").length, red,
    trace: doc.querySelectorAll("ul.trace li").length,
    title: doc.title, scripts: doc.scripts.length});
});
</script></body></html>"""


@pytest.fixture(scope="module")
def failing_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Writes the report of a campaign that found the key-per-attempt bug."""
    folder = tmp_path_factory.mktemp("report")
    machine, _ = PLANTED["key_per_attempt"]
    options = FuzzOptions(runs=200, replay_dir=folder / "replays")
    report = fuzz(WORKFLOW, options, machine=machine)
    assert report.failures
    section = target_section("planted.yaml", "fuzz", report.definition, "planted:KeyPerAttempt",
                             report.summary(), report.coverage,
                             [(f.counterexample, f.replay_file) for f in report.failures])
    write_reports(document("fuzz", [section], ["planted.yaml"]), folder, stem="fuzz")
    return folder


@needs_chromium
def test_the_report_opens_offline_with_the_diagram_drawn_and_no_console_errors(
        failing_report: Path) -> None:
    assert CHROMIUM is not None, "FSMHARNESS_REQUIRE_CHROMIUM is set but chromium is missing"
    probe = failing_report / "probe.html"
    probe.write_text(PROBE)
    profile = failing_report / "profile"
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update", "--no-first-run",
         "--disable-sync", f"--user-data-dir={profile}", "--allow-file-access-from-files",
         "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000", "--dump-dom",
         probe.as_uri()],
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    start = done.stdout.index('<pre id="out">') + len('<pre id="out">')
    measured = json.loads(done.stdout[start:done.stdout.index("</pre>", start)])
    assert measured["width"] > 300 and measured["height"] > 100  # drawn, not an empty box
    assert measured["nodes"] == 11  # ten states and the start dot
    assert measured["edges"] >= 13 and measured["red"] >= 2  # the path review -> charging ->
    assert measured["trace"] >= 2 and measured["scripts"] == 0
    assert measured["title"] == "fsmharness fuzz: violations found"
    console = [line for line in done.stderr.splitlines() if "CONSOLE" in line]
    assert console == [], console


def browse(probe: Path) -> dict[str, Any]:
    """Opens a probe page in headless Chromium; gives what it wrote into its `<pre id=out>`."""
    assert CHROMIUM is not None, "FSMHARNESS_REQUIRE_CHROMIUM is set but chromium is missing"
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update", "--no-first-run",
         "--disable-sync", f"--user-data-dir={probe.parent / 'profile'}",
         "--allow-file-access-from-files", "--virtual-time-budget=10000", "--dump-dom",
         probe.as_uri()],
        capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    start = done.stdout.index('<pre id="out">') + len('<pre id="out">')
    found: dict[str, Any] = json.loads(html.unescape(done.stdout[start:done.stdout.index(
        "</pre>", start)]))
    return found


# -- a busy workflow's diagram, legible in a window 1400 px wide -------------------------------

#: The busiest definitions at hand: the bundled scenario with the most transitions (24, a
#: parallel state, guards; its campaign fails, so the counterexample's path is drawn too) and,
#: where the shared corpus is, the two Step Functions files with the most (62 and 54: long
#: state names and guards, maps, a parallel state of four regions).
BUSY = ROOT / "scenarios" / "naive" / "triage_credit_twice.yaml"
BUSY_CORPUS = ("sfn-rekognition-video-catalog-workflow__statemachine__statemachine.asl.json",
               "quorum-with-parallel-pattern__statemachine__statemachine.asl.json")
#: The smallest an edge label may be drawn, in CSS px, and the room two labels keep apart.
LABEL_PX_MIN, LABEL_GAP_PX = 11, 3

# Measures every diagram of the report as a window 1400 px wide shows it (once its fonts are
# loaded): each edge's label (its text's boxes, wherever the drawing puts them: in the edge's
# group or one of its own) and the size its letters are drawn at; the labels that come within
# LABEL_GAP_PX of another, lie on a state's box or outside the drawing; and, sampling every
# edge's path (when SAMPLE_EDGES), each place where it runs under another edge's label that
# the label does not cover (drawn after the edge, with a halo).
_PROBE = """<!DOCTYPE html><html><body><iframe id="r" src="fuzz.html" width="1400"
height="900"></iframe><pre id="out">pending</pre><script>
const rect = e => { const r = e.getBoundingClientRect();
  return {x0: r.left, y0: r.top, x1: r.right, y1: r.bottom}; };
const near = (a, b, m) => a.x0 - m < b.x1 && b.x0 - m < a.x1 && a.y0 - m < b.y1 && b.y0 - m < a.y1;
document.getElementById("r").addEventListener("load", async () => {
  const doc = document.getElementById("r").contentDocument;
  await doc.fonts.ready;
  const drawings = [];
  for (const svg of doc.querySelectorAll("svg.workflow")) {
    const labels = new Map();
    for (const text of svg.querySelectorAll("text")) {
      const owner = text.closest("g[id^='edge-']");
      if (!owner) continue;
      const id = owner.id.replace(/-label$/, "");
      const box = rect(text), px = parseFloat(getComputedStyle(text).fontSize)
          * text.getScreenCTM().a;
      const label = labels.get(id) || {id, group: owner, texts: [], px: 1e9,
                                       x0: 1e9, y0: 1e9, x1: -1e9, y1: -1e9};
      label.texts.push(text.textContent); label.px = Math.min(label.px, px);
      label.x0 = Math.min(label.x0, box.x0); label.y0 = Math.min(label.y0, box.y0);
      label.x1 = Math.max(label.x1, box.x1); label.y1 = Math.max(label.y1, box.y1);
      labels.set(id, label);
    }
    const all = [...labels.values()], name = l => l.texts.join(" ");
    const states = [...svg.querySelectorAll("g.node")].map(g => rect(g.querySelector(
        "path, polygon, ellipse")));
    const frame = rect(svg);
    const under = [];
    for (const edge of SAMPLE_EDGES ? svg.querySelectorAll("g.edge") : []) {
      for (const path of edge.querySelectorAll("path")) {
        const reach = rect(path);
        const near_path = all.filter(l => l.id !== edge.id && near(l, reach, 0));
        if (!near_path.length) continue;
        const m = path.getScreenCTM(), length = path.getTotalLength();
        for (let d = 0; d <= length; d += 2) {
          const p = path.getPointAtLength(d);
          const x = m.a * p.x + m.c * p.y + m.e, y = m.b * p.x + m.d * p.y + m.f;
          for (const l of near_path) {
            if (l.id === edge.id || x <= l.x0 + 1 || x >= l.x1 - 1 || y <= l.y0 + 1
                || y >= l.y1 - 1) continue;
            const first = l.group.querySelector("text"), style = getComputedStyle(first);
            const after = path.compareDocumentPosition(l.group)
                & Node.DOCUMENT_POSITION_FOLLOWING;
            const halo = style.paintOrder.startsWith("stroke") && style.stroke !== "none";
            if (!(after && halo)) under.push(edge.id + " under " + name(l));
          }
        }
      }
    }
    drawings.push({
      labels: all.length,
      small: all.filter(l => l.px < PX_MIN).map(l => name(l) + " " + l.px.toFixed(1)),
      close: all.flatMap((a, i) => all.slice(i + 1).filter(b => near(a, b, GAP))
                                      .map(b => name(a) + " / " + name(b))),
      on_states: all.filter(l => states.some(s => near(l, s, 0))).map(name),
      outside: all.filter(l => l.x0 < frame.x0 || l.x1 > frame.x1 || l.y0 < frame.y0
                               || l.y1 > frame.y1).map(name),
      under: [...new Set(under)]});
  }
  document.getElementById("out").textContent = JSON.stringify(drawings);
});
</script></body></html>"""


def legibility_probe(sample_edges: bool = True) -> str:
    """Gives the probe page, with the limits it measures against."""
    return _PROBE.replace("<script>", f"<script>const GAP = {LABEL_GAP_PX}, PX_MIN = "
                          f"{LABEL_PX_MIN}, SAMPLE_EDGES = {str(sample_edges).lower()};", 1)


def busy_definitions() -> list[WorkflowDefinition]:
    found = [load_definition(BUSY)]
    found += [import_definition(CORPUS / "step-functions" / name) for name in BUSY_CORPUS
              if (CORPUS / "step-functions" / name).is_file()]
    return found


@pytest.fixture(scope="module")
def busy_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[int]]:
    """Writes one report of a 20-run campaign on each busy definition, as `fsmharness fuzz
    FILE --runs 20` does; gives its folder and each diagram's number of transitions."""
    folder = tmp_path_factory.mktemp("busy")
    sections = []
    for definition in busy_definitions():
        options = FuzzOptions(runs=20, replay_dir=folder / "replays")
        sections.append(fuzz_target(Target(definition.name, definition), options)[1])
    write_reports(document("fuzz", sections), folder, stem="fuzz")
    (folder / "probe.html").write_text(legibility_probe())
    return folder, [len(section["diagram"]["transitions"]) for section in sections]


@needs_chromium
def test_a_busy_workflows_edge_labels_are_legible_at_1400_px(
        busy_report: tuple[Path, list[int]]) -> None:
    """Every transition's label is drawn, at 11 px or more; no two labels come within 3 px
    of each other; none lies on a state or outside the drawing; and no edge is drawn over a
    label it passes under."""
    folder, transitions = busy_report
    drawings = browse(folder / "probe.html")
    assert [drawing["labels"] for drawing in drawings] == transitions
    assert transitions[0] == 24 and (len(transitions) == 1 or max(transitions) >= 54)
    for drawing in drawings:
        assert drawing["small"] == [], drawing["small"]
        assert drawing["close"] == [], drawing["close"]
        assert drawing["on_states"] == [], drawing["on_states"]
        assert drawing["outside"] == [], drawing["outside"]
        assert drawing["under"] == [], drawing["under"]


def definitions_at_hand() -> list[WorkflowDefinition]:
    """Gives every bundled scenario and every Step Functions file of the shared corpus that
    imports."""
    found = [load_definition(path) for path in sorted((ROOT / "scenarios").rglob("*.yaml"))]
    folder = CORPUS / "step-functions"
    for path in sorted(folder.glob("*.asl.*")) if folder.is_dir() else []:
        try:
            found.append(import_definition(path))
        except DefinitionError:  # the one in ten the importer refuses, saying why
            continue
    return found


@needs_chromium
def test_every_definition_at_hand_draws_legibly_at_1400_px(tmp_path: Path) -> None:
    """The same measures (but the sampling of every edge, which the busy workflows' test
    does) over the diagram of each scenario and corpus file, as a report draws it (nothing
    run: the layout is the same)."""
    definitions = definitions_at_hand()
    sections = [target_section(d.name, "fuzz", d, "reference", {"runs": 0}, None)
                for d in definitions]
    write_reports(document("fuzz", sections), tmp_path, stem="fuzz")
    (tmp_path / "probe.html").write_text(legibility_probe(sample_edges=False))
    drawings = browse(tmp_path / "probe.html")
    assert [d["labels"] for d in drawings] == [len(s["diagram"]["transitions"])
                                               for s in sections]
    problems = {definition.name: {key: found for key, found in drawing.items()
                                  if key != "labels" and found}
                for definition, drawing in zip(definitions, drawings, strict=True)}
    assert {name: found for name, found in problems.items() if found} == {}


def test_the_shared_corpus_busy_files_are_there_when_the_corpus_is() -> None:
    """A renamed corpus file must not quietly shrink the legibility test to one workflow."""
    if not CORPUS.is_dir():
        pytest.skip(f"the shared corpus is not at {CORPUS}")
    assert len(busy_definitions()) == 1 + len(BUSY_CORPUS)


def test_user_data_is_escaped_and_secrets_redacted(failing_report: Path) -> None:
    doc = json.loads((failing_report / "fuzz.json").read_text())
    section = doc["targets"][0]
    section["name"] = '<script>alert("x")</script>.yaml'
    section["failures"][0]["message"] = "card 4111111111111111 <img src=x onerror=alert(1)>"
    section["failures"][0]["trace"] = ["</ul><script>bad()</script>"]
    section["diagram"]["states"][0]["name"] = "review"
    page = render_html(doc)
    assert "<script" not in page and "<img" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;.yaml" in page
    hidden = redact({"context": {"card_number": "4111111111111111", "amount": 3},
                     "message": "charged 4111111111111111", "name": "review"},
                    frozenset({"4111111111111111"}))
    assert hidden == {"context": {"card_number": "[redacted]", "amount": 3},
                      "message": "charged [redacted]", "name": "review"}


def test_a_secret_in_the_context_stays_out_of_the_report_and_the_replay_trace(
        tmp_path: Path) -> None:
    """The card number reaches the tool (and so the violation's text) but no report or trace;
    the replay file keeps it only in the options that replaying needs, and still reproduces."""
    card = "4111-1111-1111-1111"
    definition = load_definition({
        "name": "charge", "context": {"card": None, "amount": 0}, "secrets": ["card"],
        "tools": {"payments.charge": {"idempotency_keys": True}},
        "states": {
            "charging": {"initial": True,
                         "step": {"tool": "payments.charge",
                                  "input": {"card": "=context.card", "amount": "=context.amount"}},
                         "on": {"step.succeeded": "done", "step.failed": "failed"}},
            "done": {"type": "final", "outcome": "success"},
            "failed": {"type": "final", "outcome": "failure"}}})
    machine, _ = PLANTED["key_per_attempt"]
    options = FuzzOptions(runs=300, replay_dir=tmp_path / "replays",
                          sim=SimOptions(context={"card": card, "amount": 12}))
    report, section = fuzz_target(Target("charge", definition, machine), options)
    (failure,) = report.failures
    assert card in failure.violations[0].message  # the ledger saw the tool's real input
    files = write_reports(document("fuzz", [section]), tmp_path / "out")
    for written in (files.json, files.markdown, files.html):
        assert card not in written.read_text(), written.name
    assert "[redacted]" in files.json.read_text()
    saved = json.loads(failure.replay_file.read_text())
    assert card not in saved["violation"] and card not in json.dumps(saved["trace"])
    assert saved["options"]["context"]["card"] == card
    assert replay(failure.replay_file, definition=definition).reproduced


def test_a_report_that_cannot_be_written_whole_is_not_written_at_all(
        failing_report: Path, tmp_path: Path) -> None:
    """When the last file cannot take its place, the others keep what they held and no
    temporary file is left behind."""
    doc = json.loads((failing_report / "fuzz.json").read_text())
    (tmp_path / "fuzz.json").write_text("the previous report")
    (tmp_path / "fuzz.html").mkdir()  # a folder where the page should go: refused
    with pytest.raises(ReportError, match=r"fuzz.html: not a regular file"):
        write_reports(doc, tmp_path, stem="fuzz")
    assert (tmp_path / "fuzz.json").read_text() == "the previous report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fuzz.html", "fuzz.json"]


def test_a_report_whose_last_file_cannot_take_its_place_puts_back_the_others(
        failing_report: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = json.loads((failing_report / "fuzz.json").read_text())
    (tmp_path / "fuzz.json").write_text("the previous report")
    real = os.replace

    def replace(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
        if str(target).endswith("fuzz.html"):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real(source, target)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(ReportError, match=r"cannot write the report: Input/output error"):
        write_reports(doc, tmp_path, stem="fuzz")
    monkeypatch.undo()
    assert (tmp_path / "fuzz.json").read_text() == "the previous report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fuzz.json"]
