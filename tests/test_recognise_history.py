"""Recognition on real git histories in FBTriton's and Intel's real shapes: `sluice status` and `plan`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.app.cli import main
from bot.core.models import FileChange
from bot.flows.applied import FileState, file_state, net_zero_pairs
from tests.support.scenarios import Scenario, numbered

PIN = "cmake/llvm-hash.txt"
CORE = "python/triton/language/core.py"


@pytest.fixture
def scenario(tmp_path: Path) -> Scenario:
    s = Scenario(tmp_path)
    s.upstream(
        "Initial import (#1)",
        {
            PIN: "a" * 40 + "\n",
            CORE: numbered("core", 40),
            "docs/a.md": numbered("doc a", 30),
            "docs/b.md": numbered("doc b", 30),
            "docs/c.md": numbered("doc c", 30),
        },
        hours=0,
    )
    s.fork_here()
    return s


def cli_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    code = main([*args, "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def status(s: Scenario, capsys: pytest.CaptureFixture[str], *extra: str) -> dict:
    return cli_json(capsys, "status", *s.repo_args(), *extra)


def audit(s: Scenario, capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, str | None]]:
    """upstream SHA -> {method, fork, detail} from `status --audit --json`."""
    report = cli_json(capsys, "status", "--audit", *s.repo_args())
    return {
        e["upstream"]: {"method": method, "fork": e["fork"], "detail": e["detail"]}
        for method, entries in report["methods"].items()
        for e in entries
    }


def edit(text: str, line: str, new: str) -> str:
    assert f"{line}\n" in text
    return text.replace(f"{line}\n", f"{new}\n", 1)


@pytest.mark.parametrize(
    "subject",
    [
        "[triton][beta] [Cherry-pick] '[AMD] Faster lds (#4312)' (#2877)",
        "[Cherry-pick][RESOLVED] '[AMD] Faster lds (#4312)'",
        "[Cherry-pick] '[AMD] Faster lds (#4312)'",
        "[Cherry-pick] [AMD] Faster lds (#4312) (#2877)",
    ],
)
def test_fbtriton_pick_subjects_are_recognised(scenario: Scenario, capsys, subject: str) -> None:
    """The pick was resolved by hand (its diff differs), and the fork PR #2877 is also an upstream PR."""
    doc_a = numbered("doc a", 30)
    scenario.upstream("[DOCS] Unrelated (#2877)", {"docs/b.md": numbered("doc b", 30) + "b\n"})
    taken = scenario.upstream("[AMD] Faster lds (#4312)", {"docs/a.md": edit(doc_a, "doc a line 5", "lds 5")})
    scenario.upstream("[DOCS] Later (#4400)", {"docs/c.md": numbered("doc c", 30) + "c\n"})
    fork_pick = scenario.fork(subject, {"docs/a.md": edit(doc_a, "doc a line 5", "lds 5, resolved")})
    found = audit(scenario, capsys)
    assert found == {taken: {"method": "subject-pattern", "fork": fork_pick, "detail": ""}}
    metrics = status(scenario, capsys)
    assert (metrics["ingestion_tip"], metrics["pending_commits"]) == (taken, 2)


def test_a_bundle_pick_carries_many_upstream_commits(scenario: Scenario, capsys) -> None:
    first = scenario.upstream("[DOCS] a (#10650)", {"docs/a.md": numbered("doc a", 30) + "a\n"})
    second = scenario.upstream("[DOCS] b (#10689)", {"docs/b.md": numbered("doc b", 30) + "b\n"})
    left = scenario.upstream("[DOCS] c (#10702)", {"docs/c.md": numbered("doc c", 30) + "c\n"})
    bundle = scenario.fork(
        "[Cherry-pick][BUNDLE] Cherry-pick 2 upstream(#10689 #10650) (#2877)",
        {"docs/a.md": numbered("doc a", 30) + "a\n", "docs/b.md": numbered("doc b", 30) + "b, adapted\n"},
    )
    found = audit(scenario, capsys)
    assert {sha: (e["method"], e["fork"]) for sha, e in found.items() if sha != left} == {
        first: ("subject-pattern", bundle),
        second: ("subject-pattern", bundle),
    }
    metrics = status(scenario, capsys)
    assert (metrics["ingestion_tip"], metrics["pending_commits"]) == (second, 1)
    assert metrics["patch_stack_commits"] == 0  # the bundle is an ingestion, not the fork's own work


