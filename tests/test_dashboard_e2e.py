"""End to end: the dashboard issue across ingestion runs, and ticking its backlog boxes (sim, git, DB)."""

from __future__ import annotations

import datetime as dt

import pytest

from bot.core import dashboard
from bot.core.gate import Waiver
from bot.core.ingestion import CheckName
from bot.core.models import Disposition
from bot.db.gates import GateStore
from bot.db.jobs import JobQueue
from bot.db.lag import LagHistory
from bot.db.registry import Registry
from handlers import issues
from tests.support.github_sim import Issue
from tests.test_ingest_e2e import (  # the rig: a served sim and `sluice serve` over loopback
    CORE_PASS,
    FORK,
    SECRET,
    UPSTREAM,
    Rig,
    ingest_runs,
    installation_event,
    rig,  # noqa: F401  (the fixture)
    upstream_commits,
    writes_to_the_fork,
)


def dashboards(served: Rig) -> list[Issue]:
    """Every issue of the fork, open or closed, that carries the dashboard's marker."""
    issues = served.sim.issues[FORK].values()
    return [i for i in issues if not i.is_pull and dashboard.MARKER in (i.body or "")]


def the_dashboard(served: Rig) -> Issue:
    (issue,) = dashboards(served)
    assert issue.state == "open" and served.labels(issue.number) == [dashboard.LABEL]
    return issue


def dashboard_writes(served: Rig, since: int = 0) -> list[tuple[str, str]]:
    """Sluice's REST calls that created or changed an issue of the fork (not a PR), since request `since`."""
    issues = {n for n, i in served.sim.issues[FORK].items() if not i.is_pull}
    return [
        (method, path)
        for method, path in writes_to_the_fork(served.sim.requests[since:])
        if path == f"/repos/{FORK}/issues" or path in {f"/repos/{FORK}/issues/{n}" for n in issues}
    ]


def tick(body: str, *shas: str) -> str:
    """`body` with the boxes of `shas` ticked, as a browser sends the edited text (CRLF)."""
    for sha in shas:
        ticked = body.replace(f"- [ ] `{sha[:10]}`", f"- [x] `{sha[:10]}`")
        assert ticked != body, f"{sha[:10]} has no box"
        body = ticked
    return body.replace("\n", "\r\n")


async def start(served: Rig) -> int:
    fork_installation, upstream_installation = served.sim.install(FORK), served.sim.install(UPSTREAM)
    assert await installation_event(served, FORK, fork_installation) == 202
    assert await installation_event(served, UPSTREAM, upstream_installation) == 202
    await served.settle()
    return fork_installation


async def test_the_dashboard_is_edited_in_place_across_ten_ingestion_runs(rig: Rig) -> None:  # noqa: F811
    await upstream_commits(rig, ("docs: first", {"docs/guide.md": "guide 0\n"}))
    await start(rig)
    number = the_dashboard(rig).number
    assert "| Pending upstream commits | 1 | — | — |" in the_dashboard(rig).body
    runs, hooks = ingest_runs(rig), len(rig.sim.deliveries)
    for n in range(1, 11):
        await upstream_commits(rig, (f"docs: change {n}", {f"docs/page{n}.md": f"page {n}\n"}))
        await rig.settle()
        issue = the_dashboard(rig)  # one dashboard, open, the same issue every time
        assert issue.number == number
        assert f"| Pending upstream commits | {n + 1} | ↑ 1 | ↑ {n} |" in (issue.body or "")
    assert ingest_runs(rig) - runs == 10  # one per push: Sluice's own edits (issues webhooks) start nothing
    own_edits = [d for d in rig.sim.deliveries[hooks:] if d["event"] == "issues"]
    assert len(own_edits) == 10 and {d["status"] for d in own_edits} == {202}
    assert len(LagHistory(rig.store).history(FORK)) == ingest_runs(rig)
    (pull,) = rig.pulls()
    assert f"| #{pull.number} | `{pull.head_ref.removeprefix('sluice/ingest/')}` | 11 | queued |" in (
        the_dashboard(rig).body or ""
    )
    creations = [w for w in dashboard_writes(rig) if w == ("POST", f"/repos/{FORK}/issues")]
    assert creations == [("POST", f"/repos/{FORK}/issues")]  # created once, edited after

    # A run that changes nothing (the same push again) writes nothing, the dashboard included. (Once first:
    # the dashboard catches up with the gate's and the tiers' check runs, which moved after the last run.)
    head = rig.sim.git(UPSTREAM, "rev-parse", "main").strip()
    payload = rig.sim.push_payload(UPSTREAM, "refs/heads/main", head, head)
    await rig.sim.deliver(f"{rig.bot_url}/webhook", "push", payload, secret=SECRET)
    await rig.settle()
    since, body = len(rig.sim.requests), the_dashboard(rig).body
    await rig.sim.deliver(f"{rig.bot_url}/webhook", "push", payload, secret=SECRET)
    await rig.settle()
    looked = {
        s for m, p, s in rig.sim.requests[since:] if (m, p.split("?")[0]) == ("GET", f"/repos/{FORK}/issues")
    }
    assert looked & {200, 304}  # it read the dashboard again (304: unchanged since, its cached copy)
    assert writes_to_the_fork(rig.sim.requests[since:]) == []
    assert the_dashboard(rig).body == body


