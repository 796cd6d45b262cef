"""SCXML (W3C State Chart XML) to the native definition format: `convert`.

The modules, by construct: `nodes` reads the document, `chart` runs the conversion, `states`,
`transitions`, `actions`, `outbox` (raise, send, cancel), `invoke` (child charts), `datamodel`
(with `expressions` and `ecmascript`), `flattening` and `parallel` (parallel states with
SCXML's meaning), `files` (`src=`), `keys` (what the chart shares with its driver) and `checks`
(the native checks of what was made). What is imported, approximated (with a warning) and
refused is told in docs/importing.md.
"""

from __future__ import annotations

from reference_machine.importers._common import Imported as Imported
from reference_machine.importers.scxml.chart import convert
from reference_machine.importers.scxml.files import SRC_BYTES_MAX, SRC_FILES_MAX
from reference_machine.importers.scxml.keys import (
    CHILDREN,
    EVENT_DATA,
    EVENT_FIELDS,
    FINALIZE,
    INVOKE_TYPES,
    OUTBOX,
    SYSTEM_KEYS,
)
from reference_machine.importers.scxml.outbox import parse_delay_ms

__all__ = ["CHILDREN", "EVENT_DATA", "EVENT_FIELDS", "FINALIZE", "INVOKE_TYPES", "OUTBOX",
           "SRC_BYTES_MAX", "SRC_FILES_MAX", "SYSTEM_KEYS", "convert", "parse_delay_ms"]
