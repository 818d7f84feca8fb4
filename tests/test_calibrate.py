"""`sluice calibrate`: mining past ingestions and their fixes on real git histories, fitting, determinism."""

from __future__ import annotations

import datetime as dt
import json
import math
import sqlite3
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from bot.app.cli import main
from bot.core import fitting
from bot.core.bisect_pr import Blame
from bot.core.config import SluiceConfig
from bot.core.errors import SluiceError
from bot.core.fitting import Row
from bot.core.ingestion import IngestionRecord
from bot.core.risk_model import RiskModel
from bot.core.tiers import Level, RunState, TierRun, Verdict
from bot.db.bisections import Bisections
from bot.db.registry import Registry
from bot.db.store import Store
from bot.db.tier_runs import TierRuns
from bot.flows import calibrate, mining
from bot.flows.calibrate import CalibrateOptions, FeatureCache
from bot.flows.mining import TrunkCommit
from bot.flows.planning import fork_key, load_risk_model
from bot.flows.risk_files import default_model
from bot.git.repo import GitRepo
from tests.support.scenarios import EPOCH, HOUR, Scenario, merge_pr, numbered, patch_stack_history

DAY_H = 24


def merge_history(root: Path) -> tuple[Scenario, dict[str, str]]:
    """Two upstream merges; the first brought commits that the fork then reverted, named by SHA, by
    upstream PR, or named on trunk soon after (and one named only too late); the second broke nothing."""
    s = Scenario(root)
    files = {f"lib/Conversion/m{i}.cpp": numbered(f"m{i}", 30) for i in range(1, 8)}
    s.upstream("Initial import (#100)", {**files, "lib/Analysis/f.cpp": numbered("f", 60)}, hours=0)
    s.fork_here()
    s.fork("[intel] XPU backend (#1)", {"third_party/intel/backend.cpp": numbered("xpu", 10)}, hours=1)
    c: dict[str, str] = {}
    for i, title in enumerate(["Add foo", "Tweak bar", "Change baz", "Refactor qux", "Speed up", "Tidy"], 1):
        c[f"a{i}"] = s.upstream(
            f"{title} (#{100 + i})", {f"lib/Conversion/m{i}.cpp": numbered(f"m{i}x", 30)}, hours=2 + i
        )
    text = numbered("f", 60).replace("f line 5\n", "f line 5 upstream a7\n")
    c["a7"] = s.upstream("Touch the analysis (#107)", {"lib/Analysis/f.cpp": text}, hours=9)
    fixes = [
        'Revert "Tweak bar (#102)"',
        f"[intel] fix build after '{c['a3'][:7]}'",
        "[intel] adapt the XPU lowering\n\nUpstream #104 renamed the pattern.",
    ]
    c["merge_a"] = merge_pr(s, c["a7"], pr=9001, fixes=fixes, hours=10)
    ours = numbered("f", 60).replace("f line 40\n", "f line 40 for XPU\n")
    s.fork("[intel] patch the analysis for XPU (#9002)", {"lib/Analysis/f.cpp": ours}, hours=11 + DAY_H)
    # Its own PR number (the suffix of a squash merge) happens to be an upstream PR of the window: no fix.
    s.fork("[intel] unrelated tidy (#106)", {"third_party/intel/t.cpp": "t\n"}, hours=11 + 1.5 * DAY_H)
    s.fork(
        f"Fix a perf regression from {c['a5'][:10]} (#9003)",
        {"third_party/intel/p.cpp": "p\n"},
        hours=11 + 2 * DAY_H,
    )
    s.fork(f"Clean up after {c['a1'][:10]} (#9004)", {"third_party/intel/q.cpp": "q\n"}, hours=11 + 9 * DAY_H)
    later = (
        numbered("f", 60)
        .replace("f line 20\n", "f line 20 upstream b1\n")
        .replace("f line 5\n", "f line 5 upstream a7\n")
    )
    c["b1"] = s.upstream(
        "Touch the analysis again (#108)", {"lib/Analysis/f.cpp": later}, hours=12 + 9 * DAY_H
    )
    c["b2"] = s.upstream("Docs only (#109)", {"docs/d.md": "doc\n"}, hours=13 + 9 * DAY_H)
    c["merge_b"] = merge_pr(s, c["b2"], pr=9005, fixes=[], hours=11 + 10 * DAY_H)
    return s, c


