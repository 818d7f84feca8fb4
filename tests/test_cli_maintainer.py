"""The command line a maintainer expects: revisions, defaults named, swapped refs caught, skip and defer,
components that extend the defaults, https-only upstreams, a plan summary that fits the terminal."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bot.app.cli import main
from bot.core.config import SluiceConfig, parse_config
from bot.db.store import Store
from bot.demo import DEMO, Sandbox, build_sandbox
from bot.flows.risk_files import DEFAULT_MODEL_PATH
from bot.flows.swapped import Evidence, SideCommit, ingestion_like, looks_swapped, strategy_note
from tests.support.scenarios import CPP_PASS, PASS_PATH, Scenario, numbered, pipeliner_fork


@pytest.fixture
def scenario(tmp_path: Path) -> Scenario:
    return pipeliner_fork(tmp_path)


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Sandbox:
    return build_sandbox(tmp_path_factory.mktemp("maintainer") / "sandbox", DEMO)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def repo_of(s: Scenario) -> list[str]:
    return ["--repo", str(s.path)]


# --- revisions, defaults, suggestions -----------------------------------------------------------------------


def test_revision_syntax_names_refs_and_commits(scenario: Scenario, capsys) -> None:
    first = scenario.upstream("[DOCS] a (#2)", {"docs/a.md": numbered("a", 20) + "a\n"})
    second = scenario.upstream("[DOCS] b (#3)", {"docs/b.md": "b\n"})
    args = [*repo_of(scenario), "--fork", "main~0", "--json", "--no-record"]
    plan = json.loads(run(capsys, "plan", *args, "--upstream", "upstream/main~1")[1])
    assert plan["upstream_head"] == first
    assert plan["fork_head"] == scenario.git("rev-parse", "main")
    code, out, err = run(
        capsys, "pick", *repo_of(scenario), "--onto", "main^0", "--dry-run", "--json", "--no-record",
        "upstream/main^", second[:8].upper(),
    )  # fmt: skip
    assert code == 0, err
    assert [c["upstream"] for c in json.loads(out)["commits"]] == [first, second]


REFUSED = ["main..upstream/main", "main...upstream/main", "^main", "-x", "--output=/tmp/sluice-x", "HEAD@{1}",
           "main^{tree}", "main^!", "main^-1", "main:docs/a.md", "main~1..main"]  # fmt: skip


@pytest.mark.parametrize("rev", REFUSED)
def test_ranges_options_and_other_syntax_are_refused_before_git_runs(
    scenario: Scenario, tmp_path: Path, capsys, rev: str
) -> None:
    db = tmp_path / "store.db"
    code, out, err = run(
        capsys, "plan", *repo_of(scenario), f"--upstream={rev}", "--database", f"sqlite:///{db}"
    )
    assert (code, out) == (2, "")
    assert "not a valid git ref name or revision" in err and "ranges (a..b)" in err
    assert not db.exists() and not Path("/tmp/sluice-x").exists()
    code, _, err = run(capsys, "pick", *repo_of(scenario), "--onto", "main", "--no-record", "--", rev)
    assert code == 2 and "not a commit SHA or revision" in err


def test_an_unknown_ref_suggests_close_names(scenario: Scenario, capsys) -> None:
    code, _, err = run(capsys, "status", *repo_of(scenario), "--fork", "mian", "--upstream", "upstream/main")
    assert code == 2
    assert "unknown ref 'mian'" in err and "did you mean 'main'" in err


def test_fork_and_upstream_default_and_the_message_names_the_default(
    scenario: Scenario, tmp_path: Path, capsys
) -> None:
    scenario.upstream("[DOCS] a (#2)", {"docs/b.md": "b\n"})
    code, out, _ = run(capsys, "status", *repo_of(scenario), "--json")
    assert code == 0 and json.loads(out)["pending_commits"] == 1
    scenario.git("branch", "-m", "upstream/main", "upstream/mian")
    code, out, err = run(capsys, "plan", *repo_of(scenario), "--no-record")
    assert (code, out) == (2, "")
    assert "unknown ref 'upstream/main' (the default for --upstream)" in err
    assert "did you mean 'upstream/mian'" in err and "pass --upstream REF" in err
    config = tmp_path / "sluice.yml"
    config.write_text("fork:\n  branch: trunk\nupstream:\n  branch: mian\n")
    code, _, err = run(capsys, "status", *repo_of(scenario), "--config", str(config))
    assert code == 2 and "unknown ref 'trunk' (the default for --fork)" in err
    scenario.git("branch", "trunk", "main")
    assert run(capsys, "status", *repo_of(scenario), "--config", str(config))[0] == 0  # upstream/mian


# --- swapped --fork / --upstream --------------------------------------------------------------------------


def swapped(s: Scenario, capsys, db: Path, *, fork: str = "upstream/main", upstream: str = "main") -> str:
    code, out, err = run(
        capsys, "plan", *repo_of(s), "--fork", fork, "--upstream", upstream, "--database", f"sqlite:///{db}"
    )
    assert (code, out) == (2, "")
    assert not db.exists()
    return err


@pytest.mark.parametrize("how", ["trailer", "x", "subject"])
def test_swapped_refs_of_a_cherry_picking_fork_are_caught(
    scenario: Scenario, tmp_path: Path, capsys, how: str
) -> None:
    for n in range(2, 6):
        sha = scenario.upstream(f"[DOCS] part {n} (#{n})", {f"docs/p{n}.md": f"{n}\n"})
        if n < 5:
            scenario.pick(sha, how=how, message=f"[Cherry-pick] '[DOCS] part {n} (#{n})'")
    assert run(capsys, "plan", *repo_of(scenario), "--json", "--no-record")[0] == 0  # the right way round
    err = swapped(scenario, capsys, tmp_path / "store.db")
    assert "did you swap --fork and --upstream?" in err
    assert "pass --fork main --upstream upstream/main" in err


def merge_upstream(s: Scenario, message: str) -> str:
    s.git("checkout", "-q", "main")
    s.git("merge", "-q", "--no-ff", "-m", message, "upstream/main")
    return s.git("rev-parse", "HEAD")


def test_swapped_refs_of_a_merging_fork_are_caught(scenario: Scenario, tmp_path: Path, capsys) -> None:
    """Intel's way: the fork merges upstream commits; its first-parent stream is full of those merges."""
    scenario.upstream("[DOCS] a (#2)", {"docs/b.md": "b\n"})
    merge_upstream(scenario, "Merge upstream (#100)")
    scenario.fork("[XPU] Fix after the merge", {"third_party/intel/a.cpp": "a\n"})
    scenario.upstream("[DOCS] c (#3)", {"docs/c.md": "c\n"})
    merged = scenario.upstream("[DOCS] d (#4)", {"docs/d.md": "d\n"})
    merge_upstream(scenario, "Merge upstream (#101)")
    scenario.upstream("[DOCS] e (#5)", {"docs/e.md": "e\n"})
    assert run(capsys, "status", *repo_of(scenario), "--json")[0] == 0  # the right way round
    err = swapped(scenario, capsys, tmp_path / "a.db")
    assert "did you swap --fork and --upstream? 'main' ingests 'upstream/main'" in err
    err = swapped(scenario, capsys, tmp_path / "b.db", fork=merged[:12])  # an upstream commit the fork merged
    assert f"'main' merged '{merged[:12]}' in through a merge's second parent" in err


