"""Tests of `<invoke>`: an inline `<content>` chart is imported as a definition of its own and
run by the W3C driver as a session of its own (started once the invoking state's macrostep
ends, cancelled when the state is left, `done.invoke.ID` when it ends), with sends between
parent and child and `<finalize>`; what is not imported is refused, located; the simulator
starts no child."""

from __future__ import annotations

import pytest
from corpus import CORPUS as SHARED

from fault_injection import no_faults
from harness.sim.history import Delivered
from harness.sim.simulator import simulate
from reference_machine import DefinitionError, load_definition
from reference_machine.importers import scxml, w3c

CORPUS = SHARED / "scxml-w3c"
HEAD = ('<?xml version="1.0"?>\n<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" '
        'datamodel="python" initial="s0">')
TAIL = '<final id="pass"/><final id="fail"/></scxml>'


def chart(body: str) -> str:
    return f"{HEAD}\n{body}\n{TAIL}"


def child(body: str, **attrs: str) -> str:
    extra = "".join(f' {key}="{value}"' for key, value in attrs.items())
    return (f'<invoke type="scxml"{extra}><content><scxml version="1.0" datamodel="python">'
            f"{body}</scxml></content></invoke>")


def ends(text: str) -> str:
    definition = load_definition(scxml.convert(text, {}, "chart.scxml").data)
    end = w3c.run_definition(definition)
    return end.state if end.final else f"stuck in {end.state}: {end.why}"


