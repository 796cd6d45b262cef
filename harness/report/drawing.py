"""The workflow's graph drawn as an SVG element for the HTML report: with Graphviz's dot layout,
which the `pygraphviz` wheel of the `diagrams` extra carries, or without it as a table of states
and transitions in pure Python, which says so. The SVG is made when the report is written, so
the page needs no script and no network.
"""

from __future__ import annotations

import contextlib
import html
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from harness.report.diagram import (
    DiagramShape,
    compound_title,
    edge_text,
    history_mark,
    state_ids,
    state_notes,
)
from harness.report.document import ReportError

__all__ = ["NO_GRAPHVIZ", "svg", "table_svg"]


_EDGE_STYLE = {  # (on path, covered) -> attributes
    (True, True): {"color": "#d62728", "penwidth": "3", "fontcolor": "#d62728"},
    (True, False): {"color": "#d62728", "penwidth": "3", "fontcolor": "#d62728"},
    (False, True): {"color": "#2c7a2c", "penwidth": "1.6", "fontcolor": "#2c7a2c"},
    (False, False): {"color": "#9a9a9a", "style": "dashed", "fontcolor": "#7a7a7a"},
}


def _dot_label(text: str) -> str:
    """Gives text Graphviz shows as written: backslashes are not escapes, and a value that
    starts with `<` and ends with `>` would be taken as an HTML label, so it gets a space."""
    text = text.replace("\\", "\\\\").replace("\n", " ")
    return f"{text} " if text.startswith("<") and text.endswith(">") else text


def _dot_lines(lines: Sequence[str]) -> str:
    """Gives lines Graphviz shows one under the other, each as written."""
    text = "\\n".join(line.replace("\\", "\\\\").replace("\n", " ") for line in lines)
    return f"{text} " if text.startswith("<") and text.endswith(">") else text



def _dot_padded(lines: Sequence[str]) -> str:
    """Gives lines Graphviz shows one under the other, each as written, with room around
    them: two labels side by side never touch (an HTML-like label, its text escaped)."""
    text = "<br/>".join(html.escape(line, quote=False) for line in lines)
    return (f'<<table border="0" cellborder="0" cellpadding="{_LABEL_PAD_PT}" '
            f'cellspacing="0"><tr><td>{text}</td></tr></table>>')


#: Graphviz draws in points, which a page shows at 4/3 CSS px each; labels are set in these
#: sizes (an edge label reads at 13 px when the drawing is shown at its natural size).
_PX_PER_PT = 4 / 3
_EDGE_FONT_PT, _STATE_FONT_PT = "10", "11"
#: The smallest an edge label may be shown, in CSS px: a drawing wider than the page is
#: shrunk to fit it only this far, and scrolls inside its box beyond that.
_LEGIBLE_PX = 11.5
_SHRINK_MIN = _LEGIBLE_PX / (float(_EDGE_FONT_PT) * _PX_PER_PT)
#: The width of the report's diagram box in a window 1400 px wide, in CSS px: a layout left
#: to right that does not fit it is laid out top to bottom too, and the narrower one kept.
_BOX_PX = 1260
#: Characters per line, and lines at most, of what a drawing writes: an edge's event and
#: guard, a state's name (never cut: it names the state), a note in a state's box, and a
#: compound's title. What is cut ends with an ellipsis; the element's tooltip holds it whole.
_EDGE_LINE, _EDGE_LINES = 28, 3
_NAME_LINE, _CHOICE_LINE = 24, 16
_NOTE_LINE, _NOTE_LINES = 40, 2
_TITLE_LINE, _TITLE_LINES = 48, 2
_ELLIPSIS = "\u2026"
#: The room kept around an edge label, in points.
_LABEL_PAD_PT = 3


