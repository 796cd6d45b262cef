"""XState machines read from their TypeScript or JavaScript source, with no JavaScript run.

`machines(text, name)` finds each `createMachine({...})` call (also `setup({...})
.createMachine({...})` and `createMachine(config, implementations)`) and reads its config,
an object literal, as the JSON data `xstate.convert` takes. `JSON.stringify(machine.config)`
would drop every function in it (an inline guard, an `assign` callback, a delay, an invoked
actor's logic) and the config would import as if they were never written; read here, each is
kept where it was written as an inline reference:

- an arrow function, a function, a method, a variable or any expression the literal subset
  does not hold becomes `{"type": "inline:<file>:<line>", "code": "<its text>"}` (the importer
  names it `inline.<file>.L<line>`, a function to register, and warns);
- a call of one of XState's action or guard creators becomes its JSON form: `assign({...})`
  `{"type": "xstate.assign", "assignment": {...}}`, `not(g)` `{"type": "xstate.not",
  "guards": [g]}`, `raise(...)` `{"type": "xstate.raise"}`, ...; any other call is inline.

`native_expression(code)` gives the native expression an inline arrow function of `context`
and the event computes, where it is one expression both languages say alike, else None.

The literal subset: keys (names, strings, numbers), strings (template strings without `${}`),
numbers, `true`/`false`/`null`/`undefined`, arrays and nested objects; comments; a TypeScript
`as T` / `satisfies T` / `!` after a value. A spread (`...other`) is left out with a warning.
The implementations given with the machine (`setup({delays, guards, actions, actors})`, or
`createMachine`'s second argument) are read the same way, so a named delay written as a
number there is known.

Nothing is evaluated: the reader only tokenizes, and a text it cannot read is refused with
its line.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reference_machine.documents import NESTING_MAX
from reference_machine.errors import DefinitionError
from reference_machine.findings import Finding, Severity

__all__ = ["INLINE_PREFIX", "SOURCE_SUFFIXES", "Machine", "inline_reference", "machines",
           "native_expression", "native_object"]

#: The endings of the source files read here (any other file is a JSON or YAML config).
SOURCE_SUFFIXES = (".ts", ".tsx", ".mts", ".cts", ".js", ".jsx", ".mjs", ".cjs")

#: How an inline reference's `type` starts: `inline:<file>:<line>`.
INLINE_PREFIX = "inline:"
#: The most tokens an arithmetic of numbers is read in (a delay: `15 * 60 * 1000`).
_ARITHMETIC_TOKENS_MAX = 64
#: The most characters of an inline function's code kept in its reference.
_CODE_MAX = 400

#: XState's action creators, written as JSON `{"type": "xstate.<name>"}`.
_ACTIONS = frozenset({"raise", "sendTo", "sendParent", "log", "cancel", "stopChild", "stop",
                      "spawnChild", "emit", "enqueueActions", "forwardTo", "escalate", "pure",
                      "choose", "respond", "send"})
#: XState's guard combinators, their guards as JSON `{"type": "xstate.<name>", "guards": []}`.
_GUARDS = frozenset({"not", "and", "or"})

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<number>(?:0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+
               |(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][+-]?\d+)?)n?)
  | (?P<name>[A-Za-z_$][\w$]*)
  | (?P<string>'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")
  | (?P<punct>=>|\.\.\.|\?\.|\?\?=?|===?|!==?|<=|>=|&&=?|\|\|=?|\*\*|[-+*/%&|^<>!~?:;,.=(){}\[\]@#])
""", re.VERBOSE | re.DOTALL)
_REGEX = re.compile(r"/(?:[^/\\\[\n]|\\.|\[(?:[^\]\\\n]|\\.)*\])+/[a-z]*")
_CALL = re.compile(r"\b(setup|createMachine)\s*[(<]")
#: Tokens after which a `/` starts a regular expression rather than a division.
_BEFORE_REGEX = frozenset({"(", ",", "=", ":", "[", "!", "&", "|", "?", "{", "}", ";", "=>",
                           "&&", "||", "??", "return", "typeof", "case", "+", "-", "*", "%",
                           "<", ">", "<=", ">=", "==", "===", "!=", "!=="})
