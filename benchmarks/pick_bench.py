"""`sluice pick` quality and speed.

On the conflict case suite: the confusion matrix (true class vs. predicted), the share of conflicted files
resolved automatically, and the number of wrong resolutions (aim: zero). On a large generated history: every
pending upstream commit picked in order onto fork trunk, the time per commit beside the raw cost of one
`git merge-tree` per commit in the same run (aim: at most twice).

    python benchmarks/pick_bench.py                 # suite + BENCH history (≈12k upstream commits)
    python benchmarks/pick_bench.py --files 400 --base-commits 200 --fork-commits 60 --ingested 150 \\
        --pending 120                               # suite + a DEMO-sized history
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.support (the case builders)

from bot.app.clock import utc_now
from bot.core.config import SluiceConfig, Strategy
from bot.core.models import PickStatus
from bot.demo import BENCH, SandboxSize, build_sandbox
from bot.flows.pick import Picker, PickRequest, run_pick
from bot.git.repo import GitRepo
from tests.support.case_repo import CaseOutcome, build_case_repos, pick_case
from tests.support.conflict_cases import cases

CLASSES = ["clean", "mechanical", "api", "semantic", "unknown"]


def suite_figures(outcomes: list[CaseOutcome]) -> None:
    matrix = Counter(
        (o.case.expected.value if o.case.expected else "clean", o.predicted or "clean") for o in outcomes
    )
    print("confusion matrix (rows: true class, columns: predicted)")
    print(f"{'':>12}" + "".join(f"{c:>12}" for c in CLASSES))
    for true in CLASSES:
        print(f"{true:>12}" + "".join(f"{matrix[(true, predicted)]:>12}" for predicted in CLASSES))
    conflicted = [o for o in outcomes if o.case.expected is not None]
    resolved = sum(1 for o in conflicted if o.status is PickStatus.AUTO_RESOLVED)
    wrong = sum(1 for o in outcomes if o.wrong_resolution)
    share = 100 * resolved / len(conflicted)
    print(f"conflicted files resolved automatically: {resolved}/{len(conflicted)} ({share:.1f} %)")
    print(f"wrong resolutions: {wrong} (aim: 0)")


def history_figures(size: SandboxSize, root: Path) -> None:
    sandbox = build_sandbox(root / "sandbox", size)
    repo = GitRepo(sandbox.fork)
    fork = repo.resolve(sandbox.fork_ref)
    infos = {c.sha: c for c in repo.commits(sandbox.upstream_ref, "--not", fork, first_parent=True)}
    commits = tuple(infos[sha] for sha in sandbox.manifest.pending)
    request = PickRequest(
        onto=fork,
        commits=commits,
        strategy=Strategy.CHERRY_PICK,
        dry_run=True,
        branch=None,
        branch_old=None,
        now=utc_now(),
    )
    started = time.perf_counter()
    report = run_pick(Picker(repo, SluiceConfig()), request)
    picked = time.perf_counter() - started
    tree = repo.tree_of(fork)
    probes = [repo.write_commit(tree, [c.parents[0]], "bench", timestamp=c.committer_time) for c in commits]
    started = time.perf_counter()
    for ours, commit in zip(probes, commits, strict=True):
        repo.run(
            "merge-tree", "--write-tree", "-z", "--name-only", "--no-messages", ours, commit.sha, ok=(0, 1)
        )
    raw = time.perf_counter() - started
    statuses = Counter(c.status.value for c in report.commits)
    n = len(commits)
    print(f"history: {n} pending upstream commits picked in order onto fork trunk")
    print(f"  statuses: {dict(sorted(statuses.items()))}")
    print(f"sluice pick:        {1000 * picked / n:7.1f} ms per commit ({picked:.2f} s)")
    print(f"raw git merge-tree: {1000 * raw / n:7.1f} ms per commit ({raw:.2f} s)")
    print(f"ratio pick / raw:   {picked / raw:7.2f}  (aim: ≤ 2.00)")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    for field in dataclasses.fields(SandboxSize):
        parser.add_argument(f"--{field.name.replace('_', '-')}", type=int, default=getattr(BENCH, field.name))
    args = parser.parse_args()
    size = SandboxSize(**{f.name: getattr(args, f.name) for f in dataclasses.fields(SandboxSize)})
    with tempfile.TemporaryDirectory(prefix="sluice-pick-bench-") as tmp:
        suite = cases()
        outcomes = [pick_case(b) for b in build_case_repos(Path(tmp) / "cases", suite)]
        per_pick = 1000 * sum(o.seconds for o in outcomes) / len(outcomes)
        print(f"suite: {len(suite)} cases, {per_pick:.1f} ms per pick")
        suite_figures(outcomes)
        history_figures(size, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
