"""Line ownership through -U0 hunks (pure)."""

from __future__ import annotations

import pytest

from bot.core.lines import Region, advance, owners_touched
from bot.core.models import Hunk


def h(old_start: int, old_count: int, new_start: int, new_count: int) -> Hunk:
    return Hunk(old_start=old_start, old_count=old_count, new_start=new_start, new_count=new_count)


A_ADDS_3_AFTER_LINE_2 = [Region(2, 5, "A")]


@pytest.mark.parametrize(
    ("hunks", "expected"),
    [
        pytest.param([h(0, 0, 1, 2)], [Region(0, 2, "B"), Region(4, 7, "A")], id="insert-above-shifts"),
        pytest.param([h(9, 1, 9, 1)], [Region(2, 5, "A"), Region(8, 9, "B")], id="edit-below-keeps"),
        pytest.param(
            [h(4, 1, 4, 1)], [Region(2, 3, "A"), Region(3, 4, "B"), Region(4, 5, "A")], id="overwrite-middle"
        ),
        pytest.param(
            [h(3, 0, 4, 1)],
            [Region(2, 3, "A"), Region(3, 4, "B"), Region(4, 6, "A")],
            id="insert-inside-splits",
        ),
        pytest.param([h(1, 1, 0, 0)], [Region(0, 0, "B"), Region(1, 4, "A")], id="delete-above-leaves-gap"),
        pytest.param([h(3, 3, 2, 0)], [Region(2, 2, "B")], id="delete-all-of-it"),
    ],
)
def test_advance(hunks: list[Hunk], expected: list[Region]) -> None:
    assert advance(A_ADDS_3_AFTER_LINE_2, hunks, "B") == expected


@pytest.mark.parametrize(
    ("hunk", "touched"),
    [
        pytest.param(h(4, 1, 4, 1), True, id="same-line"),
        pytest.param(h(6, 1, 6, 1), True, id="adjacent-below"),
        pytest.param(h(2, 1, 2, 1), True, id="adjacent-above"),
        pytest.param(h(7, 1, 7, 1), False, id="one-line-gap"),
        pytest.param(h(5, 0, 6, 1), True, id="insert-at-end"),
        pytest.param(h(1, 0, 2, 1), False, id="insert-two-above"),
    ],
)
def test_owners_touched(hunk: Hunk, touched: bool) -> None:
    assert bool(owners_touched(A_ADDS_3_AFTER_LINE_2, [hunk])) is touched


def test_unowned_commit_moves_lines_but_owns_nothing() -> None:
    assert advance(A_ADDS_3_AFTER_LINE_2, [h(0, 0, 1, 10)], None) == [Region(12, 15, "A")]
