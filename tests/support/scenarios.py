"""Small upstream/fork histories with known answers, built with real git in a temporary repository."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

EPOCH = 1_767_225_600  # 2026-01-01T00:00:00Z: every commit date is derived from it, so SHAs are stable
HOUR = 3600


class Scenario:
    """One repository with `upstream/main` (the upstream stream) and `main` (fork trunk)."""

    fork_ref = "main"
    upstream_ref = "upstream/main"

    def __init__(self, root: Path) -> None:
        self.path = root / "repo"
        self.path.mkdir(parents=True)
        self._tick = 0
        self.git("init", "-q", "-b", "upstream/main")
        self.git("config", "user.name", "Upstream Dev")
        self.git("config", "user.email", "dev@upstream.example")

    def git(self, *args: str, env: Mapping[str, str] | None = None) -> str:
        proc = subprocess.run(
            ["git", *args], cwd=self.path, capture_output=True, text=True, env={**os.environ, **(env or {})}
        )
        if proc.returncode != 0:
            raise RuntimeError(f"git {' '.join(args)}: {proc.stderr}")
        return proc.stdout.strip()

    def _dates(self, hours: float | None) -> dict[str, str]:
        self._tick += 1
        when = EPOCH + int((hours if hours is not None else self._tick) * HOUR)
        stamp = f"{when} +0000"
        return {"GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}

    def _write(self, files: Mapping[str, str | None]) -> None:
        for name, content in files.items():
            target = self.path / name
            if content is None:
                self.git("rm", "-q", "--", name)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
            self.git("add", "--", name)

    def _checkout(self, branch: str) -> None:
        if self.git("symbolic-ref", "--short", "HEAD") != branch:
            self.git("checkout", "-q", branch)

    def _commit(self, branch: str, message: str, files: Mapping[str, str | None], hours: float | None) -> str:
        self._checkout(branch)
        self._write(files)
        self.git("commit", "-q", "--allow-empty", "-m", message, env=self._dates(hours))
        return self.git("rev-parse", "HEAD")

    def upstream(self, message: str, files: Mapping[str, str | None], *, hours: float | None = None) -> str:
        return self._commit("upstream/main", message, files, hours)

    def fork_here(self) -> str:
        """Branch fork trunk from the current upstream head (the fork point)."""
        self.git("branch", "main", "upstream/main")
        return self.git("rev-parse", "main")

    def fork(self, message: str, files: Mapping[str, str | None], *, hours: float | None = None) -> str:
        return self._commit("main", message, files, hours)

    def pick(
        self, sha: str, *, how: str = "trailer", message: str | None = None, hours: float | None = None
    ) -> str:
        """Cherry-pick an upstream commit onto fork trunk the way a team would.

        how: `trailer` (Sluice), `x` (`cherry-pick -x`), `plain` (same message, only patch-id tells),
        `emergency` (Sluice emergency pick), `subject` (FBTriton subject, message given by the caller).
        """
        self._checkout("main")
        self.git("cherry-pick", *(["-x"] if how == "x" else []), "--allow-empty", sha, env=self._dates(hours))
        original = self.git("log", "-1", "--format=%B", sha)
        trailers = {
            "trailer": f"\n\nUpstream-Commit: {sha}\nSluice-Ingestion: test-1",
            "emergency": f"\n\nUpstream-Commit: {sha}\nSluice-Kind: emergency",
        }
        if how in trailers:
            self.git("commit", "-q", "--amend", "-m", original + trailers[how], env=self._dates(hours))
        elif how == "subject":
            assert message is not None
            self.git("commit", "-q", "--amend", "-m", message, env=self._dates(hours))
        return self.git("rev-parse", "HEAD")

    def repo_args(self) -> list[str]:
        """`--repo/--fork/--upstream` for the CLI."""
        return ["--repo", str(self.path), "--fork", self.fork_ref, "--upstream", self.upstream_ref]

    def time_of(self, sha: str) -> int:
        return int(self.git("log", "-1", "--format=%ct", sha))


CPP_PASS = """\
#include "triton/Dialect/TritonGPU/Transforms/Passes.h"

namespace mlir {
namespace triton {

int pipelineDepth(int stages) {
  int depth = stages;
  depth += 1;
  return depth;
}

int unrelatedHelper(int x) {
  int y = x * 2;
  y += 3;
  return y;
}

} // namespace triton
} // namespace mlir
"""


def numbered(prefix: str, count: int) -> str:
    """A plain text file of distinct lines, for edits at known places."""
    return "".join(f"{prefix} line {i}\n" for i in range(1, count + 1))


PASS_PATH = "lib/Dialect/TritonGPU/Transforms/Pipeliner.cpp"


def pipeliner_fork(path: Path) -> Scenario:
    """Upstream with a core pass, docs and an LLVM pin; the fork deepens the pass's pipelines (TLX)."""
    s = Scenario(path)
    s.upstream(
        "Initial import (#1)",
        {PASS_PATH: CPP_PASS, "docs/a.md": numbered("a", 20), "cmake/llvm-hash.txt": "a\n"},
    )
    s.fork_here()
    s.fork("[TLX] Deeper pipelines", {PASS_PATH: CPP_PASS.replace("depth += 1;", "depth += 2;")})
    return s
