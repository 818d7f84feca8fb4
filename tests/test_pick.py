"""`sluice pick` on real repositories: statuses, trailers, atomic branches, memory, resolver, bad input."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from bot.app.cli import main
from tests.support.scenarios import Scenario

INCLUDES = '#include "a.h"\n#include "c.h"\n\nint main() { return 0; }\n'
PY = "def load(ptr):\n    x = ptr + 1\n    return x\n"


@pytest.fixture
def scenario(tmp_path: Path) -> Scenario:
    s = Scenario(tmp_path)
    s.upstream(
        "Initial import (#1)", {"lib/Tool.cpp": INCLUDES, "python/triton/core.py": PY, "docs/a.md": "a\n"}
    )
    s.fork_here()
    return s


def pick(s: Scenario, capsys, *shas: str, extra: tuple[str, ...] = ()) -> tuple[int, dict | str, str]:
    argv = [
        "pick",
        "--repo",
        str(s.path),
        "--onto",
        "main",
        "--upstream",
        "upstream/main",
        "--no-record",
        *extra,
    ]
    code = main([*argv, "--json", *shas])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.startswith("{") else out), err


def statuses(report: dict) -> list[str]:
    return [c["status"] for c in report["commits"]]


def remember(s: Scenario, upstream_commit: str, resolution: str, *, database: str) -> int:
    """`sluice remember`: alice's hand resolution of `upstream_commit` on fork trunk."""
    argv = ["remember", "--repo", str(s.path), "--fork", "main", "--upstream-commit", upstream_commit]
    return main([*argv, "--resolution", resolution, "--by", "alice", "--database", database])


def test_clean_pick_writes_the_branch_with_author_and_trailers(scenario: Scenario, capsys) -> None:
    up = scenario.upstream("[DOCS] More (#2)", {"docs/a.md": "a\nb\n"})
    code, report, _ = pick(scenario, capsys, up, extra=("--branch", "ingest/1"))
    assert code == 0 and statuses(report) == ["clean"]
    head = report["head"]
    assert scenario.git("rev-parse", "ingest/1") == head == report["commits"][0]["commit"]
    assert scenario.git("log", "-1", "--format=%an <%ae>", head) == "Upstream Dev <dev@upstream.example>"
    assert scenario.git("log", "-1", "--format=%(trailers:key=Upstream-Commit,valueonly)", head).strip() == up
    assert scenario.git("show", f"{head}:docs/a.md") == "a\nb"
    assert scenario.git("rev-parse", f"{head}^") == scenario.git("rev-parse", "main")


def test_mechanical_conflict_is_resolved_by_a_named_rule(scenario: Scenario, capsys) -> None:
    scenario.fork(
        "[TLX] include tlx", {"lib/Tool.cpp": INCLUDES.replace('"a.h"\n', '"a.h"\n#include "b_tlx.h"\n')}
    )
    up = scenario.upstream(
        "[BUILD] include b (#3)", {"lib/Tool.cpp": INCLUDES.replace('"a.h"\n', '"a.h"\n#include "b.h"\n')}
    )
    code, report, _ = pick(scenario, capsys, up)
    assert code == 0 and statuses(report) == ["auto_resolved"]
    (file,) = report["commits"][0]["files"]
    assert (file["path"], file["class"], file["resolved"], file["rule"]) == (
        "lib/Tool.cpp",
        "mechanical",
        True,
        "include-union",
    )
    head = report["head"]
    assert scenario.git("show", f"{head}:lib/Tool.cpp").startswith(
        '#include "a.h"\n#include "b.h"\n#include "b_tlx.h"'
    )
    assert "Sluice-Resolution: include-union" in scenario.git("log", "-1", "--format=%B", head)
    assert "<<<<<<<" not in scenario.git("show", f"{head}:lib/Tool.cpp")


