"""Server-rendered SVG line charts of a metric over time (no JavaScript; scales to the page's width)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape

WIDTH, HEIGHT = 600, 220
LEFT, RIGHT, TOP, BOTTOM = 48, 12, 28, 34
TICKS = 4


@dataclass(frozen=True)
class Series:
    title: str  # "Days Behind Upstream"
    unit: str  # "days", "commits"
    points: Sequence[tuple[datetime, float | None]]  # oldest first; None: no value at that run


def line_chart(series: Series, *, chart_id: str) -> str:
    """An SVG chart with its own title and a y axis from 0; an empty series says there is no data yet."""
    known = [(at, value) for at, value in series.points if value is not None]
    head = (
        f'<svg id="{escape(chart_id)}" role="img" viewBox="0 0 {WIDTH} {HEIGHT}" width="100%" '
        f'xmlns="http://www.w3.org/2000/svg" aria-labelledby="{escape(chart_id)}-title">'
        f'<title id="{escape(chart_id)}-title">{escape(series.title)}</title>'
        f'<text x="{LEFT}" y="18" font-size="14" font-weight="bold">{escape(series.title)}</text>'
    )
    if not known:
        return head + f'<text x="{LEFT}" y="{HEIGHT // 2}" font-size="13">no ingestion run yet</text></svg>'
    top = _nice_top(max(value for _, value in known))
    body = [*_y_axis(top), *_x_axis(known), _polyline(known, top), *_last(known, top, series)]
    return head + "".join(body) + "</svg>"


def _nice_top(peak: float) -> float:
    """The y axis' top: the peak rounded up to 1, 2 or 5 times a power of ten (at least 1)."""
    magnitude = 1.0
    while magnitude * 10 < peak:
        magnitude *= 10
    return next(magnitude * step for step in (1, 2, 5, 10) if magnitude * step >= peak)


def _x(index: int, count: int) -> float:
    span = WIDTH - LEFT - RIGHT
    return LEFT + (span * index / (count - 1) if count > 1 else span / 2)


def _y(value: float, top: float) -> float:
    return HEIGHT - BOTTOM - (value / top) * (HEIGHT - TOP - BOTTOM)


def _y_axis(top: float) -> list[str]:
    parts = []
    for tick in range(TICKS + 1):
        value = top * tick / TICKS
        y = _y(value, top)
        parts.append(
            f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" stroke="#ddd"/>'
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end">{_fmt(value)}</text>'
        )
    return parts


def _x_axis(known: Sequence[tuple[datetime, float]]) -> list[str]:
    """The first and the last run's dates under the chart (runs are evenly spaced, one per point)."""
    y = HEIGHT - BOTTOM + 16
    first, last = known[0][0], known[-1][0]
    parts = [f'<text x="{LEFT}" y="{y}" font-size="11">{first:%Y-%m-%d %H:%M}</text>']
    if len(known) > 1:
        parts.append(
            f'<text x="{WIDTH - RIGHT}" y="{y}" font-size="11" text-anchor="end">{last:%Y-%m-%d %H:%M}</text>'
        )
    return parts


def _polyline(known: Sequence[tuple[datetime, float]], top: float) -> str:
    coords = " ".join(f"{_x(i, len(known)):.1f},{_y(v, top):.1f}" for i, (_, v) in enumerate(known))
    return f'<polyline class="series" fill="none" stroke="#1f77b4" stroke-width="2" points="{coords}"/>'


def _last(known: Sequence[tuple[datetime, float]], top: float, series: Series) -> list[str]:
    """The newest value, marked and written out, so the chart reads without hovering."""
    x, y = _x(len(known) - 1, len(known)), _y(known[-1][1], top)
    value = known[-1][1]
    unit = series.unit.removesuffix("s") if value == 1 else series.unit  # "1 day", "1 commit"
    label = f"now: {_fmt(value)} {unit}"
    return [
        f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="#1f77b4"/>',
        f'<text class="latest" x="{WIDTH - RIGHT}" y="18" font-size="12" text-anchor="end">'
        f"{escape(label)}</text>",
    ]


def _fmt(value: float) -> str:
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.2f}".rstrip("0").rstrip(".")
