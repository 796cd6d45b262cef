"""Diagrams of statecharts (issue 17): the Mermaid text of parallel regions, maps, choices,
history, internal transitions and a state's notes, exact for small charts and within the
grammar for every chart; the SVG's clusters, one per region; coverage and a counterexample's
path marked on the new edge kinds; the scenarios drawn before statecharts drawn the same; the
JSON Schema of definitions; and the `diagram` command on such charts."""

from __future__ import annotations

import html
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jsonschema
import pytest
import yaml
from running import ROOT, cli, one_error_line

from harness import describe_steps
from harness.checks.coverage import Coverage
from harness.report.diagram import diagram_of
from harness.report.document import counterexample_path, document, load_report, target_section
from harness.report.drawing import _dot_graph, svg
from harness.report.html_page import render_html
from harness.report.mermaid import mermaid
from harness.report.writing import write_reports
from harness.sim.history import Committed
from reference_machine import WorkflowDefinition, WorkflowSpec, load_definition
from reference_machine.documents import read_document

EXPECTED = ROOT / "tests" / "data" / "diagrams"
SCENARIOS = ROOT / "scenarios"

# -- small charts, one construct each -------------------------------------------------------

PARALLEL: dict[str, Any] = {
    "name": "both",
    "events": {"tick": {}, "tock": {}, "abort": {}},
    "states": {
        "both": {"initial": True, "type": "parallel", "on_region_failure": "wait",
                 "on": {"abort": "failed"},
                 "done": [{"target": "end", "guard": "not event.payload.failed"}, "failed"]},
        "left": {"parent": "both"},
        "l1": {"parent": "left", "initial": True, "type": "wait", "on": {"tick": "l2"},
               "after": {"delay": 60, "target": "l2"}},
        "l2": {"parent": "left", "type": "final", "outcome": "success"},
        "right": {"parent": "both"},
        "r1": {"parent": "right", "initial": True, "type": "wait", "on": {"tock": "r2"},
               "after": {"delay": 60, "target": "r3"}},
        "r2": {"parent": "right", "type": "final", "outcome": "success"},
        "r3": {"parent": "right", "type": "final", "outcome": "failure"},
        "end": {"type": "final", "outcome": "success"},
        "failed": {"type": "final", "outcome": "failure"},
    },
}

MAP: dict[str, Any] = {
    "name": "each",
    "context": {"files": []},
    "tools": {"read": {"idempotency_keys": True}},
    "states": {
        "each": {"initial": True, "type": "map", "items": "context.files", "concurrency_max": 2,
                 "tolerated_failures": 1,
                 "done": [{"target": "done", "guard": "not event.payload.failing"}, "failed"]},
        "read": {"parent": "each", "initial": True, "step": {"tool": "read"},
                 "on": {"step.succeeded": "read_ok", "step.failed": "unreadable"}},
        "read_ok": {"parent": "each", "type": "final", "outcome": "success"},
        "unreadable": {"parent": "each", "type": "final", "outcome": "failure"},
        "done": {"type": "final", "outcome": "success"},
        "failed": {"type": "final", "outcome": "failure"},
    },
}

CHOICE: dict[str, Any] = {
    "name": "router",
    "context": {"amount": 0, "kind": ""},
    "events": {"go": {}},
    "states": {
        "idle": {"initial": True, "type": "wait", "on": {"go": "route"},
                 "after": {"delay": 60, "target": "small"}},
        "route": {"type": "choice", "always": [
            {"target": "large", "guard": "context.amount>=100"},
            {"target": "odd", "guard": "context.kind == 'a:b;c' or context.amount<0"},
            "small"]},
        "large": {"type": "final", "outcome": "success"},
        "odd": {"type": "final", "outcome": "failure"},
        "small": {"type": "final", "outcome": "success"},
    },
}


def history(kind: str) -> dict[str, Any]:
    return {
        "name": f"history_{kind}",
        "events": {"next": {}, "pause": {}, "resume": {}},
        "states": {
            "work": {"initial": True, "history": kind, "on": {"pause": "paused"}},
            "one": {"parent": "work", "initial": True, "type": "wait", "on": {"next": "two"},
                    "after": {"delay": 600, "target": "end"}},
            "two": {"parent": "work", "type": "wait", "on": {"next": "end"},
                    "after": {"delay": 600, "target": "end"}},
            "paused": {"type": "wait", "on": {"resume": "work"},
                       "after": {"delay": 600, "target": "end"}},
            "end": {"type": "final", "outcome": "success"},
        },
    }


NOTES: dict[str, Any] = {
    "name": "notes",
    "context": {"amount": 0, "pings": 0, "log": []},
    "tools": {"credit": {"idempotency_keys": True}},
    "events": {"ping": {}},
    "states": {
        "ask": {"initial": True, "type": "wait", "approval": {
            "for_state": "issue", "summary": "credit {amount}", "roles": ["supervisor"],
            "expires_after": "1h"},
            "on": {"approval.granted": "issue", "approval.denied": "refused",
                   "ping": {"actions": [{"assign": {"pings": "context.pings + 1"}}]}}},
        "issue": {"step": {"tool": "credit", "needs_approval": "context.amount > 100"},
                  "entry": [{"assign": {"log": "context.log + ['in']"}}],
                  "exit": [{"assign": {"log": "context.log + ['out']", "pings": "0"}}],
                  "on": {"step.succeeded": "done", "step.failed": "refused"}},
        "done": {"type": "final", "outcome": "success"},
        "refused": {"type": "final", "outcome": "failure"},
    },
}

