"""The recall / bundled-share trade-off curve of a risk ranking, as a small self-contained SVG."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

WIDTH, HEIGHT = 640, 480
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 50, 60
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b")


@dataclass(frozen=True)
class Curve:
    label: str
    points: Sequence[tuple[float, float]]  # (share chained, recall), as fitting.recall_curve gives them
    dashed: bool = False


def _x(bundled: float) -> float:
    return LEFT + bundled * (WIDTH - LEFT - RIGHT)


def _y(recall: float) -> float:
    return HEIGHT - BOTTOM - recall * (HEIGHT - TOP - BOTTOM)


def _path(points: Sequence[tuple[float, float]]) -> str:
    """The curve against the share *bundled* (1 − chained), thinned to at most ~400 vertices."""
    step = max(1, len(points) // 400)
    kept = [*points[::step], points[-1]]
    return " ".join(f"{'M' if i == 0 else 'L'}{_x(1 - s):.1f},{_y(r):.1f}" for i, (s, r) in enumerate(kept))


def _axes() -> list[str]:
    parts = [
        f'<rect x="{LEFT}" y="{TOP}" width="{WIDTH - LEFT - RIGHT}" height="{HEIGHT - TOP - BOTTOM}" '
        'fill="none" stroke="#333"/>'
    ]
    for tick in range(0, 11, 2):
        v = tick / 10
        parts += [
            f'<line x1="{_x(v):.1f}" y1="{_y(0):.1f}" x2="{_x(v):.1f}" y2="{_y(1):.1f}" stroke="#ddd"/>',
            f'<line x1="{_x(0):.1f}" y1="{_y(v):.1f}" x2="{_x(1):.1f}" y2="{_y(v):.1f}" stroke="#ddd"/>',
            f'<text x="{_x(v):.1f}" y="{HEIGHT - BOTTOM + 18}" text-anchor="middle">{tick * 10} %</text>',
            f'<text x="{LEFT - 8}" y="{_y(v) + 4:.1f}" text-anchor="end">{tick * 10} %</text>',
        ]
    parts += [
        f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="{HEIGHT - 15}" text-anchor="middle">'
        "share of commits bundled</text>",
        f'<text transform="translate(18,{(TOP + HEIGHT - BOTTOM) / 2}) rotate(-90)" text-anchor="middle">'
        "recall: culprits in risky chains</text>",
    ]
    return parts


def tradeoff_svg(
    curves: Sequence[Curve],
    *,
    title: str,
    subtitle: str = "",
    mark_bundled: float,
    mark: Sequence[tuple[str, float]],
) -> str:
    """The curves, a chance diagonal, and a marker at `mark_bundled` for each (label, recall) in `mark`."""
    parts = _axes()
    parts.append(
        f'<line x1="{_x(0)}" y1="{_y(1)}" x2="{_x(1)}" y2="{_y(0)}" stroke="#999" stroke-dasharray="2,4"/>'
    )
    for index, curve in enumerate(curves):
        colour = COLOURS[index % len(COLOURS)]
        dash = ' stroke-dasharray="6,4"' if curve.dashed else ""
        parts.append(
            f'<path d="{_path(curve.points)}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>'
        )
        y = HEIGHT - BOTTOM - 12 - 18 * (len(curves) - 1 - index)  # bottom left: the curves stay above it
        parts += [
            f'<line x1="{LEFT + 12}" y1="{y - 4}" x2="{LEFT + 40}" y2="{y - 4}" '
            f'stroke="{colour}" stroke-width="2"{dash}/>',
            f'<text x="{LEFT + 46}" y="{y}">{escape(curve.label)}</text>',
        ]
    x = _x(mark_bundled)
    parts.append(
        f'<line x1="{x:.1f}" y1="{_y(0):.1f}" x2="{x:.1f}" y2="{_y(1):.1f}" '
        'stroke="#555" stroke-dasharray="4,3"/>'
    )
    for label, recall in mark:
        parts += [
            f'<circle cx="{x:.1f}" cy="{_y(recall):.1f}" r="5" fill="#000"/>',
            f'<text x="{x - 8:.1f}" y="{_y(recall) + 18:.1f}" text-anchor="end">{escape(label)}: '
            f"{100 * recall:.0f} % at {100 * mark_bundled:.0f} % bundled</text>",
        ]
    body = "\n  ".join(parts)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">\n'
        f'  <rect width="{WIDTH}" height="{HEIGHT}" fill="#fff"/>\n'
        f'  <text x="{WIDTH / 2}" y="22" text-anchor="middle" font-size="14">{escape(title)}</text>\n'
        f'  <text x="{WIDTH / 2}" y="40" text-anchor="middle" font-size="10">{escape(subtitle)}</text>\n'
        f"  {body}\n</svg>\n"
    )
