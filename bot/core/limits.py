"""GitHub's limits on what Sluice writes there, in one place."""

from __future__ import annotations

# The most characters GitHub takes in a pull request's body, a comment or a check run's summary (65,535).
GITHUB_TEXT_MAX_CHARS = 65_536


def fit_for_github(text: str, *, what: str = "a description") -> str:
    """`text` whole when GitHub takes it, else cut with a note saying so; never longer than 65,535."""
    if len(text) < GITHUB_TEXT_MAX_CHARS:
        return text
    note = f"\n\n… (cut: GitHub limits {what} to {GITHUB_TEXT_MAX_CHARS:,} characters)\n"
    return text[: GITHUB_TEXT_MAX_CHARS - 1 - len(note)] + note