#: every statechart construct at once (a correlated event included), for the schema
EVERYTHING: dict[str, Any] = {
    "name": "everything",
    "context": {"files": [], "amount": 0, "ticket": "", "pings": 0, "log": []},
    "tools": {"read": {"idempotency_keys": True}, "credit": {"idempotency_keys": True}},
    "events": {"tick": {}, "ping": {}, "pause": {}, "resume": {},
               "ci.done": {"payload": {"type": "object",
                                       "properties": {"ticket": {"type": "string"}},
                                       "required": ["ticket"]},
                           "correlate": {"ticket": "context.ticket"}}},
    "states": {
        "both": {"initial": True, "type": "parallel", "on_region_failure": "wait",
                 "entry": [{"assign": {"log": "context.log + ['both']"}}],
                 "exit": [{"assign": {"log": "context.log + ['left both']"}}],
                 "done": [{"target": "each", "guard": "not event.payload.failed"}, "failed"]},
        "left": {"parent": "both"},
        "l1": {"parent": "left", "initial": True, "type": "wait", "on": {"tick": "l2"},
               "after": {"delay": 60, "target": "l2"}},
        "l2": {"parent": "left", "type": "final", "outcome": "success"},
        "right": {"parent": "both"},
        "r1": {"parent": "right", "initial": True, "type": "wait", "on": {"ci.done": "r2"},
               "after": {"delay": 60, "target": "r2"}},
        "r2": {"parent": "right", "type": "final", "outcome": "success"},
        "each": {"type": "map", "items": "context.files", "concurrency_max": 2,
                 "tolerated_failures": 1, "results": "texts",
                 "done": [{"target": "route", "guard": "not event.payload.failing"},
                          "failed"]},
        "read": {"parent": "each", "initial": True, "step": {"tool": "read"},
                 "on": {"step.succeeded": "read_ok", "step.failed": "unreadable"}},
        "read_ok": {"parent": "each", "type": "final", "outcome": "success"},
        "unreadable": {"parent": "each", "type": "final", "outcome": "failure"},
        "route": {"type": "choice", "always": [
            {"target": "ask", "guard": "context.amount > 100"}, "settle"]},
        "settle": {"always": ["issue"]},
        "ask": {"type": "wait", "approval": {
            "for_state": "issue", "summary": "credit {amount}", "roles": ["supervisor"],
            "expires_after": "1h"},
            "on": {"approval.granted": "issue", "approval.denied": "failed",
                   "ping": {"actions": [{"assign": {"pings": "context.pings + 1"}}]}}},
        "issue": {"step": {"tool": "credit", "needs_approval": "context.amount > 100"},
                  "on": {"step.succeeded": "review", "step.failed": "failed"}},
        "review": {"history": "deep", "on": {"pause": "paused"}},
        "reading": {"parent": "review", "initial": True, "type": "wait",
                    "on": {"tick": "done"}, "after": {"delay": 600, "target": "done"}},
        "paused": {"type": "wait", "on": {"resume": "review"},
                   "after": {"delay": 600, "target": "failed"}},
        "done": {"type": "final", "outcome": "success"},
        "failed": {"type": "final", "outcome": "failure"},
    },
}


def drawn(spec: dict[str, Any], coverage: Coverage | None = None,
          path: Any = ()) -> dict[str, Any]:
    definition = load_definition(spec)
    assert definition.warnings == ()
    return diagram_of(definition, coverage, path)


