"""The stream status once people's dispositions count (pure, hand-made streams, frozen times)."""

from __future__ import annotations

from bot.core.metrics import stream_status
from bot.core.models import Disposition, Recognised, RecognitionMethod
from bot.flows.engine import Snapshot
from bot.flows.planning import with_dispositions

DAY = 86400
T0 = 1_767_225_600
STREAM = tuple((f"{i:040x}", T0 + i * DAY // 4) for i in range(12))  # four upstream commits a day


def sha(i: int) -> str:
    return STREAM[i][0]


def snapshot_with_holes() -> Snapshot:
    """Fork trunk has upstream 0 and 1 by ancestry and picks of 3 to 7: holes at 2, and 8 to 11 are new."""
    missing = frozenset(s for s, _ in STREAM[2:])
    recognised = {
        sha(i): Recognised(upstream_sha=sha(i), method=RecognitionMethod.TRAILER, fork_sha=f"f{i:039x}")
        for i in range(3, 8)
    }
    status = stream_status(
        STREAM, missing=set(missing), recognised=recognised, fork_head="f" * 40, patch_stack_commits=0
    )
    return Snapshot(
        fork_ref="main",
        upstream_ref="upstream/main",
        fork_head="f" * 40,
        upstream_head=sha(11),
        stream=STREAM,
        missing=missing,
        candidates=(),
        fork_commits=(),
        recognised=recognised,
        status=status,
    )


def test_a_skipped_commit_is_not_the_oldest_missing_commit() -> None:
    status = with_dispositions(snapshot_with_holes(), {sha(2): Disposition.SKIPPED})
    assert (status.pending_commits, status.backlog_commits, status.skipped_commits) == (4, 0, 1)
    assert (status.oldest_missing, status.oldest_missing_days) == (sha(8), 0.75)


def test_a_deferred_commit_stays_the_oldest_missing_commit() -> None:
    status = with_dispositions(snapshot_with_holes(), {sha(2): Disposition.DEFERRED})
    assert (status.pending_commits, status.backlog_commits, status.deferred_commits) == (5, 1, 1)
    assert (status.oldest_missing, status.oldest_missing_days) == (sha(2), 2.25)


def test_nothing_is_missing_once_every_pending_commit_is_skipped() -> None:
    snapshot = snapshot_with_holes()
    status = with_dispositions(snapshot, dict.fromkeys(snapshot.pending, Disposition.SKIPPED))
    assert (status.pending_commits, status.oldest_missing, status.oldest_missing_days) == (0, None, None)
