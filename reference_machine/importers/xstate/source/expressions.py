"""Inline arrow functions of XState's `context` and event translated into native expressions,
where they are one expression both languages say alike; anything else is not translated."""

from __future__ import annotations

import keyword

from reference_machine.importers.xstate.source.tokens import (
    TokenStream,
    Unreadable,
    number_value,
    string_value,
)

__all__ = ["native_expression", "native_object"]


def native_expression(code: str) -> str | None:
    """Gives the native expression an inline arrow function computes, where it is one
    expression of `context` and `event` in the subset both languages say the same way
    (`({ context }) => context.seconds > 0`), or None. XState's `event.x` is the native
    `event.payload.x` (`event.output`, a done actor's output, the whole payload)."""
    reader = TokenStream(code)
    reader.tokenize(0)
    try:
        return _Expression(reader).arrow()
    except (Unreadable, _Untranslatable):
        return None


def native_object(code: str) -> dict[str, str] | None:
    """Gives, key by key, the native expressions of an inline arrow function returning an
    object literal (`({ context }) => ({ name: context.name })`, an invoke's input), each as
    `native_expression` would translate it; None where any one is not."""
    reader = TokenStream(code)
    reader.tokenize(0)
    try:
        return _Expression(reader).object_arrow()
    except (Unreadable, _Untranslatable):
        return None


class _Untranslatable(Exception):
    """The inline function says something the native expressions do not say the same way."""


#: JavaScript's binary operators the native expressions say the same way, by precedence.
_BINARY = (("||",), ("&&",), ("===", "!==", "==", "!="), ("<", "<=", ">", ">="), ("+", "-"),
           ("*", "/", "%"))
_NATIVE_OPERATOR = {"||": "or", "&&": "and", "===": "==", "!==": "!=", "==": "==", "!=": "!="}


class _Expression:
    """Reads an arrow function's one expression and writes it as native expression text,
    fully parenthesised; anything outside the subset is `_Untranslatable`."""

    def __init__(self, reader: TokenStream) -> None:
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
                name = string_value(key)
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
            return repr(number_value(token))
        if token.kind == "string":
            return repr(string_value(token))
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
