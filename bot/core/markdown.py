"""Text from outside Sluice (an upstream commit subject, a person's reason) made inert in GitHub Markdown."""

from __future__ import annotations

import re


def plain(text: str) -> str:
    """A commit subject as inert Markdown: no HTML (so no fake marker), no @mention (upstream's authors are
    not pinged from the fork), no #123 autolink (upstream's `(#1234)` would link the fork's own #1234)."""
    text = " ".join(text.split()).replace("\\", "\\\\")  # first: `\[x](url)` would escape the escape
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return re.sub(r"([@#])(?=\w)", r"\1&#8203;", text).replace("[", "\\[").replace("`", "'")


def cell(text: str) -> str:
    """Text that stays inside one Markdown table cell (GitHub splits cells at `|`, in a code span too)."""
    return text.replace("|", "\\|").replace("\n", " ")
