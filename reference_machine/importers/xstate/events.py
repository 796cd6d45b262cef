"""The events of an XState machine: each named in an `on` declared as a native event (renamed
where the native format asks), a state's `on` read with its wildcards, and the payload fields
translated expressions read."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from reference_machine.importers.xstate.common import safe
from reference_machine.importers.xstate.conversion import Part
from reference_machine.importers.xstate.nodes import StateNode

__all__ = ["EVENT_SOURCES", "EventCatalog"]

#: Who may send an imported event: a user or another part of the system.
EVENT_SOURCES = ("human", "system")

_RESERVED_PREFIXES = ("execution.", "step.", "approval.", "timer.", "compensation.")
_XSTATE_EVENT_PREFIXES = ("xstate.", "done.", "error.")
_PAYLOAD_READ = re.compile(r"event\.payload\['([^'\\]+)'\]")


class EventCatalog(Part):
    """Declares the machine's events and reads each state's `on`."""

    def collect(self) -> None:
        for node in self.ctx.nodes:
            on = node.config.get("on")
            if not isinstance(on, Mapping):
                continue
            for event in on:
                event = str(event)
                if _wildcard(event) or event.startswith(_XSTATE_EVENT_PREFIXES):
                    continue
                self._event(event, f"{node.at('on')}.{event}")

    def _event(self, event: str, loc: str) -> str:
        known = self.ctx.event_names.get(event)
        if known is not None:
            return known
        native = safe(event, "event")
        if native.startswith(_RESERVED_PREFIXES):
            native = f"x.{native}"
        base, count = native, 1
        while native in self.ctx.events:
            count += 1
            native = f"{base}_{count}"
        spec: dict[str, Any] = {"sources": list(EVENT_SOURCES)}
        if native != event:
            spec["description"] = f"XState event {event!r}"
            self.sink.warning("renamed-event", loc, f"event {event!r} is not a native event name "
                              f"(or uses a reserved prefix); it is imported as {native!r}")
        self.ctx.event_names[event] = native
        self.ctx.events[native] = spec
        return native

    def on(self, node: StateNode) -> dict[str, list[Any]]:
        written = node.config.get("on")
        loc = node.at("on")
        if written is None:
            return {}
        if not isinstance(written, Mapping):
            self.sink.error("bad-on", loc, "`on` is a JSON object of event names")
            return {}
        on: dict[str, list[Any]] = {}
        wildcards: list[tuple[str, Any]] = []
        for event, transitions in written.items():
            event = str(event)
            where = f"{loc}.{event}"
            if _wildcard(event):
                wildcards.append((event, transitions))
                continue
            if event.startswith(_XSTATE_EVENT_PREFIXES):
                self.sink.warning("left-out", where, f"{event!r} is an event XState raises itself; "
                                  "the native machine never sends it, so this transition is left "
                                  "out (use onDone / onError)")
                continue
            on[self._event(event, where)] = self.transitions.read(node, transitions, where)
        explicit = set(on)
        for event, transitions in wildcards:
            where = f"{loc}.{event}"
            prefix = event[:-1]
            matched = [native for xs, native in self.ctx.event_names.items()
                       if xs.startswith(prefix) and native not in explicit]
            if not matched:
                self.sink.warning("wildcard-empty", where, f"no declared event matches {event!r} "
                                  "that this state does not handle itself; it is left out")
                continue
            converted = self.transitions.read(node, transitions, where)
            for native in matched:
                on[native] = converted
            self.sink.warning("wildcard", where, f"{event!r} is imported as one transition for "
                              f"each event it matches ({', '.join(sorted(matched))}); an event no "
                              "state names is not declared, so it is never sent")
        return on

    def declare_payloads(self) -> None:
        """Declares the fields a translated expression reads of an event's payload
        (`event.temperature`) as the event's payload schema, each of any value and optional
        (XState declares no shape, and takes an event without them), so that the
        simulator's events carry them."""
        reads: dict[str, set[str]] = {}
        for spec in self.ctx.states.values():
            for event, transitions in (spec.get("on") or {}).items():
                if event in self.ctx.events:
                    for transition in transitions:
                        reads.setdefault(event, set()).update(_payload_reads(transition))
        for event, fields in reads.items():
            if fields and "payload" not in self.ctx.events[event]:
                self.ctx.events[event]["payload"] = {
                    "type": "object", "properties": {f: {} for f in sorted(fields)}}


def _payload_reads(transition: Mapping[str, Any]) -> set[str]:
    """Gives the payload fields a transition's translated guard and assignments read."""
    texts = [transition.get("guard")]
    for action in transition.get("actions", []):
        texts.extend((action.get("assign") or {}).values())
    return {m.group(1) for text in texts if isinstance(text, str)
            for m in _PAYLOAD_READ.finditer(text)}


def _wildcard(event: str) -> bool:
    return event == "*" or event.endswith(".*")
