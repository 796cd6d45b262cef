"""Malformed workflow definitions: each must be refused with a located, explained error.

Every case mutates a deep copy of one small valid definition (or writes YAML/JSON text where
syntax or line numbers matter) and checks that `load_definition` raises `DefinitionError` whose
message names both where the problem is and what it is, plus the finding's code and ids.
"""

from __future__ import annotations

import copy
import math
import re
import socket
import textwrap
from pathlib import Path
from typing import Any

import pytest
from driving import Run
from small_workflow import base as _base
from small_workflow import step_of as _step

from reference_machine import (
    Decision,
    DefinitionError,
    DefinitionSyntaxError,
    Finding,
    GuardError,
    Rejected,
    RejectReason,
    Severity,
    Transition,
    WorkflowDefinition,
    lint,
    load_definition,
)
from reference_machine._expr import ExpressionSyntaxError, compile_expression


def _with_approval(data: dict[str, Any]) -> dict[str, Any]:
    """Routes `start` through an approval wait state that gates `work` (needs_approval)."""
    data["states"]["start"]["on"] = {"go": "approve"}
    data["states"]["approve"] = {
        "type": "wait",
        "approval": {
            "for_state": "work",
            "summary": "Run the call for {count}",
            "roles": ["supervisor"],
            "expires_after": "1h",
        },
        "on": {"approval.granted": "work", "approval.denied": "failed"},
    }
    data["states"]["work"]["step"]["needs_approval"] = True
    return data


def _with_code(exc: DefinitionError, code: str) -> Finding:
    """Gives the first finding with `code` (findings are ordered by line, not by check)."""
    matches = [finding for finding in exc.findings if finding.code == code]
    assert matches, f"no {code!r} finding in {[f.code for f in exc.findings]}"
    return matches[0]


def _yaml(text: str) -> str:
    """Gives dedented YAML text (it contains newlines, so it is read as text, not a path)."""
    return textwrap.dedent(text).lstrip("\n")


# -- sanity ------------------------------------------------------------------------------------


def test_base_definition_is_valid() -> None:
    """The base every case mutates loads cleanly, so each error below comes from its mutation."""
    definition = load_definition(_base())
    assert isinstance(definition, WorkflowDefinition)
    assert definition.initial == "start"
    assert lint(_base()) == []


def test_base_with_approval_is_valid() -> None:
    """The approval variant of the base loads cleanly too."""
    definition = load_definition(_with_approval(_base()))
    assert definition.states["approve"].approval is not None


# -- unreadable input --------------------------------------------------------------------------


def test_malformed_yaml_is_a_syntax_error_with_line() -> None:
    """An unclosed flow mapping is a DefinitionSyntaxError that names the line."""
    text = _yaml("""
        name: wf
        states:
          start: {initial: true
    """)
    with pytest.raises(DefinitionSyntaxError,
                       match=r"line \d+: YAML syntax: .*flow mapping") as info:
        load_definition(text)
    finding = _with_code(info.value, "unreadable")
    assert finding.severity is Severity.ERROR
    assert finding.line is not None and finding.line >= 3


def test_bad_yaml_indentation_is_a_syntax_error() -> None:
    """A mapping value where none is allowed is reported at its line (line 2)."""
    with pytest.raises(DefinitionSyntaxError,
                       match=r"line 2: YAML syntax: mapping values are not allowed here"):
        load_definition("name: wf\n  bad: indent\n")


def test_malformed_json_is_a_syntax_error_with_line_and_column() -> None:
    """JSON text with a missing value names the line and column of the problem."""
    text = '{"name": "wf",\n "states": }\n'
    with pytest.raises(DefinitionSyntaxError,
                       match=r"line 2: JSON syntax: Expecting value \(column 12\) "
                             r"\[unreadable\]"):
        load_definition(text)


def test_malformed_json_file(tmp_path: Path) -> None:
    """A .json file with a trailing comma is read as JSON and refused with its name and line."""
    path = tmp_path / "broken.json"
    path.write_text('{\n  "name": "wf",\n  "states": {},\n}\n', encoding="utf-8")
    with pytest.raises(DefinitionSyntaxError,
                       match=r"broken\.json: 1 error.*\n  line 4: JSON syntax: .*\[unreadable\]"):
        load_definition(path)


def test_duplicate_key_in_json_text() -> None:
    """JSON objects with a repeated key are refused instead of keeping the last value."""
    with pytest.raises(DefinitionSyntaxError, match=r"duplicate key 'name' \[unreadable\]"):
        load_definition('{"name": "wf",\n "name": "other", "states": {}}\n')


def test_empty_file(tmp_path: Path) -> None:
    """An empty YAML file is unreadable: there is no definition in it."""
    path = tmp_path / "empty.yaml"
    path.write_text("", encoding="utf-8")
    with pytest.raises(DefinitionSyntaxError,
                       match=r"empty\.yaml: 1 error.*\n  the file is empty; expected a workflow "
                             r"definition mapping \[unreadable\]"):
        load_definition(path)


def test_comment_only_text_is_empty() -> None:
    """YAML text holding only a comment is as empty as an empty file."""
    with pytest.raises(DefinitionSyntaxError, match=r"<text>: 1 error.*\n  the file is empty"):
        load_definition("# nothing here\n")


def test_missing_file_path() -> None:
    """A path (str ending in .yaml) to no file is a DefinitionSyntaxError naming the path."""
    missing = "/nonexistent/dir/workflow.yaml"
    with pytest.raises(DefinitionSyntaxError,
                       match=r"/nonexistent/dir/workflow\.yaml: 1 error.*\n  file not found"):
        load_definition(missing)


def test_missing_file_as_path_object(tmp_path: Path) -> None:
    """A `Path` to no file is refused the same way, with the path as the source."""
    path = tmp_path / "nope.yml"
    with pytest.raises(DefinitionSyntaxError,
                       match=r"nope\.yml: 1 error.*\n  file not found \[unreadable\]") as info:
        load_definition(path)
    assert info.value.source == str(path)


def test_top_level_list() -> None:
    """A YAML list is read but is not a definition: not-a-mapping, not a syntax error."""
    with pytest.raises(DefinitionError,
                       match=r"\n  expected a mapping with name, states, \.\.\., got list "
                             r"\[not-a-mapping\]") as info:
        load_definition("- start\n- done\n")
    assert not isinstance(info.value, DefinitionSyntaxError)
    assert info.value.findings[0].code == "not-a-mapping"


def test_duplicate_state_names_in_yaml_name_both_lines() -> None:
    """A state defined twice is a duplicate key naming the second line and the first."""
    text = _yaml("""
        name: wf
        events:
          go: {}
        states:
          start:
            initial: true
            on: {go: done}
          done: {type: final, outcome: success}
          start:
            on: {go: done}
    """)
    with pytest.raises(DefinitionSyntaxError,
                       match=r"line 9: states\.start: duplicate key 'start' \(first on line 5\) "
                             r"\[duplicate-key\]") as info:
        load_definition(text)
    finding = _with_code(info.value, "duplicate-key")
    assert finding.ids == ("start",)
    assert finding.line == 9
    assert info.value.location == "states.start"