def test_a_later_state_of_the_fork_given_as_its_upstream_is_refused(
    scenario: Scenario, tmp_path: Path, capsys
) -> None:
    """origin/main for upstream/main: it holds fork trunk, so every metric would be wrong (Intel's fork
    against a later state of itself: 60.76 Days Behind, a patch stack of 0)."""
    scenario.upstream("[DOCS] a (#2)", {"docs/b.md": "b\n"})
    merge_upstream(scenario, "Merge upstream (#100)")
    earlier = scenario.git("rev-parse", "main")
    scenario.upstream("[DOCS] c (#3)", {"docs/c.md": "c\n"})
    merge_upstream(scenario, "Merge upstream (#101)")
    scenario.fork("[XPU] own", {"third_party/intel/a.cpp": "a\n"})
    scenario.upstream("[DOCS] e (#5)", {"docs/e.md": "e\n"})
    merge_upstream(scenario, "Merge upstream (#102)")
    err = swapped(scenario, capsys, tmp_path / "a.db", fork=earlier, upstream="main")
    assert "'main' holds fork trunk" in err and "merges another history as a fork does (2 of" in err
    assert "pass --upstream the upstream branch" in err
    assert run(capsys, "status", *repo_of(scenario), "--json")[0] == 0  # the real upstream is fine


