"""Per-commit facts cached in the store by SHA, and probes that leave nothing in the repository."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from bot.app.cli import main
from bot.core.config import SluiceConfig
from bot.core.models import FileChange, Plan
from bot.db.store import Store
from bot.flows.engine import take_snapshot
from bot.flows.planning import build_plan
from bot.git.facts import VERSIONS, CommitFacts, FactKind
from bot.git.repo import GitRepo
from tests.support.scenarios import CPP_PASS, Scenario, numbered

PASS_PATH = "lib/Dialect/TritonGPU/Transforms/Pipeliner.cpp"
INCLUDES = '#include "a.h"\n#include "c.h"\n\nint main() { return 0; }\n'

NOW = dt.datetime(2026, 1, 5, 12, tzinfo=dt.UTC)  # a frozen clock: plans recorded at this time


class WatchedRepo(GitRepo):
    """A real repository that records which commits Sluice asked git to read patches of."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.asked: list[str] = []

    def patch_ids(self, *revs: str, stdin_shas: Sequence[str] = ()) -> dict[str, str]:
        self.asked += stdin_shas
        return super().patch_ids(*revs, stdin_shas=stdin_shas)

    def patches_of(
        self, shas: Sequence[str], *, paths: Sequence[str] = ()
    ) -> dict[str, tuple[FileChange, ...]]:
        self.asked += shas
        return super().patches_of(shas, paths=paths)


@pytest.fixture
def scenario(tmp_path: Path) -> Scenario:
    s = Scenario(tmp_path)
    s.upstream(
        "Initial import (#1)", {PASS_PATH: CPP_PASS, "docs/a.md": numbered("a", 20), "lib/Tool.cpp": INCLUDES}
    )
    s.fork_here()
    s.fork("[TLX] deeper pipelines", {PASS_PATH: CPP_PASS.replace("depth += 1;", "depth += 2;")})
    return s


@pytest.fixture
def opened(database_url: str) -> Iterator[Store]:
    store = Store.open(database_url)
    yield store
    store.close()


def snapshot_with(repo: GitRepo, store: Store, s: Scenario) -> None:
    take_snapshot(
        repo,
        fork_ref=s.fork_ref,
        upstream_ref=s.upstream_ref,
        config=SluiceConfig(),
        facts=CommitFacts(repo, store),
    )


def test_a_run_reads_patch_ids_only_of_commits_it_has_not_seen(scenario: Scenario, opened: Store) -> None:
    up = scenario.upstream("[DOCS] b (#2)", {"docs/a.md": numbered("a", 21)})
    first = WatchedRepo(scenario.path)
    snapshot_with(first, opened, scenario)
    assert up in first.asked and scenario.git("rev-parse", "main") in first.asked

    again = WatchedRepo(scenario.path)
    snapshot_with(again, opened, scenario)
    assert again.asked == []

    new_up = scenario.upstream("[DOCS] c (#3)", {"docs/a.md": numbered("a", 22)})
    new_fork = scenario.fork("[TLX] more", {"docs/tlx.md": "tlx\n"})
    later = WatchedRepo(scenario.path)
    snapshot_with(later, opened, scenario)
    assert sorted(later.asked) == sorted([new_up, new_fork])


def test_a_stored_fact_is_believed_and_one_of_another_version_is_not(
    scenario: Scenario, opened: Store
) -> None:
    """The cache is what a run reads: a planted patch-id makes a fork commit a pick of an upstream one."""
    up = scenario.upstream("[DOCS] b (#2)", {"docs/a.md": numbered("a", 21)})
    fork_commit = scenario.git("rev-parse", "main")
    repo = GitRepo(scenario.path)
    planted = {(up, ""): "same", (fork_commit, ""): "same"}
    opened.save_facts(FactKind.PATCH_ID.value, "another-version", planted)
    facts = CommitFacts(repo, opened)
    snapshot = take_snapshot(
        repo, fork_ref="main", upstream_ref="upstream/main", config=SluiceConfig(), facts=facts
    )
    assert up not in snapshot.recognised

    opened.save_facts(FactKind.PATCH_ID.value, VERSIONS[FactKind.PATCH_ID], planted)
    snapshot = take_snapshot(
        repo, fork_ref="main", upstream_ref="upstream/main", config=SluiceConfig(), facts=facts
    )
    assert snapshot.recognised[up].fork_sha == fork_commit