def _wrapped(text: str, width: int, lines_max: int = 0) -> list[str]:
    """Gives `text` as lines of at most `width` characters, broken at spaces; a word longer
    than a line is broken after a run of `_ . / -` (so a long identifier breaks between its
    words), or cut where it must. With `lines_max`, at most that many lines, the last ending
    with an ellipsis when some text did not fit."""
    pieces: list[str] = []
    for word in text.split():
        parts = [word] if len(word) <= width else re.findall(r".+?(?:[_./\-]+|$)", word)
        for part in parts:
            pieces += [part[start:start + width] for start in range(0, len(part), width)]
        pieces[-1] += " "
    lines: list[str] = []
    line = ""
    for piece in pieces:
        if line and len(line) + len(piece.rstrip()) > width:
            lines.append(line.rstrip())
            line = ""
        line += piece
    lines.append(line.rstrip())
    if lines_max and len(lines) > lines_max:
        lines = lines[:lines_max]
        lines[-1] = lines[-1][:width - 1].rstrip() + _ELLIPSIS
    return lines


_CLUSTER_STYLE = {  # kind -> attributes; a region's cluster is drawn inside its parallel one
    "parallel": {"style": "rounded", "color": "#555555"},
    "map": {"style": "rounded,bold", "color": "#555555"},
    "region": {"style": "dashed", "color": "#999999"},
}


def svg(diagram: Mapping[str, Any]) -> str:
    """Draws the workflow with Graphviz's dot layout; gives the SVG element (no prolog, no
    comments). Without pygraphviz (the `diagrams` extra), gives `table_svg`'s drawing instead.

    Compound states are clusters; a parallel state is a cluster holding one dashed cluster per
    region (`id` parallel-*, region-*), a map state one cluster labelled with what it maps over
    (map-*); each region and map flow has its own start; a choice is a diamond; a compound with
    history holds an H or H* marker (history-*) the transitions into it point to. Long labels
    are wrapped and cut; each state's and edge's `<title>` (its tooltip) holds its whole text.
    Edge labels are drawn after every edge and state, with room around each and a halo. A
    layout left to right too wide for the report's page is laid out top to bottom too, and
    the narrower of the two kept. The drawing takes the page's width up to its natural size
    (1 pt to 4/3 px), and shrinks only until an edge label is `_LEGIBLE_PX` high: past that,
    the report's diagram box scrolls."""
    graphviz = _pygraphviz()
    if graphviz is None:
        return table_svg(diagram)
    graph = _dot_graph(diagram, graphviz)
    text = _drawn(graph)
    if _width_pt(text) * _PX_PER_PT * _SHRINK_MIN > _BOX_PX:  # too wide even shrunk
        graph.graph_attr["rankdir"] = "TB"
        upright = _drawn(graph)
        if _width_pt(upright) < _width_pt(text):
            text = upright
    width_px = _width_pt(text) * _PX_PER_PT
    root = _labels_on_top(ET.fromstring(text), _titles(diagram))
    # as wide as the page allows, never wider than its natural size, and never narrower
    # than makes an edge label smaller than `_LEGIBLE_PX`
    root.set("class", "workflow")
    root.set("style", f"width:100%;height:auto;max-width:{width_px:.0f}px;"
                      f"min-width:{width_px * _SHRINK_MIN:.0f}px")
    return ET.tostring(root, encoding="unicode")


#: What a drawing made without Graphviz says at its top.
NO_GRAPHVIZ = "the Graphviz layout needs fsmharness's diagrams extra (pygraphviz)"
#: The table drawing's monospace font: its size and a character's width, in px.
_TABLE_FONT_PX, _TABLE_CHAR_PX = 12, 7.3
_TABLE_ROW_PX, _TABLE_PAD_PX, _TABLE_ARROW_PX = 20, 10, 44
#: Characters at most of a transition's label in the table (its tooltip holds it whole).
_TABLE_LABEL = 60
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_TABLE_CSS = ("text{font:12px ui-monospace,Menlo,Consolas,monospace;fill:#1d1d1f}"
              "text.head{font-weight:bold}text.note{fill:#8a6d00}"
              "text.unreached{fill:#888888}text.path{fill:#d62728;font-weight:bold}"
              "text.covered{fill:#2c7a2c}text.untaken{fill:#7a7a7a}")