def pick_history(root: Path) -> tuple[Scenario, dict[str, str]]:
    """FBTriton's way: `[Cherry-pick] '<title> (#N)' (#M)` commits, one marked [RESOLVED], a fix-up naming
    an upstream PR, a revert of a pick, a fix-up naming a pick's SHA; and clean picks."""
    s = Scenario(root)
    s.upstream("Initial import (#200)", {"python/triton/base.py": "base\n"}, hours=0)
    s.fork_here()
    s.fork("[TLX] warp specialisation (#400)", {"third_party/tlx/tlx.py": "tlx\n"}, hours=1)
    c: dict[str, str] = {}
    titles = ["Title one", "Title two", "Title three", "Title four", "Title five", "Title six"]
    for i, title in enumerate(titles, 1):
        c[f"u{i}"] = s.upstream(f"{title} (#{200 + i})", {f"lib/Analysis/u{i}.cpp": f"u{i}\n"}, hours=1 + i)

    def pick(i: int, mark: str, pr: int, hours: float) -> str:
        message = f"[Cherry-pick]{mark} '{titles[i - 1]} (#{200 + i})' (#{pr})"
        c[f"p{i}"] = s.pick(c[f"u{i}"], how="subject", message=message, hours=hours)
        return message

    pick(1, "", 501, 10)
    pick(2, "[RESOLVED]", 502, 11)
    pick(3, "", 503, 12)
    s.fork("[TLX] fix the build after upstream #203 (#504)", {"third_party/tlx/a.py": "a\n"}, hours=13)
    subject = pick(4, "", 505, 14)
    s.fork(f'Revert "{subject}"', {"third_party/tlx/b.py": "b\n"}, hours=15)
    pick(5, "", 506, 16)
    s.fork(
        f"Fix-up for {c['p5'][:10]}: keep the TLX barrier (#507)", {"third_party/tlx/c.py": "c\n"}, hours=17
    )
    pick(6, "", 508, 18)
    return s, c


def mined(s: Scenario, options: CalibrateOptions | None = None) -> dict[str, Row]:
    repo, config = GitRepo(s.path), SluiceConfig()
    fork, upstream = repo.resolve(s.fork_ref), repo.resolve(s.upstream_ref)
    windows = calibrate.find_windows(
        repo, config, fork_head=fork, upstream_head=upstream, options=options or CalibrateOptions()
    )
    rows, failed = calibrate.mine(repo, config, windows, cache=FeatureCache(None, config=config))
    assert failed == []
    return {r.sha: r for r in rows}


def test_merge_windows_find_reverts_named_shas_prs_and_trunk_fixes_soon_after(tmp_path: Path) -> None:
    s, c = merge_history(tmp_path)
    rows = mined(s)
    assert set(rows) == {c[f"a{i}"] for i in range(1, 8)} | {c["b1"], c["b2"]}
    broke = {name for name, sha in c.items() if sha in rows and rows[sha].outcome}
    assert broke == {"a2", "a3", "a4", "a5"}
    assert rows[c["a2"]].evidence.startswith("reverted by")
    assert rows[c["a3"]].evidence.startswith("named by")
    assert rows[c["a4"]].evidence.startswith("PR #104 named by")
    assert "perf regression" in rows[c["a5"]].evidence
    assert rows[c["a1"]].outcome == 0  # named 9 days later: past the 7-day window
    # When the fork said so: in the merge PR (before the merge), or on trunk two days after it.
    assert rows[c["a3"]].known is not None and rows[c["a3"]].known <= rows[c["a3"]].time
    assert rows[c["a5"]].known == rows[c["a5"]].time + 2 * DAY_H * HOUR
    assert rows[c["a1"]].known is None
    assert rows[c["a6"]].outcome == 0  # `(#106)` was only the fix commit's own PR number
    assert {rows[c["a1"]].window, rows[c["b1"]].window} == {c["merge_a"], c["merge_b"]}


