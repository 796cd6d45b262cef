"""The tokens of TypeScript or JavaScript source, read as they are asked for, and the moves
past what the reader does not read (a bracket and what it holds, an expression, a type)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from reference_machine.documents import NESTING_MAX

__all__ = ["Token", "TokenStream", "Unreadable", "code_only", "number_value", "string_value"]

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
#: Tokens after which a `/` starts a regular expression rather than a division.
_BEFORE_REGEX = frozenset({"(", ",", "=", ":", "[", "!", "&", "|", "?", "{", "}", ";", "=>",
                           "&&", "||", "??", "return", "typeof", "case", "+", "-", "*", "%",
                           "<", ">", "<=", ">=", "==", "===", "!=", "!=="})
_CLOSE = {"(": ")", "[": "]", "{": "}"}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "0": "\0"}


@dataclass(frozen=True, slots=True)
class Token:
    """One token of the source: its kind, its text, its offsets and its line."""

    kind: str      # name, string, number, punct, template, regex
    text: str
    start: int
    end: int
    line: int


class Unreadable(Exception):
    """The source cannot be read here: the line, and why."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


class TokenStream:
    """The tokens of a text from an offset on, read as they are asked for, and a position in
    them."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[Token] = []
        self.cursor = 0
        self.line = 1
        self.pos = 0
        self.broken: Unreadable | None = None

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
            token: Token | None = None
            if char == "`":
                end = _template_end(text, at)
                if end < 0:
                    self.broken = Unreadable(line, "a template string is not closed")
                    return False
                token = Token("template", text[at:end], at, end, line)
            elif char == "/" and text[at:at + 2] not in ("//", "/*") and (
                    not tokens or tokens[-1].text in _BEFORE_REGEX):
                match = _REGEX.match(text, at)
                if match is None:
                    self.broken = Unreadable(line, "a regular expression is not closed")
                    return False
                end = match.end()
                token = Token("regex", match.group(), at, end, line)
            else:
                match = _TOKEN.match(text, at)
                if match is None:
                    self.broken = Unreadable(line, f"cannot read {text[at:at + 20]!r}")
                    return False
                end = match.end()
                kind = match.lastgroup or "punct"
                if kind not in ("space", "comment"):
                    token = Token(kind, match.group(), at, end, line)
            self.line += text.count("\n", at, end)
            self.cursor = end
            if token is not None:
                tokens.append(token)
                return True
        return False

    def peek(self, offset: int = 0) -> Token | None:
        index = self.pos + offset
        while index >= len(self.tokens):
            if not self.more():
                return None
        return self.tokens[index]

    def take(self) -> Token:
        token = self.peek()
        if token is None:
            if self.broken is not None:
                raise self.broken
            last = self.tokens[-1].line if self.tokens else 1
            raise Unreadable(last, "the file ends inside a machine config")
        self.pos += 1
        return token

    def expect(self, text: str) -> Token:
        token = self.take()
        if token.text != text:
            raise Unreadable(token.line, f"expected {text!r}, got {token.text!r}")
        return token

    def kind(self) -> str:
        token = self.peek()
        return "" if token is None else token.kind

    def at(self, text: str, offset: int = 0) -> bool:
        token = self.peek(offset)
        return token is not None and token.text == text and token.kind == "punct"

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
                raise Unreadable(token.line, f"{token.text!r} closes {opening.text!r} of "
                                             f"line {opening.line}")


def code_only(text: str) -> str:
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


def string_value(token: Token) -> str:
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


def number_value(token: Token) -> int | float:
    text = token.text.replace("_", "").rstrip("n")
    lowered = text.lower()
    if lowered.startswith(("0x", "0b", "0o")):
        return int(text, 0)
    number = float(text)
    return int(number) if number.is_integer() and "." not in text and "e" not in lowered \
        else number