def table_svg(diagram: Mapping[str, Any]) -> str:
    """Gives the workflow drawn in pure Python, for where Graphviz is not installed: an SVG
    element that says so on its first line, then each state on a line (initial, final with
    its outcome, choice, the compound it sits in, its notes; grey when never reached) and each
    transition on a line, source, label, an arrow styled as the Graphviz drawing's edges
    (covered green, never taken dashed grey, the counterexample's path red, a forced move
    dotted) and target. States and edges keep the drawing's ids (`state-*`, `edge-*`) and
    their whole text as a tooltip."""
    ids = state_ids(diagram)
    shape = DiagramShape(diagram)
    state_rows = []
    for state in diagram["states"]:
        name = state["name"]
        facts = ["initial"] if name == diagram["initial"] else []
        if state["final"]:
            facts.append(f"final ({state['outcome']})" if state.get("outcome") else "final")
        if name in shape.children:
            facts.append(compound_title(state) or "compound")
        elif state.get("kind") == "choice":
            facts.append("choice")
        if state["parent"]:
            facts.append(f"in {state['parent']}")
        if state.get("history"):
            facts.append(f"history ({state['history']})")
        facts += state_notes(state)
        if not state["reached"] and name not in shape.children:
            facts.append("never reached")
        state_rows.append((name, "; ".join(facts), state["reached"] or name in shape.children))
    name_chars = max([len("state"), *(len(name) for name, _, _ in state_rows)])
    edge_rows = []
    for index, edge in enumerate(diagram["transitions"]):
        target = f"{edge['history']} (history)" if edge.get("history") else edge["target"]
        label = _wrapped(edge_text(edge), _TABLE_LABEL, 1)[0]
        if not edge["declared"]:
            label += " (forced)"
        edge_rows.append((index, edge, edge["source"], label, target))
    source_chars = max([len("from"), *(len(row[2]) for row in edge_rows)])
    label_chars = max([len("on"), *(len(row[3]) for row in edge_rows)])
    target_chars = max([len("to"), *(len(row[4]) for row in edge_rows)])

    def width(chars: int) -> float:
        return chars * _TABLE_CHAR_PX + 2 * _TABLE_PAD_PX

    source_x = _TABLE_PAD_PX
    label_x = source_x + width(source_chars)
    arrow_x = label_x + width(label_chars)
    target_x = arrow_x + _TABLE_ARROW_PX + _TABLE_PAD_PX
    note = (f"A table of {len(diagram['states'])} states and {len(diagram['transitions'])} "
            f"transitions, not a drawing: {NO_GRAPHVIZ}.")
    widest = max(target_x + width(target_chars), width(len(note)),
                 _TABLE_PAD_PX + width(name_chars) + width(max(
                     [len("what"), *(len(facts) for _, facts, _ in state_rows)])))
    root = ET.Element(f"{{{_SVG_NS}}}svg", {"class": "workflow table"})
    ET.SubElement(root, f"{{{_SVG_NS}}}style").text = _TABLE_CSS
    y: float = _TABLE_ROW_PX

    def text(parent: ET.Element, x: float, words: str, css: str = "") -> None:
        attributes = {"x": f"{x:.0f}", "y": f"{y:.0f}"}
        if css:
            attributes["class"] = css
        ET.SubElement(parent, f"{{{_SVG_NS}}}text", attributes).text = _CONTROL.sub(" ", words)

    text(root, _TABLE_PAD_PX, note, "note")
    y += 1.5 * _TABLE_ROW_PX
    facts_x = _TABLE_PAD_PX + width(name_chars)
    text(root, _TABLE_PAD_PX, "state", "head")
    text(root, facts_x, "what", "head")
    for name, told, reached in state_rows:
        y += _TABLE_ROW_PX
        row = ET.SubElement(root, f"{{{_SVG_NS}}}g", {"id": f"state-{ids[name]}"})
        ET.SubElement(row, f"{{{_SVG_NS}}}title").text = _CONTROL.sub(
            " ", " / ".join([name, *state_notes(shape.states[name])]))
        css = "" if reached else "unreached"
        text(row, _TABLE_PAD_PX, name, css)
        text(row, facts_x, told, css)
    y += 1.5 * _TABLE_ROW_PX
    for x, head in ((source_x, "from"), (label_x, "on"), (target_x, "to")):
        text(root, x, head, "head")
    for index, edge, source, label, target in edge_rows:
        y += _TABLE_ROW_PX
        row = ET.SubElement(root, f"{{{_SVG_NS}}}g", {"id": f"edge-{index}", "class": "edge"})
        ET.SubElement(row, f"{{{_SVG_NS}}}title").text = _CONTROL.sub(" ", _edge_title(edge))
        css = "path" if edge["on_path"] else "covered" if edge["covered"] else "untaken"
        style = _EDGE_STYLE[(edge["on_path"], edge["covered"])]
        dash = {"dashed": "6,4", "dotted": "2,3"}.get(
            "dotted" if not edge["declared"] and not edge["on_path"] else style.get("style", ""))
        stroke = {"stroke": style["color"], "stroke-width": style.get("penwidth", "1.2"),
                  "fill": "none"}
        if dash:
            stroke["stroke-dasharray"] = dash
        middle = y - _TABLE_FONT_PX / 3
        end = arrow_x + _TABLE_ARROW_PX
        ET.SubElement(row, f"{{{_SVG_NS}}}path",
                      {"d": f"M{arrow_x:.0f},{middle:.0f} H{end - 6:.0f}", **stroke})
        ET.SubElement(row, f"{{{_SVG_NS}}}path",
                      {"d": f"M{end - 7:.0f},{middle - 4:.0f} L{end:.0f},{middle:.0f} "
                            f"L{end - 7:.0f},{middle + 4:.0f} Z",
                       "fill": style["color"], "stroke": "none"})
        text(row, source_x, source, css)
        text(row, label_x, label, css)
        text(row, target_x, target, css)
    height = y + _TABLE_ROW_PX
    root.set("width", f"{widest:.0f}")
    root.set("height", f"{height:.0f}")
    root.set("viewBox", f"0 0 {widest:.0f} {height:.0f}")
    return ET.tostring(root, encoding="unicode")


