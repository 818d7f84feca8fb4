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


def merge_pr(
    s: Scenario,
    upstream_sha: str,
    *,
    pr: int,
    fixes: list[str],
    hours: float,
    message: str | None = None,
    ours: bool = False,
) -> str:
    """Intel's way: a PR branch that starts with "Merge commit '<X>'" and carries fix commits, merged into
    fork trunk as "Merge OpenAI Triton commit `X` (#N)". `ours`: conflicts resolved for the fork."""
    branch = f"pr-{pr}"
    s.git("checkout", "-q", "-b", branch, "main")
    strategy = ["-X", "ours"] if ours else []
    merged = f"Merge commit '{upstream_sha}'"
    s.git("merge", "-q", "--no-ff", *strategy, "-m", merged, upstream_sha, env=s._dates(hours))
    for index, subject in enumerate(fixes):
        s._commit(
            branch, subject, {f"third_party/intel/fix_{pr}_{index}.cpp": "fix\n"}, hours + 0.1 * (index + 1)
        )
    s.git("checkout", "-q", "main")
    message = message or f"Merge OpenAI Triton commit `{upstream_sha[:7]}` (#{pr})"
    s.git("merge", "-q", "--no-ff", "-m", message, branch, env=s._dates(hours + 1))
    return s.git("rev-parse", "HEAD")


STAGE_FUNCTIONS = ("lowerLoads", "scheduleOps", "assignStages", "emitBarriers")


class PassFiles:
    """C++ pass files of four functions each, edited one statement at a time."""

    def __init__(self, names: list[str]) -> None:
        self.body = {
            name: {fn: [f"x += {10 * i + j};" for j in range(6)] for i, fn in enumerate(STAGE_FUNCTIONS)}
            for name in names
        }

    def text(self, name: str) -> str:
        functions = "".join(
            f"int {fn}(int x) {{\n" + "".join(f"  {s}\n" for s in lines) + "  return x;\n}\n\n"
            for fn, lines in self.body[name].items()
        )
        return f'#include "{Path(name).stem}.h"\n\nnamespace mlir {{\n\n{functions}}} // namespace mlir\n'

    def edit(self, name: str, fn: str, line: int, statement: str) -> dict[str, str]:
        self.body[name][fn][line] = statement
        return {name: self.text(name)}


def patch_stack_history(path: Path, ingestions: int = 8) -> tuple[Scenario, dict[str, list[str]]]:
    """A fork whose patch stack changes the first function of six pass files, then `ingestions` merges of
    upstream the way Intel's fork makes them (a PR that merges upstream, carries its fix commits and is
    merged into trunk). Each brings six one-line upstream commits: two change a function the patch stack
    changed (one of them the fork's very line, a conflict the merge resolves for the fork), and the PR's
    fix commits name both by SHA; four change other functions, files or tests, and nothing names them.
    Returns the scenario and the upstream SHAs that `broke` the fork and those that were `fine`."""
    s = Scenario(path)
    patched = [f"lib/Dialect/TritonGPU/Transforms/Stage{k}.cpp" for k in range(6)]
    plain = [f"lib/Dialect/TritonGPU/Transforms/Other{k}.cpp" for k in range(6)]
    up, fork = PassFiles(patched + plain), PassFiles(patched)
    test = "python/test/unit/test_stage{}.py"
    tests = {test.format(k): f"def test_stage{k}():\n    assert True\n" for k in range(6)}
    s.upstream("Initial import (#1)", {**{n: up.text(n) for n in patched + plain}, **tests}, hours=0)
    s.fork_here()
    for k, name in enumerate(patched):
        s.fork(
            f"[intel] XPU lowering, stage {k} (#{10 + k})",
            fork.edit(name, "lowerLoads", 2, f"x = xpu{k}(x);"),
        )
    outcome: dict[str, list[str]] = {"broke": [], "fine": []}
    for i in range(ingestions):
        k, hours, pr = i % 6, 100.0 * (i + 1), 100 + 6 * i
        edits = [
            (f"Change stage {k}'s loads", up.edit(patched[k], "lowerLoads", 2, f"x -= {i};"), "broke"),
            (f"Tune stage {k}'s loads", up.edit(patched[k], "lowerLoads", 4, f"x *= {i + 2};"), "broke"),
            (f"Stage {k}'s barriers", up.edit(patched[(k + 1) % 6], "emitBarriers", 4, f"x ^= {i};"), "fine"),
            (f"Other pass {k}", up.edit(plain[k], "scheduleOps", 3, f"x |= {i};"), "fine"),
            (
                f"Other pass {k}'s stages",
                up.edit(plain[(k + 3) % 6], "assignStages", 1, f"x &= {i};"),
                "fine",
            ),
            (
                f"Test stage {k} further",
                {test.format(k): f"def test_stage{k}():\n    assert {i} >= 0\n"},
                "fine",
            ),
        ]
        made = []
        for n, (title, files, how) in enumerate(edits):
            made.append(s.upstream(f"{title} (#{pr + n})", files, hours=hours + n))
            outcome[how].append(made[-1])
        fixes = [f"[intel] fix the build after '{sha[:7]}'" for sha in made[:2]]
        merge_pr(s, made[-1], pr=9000 + i, fixes=fixes, hours=hours + 10, ours=True)
    return s, outcome
