"""`benchmarks/real_history.py` on a small merge-style fork: it skips without a repository, and its figures
for the given refs and for earlier merge windows agree with plain git."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.support.scenarios import Scenario, numbered

SCRIPT = Path(__file__).parent.parent / "benchmarks" / "real_history.py"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300, check=False
    )


def test_without_a_repository_it_skips() -> None:
    proc = run()
    assert (proc.returncode, proc.stdout) == (0, "skipped: no repository given\n")


def merge_fork(tmp_path: Path) -> Scenario:
    """Intel's shape: fork trunk merges upstream commits with "Merge OpenAI Triton commit `X`" merges."""
    s = Scenario(tmp_path)
    s.upstream("Initial import (#1)", {"docs/a.md": numbered("a", 20)}, hours=0)
    s.fork_here()
    s.fork("[XPU] own work", {"xpu.txt": "x\n"}, hours=1)
    for n in range(2, 8):
        sha = s.upstream(f"[DOCS] change {n} (#{n})", {f"docs/{n}.md": f"{n}\n"}, hours=24 * n)
        if n % 2 == 0:
            s.git("checkout", "-q", "main")
            stamp = {"GIT_AUTHOR_DATE": f"{1_767_225_600 + 24 * n * 3600 + 60} +0000"}
            stamp["GIT_COMMITTER_DATE"] = stamp["GIT_AUTHOR_DATE"]
            s.git(
                "merge",
                "-q",
                "--no-ff",
                "-m",
                f"Merge OpenAI Triton commit `{sha[:7]}` (#{100 + n})",
                sha,
                env=stamp,
            )
    return s


def test_figures_for_the_refs_and_merge_windows_agree_with_git(tmp_path: Path) -> None:
    s = merge_fork(tmp_path)
    windows = ["--merge-window", "2,0", "--merge-window", "1,0"]  # merged change 2 / 4, upstream change 6
    proc = run(str(s.path), "--fork", "main", "--upstream", "upstream/main", *windows, "--recognition-only")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    # upstream head is change 7 (day 7); trunk merged change 6 (day 6)
    first = out.split("\n== ")[1]
    assert "days behind (strategy merge): 1.00" in first
    assert "pending upstream commits: 1" in first
    assert re.search(r"oldest missing commit: [0-9a-f]{10}, 0\.00 days", first)  # the head itself
    assert out.count("tip and days behind agree with git log: yes") == out.count("\n== ")
    assert "window 1: trunk as of 'Merge OpenAI Triton commit" in out
    second, third = out.split("\n== ")[2:]
    assert "days behind (strategy merge): 4.00" in second and "pending upstream commits: 4" in second
    assert "days behind (strategy merge): 2.00" in third and "pending upstream commits: 2" in third
    assert "status (cold):" in out


def test_a_window_needs_both_refs(tmp_path: Path) -> None:
    proc = run(str(tmp_path), "--window", "main")
    assert proc.returncode == 2
    assert "--window takes FORK:UPSTREAM" in proc.stderr


def test_a_path_that_is_no_repository_is_a_clear_error(tmp_path: Path) -> None:
    proc = run(str(tmp_path))
    assert proc.returncode == 2
    assert "is not a git repository" in proc.stderr and "Traceback" not in proc.stderr


def test_the_other_sections_run_after_the_recognition_figures(tmp_path: Path) -> None:
    s = merge_fork(tmp_path)
    proc = run(str(s.path), "--fork", "main", "--upstream", "upstream/main", "--merge-window", "1,0")
    assert proc.returncode == 0, proc.stderr
    for section in ("real_merges", "real_cost", "real_risk"):  # each imported by path, run on the same refs
        assert f"\n== {section} ==" in proc.stdout, proc.stdout[-2000:]
    # This history's merges broke nothing: real_risk says it has nothing to fit, and the run goes on.
    risk = proc.stdout.split("\n== real_risk ==", 1)[1]
    assert "ingestions mined: " in risk and "no model fitted" in risk, risk[-2000:]
