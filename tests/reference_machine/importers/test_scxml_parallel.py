"""Tests of SCXML's parallel states given SCXML's meaning: the algorithm worked out at import
(`scxml.parallel`: selection for each combination of conditions, conflicts, exits and entries
in order, done events) and the charts it makes, run by the W3C driver and by the simulator;
and the parallel states it cannot flatten, kept native and said so."""

from __future__ import annotations

from typing import Any

import pytest
from corpus import CORPUS as SHARED

from fault_injection import no_faults
from harness.sim.simulator import simulate
from reference_machine import DefinitionError, load_definition
from reference_machine.importers import scxml, w3c
from reference_machine.importers.scxml import flattening
from reference_machine.importers.scxml.chart import ChartConverter
from reference_machine.importers.scxml.parallel import (
    SELECTIONS_MAX,
    Kind,
    Move,
    NotFlat,
    Place,
    Subtree,
)

CORPUS = SHARED / "scxml-w3c"
HEAD = ('<?xml version="1.0"?>\n<scxml xmlns="http://www.w3.org/2005/07/scxml" '
        'version="1.0" datamodel="python"')


def chart(body: str, *, data: str = "") -> str:
    model = f"<datamodel>{data}</datamodel>" if data else ""
    return (f'{HEAD} initial="p">{model}{body}<final id="pass"/><final id="fail"/></scxml>')


def ends(text: str) -> str:
    definition = load_definition(scxml.convert(text, {}, "chart.scxml").data)
    end = w3c.run_definition(definition)
    return end.state if end.final else f"stuck in {end.state}: {end.why}"


def codes(text: str) -> list[str]:
    return [f.code for f in scxml.convert(text, {}, "chart.scxml").findings]


def two_regions(*moves: Move) -> Subtree:
    """p: region r1 (a, a2, final a_end) and region r2 (b, b2, final b_end)."""
    places = {
        "p": Place("p", "parallel", None, ("r1", "r2"), (), 0),
        "r1": Place("r1", "state", "p", ("a", "a2", "a_end"), ("a",), 1),
        "a": Place("a", "state", "r1", (), (), 2),
        "a2": Place("a2", "state", "r1", (), (), 3),
        "a_end": Place("a_end", "final", "r1", (), (), 4),
        "r2": Place("r2", "state", "p", ("b", "b2", "b_end"), ("b",), 5),
        "b": Place("b", "state", "r2", (), (), 6),
        "b2": Place("b2", "state", "r2", (), (), 7),
        "b_end": Place("b_end", "final", "r2", (), (), 8),
    }
    return Subtree("p", places, list(moves), lambda events, event: event in events)


def move(index: int, source: str, target: str = "", *, guarded: bool = False,
         event: str | None = "e") -> Move:
    return Move(index, source, None if event is None else (event,), guarded,
                (target,) if target else (), False)


