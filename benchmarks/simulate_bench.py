"""Tier runs per commit and Days Behind Upstream on a merge-style fork's real windows: baselines and Sluice.

    python benchmarks/simulate_bench.py PATH [--fork main] [--upstream upstream] [--until 2025-09-30]
        [--runners 1] [--limit N] [--cache FILE]

The windows are those of benchmarks/real_risk.py: each "Merge OpenAI Triton commit `X` (#N)" first-parent
merge of fork trunk brought the upstream commits trunk lacked, up to X; its culprits are the commits the
merge PR's own fix commits revert or name (real_risk.culprits). Every window commit is replayed, in upstream
order at its committer time, by `sluice simulate`'s replay (bot.core.simulation) with the risk model's
probabilities and the planner's dependency edges against fork trunk's patch stack, and a tier oracle that
fails a candidate holding a culprit. Printed: per-commit testing, fixed batches of 20 with prefix bisection,
the information bound for batches of 20, and Sluice's strategy; culprits found and median Days Behind.
Only history before --until is read (never pass a later date for Intel's fork: 2025-10-01 on is off
limits). PATH is only read (a `--shared` clone in a temporary directory). The prepared commits are cached
in --cache (under /tmp). With no PATH it prints "skipped: no repository given" and exits 0.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import real_risk
from _history import shared_clone

from bot.core.bisect import Budget
from bot.core.config import SluiceConfig
from bot.core.simulation import (
    Batching,
    SimCommit,
    SimOptions,
    SimResult,
    entropy_bound,
    information_bound,
    simulate,
)
from bot.flows.calibrate import parse_date
from bot.flows.risk_files import default_model
from bot.flows.simulate import sim_commits
from bot.git.repo import GitRepo

CACHE = Path(tempfile.gettempdir()) / "sluice-simulate" / "commits.jsonl"
ANCHORS = {"per-commit": 1.0, "fixed-20": 0.387, "bound-20": 0.289}
GOAL_RUNS, GOAL_DAYS = 0.2, 1.0
FOREVER = 1e9  # hours: a fixed batch waits until it has its 20 commits


@dataclass(frozen=True)
class Titled:
    sha: str
    subject: str


def window_commits(repo: GitRepo, fork: str, until: int, limit: int) -> tuple[list[str], set[str], int]:
    """(every window's upstream commits, oldest first; their culprits; the number of windows)."""
    windows = [w for w in real_risk.windows(repo, fork) if w.when < until]
    windows = windows[-limit:] if limit else windows
    shas: dict[str, None] = {}
    culprits: set[str] = set()
    for w in windows:
        out = repo.run(
            "log", "--first-parent", "--reverse", "--format=%H%x00%s", w.upstream, "--not", w.fork, "--"
        )
        brought = [Titled(*line.split("\0", 1)) for line in out.splitlines()]
        fixes = real_risk.messages(repo, w.branch, "--not", w.fork, w.upstream)
        culprits |= real_risk.culprits(brought, fixes)
        shas.update(dict.fromkeys(c.sha for c in brought))
    return list(shas), culprits, len(windows)


def prepared(
    repo: GitRepo, args: argparse.Namespace, shas: Sequence[str], until: int, *, whole: bool = False
) -> list[SimCommit]:
    """The window commits (`whole`: every stream commit from the first to the last of them) as the replay
    sees them, from the cache when it has them."""
    key = f"{repo.resolve(args.fork)}:{repo.resolve(args.upstream)}:{until}:{len(shas)}:{shas[0]}:{shas[-1]}"
    key += ":whole" if whole else ""
    cache = Path(args.cache)
    if cache.exists():
        for line in cache.read_text().splitlines():
            entry = json.loads(line)
            if entry["key"] == key:
                return [SimCommit.model_validate(c) for c in entry["commits"]]
    started = time.perf_counter()
    commits = sim_commits(
        repo,
        SluiceConfig(),
        fork=args.fork,
        upstream=args.upstream,
        since=int(repo.run("log", "-1", "--format=%ct", shas[0], "--").strip()) if whole else None,
        until=until,
        model=default_model(),
        only=None if whole else set(shas),
        progress=lambda m: print(f"  {m}", flush=True),
    )
    print(f"  prepared {len(commits)} commits in {time.perf_counter() - started:.0f} s", flush=True)
    cache.parent.mkdir(parents=True, exist_ok=True)
    with cache.open("a") as out:
        out.write(json.dumps({"key": key, "commits": [c.model_dump() for c in commits]}) + "\n")
    return commits


def line(label: str, result: SimResult, anchor: float | None = None) -> None:
    said = f" (anchor {anchor})" if anchor is not None else ""
    print(
        f"{label}: {result.runs_per_commit:.3f} runs/commit{said}, {result.runs} runs, "
        f"culprits found {result.culprits_found}/{result.culprits_total}, "
        f"Days Behind median {result.median_days_behind:.2f} p90 {result.p90_days_behind:.2f}, "
        f"needed a person {len(result.needed_person)}"
    )


def measure(repo: GitRepo, args: argparse.Namespace) -> None:
    until = parse_date(args.until, "--until") + 86400  # the whole --until day
    shas, culprits, windows = window_commits(repo, args.fork, until, args.limit)
    if not shas:
        print("skipped: no merge window before --until")
        return
    commits = prepared(repo, args, shas, until)
    print(f"windows: {windows}, upstream commits: {len(commits)}, culprits: {len(culprits & set(shas))}")
    print(f"period: {_day(commits[0].time)} .. {_day(commits[-1].time)}; anchors: 1541 commits, 106 culprits")
    flags = [c.sha in culprits for c in commits]
    runners = args.runners
    line(
        "per-commit testing",
        simulate(commits, culprits, SimOptions(strategy=Batching.PER_COMMIT, runners=runners)),
        1.0,
    )
    fixed = SimOptions(
        strategy=Batching.FIXED, max_commits=20, max_wait_hours=FOREVER, runners=runners, budget=Budget()
    )
    line("fixed batches of 20, prefix bisection", simulate(commits, culprits, fixed), ANCHORS["fixed-20"])
    bound = information_bound(flags, size=20) / len(commits)
    print(f"information bound, batches of 20: {bound:.3f} runs/commit (anchor {ANCHORS['bound-20']})")
    entropy = entropy_bound([c.probability or 0.0 for c in commits], flags)
    confirm = sum(flags) / len(commits)
    print(
        "what any strategy needs at the least (bits per commit; + confirmation re-runs "
        f"{confirm:.3f}): knowing only the culprit rate {entropy.rate:.3f}; with the model's probabilities "
        f"{entropy.model:.3f} if it were right, {entropy.labels:.3f} on the real culprits, "
        f"{entropy.calibrated_labels:.3f} scaled to the real rate"
    )
    best = None
    variants = [
        ("sluice", SimOptions(max_commits=40, runners=runners)),
        ("sluice, candidates wait ≤ 48 h", SimOptions(max_commits=40, max_wait_hours=48, runners=runners)),
        ("sluice, 4 runners", SimOptions(max_commits=40, runners=4)),
    ]
    for label, options in variants:
        result = simulate(commits, culprits, options)
        line(label, result)
        if best is None or result.runs_per_commit < best.runs_per_commit:
            best = result
    unconfirmed = SimOptions(max_commits=40, runners=runners, confirm=False)
    line(
        "sluice without the confirmation re-run (as the anchors count)",
        simulate(commits, culprits, unconfirmed),
    )
    print(f"confirmation re-runs alone: {len(culprits & set(shas)) / len(commits):.3f} runs/commit")
    if args.whole_stream:
        whole_stream(repo, args, shas, culprits, until)
    assert best is not None
    found_all = best.culprits_found == best.culprits_total
    met = best.runs_per_commit <= GOAL_RUNS and found_all and best.median_days_behind <= GOAL_DAYS
    culprits_said = "every culprit found" if found_all else "culprits missed"
    print(
        f"goal: ≤ {GOAL_RUNS} runs/commit with every culprit found, median Days Behind ≤ {GOAL_DAYS}: "
        f"best {best.runs_per_commit:.3f} runs/commit ({culprits_said}), "
        f"median {best.median_days_behind:.2f} days: {'met' if met else 'missed'}"
    )


def whole_stream(
    repo: GitRepo, args: argparse.Namespace, shas: Sequence[str], culprits: set[str], until: int
) -> None:
    """Days Behind on the whole first-parent stream of the windows' span: the windows leave gaps (commits
    Intel took by other merges), in which the replayed head stands still and the tip catches up."""
    commits = prepared(repo, args, shas, until, whole=True)
    print(f"whole stream: {len(commits)} upstream commits (those outside the windows count as clean)")
    line(
        "whole stream, fixed batches of 20",
        simulate(commits, culprits, SimOptions(strategy=Batching.FIXED, max_wait_hours=FOREVER)),
    )
    fixed = SimOptions(strategy=Batching.FIXED, max_wait_hours=24)
    line("whole stream, fixed batches of 20, wait ≤ 24 h", simulate(commits, culprits, fixed))
    flags = [c.sha in culprits for c in commits]
    bound = information_bound(flags, size=20) / len(commits)
    print(f"whole stream, information bound, batches of 20: {bound:.3f} runs/commit")
    line("whole stream, sluice", simulate(commits, culprits, SimOptions(max_commits=40)))
    line(
        "whole stream, sluice, 4 runners", simulate(commits, culprits, SimOptions(max_commits=40, runners=4))
    )


def _day(ts: int) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("path", nargs="?", help="a repository holding fork trunk and upstream (only read)")
    parser.add_argument("--fork", default="main", help="fork trunk ref (default main)")
    parser.add_argument("--upstream", default="upstream", help="upstream ref (default upstream)")
    parser.add_argument("--until", default="2025-09-30", help="the last day read (default 2025-09-30)")
    parser.add_argument("--runners", type=int, default=1, help="tier runs side by side (default 1)")
    parser.add_argument("--limit", type=int, default=0, help="only the newest N windows")
    parser.add_argument(
        "--whole-stream", action="store_true", help="also replay every stream commit of the span"
    )
    parser.add_argument("--cache", default=str(CACHE), help=f"prepared commits (default {CACHE})")
    args = parser.parse_args(argv)
    if not args.path:
        print("skipped: no repository given")
        return 0
    with shared_clone(Path(args.path), prefix="sluice-simulate-") as clone:
        measure(clone, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
