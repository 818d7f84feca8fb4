"""Spotting `--fork` and `--upstream` given the wrong way round, before anything is planned or recorded; and
a fork that merges its upstream configured to pick it."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from bot.core.config import SluiceConfig, Strategy
from bot.core.errors import GitError, SluiceError
from bot.ports import HistoryReader

# A line naming the upstream commit a pick carries: Sluice's trailer, or `git cherry-pick -x`'s line.
NAMED_PICK = re.compile(
    r"^(?:Upstream-Commit:\s*([0-9a-f]{40})|\(cherry picked from commit ([0-9a-f]{7,40})\))\s*$", re.MULTILINE
)
SAMPLE = 200  # newest commits read on each side: enough to see a habit, cheap on any history
CHECKS = 10  # ancestry checks at most per side (each walks history)
RECORD, FIELD = "\x1e", "\x1f"


@dataclass(frozen=True)
class SideCommit:
    sha: str
    parents: tuple[str, ...]
    message: str


@dataclass(frozen=True)
class Evidence:
    """How many of one side's own commits bring the other side's commits in (merges, picks)."""

    ingestions: int


def looks_swapped(*, fork: Evidence, upstream: Evidence) -> bool:
    """Pure: a fork trunk ingests its upstream; an upstream stream does not ingest its forks.

    The "upstream" given must show ingestions of the "fork" given, and clearly more of them than the
    fork shows of the upstream (a fork that has not ingested anything yet shows none, and an upstream
    whose release branch carries `-x` picks of its own main shows some of them).
    """
    return upstream.ingestions >= 2 and 4 * fork.ingestions < upstream.ingestions


def ingestion_like(commit: SideCommit, config: SluiceConfig) -> bool:
    """Pure: a merge, a pick naming its upstream commit, or a subject in the fork's pick patterns."""
    subject = commit.message.split("\n", 1)[0]
    return (
        len(commit.parents) > 1
        or NAMED_PICK.search(commit.message) is not None
        or config.recognition.match_subject(subject) is not None
    )


def _side(repo: HistoryReader, head: str, other: str, *, first_parent: bool) -> list[SideCommit]:
    flags = ["--first-parent"] if first_parent else []
    out = repo.run(
        "log", *flags, f"-n{SAMPLE}", f"--format={RECORD}%H{FIELD}%P{FIELD}%B", head, "--not", other, "--"
    )
    commits = []
    for record in out.split(RECORD)[1:]:
        sha, parents, message = record.split(FIELD, 2)
        commits.append(SideCommit(sha=sha, parents=tuple(parents.split()), message=message))
    return commits


def is_ancestor(repo: HistoryReader, ancestor: str, descendant: str) -> bool:
    """Whether `descendant`'s history holds `ancestor` (picks and the swap check ask it)."""
    try:
        repo.run("merge-base", "--is-ancestor", ancestor, descendant)
    except GitError:
        return False  # not an ancestor (exit 1), or a SHA this repository lacks: proves nothing
    return True


def _brings_in(repo: HistoryReader, commit: SideCommit, other_head: str) -> bool:
    """Whether `commit` (on the "upstream" side) brings in commits of the other side's history."""
    if len(commit.parents) > 1:
        # A merge whose side parent shares history with the other side that its first parent lacks.
        bases = repo.run("merge-base", "--all", commit.parents[1], other_head, ok=(0, 1)).split()
        return any(not is_ancestor(repo, base, commit.parents[0]) for base in bases)
    named = NAMED_PICK.search(commit.message)
    if named:
        return is_ancestor(repo, named.group(1) or named.group(2), other_head)
    return True  # a subject in the fork's own pick patterns: upstreams do not write those


def merged_sideways(repo: HistoryReader, fork_head: str, upstream_head: str) -> bool:
    """Whether the fork head is in the upstream's history only through a merge's second parent.

    A fork that has no commits of its own yet sits on the upstream stream (the fork point); an upstream
    head that reached the "fork" only sideways is a fork trunk that merged it.
    """
    if fork_head == upstream_head or not is_ancestor(repo, fork_head, upstream_head):
        return False
    out = repo.run("log", "--first-parent", "--format=%P", upstream_head, "--not", fork_head, "--")
    oldest_parents = out.strip().splitlines()[-1].split()
    return not oldest_parents or oldest_parents[0] != fork_head


def needed_evidence(fork: Evidence) -> int:
    """Pure: how many confirmed ingestions on the "upstream" side make `looks_swapped` true."""
    return max(2, 4 * fork.ingestions + 1)


