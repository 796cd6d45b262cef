"""Tests of the XState source reader: `createMachine`'s object literal read from TypeScript or
JavaScript as JSON data, every function in it kept as an inline reference, nothing run."""

from __future__ import annotations

import pytest

from reference_machine.errors import DefinitionError
from reference_machine.importers.xstate.source import (
    inline_reference,
    machines,
    native_expression,
    native_object,
)


def one(text: str, name: str = "machine.ts") -> dict[str, object]:
    (machine,) = machines(text, name)
    return machine.config


class TestLiterals:
    def test_the_literal_subset_reads_as_json(self) -> None:
        """Names, quoted and numeric keys, strings with escapes, template strings without
        `${}`, numbers of every form, literals, arrays, trailing commas and comments."""
        config = one("""
            import { createMachine } from 'xstate';
            // a comment with createMachine in it is no call
            export const m = createMachine({
              id: 'm', "quoted": "a\\"b\\n", 42: `plain`, /* inline comment */
              numbers: [1_000, 0x10, -2, 1.5, 1e3, 15 * 60 * 1000, (2 + 3) * 4],
              flags: [true, false, null, undefined],
              nested: { deep: { list: [ { a: 1 }, ], }, },
            });
        """)
        assert config == {
            "id": "m", "quoted": 'a"b\n', "42": "plain",
            "numbers": [1000, 16, -2, 1.5, 1000.0, 900000, 20],
            "flags": [True, False, None, None],
            "nested": {"deep": {"list": [{"a": 1}]}},
        }

    def test_typescript_annotations_change_nothing(self) -> None:
        """`as T`, `satisfies T` and `!` after a value are read past."""
        config = one("""createMachine({
            types: {} as { context: { n: number }; events: { type: 'GO' } },
            initial: 'a' as const,
            context: { n: 0 } satisfies Record<string, number>,
            states: { a: {} },
        })""")
        assert config == {"types": {}, "initial": "a", "context": {"n": 0},
                          "states": {"a": {}}}

    def test_each_key_path_has_its_line(self) -> None:
        """Lines are kept per key path and list item, as the JSON reader keeps them."""
        (machine,) = machines("createMachine({\n  states: {\n    a: {\n      on: {\n"
                              "        GO: ['b']\n      }\n    }\n  }\n})", "m.ts")
        assert machine.line == 1
        assert machine.lines["states.a.on.GO"] == 5
        assert machine.lines["states.a.on.GO[0]"] == 5


class TestInline:
    def test_a_function_is_an_inline_reference_with_its_line(self) -> None:
        """An arrow function is kept where written: `inline:<file>:<line>` and its code."""
        config = one("createMachine({\n  on: { GO: {\n    guard: ({ context }) => "
                     "context.n > 0,\n    target: '.b' } } })", "src/flow.ts")
        on = config["on"]
        assert isinstance(on, dict)
        assert on["GO"] == {"guard": {"type": "inline:flow:3",
                                      "code": "({ context }) => context.n > 0"},
                            "target": ".b"}

    @pytest.mark.parametrize(("text", "code"), [
        ("entry() { console.log('hi'); }", "entry() { console.log('hi'); }"),
        ("entry: async function () { await go(); }", "async function () { await go(); }"),
        ("entry: fromPromise(() => fetch(url))", "fromPromise(() => fetch(url))"),
        ("entry: `hello ${name}`", "`hello ${name}`"),
        ("entry: count + 1", "count + 1"),
        ("entry: /ab+c/.test(text)", "/ab+c/.test(text)"),
        ("entry", "entry"),
    ])
    def test_code_of_any_form_is_inline(self, text: str, code: str) -> None:
        """A method, a function, a call, a template with `${}`, an expression, a regular
        expression or a variable: each one inline reference, the text kept, nothing run."""
        config = one(f"createMachine({{ {text} }})")
        assert inline_reference(config["entry"]) == "inline:machine:1"
        assert config["entry"] == {"type": "inline:machine:1", "code": code}

    def test_two_functions_on_one_line_are_told_apart(self) -> None:
        """A second inline function on a line is `<line>.2`."""
        config = one("createMachine({ entry: [() => a(), () => b()] })")
        assert config["entry"] == [{"type": "inline:machine:1", "code": "() => a()"},
                                   {"type": "inline:machine:1.2", "code": "() => b()"}]

    def test_xstate_creators_are_their_json_form(self) -> None:
        """`assign({...})` keeps its assignment (its functions inline); guard combinators
        keep their guards; other action creators are named."""
        config = one("""createMachine({ entry: [
            assign({ n: 0, m: ({ context }) => context.n + 1 }),
            raise({ type: 'GO' }),
        ], guard: not('isDone'), other: or(['a', 'b']) })""")
        assert config["entry"] == [
            {"type": "xstate.assign", "assignment": {
                "n": 0, "m": {"type": "inline:machine:2",
                              "code": "({ context }) => context.n + 1"}}},
            {"type": "xstate.raise"}]
        assert config["guard"] == {"type": "xstate.not", "guards": ["isDone"]}
        assert config["other"] == {"type": "xstate.or", "guards": ["a", "b"]}

    def test_a_spread_is_left_out_with_a_warning(self) -> None:
        """`...other` is JavaScript the reader does not run: left out, warned."""
        (machine,) = machines("createMachine({\n states: { ...common, a: {} } })", "m.ts")
        assert machine.config == {"states": {"a": {}}}
        (finding,) = machine.findings
        assert (finding.code, finding.location, finding.line) == (
            "spread-left-out", "states", 2)


