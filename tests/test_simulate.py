"""`sluice simulate` on generated histories: the replay finds planted culprits and reports its figures."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import pytest

from bot.app.cli import main
from bot.core.config import SluiceConfig
from bot.core.simulation import Batching, SimCommit, SimOptions, entropy_bound, information_bound, simulate
from bot.core.tiers import Level
from bot.db.bisections import Bisections
from bot.db.store import Store
from bot.flows.planning import fork_key
from bot.git.repo import GitRepo
from tests.support.scenarios import EPOCH, Scenario, numbered
from tests.test_calibrate import merge_history

DAY = "2026-01-01"


def stream(root: Path, commits: int = 24) -> tuple[Scenario, list[str]]:
    """Upstream commits two hours apart, each in its own file, one pair chained by a shared line."""
    s = Scenario(root)
    s.upstream("Initial import (#1)", {"lib/a.cpp": numbered("a", 20), "docs/x.md": "x\n"}, hours=0)
    s.fork_here()
    s.fork("[XPU] own code (#2)", {"third_party/xpu/x.cpp": "xpu\n"}, hours=0.5)
    shas = []
    for i in range(commits):
        files = {f"lib/m{i}.cpp": numbered(f"m{i}", 5)}
        if i in (3, 4):  # the second edits the line the first added: a dependency
            files = {"lib/a.cpp": numbered("a", 20).replace("a line 7\n", f"a line 7 v{i}\n")}
        shas.append(s.upstream(f"Change {i} (#{10 + i})", files, hours=2 + 2 * i))
    return s, shas


def test_simulate_finds_the_planted_culprits_and_prints_the_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s, shas = stream(tmp_path)
    culprits = tmp_path / "culprits.txt"
    culprits.write_text(f"# planted\n{shas[3]}\n{shas[17]}\n")
    svg = tmp_path / "days.svg"
    assert (
        main(
            [
                "simulate",
                *s.repo_args(),
                "--from",
                DAY,
                "--until",
                "2026-01-05",
                "--culprits",
                str(culprits),
                "--runners",
                "2",
                "--svg",
                str(svg),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "culprits found: 2 of 2" in out
    assert re.search(r"tier runs per ingested commit: 0\.\d{3}", out)
    assert "commits that needed a person: 2" in out  # shas[4] needs shas[3]'s line: it waited for the fix
    assert "Days Behind Upstream: median" in out and any(bar in out for bar in "▁▂▃▄▅▆▇█")
    assert svg.read_text().startswith("<svg") and "median" in svg.read_text()


def test_simulate_json_counts_every_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s, shas = stream(tmp_path)
    culprits = tmp_path / "culprits.txt"
    culprits.write_text(f"{shas[10]}\n")
    args = ["simulate", *s.repo_args(), "--from", DAY, "--until", "2026-01-05", "--culprits", str(culprits)]
    assert main([*args, "--json", "--model", "none"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["commits"] == 25  # the initial import too: it lies in the period
    assert data["culprits_found"] == 1 and data["found"][0]["shas"] == [shas[10]]
    assert data["runs"] == data["candidate_runs"] + data["bisection_runs"]
    assert data["runs_per_commit"] == pytest.approx(data["runs"] / 25, abs=1e-4)
    assert data["needed_person"] == [shas[10]]
    assert main([*args, "--json", "--strategy", "per-commit"]) == 0
    assert json.loads(capsys.readouterr().out)["runs"] == 25


def test_without_culprits_it_mines_them_as_calibrate_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s, c = merge_history(tmp_path)
    assert main(["simulate", *s.repo_args(), "--from", DAY, "--until", "2026-02-01", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    found = {sha for f in data["found"] for sha in f["shas"]}
    # calibrate's labels: reverted a2, named a3 by SHA, a4 by PR, a5 on trunk soon after
    assert found == {c["a2"], c["a3"], c["a4"], c["a5"]}
    assert data["culprits_total"] == 4


def test_with_a_store_it_counts_the_culprits_sluice_blamed_as_calibrate_does(
    tmp_path: Path, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    s, c = merge_history(tmp_path)
    store = Store.open(database_url)
    try:
        at = dt.datetime.fromtimestamp(s.time_of(c["merge_a"]), dt.UTC)
        key = fork_key(SluiceConfig(), GitRepo(s.path), s.fork_ref)
        Bisections(store).blame(
            key, c["a6"], level=Level.L1, pull=9001, bisection=1, detail="L1 failed", at=at
        )
    finally:
        store.close()
    args = ["simulate", *s.repo_args(), "--from", DAY, "--until", "2026-02-01", "--json"]
    assert main([*args, "--database", database_url]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {sha for f in data["found"] for sha in f["shas"]} == {c[f"a{i}"] for i in range(2, 7)}
    assert data["culprits_total"] == 5  # the 4 that fix commits named, and the one Sluice's bisection blamed


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--until", "2025-12-01"], "is not after"),
        (["--runners", "0"], "not a positive count"),
        (["--culprits", "MISSING"], "cannot read --culprits"),
        (["--culprits", "BAD"], "is not a 40-hex upstream SHA"),
        (["--database", "sqlite:///nowhere.db"], "--culprits and --database both say"),
    ],
)
def test_bad_options_are_refused_with_a_remedy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    s, _ = stream(tmp_path, commits=2)
    bad = tmp_path / "bad.txt"
    bad.write_text("abc123\n")
    extra = [
        str(tmp_path / "missing.txt") if e == "MISSING" else str(bad) if e == "BAD" else e for e in extra
    ]
    args = [
        "simulate",
        *s.repo_args(),
        "--from",
        DAY,
        "--until",
        "2026-01-05",
        "--culprits",
        str(bad),
        *extra,
    ]
    assert main(args) != 0
    assert message in capsys.readouterr().err


def commits_at(n: int, *, hours: float) -> list[SimCommit]:
    return [
        SimCommit(sha=f"{i:040x}", time=EPOCH + int(i * hours * 3600), probability=0.02) for i in range(n)
    ]


def test_more_runners_keep_the_fork_closer_to_upstream() -> None:
    commits = commits_at(200, hours=0.25)  # four commits an hour
    culprits = {commits[i].sha for i in (5, 50, 51, 120, 199)}
    slow = simulate(commits, culprits, SimOptions(runners=1, max_commits=4, max_wait_hours=0))
    fast = simulate(commits, culprits, SimOptions(runners=8, max_commits=4, max_wait_hours=0))
    assert slow.culprits_found == fast.culprits_found == 5
    assert fast.median_days_behind < slow.median_days_behind


def test_strategies_against_the_information_bound() -> None:
    commits = commits_at(400, hours=2)
    culprits = {commits[i].sha for i in range(7, 400, 37)}
    flags = [c.sha in culprits for c in commits]
    per_commit = simulate(commits, culprits, SimOptions(strategy=Batching.PER_COMMIT))
    fixed = simulate(commits, culprits, SimOptions(strategy=Batching.FIXED, max_wait_hours=1e6))
    assert per_commit.runs == 400
    assert fixed.culprits_found == len(culprits) == per_commit.culprits_found
    assert information_bound(flags, size=20) <= fixed.runs < per_commit.runs


def test_the_entropy_bound_rewards_only_a_model_that_tells_culprits_apart() -> None:
    flags = [i % 10 == 0 for i in range(100)]  # a 10 % culprit rate
    flat = entropy_bound([0.1] * 100, flags)
    assert flat.rate == pytest.approx(0.469, abs=1e-3)  # H(0.1)
    assert flat.model == pytest.approx(flat.rate) and flat.labels == pytest.approx(flat.rate)
    sharp = entropy_bound([0.9 if f else 0.01 for f in flags], flags)  # a model that knows
    assert sharp.labels < 0.1 < flat.labels
    wrong = entropy_bound([0.01 if f else 0.9 for f in flags], flags)  # one that is confidently wrong
    assert wrong.labels > 2.0
    halved = entropy_bound([0.05] * 100, flags)  # right in shape, half the rate: scaling repairs it
    assert halved.labels > flat.labels and halved.calibrated_labels == pytest.approx(flat.labels)
    with pytest.raises(ValueError):
        entropy_bound([0.1], flags)


def test_a_culprits_dependents_wait_for_the_persons_fix_and_are_then_searched_too() -> None:
    commits = commits_at(12, hours=1)
    first, second = commits[2].sha, commits[6].sha
    commits[6] = commits[6].model_copy(update={"depends_on": (first,)})  # needs the first culprit's lines
    commits[9] = commits[9].model_copy(update={"depends_on": (second,)})
    options = SimOptions(max_commits=12, max_wait_hours=24, person_hours=48)
    result = simulate(commits, {first, second}, options)
    assert [f.shas for f in result.found] == [(first,), (second,)]
    assert result.found[0].dependents == (second, commits[9].sha)
    # the second culprit could only be tried once the first was fixed, two days later
    assert result.found[1].found_at - result.found[0].found_at >= 48 * 3600
    assert result.needed_person == (first, second)
    assert result.culprits_found == result.culprits_total == 2


def test_sizes_follow_the_culprits_actually_found_when_the_model_overstates_them() -> None:
    commits = [c.model_copy(update={"probability": 0.2}) for c in commits_at(300, hours=1)]
    trusting = simulate(commits, set(), SimOptions(max_commits=40, recalibrate=False))
    learning = simulate(commits, set(), SimOptions(max_commits=40))
    assert learning.culprits_found == trusting.culprits_found == 0
    assert learning.candidates < trusting.candidates  # no culprit came: candidates grew
