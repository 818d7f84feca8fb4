"""What `sluice plan` and `sluice pick --dry-run` cost on a real fork, cold and with a warm store.

On a `--shared` mirror of PATH in a temporary directory (PATH itself is never written), for a window of
WINDOW pending upstream commits: fork = the newest fork-trunk merge of an upstream commit X ("Merge OpenAI
Triton commit X" in Intel's fork) with WINDOW newer upstream commits, upstream = the WINDOW-th first-parent
upstream commit after X. Prints, as labelled lines:

- `plan` of the window and `pick --dry-run` of its first commit, cold (empty store) and warm (median),
  as wall time of the command, beside the start-up floor (`sluice schema`: interpreter and imports only)
  and the same work in-process (after the imports);
- per pending commit: the plan's conflict prediction beside one raw `git merge-tree` per commit on the
  same inputs, and their ratio (aim: ≤ 2);
- loose objects in the mirror before and after all those plans and dry runs (aim: unchanged).

Aims (issue 11): pick --dry-run ≤ 0.5 s, plan of a 20-commit window ≤ 2 s, per commit ≤ 2× merge-tree.

    python benchmarks/real_cost.py PATH [--fork main] [--upstream upstream] [--window 20] [--runs 3]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bot.app.cli import main as sluice_main
from bot.core.config import SluiceConfig, Strategy
from bot.core.models import CommitInfo, PickStatus
from bot.db.store import Store
from bot.flows.engine import load_repo_config, predict_conflicts, take_snapshot
from bot.flows.pick import Picker
from bot.git.facts import CommitFacts, FactKey
from bot.git.repo import GitRepo

MERGED = re.compile(r"[Mm]erge (?:OpenAI |upstream )?(?:Triton )?commit [`']?([0-9a-f]{7,40})")


@dataclass(frozen=True)
class Window:
    fork: str  # a fork-trunk merge commit
    upstream: str  # the WINDOW-th upstream commit after the one it merged
    merged: str
    pending: tuple[str, ...]


def find_window(repo: GitRepo, *, fork: str, upstream: str, size: int) -> Window | None:
    """The newest fork-trunk merge of an upstream commit with at least `size` newer upstream commits."""
    stream = [sha for sha, _ in repo.first_parent_times(repo.resolve(upstream))]
    position = {sha: i for i, sha in enumerate(stream)}
    log = repo.run("log", "--first-parent", "--merges", "--format=%H %P%x1f%s", repo.resolve(fork), "--")
    for line in log.splitlines():
        shas, _, subject = line.partition("\x1f")
        merge, *parents = shas.split()
        m = MERGED.search(subject)
        merged = repo.resolve_optional(m.group(1)) if m else None
        if merged is None or merged not in position or len(parents) < 2:
            continue
        start = position[merged] + 1
        if len(stream) - start >= size:
            pending = tuple(stream[start : start + size])
            return Window(fork=merge, upstream=pending[-1], merged=merged, pending=pending)
    return None


def loose_objects(path: Path) -> tuple[int, int]:
    """(loose objects, their size in KiB) as `git count-objects -v` reports them."""
    out = subprocess.run(["git", "count-objects", "-v"], cwd=path, capture_output=True, text=True).stdout
    fields = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
    return int(fields["count"]), int(fields["size"])


def wall(argv: Sequence[str]) -> float:
    """Wall time of one `sluice` command as a person runs it (a new interpreter)."""
    script = Path(sys.executable).parent / "sluice"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "bot.app.cli"]
    started = time.perf_counter()
    proc = subprocess.run([*command, *argv], capture_output=True, text=True)
    took = time.perf_counter() - started
    if proc.returncode not in (0, 1):  # 1: the pick needs a human, a normal outcome
        raise SystemExit(f"sluice {argv[0]} failed ({proc.returncode}): {proc.stderr.strip()[-400:]}")
    return took


def in_process(argv: Sequence[str]) -> float:
    """The same command run in this interpreter, whose imports are already done."""
    started = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        sluice_main(list(argv))
    return time.perf_counter() - started


def median_of(runs: int, measure: Callable[[], float]) -> tuple[float, list[float]]:
    times = [measure() for _ in range(runs)]
    return statistics.median(times), times


@dataclass(frozen=True)
class PerCommit:
    """Seconds per pending commit: the plan's conflict prediction and one raw `git merge-tree`."""

    predicted: float  # with the store's outcomes of conflicted merges met before (as a warm plan runs)
    classifying: float  # without them: every conflicted file classified again
    raw: float
    clean: tuple[float, float, int]  # (prediction, raw, commits) for the commits that merged cleanly
    conflicted: tuple[float, float, int]  # the same for the others (warm)


