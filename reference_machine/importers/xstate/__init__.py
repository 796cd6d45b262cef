"""The XState importer: XState v5 machine configs (a `*.xstate.json` file, or the TypeScript or
JavaScript source that creates the machine, read by `source`) as native definitions.
docs/importing.md says what is imported and how.

`convert(data, lines, name)` gives the native definition data, with a warning located in
XState's terms for every feature approximated or left out, and raises `DefinitionError` with
located findings for what cannot be imported. `machine` assembles the converter from one part
per construct: `states` (the tree of state nodes), `events` (`on`), `transitions` (targets),
`functions` (guards and inline JavaScript), `actions` (and `assign`), `invoke` (actors),
`timers` (`after`), `parallel` and `hierarchy` (history, what parents give their children).
"""

from reference_machine.importers.xstate.common import inline_name
from reference_machine.importers.xstate.events import EVENT_SOURCES
from reference_machine.importers.xstate.machine import convert, convert_machine

__all__ = ["EVENT_SOURCES", "convert", "convert_machine", "inline_name"]
