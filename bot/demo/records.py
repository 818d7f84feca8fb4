"""The history's records: edits, upstream commits, claims that keep the ground truth, reserved functions."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from bot.demo.layout import ROOT_CMAKE
from bot.demo.people import Person
from bot.demo.text import Block, Key, Op, SourceFile


@dataclass
class Edit:
    ops: list[Op]
    subject: str  # without the PR suffix
    body: str = ""
    symbols: list[str] = field(default_factory=list)
    changed_lines: dict[str, list[int]] = field(default_factory=dict)  # "path::block" -> changed line indices


@dataclass
class UpstreamCommit:
    index: int
    pr: int
    subject: str
    body: str
    author: Person
    author_time: int
    time: int
    ops: list[Op]
    parents: dict[str, SourceFile | None]
    changed: dict[str, SourceFile]
    role: str  # base, ingested, hole, pending, emergency
    method: str = ""  # planned recognition method of an ingested commit
    tweak: Key | None = None  # block a subject-pattern pick adapts
    ref: int | None = None  # commit whose sha the body names (reverts, relands)

    @property
    def title(self) -> str:
        return self.subject.rsplit(" (#", 1)[0]


@dataclass
class Claims:
    """Which regions each class of commit may touch, so the ground truth holds by construction."""

    reserved: set[Key] = field(default_factory=set)  # upstream blocks the patch stack edits
    fork_paths: set[str] = field(default_factory=set)  # files where the fork differs from upstream
    diverged: set[Key] = field(default_factory=set)  # blocks the fork lacks or adapted
    hole_paths: set[str] = field(default_factory=set)
    pending_keys: set[Key] = field(default_factory=set)
    pending_paths: set[str] = field(default_factory=set)
    claimed: set[str] = field(default_factory=set)  # files exclusive to one pending commit


@dataclass(frozen=True)
class Scope:
    path_ok: Callable[[str], bool]
    key_ok: Callable[[Key], bool]


ANY_SCOPE = Scope(lambda p: p != ROOT_CMAKE, lambda k: True)


def weighted(rng: random.Random, table: Sequence[tuple[str, int]] | dict[str, int]) -> str:
    items = list(table.items()) if isinstance(table, dict) else list(table)
    total = sum(w for _, w in items)
    r = rng.random() * total
    for name, weight in items:
        r -= weight
        if r < 0:
            return name
    return items[-1][0]


@dataclass
class Reserved:
    """An upstream function the patch stack edits: insertions after fixed lines of its fork-point version."""

    path: str
    base: Block
    qualname: str
    kind: str
    points: list[int]  # base line indices the fork inserts after, in application order
    inserts: list[tuple[str, ...]]
    far: list[int]  # editable base lines at least 3 lines from every insertion point

    def version(self, applied: int) -> Block:
        lines = list(self.base.lines)
        for point, new in sorted(
            zip(self.points[:applied], self.inserts[:applied], strict=True), reverse=True
        ):
            lines[point + 1 : point + 1] = new
        return Block(self.base.name, tuple(lines))
