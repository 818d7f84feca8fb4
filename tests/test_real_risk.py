"""`benchmarks/real_risk.py`: its culprit labels, the planner's decisions with a model, calibrate's rows
with a time split on a real history, and the no-PATH skip."""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import importlib.util
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import pytest

from bot.core import fitting
from bot.core.config import SluiceConfig
from bot.core.models import Dependency, DependencyKind, PlannedCommit, RiskKind, RiskLevel, RiskReason
from bot.core.risk_model import MODEL_SCHEMA, Provenance, RiskModel, commit_features
from bot.flows.mining import IngestionWindow
from tests.test_calibrate import merge_history

SCRIPT = Path(__file__).parent.parent / "benchmarks" / "real_risk.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("real_risk", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["real_risk"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def commit(n: int, subject: str, *, hot: bool = False) -> PlannedCommit:
    reasons = (RiskReason(kind=RiskKind.PATCH_STACK_SYMBOL, level=RiskLevel.HIGH, detail="a.cpp: f"),)
    return PlannedCommit(
        sha=f"{n:x}" * 40 if n < 16 else hashlib.sha1(str(n).encode()).hexdigest(),
        subject=subject,
        author="dev",
        committer_time=n,
        changed_lines=3,
        files=("python/triton/a.py",),
        symbols=(),
        risk=RiskLevel.HIGH if hot else RiskLevel.LOW,
        reasons=reasons if hot else (),
        depends_on=(),
    )


def test_culprits_are_reverted_or_named_by_the_fix_commits() -> None:
    real_risk = load()
    window = [
        commit(1, "[AMD] Use buffer ops (#8001)"),
        commit(2, "[NVIDIA] Faster TMA (#8002)"),
        commit(3, "[FRONTEND] Scalars (#8003)"),
        commit(4, "[BACKEND] Layouts (#8004)"),
        commit(5, "[DOCS] Typo (#8005)"),
    ]
    fixes = [
        ("f1", 'Revert "[AMD] Use buffer ops (#8001)"\n\nbreaks XPU'),
        ("f2", f"[intel] fix build after '{'2' * 7}'"),
        ("f3", "[intel] adapt to https://github.com/triton-lang/triton/pull/8003"),
        ("f4", "[intel] follow #8004 in our pass"),
        ("f5", "[Build] Port the docs typo fix (#8005)"),  # its own PR number: a port, not a culprit
    ]
    assert real_risk.culprits(window, fixes) == {c.sha for c in window[:4]}


def test_the_planner_chains_by_the_model_and_the_figures_count_culprits_caught() -> None:
    real_risk = load()
    commits = tuple(commit(n, f"c{n}", hot=n % 4 == 0) for n in range(16, 36))  # 5 hot of 20
    model = RiskModel(
        schema=MODEL_SCHEMA,
        intercept=-4.0,
        coefficients={"reason:patch-stack-symbol": 3.0},
        provenance=Provenance(source="a test"),
    )
    config = SluiceConfig.model_validate({"risk": {"chain_share": 0.25}})
    chained = real_risk.Judged.of(commits, model, config).chained(config)
    assert chained == {c.sha for c in commits if c.committer_time % 4 == 0}
    culprits = frozenset(c.sha for c in commits if c.committer_time in (16, 17))  # one hot, one not
    window = IngestionWindow("w", "merge", 0, "f", "u", tuple(c.sha for c in commits), ())
    found = real_risk.figures([real_risk.Mined(window, commits, culprits)], [chained])
    assert (found.commits, found.culprits, found.bundled, found.recall) == (20, 2, 0.75, 0.5)


def test_it_measures_calibrates_rows_with_a_time_split(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a two-merge history: calibrate's own labels, the later merge held out, the figures printed."""
    s, _ = merge_history(tmp_path / "history")
    args = [
        "--fork",
        s.fork_ref,
        "--upstream",
        s.upstream_ref,
        "--since",
        "2025-12-01",
        "--until",
        "2027-01-01",
    ]
    cache = tmp_path / "features.jsonl"
    assert load().main([str(s.path), *args, "--cache", str(cache)]) == 0
    out = capsys.readouterr().out
    assert "ingestions mined: 2 (9 upstream commits, 4 culprits); held out: the newest 1 (2 commits)" in out
    assert "held out, model, chain_share 0.3: " in out and "[goal >= 80% at >= 70% bundled: " in out
    assert cache.read_text().count("\n") == 2  # both ingestions planned once, as calibrate caches them
    assert load().main([str(s.path), *args, "--cache", str(cache)]) == 0
    again = capsys.readouterr().out
    assert "planning" not in again and "ingestions mined: 2 (9 upstream commits, 4 culprits)" in again


def test_without_a_path_it_skips() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout.strip()) == (0, "skipped: no repository given")