class TestMachines:
    def test_setup_gives_the_implementations(self) -> None:
        """`setup({...}).createMachine({...})` reads setup as the implementations, and a
        delay written as a number (or arithmetic of numbers) is known."""
        (machine,) = machines("""setup({
            delays: { PT15M: 15 * 60 * 1000, later: ({ context }) => context.ms },
            guards: { ok: () => true },
        }).createMachine({ initial: 'a', states: { a: {} } })""", "m.ts")
        assert machine.delays == {"PT15M": 900000}
        assert set(machine.implementations) == {"delays", "guards"}

    def test_the_second_argument_gives_the_implementations(self) -> None:
        """`createMachine(config, {delays})`, XState v4's way, is read too."""
        (machine,) = machines("createMachine({ id: 'm' }, { delays: { slow: 3000 } })", "m.ts")
        assert (machine.config, machine.delays) == ({"id": "m"}, {"slow": 3000})

    def test_every_machine_of_a_file_in_order(self) -> None:
        """Each createMachine call is one machine; a JSX file's markup after them is not
        read."""
        found = machines("const a = createMachine({ id: 'a' });\n"
                         "const b = createMachine({ id: 'b' });\n"
                         "export const App = () => <div onClick={() => go()} />;\n", "m.tsx")
        assert [(m.config["id"], m.line) for m in found] == [("a", 1), ("b", 2)]


    def test_type_arguments_of_a_call_are_read_past(self) -> None:
        """`createMachine<C, E>(...)`, `raise<any, any>(...)` and `fromPromise<{...}>(...)`
        read as the calls they are."""
        config = one("createMachine<Ctx, Ev>({ id: 'g', entry: [raise<any, any>({ type: 'X' }),"
                     " fromPromise<{ a: string }, void>(async () => 1)] })")
        assert config == {"id": "g", "entry": [
            {"type": "xstate.raise"},
            {"type": "inline:machine:1",
             "code": "fromPromise<{ a: string }, void>(async () => 1)"}]}

    def test_a_call_in_a_comment_or_a_string_is_no_machine(self) -> None:
        """`createMachine(` in a doc comment or a string is text, not a call."""
        found = machines("/**\n * createMachine({ id: 'doc' })\n */\n"
                         "const s = 'createMachine({ id: 1 })';\n"
                         "const m = createMachine({ id: 'real' });", "m.ts")
        assert [(m.config["id"], m.line) for m in found] == [("real", 5)]