async def test_a_dashboard_a_person_closed_is_reopened_not_duplicated(rig: Rig) -> None:  # noqa: F811
    await upstream_commits(rig, ("docs: first", {"docs/guide.md": "guide 1\n"}))
    await start(rig)
    number = the_dashboard(rig).number
    rig.sim.close_issue(FORK, number, user="dev")
    await upstream_commits(rig, ("docs: second", {"docs/more.md": "more\n"}))
    await rig.settle()
    assert the_dashboard(rig).number == number
    assert "| Pending upstream commits | 2 |" in (the_dashboard(rig).body or "")


async def test_a_dashboard_whose_label_a_person_took_off_gets_it_back_not_a_twin(rig: Rig) -> None:  # noqa: F811
    await upstream_commits(rig, ("docs: first", {"docs/guide.md": "guide 2\n"}))
    await start(rig)
    number = the_dashboard(rig).number
    rig.sim.set_labels(FORK, number, ["triage"])
    await upstream_commits(rig, ("docs: second", {"docs/more.md": "more\n"}))
    await rig.settle()
    (issue,) = dashboards(rig)
    assert issue.number == number and issue.state == "open"
    assert rig.labels(number) == [dashboard.LABEL, "triage"]  # the person's label kept, Sluice's put back
    assert "| Pending upstream commits | 2 |" in (issue.body or "")

    rig.sim.set_labels(FORK, number, [])  # and closed too: reopened, relabelled
    rig.sim.close_issue(FORK, number, user="dev")
    await upstream_commits(rig, ("docs: third", {"docs/third.md": "third\n"}))
    await rig.settle()
    assert the_dashboard(rig).number == number
    assert "| Pending upstream commits | 3 |" in (the_dashboard(rig).body or "")

    # A person who makes the dashboard their own issue (the marker gone) keeps it: Sluice opens a new one.
    rig.sim.set_labels(FORK, number, [])
    rig.sim.edit_issue(FORK, number, body="notes of mine", user="dev")
    await upstream_commits(rig, ("docs: fourth", {"docs/fourth.md": "fourth\n"}))
    await rig.settle()
    assert the_dashboard(rig).number != number
    assert rig.sim.issues[FORK][number].body == "notes of mine" and rig.labels(number) == []
    assert Registry(rig.store).dashboard_issue(FORK) == the_dashboard(rig).number


async def test_a_persons_issue_that_quotes_the_marker_is_neither_edited_nor_closed(rig: Rig) -> None:  # noqa: F811
    """Anyone may open an issue, and anyone who may label it could give it the dashboard's label: Sluice
    keeps to the issues it opened, and a person's text is never overwritten or closed as a duplicate."""
    body = f"How do I read this?\n\n> {dashboard.MARKER}\n> the dashboard said 3 days"
    copy = rig.sim.open_issue(FORK, title="A question on the dashboard", body=body, user="dev")
    rig.sim.labels[(FORK, copy)] = [dashboard.LABEL]
    await upstream_commits(rig, ("docs: first", {"docs/guide.md": "guide 1\n"}))
    await start(rig)
    kept = rig.sim.issues[FORK][copy]
    assert (kept.state, kept.body, kept.user) == ("open", body, "dev")
    ours = [i for i in dashboards(rig) if i.number != copy]
    assert [(i.user, i.state) for i in ours] == [(rig.sim.bot_login, "open")]


async def backlog_scenario(served: Rig) -> tuple[str, str, str]:
    """Upstream: a risky commit, a docs commit, a deferred docs commit. The docs bundle merges, so the tip
    passes the risky one (backlog, in its chain); the deferred one waits in the backlog too."""
    risky, low, deferred = await upstream_commits(
        served,
        ("[Pipeliner] overlap loads", {CORE_PASS: "void pipeline() {\n  step();\n  overlap();\n}\n"}),
        ("docs: clarify", {"docs/guide.md": "guide, clarified\n"}),
        ("docs: later", {"docs/later.md": "later\n"}),
    )
    served.store.set_disposition(
        FORK, deferred, Disposition.DEFERRED, reason="after the release", approver="dev", at=served.sim.now()
    )  # as `sluice defer` records it
    installation = await start(served)
    bundle = next(p for p in served.pulls() if "bundle" in p.head_ref)
    await served.merge(installation, bundle.number)
    await served.settle()
    assert dashboard.ticks(the_dashboard(served).body or "") == {risky: False, deferred: False}
    assert LagHistory(served.store).history(FORK)[-1].backlog_commits == 1  # the risky commit, behind the tip
    return risky, low, deferred