def test_the_rolling_origin_refits_each_month_on_what_came_before_it_only() -> None:
    """Month starts after the earlier share of rows; each month judged by a model fitted on the months
    before (which learns the planted effect), never on the month itself."""
    real_risk = load()
    day = 86400
    feb = int(dt.datetime(2025, 2, 3, tzinfo=dt.UTC).timestamp())
    mined, rows = [], []
    for w in range(16):  # one ingestion a week, Feb to May, 5 commits each: one hot, which broke the fork
        commits = tuple(commit(100 + 5 * w + i, f"w{w} c{i}", hot=i == 0) for i in range(5))
        when = feb + 7 * w * day
        window = IngestionWindow(f"w{w}", "merge", when, "f", "u", tuple(c.sha for c in commits), ())
        mined.append(real_risk.Mined(window, commits, frozenset({commits[0].sha})))
        rows += [
            real_risk.Row(c.sha, f"w{w}", when, {"reason:patch-stack-symbol": float(i == 0)}, int(i == 0))
            for i, c in enumerate(commits)
        ]
    starts = real_risk.month_starts(rows, after_share=0.4)
    assert [dt.datetime.fromtimestamp(s, dt.UTC).strftime("%Y-%m-%d") for s in starts] == [
        "2025-04-01",
        "2025-05-01",
    ]
    folds = real_risk.rolling_folds(mined, rows, starts)
    assert [len(f.judged) for f in folds] == [4, 3]  # April's Mondays, then May's before the last row
    for fold in folds:
        assert fold.model.provenance.commits == sum(1 for r in rows if r.time < fold.start)
        assert all(m.window.time >= fold.start for m in fold.judged)
        config = SluiceConfig.model_validate({"risk": {"chain_share": 0.1}})  # half the hot ones' share
        chained = [real_risk.Judged.of(m.commits, fold.model, config).chained(config) for m in fold.judged]
        assert chained == [frozenset({m.commits[0].sha}) for m in fold.judged]
    clean = [r for r in rows if not r.outcome]
    assert real_risk.rolling_folds(mined, clean, starts) == []  # no culprit before a month: nothing to learn
    # A culprit named five weeks after its ingestion was not known to the fit at a month start before that.
    late = [replace(r, known=r.time + 35 * day) if r.outcome else r for r in rows]
    named = [sum(1 for r in rows if r.outcome and r.time + 35 * day < s) for s in starts]
    assert named == [4, 8]  # of 9 and 13 ingestions before April and May
    assert [f.model.provenance.positives for f in real_risk.rolling_folds(mined, late, starts)] == named
    assert [f.model.provenance.positives for f in folds] == [9, 13]


def test_the_sweep_keeps_the_setting_that_chains_most_culprits_at_the_goals_bundled_share() -> None:
    real_risk = load()
    figs = real_risk.Figures
    found = {
        0.2: figs(100, 10, 0.75, 0.6),
        0.25: figs(100, 10, 0.71, 0.7),
        0.26: figs(100, 10, 0.70, 0.7),  # as many culprits, fewer commits bundled
        0.3: figs(100, 10, 0.69, 0.9),  # more culprits, but under 70 % bundled
    }
    assert real_risk.best_at_goal(found) == (0.25, found[0.25])
    assert real_risk.best_at_goal({0.3: found[0.3]}) is None


def test_resampling_the_ingestions_takes_the_best_setting_again_in_each_draw() -> None:
    """Two ingestions of one culprit each: setting 0.2 catches only the first's and bundles 80 %; 0.3
    catches both but bundles 50 %, under the goal. A draw of two is the first twice (1 in 4: every culprit
    chained), the second twice (1 in 4: none) or both (half: one of two), always at 0.2."""
    real_risk = load()
    commits = [commit(n, f"c{n}") for n in range(1, 21)]
    first, second = commits[:10], commits[10:]

    def mined(part: list[PlannedCommit]) -> object:
        window = IngestionWindow(part[0].sha, "merge", 0, "f", "u", tuple(c.sha for c in part), ())
        return real_risk.Mined(window, tuple(part), frozenset({part[0].sha}))

    both = [mined(first), mined(second)]
    chained = {
        0.2: [frozenset({first[0].sha, first[1].sha}), frozenset({second[5].sha, second[6].sha})],
        0.3: [frozenset(c.sha for c in first[:5]), frozenset(c.sha for c in second[:5])],
    }
    found = real_risk.resampled_best(both, chained, resamples=4000, seed=1)
    assert (found.low, found.median, found.high) == (0.0, 0.5, 1.0)
    assert 0.22 < found.met < 0.28  # the draws of the first twice
    assert real_risk.resampled_best(both, chained, resamples=4000, seed=1) == found  # seeded
    assert real_risk.resampled_best(both, {0.3: chained[0.3]}).high == 0.0  # never 70 % bundled
    alike = real_risk.resampled_best([both[0]] * 3, {0.2: [chained[0.2][0]] * 3})
    assert (alike.low, alike.high, alike.met) == (1.0, 1.0, 1.0)  # identical ingestions: no spread