def edges(diagram: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Gives a diagram's edges by (source, event, target)."""
    return {(e["source"], e["event"], e["target"]): e for e in diagram["transitions"]}


# -- Mermaid ---------------------------------------------------------------------------------


class TestMermaid:
    def test_a_parallel_state_separates_its_regions_each_with_its_start_moves_and_ends(
            self) -> None:
        """Regions are composites split by `--`; the join and the parallel state's own
        transitions leave the composite."""
        assert mermaid(drawn(PARALLEL)) == """\
stateDiagram-v2
    state "both (parallel, a failed region waits for the others)" as s0
    state s0 {
        state "left" as s1
        state s1 {
            state "l1" as s2
            state "l2" as s3
            [*] --> s2
            s2 --> s3: tick (never taken)
            s2 --> s3: timer.fired (never taken)
            s3 --> [*]
        }
        --
        state "right" as s4
        state s4 {
            state "r1" as s5
            state "r2" as s6
            state "r3" as s7
            [*] --> s5
            s5 --> s7: timer.fired (never taken)
            s5 --> s6: tock (never taken)
            s6 --> [*]
            s7 --> [*]
        }
    }
    state "end" as s8
    state "failed" as s9
    [*] --> s0
    s0 --> s9: abort (never taken)
    s0 --> s8: done [not event.payload.failed] (never taken)
    s0 --> s9: done (never taken)
    s8 --> [*]
    s9 --> [*]
"""

    def test_a_map_is_a_composite_labelled_with_its_items_and_concurrency(self) -> None:
        """The item's flow runs inside; the join leaves the map."""
        assert mermaid(drawn(MAP)) == """\
stateDiagram-v2
    state "each (map over context.files, 2 at once, 1 failure tolerated)" as s0
    state s0 {
        state "read" as s1
        state "read_ok" as s2
        state "unreadable" as s3
        [*] --> s1
        s1 --> s3: step.failed (never taken)
        s1 --> s2: step.succeeded (never taken)
        s2 --> [*]
        s3 --> [*]
    }
    state "done" as s4
    state "failed" as s5
    [*] --> s0
    s0 --> s4: done [not event.payload.failing] (never taken)
    s0 --> s5: done (never taken)
    s4 --> [*]
    s5 --> [*]
"""

    def test_without_a_limit_every_item_runs_at_once(self) -> None:
        spec = {**MAP, "states": {**MAP["states"], "each": {
            **MAP["states"]["each"], "concurrency_max": None, "tolerated_failures": 2}}}
        assert ('    state "each (map over context.files, all at once, 2 failures tolerated)"'
                " as s0\n") in mermaid(drawn(spec))

    def test_a_choice_is_a_choice_state_whose_always_edges_carry_their_guards(self) -> None:
        """A guard's `:` and `;` (which end a Mermaid label) are look-alikes, and a `<` that
        a browser would take for a tag gets a space; `>` and `<=` read as written."""
        assert mermaid(drawn(CHOICE)) == """\
stateDiagram-v2
    state "idle" as s0
    %% route
    state s1 <<choice>>
    state "large" as s2
    state "odd" as s3
    state "small" as s4
    [*] --> s0
    s0 --> s1: go (never taken)
    s0 --> s4: timer.fired (never taken)
    s1 --> s2: always [context.amount>=100] (never taken)
    s1 --> s3: always [context.kind == 'a\u2236b\u037ec' or context.amount<0] (never taken)
    s1 --> s4: always (never taken)
    s2 --> [*]
    s3 --> [*]
    s4 --> [*]
"""

    @pytest.mark.parametrize(("kind", "mark"), [("shallow", "H"), ("deep", "H*")])
    def test_history_is_a_marker_in_the_compound_that_transitions_into_it_go_to(
            self, kind: str, mark: str) -> None:
        """`resume` targets the compound: it goes to the marker, not to the initial child
        (nor to each child history may resume)."""
        assert mermaid(drawn(history(kind))) == f"""\
stateDiagram-v2
    state "work" as s0
    state s0 {{
        state "one" as s1
        state "two" as s2
        state "{mark}" as s0h
    }}
    state "paused" as s3
    state "end" as s4
    [*] --> s1
    s1 --> s2: next (never taken)
    s1 --> s3: pause (never taken)
    s1 --> s4: timer.fired (never taken)
    s3 --> s0h: resume (never taken)
    s3 --> s4: timer.fired (never taken)
    s2 --> s4: next (never taken)
    s2 --> s3: pause (never taken)
    s2 --> s4: timer.fired (never taken)
    s4 --> [*]
"""

    def test_internal_transitions_entry_exit_and_a_conditional_approval(self) -> None:
        """An internal transition is a self-loop marked internal; the approval's condition
        and the actions are lines of the state's description."""
        assert mermaid(drawn(NOTES)) == """\
stateDiagram-v2
    state "ask" as s0
    state "issue" as s1
    s1: needs approval if context.amount > 100
    s1: entry / assign log
    s1: exit / assign log, pings
    state "done" as s2
    state "refused" as s3
    [*] --> s0
    s0 --> s3: approval.denied (never taken)
    s0 --> s1: approval.granted (never taken)
    s0 --> s0: ping (internal) (never taken)
    s1 --> s3: step.failed (never taken)
    s1 --> s2: step.succeeded (never taken)
    s2 --> [*]
    s3 --> [*]
"""

    def test_names_with_dots_and_dashes_are_quoted_titles_never_ids(self) -> None:
        spec = {
            "name": "dotted",
            "events": {"go.on": {}},
            "states": {
                "fetch.all": {"initial": True, "type": "parallel", "done": "end-ok"},
                "crm-region": {"parent": "fetch.all"},
                "crm.get": {"parent": "crm-region", "initial": True, "type": "wait",
                            "on": {"go.on": "crm-done"},
                            "after": {"delay": 60, "target": "crm-done"}},
                "crm-done": {"parent": "crm-region", "type": "final", "outcome": "success"},
                "end-ok": {"type": "final", "outcome": "success"},
            },
        }
        text = mermaid(drawn(spec))
        assert '    state "fetch.all (parallel)" as s0\n' in text
        assert '            state "crm.get" as s2\n' in text
        assert "            s2 --> s3: go.on (never taken)\n" in text
        assert "    s0 --> s4: done (never taken)\n" in text
        within_grammar(text)

    def test_what_mermaid_reads_as_syntax_stays_out_of_labels_and_titles(self) -> None:
        """A guard or an items expression with a label's end (`:`, `;`), a tag (`<b>`), a
        character reference (`&lt`), a directive (`%%{`), a quote in a title, a line break."""
        nasty = "context.a<context.b and 'x:y;z' != '&lt;<b>%%{init} \"q\"'"
        spec = {**MAP, "context": {"files": [], "a": 0, "b": 1}, "states": {
            **MAP["states"],
            "each": {**MAP["states"]["each"], "items": f"context.files if {nasty} else []",
                     "done": [{"target": "done", "guard": nasty}, "failed"]}}}
        text = mermaid(drawn(spec))
        title, label = (line for line in text.splitlines()
                        if "context.a" in line)
        assert title == ("    state \"each (map over context.files if context.a< context.b and "
                         "'x\u2236y\u037ez' != '& lt\u037e< b>% %{init} 'q'' else [], 2 at "
                         "once, 1 failure tolerated)\" as s0")
        assert label == ("    s0 --> s4: done [context.a< context.b and 'x\u2236y\u037ez' != "
                         "'& lt\u037e< b>% %{init} \"q\"'] (never taken)")
        within_grammar(text)

    @pytest.mark.parametrize("spec", [PARALLEL, MAP, CHOICE, history("deep"), NOTES,
                                      EVERYTHING],
                             ids=["parallel", "map", "choice", "history", "notes", "all"])
    def test_every_line_is_within_mermaids_grammar(self, spec: dict[str, Any]) -> None:
        within_grammar(mermaid(drawn(spec)))

    @pytest.mark.parametrize("path", sorted(SCENARIOS.rglob("*.yaml")),
                             ids=lambda p: p.stem)
    def test_every_scenario_is_within_mermaids_grammar(self, path: Path) -> None:
        within_grammar(mermaid(diagram_of(load_definition(path))))


#: The lines `mermaid` writes, as Mermaid's state diagram grammar reads them: a transition's
#: or a description's label runs to the end of the line and holds no `:` or `;`; a quoted
#: title holds no `"`; ids are plain (Mermaid's ids end at `-`, `:` or a space); the class of
#: the counterexample's states is defined and given at the top level
_LINE = re.compile(r"""
    stateDiagram-v2
  | (?P<pad>\ *)(?:
        state\ "[^"\n]*"\ as\ (?P<id>s\d+h?)
      | state\ (?P<open>s\d+)\ \{
      | (?P<close>\})
      | (?P<divider>--)
      | %%\ [\w .\-/]+
      | state\ s\d+\ <<choice>>
      | s\d+:\ [^:;\n]+
      | (?:\[\*\]|s\d+)\ -->\ (?:\[\*\]|s\d+h?)(?::\ [^:;\n]+)?
      | classDef\ counterexample\ [\w:#,\-]+
      | class\ s\d+(?:,s\d+)*\ counterexample
    )""", re.X)


def within_grammar(text: str) -> None:
    """Checks Mermaid text line by line: known statements only, blocks balanced and indented
    by depth, `--` only directly inside a parallel state's block, ids declared once."""
    lines = text.splitlines()
    assert lines[0] == "stateDiagram-v2" and text.endswith("\n")
    depth, blocks, declared = 1, [""], set()
    titles = {}
    for line in lines[1:]:
        found = _LINE.fullmatch(line)
        assert found, f"not a statement mermaid writes: {line!r}"
        if found["close"]:
            depth -= 1
            blocks.pop()
        assert found["pad"] == "    " * depth, line
        if found["id"]:
            assert found["id"] not in declared, line
            declared.add(found["id"])
            titles[found["id"]] = line
        if found["open"]:
            depth += 1
            blocks.append(titles[found["open"]])
        if found["divider"]:
            assert "(parallel" in blocks[-1], line
    assert depth == 1 and blocks == [""]
    assert "-->" not in re.sub(r"^ *(\[\*\]|s\d+h?) --> ", "", text, flags=re.M)


# -- the diagrams drawn before statecharts ----------------------------------------------------


def _old_definition(stem: str) -> WorkflowDefinition:
    return load_definition(SCENARIOS.joinpath(*stem.split("__")).with_suffix(".yaml"))


def _covered_document_processing() -> dict[str, Any]:
    """The diagram of document_processing with a hand-made coverage and path: every other
    declared transition taken, a forced move, a move seen from outside only (as the expected
    data was made)."""
    from harness.checks.coverage import coverage_universe

    definition = load_definition(SCENARIOS / "document_processing.yaml")
    universe = sorted(coverage_universe(definition)["transitions"])
    states = sorted(coverage_universe(definition)["states"])
    taken = set(universe[::2]) | {(universe[1][0], "forced:deadline", states[-1]),
                                  (universe[3][0], "?", universe[3][2])}
    coverage = Coverage(states=frozenset(states[::2]), transitions=frozenset(taken))
    return diagram_of(definition, coverage, [universe[0], universe[2]])


OLD = sorted(p.stem for p in EXPECTED.glob("*.mmd"))


class TestOldDiagrams:
    @pytest.mark.parametrize("stem", OLD)
    def test_a_definition_without_statechart_constructs_is_drawn_as_before(self, stem: str
                                                                           ) -> None:
        """The Mermaid text, the diagram's JSON and the Graphviz source, each as the expected
        data holds them (the JSON as before statecharts; the Graphviz source and the path's
        style since diagrams were made legible for busy workflows)."""
        diagram = (_covered_document_processing() if stem.endswith("__covered")
                   else diagram_of(_old_definition(stem)))
        assert mermaid(diagram) == (EXPECTED / f"{stem}.mmd").read_text()
        assert json.dumps(diagram, indent=2, sort_keys=True) + "\n" == (
            EXPECTED / f"{stem}.json").read_text()
        assert _dot_graph(diagram).string() == (EXPECTED / f"{stem}.dot").read_text()

    def test_the_expected_data_covers_every_old_scenario(self) -> None:
        assert len(OLD) == 11 and "document_processing__covered" in OLD


# -- SVG -------------------------------------------------------------------------------------

SVG = "{http://www.w3.org/2000/svg}"


def parsed(diagram: dict[str, Any]) -> dict[str, ET.Element]:
    """Gives the SVG's groups (clusters, nodes, edges) by id."""
    root = ET.fromstring(svg(diagram))
    return {g.get("id", ""): g for g in root.iter(f"{SVG}g") if g.get("id")}


def dot_text(label: str) -> str:
    """Gives the text of an edge's Graphviz label (an HTML-like one, its lines joined)."""
    return html.unescape(re.sub(r"<[^>]*>", "", label.replace("<br/>", " "))).strip()


def box(group: ET.Element) -> tuple[float, float, float, float]:
    """Gives the bounding box (x0, y0, x1, y1) of a group's outline (polygon or path)."""
    numbers: list[float] = []
    for shape in group.iter():
        if shape.tag in (f"{SVG}polygon", f"{SVG}path", f"{SVG}ellipse"):
            if shape.tag == f"{SVG}ellipse":
                cx, cy = float(shape.get("cx", 0)), float(shape.get("cy", 0))
                rx, ry = float(shape.get("rx", 0)), float(shape.get("ry", 0))
                numbers += [cx - rx, cy - ry, cx + rx, cy + ry]
            else:
                numbers += [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?",
                                                         shape.get("points") or
                                                         shape.get("d") or "")]
            break
    xs, ys = numbers[0::2], numbers[1::2]
    return min(xs), min(ys), max(xs), max(ys)