_CLOSE = {"(": ")", "[": "]", "{": "}"}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "0": "\0"}


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str      # name, string, number, punct, template, regex
    text: str
    start: int
    end: int
    line: int


@dataclass(frozen=True, slots=True)
class Machine:
    """One machine read from a source file: its config as JSON data, the line of each key
    path in it (`states.idle.on.FETCH`), and its implementations (`setup({...})` or the
    second argument of `createMachine`)."""

    config: dict[str, Any]
    lines: dict[str, int]
    line: int
    implementations: dict[str, Any] = field(default_factory=dict)
    findings: tuple[Finding, ...] = ()

    @property
    def delays(self) -> dict[str, int]:
        """Gives the named delays the implementations write as a number of ms."""
        written = self.implementations.get("delays")
        if not isinstance(written, Mapping):
            return {}
        return {str(k): int(v) for k, v in written.items()
                if isinstance(v, int | float) and not isinstance(v, bool) and v >= 0}


def native_expression(code: str) -> str | None:
    """Gives the native expression an inline arrow function computes, where it is one
    expression of `context` and `event` in the subset both languages say the same way
    (`({ context }) => context.seconds > 0`), or None. XState's `event.x` is the native
    `event.payload.x` (`event.output`, a done actor's output, the whole payload)."""
    reader = _Reader(code, "<inline>")
    reader.tokenize(0)
    try:
        return _Expression(reader).arrow()
    except (_Unreadable, _Untranslatable):
        return None


def native_object(code: str) -> dict[str, str] | None:
    """Gives, key by key, the native expressions of an inline arrow function returning an
    object literal (`({ context }) => ({ name: context.name })`, an invoke's input), each as
    `native_expression` would translate it; None where any one is not."""
    reader = _Reader(code, "<inline>")
    reader.tokenize(0)
    try:
        return _Expression(reader).object_arrow()
    except (_Unreadable, _Untranslatable):
        return None


def inline_reference(value: Any) -> str | None:
    """Gives the `inline:<file>:<line>` of an inline reference, or None for any other value."""
    if isinstance(value, Mapping):
        kind = value.get("type")
        if isinstance(kind, str) and kind.startswith(INLINE_PREFIX):
            return kind
    return None


def machines(text: str, name: str = "<source>") -> list[Machine]:
    """Gives every machine a source file creates, in the order written. Raises
    `DefinitionError` (located by line) when there is none or a config cannot be read."""
    reader = _Reader(text, name)
    found = reader.machines()
    if not found:
        raise DefinitionError([Finding(
            Severity.ERROR, "no-machine", "", "no createMachine({...}) call in this file: "
            "the importer reads the object literal such a call takes")], name)
    return found


class _Unreadable(Exception):
    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


