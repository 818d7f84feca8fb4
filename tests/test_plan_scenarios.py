"""`sluice plan` on small real histories with known answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.app.cli import main
from tests.support.scenarios import CPP_PASS, Scenario, numbered

PASS_PATH = "lib/Dialect/TritonGPU/Transforms/Pipeliner.cpp"
LANG_PATH = "python/triton/language/core.py"
NO_RISKY_COMPONENTS = """
components:
  - name: tests
    paths: ["test/**", "python/test/**", "docs/**"]
    risk: low
"""


@pytest.fixture
def scenario(tmp_path: Path) -> Scenario:
    s = Scenario(tmp_path)
    s.upstream(
        "Initial import (#1)",
        {
            PASS_PATH: CPP_PASS,
            "cmake/llvm-hash.txt": "a" * 40 + "\n",
            "docs/a.md": numbered("doc a", 30),
            "docs/b.md": numbered("doc b", 30),
            "test/TritonGPU/loop.mlir": numbered("// case", 40),
            LANG_PATH: "def load(ptr):\n    return ptr\n\n\ndef store(ptr, value):\n    return value\n",
        },
    )
    s.fork_here()
    return s


def plan_json(s: Scenario, tmp_path: Path, *extra: str, capsys: pytest.CaptureFixture[str]) -> dict:
    db = f"sqlite:///{tmp_path / 'sluice.db'}"
    code = main(["plan", *s.repo_args(), "--json", "--database", db, *extra])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def grouping(plan: dict) -> tuple[list[list[str]], list[list[str]]]:
    bundles = [[c["sha"] for c in b["commits"]] for b in plan["bundles"]]
    chains = [[c["sha"] for c in ch["commits"]] for ch in plan["chains"]]
    return bundles, chains


def test_independent_commits_form_one_bundle(scenario: Scenario, tmp_path: Path, capsys) -> None:
    a = scenario.upstream("[DOCS] Clarify a (#2)", {"docs/a.md": numbered("doc a", 30) + "more\n"})
    b = scenario.upstream("[DOCS] Clarify b (#3)", {"docs/b.md": "new b\n" + numbered("doc b", 30)})
    c = scenario.upstream(
        "[TESTING] Add a loop case (#4)", {"test/TritonGPU/loop.mlir": numbered("// case", 40) + "// new\n"}
    )
    bundles, chains = grouping(plan_json(scenario, tmp_path, capsys=capsys))
    assert bundles == [[a, b, c]]
    assert chains == []


def test_editing_a_function_the_fork_changed_starts_a_chain(
    scenario: Scenario, tmp_path: Path, capsys
) -> None:
    scenario.fork(
        "[TLX] Deeper pipelines", {PASS_PATH: CPP_PASS.replace("depth += 1;", "depth += 2; // tlx")}
    )
    risky = scenario.upstream(
        "[BACKEND] Cap the pipeline depth (#5)",
        {PASS_PATH: CPP_PASS.replace("return depth;", "return depth % 8;")},
    )
    safe = scenario.upstream("[DOCS] Clarify a (#6)", {"docs/a.md": numbered("doc a", 30) + "more\n"})
    plan = plan_json(
        scenario, tmp_path, "--config", str(_config(tmp_path, NO_RISKY_COMPONENTS)), capsys=capsys
    )
    bundles, chains = grouping(plan)
    assert chains == [[risky]]
    assert bundles == [[safe]]
    reasons = {r["kind"]: r["detail"] for r in plan["chains"][0]["commits"][0]["reasons"]}
    assert reasons["patch-stack-symbol"] == f"{PASS_PATH}: mlir::triton::pipelineDepth"


def test_a_fork_change_the_fork_reverted_is_no_overlap_with_the_patch_stack(
    scenario: Scenario, tmp_path: Path, capsys
) -> None:
    """A fork commit and its revert leave the file as upstream has it (Intel's fork holds hundreds of such
    pairs, and of revert-and-reapply pairs of upstream commits): editing that function is no risk."""
    scenario.fork(
        "[TLX] Deeper pipelines", {PASS_PATH: CPP_PASS.replace("depth += 1;", "depth += 2; // tlx")}
    )
    scenario.fork('Revert "[TLX] Deeper pipelines"', {PASS_PATH: CPP_PASS})
    change = scenario.upstream(
        "[BACKEND] Cap the pipeline depth (#5)",
        {PASS_PATH: CPP_PASS.replace("return depth;", "return depth % 8;")},
    )
    plan = plan_json(
        scenario, tmp_path, "--config", str(_config(tmp_path, NO_RISKY_COMPONENTS)), capsys=capsys
    )
    assert grouping(plan) == ([[change]], [])
    assert not {"patch-stack-file", "patch-stack-hunk", "patch-stack-symbol"} & set(reasons_of(plan, change))


def test_later_commit_editing_chained_lines_joins_the_chain(
    scenario: Scenario, tmp_path: Path, capsys
) -> None:
    bump = scenario.upstream("[BUILD] Bump LLVM (#7)", {"cmake/llvm-hash.txt": "b" * 40 + "\n"})
    doc = scenario.upstream("[DOCS] Clarify a (#8)", {"docs/a.md": numbered("doc a", 30) + "more\n"})
    follow = scenario.upstream("[BUILD] Bump LLVM again (#9)", {"cmake/llvm-hash.txt": "c" * 40 + "\n"})
    plan = plan_json(scenario, tmp_path, capsys=capsys)
    bundles, chains = grouping(plan)
    assert chains == [[bump, follow]]
    assert bundles == [[doc]]
    chain = plan["chains"][0]
    assert chain["risk"] == "critical"
    assert {(d["sha"], d["kind"]) for d in chain["commits"][1]["depends_on"]} == {(bump, "lines")}


def test_llvm_bump_is_critical(scenario: Scenario, tmp_path: Path, capsys) -> None:
    bump = scenario.upstream(
        "[BUILD] Bump LLVM to llvm/llvm-project@bbbb (#10)", {"cmake/llvm-hash.txt": "b" * 40}
    )
    plan = plan_json(scenario, tmp_path, capsys=capsys)
    (commit,) = plan["chains"][0]["commits"]
    assert commit["sha"] == bump
    assert commit["risk"] == "critical"
    assert [r["kind"] for r in commit["reasons"]] == ["component"]


def test_a_revert_nets_out_its_original_and_the_reland_is_the_work(
    scenario: Scenario, tmp_path: Path, capsys
) -> None:
    """Original and revert undo each other exactly: no work for a human; the reland alone is picked."""
    original = scenario.upstream(
        "[FRONTEND] Faster store (#11)",
        {LANG_PATH: "def load(ptr):\n    return ptr\n\n\ndef store(ptr, value):\n    return value + 0\n"},
    )
    other = scenario.upstream("[DOCS] Clarify b (#12)", {"docs/b.md": "new b\n" + numbered("doc b", 30)})
    revert = scenario.upstream(
        'Revert "[FRONTEND] Faster store (#11)" (#13)',
        {LANG_PATH: "def load(ptr):\n    return ptr\n\n\ndef store(ptr, value):\n    return value\n"},
    )
    revert_body = scenario.git("log", "-1", "--format=%B", revert)
    assert "reverts" not in revert_body  # linked by subject here; the body form is covered in test_analysis
    reland = scenario.upstream(
        "[Reland] [FRONTEND] Faster store (#14)",
        {LANG_PATH: "def load(ptr):\n    return ptr\n\n\ndef store(ptr, value):\n    return value + 0\n"},
    )
    plan = plan_json(scenario, tmp_path, capsys=capsys)
    bundles, chains = grouping(plan)
    assert chains == [[reland]]
    assert bundles == [[other]]
    assert plan["status"]["recognised_by"]["net-zero"] == 2
    assert original not in str(plan["bundles"]) + str(plan["chains"])
    assert plan["status"]["pending_commits"] == 2


def test_a_merge_fork_plans_a_revert_pair_its_merges_would_bring(
    scenario: Scenario, tmp_path: Path, capsys
) -> None:
    """With `strategy: merge` nothing is left out: the merge of the unit holding the bump brings it onto
    trunk, so both are listed, each with its own risk (the bump is chained), not left out as a passed pin and
    an applied revert (or, without the pin, as a net-zero pair)."""
    bump = scenario.upstream("[BUILD] Bump LLVM (#20)", {"cmake/llvm-hash.txt": "b" * 40 + "\n"})
    doc = scenario.upstream("[DOCS] Clarify a (#21)", {"docs/a.md": numbered("doc a", 30) + "more\n"})
    revert = scenario.upstream(
        'Revert "[BUILD] Bump LLVM (#20)" (#22)', {"cmake/llvm-hash.txt": "a" * 40 + "\n"}
    )
    merge = _config(tmp_path, "strategy: merge\n")
    plan = plan_json(scenario, tmp_path, "--config", str(merge), capsys=capsys)
    assert grouping(plan) == ([[doc]], [[bump], [revert]])
    assert plan["chains"][0]["risk"] == "critical" and plan["status"]["pending_commits"] == 3
    assert plan["order"] == [plan["chains"][0]["id"], plan["bundles"][0]["id"], plan["chains"][1]["id"]]
    picking = plan_json(scenario, tmp_path, "--no-record", capsys=capsys)  # a fork that picks skips both
    assert grouping(picking) == ([[doc]], []) and picking["status"]["pending_commits"] == 1


@pytest.mark.parametrize("how", ["trailer", "x", "plain", "subject"])
def test_already_ingested_commits_are_excluded(scenario: Scenario, tmp_path: Path, capsys, how: str) -> None:
    taken = scenario.upstream("[DOCS] Clarify a (#20)", {"docs/a.md": numbered("doc a", 30) + "more\n"})
    left = scenario.upstream("[DOCS] Clarify b (#21)", {"docs/b.md": "new b\n" + numbered("doc b", 30)})
    scenario.pick(taken, how=how, message="[Cherry-pick] '[DOCS] Clarify a, adapted (#20)'")
    plan = plan_json(scenario, tmp_path, capsys=capsys)
    bundles, _chains = grouping(plan)
    assert bundles == [[left]]
    method = {"trailer": "trailer", "x": "cherry-pick-x", "plain": "patch-id", "subject": "subject-pattern"}[
        how
    ]
    assert plan["status"]["recognised_by"][method] == 1
    assert plan["status"]["ingestion_tip"] == taken


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sluice.yml"
    path.write_text(text)
    return path


def reasons_of(plan: dict, sha: str) -> dict[str, str]:
    for group in [*plan["bundles"], *plan["chains"]]:
        for c in group["commits"]:
            if c["sha"] == sha:
                return {r["kind"]: r["detail"] for r in c["reasons"]}
    raise AssertionError(f"{sha} not planned")


def test_large_commit_is_risky(scenario: Scenario, tmp_path: Path, capsys) -> None:
    big = scenario.upstream(
        "[TESTING] Add many cases (#30)", {"test/TritonGPU/big.mlir": numbered("// c", 520)}
    )
    plan = plan_json(scenario, tmp_path, capsys=capsys)
    assert grouping(plan) == ([], [[big]])
    assert reasons_of(plan, big)["large"] == "520 changed lines (≥ 500)"


def test_extension_interface_change_is_risky(scenario: Scenario, tmp_path: Path, capsys) -> None:
    config = _config(
        tmp_path,
        'extensions:\n  - name: tlx\n    paths: ["third_party/tlx/**"]\n    interfaces: ["docs/a.md"]\n',
    )
    change = scenario.upstream("[DOCS] a (#31)", {"docs/a.md": numbered("doc a", 30) + "more\n"})
    plan = plan_json(scenario, tmp_path, "--config", str(config), capsys=capsys)
    assert reasons_of(plan, change)["extension-interface"] == "tlx: docs/a.md"


def test_revert_named_in_the_body_depends_on_its_commit(scenario: Scenario, tmp_path: Path, capsys) -> None:
    original = scenario.upstream("[DOCS] Reword a (#32)", {"docs/a.md": numbered("doc a", 29) + "changed\n"})
    revert = scenario.upstream(  # it also changes docs/b.md, so the two do not simply net out
        f"Back out the rewording (#33)\n\nThis reverts commit {original}.",
        {"docs/a.md": numbered("doc a", 30), "docs/b.md": numbered("doc b", 30) + "note\n"},
    )
    plan = plan_json(scenario, tmp_path, capsys=capsys)
    assert grouping(plan) == ([], [[original, revert]])
    deps = {(d["sha"], d["kind"]) for d in plan["chains"][0]["commits"][1]["depends_on"]}
    assert (original, "reverts") in deps


def test_replacing_a_line_the_fork_replaced_is_a_hunk_overlap(
    scenario: Scenario, tmp_path: Path, capsys
) -> None:
    scenario.fork(
        "[TLX] Note in docs", {"docs/a.md": numbered("doc a", 30).replace("doc a line 7", "tlx note 7")}
    )
    change = scenario.upstream(
        "[DOCS] Reword 7 (#34)", {"docs/a.md": numbered("doc a", 30).replace("doc a line 7", "doc a seven")}
    )
    plan = plan_json(scenario, tmp_path, capsys=capsys)
    reasons = reasons_of(plan, change)
    assert reasons["patch-stack-hunk"] == "docs/a.md"
    assert reasons["predicted-conflict"] == "needs a human against fork trunk in docs/a.md (unknown)"
    assert reasons["patch-stack-file"] == "docs/a.md"


HEADER = """\
namespace mlir {
namespace triton {
int pipelineDepth(int stages);
} // namespace triton
} // namespace mlir
"""


def test_cpp_symbol_links_header_and_source(scenario: Scenario, tmp_path: Path, capsys) -> None:
    header = "include/triton/Dialect/TritonGPU/Transforms/Pipeliner.h"
    first = scenario.upstream("[BACKEND] Declare depth (#35)", {header: HEADER})
    second = scenario.upstream(
        "[BACKEND] Depth from stages (#36)",
        {PASS_PATH: CPP_PASS.replace("int depth = stages;", "int depth = 2 * stages;")},
    )
    plan = plan_json(
        scenario, tmp_path, "--config", str(_config(tmp_path, NO_RISKY_COMPONENTS)), capsys=capsys
    )
    deps = next(c["depends_on"] for b in plan["bundles"] for c in b["commits"] if c["sha"] == second)
    assert deps == [{"sha": first, "kind": "symbol", "detail": "mlir::triton::pipelineDepth"}]


def test_backlog_hole_is_planned_first(scenario: Scenario, tmp_path: Path, capsys) -> None:
    hole = scenario.upstream("[DOCS] a (#37)", {"docs/a.md": numbered("doc a", 30) + "more\n"})
    taken = scenario.upstream("[DOCS] b (#38)", {"docs/b.md": "new b\n" + numbered("doc b", 30)})
    newer = scenario.upstream("[TESTING] case (#39)", {"test/TritonGPU/loop.mlir": "// RUN: x\n"})
    scenario.pick(taken, how="trailer")
    plan = plan_json(scenario, tmp_path, capsys=capsys)
    assert grouping(plan) == ([[hole, newer]], [])
    assert (plan["status"]["backlog_commits"], plan["status"]["pending_commits"]) == (1, 2)


def test_merge_style_ingestion_moves_the_tip(scenario: Scenario, tmp_path: Path, capsys) -> None:
    """Intel-style forks merge an upstream commit: everything up to it is ingested by ancestry."""
    first = scenario.upstream("[DOCS] a (#40)", {"docs/a.md": numbered("doc a", 30) + "more\n"})
    merged = scenario.upstream("[DOCS] b (#41)", {"docs/b.md": "new b\n" + numbered("doc b", 30)})
    later = scenario.upstream("[TESTING] case (#42)", {"test/TritonGPU/loop.mlir": "// RUN: x\n"})
    scenario.fork("[XPU] Own work", {"third_party/intel/x.cpp": "int x;\n"})
    scenario.git("checkout", "-q", "main")
    scenario.git("merge", "-q", "--no-ff", "-m", "Merge upstream up to #41", merged)
    plan = plan_json(scenario, tmp_path, capsys=capsys)
    assert grouping(plan) == ([[later]], [])
    status = plan["status"]
    assert status["ingestion_tip"] == merged
    assert (status["backlog_commits"], status["pending_commits"]) == (0, 1)
    assert status["recognised_by"] == {"ancestry": 3}
    assert status["patch_stack_commits"] == 1
    assert first in scenario.git("rev-list", "main").split()


INCLUDES = '#include "a.h"\n#include "c.h"\n\nint helper() { return 0; }\n'


def test_a_conflict_a_rule_resolves_is_not_risky(scenario: Scenario, tmp_path: Path, capsys) -> None:
    """The planner predicts with the pick engine: an include-union conflict is bundled, not chained."""
    path = "python/src/tool.cc"
    config = _config(tmp_path, NO_RISKY_COMPONENTS)
    scenario.upstream("[BUILD] Add the tool (#50)", {path: INCLUDES})
    scenario.pick(scenario.git("rev-parse", "upstream/main"), how="trailer")
    scenario.fork("[TLX] include tlx", {path: INCLUDES.replace('"a.h"\n', '"a.h"\n#include "b_tlx.h"\n')})
    change = scenario.upstream(
        "[BUILD] include b (#51)", {path: INCLUDES.replace('"a.h"\n', '"a.h"\n#include "b.h"\n')}
    )
    plan = plan_json(scenario, tmp_path, "--config", str(config), capsys=capsys)
    assert grouping(plan) == ([[change]], [])
    assert (
        reasons_of(plan, change)["mechanical-conflict"]
        == f"resolved by a mechanical rule: {path} (include-union)"
    )


HELPER = "int scale(int x) {\n  return x;\n}\n\nint other() { return 1; }\n"


@pytest.mark.parametrize("fork_calls_it", [True, False])
def test_a_conflict_over_an_api_the_fork_calls_is_predicted_for_a_human(
    scenario: Scenario, tmp_path: Path, capsys, fork_calls_it: bool
) -> None:
    """Upstream renames a function beside the fork's edit of its body: the adjacent-edits rule could merge
    it, but where fork code calls the old name the pick leaves it to a human, and the plan says so."""
    path = "python/src/scale.cc"
    config = _config(tmp_path, NO_RISKY_COMPONENTS)
    scenario.upstream("[BUILD] Add scale (#52)", {path: HELPER})
    scenario.pick(scenario.git("rev-parse", "upstream/main"), how="trailer")
    calls = {"third_party/tlx/use.cc": "int tlx_scale(int y) { return scale(y) * 2; }\n"}
    scenario.fork("[TLX] offset", {path: HELPER.replace("return x;", "return x + 1;"), **calls})
    if not fork_calls_it:
        scenario.fork(
            "[TLX] own scaling", {"third_party/tlx/use.cc": "int tlx_scale(int y) { return y * 2; }\n"}
        )
    change = scenario.upstream(
        "[BUILD] Rename scale (#53)", {path: HELPER.replace("int scale(", "int rescale(")}
    )
    plan = plan_json(scenario, tmp_path, "--config", str(config), capsys=capsys)
    reasons = reasons_of(plan, change)
    if fork_calls_it:
        assert reasons["predicted-conflict"] == f"needs a human against fork trunk in {path} (api)"
        assert "mechanical-conflict" not in reasons
    else:
        assert reasons["mechanical-conflict"] == f"resolved by a mechanical rule: {path} (adjacent-edits)"
        assert "predicted-conflict" not in reasons


def test_unusual_paths_are_planned(scenario: Scenario, tmp_path: Path, capsys) -> None:
    odd = "docs/naïve guide:v2.md"
    change = scenario.upstream("[DOCS] odd (#60)", {odd: "x\n"})
    plan = plan_json(scenario, tmp_path, capsys=capsys)
    (bundle,) = plan["bundles"]
    assert bundle["commits"][0]["sha"] == change
    assert bundle["commits"][0]["files"] == [odd]


def test_an_up_to_date_fork_has_nothing_to_plan(scenario: Scenario, tmp_path: Path, capsys) -> None:
    plan = plan_json(scenario, tmp_path, capsys=capsys)
    assert (plan["bundles"], plan["chains"]) == ([], [])
    status = plan["status"]
    assert (status["days_behind"], status["backlog_commits"], status["pending_commits"]) == (0.0, 0, 0)


def test_upstream_merge_commits_are_planned_against_their_first_parent(
    scenario: Scenario, tmp_path: Path, capsys
) -> None:
    """An upstream that merges side branches: the stream is first-parent, each merge one change."""
    scenario.git("checkout", "-q", "-b", "side", "upstream/main")
    scenario.git("commit", "-q", "--allow-empty", "-m", "side work")
    (scenario.path / "docs" / "side.md").write_text("side\n")
    scenario.git("add", "docs/side.md")
    scenario.git("commit", "-q", "-m", "side doc")
    scenario.git("checkout", "-q", "upstream/main")
    scenario.git("merge", "-q", "--no-ff", "-m", "Merge side (#70)", "side")
    merge = scenario.git("rev-parse", "HEAD")
    plan = plan_json(scenario, tmp_path, capsys=capsys)
    assert grouping(plan) == ([[merge]], [])
    (commit,) = plan["bundles"][0]["commits"]
    assert (commit["files"], commit["changed_lines"]) == (["docs/side.md"], 1)
    assert plan["status"]["pending_commits"] == 1


def test_a_fork_without_shared_history_has_no_tip(tmp_path: Path, capsys) -> None:
    s = Scenario(tmp_path)
    s.upstream("Upstream root (#1)", {"docs/a.md": "a\n"})
    s.upstream("Upstream more (#2)", {"docs/b.md": "b\n"})
    s.git("checkout", "-q", "--orphan", "main")
    s.git("rm", "-rq", "--cached", ".")
    (s.path / "fork.txt").write_text("fork\n")
    s.git("add", "fork.txt")
    s.git("commit", "-q", "-m", "Fork root")
    plan = plan_json(s, tmp_path, capsys=capsys)
    status = plan["status"]
    assert (status["ingestion_tip"], status["days_behind"], status["pending_commits"]) == (None, None, 2)


def test_binary_empty_and_deleting_commits(scenario: Scenario, tmp_path: Path, capsys) -> None:
    scenario.fork(
        "[TLX] tweak docs", {"docs/a.md": numbered("doc a", 30).replace("doc a line 3", "tlx line 3")}
    )
    (scenario.path / "docs").mkdir(exist_ok=True)
    binary = scenario.upstream("[DOCS] logo (#80)", {"docs/logo.png": "\x89PNG\r\n\x1a\n\x00\x00binary"})
    empty = scenario.upstream("[CI] retrigger (#81)", {})
    delete = scenario.upstream("[DOCS] drop a.md (#82)", {"docs/a.md": None})
    plan = plan_json(scenario, tmp_path, capsys=capsys)
    assert reasons_of(plan, binary)["binary"] == "docs/logo.png"
    assert (
        reasons_of(plan, delete)["predicted-conflict"]
        == "needs a human against fork trunk in docs/a.md (unknown)"
    )
    bundles, chains = grouping(plan)
    assert bundles == [[binary]] and chains == [[delete]]
    assert plan["status"]["recognised_by"]["already-applied"] == 1  # the empty one: its pick changes nothing
    assert empty not in str(plan["bundles"]) + str(plan["chains"])


def test_a_commit_that_depends_on_a_held_one_roots_a_chain(
    scenario: Scenario, tmp_path: Path, capsys
) -> None:
    """The fork lacks a deferred or skipped commit's changes: a commit building on them is no independent
    low-risk work, ingested before (or without) what it needs, but a chain a human looks at."""
    config = str(_config(tmp_path, NO_RISKY_COMPONENTS))
    doc = numbered("doc a", 30)
    deferred = scenario.upstream(
        "[DOCS] Reword a5 (#40)", {"docs/a.md": doc.replace("a line 5\n", "a five\n")}
    )
    bordering = scenario.upstream(
        "[DOCS] Reword a6 (#41)",
        {"docs/a.md": doc.replace("a line 5\n", "a five\n").replace("line 6", "six")},
    )
    helper = CPP_PASS.replace("int y = x * 2;", "int y = x * 4;")
    skipped = scenario.upstream("[BACKEND] Scale by four (#42)", {PASS_PATH: helper})
    same_symbol = scenario.upstream(
        "[BACKEND] Cap (#43)", {PASS_PATH: helper.replace("return y;", "return y % 8;")}
    )
    independent = scenario.upstream("[DOCS] b (#44)", {"docs/b.md": numbered("doc b", 30) + "more\n"})
    store = ["--database", f"sqlite:///{tmp_path / 'sluice.db'}", "--config", config]
    assert main(["defer", *scenario.repo_args(), *store, deferred]) == 0
    assert main(["skip", *scenario.repo_args(), *store, "--reason", "not for this fork", skipped]) == 0
    capsys.readouterr()

    plan = plan_json(scenario, tmp_path, "--config", config, capsys=capsys)
    assert plan["held"] == {deferred: "deferred", skipped: "skipped"}
    assert grouping(plan) == ([[independent]], [[bordering], [same_symbol]])
    assert (
        reasons_of(plan, bordering)["held-dependency"]
        == f"depends on deferred {deferred[:10]} (lines: docs/a.md)"
    )
    assert reasons_of(plan, same_symbol)["held-dependency"] == (
        f"depends on skipped {skipped[:10]} (symbol: mlir::triton::unrelatedHelper)"
    )
    assert [c["depends_on"] for ch in plan["chains"] for c in ch["commits"]] == [[], []]
