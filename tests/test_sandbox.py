"""The sandbox generator: a deterministic Triton-like upstream and TLX fork, and a truthful manifest."""

from __future__ import annotations

import ast
import itertools
import json
import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest
import yaml

from bot.demo import (
    CHERRY_PICK_X,
    PATCH_ID,
    SUBJECT_PATTERN,
    TRAILER,
    Sandbox,
    SandboxError,
    SandboxSize,
    build_sandbox,
    is_high_risk,
)
from bot.demo.validation import fork_files, upstream_files

SMALL = SandboxSize(files=160, base_commits=30, fork_commits=24, ingested=60, pending=60, seed=1)


def git(repo: Path, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=repo, input=stdin, capture_output=True, text=True, check=True)
    return done.stdout


def git_rc(repo: Path, *args: str) -> int:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True).returncode


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Sandbox:
    return build_sandbox(tmp_path_factory.mktemp("sandbox") / "small", SMALL)


@pytest.fixture(scope="module")
def stream(sandbox: Sandbox) -> list[str]:
    """The upstream stream, oldest first."""
    return git(sandbox.upstream, "rev-list", "--first-parent", "--reverse", "main").split()


@pytest.fixture(scope="module")
def position(stream: list[str]) -> dict[str, int]:
    return {sha: i for i, sha in enumerate(stream)}


def message(repo: Path, sha: str) -> str:
    return git(repo, "log", "-1", "--format=%B", sha)


def subject(repo: Path, sha: str) -> str:
    return git(repo, "log", "-1", "--format=%s", sha).strip()


def files_of(repo: Path, sha: str) -> set[str]:
    return set(git(repo, "diff-tree", "--no-commit-id", "--name-only", "-r", sha).split())


def changed_lines(repo: Path, sha: str) -> int:
    total = 0
    for line in git(repo, "show", "--numstat", "--format=", sha).splitlines():
        added, removed, _ = line.split("\t")
        total += int(added) + int(removed)
    return total


def patch_ids(repo: Path, shas: list[str]) -> dict[str, str]:
    diff = git(repo, "show", "--format=commit %H", *shas)
    out = git(repo, "patch-id", "--stable", stdin=diff)
    return {commit: pid for pid, commit in (line.split() for line in out.splitlines())}


# ---------------------------------------------------------------------------------------------- repositories


def test_same_size_and_seed_build_the_same_history(sandbox: Sandbox, tmp_path: Path) -> None:
    again = build_sandbox(tmp_path / "again", SMALL)
    assert again.manifest == sandbox.manifest
    assert again.manifest.to_json() == sandbox.manifest.to_json()
    other = build_sandbox(tmp_path / "other", SandboxSize(**{**SMALL.__dict__, "seed": SMALL.seed + 1}))
    assert other.manifest.upstream_head != sandbox.manifest.upstream_head
    assert other.manifest.fork_head != sandbox.manifest.fork_head