def inside(inner: tuple[float, ...], outer: tuple[float, ...]) -> bool:
    return (outer[0] <= inner[0] and outer[1] <= inner[1] and inner[2] <= outer[2]
            and inner[3] <= outer[3])


def texts(group: ET.Element) -> list[str]:
    return [t.text or "" for t in group.iter(f"{SVG}text")]


class TestSvg:
    def test_a_parallel_state_is_a_cluster_holding_one_cluster_per_region(self) -> None:
        """Each region's states lie inside its own cluster, the regions apart, both inside
        the parallel state's; each region has its start."""
        groups = parsed(drawn(PARALLEL))
        clusters = sorted(key for key, g in groups.items() if g.get("class") == "cluster")
        assert clusters == ["parallel-s0", "region-s1", "region-s4"]
        assert " ".join(texts(groups["parallel-s0"])) == (
            "both (parallel, a failed region waits for the others)")
        assert texts(groups["region-s1"]) == ["left"] and texts(groups["region-s4"]) == [
            "right"]
        left, right = box(groups["region-s1"]), box(groups["region-s4"])
        assert inside(left, box(groups["parallel-s0"]))
        assert inside(right, box(groups["parallel-s0"]))
        assert not (inside(left, right) or inside(right, left))
        for region, states in (("region-s1", ("s2", "s3", "start-s1")),
                               ("region-s4", ("s5", "s6", "s7", "start-s4"))):
            for state in states:
                name = state if state.startswith("start") else f"state-{state}"
                assert inside(box(groups[name]), box(groups[region])), (region, state)

    def test_edges_to_and_from_a_cluster_are_drawn_at_a_state_inside_it(self) -> None:
        """The start and the join's edges end at a node inside the cluster (clipped at its
        box): no stray node is made for the parallel state. An edge in is drawn to the start
        of the first region's flow (the top of the box), one out from a final state of the
        last region (its bottom), so neither's label lands inside the box."""
        graph = _dot_graph(drawn(PARALLEL))
        assert "s0" not in graph.nodes()
        start = graph.get_edge("start", "start_s1")
        assert start.attr["lhead"] == "cluster_s0"
        joins = [e for e in graph.edges() if dot_text(e.attr.get("label", "")).startswith("done")]
        assert sorted(dot_text(e.attr["label"]) for e in joins) == [
            "done", "done [not event.payload.failed]"]
        assert {e.attr["ltail"] for e in joins} == {"cluster_s0"}
        assert {e[0] for e in joins} == {"s7"}  # r3, the right region's last final state

    def test_a_map_is_a_cluster_labelled_with_what_it_maps_over(self) -> None:
        groups = parsed(drawn(MAP))
        assert " ".join(texts(groups["map-s0"])) == (
            "each (map over context.files, 2 at once, 1 failure tolerated)")
        for state in ("state-s1", "state-s2", "state-s3", "start-s0"):
            assert inside(box(groups[state]), box(groups["map-s0"]))

    def test_a_choice_is_a_diamond_and_its_edges_carry_their_guards(self) -> None:
        groups = parsed(drawn(CHOICE))
        (diamond,) = groups["state-s1"].iter(f"{SVG}polygon")
        points = diamond.get("points", "").split()
        assert len(set(points)) == 4  # Graphviz closes the outline on its first point
        labels = {" ".join(texts(g)) for key, g in groups.items() if key.startswith("edge-")}
        assert {"always [context.amount>=100]",
                "always [context.kind == 'a:b;c' or context.amount<0]",
                "always"} <= labels

    def test_history_is_a_marker_inside_the_compound_that_resume_points_to(self) -> None:
        groups = parsed(drawn(history("deep")))
        assert texts(groups["history-s0"]) == ["H*"]
        (cluster,) = [g for g in groups.values() if g.get("class") == "cluster"]
        assert inside(box(groups["history-s0"]), box(cluster))
        (resume,) = [g for key, g in groups.items()
                     if key.startswith("edge-") and texts(g) == ["resume"]]
        assert resume.findtext(f"{SVG}title") == "paused -> work (history): resume"
        graph = _dot_graph(drawn(history("deep")))
        assert [e for e in graph.edges() if dot_text(e.attr["label"]) == "resume"] == [
            ("s3", "s0h")]

    def test_notes_are_lines_of_the_state_and_internal_transitions_self_loops(self) -> None:
        groups = parsed(drawn(NOTES))
        assert texts(groups["state-s1"]) == [
            "issue", "needs approval if context.amount > 100", "entry / assign log",
            "exit / assign log, pings"]
        (ping,) = [g for key, g in groups.items()
                   if key.startswith("edge-") and texts(g) == ["ping (internal)"]]
        assert ping.findtext(f"{SVG}title") == "ask -> ask: ping (internal)"
        assert ("s0", "s0") in _dot_graph(drawn(NOTES)).edges()

    def test_everything_at_once_draws(self) -> None:
        groups = parsed(drawn(EVERYTHING))
        assert {"parallel-s0", "region-s1", "region-s4", "map-s7", "history-s15"} <= set(
            groups)