def test_a_commit_that_needs_a_human_writes_no_ref_at_all(scenario: Scenario, capsys) -> None:
    scenario.fork("[TLX] offset", {"python/triton/core.py": PY.replace("ptr + 1", "ptr + 2")})
    clean = scenario.upstream("[DOCS] More (#4)", {"docs/a.md": "a\nb\n"})
    clash = scenario.upstream(
        "[FRONTEND] offset (#5)", {"python/triton/core.py": PY.replace("ptr + 1", "ptr * 4")}
    )
    code, report, _ = pick(scenario, capsys, clean, clash, extra=("--branch", "ingest/2"))
    assert code == 1
    assert statuses(report) == ["clean", "needs_human"]
    file = report["commits"][1]["files"][0]
    assert (file["class"], file["resolved"]) == ("semantic", False)
    assert file["evidence"]["upstream"] == clash
    assert file["evidence"]["blame"] == file["hunks"][0]["blame"] == [scenario.git("rev-parse", "main")]
    assert report["head"] is None
    assert scenario.git("branch", "--list", "ingest/2") == ""


def test_the_evidence_names_the_fork_commits_not_the_upstream_lines_in_the_same_block(
    scenario: Scenario, capsys
) -> None:
    """Upstream rewrote two lines, the fork one of them: the block's fork side holds both, and blame names
    the fork's commit, not upstream's import of the other line (upstream's history is no one to ask)."""
    scenario.fork("[TLX] offset", {"python/triton/core.py": PY.replace("ptr + 1", "ptr + 2")})
    changed = PY.replace("ptr + 1", "ptr * 4").replace("return x", "return x * 2")
    clash = scenario.upstream("[FRONTEND] offset (#5)", {"python/triton/core.py": changed})
    code, report, _ = pick(scenario, capsys, clash)
    assert code == 1
    (file,) = report["commits"][0]["files"]
    (hunk,) = file["hunks"]
    fork = scenario.git("rev-parse", "main")
    assert file["evidence"]["blame"] == hunk["blame"] == [fork]
    argv = ["pick", "--repo", str(scenario.path), "--onto", "main", "--upstream", "upstream/main"]
    assert main([*argv, "--no-record", clash]) == 1
    assert (
        f"    fork commits on the other side: {fork[:10]}\n" in capsys.readouterr().out
    )  # the text says it too


