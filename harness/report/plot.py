"""The growth of a fuzz campaign's coverage drawn as an inline SVG: behaviours seen over runs, a
step line with its axes and a caption that tells when the campaign stopped finding anything new.

The SVG is self-contained (no script, no style sheet, no external reference) and deterministic:
the same points give the same bytes.
"""

from __future__ import annotations

import html
import itertools
import math
from collections.abc import Sequence

__all__ = ["POINTS_MAX", "downsample", "growth_caption", "growth_svg"]

#: The most points a plot draws: a million-run campaign's growth stays a few kilobytes.
POINTS_MAX = 300

_WIDTH, _HEIGHT = 480, 160
_LEFT, _RIGHT, _TOP, _BOTTOM = 52, 16, 22, 118  # the plot area's edges, in pixels
_FONT = 'font-family="sans-serif" font-size="10"'


def _checked(points: Sequence[Sequence[int]]) -> list[tuple[int, int]]:
    """Gives the points as (runs, behaviours) pairs; raises `ValueError` naming the first one
    that is not a pair of counts, or that breaks the order (runs increasing, behaviours never
    falling)."""
    out: list[tuple[int, int]] = []
    for index, point in enumerate(points):
        if len(point) != 2 or not all(isinstance(n, int) and not isinstance(n, bool)
                                      and n >= 0 for n in point):
            msg = f"growth[{index}]: expected [runs, behaviours], two counts, got {point!r}"
            raise ValueError(msg)
        runs, behaviours = int(point[0]), int(point[1])
        if out and (runs <= out[-1][0] or behaviours < out[-1][1]):
            msg = (f"growth[{index}]: {[runs, behaviours]} after {list(out[-1])}: runs must "
                   "increase and behaviours never fall")
            raise ValueError(msg)
        out.append((runs, behaviours))
    return out


def downsample(points: Sequence[Sequence[int]], points_max: int = POINTS_MAX
               ) -> list[tuple[int, int]]:
    """Gives at most `points_max` of the points, the same step line at a glance: the first, the
    last, and each point where the count changes (every one of them when they fit; evenly
    spaced ones when they do not)."""
    given = _checked(points)
    if len(given) <= 2:
        return given
    kept = [given[0]]
    kept += [point for before, point in itertools.pairwise(given[:-1])
             if point[1] != before[1]]
    kept.append(given[-1])
    if len(kept) > points_max:
        step = (len(kept) - 1) / (max(points_max, 2) - 1)
        kept = [kept[round(i * step)] for i in range(max(points_max, 2))]
    return kept


def growth_caption(points: Sequence[Sequence[int]]) -> str:
    """Gives the growth in words: the final count, and how many runs went by since the last
    new behaviour ("" for no points)."""
    given = _checked(points)
    if not given:
        return ""
    runs, behaviours = given[-1]
    first_seen = next(r for r, b in given if b == behaviours)
    text = f"behaviours seen over runs: {behaviours:,} after {runs:,} runs"
    if len(given) == 1:
        return text
    if first_seen < runs:
        return f"{text}, none new in the last {runs - first_seen:,} runs"
    return f"{text}, still growing in the last batch"


def _ticks(top: int) -> list[int]:
    """Gives round tick values from 0 to at least `top`: steps of 1, 2 or 5 times a power of
    ten, at most five ticks."""
    if top <= 0:
        return [0, 1]
    raw = top / 4
    power = 10 ** math.floor(math.log10(raw)) if raw >= 1 else 1
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    count = -(-top // step)
    return [i * step for i in range(count + 1)]


def _short(n: int) -> str:
    """Gives a tick label that fits under the axis: 1,500 / 25k / 1.5M."""
    for size, unit in ((1_000_000, "M"), (10_000, "k")):
        if n >= size:
            scale = size if unit == "M" else 1000
            return f"{n / scale:.1f}".removesuffix(".0") + unit
    return f"{n:,}"


def growth_svg(points: Sequence[tuple[int, int]] | Sequence[list[int]], *,
               title: str = "coverage growth") -> str:
    """Gives an `<svg>` element (480 x 160) drawing behaviours seen over runs as a step line,
    with tick labels on both axes and a caption; "" for fewer than two points (one batch has no
    growth to show: the report's text tells its count). Raises `ValueError` for points out of
    order or not counts."""
    kept = downsample(points)  # also checks them
    if len(kept) < 2:
        return ""
    x_ticks, y_ticks = _ticks(kept[-1][0]), _ticks(kept[-1][1])
    x_top, y_top = x_ticks[-1], y_ticks[-1]

    def x(runs: int) -> str:
        return f"{_LEFT + (_WIDTH - _RIGHT - _LEFT) * runs / x_top:.1f}"

    def y(behaviours: int) -> str:
        return f"{_BOTTOM - (_BOTTOM - _TOP) * behaviours / y_top:.1f}"

    # a step line: the count holds until the batch that raised it
    vertices = [f"{x(kept[0][0])},{y(kept[0][1])}"]
    for (_, before), (runs, behaviours) in itertools.pairwise(kept):
        vertices += [f"{x(runs)},{y(before)}", f"{x(runs)},{y(behaviours)}"]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="growth" width="{_WIDTH}" '
             f'height="{_HEIGHT}" viewBox="0 0 {_WIDTH} {_HEIGHT}" role="img">',
             f"<title>{html.escape(title)}</title>",
             f'<text x="{_LEFT}" y="14" {_FONT} font-weight="bold">{html.escape(title)}</text>',
             '<g stroke="#ccc" stroke-width="1">']
    parts += [f'<line x1="{_LEFT}" y1="{y(v)}" x2="{_WIDTH - _RIGHT}" y2="{y(v)}"/>'
              for v in y_ticks[1:]]
    parts.append("</g>")
    parts.append(f'<g stroke="#555" stroke-width="1"><line x1="{_LEFT}" y1="{_BOTTOM}" '
                 f'x2="{_WIDTH - _RIGHT}" y2="{_BOTTOM}"/><line x1="{_LEFT}" y1="{_TOP}" '
                 f'x2="{_LEFT}" y2="{_BOTTOM}"/></g>')
    parts.append(f'<g {_FONT} fill="#555" text-anchor="middle">')
    parts += [f'<text x="{x(v)}" y="{_BOTTOM + 12}">{_short(v)}</text>' for v in x_ticks]
    parts.append("</g>")
    parts.append(f'<g {_FONT} fill="#555" text-anchor="end">')
    parts += [f'<text x="{_LEFT - 4}" y="{float(y(v)) + 3:.1f}">{_short(v)}</text>'
              for v in y_ticks]
    parts.append("</g>")
    parts.append(f'<text x="{_WIDTH - _RIGHT}" y="{_BOTTOM + 24}" {_FONT} fill="#555" '
                 'text-anchor="end">runs</text>')
    middle = (_TOP + _BOTTOM) // 2
    parts.append(f'<text x="12" y="{middle}" {_FONT} fill="#555" text-anchor="middle" '
                 f'transform="rotate(-90 12 {middle})">behaviours</text>')
    parts.append(f'<polyline fill="none" stroke="#2c7a2c" stroke-width="1.6" '
                 f'points="{" ".join(vertices)}"/>')
    parts.append(f'<text class="caption" x="{_LEFT}" y="{_HEIGHT - 6}" {_FONT} fill="#333">'
                 f"{html.escape(growth_caption(points))}</text>")
    parts.append("</svg>")
    return "".join(parts)