def test_cached_patches_and_symbols_equal_fresh_ones(scenario: Scenario, opened: Store) -> None:
    up = scenario.upstream(
        "[BACKEND] cap (#2)",
        {PASS_PATH: CPP_PASS.replace("return y;", "return y % 8;"), "docs/a.md": numbered("a", 21)},
    )
    repo = GitRepo(scenario.path)
    fresh = CommitFacts(repo).with_symbols(CommitFacts(repo).patches([up]))
    CommitFacts(repo, opened).with_symbols(CommitFacts(repo, opened).patches([up]))

    watched = WatchedRepo(scenario.path)
    cached = CommitFacts(watched, opened)
    assert cached.with_symbols(cached.patches([up])) == fresh
    assert watched.asked == []
    assert [f.symbols for f in fresh[up] if f.path == PASS_PATH] == [("mlir::triton::unrelatedHelper",)]
    only = cached.patches([up], only={"docs/a.md"})
    assert [f.path for f in only[up]] == ["docs/a.md"]


def test_a_commit_with_a_missing_blob_is_listed_unreadable_and_the_rest_goes_on(tmp_path: Path) -> None:
    s = Scenario(tmp_path)
    s.upstream("Initial import (#1)", {"docs/a.md": "a\n", "big.bin": "large\n"})
    s.fork_here()
    lost = s.upstream("[BUILD] big (#2)", {"big.bin": "larger\n", "docs/a.md": "a\nb\n"})
    fine = s.upstream("[DOCS] c (#3)", {"docs/a.md": "a\nb\nc\n"})
    blob = s.git("rev-parse", f"{lost}:big.bin")
    (s.path / ".git" / "objects" / blob[:2] / blob[2:]).unlink()  # as in a snapshot without large blobs
    repo = GitRepo(s.path)
    facts = CommitFacts(repo)

    snapshot = take_snapshot(
        repo, fork_ref="main", upstream_ref="upstream/main", config=SluiceConfig(), facts=facts
    )
    assert snapshot.unreadable == {lost: "big.bin"}
    patches = facts.patches([lost, fine])
    assert {f.path: len(f.hunks) for f in patches[lost]} == {"big.bin": 0, "docs/a.md": 1}
    assert [len(f.hunks) for f in patches[fine]] == [1]

    again = WatchedRepo(s.path)  # a later run tries the commit once; its readable part was kept
    assert CommitFacts(again, facts.store).patches([lost, fine]) == patches
    assert again.asked == [lost]


# Patches are read as git wrote them, whatever the operator's git config


C_LINES = "c1\nc2\nc3\nc4\nc5\nc6\n"
ODD_NAME = "d b/e é.txt"  # a header git quotes, with a space and ` b/` inside


def typechange_history(tmp_path: Path) -> tuple[Scenario, str, str]:
    """Upstream turns `a` into a symlink and edits `b` and `c` in one commit (git writes two sections for
    `a`), then edits the line after its `c` line; fork trunk branched before both."""
    s = Scenario(tmp_path)
    s.upstream("Initial import (#1)", {"a": "x\n", "b": "one\n", "c": C_LINES, ODD_NAME: "s\n"})
    s.fork_here()
    (s.path / "a").unlink()
    (s.path / "a").symlink_to("target")
    s.git("add", "a")
    first = s.upstream(
        "[BUILD] link a (#2)",
        {"b": "one\ntwo\n", "c": C_LINES.replace("c3\n", "c3 edited\n"), ODD_NAME: "s\nt\n"},
    )
    second = s.upstream("[BUILD] c4 (#3)", {"c": C_LINES.replace("c3\n", "c3 edited\nc3b\n")})
    return s, first, second