def test_syntax_error_class_hierarchy() -> None:
    """DefinitionSyntaxError is a DefinitionError and a ValueError, so one except catches all."""
    with pytest.raises(ValueError, match=r"YAML syntax") as info:
        load_definition("name: [wf\n")
    assert isinstance(info.value, DefinitionSyntaxError)
    assert isinstance(info.value, DefinitionError)


# -- schema: unknown keys and wrong types ------------------------------------------------------


def test_unknown_key_with_did_you_mean() -> None:
    """`targt` under `after` is unknown, suggests `target`, and `target` is reported missing."""
    data = _base()
    data["states"]["start"]["after"] = {"delay": "5m", "targt": "done"}
    with pytest.raises(DefinitionError,
                       match=r"states\.start\.after\.targt: unknown key 'targt' "
                             r"\(did you mean 'target'\?\) \[schema\]") as info:
        load_definition(data)
    codes = {f.location: f for f in info.value.findings}
    assert codes["states.start.after.targt"].ids == ("targt",)
    assert "missing required key 'target'" in codes["states.start.after.target"].message


def test_known_key_in_wrong_place() -> None:
    """A real keyword used where it does not belong (`outcome` in a step) is 'not allowed here'."""
    data = _base()
    _step(data)["outcome"] = "success"
    with pytest.raises(DefinitionError,
                       match=r"states\.work\.step\.outcome: key 'outcome' is not allowed here"):
        load_definition(data)


def test_string_where_int_expected() -> None:
    """`attempts_max: "three"` is a schema error at the retry key, quoting the bad value."""
    data = _base()
    _step(data)["retry"] = {"attempts_max": "three"}
    with pytest.raises(DefinitionError,
                       match=r"states\.work\.step\.retry\.attempts_max: Input should be a valid "
                             r"integer.*\(got 'three'\) \[schema\]") as info:
        load_definition(data)
    assert info.value.location == "states.work.step.retry.attempts_max"


def test_missing_name() -> None:
    """A definition without `name` says which required key is missing."""
    data = _base()
    del data["name"]
    with pytest.raises(DefinitionError, match=r"\n  name: missing required key 'name' \[schema\]"):
        load_definition(data)


def test_bad_state_type() -> None:
    """`type: terminal` is not one of normal, wait, final."""
    data = _base()
    data["states"]["done"]["type"] = "terminal"
    with pytest.raises(DefinitionError,
                       match=r"states\.done\.type: Input should be 'normal', 'wait', 'final', "
                             r"'choice', 'parallel' or 'map'"):
        load_definition(data)


def test_bad_duration_string() -> None:
    """`5 parsecs` is not a duration; the error sits on the `after.delay` key."""
    data = _base()
    data["states"]["start"]["after"] = {"delay": "5 parsecs", "target": "done"}
    with pytest.raises(DefinitionError,
                       match=r"states\.start\.after\.delay: .*expected a duration such as 30, "
                             r"'30s', '5m', '2h' or '1d', got '5 parsecs'"):
        load_definition(data)


def test_negative_duration() -> None:
    """A negative number of seconds is not a duration."""
    data = _base()
    _step(data)["timeout"] = -5
    with pytest.raises(DefinitionError,
                       match=r"states\.work\.step\.timeout: .*duration of zero or more, got -5"):
        load_definition(data)


def test_guard_of_wrong_type() -> None:
    """A guard that is a number is none of expression, function reference or callable."""
    data = _base()
    data["states"]["start"]["on"]["go"] = {"target": "work", "guard": 5}
    with pytest.raises(DefinitionError,
                       match=r"states\.start\.on\.go\.guard: expected one of: .*valid string"):
        load_definition(data)


# -- initial states and hierarchy --------------------------------------------------------------


def test_zero_initial_states() -> None:
    """No `initial: true` at the top level lists the candidates."""
    data = _base()
    del data["states"]["start"]["initial"]
    with pytest.raises(DefinitionError,
                       match=r"\n  states: the top level has no initial state; mark exactly one "
                             r"of done, failed, start, work") as info:
        load_definition(data)
    assert _with_code(info.value, "initial-count").ids == ("start", "work", "done", "failed")


def test_two_initial_states() -> None:
    """Two `initial: true` at the top level are named, both."""
    data = _base()
    data["states"]["work"]["initial"] = True
    with pytest.raises(DefinitionError,
                       match=r"\n  states: the top level has 2 initial states \(start, work\); "
                             r"exactly one may be initial \[initial-count\]") as info:
        load_definition(data)
    assert _with_code(info.value, "initial-count").ids == ("start", "work")


def test_compound_parent_without_initial_child() -> None:
    """A compound state whose children are none of them initial is refused at the parent."""
    data = _base()
    data["states"]["start"]["on"] = {"go": "group"}
    data["states"]["group"] = {}
    data["states"]["g1"] = {"parent": "group", "on": {"go": "g2"}}
    data["states"]["g2"] = {"parent": "group", "on": {"go": "work"}}
    with pytest.raises(DefinitionError,
                       match=r"states\.group: compound state 'group' has no initial state; mark "
                             r"exactly one of g1, g2") as info:
        load_definition(data)
    assert _with_code(info.value, "initial-count").ids == ("g1", "g2")


def test_compound_parent_cycle() -> None:
    """a.parent = b and b.parent = a is a cycle, reported with its path."""
    data = _base()
    data["states"]["p1"] = {"parent": "p2"}
    data["states"]["p2"] = {"parent": "p1"}
    with pytest.raises(DefinitionError,
                       match=r"states\.p1\.parent: compound parents form a cycle: "
                             r"p1 -> p2 -> p1 \[parent-cycle\]") as info:
        load_definition(data)
    cycles = [f for f in info.value.findings if f.code == "parent-cycle"]
    assert {f.location for f in cycles} == {"states.p1.parent", "states.p2.parent"}
    assert cycles[0].ids in {("p1", "p2"), ("p2", "p1")}


def test_unknown_parent_with_did_you_mean() -> None:
    """A parent that does not exist suggests the closest state name."""
    data = _base()
    data["states"]["work"]["parent"] = "strat"
    with pytest.raises(DefinitionError,
                       match=r"states\.work\.parent: parent state 'strat' does not exist "
                             r"\(did you mean 'start'\?\) \[unknown-parent\]"):
        load_definition(data)


def test_parent_with_a_step_is_not_a_plain_compound() -> None:
    """A state with a step cannot be a compound parent."""
    data = _base()
    data["states"]["child"] = {"parent": "work", "initial": True, "on": {"go": "done"}}
    pattern = r"states\.child\.parent: parent 'work' .*step.*plain normal, parallel or map state"
    with pytest.raises(DefinitionError, match=pattern) as info:
        load_definition(data)
    assert _with_code(info.value, "bad-parent").ids == ("work", "child")


# -- targets, finals, waits --------------------------------------------------------------------


def test_unknown_target_with_did_you_mean() -> None:
    """A transition to a state that does not exist suggests the closest name."""
    data = _base()
    data["states"]["start"]["on"]["go"] = "wrok"
    with pytest.raises(DefinitionError,
                       match=r"states\.start\.on\.go\.target: target state 'wrok' does not exist "
                             r"\(did you mean 'work'\?\) \[unknown-target\]") as info:
        load_definition(data)
    assert _with_code(info.value, "unknown-target").ids == ("wrok",)


