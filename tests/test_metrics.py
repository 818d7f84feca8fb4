"""Ingestion tip, Days Behind Upstream and Backlog Commits on hand-made streams (pure, frozen times)."""

from __future__ import annotations

import pytest

from bot.core.metrics import LEAD_TIME_WINDOW, pick_lead_times, stream_status
from bot.core.models import CommitInfo, Recognised, RecognitionMethod

DAY = 86400
T0 = 1_767_225_600
STREAM = [(f"{i:040x}", T0 + i * DAY // 4) for i in range(12)]  # four upstream commits a day


def sha(i: int) -> str:
    return STREAM[i][0]


def pick(
    i: int, *, emergency: bool = False, method: RecognitionMethod = RecognitionMethod.TRAILER
) -> Recognised:
    return Recognised(upstream_sha=sha(i), method=method, fork_sha=f"f{i:039x}", emergency=emergency)


@pytest.mark.parametrize(
    ("fork_point", "picks", "tip", "days", "backlog", "pending", "emergency"),
    [
        pytest.param(11, [], 11, 0.0, 0, 0, 0, id="up-to-date"),
        pytest.param(3, [], 3, 2.0, 0, 8, 0, id="nothing-picked"),
        pytest.param(3, [pick(5), pick(7)], 7, 1.0, 2, 6, 0, id="holes-behind-the-tip"),
        pytest.param(
            3, [pick(5), pick(10, emergency=True)], 5, 1.5, 1, 6, 1, id="emergency-does-not-move-tip"
        ),
        pytest.param(
            3, [pick(4, emergency=True), pick(6)], 6, 1.25, 1, 6, 1, id="emergency-behind-tip-not-backlog"
        ),
        pytest.param(
            3, [pick(8, method=RecognitionMethod.PATCH_ID)], 8, 0.75, 4, 7, 0, id="patch-id-pick-moves-tip"
        ),
    ],
)
def test_stream_status(
    fork_point: int,
    picks: list[Recognised],
    tip: int,
    days: float,
    backlog: int,
    pending: int,
    emergency: int,
) -> None:
    missing = {s for s, _ in STREAM[fork_point + 1 :]}
    recognised = {r.upstream_sha: r for r in picks}
    status = stream_status(
        STREAM, missing=missing, recognised=recognised, fork_head="f" * 40, patch_stack_commits=0
    )
    assert status.ingestion_tip == sha(tip)
    assert status.days_behind == days
    assert status.backlog_commits == backlog
    assert status.pending_commits == pending
    assert status.emergency_commits == emergency
    assert status.ingested_commits == fork_point + 1 + sum(1 for p in picks if not p.emergency)


def test_no_tip_when_fork_has_nothing_from_upstream() -> None:
    status = stream_status(
        STREAM, missing={s for s, _ in STREAM}, recognised={}, fork_head="f" * 40, patch_stack_commits=0
    )
    assert (status.ingestion_tip, status.days_behind, status.backlog_commits) == (None, None, 0)
    assert status.pending_commits == 12


@pytest.mark.parametrize(
    ("method", "picks_move_tip", "tip"),
    [
        pytest.param(RecognitionMethod.TRAILER, True, 8, id="a-pick-moves-the-tip"),
        pytest.param(RecognitionMethod.TRAILER, False, 3, id="merge-fork-tip-from-ancestry-alone"),
        pytest.param(RecognitionMethod.UPSTREAMED, True, 3, id="upstreamed-fork-patch"),
        pytest.param(RecognitionMethod.ALREADY_APPLIED, True, 3, id="already-applied"),
        pytest.param(RecognitionMethod.NET_ZERO, True, 3, id="net-zero"),
        pytest.param(RecognitionMethod.PIN_PASSED, True, 3, id="pin-passed"),
    ],
)
def test_only_regular_picks_move_the_tip(method: RecognitionMethod, picks_move_tip: bool, tip: int) -> None:
    missing = {s for s, _ in STREAM[4:]}
    recognised = {sha(8): pick(8, method=method)}
    status = stream_status(
        STREAM,
        missing=missing,
        recognised=recognised,
        fork_head="f" * 40,
        patch_stack_commits=0,
        picks_move_tip=picks_move_tip,
    )
    assert status.ingestion_tip == sha(tip)
    assert status.pending_commits == 7  # recognised either way: the fork has it


def test_oldest_missing_commit_and_its_age() -> None:
    """Days Behind sees the tip; the oldest hole behind it can be much older."""
    missing = {s for s, _ in STREAM[2:]}
    recognised = {sha(i): pick(i) for i in range(3, 11)}  # everything but 2 and 11
    status = stream_status(
        STREAM, missing=missing, recognised=recognised, fork_head="f" * 40, patch_stack_commits=0
    )
    assert (status.ingestion_tip, status.days_behind) == (sha(10), 0.25)
    assert (status.oldest_missing, status.oldest_missing_days) == (sha(2), 2.25)


def test_days_behind_is_never_negative() -> None:
    """Upstream head committed before the ingestion tip (clock skew between committers): 0 days, not -1."""
    skewed = [*STREAM[:8], (sha(8), STREAM[11][1] + DAY), *STREAM[9:]]
    missing = {s for s, _ in skewed[4:]}
    status = stream_status(
        skewed, missing=missing, recognised={sha(8): pick(8)}, fork_head="f" * 40, patch_stack_commits=0
    )
    assert (status.ingestion_tip, status.days_behind) == (sha(8), 0.0)

    # The one pending commit committed after upstream head: no hole is younger than the head.
    late = [*STREAM[:10], (sha(10), STREAM[11][1] + DAY), STREAM[11]]
    status = stream_status(
        late,
        missing={sha(10), sha(11)},
        recognised={sha(11): pick(11)},
        fork_head="f" * 40,
        patch_stack_commits=0,
    )
    assert (status.oldest_missing, status.oldest_missing_days) == (sha(10), 0.0)


def test_nothing_missing_means_no_oldest_missing() -> None:
    status = stream_status(STREAM, missing=set(), recognised={}, fork_head="f" * 40, patch_stack_commits=0)
    assert (status.oldest_missing, status.oldest_missing_days) == (None, None)


def commit(sha: str, committed: int) -> CommitInfo:
    return CommitInfo(
        sha=sha,
        parents=(),
        author_name="a",
        author_email="a@x",
        author_time=committed,
        committer_time=committed,
        message="m",
    )


def test_lead_time_is_the_pick_landing_minus_the_upstream_commit_over_the_latest_picks() -> None:
    upstream = [commit(sha(i), t) for i, (_, t) in enumerate(STREAM)]
    # picks 5 and 7 landed 2 and 0.5 days after upstream; 9's fork commit is not among the fork's commits
    fork = [
        commit(pick(5).fork_sha or "", STREAM[5][1] + 2 * DAY),
        commit(pick(7).fork_sha or "", STREAM[7][1] + DAY // 2),
    ]
    ancestry = Recognised(upstream_sha=sha(8), method=RecognitionMethod.ANCESTRY)
    recognised = {r.upstream_sha: r for r in [pick(5), pick(7), pick(9), ancestry]}
    leads = pick_lead_times(upstream, fork, recognised)
    assert leads == [0.5, 2.0]  # in landing order: 7 landed at T0+2.25 d, 5 at T0+3.25 d
    urgent = pick(7, emergency=True)  # an emergency pick is no ingestion: left out
    assert pick_lead_times(upstream, fork, {**recognised, sha(7): urgent}) == [2.0]
    status = stream_status(
        STREAM, missing=set(), recognised={}, fork_head="f" * 40, patch_stack_commits=0, lead_times=leads
    )
    assert status.lead_time_days_median == 1.25 and status.lead_time_picks == 2
    assert status.lead_time_days_p90 is not None and 1.25 < status.lead_time_days_p90 <= 2.0
    none = stream_status(STREAM, missing=set(), recognised={}, fork_head="f" * 40, patch_stack_commits=0)
    assert none.lead_time_days_median is None and none.lead_time_picks == 0


def test_lead_time_keeps_the_most_recent_picks_only() -> None:
    times = [T0 + i * DAY for i in range(LEAD_TIME_WINDOW + 20)]
    upstream = [commit(f"{i:040x}", t) for i, t in enumerate(times)]
    fork = [commit(f"f{i:039x}", t + (DAY // 2 if i < 20 else 0)) for i, t in enumerate(times)]
    recognised = {
        f"{i:040x}": Recognised(
            upstream_sha=f"{i:040x}", method=RecognitionMethod.TRAILER, fork_sha=f"f{i:039x}"
        )
        for i in range(len(times))
    }
    leads = pick_lead_times(upstream, fork, recognised)
    assert len(leads) == LEAD_TIME_WINDOW and set(leads) == {
        0.0
    }  # the 20 that landed first (half a day each) are out
