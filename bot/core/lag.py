"""One point of a fork's lag history: the README's metrics as one ingestion run left them."""

from __future__ import annotations

from datetime import datetime

from bot.core.models import Frozen, StreamStatus


class LagPoint(Frozen):
    """Days Behind Upstream, Backlog Commits and the rest after one ingestion run of one fork."""

    fork: str
    at: datetime  # when the run finished (the service's clock), UTC
    days_behind: float | None  # None: the fork has no upstream commit through regular ingestion yet
    backlog_commits: int
    pending_commits: int
    oldest_missing_days: float | None
    open_ingestions: int
    ingestion_tip: str | None
    upstream_head: str
    lead_time_days_median: float | None = None  # over the fork's most recent picks (StreamStatus)
    lead_time_days_p90: float | None = None


def lag_point(fork: str, status: StreamStatus, *, open_ingestions: int, at: datetime) -> LagPoint:
    return LagPoint(
        fork=fork,
        at=at,
        days_behind=status.days_behind,
        backlog_commits=status.backlog_commits,
        pending_commits=status.pending_commits,
        oldest_missing_days=status.oldest_missing_days,
        open_ingestions=open_ingestions,
        ingestion_tip=status.ingestion_tip,
        upstream_head=status.upstream_head,
        lead_time_days_median=status.lead_time_days_median,
        lead_time_days_p90=status.lead_time_days_p90,
    )