def test_unknown_after_target() -> None:
    """An `after` timeout to a missing state is located at `after.target`."""
    data = _base()
    data["states"]["start"]["after"] = {"delay": "1h", "target": "timed_out"}
    with pytest.raises(DefinitionError,
                       match=r"states\.start\.after\.target: target state 'timed_out' does not "
                             r"exist"):
        load_definition(data)


def test_transition_out_of_final_state() -> None:
    """A final state accepts nothing, so an `on:` there is refused."""
    data = _base()
    data["states"]["done"]["on"] = {"go": "start"}
    with pytest.raises(DefinitionError,
                       match=r"states\.done\.on: final state 'done' may not have `on`: a final "
                             r"state accepts nothing \[final-exit\]") as info:
        load_definition(data)
    assert _with_code(info.value, "final-exit").ids == ("done",)


def test_final_with_after_timer() -> None:
    """A final state with an `after` timeout is refused too."""
    data = _base()
    data["states"]["done"]["after"] = {"delay": "1m", "target": "start"}
    with pytest.raises(DefinitionError,
                       match=r"states\.done\.after: final state 'done' may not have `after`"):
        load_definition(data)


def test_final_without_outcome() -> None:
    """A final state must say how the run ended."""
    data = _base()
    del data["states"]["done"]["outcome"]
    with pytest.raises(DefinitionError,
                       match=r"states\.done\.outcome: final state 'done' needs an outcome "
                             r"\(success, failure, \.\.\.\) \[final-outcome\]"):
        load_definition(data)


def test_outcome_on_non_final_state() -> None:
    """Only final states may carry an outcome."""
    data = _base()
    data["states"]["start"]["outcome"] = "success"
    with pytest.raises(DefinitionError,
                       match=r"states\.start\.outcome: only final states have an outcome; 'start' "
                             r"is wait \[outcome-not-final\]"):
        load_definition(data)


def test_wait_state_without_timeout() -> None:
    """A wait state with neither `after` nor an approval could wait forever."""
    data = _base()
    del data["states"]["start"]["after"]
    with pytest.raises(DefinitionError,
                       match=r"states\.start\.after: wait state 'start' has no timeout; "
                             r"expected `after: \{delay: \.\.\., target: \.\.\.\}` "
                             r"\[wait-timeout\]") as info:
        load_definition(data)
    assert _with_code(info.value, "wait-timeout").ids == ("start",)


def test_wait_state_with_step() -> None:
    """A wait state suspends the run and may not run a step."""
    data = _base()
    data["states"]["work"]["type"] = "wait"
    data["states"]["work"]["after"] = {"delay": "1h", "target": "failed"}
    with pytest.raises(DefinitionError,
                       match=r"states\.work\.step: wait state 'work' suspends the run and may not "
                             r"run a step"):
        load_definition(data)


# -- graph -------------------------------------------------------------------------------------


def test_trap_state() -> None:
    """A non-final state with no way out is a trap."""
    data = _base()
    data["states"]["work"]["on"]["step.succeeded"] = "stuck"
    data["states"]["stuck"] = {"description": "nothing leaves"}
    pattern = (
        r"states\.stuck: state 'stuck' is not final and has no way out "
        r"\(no transition, timeout or escalation leaves it\) \[trap-state\]"
    )
    with pytest.raises(DefinitionError, match=pattern) as info:
        load_definition(data)
    assert _with_code(info.value, "trap-state").ids == ("stuck",)


def test_unreachable_state() -> None:
    """A state no transition leads to cannot be reached from the initial state."""
    data = _base()
    data["states"]["orphan"] = {"type": "final", "outcome": "lost"}
    with pytest.raises(DefinitionError,
                       match=r"states\.orphan: state 'orphan' cannot be reached from the initial "
                             r"state 'start' \[unreachable-state\]") as info:
        load_definition(data)
    assert _with_code(info.value, "unreachable-state").ids == ("orphan",)


def test_no_final_state_reachable() -> None:
    """start and work loop into each other; neither final can ever be reached."""
    data = _base()
    data["states"]["start"] = {"initial": True, "on": {"go": "work"}}
    data["states"]["work"] = {"on": {"go": "start"}}
    with pytest.raises(DefinitionError,
                       match=r"\n  states: no final state can be reached from the initial state "
                             r"'start' \(a workflow that runs until it is stopped says "
                             r"`reactive: true`\) \[no-final\]") as info:
        load_definition(data)
    assert _with_code(info.value, "no-final").ids == ("start",)
    unreachable = {f.ids for f in info.value.findings if f.code == "unreachable-state"}
    assert unreachable == {("done",), ("failed",)}


def test_loop_with_no_way_to_a_final() -> None:
    """A reachable loop (spin1 <-> spin2) from which no final is reachable is refused."""
    data = _base()
    data["states"]["start"]["on"]["go"] = [
        {"target": "spin1", "guard": "context.vip"},
        {"target": "work"},
    ]
    data["states"]["spin1"] = {"on": {"go": "spin2"}}
    data["states"]["spin2"] = {"on": {"go": "spin1"}}
    pattern = (
        r"states\.spin1: no final state can be reached from state 'spin1' "
        r"\(it loops among spin1, spin2 forever\) \[no-way-to-final\]"
    )
    with pytest.raises(DefinitionError, match=pattern) as info:
        load_definition(data)
    stuck = {f.ids for f in info.value.findings if f.code == "no-way-to-final"}
    assert stuck == {("spin1",), ("spin2",)}


# -- guards and actions ------------------------------------------------------------------------


def _guarded(guard: object) -> dict[str, Any]:
    """Gives the base with `start --go--> work` guarded by `guard`."""
    data = _base()
    data["states"]["start"]["on"]["go"] = {"target": "work", "guard": guard}
    return data


def test_guard_syntax_error() -> None:
    """A guard that does not parse is refused at its location, quoting the guard."""
    with pytest.raises(DefinitionError,
                       match=r"states\.start\.on\.go\.guard: guard 'context\.count >'.*invalid "
                             r"syntax \[bad-guard\]"):
        load_definition(_guarded("context.count >"))


def test_guard_dunder_import() -> None:
    """`__import__('os')` is a call outside the whitelist."""
    with pytest.raises(DefinitionError,
                       match=r"states\.start\.on\.go\.guard: guard \"__import__\('os'\)\" at "
                             r"column 1: only these functions may be called: abs, at, format, has, "
                             r"is_bool, is_list, is_number, is_object, is_string, json_text, "
                             r"json_value, len, max, merge, min, number_range, round, slice, "
                             r"split"):
        load_definition(_guarded("__import__('os')"))


def test_guard_bare_dunder_import_name() -> None:
    """A bare `__import__` name is not context or event."""
    with pytest.raises(DefinitionError,
                       match=r"states\.start\.on\.go\.guard: .*unknown name '__import__'; "
                             r"expressions read only context and event"):
        load_definition(_guarded("__import__ is None"))


def test_guard_name_os() -> None:
    """`os.name` reads a name that is neither context nor event."""
    with pytest.raises(DefinitionError,
                       match=r"states\.start\.on\.go\.guard: .*unknown name 'os'; expressions read "
                             r"only context and event \[bad-guard\]"):
        load_definition(_guarded("os.name == 'posix'"))


