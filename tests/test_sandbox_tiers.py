"""The sandbox fork's own tiers: its config and `ci/validate.sh`, L1 green on trunk, the planted culprit."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.app.cli import main
from bot.core.config import BuiltinSuite, parse_config
from bot.demo import CULPRIT_SUBJECT, SLUICE_YML, Sandbox, SandboxSize, build_sandbox
from bot.demo.validation import LAYOUT_PATH, NEW_NAME, OLD_NAME
from runners.report import Outcome, Report, SuiteResult

SMALL = SandboxSize(files=160, base_commits=30, fork_commits=24, ingested=60, pending=60, seed=1)
SLUICE_ROOT = Path(__file__).resolve().parents[1]
IDENTITY = ("-c", "user.name=Sandbox Tester", "-c", "user.email=tester@example.com")


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)
    return done.stdout


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Sandbox:
    return build_sandbox(tmp_path_factory.mktemp("sandbox") / "small", SMALL)


@pytest.fixture(scope="module")
def culprit(sandbox: Sandbox) -> str:
    (sha,) = sandbox.manifest.culprits
    return sha


@pytest.fixture(scope="module")
def plan(sandbox: Sandbox) -> dict:
    """`sluice plan --json` with the fork's own committed configuration."""
    out = io.StringIO()
    argv = ["plan", "--repo", str(sandbox.fork), "--no-record", "--json"]
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return json.loads(out.getvalue())


def checkout(sandbox: Sandbox, where: Path, *picks: str) -> Path:
    """A work tree of fork trunk with `picks` cherry-picked onto it, as a candidate branch would hold."""
    git(sandbox.root, "clone", "--quiet", str(sandbox.fork), str(where))
    if picks:
        git(where, "fetch", "--quiet", str(sandbox.upstream), "main")
        git(where, *IDENTITY, "cherry-pick", *picks)
    return where


def validate(tree: Path, tier: str, *options: str) -> tuple[int, Report, str]:
    """`ci/validate.sh TIER` as a person runs it, with this checkout's runner on the interpreter."""
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(SLUICE_ROOT)}
    env.pop("TRITON_INTERPRET", None)  # the runner decides by itself (no GPU: the interpreter)
    done = subprocess.run(
        ["ci/validate.sh", tier, *options], cwd=tree, env=env, capture_output=True, text=True, timeout=600
    )
    report = tree / "build" / f"sluice-{tier}.json"
    assert report.is_file(), done.stdout + done.stderr
    return done.returncode, Report.read(report), done.stdout + done.stderr


def suite(report: Report, name: str) -> SuiteResult:
    return next(s for s in report.suites if s.name == name)


# ---------------------------------------------------------------------------------------------- the config


def test_the_fork_commits_its_tier_config(sandbox: Sandbox) -> None:
    committed = git(sandbox.fork, "show", f"{sandbox.fork_ref}:.github/sluice.yml")
    assert committed == SLUICE_YML
    tiers = parse_config(committed).tiers
    l1 = [(s.name, s.builtin) for s in tiers.l1.suites]
    assert l1 == [("tlx", None), ("smoke", BuiltinSuite.SMOKE)]
    tlx = tiers.l1.suites[0]
    assert tlx.command[:3] == ("python3", "-m", "pytest") and "third_party/tlx/test" in tlx.command
    assert tlx.expected_tests == 8
    assert [(s.name, s.builtin) for s in tiers.l2.suites] == [("numerics", BuiltinSuite.NUMERICS)]