_SVG_NS, _XLINK_NS = "http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"
ET.register_namespace("", _SVG_NS)
ET.register_namespace("xlink", _XLINK_NS)
#: A white halo around an edge label's letters: an edge that passes under the label (they are
#: drawn after every edge) shows as a gap, never as a stroke through the text.
_LABEL_CSS = ("g.edge-label text{paint-order:stroke;stroke:#fff;stroke-width:4px;"
              "stroke-linejoin:round}")


def _shown(state: Mapping[str, Any]) -> str:
    """Gives a state's name as its box shows it: inside a compound whose name it starts with,
    as importers name nested states (`parent__child`, `parent.child`), without that prefix,
    which the compound's own title shows; the whole name is its tooltip."""
    name, parent = str(state["name"]), str(state["parent"])
    for mark in ("__", "."):
        if parent and name.startswith(parent + mark) and len(name) > len(parent + mark):
            return name[len(parent + mark):]
    return name


def _labels_on_top(root: ET.Element, titles: Mapping[str, str]) -> ET.Element:
    """Gives Graphviz's drawing with each state's and edge's `<title>` (its tooltip) saying
    its whole text, and each edge's label taken out of the edge into a group of its own
    (`edge-N-label`) drawn after every edge and state, with a halo: no edge is drawn over a
    label."""
    tag = f"{{{_SVG_NS}}}"
    graph = root.find(f"{tag}g")
    if graph is None:  # pragma: no cover - Graphviz always draws the graph's group
        raise ReportError("Graphviz drew no graph")
    style = ET.Element(f"{tag}style")
    style.text = _LABEL_CSS
    root.insert(0, style)
    lifted = []
    for group in graph.iter(f"{tag}g"):
        name = group.get("id", "")
        title, anchor = group.find(f"{tag}title"), group.find(f"{tag}g/{tag}a")
        # Graphviz titles a group with its node's name (s3, cluster_s0): the tooltip says
        # what the element is instead
        told = titles.get(name) or (anchor.get(f"{{{_XLINK_NS}}}title") if anchor is not None
                                    else None)
        if told and title is not None:
            title.text = told
        if group.get("class") != "edge":
            continue
        for child in list(group):
            if child.tag == f"{tag}g" and child.get("id", "").endswith("-label"):
                group.remove(child)
                label = ET.Element(f"{tag}g", {"id": f"{name}-label", "class": "edge-label"})
                ET.SubElement(label, f"{tag}title").text = titles.get(name, "")
                label.append(child)
                lifted.append(label)
    graph.extend(lifted)
    return root


