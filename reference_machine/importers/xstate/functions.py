"""Guards and the other functions an XState machine names: a registered function's name made
native, an inline JavaScript function translated into a native expression or registered where
it is written, and XState's guard combinators."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from reference_machine.importers.xstate.common import (
    NATIVE_NAME,
    STRINGIFIED,
    inline_name,
    json_type,
    safe,
    shown_code,
)
from reference_machine.importers.xstate.conversion import Part
from reference_machine.importers.xstate.source import inline_reference, native_expression

__all__ = ["FunctionReader"]

_CODE = re.compile(r"=>|[(){};`\[\]]|\bfunction\b|\breturn\b|&&|\|\||[<>!]=?|===?")
#: The longest native expression an inline function is translated into (a native guard's
#: limit is 1,000 characters).
_TRANSLATED_MAX = 900
#: XState's guard combinators over named guards, each imported as one registered function.
_COMBINATORS = ("xstate.not", "xstate.and", "xstate.or")


class FunctionReader(Part):
    """Reads guards, and names the registered function each named or inline function is."""

    def guard(self, guard: Any, loc: str) -> str | dict[str, str] | None:
        if inline_reference(guard) is not None:
            translated = self.translated(guard, loc, "guard")
            if translated is not None:
                return translated
            return {"function": self.inline(guard, loc, "guard")}
        if isinstance(guard, Mapping):
            kind = guard.get("type")
            if kind in _COMBINATORS:
                name = self._combined_guard(guard, loc)
                return None if name is None else {"function": name}
            if isinstance(kind, str) and kind.startswith("xstate."):
                self.sink.error("guard-combinator", loc, f"the built-in guard {kind!r} (stateIn) "
                                "has no native counterpart: register one function that decides "
                                "it and name it")
                return None
            if not isinstance(kind, str):
                keys = ", ".join(sorted(str(k) for k in guard)) or "none"
                self.sink.error("bad-guard", loc, "a guard object names its guard in a string "
                                f"`type` ({{type: 'isValid', params}}); this one has no `type` "
                                f"(keys: {keys}){STRINGIFIED}")
                return None
            if guard.get("params") is not None:
                self.sink.warning("params-left-out", f"{loc}.params", "a registered guard is "
                                  "called with (context, event); its params are left out")
            guard = kind
        if not isinstance(guard, str):
            self.sink.error("bad-guard", loc, "a guard is a name (a string) or an object {type, "
                            f"params}}, got the {json_type(guard)} {guard!r}")
            return None
        named = self.named(guard, loc, "guard")
        return None if named is None else {"function": named}

    def named(self, text: str, loc: str, what: str) -> str | None:
        """Gives the native name of a guard, action or actor XState names `text` (made safe
        where XState's name is any text, `'save dir'`), or None for code."""
        if NATIVE_NAME.match(text):
            return text
        if _CODE.search(text) or not text.strip():
            self.sink.error("javascript", loc, f"{what} {text[:60]!r} looks like JavaScript; a "
                            f"config holds the {what}'s name, and its code is registered in Python "
                            "(nothing is evaluated)")
            return None
        native = safe(text.strip(), what)
        self.sink.warning("renamed", loc, f"{what} name {text!r} is not a native name (letters, "
                          "digits, _ . -, not starting with a digit); it is imported as "
                          f"{native!r}")
        return native

    def inline(self, reference: Any, loc: str, what: str, gives: str = "") -> str:
        """Gives the registered function's name an inline function is imported as, and warns
        where it is written."""
        name = inline_name(str(reference["type"]))
        code = str(reference.get("code", ""))
        shown = code if len(code) <= 80 else f"{code[:77]}..."
        self.sink.warning("inline-function", loc, f"the {what} is inline JavaScript ({shown}); it "
                          f"is imported as the registered function {name!r}{gives}: write what it "
                          "does in Python (@register_function or functions=)")
        return name

    def translated(self, reference: Any, loc: str, what: str) -> str | None:
        """Gives the native expression of an inline function that is one expression the
        native language says the same way (`({ context }) => context.n > 0`), warned with
        both texts; None for any other."""
        code = str(reference.get("code", ""))
        native = native_expression(code)
        if native is None or len(native) > _TRANSLATED_MAX:
            return None
        self.sink.warning("inline-translated", loc, f"the {what} is inline JavaScript "
                          f"({shown_code(reference)}); it is translated into the native expression "
                          f"{native!r} (XState's `event.x` is `event.payload.x`; `!`, `&&`, `||` "
                          "test truth as Python does, an empty list or object is false)")
        return native

    def _combined_guard(self, guard: Mapping[str, Any], loc: str) -> str | None:
        """Gives the name of the registered function an XState guard combinator (`not`,
        `and`, `or` of named guards) is imported as: `not.isValid`, `or.hitWall.hitTail`."""
        kind = str(guard["type"]).removeprefix("xstate.")
        guards = guard.get("guards")
        if not guards:
            self.sink.error("guard-combinator", loc, f"{kind}(...) names no guards (`guards`: a "
                            "list of named guards)")
            return None
        names: list[str] = []
        for index, inner in enumerate(guards if isinstance(guards, list) else [guards]):
            where = f"{loc}.guards[{index}]"
            if isinstance(inner, Mapping) and isinstance(inner.get("type"), str) and (
                    inline_reference(inner) is None):
                inner = inner["type"]
            if not isinstance(inner, str):
                self.sink.error("guard-combinator", where, f"{kind}(...) is imported as one "
                                "registered function when it combines named guards; this one is "
                                f"the {json_type(inner)} {inner!r}")
                return None
            named = self.named(inner, where, "guard")
            if named is None:
                return None
            names.append(named)
        name = ".".join((kind, *names))
        self.sink.warning("guard-combinator", loc, f"{kind}({', '.join(map(repr, names))}) has no "
                          "native counterpart; it is imported as the registered function "
                          f"{name!r}, which decides it from those guards")
        return name
