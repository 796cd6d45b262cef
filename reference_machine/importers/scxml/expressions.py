"""Python-datamodel expressions rewritten into the native safe expression language over
`context` (a data item is a context key; `_event.name` is `event.type`; `_event.data` and the
other fields of `_event` come from the payload). ECMAScript ones come here as Python trees
(`ecmascript`)."""

from __future__ import annotations

import ast

from reference_machine.importers.scxml.keys import EVENT_DATA, EVENT_FIELDS, SYSTEM_KEYS

__all__ = ["Inexpressible", "NativeRewrite", "is_native_call", "native_call"]

_EVENT_FIELD_NAMES = frozenset({"name", "type", "sendid", "origin", "origintype", "invokeid",
                                "data"})
_FUNCTIONS = frozenset({"len", "abs", "min", "max", "round"})


class Inexpressible(Exception):
    """An SCXML expression the native safe language cannot say."""


class NativeRewrite(ast.NodeTransformer):
    """Python datamodel to native: data items become `context["id"]` reads."""

    def __init__(self, chart_name: str) -> None:
        self.chart_name = chart_name
        self.in_states: list[str] = []
        self.system: set[str] = set()
        self.whole_event = False

    @staticmethod
    def _context(key: str) -> ast.expr:
        return ast.Subscript(ast.Name("context", ast.Load()), ast.Constant(key), ast.Load())

    @staticmethod
    def _payload() -> ast.expr:
        return ast.Attribute(ast.Name("event", ast.Load()), "payload", ast.Load())

    def _event_field(self, attr: str) -> ast.expr:
        """Gives `_event.ATTR`: an event the SCXML driver delivers carries SCXML's event
        fields under `_scxml_event` and its data under `_scxml_data`; any other event (sent
        from outside) is external, and its payload is its data."""
        if attr == "name":
            return ast.Attribute(ast.Name("event", ast.Load()), "type", ast.Load())
        driven = ast.Compare(ast.Constant(EVENT_FIELDS), [ast.In()], [self._payload()])
        if attr == "data":
            carried = ast.Subscript(self._payload(), ast.Constant(EVENT_DATA), ast.Load())
            return ast.IfExp(driven, carried,
                             ast.IfExp(self._payload(), self._payload(), ast.Constant(None)))
        if attr in ("type", "sendid", "origin", "origintype", "invokeid"):
            told = ast.Subscript(ast.Subscript(self._payload(), ast.Constant(EVENT_FIELDS),
                                               ast.Load()), ast.Constant(attr), ast.Load())
            return ast.IfExp(driven, told, ast.Constant("external" if attr == "type" else None))
        raise Inexpressible(f"_event.{attr} (SCXML events have no such field)")

    def visit_Name(self, node: ast.Name) -> ast.expr:
        if node.id == "_event":
            # unbound (None) while the run starts; the driver's events tell their fields;
            # an event from outside is its payload
            self.whole_event = True
            driven = ast.Compare(ast.Constant(EVENT_FIELDS), [ast.In()], [self._payload()])
            fields = ast.Subscript(self._payload(), ast.Constant(EVENT_FIELDS), ast.Load())
            starting = ast.Compare(ast.Attribute(ast.Name("event", ast.Load()), "type",
                                                 ast.Load()), [ast.Eq()],
                                   [ast.Constant("execution.started")])
            return ast.IfExp(driven, fields,
                             ast.IfExp(starting, ast.Constant(None), self._payload()))
        if node.id == "_name":
            return ast.Constant(self.chart_name)
        if node.id in SYSTEM_KEYS:
            # the driver's start event sets them (see `SYSTEM_KEYS`)
            self.system.add(node.id)
            return self._context(SYSTEM_KEYS[node.id])
        if node.id == "_x":
            raise Inexpressible(f"the system variable {node.id}")
        if node.id in ("context", "event"):
            raise Inexpressible(f"the name {node.id!r} (the native language reserves it)")
        return self._context(node.id)

    def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
        if isinstance(node.value, ast.Name) and node.value.id == "_event":
            return self._event_field(node.attr)
        return ast.Attribute(self.visit(node.value), node.attr, ast.Load())

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.expr:
        # `x and x` is `x` (an expression has no effects): keeps the rewriting within the
        # length an expression may have
        values: list[ast.expr] = []
        seen: set[str] = set()
        for value in node.values:
            rewritten = self.visit(value)
            if ast.dump(rewritten) not in seen:
                seen.add(ast.dump(rewritten))
                values.append(rewritten)
        return values[0] if len(values) == 1 else ast.BoolOp(node.op, values)

    def visit_Call(self, node: ast.Call) -> ast.expr:
        func = node.func
        if getattr(node, "_native", False):  # made by the ECMAScript translation
            return native_call(ast.unparse(func), *(self.visit(a) for a in node.args))
        if (isinstance(func, ast.Name) and func.id == "hasattr" and len(node.args) == 2
                and isinstance(node.args[0], ast.Name) and node.args[0].id == "_event"
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in _EVENT_FIELD_NAMES):
            # every SCXML event has every field: the question is whether _event is bound
            return ast.Compare(self.visit(node.args[0]), [ast.IsNot()], [ast.Constant(None)])
        if isinstance(func, ast.Name) and func.id == "In":
            if (len(node.args) != 1 or node.keywords or not isinstance(node.args[0], ast.Constant)
                    or not isinstance(node.args[0].value, str)):
                raise Inexpressible("In() with anything but one state id")
            state = node.args[0].value
            self.in_states.append(state)
            return self._context(f"_scxml_in_{state}")
        if (isinstance(func, ast.Attribute) and func.attr == "get" and len(node.args) == 1
                and not node.keywords):
            # mapping.get(key): the native key read gives None for a missing key, as get does
            owner = func.value
            base = self.visit(owner)
            return ast.Subscript(base, self.visit(node.args[0]), ast.Load())
        if (isinstance(func, ast.Attribute) and func.attr == "startswith"
                and len(node.args) == 1 and not node.keywords):
            # text.startswith(head): the text's first len(head) characters are head (both
            # texts: a native comparison of a slice and a text of other types is false)
            text, part = self.visit(func.value), self.visit(node.args[0])
            size = ast.Call(ast.Name("len", ast.Load()), [part], [])
            sliced = ast.Call(ast.Name("slice", ast.Load()), [text, ast.Constant(0), size], [])
            both = [ast.Call(ast.Name("is_string", ast.Load()), [v], []) for v in (text, part)]
            return ast.BoolOp(ast.And(), [*both, ast.Compare(sliced, [ast.Eq()], [part])])
        if isinstance(func, ast.Name) and func.id in _FUNCTIONS:
            return ast.Call(func, [self.visit(a) for a in node.args],
                            [self.visit(k) for k in node.keywords])
        shown = ast.unparse(func)
        raise Inexpressible(f"a call of {shown}() (native expressions call only "
                            f"{', '.join(sorted(_FUNCTIONS))})")


def native_call(name: str, *args: ast.expr) -> ast.Call:
    """Gives a call of a native function the rewriting keeps as it is (`is_number(x)`)."""
    call = ast.Call(ast.Name(name, ast.Load()), list(args), [])
    call._native = True  # type: ignore[attr-defined]
    return call


def is_native_call(node: ast.AST) -> bool:
    """Tells whether `node` is a call `native_call` made (the rewriting keeps it as it is)."""
    return bool(getattr(node, "_native", False))