def _drawn(graph: Any) -> str:
    """Gives Graphviz's SVG element of a graph, without prolog or comments."""
    with _quiet_stderr():
        drawn = graph.draw(format="svg", prog="dot")
    text = drawn.decode("utf-8") if isinstance(drawn, bytes) else str(drawn)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    start = text.find("<svg")
    if start < 0:  # pragma: no cover - Graphviz always answers with an SVG element
        raise ReportError("Graphviz drew no SVG")
    return text[start:].strip()


def _width_pt(text: str) -> float:
    """Gives the width of Graphviz's SVG element, in points."""
    found = re.match(r'<svg width="([\d.]+)pt"', text)
    return float(found[1]) if found else 0.0


def _titles(diagram: Mapping[str, Any]) -> dict[str, str]:
    """Gives each drawn state's and edge's whole text by its SVG id: what its tooltip says
    where its label was wrapped or cut."""
    ids = state_ids(diagram)
    titles = {}
    for state in diagram["states"]:
        lines = [state["name"], *state_notes(state)]
        titles[f"state-{ids[state['name']]}"] = "\n".join(lines)
    for index, edge in enumerate(diagram["transitions"]):
        titles[f"edge-{index}"] = _edge_title(edge)
    return titles


def _edge_title(edge: Mapping[str, Any]) -> str:
    """Gives an edge's whole text: where it goes and its label unwrapped."""
    target = f"{edge['history']} (history)" if edge.get("history") else edge["target"]
    return f"{edge['source']} -> {target}: {edge_text(edge)}"


def _pygraphviz() -> Any:
    """Gives the `pygraphviz` module, or None where the `diagrams` extra is not installed."""
    try:
        import pygraphviz
    except ImportError:
        return None
    return pygraphviz