def check_not_swapped(
    repo: HistoryReader, *, fork: str, upstream: str, config: SluiceConfig, options: tuple[str, str]
) -> None:
    """Refuse refs that look swapped: the "upstream" ingests the "fork", and the fork hardly does."""
    fork_head, upstream_head = repo.resolve(fork), repo.resolve(upstream)
    upstream_side = _side(repo, upstream_head, fork_head, first_parent=True)
    looking = [c for c in upstream_side if ingestion_like(c, config)][:CHECKS]
    if not looking:
        return  # the usual case: an upstream stream has no merges or picks; nothing more to read
    fork_option, upstream_option = options
    reason = _swap_reason(repo, looking, fork_head=fork_head, upstream_head=upstream_head, config=config)
    if reason:
        why = reason.format(fork=repr(fork))
        raise SluiceError(
            f"did you swap {fork_option} and {upstream_option}? {upstream!r} {why}",
            f"pass {fork_option} {upstream} {upstream_option} {fork}, "
            f"or {fork_option} the fork trunk and {upstream_option} the upstream branch",
        )
    # A later state of the fork given as its upstream (origin/main for upstream/main): it holds fork trunk
    # and merges another history. Merges only: a release branch upstream tracks has `-x` picks of its own.
    merges = sum(1 for c in looking if len(c.parents) > 1)
    if merges >= 2 and is_ancestor(repo, fork_head, upstream_head):
        raise SluiceError(
            f"{upstream!r} holds fork trunk {fork!r} and merges another history as a fork does ({merges} of "
            "its newest commits): is it a later state of the fork itself?",
            f"pass {upstream_option} the upstream branch (e.g. upstream/main: `git remote -v` shows which "
            "remote is the upstream repository)",
        )


def _swap_reason(
    repo: HistoryReader,
    looking: Sequence[SideCommit],
    *,
    fork_head: str,
    upstream_head: str,
    config: SluiceConfig,
) -> str | None:
    """Why the refs look swapped ({fork} stands for the fork's name), or None."""
    if merged_sideways(repo, fork_head, upstream_head):
        return "merged {fork} in through a merge's second parent, as a fork merges its upstream"
    if len(looking) < 2:
        return None
    fork_side = _side(repo, fork_head, upstream_head, first_parent=False)
    fork_evidence = Evidence(sum(1 for c in fork_side if ingestion_like(c, config)))
    needed, confirmed = needed_evidence(fork_evidence), 0
    for remaining, commit in zip(range(len(looking), 0, -1), looking, strict=True):
        if confirmed >= needed or confirmed + remaining < needed:
            break  # each confirmation walks history: stop once the case is made or cannot be
        confirmed += _brings_in(repo, commit, fork_head)
    if not looks_swapped(fork=fork_evidence, upstream=Evidence(confirmed)):
        return None
    return (
        f"ingests {{fork}} ({confirmed} of its newest commits merge or pick commits of it), while "
        f"{fork_evidence.ingestions} of the fork's own commits look like ingestions"
    )


def strategy_note(config: SluiceConfig, *, merges: int, picks: int) -> str | None:
    """Pure: what to say when the fork's habit (`merges` of upstream commits, named `picks`, among its newest
    commits) contradicts `strategy: cherry-pick`, under which Days Behind and the plan assume picks."""
    if config.strategy is not Strategy.CHERRY_PICK or merges < 2 or merges <= picks:
        return None
    return (
        f"fork trunk merges its upstream ({merges} of its newest commits merge upstream commits, {picks} "
        "pick them), but the configuration says `strategy: cherry-pick`: set `strategy: merge` in "
        ".github/sluice.yml (or the --config file), or the plan picks what the fork would merge"
    )


def merge_habit(repo: HistoryReader, *, fork: str, upstream: str) -> tuple[int, int]:
    """(merges that bring upstream commits in, named picks) among fork trunk's newest first-parent commits of
    its own: a PR merged with a merge commit counts only when its branch merged upstream (Intel's way)."""
    fork_head, upstream_head = repo.resolve(fork), repo.resolve(upstream)
    side = _side(repo, fork_head, upstream_head, first_parent=True)
    merges = [c for c in side if len(c.parents) > 1][:CHECKS]
    picks = sum(1 for c in side if NAMED_PICK.search(c.message))
    return sum(_brings_in(repo, c, upstream_head) for c in merges), picks