def test_a_merge_that_names_no_upstream_commit_is_found_by_what_it_brought(tmp_path: Path) -> None:
    s = Scenario(tmp_path)
    s.upstream("Initial import (#1)", {"a.py": "a\n"}, hours=0)
    s.fork_here()
    feature = merge_pr(
        s, "main~0", pr=7, fixes=["[intel] our own feature"], hours=1, message="Our feature (#7)"
    )
    u2 = s.upstream("Change a (#2)", {"a.py": "a2\n"}, hours=3)
    u3 = s.upstream("Add b (#3)", {"b.py": "b\n"}, hours=4)
    merge = merge_pr(
        s, u3, pr=8, fixes=[f"[intel] fix after '{u2[:7]}'"], hours=5, message="Update base (#8)"
    )
    rows = mined(s)
    assert {r.window for r in rows.values()} == {merge} != {feature}  # the fork's own PR brought nothing
    assert (rows[u2].outcome, rows[u3].outcome) == (1, 0)


def test_a_longer_fix_window_counts_the_late_fix(tmp_path: Path) -> None:
    s, c = merge_history(tmp_path)
    assert mined(s, CalibrateOptions(fix_days=10))[c["a1"]].outcome == 1


def test_features_are_the_planners_as_of_each_ingestion(tmp_path: Path) -> None:
    """The fork patched lib/Analysis/f.cpp only after the first merge: that overlap is a feature of the
    second window's commit that touches the file, never of the first's."""
    s, c = merge_history(tmp_path)
    rows = mined(s)
    assert "reason:patch-stack-file" not in rows[c["a7"]].features
    assert rows[c["b1"]].features.get("reason:patch-stack-file") == 1.0
    assert rows[c["b2"]].features.get("tests-or-docs-only") == 1.0
    assert rows[c["a7"]].features["log2-lines"] == pytest.approx(math.log2(1 + 2))


def test_until_leaves_out_later_ingestions(tmp_path: Path) -> None:
    s, c = merge_history(tmp_path)
    until = EPOCH + (11 + 5 * DAY_H) * HOUR
    rows = mined(s, CalibrateOptions(until=until))
    assert {r.window for r in rows.values()} == {c["merge_a"]}
    assert rows[c["a5"]].outcome == 1  # its fix landed before `until`


def test_pick_histories_find_resolved_picks_fixups_and_reverts_of_picks(tmp_path: Path) -> None:
    s, c = pick_history(tmp_path)
    rows = mined(s)
    assert set(rows) == {c[f"u{i}"] for i in range(1, 7)}
    broke = {name for name, sha in c.items() if sha in rows and rows[sha].outcome}
    assert broke == {"u2", "u3", "u4", "u5"}
    assert "[RESOLVED]" in rows[c["u2"]].evidence
    assert rows[c["u3"]].evidence.startswith("PR #203 named by")
    assert rows[c["u4"]].evidence.startswith("reverted by")
    assert rows[c["u5"]].evidence.startswith("named by")
    # One run of three picks, then one run per pick: the planner saw trunk before each run.
    assert rows[c["u1"]].window == rows[c["u3"]].window == c["p1"]
    assert rows[c["u4"]].window == c["p4"]


def test_the_evidence_is_the_earliest_fix_that_names_the_commit() -> None:
    later = TrunkCommit("b" * 40, ("0" * 40,), 300, f"Clean up after {'a' * 10}")
    earlier = TrunkCommit("c" * 40, ("0" * 40,), 200, f'Revert "Speed up (#7)"\n\nIt broke {"a" * 10}.')
    found = mining.evidence({"a" * 40: "Speed up (#7)", "d" * 40: "Docs (#8)"}, [later, earlier])
    assert list(found) == ["a" * 40]
    assert found["a" * 40] == mining.Evidence(f"reverted by {'c' * 10} 'Revert \"Speed up (#7)\"'", 200)


def test_a_commit_sluice_blamed_is_a_culprit_from_when_it_was_blamed() -> None:
    revert = TrunkCommit("c" * 40, ("0" * 40,), 200, 'Revert "Speed up (#7)"')
    blamed = {
        "a" * 40: Blame(Level.L1, 12, "L1 failed on #12: test_core.py::test_dot", 150),  # before the revert
        "d" * 40: Blame(Level.L2, 13, "kernel suite failed", 400),  # nothing else names it
        "e" * 40: Blame(Level.L1, 14, "not in this window", 100),
    }
    brought = {"a" * 40: "Speed up (#7)", "d" * 40: "Docs (#8)", "f" * 40: "Tidy (#9)"}
    found = mining.evidence(brought, [revert], blamed=blamed)
    assert set(found) == {"a" * 40, "d" * 40}
    said = "blamed by Sluice: L1 failed on #12: test_core.py::test_dot"
    assert found["a" * 40] == mining.Evidence(said, 150)
    assert found["d" * 40].time == 400 and found["d" * 40].said == "blamed by Sluice: kernel suite failed"
    # Without the store's blames, git history alone: the revert.
    assert mining.evidence(brought, [revert])["a" * 40].time == 200