def test_both_repositories_are_valid_and_hold_the_refs(sandbox: Sandbox) -> None:
    for repo in (sandbox.upstream, sandbox.fork):
        done = subprocess.run(
            ["git", "fsck", "--strict", "--no-dangling"], cwd=repo, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        assert "error" not in done.stderr and "warning" not in done.stderr
    m = sandbox.manifest
    assert git(sandbox.upstream, "rev-parse", "refs/heads/main").strip() == m.upstream_head
    assert git(sandbox.fork, "rev-parse", sandbox.upstream_ref).strip() == m.upstream_head
    assert git(sandbox.fork, "rev-parse", sandbox.fork_ref).strip() == m.fork_head
    assert git(sandbox.fork, "merge-base", sandbox.fork_ref, sandbox.upstream_ref).strip() == m.fork_point
    assert git(sandbox.fork, "config", "remote.upstream.url").strip() == str(sandbox.upstream)


def test_upstream_is_a_linear_stream_of_squash_merged_prs(sandbox: Sandbox, stream: list[str]) -> None:
    log = git(sandbox.upstream, "log", "--reverse", "--format=%P|%ct|%an|%s", "main").splitlines()
    assert (
        len(log)
        == len(stream)
        == SMALL.base_commits
        + SMALL.ingested
        + len(sandbox.manifest.backlog)
        + (SMALL.pending + len(sandbox.manifest.emergency))
        + len(sandbox.manifest.culprits)  # planted on top of the size's pending commits
    )
    assert all(len(line.split("|")[0].split()) <= 1 for line in log)  # no merges
    times = [int(line.split("|")[1]) for line in log]
    assert all(a < b for a, b in itertools.pairwise(times))
    prs = [int(m.group(1)) for line in log if (m := re.search(r"\(#(\d+)\)$", line))]
    assert len(prs) == len(log) and prs == sorted(set(prs))
    assert len({line.split("|")[2] for line in log}) >= 15
    per_day = Counter(t // 86400 for t in times)
    assert max(per_day.values()) <= 40
    prefixes = Counter(m.group(1) for line in log if (m := re.match(r".*?\|(\[[A-Z]+\])", line)))
    assert {"[AMD]", "[BACKEND]", "[FRONTEND]", "[NVIDIA]", "[TESTING]"} <= set(prefixes)


def test_upstream_tree_is_shaped_like_triton(sandbox: Sandbox) -> None:
    (root,) = git(sandbox.upstream, "rev-list", "--max-parents=0", "main").split()
    imported = git(sandbox.upstream, "ls-tree", "-r", "--name-only", root).split()
    assert len(imported) == SMALL.files + len(upstream_files())  # and triton_kernels, which TLX builds on
    paths = git(sandbox.upstream, "ls-tree", "-r", "--name-only", "main").split()
    for pattern in (
        r"include/triton/Dialect/TritonGPU/IR/.*\.(h|td)$",
        r"lib/Dialect/TritonGPU/Transforms/.*\.cpp$",
        r"lib/Analysis/.*\.cpp$",
        r"lib/Conversion/TritonGPUToLLVM/.*\.cpp$",
        r"third_party/amd/lib/.*\.cpp$",
        r"third_party/nvidia/backend/driver\.py$",
        r"python/src/.*\.cc$",
        r"python/triton/language/.*\.py$",
        r"python/test/unit/language/test_.*\.py$",
        r"test/TritonGPU/.*\.mlir$",
        r"docs/.*\.md$",
        r"lib/Dialect/TritonGPU/Transforms/CMakeLists.txt$",
    ):
        assert any(re.match(pattern, p) for p in paths), pattern
    assert re.fullmatch(r"[0-9a-f]{40}\n", git(sandbox.upstream, "show", "main:cmake/llvm-hash.txt"))
    assert "ptxas" in json.loads(git(sandbox.upstream, "show", "main:cmake/nvidia-toolchain-version.json"))


def test_generated_sources_parse(sandbox: Sandbox) -> None:
    ts_cpp = pytest.importorskip("tree_sitter_cpp")
    import tree_sitter

    parser = tree_sitter.Parser(tree_sitter.Language(ts_cpp.language()))
    paths = git(sandbox.fork, "ls-tree", "-r", "--name-only", "main").split()
    for path in paths:
        text = git(sandbox.fork, "show", f"main:{path}")
        if path.endswith(".py"):
            ast.parse(text, filename=path)
        elif path.endswith((".cpp", ".cc", ".h")):
            tree = parser.parse(text.encode())
            assert not tree.root_node.has_error, path
            assert path.endswith(".cc") or "namespace mlir" in text, path
        elif path.endswith(".mlir"):
            assert text.startswith("// RUN: triton-opt %s -split-input-file")
            cases = text.split("\n// -----\n")
            assert all(len(re.findall(r"tt\.func public @\w+", case)) == 1 for case in cases), path
        elif path.endswith(".td"):
            assert re.search(r'^def TTN?G?_\w+Op : TTN?G?_Op<"\w+", \[', text, re.M), path


# ---------------------------------------------------------------------------------------------- the fork


def test_fork_declares_its_extension_in_the_first_patch_stack_commit(sandbox: Sandbox) -> None:
    config = yaml.safe_load(git(sandbox.fork, "show", "main:.github/sluice.yml"))
    tiers = config.pop("tiers")  # tests/test_sandbox_tiers.py checks what they run
    assert config == {
        "fork": {"repo": "sandbox/triton-fork"},
        "extensions": [
            {
                "name": "tlx",
                "paths": ["third_party/tlx/**"],
                "interfaces": ["include/triton/Dialect/TritonGPU/IR/**"],
                "suites": ["third_party/tlx/test"],
            }
        ],
    }
    assert sorted(tiers) == ["l1", "l2"]
    first = sandbox.manifest.patch_stack[0]
    assert git(sandbox.fork, "rev-parse", f"{first}^").strip() == sandbox.manifest.fork_point
    assert {".github/sluice.yml", "ci/validate.sh", *fork_files()} <= files_of(sandbox.fork, first)


def test_patch_stack_is_the_forks_own_work(sandbox: Sandbox) -> None:
    m = sandbox.manifest
    assert len(m.patch_stack) == SMALL.fork_commits
    trunk = git(sandbox.fork, "rev-list", "--reverse", f"{m.fork_point}..{sandbox.fork_ref}").split()
    assert [c for c in trunk if c in set(m.patch_stack)] == m.patch_stack
    assert set(trunk) == set(m.patch_stack) | set(m.fork_picks.values())
    touched = set().union(*(files_of(sandbox.fork, c) for c in m.patch_stack))
    assert any(p.startswith("third_party/tlx/lib/") and p.endswith(".cpp") for p in touched)
    assert any(p.startswith("third_party/tlx/language/") for p in touched)
    assert any(p.startswith("third_party/tlx/test/") for p in touched)
    assert any(p.startswith("lib/Dialect/TritonGPU/Transforms/") for p in touched)
    assert any(p.startswith("python/triton/language/") for p in touched)
    for sha in m.patch_stack:
        text = message(sandbox.fork, sha)
        assert "Upstream-Commit:" not in text and "cherry picked from" not in text


def test_ingested_commits_carry_their_recognition_marks(sandbox: Sandbox) -> None:
    m = sandbox.manifest
    assert len(m.ingested) == SMALL.ingested
    assert set(Counter(m.ingested.values())) == {TRAILER, CHERRY_PICK_X, PATCH_ID, SUBJECT_PATTERN}
    by_id = patch_ids(sandbox.fork, [*m.ingested, *(m.fork_picks[u] for u in m.ingested)])
    for upstream, method in m.ingested.items():
        pick = m.fork_picks[upstream]
        text = message(sandbox.fork, pick)
        up_subject = subject(sandbox.fork, upstream)
        if method == TRAILER:
            lines = text.rstrip("\n").splitlines()
            assert lines[-2] == f"Upstream-Commit: {upstream}"
            assert re.fullmatch(r"Sluice-Ingestion: \S+", lines[-1])
        elif method == CHERRY_PICK_X:
            assert f"(cherry picked from commit {upstream})" in text
        elif method == PATCH_ID:
            assert subject(sandbox.fork, pick) == up_subject
            assert upstream not in text
            assert by_id[pick] == by_id[upstream]
        else:
            title, pr = re.fullmatch(r"(.*) \(#(\d+)\)", up_subject).groups()  # type: ignore[union-attr]
            assert subject(sandbox.fork, pick) == f"[Cherry-pick] '{title} (#{pr})'"
            assert upstream not in text
            assert by_id[pick] != by_id[upstream]


def test_emergency_picks_are_marked_and_newer_than_the_tip(
    sandbox: Sandbox, position: dict[str, int]
) -> None:
    m = sandbox.manifest
    assert len(m.emergency) == 2
    for upstream in m.emergency:
        text = message(sandbox.fork, m.fork_picks[upstream])
        assert "Sluice-Kind: emergency" in text and f"Upstream-Commit: {upstream}" in text
        assert position[upstream] > position[m.ingestion_tip]
        assert upstream not in m.ingested and upstream not in m.pending


def test_pending_is_everything_the_fork_lacks(
    sandbox: Sandbox, stream: list[str], position: dict[str, int]
) -> None:
    m = sandbox.manifest
    assert not set(m.pending) & set(m.ingested)
    after_fork = stream[position[m.fork_point] + 1 :]
    assert m.pending == [c for c in after_fork if c not in m.ingested and c not in m.emergency]
    assert m.ingestion_tip in m.ingested
    assert position[m.ingestion_tip] == max(position[c] for c in m.ingested)
    assert set(m.backlog) <= set(m.pending)
    assert all(position[c] < position[m.ingestion_tip] for c in m.backlog)
    assert all(position[c] > position[m.ingestion_tip] for c in m.pending if c not in m.backlog)
    assert len(m.pending) - len(m.backlog) == SMALL.pending + len(m.culprits)
    assert 0.01 <= len(m.backlog) / (len(m.ingested) + len(m.backlog)) <= 0.05


# ---------------------------------------------------------------------------------------------- ground truth


def test_reverts_name_the_reverted_commit_and_relands_follow(
    sandbox: Sandbox, position: dict[str, int]
) -> None:
    m = sandbox.manifest
    assert m.reverts and m.relands
    for revert, original in m.reverts.items():
        orig_subject = subject(sandbox.upstream, original)
        assert subject(sandbox.upstream, revert).startswith(f'Revert "{orig_subject}" (#')
        assert f"This reverts commit {original}." in message(sandbox.upstream, revert)
        assert position[revert] > position[original]
    for reland, original in m.relands.items():
        title = re.sub(r" \(#\d+\)$", "", subject(sandbox.upstream, original))
        text = subject(sandbox.upstream, reland)
        assert text.startswith((f'Reland "{title}', f"[Reland] {title}"))
        assert position[reland] > max(position[r] for r, o in m.reverts.items() if o == original)


def test_line_dependencies_touch_a_common_file(sandbox: Sandbox, position: dict[str, int]) -> None:
    m = sandbox.manifest
    assert len(m.line_dependencies) >= 4
    pending = set(m.pending)
    for later, earlier in m.line_dependencies:
        assert later in pending and earlier in pending
        assert position[later] > position[earlier]
        assert files_of(sandbox.upstream, later) & files_of(sandbox.upstream, earlier)


def test_llvm_bumps_and_large_commits(sandbox: Sandbox) -> None:
    m = sandbox.manifest
    assert m.llvm_bumps and m.large
    for sha in m.llvm_bumps:
        files = files_of(sandbox.upstream, sha)
        assert "cmake/llvm-hash.txt" in files
        assert any(f.endswith(".cpp") for f in files)
    for sha in m.large:
        assert changed_lines(sandbox.upstream, sha) >= 600


def test_overlaps_edit_functions_the_patch_stack_changed(sandbox: Sandbox) -> None:
    m = sandbox.manifest
    assert len(m.patch_stack_symbol_overlaps) >= 3 and m.conflicting
    assert set(m.conflicting) <= set(m.patch_stack_symbol_overlaps)
    stack_files = set().union(*(files_of(sandbox.fork, c) for c in m.patch_stack))
    for sha in m.patch_stack_symbol_overlaps:
        (path,) = files_of(sandbox.upstream, sha)
        assert path in stack_files
        name = re.split(r"::|\.", m.overlap_symbols[sha])[-1]
        assert re.search(rf"\b{name}\(", git(sandbox.upstream, "show", f"{sha}:{path}"))
        assert m.overlap_symbols[sha].startswith("mlir::") or path.endswith(".py")


def three_way(repo: Path, sha: str, path: str, fork_ref: str, scratch: Path) -> int:
    """Exit status of merging `sha`'s change to `path` into the fork: 0 clean, >0 conflicts."""
    sides = []
    for name, rev in (
        ("ours", f"{fork_ref}:{path}"),
        ("base", f"{sha}^:{path}"),
        ("theirs", f"{sha}:{path}"),
    ):
        sides.append(scratch / name)
        sides[-1].write_text(git(repo, "show", rev))
    return git_rc(scratch, "merge-file", "-p", *(str(s) for s in sides))


def test_conflicting_overlaps_conflict_and_the_others_merge_cleanly(sandbox: Sandbox, tmp_path: Path) -> None:
    m = sandbox.manifest
    for sha in m.patch_stack_symbol_overlaps:
        (path,) = files_of(sandbox.upstream, sha)
        status = three_way(sandbox.fork, sha, path, sandbox.fork_ref, tmp_path)
        assert (status > 0) == (sha in m.conflicting), (sha, path)


def test_independent_commits_are_small_safe_and_apply_to_the_fork(sandbox: Sandbox) -> None:
    m = sandbox.manifest
    independent = set(m.independent)
    assert len(independent) > len(m.pending) / 2
    others = {c: files_of(sandbox.upstream, c) for c in m.pending}
    for sha in m.independent:
        files = others[sha]
        assert not any(is_high_risk(f) for f in files)
        assert changed_lines(sandbox.upstream, sha) < 500
        for other, other_files in others.items():
            assert other == sha or not files & other_files, (sha, other)
        for path in files:
            parent = git_rc(sandbox.fork, "cat-file", "-e", f"{sha}^:{path}") == 0
            if parent:
                assert git(sandbox.fork, "rev-parse", f"{sha}^:{path}") == git(
                    sandbox.fork, "rev-parse", f"{sandbox.fork_ref}:{path}"
                )
            else:
                assert git_rc(sandbox.fork, "cat-file", "-e", f"{sandbox.fork_ref}:{path}") != 0
    assert not independent & set(m.patch_stack_symbol_overlaps + m.llvm_bumps + m.large + m.interface_changes)
    assert not independent & {a for pair in m.line_dependencies for a in pair}


def test_interface_changes_touch_the_extension_interface(sandbox: Sandbox) -> None:
    assert sandbox.manifest.interface_changes
    for sha in sandbox.manifest.interface_changes:
        assert any(
            f.startswith("include/triton/Dialect/TritonGPU/IR/") for f in files_of(sandbox.upstream, sha)
        )


def test_manifest_serialises_to_json(sandbox: Sandbox) -> None:
    data = json.loads(sandbox.manifest.to_json())
    assert data["ingestion_tip"] == sandbox.manifest.ingestion_tip
    assert data["line_dependencies"][0] == list(sandbox.manifest.line_dependencies[0])


def test_high_risk_paths() -> None:
    assert is_high_risk("cmake/llvm-hash.txt")
    assert is_high_risk("cmake/nvidia-toolchain-version.json")
    assert is_high_risk("lib/Dialect/TritonGPU/Transforms/Coalesce.cpp")
    assert is_high_risk("third_party/amd/backend/driver.py")
    assert is_high_risk("python/triton/runtime/jit.py")
    assert not is_high_risk("third_party/amd/backend/compiler.py")
    assert not is_high_risk("python/triton/language/core.py")
    assert not is_high_risk("lib/Dialect/TritonGPU/IR/Dialect.cpp")


def test_rejects_sizes_too_small_and_existing_targets(sandbox: Sandbox, tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="pending"):
        build_sandbox(tmp_path / "tiny", SandboxSize(**{**SMALL.__dict__, "pending": 5}))
    with pytest.raises(SandboxError, match="exists"):
        build_sandbox(sandbox.root, SMALL)