def _dot_graph(diagram: Mapping[str, Any], pygraphviz: Any = None) -> Any:
    """Gives the workflow as a Graphviz graph (a `pygraphviz.AGraph`), not laid out yet."""
    pygraphviz = pygraphviz or _pygraphviz()
    if pygraphviz is None:
        raise ReportError(f"drawing the workflow with Graphviz needs pygraphviz: {NO_GRAPHVIZ}")
    ids = state_ids(diagram)
    shape = DiagramShape(diagram)
    graph = pygraphviz.AGraph(directed=True, strict=False, compound=True, rankdir="LR")
    graph.graph_attr.update(fontname="Helvetica", fontsize=_STATE_FONT_PT, nodesep="0.35",
                            ranksep="0.45", bgcolor="transparent")
    graph.node_attr.update(shape="box", style="rounded,filled", fontname="Helvetica",
                           fontsize=_STATE_FONT_PT, fillcolor="#ffffff", color="#555555")
    graph.edge_attr.update(fontname="Helvetica", fontsize=_EDGE_FONT_PT, arrowsize="0.7")
    clusters: dict[str, Any] = {"": graph}

    def holder(name: str) -> Any:
        if name in clusters:
            return clusters[name]
        state = shape.states[name]
        title = compound_title(state)
        shown = _shown(state)
        lines = _wrapped(f"{shown} ({title})" if title else shown, _TITLE_LINE, _TITLE_LINES)
        lines += [part for note in state_notes(state)
                  for part in _wrapped(note, _TITLE_LINE, _NOTE_LINES)]
        whole = " / ".join([f"{name} ({title})" if title else name, *state_notes(state)])
        attributes = {"label": _dot_lines(lines), "style": "rounded,dashed",
                      "color": "#777777", "fontname": "Helvetica",
                      "fontsize": _STATE_FONT_PT, "tooltip": _dot_label(whole)}
        kind = "region" if shape.kind(state["parent"]) == "parallel" else state.get("kind")
        if kind in _CLUSTER_STYLE:
            attributes.update(_CLUSTER_STYLE[str(kind)], id=f"{kind}-{ids[name]}")
        cluster = holder(state["parent"]).add_subgraph(name=f"cluster_{ids[name]}",
                                                        **attributes)
        clusters[name] = cluster
        return cluster

    def end(name: str, side: str) -> tuple[str, dict[str, str]]:
        """Gives the node an edge is drawn at, and where a compound's it clips at its box.
        An edge into a compound is drawn to the start of its flow (of its first region's),
        at the top of its box, and one out of it from a final state, at the bottom: so the
        edge's label lies outside the box."""
        if name not in shape.children:
            return ids[name], {}
        clip = {side: f"cluster_{ids[name]}"}
        if side == "ltail":
            return ids[shape.leaving(name)], clip
        inner = name
        while inner in shape.children:
            if shape.is_root(inner) and inner in shape.starts:
                return f"start_{ids[inner]}", clip
            inner = shape.starts.get(inner) or shape.children[inner][0]["name"]
        return ids[inner], clip

    graph.add_node("start", label="", shape="circle", width="0.18", style="filled",
                   fillcolor="#333333")
    for state in diagram["states"]:
        name = state["name"]
        if name in shape.children:
            cluster = holder(name)
            sid = ids[name]
            if state.get("history"):
                mark = history_mark(state)
                cluster.add_node(f"{sid}h", label=mark, shape="circle", width="0.3",
                                 fixedsize="true", fontsize="9", id=f"history-{sid}",
                                 tooltip=_dot_label(f"{name}: history ({state['history']})"))
            if shape.is_root(name) and name in shape.starts:
                cluster.add_node(f"start_{sid}", label="", shape="circle", width="0.12",
                                 style="filled", fillcolor="#333333", id=f"start-{sid}")
            continue
        lines = _wrapped(_shown(state),
                        _CHOICE_LINE if state.get("kind") == "choice" else _NAME_LINE)
        lines += [part for note in state_notes(state)
                  for part in _wrapped(note, _NOTE_LINE, _NOTE_LINES)]
        attributes = {"label": _dot_lines(lines), "id": f"state-{ids[name]}",
                      "tooltip": _dot_label(" / ".join([name, *state_notes(state)]))}
        if state.get("kind") == "choice":
            attributes.update(shape="diamond", style="filled", fontsize=_EDGE_FONT_PT)
        if state["final"]:
            attributes.update(peripheries="2", fillcolor="#eef3fb")
        if not state["reached"]:
            attributes.update(fillcolor="#f4f4f4", fontcolor="#888888", color="#aaaaaa")
        holder(state["parent"]).add_node(ids[name], **attributes)
    head, clip = end(diagram["initial"], "lhead")
    graph.add_edge("start", head, color="#333333", **clip)
    for root, leaf in shape.starts.items():
        if root in shape.children and leaf in ids:
            head, clip = end(leaf, "lhead")
            graph.add_edge(f"start_{ids[root]}", head, color="#333333", **clip)
    for index, edge in enumerate(diagram["transitions"]):
        style = dict(_EDGE_STYLE[(edge["on_path"], edge["covered"])])
        if not edge["declared"] and not edge["on_path"]:
            style["style"] = "dotted"
        if shape.states[edge["target"]]["final"]:
            # an edge into a final state (a failure many states share) weighs nothing: else
            # each of them pulls the final state toward itself, and the flow drifts aside
            # rank after rank, a staircase twice as wide as it needs
            style["weight"] = "0"
        tail, tail_clip = end(edge["source"], "ltail")
        head_clip: dict[str, str] = {}
        if edge.get("history") in ids:
            head = f"{ids[edge['history']]}h"
        else:
            head, head_clip = end(edge["target"], "lhead")
        whole = _dot_label(_edge_title(edge))
        graph.add_edge(tail, head, key=str(index),
                       label=_dot_padded(_wrapped(edge_text(edge), _EDGE_LINE, _EDGE_LINES)),
                       id=f"edge-{index}", tooltip=whole, labeltooltip=whole,
                       **style, **tail_clip, **head_clip)
    return graph


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Keeps Graphviz's and fontconfig's notices (written by C code to fd 2) off the user's
    terminal."""
    try:
        saved = os.dup(2)
    except OSError:  # pragma: no cover - no stderr to keep quiet
        yield
        return
    try:
        with open(os.devnull, "w") as sink:
            os.dup2(sink.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
