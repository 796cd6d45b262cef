"""Executable content: `<onentry>`/`<onexit>` blocks and transition bodies made native actions
(`<assign>`, `<if>`, `<foreach>`, `<script>`, and the errors SCXML raises where they run)."""

from __future__ import annotations

import re
from typing import Any

from reference_machine._expr import compile_expression
from reference_machine.importers.scxml.conversion import Part
from reference_machine.importers.scxml.keys import NAME
from reference_machine.importers.scxml.nodes import NS, Node

__all__ = ["ExecutableContent"]

_UNROLL_MAX = 100  # a <foreach> is unrolled into a copy of its body per item


class ExecutableContent(Part):
    """Converts executable content into native actions, each taking effect only under the
    condition an enclosing `<if>` branch sets."""

    def blocks(self, node: Node, tag: str, state: str) -> list[dict[str, Any]]:
        actions: list[dict[str, Any]] = []
        for block in node.kids(tag):
            actions += self.block(block.children, state)
        return actions

    def block(self, nodes: list[Node], state: str) -> list[dict[str, Any]]:
        """Gives one block of executable content (an `<onentry>`, a transition's body)."""
        self.chart.stopped = False
        actions = self.actions(nodes, None, state)
        self.chart.stopped = False
        return actions

    def actions(self, nodes: list[Node], when: str | None, state: str
                ) -> list[dict[str, Any]]:
        """Gives the native actions of executable content; `when` (a native expression) is
        the condition an enclosing `<if>` branch set, under which they take effect."""
        actions: list[dict[str, Any]] = []
        for node in nodes:
            if self.chart.stopped:
                if when is not None:
                    self.chart.sink.warning("scxml-error-stop", node, "after a statically known "
                                            "error in an <if> branch, SCXML skips the rest of the "
                                            "block; the import skips only the rest of the branch",
                                            state)
                    self.chart.stopped = False
                break
            if node.namespace != NS:
                self.chart.sink.warning("scxml-foreign", node, f"element <{node.tag}> of namespace "
                                        f"{node.namespace or '(none)'} is left out", node.tag)
                continue
            tag = node.tag
            if tag == "log":
                continue  # a log changes nothing the run can see
            if tag == "assign":
                actions += self._assign(node, when)
            elif tag == "raise":
                event = node.attrs.get("event")
                if not event:
                    self.chart.sink.error("scxml-raise", node, "<raise> needs an event", state)
                    continue
                self.chart.raised.add(event)
                self.chart.outbox.queue_warning(node)
                actions.append(self.chart.outbox.queue_action("internal", repr(event), None, None,
                                                              when))
            elif tag == "send":
                actions += self.chart.outbox.send(node, when, state)
            elif tag == "cancel":
                actions += self.chart.outbox.cancel(node, when)
            elif tag == "if":
                actions += self._if(node, when, state)
            elif tag == "script":
                actions += self._script_actions(node, when)
            elif tag == "invoke":
                continue  # refused where it stands (`ChartConverter._refuse_everywhere`)
            elif tag == "foreach":
                actions += self._foreach(node, when, state)
            else:
                self.chart.sink.error("scxml-element", node, f"<{tag}> is not executable content",
                                      tag)
        return actions

    def _foreach(self, node: Node, when: str | None, state: str) -> list[dict[str, Any]]:
        """Gives a `<foreach>` over an array known at import (a literal, or a data item no
        content ever changes), unrolled: item and index set, then the body, per item."""
        item = node.attrs.get("item", "").strip()
        index = node.attrs.get("index", "").strip()
        text = node.attrs.get("array", "")
        if not NAME.match(item) or item.startswith("_") or (
                index and (not NAME.match(index) or index.startswith("_"))):
            return [self.static_error(node, "error.execution", when)]
        array = self.chart.data.expression(text, node, "array", runtime=True)
        if self.chart.syntax_error:
            return [self.static_error(node, "error.execution", when)]
        if array is None:
            return []
        constant = re.fullmatch(r"context\['([A-Za-z_][A-Za-z0-9_.\-]*)'\]", array)
        if constant is not None and constant.group(1) not in self.chart.assigned:
            value = self.chart.context.get(constant.group(1))
        elif "context" not in array and "event" not in array:
            try:
                value = compile_expression(array)({}, None)
            except Exception:  # an array that fails whenever it runs: SCXML's error
                return [self.static_error(node, "error.execution", when)]
        else:
            self.chart.sink.error("scxml-foreach", node, f"<foreach> over {text!r}: native actions "
                                  "have no loops, so an array is unrolled only when it is known "
                                  "at import (a literal, or a data item no content changes)", state)
            return []
        if not isinstance(value, list):
            return [self.static_error(node, "error.execution", when)]
        if len(value) > _UNROLL_MAX:
            self.chart.sink.error("scxml-foreach", node, f"<foreach> over {len(value)} items: "
                                  f"unrolled at most {_UNROLL_MAX}", state)
            return []
        actions: list[dict[str, Any]] = []
        for position in range(len(value)):
            step = {item: f"({array})[{position}]"}
            if index:
                step[index] = str(position)
            actions.append({"assign": {key: (f"({v}) if ({when}) else context[{key!r}]"
                                             if when else v) for key, v in step.items()}})
            actions += self.actions(node.children, when, state)
            if self.chart.stopped:
                break
        return actions

    def _guarded(self, key: str, value: str, when: str | None) -> dict[str, Any]:
        if when is None:
            return {"assign": {key: value}}
        return {"assign": {key: f"({value}) if ({when}) else context[{key!r}]"}}

    def static_error(self, node: Node, event: str, when: str | None, send_id: str = ""
                     ) -> dict[str, Any]:
        """Gives the raise of an error SCXML's interpreter would raise when it runs `node`
        (known at import: an undeclared location, an expression that is not Python), and
        stops the rest of the block as SCXML does."""
        self.chart.raised.add(event)
        self.chart.stopped = event == "error.execution"
        self.chart.sink.warning("scxml-static-error", node, f"<{node.tag}> fails whenever it "
                                f"runs; like SCXML, the import raises {event} there"
                                + (" and skips the rest of the block" if self.chart.stopped
                                   else ""), event)
        return self.chart.outbox.queue_action("platform", repr(event), None, None, when, send_id)

    def _assign(self, node: Node, when: str | None) -> list[dict[str, Any]]:
        location = node.attrs.get("location", "").strip()
        root_name = re.split(r"[.\[]", location, maxsplit=1)[0]
        if not self.chart.data.is_declared(root_name):
            return [self.static_error(node, "error.execution", when)]
        if not NAME.match(location) or location.startswith("_") or "." in location:
            self.chart.sink.error("scxml-assign", node, f"assign to {location!r}: the native "
                                  "format sets whole context keys (a data id), not parts of them",
                                  location)
            return []
        text = node.attrs.get("expr")
        if text is None and self.chart.invokes.chart_assigned(node):
            self.chart.sink.warning("scxml-assign-chart", node, f"{location!r} is set to a handle "
                                    "of the <scxml> chart the <assign> holds, which an "
                                    "<invoke><content expr> starts; nothing else reads "
                                    f"{location!r}", location)
            return [self._guarded(location, repr(self.chart.invokes.chart_handle(node)), when)]
        if text is None:
            text = node.text.strip()
            if node.children or not text:
                self.chart.sink.error("scxml-assign", node, "an <assign> needs expr= or a text "
                                      "value (or holds an <scxml> chart that only an "
                                      "<invoke><content expr> reads)", location)
                return []
        value = self.chart.data.expression(text, node, "expr", runtime=True)
        if self.chart.syntax_error:
            return [self.static_error(node, "error.execution", when)]
        if value is None:
            return []
        return [self._guarded(location, value, when)]

    def _if(self, node: Node, when: str | None, state: str) -> list[dict[str, Any]]:
        """Gives an `<if>`: the branch taken is chosen once (a context key holds its index),
        then each branch's actions take effect only under it."""
        branches: list[tuple[str | None, list[Node]]] = []
        condition = node.attrs.get("cond")
        if condition is None:
            self.chart.sink.error("scxml-if", node, "<if> needs cond", state)
            return []
        current: list[Node] = []
        branches.append((condition, current))
        for child in node.children:
            if child.namespace == NS and child.tag == "elseif":
                current = []
                branches.append((child.attrs.get("cond", "False"), current))
            elif child.namespace == NS and child.tag == "else":
                current = []
                branches.append((None, current))
            else:
                current.append(child)
        self.chart.temp += 1
        key = f"_scxml_if{self.chart.temp}"
        choice = str(len(branches))
        for index in range(len(branches) - 1, -1, -1):
            text, _ = branches[index]
            if text is None:
                choice = str(index)
                continue
            translated = self.chart.data.expression(text, node, "cond")
            if translated is None:
                return []
            choice = f"{index} if ({translated}) else ({choice})"
        if when is not None:
            choice = f"({choice}) if ({when}) else -1"
        actions: list[dict[str, Any]] = [{"assign": {key: choice}}]
        for index, (_, body) in enumerate(branches):
            actions += self.actions(body, f"context[{key!r}] == {index}", state)
        return actions

    def _script_actions(self, node: Node, when: str | None) -> list[dict[str, Any]]:
        """Gives a `<script>` in executable content: its assignments, in order."""
        actions: list[dict[str, Any]] = []
        for name, text in self.chart.scripts.get(id(node), []):
            value = self.chart.data.expression(text, node, "script", runtime=True)
            if self.chart.syntax_error:
                return [*actions, self.static_error(node, "error.execution", when)]
            if value is None:
                return actions
            actions.append(self._guarded(name, value, when))
        return actions