def per_commit(repo: GitRepo, window: Window, config: SluiceConfig, database: str) -> PerCommit:
    """Time `predict_conflicts` as the plan runs it, then each of its steps and one raw merge-tree of
    the same commit onto fork trunk, in one quarantine (nothing stays in the repository)."""
    store = Store.open(database)
    try:
        facts = CommitFacts(repo, store)
        snapshot = take_snapshot(
            repo, fork_ref=window.fork, upstream_ref=window.upstream, config=config, facts=facts
        )
        known = facts.verdicts(snapshot.pending)
    finally:
        store.close()
    infos = {c.sha: c for c in snapshot.candidates}
    commits = [infos[sha] for sha in snapshot.pending]
    with repo.quarantined() as probe:
        started = time.perf_counter()
        predict_conflicts(probe, snapshot.fork_head, commits, config=config, verdicts=dict(known))
        predicted = time.perf_counter() - started
        started = time.perf_counter()
        predict_conflicts(probe, snapshot.fork_head, commits, config=config)
        classifying = time.perf_counter() - started
        steps = _step_times(probe, snapshot.fork_head, commits, config, dict(known))
        raws = _raw_times(probe, snapshot.fork_head, commits)
    n = len(commits)
    split = {
        clean: (sum(steps[i][0] for i in idx), sum(raws[i] for i in idx), len(idx))
        for clean in (True, False)
        for idx in [[i for i in range(n) if steps[i][1] is clean]]
    }
    return PerCommit(predicted / n, classifying / n, sum(raws) / n, split[True], split[False])


def _step_times(
    probe: GitRepo,
    fork_head: str,
    commits: Sequence[CommitInfo],
    config: SluiceConfig,
    verdicts: dict[FactKey, str],
) -> list[tuple[float, bool]]:
    """(seconds, merged cleanly) of each `Picker.step`, chained as predict_conflicts chains them."""
    picker = Picker(probe, config, use_resolver=False, evidence=False, verdicts=verdicts)
    tree = probe.tree_of(fork_head)
    times = []
    for commit in commits:
        started = time.perf_counter()
        step = picker.step(fork_head, tree, commit, strategy=Strategy.CHERRY_PICK)
        times.append((time.perf_counter() - started, step.report.status is PickStatus.CLEAN))
        tree = step.tree or tree
    return times


def _raw_times(probe: GitRepo, fork_head: str, commits: Sequence[CommitInfo]) -> list[float]:
    """One `git merge-tree` per commit onto fork trunk, its probe commit made outside the timing."""
    tree = probe.tree_of(fork_head)
    times = []
    for commit in commits:
        ours = probe.write_commit(tree, [commit.parents[0]], "bench", timestamp=commit.committer_time)
        started = time.perf_counter()
        probe.run(
            "merge-tree", "--write-tree", "-z", "--name-only", "--no-messages", ours, commit.sha, ok=(0, 1)
        )
        times.append(time.perf_counter() - started)
    return times


def run(repo: Path, *, fork: str, upstream: str, window_size: int = 20, runs: int = 3) -> None:
    """Print the cost figures for `repo` (fork trunk `fork`, upstream `upstream`); `repo` is only read."""
    print(f"== cost on {repo}")
    with tempfile.TemporaryDirectory(prefix="sluice-real-cost-") as tmp:
        mirror = Path(tmp) / "fork.git"
        subprocess.run(["git", "clone", "-q", "--mirror", "--shared", str(repo), str(mirror)], check=True)
        git = GitRepo(mirror)
        window = find_window(git, fork=fork, upstream=upstream, size=window_size)
        if window is None:
            print(f"skipped: no merge on {fork} of an upstream commit with {window_size} newer ones")
            return
        _report(git, window, Path(tmp), runs=runs)


