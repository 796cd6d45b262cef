"""JSONPath as the importer reads it: plain paths parsed into segments, and the native
expression text reading a path (null where a step on the way is missing)."""

from __future__ import annotations

import keyword
import re

__all__ = ["NATIVE_ID", "SLICE", "coalesce", "parse_path", "render"]

#: A native context key or id.
NATIVE_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")
_PLAIN = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
#: The deepest path read (each segment is a level of the data and of its guessed schema).
_PATH_SEGMENTS_MAX = 50


def coalesce(expr: str, fallback: str) -> str:
    """Gives `expr`, or `fallback` when it is null (a native `or` gives a boolean)."""
    return f"({expr} if {expr} is not None else {fallback})"


def render(segments: tuple[str | int, ...] | list[str | int], root: str = "context",
           *, nullable: bool = False) -> str:
    """Gives the expression reading `segments` below `root`: null when a step on the way is
    missing or is not a mapping or list (ASL would fail the run there; a run started with
    unknown input must not). `nullable`: `root` itself may be null, or not a mapping (a Pass
    whose `Result` is text replaces the data with that text)."""
    first = 0 if nullable else 1
    if len(segments) <= first:
        return _render_plain(segments, root)
    head = _render_plain(segments[:first], root)
    return f"at({head}, {', '.join(repr(s) for s in segments[first:])})"


def _render_plain(segments: tuple[str | int, ...] | list[str | int], root: str) -> str:
    out = root
    for seg in segments:
        if isinstance(seg, int):
            out += f"[{seg}]"
        elif _PLAIN.match(seg) and not keyword.iskeyword(seg):
            out += f".{seg}"
        else:
            out += f"[{seg!r}]"
    return out


_SEGMENT = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]|\['([^']*)'\]|\[\"([^\"]*)\"\]")


SLICE = re.compile(r"^(\$.*)\[(-?\d*):(-?\d*)\]$")


def parse_path(path: str) -> tuple[str, list[str | int]] | None:
    """Parses a plain JSONPath: `$`, `$$` or `$name`, then `.key`, `['key']` or `[0]`
    segments; gives None for filters, wildcards and slices."""
    match = re.match(r"^(\$\$|\$[A-Za-z_][A-Za-z0-9_]*|\$)", path.strip())
    if match is None:
        return None
    head, rest = match.group(1), path.strip()[match.end():].replace(".[", "[")
    segments: list[str | int] = []
    position = 0
    while position < len(rest):
        if len(segments) >= _PATH_SEGMENTS_MAX:  # read as not expressible, as a filter is
            return None
        seg = _SEGMENT.match(rest, position)
        if seg is None:
            return None
        name, index, quoted, dquoted = seg.groups()
        if index is not None:
            segments.append(int(index))
        else:
            text = name if name is not None else (quoted if quoted is not None else dquoted)
            if text is None or "*" in text or "?" in text:
                return None
            segments.append(text)
        position = seg.end()
    return head, segments