# -- coverage and the counterexample's path --------------------------------------------------


def covering(*keys: tuple[str, str, str]) -> Coverage:
    return Coverage(transitions=frozenset(keys))


class TestCoverage:
    def test_region_moves_and_the_join_are_covered_and_the_parent_draws_no_move_of_its_own(
            self) -> None:
        """A region's move is keyed by its own states; the parent's `both -> both` that
        stands for it is no edge."""
        diagram = drawn(PARALLEL, covering(("l1", "tick", "l2"), ("both", "tick", "both"),
                                           ("both", "done", "end")))
        by_key = edges(diagram)
        assert by_key[("l1", "tick", "l2")]["covered"]
        assert by_key[("both", "done", "end")]["covered"]
        assert not by_key[("both", "done", "failed")]["covered"]
        assert ("both", "tick", "both") not in by_key
        assert "    s0 --> s8: done [not event.payload.failed]\n" in mermaid(diagram)

    def test_an_eventless_edge_is_covered_by_its_key(self) -> None:
        by_key = edges(drawn(CHOICE, covering(("idle", "go", "route"),
                                              ("route", "always", "large"))))
        assert by_key[("idle", "go", "route")]["covered"]
        assert by_key[("route", "always", "large")]["covered"]
        assert not by_key[("route", "always", "small")]["covered"]

    def test_a_move_that_skips_the_choice_covers_the_one_route_through_it(self) -> None:
        """`idle -> large on go` (the choice passed on the way) marks `go` into the choice
        and the branch out of it, and is drawn as no move of its own."""
        diagram = drawn(CHOICE, covering(("idle", "go", "large")))
        by_key = edges(diagram)
        assert by_key[("idle", "go", "route")]["covered"]
        assert by_key[("route", "always", "large")]["covered"]
        assert ("idle", "go", "large") not in by_key
        assert sum(e["covered"] for e in diagram["transitions"]) == 2

    def test_a_move_more_than_one_route_explains_marks_nothing_and_draws_nothing(
            self) -> None:
        spec = {**CHOICE, "states": {**CHOICE["states"],
                                     "route": {"type": "choice", "always": [
                                         {"target": "via", "guard": "context.amount > 1"},
                                         {"target": "large", "guard": "context.amount > 2"},
                                         {"target": "odd", "guard": "context.amount > 3"},
                                         "small"]},
                                     "via": {"type": "choice", "always": ["small"]}}}
        diagram = drawn(spec, covering(("idle", "go", "small")))
        assert not any(e["covered"] for e in diagram["transitions"])
        assert ("idle", "go", "small") not in edges(diagram)

    @pytest.mark.parametrize("key", [("ask", "ping", "ask"), ("ask", "ping", ""),
                                     ("ask", "forced:internal", "ask")])
    def test_an_internal_transition_is_covered_however_it_is_keyed(
            self, key: tuple[str, str, str]) -> None:
        diagram = drawn(NOTES, covering(key))
        assert edges(diagram)[("ask", "ping", "ask")]["covered"]
        assert [e for e in diagram["transitions"] if not e["declared"]] == []

    @pytest.mark.parametrize("key", [("paused", "resume", "one"), ("paused", "resume", "two"),
                                     ("paused", "?", "two")])
    def test_a_move_into_a_compound_with_history_is_covered_whichever_child_it_resumed(
            self, key: tuple[str, str, str]) -> None:
        diagram = drawn(history("deep"), covering(key))
        (resume,) = [e for e in diagram["transitions"] if e["event"] == "resume"]
        assert resume["covered"] and resume["history"] == "work"
        assert [e for e in diagram["transitions"] if not e["declared"]] == []

    def test_an_undeclared_move_is_still_drawn_as_one(self) -> None:
        diagram = drawn(CHOICE, covering(("idle", "forced:deadline", "odd")))
        (forced,) = [e for e in diagram["transitions"] if not e["declared"]]
        assert forced == {"source": "idle", "event": "forced:deadline", "target": "odd",
                          "declared": False, "covered": True, "on_path": False}

    def test_a_choice_left_by_a_covered_edge_is_reached(self) -> None:
        """A run passes through a choice and never rests there, so no run's states hold
        it."""
        diagram = drawn(CHOICE, Coverage(states=frozenset({"idle", "large"}),
                                         transitions=frozenset({("idle", "go", "large")})))
        assert {s["name"] for s in diagram["states"] if s["reached"]} == {
            "idle", "route", "large"}

    def test_a_counterexamples_macrosteps_are_told_move_by_move_on_the_diagram(self) -> None:
        """Region moves, the move the event made and each eventless move after it (a join's
        `done` out of the parallel state) are the path's moves; an internal transition is
        one too."""
        spec = {**PARALLEL, "events": {**PARALLEL["events"], "ping": {}},
                "states": {**PARALLEL["states"],
                           "both": {**PARALLEL["states"]["both"],
                                    "on": {"abort": "failed", "ping": {"actions": []}},
                                    "done": ["next"]},
                           "next": {"type": "choice", "always": ["end"]}}}
        definition = load_definition(spec)

        def committed(step: int, source: str, moved: str, target: str, **more: Any
                      ) -> Committed:
            return Committed(step, 0, "x1", f"e{step}", "accepted", step, target, source,
                             moved, **more)

        history_ = [
            committed(1, "", "start", "both", inner=(("", "start", "l1"), ("", "start", "r1"))),
            committed(2, "both", "tick", "both", inner=(("l1", "tick", "l2"),)),
            committed(3, "both", "done", "end", via=("next",), inner=(("r1", "tock", "r2"),)),
            committed(4, "both", "ping", "both", forced="internal"),
            committed(9, "end", "late", "end"),  # after the violation
        ]
        counterexample = SimpleNamespace(violation=SimpleNamespace(execution="x1", step=4),
                                         result=SimpleNamespace(history=history_))
        path = counterexample_path(counterexample, definition)
        assert path == [("l1", "tick", "l2"), ("r1", "tock", "r2"), ("both", "done", "next"),
                        ("next", "always", "end"), ("both", "ping", "both")]
        diagram = diagram_of(definition, None, path)
        assert sorted(k for k, e in edges(diagram).items() if e["on_path"]) == sorted(path)
        assert all(e["declared"] for e in diagram["transitions"])