async def test_ticking_backlog_boxes_retries_those_commits_and_unticks_them(rig: Rig) -> None:  # noqa: F811
    risky, _, deferred = await backlog_scenario(rig)
    rig.sim.set_permission(FORK, "dev", "maintain")
    issue, runs = the_dashboard(rig), ingest_runs(rig)
    rig.sim.edit_issue(FORK, issue.number, body=tick(issue.body or "", risky, deferred), user="dev")
    await rig.settle()
    assert ingest_runs(rig) == runs + 1  # one retry for both ticks
    assert rig.store.dispositions(FORK)[deferred].disposition != Disposition.DEFERRED
    assert any(deferred[:10] in (p.body or "") for p in rig.pulls())  # no longer deferred: ingested again
    body = the_dashboard(rig).body or ""
    assert dashboard.ticks(body) == {risky: False}  # unticked; the deferred one left the backlog
    assert "[x]" not in body


def answers(served: Rig, number: int) -> list[str]:
    """Sluice's comments on the issue `number` (the dashboard's own text is its body, not a comment)."""
    comments = served.sim.comment_objects(FORK, number)
    return [c["body"] for c in comments if c["user"]["login"] == served.sim.bot_login]


async def test_a_tick_by_a_read_only_user_is_answered_and_unticked_and_retries_nothing(rig: Rig) -> None:  # noqa: F811
    risky, _, deferred = await backlog_scenario(rig)
    rig.sim.set_permission(FORK, "reader", "read")
    issue, runs = the_dashboard(rig), ingest_runs(rig)
    since, shown = len(rig.sim.requests), issue.body or ""
    for _ in range(2):  # ticking again edits the one answer
        rig.sim.edit_issue(FORK, issue.number, body=tick(shown, deferred), user="reader")
        await rig.settle()
        assert dashboard.ticks(the_dashboard(rig).body or "") == {risky: False, deferred: False}
    assert the_dashboard(rig).body == shown  # only the box changed back: the rest is as Sluice drew it
    (answer,) = answers(rig, issue.number)
    assert answer.startswith("<!-- sluice:refused-tick:reader -->\n@reader: Sluice did not retry")
    assert f"`{deferred[:10]}`" in answer and f"@reader has read access to {FORK}" in answer
    assert "needs write access" in answer and "The box is unticked again" in answer
    assert "ask someone with write access" in answer
    assert ingest_runs(rig) == runs and JobQueue(rig.store).counts()["queued"] == 0
    assert rig.store.dispositions(FORK)[deferred].disposition == Disposition.DEFERRED
    asked = [p for m, p, _ in rig.sim.requests[since:] if "/permission" in p]
    assert asked == [f"/repos/{FORK}/collaborators/reader/permission"] * 2

    # A sender no GitHub login spells so (this one would close the marker's HTML comment) is not answered;
    # the box is unticked all the same.
    rig.sim.edit_issue(FORK, issue.number, body=tick(shown, risky), user="x --><img src=x>")
    await rig.settle()
    assert dashboard.ticks(the_dashboard(rig).body or "")[risky] is False
    assert len(answers(rig, issue.number)) == 1 and ingest_runs(rig) == runs


@pytest.mark.parametrize(
    ("body", "shas", "expected"),
    [
        ("- [x] `aaa` a <!-- sluice:retry {a} -->\r\n", "a", "- [ ] `aaa` a <!-- sluice:retry {a} -->\n"),
        (
            "- [X] x <!-- sluice:retry {a} -->\n- [x] y <!-- sluice:retry {b} -->",
            "b",
            "- [X] x <!-- sluice:retry {a} -->\n- [ ] y <!-- sluice:retry {b} -->",
        ),
        ("- [x] [x] <!-- sluice:retry {a} -->", "ab", "- [ ] [x] <!-- sluice:retry {a} -->"),  # the box only
        ("text - [x] <!-- sluice:retry {a} -->", "a", "text - [x] <!-- sluice:retry {a} -->"),  # no box line
    ],
)
def test_unticking_changes_only_the_boxes_of_the_commits_named(body: str, shas: str, expected: str) -> None:
    named = {"a": "a" * 40, "b": "b" * 40}
    assert issues.unticked(body.format(**named), {named[s] for s in shas}) == expected.format(**named)