class TestSessions:
    def test_a_child_sends_to_its_parent_and_its_end_is_done_invoke(self) -> None:
        """The child's `#_parent` send reaches the parent, with the invoke id as
        `_event.invokeid`; then `done.invoke.ID` once the child is final."""
        text = chart('<state id="s0">'
                     + child('<state id="c0"><onentry><send target="#_parent" event="hello"/>'
                             '</onentry><transition target="cf"/></state><final id="cf"/>',
                             id="kid")
                     + '<transition event="hello" cond="_event.invokeid == \'kid\'" '
                       'target="s1"/><transition event="*" target="fail"/></state>'
                       '<state id="s1"><transition event="done.invoke.kid" target="pass"/>'
                       '<transition event="*" target="fail"/></state>')
        result = scxml.convert(text, {}, "chart.scxml")
        assert set(result.data["context"][scxml.CHILDREN]) == {"kid"}
        assert "scxml-invoke" in [f.code for f in result.findings]  # said: driver only
        assert ends(text) == "pass"

    def test_params_and_namelist_set_the_childs_data(self) -> None:
        """`<param>` and `namelist` values replace the child's data of the same name."""
        text = chart('<datamodel><data id="n" expr="7"/></datamodel><state id="s0">'
                     + child('<datamodel><data id="n" expr="0"/><data id="p" expr="0"/>'
                             '</datamodel><state id="c0"><transition cond="n == 7 and p == 3" '
                             'target="cf"><send target="#_parent" event="ok"/></transition>'
                             '<transition target="cf"><send target="#_parent" event="bad"/>'
                             '</transition></state><final id="cf"/>',
                             namelist="n").replace("<content>", '<param name="p" expr="3"/>'
                                                   "<content>")
                     + '<transition event="ok" target="pass"/>'
                       '<transition event="bad" target="fail"/></state>')
        assert ends(text) == "pass"

    def test_the_parent_sends_to_its_child_by_invoke_id(self) -> None:
        """`<send target="#_ID">` reaches the child invoked as ID (W3C 347)."""
        text = chart('<state id="s0">'
                     + child('<state id="c0"><onentry><send target="#_parent" event="up"/>'
                             '</onentry><transition event="down" target="cf"/></state>'
                             '<final id="cf"/>', id="kid")
                     + '<state id="s01"><transition event="up" target="s02"/></state>'
                       '<state id="s02"><onentry><send target="#_kid" event="down"/></onentry>'
                       '<transition event="done.invoke" target="pass"/></state></state>')
        assert ends(text) == "pass"

    def test_leaving_the_state_cancels_the_child(self) -> None:
        """A child whose invoking state was left sends nothing more, and ends with no
        done.invoke."""
        text = chart('<state id="s0"><onentry><send event="go" delay="1s"/></onentry>'
                     + child('<state id="c0"><onentry><send target="#_parent" event="late" '
                             'delay="2s"/></onentry><transition event="never" target="cf"/>'
                             '</state><final id="cf"/>')
                     + '<transition event="go" target="s1"/></state>'
                       '<state id="s1"><onentry><send event="quiet" delay="3s"/></onentry>'
                       '<transition event="late" target="fail"/>'
                       '<transition event="done.invoke" target="fail"/>'
                       '<transition event="quiet" target="pass"/></state>')
        assert ends(text) == "pass"

    def test_an_invoke_of_a_state_left_in_the_same_macrostep_never_starts(self) -> None:
        """Invokes start once the macrostep ends: one whose state was already left does
        not start (its child's first send never arrives)."""
        text = chart('<state id="s0">'
                     + child('<state id="c0"><onentry><send target="#_parent" event="hi"/>'
                             '</onentry><transition event="never" target="cf"/></state>'
                             '<final id="cf"/>')
                     + '<transition target="s1"/></state>'
                       '<state id="s1"><onentry><send event="quiet" delay="1s"/></onentry>'
                       '<transition event="hi" target="fail"/>'
                       '<transition event="quiet" target="pass"/></state>')
        assert ends(text) == "pass"

    def test_autoforward_copies_external_events_to_the_child(self) -> None:
        """With autoforward, an external event the parent takes is also the child's."""
        text = chart('<state id="s0"><onentry><send event="ping"/></onentry>'
                     + child('<state id="c0"><transition event="ping" target="cf">'
                             '<send target="#_parent" event="pong"/></transition></state>'
                             '<final id="cf"/>', autoforward="true")
                     + '<transition event="ping"/>'
                       '<transition event="pong" target="pass"/></state>')
        assert ends(text) == "pass"
        assert ends(text.replace('autoforward="true"', 'autoforward="false"')).startswith(
            "stuck in s0")

    def test_finalize_runs_before_the_parent_takes_a_childs_event(self) -> None:
        """`<finalize>` runs on each event of the child, with its data, before the
        parent's transitions are chosen (W3C 233's construct); a `*` transition is not
        taken by the driver's own finalize event."""
        text = chart('<datamodel><data id="v" expr="1"/></datamodel><state id="s0">'
                     + child('<final id="cf"><onentry><send target="#_parent" event="up">'
                             '<param name="x" expr="2"/></send></onentry></final>')
                       .replace("</content>", '</content><finalize><assign location="v" '
                                              'expr="_event.data[\'x\']"/></finalize>')
                     + '<transition event="up" cond="v == 2" target="pass"/>'
                       '<transition event="*" target="fail"/></state>')
        assert ends(text) == "pass"

    def test_a_type_expression_naming_no_scxml_type_raises_error_execution(self) -> None:
        """`typeexpr` is known as the invoke starts: another type than SCXML's raises
        error.execution, and the child does not start (W3C 215 for the good case)."""
        text = chart('<datamodel><data id="t" expr="\'nonsense\'"/></datamodel>'
                     '<state id="s0">'
                     + child('<final id="cf"/>').replace('type="scxml"', 'typeexpr="t"')
                     + '<transition event="error.execution" target="pass"/>'
                       '<transition event="done.invoke" target="fail"/></state>')
        assert ends(text) == "pass"

    @pytest.mark.parametrize("test", ["test192", "test207", "test215", "test220", "test229",
                                      "test235", "test236", "test253", "test338", "test347",
                                      "test422", "test554"])
    def test_w3c_invoke_tests_pass(self, test: str) -> None:
        """W3C tests of invoke reach `pass`."""
        path = CORPUS / f"{test}.scxml"
        if not path.is_file():
            pytest.skip(f"the W3C corpus is not at {CORPUS}")
        assert ends(path.read_text(encoding="utf-8")) == "pass"


