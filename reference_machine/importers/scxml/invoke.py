"""Child charts: an `<invoke>` of a chart inline, in a file `src=` names, or a `srcexpr` or
`<content expr>` whose values are known at import, each chart imported as a definition of its
own (kept under `CHILDREN`) that the W3C driver runs as a session."""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Callable
from typing import Any

from reference_machine.errors import DefinitionError
from reference_machine.importers.scxml.checks import converted, in_file, native_checks
from reference_machine.importers.scxml.conversion import Part
from reference_machine.importers.scxml.expressions import Inexpressible
from reference_machine.importers.scxml.files import SrcMissing, SrcRefused
from reference_machine.importers.scxml.keys import FINALIZE, INVOKE_TYPES, NAME
from reference_machine.importers.scxml.nodes import NS, Node, parse
from reference_machine.importers.scxml.transitions import Transition

__all__ = ["Invokes"]

#: What `Invokes._src_chart` gives for a file it refused (an error was recorded).
_REFUSED: Any = object()


class Invokes(Part):
    """Converts each `<invoke>`: the charts it may start, and the outbox entries that start and
    cancel it."""

    def invoke(self, node: Node, state: str) -> tuple[list[dict[str, Any]],
                                                        list[dict[str, Any]]]:
        """Gives the actions that start an `<invoke>` (after the state's entry actions) and
        cancel it (after its exit actions): outbox entries `["invoke", id, 0, params, "",
        [autoforward, type]]` and `["uninvoke", id]` that the W3C driver acts on. The inline
        chart is imported as a definition of its own, kept under the context key
        `CHILDREN`."""
        attrs = node.attrs
        kind = attrs.get("type", "scxml")
        type_expression = repr(kind)
        if "typeexpr" in attrs:
            # known only as it starts: the driver raises error.execution for another type
            type_expression = self.chart.data.expression(attrs["typeexpr"], node, "typeexpr") or ""
            if not type_expression:
                return [], []
        elif kind not in INVOKE_TYPES:
            self.chart.sink.error("scxml-invoke", node, f"<invoke> of type {kind!r}: only SCXML "
                                  "charts are invoked", kind)
            return [], []
        ident = attrs.get("id") or f"{state}.invoke{self.chart.invoke_count + 1}"
        if "src" in attrs or "srcexpr" in attrs:
            made = self._src_charts(node, ident, state)
        else:
            made = self._inline_chart(node, ident, state)
        if made is None:
            return [], []
        charts, chart_key = made
        self.chart.invoke_count += 1
        self.chart.children.update(charts)
        finalize = [c for f in node.kids("finalize") for c in f.children]
        if finalize:
            # run by the driver before each event of the child: a targetless transition of
            # the invoking state, on an event of the driver's own, with the child's event data
            event = f"{FINALIZE}{ident}"
            self.chart.raised.add(event)
            self.chart.transitions.append(Transition(node, state, (event,), None, None,
                                                     self.chart.content.block(finalize, state)))
        started: list[dict[str, Any]] = []
        if "idlocation" in attrs:
            location = attrs["idlocation"].strip()
            if not self.chart.data.is_declared(location):
                return [self.chart.content.static_error(node, "error.execution", None)], []
            started.append({"assign": {location: repr(ident)}})
        pairs = self.chart.outbox.pairs(node, None, state, with_content=False)
        if pairs is None:
            return [*started, self.chart.content.static_error(node, "error.execution", None)], []
        self.chart.stopped = False
        autoforward = attrs.get("autoforward", "false") == "true"
        self.chart.raised.add(f"done.invoke.{ident}")
        chart = "" if chart_key is None else f", {chart_key}"
        started.append(self.chart.outbox.queue_action(
            "invoke", repr(ident), None, "[" + ", ".join(pairs) + "]", None, "",
            f"[{autoforward!r}, {type_expression}{chart}]"))
        self.chart.sink.warning("scxml-invoke", node, f"<invoke> {ident!r}: the child chart runs "
                                "as a session of its own only where a driver starts it "
                                "(reference_machine.importers.w3c.run_definition does); the "
                                "simulator does not, so under run and fuzz it is never started",
                                ident)
        return started, [self.chart.outbox.queue_action("uninvoke", repr(ident), None, None, None)]

    def _inline_chart(self, node: Node, ident: str, state: str
                      ) -> tuple[dict[str, dict[str, Any]], str | None] | None:
        """Gives the chart of an invoke's inline `<content>` (under its invoke id), or None
        after an error located at it."""
        contents = node.kids("content")
        if len(contents) == 1 and "expr" in contents[0].attrs and not contents[0].children:
            return self._content_charts(node, ident, state, contents[0].attrs["expr"])
        charts = [c for c in contents[0].children if c.namespace == NS and c.tag == "scxml"
                  ] if len(contents) == 1 else []
        if len(charts) != 1 or len(contents[0].children) != 1:
            self.chart.sink.error("scxml-invoke", node, "an <invoke> is imported with one inline "
                                  "<content> holding one <scxml> chart, or a src= naming a file "
                                  "beside the chart", state)
            return None
        data = self._chart_within(charts[0])
        return None if data is None else ({ident: data}, None)

    def _remembered(self, key: tuple[Any, ...], compute: Callable[[], Any]) -> Any:
        """Gives what `compute` gives and adds the findings it makes, computed once however
        often `converted` converts this chart again."""
        if key in self.chart.memo:
            result, findings = self.chart.memo[key]
            self.chart.sink.extend(findings)
            return copy.deepcopy(result) if isinstance(result, dict) else result
        before = len(self.chart.sink.findings)
        result = compute()
        self.chart.memo[key] = (copy.deepcopy(result) if isinstance(result, dict) else result,
                                self.chart.sink.findings[before:])
        return result

    def _chart_within(self, root: Node) -> dict[str, Any] | None:
        """Gives the native data of a chart written inside this one (an invoke's `<content>`,
        an assigned chart), its warnings taken as this chart's; None, its errors noted, when
        it does not import."""
        return self._remembered(("inline", id(root)), lambda: self._convert_within(root))

    def _convert_within(self, root: Node) -> dict[str, Any] | None:
        try:
            child, native = converted(lambda kept: self.chart.converter_type(
                root, self.chart.source, invoked=True, files=self.chart.files, here=self.chart.here,
                native_parallels=kept, memo=self.chart.memo))
            data, notes = native_checks(native, child, self.chart.source)
        except DefinitionError as exc:
            self.chart.sink.extend(exc.findings)
            return None
        self.chart.sink.extend([*child.chart.sink.warnings, *notes])
        return data

    def _src_charts(self, node: Node, ident: str, state: str
                    ) -> tuple[dict[str, dict[str, Any]], str | None] | None:
        """Gives the charts an invoke's `src=` or `srcexpr=` may name, by the key the
        driver finds them under (`src=`: the invoke id), and the native expression of the
        key when it is known only as the invoke starts (`srcexpr=`); None after an error
        located at the invoke. A `srcexpr` is imported when each value it can have is known
        at import (`_known_strings`); one naming no file raises error.execution where it
        runs, as an invoke that cannot start does."""
        attrs = node.attrs
        if node.kids("content") or ("src" in attrs and "srcexpr" in attrs):
            self.chart.sink.error("scxml-invoke", node, "an <invoke> names its chart once: by "
                                  "src=, srcexpr= or an inline <content>", state)
            return None
        if "src" in attrs:
            data = self._src_chart(node, "src", attrs["src"], missing_ok=False)
            return None if data is _REFUSED else ({ident: data}, None)
        text = attrs["srcexpr"]
        values = self._known_strings(text, node, "srcexpr")
        translated = self.chart.data.expression(text, node, "srcexpr", quiet=True)
        if values is None or translated is None:
            self.chart.sink.error("scxml-invoke", node, f"<invoke srcexpr={text!r}> is refused: "
                                  "its value is imported only when known at import (a string, or "
                                  "a data item set only to strings, by its expr and each <assign> "
                                  "to it, and by nothing else), as importing reads no file the "
                                  "run names later", "srcexpr")
            return None
        charts: dict[str, dict[str, Any]] = {}
        key = "''"
        for number, value in reversed(list(enumerate(values, 1))):
            data = self._src_chart(node, "srcexpr", value, missing_ok=True)
            if data is _REFUSED:
                return None
            if data is not None:
                charts[f"{ident}#{number}"] = data
                key = f"{f'{ident}#{number}'!r} if ({translated}) == {value!r} else ({key})"
        return charts, key

    def _src_chart(self, node: Node, attribute: str, src: str, *, missing_ok: bool
                   ) -> Any:
        """Gives the native data of the chart in the file `src` names (an invoke's), imported
        as an inline chart is; None for a file that is not there when `missing_ok` (a
        warning), else `_REFUSED` after an error located at `node`."""
        return self._remembered(("src", id(node), attribute, src, missing_ok),
                                lambda: self._src_read(node, attribute, src, missing_ok))

    def _src_read(self, node: Node, attribute: str, src: str, missing_ok: bool) -> Any:
        try:
            text, names = self.chart.files.read(src, self.chart.here)
        except SrcRefused as exc:
            if missing_ok and isinstance(exc, SrcMissing):
                self.chart.sink.warning("scxml-invoke-missing", node, f"<invoke {attribute}=> may "
                                        f"name {src!r}: {exc}, so invoking it raises "
                                        "error.execution where it runs", src)
                return None
            self.chart.sink.error("scxml-invoke", node, f"<invoke {attribute}={src!r}> is refused: "
                                  f"{exc}", attribute)
            return _REFUSED
        shown = "/".join(names)
        where = f"{node.path}/@{attribute}"
        try:
            parsed = parse(text, shown)
            child, native = converted(lambda kept: self.chart.converter_type(
                parsed, shown, invoked=True, files=self.chart.files, here=names[:-1],
                native_parallels=kept, memo=self.chart.memo))
            data, notes = native_checks(native, child, shown)
        except DefinitionError as exc:
            self.chart.sink.extend([in_file(f, shown, where, node.line)
                                    for f in exc.findings])
            return _REFUSED
        self.chart.sink.extend([in_file(f, shown, where, node.line)
                                for f in (*child.chart.sink.warnings, *notes)])
        return data

    def _known_strings(self, text: str, node: Node, attribute: str) -> list[str] | None:
        """Gives the strings `text` can give, when known at import: a string literal, or a
        data item that only literals set (its expr or value, each `<assign>` to it), of which
        the strings; None when not known (an invoked chart's data, which its parent may set,
        or a data item anything else sets)."""
        try:
            tree = self.chart.data.parse_expression(text)
        except (SyntaxError, Inexpressible, RecursionError):
            return None
        if isinstance(tree, ast.Constant):
            return [tree.value] if isinstance(tree.value, str) else []
        writes = self._writes(tree)
        if writes is None:
            return None
        values: list[str] = []
        for write in writes:
            value = write.attrs.get("expr", write.text.strip() or None)
            if write.children or "src" in write.attrs or (
                    value is not None and not self.chart.data.is_literal(value)):
                return None
            if value is None:
                continue
            literal = self.chart.data.parse_expression(value)
            if (isinstance(literal, ast.Constant) and isinstance(literal.value, str)
                    and literal.value not in values):
                values.append(literal.value)
        return values

    def _writes(self, tree: ast.expr) -> list[Node] | None:
        """Gives what sets the data item `tree` names, when only its `<data>` and whole
        `<assign>`s to it do; None for anything else (not a data item, an invoked chart's,
        which its parent may set, one a script, an idlocation, a foreach or a partial
        assign sets)."""
        if not isinstance(tree, ast.Name) or self.chart.invoked or \
                tree.id not in self.chart.declared:
            return None
        name = tree.id
        for other in self.chart.walk(self.chart.root):
            if other.tag in ("send", "invoke", "foreach") and name in (
                    other.attrs.get(k, "").strip() for k in ("idlocation", "item", "index")):
                return None
        if any(name == n for each in self.chart.scripts.values() for n, _ in each):
            return None
        writes = [n for n in self.chart.elements(self.chart.root, "data")
                  if n.attrs.get("id") == name]
        for assign in self.chart.elements(self.chart.root, "assign"):
            location = assign.attrs.get("location", "").strip()
            if re.split(r"[.\[]", location, maxsplit=1)[0] == name:
                if location != name:
                    return None
                writes.append(assign)
        return writes

    def chart_assigned(self, node: Node) -> bool:
        """Tells whether an `<assign>` sets its data item to the `<scxml>` chart it holds,
        where the item is read only by `<invoke><content expr="ITEM"/>`: the value stands
        for the chart (a handle, `chart_handle`), which nothing else sees."""
        charts = [c for c in node.children if c.namespace == NS and c.tag == "scxml"]
        name = node.attrs.get("location", "").strip()
        if "expr" in node.attrs or len(charts) != 1 or len(node.children) != 1 or \
                node.text.strip() or not NAME.match(name):
            return False
        word = re.compile(rf"(?<![\w$]){re.escape(name)}(?![\w$])")
        for other in self.chart.walk(self.chart.root):
            if other is node or self.chart.inside(other, node):
                continue
            if word.search(other.text):
                return False
            for key, value in other.attrs.items():
                written = (other.tag == "data" and key == "id") or (
                    other.tag == "assign" and key == "location")
                given = (other.tag == "content" and key == "expr" and value.strip() == name
                         and other.parent is not None and other.parent.tag == "invoke")
                if word.search(value) and not (written or given):
                    return False
        return True

    @staticmethod
    def chart_handle(node: Node) -> str:
        """Gives the value an `<assign>` of a chart sets (`chart_assigned`): its place."""
        return f"_scxml_chart:{node.path}"

    def _content_charts(self, node: Node, ident: str, state: str, text: str
                        ) -> tuple[dict[str, dict[str, Any]], str | None] | None:
        """Gives the charts an invoke's `<content expr=>` may give, by key, and the native
        expression of the key as the invoke starts: the data item it reads must be set only
        to literals and to `<scxml>` charts (`chart_assigned`); a value that is no chart
        raises error.execution where it runs, as an invoke that cannot start does."""
        try:
            tree = self.chart.data.parse_expression(text)
        except (SyntaxError, Inexpressible, RecursionError):
            tree = None
        writes = None if tree is None else self._writes(tree)
        translated = self.chart.data.expression(text, node, "expr", quiet=True)
        assigned = [w for w in writes or [] if w.tag == "assign" and w.children]
        others = [w for w in writes or [] if w not in assigned]
        values = [w.attrs.get("expr", w.text.strip()) for w in others]
        if writes is None or translated is None or not all(
                self.chart_assigned(w) for w in assigned) or any(
                w.children or "src" in w.attrs for w in others) or any(
                value and not self.chart.data.is_literal(value) for value in values):
            self.chart.sink.error("scxml-invoke", node, f"<content expr={text!r}> is refused: it "
                                  "is imported only when it reads a data item set only to "
                                  "literals and <scxml> charts, read nowhere else", state)
            return None
        charts: dict[str, dict[str, Any]] = {}
        key = "''"
        for number, assign in reversed(list(enumerate(assigned, 1))):
            root = next(c for c in assign.children if c.tag == "scxml")
            data = self._chart_within(root)
            if data is None:
                return None
            charts[f"{ident}#{number}"] = data
            key = (f"{f'{ident}#{number}'!r} if ({translated}) == "
                   f"{self.chart_handle(assign)!r} else ({key})")
        return charts, key