def _report(git: GitRepo, window: Window, tmp: Path, *, runs: int) -> None:
    config = load_repo_config(git, window.fork, window.fork)
    fork_commits = len(git.run("rev-list", window.fork, "--not", window.upstream, "--").split())
    print(
        f"window: fork {window.fork[:10]} (merged upstream {window.merged[:10]}), "
        f"upstream {window.upstream[:10]}: {len(window.pending)} pending upstream commits, "
        f"{fork_commits} fork commits"
    )
    before = loose_objects(git.path)
    refs = ["--repo", str(git.path)]
    plan = ["plan", *refs, "--fork", window.fork, "--upstream", window.upstream, "--json"]
    pick = ["pick", *refs, "--onto", window.fork, "--upstream", window.upstream, "--dry-run", "--json"]
    cold_db, pick_db = (f"sqlite:///{tmp / name}" for name in ("cold.db", "pick.db"))
    floor, _ = median_of(runs, lambda: wall(["schema"]))
    print(f"start-up floor (sluice schema): {floor:.2f} s")
    cold_pick = wall([*pick, "--database", pick_db, window.pending[0]])
    warm_pick, picks = median_of(runs, lambda: wall([*pick, "--database", pick_db, window.pending[0]]))
    pick_inside, _ = median_of(runs, lambda: in_process([*pick, "--database", pick_db, window.pending[0]]))
    print(f"pick --dry-run (cold): {cold_pick:.2f} s")
    print(f"pick --dry-run (warm): {warm_pick:.2f} s  (median of {_listed(picks)}; aim ≤ 0.5)")
    print(f"pick --dry-run (warm, in-process, after imports): {pick_inside:.2f} s")
    cold_plan = wall([*plan, "--database", cold_db])
    warm_plan, plans = median_of(runs, lambda: wall([*plan, "--database", cold_db]))
    plan_inside, _ = median_of(runs, lambda: in_process([*plan, "--database", cold_db]))
    n = len(window.pending)
    print(f"plan of {n} commits (cold): {cold_plan:.2f} s")
    print(f"plan of {n} commits (warm): {warm_plan:.2f} s  (median of {_listed(plans)}; aim ≤ 2)")
    print(f"plan of {n} commits (warm, in-process, after imports): {plan_inside:.2f} s")
    cost = per_commit(git, window, config, cold_db)
    raw = cost.raw
    print(f"conflict prediction per pending commit (warm): {1000 * cost.predicted:.1f} ms")
    print(
        "conflict prediction per pending commit (classifying every conflict): "
        f"{1000 * cost.classifying:.1f} ms"
    )
    print(f"raw git merge-tree per pending commit: {1000 * raw:.1f} ms")
    print(
        f"ratio prediction / raw merge-tree: {cost.predicted / raw:.2f} warm, "
        f"{cost.classifying / raw:.2f} classifying (aim ≤ 2)"
    )
    for label, (steps, raws, count) in (("clean", cost.clean), ("conflicted", cost.conflicted)):
        if count:
            print(
                f"  {label} commits ({count}): prediction {1000 * steps / count:.1f} ms, "
                f"raw merge-tree {1000 * raws / count:.1f} ms, ratio {steps / raws:.2f}"
            )
    print(
        f"ratio warm plan per commit / raw merge-tree: {warm_plan / n / raw:.2f}  "
        "(the whole command: start-up, reading, planning)"
    )
    after = loose_objects(git.path)
    commands = 2 * (1 + 2 * runs)
    print(f"loose objects before: {before[0]} ({before[1]} KiB)")
    print(f"loose objects after {commands} plans and dry runs: {after[0]} ({after[1]} KiB)")


def _listed(times: Sequence[float]) -> str:
    return ", ".join(f"{t:.2f}" for t in times)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("path", nargs="?", help="a fork repository holding fork trunk and upstream")
    parser.add_argument("--fork", default="main", help="fork trunk ref (default: main)")
    parser.add_argument("--upstream", default="upstream", help="upstream ref (default: upstream)")
    parser.add_argument(
        "--window", type=int, default=20, help="pending upstream commits to plan (default 20)"
    )
    parser.add_argument("--runs", type=int, default=3, help="warm runs; the median is reported (default 3)")
    args = parser.parse_args()
    if not args.path:
        print("skipped: no repository given")
        return 0
    run(Path(args.path), fork=args.fork, upstream=args.upstream, window_size=args.window, runs=args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