def test_a_type_change_keeps_every_file_s_hunks_with_that_file(tmp_path: Path) -> None:
    s, first, second = typechange_history(tmp_path)
    patches = CommitFacts(GitRepo(s.path)).patches([first])[first]

    hunks = {
        f.path: [(h.old_start, h.old_count, h.new_start, h.new_count, h.added) for h in f.hunks]
        for f in patches
    }
    assert hunks == {
        "a": [(1, 1, 1, 1, ("target",))],  # the file's line replaced by the link's target
        "b": [(1, 0, 2, 1, ("two",))],
        "c": [(3, 1, 3, 1, ("c3 edited",))],
        ODD_NAME: [(1, 0, 2, 1, ("t",))],
    }
    plan = build_plan(
        GitRepo(s.path),
        SluiceConfig(),
        fork="main",
        upstream="upstream/main",
        store=None,
        progress=lambda _: None,
        clock=lambda: NOW,
    )
    planned = {c.sha: c for unit in (*plan.bundles, *plan.chains) for c in unit.commits}
    assert [d.sha for d in planned[second].depends_on] == [first]


HOSTILE_GITCONFIG = """\
[diff]
\tnoprefix = true
\tmnemonicPrefix = true
\trelative = true
\texternal = false
\tsubmodule = log
\tignoreSubmodules = all
\tinterHunkContext = 10
\talgorithm = patience
\tindentHeuristic = false
[color]
\tdiff = always
\tui = always
[log]
\tshowRoot = false
"""


def test_an_operator_s_gitconfig_changes_no_patch_sluice_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s, first, second = typechange_history(tmp_path)
    root = s.git("rev-list", "--max-parents=0", "HEAD")
    s.git("update-index", "--add", "--cacheinfo", f"160000,{first},m")  # a submodule, before a file
    sub = s.upstream("[BUILD] bump m (#4)", {"z": "z1\nz2\nz3\nz4\nz5\n"})
    shas = [root, first, second, sub]
    plain, hostile = tmp_path / "plain", tmp_path / "hostile"
    plain.mkdir()
    hostile.mkdir()
    (hostile / ".gitconfig").write_text(HOSTILE_GITCONFIG)
    read = {}
    for home in (plain, hostile):
        monkeypatch.setenv("HOME", str(home))
        monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
        repo = GitRepo(s.path)
        read[home] = (
            CommitFacts(repo).patches(shas),
            repo.range_patches(sub, "--not", root),
            repo.patch_ids(stdin_shas=shas),
            repo.changed_files(shas),
        )
    assert read[hostile] == read[plain]
    patches, _, ids, _ = read[hostile]
    assert [f.path for f in patches[root]] == ["a", "b", "c", ODD_NAME]
    assert {f.path: len(f.hunks) for f in patches[sub]} == {"m": 1, "z": 1}
    assert len(ids) == 4


# Probes leave nothing in the repository


def object_count(s: Scenario) -> int:
    fields = dict(line.split(": ") for line in s.git("count-objects", "-v").splitlines())
    return int(fields["count"]) + int(fields["in-pack"])


def conflicting_include(s: Scenario) -> str:
    s.fork("[TLX] include tlx", {"lib/Tool.cpp": INCLUDES.replace('"a.h"\n', '"a.h"\n#include "b_tlx.h"\n')})
    return s.upstream(
        "[BUILD] include b (#3)", {"lib/Tool.cpp": INCLUDES.replace('"a.h"\n', '"a.h"\n#include "b.h"\n')}
    )