def test_guard_private_attribute() -> None:
    """An attribute starting with `_` (`context.__class__`) is refused."""
    with pytest.raises(DefinitionError,
                       match=r"states\.start\.on\.go\.guard: guard 'context\.__class__' at column "
                             r"1: name '__class__' is not allowed \[bad-guard\]"):
        load_definition(_guarded("context.__class__"))


def test_guard_power_operator() -> None:
    """`**` is not a whitelisted operator (it could build enormous numbers)."""
    with pytest.raises(DefinitionError,
                       match=r"states\.start\.on\.go\.guard: .*operator Pow is not allowed"):
        load_definition(_guarded("context.count ** 2 > 1"))


def test_guard_lambda() -> None:
    """A lambda is not an expression node on the whitelist."""
    with pytest.raises(DefinitionError,
                       match=r"states\.start\.on\.go\.guard: .*Lambda is not allowed in an "
                             r"expression"):
        load_definition(_guarded("lambda: True"))


def test_guard_calls_open() -> None:
    """Calling `open` is refused: only len, abs, min, max and round may be called."""
    with pytest.raises(DefinitionError,
                       match=r"states\.start\.on\.go\.guard: .*only these functions may be called"):
        load_definition(_guarded("open('/etc/passwd')"))


def test_guard_unknown_event_field() -> None:
    """`event.secret` is not one of the event's readable fields."""
    with pytest.raises(DefinitionError,
                       match=r"states\.start\.on\.go\.guard: .*event has no field 'secret'"):
        load_definition(_guarded("event.secret == 1"))


def test_guard_unknown_registered_function() -> None:
    """A `function:` guard naming nothing registered suggests a close registered name."""
    data = _guarded({"function": "zz_is_vipp"})

    def zz_is_vip(context: Any, event: Any) -> bool:
        return True

    pattern = (
        r"states\.start\.on\.go\.guard: function 'zz_is_vipp' is not "
        r"registered \(did you mean 'zz_is_vip'\?\); pass it in `functions=`"
    )
    with pytest.raises(DefinitionError, match=pattern) as info:
        load_definition(data, functions={"zz_is_vip": zz_is_vip})
    assert _with_code(info.value, "unknown-function").ids == ("zz_is_vipp",)


def test_bad_action_expression() -> None:
    """An `assign` expression that does not parse is refused at its key."""
    data = _base()
    data["states"]["start"]["on"]["go"] = {
        "target": "work",
        "actions": [{"assign": {"count": "context.count +"}}],
    }
    with pytest.raises(DefinitionError,
                       match=r"states\.start\.on\.go\.actions\[0\]\.assign\.count: expression "
                             r"'context\.count \+'.*invalid syntax \[bad-expression\]") as info:
        load_definition(data)
    assert _with_code(info.value, "bad-expression").ids == ("count",)


def test_action_with_both_assign_and_function() -> None:
    """An action is exactly one of `assign` or `function`."""
    data = _base()
    data["states"]["start"]["on"]["go"] = {
        "target": "work",
        "actions": [{"assign": {"count": "1"}, "function": "bump"}],
    }
    with pytest.raises(DefinitionError,
                       match=r"states\.start\.on\.go\.actions\[0\]: an action has exactly one of "
                             r"`assign` or `function` \[bad-action\]"):
        load_definition(data, functions={"bump": lambda context, event: None})


@pytest.mark.parametrize("text", ["=event.payload.amount", "=context.count + event.payload.n",
                                  "=event"])
def test_a_step_input_that_reads_the_event_is_refused(text: str) -> None:
    """A step's input is made when the step is called, with no event at hand: reading one was
    accepted at load and failed at run time (the entering event refused)."""
    data = _base()
    _step(data)["input"] = {"n": {"deep": text}}
    with pytest.raises(DefinitionError,
                       match=r"states\.work\.step\.input\.n\.deep: expression at column \d+: "
                             r"a step's input reads only context: .*\[bad-expression\]"):
        load_definition(data)
    _step(data)["input"] = {"n": "=context.count"}
    assert load_definition(data).states["work"].step is not None


def test_bad_step_input_expression() -> None:
    """A step input starting with '=' must be a valid expression."""
    data = _base()
    _step(data)["input"] = {"n": "=context.count )"}
    with pytest.raises(DefinitionError,
                       match=r"states\.work\.step\.input\.n: expression.*\[bad-expression\]"):
        load_definition(data)


# -- retry policy ------------------------------------------------------------------------------


def test_retry_attempts_max_zero() -> None:
    """Zero attempts would never run the step."""
    data = _base()
    _step(data)["retry"] = {"attempts_max": 0}
    with pytest.raises(DefinitionError,
                       match=r"states\.work\.step\.retry\.attempts_max: attempts_max must be at "
                             r"least 1, got 0 \[retry-bounds\]") as info:
        load_definition(data)
    assert _with_code(info.value, "retry-bounds").ids == ("work",)


def test_retry_attempts_max_over_bound() -> None:
    """More than 100 attempts is over the sane bound."""
    data = _base()
    _step(data)["retry"] = {"attempts_max": 1000}
    with pytest.raises(DefinitionError,
                       match=r"states\.work\.step\.retry\.attempts_max: attempts_max of 1000 is "
                             r"over the sane bound of 100"):
        load_definition(data)


def test_retry_delay_initial_over_delay_max() -> None:
    """The first delay may not exceed the cap; both are shown in milliseconds."""
    data = _base()
    _step(data)["retry"] = {"delay_initial": "10s", "delay_max": "5s"}
    with pytest.raises(DefinitionError,
                       match=r"states\.work\.step\.retry\.delay_initial: delay_initial "
                             r"\(10000 ms\) exceeds delay_max \(5000 ms\) \[retry-bounds\]"):
        load_definition(data)


def test_retry_jitter_over_one() -> None:
    """Jitter is a fraction from 0 to 1."""
    data = _base()
    _step(data)["retry"] = {"jitter": 1.5}
    with pytest.raises(DefinitionError,
                       match=r"states\.work\.step\.retry\.jitter: jitter is a fraction from 0 "
                             r"to 1, got 1\.5 \[retry-bounds\]"):
        load_definition(data)


def test_retry_multiplier_below_one() -> None:
    """A multiplier under 1 would shrink the delays."""
    data = _base()
    _step(data)["retry"] = {"multiplier": 0.5}
    with pytest.raises(DefinitionError,
                       match=r"states\.work\.step\.retry\.multiplier: multiplier must be at least "
                             r"1, got 0\.5 \[retry-bounds\]"):
        load_definition(data)


def test_retry_on_permanent() -> None:
    """A permanent failure must never be retried."""
    data = _base()
    _step(data)["retry"] = {"retry_on": ["transient", "permanent"]}
    with pytest.raises(DefinitionError,
                       match=r"states\.work\.step\.retry\.retry_on: a permanent failure must not "
                             r"be retried \[retry-bounds\]"):
        load_definition(data)


def test_retry_on_unknown_category() -> None:
    """A retry category that does not exist is a schema error at its list item."""
    data = _base()
    _step(data)["retry"] = {"retry_on": ["transient", "flaky"]}
    with pytest.raises(DefinitionError,
                       match=r"states\.work\.step\.retry\.retry_on\[1\]: Input should be "
                             r"'transient'.*\(got 'flaky'\)"):
        load_definition(data)


