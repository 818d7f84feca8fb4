"""The conflict case suite as real repositories: per case, an upstream commit to pick onto fork trunk."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bot.core.config import SluiceConfig, Strategy
from bot.core.conflicts import ConflictClass
from bot.core.models import PickStatus
from bot.flows.pick import Picker
from bot.git.repo import GitRepo
from tests.support.conflict_cases import ConflictCase

ABSENT_KINDS = ("modify-delete", "rename-delete")
STAMP = 1_767_225_600  # 2026-01-01: fixed dates, so the same suite gives the same SHAs


@dataclass(frozen=True)
class CaseRepo:
    """One case as a repository: its base, fork trunk with the ours side, and the upstream commit to pick."""

    case: ConflictCase
    path: Path
    fork_ref: str
    upstream_ref: str
    upstream_commit: str


def _present(case: ConflictCase, text: str) -> bool:
    return not (case.kind in ABSENT_KINDS and text == "")


class _Stream:
    """A `git fast-import` stream under construction."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.tick = 0

    def data(self, payload: bytes) -> None:
        self.parts += [f"data {len(payload)}\n".encode(), payload, b"\n"]

    def commit(self, ref: str, mark: int, message: str, parent: int | None) -> None:
        self.tick += 1
        ident = f"Sluice Cases <cases@sluice> {STAMP + self.tick} +0000"
        self.parts.append(f"commit {ref}\nmark :{mark}\ncommitter {ident}\n".encode())
        self.data(message.encode())
        if parent is not None:
            self.parts.append(f"from :{parent}\n".encode())

    def put(self, path: str, text: str) -> None:
        self.parts.append(f"M 100644 inline {path}\n".encode())
        self.data(text.encode("utf-8", "surrogateescape"))

    def delete(self, path: str) -> None:
        self.parts.append(f"D {path}\n".encode())

    def set(self, path: str, text: str, *, present: bool) -> None:
        if present:
            self.put(path, text)
        else:
            self.delete(path)


def build_case_repo(root: Path, case: ConflictCase) -> CaseRepo:
    """A bare repository (own directory, so fork-wide searches see only this case) with three commits."""
    path = root / "case.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(path)], check=True)
    stream = _Stream()
    stream.commit("refs/heads/upstream/main", 1, "Initial import (#1)", None)
    if _present(case, case.base):
        stream.put(case.path, case.base)
    for shared_path, text in case.shared.items():
        stream.put(shared_path, text)
    stream.commit("refs/heads/main", 2, "[FORK] The fork's side", 1)
    stream.set(case.path, case.ours, present=_present(case, case.ours))
    for use_path, text in case.api_uses.items():
        stream.put(use_path, text)
    stream.commit("refs/heads/upstream/main", 3, f"[CASE] {case.name} (#3)", 1)
    stream.set(case.path, case.theirs, present=_present(case, case.theirs))
    marks = root / "marks"
    subprocess.run(
        ["git", "fast-import", "--quiet", f"--export-marks={marks}"],
        cwd=path,
        input=b"".join(stream.parts),
        check=True,
    )
    by_mark = dict(line.split() for line in marks.read_text().splitlines())
    return CaseRepo(
        case=case, path=path, fork_ref="main", upstream_ref="upstream/main", upstream_commit=by_mark[":3"]
    )


def build_case_repos(root: Path, cases: Sequence[ConflictCase]) -> list[CaseRepo]:
    built = []
    for index, case in enumerate(cases):
        directory = root / f"{index:04d}"
        directory.mkdir(parents=True)
        built.append(build_case_repo(directory, case))
    return built


@dataclass(frozen=True)
class CaseOutcome:
    """What `sluice pick` did with one case, beside what it should have done."""

    case: ConflictCase
    status: PickStatus
    predicted: str | None  # the file's class, None when the pick was clean
    text: str | None  # the resulting file (clean or resolved), None when a human is needed or it is absent
    evidence: tuple[str, ...]
    seconds: float

    @property
    def wrong_resolution(self) -> bool:
        """Resolved automatically but not to the right file, or resolved when it must not be."""
        if self.status is not PickStatus.AUTO_RESOLVED:
            return False
        return self.case.expected is not ConflictClass.MECHANICAL or self.text != self.case.expected_text


def pick_case(built: CaseRepo, config: SluiceConfig | None = None) -> CaseOutcome:
    """Pick the case's upstream commit onto its fork trunk (dry run) and read back the file."""
    repo = GitRepo(built.path)
    fork = repo.resolve(built.fork_ref)
    (info,) = repo.commits(built.upstream_commit, "-1")
    started = time.perf_counter()
    step = Picker(repo, config or SluiceConfig()).step(
        fork, repo.tree_of(fork), info, strategy=Strategy.CHERRY_PICK
    )
    seconds = time.perf_counter() - started
    text = repo.read_file_in_tree(step.tree, built.case.path) if step.tree else None
    files = step.report.files
    return CaseOutcome(
        case=built.case,
        status=step.report.status,
        predicted=files[0].cls if files else None,
        text=text,
        evidence=tuple(h.evidence for f in files for h in f.hunks),
        seconds=seconds,
    )
