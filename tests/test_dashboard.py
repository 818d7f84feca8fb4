"""The dashboard renderer and tick reading: tables of models and bodies, no fakes."""

from __future__ import annotations

import datetime as dt

import pytest

from bot.core import dashboard as d
from bot.core.config import Component
from bot.core.ingestion import Links
from bot.core.lag import LagPoint
from bot.core.limits import GITHUB_TEXT_MAX_CHARS
from bot.core.models import (
    CommitInfo,
    Disposition,
    LowRiskBundle,
    Plan,
    PlannedCommit,
    RiskLevel,
    RiskReason,
    RiskyChain,
    StreamStatus,
)

NOW = dt.datetime(2026, 12, 1, 12, tzinfo=dt.UTC)
LINKS = Links(upstream_web="https://github.com/triton-lang/triton", fork_clone_url="x", fork_branch="main")
PLAIN = Links(upstream_web=None, fork_clone_url="x", fork_branch="main")


def sha(n: int) -> str:
    return f"{n:04x}" * 10  # distinct in its first ten characters too


def point(days_ago: float, *, behind: float | None = 2.0, backlog: int = 0, pending: int = 3) -> LagPoint:
    return LagPoint(
        fork="meta/triton",
        at=NOW - dt.timedelta(days=days_ago),
        days_behind=behind,
        backlog_commits=backlog,
        pending_commits=pending,
        oldest_missing_days=behind,
        open_ingestions=1,
        ingestion_tip=sha(1),
        upstream_head=sha(9),
    )


def model(**changes: object) -> d.DashboardModel:
    values: dict[str, object] = {"fork": "meta/triton", "now": NOW, "history": [point(0)], "links": PLAIN}
    return d.DashboardModel(**(values | changes))  # type: ignore[arg-type]


def row(body: str, name: str) -> list[str]:
    line = next(x for x in body.splitlines() if x.startswith(f"| {name} |"))
    return [cell.strip() for cell in line.strip("|").split("|")]


@pytest.mark.parametrize(
    ("history", "since_change", "over_week"),
    [
        ([point(0)], "—", "—"),  # the first run: nothing to compare with
        ([point(1, behind=1.5), point(0)], "↑ 0.5", "↑ 0.5"),
        ([point(1, behind=2.5), point(0)], "↓ 0.5", "↓ 0.5"),
        # runs that changed nothing do not reset the trend: the last change still shows
        ([point(2, behind=1.0), point(1), point(0.5), point(0)], "↑ 1", "↑ 1"),
        # the week compares with the value seven days ago: the newest point at least that old
        ([point(9, behind=5.0), point(3, behind=3.0), point(0)], "↓ 1", "↓ 3"),
        ([point(10, behind=6.0), point(8, behind=5.0), point(3, behind=3.0), point(0)], "↓ 1", "↓ 3"),
        ([point(9, behind=5.0), point(0)], "↓ 3", "↓ 3"),
        # no point is seven days old: the oldest one stands in
        ([point(6, behind=4.0), point(3, behind=3.0), point(0)], "↓ 1", "↓ 2"),
        ([point(1, behind=None), point(0)], "n/a → 2", "n/a → 2"),
    ],
)
def test_days_behind_trend(history: list[LagPoint], since_change: str, over_week: str) -> None:
    body = d.render(model(history=history))
    assert row(body, "Days Behind Upstream") == ["Days Behind Upstream", "2 days", since_change, over_week]


def test_a_run_that_changed_nothing_renders_the_same_body() -> None:
    before = d.render(model(history=[point(1, backlog=3), point(0.5)]))
    after = d.render(model(history=[point(1, backlog=3), point(0.5), point(0)]))
    assert before == after
    assert row(after, "Backlog Commits")[2] == "↓ 3"


def test_no_history_yet() -> None:
    assert "No ingestion run has finished yet." in d.render(model(history=[]))


def test_the_marker_tip_and_absent_sections() -> None:
    body = d.render(model(links=LINKS))
    assert body.startswith(d.MARKER)
    assert f"Ingestion tip: [`{sha(1)[:10]}`](https://github.com/triton-lang/triton/commit/{sha(1)})" in body
    for section in (
        "Open ingestions and emergency picks",
        "Risky chains",
        "Backlog",
        "Waivers",
        "Holds",
        "Safety throttle",
    ):
        assert f"## {section}\n\nnone\n" in body, section
    assert "## Paused\n\nnone: automatic ingestion runs" in body


def test_open_ingestions_with_their_tier_states() -> None:
    ingestions = [
        d.OpenIngestion("bundle-aaaa", 7, False, 3, {"sluice/L1": "success", "sluice/L2": "queued"}),
        d.OpenIngestion("chain-bbbb", 9, True, 1),
    ]
    body = d.render(model(ingestions=ingestions))
    assert "| ingestion | unit | commits | L1 | L2 | L3 | gate |" in body
    assert "| #7 | `bundle-aaaa` | 3 | success | queued | — | — |" in body
    assert "| #9 (needs a human) | `chain-bbbb` | 1 | — | — | — | — |" in body


