"""The HTML report in a real browser (headless Chromium): the workflow diagram is drawn, the
counterexample's path is on it, nothing is fetched and nothing logs an error; and user data in
the report is escaped, secrets redacted."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from planted import PLANTED, WORKFLOW

from harness import FuzzOptions, SimOptions, fuzz, replay
from harness.adapters.targets import Target
from harness.engines.campaign import fuzz_target
from harness.report.documents import (
    ReportError,
    document,
    render_html,
    target_section,
    write_reports,
)
from harness.report.redact import redact
from reference_machine import load_definition

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
