"""Parse `git log --raw -p -U0` output into commits with their file changes and hunks."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from bot.core.models import FileChange, Hunk

COMMIT_MARK = "\x1esluice-commit "
DIFF_HEADER = "diff --git "
HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
RAW_LINE = re.compile(r"^:(\d+) (\d+) ([0-9a-f]+) ([0-9a-f]+) ([A-Z])(\d*)$")
NULL_SHA = "0" * 40


@dataclass
class _FileBuilder:
    path: str
    old_path: str | None
    status: str
    old_blob: str | None
    new_blob: str | None
    binary: bool = False
    hunks: list[Hunk] = field(default_factory=list)
    sections: int = 0  # `diff --git` sections read into it: a type change (file <-> symlink) has two

    def build(self) -> FileChange:
        return FileChange(
            path=self.path,
            old_path=self.old_path,
            status=self.status,
            old_blob=self.old_blob,
            new_blob=self.new_blob,
            binary=self.binary,
            hunks=_replacement(self.hunks) if self.sections > 1 else tuple(self.hunks),
        )


def _replacement(hunks: list[Hunk]) -> tuple[Hunk, ...]:
    """A type change's deletion and addition as the one hunk they are: every old line replaced by every new
    one (each section has at most one hunk, that of the whole file)."""
    if len(hunks) < 2:
        return tuple(hunks)
    gone, came = hunks[0], hunks[-1]
    return (
        Hunk(
            old_start=gone.old_start,
            old_count=gone.old_count,
            new_start=came.new_start,
            new_count=came.new_count,
            removed=gone.removed,
            added=came.added,
        ),
    )


def _blob(sha: str) -> str | None:
    return None if sha == NULL_SHA or set(sha) == {"0"} else sha


def _unquote(path: str) -> str:
    """Undo git's C-style quoting of unusual paths (core.quotePath)."""
    if not (path.startswith('"') and path.endswith('"')):
        return path
    raw = path[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
    return raw.encode("latin-1").decode("utf-8", "replace")


def _section_path(header: str) -> str | None:
    """The path of a `diff --git a/P b/P` header. Renames are off, so both names are one path and the
    header splits at its middle, even where the path holds spaces or ` b/`; None for any other shape."""
    names = header[len(DIFF_HEADER) :]
    half = (len(names) - 1) // 2
    if names[half : half + 1] != " ":
        return None
    old, new = _unquote(names[:half]), _unquote(names[half + 1 :])
    if old.startswith("a/") and new.startswith("b/") and old[2:] == new[2:]:
        return new[2:]
    return None


def _parse_raw(line: str) -> _FileBuilder | None:
    meta, _, paths = line.partition("\t")
    m = RAW_LINE.match(meta)
    if not m:
        return None
    names = [_unquote(p) for p in paths.split("\t")]
    status = m.group(5)
    old_path = names[0] if status in "RC" and len(names) > 1 else None
    return _FileBuilder(
        path=names[-1],
        old_path=old_path,
        status=status,
        old_blob=_blob(m.group(3)),
        new_blob=_blob(m.group(4)),
    )


def _parse_hunks(lines: list[str], start: int, target: _FileBuilder) -> int:
    """Read the hunks of one file's patch beginning at `start`; return the index after them."""
    i = start
    while i < len(lines) and not lines[i].startswith(DIFF_HEADER):
        m = HUNK_HEADER.match(lines[i])
        if m is None:
            if lines[i].startswith("Binary files "):
                target.binary = True
            i += 1
            continue
        old_count = int(m.group(2)) if m.group(2) is not None else 1
        new_count = int(m.group(4)) if m.group(4) is not None else 1
        removed: list[str] = []
        added: list[str] = []
        i += 1
        while i < len(lines) and lines[i][:1] in ("-", "+", "\\", " "):
            if lines[i].startswith("-"):
                removed.append(lines[i][1:])
            elif lines[i].startswith("+"):
                added.append(lines[i][1:])
            i += 1
        target.hunks.append(
            Hunk(
                old_start=int(m.group(1)),
                old_count=old_count,
                new_start=int(m.group(3)),
                new_count=new_count,
                removed=tuple(removed),
                added=tuple(added),
            )
        )
    return i


def parse_patch_section(text: str) -> tuple[FileChange, ...]:
    """Parse the `--raw` lines and `-p` patches of one commit."""
    lines = text.lstrip("\n").split("\n")
    files: list[_FileBuilder] = []
    i = 0
    while i < len(lines) and lines[i].startswith(":"):
        builder = _parse_raw(lines[i])
        if builder is not None:
            files.append(builder)
        i += 1
    # Each section goes to the file its header names, not the next one in order: a type change has two
    # sections and a submodule may have none, so counting would hand later files their neighbours' hunks.
    by_path = {f.path: f for f in files}
    while i < len(lines):
        if lines[i].startswith(DIFF_HEADER):
            target = by_path.get(_section_path(lines[i]) or "")
            if target is None:  # a section of no listed file: read past it, keep nothing
                target = _FileBuilder(path="", old_path=None, status="", old_blob=None, new_blob=None)
            target.sections += 1
            i = _parse_hunks(lines, i + 1, target)
        else:
            i += 1
    return tuple(f.build() for f in files)


def split_log(output: str) -> Iterator[tuple[str, str]]:
    """Split log output made with a `COMMIT_MARK%H` header into (sha, body after the header line)."""
    for chunk in output.split(COMMIT_MARK)[1:]:
        sha, _, rest = chunk.partition("\n")
        yield sha.strip(), rest
