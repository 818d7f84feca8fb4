"""`sluice demo`: the whole loop on the sandbox against the GitHub simulator, read back from what it left.

One run (module scope) of `main(["demo", "--json", ...])`, then its JSON checked against the simulator's
repositories and the store it kept under `--dir`, and the metrics against `sluice status` run afresh.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import math
import re
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.app import demo_loop
from bot.app.cli import main
from bot.core import bisect, gate
from bot.core.audit import AuditState
from bot.core.bisect_pr import BisectionRecord
from bot.core.ingestion import BRANCH_PREFIX, units_of
from bot.core.tiers import Level, Verdict
from bot.db.bisections import Bisections
from bot.db.gates import GateStore
from bot.db.store import Store
from bot.db.tier_runs import TierRuns
from bot.demo import SLUICE_YML
from tests.support.github_sim import GitHubSim

FORK_GIT = Path("github") / "repos" / f"{demo_loop.FORK}.git"
UPSTREAM_GIT = Path("github") / "repos" / f"{demo_loop.UPSTREAM}.git"
INGESTION_KEYS = {
    "id",
    "kind",
    "pr",
    "state",
    "commits",
    "tiers",
    "gate",
    "merge_sha",
    "rollback_tag",
    "audit",
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, Any], Path, str]:
    root = tmp_path_factory.mktemp("demo")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["demo", "--dir", str(root), "--json", "--timeout", "800"])
    return code, json.loads(out.getvalue()), root, err.getvalue()  # stdout holds one JSON document


@pytest.fixture(scope="module")
def result(demo: tuple[int, dict[str, Any], Path, str]) -> dict[str, Any]:
    code, found, _, err = demo
    assert code == 0, err[-3000:]
    assert found["pending"] == []
    return found


@pytest.fixture(scope="module")
def root(demo: tuple[int, dict[str, Any], Path, str]) -> Path:
    return demo[2]


@pytest.fixture
def store(root: Path) -> Any:
    opened = Store.open(f"sqlite:///{root / 'sluice.db'}")
    yield opened
    opened.close()


def test_the_json_has_the_promised_shape(result: dict[str, Any]) -> None:
    assert {"ingestions", "bisections", "metrics"} <= set(result)
    assert result["ingestions"]
    for ingestion in result["ingestions"]:
        assert set(ingestion) >= INGESTION_KEYS, ingestion["id"]
        assert ingestion["kind"] in ("bundle", "chain") and ingestion["id"].startswith(
            ingestion["kind"] + "-"
        )
        assert {"L1", "L2"} <= set(ingestion["tiers"])
        assert all({"conclusion", "report"} <= set(t) for t in ingestion["tiers"].values())
        assert {"conclusion", "missing"} <= set(ingestion["gate"])
    assert {"days_behind_upstream", "backlog_commits"} <= set(result["metrics"])


def test_every_pr_is_one_the_simulator_holds_at_that_head(result: dict[str, Any], root: Path) -> None:
    fork = root / FORK_GIT
    prs = [i for i in result["ingestions"] if i["pr"] is not None]
    assert len(prs) >= 2
    for ingestion in prs:  # GitHub keeps refs/pull/N/head for every PR, open or closed
        assert git(fork, "rev-parse", f"refs/pull/{ingestion['pr']}/head") == ingestion["head"]


def test_a_bundle_passed_l1_and_l2_and_merged_with_its_rollback_tag_and_audit_record(
    result: dict[str, Any], root: Path, store: Store
) -> None:
    fork = root / FORK_GIT
    merged = [i for i in result["ingestions"] if i["state"] == "merged"]
    assert merged and merged[0]["kind"] == "bundle"
    for ingestion in merged:
        assert [ingestion["tiers"][t]["conclusion"] for t in ("L1", "L2")] == ["success", "success"]
        assert ingestion["gate"] == {**ingestion["gate"], "conclusion": "success", "missing": []}
        sha, tag = ingestion["merge_sha"], ingestion["rollback_tag"]
        assert git(fork, "merge-base", "--is-ancestor", sha, "main") == ""  # on fork trunk
        rollback = git(fork, "rev-parse", f"refs/tags/{tag}")
        assert tag == f"sluice/rollback/{ingestion['id']}" and rollback == ingestion["audit"]["rollback_sha"]
        # rebase-merged: one trunk commit per upstream commit, each naming it, on top of the rollback point
        messages = git(fork, "log", "--format=%B%x00", f"{rollback}..{sha}").split("\0")[:-1]
        trailers = [line for m in messages for line in m.splitlines() if line.startswith("Upstream-Commit: ")]
        assert len(messages) == ingestion["commits"] == len(set(trailers))
        assert {t.removeprefix("Upstream-Commit: ") for t in trailers} == set(ingestion["upstream_commits"])
        ((number, record),) = GateStore(store).find_audits(ingestion["id"])
        assert number == ingestion["audit"]["number"] and record.state is AuditState.CLOSED
        assert (record.merge_sha, record.rollback_tag, record.pr_number) == (sha, tag, ingestion["pr"])


def test_tier_reports_are_the_stored_runs(result: dict[str, Any], store: Store) -> None:
    ingestion = next(i for i in result["ingestions"] if i["state"] == "merged")
    l1 = ingestion["tiers"]["L1"]["report"]
    runs = {r.id: r for r in TierRuns(store).for_pull(demo_loop.FORK, ingestion["pr"])}
    stored = runs[l1["tier_run"]]
    assert stored.head_sha == ingestion["head"] and stored.verdict is Verdict.PASSED
    assert [(s["name"], s["outcome"]) for s in l1["suites"]] == [("tlx", "passed"), ("smoke", "passed")]
    assert [s["executed"] for s in l1["suites"]] == [
        s["executed"] for s in json.loads(stored.report or "{}")["suites"]
    ]


def test_the_culprit_is_bisected_out_of_its_bundle_into_a_chain_and_the_rebuilt_bundle_merges(
    result: dict[str, Any], root: Path, store: Store
) -> None:
    (culprit,) = result["planted_culprits"]
    (found,) = [b for b in result["bisections"] if b["status"] == "done"]
    assert found["culprit"] == culprit and found["tier"] == "L1"
    assert "default_blocked_layout" in found["reason"] or "ImportError" in found["reason"]
    assert found["tier_runs"] <= 2 * math.ceil(math.log2(found["commits"])) + 1  # issue 13's bound
    assert culprit in Bisections(store).blamed(demo_loop.FORK)  # the next plan roots a risky chain at it
    (bundle,) = [i for i in result["ingestions"] if i["id"] == found["ingestion"]]
    assert bundle["state"] == "merged" and culprit not in bundle["upstream_commits"]  # rebuilt without it
    fork = root / FORK_GIT
    trunk = git(fork, "log", "--format=%B", "main")
    assert f"Upstream-Commit: {culprit}" not in trunk  # never merged
    # every PR that held it (the bundle before its rebuild, the PRs stacked on it) failed L1 on the rename
    for holder in [i for i in result["ingestions"] if culprit in i["upstream_commits"]]:
        assert holder["merge_sha"] is None and holder["tiers"]["L1"]["conclusion"] == "failure"
    # and the fork's plan at the end holds it in a risky chain, rooted at it for the bisection's blame
    plan = store.latest_plan(demo_loop.FORK)
    assert plan is not None
    (chain,) = [c for c in plan.chains if culprit in [m.sha for m in c.commits]]
    (now,) = result["culprits_now"]
    assert (now["culprit"], now["kind"], now["unit"], now["why"]) == (
        culprit,
        "chain",
        chain.id,
        chain.why[culprit],
    )
    assert chain.root == culprit and "bisected: L1 failed on #" in now["why"]
    assert units_of(plan)[now["place"] - 1].id == chain.id and now["units"] == len(units_of(plan))
    open_prs = {i["id"]: i["pr"] for i in result["ingestions"] if i["state"] == "open"}
    assert now["pr"] == open_prs.get(chain.id)


def test_the_metrics_match_sluice_status_on_what_the_simulator_holds(
    result: dict[str, Any], root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    both = tmp_path / "both.git"
    git(tmp_path, "init", "--quiet", "--bare", str(both))
    git(both, "fetch", "--quiet", str(root / FORK_GIT), "main:refs/heads/main")
    git(both, "fetch", "--quiet", str(root / UPSTREAM_GIT), "main:refs/remotes/upstream/main")
    config = tmp_path / "sluice.yml"
    config.write_text(SLUICE_YML)  # the sandbox's own (the demo's adds the upstream URL and the gate)
    assert main(["status", "--repo", str(both), "--config", str(config), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    metrics = result["metrics"]
    assert metrics["days_behind_upstream"] == pytest.approx(status["days_behind"], abs=0.001)
    assert metrics["backlog_commits"] == status["backlog_commits"]
    assert metrics["ingestion_tip"] == status["ingestion_tip"]
    assert metrics["days_behind_upstream"] < metrics["before"]["days_behind_upstream"]  # a bundle merged


def test_progress_goes_to_stderr(demo: tuple[int, dict[str, Any], Path, str]) -> None:
    err = demo[3]
    assert "pushes" in err and "(a push webhook)" in err
    assert "merged into main as" in err and "Planted culprit: " in err


def test_the_summary_tells_a_newcomer_what_happened(result: dict[str, Any]) -> None:
    text = demo_loop.summary_text(demo_loop.DemoResult.from_json(result))
    merged = next(i for i in result["ingestions"] if i["state"] == "merged")
    (culprit,) = result["planted_culprits"]
    assert f"#{merged['pr']} bundle {merged['id']} ({merged['commits']} upstream commits): merged" in text
    assert f"merged as {merged['merge_sha'][:10]}; rollback tag {merged['rollback_tag']}" in text
    (found,) = [b for b in result["bisections"] if b["status"] == "done"]
    assert "cannot import name 'default_blocked_layout'" in text
    assert f"Planted culprit: {culprit[:10]}" in text
    assert (
        f"Bisection of {found['ingestion']} (#{found['pr']}) on L1, {found['tier_runs']} tier runs: " in text
    )
    assert f"culprit {culprit[:10]}" in text and "moved to a risky chain" in text
    (now,) = result["culprits_now"]
    assert f"Now: {culprit[:10]} is in risky chain {now['unit']} (" in text
    assert f"unit {now['place']} of {now['units']} in the plan's order; its PR " in text
    before, after = (
        result["metrics"]["before"]["days_behind_upstream"],
        result["metrics"]["days_behind_upstream"],
    )
    assert f"Days Behind Upstream: {before:.2f} after the push, {after:.2f} at the end." in text


def test_without_the_simulator_the_demo_says_so_and_plans_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # An installed wheel has no tests/ beside bot/: a directory without them stands for one.
    monkeypatch.setattr(demo_loop, "CHECKOUT", tmp_path / "site-packages")
    assert main(["demo", "--dir", str(tmp_path / "demo")]) == 0
    captured = capsys.readouterr()
    assert "the full loop needs a checkout" in captured.err and "planning only" in captured.err
    assert "Risky chains" in captured.out and "$ sluice pick --dry-run" in captured.out


def test_read_bisections_reads_the_forks_bisections_from_the_store(tmp_path: Path) -> None:
    opened = Store.open(f"sqlite:///{tmp_path / 'sluice.db'}")
    try:
        assert demo_loop.read_bisections(opened, demo_loop.FORK) == []
        commits = [f"{i:x}" * 40 for i in range(1, 5)]
        state = bisect.start("bundle-1", commits, tier="l1", depends_on={commits[3]: [commits[2]]})
        for fork in (demo_loop.FORK, "other/fork"):  # another fork's is left out
            Bisections(opened).start(
                BisectionRecord(
                    fork=fork,
                    pull=7,
                    ingestion="bundle-1",
                    level=Level.L1,
                    head_sha="e" * 40,
                    base_sha="f" * 40,
                    fork_commits=tuple(commits),
                    state=state,
                ),
                at=datetime(2026, 11, 2, tzinfo=UTC),
            )
        (found,) = demo_loop.read_bisections(opened, demo_loop.FORK)
        assert (found["ingestion"], found["pr"], found["tier"], found["status"]) == (
            "bundle-1",
            7,
            "L1",
            "running",
        )
        assert (found["culprit"], found["tier_runs"], found["commits"]) == (None, 0, 4)
    finally:
        opened.close()


def test_the_summary_points_only_at_what_outlives_the_run(result: dict[str, Any]) -> None:
    """`make demo` builds in a temporary directory: its last lines named repositories and a store already
    removed, and an audit command that could only fail."""
    assert result["kept"] == {"directory": True, "store": True}  # --dir
    found = demo_loop.DemoResult.from_json(result)
    kept = demo_loop.summary_text(found)
    assert result["simulator"]["repositories"] in kept and "An audit record: sluice audit " in kept
    without_dir = result | {"kept": {"directory": False, "store": False}}  # as --json says it then
    gone = demo_loop.summary_text(demo_loop.DemoResult.from_json(without_dir))
    assert result["simulator"]["repositories"] not in gone and "sluice audit" not in gone
    assert "removed at exit:\n`sluice demo --dir DIR` keeps them, and the store, to look at." in gone
    own_store = demo_loop.summary_text(dataclasses.replace(found, kept=False))  # --database given
    assert "An audit record: sluice audit " in own_store


def test_a_run_past_its_timeout_says_what_is_still_in_flight(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["demo", "--dir", str(tmp_path), "--json", "--timeout", "8"])
    found = json.loads(out.getvalue())
    assert code == 1 and found["pending"], err.getvalue()[-2000:]
    assert all(
        re.search(r"\d+ (queued|running) [a-z_-]+ jobs?|dispatched on|time ran out", p)
        for p in found["pending"]
    )
    text = demo_loop.summary_text(demo_loop.DemoResult.from_json(found))
    assert "Timed out with this still in flight:" in text and found["pending"][0] in text


def test_gate_missing_reads_the_rows_the_gate_writes() -> None:
    decision = gate.GateDecision(
        head_sha="a" * 40,
        missing=(
            gate.Missing(gate.MissingKind.TIER, "sluice/L1 concluded failure", (), "fix it | push"),
            gate.Missing(gate.MissingKind.APPROVAL, "a code owner's approval", ("@org/a", "@b"), "approve"),
        ),
        met=("no hold is set",),
        failed=(),
    )
    check = {"output": {"summary": gate.summary(decision, notes=["a note"])}}
    assert demo_loop.gate_missing(check) == [
        {"what": "sluice/L1 concluded failure", "who": [], "how": "fix it | push"},
        {"what": "a code owner's approval", "who": ["@org/a", "@b"], "how": "approve"},
    ]
    assert (
        demo_loop.gate_missing(
            {"output": {"summary": gate.summary(dataclasses.replace(decision, missing=()))}}
        )
        == []
    )


async def test_the_demo_approves_as_the_code_owner_only_where_a_gate_waits_for_one(tmp_path: Path) -> None:
    sim = GitHubSim(root=tmp_path / "sim")
    sim.create_repo(demo_loop.FORK)
    trunk = sim.commit(demo_loop.FORK, "main", {"README.md": "x\n"}, message="initial")
    heads = {}
    for n, unit in enumerate(("bundle-1a", "chain-2b")):
        branch = BRANCH_PREFIX + unit
        heads[unit] = sim.commit(demo_loop.FORK, branch, {f"{n}.txt": "x\n"}, message=unit, parent=trunk)
        sim.open_pull(demo_loop.FORK, head=branch, base="main", title=unit, user=sim.bot_login)
    owners = (f"@{demo_loop.MAINTAINERS}",)
    waiting = {  # the chain's gate waits for a code owner; the bundle's for L1 alone
        "chain-2b": gate.Missing(
            gate.MissingKind.APPROVAL, "a code owner's approval of x", owners, "approve"
        ),
        "bundle-1a": gate.Missing(gate.MissingKind.TIER, "sluice/L1 is in_progress", (), "wait for it"),
    }
    for unit, missing in waiting.items():
        decision = gate.GateDecision(heads[unit], (missing,), (), ())
        sim.check_runs[demo_loop.FORK].append(
            {"name": "sluice/gate", "head_sha": heads[unit], "status": "in_progress", "conclusion": None}
            | {"app": {"id": sim.app_id}, "output": {"summary": gate.summary(decision)}}
        )
    opened = Store.open(f"sqlite:///{tmp_path / 'sluice.db'}")
    try:
        env = demo_loop.Env(sim, opened, "http://127.0.0.1:1", "s", lambda _line: None, "sqlite://")
        assert await demo_loop._approve(env) is True
        assert await demo_loop._approve(env) is False  # once per head
    finally:
        opened.close()
    ((number, reviews),) = [(k[1], v) for k, v in sim.reviews.items() if v]
    assert sim.issues[demo_loop.FORK][number].head_ref == BRANCH_PREFIX + "chain-2b"
    assert [(r["user"]["login"], r["state"], r["commit_id"]) for r in reviews] == [
        (demo_loop.MAINTAINER, "APPROVED", heads["chain-2b"])
    ]
    assert env.approvals == [
        {
            "pr": number,
            "head": heads["chain-2b"],
            "by": demo_loop.MAINTAINER,
            "for": ["a code owner's approval of x"],
        }
    ]
