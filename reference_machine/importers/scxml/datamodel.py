"""The datamodel: `<data>` bound early (at import, or as the run starts when it reads what
only the run knows), `<script>`s of assignments, and each expression of the chart (python or
ecmascript datamodel) made a native one."""

from __future__ import annotations

import ast

from reference_machine._expr import ExpressionSyntaxError, compile_expression
from reference_machine.importers.scxml.conversion import Part
from reference_machine.importers.scxml.ecmascript import (
    JS_ASSIGNMENT,
    EcmaScriptParser,
    js_statements,
    js_test,
)
from reference_machine.importers.scxml.expressions import Inexpressible, NativeRewrite
from reference_machine.importers.scxml.files import SrcRefused
from reference_machine.importers.scxml.keys import NAME
from reference_machine.importers.scxml.nodes import Node

__all__ = ["Datamodel"]


class Datamodel(Part):
    """Converts the datamodel: binds each data item, reads scripts, and translates expressions."""

    def script(self, node: Node) -> list[tuple[str, str]] | None:
        """Gives a `<script>`'s assignments, (name, expression text) in order, or None after
        an error located at it: a script is imported when it is a list of assignments to
        names (`x = 1` in Python; `var x = 1;` or `x = 1` in ECMAScript), each one an
        expression the native language can say."""
        if "src" in node.attrs:
            self.chart.sink.error("scxml-script", node, "<script src=> is refused: importing "
                                  "reads no other file or address", "script")
            return None
        text = node.text.strip()
        assignments: list[tuple[str, str]] = []
        try:
            if self.chart.datamodel == "ecmascript":
                for statement in js_statements(text):
                    match = JS_ASSIGNMENT.fullmatch(statement)
                    if match is None:
                        raise ValueError(statement)
                    assignments.append((match.group(1), match.group(2)))
            else:
                for line in ast.parse(text, mode="exec").body:
                    if not (isinstance(line, ast.Assign) and len(line.targets) == 1
                            and isinstance(line.targets[0], ast.Name)):
                        raise ValueError(ast.unparse(line))
                    assignments.append((line.targets[0].id, ast.unparse(line.value)))
        except (ValueError, SyntaxError) as exc:
            shown = str(exc) if isinstance(exc, ValueError) else f"not {self.chart.language}"
            self.chart.sink.error("scxml-script", node, "<script> is imported only as a list of "
                                  "assignments to names (the native format runs safe expressions, "
                                  f"not code): {shown[:80]!r} is not one", "script")
            return None
        for name, _ in assignments:
            if not NAME.match(name) or name.startswith("_"):
                self.chart.sink.error("scxml-script", node, f"<script> assigns {name!r}, which "
                                      "cannot be a context key", name)
                return None
        return assignments

    def item(self, node: Node) -> None:
        ident = node.attrs.get("id", "")
        if not NAME.match(ident) or ident.startswith("_"):
            self.chart.sink.error("scxml-data", node, f"data id {ident!r} cannot be a context key",
                                  ident)
            return
        if "src" in node.attrs:
            self._data_src(node, ident)
            return
        text = node.attrs.get("expr")
        if text is None and node.text.strip():
            text = node.text.strip()
        if text is None:
            self.chart.context[ident] = None
            return
        self.bind(ident, text, node, "expr" if "expr" in node.attrs else "value")

    def _data_src(self, node: Node, ident: str) -> None:
        """Binds a data item to the content of the file its `src=` names, read as the
        content of a `<data>` element is (an expression of the datamodel's language; an empty
        file leaves it None)."""
        src = node.attrs["src"]
        if "expr" in node.attrs or node.text.strip() or node.children:
            self.chart.sink.error("scxml-data-src", node, f"data {ident!r} has src= and a value "
                                  "besides; SCXML allows one", ident)
            return
        try:
            text, names = self.chart.files.read(src, self.chart.here)
        except SrcRefused as exc:
            self.chart.sink.error("scxml-data-src", node, f"<data src={src!r}> is refused: {exc}",
                                  ident)
            return
        if not text.strip():
            self.chart.context[ident] = None
            return
        self.bind(ident, text.strip(), node, f"the content of {'/'.join(names)}")

    def bind(self, ident: str, text: str, node: Node, attribute: str) -> None:
        """Binds data item `ident` to the value of `text` as the document loads: at import
        when it reads nothing the run knows, else as the run starts."""
        translated = self.expression(text, node, attribute, runtime=True)
        if self.chart.syntax_error:
            # SCXML raises error.execution as it binds the data, before the run starts
            self.chart.sink.warning("scxml-static-error", node, f"data {ident!r} = {text!r} is not "
                                    f"{self.chart.language}; "
                                    "like SCXML, the import leaves it unset (None) and raises "
                                    "error.execution as the run starts", ident)
            self.chart.context[ident] = None
            self.chart.startup.append(["platform", "error.execution", 0, [], ""])
            self.chart.raised.add("error.execution")
            self.chart.uses_outbox = True
            return
        if translated is None:
            return
        if self.chart.last_system or (self.chart.deferred and "context" in translated):
            # it reads a system variable (or data bound so): bound as the run starts
            self.chart.context[ident] = None
            self.chart.deferred.append((ident, translated))
            return
        try:
            value = compile_expression(translated)(dict(self.chart.context), None)
        except Exception as exc:  # an expression of the user's: its failure is reported
            self.chart.sink.warning("scxml-data-failed", node, f"data {ident!r} = {text!r} fails "
                                    f"when the run starts ({type(exc).__name__}: {exc}); SCXML "
                                    "raises error.execution, the import leaves it unset (None)",
                                    ident)
            value = None
        self.chart.context[ident] = value

    def expression(self, text: str, node: Node, attribute: str, *, runtime: bool = False,
                   quiet: bool = False) -> str | None:
        """Gives the native expression for an SCXML (python or ecmascript datamodel) one, or
        None after an error located at `node`. With `runtime`, text that is not an expression
        of the datamodel's language sets `syntax_error` instead (executable content: SCXML
        raises error.execution where it runs)."""
        rewrite = NativeRewrite(self.chart.chart_name)
        self.chart.syntax_error = False
        self.chart.last_system = False
        try:
            tree = self.parse_expression(text)
            if self.chart.datamodel == "ecmascript" and attribute == "cond":
                tree = js_test(tree)
            translated = ast.unparse(rewrite.visit(tree))
            compile_expression(translated)
        except SyntaxError as exc:
            if runtime:
                self.chart.syntax_error = True
                return None
            if not quiet:
                self.chart.sink.error("scxml-expression", node, f"{attribute}={text!r} is not an "
                                      f"{self.chart.language} expression: {exc.msg}"
                                      if self.chart.language[0] == "E"
                                      else f"{attribute}={text!r} is not a Python expression: "
                                      f"{exc.msg}", attribute)
            return None
        except Inexpressible as exc:
            self.chart.sink.error("scxml-expression", node, f"{attribute}={text!r} cannot be said "
                                  f"in the native expression language: {exc}", attribute)
            return None
        except ExpressionSyntaxError as exc:
            self.chart.sink.error("scxml-expression", node, f"{attribute}={text!r} cannot be said "
                                  f"in the native expression language: {exc}", attribute)
            return None
        except RecursionError:
            self.chart.sink.error("scxml-expression", node, f"{attribute}= is nested too deeply",
                                  attribute)
            return None
        for state in rewrite.in_states:
            self.chart.in_states.setdefault(state, node)
        if rewrite.whole_event:
            self.chart.sink.warning("scxml-event-whole", node, "_event as a whole is its fields "
                                    "(name, type, sendid, origin, origintype, invokeid) without "
                                    "its data, None before the first event", attribute)
        self.chart.last_system = bool(rewrite.system)
        if rewrite.system:
            for name in sorted(rewrite.system):
                self.chart.system_used.setdefault(name, node)
        return translated

    def parse_expression(self, text: str) -> ast.expr:
        """Gives the Python expression tree of an expression of the chart's datamodel (an
        ECMAScript one translated); raises SyntaxError for text that is none."""
        if self.chart.datamodel == "ecmascript":
            return EcmaScriptParser(text.strip()).parse()
        return ast.parse(text.strip(), mode="eval").body

    def is_literal(self, text: str) -> bool:
        """Tells whether `text` is a literal (a number, a quoted string, a list of them)."""
        try:
            tree = self.parse_expression(text)
        except (SyntaxError, Inexpressible, RecursionError):
            return False
        allowed = (ast.Constant, ast.List, ast.Tuple, ast.UnaryOp, ast.USub, ast.Load)
        return all(isinstance(node, allowed) for node in ast.walk(tree))

    def is_declared(self, location: str) -> bool:
        return location in self.chart.declared
