"""GitHub's limits on what Sluice writes there, in one place."""

from __future__ import annotations

from collections.abc import Callable, Sequence

# The most characters GitHub takes in a pull request's body, a comment or a check run's summary (65,535).
GITHUB_TEXT_MAX_CHARS = 65_536


def fit_for_github(text: str, *, what: str = "a description", room: int = 0) -> str:
    """`text` whole when GitHub takes it, else cut with a note saying so; never longer than 65,535 characters,
    less `room` left for what the caller appends."""
    if len(text) + room < GITHUB_TEXT_MAX_CHARS:
        return text
    note = f"\n\n… (cut: GitHub limits {what} to {GITHUB_TEXT_MAX_CHARS:,} characters)\n"
    return text[: GITHUB_TEXT_MAX_CHARS - 1 - room - len(note)] + note


def rows_that_fit(rows: Sequence[str], *, room: int, more: Callable[[int], str]) -> list[str]:
    """`rows` (lines joined by newlines) whole when they take at most `room` characters, else the first ones
    that fit with `more(n)` after them for the n left out: a long table shrinks by whole rows, so what
    follows it (what to do, how to revert) is never the part GitHub's limit cuts."""
    if sum(len(row) + 1 for row in rows) <= room:
        return list(rows)
    kept: list[str] = []
    used = len(more(len(rows))) + 1
    for row in rows:
        if used + len(row) + 1 > room:
            break
        kept.append(row)
        used += len(row) + 1
    return [*kept, more(len(rows) - len(kept))]
