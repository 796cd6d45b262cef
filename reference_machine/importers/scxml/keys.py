"""The names an imported chart and whoever drives it share: the context keys the import
writes (the outbox, the system variables, the charts it invokes), the payload keys of the events
the SCXML driver delivers, the events of the driver's own, and the names a native event or state
may have."""

from __future__ import annotations

import re
from typing import Any

from reference_machine._spec import NAME_PATTERN

__all__ = ["CHILDREN", "EVENT_DATA", "EVENT_FIELDS", "FINALIZE", "INVOKE_TYPES", "NAME", "OUTBOX",
           "RESERVED", "SYSTEM_DEFAULTS", "SYSTEM_KEYS"]

#: The context key the chart's raised and sent events are appended to (see `outbox`).
OUTBOX = "_scxml_outbox"

#: SCXML's system variables a run reads from its context, as the driver's start event sets
#: them: `_sessionid` (this run's id) and `_ioprocessors` (processor name to `{location}`).
SYSTEM_KEYS = {"_sessionid": "_scxml_sessionid", "_ioprocessors": "_scxml_ioprocessors"}

#: What the system variables hold in a run whose start sets neither.
SYSTEM_DEFAULTS: dict[str, Any] = {
    "_sessionid": "session",
    "_ioprocessors": {name: {"location": "#_scxml_session"}
                      for name in ("http://www.w3.org/TR/scxml/#SCXMLEventProcessor", "scxml")}}

#: The payload keys of an event the SCXML driver delivers: SCXML's event fields (`type`,
#: `sendid`, `origin`, `origintype`, `invokeid`) and the event's data.
EVENT_FIELDS = "_scxml_event"
EVENT_DATA = "_scxml_data"

#: The context key of the charts a chart invokes (`<invoke>` with inline `<content>`): invoke
#: id to the child's native definition data, which the W3C driver runs as a session.
CHILDREN = "_scxml_children"

#: The event the W3C driver delivers, before each event a child sends its parent, to run the
#: invoke's `<finalize>` (this prefix, then the invoke id).
FINALIZE = "_scxml.finalize."

#: The `type` values of an invoke of an SCXML session.
INVOKE_TYPES = ("http://www.w3.org/TR/scxml/", "http://www.w3.org/TR/scxml", "scxml")

#: What a native state or event name matches.
NAME = re.compile(NAME_PATTERN)
#: The prefixes of the native runtime's own events: no SCXML event may have one.
RESERVED = ("execution.", "step.", "approval.", "timer.", "compensation.")