def test_commits_scored_once_are_chained_at_each_share_by_the_planner() -> None:
    real_risk = load()
    commits = [commit(n, f"c{n}", hot=n % 4 == 0) for n in range(1, 13)]
    model = RiskModel(
        schema=MODEL_SCHEMA,
        intercept=-4.0,
        coefficients={"reason:patch-stack-symbol": 3.0},
        provenance=Provenance(source="test"),
    )
    judged = real_risk.Judged.of(commits, model, SluiceConfig())
    assert all(c.probability is not None for c in judged.scored)
    hot = {c.sha for c in commits if c.risk is RiskLevel.HIGH}  # 3 of the 12
    assert judged.chained(real_risk.with_share(SluiceConfig(), 0.0)) == frozenset()
    assert judged.chained(real_risk.with_share(SluiceConfig(), 0.25)) == hot
    assert len(judged.chained(real_risk.with_share(SluiceConfig(), 0.5))) == 6


def test_the_budget_says_where_each_commit_goes_and_which_culprits_it_catches() -> None:
    """A hot commit chained for its probability, a later one that edits its lines joining its chain, a
    critical pin chained by rule, the rest bundled; each place with the culprits it holds."""
    real_risk = load()
    commits = [commit(n, f"c{n}") for n in range(1, 9)]
    commits[1] = commit(2, "hot", hot=True)
    follows = Dependency(sha=commits[1].sha, kind=DependencyKind.LINES, detail="python/triton/a.py")
    commits[4] = commits[4].model_copy(update={"depends_on": (follows,)})
    pin = RiskReason(
        kind=RiskKind.COMPONENT, level=RiskLevel.CRITICAL, detail="llvm-pin: cmake/llvm-hash.txt"
    )
    commits[6] = commits[6].model_copy(update={"risk": RiskLevel.CRITICAL, "reasons": (pin,)})
    model = RiskModel(
        schema=MODEL_SCHEMA,
        intercept=-4.0,
        coefficients={"reason:patch-stack-symbol": 3.0},
        provenance=Provenance(source="test"),
        quantiles=(0.9,) * 10 + (0.1,) * 91,  # a stream threshold of 0.1 at chain_share 0.25
    )
    config = real_risk.with_share(SluiceConfig(), 0.25)  # the hot commit: p 0.27; the others: 0.018
    judged = real_risk.Judged.of(commits, model, config)
    placed = judged.placed(config)
    assert placed[commits[1].sha] == real_risk.OWN
    assert placed[commits[4].sha] == real_risk.DEPENDENT
    assert placed[commits[6].sha] == real_risk.STRUCTURAL
    assert {placed[c.sha] for i, c in enumerate(commits) if i not in (1, 4, 6)} == {real_risk.BUNDLED}
    assert {sha for sha, where in placed.items() if where != real_risk.BUNDLED} == judged.chained(config)
    culprits = frozenset({commits[1].sha, commits[4].sha, commits[0].sha})
    window = IngestionWindow("w", "merge", 0, "f", "u", tuple(c.sha for c in commits), ())
    mined = real_risk.Mined(window, tuple(commits), culprits)
    assert real_risk.budget([mined], [judged], config) == {
        real_risk.OWN: (1, 1),
        real_risk.DEPENDENT: (1, 1),
        real_risk.STRUCTURAL: (1, 0),
        real_risk.BUNDLED: (5, 1),
    }


