"""Times `sluice plan` on a Triton-sized generated history beside the raw cost of `git merge-tree`.

The raw cost is one `git merge-tree --write-tree` per pending commit (the least any conflict prediction
must spend); the aim is a plan that costs at most twice that. Prints both and their ratio.

    python benchmarks/plan_bench.py     # BENCH: ≈5,000 files, 2,000 fork commits, 500 pending
    python benchmarks/plan_bench.py --files 400 --fork-commits 60 --ingested 150 --pending 120
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bot.demo import BENCH, SandboxSize, build_sandbox
from bot.git.repo import GitRepo


def raw_merge_tree_seconds(repo: GitRepo, fork_ref: str, pending: list[str]) -> float:
    """One merge-tree per pending commit onto fork trunk, its inputs prepared outside the timing."""
    fork_tree = repo.tree_of(repo.resolve(fork_ref))
    infos = {c.sha: c for c in repo.commits(*pending, "--no-walk")}
    pairs = [
        (repo.write_commit(fork_tree, [infos[s].parents[0]], "bench", timestamp=infos[s].committer_time), s)
        for s in pending
    ]
    started = time.perf_counter()
    for ours, theirs in pairs:
        repo.run("merge-tree", "--write-tree", "-z", "--name-only", "--no-messages", ours, theirs, ok=(0, 1))
    return time.perf_counter() - started


def plan_seconds(sandbox_path: Path, fork_ref: str, upstream_ref: str, runs: int) -> list[float]:
    """Wall time of the real command, recording into a fresh SQLite store each run."""
    script = Path(sys.executable).parent / "sluice"
    repo = ["--repo", str(sandbox_path), "--fork", fork_ref, "--upstream", upstream_ref]
    db = sandbox_path.parent / "bench.db"
    times = []
    for _ in range(runs):
        db.unlink(missing_ok=True)
        args = [str(script), "plan", *repo, "--json", "--database", f"sqlite:///{db}"]
        started = time.perf_counter()
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - started)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    for field in dataclasses.fields(SandboxSize):
        parser.add_argument(f"--{field.name.replace('_', '-')}", type=int, default=getattr(BENCH, field.name))
    parser.add_argument("--runs", type=int, default=3, help="plan runs; the median is reported")
    args = parser.parse_args()
    size = SandboxSize(**{f.name: getattr(args, f.name) for f in dataclasses.fields(SandboxSize)})
    with tempfile.TemporaryDirectory(prefix="sluice-bench-") as tmp:
        started = time.perf_counter()
        sandbox = build_sandbox(Path(tmp) / "sandbox", size)
        built = time.perf_counter() - started
        repo = GitRepo(sandbox.fork)
        pending = list(sandbox.manifest.pending)
        files = len(repo.run("ls-tree", "-r", "--name-only", sandbox.fork_ref).splitlines())
        print(
            f"scenario: {files} files, {len(sandbox.manifest.patch_stack)} patch-stack commits, "
            f"{len(pending)} pending upstream commits (built in {built:.1f} s)"
        )
        plan = plan_seconds(sandbox.fork, sandbox.fork_ref, sandbox.upstream_ref, args.runs)
        raw = raw_merge_tree_seconds(repo, sandbox.fork_ref, pending)
    median = statistics.median(plan)
    print(
        f"sluice plan:        {median:7.2f} s  (median of {len(plan)}: {', '.join(f'{t:.2f}' for t in plan)})"
    )
    each = 1000 * raw / max(len(pending), 1)
    print(f"raw git merge-tree: {raw:7.2f} s  ({len(pending)} calls, {each:.1f} ms each)")
    print(f"ratio plan / raw:   {median / raw:7.2f}  (aim: ≤ 2.00)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