def test_a_fork_that_merges_its_upstream_configured_to_pick_gets_a_note(
    scenario: Scenario, tmp_path: Path, capsys
) -> None:
    """Intel's fork with no .github/sluice.yml runs on the defaults (cherry-pick): its one `-x` pick would be
    its ingestion tip, and every merge a backlog. Sluice says so; configured `merge`, nothing to say."""
    scenario.upstream("[DOCS] a (#2)", {"docs/b.md": "b\n"})
    merge_upstream(scenario, "Merge upstream (#100)")
    scenario.upstream("[DOCS] c (#3)", {"docs/c.md": "c\n"})
    merge_upstream(scenario, "Merge upstream (#101)")
    scenario.upstream("[DOCS] e (#5)", {"docs/e.md": "e\n"})
    code, _, err = run(capsys, "status", *repo_of(scenario))
    assert code == 0 and "note: fork trunk merges its upstream (2 of its newest commits merge upstream" in err
    assert "set `strategy: merge`" in err
    merging = tmp_path / "merge.yml"
    merging.write_text("strategy: merge\n")
    code, _, err = run(capsys, "status", *repo_of(scenario), "--config", str(merging))
    assert code == 0 and "note:" not in err
    up = scenario.git("rev-parse", "upstream/main")
    code, _, err = run(
        capsys,
        "pick",
        *repo_of(scenario),
        "--onto",
        "main",
        "--strategy",
        "merge",
        "--dry-run",
        "--no-record",
        up,
    )
    assert code == 0 and "note:" not in err  # picking by merge, as asked


@pytest.mark.parametrize(
    ("merges", "picks", "strategy", "said"),
    [
        (2, 0, "cherry-pick", True),
        (1, 0, "cherry-pick", False),
        (5, 5, "cherry-pick", False),
        (5, 1, "merge", False),
        (10, 3, "cherry-pick", True),
    ],
)
def test_strategy_note(merges: int, picks: int, strategy: str, said: bool) -> None:
    config = parse_config(f"strategy: {strategy}\n")
    assert (strategy_note(config, merges=merges, picks=picks) is not None) is said


def test_no_false_alarm_for_an_upstream_that_merges_its_pull_requests(
    scenario: Scenario, tmp_path: Path, capsys
) -> None:
    """An upstream whose first-parent stream has merges of its own PR branches, and a fork that has not
    ingested anything yet: nothing there ingests the fork."""
    for n in (2, 3, 4):
        scenario.git("checkout", "-q", "-b", f"pr{n}", "upstream/main")
        scenario.git("commit", "-q", "--allow-empty", "-m", f"work {n}")
        scenario.git("checkout", "-q", "upstream/main")
        scenario.git("merge", "-q", "--no-ff", "-m", f"Merge pull request #{n}", f"pr{n}")
    code, _, err = run(capsys, "status", *repo_of(scenario), "--json")
    assert code == 0, err
    fresh = Scenario(tmp_path / "fresh")  # a fork with no commits of its own sits on the upstream stream
    fresh.upstream("Initial import (#1)", {"a.txt": "a\n"})
    fresh.fork_here()
    fresh.upstream("[DOCS] b (#2)", {"b.txt": "b\n"})
    assert run(capsys, "status", *repo_of(fresh), "--json")[0] == 0


@pytest.mark.parametrize(
    ("fork", "upstream", "swapped"),
    [(0, 0, False), (0, 1, False), (0, 2, True), (5, 0, False), (1, 4, False), (1, 5, True), (3, 10, False)],
)
def test_looks_swapped_wants_clear_evidence(fork: int, upstream: int, swapped: bool) -> None:
    assert looks_swapped(fork=Evidence(fork), upstream=Evidence(upstream)) is swapped


@pytest.mark.parametrize(
    ("parents", "message", "looks"),
    [
        (("a", "b"), "Merge OpenAI Triton commit `407b8a3` (#5227)", True),
        (("a",), f"[DOCS] x (#2)\n\nUpstream-Commit: {'1' * 40}\n", True),
        (("a",), "[DOCS] x (#2)\n\n(cherry picked from commit 1234567)\n", True),
        (("a",), "[Cherry-pick] '[DOCS] x (#2)'", True),
        (("a",), "[DOCS] x (#2)", False),
        (("a",), 'Revert "[DOCS] x (#2)"\n\nThis reverts commit 1234567.', False),
    ],
)
def test_what_looks_like_an_ingestion(parents: tuple[str, ...], message: str, looks: bool) -> None:
    commit = SideCommit(sha="c" * 40, parents=parents, message=message)
    assert ingestion_like(commit, SluiceConfig()) is looks


# --- skip and defer ---------------------------------------------------------------------------------------