# -- the counterexample's path in the Markdown report ----------------------------------------


def mermaid_block(markdown: str) -> str:
    found = re.search(r"```mermaid\n(.*?)```", markdown, re.S)
    assert found, markdown
    return found[1]


def styled(block: str) -> tuple[set[tuple[str, str, str]], set[tuple[str, str, str]],
                                set[str], set[str]]:
    """Reads a Mermaid state diagram: its transitions (source, first word of the label,
    target) with a bold label and without, the states given the `counterexample` class, and
    the composite states, each by name."""
    names = {sid: name for name, sid in re.findall(r'state "([^" ]+)[^"]*" as (s\d+)$', block,
                                                   re.M)}
    names |= {sid: name for name, sid in re.findall(r"%% (\S+)\n *state (s\d+) <<choice>>",
                                                    block)}
    bold, plain = set(), set()
    for source, target, label in re.findall(r"^ *(s\d+) --> (s\d+): (.*)$", block, re.M):
        move = (names[source], re.sub(r"</?b>", "", label).split(" ")[0], names[target])
        (bold if label.startswith("<b>") and "</b>" in label else plain).add(move)
    classed = {names[sid] for ids in re.findall(r"^    class (\S+) counterexample$", block,
                                                re.M) for sid in ids.split(",")}
    composites = {names[sid] for sid in re.findall(r"state (s\d+) \{$", block, re.M)}
    return bold, plain, classed, composites


