"""The HTML report in a real browser (headless Chromium): the workflow diagram is drawn, the
counterexample's path is on it, nothing is fetched and nothing logs an error; and user data in
the report is escaped, secrets redacted."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from planted import PLANTED, WORKFLOW

from harness import FuzzOptions, fuzz
from harness._report import document, render_html, target_section, write_reports

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
    from harness._report import redact
    hidden = redact({"context": {"card_number": "4111111111111111", "amount": 3},
                     "message": "charged 4111111111111111"}, frozenset({"4111111111111111"}))
    assert hidden == {"context": {"card_number": "[redacted]", "amount": 3},
                      "message": "charged [redacted]"}
