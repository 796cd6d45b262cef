"""What the parts of the XState importer share: native names made from XState's, the locations
of list items, and how a value or an inline function is shown in a finding."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from reference_machine.importers.xstate.source import INLINE_PREFIX

__all__ = ["NATIVE_NAME", "STRINGIFIED", "inline_name", "item_location", "json_type", "safe",
           "shown_code"]

NATIVE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]")
#: What a value JSON.stringify made from a config with functions looks like, and the way out.
STRINGIFIED = (": JSON.stringify writes a function in a list as null and leaves a function "
                "property out, so a config stringified from JavaScript has lost its inline "
                "functions; import the TypeScript or JavaScript source instead (`--format "
                "xstate`), which keeps each as a named reference")


def inline_name(reference: str) -> str:
    """Gives the registered function's name an inline reference (`inline:<file>:<line>`)
    is imported as: `inline.<file>.L<line>`."""
    _, _, rest = reference.partition(INLINE_PREFIX)
    stem, _, line = rest.rpartition(":")
    return f"inline.{safe(stem, 'source')}.L{_UNSAFE.sub('_', line)}"


def shown_code(reference: Any) -> str:
    """Gives the start of an inline reference's code, to show in a finding."""
    code = str(reference.get("code", "")) if isinstance(reference, Mapping) else ""
    return code if len(code) <= 60 else f"{code[:57]}..."


def json_type(value: Any) -> str:
    """Gives the JSON name of a value's type (`null`, `boolean`, `number`, `array`,
    `object`, `string`), to say in a finding what was written."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, list):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return "string"


def item_location(loc: str, index: int, items: Any) -> str:
    """Gives the location of item `index` of `items` written at `loc`: `loc[index]` for
    a list, `loc` itself for one item written alone."""
    return f"{loc}[{index}]" if isinstance(items, list) else loc


def safe(key: str, fallback: str = "state") -> str:
    """Gives `key` as a native name: unsafe characters as `_`, never starting with a digit."""
    text = _UNSAFE.sub("_", str(key))
    if not text:
        return fallback
    if not re.match(r"[A-Za-z_]", text):
        text = f"_{text}"
    return text