@pytest.fixture(scope="module")
def failing_markdown(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[list[str]]]:
    """Gives the Markdown report of a campaign that fails (the naive triage issues a credit
    twice) and the path its counterexample took, as the JSON report tells it."""
    from harness import FuzzOptions
    from harness.adapters.targets import Target
    from harness.engines.campaign import fuzz_target

    folder = tmp_path_factory.mktemp("markdown")
    definition = load_definition(SCENARIOS / "naive" / "triage_credit_twice.yaml")
    report, section = fuzz_target(Target("triage", definition),
                                  FuzzOptions(runs=20, replay_dir=folder / "replays"))
    assert report.failures
    files = write_reports(document("fuzz", [section]), folder, stem="fuzz")
    path = json.loads(files.json.read_text())["targets"][0]["diagram"]["path"]
    return files.markdown.read_text(), path


class TestMarkdownPath:
    def test_the_paths_transitions_and_only_they_have_bold_labels(
            self, failing_markdown: tuple[str, list[list[str]]]) -> None:
        """Each move the shrunk trace made is a transition drawn in bold (and still said in
        words); no other transition is."""
        markdown, path = failing_markdown
        bold, plain, _, _ = styled(mermaid_block(markdown))
        moves = {tuple(move) for move in path}
        assert bold == moves and len(moves) >= 5
        assert not bold & plain
        block = mermaid_block(markdown)
        assert block.count("<b>") == block.count("(counterexample)") == len(bold)

    def test_the_paths_states_and_only_they_are_in_the_counterexample_class(
            self, failing_markdown: tuple[str, list[list[str]]]) -> None:
        """The states the path entered or left, except a composite one (Mermaid styles no
        composite state), are given the class; the class is defined in the report's red,
        bold; no other state is given it."""
        markdown, path = failing_markdown
        block = mermaid_block(markdown)
        _, _, classed, composites = styled(block)
        passed = {name for move in path for name in (move[0], move[2]) if name}
        assert classed == passed - composites
        assert "fetching" in passed & composites  # the parallel state the path went through
        assert {"awaiting_supervisor", "escalating"}.isdisjoint(classed)
        (definition,) = re.findall(r"^    classDef counterexample (.*)$", block, re.M)
        assert "stroke:#d62728" in definition and "font-weight:bold" in definition
        within_grammar(block)

    def test_a_campaign_that_held_styles_nothing(self, tmp_path: Path) -> None:
        """No counterexample: no bold label, no class, not a word of it."""
        definition = load_definition(SCENARIOS / "refund_escalation.yaml")
        section = target_section("refund", "fuzz", definition, "reference", {"runs": 1}, None)
        markdown = write_reports(document("fuzz", [section]), tmp_path).markdown.read_text()
        block = mermaid_block(markdown)
        assert "<b>" not in block and "classDef" not in block
        assert "counterexample" not in block
        within_grammar(block)


# -- reports ---------------------------------------------------------------------------------


class TestReports:
    def test_a_statechart_report_follows_its_schema_and_renders_again_the_same(
            self, tmp_path: Path) -> None:
        definition = load_definition(EVERYTHING)
        section = target_section("everything", "fuzz", definition, "m", {"runs": 1}, None)
        files = write_reports(document("fuzz", [section]), tmp_path, stem="r")
        doc = load_report(files.json)
        assert render_html(doc) == files.html.read_text()
        assert "```mermaid\nstateDiagram-v2\n" in files.markdown.read_text()
        assert 'id="region-s1"' in files.html.read_text()

    @pytest.mark.parametrize(("change", "problem"), [
        (lambda d: d["states"][0].update(regions=[["left", "nowhere"]]),
         "has a region or initial leaf 'nowhere' that is not among the states"),
        (lambda d: d["transitions"][0].update(history="nowhere"),
         "a transition's history 'nowhere' is not among the states"),
        (lambda d: d["states"][0].update(kind="fork"), "'fork' is not one of"),
    ], ids=["region", "history", "kind"])
    def test_a_report_whose_statechart_names_no_state_is_refused(
            self, tmp_path: Path, change: Any, problem: str) -> None:
        from harness.report.document import ReportError

        section = target_section("e", "fuzz", load_definition(EVERYTHING), "m", {}, None)
        doc = json.loads(json.dumps(document("fuzz", [section])))
        change(doc["targets"][0]["diagram"])
        (tmp_path / "r.json").write_text(json.dumps(doc))
        with pytest.raises(ReportError, match=re.escape(problem)):
            load_report(tmp_path / "r.json")


