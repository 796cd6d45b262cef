"""The safe expression language for guards, actions and step inputs."""

from __future__ import annotations

import re
import time

import pytest
from driving import Run
from hypothesis import given, settings
from hypothesis import strategies as st
from small_workflow import base as _base

from reference_machine import (
    Decision,
    DefinitionError,
    Event,
    GuardError,
    Rejected,
    RejectReason,
    load_definition,
)
from reference_machine._expr import ExpressionSyntaxError, compile_expression

EVENT = Event("e1", "order.placed", "agent", {"amount": 120, "tags": ["vip"], "nested": {"x": 1}})
CONTEXT = {"limit": 100, "user": {"role": "admin"}, "items": [1, 2, 3], "name": "Ada"}


def value(text: str) -> object:
    """Gives what the expression evaluates to over CONTEXT and EVENT."""
    return compile_expression(text)(CONTEXT, EVENT)


class TestEvaluation:
    @pytest.mark.parametrize(("text", "expected"), [
        ("event.payload.amount > context.limit", True),
        ("event.payload.amount > context.limit and context.user.role == 'admin'", True),
        ("not (context.user.role == 'admin')", False),
        ("'vip' in event.payload.tags", True),
        ("'gold' not in event.payload.tags", True),
        ("context['user']['role']", "admin"),
        ("context.items[1] + context.items[-1]", 5),
        ("len(context.items) * 2 - 1", 5),
        ("event.payload.amount // 7 % 5", 2),
        ("event.payload.amount / 8", 15.0),
        ("0 < context.limit <= 100", True),
        ("0 < context.limit < 100", False),
        ("event.payload.nested.x == 1", True),
        ("context.missing", None),
        ("context.missing is None", True),
        ("'big' if event.payload.amount > 100 else 'small'", "big"),
        ("max(context.items) + min(3, 4) + abs(-2) + round(2.6)", 11),
        ("event.source == 'agent' and event.type == 'order.placed'", True),
        ("context.items[10]", None),
        ("-context.limit", -100),
        ("context.name * 3", "AdaAdaAda"),
        ("at(context.user, 'role')", "admin"),
        ("at(context, 'items', 2)", 3),
        ("at(event.payload, 'nested', 'x')", 1),
        # null where a step is missing, out of range, or not a mapping or list
        ("at(context, 'missing', 'x', 0)", None),
        ("at(context, 'items', 3)", None),
        ("at(context, 'items', -1)", None),
        ("at(context, 'limit', 'x')", None),
        ("at(context.name, 'x')", None),
        ("at('text', 'x')", None),
        ("has(context, 'user', 'role')", True),
        ("has(context, 'items', 2)", True),
        ("has(context, 'items', 3)", False),
        ("has(context, 'missing')", False),
        ("has(event.payload, 'nested', 'y')", False),
        ("slice(context.items, 1)", [2, 3]),
        ("slice(context.items, 0, -1)", [1, 2]),
        ("slice(context.name, 1, None)", "da"),
        ("slice(context.missing, 1)", None),
        # Step Functions' intrinsics
        ("json_text(context.user)", '{"role":"admin"}'),
        ("json_value('{\"a\": [1, 2]}')", {"a": [1, 2]}),
        ("json_value(json_text(context.items))", [1, 2, 3]),
        ("json_value('{', 'not json')", "not json"),
        ("json_value(context.missing, None)", None),
        ("format('{} has {} items', context.name, len(context.items))", "Ada has 3 items"),
        ("format('{}', context.user)", '{"role":"admin"}'),
        ("split('a,b;;c', ',;')", ["a", "b", "c"]),
        ("merge(context.user, event.payload.nested)", {"role": "admin", "x": 1}),
        ("number_range(1, 5, 2)", [1, 3, 5]),
        ("number_range(5, 1, -2)", [5, 3, 1]),
        ("number_range(5, 1, 1)", []),
    ])
    def test_value(self, text: str, expected: object) -> None:
        """Each whitelisted construct evaluates like Python over mappings."""
        assert value(text) == expected

    def test_attribute_of_a_number_is_a_guard_error(self) -> None:
        """Reading a key of a non-mapping raises GuardError, which decide turns into a reject."""
        with pytest.raises(GuardError, match="cannot read 'x' of a int"):
            value("context.limit.x")

    def test_at_reads_through_without_copying_the_context(self) -> None:
        """`at(context, ...)` gives the value held, not a copy's: an action assigning it
        stores what the context holds."""
        assert compile_expression("at(context, 'user')")(CONTEXT, EVENT) is CONTEXT["user"]

    def test_at_needs_a_key(self) -> None:
        """`at(context)` would be the context itself, which an action could store in itself."""
        with pytest.raises(ExpressionSyntaxError, match="at least one key"):
            compile_expression("at(context)")

    @pytest.mark.parametrize(("text", "told"), [
        ("json_value('{')", "not JSON text"),
        ("json_value('NaN')", "not JSON text"),
        ("json_value(context.limit)", "reads a text"),
        ("format('{} {}', 1)", "has 2 {} for 1 values"),
        ("split(context.name, '')", "non-empty text of delimiters"),
        ("merge(context.user, context.items)", "two mappings"),
        ("number_range(1, 5000, 1)", "over the limit of 1,000"),
        ("number_range(1, 5, 0)", "a step other than 0"),
        ("json_value('[' * 60 + ']' * 60)", "nested more than"),
    ])
    def test_an_intrinsic_given_what_it_cannot_take_is_a_guard_error(self, text: str,
                                                                      told: str) -> None:
        """Step Functions fails the run (States.Runtime); natively the move is rejected."""
        with pytest.raises(GuardError, match=told.replace("{", r"\{").replace("}", r"\}")):
            value(text)

    def test_oversized_repetition_is_refused(self) -> None:
        """Repetition that would build a huge string is refused at evaluation."""
        with pytest.raises(GuardError, match="over the limit"):
            value("context.name * 100000")