def planned(
    n: int, *files: str, subject: str = "a change", reasons: tuple[RiskReason, ...] = ()
) -> PlannedCommit:
    return PlannedCommit(
        sha=sha(n),
        subject=subject,
        author="a",
        committer_time=n,
        changed_lines=1,
        files=files,
        symbols=(),
        risk=RiskLevel.HIGH,
        reasons=reasons,
        depends_on=(),
    )


COMPONENTS = (
    Component(name="core-passes", paths=("lib/Dialect/**",), risk=RiskLevel.HIGH, owners=("@alice", "@bob")),
    Component(name="runtime", paths=("python/triton/runtime/**",), risk=RiskLevel.HIGH, owners=("@carol",)),
    Component(name="docs", paths=("docs/**",), risk=RiskLevel.LOW),
)


@pytest.mark.parametrize(
    ("files", "components", "owners"),
    [
        (("lib/Dialect/X.cpp",), "core-passes", "@alice, @bob"),
        (
            ("lib/Dialect/X.cpp", "python/triton/runtime/jit.py"),
            "core-passes, runtime",
            "@alice, @bob, @carol",
        ),
        (("docs/a.md",), "docs", "no owner configured"),
        (("elsewhere.txt",), "—", "no owner configured"),
    ],
)
def test_risky_chains_with_their_owners(files: tuple[str, ...], components: str, owners: str) -> None:
    chain = RiskyChain(id="chain-0000000002", root=sha(2), risk=RiskLevel.HIGH, commits=(planned(2, *files),))
    empty = RiskyChain(id="chain-0000000003", root=sha(3), risk=RiskLevel.HIGH)  # all ingested: not shown
    body = d.render(model(chains=[chain, empty], components=COMPONENTS))
    assert row(body, "`chain-0000000002`") == ["`chain-0000000002`", "high", "1", components, owners]
    assert "chain-0000000003" not in body


def test_backlog_lines_carry_a_box_and_a_marker_that_ticks_read_back() -> None:
    backlog = [
        d.BacklogCommit(sha(4), "[Pipeliner] fix", "in chain-x"),
        d.BacklogCommit(sha(5), "b", "deferred"),
    ]
    body = d.render(model(backlog=backlog))
    assert f"- [ ] `{sha(4)[:10]}` \\[Pipeliner] fix (in chain-x) <!-- sluice:retry {sha(4)} -->" in body
    assert d.ticks(body) == {sha(4): False, sha(5): False}
    edited = body.replace(f"- [ ] `{sha(5)[:10]}`", f"- [x] `{sha(5)[:10]}`").replace("\n", "\r\n")
    assert d.newly_ticked(body, edited) == (sha(5),)
    assert d.newly_ticked(edited, edited) == ()  # already ticked before: not new
    assert d.newly_ticked(edited, body) == ()  # unticking retries nothing


@pytest.mark.parametrize(
    ("subject", "shown"),
    [
        ("fix <!-- sluice:retry " + sha(7) + " -->", "fix &lt;!-- sluice:retry " + sha(7) + " --&gt;"),
        ("thanks @octocat (#1872)", "thanks @&#8203;octocat (#&#8203;1872)"),
        ("use `x` & [y]", "use 'x' &amp; \\[y]"),
        ("\\[approve](https://evil.example)", "\\\\\\[approve](https://evil.example)"),  # not `\\[`: a link
    ],
)
def test_subjects_are_inert(subject: str, shown: str) -> None:
    body = d.render(model(backlog=[d.BacklogCommit(sha(4), subject, "deferred")]))
    assert shown in body
    assert d.ticks(body) == {sha(4): False}  # a subject cannot add a line that a tick would retry


@pytest.mark.parametrize(
    ("before", "after", "ticked"),
    [
        (f"- [ ] x <!-- sluice:retry {sha(1)} -->", f"- [X] x <!-- sluice:retry {sha(1)} -->", (sha(1),)),
        ("", f"- [x] x <!-- sluice:retry {sha(1)} -->", ()),  # a line a person added: never listed
        (f"- [ ] x <!-- sluice:retry {sha(1)} -->", f"  - [x] x <!-- sluice:retry {sha(1)} -->", ()),
        (f"- [ ] x <!-- sluice:retry {sha(1)[:39]} -->", f"- [x] x <!-- sluice:retry {sha(1)[:39]} -->", ()),
    ],
)
def test_newly_ticked(before: str, after: str, ticked: tuple[str, ...]) -> None:
    assert d.newly_ticked(before, after) == ticked


def test_a_long_backlog_is_cut_and_the_body_fits_github() -> None:
    backlog = [d.BacklogCommit(sha(n), "x" * 300, "deferred") for n in range(2000)]
    body = d.render(model(backlog=backlog))
    assert len(body) < GITHUB_TEXT_MAX_CHARS
    shown = len(d.ticks(body))
    assert 0 < shown <= d.MAX_BACKLOG_LINES
    assert f"… and {2000 - shown} more" in body and body.rstrip().endswith("none")  # nothing cut after it
    assert "x" * (d.MAX_SUBJECT + 1) not in body


