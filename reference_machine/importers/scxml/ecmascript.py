"""ECMAScript-datamodel expressions read by a small parser of JavaScript's expression grammar
into the Python tree the python datamodel's rewriting takes (nothing runs them): literals
(numbers, strings, `true`, `false`, `null`, `undefined`, arrays), `===` `!==` `==` `!=` (both
without JavaScript's type coercion), `<` `<=` `>` `>=`, `+ - * / %`, `!`, `&&` and `||` (the
operand that decides), `?:`, member and index reads, `.length`, `typeof x === 'type'`, `In()`,
`Math.abs`/`min`/`max`; a cond is true as JavaScript holds it (an empty array is true).
`undefined` and `null` are both None. And the statements of a `<script>` of assignments."""

from __future__ import annotations

import ast
import copy
import re

from reference_machine.importers.scxml.expressions import (
    Inexpressible,
    is_native_call,
    native_call,
)

__all__ = ["JS_ASSIGNMENT", "EcmaScriptParser", "js_statements", "js_test"]


class _ScriptSyntaxError(SyntaxError):
    """Text that is not an ECMAScript expression (SCXML raises error.execution where it runs)."""


_JS_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<number>0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<string>'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")
  | (?P<name>[A-Za-z_$][A-Za-z0-9_$]*)
  | (?P<other>=>|\+\+|--|\*\*=?|>>>?=?|<<=?|[-+*/%&|^]=|=(?![=>])|&(?!&)|\|(?!\|)|[\^~;@\#`\\])
  | (?P<op>===|!==|==|!=|<=|>=|&&|\|\||[-+*/%!<>()\[\]{},.?:])
  | (?P<quote>['"])
""", re.VERBOSE)

_JS_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "0": "\0"}

#: Reserved words that cannot stand in an expression: text using them is not one.
_JS_RESERVED = frozenset({
    "break", "case", "catch", "const", "continue", "debugger", "default", "do", "else",
    "export", "extends", "finally", "for", "if", "import", "let", "return", "static", "switch",
    "throw", "try", "var", "while", "with", "enum", "await", "implements", "interface",
    "package", "private", "protected", "public"})

#: Valid in an expression, but what they do has no native counterpart: refused, named.
_JS_UNSAID = frozenset({
    "new", "this", "function", "class", "super", "delete", "void", "instanceof", "in", "yield",
    "NaN", "Infinity", "Math", "JSON", "Object", "Array", "String", "Number", "Boolean",
    "Date", "RegExp", "parseInt", "parseFloat", "isNaN", "isFinite", "eval", "Function",
    "arguments", "globalThis", "window", "document", "console", "Symbol", "Promise"})

_JS_LITERALS = {"true": True, "false": False, "null": None, "undefined": None}

_JS_MATH = {"abs": "abs", "min": "min", "max": "max"}

#: `typeof x === '<type>'`: the native test of each answer (`undefined` and `null` are both
#: None in a context read back from JSON)
_JS_TYPES = {"number": "is_number", "string": "is_string", "boolean": "is_bool"}

_JS_COMPARE: dict[str, ast.cmpop] = {"===": ast.Eq(), "==": ast.Eq(), "!==": ast.NotEq(),
                                     "!=": ast.NotEq(), "<": ast.Lt(), "<=": ast.LtE(),
                                     ">": ast.Gt(), ">=": ast.GtE()}

_JS_ARITHMETIC: dict[str, ast.operator] = {"+": ast.Add(), "-": ast.Sub(), "*": ast.Mult(),
                                           "/": ast.Div(), "%": ast.Mod()}


def js_test(node: ast.expr) -> ast.expr:
    """Gives `node` as a condition with ECMAScript's truth: false are `false`, 0, '', null
    and undefined, and an empty array or object is true (Python holds it false)."""
    if _js_boolean(node):
        return node
    # each use a copy: the rewriting changes a tree in place as it goes
    falsy = ast.BoolOp(ast.Or(), [
        ast.Compare(copy.deepcopy(node), [ast.Is()], [ast.Constant(None)]),
        ast.Compare(copy.deepcopy(node), [ast.Eq()], [ast.Constant(0)]),
        ast.Compare(copy.deepcopy(node), [ast.Eq()], [ast.Constant("")])])
    return ast.UnaryOp(ast.Not(), falsy)


def _js_boolean(node: ast.expr) -> bool:
    """Tells whether `node` is always a boolean (a comparison, `!`, a boolean literal, a
    call of `In` or of a type test, `&&`/`||` of those)."""
    if isinstance(node, ast.Compare) or (isinstance(node, ast.UnaryOp)
                                         and isinstance(node.op, ast.Not)):
        return True
    if isinstance(node, ast.Constant):
        return isinstance(node.value, bool)
    if isinstance(node, ast.BoolOp):
        return all(_js_boolean(value) for value in node.values)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return node.func.id == "In" or is_native_call(node)
    return False


class EcmaScriptParser:
    """ECMAScript expression text to the Python expression tree the python datamodel's
    rewriting takes: a recursive descent over JavaScript's precedence levels, for the part of
    the language an expression of a chart uses. Text that is no expression raises
    `_ScriptSyntaxError`; an expression with no native counterpart, `Inexpressible`."""

    def __init__(self, text: str) -> None:
        self.tokens: list[tuple[str, str, int]] = []
        position = 0
        while position < len(text):
            match = _JS_TOKEN.match(text, position)
            if match is not None and match.lastgroup == "other":
                raise Inexpressible(f"the operator {match.group()!r} at column "
                                    f"{position + 1}")
            if match is None or match.lastgroup == "quote":
                shown = text[position]
                raise _ScriptSyntaxError(f"unexpected {shown!r} at column {position + 1}")
            kind = match.lastgroup or ""
            if kind != "space":
                self.tokens.append((kind, match.group(), position + 1))
            position = match.end()
        self.at = 0

    def parse(self) -> ast.expr:
        node = self._conditional()
        if self.at < len(self.tokens):
            _, token, column = self.tokens[self.at]
            if token == ",":
                raise Inexpressible(f"the comma operator at column {column}")
            if token in _JS_UNSAID:
                raise Inexpressible(f"the operator {token!r} at column {column}")
            raise _ScriptSyntaxError(f"unexpected {token!r} at column {column}")
        if any(isinstance(inner, _TypeOf | _Global) for inner in ast.walk(node)):
            raise Inexpressible("typeof other than compared with a type's name, or Math "
                                "other than Math.abs, Math.min, Math.max")
        return node

    def _peek(self) -> str:
        return self.tokens[self.at][1] if self.at < len(self.tokens) else ""

    def _take(self, *ops: str) -> str | None:
        if self.at < len(self.tokens) and self.tokens[self.at][0] == "op" and \
                self.tokens[self.at][1] in ops:
            self.at += 1
            return self.tokens[self.at - 1][1]
        return None

    def _expect(self, op: str) -> None:
        if self._take(op) is None:
            found = self._peek()
            column = self.tokens[self.at][2] if found else "the end"
            if found == ",":
                raise Inexpressible(f"the comma operator at column {column}")
            raise _ScriptSyntaxError(f"expected {op!r}, found {found or 'the end'!r} "
                                     f"at column {column}")

    def _conditional(self) -> ast.expr:
        test = self._binary(0)
        if self._take("?") is None:
            return test
        body = self._conditional()
        self._expect(":")
        return ast.IfExp(js_test(test), body, self._conditional())

    #: the binary operators from the loosest to the tightest
    _LEVELS: tuple[tuple[str, ...], ...] = (("||",), ("&&",), ("===", "!==", "==", "!="),
                                            ("<", "<=", ">", ">="), ("+", "-"), ("*", "/", "%"))

    def _binary(self, level: int) -> ast.expr:
        if level == len(self._LEVELS):
            return self._unary()
        left = self._binary(level + 1)
        while (op := self._take(*self._LEVELS[level])) is not None:
            right = self._binary(level + 1)
            if op in ("&&", "||"):
                left = self._logical(op, left, right)
            elif op in _JS_COMPARE:
                left = self._typeof(op, left, right) or ast.Compare(left, [_JS_COMPARE[op]],
                                                                    [right])
            else:
                left = ast.BinOp(left, _JS_ARITHMETIC[op], right)
        return left

    @staticmethod
    def _logical(op: str, left: ast.expr, right: ast.expr) -> ast.expr:
        """Gives `a && b`, `a || b`: of booleans a Python `and`/`or`; else the operand that
        decides, as ECMAScript gives it (`a || b` is `a` when `a` is true)."""
        if _js_boolean(left) and _js_boolean(right):
            return ast.BoolOp(ast.And() if op == "&&" else ast.Or(), [left, right])
        if op == "&&":
            return ast.IfExp(js_test(left), right, copy.deepcopy(left))
        return ast.IfExp(js_test(left), copy.deepcopy(left), right)

    @staticmethod
    def _typeof(op: str, left: ast.expr, right: ast.expr) -> ast.expr | None:
        """Gives `typeof x === 'number'` (and `!==`, either side) as a native type test."""
        if not isinstance(left, _TypeOf) and not isinstance(right, _TypeOf):
            return None
        typed, name = (left, right) if isinstance(left, _TypeOf) else (right, left)
        if op not in ("===", "==", "!==", "!=") or not isinstance(name, ast.Constant) or \
                not isinstance(name.value, str) or not isinstance(typed, _TypeOf):
            raise Inexpressible("typeof other than compared with a type's name")
        operand = typed.operand
        test: ast.expr
        if name.value == "undefined":
            test = ast.Compare(operand, [ast.Is()], [ast.Constant(None)])
        elif name.value == "object":
            test = ast.BoolOp(ast.Or(), [native_call("is_object", operand),
                                         native_call("is_list", operand)])
        elif name.value in _JS_TYPES:
            test = native_call(_JS_TYPES[name.value], operand)
        else:  # 'function', 'symbol', a misspelling: never the type of a data value
            test = ast.Constant(False)
        return ast.UnaryOp(ast.Not(), test) if op in ("!==", "!=") else test

    def _unary(self) -> ast.expr:
        op = self._take("!", "-", "+")
        if op == "!":
            return ast.UnaryOp(ast.Not(), js_test(self._unary()))
        if op is not None:
            return ast.UnaryOp(ast.USub() if op == "-" else ast.UAdd(), self._unary())
        if self.at < len(self.tokens) and self.tokens[self.at][1] == "typeof":
            self.at += 1
            return _TypeOf(self._unary())
        return self._postfix(self._primary())

    def _postfix(self, node: ast.expr) -> ast.expr:
        while True:
            if self._take(".") is not None:
                kind, name, column = self.tokens[self.at] if self.at < len(self.tokens) else (
                    "", "", 0)
                if kind != "name":
                    raise _ScriptSyntaxError(f"expected a property name after '.' at column "
                                             f"{column or 'the end'}")
                self.at += 1
                if isinstance(node, _Global) and self._peek() != "(":
                    raise Inexpressible(f"Math.{name} (only Math.abs, Math.min, Math.max "
                                        "are translated)")
                if name == "length" and self._peek() != "(":
                    node = ast.Call(ast.Name("len", ast.Load()), [node], [])
                elif self._peek() == "(":
                    node = self._method(node, name)
                else:
                    node = ast.Attribute(node, name, ast.Load())
            elif self._take("[") is not None:
                index = self._conditional()
                self._expect("]")
                node = ast.Subscript(node, index, ast.Load())
            elif self._peek() == "(" and self.at < len(self.tokens):
                if not (isinstance(node, ast.Name) and node.id == "In"):
                    raise Inexpressible(f"a call of {ast.unparse(node)}() (only In() and "
                                        "Math.abs, Math.min, Math.max are translated)")
                self.at += 1
                node = ast.Call(node, self._arguments(), [])
            else:
                return node

    def _method(self, owner: ast.expr, name: str) -> ast.expr:
        if isinstance(owner, _Global) and owner.id == "Math" and name in _JS_MATH:
            self.at += 1
            return ast.Call(ast.Name(_JS_MATH[name], ast.Load()), self._arguments(), [])
        shown = "Math" if isinstance(owner, _Global) else ast.unparse(owner)
        raise Inexpressible(f"a call of {shown}.{name}() (only In() and Math.abs, "
                            "Math.min, Math.max are translated)")

    def _arguments(self) -> list[ast.expr]:
        args: list[ast.expr] = []
        while self._take(")") is None:
            if args:
                self._expect(",")
            args.append(self._conditional())
        return args

    def _primary(self) -> ast.expr:
        if self.at >= len(self.tokens):
            raise _ScriptSyntaxError("the expression ends too early")
        kind, token, column = self.tokens[self.at]
        self.at += 1
        if kind == "number":
            if token[:2] in ("0x", "0X"):
                whole = int(token[2:66], 16) if len(token) <= 66 else 2 ** 256
                if whole >= 2 ** 53:
                    raise Inexpressible(f"the number at column {column} (past 2**53, where "
                                        "JavaScript's numbers lose their digits)")
                return ast.Constant(whole)
            number = float(token)
            if number in (float("inf"), float("-inf")):
                raise Inexpressible(f"the number at column {column} (Infinity)")
            return ast.Constant(int(number) if number.is_integer() and abs(number) < 2 ** 53
                                else number)
        if kind == "string":
            return ast.Constant(_js_string(token[1:-1], column))
        if kind == "name":
            if token in _JS_LITERALS:
                return ast.Constant(_JS_LITERALS[token])
            if token in _JS_RESERVED:
                raise _ScriptSyntaxError(f"{token!r} cannot stand in an expression "
                                         f"(column {column})")
            if token == "Math" and self._peek() == ".":
                return _Global(token)
            if token in _JS_UNSAID:
                raise Inexpressible(f"{token!r} (column {column}) has no native counterpart")
            return ast.Name(token, ast.Load())
        if token == "(":
            inner = self._conditional()
            self._expect(")")
            return inner
        if token == "[":
            items: list[ast.expr] = []
            while self._take("]") is None:
                if items:
                    self._expect(",")
                    if self._take("]") is not None:
                        break  # a trailing comma
                items.append(self._conditional())
            return ast.List(items, ast.Load())
        if token == "{":
            raise Inexpressible(f"an object literal (column {column}): native expressions "
                                "build lists, not mappings")
        raise _ScriptSyntaxError(f"unexpected {token!r} at column {column}")


JS_ASSIGNMENT = re.compile(r"(?:(?:var|let|const)\s+)?([A-Za-z_$][A-Za-z0-9_$]*)\s*=(?![=>])\s*"
                           r"(.+)", re.DOTALL)


def js_statements(text: str) -> list[str]:
    """Gives the statements of ECMAScript text, split at `;` and line ends outside strings
    and brackets (the ones a script of assignments has)."""
    statements: list[str] = []
    current: list[str] = []
    quote = ""
    depth = 0
    for index, char in enumerate(text):
        if quote:
            if char == quote and text[index - 1] != "\\":
                quote = ""
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char in ";\n" and depth == 0:
            statements.append("".join(current))
            current = []
            continue
        current.append(char)
    statements.append("".join(current))
    return [statement.strip() for statement in statements if statement.strip()]


class _TypeOf(ast.expr):
    """`typeof operand`, until the comparison with a type's name that gives its meaning."""

    def __init__(self, operand: ast.expr) -> None:
        super().__init__()
        self.operand = operand


class _Global(ast.Name):
    """`Math`, read only as the owner of a method."""

    def __init__(self, name: str) -> None:
        super().__init__(name, ast.Load())


def _js_string(body: str, column: int) -> str:
    out: list[str] = []
    index = 0
    while index < len(body):
        char = body[index]
        if char != "\\":
            out.append(char)
            index += 1
            continue
        escaped = body[index + 1]
        if escaped == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", body[index + 2:index + 6]):
            out.append(chr(int(body[index + 2:index + 6], 16)))
            index += 6
        elif escaped == "x" and re.fullmatch(r"[0-9a-fA-F]{2}", body[index + 2:index + 4]):
            out.append(chr(int(body[index + 2:index + 4], 16)))
            index += 4
        elif escaped in "ux":
            raise _ScriptSyntaxError(f"a bad \\{escaped} escape in the string at column "
                                     f"{column}")
        else:
            out.append(_JS_ESCAPES.get(escaped, escaped))
            index += 2
    return "".join(out)
