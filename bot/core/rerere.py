"""Remembered resolutions: learn how a person resolved each diff3 conflict block; replay it later."""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bot.core import diff3

# Bumped if the encoding below ever changes: every stored key would change with it.
KEY_VERSION = "sluice-rerere/1"
# A clean line the person edited must be at least this many unchanged lines away from a conflict block;
# closer, nobody can tell whether the edit belongs to the block's resolution.
ANCHOR_LINES = 3


@dataclass(frozen=True)
class ConflictBlock:
    base: tuple[str, ...]
    ours: tuple[str, ...]
    theirs: tuple[str, ...]

    @property
    def key(self) -> str:
        return conflict_key(self.base, self.ours, self.theirs)


@dataclass(frozen=True)
class _Merged:
    """A diff3 file: clean segments around the blocks (`len(clean) == len(blocks) + 1`)."""

    clean: tuple[tuple[str, ...], ...]
    blocks: tuple[ConflictBlock, ...]
    final_newline: bool


class _Hole:
    """Stands for a conflict block when the clean lines are diffed against the resolved file."""

    def __eq__(self, other: object) -> bool:
        return False

    def __hash__(self) -> int:
        return id(self)


def conflict_key(base: Sequence[str], ours: Sequence[str], theirs: Sequence[str]) -> str:
    """The rerere key: sha256 (hex) of the canonical JSON of the three sides, trailing whitespace stripped.

    Exactly: `sha256(json.dumps(["sluice-rerere/1", base, ours, theirs], ensure_ascii=False,
    separators=(",", ":")).encode("utf-8")).hexdigest()`, where each side is a list of its lines (no
    newlines) with `str.rstrip()` applied to every line. Line numbers and the file path are not part of it.
    """
    sides = [[line.rstrip() for line in side] for side in (base, ours, theirs)]
    canonical = json.dumps([KEY_VERSION, *sides], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def conflict_blocks(merged_diff3: str) -> tuple[ConflictBlock, ...]:
    """The conflict blocks of a diff3 file, in file order; raises `diff3.Diff3Error` as `diff3.parse` does."""
    return _parse(merged_diff3).blocks


def learn(merged_diff3: str, resolved: str) -> dict[str, tuple[str, ...]]:
    """{key: the lines a person put in place of that block}; {} when any block's place is ambiguous.

    The clean segments between blocks are the anchors: they must appear in order in `resolved`, and only
    one placement of them may fit. Edits to clean lines are allowed at least ANCHOR_LINES lines away from
    every block. A block that occurs twice with two different resolutions is left out. A merge that does
    not split into blocks (`diff3.parse` refuses it) teaches nothing, nor does a resolution with markers.
    """
    try:
        merged = _parse(merged_diff3)
    except diff3.Diff3Error:
        return {}  # the classifier refuses the same merge, so no pick would ever replay what it taught
    resolved_lines = diff3.split_lines(resolved)
    if not merged.blocks or diff3.has_markers(resolved):
        return {}
    aligned = _block_spans(merged, resolved_lines)
    if aligned is None:
        return {}
    spans, matched = aligned
    learned: dict[str, tuple[str, ...]] = {}
    conflicting: set[str] = set()
    for block, (start, end) in zip(merged.blocks, spans, strict=True):
        lines = tuple(matched[start:end])
        if learned.setdefault(block.key, lines) != lines:
            conflicting.add(block.key)
    return {key: lines for key, lines in learned.items() if key not in conflicting}


def apply(merged_diff3: str, known: Mapping[str, tuple[str, ...]]) -> tuple[str | None, tuple[str, ...]]:
    """Replace every block whose key is known: (the text if every block was replaced else None, keys used).

    The keys used are those of the blocks found in `known`, once each, in file order. Raises
    `diff3.Diff3Error` for a merge that does not split, as `conflicts.split_diff3` does.
    """
    merged = _parse(merged_diff3)
    lines: list[str] = list(merged.clean[0])
    used: dict[str, None] = {}
    for block, after in zip(merged.blocks, merged.clean[1:], strict=True):
        resolution = known.get(block.key)
        if resolution is None:
            return None, tuple(dict.fromkeys(b.key for b in merged.blocks if b.key in known))
        used[block.key] = None
        lines += [*resolution, *after]
    return _join(lines, final_newline=merged.final_newline), tuple(used)


# --- parsing ----------------------------------------------------------------------------------------------


def _join(lines: Sequence[str], *, final_newline: bool) -> str:
    return "\n".join(lines) + ("\n" if final_newline and lines else "")


def _parse(text: str) -> _Merged:
    """The clean segments and blocks of `diff3.parse(text)`; raises Diff3Error as it does."""
    clean: list[tuple[str, ...]] = []
    blocks: list[ConflictBlock] = []
    segment: list[str] = []
    for part in diff3.parse(text):
        if isinstance(part, str):
            segment.append(part)
            continue
        clean.append(tuple(segment))
        segment = []
        blocks.append(ConflictBlock(base=part.base, ours=part.ours, theirs=part.theirs))
    clean.append(tuple(segment))
    return _Merged(tuple(clean), tuple(blocks), final_newline=text.endswith("\n"))


# --- aligning the resolved file with the clean segments ---------------------------------------------------


def _block_spans(merged: _Merged, resolved: list[str]) -> tuple[list[tuple[int, int]], list[str]] | None:
    """Where each block's resolution lies, and in which lines: `resolved`, or it with far edits undone.

    The spans index the lines returned with them, never `resolved` itself once an edit was undone: an
    undone edit that added or removed lines moves every block after it. None when that is not certain.
    """
    if any(not segment for segment in merged.clean[1:-1]):
        return None  # two adjacent blocks: no line says where one resolution ends and the next begins
    matched: list[str] | None = resolved
    placements = _placements(merged.clean, resolved)
    if placements is None:
        # Some clean line was edited: undo the edits far from every block, then the segments must fit.
        matched = _restore_far_edits(merged, resolved)
        placements = None if matched is None else _placements(merged.clean, matched)
    if placements is None or matched is None:
        return None
    leftmost, rightmost = placements
    if leftmost != rightmost:
        return None  # the segments fit in more than one way
    middle = merged.clean[1:-1]
    starts = [len(merged.clean[0])] + [at + len(seg) for at, seg in zip(leftmost, middle, strict=False)]
    return list(zip(starts, leftmost, strict=True)), matched


def _placements(clean: Sequence[Sequence[str]], lines: Sequence[str]) -> tuple[list[int], list[int]] | None:
    """The leftmost and the rightmost start of clean[1:] when `lines` is clean[0] * clean[1] * … clean[-1].

    None when the segments do not fit. Every fit puts each segment between its leftmost and its rightmost
    place, so the fit is unique exactly when the two agree. The last segment always ends the file.
    """
    first, last = clean[0], clean[-1]
    lo, hi = len(first), len(lines) - len(last)
    if hi < lo or not _occurs_at(lines, first, 0) or not _occurs_at(lines, last, hi):
        return None
    leftmost: list[int] = []
    at = lo
    for segment in clean[1:-1]:
        found = next((i for i in range(at, hi - len(segment) + 1) if _occurs_at(lines, segment, i)), None)
        if found is None:
            return None
        leftmost.append(found)
        at = found + len(segment)
    rightmost: list[int] = []
    at = hi
    for segment in reversed(clean[1:-1]):
        # A leftmost fit exists, so this search always finds one.
        at = next(i for i in range(at - len(segment), lo - 1, -1) if _occurs_at(lines, segment, i))
        rightmost.append(at)
    return [*leftmost, hi], [*rightmost[::-1], hi]


def _occurs_at(lines: Sequence[str], segment: Sequence[str], at: int) -> bool:
    if at + len(segment) > len(lines):
        return False
    return all(lines[at + offset] == line for offset, line in enumerate(segment))


def _restore_far_edits(merged: _Merged, resolved: list[str]) -> list[str] | None:
    """`resolved` with each edit of clean lines reverted, or None when an edit is too close to a block."""
    holes: list[object] = [_Hole() for _ in merged.blocks]
    skeleton: list[object] = list(merged.clean[0])
    for hole, segment in zip(holes, merged.clean[1:], strict=True):
        skeleton += [hole, *segment]
    opcodes = difflib.SequenceMatcher(None, skeleton, resolved, autojunk=False).get_opcodes()
    restored: list[str] = []
    for index, (tag, i1, i2, j1, j2) in enumerate(opcodes):
        touches_hole = any(isinstance(item, _Hole) for item in skeleton[i1:i2])
        if tag == "equal" or touches_hole:
            if touches_hole and (i2 - i1 != 1):
                return None  # the edit reaches into the clean lines next to a block
            restored += resolved[j1:j2]
            continue
        if not _far_from_holes(opcodes, index, skeleton):
            return None
        restored += [str(item) for item in skeleton[i1:i2]]
    return restored


def _far_from_holes(
    opcodes: Sequence[tuple[str, int, int, int, int]], index: int, skeleton: list[object]
) -> bool:
    """Whether the edit at opcodes[index] has ANCHOR_LINES unchanged lines between it and any block."""
    for step in (-1, 1):
        neighbour, beyond = index + step, index + 2 * step
        if not 0 <= beyond < len(opcodes) or not 0 <= neighbour < len(opcodes):
            continue
        _, i1, i2, _, _ = opcodes[beyond]
        if any(isinstance(item, _Hole) for item in skeleton[i1:i2]):
            tag, n1, n2, _, _ = opcodes[neighbour]
            if tag != "equal" or n2 - n1 < ANCHOR_LINES:
                return False
    return True
