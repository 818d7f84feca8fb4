"""Recognising picks made before and by Sluice (pure)."""

from __future__ import annotations

import hashlib

import pytest

from bot.core.config import ConfigError, SluiceConfig, parse_config
from bot.core.models import CommitInfo, RecognitionMethod
from bot.core.recognise import ingestion_commits, normalise_title, recognise, unmatched_picks

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
        (  # a regular pick from an upstream that is itself a Sluice fork, of one of its emergency picks
            f"Fix lds\n\nUpstream-Commit: {'7' * 40}\nSluice-Kind: emergency\n"
            f"Sluice-Ingestion: emergency-7777777777\n"
            f"Upstream-Commit: {UP[0].sha}\nSluice-Ingestion: bundle-{UP[0].sha[:10]}",
            0,
            RecognitionMethod.TRAILER,
            False,
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


def test_a_pick_trunk_reverted_since_is_not_had_and_a_revert_reverted_in_turn_gives_it_back() -> None:
    """The ingestion PR's own way back: `git revert` of its picks (`This reverts commit <pick>.`). The fork no
    longer has the upstream commit: it is pending again and no ingestion tip. Neither the pick (by its trailer
    or its patch-id) nor its revert (whose subject quotes the pick's) counts as one."""
    config = parse_config('recognition:\n  subject_patterns: ["\\\\[Cherry-pick\\\\] (?P<title>.*)"]\n')
    kept = fork_commit(f"[AMD] Fix lds bank conflicts (#4312)\n\nUpstream-Commit: {UP[0].sha}", 1)
    pick = fork_commit(f"[NVIDIA] Use TMA for stores (#4313)\n\nUpstream-Commit: {UP[1].sha}", 2)
    twin = fork_commit("[Cherry-pick] [FRONTEND] Faster store (#4314)", 3)  # a pick by patch-id
    revert = fork_commit(
        f'Revert "[NVIDIA] Use TMA for stores (#4313)"\n\nThis reverts commit {pick.sha}.', 4
    )
    undo = fork_commit(
        f'Revert "[Cherry-pick] [FRONTEND] Faster store (#4314)"\n\nThis reverts commit {twin.sha}.', 5
    )

    def had(*fork: CommitInfo) -> list[str]:
        ids = {UP[2].sha: "p", twin.sha: "p"}
        found = recognise(UP, list(fork), upstream_patch_ids=ids, fork_patch_ids=ids, config=config)
        return sorted(found)

    assert had(kept, pick, twin) == sorted([UP[0].sha, UP[1].sha, UP[2].sha])
    assert had(kept, pick, twin, revert, undo) == [UP[0].sha]
    again = fork_commit(f'Revert "Revert ..."\n\nThis reverts commit {revert.sha}.', 6)
    assert had(kept, pick, twin, revert, undo, again) == sorted([UP[0].sha, UP[1].sha])


@pytest.mark.parametrize("emergency_first", [True, False])
def test_a_regular_pick_of_a_commit_picked_in_an_emergency_too_is_what_counts(emergency_first: bool) -> None:
    """The emergency pick never moves the ingestion tip; the bundle that later took the same commit does,
    whichever of the two the walk meets first."""
    up = UP[1].sha
    emergency = fork_commit(f"Hotfix\n\nUpstream-Commit: {up}\nSluice-Kind: emergency", 1)
    regular = fork_commit(f"[NVIDIA] Use TMA for stores (#4313)\n\nUpstream-Commit: {up}", 2)
    fork = [emergency, regular] if emergency_first else [regular, emergency]
    found = recognise(UP, fork, upstream_patch_ids={}, fork_patch_ids={}, config=SluiceConfig())
    assert (found[up].emergency, found[up].fork_sha) == (False, regular.sha)


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


def test_a_bundle_pick_recognises_every_upstream_commit_it_names() -> None:
    bundle = fork_commit("[Cherry-pick][BUNDLE] Cherry-pick 2 upstream(#4313 #4312) (#4314)")
    found = recognise(UP, [bundle], upstream_patch_ids={}, fork_patch_ids={}, config=SluiceConfig())

    assert sorted(found) == sorted([UP[0].sha, UP[1].sha])  # not #4314: that is the fork PR's own number
    assert {(r.method, r.fork_sha) for r in found.values()} == {
        (RecognitionMethod.SUBJECT_PATTERN, bundle.sha)
    }


def test_the_fork_prs_own_number_is_not_the_upstream_pr() -> None:
    """An unquoted pick whose only `(#N)` is the fork PR's: the unique title names the upstream commit."""
    pick = fork_commit("[Cherry-pick] [AMD] Fix lds bank conflicts (#4313)")
    found = recognise(UP, [pick], upstream_patch_ids={}, fork_patch_ids={}, config=SluiceConfig())

    assert list(found) == [UP[0].sha]


def test_the_fork_prs_own_number_never_names_an_unrelated_upstream_commit() -> None:
    """The pick lost upstream's tags and number (squash-merged as fork PR #4314): its only number is
    upstream's unrelated #4314, whose title disagrees. The title, its tags aside, names the commit."""
    pick = fork_commit("[Cherry-pick] Fix lds bank conflicts (#4314)")
    found = recognise(UP, [pick], upstream_patch_ids={}, fork_patch_ids={}, config=SluiceConfig())
    assert list(found) == [UP[0].sha]  # "[AMD] Fix lds bank conflicts (#4312)", not "Faster store (#4314)"

    renamed = fork_commit("[Cherry-pick] Port of an upstream fix (#4314)")  # no title agrees: nothing
    assert recognise(UP, [renamed], upstream_patch_ids={}, fork_patch_ids={}, config=SluiceConfig()) == {}
    unmatched, _ = unmatched_picks([renamed], {}, ancestors=(), config=SluiceConfig())
    assert [u.fork_sha for u in unmatched] == [renamed.sha]  # listed by `sluice status --audit`


def test_a_fork_patch_older_than_its_upstream_twin_went_upstream() -> None:
    """Same patch-id, but the fork commit came first: the fork's patch, not an ingestion."""
    ids = {UP[1].sha: "p1"}
    older = fork_commit("[XPU] Use TMA for stores", at=0)
    found = recognise(
        UP, [older], upstream_patch_ids=ids, fork_patch_ids={older.sha: "p1"}, config=SluiceConfig()
    )

    assert found[UP[1].sha].method is RecognitionMethod.UPSTREAMED
    assert ingestion_commits(found) == frozenset()  # it stays in the patch stack


@pytest.mark.parametrize(
    "evidence",
    [
        "Upstream-Commit: " + "0" * 40 + "\nSluice-Ingestion: 7",
        "(cherry picked from commit " + "0" * 12 + ")",
    ],
)
def test_a_pick_of_a_commit_upstream_has_since_rewritten_is_still_a_pick(evidence: str) -> None:
    """Upstream force-pushed: the commit the fork picked is gone, its twin (the same diff) was committed
    after the pick. The pick says it is one: an ingestion of the twin, not a fork patch that went upstream."""
    ids = {UP[1].sha: "p1"}
    pick = fork_commit(f"[NVIDIA] Use TMA for stores (#4313)\n\n{evidence}", at=0)
    found = recognise(
        UP, [pick], upstream_patch_ids=ids, fork_patch_ids={pick.sha: "p1"}, config=SluiceConfig()
    )

    assert found[UP[1].sha].method is RecognitionMethod.PATCH_ID
    assert ingestion_commits(found) == frozenset({pick.sha})  # it leaves the patch stack


def test_picks_that_matched_nothing_are_listed() -> None:
    picks = [
        fork_commit("[Cherry-pick] 'Something upstream never had (#9999)'", 1),
        fork_commit("Backport the TMA fix", 2),
        fork_commit("[TLX] Warp specialise (#4313)", 3),  # the fork's own work
        fork_commit("[Cherry-pick] '[AMD] Fix lds bank conflicts (#4312)'", 4),  # reached by ancestry
    ]
    unmatched, reached = unmatched_picks(picks, {}, ancestors=UP[:1], config=SluiceConfig())

    assert [(u.fork_sha, u.evidence) for u in unmatched] == [
        (picks[0].sha, "a subject pattern"),
        (picks[1].sha, "its subject"),
    ]
    assert reached == 1


@pytest.mark.parametrize(
    ("section", "pattern", "field"),
    [
        ("subject_patterns", r"^(?P<title>(a|aa)+)$", "recognition.subject_patterns.0"),
        ("emergency_patterns", r"^(a|aa)+$", "recognition.emergency_patterns.0"),
    ],
)
def test_a_pattern_that_backtracks_catastrophically_is_refused_by_name_not_left_running(
    section: str, pattern: str, field: str
) -> None:
    """A fork commit copies an upstream message: a configured pattern must not hold an ingestion for hours
    on it. The search stops at its bound and the error names the pattern."""
    config = SluiceConfig.model_validate({"recognition": {section: [pattern]}})
    hostile = fork_commit("a" * 40 + "!\n\n" + "a" * 40 + "!")

    with pytest.raises(ConfigError) as refused:
        recognise(UP, [hostile], upstream_patch_ids={}, fork_patch_ids={}, config=config)

    assert [p.field for p in refused.value.problems] == [field]
    assert "backtracks catastrophically" in refused.value.problems[0].message