def test_an_upstreamed_fork_patch_never_moves_the_tip(scenario: Scenario, capsys) -> None:
    """Intel's shape: the fork lands its patch, upstream takes the same patch weeks later."""
    patch = {CORE: edit(numbered("core", 40), "core line 7", "xpu line 7")}
    own = scenario.fork("[XPU] Fix core line 7 (#5001)", patch, hours=1)
    scenario.upstream("[DOCS] a (#2)", {"docs/a.md": numbered("doc a", 30) + "a\n"}, hours=24)
    twin = scenario.upstream("[XPU] Fix core line 7 (#8058)", patch, hours=24 * 10)
    scenario.upstream("[DOCS] b (#3)", {"docs/b.md": numbered("doc b", 30) + "b\n"}, hours=24 * 14)
    metrics = status(scenario, capsys)
    assert metrics["ingestion_tip"] == scenario.git("rev-parse", "main~1")  # the fork point
    assert metrics["days_behind"] == 14.0
    assert metrics["recognised_by"]["upstreamed"] == 1
    assert metrics["patch_stack_commits"] == 1  # still the fork's own until it ingests the twin
    assert audit(scenario, capsys)[twin] == {"method": "upstreamed", "fork": own, "detail": ""}


def test_a_merge_fork_takes_its_tip_from_ancestry_alone(scenario: Scenario, capsys, tmp_path: Path) -> None:
    scenario.upstream("[DOCS] a (#2)", {"docs/a.md": numbered("doc a", 30) + "a\n"}, hours=24)
    picked = scenario.upstream("[DOCS] b (#3)", {"docs/b.md": numbered("doc b", 30) + "b\n"}, hours=48)
    scenario.pick(picked, how="x", hours=50)
    config = tmp_path / "merge.yml"
    config.write_text("strategy: merge\n")
    merge = status(scenario, capsys, "--config", str(config))
    picks = status(scenario, capsys)
    assert merge["ingestion_tip"] == scenario.git("rev-parse", "main~1")
    assert (merge["days_behind"], picks["days_behind"]) == (2.0, 0.0)
    assert merge["pending_commits"] == picks["pending_commits"] == 1


def test_commits_the_fork_already_has_are_already_applied(scenario: Scenario, capsys) -> None:
    core = numbered("core", 40)
    # The fork wrote upstream's fix itself (same result), and a larger change that contains another one.
    scenario.fork("[XPU] docs draft", {"docs/a.md": numbered("doc a", 30) + "draft\n"})
    scenario.fork("[XPU] docs", {"docs/a.md": numbered("doc a", 30) + "a\n"})  # another diff, same file
    scenario.fork("[XPU] core", {CORE: edit(edit(core, "core line 3", "xpu 3"), "core line 30", "fix 30")})
    same = scenario.upstream("[DOCS] a (#2)", {"docs/a.md": numbered("doc a", 30) + "a\n"})
    contained = scenario.upstream("[CORE] fix 30 (#3)", {CORE: edit(core, "core line 30", "fix 30")})
    needed = scenario.upstream("[CORE] fix 31 (#4)", {CORE: edit(core, "core line 31", "fix 31")})
    found = audit(scenario, capsys)
    assert found == {
        same: {
            "method": "already-applied",
            "fork": None,
            "detail": "fork trunk has every file as it leaves it",
        },
        contained: {
            "method": "already-applied",
            "fork": None,
            "detail": f"fork trunk contains its changes: {CORE}",
        },
    }
    metrics = status(scenario, capsys)
    assert (metrics["pending_commits"], metrics["ingestion_tip"]) == (1, scenario.git("rev-parse", "main~3"))
    assert metrics["oldest_missing"] == needed


def test_picking_an_already_applied_commit_is_refused(scenario: Scenario, capsys) -> None:
    scenario.fork("[XPU] docs draft", {"docs/a.md": numbered("doc a", 30) + "draft\n"})
    scenario.fork("[XPU] docs", {"docs/a.md": numbered("doc a", 30) + "a\n"})
    same = scenario.upstream("[DOCS] a (#2)", {"docs/a.md": numbered("doc a", 30) + "a\n"})
    args = ["--repo", str(scenario.path), "--onto", "main", "--upstream", "upstream/main", "--dry-run"]
    code = main(["pick", *args, "--no-record", same])
    err = capsys.readouterr().err
    assert code == 2
    assert "already ingested (already-applied: fork trunk has every file as it leaves it)" in err


