"""The actions of an XState machine: named actions as registered functions, XState's built-in
ones left out, and `assign` as the native assign where its values are literals or
translated expressions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reference_machine.importers._common import literal as _literal
from reference_machine.importers.xstate.common import (
    NATIVE_NAME,
    STRINGIFIED,
    item_location,
    json_type,
)
from reference_machine.importers.xstate.conversion import Part
from reference_machine.importers.xstate.source import inline_reference

__all__ = ["ActionReader"]

_ASSIGN_TYPES = ("assign", "xstate.assign")


class ActionReader(Part):
    """Reads a list of actions (`entry`, `exit`, a transition's `actions`)."""

    def read(self, written: Any, loc: str) -> list[dict[str, Any]]:
        if written is None:
            return []
        items = written if isinstance(written, list) else [written]
        out = []
        for index, item in enumerate(items):
            out.extend(self._action(item, item_location(loc, index, written)))
        return out

    def _action(self, action: Any, loc: str) -> list[dict[str, Any]]:
        """Gives the native actions of one XState action (an assign may give two: its
        literal values, then a registered function per computed one)."""
        params = None
        if inline_reference(action) is not None:
            return [{"function": self.functions.inline(action, loc, "action")}]
        if action is None:
            self.sink.error("dropped-function", loc, f"an action is null{STRINGIFIED}")
            return []
        if isinstance(action, Mapping):
            kind = action.get("type")
            if kind in _ASSIGN_TYPES:
                return self._assign(action, loc)
            params = action.get("params")
            action = kind
        if not isinstance(action, str):
            self.sink.error("bad-action", loc, "an action is a name (a string) or an object "
                            f"{{type, params}}, got the {json_type(action)} {action!r}")
            return []
        if action.startswith("xstate."):
            self.sink.warning("left-out", loc, f"the built-in action {action!r} (raise, sendTo, "
                              "log, cancel, stop, emit, ...) has no native counterpart; it is left "
                              "out")
            return []
        named = self.functions.named(action, loc, "action")
        if named is None:
            return []
        if params is not None:
            self.sink.warning("params-left-out", f"{loc}.params", "a registered action is called "
                              "with (context, event); its params are left out")
        return [{"function": named}]

    def _assign(self, action: Mapping[str, Any], loc: str) -> list[dict[str, Any]]:
        key = "assignment" if "assignment" in action else "params"
        assignment = action.get(key)
        if inline_reference(assignment) is not None:
            return [{"function": self.functions.inline(assignment, loc, "assign")}]
        if not isinstance(assignment, Mapping):
            self.sink.warning("left-out", loc, "an assign whose value is not a JSON object of "
                              "literal values (a function) is left out")
            return []
        out: dict[str, str] = {}
        computed: list[dict[str, Any]] = []
        for name, value in assignment.items():
            where = f"{loc}.{key}.{name}"
            literal = _literal(value)
            translated = self.functions.translated(value, where, f"value assigned to {name!r}") if (
                inline_reference(value) is not None and NATIVE_NAME.match(str(name))) else None
            if translated is not None:
                out[str(name)] = translated
            elif inline_reference(value) is not None:
                function = self.functions.inline(value, where, f"value assigned to {name!r}",
                                                 f", which returns {{{name!r}: <the new value>}}")
                computed.append({"function": function})
            elif not NATIVE_NAME.match(str(name)):
                self.sink.warning("left-out", where, f"context key {name!r} is not a native name; "
                                  "this assignment is left out")
            elif literal is None:
                self.sink.warning("left-out", where, "only literal values (numbers, strings, "
                                  "booleans, null, lists of them) are imported; this assignment is "
                                  "left out")
            else:
                out[str(name)] = literal
        return ([{"assign": out}] if out else []) + computed