def test_blind_retry_of_non_idempotent_tool() -> None:
    """Retrying timeouts of a tool without idempotency keys could apply it twice."""
    data = _base()
    data["tools"]["svc.call"]["idempotency_keys"] = False
    _step(data)["timeout"] = "5s"
    _step(data)["retry"] = {"retry_on": ["transient", "timeout"]}
    with pytest.raises(DefinitionError,
                       match=r"states\.work\.step\.retry\.retry_on: tool 'svc\.call' neither "
                             r"honours idempotency keys nor is repeatable, so retrying a timeout "
                             r"may apply it twice"
                             r".*\[blind-retry\]") as info:
        load_definition(data)
    assert _with_code(info.value, "blind-retry").ids == ("work", "svc.call")


def test_zero_step_timeout() -> None:
    """A step timeout of zero would time the step out at once."""
    data = _base()
    _step(data)["timeout"] = 0
    with pytest.raises(DefinitionError,
                       match=r"states\.work\.step\.timeout: a step timeout must be positive"):
        load_definition(data)


def test_escalate_on_exhausted_without_escalate_to() -> None:
    """`on_exhausted: escalate` needs somewhere to escalate to."""
    data = _base()
    _step(data)["retry"] = {"on_exhausted": "escalate"}
    with pytest.raises(DefinitionError,
                       match=r"states\.work\.step\.escalate_to: on_exhausted is escalate, so state "
                             r"'work' needs `escalate_to` \[escalate-target\]"):
        load_definition(data)


# -- tools and events --------------------------------------------------------------------------


def test_unknown_tool() -> None:
    """A step's tool must be declared under `tools:`; the closest one is suggested."""
    data = _base()
    _step(data)["tool"] = "svc.cal"
    with pytest.raises(DefinitionError,
                       match=r"states\.work\.step\.tool: tool 'svc\.cal' is not declared under "
                             r"`tools:` \(did you mean 'svc\.call'\?\) \(declared: svc\.call, "
                             r"svc\.undo\) \[unknown-tool\]") as info:
        load_definition(data)
    assert _with_code(info.value, "unknown-tool").ids == ("svc.cal",)


def test_undeclared_event_in_on() -> None:
    """An event label in `on:` must be declared under `events:`."""
    data = _base()
    data["states"]["start"]["on"] = {"goo": "work"}
    with pytest.raises(DefinitionError,
                       match=r"states\.start\.on\.goo: event 'goo' is not declared under `events:` "
                             r"\(did you mean 'go'\?\) \[unknown-event\]") as info:
        load_definition(data)
    assert _with_code(info.value, "unknown-event").ids == ("goo",)


def test_builtin_event_cannot_label_a_transition() -> None:
    """`timer.fired` is handled by the machine itself, not by `on:`."""
    data = _base()
    data["states"]["start"]["on"]["timer.fired"] = "failed"
    with pytest.raises(DefinitionError,
                       match=r"states\.start\.on\.timer\.fired: 'timer\.fired' is handled by the "
                             r"machine itself"):
        load_definition(data)


def test_reserved_event_name() -> None:
    """Declaring `step.retrying` under `events:` uses a reserved prefix."""
    data = _base()
    data["events"]["step.retrying"] = {}
    with pytest.raises(DefinitionError,
                       match=r"events\.step\.retrying: event name 'step\.retrying' uses a reserved "
                             r"prefix \(execution\., step\.") as info:
        load_definition(data)
    assert _with_code(info.value, "reserved-event").ids == ("step.retrying",)


def test_invalid_json_schema_in_event_payload() -> None:
    """An event payload schema with `type: integr` is not a valid JSON Schema."""
    data = _base()
    data["events"]["go"]["payload"] = {"type": "integr"}
    with pytest.raises(DefinitionError,
                       match=r"events\.go\.payload: not a valid JSON Schema: 'integr' .*"
                             r"\[bad-schema\]"):
        load_definition(data)


def test_invalid_json_schema_in_tool_output() -> None:
    """A tool output schema with a non-list `required` is refused at the tool."""
    data = _base()
    data["tools"]["svc.call"]["output"] = {"type": "object", "required": "refund_id"}
    with pytest.raises(DefinitionError,
                       match=r"tools\.svc\.call\.output: not a valid JSON Schema"):
        load_definition(data)


def test_step_succeeded_on_state_without_step() -> None:
    """`step.succeeded` never arrives in a state that runs no step."""
    data = _base()
    data["states"]["start"]["on"]["step.succeeded"] = "work"
    pattern = (
        r"states\.start\.on\.step\.succeeded: state 'start' has no step, so "
        r"'step\.succeeded' never arrives there \[event-never-arrives\]"
    )
    with pytest.raises(DefinitionError, match=pattern) as info:
        load_definition(data)
    assert _with_code(info.value, "event-never-arrives").ids == ("start", "step.succeeded")


def test_step_without_step_succeeded_transition() -> None:
    """A state that runs a step must say where a success goes."""
    data = _base()
    data["states"]["work"]["on"] = {"step.failed": "failed", "go": "done"}
    with pytest.raises(DefinitionError,
                       match=r"states\.work\.on: state 'work' runs a step but has no "
                             r"`step\.succeeded` transition \[unhandled-step\]"):
        load_definition(data)


def test_step_without_step_failed_transition() -> None:
    """A step that can fail (on_exhausted: fail) must say where a failure goes."""
    data = _base()
    del data["states"]["work"]["on"]["step.failed"]
    data["states"]["start"]["on"]["go"] = [
        {"target": "work", "guard": "context.vip"},
        {"target": "failed"},
    ]
    with pytest.raises(DefinitionError,
                       match=r"states\.work\.on: state 'work' runs a step that can fail "
                             r"\(on_exhausted: fail\) but has no `step\.failed` transition"):
        load_definition(data)


# -- approvals ---------------------------------------------------------------------------------


def test_needs_approval_without_approval_state() -> None:
    """`needs_approval: true` with no approval state naming the step can never run."""
    data = _base()
    _step(data)["needs_approval"] = True
    with pytest.raises(DefinitionError,
                       match=r"states\.work\.step\.needs_approval: step 'work' needs approval, but "
                             r"no approval state names it in `for_state` \[approval-missing\]"):
        load_definition(data)


def test_approval_on_non_wait_state() -> None:
    """An approval belongs on a `type: wait` state."""
    data = _with_approval(_base())
    del data["states"]["approve"]["type"]
    with pytest.raises(DefinitionError,
                       match=r"states\.approve\.approval: state 'approve' has an approval but is "
                             r"normal; approvals are `type: wait` \[approval-not-wait\]"):
        load_definition(data)


def test_approval_for_missing_state() -> None:
    """An approval for a state that does not exist suggests the closest name."""
    data = _with_approval(_base())
    data["states"]["approve"]["approval"]["for_state"] = "wrk"
    with pytest.raises(DefinitionError,
                       match=r"states\.approve\.approval\.for_state: approval is for state 'wrk', "
                             r"which does not exist \(did you mean 'work'\?\)") as info:
        load_definition(data)
    assert _with_code(info.value, "unknown-target").ids == ("wrk",)