class TestWhitelist:
    @pytest.mark.parametrize(("text", "message"), [
        ("__import__('os')", "only these functions may be called"),
        ("context.__class__", "name '__class__' is not allowed"),
        ("open('/etc/passwd')", "only these functions may be called"),
        ("2 ** 100", "operator Pow is not allowed"),
        ("lambda: 1", "Lambda is not allowed"),
        ("[x for x in context.items]", "ListComp is not allowed"),
        ("context.items[0:2]", "slices are not allowed"),
        ("event", "use a field of event"),
        ("event.secret", "event has no field 'secret'"),
        ("os.system('x')", "only these functions may be called"),
        ("x", "unknown name 'x'"),
        ("len(context.items, key=1)", "keyword arguments are not allowed"),
        ("context.a = 1", "invalid syntax"),
        ("context.items @ context.items", "operator MatMult is not allowed"),
        ("~context.limit", "operator Invert is not allowed"),
        ("b'bytes'", "literal b'bytes' is not allowed"),
        ("", "expected a non-empty expression"),
    ])
    def test_refused(self, text: str, message: str) -> None:
        """Syntax and names outside the whitelist fail at compile time with a reason."""
        with pytest.raises(ExpressionSyntaxError, match=message):
            compile_expression(text)

    @settings(max_examples=300, deadline=None)
    @given(st.text(max_size=40))
    def test_any_text_compiles_or_is_refused(self, text: str) -> None:
        """Arbitrary text either compiles or raises ExpressionSyntaxError; nothing else."""
        try:
            compiled = compile_expression(text)
        except ExpressionSyntaxError as exc:
            assert str(exc)
        else:
            assert callable(compiled)


class TestLimits:
    @pytest.mark.parametrize(("text", "message"), [
        ("1" * 1001, "characters long; the limit is 1000"),
        ("a\x00", "null bytes"),
    ])
    def test_hostile_text_is_refused(self, text: str, message: str) -> None:
        """Overlong text and null bytes are refused as syntax, not crashes."""
        with pytest.raises(ExpressionSyntaxError, match=message):
            compile_expression(text)


def _rejected(decision: Decision, reason: RejectReason, pattern: str) -> None:
    """Asserts `decision` is a rejection for `reason` whose detail matches `pattern`."""
    assert isinstance(decision, Rejected), decision
    assert decision.reason == reason, decision
    assert re.search(pattern, decision.detail), decision.detail


def test_guards_refuse_string_formatting_and_count_columns_as_written() -> None:
    """str % is a GuardError (guard_error in decide); numeric % works; columns count indents."""
    started = time.perf_counter()
    with pytest.raises(GuardError, match=r"string formatting with % is not allowed"):
        compile_expression('"%09999999d" % 1')({}, None)
    assert time.perf_counter() - started < 1.0  # refused, not built
    assert compile_expression("7 % 3 == 1")({}, None) is True

    data = _base()
    data["context"]["n"] = 7
    data["states"]["start"]["on"]["go"] = {"target": "work", "guard": "context.n % 3 == 1"}
    data["states"]["start"]["on"]["submit"] = {"target": "work",
                                               "guard": '"%09999999d" % context.n != ""'}
    run = Run(load_definition(data))
    run.start()
    _rejected(run.decide(run.user("submit")), RejectReason.GUARD_ERROR,
              r"failed: GuardError: string formatting with % is not allowed")
    assert run.apply(run.user("go")).execution.state == "work"

    with pytest.raises(ExpressionSyntaxError, match=r"unknown name 'foo'") as info:
        compile_expression("   foo > 1")
    assert info.value.col == 4
    with pytest.raises(ExpressionSyntaxError, match=r"'\(' was never closed") as info:
        compile_expression("  (1")
    assert info.value.col == 3
    data = _base()
    data["states"]["start"]["on"]["go"] = {"target": "work", "guard": "   foo > 1"}
    with pytest.raises(DefinitionError,
                       match=r"states\.start\.on\.go\.guard: guard '   foo > 1' at column 4: "
                             r"unknown name 'foo'"):
        load_definition(data)


def test_guard_column_counts_characters_not_bytes() -> None:
    """In `'é' == foo` the unknown name starts at column 8 of the text as written."""
    with pytest.raises(ExpressionSyntaxError, match=r"unknown name 'foo'") as info:
        compile_expression("'é' == foo")
    assert info.value.col == 8