def test_older_history_is_fitted_on_but_the_ingestions_judged_stay_those_from_since() -> None:
    real_risk = load()
    day = 86400
    rows = [
        real_risk.Row(f"{w:x}{i}", f"w{w}", w * 7 * day, {"log2-lines": 1.0}, int(i == 0))
        for w in range(20)
        for i in range(4)
    ]
    since = 8 * 7 * day  # w8 on are judged; w0–w7 are only fitted on
    train, test = real_risk.held_out(rows, since)
    alone_train, alone_test = fitting.time_split([r for r in rows if r.time >= since], real_risk.TRAIN_SHARE)
    assert test == alone_test  # the same ingestions held out as without the older history
    assert train == [r for r in rows if r.time < since] + alone_train  # the older history fitted on too
    assert real_risk.held_out(rows, None) == fitting.time_split(rows, real_risk.TRAIN_SHARE)
    # A culprit named three weeks after its ingestion is fitted on as one only if that was before the split.
    late = [replace(r, known=r.time + 21 * day) if r.outcome else r for r in rows]
    late_train, late_test = real_risk.held_out(late, since)
    assert late_test == [replace(r, known=r.time + 21 * day) if r.outcome else r for r in test]
    split = test[0].time
    assert [r.outcome for r in late_train] == [int(r.outcome and r.time + 21 * day < split) for r in train]
    assert 0 < sum(r.outcome for r in late_train) < sum(r.outcome for r in train)


@pytest.mark.parametrize(
    ("since", "train_since", "mined"),
    [
        ("2025-02-01", None, "2025-02-01"),
        ("2025-02-01", "2024-10-01", "2024-10-01"),
        ("2025-02-01", "2025-06-01", "2025-02-01"),  # a later --train-since adds nothing
        (None, "2024-10-01", None),  # all history is mined already
    ],
)
def test_mining_starts_at_the_earlier_of_since_and_train_since(
    since: str | None, train_since: str | None, mined: str | None
) -> None:
    real_risk = load()
    args = argparse.Namespace(since=since, train_since=train_since)
    expected = (
        None if mined is None else int(dt.datetime.fromisoformat(mined).replace(tzinfo=dt.UTC).timestamp())
    )
    assert real_risk.mined_from(args) == expected


def test_the_ceiling_is_a_model_fitted_on_the_judged_ingestions_too(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Early ingestions broke by their patch-stack commit, late ones by a 600-line one: a model fitted on the
    early ones only cannot know size, the ceiling's (fitted on every ingestion) chains every late culprit."""
    real_risk = load()
    config = SluiceConfig.model_validate({"risk": {"model": "none"}})
    mined, rows = [], []
    for w in range(10):
        late = w >= 5
        commits = [commit(200 + 5 * w + i, f"w{w} c{i}", hot=i == 0) for i in range(5)]
        commits[1] = commits[1].model_copy(update={"changed_lines": 600})
        bad = commits[1 if late else 0].sha
        window = IngestionWindow(f"w{w}", "merge", w, "f", "u", tuple(c.sha for c in commits), ())
        mined.append(real_risk.Mined(window, tuple(commits), frozenset({bad})))
        rows += [
            real_risk.Row(c.sha, f"w{w}", w, commit_features(c, config=config), int(c.sha == bad))
            for c in commits
        ]
    judged = {"the late ones": mined[5:]}
    real_risk.ceiling(config, mined, rows, judged)
    line = capsys.readouterr().out.splitlines()[0]
    assert line.startswith(
        "the late ones, in sample (fitted on every ingestion, these too), best chain_share"
    )
    assert "100.0% of 5 culprits chained" in line and "[goal" not in line  # a ceiling, not the goal's measure
    early = real_risk.held_out_model(rows[:25], {m.window.id: m.commits for m in mined[:5]})
    real_risk.sweep(
        "held out", mined[5:], [real_risk.Judged.of(m.commits, early, config) for m in mined[5:]], config
    )
    out = capsys.readouterr().out.splitlines()
    assert [ln.split(":")[0] for ln in out[:4]] == [f"held out, chain_share {s}" for s in real_risk.SHARES]
    held_out = out[4]
    assert "best chain_share" in held_out and "100.0% of 5 culprits chained" not in held_out


def test_the_culprit_rates_are_of_the_rows_fitted_and_held_out_and_of_each_month() -> None:
    real_risk = load()
    day = 86400
    jan, feb = (int(dt.datetime(2025, m, 10, tzinfo=dt.UTC).timestamp()) for m in (1, 2))
    fitted = [real_risk.Row(f"{i}", "a", jan + i * day, {}, int(i == 0)) for i in range(4)]  # 1 of 4
    held = [real_risk.Row(f"h{i}", "b", feb, {}, int(i < 3)) for i in range(5)]  # 3 of 5
    assert real_risk.culprit_rates(fitted, held) == (
        "culprits per commit: fitted 25.0% (1 of 4), held out 60.0% (3 of 5); by month 2025-01 25.0%, "
        "2025-02 60.0%"
    )
    assert real_risk.culprit_rates(fitted, []).startswith(
        "culprits per commit: fitted 25.0% (1 of 4), held out none"
    )