async def test_a_tick_by_a_bot_retries_nothing_and_is_not_answered(rig: Rig) -> None:  # noqa: F811
    risky, _, deferred = await backlog_scenario(rig)
    issue, runs = the_dashboard(rig), ingest_runs(rig)
    since, shown = len(rig.sim.requests), issue.body or ""
    for user in ("renovate[bot]", rig.sim.bot_login):
        rig.sim.edit_issue(FORK, issue.number, body=shown, user="dev")  # unticked again, by a person
        rig.sim.edit_issue(FORK, issue.number, body=tick(shown, deferred), user=user)
        await rig.settle()
        assert dashboard.ticks(the_dashboard(rig).body or "")[deferred] is True  # nothing ran to untick it
    assert answers(rig, issue.number) == []
    assert ingest_runs(rig) == runs and JobQueue(rig.store).counts()["queued"] == 0
    assert rig.store.dispositions(FORK)[deferred].disposition == Disposition.DEFERRED
    assert not [p for m, p, _ in rig.sim.requests[since:] if "/permission" in p]  # GitHub was never asked
    assert risky in dashboard.ticks(the_dashboard(rig).body or "")


async def test_a_merged_ingestion_pr_leaves_the_open_ingestions(rig: Rig) -> None:  # noqa: F811
    await backlog_scenario(rig)  # its bundle merged
    bundle = next(p for p in rig.pulls("all") if "bundle" in p.head_ref and p.merged)
    body = the_dashboard(rig).body or ""
    shown = body[body.index("## Open ingestions") : body.index("## Risky chains")]
    assert f"| #{bundle.number} |" not in shown
    assert all(f"| #{p.number} |" in shown for p in rig.pulls())
    (merged,) = [r for r in Registry(rig.store).ingestions(FORK) if r.pr_number == bundle.number]
    assert merged.state == "closed"  # the registry closed its record: it counts as open no longer
    live = [r for r in Registry(rig.store).ingestions(FORK) if r.state in ("open", "blocked")]
    assert {r.pr_number for r in live if r.state == "open"} == {p.number for p in rig.pulls()}
    assert LagHistory(rig.store).history(FORK)[-1].open_ingestions == len(live) == len(rig.pulls())


async def test_the_gates_waivers_holds_pause_and_throttle_show_after_the_next_run(rig: Rig) -> None:  # noqa: F811
    await upstream_commits(rig, ("docs: first", {"docs/guide.md": "guide 2\n"}))
    await start(rig)
    body = the_dashboard(rig).body or ""
    assert "## Waivers\n\nnone" in body and "## Holds\n\nnone" in body
    assert "## Paused\n\nnone" in body and "## Safety throttle\n\nnone" in body
    (pull,) = rig.pulls()
    gates, now = GateStore(rig.store), rig.sim.now()
    until = now + dt.timedelta(days=3)
    head = rig.sim.git(FORK, "rev-parse", pull.head_ref).strip()
    waiver = Waiver(
        CheckName.L2, "alice", "flaky runner", "pin the driver", until, granted_by="alice", head_sha=head
    )
    gates.add_waiver(FORK, pull.number, waiver, at=now)  # as `/waive`, `/hold` and a failed gate record them
    gates.set_hold(FORK, pull.number, by="bob", reason="release freeze", at=now)
    gates.record_failure(
        FORK,
        pull.number,
        head_sha=rig.sim.git(FORK, "rev-parse", pull.head_ref).strip(),
        tier="sluice/L2",
        at=now,
    )
    gates.pause(FORK, by="carol", reason="LLVM bump week", at=now)
    runs = ingest_runs(rig)
    await upstream_commits(rig, ("docs: second", {"docs/more.md": "more 2\n"}))
    await rig.settle()
    assert ingest_runs(rig) == runs + 1
    body = the_dashboard(rig).body or ""
    assert f"- #{pull.number} L2: flaky runner (by @alice, expires {until.date().isoformat()})" in body
    assert f"- #{pull.number}: held by @bob since {now.date().isoformat()}: release freeze" in body
    assert f"Paused by @carol since {now.date().isoformat()}: LLVM bump week (`/resume`)" in body
    assert "armed (1 of 3 failures in a row)" in body
    assert [p.number for p in rig.pulls()] == [pull.number] and "more 2" not in (pull.body or "")

    gates.clear_hold(FORK, pull.number)  # the next run shows the hold gone (still paused: nothing applied)
    await upstream_commits(rig, ("docs: third", {"docs/third.md": "third\n"}))
    await rig.settle()
    body = the_dashboard(rig).body or ""
    assert "## Holds\n\nnone" in body and "Paused by @carol" in body