class TestAlgorithm:
    def test_each_combination_of_conditions_is_one_selection(self) -> None:
        """Two regions each with a guarded transition on e: three selections (both, only
        the first, only the second); with neither condition nothing is selected, and the
        states above are asked, as SCXML does."""
        subtree = two_regions(move(0, "a", "a2", guarded=True), move(1, "b", "b2", guarded=True))
        found = {s.conditions: s.target for s in subtree.selections(subtree.default(), "e")}
        assert found == {
            ((0, True), (1, True)): frozenset({"p", "r1", "a2", "r2", "b2"}),
            ((0, True), (1, False)): frozenset({"p", "r1", "a2", "r2", "b"}),
            ((0, False), (1, True)): frozenset({"p", "r1", "a", "r2", "b2"}),
        }

    def test_exits_bodies_and_entries_keep_scxml_order(self) -> None:
        """Both regions move at once: both exits (reverse document order), then both
        bodies in document order, then both entries."""
        subtree = two_regions(move(0, "a", "a2"), move(1, "b", "b2"))
        (selection,) = subtree.selections(subtree.default(), "e")
        assert selection.kind is Kind.MOVE
        assert selection.exits == ("b", "a")
        assert selection.moves == (0, 1)
        assert [e.ident for e in selection.entries] == ["a2", "b2"]

    def test_a_region_left_from_inside_preempts_the_later_regions(self) -> None:
        """a's transition leaves p (its domain is above p); b's, later in document order,
        conflicts with it and is dropped: one selection, leaving by a's."""
        subtree = two_regions(move(0, "a", "outside"), move(1, "b", "b2"))
        (selection,) = subtree.selections(subtree.default(), "e")
        assert (selection.kind, selection.moves, selection.leaving) == (Kind.LEAVE, (0,), 0)

    def test_a_region_preempts_the_parallel_states_own_transition(self) -> None:
        """a takes its own transition; b, with none, finds p's (which leaves p): the two
        conflict and the one from the deeper source (a's) wins."""
        subtree = two_regions(move(0, "a", "a2"), move(1, "p", "outside"))
        (selection,) = subtree.selections(subtree.default(), "e")
        assert (selection.kind, selection.moves) == (Kind.MOVE, (0,))

    def test_a_transition_between_regions_exits_and_enters_the_parallel_state(self) -> None:
        """From a to b2 (another region): the domain is above p, which is left and entered
        again, each region at its default but r2 at b2."""
        subtree = two_regions(move(0, "a", "b2"))
        (selection,) = subtree.selections(subtree.default(), "e")
        assert selection.kind is Kind.REENTER
        assert selection.exits == ("b", "r2", "a", "r1", "p")
        assert [e.ident for e in selection.entries] == ["p", "r1", "a", "r2", "b2"]

    def test_the_last_region_to_end_raises_the_parallel_states_done(self) -> None:
        """Entering both finals: done.state.r1 as a_end is entered; done.state.r2 and then
        done.state.p as b_end completes the parallel state."""
        subtree = two_regions(move(0, "a", "a_end"), move(1, "b", "b_end"))
        (selection,) = subtree.selections(subtree.default(), "e")
        assert [(e.ident, e.done) for e in selection.entries] == [
            ("a_end", ("r1",)), ("b_end", ("r2", "p"))]

    def test_targets_two_states_of_one_region_make_no_configuration(self) -> None:
        """`a a2` (both in r1) is no configuration SCXML allows: refused, not flattened
        into one with two active children."""
        subtree = two_regions(Move(0, "b", ("e",), False, ("a", "a2"), False))
        with pytest.raises(NotFlat, match="'r1' active with 2 active children"):
            subtree.selections(subtree.default(), "e")

    def test_too_many_combinations_are_refused(self) -> None:
        """Past SELECTIONS_MAX combinations for one event the subtree is not flattened."""
        moves = [move(i, "a" if i % 2 else "b", "a2" if i % 2 else "b2", guarded=True)
                 for i in range(16)]
        subtree = two_regions(*moves)
        assert SELECTIONS_MAX < 9 * 9
        with pytest.raises(NotFlat, match="combinations"):
            subtree.selections(subtree.default(), "e")


class TestCharts:
    def test_regions_share_the_datamodel_and_read_each_other_with_in(self) -> None:
        """r2 waits, eventless, for r1's final and for the value r1's entry set: one
        datamodel and one configuration (a native region sees neither)."""
        text = chart('<parallel id="p"><onentry><raise event="go"/></onentry>'
                     '<state id="r1"><state id="a"><transition event="go" target="a_end"/>'
                     '</state><final id="a_end"><onentry><assign location="x" expr="1"/>'
                     '</onentry></final></state>'
                     '<state id="r2"><state id="b">'
                     '<transition cond="In(\'a_end\') and x == 1" target="b_end"/></state>'
                     '<final id="b_end"/></state>'
                     '<transition event="done.state.p" target="pass"/></parallel>',
                     data='<data id="x" expr="0"/>')
        assert ends(text) == "pass"
        assert "scxml-parallel" in codes(text)

    def test_a_region_left_from_inside_runs_every_exit_in_order(self) -> None:
        """A transition of r1 to a state outside exits b, r2, a, r1, then p, before its own
        body: the log x shows the order."""
        text = chart(
            '<parallel id="p"><onexit><assign location="x" expr="x + \'P\'"/></onexit>'
            '<state id="r1"><onexit><assign location="x" expr="x + \'1\'"/></onexit>'
            '<state id="a"><onexit><assign location="x" expr="x + \'a\'"/></onexit>'
            '<transition event="go" target="done">'
            '<assign location="x" expr="x + \'T\'"/></transition></state></state>'
            '<state id="r2"><onexit><assign location="x" expr="x + \'2\'"/></onexit>'
            '<state id="b"><onexit><assign location="x" expr="x + \'b\'"/></onexit>'
            '</state></state>'
            '<onentry><raise event="go"/></onentry></parallel>'
            '<state id="done"><transition cond="x == \'b2a1PT\'" target="pass"/>'
            '<transition target="fail"/></state>',
            data='<data id="x" expr="\'\'"/>')
        assert ends(text) == "pass"

    def test_a_transition_from_outside_enters_the_regions_it_names(self) -> None:
        """`target="a2 b2"` from outside enters p at those two states (the rest default),
        each entry action once, in document order."""
        text = (f'{HEAD} initial="s"><datamodel><data id="x" expr="\'\'"/></datamodel>'
                '<state id="s"><onentry><raise event="go"/></onentry>'
                '<transition event="go" target="a2 b2"/></state>'
                '<parallel id="p">'
                '<state id="r1"><state id="a"/><state id="a2"><onentry>'
                '<assign location="x" expr="x + \'a2\'"/><raise event="next"/></onentry>'
                '</state></state>'
                '<state id="r2"><state id="b"/><state id="b2"><onentry>'
                '<assign location="x" expr="x + \'b2\'"/></onentry>'
                '<transition event="next" cond="x == \'a2b2\'" target="pass"/>'
                '<transition event="next" target="fail"/></state></state></parallel>'
                '<final id="pass"/><final id="fail"/></scxml>')
        assert ends(text) == "pass"
        states = scxml.convert(text, {}, "chart.scxml").data["states"]
        assert "p.a2.b2" in states and "a2" not in states

    def test_the_simulator_runs_a_flattened_chart_to_its_end(self) -> None:
        """Under `run` (the simulator, its outbox delivered) the chart above that leaves a
        region from inside still passes."""
        text = chart('<parallel id="p"><onentry><raise event="go"/></onentry>'
                     '<state id="r1"><state id="a"><transition event="go" target="pass"/>'
                     '</state></state><state id="r2"><state id="b"/></state></parallel>')
        definition = load_definition(scxml.convert(text, {}, "chart.scxml").data)
        result = simulate(definition, 0, executions=1, plan=no_faults())
        assert result.final["x1"].state == "pass"


