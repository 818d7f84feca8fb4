"""Reading `git merge-file --diff3` output: its conflict-marker lines and the blocks they enclose."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum

# git's default `--marker-size`; Sluice always runs `git merge-file` with it.
MARKER_SIZE = 7


class Marker(StrEnum):
    """The four conflict-marker lines, in the order a `--diff3` block has them."""

    OURS = "<"
    BASE = "|"
    SEPARATOR = "="
    THEIRS = ">"


class Diff3Error(ValueError):
    """The merged text is not `git merge-file --diff3` output that splits unambiguously."""


@dataclass(frozen=True)
class Block:
    """One conflict block; lines carry no line ends (a CRLF file's "\\r" stays on its lines)."""

    ours: tuple[str, ...]
    base: tuple[str, ...]
    theirs: tuple[str, ...]


_MARKER_CHARS = frozenset("<|=>")
# The one marker that may follow each (None: outside any block).
_NEXT = {
    None: Marker.OURS,
    Marker.OURS: Marker.BASE,
    Marker.BASE: Marker.SEPARATOR,
    Marker.SEPARATOR: Marker.THEIRS,
}


def marker(line: str) -> Marker | None:
    """The marker `line` (no "\\n") is, read as git writes them; None for any other line.

    git writes a marker at the start of a line: exactly seven `<`, `|`, `=` or `>`, then for `<`, `|`
    and `>` either nothing or a space and a label (the label may be empty or hold tabs), for `=`
    nothing; then "\\r" in a CRLF file. Anything else (a tab or another character right after the
    seven, eight of them, a `=======` with text after it, indentation) is content.
    """
    if line[:1] not in _MARKER_CHARS:  # most lines: decided by their first character
        return None
    text = line.removesuffix("\r")
    head, rest = text[:MARKER_SIZE], text[MARKER_SIZE:]
    if head != head[0] * MARKER_SIZE:
        return None
    kind = Marker(head[0])
    if kind is Marker.SEPARATOR:
        return kind if rest == "" else None
    return kind if rest == "" or rest.startswith(" ") else None


def marker_lines(text: str) -> Iterator[tuple[int, str]]:
    """(1-based line number, line) of every conflict-marker line of `text`, in order."""
    for number, line in enumerate(split_lines(text), 1):
        if marker(line) is not None:
            yield number, line


def has_markers(text: str) -> bool:
    """Whether any line of `text` is a conflict marker (the "never commit conflict markers" test)."""
    return next(marker_lines(text), None) is not None


def split_lines(text: str) -> list[str]:
    """Lines split on "\\n" only, without it; a final "\\n" ends the last line rather than starting one."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def parse(merged: str) -> tuple[str | Block, ...]:
    """The clean lines and conflict blocks of `merged`, in order (see `split_lines` for the lines).

    Every marker line must be where `--diff3` puts one: `<<<<<<<`, `|||||||`, `=======`, `>>>>>>>`,
    in this order, blocks never nested. Raises Diff3Error otherwise: a block without a base part (not
    `--diff3` output), one never closed, or a marker line out of place, which is a line of the files
    themselves that git copied into the merge, so no reading of the merge is certain.
    """
    out: list[str | Block] = []
    state: Marker | None = None
    sides: dict[Marker, list[str]] = {}
    for number, line in enumerate(split_lines(merged), 1):
        kind = marker(line)
        if kind is None:
            if state is None:
                out.append(line)
            else:
                sides[state].append(line)
            continue
        if kind is not _NEXT[state]:
            no_base = state is Marker.OURS and kind is Marker.SEPARATOR
            missing = " (no ||||||| base part: not --diff3 output)" if no_base else ""
            raise Diff3Error(f"line {number}: unexpected {kind * MARKER_SIZE} marker{missing}")
        if kind is Marker.THEIRS:
            out.append(Block(*(tuple(sides[k]) for k in (Marker.OURS, Marker.BASE, Marker.SEPARATOR))))
            state, sides = None, {}
        else:
            state = kind
            sides[kind] = []
    if state is not None:
        raise Diff3Error("the last conflict block is never closed")
    return tuple(out)
