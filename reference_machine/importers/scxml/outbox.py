"""Events sent: `<raise>`, `<send>` and `<cancel>` as entries appended to the context's outbox
(`OUTBOX`), which whoever drives the definition delivers, and an event's data (`namelist`,
`<param>`, `<content>`)."""

from __future__ import annotations

import re
from typing import Any

from reference_machine.importers.scxml.conversion import Part
from reference_machine.importers.scxml.keys import EVENT_DATA, OUTBOX
from reference_machine.importers.scxml.nodes import Node

__all__ = ["Outbox", "parse_delay_ms"]

_DELAY = re.compile(r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*(ms|s|m|h|d)?\s*$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, None: 1000}

_SCXML_PROCESSOR = ("http://www.w3.org/TR/scxml/#SCXMLEventProcessor", "scxml")

#: Event processors SCXML names besides its own: a send of one is refused, as a processor
#: that has it would deliver the event (a type no processor has raises error.execution)
_KNOWN_PROCESSORS = ("http://www.w3.org/TR/scxml/#BasicHTTPEventProcessor", "basichttp")

#: The data key a `<content>` value rides under, in an outbox entry's pairs.
_DATA = EVENT_DATA


def parse_delay_ms(text: str) -> int | None:
    """Gives the milliseconds of an SCXML delay (`1s`, `500ms`, `.5s`; CSS2 times), or None."""
    match = _DELAY.match(text)
    if match is None:
        return None
    return round(float(match.group(1)) * _UNIT_MS[match.group(2)])