class TestKeptNative:
    def test_a_parallel_state_holding_history_keeps_the_native_meaning(self) -> None:
        """A `<history>` inside is not flattened: the native parallel state, and a warning
        that says why."""
        text = chart('<parallel id="p"><state id="r1"><history id="h"><transition target="a"/>'
                     '</history><state id="a"><transition event="go" target="a_end"/></state>'
                     '<final id="a_end"/></state>'
                     '<state id="r2"><state id="b"><transition event="go" target="b_end"/>'
                     '</state><final id="b_end"/></state>'
                     '<transition event="done.state.p" target="pass"/></parallel>')
        result = scxml.convert(text, {}, "chart.scxml")
        assert result.data["states"]["p"]["type"] == "parallel"
        (kept,) = [f for f in result.findings if f.code == "scxml-parallel-native"]
        assert "history state 'h'" in kept.message and kept.line is not None

    def test_too_many_configurations_keep_the_native_meaning(self) -> None:
        """Eight regions of two states, each moving on its own event, reach 256
        configurations, past the bound: kept native, said so (the same regions moving on
        one event reach two, and are flattened)."""
        regions = "".join(f'<state id="r{i}"><state id="a{i}"><transition event="go{{}}" '
                          f'target="e{i}"/></state><final id="e{i}"/></state>'
                          for i in range(8))
        text = chart(f'<parallel id="p">{regions.format(*range(8))}'
                     '<transition event="done.state.p" target="pass"/></parallel>')
        result = scxml.convert(text, {}, "chart.scxml")
        assert result.data["states"]["p"]["type"] == "parallel"
        together = chart('<parallel id="p"><onentry><raise event="go"/></onentry>'
                         f'{regions.format(*[""] * 8)}'
                         '<transition event="done.state.p" target="pass"/></parallel>')
        assert ends(together) == "pass" and "scxml-parallel-native" not in codes(together)
        assert any(f.code == "scxml-parallel-native" and "128 configurations" in f.message
                   for f in result.findings)


@pytest.fixture(scope="module")
def results() -> dict[str, w3c.W3CResult]:
    return {r.test: r for r in w3c.conformance(CORPUS)}


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"the W3C corpus is not at {CORPUS}")
@pytest.mark.parametrize("test", ["test234", "test310", "test364", "test403b", "test403c",
                                  "test404", "test405", "test406", "test413", "test417",
                                  "test504", "test533", "test570", "test576"])
def test_the_w3c_tests_of_parallel_states_pass(test: str,
                                               results: dict[str, w3c.W3CResult]) -> None:
    """Each W3C test with a parallel state passes, but test580 (a history inside one)."""
    assert results[test].passed, results[test].reason


