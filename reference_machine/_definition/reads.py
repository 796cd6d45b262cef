"""What a definition's expressions read of the context: a read of a key nothing writes (a
warning), secrets that are context keys, and every word read (a key named like a secret that no
expression reads is stored as a reference)."""

from __future__ import annotations

import ast
import re
from typing import Any

from reference_machine._definition.context import Compilation
from reference_machine._spec import WorkflowSpec
from reference_machine.findings import did_you_mean

__all__ = ["check_context_reads", "check_secrets", "words_read"]


def check_context_reads(ctx: Compilation) -> None:
    """Warns of an expression that reads a context key nothing gives: neither `context:`
    nor any `assign` (a typo like `context.emailid` for `email_id` reads None, silently).
    Not judged where anything may write any key (a `function:` action, a Python callable)
    nor inside a map's item flow, whose context is the item."""
    written = set(ctx.spec.context)
    scanned: list[tuple[str, Any]] = []
    for name, state in ctx.states.items():
        scope = ctx.scope_of.get(name)
        if scope is not None and ctx.states[scope].type == "map":
            continue
        if state.type == "map":
            written.add(state.results)
        scanned.append((f"states.{name}", state.model_dump(
            mode="python", exclude={"description"}, exclude_defaults=True)))
    if ctx.spec.events:  # `correlate:` values read the context
        scanned.append(("events", {name: event.model_dump(mode="python", exclude_defaults=True)
                                   for name, event in ctx.spec.events.items()}))
    reads: list[tuple[str, str]] = []
    # (where, what, inside a step's or compensation's `input:`, whose texts are sent as
    # written unless they start with `=`)
    stack = [(location, value, False) for location, value in reversed(scanned)]
    while stack:
        location, value, sent = stack.pop()
        if isinstance(value, dict):
            if value.get("function") is not None:
                return  # a registered action or guard: it may write any key
            assign = value.get("assign")
            if isinstance(assign, dict):
                written.update(assign)
            stack.extend((f"{location}.{key}", item, sent or key == "input")
                         for key, item in reversed(value.items()) if key != "description")
        elif isinstance(value, list | tuple):
            stack.extend((f"{location}[{index}]", item, sent)
                         for index, item in reversed(list(enumerate(value))))
        elif isinstance(value, str):
            if sent and not value.startswith("="):
                continue
            reads.extend((location, key) for key in _context_keys(value.removeprefix("=")))
        elif callable(value) and not isinstance(value, type):
            return  # a Python guard or action: it may write any key
    warned: set[tuple[str, str]] = set()
    for location, key in reads:
        if key in written or (location, key) in warned:
            continue
        warned.add((location, key))
        hint = did_you_mean(key, written)
        ctx.sink.warning("unknown-context-key", location,
                         f"reads context key {key!r}, which neither `context:` declares nor "
                         f"an `assign` writes, so it is None unless the start context gives "
                         f"it{hint}; declare it under `context:` with its default", key)


def check_secrets(ctx: Compilation) -> None:
    """Reports a secret (`secrets:`) that is not a context key."""
    spec = ctx.spec
    for index, key in enumerate(spec.secrets):
        if key not in spec.context:
            ctx.sink.error("unknown-secret", f"secrets[{index}]",
                           f"secret {key!r} is not a context key; declare it under `context:` "
                           f"(known: {', '.join(sorted(spec.context)) or 'none'})", key)


_SCANNED_TEXT_MAX = 4_000


def _context_keys(text: str) -> list[str]:
    """Gives the context keys an expression reads by a name written out: `context.key`,
    `context['key']`, `at(context, 'key', ...)`, `has(context, 'key', ...)`; nothing for a
    text that is no expression (a duration, a sentence) or a text within one."""
    if len(text) > _SCANNED_TEXT_MAX:  # no expression is this long (the limit is 1,000)
        return []
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    keys: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_context(node.value):
            keys.append(node.attr)
        elif isinstance(node, ast.Subscript) and _is_context(node.value):
            keys += _named(node.slice)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("at", "has") and len(node.args) >= 2
              and _is_context(node.args[0])):
            keys += _named(node.args[1])
    return keys


def _is_context(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "context"


def _named(node: ast.AST) -> list[str]:
    """Gives the key a subscript or an `at` argument writes out, if it is a text."""
    return [node.value] if isinstance(node, ast.Constant) and isinstance(node.value, str) else []


def words_read(spec: WorkflowSpec) -> frozenset[str] | None:
    """Gives every word the definition's expressions hold (outside its context's defaults, its
    tools' schemas, and what the linter and campaigns are told): a key none names is read by
    none. None when what is read cannot be known: a Python callable or a `function:` may read
    any key, and so may an expression that takes the whole context or payload
    (`=context`, `event.payload`, `context[name]`)."""
    stack: list[Any] = [spec.model_dump(mode="python", exclude={
        "name", "version", "description", "context", "tools", "secrets", "lint", "untested"})]
    words: set[str] = set()
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            if value.get("function") is not None:
                return None
            stack.extend(value.values())
        elif isinstance(value, list | tuple):
            stack.extend(value)
        elif isinstance(value, str):
            if _takes_whole(value):
                return None
            words.update(_WORD.findall(value))
        elif isinstance(value, type):
            continue  # a payload's model: a schema, which reads nothing
        elif callable(value):
            return None
    return frozenset(words)


#: An expression that takes a whole mapping, or one of its keys by a name computed: `context`,
#: `payload` or `event` not followed by `.name` or `['name']`.
_WHOLE = re.compile(r"\b(?:context|payload|event)\b(?!\s*(?:\.\s*[A-Za-z_]|\[\s*['\"]))")

#: `at(context, 'key', ...)` and `has(context, 'key', ...)` read the key named next, when it
#: is one text written out (`at(context, 'a' + context.s)` computes it)
_KEYED = re.compile(r"\s*,\s*(?:'[^'\\]*'|\"[^\"\\]*\")\s*[,)]")


def _takes_whole(text: str) -> bool:
    """Tells whether an expression takes a whole mapping (see `_WHOLE`)."""
    for match in _WHOLE.finditer(text):
        if not (text[:match.start()].endswith(("at(", "has("))
                and _KEYED.match(text, match.end())):
            return True
    return False


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
