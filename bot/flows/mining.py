"""Past ingestions of a fork and what followed them: which upstream commits broke the fork, and why so."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from bot.core.bisect_pr import Blame
from bot.core.config import SluiceConfig
from bot.core.recognise import PR_SUFFIX, normalise_title, pr_number
from bot.core.refs import validate_sha
from bot.flows.engine import take_snapshot
from bot.ports import HistoryReader, Repository

DAY = 86400
HEX = re.compile(r"(?<![0-9A-Za-z])[0-9a-f]{7,40}(?![0-9A-Za-z])")
# `#123`, `pull/123` (a URL); a number inside a word or a path is not a PR.
PR_REF = re.compile(r"(?:(?<![\w/])#|/pull/)(\d+)\b")
REVERT = re.compile(r'^Revert "(.+)"\s*(?:\(#\d+\))?\s*$')
RESOLVED_MARK = re.compile(r"\[RESOLVED\]", re.IGNORECASE)
BLAMED = "blamed by Sluice"  # the evidence of a culprit Sluice's own tier runs blamed
FIELD, RECORD = "\x1f", "\x1e"
LOG_FORMAT = f"{RECORD}%H{FIELD}%P{FIELD}%ct{FIELD}%B"


@dataclass(frozen=True)
class TrunkCommit:
    """One commit of fork trunk's first-parent line, with its whole message."""

    sha: str
    parents: tuple[str, ...]
    time: int
    message: str

    @property
    def subject(self) -> str:
        return self.message.split("\n", 1)[0]


@dataclass(frozen=True)
class IngestionWindow:
    """One past ingestion: the fork trunk before it, the upstream commit it reached, what it brought in."""

    id: str  # the ingestion commit: the merge, or the first pick of a run of picks
    style: str  # "merge" or "pick"
    time: int  # its committer time
    fork: str  # fork trunk just before it
    upstream: str  # the newest upstream commit it brought in: the planner's upstream then
    brought: tuple[str, ...]  # the upstream commits it brought in, oldest first
    fixes: tuple[TrunkCommit, ...]  # fork commits that may say what broke: the PR's, and trunk's soon after
    picks: Mapping[str, TrunkCommit] = field(default_factory=dict)  # pick style: upstream SHA -> its pick


def read_trunk(repo: HistoryReader, head: str, *revs: str, first_parent: bool = True) -> list[TrunkCommit]:
    """Commits of `head` (minus `revs`) with their messages, newest first."""
    flags = ["--first-parent"] if first_parent else ["--no-merges"]
    out = repo.run("log", *flags, f"--format={LOG_FORMAT}", validate_sha(head), *revs, "--")
    found = []
    for record in out.split(RECORD)[1:]:
        sha, parents, ct, message = record.split(FIELD, 3)
        found.append(TrunkCommit(sha, tuple(parents.split()), int(ct), message.strip()))
    return found


def in_range(time: int, *, since: int | None, until: int | None) -> bool:
    return (since is None or time >= since) and (until is None or time < until)


def named_upstream(subject: str, parents: Sequence[str], stream: Mapping[str, int]) -> str | None:
    """The upstream stream commit an ingestion merge took: the SHA its subject names, else its second
    parent when that is a stream commit itself (a plain `git merge upstream/main`)."""
    for token in HEX.findall(subject):
        hits = [sha for sha in stream if sha.startswith(token)] if len(token) < 40 else [token]
        if len(hits) == 1 and hits[0] in stream:
            return hits[0]
    return parents[1] if len(parents) > 1 and parents[1] in stream else None


def taken_upstream(
    repo: HistoryReader, merge: TrunkCommit, stream: Mapping[str, int], upstream_head: str
) -> str | None:
    """The upstream commit a first-parent merge took: named in its subject, else the newest upstream commit
    its second parent has (a fork PR's merge has only what trunk had: it brings nothing, so is no window)."""
    named = named_upstream(merge.subject, merge.parents, stream)
    if named is not None:
        return named
    base = repo.run(
        "merge-base", validate_sha(merge.parents[1]), validate_sha(upstream_head), ok=(0, 1)
    ).strip()
    return base if base in stream else None


def soon_after(
    trunk: Sequence[TrunkCommit], time: int, *, days: float, until: int | None, skip: Iterable[str] = ()
) -> tuple[TrunkCommit, ...]:
    """Fork trunk commits within `days` after `time` (before `until`): where a later fix lands."""
    skipped = set(skip)
    end = time + days * DAY
    return tuple(
        c
        for c in reversed(trunk)
        if time < c.time <= end and in_range(c.time, since=None, until=until) and c.sha not in skipped
    )


def merge_windows(
    repo: HistoryReader,
    *,
    trunk: Sequence[TrunkCommit],
    stream: Mapping[str, int],
    upstream_head: str,
    fix_days: float,
    until: int | None,
) -> list[IngestionWindow]:
    """Every first-parent merge of an upstream commit on fork trunk (oldest first), with its fix commits:
    the PR branch's own commits and trunk's for `fix_days` after."""
    found = ((c.sha, taken_upstream(repo, c, stream, upstream_head)) for c in trunk if len(c.parents) > 1)
    ingestions = {sha: took for sha, took in found if took is not None}
    windows = []
    for commit in reversed(trunk):
        took = ingestions.get(commit.sha)
        if took is None:
            continue
        base = commit.parents[0]
        brought = repo.run("rev-list", "--first-parent", "--reverse", took, "--not", base, "--").split()
        if not brought:
            continue  # the fork had it all already
        branch = read_trunk(repo, commit.parents[1], "--not", base, upstream_head, first_parent=False)
        later = soon_after(trunk, commit.time, days=fix_days, until=until, skip=ingestions)
        windows.append(
            IngestionWindow(
                id=commit.sha,
                style="merge",
                time=commit.time,
                fork=base,
                upstream=took,
                brought=tuple(brought),
                fixes=(*reversed(branch), *later),
            )
        )
    return windows