def test_a_fit_at_a_cut_knows_only_the_culprits_named_before_it() -> None:
    rows = [
        Row(sha="a", window="w1", time=10, features={}, outcome=1, known=15),
        Row(sha="b", window="w1", time=10, features={}, outcome=1, known=30),
        Row(sha="c", window="w1", time=10, features={}, outcome=1),  # not said when: stays a culprit
        Row(sha="d", window="w1", time=10, features={}, outcome=0),
    ]
    assert [r.outcome for r in fitting.as_known_at(rows, 30)] == [1, 0, 1, 0]
    assert [r.outcome for r in fitting.as_known_at(rows, 31)] == [1, 1, 1, 0]


def test_the_culprits_by_month_are_counted_by_each_ingestions_utc_month() -> None:
    jan31 = int(dt.datetime(2025, 1, 31, 23, 30, tzinfo=dt.UTC).timestamp())
    rows = [
        Row(sha="c", window="w3", time=jan31 + 3600, features={}, outcome=1),  # 00:30 on 1 February
        Row(sha="a", window="w1", time=jan31, features={}, outcome=0),
        Row(sha="b", window="w1", time=jan31, features={}, outcome=1),
        Row(sha="d", window="w4", time=jan31 + 40 * 86400, features={}, outcome=0),
    ]
    assert fitting.by_month(rows) == [("2025-01", 2, 1), ("2025-02", 1, 1), ("2025-03", 1, 0)]
    assert fitting.by_month([]) == []


def test_the_held_out_fit_knows_only_the_culprits_named_by_the_split() -> None:
    """Every earlier culprit named only after the split: the held-out fit has nothing to learn from, where
    named before it the same rows are judged."""
    rows = planted_rows(400, seed=5)
    split = fitting.time_split(rows, 0.7)[1][0].time
    late = [replace(r, known=split + 1) if r.outcome else r for r in rows]
    early = [replace(r, known=r.time) if r.outcome else r for r in rows]
    assert calibrate.judge_split(late, CalibrateOptions()) is None
    held = calibrate.judge_split(early, CalibrateOptions())
    fitted = sum(r.outcome for r in rows[:280])
    assert held is not None and held.train_commits == 280
    assert (held.train_culprits, held.late_culprits) == (fitted, 0)
    some = [replace(r, known=split) if r.outcome and r.time % 2 else r for r in early]  # named at the split
    held = calibrate.judge_split(some, CalibrateOptions())
    odd = sum(r.outcome for r in rows[:280] if r.time % 2)
    assert held is not None and (held.train_culprits, held.late_culprits) == (fitted - odd, odd)