class TestOddCharts:
    def test_a_parallel_outside_the_state_tree_is_not_flattened(self) -> None:
        """A `<parallel>` inside a foreign element or executable content is no state of the
        chart: never a crash (it was a KeyError), an import or a located refusal."""
        inner = ('<parallel id="q"><state id="r1"><state id="a"/></state>'
                 '<state id="r2"><state id="b"/></state></parallel>')
        foreign = (f'{HEAD} initial="s"><state id="s"><x:wrap xmlns:x="urn:x">{inner}</x:wrap>'
                   '<transition event="e" target="pass"/></state><final id="pass"/></scxml>')
        assert "q" not in scxml.convert(foreign, {}, "chart.scxml").data["states"]
        inside = foreign.replace('<x:wrap xmlns:x="urn:x">', "<onentry>").replace(
            "</x:wrap>", "</onentry>")
        with pytest.raises(DefinitionError, match="not executable content"):
            scxml.convert(inside, {}, "chart.scxml")

    def test_a_region_finals_donedata_that_fails_raises_error_execution(self) -> None:
        """A `<donedata>` that cannot be evaluated raises error.execution before the done
        event (with no data), as it does outside a parallel state."""
        text = chart('<parallel id="p"><onentry><raise event="go"/></onentry>'
                     '<state id="r1"><state id="a"><transition event="go" target="a_end"/>'
                     '</state><final id="a_end"><donedata><param name="v" location="nosuch"/>'
                     '</donedata></final></state><state id="r2"><state id="b"/></state>'
                     '<transition event="error.execution" target="pass"/>'
                     '<transition event="done.state.r1" target="fail"/></parallel>')
        assert ends(text) == "pass"

    def test_initial_states_in_a_nested_parallel_enter_all_their_regions(self) -> None:
        """`initial="x y"` naming states in two regions of a nested parallel enters both
        and nothing else (the spec adds descendants before ancestors)."""
        text = chart('<parallel id="p"><state id="r1" initial="x y">'
                     '<parallel id="q"><state id="q1"><state id="x0"/><state id="x"/></state>'
                     '<state id="q2"><state id="y0"/><state id="y"/></state></parallel>'
                     '</state><state id="r2"><state id="b">'
                     '<transition cond="In(\'x\') and In(\'y\') and not In(\'y0\')" '
                     'target="pass"/><transition target="fail"/></state></state></parallel>')
        assert ends(text) == "pass"

    def test_a_bounded_flattening_keeps_the_parallel_native(self, monkeypatch: Any) -> None:
        """Past the bound on what flattening may write (transitions and actions), the
        parallel state stays native, said so, instead of a definition without bound."""
        monkeypatch.setattr(flattening, "FLAT_MADE_MAX", 3)
        text = chart('<parallel id="p"><state id="r1"><state id="a">'
                     '<transition event="go" target="a_end"/></state><final id="a_end"/></state>'
                     '<state id="r2"><state id="b"><transition event="go" target="b_end"/>'
                     '</state><final id="b_end"/></state>'
                     '<transition event="done.state.p" target="pass"/></parallel>')
        result = scxml.convert(text, {}, "chart.scxml")
        assert result.data["states"]["p"]["type"] == "parallel"
        assert any(f.code == "scxml-parallel-native" and "would pass 3" in f.message
                   for f in result.findings)

    def test_charts_within_charts_are_converted_once_each(self, monkeypatch: Any) -> None:
        """A parallel kept native converts its chart again, but not the charts it invokes
        again with it: six levels of invokes, each with a parallel past the bound, take a
        bounded number of conversions (they were 2 to the 6th)."""
        regions = "".join(f'<state id="r{i}"><state id="a{i}"><transition event="go{i}" '
                          f'target="e{i}"/></state><final id="e{i}"/></state>'
                          for i in range(8))

        def level(depth: int) -> str:
            inner = f'<invoke id="k{depth}"><content>{level(depth - 1)}</content></invoke>' \
                if depth else ""
            return ('<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" '
                    f'datamodel="python" initial="s"><state id="s">{inner}'
                    '<transition event="go" target="p"/></state>'
                    f'<parallel id="p">{regions}<transition event="done.state.p" target="f"/>'
                    '</parallel><final id="f"/></scxml>')

        runs = []
        real = ChartConverter.run

        def counted(self: Any) -> dict[str, Any]:
            runs.append(self)
            return real(self)

        monkeypatch.setattr(ChartConverter, "run", counted)
        scxml.convert('<?xml version="1.0"?>' + level(6), {}, "chart.scxml")
        assert len(runs) <= 2 * 7