def test_skip_and_defer_hold_commits_out_of_plans_and_status(
    scenario: Scenario, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    db = tmp_path / "store.db"
    store_args = [*repo_of(scenario), "--database", f"sqlite:///{db}"]
    docs = scenario.upstream("[DOCS] Internal notes (#2)", {"docs/notes.md": "n\n"})
    bump = scenario.upstream("[BUILD] Bump LLVM (#3)", {"cmake/llvm-hash.txt": "b\n"})
    other = scenario.upstream("[DOCS] b (#4)", {"docs/b.md": "b\n"})

    code, out, err = run(capsys, "skip", *store_args, docs)
    assert (code, out) == (2, "") and "skipping needs a reason" in err and not db.exists()
    code, out, err = run(
        capsys, "skip", *store_args, "--reason", "we do not ship these", "--by", "alice", docs[:9]
    )
    assert code == 0, err
    assert out == f"{docs[:10]} skipped by alice: [DOCS] Internal notes (#2)\n"
    code, out, _ = run(capsys, "defer", *store_args, "upstream/main~1")  # --by: git's user.name
    assert out == f"{bump[:10]} deferred by Upstream Dev: [BUILD] Bump LLVM (#3)\n"

    status = json.loads(run(capsys, "status", *store_args, "--json")[1])
    assert (status["pending_commits"], status["skipped_commits"], status["deferred_commits"]) == (2, 1, 1)
    code, out, _ = run(capsys, "status", *store_args)
    assert "Held by people" in out and "1 skipped (won't port), 1 deferred" in out
    assert "we do not ship these" in out and "alice" in out and "Upstream Dev" in out
    plan = json.loads(run(capsys, "plan", *store_args, "--json")[1])
    assert plan["held"] == {docs: "skipped", bump: "deferred"}
    assert [c["sha"] for b in plan["bundles"] for c in b["commits"]] == [other] and plan["chains"] == []
    assert plan["status"]["pending_commits"] == 2
    held_rows = re.split(r"\nHeld by people *\n", run(capsys, "status", *store_args)[1])[1]
    assert "bundled" not in held_rows and len(re.findall(r"skipped|deferred", held_rows)) == 2

    store = Store.open(f"sqlite:///{db}")
    try:
        records = store.dispositions(f"{scenario.path.resolve()}#main")
    finally:
        store.close()
    assert (records[docs].reason, records[docs].approver) == ("we do not ship these", "alice")
    assert (records[bump].disposition, records[bump].approver) == ("deferred", "Upstream Dev")

    code, _, err = run(capsys, "defer", *store_args, "--undo", docs)
    assert code == 2 and "is not deferred (skipped); nothing to undo" in err
    code, out, _ = run(capsys, "skip", *store_args, "--undo", "--json", "--by", "alice", docs)
    assert code == 0 and json.loads(out) == {
        "schema_version": 1,
        "disposition": "pending",
        "by": "alice",
        "reason": None,
        "commits": [{"sha": docs, "subject": "[DOCS] Internal notes (#2)"}],
    }
    plan = json.loads(run(capsys, "plan", *store_args, "--json")[1])
    assert plan["held"] == {bump: "deferred"}
    assert sorted(c["sha"] for b in plan["bundles"] for c in b["commits"]) == sorted([docs, other])


def test_plan_no_record_previews_what_the_store_holds_and_writes_no_plan(
    scenario: Scenario, tmp_path: Path, capsys
) -> None:
    """`plan --no-record` is the plan the next ingestion would make: what people held stays held and a
    stored chain goes on under its name; the store gains no plan, and a store that is not there is named."""
    db = tmp_path / "store.db"
    store_args = [*repo_of(scenario), "--database", f"sqlite:///{db}"]
    bump = scenario.upstream("[BUILD] Bump LLVM (#2)", {"cmake/llvm-hash.txt": "b\n"})
    docs = scenario.upstream("[DOCS] b (#3)", {"docs/b.md": "b\n"})
    first = json.loads(run(capsys, "plan", *store_args, "--json")[1])
    assert [c["id"] for c in first["chains"]] == [f"chain-{bump[:10]}"]
    scenario.pick(bump, how="trailer")
    fixup = scenario.upstream("[BUILD] Fix the build (#4)", {"cmake/llvm-hash.txt": "b\nc\n"})
    assert run(capsys, "defer", *store_args, "--by", "alice", docs)[0] == 0

    preview = json.loads(run(capsys, "plan", *store_args, "--json", "--no-record")[1])
    assert preview["held"] == {docs: "deferred"}
    (chain,) = preview["chains"]
    assert (chain["id"], chain["ingested"]) == (f"chain-{bump[:10]}", [bump])
    assert [c["sha"] for c in chain["commits"]] == [fixup]
    store = Store.open(f"sqlite:///{db}")
    try:  # the stored plan is still the first one: it holds the bump, pending then
        stored = store.latest_plan(f"{scenario.path.resolve()}#main")
    finally:
        store.close()
    assert stored is not None and [c.sha for c in stored.chains[0].commits] == [bump]
    assert json.loads(run(capsys, "plan", *store_args, "--json")[1]) == preview  # what was previewed

    missing = tmp_path / "typo.db"
    code, out, err = run(
        capsys, "plan", *repo_of(scenario), "--database", f"sqlite:///{missing}", "--no-record"
    )
    assert (code, out) == (2, "") and f"no store at {missing}" in err and not missing.exists()


def test_a_skipped_commit_leaves_the_backlog_and_a_deferred_one_stays(
    scenario: Scenario, tmp_path: Path, capsys
) -> None:
    store_args = [*repo_of(scenario), "--database", f"sqlite:///{tmp_path / 'store.db'}"]
    hole = scenario.upstream("[DOCS] a (#2)", {"docs/b.md": "b\n"}, hours=10)
    later = scenario.upstream("[DOCS] c (#3)", {"docs/c.md": "c\n"}, hours=20)
    scenario.pick(later, how="trailer", hours=21)

    def counts() -> tuple[int, int, int, int]:
        s = json.loads(run(capsys, "status", *store_args, "--json")[1])
        return s["backlog_commits"], s["pending_commits"], s["deferred_commits"], s["skipped_commits"]

    assert run(capsys, "plan", *store_args, "--json")[0] == 0  # makes the store status reads
    assert counts() == (1, 1, 0, 0)
    assert run(capsys, "defer", *store_args, hole)[0] == 0
    assert counts() == (1, 1, 1, 0)
    assert run(capsys, "skip", *store_args, "--reason", "superseded", hole)[0] == 0
    assert counts() == (0, 0, 0, 1)


@pytest.mark.parametrize(
    ("which", "message"),
    [
        ("fork", "is not an upstream commit"),
        ("picked", "is already in the fork; there is nothing to hold"),
        ("range", "not a commit SHA or revision"),
        ("unknown", "unknown ref"),
    ],
)
def test_skip_refuses_what_is_not_a_pending_upstream_commit(
    scenario: Scenario, tmp_path: Path, capsys, which: str, message: str
) -> None:
    picked = scenario.upstream("[DOCS] a (#2)", {"docs/b.md": "b\n"})
    scenario.pick(picked, how="trailer")
    arg = {"fork": "main", "picked": picked, "range": "main..upstream/main", "unknown": "0123456789abcdef"}[
        which
    ]
    db = tmp_path / "store.db"
    code, _, err = run(
        capsys, "skip", *repo_of(scenario), "--database", f"sqlite:///{db}", "--reason", "x", arg
    )
    assert code == 2 and message in err
    assert not db.exists()


@pytest.mark.parametrize("verb", ["skip", "defer"])
def test_skip_and_defer_are_refused_on_a_merge_fork(
    scenario: Scenario, tmp_path: Path, capsys, verb: str
) -> None:
    """A merge brings every commit before the one it merges: holding one out would be a promise not kept."""
    later = scenario.upstream("[DOCS] a (#2)", {"docs/b.md": "b\n"})
    config = tmp_path / "sluice.yml"
    config.write_text("strategy: merge\n")
    db = tmp_path / "store.db"
    code, _, err = run(
        capsys,
        verb,
        *repo_of(scenario),
        "--config",
        str(config),
        "--database",
        f"sqlite:///{db}",
        "--reason",
        "x",
        later,
    )
    assert code == 2 and "no commit can be skipped or deferred while later ones go in" in err
    assert "pause ingestion" in err and not db.exists()


def test_a_deferral_from_before_a_fork_merged_holds_nothing_in_a_merge_plan(
    scenario: Scenario, tmp_path: Path, capsys
) -> None:
    """Recorded while the fork picked; now it merges, and the next merge would bring the commit anyway."""
    deferred = scenario.upstream("[DOCS] a (#2)", {"docs/b.md": "b\n"})
    scenario.upstream("[DOCS] c (#3)", {"docs/c.md": "c\n"})
    store_args = [*repo_of(scenario), "--database", f"sqlite:///{tmp_path / 'store.db'}"]
    assert run(capsys, "defer", *store_args, deferred)[0] == 0
    merging = tmp_path / "merge.yml"
    merging.write_text("strategy: merge\n")
    plan = json.loads(run(capsys, "plan", *store_args, "--config", str(merging), "--json")[1])
    assert plan["held"] == {} and plan["status"]["deferred_commits"] == 0
    assert deferred in [c["sha"] for unit in plan["bundles"] + plan["chains"] for c in unit["commits"]]
    status = json.loads(run(capsys, "status", *store_args, "--config", str(merging), "--json")[1])
    assert status["deferred_commits"] == 0
    text = run(capsys, "plan", *store_args, "--config", str(merging), "--no-record")[1]
    assert (
        "strategy merge: a merge brings every upstream commit before the one it merges, so the 1 unit"
        in " ".join(text.split())
    )


def test_status_never_creates_a_store(
    scenario: Scenario, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not the default file, not the file `$SLUICE_DATABASE_URL` names before anything made it, and not a
    file `--database` names: that one is a mistyped path, said so, where a store made of it would read as
    one with nothing held."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("SLUICE_DATABASE_URL", raising=False)
    assert run(capsys, "status", *repo_of(scenario))[0] == 0
    assert not (tmp_path / "state").exists()

    configured = tmp_path / "configured.db"
    monkeypatch.setenv("SLUICE_DATABASE_URL", f"sqlite:///{configured}")
    assert run(capsys, "status", *repo_of(scenario))[0] == 0
    assert not configured.exists()

    typo = tmp_path / "typo.db"
    code, out, err = run(capsys, "status", *repo_of(scenario), "--database", f"sqlite:///{typo}")
    assert (code, out) == (2, "") and f"no store at {typo}" in err and not typo.exists()


# --- configuration ----------------------------------------------------------------------------------------


def test_components_extra_adds_to_the_default_components(scenario: Scenario, tmp_path: Path, capsys) -> None:
    intel = scenario.upstream("[XPU] Lower dots (#2)", {"third_party/intel/lib/Dot.cpp": "dot\n"})
    bump = scenario.upstream("[BUILD] Bump LLVM (#3)", {"cmake/llvm-hash.txt": "b\n"})
    extended, replaced = tmp_path / "extended.yml", tmp_path / "replaced.yml"
    component = '  - name: intel-backend\n    paths: ["third_party/intel/**"]\n    risk: high\n'
    extended.write_text("components_extra:\n" + component)
    replaced.write_text("components:\n" + component)

    def chains(config: Path) -> dict[str, list[str]]:
        plan = json.loads(
            run(capsys, "plan", *repo_of(scenario), "--config", str(config), "--json", "--no-record")[1]
        )
        return {
            c["root"]: sorted({r["detail"] for m in c["commits"] for r in m["reasons"]})
            for c in plan["chains"]
        }

    assert chains(extended) == {
        intel: ["intel-backend: third_party/intel/lib/Dot.cpp"],
        bump: ["llvm-pin: cmake/llvm-hash.txt"],  # the defaults are still there
    }
    assert chains(replaced) == {intel: ["intel-backend: third_party/intel/lib/Dot.cpp"]}


def test_config_check_reads_the_file_committed_on_fork_trunk(scenario: Scenario, capsys) -> None:
    """What the App reads: the file committed on trunk, not one in a work tree."""
    assert run(capsys, "config", "check", *repo_of(scenario)) == (
        0,
        "main:.github/sluice.yml: none there (Sluice runs on its defaults; the App registers no fork "
        "without it)\n",
        "",
    )
    scenario.fork("config", {".github/sluice.yml": "# Zürich\nstrategy: rebase\n"})
    code, out, _ = run(capsys, "config", "check", *repo_of(scenario), "--fork", "main")
    assert code == 2 and out.startswith("main:.github/sluice.yml:2: strategy")
    code, _, err = run(capsys, "config", "check")
    assert code == 2 and "name a file, or a repository with --repo" in err
    code, _, err = run(capsys, "config", "check", *repo_of(scenario), "--fork=--output=/tmp/x")
    assert code == 2 and "Traceback" not in err


def test_config_check_reports_components_extra_problems(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "sluice.yml"
    bad.write_text(
        "components_extra:\n  - name: xpu\n    paths: []\n    risk: high\n"
        "  - name: xpu\n    paths: [a/**]\n    risk: severe\n"
    )
    code, out, _ = run(capsys, "config", "check", str(bad))
    assert code == 2
    assert [line.split(": ", 2)[:2] for line in out.splitlines()] == [
        [f"{bad}:3", "components_extra.0.paths"],
        [f"{bad}:5", "components_extra.1.name"],
        [f"{bad}:7", "components_extra.1.risk"],
    ]


def test_config_check_reads_a_committed_file_as_the_app_does_and_a_file_as_a_persons_own(
    scenario: Scenario, tmp_path: Path, capsys
) -> None:
    """`--repo` is "what the App reads there": the App refuses a `risk.model` on its own machine; a file on
    this machine may name one, for a person's own `sluice plan --config`."""
    config = "risk:\n  model: /etc/passwd\n"
    scenario.fork("config", {".github/sluice.yml": config})
    code, out, _ = run(capsys, "config", "check", *repo_of(scenario), "--fork", "main")
    assert code == 2 and out.startswith("main:.github/sluice.yml:2: risk.model: ")
    assert "a path on Sluice's own machine" in out
    own = tmp_path / "sluice.yml"
    own.write_text(config)
    assert run(capsys, "config", "check", str(own)) == (0, f"{own}: ok\n", "")


def test_config_check_of_a_repo_loads_the_risk_model_as_registration_does(scenario: Scenario, capsys) -> None:
    """A `risk.model` trunk's tree lacks: the App refuses to register the fork, so `--repo` says so too."""
    scenario.fork("config", {".github/sluice.yml": "risk:\n  model: models/risk.json\n"})
    code, out, _ = run(capsys, "config", "check", *repo_of(scenario), "--fork", "main")
    assert code == 2 and "risk.model names models/risk.json, which is not there in fork trunk's tree" in out
    scenario.fork("the model", {"models/risk.json": DEFAULT_MODEL_PATH.read_text()})
    assert run(capsys, "config", "check", *repo_of(scenario), "--fork", "main") == (
        0,
        "main:.github/sluice.yml: ok\n",
        "",
    )


def test_config_check_refuses_a_committed_file_that_is_not_utf8_as_the_app_does(
    scenario: Scenario, capsys
) -> None:
    """A byte that is not UTF-8 once read as U+FFFD: `^Correctif urgent: réparation` saved in Latin-1 was
    checked, and used by the App, as a pattern no subject matches; the runners refuse the file."""
    scenario.fork("config", {".github/sluice.yml": "strategy: merge\n"})
    config = "recognition:\n  emergency_patterns: ['^Correctif urgent: réparation']\n"
    (scenario.path / ".github" / "sluice.yml").write_bytes(config.encode("latin-1"))
    scenario.git("commit", "-qam", "config in latin-1")

    code, out, _ = run(capsys, "config", "check", *repo_of(scenario), "--fork", "main")

    assert (code, out) == (2, "main:.github/sluice.yml:2: not UTF-8 text (byte 0xe9 at offset 57)\n")
    code, _, err = run(capsys, "plan", *repo_of(scenario), "--no-record")  # load_repo_config, as ingest reads
    assert code == 2 and "main:.github/sluice.yml:2: not UTF-8 text (byte 0xe9 at offset 57)" in err


@pytest.mark.parametrize(
    "url",
    ["file:///etc", "/srv/git/triton.git", "ssh://git@internal/x.git", "git@github.com:x/y.git",
     "http://mirror.example/x.git", "--upload-pack=touch /tmp/x"],
)  # fmt: skip
def test_config_check_refuses_an_upstream_that_is_not_https(tmp_path: Path, capsys, url: str) -> None:
    config = tmp_path / "sluice.yml"
    config.write_text(f"upstream:\n  url: '{url}'\n")
    code, out, _ = run(capsys, "config", "check", str(config))
    assert code == 2
    assert out.startswith(f"{config}:2: upstream.url: ") and "is not an https:// URL" in out
    assert "s3cret" not in out
    config.write_text("upstream:\n  url: https://github.com/triton-lang/triton.git\n")
    assert run(capsys, "config", "check", str(config))[0] == 0


# --- the plan's text ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("columns", [80, 200])
def test_the_plan_summary_fits_the_terminal(
    sandbox: Sandbox, capsys, monkeypatch: pytest.MonkeyPatch, columns: int
) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    args = ["--repo", str(sandbox.fork), "--fork", sandbox.fork_ref, "--upstream", sandbox.upstream_ref]
    plan = json.loads(run(capsys, "plan", *args, "--json", "--no-record")[1])
    code, summary, _ = run(capsys, "plan", *args, "--no-record")
    assert code == 0
    full = run(capsys, "plan", *args, "--no-record", "--full")[1]
    for text in (summary, full):
        assert max(len(line) for line in text.splitlines()) <= columns
    chains, bundles = len(plan["chains"]), len(plan["bundles"])
    rows = chains + bundles if columns >= 150 else 4 * chains + 2 * bundles  # narrow: 2 lines, 4 a chain
    assert len(summary.splitlines()) <= 27 + rows  # status (oldest missing, unreadable), totals, headers
    for chain in plan["chains"]:
        assert summary.count(chain["id"]) == 1
    shas = [c["sha"][:10] for unit in plan["bundles"] + plan["chains"] for c in unit["commits"]]
    units_text = summary.split(" held.", 1)[1]  # below the status table (which names the upstream head)
    assert not any(sha in units_text for sha in shas if f"-{sha}" not in units_text)  # ids name roots
    assert all(sha in full for sha in shas)
    assert "sluice plan --full" in summary and "core-passes" in summary and "tests ×" in summary


@pytest.mark.parametrize("columns", [200, 80])
def test_the_summary_says_why_chain_members_are_linked(
    scenario: Scenario, capsys, monkeypatch, columns: int
) -> None:
    """Wide, a column per fact; at 80 columns (output that is no terminal) a chain's top reasons and its
    links each get a line of their own, rather than being cut off the end of one."""
    monkeypatch.setenv("COLUMNS", str(columns))
    scenario.upstream(
        "[BACKEND] cap (#2)", {PASS_PATH: CPP_PASS.replace("return depth;", "return depth % 8;")}
    )
    scenario.upstream(
        "[BACKEND] cap more (#3)", {PASS_PATH: CPP_PASS.replace("return depth;", "return depth % 4;")}
    )
    out = run(capsys, "plan", *repo_of(scenario), "--no-record")[1]
    assert max(map(len, out.splitlines())) <= columns
    if columns >= 150:
        row = next(line for line in out.splitlines() if line.startswith("chain-"))
        assert "2 commits" in row and "core-passes ×2" in row and "lines via pipelineDepth" in row
    else:
        lines = [line.strip() for line in out.splitlines()]
        assert "2 commits, 4 lines · core-passes ×2" in lines
        assert "component ×2, patch-stack-symbol ×2" in lines
        assert "lines via pipelineDepth, Pipeliner.cpp" in lines


def test_full_says_a_chain_roots_reason_once(scenario: Scenario, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "300")
    scenario.upstream(
        "[BACKEND] cap (#2)", {PASS_PATH: CPP_PASS.replace("return depth;", "return depth % 8;")}
    )
    full = run(capsys, "plan", *repo_of(scenario), "--no-record", "--full")[1]
    assert f"chained: high risk: component: core-passes: {PASS_PATH}" in full
    assert full.count(f"component: core-passes: {PASS_PATH}") == 1


PLURAL_SLIP = re.compile(
    r"(?<![\d.])1 (commit|line|low-risk bundle|risky chain|fork commit|resolved conflict)s\b"
)


def test_counts_of_one_are_singular(scenario: Scenario, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    scenario.upstream("[DOCS] a (#2)", {"docs/b.md": "b\n"})
    scenario.upstream("[BUILD] Bump LLVM (#3)", {"cmake/llvm-hash.txt": "b\n"})
    plan = run(capsys, "plan", *repo_of(scenario), "--no-record", "--full")[1]
    status = run(capsys, "status", *repo_of(scenario))[1]
    assert "1 commit in 1 low-risk bundle (1 line), 1 in 1 risky chain, 0 held." in plan
    assert "Risky chain chain-" in plan and "· 1 commit in order" in plan and "1 commit · 1 line" in plan
    assert "1 fork commit" in status
    assert not PLURAL_SLIP.search(plan + status)


def test_version(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"sluice {importlib.metadata.version('sluice')}\n"


def test_demo_leaves_no_temporary_directory_behind(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    script = Path(sys.executable).parent / "sluice"
    env = {**os.environ, "TMPDIR": str(tmp), "COLUMNS": "120"}
    proc = subprocess.run(
        [str(script), "demo", "--plan-only"], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert "Risky chains" in proc.stdout and "removed at exit" in proc.stderr
    assert sorted(os.listdir(tmp)) == []
