"""The reader of an XState machine's source: each `createMachine({...})` call found, and its
config read in the object literal subset (keys, strings, numbers, arrays, objects, XState's
creators), every other expression kept as an inline reference."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reference_machine.documents import NESTING_MAX
from reference_machine.errors import DefinitionError
from reference_machine.findings import Finding, Severity
from reference_machine.importers.xstate.source.tokens import (
    Token,
    TokenStream,
    Unreadable,
    code_only,
    number_value,
    string_value,
)

__all__ = ["INLINE_PREFIX", "SOURCE_SUFFIXES", "Machine", "SourceReader", "inline_reference",
           "machines"]

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
_CALL = re.compile(r"\b(setup|createMachine)\s*[(<]")


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
    reader = SourceReader(text, name)
    found = reader.machines()
    if not found:
        raise DefinitionError([Finding(
            Severity.ERROR, "no-machine", "", "no createMachine({...}) call in this file: "
            "the importer reads the object literal such a call takes")], name)
    return found


class SourceReader(TokenStream):
    """Reads the machines of a source file: its `createMachine` calls, and each config's
    object literal as JSON data, with the line of each key path."""

    def __init__(self, text: str, name: str) -> None:
        super().__init__(text)
        self.name = name
        self.stem = _stem(name)
        self.depth = 0
        self.arithmetic_start = 0
        self.lines: dict[str, int] = {}
        self.findings: list[Finding] = []
        self.inline_seen: dict[int, int] = {}

    def machines(self) -> list[Machine]:
        found: list[Machine] = []
        done: set[int] = set()   # offsets of the createMachine calls read
        for call in _CALL.finditer(code_only(self.text)):
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
                except Unreadable:
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
                raise Unreadable(token.line if token else line, "createMachine is given "
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
        except Unreadable as exc:
            raise self.refused(exc) from None
        if not isinstance(config, dict):
            raise self.refused(Unreadable(line, "createMachine's config is not an object "
                                                "literal"))
        return Machine(config, dict(self.lines), line, implementations, tuple(self.findings))

    def refused(self, exc: Unreadable) -> DefinitionError:
        return DefinitionError([Finding(Severity.ERROR, "unreadable-source", "",
                                        f"{exc.message} (the importer reads the object literal "
                                        "subset: keys, strings, numbers, arrays, objects; code "
                                        "is kept as an inline reference)", line=exc.line)],
                               self.name)

    def value(self, path: str) -> Any:
        self.depth += 1
        try:
            if self.depth > NESTING_MAX:
                token = self.peek()
                raise Unreadable(token.line if token else 1, f"nested more than "
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
            result = string_value(token)
        elif token.kind == "template" and "${" not in token.text:
            result = token.text[1:-1]
        elif token.kind == "number":
            result = number_value(token)
        elif token.text == "-" and self.kind() == "number":
            result = -number_value(self.take())
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
        except (Unreadable, ArithmeticError, ValueError):
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
            raise Unreadable(1, "too long for a delay")
        token = self.take()
        if token.kind == "number":
            return number_value(token)
        if token.text == "-" and token.kind == "punct":
            return -self.factor()
        if token.text == "(" and token.kind == "punct":
            value = self.sum()
            self.expect(")")
            return value
        raise Unreadable(token.line, "not a number")

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
                    raise Unreadable(token.line, f"expected ':' after key {key!r}")
            if not self.at("}"):
                self.expect(",")
        self.take()
        return out

    def key(self, token: Token) -> str:
        if token.kind == "name" and token.text in ("async", "get", "set") and not (
                self.at(":") or self.at(",") or self.at("}") or self.at("(")):
            token = self.take()   # `async entry() {}`: the method's name follows
        if token.kind == "name":
            return token.text
        if token.kind == "string":
            return string_value(token)
        if token.kind == "number":
            number = number_value(token)
            return str(int(number)) if float(number).is_integer() else str(number)
        if token.kind == "template" and "${" not in token.text:
            return token.text[1:-1]
        if token.text == "[" and token.kind == "punct":
            inner = self.take()
            if inner.kind == "string" and self.at("]"):
                self.take()
                return string_value(inner)
            raise Unreadable(token.line, "a computed key ([expression]) names its key in "
                                         "JavaScript; write the key")
        raise Unreadable(token.line, f"expected a key, got {token.text!r}")

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

    def creator(self, name: Token, path: str) -> Any:
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

    def reference(self, first: Token, code: str, path: str = "") -> dict[str, Any]:
        count = self.inline_seen.get(first.line, 0) + 1
        self.inline_seen[first.line] = count
        where = f"{first.line}" if count == 1 else f"{first.line}.{count}"
        code = " ".join(code.split())
        if len(code) > _CODE_MAX:
            code = code[:_CODE_MAX - 3] + "..."
        return {"type": f"{INLINE_PREFIX}{self.stem}:{where}", "code": code}


def _stem(name: str) -> str:
    stem = Path(name).name
    for suffix in SOURCE_SUFFIXES:
        if stem.endswith(suffix):
            return stem[:-len(suffix)]
    return stem