def test_approval_for_state_without_step() -> None:
    """An approval for a state that runs no step authorizes nothing."""
    data = _with_approval(_base())
    data["states"]["approve"]["approval"]["for_state"] = "start"
    with pytest.raises(DefinitionError,
                       match=r"states\.approve\.approval\.for_state: approval is for state "
                             r"'start', which runs no step \[approval-without-step\]"):
        load_definition(data)


def test_approval_state_without_denied_transition() -> None:
    """An approval state must handle `approval.denied`."""
    data = _with_approval(_base())
    del data["states"]["approve"]["on"]["approval.denied"]
    with pytest.raises(DefinitionError,
                       match=r"states\.approve\.on: approval state 'approve' has no "
                             r"'approval\.denied' transition \[unhandled-approval\]"):
        load_definition(data)


def test_approval_without_roles() -> None:
    """An approval that no role may decide is a schema error at `roles`."""
    data = _with_approval(_base())
    data["states"]["approve"]["approval"]["roles"] = []
    with pytest.raises(DefinitionError,
                       match=r"states\.approve\.approval\.roles: List should have at least 1 item"):
        load_definition(data)


def test_approval_expiry_escalate_without_target() -> None:
    """`on_expiry: escalate` needs `escalate_to`."""
    data = _with_approval(_base())
    data["states"]["approve"]["approval"]["on_expiry"] = "escalate"
    with pytest.raises(DefinitionError,
                       match=r"states\.approve\.approval\.escalate_to: on_expiry is escalate, so "
                             r"the approval needs `escalate_to` \[escalate-target\]"):
        load_definition(data)


# -- budgets and compensation ------------------------------------------------------------------


def test_budget_without_on_exceeded() -> None:
    """A budget with nowhere to send an exceeded run is refused."""
    data = _base()
    data["budgets"] = {"transitions_max": 10}
    with pytest.raises(DefinitionError,
                       match=r"budgets\.on_exceeded: a budget is set, so `on_exceeded: <state>` "
                             r"must say where an exceeded run goes \[budget-target\]"):
        load_definition(data)


def test_budget_not_positive() -> None:
    """A budget limit of zero is refused."""
    data = _base()
    data["budgets"] = {"visits_max": 0, "on_exceeded": "failed"}
    with pytest.raises(DefinitionError,
                       match=r"budgets\.visits_max: visits_max must be positive, got 0 "
                             r"\[budget-bounds\]"):
        load_definition(data)


def test_cycle_threshold_one() -> None:
    """A cycle threshold of 1 would flag every first visit as a cycle."""
    data = _base()
    data["budgets"] = {"cycle_threshold": 1, "on_exceeded": "failed"}
    with pytest.raises(DefinitionError,
                       match=r"budgets\.cycle_threshold: cycle_threshold must be at least 2, got 1 "
                             r"\[budget-bounds\]"):
        load_definition(data)


def test_budget_target_unknown() -> None:
    """`on_exceeded` must name a state that exists."""
    data = _base()
    data["budgets"] = {"deadline": "1d", "on_exceeded": "faild"}
    with pytest.raises(DefinitionError,
                       match=r"budgets\.on_exceeded: target state 'faild' does not exist "
                             r"\(did you mean 'failed'\?\)"):
        load_definition(data)


def test_compensation_without_compensation_failed() -> None:
    """A compensation needs `compensation_failed:` for when undoing fails."""
    data = _base()
    _step(data)["compensation"] = {"tool": "svc.undo"}
    with pytest.raises(DefinitionError,
                       match=r"\n  compensation_failed: state 'work' declares a compensation, so "
                             r"the definition needs `compensation_failed: <state>`") as info:
        load_definition(data)
    assert _with_code(info.value, "compensation-failed-missing").ids == ("work",)


def test_compensation_with_unknown_tool() -> None:
    """A compensation's tool must be declared too."""
    data = _base()
    data["compensation_failed"] = "failed"
    _step(data)["compensation"] = {"tool": "svc.und"}
    with pytest.raises(DefinitionError,
                       match=r"states\.work\.step\.compensation\.tool: tool 'svc\.und' is not "
                             r"declared under `tools:` \(did you mean 'svc\.undo'\?\)"):
        load_definition(data)


# -- warnings, line numbers, several errors ----------------------------------------------------


def test_irreversible_step_unguarded_is_a_warning_only() -> None:
    """An irreversible step with neither approval nor compensation warns but still loads."""
    data = _base()
    _step(data)["reversible"] = False
    findings = lint(data)
    assert [(f.severity, f.code, f.location) for f in findings] == [
        (Severity.WARNING, "irreversible-unguarded", "states.work.step"),
    ]
    assert findings[0].ids == ("work", "svc.call")
    definition = load_definition(data)
    assert [f.code for f in definition.warnings] == ["irreversible-unguarded"]
    assert lint(definition) == list(definition.warnings)


def test_a_context_key_nothing_gives_is_a_located_warning_with_a_hint() -> None:
    """A typo in a context key (`context.cuont` for `count`) reads None silently at run time:
    lint names it, where it is read, and the key meant."""
    data = _base()
    _step(data)["input"] = {"n": "=context.cuont", "m": "=at(context, 'vpi')"}
    data["states"]["work"]["on"]["step.succeeded"] = {  # a text within is not a read
        "target": "done",
        "guard": "context['a'] is None or context.zz > 1 or 'see context.yy' == ''"}
    findings = [f for f in lint(data) if f.code == "unknown-context-key"]
    assert [(f.severity, f.location, f.ids) for f in findings] == [
        (Severity.WARNING, "states.work.step.input.n", ("cuont",)),
        (Severity.WARNING, "states.work.step.input.m", ("vpi",)),
        (Severity.WARNING, "states.work.on.step.succeeded[0].guard", ("zz",)),
    ]
    assert "did you mean 'count'?" in findings[0].message
    assert "did you mean 'vip'?" in findings[1].message
    assert load_definition(data).warnings  # a warning: the definition still loads
    data = _base()
    _step(data)["input"] = {"note": "context.sent_as_text", "n": "=context.count"}
    assert not [f for f in lint(data) if f.code == "unknown-context-key"]


def test_a_context_key_an_assign_writes_or_a_function_may_write_is_not_warned() -> None:
    """Keys an `assign` writes (anywhere) count as given; a `function:` action may write any
    key, so a definition with one is not judged; nor is a map item's flow (its context is the
    item)."""
    data = _base()
    _step(data)["input"] = {"n": "=context.later"}
    data["states"]["start"]["on"]["go"] = {"target": "work",
                                           "actions": [{"assign": {"later": "1"}}]}
    assert not [f for f in lint(data) if f.code == "unknown-context-key"]
    data = _base()
    _step(data)["input"] = {"n": "=context.anything"}
    data["states"]["start"]["on"]["go"] = {"target": "work",
                                           "actions": [{"function": "set_things"}]}
    assert not [f for f in lint(data) if f.code == "unknown-context-key"]


def test_a_step_failed_transition_escalation_shadows_is_a_warning() -> None:
    """With `on_exhausted: escalate`, every failure of the step goes to `escalate_to`: the
    state's own `step.failed` transition can never be taken, and lint says so."""
    data = _base()
    data["states"]["human"] = {"type": "wait", "after": {"delay": "1h", "target": "failed"},
                               "on": {"go": "done"}}
    _step(data)["retry"] = {"on_exhausted": "escalate"}
    _step(data)["escalate_to"] = "human"
    findings = [f for f in lint(data) if f.code == "escalate-shadows"]
    assert [(f.severity, f.location) for f in findings] == [
        (Severity.WARNING, "states.work.on.step.failed")]
    assert "escalate_to 'human'" in findings[0].message
    del data["states"]["work"]["on"]["step.failed"]
    assert not [f for f in lint(data) if f.code == "escalate-shadows"]