def test_a_revert_and_reland_of_what_the_fork_has_net_to_nothing(scenario: Scenario, capsys) -> None:
    core = numbered("core", 40)
    scenario.git("checkout", "-q", "upstream/main")
    original = scenario.upstream("[CORE] tweak 9 (#5)", {CORE: edit(core, "core line 9", "tweak 9")})
    scenario.git("branch", "-f", "main", "upstream/main")  # the fork merged up to the original
    revert = scenario.upstream('Revert "[CORE] tweak 9 (#5)" (#6)', {CORE: core})
    reland = scenario.upstream(
        'Reland "[CORE] tweak 9 (#5)" (#7)', {CORE: edit(core, "core line 9", "tweak 9")}
    )
    later = scenario.upstream("[DOCS] b (#8)", {"docs/b.md": numbered("doc b", 30) + "b\n"})
    found = audit(scenario, capsys)
    assert found == {
        revert: {"method": "net-zero", "fork": None, "detail": f"undone by {reland[:10]}"},
        reland: {"method": "net-zero", "fork": None, "detail": f"undoes {revert[:10]}"},
    }
    plan = cli_json(capsys, "plan", *scenario.repo_args(), "--no-record")
    planned = [c["sha"] for group in [*plan["bundles"], *plan["chains"]] for c in group["commits"]]
    assert planned == [later]
    assert original not in planned


def test_an_llvm_pin_the_fork_has_passed_is_no_work(scenario: Scenario, capsys) -> None:
    bump_b = scenario.upstream("[BUILD] Bump LLVM to bbbb (#10)", {PIN: "b" * 40 + "\n"})
    bump_c = scenario.upstream("[BUILD] Bump LLVM to cccc (#11)", {PIN: "c" * 40 + "\n"})
    scenario.fork("[XPU] Bump LLVM to cccc ahead of upstream", {PIN: "c" * 40 + "\n"})
    found = audit(scenario, capsys)
    assert found[bump_b] == {
        "method": "pin-passed",
        "fork": None,
        "detail": f"fork trunk's pin is newer: {PIN}",
    }
    assert found[bump_c]["method"] == "already-applied"
    plan = cli_json(capsys, "plan", *scenario.repo_args(), "--no-record")
    assert plan["bundles"] == [] and plan["chains"] == []


def test_an_llvm_pin_upstream_never_had_is_still_work(scenario: Scenario, capsys) -> None:
    bump = scenario.upstream("[BUILD] Bump LLVM to bbbb (#10)", {PIN: "b" * 40 + "\n"})
    scenario.fork("[XPU] Our own LLVM", {PIN: "d" * 40 + "\n"})
    assert audit(scenario, capsys) == {}
    assert status(scenario, capsys)["oldest_missing"] == bump


def _drop_loose_blob(s: Scenario, rev: str, path: str) -> None:
    blob = s.git("rev-parse", f"{rev}:{path}")
    (s.path / ".git" / "objects" / blob[:2] / blob[2:]).unlink()


