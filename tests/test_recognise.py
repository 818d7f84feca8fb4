"""Recognising picks made before and by Sluice (pure)."""

from __future__ import annotations

import hashlib

import pytest

from bot.config import SluiceConfig, parse_config
from bot.models import CommitInfo, RecognitionMethod
from bot.recognise import normalise_title, recognise

UP = [
    CommitInfo(
        sha=hashlib.sha1(subject.encode()).hexdigest(),
        parents=(),
        author_name="u",
        author_email="u@x",
        author_time=i,
        committer_time=i,
        message=subject,
    )
    for i, subject in enumerate(
        [
            "[AMD] Fix lds bank conflicts (#4312)",
            "[NVIDIA] Use TMA for stores (#4313)",
            "[FRONTEND] Faster store (#4314)",
            "[FRONTEND] Faster store (#4320)",
        ],
        start=1,
    )
]


def fork_commit(message: str, n: int = 1, *, at: int = 100) -> CommitInfo:
    """A fork commit, by default committed after every upstream commit (as a pick is)."""
    return CommitInfo(
        sha=f"f{n:039x}",
        parents=(),
        author_name="f",
        author_email="f@x",
        author_time=0,
        committer_time=at,
        message=message,
    )


@pytest.mark.parametrize(
    ("message", "upstream_index", "method", "emergency"),
    [
        (
            f"Fix lds\n\nUpstream-Commit: {UP[0].sha}\nSluice-Ingestion: 7",
            0,
            RecognitionMethod.TRAILER,
            False,
        ),
        (f"Fix lds\n\n(cherry picked from commit {UP[1].sha})", 1, RecognitionMethod.CHERRY_PICK_X, False),
        (
            f"Fix lds\n\n(cherry picked from commit {UP[1].sha[:12]})",
            1,
            RecognitionMethod.CHERRY_PICK_X,
            False,
        ),
        (
            "[Cherry-pick] '[AMD] Fix lds bank conflicts, adapted (#4312)'",
            0,
            RecognitionMethod.SUBJECT_PATTERN,
            False,
        ),
        ("[Cherry-pick] [NVIDIA] Use TMA for stores (#4313)", 1, RecognitionMethod.SUBJECT_PATTERN, False),
        (
            f"Hotfix\n\nUpstream-Commit: {UP[1].sha}\nSluice-Kind: emergency",
            1,
            RecognitionMethod.TRAILER,
            True,
        ),
    ],
)
def test_explicit_recognition(
    message: str, upstream_index: int, method: RecognitionMethod, emergency: bool
) -> None:
    found = recognise(
        UP, [fork_commit(message)], upstream_patch_ids={}, fork_patch_ids={}, config=SluiceConfig()
    )
    assert list(found) == [UP[upstream_index].sha]
    rec = found[UP[upstream_index].sha]
    assert (rec.method, rec.emergency, rec.fork_sha) == (method, emergency, fork_commit(message).sha)


def test_fork_pr_numbers_alone_do_not_match() -> None:
    """A fork's own PR squash subject ends in (#N) too; without the pick prefix it is not a pick."""
    found = recognise(
        UP,
        [fork_commit("[TLX] Warp specialise (#4313)")],
        upstream_patch_ids={},
        fork_patch_ids={},
        config=SluiceConfig(),
    )
    assert found == {}


def test_patch_ids_pair_one_to_one_in_stream_order() -> None:
    """The original and its reland have the same diff; one pick recognises only the original."""
    same = {UP[2].sha: "p1", UP[3].sha: "p1"}
    found = recognise(
        UP,
        [fork_commit("[FRONTEND] Faster store (#4314)")],
        upstream_patch_ids=same,
        fork_patch_ids={fork_commit("").sha: "p1"},
        config=SluiceConfig(),
    )
    assert list(found) == [UP[2].sha]
    assert found[UP[2].sha].method is RecognitionMethod.PATCH_ID


def test_configured_emergency_pattern() -> None:
    config = parse_config('recognition:\n  emergency_patterns: ["^\\\\[HOTFIX\\\\]"]\n')
    found = recognise(
        UP,
        [fork_commit(f"[HOTFIX] tma\n\n(cherry picked from commit {UP[1].sha})")],
        upstream_patch_ids={},
        fork_patch_ids={},
        config=config,
    )
    assert found[UP[1].sha].emergency is True


@pytest.mark.parametrize(
    ("subject", "title"),
    [
        ("[AMD] Fix x (#12)", "[amd] fix x"),
        ('Revert "[AMD] Fix x (#12)" (#13)', 'revert "[amd] fix x'),  # only compared, never shown
        ("'[AMD]  Fix   x (#12)'", "[amd] fix x"),
    ],
)
def test_normalise_title(subject: str, title: str) -> None:
    assert normalise_title(subject) == title
