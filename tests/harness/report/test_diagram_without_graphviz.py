"""Without pygraphviz (the `diagrams` extra, issue 43), the report's HTML and `fsmharness
diagram --format svg` still show the workflow: as a table of states and transitions drawn in
pure Python, that says the Graphviz layout needs the extra."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from harness.cli.main import cli
from harness.report.diagram import diagram_of
from harness.report.document import document, target_section
from harness.report.drawing import NO_GRAPHVIZ, svg, table_svg
from harness.report.html_page import render_html
from reference_machine import load_definition

ROOT = Path(__file__).resolve().parents[3]
REFUND = ROOT / "scenarios" / "refund_escalation.yaml"
SVG = "{http://www.w3.org/2000/svg}"
ROUTER: dict[str, Any] = {
    "name": "router", "context": {"amount": 0},
    "events": {"go": {}},
    "states": {
        "idle": {"initial": True, "type": "wait", "on": {"go": "route"},
                 "after": {"delay": 60, "target": "small"}},
        "route": {"type": "choice", "always": [
            {"target": "large", "guard": "context.amount > 100 and context.amount < 1000"},
            "small"]},
        "large": {"type": "final", "outcome": "success"},
        "small": {"type": "final", "outcome": "success"},
    },
}


@pytest.fixture
def no_pygraphviz(monkeypatch: pytest.MonkeyPatch) -> None:
    """Makes `import pygraphviz` fail, as where the `diagrams` extra is not installed."""
    monkeypatch.setitem(sys.modules, "pygraphviz", None)


def rows(root: ET.Element, prefix: str) -> dict[str, list[str]]:
    """Gives each group whose id starts with `prefix`: its texts, by id."""
    return {group.get("id", ""): [text.text or "" for text in group.iter(f"{SVG}text")]
            for group in root.iter(f"{SVG}g") if group.get("id", "").startswith(prefix)}


@pytest.mark.usefixtures("no_pygraphviz")
class TestSvg:
    def test_the_table_says_graphviz_needs_the_extra(self) -> None:
        """The first line names the extra, and counts the states and transitions."""
        root = ET.fromstring(svg(diagram_of(load_definition(ROUTER))))
        first = next(root.iter(f"{SVG}text")).text or ""
        assert first == f"A table of 4 states and 4 transitions, not a drawing: {NO_GRAPHVIZ}."
        assert "diagrams extra (pygraphviz)" in first

    def test_every_state_and_transition_has_a_line(self) -> None:
        """Each state's line tells what it is; each transition's names its source, label and
        target, with its whole text as the tooltip."""
        diagram = diagram_of(load_definition(ROUTER))
        root = ET.fromstring(svg(diagram))
        states = rows(root, "state-")
        assert states["state-s0"] == ["idle", "initial; never reached"]
        assert states["state-s1"] == ["route", "choice; never reached"]
        assert states["state-s2"] == ["large", "final (success); never reached"]
        edges = rows(root, "edge-")
        assert len(edges) == len(diagram["transitions"])
        assert ["route", "always [context.amount > 100 and context.amount < 1000]",
                "large"] in edges.values()
        titles = [title.text for title in root.iter(f"{SVG}title")]
        assert "idle -> route: go" in titles

    def test_edges_are_styled_as_the_graphviz_drawing(self) -> None:
        """Covered green, never taken dashed grey, the counterexample's path red."""
        diagram = diagram_of(load_definition(ROUTER))
        diagram["transitions"][0].update(covered=True)
        diagram["transitions"][1].update(covered=True, on_path=True)
        root = ET.fromstring(table_svg(diagram))
        strokes = [path.get("stroke") for path in root.iter(f"{SVG}path") if path.get("stroke")
                   not in (None, "none")]
        assert strokes[:3] == ["#2c7a2c", "#d62728", "#9a9a9a"]
        dashed = [path.get("stroke-dasharray") for path in root.iter(f"{SVG}path")
                  if path.get("stroke") == "#9a9a9a"]
        assert dashed and all(dashed)

    def test_text_from_the_user_is_escaped(self) -> None:
        """A guard's `<` and a string's `&` stay text: the drawing parses, and shows them."""
        spec = {**ROUTER, "states": {**ROUTER["states"], "route": {
            "type": "choice", "always": [
                {"target": "large", "guard": "context.amount < 1 or context.tag == 'a&b'"},
                "small"]}}}
        text = svg(diagram_of(load_definition(spec)))
        assert "context.amount &lt; 1 or context.tag == 'a&amp;b'" in text
        assert "context.amount < 1 or context.tag == 'a&b'" in "".join(
            ET.fromstring(text).itertext())


@pytest.mark.usefixtures("no_pygraphviz")
class TestWithoutGraphviz:
    def test_the_html_report_shows_the_table(self) -> None:
        section = target_section("refund", "fuzz", load_definition(REFUND.read_text()), "m", {},
                                 None)
        page = render_html(document("fuzz", [section]))
        assert '<div class="diagram"><svg xmlns="http://www.w3.org/2000/svg" class="workflow ' \
               'table"' in page
        assert NO_GRAPHVIZ in page
        assert 'id="state-s0"' in page

    def test_diagram_as_svg(self, tmp_path: Path) -> None:
        """`fsmharness diagram --format svg` writes the table, and exits 0."""
        result = CliRunner().invoke(cli, ["diagram", str(REFUND), "--format", "svg", "-o",
                                          str(tmp_path / "flow.svg")])
        assert result.exit_code == 0, result.output
        drawn = (tmp_path / "flow.svg").read_text()
        assert drawn.startswith("<svg ")
        assert NO_GRAPHVIZ in drawn
        ET.fromstring(drawn)


def test_with_pygraphviz_graphviz_draws() -> None:
    """Where the extra is installed, the drawing is Graphviz's layout, with no table note."""
    pytest.importorskip("pygraphviz")
    drawn = svg(diagram_of(load_definition(ROUTER)))
    assert NO_GRAPHVIZ not in drawn
    assert 'class="workflow"' in drawn