def test_unreadable_objects_are_reported_and_planning_goes_on(
    scenario: Scenario, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A snapshot without large blobs (or a partial clone): such commits are risky, the rest is planned."""
    monkeypatch.setenv("COLUMNS", "200")  # the status table fits the terminal; keep the path on one line
    own = scenario.fork("[XPU] Add the intrinsics library", {"third_party/intel/lib/libGenISA.a": "A" * 5000})
    big = scenario.upstream("[AMD] Add a large table (#20)", {"third_party/amd/table.bin": "T" * 5000})
    doc = scenario.upstream("[DOCS] a (#21)", {"docs/a.md": numbered("doc a", 30) + "a\n"})
    _drop_loose_blob(scenario, own, "third_party/intel/lib/libGenISA.a")
    _drop_loose_blob(scenario, big, "third_party/amd/table.bin")
    metrics = status(scenario, capsys)
    assert metrics["unreadable"] == {
        own: "third_party/intel/lib/libGenISA.a",
        big: "third_party/amd/table.bin",
    }
    assert metrics["pending_commits"] == 2
    plan = cli_json(capsys, "plan", *scenario.repo_args(), "--no-record")
    reasons = {c["sha"]: c["reasons"] for g in [*plan["bundles"], *plan["chains"]] for c in g["commits"]}
    assert {
        "kind": "unreadable",
        "level": "high",
        "detail": "unreadable: third_party/amd/table.bin",
    } in reasons[big]
    assert [c["sha"] for c in plan["bundles"][0]["commits"]] == [doc]
    text_code = main(["status", *scenario.repo_args()])
    assert text_code == 0
    assert "unreadable: third_party/intel/lib/libGenISA.a" in capsys.readouterr().out


def _change(path: str, old: str | None, new: str | None) -> FileChange:
    return FileChange(path=path, status="M", old_blob=old, new_blob=new)


@pytest.mark.parametrize(
    ("change", "fork", "pins", "state"),
    [
        (_change("a", "1", "2"), "2", None, FileState.HAS),
        (_change("a", "1", None), None, None, FileState.HAS),  # deleted on both sides
        (_change("a", "1", "2"), "1", None, FileState.LACKS),
        (_change("a", "1", "2"), None, None, FileState.LACKS),  # the fork deleted what upstream changes
        (_change("a", None, "2"), "3", None, FileState.LACKS),  # both added, differently
        (_change("a", "1", "2"), "3", None, FileState.UNSURE),  # the fork changed it too
        (_change(PIN, "1", "2"), "3", frozenset({"3"}), FileState.PIN_PASSED),
        (_change(PIN, "1", "2"), "4", frozenset({"3"}), FileState.UNSURE),
    ],
)
def test_file_state(
    change: FileChange, fork: str | None, pins: frozenset[str] | None, state: FileState
) -> None:
    assert file_state(change, fork, later_pins=pins) is state


def test_net_zero_pairs_nest_and_leave_a_reland() -> None:
    a, b, c = _change("f", "x", "y"), _change("f", "y", "z"), _change("f", "z", "y")
    commits = [("A", [a]), ("B", [b]), ("C", [c]), ("R", [_change("f", "y", "x")]), ("L", [a]), ("E", [])]
    assert net_zero_pairs(commits) == {"B": "C", "C": "B", "A": "R", "R": "A"}


def test_the_audit_names_each_match_and_the_picks_that_matched_nothing(scenario: Scenario, capsys) -> None:
    taken = scenario.upstream("[AMD] Faster lds (#4312)", {"docs/a.md": numbered("doc a", 30) + "lds\n"})
    pick = scenario.pick(taken, how="x")
    stray = scenario.fork("[Cherry-pick] 'A fix upstream never landed (#9999)'", {"docs/b.md": "b\n"})
    assert main(["status", "--audit", *scenario.repo_args()]) == 0
    out = capsys.readouterr().out
    assert f"cherry-pick-x: 1 commit\n  {pick[:10]} → {taken[:10]}  [AMD] Faster lds (#4312)\n" in out
    assert "look like picks but matched nothing: 1 fork commit\n" in out
    assert (
        f"  {stray[:10]}  [Cherry-pick] 'A fix upstream never landed (#9999)'  (by a subject pattern)\n"
        in out
    )


def test_a_missing_tree_is_unreadable_too(scenario: Scenario, capsys) -> None:
    """A partial clone can lack trees as well as blobs: every commit that needs the tree is reported."""
    added = scenario.upstream("[AMD] Add a backend (#30)", {"third_party/amd/x.py": "x\n"})
    doc = scenario.upstream("[DOCS] a (#31)", {"docs/a.md": numbered("doc a", 30) + "a\n"})
    tree = scenario.git("rev-parse", f"{added}:third_party/amd")
    (scenario.path / ".git" / "objects" / tree[:2] / tree[2:]).unlink()
    metrics = status(scenario, capsys)
    assert metrics["unreadable"] == {added: f"object {tree}"}
    assert metrics["pending_commits"] == 2
    plan = cli_json(capsys, "plan", *scenario.repo_args(), "--no-record")
    planned = {c["sha"]: c["risk"] for g in [*plan["bundles"], *plan["chains"]] for c in g["commits"]}
    assert planned[added] == "high" and doc in planned
