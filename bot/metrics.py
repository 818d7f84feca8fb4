"""Days Behind Upstream, Backlog Commits and the ingestion tip, exactly as DESIGN.md defines them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from bot.models import Recognised, RecognitionMethod, StreamStatus

SECONDS_PER_DAY = 86400


def ingestion_tip_index(
    stream: Sequence[str], missing: set[str], recognised: Mapping[str, Recognised]
) -> int | None:
    """Index of the newest upstream commit the fork has through regular ingestion (not an emergency pick)."""
    for index in range(len(stream) - 1, -1, -1):
        sha = stream[index]
        if sha not in missing:
            return index
        rec = recognised.get(sha)
        if rec is not None and not rec.emergency:
            return index
    return None


def pending_shas(stream: Sequence[str], missing: set[str], recognised: Mapping[str, Recognised]) -> list[str]:
    """Upstream commits the fork does not have, oldest first."""
    return [sha for sha in stream if sha in missing and sha not in recognised]


def stream_status(
    stream: Sequence[tuple[str, int]],
    *,
    missing: set[str],
    recognised: Mapping[str, Recognised],
    fork_head: str,
    patch_stack_commits: int,
) -> StreamStatus:
    shas = [sha for sha, _ in stream]
    head_sha, head_time = stream[-1]
    tip = ingestion_tip_index(shas, missing, recognised)
    pending = pending_shas(shas, missing, recognised)
    on_stream = [recognised[s] for s in shas if s in recognised]
    by_method = Counter(r.method.value for r in on_stream if not r.emergency)
    by_method[RecognitionMethod.ANCESTRY.value] = len(shas) - len(missing)
    tip_sha, tip_time = (stream[tip][0], stream[tip][1]) if tip is not None else (None, None)
    position = {sha: i for i, sha in enumerate(shas)}
    return StreamStatus(
        upstream_head=head_sha,
        upstream_head_time=head_time,
        fork_head=fork_head,
        ingestion_tip=tip_sha,
        ingestion_tip_time=tip_time,
        days_behind=None if tip_time is None else round((head_time - tip_time) / SECONDS_PER_DAY, 3),
        backlog_commits=sum(1 for s in pending if tip is not None and position[s] < tip),
        pending_commits=len(pending),
        ingested_commits=sum(by_method.values()),
        emergency_commits=sum(1 for r in on_stream if r.emergency),
        patch_stack_commits=patch_stack_commits,
        recognised_by=dict(sorted(by_method.items())),
    )
