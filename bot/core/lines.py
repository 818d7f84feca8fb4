"""Line ownership across a run of commits: which pending commit last changed each region of a file.

Regions are half-open intervals in boundary coordinates (line N occupies [N-1, N)); a pure deletion leaves
a zero-width region where the lines were. Touching regions count as overlapping, as git's merge treats
adjacent edits as a conflict.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.core.models import Hunk

Interval = tuple[int, int]


@dataclass(frozen=True, order=True)
class Region:
    start: int
    end: int
    owner: str


def old_interval(h: Hunk) -> Interval:
    return (
        (h.old_start, h.old_start) if h.old_count == 0 else (h.old_start - 1, h.old_start - 1 + h.old_count)
    )


def new_interval(h: Hunk) -> Interval:
    return (
        (h.new_start, h.new_start) if h.new_count == 0 else (h.new_start - 1, h.new_start - 1 + h.new_count)
    )


def touches(a: Interval, b: Interval) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def _subtract(piece: Interval, cut: Interval) -> list[Interval]:
    a, b = piece
    lo, hi = cut
    if lo == hi:  # an insertion splits a region it falls strictly inside
        return [(a, lo), (lo, b)] if a < lo < b else [piece]
    if a == b:  # a zero-width region survives unless strictly inside the replaced lines
        return [] if lo < a < hi else [piece]
    if hi <= a or lo >= b:
        return [piece]
    return [p for p in ((a, lo), (hi, b)) if p[0] < p[1]]


def _shift(position: int, hunks: Sequence[tuple[Interval, Interval]]) -> int:
    delta = 0
    for (lo, hi), (nlo, nhi) in hunks:
        if hi <= position:
            delta += (nhi - nlo) - (hi - lo)
    return position + delta


def advance(regions: Sequence[Region], hunks: Sequence[Hunk], owner: str | None) -> list[Region]:
    """Regions after a commit applied `hunks`; the commit owns what it wrote when `owner` is given."""
    spans = sorted((old_interval(h), new_interval(h)) for h in hunks)
    result: list[Region] = []
    for region in regions:
        pieces = [(region.start, region.end)]
        for old, _ in spans:
            pieces = [q for p in pieces for q in _subtract(p, old)]
        for a, b in pieces:
            shifted = _shift(a, spans)
            result.append(Region(shifted, shifted + (b - a), region.owner))
    if owner is not None:
        result.extend(Region(lo, hi, owner) for _, (lo, hi) in spans)
    return sorted(set(result))


def owners_touched(regions: Sequence[Region], hunks: Sequence[Hunk]) -> list[Region]:
    """The regions a commit's hunks change or border, in file order."""
    olds = [old_interval(h) for h in hunks]
    return [r for r in regions if any(touches((r.start, r.end), o) for o in olds)]