def planted_rows(n: int, *, seed: int) -> list[Row]:
    """Synthetic rows where `x` multiplies the odds of breaking by 4 and `noise` does nothing."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        x, noise = float(rng.random() < 0.5), float(rng.random() < 0.5)
        p = 1 / (1 + math.exp(-(math.log(0.05) + math.log(4) * x)))
        features = {name: 1.0 for name, v in (("x", x), ("noise", noise)) if v}
        rows.append(
            Row(
                sha=f"{i:040x}",
                window=f"w{i // 10}",
                time=i,
                features=features,
                outcome=int(rng.random() < p),
            )
        )
    return rows


def test_a_fitted_model_recovers_a_planted_effect() -> None:
    fit = fitting.fit(planted_rows(20_000, seed=7), c=1.0)
    assert fit.coefficients["x"] == pytest.approx(math.log(4), abs=0.15)
    assert fit.coefficients["noise"] == pytest.approx(0.0, abs=0.15)
    assert fit.intercept == pytest.approx(math.log(0.05), abs=0.15)


def test_held_out_quality_of_a_planted_effect() -> None:
    train, test = fitting.time_split(planted_rows(4000, seed=3), 0.7)
    assert len(train) == 2800 and train[-1].time < test[0].time
    quality = fitting.judge(
        fitting.fit(train, c=1.0).score(test), [r.outcome for r in test], bundled_share=0.5, target=0.8
    )
    # Half the commits carry x and ~4/5 of the culprits: chaining them catches ~80 %, AUC ~0.65.
    assert quality.recall_at_bundled == pytest.approx(0.8, abs=0.07)
    assert 0.6 < (quality.auc or 0) < 0.72


@pytest.mark.parametrize(
    ("scores", "outcomes", "share", "recall", "needed"),
    [
        ([0.9, 0.8, 0.1, 0.0], [1, 1, 0, 0], 0.5, 1.0, 0.5),
        ([0.9, 0.8, 0.1, 0.0], [0, 0, 1, 1], 0.5, 0.0, 1.0),
        ([0.5, 0.5, 0.5, 0.5], [1, 0, 0, 0], 0.5, 0.5, 1.0),  # a tie counts pro rata, not in a lucky order
        ([0.9, 0.5, 0.5, 0.1], [0, 1, 0, 0], 0.25, 0.0, 0.75),
    ],
)
def test_recall_curve(
    scores: list[float], outcomes: list[int], share: float, recall: float, needed: float
) -> None:
    curve = fitting.recall_curve(scores, outcomes)
    assert fitting.recall_at(curve, share) == pytest.approx(recall)
    assert fitting.share_for_recall(curve, 0.8) == pytest.approx(needed)


def test_time_split_never_cuts_an_ingestion() -> None:
    rows = [Row(sha=f"{i}", window=f"w{i // 4}", time=i // 4, features={}, outcome=0) for i in range(10)]
    train, test = fitting.time_split(rows, 0.7)
    assert (len(train), len(test)) == (8, 2)


def calibrate_cli(s: Scenario, out: Path, *extra: str) -> int:
    return main(["calibrate", *s.repo_args(), "--out", str(out), "--source", "sandbox", *extra])


def test_calibrate_is_deterministic_and_writes_a_model_with_provenance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s, _ = merge_history(tmp_path / "h")
    cache = tmp_path / "cache.jsonl"
    outs = [tmp_path / f"model{i}.json" for i in range(3)]
    assert calibrate_cli(s, outs[0]) == 0
    assert calibrate_cli(s, outs[1], "--cache", str(cache)) == 0  # fills the cache
    assert calibrate_cli(s, outs[2], "--cache", str(cache)) == 0  # reads it
    texts = [o.read_bytes() for o in outs]
    assert texts[0] == texts[1] == texts[2]
    model = RiskModel.from_json(texts[0].decode())
    p = model.provenance
    assert (p.source, p.commits, p.positives) == ("sandbox", 9, 4)
    assert "LogisticRegression" in p.method and model.coefficients["log2-lines"] != 0.0
    # Its fitted commits' probabilities, most likely first: `risk.chain_share` then reads the fork's stream.
    assert len(model.quantiles) == 101 and model.quantiles[0] > model.quantiles[-1]
    share = model.share_threshold(4 / 9)
    assert share is not None and model.quantiles[0] >= share >= model.quantiles[-1]
    captured = capsys.readouterr()
    assert "window 1/2" in captured.err and "culprits: 4" in captured.out


def test_calibrate_learns_that_commits_on_the_patch_stack_broke_a_generated_fork(tmp_path: Path) -> None:
    s, outcome = patch_stack_history(tmp_path / "h")
    rows = mined(s)
    assert set(rows) == {*outcome["broke"], *outcome["fine"]}
    assert {sha for sha, r in rows.items() if r.outcome} == set(outcome["broke"])
    assert calibrate_cli(s, tmp_path / "model.json") == 0
    model = RiskModel.from_json((tmp_path / "model.json").read_text())
    assert (model.provenance.commits, model.provenance.positives) == (48, 16)
    # What the fork's history says: changing a function the patch stack changed breaks it; size, the
    # component and the tests-only commits say little, as every commit is a one-line change.
    weights = model.coefficients
    assert weights["reason:patch-stack-symbol"] > 1.0 and weights["reason:predicted-conflict"] > 0.5
    assert abs(weights["log2-lines"]) < 0.2 and abs(weights.get("tests-or-docs-only", 0.0)) < 0.3
    assert model.provenance.held_out.get("auc") == 1.0


def test_calibrate_counts_the_culprits_sluices_tier_runs_blamed_in_the_store(
    tmp_path: Path, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fork that runs Sluice: its bisections, and a one-commit PR whose own tier failed, name culprits
    that no fix commit named. With the store, calibrate labels them too (those blamed after `--until` are
    later history); without it, git alone."""
    s, c = merge_history(tmp_path / "h")
    key = fork_key(SluiceConfig(), GitRepo(s.path), s.fork_ref)
    store = Store.open(database_url)
    try:
        records = Bisections(store)

        def blame(sha: str, at: int, pull: int) -> None:
            when = dt.datetime.fromtimestamp(at, dt.UTC)
            records.blame(key, sha, level=Level.L1, pull=pull, bisection=1, detail="test_a6 failed", at=when)

        blame(c["a6"], s.time_of(c["merge_a"]) - HOUR, 9001)  # in the merge PR, before it merged
        blame(c["b1"], EPOCH + 100 * 365 * DAY_H * HOUR, 9005)  # a century on: after --until
        blame("f" * 40, EPOCH, 9006)  # never ingested: no row to label
        # a1 (named by a fix only 9 days on, too late) went in alone before, and its PR's L2 failed.
        a1 = c["a1"]
        Registry(store).save_ingestion(
            IngestionRecord(key, "chain-a1", "chain", "closed", 9007, "e" * 40, a1, a1, 1, None),
            at=dt.datetime.fromtimestamp(EPOCH, dt.UTC),
        )
        runs = TierRuns(store)
        start = dt.datetime.fromtimestamp(s.time_of(a1), dt.UTC)
        added = runs.add(TierRun(key, 9007, "chain-a1", Level.L2, "e" * 40, 1, RunState.DISPATCHED, start))
        assert added is not None
        done = start + dt.timedelta(hours=1)
        failed = replace(added, state=RunState.COMPLETED, verdict=Verdict.FAILED, completed_at=done)
        assert runs.finish(replace(failed, detail="test_a1 failed"))
    finally:
        store.close()
    out = tmp_path / "model.json"
    assert calibrate_cli(s, out, "--database", database_url, "--until", "2100-01-01") == 0
    model = RiskModel.from_json(out.read_text())
    assert model.provenance.positives == 6  # the 4 that fix commits named, a6 and a1
    printed = capsys.readouterr().out
    assert "culprits by evidence: PR named 1, SHA named 2, blamed by Sluice 2, reverted 1" in printed
    assert "Sluice blamed 3 upstream commits on this fork" in printed
    assert "2 of them are among the mined ones, 2 labelled by that first" in printed
    missing = tmp_path / "nowhere.db"
    assert calibrate_cli(s, out, "--database", f"sqlite:///{missing}") == 2  # a typo: refused, not created
    assert not missing.exists() and "no store at" in capsys.readouterr().err
    foreign = tmp_path / "other.db"  # another application's database: refused, left as it was
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    assert calibrate_cli(s, out, "--database", f"sqlite:///{foreign}") == 2
    assert "tables that are not Sluice's (notes)" in capsys.readouterr().err
    with sqlite3.connect(foreign) as conn:
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == [("notes",)]
    assert calibrate_cli(s, out, "--until", "2100-01-01") == 0  # no store: git history alone
    assert RiskModel.from_json(out.read_text()).provenance.positives == 4
    assert "blamed by Sluice" not in capsys.readouterr().out.split("method:")[0]


