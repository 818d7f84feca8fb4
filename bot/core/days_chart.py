"""Days Behind Upstream over a replayed period: a terminal chart and a small self-contained SVG (pure)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from html import escape

from bot.core.simulation import Sample

BARS = " ▁▂▃▄▅▆▇█"
WIDTH, HEIGHT = 720, 320
LEFT, RIGHT, TOP, BOTTOM = 60, 20, 50, 50


def _day(ts: int) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d")


def _buckets(samples: Sequence[Sample], width: int) -> list[float]:
    """The worst Days Behind in each of `width` equal stretches of the period."""
    step = max(1, -(-len(samples) // width))
    return [max(s.days_behind for s in samples[i : i + step]) for i in range(0, len(samples), step)]


def terminal_chart(samples: Sequence[Sample], *, width: int = 72, rows: int = 6) -> list[str]:
    """Rows of block characters, highest first, each column the worst value of its stretch of time."""
    if not samples:
        return ["(no samples)"]
    values = _buckets(samples, width)
    top = max(max(values), 1e-9)
    lines = []
    for row in range(rows, 0, -1):
        cells = []
        for value in values:
            level = value / top * rows - (row - 1)
            cells.append(BARS[max(0, min(len(BARS) - 1, round(level * (len(BARS) - 1))))])
        label = f"{top:6.1f} d │" if row == rows else "         │"
        lines.append(label + "".join(cells).rstrip())
    lines.append("     0 d └" + "─" * len(values))
    pad = max(1, len(values) - 20)
    lines.append(f"          {_day(samples[0].at)}{' ' * pad}{_day(samples[-1].at)}")
    return lines


def days_svg(samples: Sequence[Sample], *, title: str, subtitle: str = "") -> str:
    """Days Behind Upstream against time, with the median as a dashed line."""
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
        f'<text x="{LEFT}" y="20" font-size="15">{escape(title)}</text>',
        f'<text x="{LEFT}" y="38" fill="#555">{escape(subtitle)}</text>',
        f'<rect x="{LEFT}" y="{TOP}" width="{WIDTH - LEFT - RIGHT}" height="{HEIGHT - TOP - BOTTOM}" '
        'fill="none" stroke="#333"/>',
    ]
    if samples:
        parts += _series(samples)
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _series(samples: Sequence[Sample]) -> list[str]:
    first, last = samples[0].at, max(samples[-1].at, samples[0].at + 1)
    values = [s.days_behind for s in samples]
    top = max(max(values), 1.0)
    ordered = sorted(values)
    median = ordered[len(ordered) // 2]

    def x(ts: int) -> float:
        return LEFT + (ts - first) / (last - first) * (WIDTH - LEFT - RIGHT)

    def y(days: float) -> float:
        return HEIGHT - BOTTOM - days / top * (HEIGHT - TOP - BOTTOM)

    step = max(1, len(samples) // 1500)
    kept = [*samples[::step], samples[-1]]
    path = " ".join(
        f"{'M' if i == 0 else 'L'}{x(s.at):.1f},{y(s.days_behind):.1f}" for i, s in enumerate(kept)
    )
    return [
        f'<path d="{path}" fill="none" stroke="#1f77b4" stroke-width="1.2"/>',
        f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(median):.1f}" y2="{y(median):.1f}" '
        'stroke="#d62728" stroke-dasharray="5,4"/>',
        f'<text x="{WIDTH - RIGHT - 4}" y="{y(median) - 4:.1f}" text-anchor="end" fill="#d62728">'
        f"median {median:.2f} d</text>",
        f'<text x="{LEFT - 6}" y="{TOP + 4}" text-anchor="end">{top:.1f} d</text>',
        f'<text x="{LEFT - 6}" y="{HEIGHT - BOTTOM}" text-anchor="end">0</text>',
        f'<text x="{LEFT}" y="{HEIGHT - BOTTOM + 18}">{_day(first)}</text>',
        f'<text x="{WIDTH - RIGHT}" y="{HEIGHT - BOTTOM + 18}" text-anchor="end">{_day(last)}</text>',
        f'<text x="{LEFT - 45}" y="{TOP - 6}">days behind upstream</text>',
    ]