class Outbox(Part):
    """Converts what a chart sends into outbox entries: the events it raises and sends, the sends
    it cancels, and their data."""

    def queue_warning(self, node: Node) -> None:
        what = {"raise": "the event is appended", "send": "the event is appended",
                "cancel": "the cancel is appended"}[node.tag]
        self.chart.sink.warning("scxml-outbox", node, f"<{node.tag}>: the native machine has no "
                                f"event queue, so {what} to the context key {OUTBOX!r}; a driver "
                                "must deliver it (as "
                                "reference_machine.importers.w3c.run_definition does) and empty "
                                "the key", node.tag)

    def queue_action(self, queue: str, event: str, delay: str | None, pairs: str | None,
                     when: str | None, send_id: str = "", target: str | None = None
                     ) -> dict[str, Any]:
        """Gives the action that appends `[queue, event, delay, pairs, send id]` (and, for
        queue `target`, the target the driver resolves) to the outbox."""
        self.chart.uses_outbox = True
        entry = f"[{queue!r}, {event}, {delay or 0}, {pairs or '[]'}, {send_id!r}" + (
            f", {target}]" if target is not None else "]")
        if when is None:
            return {"assign": {OUTBOX: f"context[{OUTBOX!r}] + [{entry}]"}}
        return {"assign": {OUTBOX: f"context[{OUTBOX!r}] + ([{entry}] if ({when}) else [])"}}

    def pairs(self, node: Node, when: str | None, state: str, *, with_content: bool = True
              ) -> list[str] | None:
        """Gives the `[name, value]` expressions of an event's data (`namelist`, `<param>`,
        `<content>`), or None when evaluating them fails whenever it runs (SCXML then raises
        error.execution). An error of the import itself is recorded and gives []."""
        pairs: list[str] = []
        for key in node.attrs.get("namelist", "").split():
            if not self.chart.data.is_declared(key):
                return None
            pairs.append(f"[{key!r}, context[{key!r}]]")
        for param in node.kids("param"):
            param_name = param.attrs.get("name")
            if not param_name:
                self.chart.sink.error("scxml-param", param, "<param> needs a name", state)
                return []
            if "expr" in param.attrs:
                value = self.chart.data.expression(param.attrs["expr"], param, "expr", runtime=True)
            elif "location" in param.attrs:
                location = param.attrs["location"].strip()
                if not self.chart.data.is_declared(location):
                    return None
                value = self.chart.data.expression(location, param, "location", runtime=True)
            else:
                self.chart.sink.error("scxml-param", param, "<param> needs expr or location",
                                      param_name)
                return []
            if self.chart.syntax_error:
                return None
            if value is None:
                return []
            pairs.append(f"[{param_name!r}, {value}]")
        for content in node.kids("content") if with_content else ():
            if content.children:
                self.chart.sink.error("scxml-content", content, "<content> with markup is "
                                      "refused: a native event's data holds values, not XML", state)
                return []
            text = content.attrs.get("expr")
            if text is None:
                literal = content.text.strip()
                value = self.chart.data.expression(literal, content, "value") if (
                    self.chart.data.is_literal(literal)
                ) else repr(literal)  # text content is data, not an expression
            else:
                value = self.chart.data.expression(text, content, "expr", runtime=True)
                if self.chart.syntax_error:
                    return None
                if value is None:
                    return []
            pairs.append(f"[{_DATA!r}, {value}]")
        return pairs

    def send(self, node: Node, when: str | None, state: str) -> list[dict[str, Any]]:
        attrs = node.attrs
        kind = attrs.get("type", _SCXML_PROCESSOR[0])
        type_expression = None
        if "typeexpr" in attrs:
            type_expression = self.chart.data.expression(attrs["typeexpr"], node, "typeexpr")
            if type_expression is None:
                return []
            self.chart.sink.warning("scxml-send-typeexpr", node, "typeexpr: the type is known "
                                    "only when it is sent; the driver raises error.execution for "
                                    "any but the SCXML event processor", state)
        elif kind not in _SCXML_PROCESSOR and kind in _KNOWN_PROCESSORS:
            self.chart.sink.error("scxml-send-type", node, f"<send> of type {kind!r}: only the "
                                  "SCXML event processor, to this session, is imported", kind)
            return []
        elif kind not in _SCXML_PROCESSOR:
            # a type no processor has: SCXML raises error.execution where the send runs
            return [self.chart.content.static_error(node, "error.execution", when)]
        target = attrs.get("target")
        target_expression: str | None = None
        if "targetexpr" in attrs:
            target_expression = self.chart.data.expression(attrs["targetexpr"], node, "targetexpr")
            if target_expression is None:
                return []
            self.chart.sink.warning("scxml-send-targetexpr", node, "targetexpr: the target is "
                                    "known only when it is sent; the driver delivers it when it "
                                    "names this session or #_internal, and raises "
                                    "error.communication otherwise", state)
        elif (target == "#_parent" and self.chart.invoked) or (
                target is not None and target[2:] in self.chart.invoke_ids
                and target.startswith("#_")):
            pass  # to the invoking session, or to a child this chart invokes: the driver's
        elif target in ("#_parent",) or (
                target is not None and target.startswith("#_") and target != "#_internal"
                and not target.startswith("#_scxml_")):
            self.chart.sink.error("scxml-send-target", node, "<send> to "
                                  f"{target or attrs.get('targetexpr')!r}: only sends to this "
                                  "session, to the session that invoked this chart (#_parent of "
                                  "an inline invoked chart) and to a child it invokes by id are "
                                  "imported", target or "targetexpr")
            return []
        send_id = attrs.get("id", "")
        assigns: dict[str, str] = {}
        if "idlocation" in attrs:
            location = attrs["idlocation"].strip()
            if not self.chart.data.is_declared(location):
                return [self.chart.content.static_error(node, "error.execution", when)]
            send_id = f"send@{node.line}"
            self.chart.sink.warning("scxml-send-idlocation", node, "idlocation: every run of this "
                                    f"send gets the id {send_id!r}, not a fresh one", location)
            assigns[location] = (f"{send_id!r} if ({when}) else context[{location!r}]" if when
                                 else repr(send_id))

        def fail(event: str) -> list[dict[str, Any]]:
            raised = self.chart.content.static_error(node, event, when, send_id)
            return [{"assign": {**assigns, **raised["assign"]}}]

        if target is not None and target.startswith("#_scxml_"):
            # a session id the chart writes as text cannot be this run's, which is made fresh
            return fail("error.communication")
        session = target == "#_parent" or (target is not None and target[2:] in
                                             self.chart.invoke_ids and target_expression is None)
        if target is not None and target != "#_internal" and not session:
            return fail("error.execution")
        queue = "internal" if target == "#_internal" else "external"
        if session and target is not None:
            # another session's: the driver delivers it there (`parent`, or `child` naming
            # the invoke id in the entry's target)
            queue = "parent" if target == "#_parent" else "child"
            target_expression = None if queue == "parent" else repr(target[2:])
        if queue not in ("parent", "child") and (target_expression is not None
                                                 or type_expression is not None):
            queue = "target"
            target_expression = target_expression or repr(target)
            if type_expression is not None:
                target_expression = f"[{target_expression}, {type_expression}]"
        if "event" in attrs:
            event = repr(attrs["event"])
            if queue not in ("parent", "child"):
                self.chart.raised.add(attrs["event"])
        elif "eventexpr" in attrs:
            expression = self.chart.data.expression(attrs["eventexpr"], node, "eventexpr",
                                                    runtime=True)
            if self.chart.syntax_error:
                return fail("error.execution")
            if expression is None:
                return []
            event = f"({expression})"
            self.chart.sink.warning("scxml-send-eventexpr", node, "eventexpr: the event's name is "
                                    "known only when it is sent; a name no transition names is "
                                    "dropped", state)
        else:
            self.chart.sink.error("scxml-send-event", node, "<send> without event or eventexpr is "
                                  "not imported", state)
            return []
        delay: str | None = None
        if "delay" in attrs:
            ms = parse_delay_ms(attrs["delay"])
            if ms is None:
                return fail("error.execution")
            delay = str(ms)
        elif "delayexpr" in attrs:
            delay = self.chart.data.expression(attrs["delayexpr"], node, "delayexpr", runtime=True)
            if self.chart.syntax_error:
                return fail("error.execution")
            if delay is None:
                return []
            delay = f"({delay})"
        if delay is not None and queue == "internal":
            return fail("error.execution")
        pairs = self.pairs(node, when, state)
        if pairs is None:
            return fail("error.execution")
        self.queue_warning(node)
        queued = self.queue_action(queue, event, delay, "[" + ", ".join(pairs) + "]", when,
                                   send_id, target_expression)
        return [{"assign": {**assigns, **queued["assign"]}}]

    def cancel(self, node: Node, when: str | None) -> list[dict[str, Any]]:
        if "sendid" in node.attrs:
            sendid = repr(node.attrs["sendid"])
        elif "sendidexpr" in node.attrs:
            expression = self.chart.data.expression(node.attrs["sendidexpr"], node, "sendidexpr")
            if expression is None:
                return []
            sendid = f"({expression})"
        else:
            self.chart.sink.error("scxml-cancel", node, "<cancel> needs sendid or sendidexpr",
                                  "cancel")
            return []
        self.chart.uses_outbox = True
        self.queue_warning(node)
        entry = f"['cancel', {sendid}, 0, [], '']"
        value = f"context[{OUTBOX!r}] + [{entry}]" if when is None else (
            f"context[{OUTBOX!r}] + ([{entry}] if ({when}) else [])")
        return [{"assign": {OUTBOX: value}}]