def test_a_fork_with_no_history_gets_the_default_model_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s = Scenario(tmp_path)
    s.upstream("Initial (#1)", {"a.py": "a\n"}, hours=0)
    s.fork_here()
    s.fork("our patch", {"b.py": "b\n"}, hours=1)
    s.upstream("Later (#2)", {"a.py": "a2\n"}, hours=2)
    out = tmp_path / "model.json"
    assert calibrate_cli(s, out) == 0
    assert "no past ingestion" in capsys.readouterr().out
    shipped = default_model()
    assert shipped is not None
    model = RiskModel.from_json(out.read_text())
    assert model.coefficients == shipped.coefficients
    assert "this is Sluice's default model" in model.provenance.notes[-1]


def test_bad_options_are_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s, _ = merge_history(tmp_path / "h")
    out = tmp_path / "model.json"
    assert calibrate_cli(s, out, "--until", "next week") == 2
    assert calibrate_cli(s, out, "--limit", "0") == 2
    assert calibrate_cli(s, out, "--since", "2025-09-30", "--until", "2025-09-01") == 2
    assert not out.exists()
    err = capsys.readouterr().err
    assert "is not a date" in err and "--until 2025-09-01 is not after --since 2025-09-30" in err
    # an output it could not write is said before the mining, not after it
    assert calibrate_cli(s, tmp_path / "missing" / "m.json") == 2
    assert "--out" in capsys.readouterr().err
    assert calibrate_cli(s, out, "--curve", str(tmp_path / "missing" / "c.svg")) == 2
    assert "--curve" in capsys.readouterr().err and not out.exists()