def test_lint_returns_errors_without_raising() -> None:
    """`lint` reports consistency errors as findings instead of raising."""
    data = _base()
    data["states"]["start"]["on"]["go"] = "wrok"
    _step(data)["reversible"] = False
    findings = lint(data)
    by_code = {f.code: f for f in findings}
    assert by_code["unknown-target"].severity is Severity.ERROR
    assert by_code["irreversible-unguarded"].severity is Severity.WARNING


def test_lint_still_raises_on_syntax_errors() -> None:
    """`lint` cannot report on what it cannot read: syntax errors still raise."""
    with pytest.raises(DefinitionSyntaxError, match=r"line \d+: YAML syntax"):
        lint("name: wf\nstates: {start: [\n")


def test_yaml_text_errors_carry_line_numbers() -> None:
    """Consistency errors in YAML text say on which line the offending key is."""
    text = _yaml("""
        name: wf
        events:
          go: {}
        states:
          start:
            initial: true
            on:
              go: wrok
          done:
            type: final
            outcome: success
    """)
    with pytest.raises(DefinitionError,
                       match=r"\n  line 8: states\.start\.on\.go\.target: target state 'wrok' does "
                             r"not exist") as info:
        load_definition(text)
    finding = _with_code(info.value, "unknown-target")
    assert finding.line == 8


def test_yaml_schema_error_carries_line_number() -> None:
    """Schema errors in YAML text are located by line too."""
    text = _yaml("""
        name: wf
        states:
          start:
            initial: true
            type: final
            outcome: success
            colour: blue
    """)
    with pytest.raises(DefinitionError,
                       match=r"line 7: states\.start\.colour: unknown key 'colour'"):
        load_definition(text)


def test_dict_errors_have_no_line_numbers() -> None:
    """Errors in a dict have no line to name, so none is shown."""
    data = _base()
    data["states"]["start"]["on"]["go"] = "wrok"
    with pytest.raises(DefinitionError, match=r"\n  states\.start\.on\.go\.target: ") as info:
        load_definition(data)
    assert all(f.line is None for f in info.value.findings)
    assert "line " not in str(info.value)


def test_several_errors_reported_together() -> None:
    """Independent errors are all reported in one DefinitionError, counted in the header."""
    data = _base()
    data["states"]["start"]["on"]["go"] = "wrok"
    data["states"]["failed"]["outcome"] = None
    _step(data)["retry"] = {"jitter": 2}
    data["events"]["timer.tick"] = {}
    with pytest.raises(DefinitionError,
                       match=r"<dict>: \d+ errors in workflow definition\n(.*\n)*.*"
                             r"states\.start\.on\.go\.target: target state 'wrok'") as info:
        load_definition(data)
    codes = {f.code for f in info.value.findings}
    assert {"unknown-target", "final-outcome", "retry-bounds", "reserved-event"} <= codes
    message = str(info.value)
    assert f"{len(info.value.findings)} errors in workflow definition" in message
    for location in ("states.start.on.go.target", "states.failed.outcome",
                     "states.work.step.retry.jitter", "events.timer.tick"):
        assert f"  {location}: " in message
    assert all(f.severity is Severity.ERROR for f in info.value.findings)


def test_several_schema_errors_reported_together() -> None:
    """Schema errors across the file are collected, not stopped at the first."""
    data = _base()
    data["states"]["start"]["initail"] = True
    _step(data)["retry"] = {"attempts_max": "many"}
    data["states"]["done"]["type"] = "finished"
    with pytest.raises(DefinitionError, match=r"<dict>: 3 errors in workflow definition") as info:
        load_definition(data)
    locations = {f.location for f in info.value.findings}
    assert locations == {
        "states.start.initail",
        "states.work.step.retry.attempts_max",
        "states.done.type",
    }
    assert "did you mean 'initial'?" in str(info.value)


# -- bugs found while writing these tests, fixed since -------------------------------------------


def test_infinite_duration_is_a_definition_error() -> None:
    """`delay: .inf` in YAML should be a located schema error, not an OverflowError."""
    text = _yaml("""
        name: wf
        states:
          start:
            initial: true
            type: wait
            after: {delay: .inf, target: done}
          done: {type: final, outcome: success}
    """)
    with pytest.raises(DefinitionError, match=r"states\.start\.after\.delay: .*duration"):
        load_definition(text)


def test_nan_retry_multiplier() -> None:
    """A NaN multiplier is not 'at least 1' and should be refused."""
    data = _base()
    _step(data)["retry"] = {"multiplier": math.nan}
    with pytest.raises(DefinitionError, match=r"states\.work\.step\.retry\.multiplier: "):
        load_definition(data)


def test_nan_step_cost() -> None:
    """A NaN step cost would silently disable the cost budget and should be refused."""
    data = _base()
    _step(data)["cost"] = math.nan
    with pytest.raises(DefinitionError, match=r"states\.work\.step\.cost: "):
        load_definition(data)


def test_repeatable_tool_may_retry_timeouts() -> None:
    """A repeatable tool without idempotency keys may retry timeouts: a repeat is harmless."""
    data = _base()
    data["tools"]["svc.call"] = {"repeatable": True}
    definition = load_definition(data)
    assert "timeout" in definition.states["work"].step.retry_on  # type: ignore[union-attr]


def test_chained_string_repetition_is_capped() -> None:
    """Chained repetition should hit the same size cap as a single large repetition: at load
    time when it reads no context, else when evaluated."""
    with pytest.raises(ExpressionSyntaxError, match=r"over the limit"):
        compile_expression('"a" * 10000 * 100')
    guard = compile_expression('context.a * 10000 * 100')
    with pytest.raises(GuardError, match=r"over the limit"):
        guard({"a": "a"}, None)


def test_default_retry_of_non_idempotent_tool_is_not_blind() -> None:
    """Left at its default, retry_on of a tool without keys loads: decide never retries its
    ambiguous timeouts, so only an explicit `timeout` in retry_on is a mistake."""
    data = _base()
    data["tools"]["svc.call"]["idempotency_keys"] = False
    definition = load_definition(data)
    step = definition.states["work"].step
    assert step is not None and not step.retry_safe


def test_final_state_inheriting_parent_transitions() -> None:
    """A final child of a compound parent with transitions would have a way out."""
    data = _base()
    data["states"]["group"] = {"on": {"go": "failed"}}
    data["states"]["done"]["parent"] = "group"
    data["states"]["inner"] = {"parent": "group", "initial": True, "type": "wait",
                               "after": {"delay": 5, "target": "done"}}
    data["states"]["work"]["on"]["step.succeeded"] = "group"
    with pytest.raises(DefinitionError,
                       match=r"states\.done\.parent: final state 'done' would inherit "
                             r"transitions \(go\) from its parents") as info:
        load_definition(data)
    assert _with_code(info.value, "final-exit").ids == ("done", "go")