def test_validate_sh_is_an_executable_script_that_refuses_an_unknown_tier(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    (entry,) = git(sandbox.fork, "ls-tree", sandbox.fork_ref, "ci/validate.sh").splitlines()
    assert entry.startswith("100755 blob ")
    tree = checkout(sandbox, tmp_path / "fork")
    text = (tree / "ci" / "validate.sh").read_text()
    assert text.startswith("#!/usr/bin/env bash\n") and "set -euo pipefail" in text
    done = subprocess.run(["ci/validate.sh", "l3"], cwd=tree, capture_output=True, text=True)
    assert done.returncode == 2 and "usage: ci/validate.sh l1|l2" in done.stderr
    assert not (tree / "build").exists()


# ---------------------------------------------------------------------------------------------- L1


def test_l1_passes_on_fork_trunk(sandbox: Sandbox, tmp_path: Path) -> None:
    code, report, said = validate(checkout(sandbox, tmp_path / "trunk"), "l1")
    assert code == 0, said
    assert [(s.name, s.outcome) for s in report.suites] == [
        ("tlx", Outcome.PASSED),
        ("smoke", Outcome.PASSED),
    ]
    assert suite(report, "tlx").executed == suite(report, "tlx").passed == 8
    assert suite(report, "smoke").executed > 0
    assert report.run.head_sha == sandbox.manifest.fork_head


def test_l1_fails_on_trunk_with_the_culprit(sandbox: Sandbox, culprit: str, tmp_path: Path) -> None:
    tree = checkout(sandbox, tmp_path / "culprit", culprit)  # a clean pick: cherry-pick stops on a conflict
    assert git(tree, "diff", "--name-only", "HEAD^", "HEAD").split() == [LAYOUT_PATH]
    code, report, said = validate(tree, "l1", "--only", "tlx")
    assert code == 1, said
    tlx = suite(report, "tlx")
    assert tlx.outcome == Outcome.FAILED and tlx.passed == 0
    assert any(OLD_NAME in (t.message or "") for t in report.tests if t.outcome == Outcome.ERROR)


def test_l1_passes_with_the_rest_of_the_culprits_bundle(
    sandbox: Sandbox, culprit: str, plan: dict, tmp_path: Path
) -> None:
    (bundle,) = [b for b in plan["bundles"] if culprit in {c["sha"] for c in b["commits"]}]
    others = [c["sha"] for c in bundle["commits"] if c["sha"] != culprit]
    assert others
    code, report, said = validate(checkout(sandbox, tmp_path / "rest", *others), "l1", "--only", "tlx")
    assert code == 0, said
    assert suite(report, "tlx").passed == 8


# ---------------------------------------------------------------------------------------------- the culprit


def test_the_culprit_is_one_clean_rename_of_the_api_tlx_imports(sandbox: Sandbox, culprit: str) -> None:
    m = sandbox.manifest
    assert culprit in m.pending and culprit in m.independent
    subject = git(sandbox.upstream, "log", "-1", "--format=%s", culprit)
    assert subject.startswith(CULPRIT_SUBJECT + " (#")
    assert git(sandbox.upstream, "diff-tree", "--no-commit-id", "--name-only", "-r", culprit).split() == [
        LAYOUT_PATH
    ]
    diff = git(sandbox.upstream, "show", "--format=", "-U0", culprit)
    assert f"-def {OLD_NAME}(" in diff and f"+def {NEW_NAME}(" in diff
    uses = git(sandbox.fork, "grep", "-l", OLD_NAME, sandbox.fork_ref, "--", "third_party/tlx").split()
    assert f"{sandbox.fork_ref}:third_party/tlx/python/tlx/buffers.py" in uses


def test_no_other_upstream_commit_touches_the_api(sandbox: Sandbox, culprit: str) -> None:
    touching = git(sandbox.upstream, "log", "--format=%H", "main", "--", LAYOUT_PATH).split()
    (root,) = git(sandbox.upstream, "rev-list", "--max-parents=0", "main").split()
    assert touching == [culprit, root]


def test_the_culprit_is_bundled_not_chained(culprit: str, plan: dict) -> None:
    bundled = {c["sha"]: c for b in plan["bundles"] for c in b["commits"]}
    chained = {c["sha"] for ch in plan["chains"] for c in ch["commits"]}
    assert culprit in bundled and culprit not in chained
    assert bundled[culprit]["risk"] == "low" and bundled[culprit]["reasons"] == []


def test_the_culprit_is_the_same_for_the_same_seed(sandbox: Sandbox, tmp_path: Path) -> None:
    again = build_sandbox(tmp_path / "again", SMALL)
    assert again.manifest.culprits == sandbox.manifest.culprits
    other = build_sandbox(tmp_path / "other", SandboxSize(**{**SMALL.__dict__, "seed": SMALL.seed + 1}))
    assert len(other.manifest.culprits) == 1 and other.manifest.culprits != sandbox.manifest.culprits