def test_a_plan_and_a_dry_run_pick_leave_the_object_count_unchanged(
    scenario: Scenario, tmp_path: Path, capsys
) -> None:
    scenario.upstream("[BACKEND] cap (#2)", {PASS_PATH: CPP_PASS.replace("depth += 1;", "depth += 3;")})
    resolved = conflicting_include(scenario)
    db = f"sqlite:///{tmp_path / 'sluice.db'}"
    before = object_count(scenario)

    assert main(["plan", *scenario.repo_args(), "--json", "--database", db]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert [c["sha"] for b in plan["bundles"] for c in b["commits"]] + [
        c["sha"] for c in plan["chains"] for c in c["commits"]
    ]  # it predicted conflicts: probe commits and merged trees were written somewhere
    pick = ["pick", "--repo", str(scenario.path), "--onto", "main", "--upstream", "upstream/main"]
    assert main([*pick, "--dry-run", "--json", "--database", db, resolved]) == 0
    report = json.loads(capsys.readouterr().out)

    assert [c["status"] for c in report["commits"]] == ["auto_resolved"]  # it wrote a resolved blob and tree
    assert object_count(scenario) == before


def test_a_real_pick_keeps_exactly_the_objects_of_the_branch_it_writes(scenario: Scenario, capsys) -> None:
    resolved = conflicting_include(scenario)
    before = object_count(scenario)

    pick = ["pick", "--repo", str(scenario.path), "--onto", "main", "--upstream", "upstream/main"]
    code = main([*pick, "--no-record", "--branch", "ingest/1", "--json", resolved])
    assert code == 0 and json.loads(capsys.readouterr().out)["head"]
    added = scenario.git("rev-list", "--objects", "ingest/1", "--not", "main", resolved).split("\n")
    assert object_count(scenario) - before == len(added)  # the commit, its tree and the resolved blob
    fsck = subprocess.run(
        ["git", "fsck", "--connectivity-only", "--no-dangling"],
        cwd=scenario.path,
        capture_output=True,
        text=True,
    )
    assert fsck.returncode == 0, fsck.stderr
    assert '#include "b_tlx.h"' in scenario.git("show", "ingest/1:lib/Tool.cpp")


def test_a_quarantined_view_writes_elsewhere_and_reads_both(scenario: Scenario) -> None:
    repo = GitRepo(scenario.path)
    before = object_count(scenario)
    with repo.quarantined() as view:
        blob = view.write_object(b"blob", b"probe\n")
        assert view.run("cat-file", "-p", blob) == "probe\n"
        assert view.read_file(scenario.git("rev-parse", "main"), "docs/a.md") is not None
        quarantine = view.quarantine
        assert quarantine is not None and quarantine.exists()
    assert not quarantine.exists()
    assert object_count(scenario) == before
    assert subprocess.run(["git", "cat-file", "-e", blob], cwd=scenario.path).returncode != 0


# Planning's outcomes of conflicted merges, kept by content


def reasons_of(plan: Plan) -> dict[str, list[str]]:
    commits = [c for b in plan.bundles for c in b.commits] + [c for ch in plan.chains for c in ch.commits]
    return {c.sha: sorted(r.kind.value for r in c.reasons) for c in commits}


def test_a_replan_reuses_the_outcome_of_a_conflicted_merge(scenario: Scenario, opened: Store) -> None:
    mechanical = conflicting_include(scenario)
    repo = GitRepo(scenario.path)

    def plan() -> Plan:
        return build_plan(
            repo,
            SluiceConfig(),
            fork="main",
            upstream="upstream/main",
            store=opened,
            progress=lambda _: None,
            clock=lambda: NOW,
        )

    first = plan()
    assert "mechanical-conflict" in reasons_of(first)[mechanical]
    kept = opened.load_facts(FactKind.VERDICT.value, VERSIONS[FactKind.VERDICT], [mechanical])
    assert len(kept) == 1
    assert reasons_of(plan()) == reasons_of(first)

    # What is kept is what a re-plan believes: say the merge needs a human, and the plan says so too.
    ((key, value),) = kept.items()
    remembered = json.loads(value)
    report = json.loads(remembered["report"])
    report["status"], report["files"][0]["resolved"] = "needs_human", False
    remembered["report"], remembered["resolved"] = json.dumps(report), None
    opened.save_facts(FactKind.VERDICT.value, VERSIONS[FactKind.VERDICT], {key: json.dumps(remembered)})
    assert "predicted-conflict" in reasons_of(plan())[mechanical]