class TestRefused:
    def test_a_file_without_a_machine(self) -> None:
        """A file that creates no machine is refused, saying what is read."""
        with pytest.raises(DefinitionError, match=r"no createMachine\(\{...\}\) call"):
            machines("export const x = 1;", "m.ts")

    def test_a_config_that_is_not_a_literal(self) -> None:
        """`createMachine(config)` names a variable the reader cannot follow: located."""
        with pytest.raises(DefinitionError, match="not an object literal") as caught:
            machines("\nconst m = createMachine(config);", "m.ts")
        assert caught.value.findings[0].line == 2

    @pytest.mark.parametrize(("text", "message", "line"), [
        ("createMachine({\n  a: {\n", "the file ends inside a machine config", 2),
        ("createMachine({\n  [key]: 1 })", "computed key", 2),
        ("createMachine({\n  a: (1, 2] })", r"'\]' closes '\(' of line 2", 2),
        ("createMachine({\n  a: 1,\n  , })", "expected a key, got ','", 3),
    ])
    def test_what_cannot_be_read_is_located(self, text: str, message: str,
                                            line: int) -> None:
        """Text outside the subset is refused with its line, never run."""
        with pytest.raises(DefinitionError, match=message) as caught:
            machines(text, "m.ts")
        assert caught.value.findings[0].line == line

    @pytest.mark.parametrize("text", [
        "createMachine({ a: " + "[" * 5000 + "]" * 5000 + " })",
        "createMachine({ a: `" + "${`" * 3000 + "`}" * 3000 + "` })",
    ])
    def test_nesting_past_the_limit_is_refused_not_a_crash(self, text: str) -> None:
        """Values or templates nested past the loader's limit are refused by name, never a
        RecursionError."""
        with pytest.raises(DefinitionError, match=r"nested more than|not closed"):
            machines(text, "m.ts")

    def test_code_nested_deep_is_skipped_without_recursion(self) -> None:
        """Brackets in code are skipped with a stack: any depth reads as one reference."""
        config = one("createMachine({ a: f" + "(" * 20000 + ")" * 20000 + " })")
        assert inline_reference(config["a"]) == "inline:machine:1"


class TestNativeExpression:
    @pytest.mark.parametrize(("code", "native"), [
        ("({ context }) => context.seconds > 0", "(context.seconds > 0)"),
        ("({ context }) => context.book!.status === 'onloan'",
         "(context.book.status == 'onloan')"),
        ("({ context }) => context.a?.b", "(None if context.a is None else context.a.b)"),
        ("({ context }) => !context.done || context.n % 2 !== 0",
         "((not context.done) or ((context.n % 2) != 0))"),
        ("({ context }) => (context.p === 'x' ? 'o' : 'x')",
         "('o' if (context.p == 'x') else 'x')"),
        ("({ context }) => context.list.length", "len(context.list)"),
        ("({ event }) => event.output", "event.payload"),
        ("({ event }) => event.type", "event.type"),
        ("({ event }) => event.value",
         "(event.payload['value'] if 'value' in event.payload else None)"),
        ("({ context }) => { return context.n >= -1; }", "(context.n >= (-1))"),
        ("() => null", "None"),
    ])
    def test_the_shared_subset_is_translated(self, code: str, native: str) -> None:
        """Reads of context and the event, literals, comparisons, logic, arithmetic and the
        conditional say the same natively, fully parenthesised."""
        assert native_expression(code) == native

    @pytest.mark.parametrize("code", [
        "({ context }) => context.items.map(f)", "({ context }) => context.xs[0]",
        "({ context }) => ({ a: 1 })", "({ event }) => event.output.user.name",
        "({ self }) => self.id", "function () { return 1; }", "({ context }) => x",
        "({ context }) => context.n; extra",
    ])
    def test_anything_else_is_not(self, code: str) -> None:
        """Calls, indexes, objects, reads below an event's field, other parameters or
        names, functions: None, so the importer keeps a registered function."""
        assert native_expression(code) is None


class TestNativeObject:
    def test_an_object_of_expressions_is_translated_key_by_key(self) -> None:
        """`({ context }) => ({ a: 1, 'b c': context.x > 2 })`: one expression a key."""
        assert native_object("({ context }) => ({ a: 1, 'b c': context.x > 2, })") == {
            "a": "1", "b c": "(context.x > 2)"}

    @pytest.mark.parametrize("code", [
        "({ event }) => event", "({ context }) => ({ ...context })",
        "({ context }) => ({ [k]: 1 })", "({ context }) => ({ a: f(context) })",
    ])
    def test_anything_else_is_not(self, code: str) -> None:
        """Not an object literal, a spread, a computed key, a value not translated: None."""
        assert native_object(code) is None
