"""Days Behind Upstream, the oldest missing commit, Backlog Commits, the ingestion tip (README, Metrics)."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from bot.core.models import CommitInfo, Recognised, RecognitionMethod, StreamStatus

SECONDS_PER_DAY = 86400
LEAD_TIME_WINDOW = 100  # the most recent picks the lead-time figures summarise


def moves_tip(rec: Recognised, *, picks_move_tip: bool = True) -> bool:
    """Whether a recognised commit is a regular ingestion: a pick, not an emergency one, and the fork
    ingests by picking (a `merge` fork's tip comes from ancestry alone)."""
    return picks_move_tip and rec.method.is_pick and not rec.emergency


def ingestion_tip_index(
    stream: Sequence[str],
    missing: set[str],
    recognised: Mapping[str, Recognised],
    *,
    picks_move_tip: bool = True,
) -> int | None:
    """Index of the newest upstream commit the fork has through regular ingestion (not an emergency pick)."""
    for index in range(len(stream) - 1, -1, -1):
        sha = stream[index]
        if sha not in missing:
            return index
        rec = recognised.get(sha)
        if rec is not None and moves_tip(rec, picks_move_tip=picks_move_tip):
            return index
    return None


def oldest_missing(
    stream: Sequence[tuple[str, int]], pending: Iterable[str]
) -> tuple[str | None, float | None]:
    """The pending upstream commit committed first and how many days older than upstream head it is;
    (None, None) when nothing is pending."""
    times = dict(stream)
    oldest = min(((sha, times[sha]) for sha in pending), key=lambda st: st[1], default=None)
    if oldest is None:
        return None, None
    return oldest[0], _days(max(0, stream[-1][1] - oldest[1]))  # clock skew: never younger than the head


def _days(seconds: int) -> float:
    return round(seconds / SECONDS_PER_DAY, 3)


def pending_shas(stream: Sequence[str], missing: set[str], recognised: Mapping[str, Recognised]) -> list[str]:
    """Upstream commits the fork does not have, oldest first."""
    return [sha for sha in stream if sha in missing and sha not in recognised]


def pick_lead_times(
    upstream: Iterable[CommitInfo], fork: Iterable[CommitInfo], recognised: Mapping[str, Recognised]
) -> list[float]:
    """Ingestion lead time of each upstream commit the fork has through a pick, in days, the most recent
    LEAD_TIME_WINDOW picks by when they landed: fork commit's committer time − upstream's committer time.
    An emergency pick is no ingestion (it never moves the tip): its hours would flatter the figure."""
    upstream_time = {c.sha: c.committer_time for c in upstream}
    fork_time = {c.sha: c.committer_time for c in fork}
    landed = sorted(
        (fork_time[rec.fork_sha], fork_time[rec.fork_sha] - upstream_time[sha])
        for sha, rec in recognised.items()
        if rec.fork_sha in fork_time and sha in upstream_time and rec.method.is_pick and not rec.emergency
    )
    return [max(0, lead) / SECONDS_PER_DAY for _, lead in landed[-LEAD_TIME_WINDOW:]]


def _median_p90(values: Sequence[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    p90 = statistics.quantiles(values, n=10, method="inclusive")[-1] if len(values) > 1 else values[0]
    return round(statistics.median(values), 3), round(p90, 3)


def stream_status(
    stream: Sequence[tuple[str, int]],
    *,
    missing: set[str],
    recognised: Mapping[str, Recognised],
    fork_head: str,
    patch_stack_commits: int,
    picks_move_tip: bool = True,
    unreadable: Mapping[str, str] | None = None,
    lead_times: Sequence[float] = (),
) -> StreamStatus:
    shas = [sha for sha, _ in stream]
    head_sha, head_time = stream[-1]
    tip = ingestion_tip_index(shas, missing, recognised, picks_move_tip=picks_move_tip)
    pending = pending_shas(shas, missing, recognised)
    oldest, oldest_days = oldest_missing(stream, pending)
    on_stream = [recognised[s] for s in shas if s in recognised]
    by_method = Counter(r.method.value for r in on_stream if not r.emergency)
    by_method[RecognitionMethod.ANCESTRY.value] = len(shas) - len(missing)
    tip_sha, tip_time = (stream[tip][0], stream[tip][1]) if tip is not None else (None, None)
    position = {sha: i for i, sha in enumerate(shas)}
    median_lead, p90_lead = _median_p90(lead_times)
    return StreamStatus(
        upstream_head=head_sha,
        upstream_head_time=head_time,
        fork_head=fork_head,
        ingestion_tip=tip_sha,
        ingestion_tip_time=tip_time,
        days_behind=None if tip_time is None else _days(max(0, head_time - tip_time)),  # clock skew
        backlog_commits=sum(1 for s in pending if tip is not None and position[s] < tip),
        pending_commits=len(pending),
        ingested_commits=sum(by_method.values()),
        emergency_commits=sum(1 for r in on_stream if r.emergency),
        patch_stack_commits=patch_stack_commits,
        recognised_by=dict(sorted(by_method.items())),
        oldest_missing=oldest,
        oldest_missing_days=oldest_days,
        unreadable=dict(sorted((unreadable or {}).items())),
        lead_time_days_median=median_lead,
        lead_time_days_p90=p90_lead,
        lead_time_picks=len(lead_times),
    )