# -- the definitions' schema -----------------------------------------------------------------


@pytest.fixture(scope="module")
def definition_schema() -> dict[str, Any]:
    """The JSON Schema `fsmharness schema` prints."""
    result = cli("schema")
    assert result.returncode == 0, result.stderr
    schema: dict[str, Any] = json.loads(result.stdout)
    return schema


NEW_KEYS = {
    "StateSpec": ["entry", "exit", "always", "done", "history", "on_region_failure", "items",
                  "concurrency_max", "tolerated_failures", "results"],
    "TransitionSpec": ["target"],
    "StepSpec": ["needs_approval"],
    "EventSpec": ["correlate"],
}


class TestSchema:
    def test_it_comes_from_the_models(self, definition_schema: dict[str, Any]) -> None:
        expected = WorkflowSpec.model_json_schema()
        assert definition_schema["$defs"] == expected["$defs"]

    @pytest.mark.parametrize(("model", "key"), [(m, k) for m, keys in NEW_KEYS.items()
                                                for k in keys])
    def test_the_statechart_keys_are_there_with_their_descriptions(
            self, definition_schema: dict[str, Any], model: str, key: str) -> None:
        description = definition_schema["$defs"][model]["properties"][key].get(
            "description", "")
        assert len(description) > 20, (model, key)

    def test_the_new_kinds_of_state_are_there(self, definition_schema: dict[str, Any]
                                              ) -> None:
        kinds = definition_schema["$defs"]["StateSpec"]["properties"]["type"]["enum"]
        assert {"choice", "parallel", "map"} <= set(kinds)

    def test_a_definition_with_every_construct_validates_and_loads(
            self, definition_schema: dict[str, Any]) -> None:
        jsonschema.validate(EVERYTHING, definition_schema)
        assert load_definition(EVERYTHING).warnings == ()

    @pytest.mark.parametrize("path", sorted(SCENARIOS.rglob("*.yaml")), ids=lambda p: p.stem)
    def test_every_scenario_validates(self, definition_schema: dict[str, Any], path: Path
                                      ) -> None:
        # read as the loader reads it: `on:` is a key, not YAML 1.1's true
        data, _ = read_document(path, what="a definition", bytes_max=1_000_000)
        jsonschema.validate(data, definition_schema)

    def test_a_misspelt_statechart_key_does_not(self, definition_schema: dict[str, Any]
                                                ) -> None:
        spec = json.loads(json.dumps(EVERYTHING))
        spec["states"]["each"]["concurrency"] = 2
        with pytest.raises(jsonschema.ValidationError, match="concurrency"):
            jsonschema.validate(spec, definition_schema)


# -- the diagram command ---------------------------------------------------------------------


class TestDiagramCommand:
    def test_a_chart_with_an_internal_transition_is_drawn_both_ways(self, tmp_path: Path
                                                                    ) -> None:
        """(It was a KeyError: the internal transition's target is no state.)"""
        (tmp_path / "notes.yaml").write_text(yaml.safe_dump(NOTES, sort_keys=False))
        text = cli("diagram", str(tmp_path / "notes.yaml"))
        assert text.returncode == 0, text.stderr
        assert text.stdout == mermaid(drawn(NOTES))
        drawn_svg = cli("diagram", str(tmp_path / "notes.yaml"), "--format", "svg")
        assert drawn_svg.returncode == 0 and drawn_svg.stdout.startswith("<svg ")

    def test_a_chart_with_errors_exits_2_with_one_line(self, tmp_path: Path) -> None:
        spec = json.loads(json.dumps(CHOICE))
        spec["states"]["route"]["on"] = {"go": "small"}
        (tmp_path / "bad.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
        one_error_line(cli("diagram", str(tmp_path / "bad.yaml")), "bad.yaml", "route")


# -- the trace -------------------------------------------------------------------------------


class TestTrace:
    def test_a_macrostep_is_told_with_its_eventless_path_and_its_regions_moves(self) -> None:
        def committed(step: int, source: str, moved: str, target: str, **more: Any
                      ) -> Committed:
            return Committed(step, 1000 * step, "x1", f"e{step}", "accepted", step, target,
                             source, moved, **more)

        lines = describe_steps([
            committed(1, "idle", "go", "both", via=("route",),
                      inner=(("", "go", "l1"), ("", "go", "r1"))),
            committed(2, "both", "tick", "both", inner=(("l1", "tick", "l2"),)),
            committed(3, "both", "done", "end", via=("next",), inner=(("r1", "tock", "r2"),)),
            committed(4, "ask", "ping", "ask", forced="internal"),
            committed(5, "ask", "step.failed", "refused", forced="compensated"),
        ])
        assert lines == [
            "step 1 (t=1s): x1: idle -> both on go via route (regions: (start) -> l1, "
            "(start) -> r1)",
            "step 2 (t=2s): x1: in both, l1 -> l2 on tick",
            "step 3 (t=3s): x1: both -> end on done via next (regions: r1 -> r2 on tock)",
            "step 4 (t=4s): x1: ask on ping (internal)",
            "step 5 (t=5s): x1: ask -> refused on step.failed, forced by compensated",
        ]
