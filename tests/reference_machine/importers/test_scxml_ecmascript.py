"""Tests of the SCXML importer's ECMAScript datamodel: each construct of JavaScript the
translation takes, run end to end on the reference machine (its meaning, not its text), the
W3C tests written for it, and the refusals of what it cannot say (located, named)."""

from __future__ import annotations

from pathlib import Path

import pytest
from corpus import CORPUS as SHARED

from reference_machine import DefinitionError, load_definition
from reference_machine.importers import scxml, w3c

CORPUS = SHARED / "scxml-w3c"
HEAD = ('<?xml version="1.0"?>\n<scxml xmlns="http://www.w3.org/2005/07/scxml" '
        'version="1.0" datamodel="ecmascript">')
TAIL = '<final id="pass"/><final id="fail"/></scxml>'


def chart(body: str) -> str:
    return f"{HEAD}\n{body}\n{TAIL}"


def ends(text: str) -> str:
    """Gives the state a chart's run ends in (driven as SCXML's event loop would)."""
    definition = load_definition(scxml.convert(text, {}, "chart.scxml").data)
    end = w3c.run_definition(definition)
    return end.state if end.final else f"stuck in {end.state}: {end.why}"


def decides(data: str, cond: str) -> str:
    """Gives where a chart goes from data items `data` (`id=expr;...`) on `cond`."""
    items = "".join(f'<data id="{i}" expr="{e}"/>' for i, e in
                    (pair.split("=", 1) for pair in data.split(";") if pair))
    return ends(chart(f"<datamodel>{items}</datamodel><state id=\"s0\">"
                      f'<transition cond="{cond}" target="pass"/>'
                      '<transition target="fail"/></state>'))


class TestTranslation:
    @pytest.mark.parametrize(("data", "cond", "expected"), [
        ("a=1;b=1", "a === b &amp;&amp; a !== 2", "pass"),
        ("a=1", "a == 2 || a != 1", "fail"),
        ("a=1", "!(a &gt; 1) &amp;&amp; a &lt;= 1 &amp;&amp; a &gt;= 1 &amp;&amp; a &lt; 2",
         "pass"),
        ("a=2", "a * 3 - 1 === 5 &amp;&amp; a / 4 === 0.5 &amp;&amp; 7 % a === 1", "pass"),
        ("a=[1, 2, 3]", "a.length === 3 &amp;&amp; a[0] + a[2] === 4", "pass"),
        ("a='x'", "a + 'y' === &quot;xy&quot;", "pass"),
        ("a=1", "(a === 1 ? 'one' : 'other') === 'one'", "pass"),
        ("a=-1", "Math.abs(a) === Math.max(0, 1)", "pass"),
    ])
    def test_operators_keep_their_meaning(self, data: str, cond: str, expected: str) -> None:
        """Comparison, logic, arithmetic, member and index reads, `.length`, the
        conditional and Math calls decide as JavaScript decides."""
        assert decides(data, cond) == expected

    @pytest.mark.parametrize(("data", "cond", "expected"), [
        ("a=[]", "a", "pass"),  # JavaScript: an empty array is true (Python: false)
        ("a=0", "a", "fail"),
        ("a=''", "!a", "pass"),
        ("a=null", "a", "fail"),
        ("a=undefined", "!a", "pass"),
        ("a=true;b=false", "a &amp;&amp; !b", "pass"),
    ])
    def test_conditions_use_javascript_truth(self, data: str, cond: str, expected: str
                                             ) -> None:
        """A cond is true as JavaScript holds it, not as Python does."""
        assert decides(data, cond) == expected

    @pytest.mark.parametrize(("data", "cond", "expected"), [
        ("a=0;b=7", "(a || b) === 7", "pass"),  # the operand that decides, not true
        ("a=3;b=7", "(a &amp;&amp; b) === 7", "pass"),
        ("a=3;b=7", "(a || b) === 3", "pass"),
    ])
    def test_logical_operators_give_the_deciding_operand(self, data: str, cond: str,
                                                         expected: str) -> None:
        """`a || b` as a value is `a` when `a` is true, else `b`, as in JavaScript."""
        assert decides(data, cond) == expected

    @pytest.mark.parametrize(("data", "cond", "expected"), [
        ("a=undefined", "typeof a === 'undefined'", "pass"),
        ("a=1", "typeof a === 'number' &amp;&amp; typeof a !== 'string'", "pass"),
        ("a='s'", "'string' == typeof a", "pass"),
        ("a=[1]", "typeof a === 'object'", "pass"),
        ("a=true", "typeof a === 'boolean'", "pass"),
        ("a=1", "typeof a === 'function'", "fail"),
    ])
    def test_typeof_compared_with_a_type_name(self, data: str, cond: str, expected: str
                                              ) -> None:
        """`typeof x === 'number'` (either side, `==`, `!==`) is a native type test."""
        assert decides(data, cond) == expected

    def test_event_fields_and_data(self) -> None:
        """`_event.name` and `_event.data.x` read the event delivered (W3C test 176)."""
        text = chart('<datamodel><data id="v"/></datamodel><state id="s0"><onentry>'
                     '<send event="go"><param name="x" expr="2"/></send></onentry>'
                     '<transition event="go" cond="_event.name === \'go\'" target="s1">'
                     '<assign location="v" expr="_event.data.x"/></transition></state>'
                     '<state id="s1"><transition cond="v === 2" target="pass"/>'
                     '<transition target="fail"/></state>')
        assert ends(text) == "pass"

    def test_not_an_expression_raises_error_execution_where_it_runs(self) -> None:
        """An assign of text that is no JavaScript expression raises error.execution when
        it runs, as SCXML does (W3C test 156's `return`), and is said with a warning."""
        text = chart('<datamodel><data id="v" expr="1"/></datamodel><state id="s0">'
                     '<onentry><assign location="v" expr="return"/></onentry>'
                     '<transition event="error.execution" target="pass"/>'
                     '<transition event="*" target="fail"/></state>')
        result = scxml.convert(text, {}, "chart.scxml")
        assert "scxml-static-error" in [f.code for f in result.findings]
        assert ends(text) == "pass"

    @pytest.mark.parametrize("test", ["test147", "test153", "test176", "test190", "test198",
                                      "test401"])
    def test_w3c_ecmascript_tests_pass(self, test: str) -> None:
        """The W3C tests written for the ECMAScript datamodel reach `pass`."""
        path = CORPUS / f"{test}.scxml"
        if not path.is_file():
            pytest.skip(f"the W3C corpus is not at {CORPUS}")
        assert ends(path.read_text(encoding="utf-8")) == "pass"


