"""What keeps a busy workflow's drawing legible (issue: edge labels readable at 1400 px): long
labels wrapped and cut with their whole text in the tooltip, long names wrapped and never cut,
a nested state shown without its compound's prefix, edge labels drawn over every edge with a
halo, a wide layout turned top to bottom, and a drawing the page shrinks only as far as its
labels stay legible. The browser's view of the same is in
tests/harness/report/test_report_html.py."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from harness.report.diagram import diagram_of
from harness.report.drawing import _LEGIBLE_PX, _dot_graph, _drawn, _width_pt, _wrapped, svg
from reference_machine import load_definition

SVG = "{http://www.w3.org/2000/svg}"
ELLIPSIS = "\u2026"
GUARD = " and ".join(f"context.field_{i} == 'value number {i}'" for i in range(12))


def drawing(spec: dict[str, Any]) -> ET.Element:
    return ET.fromstring(svg(diagram_of(load_definition(spec))))


def group(root: ET.Element, name: str) -> ET.Element:
    (found,) = [g for g in root.iter(f"{SVG}g") if g.get("id") == name]
    return found


def texts(element: ET.Element) -> list[str]:
    return [t.text or "" for t in element.iter(f"{SVG}text")]


def routed(guard: str) -> dict[str, Any]:
    return {
        "name": "router", "context": {"amount": 0},
        "events": {"go": {}},
        "states": {
            "idle": {"initial": True, "type": "wait", "on": {"go": "route"},
                     "after": {"delay": 60, "target": "small"}},
            "route": {"type": "choice", "always": [{"target": "large", "guard": guard},
                                                   "small"]},
            "large": {"type": "final", "outcome": "success"},
            "small": {"type": "final", "outcome": "success"},
        },
    }


def chain(length: int, name: str = "step") -> dict[str, Any]:
    """A workflow of `length` wait states one after the other, each also able to fail."""
    states: dict[str, Any] = {}
    for index in range(length):
        after = f"{name}_{index + 1}" if index + 1 < length else "done"
        states[f"{name}_{index}"] = {
            "type": "wait", "initial": index == 0,
            "on": {"checked": after, "refused": "failed"},
            "after": {"delay": 60, "target": "failed"}}
    states["done"] = {"type": "final", "outcome": "success"}
    states["failed"] = {"type": "final", "outcome": "failure"}
    return {"name": "chain", "events": {"checked": {}, "refused": {}},
            "states": states}


class TestWrapped:
    def test_a_short_label_stays_whole_on_one_line(self) -> None:
        """What fits a line is left as it is."""
        assert _wrapped("step.succeeded", 28, 3) == ["step.succeeded"]

    def test_lines_break_at_spaces_and_a_long_identifier_between_its_words(self) -> None:
        """A guard breaks between its words; a name longer than a line after an underscore."""
        assert _wrapped("done [not event.payload.failed]", 28) == [
            "done [not", "event.payload.failed]"]
        assert _wrapped("Iterate_Functions__Delete_oldest_version", 24) == [
            "Iterate_Functions__", "Delete_oldest_version"]

    def test_text_past_the_last_line_is_cut_with_an_ellipsis(self) -> None:
        lines = _wrapped(GUARD, 28, 3)
        assert len(lines) == 3 and lines[-1].endswith(ELLIPSIS)
        assert all(len(line) <= 28 for line in lines)
        assert GUARD.startswith(" ".join(lines)[:-1].rstrip())

    @given(st.text(alphabet=st.sampled_from("ab_.- "), max_size=200),
           st.integers(min_value=4, max_value=40))
    def test_every_line_fits_and_nothing_is_lost_without_a_limit(self, text: str,
                                                                 width: int) -> None:
        lines = _wrapped(text, width)
        assert all(len(line) <= width for line in lines)
        assert "".join(lines).replace(" ", "") == text.replace(" ", "")


class TestDrawing:
    def test_a_long_guard_is_cut_on_the_drawing_and_whole_in_its_tooltip(self) -> None:
        root = drawing(routed(GUARD))
        (label,) = [g for g in root.iter(f"{SVG}g") if g.get("class") == "edge-label"
                    and texts(g)[0].startswith("always [context")]
        lines = texts(label)
        assert len(lines) == 3 and lines[-1].endswith(ELLIPSIS)
        assert all(len(line) <= 28 for line in lines)
        whole = f"route -> large: always [{GUARD}]"
        assert label.findtext(f"{SVG}title") == whole
        edge = group(root, label.get("id", "").removesuffix("-label"))
        assert edge.findtext(f"{SVG}title") == whole
        assert texts(edge) == []  # the label is drawn in its own group, not the edge's

    def test_a_long_state_name_is_wrapped_and_never_cut(self) -> None:
        name = "Wait_for_the_third_party_payment_service_callback_to_arrive"
        spec = chain(2)
        spec["states"][name] = spec["states"].pop("step_1")
        spec["states"]["step_0"]["on"]["checked"] = name
        root = drawing(spec)
        (state,) = [g for g in root.iter(f"{SVG}g") if g.findtext(f"{SVG}title") == name]
        lines = texts(state)
        assert len(lines) > 1 and all(len(line) <= 24 for line in lines)
        assert "".join(lines) == name

    def test_a_nested_state_is_shown_without_its_compounds_prefix(self) -> None:
        """Importers name nested states `parent__child`: the box inside the compound's says
        `child`; its tooltip the whole name."""
        root = drawing({
            "name": "nested", "events": {"go": {}},
            "states": {
                "Outer": {"initial": True},
                "Outer__Inner": {"parent": "Outer", "initial": True, "type": "wait",
                                 "on": {"go": "Outer__Done"},
                                 "after": {"delay": 60, "target": "Outer__Done"}},
                "Outer__Done": {"parent": "Outer", "type": "final", "outcome": "success"},
            }})
        shown = {g.findtext(f"{SVG}title"): texts(g) for g in root.iter(f"{SVG}g")
                 if g.get("class") == "node"}
        assert shown["Outer__Inner"] == ["Inner"] and shown["Outer__Done"] == ["Done"]

    def test_edge_labels_are_drawn_after_every_edge_and_state_with_a_halo(self) -> None:
        """A label is painted over any edge that passes under it, the halo leaving a gap."""
        root = drawing(chain(6))
        (graph,) = [g for g in root if g.get("class") == "graph"]
        kinds = [child.get("class") for child in graph if child.tag == f"{SVG}g"]
        first_label = kinds.index("edge-label")
        assert kinds.count("edge-label") == len(diagram_of(load_definition(chain(6)))[
            "transitions"])
        assert set(kinds[first_label:]) == {"edge-label"}
        assert {"edge", "node"} <= set(kinds[:first_label])
        style = root.findtext(f"{SVG}style") or ""
        assert "g.edge-label text{paint-order:stroke;stroke:#fff" in style

    def test_a_layout_too_wide_for_the_page_is_turned_top_to_bottom(self) -> None:
        """Left to right, twelve states in a row are wider than a 1400 px window holds; top
        to bottom they are not."""
        diagram = diagram_of(load_definition(chain(12)))
        across = _width_pt(_drawn(_dot_graph(diagram)))
        root = ET.fromstring(svg(diagram))
        width = float(root.get("width", "").removesuffix("pt"))
        assert width < across / 2 and width * 4 / 3 < 1260

    def test_the_page_shrinks_the_drawing_only_as_far_as_labels_stay_legible(self) -> None:
        """Never wider than its natural size, never narrower than makes a 10 pt label
        smaller than _LEGIBLE_PX."""
        root = ET.fromstring(svg(diagram_of(load_definition(chain(12)))))
        natural = float(root.get("width", "").removesuffix("pt")) * 4 / 3
        limits = dict(re.findall(r"(max-width|min-width):(\d+)px", root.get("style", "")))
        assert int(limits["max-width"]) == round(natural)
        assert int(limits["min-width"]) / natural * 10 * 4 / 3 >= _LEGIBLE_PX - 0.05
        assert _LEGIBLE_PX >= 11