class _Reader:
    def __init__(self, text: str, name: str) -> None:
        self.text = text
        self.name = name
        self.stem = _stem(name)
        self.tokens: list[_Token] = []
        self.cursor = 0
        self.line = 1
        self.depth = 0
        self.arithmetic_start = 0
        self.pos = 0
        self.lines: dict[str, int] = {}
        self.findings: list[Finding] = []
        self.inline_seen: dict[int, int] = {}
        self.broken: _Unreadable | None = None

    # -- tokens ----------------------------------------------------------------------------

    def tokenize(self, at: int) -> None:
        """Starts reading tokens at offset `at`, as they are asked for (a machine's tokens
        only, however long the file); where the text stops being readable (JSX, say, after
        the machine) the tokens end, and going past them is refused then."""
        self.tokens, self.pos, self.broken = [], 0, None
        self.cursor, self.line = at, self.text.count("\n", 0, at) + 1

    def more(self) -> bool:
        """Reads one more token; False at the end of the text or of what can be read."""
        text, tokens = self.text, self.tokens
        while self.broken is None and self.cursor < len(text):
            at, line = self.cursor, self.line
            char = text[at]
            token: _Token | None = None
            if char == "`":
                end = _template_end(text, at)
                if end < 0:
                    self.broken = _Unreadable(line, "a template string is not closed")
                    return False
                token = _Token("template", text[at:end], at, end, line)
            elif char == "/" and text[at:at + 2] not in ("//", "/*") and (
                    not tokens or tokens[-1].text in _BEFORE_REGEX):
                match = _REGEX.match(text, at)
                if match is None:
                    self.broken = _Unreadable(line, "a regular expression is not closed")
                    return False
                end = match.end()
                token = _Token("regex", match.group(), at, end, line)
            else:
                match = _TOKEN.match(text, at)
                if match is None:
                    self.broken = _Unreadable(line, f"cannot read {text[at:at + 20]!r}")
                    return False
                end = match.end()
                kind = match.lastgroup or "punct"
                if kind not in ("space", "comment"):
                    token = _Token(kind, match.group(), at, end, line)
            self.line += text.count("\n", at, end)
            self.cursor = end
            if token is not None:
                tokens.append(token)
                return True
        return False

    def peek(self, offset: int = 0) -> _Token | None:
        index = self.pos + offset
        while index >= len(self.tokens):
            if not self.more():
                return None
        return self.tokens[index]

    def take(self) -> _Token:
        token = self.peek()
        if token is None:
            if self.broken is not None:
                raise self.broken
            last = self.tokens[-1].line if self.tokens else 1
            raise _Unreadable(last, "the file ends inside a machine config")
        self.pos += 1
        return token

    def expect(self, text: str) -> _Token:
        token = self.take()
        if token.text != text:
            raise _Unreadable(token.line, f"expected {text!r}, got {token.text!r}")
        return token

    def kind(self) -> str:
        token = self.peek()
        return "" if token is None else token.kind

    def at(self, text: str, offset: int = 0) -> bool:
        token = self.peek(offset)
        return token is not None and token.text == text and token.kind == "punct"

    # -- machines --------------------------------------------------------------------------

    def machines(self) -> list[Machine]:
        found: list[Machine] = []
        done: set[int] = set()   # offsets of the createMachine calls read
        for call in _CALL.finditer(_code_only(self.text)):
            if call.start() in done:
                continue
            self.tokenize(call.start())
            self.pos = 1
            self.pos = self.generic() or 1
            if not self.at("("):
                continue
            start = self.pos - 1   # the call's name: `createMachine<T>` read as `createMachine`
            setup: dict[str, Any] = {}
            if call.group(1) == "setup":
                self.pos += 1
                try:
                    written = {} if self.at(")") else self.value("")
                    self.expect(")")
                    self.expect(".")
                except _Unreadable:
                    continue
                token = self.peek()
                if token is None or token.text != "createMachine":
                    continue
                done.add(token.start)
                self.take()
                self.pos = self.generic() or self.pos
                if not self.at("("):
                    continue
                start = self.pos - 1
                setup = written if isinstance(written, dict) else {}
            found.append(self.machine(start, setup))
        return found

    def machine(self, index: int, setup: dict[str, Any]) -> Machine:
        self.pos = index + 2
        self.lines = {}
        self.findings = []
        line = self.tokens[index].line
        try:
            if not self.at("{"):
                token = self.peek()
                raise _Unreadable(token.line if token else line, "createMachine is given "
                                  f"{token.text if token else 'nothing'!r}, not an object "
                                  "literal: the importer reads the literal written in the call")
            config = self.value("")
            config_lines, findings = self.lines, self.findings
            implementations = dict(setup)
            if self.at(","):
                self.take()
                if not self.at(")"):
                    self.lines, self.findings = {}, []
                    second = self.value("")
                    if isinstance(second, dict):
                        implementations.update(second)
            self.lines, self.findings = config_lines, findings
        except _Unreadable as exc:
            raise self.refused(exc) from None
        if not isinstance(config, dict):
            raise self.refused(_Unreadable(line, "createMachine's config is not an object "
                                                 "literal"))
        return Machine(config, dict(self.lines), line, implementations, tuple(self.findings))

    def refused(self, exc: _Unreadable) -> DefinitionError:
        return DefinitionError([Finding(Severity.ERROR, "unreadable-source", "",
                                        f"{exc.message} (the importer reads the object literal "
                                        "subset: keys, strings, numbers, arrays, objects; code "
                                        "is kept as an inline reference)", line=exc.line)],
                               self.name)

    # -- values ----------------------------------------------------------------------------

    def value(self, path: str) -> Any:
        self.depth += 1
        try:
            if self.depth > NESTING_MAX:
                token = self.peek()
                raise _Unreadable(token.line if token else 1, f"nested more than "
                                  f"{NESTING_MAX} levels deep; a machine config is far "
                                  "shallower")
            return self.read_value(path)
        finally:
            self.depth -= 1

    def read_value(self, path: str) -> Any:
        start = self.pos
        token = self.take()
        result: Any
        if token.text == "{" and token.kind == "punct":
            result = self.object(path)
        elif token.text == "[" and token.kind == "punct":
            result = self.array(path)
        elif token.kind == "string":
            result = _string(token)
        elif token.kind == "template" and "${" not in token.text:
            result = token.text[1:-1]
        elif token.kind == "number":
            result = _number(token)
        elif token.text == "-" and self.kind() == "number":
            result = -_number(self.take())
        elif token.kind == "name" and token.text in ("true", "false", "null", "undefined"):
            result = {"true": True, "false": False, "null": None, "undefined": None}[token.text]
        elif token.kind == "name" and (self.at("(") or self.generic()) and (
                token.text in _ACTIONS or token.text in _GUARDS or token.text == "assign"):
            self.pos = self.generic() or self.pos
            result = self.creator(token, path)
        else:
            folded = self.arithmetic(start) if token.text == "(" else None
            if folded is not None:
                return folded
            self.pos = start
            return self.inline(path)
        if self.ends_value():
            return result
        if isinstance(result, int | float) and not isinstance(result, bool):
            folded = self.arithmetic(start)
            if folded is not None:
                return folded
            self.pos = start
            return self.inline(path)
        if self.typed():
            self.skip_type()
            return result
        self.pos = start  # the value goes on as an expression: `a + 1`, `x ? y : z`, ...
        return self.inline(path)

    def arithmetic(self, start: int) -> int | float | None:
        """Gives the value of an expression of number literals alone (`15 * 60 * 1000`), read
        from token `start` to the end of the value; None for any other expression."""
        self.pos = self.arithmetic_start = start
        try:
            value = self.sum()
        except (_Unreadable, ArithmeticError, ValueError):
            return None
        if not self.ends_value():
            return None
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return value

    def sum(self) -> int | float:
        value = self.product()
        while self.at("+") or self.at("-"):
            sign = self.take().text
            other = self.product()
            value = value + other if sign == "+" else value - other
        return value

    def product(self) -> int | float:
        value = self.factor()
        while self.at("*") or self.at("/") or self.at("%"):
            operator = self.take().text
            other = self.factor()
            value = value * other if operator == "*" else value / other if operator == "/" \
                else value % other
        return value

    def factor(self) -> int | float:
        if self.pos - self.arithmetic_start > _ARITHMETIC_TOKENS_MAX:
            raise _Unreadable(1, "too long for a delay")
        token = self.take()
        if token.kind == "number":
            return _number(token)
        if token.text == "-" and token.kind == "punct":
            return -self.factor()
        if token.text == "(" and token.kind == "punct":
            value = self.sum()
            self.expect(")")
            return value
        raise _Unreadable(token.line, "not a number")

    def ends_value(self) -> bool:
        token = self.peek()
        return token is None or (token.kind == "punct" and token.text in (",", "}", "]", ")"))

    def typed(self) -> bool:
        """Tells whether a TypeScript annotation follows the value (`as T`, `satisfies T`,
        a non-null `!`), which changes nothing of it."""
        token = self.peek()
        if token is None:
            return False
        if token.kind == "name" and token.text in ("as", "satisfies"):
            return True
        if token.text == "!" and token.kind == "punct":
            self.take()
            return self.ends_value() or self.typed()
        return False

    def object(self, path: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        while not self.at("}"):
            token = self.take()
            if token.text == "...":
                spread = self.inline(path)
                self.findings.append(Finding(
                    Severity.WARNING, "spread-left-out", path or "(config)",
                    f"the spread ...{str(spread.get('code', ''))[:40]} is JavaScript the "
                    "importer does not run; what it adds is left out", line=token.line))
            else:
                key = self.key(token)
                child = f"{path}.{key}" if path else key
                self.lines.setdefault(child, token.line)
                if self.at(":"):
                    self.take()
                    out[key] = self.value(child)
                elif self.at("("):   # a method: `entry() {...}`
                    self.pos -= 1
                    out[key] = self.inline(child, method=True)
                elif token.kind == "name":   # shorthand `{ fetchUser }`: a variable
                    out[key] = self.reference(token, token.text)
                else:
                    raise _Unreadable(token.line, f"expected ':' after key {key!r}")
            if not self.at("}"):
                self.expect(",")
        self.take()
        return out

    def key(self, token: _Token) -> str:
        if token.kind == "name" and token.text in ("async", "get", "set") and not (
                self.at(":") or self.at(",") or self.at("}") or self.at("(")):
            token = self.take()   # `async entry() {}`: the method's name follows
        if token.kind == "name":
            return token.text
        if token.kind == "string":
            return _string(token)
        if token.kind == "number":
            number = _number(token)
            return str(int(number)) if float(number).is_integer() else str(number)
        if token.kind == "template" and "${" not in token.text:
            return token.text[1:-1]
        if token.text == "[" and token.kind == "punct":
            inner = self.take()
            if inner.kind == "string" and self.at("]"):
                self.take()
                return _string(inner)
            raise _Unreadable(token.line, "a computed key ([expression]) names its key in "
                                          "JavaScript; write the key")
        raise _Unreadable(token.line, f"expected a key, got {token.text!r}")

    def array(self, path: str) -> list[Any]:
        out: list[Any] = []
        while not self.at("]"):
            token = self.peek()
            child = f"{path}[{len(out)}]"
            if token is not None:
                self.lines.setdefault(child, token.line)
            if self.at("..."):
                self.take()
                spread = self.inline(child)
                self.findings.append(Finding(
                    Severity.WARNING, "spread-left-out", path,
                    f"the spread ...{str(spread.get('code', ''))[:40]} is JavaScript the "
                    "importer does not run; what it adds is left out",
                    line=token.line if token else None))
            else:
                out.append(self.value(child))
            if not self.at("]"):
                self.expect(",")
        self.take()
        return out

    def creator(self, name: _Token, path: str) -> Any:
        """Gives the JSON form of a call of one of XState's action creators or guard
        combinators: `assign({...})` with its assignment read, `not(g)` with its guards."""
        start = self.pos - 1
        self.expect("(")
        if name.text == "assign":
            if not self.at("{"):
                self.pos = start
                return self.inline(path)
            assignment = self.value(f"{path}.assignment")
            if not self.at(")"):
                self.pos = start
                return self.inline(path)
            self.take()
            return {"type": "xstate.assign", "assignment": assignment}
        if name.text in _GUARDS:
            guards = self.value(f"{path}.guards")
            if not self.at(")"):
                self.pos = start
                return self.inline(path)
            self.take()
            listed = guards if isinstance(guards, list) else [guards]
            return {"type": f"xstate.{name.text}", "guards": listed}
        self.pos -= 1
        self.skip_balanced()
        return {"type": f"xstate.{name.text}"}

    # -- code ------------------------------------------------------------------------------

    def inline(self, path: str, *, method: bool = False) -> dict[str, Any]:
        """Skips one expression (an arrow function, a call, a variable, ...) and gives its
        inline reference."""
        first = self.take()
        self.pos -= 1
        if method:
            self.take()
        start = first.start
        self.skip_expression()
        end = self.tokens[self.pos - 1].end if self.pos > 0 else start
        return self.reference(first, self.text[start:end], path)

    def reference(self, first: _Token, code: str, path: str = "") -> dict[str, Any]:
        count = self.inline_seen.get(first.line, 0) + 1
        self.inline_seen[first.line] = count
        where = f"{first.line}" if count == 1 else f"{first.line}.{count}"
        code = " ".join(code.split())
        if len(code) > _CODE_MAX:
            code = code[:_CODE_MAX - 3] + "..."
        return {"type": f"{INLINE_PREFIX}{self.stem}:{where}", "code": code}

    def skip_expression(self) -> None:
        """Moves past one expression: to the `,` `}` `]` `)` that ends it, brackets
        balanced, and a call's type arguments (`fromPromise<A, B>(...)`) too."""
        while not self.ends_value():
            token = self.peek()
            if token is not None and token.kind == "punct" and token.text in _CLOSE:
                self.skip_balanced()
            elif token is not None and token.kind == "name" and self.at("<", 1):
                self.take()
                self.pos = self.generic() or self.pos
            else:
                self.take()

    def generic(self) -> int:
        """Gives the token index after a call's type arguments starting here (`<A, B>`
        then `(`), or 0 when none start here."""
        if not self.at("<"):
            return 0
        depth, offset, brackets = 0, 0, 0
        while offset < 500:
            token = self.peek(offset)
            offset += 1
            if token is None:
                return 0
            if token.kind != "punct":
                continue
            if token.text in _CLOSE:
                brackets += 1
            elif token.text in (")", "]", "}"):
                brackets -= 1
                if brackets < 0:
                    return 0
            elif token.text == ";":
                return 0
            elif brackets == 0 and token.text in ("<", ">"):
                depth += 1 if token.text == "<" else -1
                if depth == 0:
                    following = self.peek(offset)
                    return self.pos + offset if following is not None and (
                        following.text == "(") else 0
        return 0

    def skip_type(self) -> None:
        """Moves past a TypeScript type (`as Record<string, number>`): to the end of the
        value, its `<...>` balanced as well as its brackets."""
        angles = 0
        while angles or not self.ends_value():
            token = self.peek()
            if token is not None and token.kind == "punct" and token.text in _CLOSE:
                self.skip_balanced()
                continue
            text = self.take().text
            angles += {"<": 1, ">": -1}.get(text, 0)
            angles = max(angles, 0)

    def skip_balanced(self) -> None:
        """Moves past a bracket and what it holds, to the bracket that closes it (with a
        stack, not recursion: code may nest deeper than Python's stack)."""
        openings = [self.take()]
        while openings:
            token = self.take()
            if token.kind != "punct":
                continue
            if token.text in _CLOSE:
                openings.append(token)
            elif token.text == _CLOSE[openings[-1].text]:
                openings.pop()
            elif token.text in (")", "]", "}"):
                opening = openings[-1]
                raise _Unreadable(token.line, f"{token.text!r} closes {opening.text!r} of "
                                              f"line {opening.line}")


def _stem(name: str) -> str:
    stem = Path(name).name
    for suffix in SOURCE_SUFFIXES:
        if stem.endswith(suffix):
            return stem[:-len(suffix)]
    return stem


def _code_only(text: str) -> str:
    """Gives `text` with its comments and strings blanked (offsets and lines kept), so that a
    `createMachine(` in a doc comment or an example string is no call."""
    out = list(text)
    index, length = 0, len(text)
    while index < length:
        char = text[index]
        if text.startswith("//", index):
            end = text.find("\n", index)
            end = length if end < 0 else end
        elif text.startswith("/*", index):
            end = text.find("*/", index + 2)
            end = length if end < 0 else end + 2
        elif char in "'\"":
            end = index + 1
            while end < length and text[end] not in (char, "\n"):
                end += 2 if text[end] == "\\" else 1
            end = min(end + 1, length)
        elif char == "`":
            end = _template_end(text, index)
            end = length if end < 0 else end
        else:
            index += 1
            continue
        for blank in range(index, end):
            if out[blank] != "\n":
                out[blank] = " "
        index = end
    return "".join(out)


def _template_end(text: str, at: int, depth: int = 0) -> int:
    """Gives the offset after the template string starting at `at` (its `${...}` parts
    skipped, nested strings and templates in them too), or -1 when it is not closed (or
    nests its templates past `NESTING_MAX`)."""
    if depth > NESTING_MAX:
        return -1
    index = at + 1
    while index < len(text):
        char = text[index]
        if char == "\\":
            index += 2
            continue
        if char == "`":
            return index + 1
        if char == "$" and text.startswith("${", index):
            braces, index = 1, index + 2
            while index < len(text) and braces:
                inner = text[index]
                if inner in "'\"":
                    close = text.find(inner, index + 1)
                    index = len(text) if close < 0 else close + 1
                    continue
                if inner == "`":
                    end = _template_end(text, index, depth + 1)
                    if end < 0:
                        return -1
                    index = end
                    continue
                braces += {"{": 1, "}": -1}.get(inner, 0)
                index += 1
            continue
        index += 1
    return -1


def _string(token: _Token) -> str:
    body = token.text[1:-1]
    out, index = [], 0
    while index < len(body):
        char = body[index]
        if char != "\\":
            out.append(char)
            index += 1
            continue
        nxt = body[index + 1] if index + 1 < len(body) else ""
        if nxt == "u" and body[index + 2:index + 3] == "{":
            close = body.index("}", index)
            out.append(chr(int(body[index + 3:close], 16)))
            index = close + 1
        elif nxt == "u":
            out.append(chr(int(body[index + 2:index + 6], 16)))
            index += 6
        elif nxt == "x":
            out.append(chr(int(body[index + 2:index + 4], 16)))
            index += 4
        else:
            out.append(_ESCAPES.get(nxt, nxt))
            index += 2
    return "".join(out)


def _number(token: _Token) -> int | float:
    text = token.text.replace("_", "").rstrip("n")
    lowered = text.lower()
    if lowered.startswith(("0x", "0b", "0o")):
        return int(text, 0)
    number = float(text)
    return int(number) if number.is_integer() and "." not in text and "e" not in lowered \
        else number


class _Untranslatable(Exception):
    """The inline function says something the native expressions do not say the same way."""


#: JavaScript's binary operators the native expressions say the same way, by precedence.
_BINARY = (("||",), ("&&",), ("===", "!==", "==", "!="), ("<", "<=", ">", ">="), ("+", "-"),
           ("*", "/", "%"))
_NATIVE_OPERATOR = {"||": "or", "&&": "and", "===": "==", "!==": "!=", "==": "==", "!=": "!="}


class _Expression:
    """Reads an arrow function's one expression and writes it as native expression text,
    fully parenthesised; anything outside the subset is `_Untranslatable`."""

    def __init__(self, reader: _Reader) -> None:
        self.reader = reader
        self.params: set[str] = set()

    def object_arrow(self) -> dict[str, str]:
        reader = self.reader
        self.parameters()
        reader.expect("(")
        reader.expect("{")
        out: dict[str, str] = {}
        while not reader.at("}"):
            key = reader.take()
            if key.kind == "string":
                name = _string(key)
            elif key.kind == "name":
                name = key.text
            else:
                raise _Untranslatable(key.text)
            reader.expect(":")
            out[name] = self.expression()
            if not reader.at("}"):
                reader.expect(",")
        reader.take()
        reader.expect(")")
        if reader.peek() is not None:
            raise _Untranslatable("more after the object")
        return out

    def arrow(self) -> str:
        reader = self.reader
        self.parameters()
        if reader.at("{"):   # `{ return expression; }`
            reader.take()
            keyword = reader.take()
            if keyword.text != "return":
                raise _Untranslatable(keyword.text)
            text = self.expression()
            if reader.at(";"):
                reader.take()
            reader.expect("}")
        else:
            text = self.expression()
        if reader.peek() is not None:
            raise _Untranslatable("more after the expression")
        return text

    def parameters(self) -> None:
        """Reads `({ context, event }) =>`, the parameters the expression may name."""
        reader = self.reader
        reader.expect("(")
        if reader.at("{"):
            reader.take()
            while not reader.at("}"):
                name = reader.take()
                if name.kind != "name" or name.text not in ("context", "event"):
                    raise _Untranslatable(name.text)
                self.params.add(name.text)
                if not reader.at("}"):
                    reader.expect(",")
            reader.take()
        reader.expect(")")
        reader.expect("=>")

    def expression(self) -> str:
        condition = self.binary(0)
        if not self.reader.at("?"):
            return condition
        self.reader.take()
        yes = self.expression()
        self.reader.expect(":")
        no = self.expression()
        return f"({yes} if {condition} else {no})"

    def binary(self, level: int) -> str:
        if level == len(_BINARY):
            return self.unary()
        left = self.binary(level + 1)
        while True:
            token = self.reader.peek()
            if token is None or token.kind != "punct" or token.text not in _BINARY[level]:
                return left
            self.reader.take()
            right = self.binary(level + 1)
            left = f"({left} {_NATIVE_OPERATOR.get(token.text, token.text)} {right})"

    def unary(self) -> str:
        reader = self.reader
        if reader.at("!"):
            reader.take()
            return f"(not {self.unary()})"
        if reader.at("-"):
            reader.take()
            return f"(-{self.unary()})"
        return self.postfix(self.primary())

    def primary(self) -> str:
        token = self.reader.take()
        if token.kind == "number":
            return repr(_number(token))
        if token.kind == "string":
            return repr(_string(token))
        if token.kind == "template" and "${" not in token.text:
            return repr(token.text[1:-1])
        if token.kind == "name" and token.text in ("true", "false"):
            return "True" if token.text == "true" else "False"
        if token.kind == "name" and token.text in ("null", "undefined"):
            return "None"
        if token.kind == "name" and token.text in self.params:
            return token.text
        if token.text == "(" and token.kind == "punct":
            inner = self.expression()
            self.reader.expect(")")
            return inner
        raise _Untranslatable(token.text)

    def postfix(self, text: str) -> str:
        reader = self.reader
        while True:
            if reader.at("!") and not reader.at("=", 1):   # TypeScript's non-null `x!`
                reader.take()
            elif reader.at(".") or reader.at("?."):
                optional = reader.take().text == "?."
                name = reader.take()
                if name.kind != "name":
                    raise _Untranslatable(name.text)
                text = self.member(text, name.text, optional)
            else:
                if reader.at("(") or reader.at("["):
                    raise _Untranslatable("a call or an index")
                return text

    def member(self, text: str, name: str, optional: bool) -> str:
        """Gives the native read of key `name` of `text`. An event's field reads None where
        the payload lacks it (JavaScript's undefined: an event or an actor's output has no
        declared shape); a deeper read of it is not translated. A context read is plain:
        the context is declared, and reading a key of null fails in both languages (`?.`
        gives None instead, as in JavaScript)."""
        if text == "event":
            if name == "type":
                return "event.type"
            if name == "output":
                return "event.payload"
            if name in ("error", "input"):
                raise _Untranslatable(f"event.{name}")
            return f"(event.payload[{name!r}] if {name!r} in event.payload else None)"
        if text.startswith("(event.payload[") or (text == "event.payload" and name == "length"):
            raise _Untranslatable("a read below an event's field")
        if text == "event.payload":
            return f"(event.payload[{name!r}] if {name!r} in event.payload else None)"
        if name == "length":
            read = f"len({text})"
        elif name.isidentifier() and not keyword.iskeyword(name) and name not in (
                "payload", "source", "type", "id", "answers"):
            read = f"{text}.{name}"
        else:
            read = f"{text}[{name!r}]"
        return f"(None if {text} is None else {read})" if optional else read