class TestRefusals:
    @pytest.mark.parametrize(("cond", "named"), [
        ("new Date() &gt; 0", "'new'"),
        ("a.indexOf(1) &gt; 0", "a call of a.indexOf()"),
        ("Math.floor(a) === 1", "a call of Math.floor()"),
        ("Math.PI &gt; 3", "Math.PI"),
        ("a = 1", "the operator '='"),
        ("a++ &gt; 1", "the operator '++'"),
        ("'x' in a", "the operator 'in'"),
        ("typeof a &gt; 'a'", "typeof"),
        ("(1, 2) === 2", "the comma operator"),
        ("a &lt; 1e999", "(Infinity)"),
        ("a &lt; 0x" + "f" * 80, "past 2**53"),
    ])
    def test_what_has_no_native_counterpart_is_refused_located(self, cond: str, named: str
                                                              ) -> None:
        """Valid JavaScript the native language cannot say is an error at its element that
        names what it is."""
        text = chart('<datamodel><data id="a" expr="1"/></datamodel>\n<state id="s0">'
                     f'<transition cond="{cond}" target="pass"/></state>')
        with pytest.raises(DefinitionError, match=r"error") as caught:
            scxml.convert(text, {}, "chart.scxml")
        finding = caught.value.findings[0]
        assert finding.code == "scxml-expression"
        assert finding.location == "scxml/state[@id='s0']/transition[1]"
        assert finding.line == 4
        assert named in finding.message, finding.message

    def test_an_object_literal_is_refused(self) -> None:
        """Native expressions build no mappings: `{a: 1}` is refused, said so."""
        text = chart('<datamodel><data id="a" expr="{b: 1}"/></datamodel>'
                     '<state id="s0"><transition target="pass"/></state>')
        with pytest.raises(DefinitionError, match=r"object literal"):
            scxml.convert(text, {}, "chart.scxml")

    def test_no_javascript_engine_is_used(self) -> None:
        """The translation reads JavaScript; nothing runs it (no engine is imported)."""
        files = list(Path(str(scxml.__file__)).parent.glob("*.py"))
        assert len(files) > 5  # the subpackage's modules, not only its __init__
        for file in files:
            source = file.read_text(encoding="utf-8")
            for engine in ("js2py", "quickjs", "dukpy", "py_mini_racer", "subprocess"):
                assert f"import {engine}" not in source, file.name