def test_a_huge_plan_keeps_every_section_and_the_body_fits_github() -> None:
    files = ("lib/Dialect/X.cpp", "python/triton/runtime/jit.py")
    chains = [
        RiskyChain(id=f"chain-{n:010d}", root=sha(n), risk=RiskLevel.HIGH, commits=(planned(n, *files),))
        for n in range(2000)
    ]
    body = d.render(
        model(
            chains=chains,
            components=COMPONENTS,
            backlog=[d.BacklogCommit(sha(n), "x" * 300, "deferred") for n in range(2000)],
            paused=d.PauseState("dave", "LLVM bump week", NOW),
            throttle=d.ThrottleState(failures=1, limit=3, tripped=False),
        )
    )
    assert len(body) < GITHUB_TEXT_MAX_CHARS and "(cut:" not in body
    sections = (
        "Open ingestions and emergency picks",
        "Risky chains",
        "Backlog",
        "Waivers",
        "Holds",
        "L3 signoffs",
    )
    for section in (*sections, "Paused", "Safety throttle"):
        assert f"## {section}\n" in body, section
    shown = sum(1 for line in body.splitlines() if line.startswith("| `chain-"))
    assert 0 < shown < 2000 and f"{2000 - shown} more chains" in body
    assert "Paused by @dave since 2026-12-01: LLVM bump week" in body
    assert "armed (1 of 3 failures in a row)" in body


def test_waivers_holds_pause_and_throttle_when_given() -> None:
    waivers = [
        d.WaiverLine(7, "sluice/L2", "flaky GPU", "alice", NOW + dt.timedelta(days=3)),
        d.WaiverLine(8, "sluice/L3", "perf noise", "bob", NOW - dt.timedelta(days=1)),
    ]
    body = d.render(
        model(
            waivers=waivers,
            holds=[d.HoldLine(7, "carol", "wait for the release", NOW)],
            paused=d.PauseState("dave", "LLVM bump week", NOW),
            throttle=d.ThrottleState(failures=3, limit=3, tripped=True),
        )
    )
    assert "- #8 sluice/L3: perf noise (by @bob, expired)" in body
    assert "- #7 sluice/L2: flaky GPU (by @alice, expires 2026-12-04)" in body
    assert body.index("#8 sluice/L3") < body.index("#7 sluice/L2")  # soonest expiry first
    assert "- #7: held by @carol since 2026-12-01: wait for the release" in body
    assert "Paused by @dave since 2026-12-01: LLVM bump week" in body
    assert "tripped: automatic ingestion stopped (3 of 3 failures in a row)" in body


def info(n: int, subject: str) -> CommitInfo:
    return CommitInfo(
        sha=sha(n),
        parents=(sha(n - 1),),
        author_name="a",
        author_email="a@x",
        author_time=n,
        committer_time=n,
        message=subject,
    )


def status(tip: str | None) -> StreamStatus:
    return StreamStatus(
        upstream_head=sha(6),
        upstream_head_time=6,
        fork_head=sha(100),
        ingestion_tip=tip,
        ingestion_tip_time=None,
        days_behind=None,
        backlog_commits=0,
        pending_commits=0,
        ingested_commits=0,
        emergency_commits=0,
        patch_stack_commits=0,
        recognised_by={},
    )


@pytest.mark.parametrize(
    ("tip", "held", "backlog"),
    [
        # the tip passed commits 2 (in a chain) and 4 (not in any unit: ingested by a pick)
        (sha(5), {}, [(sha(2), "in chain-2")]),
        (sha(5), {sha(6): Disposition.DEFERRED}, [(sha(2), "in chain-2"), (sha(6), "deferred")]),
        (sha(5), {sha(2): Disposition.SKIPPED}, []),  # won't port: not backlog
        (None, {}, []),  # the tip is an ancestor of fork trunk: nothing missing is behind it
        (sha(99), {sha(3): Disposition.DEFERRED}, [(sha(3), "deferred")]),
    ],
)
def test_backlog_of(tip: str | None, held: dict[str, Disposition], backlog: list[tuple[str, str]]) -> None:
    stream = [info(n, f"c{n}") for n in range(2, 7)]
    unplanned = {s for s, h in held.items() if h == Disposition.SKIPPED}
    chain_commits = (planned(2, "a"),) if sha(2) not in unplanned else ()
    plan = Plan(
        fork_ref="main",
        fork_head=sha(100),
        upstream_ref="upstream/main",
        upstream_head=sha(6),
        config_digest="x",
        status=status(tip),
        bundles=(LowRiskBundle(id="bundle-6", commits=(planned(6, "b"),) if sha(6) not in held else ()),),
        chains=(RiskyChain(id="chain-2", root=sha(2), risk=RiskLevel.HIGH, commits=chain_commits),),
        held=held,
    )
    assert [(c.sha, c.state) for c in d.backlog_of(stream, plan)] == backlog