class TestContentExpr:
    CHART = '<assign location="v"><scxml version="1.0"><final id="cf"/></scxml></assign>'

    def text(self, before: str, more: str = "") -> str:
        return chart(f'<datamodel><data id="v" expr="1"/></datamodel><state id="s0">'
                     f'<onentry>{before}</onentry>\n'
                     '<invoke type="scxml"><content expr="v"/></invoke>'
                     '<transition event="done.invoke" target="pass"/>'
                     '<transition event="*" target="fail"/></state>' + more)

    def test_a_chart_assigned_then_given_as_content_is_invoked(self) -> None:
        """An `<assign>` holding an `<scxml>` chart sets a handle of it; the invoke's
        `<content expr>` starts that chart (W3C 530)."""
        result = scxml.convert(self.text(self.CHART), {}, "chart.scxml")
        assert list(result.data["context"][scxml.CHILDREN]) == ["s0.invoke1#1"]
        assert "scxml-assign-chart" in [f.code for f in result.findings]
        assert ends(self.text(self.CHART)) == "pass"
        path = CORPUS / "test530.scxml"
        if path.is_file():
            assert ends(path.read_text(encoding="utf-8")) == "pass"

    def test_content_that_is_no_chart_as_it_starts_raises_error_execution(self) -> None:
        """Before the assign (the item is still 1) the invoke cannot start."""
        text = chart('<datamodel><data id="v" expr="1"/></datamodel><state id="s0">'
                     '<invoke type="scxml"><content expr="v"/></invoke>'
                     '<transition event="error.execution" target="pass"/>'
                     '<transition event="*" target="fail"/></state>'
                     f'<state id="s9"><onentry>{self.CHART}</onentry></state>')
        assert ends(text) == "pass"

    @pytest.mark.parametrize(("more", "code", "line"), [
        ('<state id="s8"><transition cond="v == 1" target="pass"/></state>', "scxml-assign", 3),
        ('<state id="s8"><onentry><send event="e"><content expr="v"/></send></onentry>'
         '</state>', "scxml-assign", 3),
        ('<state id="s8"><onentry><assign location="v" expr="v + 1"/></onentry></state>',
         "scxml-assign", 3),
    ])
    def test_a_chart_read_other_than_by_an_invoke_is_refused(self, more: str, code: str,
                                                              line: int) -> None:
        """The handle stands for the chart only where nothing else reads the item: a cond,
        a send's content, an expression reading it refuse the assign, located."""
        with pytest.raises(DefinitionError, match=r"error") as caught:
            scxml.convert(self.text(self.CHART, more), {}, "chart.scxml")
        finding = caught.value.findings[0]
        assert finding.code == code and finding.line == line, finding
        assert finding.location == "scxml/state[@id='s0']/onentry[1]/assign[1]"

    def test_content_of_an_item_set_by_an_expression_is_refused(self) -> None:
        """A `<content expr>` whose item an expression sets is not known at import."""
        text = self.text('<assign location="v" expr="_sessionid"/>')
        with pytest.raises(DefinitionError, match=r"error") as caught:
            scxml.convert(text, {}, "chart.scxml")
        finding = caught.value.findings[0]
        assert finding.code == "scxml-invoke" and finding.line == 4
        assert "<content expr='v'> is refused" in finding.message


class TestRefusals:
    @pytest.mark.parametrize(("invoke", "named"), [
        ('<invoke type="scxml" src="file:other.scxml"/>', "reads no other file"),
        ('<invoke type="http://example.com/bpel"><content><scxml/></content></invoke>',
         "only SCXML charts"),
        ('<invoke type="scxml"><content>text</content></invoke>', "one inline <content>"),
    ])
    def test_what_is_not_imported_is_refused_located(self, invoke: str, named: str) -> None:
        """An invoke the import cannot run is an error at the `<invoke>`, said why."""
        text = chart(f'<datamodel><data id="x"/></datamodel><state id="s0">\n{invoke}'
                     '<transition event="done.invoke" target="pass"/></state>')
        with pytest.raises(DefinitionError, match=r"error") as caught:
            scxml.convert(text, {}, "chart.scxml")
        finding = caught.value.findings[0]
        assert finding.code == "scxml-invoke"
        assert finding.location == "scxml/state[@id='s0']/invoke[1]" and finding.line == 4
        assert named in finding.message, finding.message

    def test_an_error_in_the_child_is_located_in_the_parent_document(self) -> None:
        """The child chart's own errors name their place inside the parent's file."""
        text = chart('<state id="s0">'
                     + child('<state id="c0"><transition target="nowhere"/></state>')
                     + '<transition event="done.invoke" target="pass"/></state>')
        with pytest.raises(DefinitionError, match=r"error") as caught:
            scxml.convert(text, {}, "chart.scxml")
        finding = caught.value.findings[0]
        assert finding.code == "scxml-unknown-target"
        assert finding.location.startswith("scxml/state[@id='s0']/invoke[1]/content[1]/scxml")


class TestUnderTheSimulator:
    def test_no_child_is_started_and_nothing_of_it_is_delivered(self) -> None:
        """The simulator runs no child session: the invoke's outbox entries are no events,
        and a chart that waits for its child waits (as the import's warning says)."""
        text = chart('<state id="s0">'
                     + child('<final id="cf"/>', id="kid")
                     + '<transition event="done.invoke.kid" target="pass"/></state>')
        definition = load_definition(scxml.convert(text, {}, "chart.scxml").data)
        result = simulate(definition, 0, executions=1, plan=no_faults(), steps_max=50,
                          liveness_steps=0)
        assert result.ok
        assert [r for r in result.history if isinstance(r, Delivered)
                and r.via in ("raised", "sent")] == []
