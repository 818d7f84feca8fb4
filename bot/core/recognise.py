"""Recognise the upstream commits the fork already has: trailers, `-x` lines, subject patterns, patch-ids."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bot.core.config import PickedSubject, SluiceConfig
from bot.core.models import CommitInfo, Recognised, RecognitionMethod

UPSTREAM_TRAILER = re.compile(r"^Upstream-Commit:\s*([0-9a-f]{40})\s*$", re.MULTILINE)
CHERRY_PICKED = re.compile(r"\(cherry picked from commit ([0-9a-f]{7,40})\)")
EMERGENCY_TRAILER = re.compile(r"^Sluice-Kind:\s*emergency\s*$", re.MULTILINE | re.IGNORECASE)
REVERTS = re.compile(r"^This reverts commit ([0-9a-f]{40})\b", re.MULTILINE)  # `git revert`'s own line
PR_SUFFIX = re.compile(r"\s*\(#(\d+)\)\s*$")
LEADING_TAGS = re.compile(r"^(?:\s*\[[^\]]*\])+")
MIN_AGREEING = 12  # characters of a title that may agree by containing the other (a shortened one)


def normalise_title(subject: str) -> str:
    """A subject without its `(#N)` suffixes, quotes and case, for matching picks and reverts."""
    title, previous = subject, None
    while title != previous:
        previous = title
        title = PR_SUFFIX.sub("", title).strip().strip("'\"")
    return " ".join(title.split()).lower()


def pr_number(subject: str) -> str | None:
    m = PR_SUFFIX.search(subject)
    return m.group(1) if m else None


def is_emergency(message: str, config: SluiceConfig) -> bool:
    """Whether a fork commit is an emergency pick: its own `Sluice-Kind: emergency` trailer, or a configured
    pattern anywhere in its message."""
    if EMERGENCY_TRAILER.search(_own_trailers(message)):
        return True
    return config.recognition.is_emergency(message)


def _own_trailers(message: str) -> str:
    """What the fork's pick wrote of its message: from its last `Upstream-Commit` line on (the upstream
    message it copies comes before, and an upstream that is itself a Sluice fork has its own emergency
    trailers there); the whole message when it has no such line."""
    starts = [found.start() for found in UPSTREAM_TRAILER.finditer(message)]
    return message[starts[-1] :] if starts else message


class _Candidates:
    """Upstream commits the fork may have picked, indexed every way a pick can name them."""

    def __init__(self, upstream: Sequence[CommitInfo]) -> None:
        self.by_sha = {c.sha: c for c in upstream}
        self.by_pr: dict[str, str] = {}
        self.by_title: dict[str, list[str]] = {}
        self.by_bare: dict[str, list[str]] = {}  # by title less its `[TAG]`s: a pick may drop or add them
        for c in upstream:
            pr = pr_number(c.subject)
            if pr is not None:
                self.by_pr.setdefault(pr, c.sha)
            self.by_title.setdefault(normalise_title(c.subject), []).append(c.sha)
            self.by_bare.setdefault(_bare(c.subject), []).append(c.sha)

    def expand(self, abbrev: str) -> str | None:
        if abbrev in self.by_sha:
            return abbrev
        hits = [s for s in self.by_sha if s.startswith(abbrev)]
        return hits[0] if len(hits) == 1 else None

    def named_by(self, picked: PickedSubject) -> list[str]:
        """The upstream commits a pick subject names: every PR of a bundle, else one commit."""
        if picked.prs:
            return list(dict.fromkeys(self.by_pr[n] for n in picked.prs if n in self.by_pr))
        by_pr = self.by_pr.get(picked.pr) if picked.pr else None
        titles = self.by_title.get(normalise_title(picked.title), []) if picked.title else []
        if not titles and picked.title:
            titles = self.by_bare.get(_bare(picked.title), []) if _bare(picked.title) else []
        by_title = titles[0] if len(titles) == 1 else None
        # A unique title beats a number: an unquoted subject's only `(#N)` may be the fork PR's own. So a
        # number alone names the upstream commit of that PR only when their titles agree too.
        if by_pr is not None and picked.title and not titles_agree(picked.title, self.by_sha[by_pr].subject):
            by_pr = None
        sha = by_title or by_pr
        return [sha] if sha else []


def titles_agree(picked: str, upstream: str) -> bool:
    """Whether a pick's title is upstream's, less the `[TAG]`s and `(#N)`s either may have lost or gained."""
    ours, theirs = _bare(picked), _bare(upstream)
    return bool(ours) and (
        ours == theirs or (len(ours) >= MIN_AGREEING and (ours in theirs or theirs in ours))
    )


def _bare(title: str) -> str:
    return LEADING_TAGS.sub("", normalise_title(title)).strip()


def _explicit_picks(
    fork: CommitInfo, cands: _Candidates, config: SluiceConfig
) -> list[tuple[str, RecognitionMethod]]:
    """What one fork commit says it picked, strongest evidence first."""
    found = [
        (s, RecognitionMethod.TRAILER) for s in UPSTREAM_TRAILER.findall(fork.message) if s in cands.by_sha
    ]
    for abbrev in CHERRY_PICKED.findall(fork.message):
        sha = cands.expand(abbrev)
        if sha is not None:
            found.append((sha, RecognitionMethod.CHERRY_PICK_X))
    if found:
        return found
    for picked in config.recognition.subject_matches(fork.subject):
        shas = cands.named_by(picked)
        if shas:
            return [(sha, RecognitionMethod.SUBJECT_PATTERN) for sha in shas]
    return []


def recognise(
    upstream: Sequence[CommitInfo],
    fork: Sequence[CommitInfo],
    *,
    upstream_patch_ids: Mapping[str, str],
    fork_patch_ids: Mapping[str, str],
    config: SluiceConfig,
) -> dict[str, Recognised]:
    """Upstream SHA -> how the fork has it, for upstream commits not reachable from fork trunk.

    Explicit evidence (trailers, `-x` lines, subject patterns) wins; patch-ids then pair the remaining
    commits one to one in stream order, so a reland whose diff equals the original is not taken for it.
    """
    cands = _Candidates(upstream)
    found: dict[str, Recognised] = {}
    claimed: set[str] = reverted_on_trunk(fork)  # a pick reverted since, and its revert, have nothing
    for commit in fork:
        if commit.sha in claimed:
            continue
        emergency = is_emergency(commit.message, config)
        for sha, method in _explicit_picks(commit, cands, config):
            claimed.add(commit.sha)
            if sha not in found or (found[sha].emergency and not emergency):
                found[sha] = Recognised(
                    upstream_sha=sha, method=method, fork_sha=commit.sha, emergency=emergency
                )
    by_patch_id: dict[str, list[CommitInfo]] = {}
    for commit in fork:
        pid = fork_patch_ids.get(commit.sha)
        if pid is not None and commit.sha not in claimed:
            by_patch_id.setdefault(pid, []).append(commit)
    for up in upstream:
        pool = by_patch_id.get(upstream_patch_ids.get(up.sha, ""), [])
        if up.sha in found or not pool:
            continue
        pick = pool.pop(0)
        found[up.sha] = _patch_id_match(up, pick, config)
        claimed.add(pick.sha)
    return found


def reverted_on_trunk(fork: Sequence[CommitInfo]) -> set[str]:
    """The fork commits a later fork commit reverted (`git revert`'s "This reverts commit <sha>" line), with
    the reverts that undid them; a revert that was itself reverted undoes nothing (the commit is back)."""
    shas = {c.sha for c in fork}
    target = {c.sha: t for c in fork for t in REVERTS.findall(c.message)[:1] if t in shas and t != c.sha}
    reverts_of: dict[str, list[str]] = {}
    for revert, reverted in target.items():
        reverts_of.setdefault(reverted, []).append(revert)

    @functools.cache
    def undone(sha: str) -> bool:  # a revert's target is older than it: the recursion ends
        return any(not undone(revert) for revert in reverts_of.get(sha, ()))

    gone = {sha for sha in reverts_of if undone(sha)}
    return gone | {revert for revert, reverted in target.items() if reverted in gone and not undone(revert)}


def _patch_id_match(up: CommitInfo, fork: CommitInfo, config: SluiceConfig) -> Recognised:
    """A fork commit older than its upstream twin is the fork's own patch that went upstream, not a pick;
    unless it says it is a pick (a trailer, a `-x` line) of a commit upstream has since rewritten (a
    force-push gives the twin a later committer time than the pick)."""
    says_it_picked = UPSTREAM_TRAILER.search(fork.message) or CHERRY_PICKED.search(fork.message)
    if fork.committer_time < up.committer_time and not says_it_picked:
        return Recognised(upstream_sha=up.sha, method=RecognitionMethod.UPSTREAMED, fork_sha=fork.sha)
    return Recognised(
        upstream_sha=up.sha,
        method=RecognitionMethod.PATCH_ID,
        fork_sha=fork.sha,
        emergency=is_emergency(fork.message, config),
    )


def ingestion_commits(recognised: Mapping[str, Recognised]) -> frozenset[str]:
    """Fork commits that are picks of upstream commits, so not part of the patch stack.

    An upstreamed fork patch stays in the patch stack until the fork ingests its upstream twin.
    """
    return frozenset(r.fork_sha for r in recognised.values() if r.fork_sha is not None and r.method.is_pick)


# A subject that reads like a pick even when no configured pattern matches it.
LOOKS_LIKE_PICK = re.compile(r"cherry[- ]?pick|\bback-?port|\[pick\]", re.IGNORECASE)


@dataclass(frozen=True)
class UnmatchedPick:
    """A fork commit that reads like a pick, but whose upstream commit Sluice could not find."""

    fork_sha: str
    subject: str
    evidence: str  # what made it look like a pick


def pick_evidence(commit: CommitInfo, config: SluiceConfig) -> str | None:
    """Why a fork commit reads like a pick (strongest first), or None."""
    if UPSTREAM_TRAILER.search(commit.message):
        return "an Upstream-Commit trailer"
    if CHERRY_PICKED.search(commit.message):
        return "a `cherry picked from commit` line"
    if config.recognition.subject_matches(commit.subject):
        return "a subject pattern"
    return "its subject" if LOOKS_LIKE_PICK.search(commit.subject) else None


def unmatched_picks(
    fork: Sequence[CommitInfo],
    recognised: Mapping[str, Recognised],
    *,
    ancestors: Sequence[CommitInfo],
    config: SluiceConfig,
) -> tuple[list[UnmatchedPick], int]:
    """Fork commits that read like picks and matched nothing, and how many others picked a commit the
    fork has since reached by ancestry (`ancestors`: the upstream stream commits fork trunk contains)."""
    matched = {r.fork_sha for r in recognised.values() if r.fork_sha is not None}
    reached = _Candidates(ancestors)
    unmatched: list[UnmatchedPick] = []
    superseded = 0
    for commit in fork:
        evidence = None if commit.sha in matched or len(commit.parents) > 1 else pick_evidence(commit, config)
        if evidence is None:
            continue
        if _explicit_picks(commit, reached, config):
            superseded += 1
        else:
            unmatched.append(UnmatchedPick(fork_sha=commit.sha, subject=commit.subject, evidence=evidence))
    return unmatched, superseded