def test_the_curve_is_an_svg_with_the_bundled_mark(tmp_path: Path) -> None:
    s, _ = merge_history(tmp_path / "h")
    curve = tmp_path / "curve.svg"
    assert calibrate_cli(s, tmp_path / "m.json", "--curve", str(curve)) == 0
    text = curve.read_text()
    assert text.startswith("<svg") and "70 % bundled" in text
    json.dumps(text)  # plain text, no binary


SCRIPT = Path(__file__).parent.parent / "benchmarks" / "make_default_model.py"


def test_make_default_model_skips_without_a_repository() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120, check=False
    )
    assert (proc.returncode, proc.stdout) == (0, "skipped: no repository given\n")


def test_make_default_model_runs_sluice_calibrate(tmp_path: Path) -> None:
    """The script is `sluice calibrate` on a throwaway clone: the same model, and the report on stdout."""
    s, _ = merge_history(tmp_path / "h")
    ours, theirs = tmp_path / "script.json", tmp_path / "cli.json"
    args = ["--until", "2027-01-01", "--source", "sandbox", "--cache", str(tmp_path / "c.jsonl")]
    objects = s.git("count-objects", "-v")
    proc = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            str(s.path),
            "--upstream",
            s.upstream_ref,
            *args,
            "--out",
            str(ours),
            "--curve",
            str(tmp_path / "c.svg"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert s.git("count-objects", "-v") == objects  # the probes went to the throwaway clone
    assert "calibrate: upstream commits: 9, culprits: 4" in proc.stdout
    assert "calibrate: culprits by month: 2026-01 44.4 % (4 of 9)" in proc.stdout
    assert (
        main(
            [
                "calibrate",
                *s.repo_args(),
                "--until",
                "2027-01-01",
                "--source",
                "sandbox",
                "--out",
                str(theirs),
            ]
        )
        == 0
    )
    assert ours.read_bytes() == theirs.read_bytes()


def test_the_shipped_default_model_says_where_it_came_from() -> None:
    model = default_model()
    assert model is not None
    p = model.provenance
    assert "intel" in p.source and p.until is not None and p.until < "2025-10-01"
    assert p.commits > 1000 and 0 < p.positives < p.commits
    assert 0.5 < p.held_out["auc"] < 1.0 and "recall_at_bundled_share" in p.held_out


def test_a_file_that_is_no_model_is_named_by_where_and_why_never_by_its_content(tmp_path: Path) -> None:
    secret = tmp_path / "not-a-model.txt"
    secret.write_text("root:x:0:0:root:/root:/bin/bash\n")
    config = SluiceConfig.model_validate({"risk": {"model": str(secret)}})
    with pytest.raises(SluiceError) as raised:
        load_risk_model(NO_FILES, config, fork_head="0" * 40)
    assert "is not a usable risk model: the file: Invalid JSON" in raised.value.message
    assert "root:x" not in str(raised.value) and "root:x" not in raised.value.remedy
    secret.write_text('{"schema_id": "root:x:0:0"}')  # JSON, but no model: the first field it lacks
    with pytest.raises(SluiceError, match=r"is not a usable risk model: \w+: Field required") as raised:
        load_risk_model(NO_FILES, config, fork_head="0" * 40)
    assert "root:x" not in str(raised.value)


class _NoFiles:
    """A tree with no files: the model is read from this machine."""

    def read_file(self, commit: str, path: str) -> bytes | None:
        return None


NO_FILES = _NoFiles()
