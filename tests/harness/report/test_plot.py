"""The growth plot of a fuzz campaign: an inline SVG that parses, draws its (down-sampled)
points as a step line, says when the tail went flat, escapes its text and is the same bytes for
the same points; and the HTML report draws it only for a section that has growth."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest
from running import ROOT

from harness.report.document import document, target_section
from harness.report.html_page import render_html
from harness.report.markdown_page import render_markdown
from harness.report.plot import POINTS_MAX, downsample, growth_caption, growth_svg
from reference_machine import load_definition

SVG = "{http://www.w3.org/2000/svg}"
FLAT = [[8, 31], [16, 40], [24, 40], [32, 40]]


def vertices(drawing: str) -> int:
    polyline = ET.fromstring(drawing).find(f"{SVG}polyline")
    assert polyline is not None
    return len(polyline.get("points", "").split())


def caption(drawing: str) -> str:
    text = ET.fromstring(drawing).find(f"{SVG}text[@class='caption']")
    assert text is not None
    return text.text or ""


class TestGrowthSvg:
    def test_it_parses_and_its_step_line_has_two_vertices_per_point_after_the_first(
            self) -> None:
        """A step line holds the count until the batch that raised it: 2n - 1 vertices."""
        drawing = growth_svg(FLAT)
        root = ET.fromstring(drawing)
        assert root.tag == f"{SVG}svg"
        assert (root.get("width"), root.get("height")) == ("480", "160")
        assert vertices(drawing) == 2 * len(downsample(FLAT)) - 1

    def test_the_caption_says_how_long_the_tail_was_flat(self) -> None:
        """40 first seen after 16 runs, none new by 32: 16 runs without anything new."""
        assert caption(growth_svg(FLAT)) == (
            "behaviours seen over runs: 40 after 32 runs, none new in the last 16 runs")

    def test_a_campaign_still_growing_says_so(self) -> None:
        """A count raised in the last batch is no flat tail."""
        assert "still growing" in caption(growth_svg([[8, 3], [16, 5]]))

    def test_the_title_is_escaped(self) -> None:
        """A title with markup in it stays text."""
        drawing = growth_svg(FLAT, title='<script>&"')
        assert "<script>" not in drawing
        assert ET.fromstring(drawing).find(f"{SVG}title").text == '<script>&"'  # type: ignore[union-attr]

    def test_100000_points_are_down_sampled(self) -> None:
        """A long campaign gives at most POINTS_MAX points, the first and last kept."""
        points = [[8 * i, i // 7] for i in range(1, 100_001)]
        kept = downsample(points)
        assert len(kept) <= POINTS_MAX
        assert kept[0] == (8, 0) and kept[-1] == (800_000, 100_000 // 7)
        drawing = growth_svg(points)
        assert vertices(drawing) == 2 * len(kept) - 1
        assert len(drawing) < 30_000

    def test_flat_stretches_keep_only_the_points_where_the_count_changes(self) -> None:
        """Points that change nothing are dropped, except the last."""
        assert downsample([[1, 1], [2, 1], [3, 2], [4, 2], [5, 2]]) == [(1, 1), (3, 2), (5, 2)]

    def test_the_same_points_give_the_same_bytes(self) -> None:
        """Lists or tuples, twice: one output."""
        assert growth_svg(FLAT) == growth_svg([(runs, seen) for runs, seen in FLAT])

    @pytest.mark.parametrize("points", [[], [[8, 3]]])
    def test_fewer_than_two_points_draw_nothing(self, points: list[list[int]]) -> None:
        """No growth to show: an empty string (the text still tells one batch's count)."""
        assert growth_svg(points) == ""
        assert growth_caption([[8, 3]]) == "behaviours seen over runs: 3 after 8 runs"

    def test_points_out_of_order_are_refused(self) -> None:
        """Behaviours never fall; runs increase."""
        with pytest.raises(ValueError, match=r"growth\[1\]: .* runs must increase"):
            growth_svg([[8, 5], [16, 4]])


class TestReportGrowth:
    @staticmethod
    def doc(summary: dict[str, Any]) -> dict[str, Any]:
        definition = load_definition(ROOT / "scenarios" / "approval_gated_deploy.yaml")
        return document("fuzz", [target_section("t", "fuzz", definition, "m", summary, None)])

    def test_a_section_with_growth_draws_it(self) -> None:
        """Growth gives the plot in HTML and one line in Markdown."""
        doc = self.doc({"runs": 32, "strategy": "guided", "growth": FLAT})
        page = render_html(doc)
        assert '<svg xmlns="http://www.w3.org/2000/svg" class="growth"' in page
        assert "coverage growth (guided)" in page
        assert "none new in the last 16 runs" in render_markdown(doc)

    @pytest.mark.parametrize("summary", [{"runs": 1}, {"runs": 1, "growth": []}])
    def test_a_section_without_growth_draws_none(self, summary: dict[str, Any]) -> None:
        """No growth (or an old report's missing key): no plot, no line."""
        doc = self.doc(summary)
        assert 'class="growth"' not in render_html(doc)
        assert "behaviours seen" not in render_markdown(doc)