def test_fork_uses_beyond_the_search_limit_are_not_counted_as_all(
    scenario: Scenario, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Upstream changes `load`'s signature inside a block the fork changed too; the fork calls `load` in
    three files but the search stops at two lines: the reason shows the uses among them and says there may
    be more."""
    # the limit itself is under test: a fork with 501 uses would say the same, only slower to build
    monkeypatch.setattr("bot.flows.pick.GREP_HITS", 2)
    calls = {f"third_party/intel/use{i}.py": f"y{i} = load(p)\n" for i in range(3)}
    scenario.fork("[TLX] offset", {"python/triton/core.py": PY.replace("ptr + 1", "ptr + 2"), **calls})
    changed = PY.replace("load(ptr)", "load(ptr, mask)").replace("ptr + 1", "ptr * 4")
    clash = scenario.upstream("[FRONTEND] masked load (#5)", {"python/triton/core.py": changed})
    code, report, _ = pick(scenario, capsys, clash)
    assert code == 1
    (file,) = report["commits"][0]["files"]
    assert file["class"] == "api"
    # the two lines are `load`'s own definition, which is no use, and use0.py's call
    assert file["reason"].endswith("fork uses it at third_party/intel/use0.py:1 and perhaps more")


def test_dry_run_writes_nothing(scenario: Scenario, capsys) -> None:
    up = scenario.upstream("[DOCS] More (#6)", {"docs/a.md": "a\nb\n"})
    before = scenario.git("for-each-ref")
    code, report, _ = pick(scenario, capsys, up, extra=("--dry-run", "--branch", "ingest/3"))
    assert code == 0 and statuses(report) == ["clean"] and report["head"] is None
    assert report["commits"][0]["tree"] and report["commits"][0]["commit"] is None
    assert scenario.git("for-each-ref") == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["0123456789abcdef0123"], "this repository has no such commit: check the SHA"),
        (["not-a-sha"], "unknown ref 'not-a-sha'"),
        (["--branch=--force", "{up}"], "not a valid git branch name"),
        (["--branch=../../etc", "{up}"], "not a valid git branch name"),
        (["--branch=ingest.lock/3", "{up}"], "ends with '.lock'"),
        (["--branch=ingest/\u202e3", "{up}"], "U+202E"),
        (["{fork}"], "is not an upstream commit"),
        (["{taken}"], "is already ingested (trailer in"),
        (["--", "--upload-pack=touch /tmp/sluice-pwned"], "not a commit SHA"),
    ],
)
def test_bad_input_exits_2_and_writes_no_ref(
    scenario: Scenario, capsys, args: list[str], message: str
) -> None:
    taken = scenario.upstream("[DOCS] Taken (#7)", {"docs/a.md": "a\nt\n"})
    up = scenario.upstream("[DOCS] Up (#8)", {"docs/b.md": "b\n"})
    scenario.pick(taken, how="trailer")
    fork = scenario.fork("[TLX] own", {"third_party/tlx/x.py": "x = 1\n"})
    before = scenario.git("for-each-ref")
    argv = [a.format(up=up, fork=fork, taken=taken) for a in args]
    code = main(["pick", "--repo", str(scenario.path), "--onto", "main", "--no-record", *argv])
    _, err = capsys.readouterr()
    assert code == 2
    assert message in err
    assert scenario.git("for-each-ref") == before


def test_existing_branch_is_not_replaced_without_force(scenario: Scenario, capsys) -> None:
    up = scenario.upstream("[DOCS] More (#9)", {"docs/a.md": "a\nb\n"})
    scenario.git("branch", "ingest/4", "main")
    code, _, err = pick(scenario, capsys, up, extra=("--branch", "ingest/4"))
    assert code == 2 and "exists" in err
    code, report, _ = pick(scenario, capsys, up, extra=("--branch", "ingest/4", "--force"))
    assert code == 0 and scenario.git("rev-parse", "ingest/4") == report["head"]


def test_a_human_resolution_is_remembered_and_reused(scenario: Scenario, tmp_path: Path, capsys) -> None:
    db = f"sqlite:///{tmp_path / 'sluice.db'}"
    scenario.fork("[TLX] offset", {"python/triton/core.py": PY.replace("ptr + 1", "ptr + 2")})
    clash = scenario.upstream(
        "[FRONTEND] offset (#10)", {"python/triton/core.py": PY.replace("ptr + 1", "ptr * 4")}
    )
    onto = scenario.git("rev-parse", "main")
    # The human resolves the pick by hand on fork trunk.
    human = scenario.fork(
        "[FRONTEND] offset (#10), resolved", {"python/triton/core.py": PY.replace("ptr + 1", "ptr * 4 + 2")}
    )
    assert remember(scenario, clash, human, database=db) == 0
    assert "remembered 1 resolved conflict" in capsys.readouterr().out
    # Re-picking the same commit onto the same base (as bisection does) reuses it.
    scenario.git("branch", "bisect-base", onto)
    code = main(
        [
            "pick",
            "--repo",
            str(scenario.path),
            "--onto",
            "bisect-base",
            "--upstream",
            "upstream/main",
            "--database",
            db,
            "--json",
            "--branch",
            "bisect/1",
            clash,
        ]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and statuses(report) == ["auto_resolved"]
    file = report["commits"][0]["files"][0]
    assert (file["rule"], file["hunks"][0]["reused"]) == ("reused", True)
    assert scenario.git("show", f"{report['head']}:python/triton/core.py") == PY.replace(
        "ptr + 1", "ptr * 4 + 2"
    ).rstrip("\n")
    assert "Sluice-Resolution: reused" in scenario.git("log", "-1", "--format=%B", report["head"])


RESOLVER = """
import json, sys
request = json.load(sys.stdin)
text = request["ours"].replace("ptr + 2", "ptr * 4 + 2")
print(json.dumps({"resolution": text, "explanation": "kept both"}))
"""


def test_resolver_hook_proposes_and_the_proposal_is_marked(
    scenario: Scenario, tmp_path: Path, capsys
) -> None:
    script = tmp_path / "resolver.py"
    script.write_text(RESOLVER)
    config = tmp_path / "sluice.yml"
    config.write_text(f"resolver:\n  command: [{json.dumps(sys.executable)}, {json.dumps(str(script))}]\n")
    scenario.fork("[TLX] offset", {"python/triton/core.py": PY.replace("ptr + 1", "ptr + 2")})
    clash = scenario.upstream(
        "[FRONTEND] offset (#11)", {"python/triton/core.py": PY.replace("ptr + 1", "ptr * 4")}
    )
    code, report, _ = pick(scenario, capsys, clash, extra=("--config", str(config)))
    assert code == 0 and statuses(report) == ["proposed"]
    file = report["commits"][0]["files"][0]
    assert (file["class"], file["rule"]) == ("semantic", "proposed")
    assert "Sluice-Resolution: proposed" in scenario.git("log", "-1", "--format=%B", report["head"])


def test_merge_strategy_writes_merge_commits(scenario: Scenario, capsys) -> None:
    """Intel-style ingestion: each upstream commit is merged, so its history comes along."""
    first = scenario.upstream("[DOCS] One (#12)", {"docs/a.md": "a\nb\n"})
    second = scenario.upstream("[DOCS] Two (#13)", {"docs/b.md": "b\n"})
    scenario.fork("[XPU] own", {"third_party/intel/x.cpp": "int x;\n"})
    code, report, _ = pick(
        scenario, capsys, second, extra=("--strategy", "merge", "--branch", "ingest/merge")
    )
    assert code == 0 and statuses(report) == ["clean"]
    parents = scenario.git("log", "-1", "--format=%P", report["head"]).split()
    assert parents == [scenario.git("rev-parse", "main"), second]
    assert scenario.git("merge-base", "--is-ancestor", first, report["head"]) == ""
    assert scenario.git("show", f"{report['head']}:docs/b.md") == "b"
    assert f"Upstream-Commit: {second}" in scenario.git("log", "-1", "--format=%B", report["head"])


def test_a_merge_pick_stops_at_the_commit_that_needs_a_human_and_knows_what_a_merge_brought(
    scenario: Scenario, capsys
) -> None:
    """Merging a later commit after one that needs a human would bring it along and report its conflicts as
    the later commit's; and a commit a later one's merge brought already has nothing to merge."""
    scenario.fork("[TLX] offset", {"python/triton/core.py": PY.replace("ptr + 1", "ptr + 2")})
    first = scenario.upstream("[DOCS] More (#4)", {"docs/a.md": "a\nb\n"})
    second = scenario.upstream("[DOCS] Two (#5)", {"docs/b.md": "b\n"})
    clash = scenario.upstream(
        "[FRONTEND] offset (#6)", {"python/triton/core.py": PY.replace("ptr + 1", "ptr * 4")}
    )
    after = scenario.upstream("[DOCS] After (#7)", {"docs/c.md": "c\n"})
    code, report, _ = pick(
        scenario, capsys, second, first, clash, after, extra=("--strategy", "merge", "--dry-run")
    )
    assert code == 1 and statuses(report) == ["clean", "already_applied", "needs_human"]
    assert report["untried"] == [after]
    argv = ["pick", "--repo", str(scenario.path), "--onto", "main", "--no-record", "--strategy", "merge"]
    assert main([*argv, "--dry-run", clash, after]) == 1
    shown = " ".join(capsys.readouterr().out.split())
    assert "not tried" in shown and "1 commit after" in shown  # its row (the cell wraps at 80 columns)


def test_a_merge_pick_says_which_earlier_commits_it_brings_and_which_of_them_changed_a_conflicted_file(
    scenario: Scenario, capsys
) -> None:
    """Merging a docs commit brings the earlier pending ones along: a conflict is theirs, and the report says
    so rather than pinning it on the docs commit (Intel's fork: a docs commit's merge 'needed a human' in
    Dialect.cpp because of 30 commits before it)."""
    scenario.fork("[TLX] offset", {"python/triton/core.py": PY.replace("ptr + 1", "ptr + 2")})
    clash = scenario.upstream(
        "[FRONTEND] offset (#6)", {"python/triton/core.py": PY.replace("ptr + 1", "ptr * 4")}
    )
    other = scenario.upstream("[DOCS] Two (#5)", {"docs/b.md": "b\n"})
    docs = scenario.upstream("[DOCS] Meetups (#7)", {"docs/c.md": "c\n"})
    code, report, _ = pick(scenario, capsys, docs, extra=("--strategy", "merge", "--dry-run"))
    assert code == 1 and statuses(report) == ["needs_human"]
    (merged,) = report["commits"]
    assert merged["brings"] == [clash, other]
    assert [(f["path"], f["changed_by"]) for f in merged["files"]] == [("python/triton/core.py", [clash])]
    argv = ["pick", "--repo", str(scenario.path), "--onto", "main", "--no-record", "--strategy", "merge"]
    assert main([*argv, "--dry-run", docs]) == 1
    out = capsys.readouterr().out  # at 80 columns the cells wrap: each phrase is checked on its own
    assert "(its merge brings 2" in out and f"(changed by {clash[:10]})" in out
    assert "A commit needs a human: resolve it, then `sluice" in out


def test_the_text_report_gives_each_conflicted_path_whole_on_a_line_of_its_own(
    scenario: Scenario, capsys
) -> None:
    """Triton's paths are long: in an 80-column table cell one was folded mid-word across three lines."""
    path = "third_party/nvidia/backend/lib/TritonNVIDIAGPUToLLVM/LoadStoreOpToLLVM.py"
    scenario.pick(scenario.upstream("[BACKEND] Add the lowering (#8)", {path: PY}), how="trailer")
    scenario.fork("[TLX] offset", {path: PY.replace("ptr + 1", "ptr + 2")})
    clash = scenario.upstream("[BACKEND] offset (#9)", {path: PY.replace("ptr + 1", "ptr * 4")})
    argv = ["pick", "--repo", str(scenario.path), "--onto", "main", "--no-record", "--dry-run", clash]
    assert main(argv) == 1
    lines = capsys.readouterr().out.splitlines()
    assert any(line.rstrip().endswith("needs_human │ semantic         │") for line in lines)
    at = lines.index(f"{clash[:10]} [BACKEND] offset (#9)")
    assert lines[at + 1].startswith(f"  {path}:")  # whole; what follows wraps at its spaces
    assert "semantic — block 1" in " ".join(lines[at + 1 : at + 3])


def test_a_resolver_named_in_the_repository_is_not_run(scenario: Scenario, tmp_path: Path, capsys) -> None:
    """Anyone who can push to fork trunk writes .github/sluice.yml: it must not pick what runs here."""
    marker = tmp_path / "ran"
    script = tmp_path / "resolver.py"
    script.write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    command = f"[{json.dumps(sys.executable)}, {json.dumps(str(script))}]"
    config = f"resolver:\n  command: {command}\n"
    offset = PY.replace("ptr + 1", "ptr + 2")
    scenario.fork("[TLX] offset + config", {"python/triton/core.py": offset, ".github/sluice.yml": config})
    clash = scenario.upstream(
        "[FRONTEND] offset (#14)", {"python/triton/core.py": PY.replace("ptr + 1", "ptr * 4")}
    )
    code, report, err = pick(scenario, capsys, clash)
    assert code == 1 and statuses(report) == ["needs_human"]
    assert "ignoring resolver.command from main:.github/sluice.yml" in err
    assert not marker.exists()


def test_unusual_paths_survive(scenario: Scenario, capsys) -> None:
    """Spaces, ':' and non-ASCII in paths: through merge-tree, merge-file, grep and the report."""
    odd = "lib/odd dir/tool:v2 naïve.cpp"
    scenario.upstream("[BUILD] odd file (#15)", {odd: INCLUDES})
    scenario.pick(scenario.git("rev-parse", "upstream/main"), how="trailer")
    scenario.fork("[TLX] include tlx", {odd: INCLUDES.replace('"a.h"\n', '"a.h"\n#include "b_tlx.h"\n')})
    up = scenario.upstream(
        "[BUILD] include b (#16)", {odd: INCLUDES.replace('"a.h"\n', '"a.h"\n#include "b.h"\n')}
    )
    code, report, _ = pick(scenario, capsys, up)
    assert code == 0 and statuses(report) == ["auto_resolved"]
    assert [f["path"] for f in report["commits"][0]["files"]] == [odd]
    assert '#include "b.h"' in scenario.git("show", f"{report['head']}:{odd}")


def test_picked_commit_keeps_the_author_date_and_time_zone(scenario: Scenario, capsys) -> None:
    (scenario.path / "docs" / "a.md").write_text("a\nz\n")
    scenario.git("checkout", "-q", "upstream/main")
    scenario.git("commit", "-qam", "[DOCS] From New York (#17)", env={"GIT_AUTHOR_DATE": "1767300000 -0500"})
    up = scenario.git("rev-parse", "HEAD")
    code, report, _ = pick(scenario, capsys, up)
    assert code == 0
    assert scenario.git("log", "-1", "--format=%ad", "--date=raw", report["head"]) == "1767300000 -0500"


def test_a_marker_like_line_in_the_file_does_not_crash_the_pick(
    scenario: Scenario, tmp_path: Path, capsys
) -> None:
    """The classifier reads `<<<<<<<<TAB>note` as content; the resolution memory must not crash on it."""
    odd = "<<<<<<<\tnote for reviewers\n" + PY
    scenario.upstream("[FRONTEND] note (#18)", {"python/triton/core.py": odd})
    scenario.pick(scenario.git("rev-parse", "upstream/main"), how="trailer")
    scenario.fork("[TLX] offset", {"python/triton/core.py": odd.replace("ptr + 1", "ptr + 2")})
    clash = scenario.upstream(
        "[FRONTEND] offset (#19)", {"python/triton/core.py": odd.replace("ptr + 1", "ptr * 4")}
    )
    db = f"sqlite:///{tmp_path / 'sluice.db'}"
    code = main(
        [
            "pick",
            "--repo",
            str(scenario.path),
            "--onto",
            "main",
            "--upstream",
            "upstream/main",
            "--database",
            db,
            "--json",
            clash,
        ]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and statuses(report) == ["needs_human"]
    human = scenario.fork(
        "[FRONTEND] offset (#19), resolved", {"python/triton/core.py": odd.replace("ptr + 1", "ptr * 4 + 2")}
    )
    assert remember(scenario, clash, human, database=db) == 0


def test_the_same_commit_named_twice_is_refused(scenario: Scenario, capsys) -> None:
    up = scenario.upstream("[DOCS] More (#20)", {"docs/a.md": "a\nb\n"})
    before = scenario.git("for-each-ref")
    code, _, err = pick(scenario, capsys, up, up[:12], extra=("--branch", "ingest/20"))
    assert code == 2 and f"upstream commit {up[:10]} is named twice" in err
    assert scenario.git("for-each-ref") == before


def test_a_pick_that_changes_nothing_is_already_applied_and_writes_no_commit(
    scenario: Scenario, capsys
) -> None:
    # The fork took upstream's fix inside a larger commit of its own, so no patch-id matches. Recognition does
    # not call it already applied (an earlier pending commit changes the same file, so trunk is no witness);
    # the pick itself finds it empty once the earlier commit is in.
    scenario.fork("[FORK] Docs for XPU", {"docs/a.md": "a\nfixed\n", "docs/xpu.md": "xpu\n"})
    title = scenario.upstream("[DOCS] Title (#20)", {"docs/a.md": "# A\na\n"})
    same = scenario.upstream("[DOCS] Fix (#21)", {"docs/a.md": "# A\na\nfixed\n"})
    code, report, _ = pick(scenario, capsys, title, same, extra=("--branch", "ingest/21"))
    assert code == 0 and statuses(report) == ["clean", "already_applied"]
    head = scenario.git("rev-parse", "ingest/21")
    assert head == report["head"] == report["commits"][0]["commit"] and report["commits"][1]["commit"] is None
    assert scenario.git("rev-parse", f"{head}^") == scenario.git("rev-parse", "main")  # one commit, not two
    assert scenario.git("show", f"{head}:docs/a.md") == "# A\na\nfixed"


@pytest.mark.parametrize(
    ("onto", "branch", "what"),
    [
        ("main", "main", "--onto's own ref"),
        ("release", "release", "--onto's own ref"),
        ("release", "main", "fork trunk"),
    ],
)
def test_the_branch_may_never_be_onto_or_fork_trunk(
    scenario: Scenario, capsys, onto: str, branch: str, what: str
) -> None:
    up = scenario.upstream("[DOCS] More (#23)", {"docs/a.md": "a\nb\n"})
    scenario.git("branch", "release", "main")
    before = scenario.git("for-each-ref")
    for extra in ((), ("--force",), ("--dry-run",)):
        argv = ["pick", "--repo", str(scenario.path), "--onto", onto, "--upstream", "upstream/main"]
        code = main([*argv, "--no-record", "--branch", branch, *extra, up])
        _, err = capsys.readouterr()
        assert code == 2 and f"--branch {branch} is {what}" in err, err
    assert scenario.git("for-each-ref") == before
