"""`benchmarks/real_merges.py` on a fork built like Intel's: merges replayed and compared, PATH untouched."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parent.parent / "benchmarks" / "real_merges.py"
ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "Dev",
    "GIT_AUTHOR_EMAIL": "dev@example.com",
    "GIT_COMMITTER_NAME": "Dev",
    "GIT_COMMITTER_EMAIL": "dev@example.com",
    "GIT_AUTHOR_DATE": "1767225600 +0000",
    "GIT_COMMITTER_DATE": "1767225600 +0000",
}

CONFIG = "def options():\n    num_warps = 4\n    num_stages = 3\n    return num_warps, num_stages\n"
KERNEL = "int launch(int n) {\n  int blocks = n / 128;\n  return blocks;\n}\n"
NOTES = "# Notes\n\nBuild with cmake.\n\nTest with lit.\n"


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, env=ENV, capture_output=True, text=True, check=False)
    assert done.returncode in (0, 1), done.stderr
    return done.stdout.strip()


def commit(repo: Path, message: str, files: dict[str, str]) -> str:
    for path, text in files.items():
        (repo / path).write_text(text)
    git(repo, "add", *files)
    git(repo, "commit", "--quiet", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def intel_like_fork(root: Path) -> Path:
    """A fork trunk with one "Merge OpenAI Triton commit" PR: three files conflict, resolved by an engineer.

    options.py: adjacent edits, merged as Sluice would; launch.cpp: both changed one statement (a human's
    call); NOTES.md: adjacent edits, but the engineer also dropped the fork's wording (an unrelated choice).
    """
    repo = root / "fork"
    repo.mkdir()
    git(repo, "init", "--quiet", "-b", "upstream")
    commit(repo, "Initial import (#1)", {"options.py": CONFIG, "launch.cpp": KERNEL, "NOTES.md": NOTES})
    git(repo, "checkout", "--quiet", "-b", "main")
    fork = {
        "options.py": CONFIG.replace("num_warps = 4", "num_warps = 8  # XPU"),
        "launch.cpp": KERNEL.replace("n / 128", "n / 256"),
        "NOTES.md": NOTES.replace("Build with cmake.", "Build with cmake and oneAPI."),
    }
    commit(repo, "[XPU] Tune defaults", fork)
    git(repo, "checkout", "--quiet", "upstream")
    theirs = {
        "options.py": CONFIG.replace("num_stages = 3", "num_stages = 2"),
        "launch.cpp": KERNEL.replace("n / 128", "(n + 127) / 128"),
        "NOTES.md": NOTES.replace("\nTest with lit.", "Test with lit."),
    }
    upstream = commit(repo, "[BACKEND] Fewer stages (#2)", theirs)
    git(repo, "checkout", "--quiet", "-b", "pr", "main")
    git(repo, "merge", "--no-commit", "--quiet", upstream)
    landed = {
        "options.py": CONFIG.replace("num_warps = 4", "num_warps = 8  # XPU").replace(
            "stages = 3", "stages = 2"
        ),
        "launch.cpp": KERNEL.replace("n / 128", "(n + 255) / 256"),
        "NOTES.md": NOTES.replace("\nTest with lit.", "Test with lit."),
    }
    commit(repo, f"Merge commit '{upstream}'", landed)
    commit(repo, "Fix the XPU build after the merge", {"launch.cpp": landed["launch.cpp"] + "// fixed\n"})
    git(repo, "checkout", "--quiet", "main")
    commit(repo, "[XPU] Unrelated fork work", {"xpu.md": "xpu\n"})
    git(repo, "merge", "--no-ff", "--quiet", "-m", f"Merge OpenAI Triton commit `{upstream[:7]}` (#3)", "pr")
    return repo


def test_the_replay_compares_every_conflicted_file_and_writes_nothing_into_the_fork(tmp_path: Path) -> None:
    repo = intel_like_fork(tmp_path)
    before = (git(repo, "count-objects", "-v"), git(repo, "for-each-ref"))
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(repo), "--fork", "main"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "real merges: upstream merges replayed: 1 (1 with conflicts)" in out, out
    assert "real merges: conflicted files: 3" in out
    assert "real merges: identical: 1\nreal merges: different: 1\nreal merges: human: 1 (semantic 1)" in out
    assert "NOTES.md: adjacent-edits: +1 -1 lines against the landed file" in out
    assert "identical: " in out and "options.py (adjacent-edits)" in out
    assert (git(repo, "count-objects", "-v"), git(repo, "for-each-ref")) == before


def test_without_a_repository_it_skips() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "skipped: no repository given\n")