def test_stepless_normal_state_is_an_implicit_wait_warning() -> None:
    """A normal state with no step waits for events with no timeout: a warning at lint."""
    data = _base()
    data["states"]["start"] = {"initial": True, "on": {"go": "work"}}
    findings = lint(data)
    assert [(f.severity, f.code, f.location) for f in findings] == [
        (Severity.WARNING, "implicit-wait", "states.start")]


def test_budget_on_cost_alone_does_not_hide_a_loop() -> None:
    """cost_max cannot end a loop of stepless states, so the loop is still reported."""
    data = _base()
    data["events"]["back"] = {}
    data["states"]["start"] = {"initial": True, "type": "wait",
                               "after": {"delay": 5, "target": "other"}, "on": {"go": "other"}}
    data["states"]["other"] = {"type": "wait", "after": {"delay": 5, "target": "start"},
                               "on": {"back": "start"}}
    data["budgets"] = {"cost_max": 10, "on_exceeded": "failed"}
    with pytest.raises(DefinitionError, match=r"no final state can be reached"):
        load_definition(data)


def test_compensation_input_expression_is_checked() -> None:
    """A bad expression in a compensation's input is a located error, not silently dropped."""
    data = _base()
    data["compensation_failed"] = "failed"
    _step(data)["compensation"] = {"tool": "svc.undo",
                                   "input": {"ok": "=context.count", "bad": "=foo("}}
    with pytest.raises(DefinitionError,
                       match=r"states\.work\.step\.compensation\.input\.bad: expression"):
        load_definition(data)


def _rejected(decision: Decision, reason: RejectReason, pattern: str) -> None:
    """Asserts `decision` is a rejection for `reason` whose detail matches `pattern`."""
    assert isinstance(decision, Rejected), decision
    assert decision.reason == reason, decision
    assert re.search(pattern, decision.detail), decision.detail


def test_json_schema_ref_must_be_local_and_resolve(monkeypatch: pytest.MonkeyPatch) -> None:
    """A URL or dangling $ref is bad-schema at load; a local $defs ref checks payloads, no I/O."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"amount": {"$ref": "#/$defs/amount"}},
        "$defs": {"amount": {"type": "integer", "minimum": 1}},
    }
    refused = (("https://schemas.example/amount.json", "is not a local JSON pointer"),
               ("#/$defs/missing", "points to nothing in the schema"))
    for reference, problem in refused:
        data = _base()
        data["events"]["go"]["payload"] = copy.deepcopy(schema)
        data["events"]["go"]["payload"]["properties"]["amount"]["$ref"] = reference
        with pytest.raises(DefinitionError,
                           match=rf"events\.go\.payload: \$ref {re.escape(repr(reference))} "
                                 rf"{problem}.*\[bad-schema\]") as info:
            load_definition(data)
        assert [(f.code, f.location) for f in info.value.findings] == [
            ("bad-schema", "events.go.payload")]
    data = _base()
    data["tools"]["svc.call"]["output"] = {"$ref": "http://schemas.example/out.json"}
    with pytest.raises(DefinitionError, match=r"tools\.svc\.call\.output: \$ref .*\[bad-schema\]"):
        load_definition(data)

    def no_network(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a payload check tried to open a connection")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    data = _base()
    data["events"]["go"]["payload"] = schema
    run = Run(load_definition(data))
    run.start()
    _rejected(run.decide(run.user("go", {"amount": "ten"})), RejectReason.INVALID_PAYLOAD,
              r"payload of 'go' does not match its schema: amount: 'ten' is not of type "
              r"'integer'")
    _rejected(run.decide(run.user("go", {"amount": 0})), RejectReason.INVALID_PAYLOAD,
              r"amount: 0 is less than the minimum of 1")
    accepted = run.apply(run.user("go", {"amount": 10}))
    assert accepted.transition == Transition("start", "go", "work", "")


def test_compensation_input_expressions_are_checked_at_load() -> None:
    """A bad compensation input expression is located at ...compensation.input.KEY."""
    data = _base()
    data["compensation_failed"] = "failed"
    _step(data)["compensation"] = {"tool": "svc.undo",
                                   "input": {"ok": "=context.count", "bad": "=foo(",
                                             "nested": {"worse": "=context._secret"}}}
    with pytest.raises(DefinitionError,
                       match=r"states\.work\.step\.compensation\.input\.bad: expression") as info:
        load_definition(data)
    assert sorted((f.code, f.location) for f in info.value.findings) == [
        ("bad-expression", "states.work.step.compensation.input.bad"),
        ("bad-expression", "states.work.step.compensation.input.nested.worse"),
    ]
    _step(data)["compensation"]["input"] = {"ok": "=context.count", "fixed": 1}
    step = load_definition(data).states["work"].step
    assert step is not None and step.compensation is not None
    assert step.compensation.input({"count": 3}) == {"ok": 3, "fixed": 1}


def test_lint_final_child_inheriting_and_loops_with_only_cost_max() -> None:
    """A final child inheriting transitions is an error; only transitions_max ends a loop."""
    data: dict[str, Any] = {
        "name": "wf", "events": {"go": {}},
        "states": {
            "group": {"initial": True, "on": {"go": "failed"}},
            "inner": {"parent": "group", "initial": True, "type": "wait",
                      "after": {"delay": 5, "target": "done"}},
            "done": {"parent": "group", "type": "final", "outcome": "success"},
            "failed": {"type": "final", "outcome": "failure"},
        },
    }
    findings = lint(data)
    assert [(f.severity, f.code, f.location, f.ids) for f in findings] == [
        (Severity.ERROR, "final-exit", "states.done.parent", ("done", "go"))]
    assert "would inherit transitions (go)" in findings[0].message
    del data["states"]["done"]["parent"]
    assert lint(data) == []

    loop: dict[str, Any] = {
        "name": "loop", "events": {"go": {}, "back": {}},
        "states": {
            "start": {"initial": True, "type": "wait", "after": {"delay": 5, "target": "other"},
                      "on": {"go": "other"}},
            "other": {"type": "wait", "after": {"delay": 5, "target": "start"},
                      "on": {"back": "start"}},
            "failed": {"type": "final", "outcome": "failure"},
        },
    }
    for budgets in ({"cost_max": 10, "on_exceeded": "failed"},
                    {"cycle_threshold": 3, "on_cycle": "failed"}):
        loop["budgets"] = budgets
        codes = {(f.severity, f.code) for f in lint(loop)}
        assert codes & {(Severity.ERROR, "no-final"), (Severity.ERROR, "no-way-to-final")}, budgets
    loop["budgets"] = {"cost_max": 10, "on_exceeded": "failed"}
    with pytest.raises(DefinitionError, match=r"no final state can be reached from state"):
        load_definition(loop)
    loop["budgets"] = {"transitions_max": 50, "on_exceeded": "failed"}
    assert lint(loop) == []


def test_ref_to_a_missing_anchor_is_refused_at_load() -> None:
    """A $ref to an anchor that no subschema declares cannot resolve, so it is bad-schema."""
    data = _base()
    data["events"]["go"]["payload"] = {"type": "object",
                                       "properties": {"amount": {"$ref": "#nope"}}}
    with pytest.raises(DefinitionError, match=r"events\.go\.payload: .*\[bad-schema\]"):
        load_definition(data)
