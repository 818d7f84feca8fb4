"""What an ingestion PR and its classification comment say of upstream's commits: their subjects inert, so
upstream's `(#1234)` never links the fork's own #1234 and an `@name` in a subject pings nobody on the fork."""

from __future__ import annotations

from bot.core.config import SluiceConfig
from bot.core.ingestion import Links, PickedUnit, Unit, UnitKind, classification, pr_body
from bot.core.models import CommitReport, FileEvidence, FileReport, PickStatus
from tests.test_dashboard import planned

SUBJECT = "[AMD] Fix mfma layout | for gfx942 (cc @antiagainst) <b>x</b> (#4567)"
LINKS = Links(
    upstream_web="https://github.com/triton-lang/triton",
    fork_clone_url="https://github.com/meta/triton.git",
    fork_branch="main",
    upstream_clone_url="https://github.com/triton-lang/triton.git",
)


def picked_with(report: CommitReport) -> PickedUnit:
    unit = Unit("chain-abc", UnitKind.CHAIN, (planned(1, "lib/a.cpp", subject=SUBJECT),))
    return PickedUnit(unit, "main", None, (report,))


def inert(text: str) -> None:
    assert "@antiagainst" not in text and "(#4567)" not in text and "<b>" not in text  # no ping, link, HTML
    assert "@&#8203;antiagainst" in text and "(#&#8203;4567)" in text and "\\[AMD]" in text
    assert f"[`{planned(1).sha[:10]}`](https://github.com/triton-lang/triton/commit/" in text  # linked


def test_the_pr_body_and_its_needs_a_human_section_show_upstream_subjects_inert() -> None:
    blocked = CommitReport(
        upstream=planned(1).sha,
        subject=SUBJECT,
        status=PickStatus.NEEDS_HUMAN,
        tree=None,
        files=(
            FileReport(
                path="lib/a.cpp",
                cls="semantic",
                resolved=False,
                rule=None,
                reason="both sides changed it",
                hunks=(),
                evidence=FileEvidence(upstream=planned(1).sha, blame=(), component=None, symbol=None),
            ),
        ),
    )
    body = pr_body(picked_with(blocked), links=LINKS, upstream_parent=None)
    inert(body)
    heading = next(line for line in body.splitlines() if line.startswith("### Needs a human"))
    inert(heading)
    row = next(line for line in body.splitlines() if line.startswith("| 1 |"))
    assert row.count(" | ") == 4 and "mfma layout \\| for gfx942" in row  # one row, its `|` escaped


def test_the_classification_comment_shows_upstream_subjects_inert() -> None:
    clean = CommitReport(upstream=planned(1).sha, subject=SUBJECT, status=PickStatus.CLEAN, tree="t" * 40)
    comment = classification(picked_with(clean), config=SluiceConfig(), links=LINKS)
    inert(comment.render({}))


def test_the_local_commands_fetch_the_upstream_commit_before_picking_it() -> None:
    """A clone of the fork lacks the upstream commit that needs a human: cherry-pick alone is a bad object."""
    blocked = CommitReport(upstream=planned(1).sha, subject="s", status=PickStatus.NEEDS_HUMAN, tree=None)
    body = pr_body(picked_with(blocked), links=LINKS, upstream_parent=None)
    script = body.split("```sh\n")[1].split("```")[0].splitlines()
    assert script[:4] == [
        "git fetch https://github.com/meta/triton.git main",
        "git switch --create sluice/ingest/chain-abc FETCH_HEAD",
        f"git fetch https://github.com/triton-lang/triton.git {planned(1).sha}",
        f"git cherry-pick -x {planned(1).sha}",
    ]