def pick_windows(
    trunk: Sequence[TrunkCommit],
    picked: Mapping[str, Sequence[str]],
    *,
    stream: Mapping[str, int],
    fix_days: float,
    until: int | None,
) -> list[IngestionWindow]:
    """Each run of consecutive picks on fork trunk (oldest first): the planner saw trunk before the run and
    upstream up to the newest commit the run picked. `picked`: fork pick SHA -> the upstream SHAs it holds."""
    windows = []
    run: list[TrunkCommit] = []
    for commit in [*reversed(trunk), None]:
        if commit is not None and commit.sha in picked and len(commit.parents) == 1:
            run.append(commit)
            continue
        if run:
            windows.append(_pick_window(run, trunk, picked, stream=stream, fix_days=fix_days, until=until))
            run = []
    return windows


def _pick_window(
    run: Sequence[TrunkCommit],
    trunk: Sequence[TrunkCommit],
    picked: Mapping[str, Sequence[str]],
    *,
    stream: Mapping[str, int],
    fix_days: float,
    until: int | None,
) -> IngestionWindow:
    picks = {up: pick for pick in run for up in picked[pick.sha]}
    brought = tuple(sorted(picks, key=lambda sha: stream[sha]))
    later = soon_after(trunk, run[0].time, days=fix_days, until=until, skip=picked)
    return IngestionWindow(
        id=run[0].sha,
        style="pick",
        time=run[0].time,
        fork=run[0].parents[0],
        upstream=brought[-1],
        brought=brought,
        fixes=later,
        picks=picks,
    )


def picks_on_trunk(
    repo: Repository, *, fork_head: str, upstream_head: str, config: SluiceConfig
) -> dict[str, list[str]]:
    """Fork pick SHA -> the upstream commits it picked, as recognition finds them today (a fact of history,
    not a feature: features are computed per window, from that window's state)."""
    snapshot = take_snapshot(repo, fork_ref=fork_head, upstream_ref=upstream_head, config=config)
    picked: dict[str, list[str]] = {}
    for sha, found in snapshot.recognised.items():
        if found.fork_sha is not None and found.method.is_pick:
            picked.setdefault(found.fork_sha, []).append(sha)
    return picked


def _prs_named(message: str) -> set[str]:
    """PR numbers a fix commit names, leaving out its own (the `(#N)` a squash merge appends)."""
    subject, _, body = message.partition("\n")
    return set(PR_REF.findall(PR_SUFFIX.sub("", subject))) | set(PR_REF.findall(body))


def _shas_named(message: str, candidates: Iterable[str]) -> set[str]:
    tokens = set(HEX.findall(message))
    return {sha for sha in candidates if any(sha.startswith(t) for t in tokens)}


@dataclass(frozen=True)
class Evidence:
    """That an upstream commit broke the fork: what said so, and when the fork first said it."""

    said: str
    time: int  # the committer time of that fix commit (or pick): before it, nobody could have known


def evidence(
    brought: Mapping[str, str],
    fixes: Sequence[TrunkCommit],
    *,
    picks: Mapping[str, TrunkCommit] | None = None,
    blamed: Mapping[str, Blame] | None = None,
) -> dict[str, Evidence]:
    """Upstream SHA -> the earliest evidence that it broke the fork, for the commits of one window that did
    (`brought`: upstream SHA -> subject).

    Evidence: a fork commit reverts its subject (or its pick), names its SHA (or its pick's) or its upstream
    PR number; or its pick is marked `[RESOLVED]` (a person resolved its conflicts); or Sluice blamed it
    (`blamed`, from the store: a bisection found a tier failed with it and passed without it, or a tier
    failed on an ingestion PR that carried it alone).
    """
    picks = picks or {}
    found: dict[str, Evidence] = {}

    def add(sha: str, said: str, time: int) -> None:
        if sha not in found or time < found[sha].time:
            found[sha] = Evidence(said, time)

    for sha, blame in (blamed or {}).items():
        if sha in brought:
            add(sha, f"{BLAMED}: {blame.detail[:80]}", blame.time)

    titles = {normalise_title(subject): sha for sha, subject in brought.items()}
    titles |= {normalise_title(p.subject): up for up, p in picks.items() if up in brought}
    prs = {n: sha for sha, subject in brought.items() if (n := pr_number(subject))}
    names = {sha: sha for sha in brought} | {p.sha: up for up, p in picks.items() if up in brought}
    for up, pick in picks.items():
        if up in brought and RESOLVED_MARK.search(pick.subject):
            add(up, f"pick {pick.sha[:10]} marked [RESOLVED]", pick.time)
    for fix in fixes:
        said = f"{fix.sha[:10]} {fix.subject[:60]!r}"
        reverted = REVERT.match(fix.subject)
        title = normalise_title(reverted.group(1)) if reverted else None
        if title in titles:
            add(titles[title], f"reverted by {said}", fix.time)
        for sha in sorted(_shas_named(fix.message, names)):
            add(names[sha], f"named by {said}", fix.time)
        for number in sorted(_prs_named(fix.message) & set(prs)):
            add(prs[number], f"PR #{number} named by {said}", fix.time)
    return found


def outcomes(
    brought: Mapping[str, str],
    fixes: Sequence[TrunkCommit],
    *,
    picks: Mapping[str, TrunkCommit] | None = None,
    blamed: Mapping[str, Blame] | None = None,
) -> dict[str, str]:
    """Upstream SHA -> what said it broke the fork (`evidence`, without the time)."""
    return {sha: e.said for sha, e in evidence(brought, fixes, picks=picks, blamed=blamed).items()}
