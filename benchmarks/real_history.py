"""Sluice on a real fork's history: recognition counts, ingestion tip and both lag metrics, then the other
real-history sections (`real_merges.py`, `real_cost.py`, `real_risk.py`) when they are present.

    python benchmarks/real_history.py PATH [--fork REF] [--upstream REF] [--window FORK:UPSTREAM ...]

Besides the given refs it measures three earlier windows of a merge-style fork (Intel's "Merge OpenAI
Triton commit `X`" merges): fork trunk as of one merge, upstream as of the commit a later merge took. Each
window's figures sit beside what plain `git log` says, computed without Sluice. Nothing is written into
the repository. With no PATH it prints "skipped: no repository given" and exits 0.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import re
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.core.config import SluiceConfig
from bot.core.errors import SluiceError
from bot.core.metrics import stream_status
from bot.flows.engine import Snapshot, take_snapshot
from bot.git.repo import GitRepo

MERGE_SUBJECT = re.compile(r"^Merge OpenAI (?:Triton )?commit `([0-9a-f]{7,40})`")
# (fork trunk as of the Nth-newest upstream merge, upstream as of the commit the Mth-newest merge took)
DEFAULT_WINDOWS = ((10, 0), (25, 11), (45, 35))
SECTIONS = ("real_merges", "real_cost", "real_risk")
DAY = 86400


@dataclass(frozen=True)
class Window:
    label: str
    fork: str
    upstream: str


@dataclass(frozen=True)
class Truth:
    """What plain git says: the newest stream commit fork trunk contains, and the first one it lacks."""

    tip: str | None
    days_behind: float | None
    first_missing: str | None
    first_missing_days: float | None
    missing: int


def when(repo: GitRepo, sha: str) -> int:
    return int(repo.run("log", "-1", "--format=%ct", sha).strip())


def stamp(ts: int | None) -> str:
    return "—" if ts is None else dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def days(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def git_truth(repo: GitRepo, fork: str, upstream: str) -> Truth:
    """From `git rev-list --first-parent` alone, as a person checks it by hand."""
    missing = repo.run("rev-list", "--first-parent", upstream, "--not", fork, "--").split()
    head_time = when(repo, upstream)
    if not missing:
        return Truth(upstream, 0.0, None, None, 0)
    first = missing[-1]
    parents = repo.run("rev-list", "--parents", "-1", first).split()[1:]
    tip = parents[0] if parents else None
    tip_days = None if tip is None else round((head_time - when(repo, tip)) / DAY, 3)
    return Truth(tip, tip_days, first, round((head_time - when(repo, first)) / DAY, 3), len(missing))


def print_snapshot(snapshot: Snapshot, elapsed: float) -> None:
    status = snapshot.status
    merge_tip = stream_status(
        snapshot.stream,
        missing=set(snapshot.missing),
        recognised=snapshot.recognised,
        fork_head=snapshot.fork_head,
        patch_stack_commits=status.patch_stack_commits,
        picks_move_tip=False,
    )
    print(f"upstream head: {status.upstream_head[:10]} ({stamp(status.upstream_head_time)})")
    print(f"fork head: {status.fork_head[:10]}")
    print(f"upstream stream commits: {len(snapshot.stream)}")
    methods = Counter(r.method.value for r in snapshot.recognised.values())
    print(f"recognised by ancestry: {len(snapshot.stream) - len(snapshot.missing)}")
    for method, count in sorted(methods.items()):
        print(f"recognised by {method}: {count}")
    print(f"emergency picks: {status.emergency_commits}")
    print(f"pending upstream commits: {status.pending_commits}")
    print(f"backlog commits: {status.backlog_commits}")
    print(f"patch stack: {status.patch_stack_commits} fork commits")
    print(f"unreadable commits: {len(status.unreadable)}")
    for label, s in (("strategy cherry-pick (default)", status), ("strategy merge", merge_tip)):
        tip = s.ingestion_tip[:10] if s.ingestion_tip else "none"
        print(f"ingestion tip ({label}): {tip} ({stamp(s.ingestion_tip_time)})")
        print(f"days behind ({label}): {days(s.days_behind)}")
    oldest = status.oldest_missing[:10] if status.oldest_missing else "none"
    print(
        f"oldest missing commit: {oldest}, {days(status.oldest_missing_days)} days older than upstream head"
    )
    print(f"status (cold): {elapsed:.2f} s")


def print_truth(truth: Truth, snapshot: Snapshot) -> None:
    tip = truth.tip[:10] if truth.tip else "none"
    first = truth.first_missing[:10] if truth.first_missing else "none"
    print(f"git log: tip {tip}, days behind {days(truth.days_behind)}, {truth.missing} commits not merged")
    print(f"git log: first unmerged commit {first}, {days(truth.first_missing_days)} days older than head")
    status = snapshot.status
    agree = status.ingestion_tip == truth.tip and status.days_behind == truth.days_behind
    print(f"tip and days behind agree with git log: {'yes' if agree else 'no'}")
    subjects = {c.sha: c.subject for c in snapshot.candidates}
    for sha, rec in snapshot.recognised.items():
        fork = f" in {rec.fork_sha[:10]}" if rec.fork_sha else ""
        detail = f" ({rec.detail})" if rec.detail else ""
        print(f"  {rec.method}: {sha[:10]}{fork} {subjects[sha][:70]!r}{detail}")


def measure(repo: GitRepo, window: Window, config: SluiceConfig) -> None:
    print(f"\n== {window.label} ==\nrefs: fork {window.fork}, upstream {window.upstream}")
    started = time.perf_counter()
    snapshot = take_snapshot(repo, fork_ref=window.fork, upstream_ref=window.upstream, config=config)
    print_snapshot(snapshot, time.perf_counter() - started)
    print_truth(git_truth(repo, snapshot.fork_head, snapshot.upstream_head), snapshot)


def merge_windows(repo: GitRepo, fork: str, picks: Sequence[tuple[int, int]]) -> list[Window]:
    """Earlier windows from the fork's first-parent upstream merges (newest first)."""
    out = repo.run("log", "--first-parent", "--format=%H %s", repo.resolve(fork), "--")
    merges = []
    for line in out.splitlines():
        sha, _, subject = line.partition(" ")
        found = MERGE_SUBJECT.match(subject)
        took = repo.resolve_optional(found.group(1)) if found else None
        if took is not None:
            merges.append((sha, took, subject))
    windows: list[Window] = []
    for older, newer in picks:
        if older < len(merges):
            fork_sha, _, subject = merges[older]
            later = merges[newer][2]
            label = f"window {len(windows) + 1}: trunk as of {subject!r}, upstream as {later!r} took it"
            windows.append(Window(label, fork_sha, merges[newer][1]))
    return windows


def run_sections(repo: Path, *, fork: str, upstream: str) -> None:
    """The other real-history sections, each skipped with a note when its module is not there."""
    for name in SECTIONS:
        path = Path(__file__).with_name(f"{name}.py")
        if not path.exists():
            print(f"\n{name}: skipped (benchmarks/{name}.py not present)")
            continue
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while the class is made
        spec.loader.exec_module(module)
        print(f"\n== {name} ==", flush=True)
        module.run(repo, fork=fork, upstream=upstream)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("path", nargs="?", help="a clone or mirror holding fork trunk and upstream")
    parser.add_argument("--fork", default="main", help="fork trunk ref (default main)")
    parser.add_argument("--upstream", default="upstream", help="upstream ref (default upstream)")
    parser.add_argument("--window", action="append", default=[], metavar="FORK:UPSTREAM", help="a window")
    parser.add_argument(
        "--merge-window",
        action="append",
        default=[],
        metavar="OLDER,NEWER",
        help="trunk as of the OLDER-th newest upstream merge, upstream as the NEWER-th took it "
        f"(0 = the newest; default {' '.join(f'{a},{b}' for a, b in DEFAULT_WINDOWS)})",
    )
    parser.add_argument("--recognition-only", action="store_true", help="skip the other sections")
    args = parser.parse_args(argv)
    if not args.path:
        print("skipped: no repository given")
        return 0
    if any(":" not in w for w in args.window):
        parser.error("--window takes FORK:UPSTREAM, e.g. 5c02602bd6:407b8a3b53")
    if any(not re.fullmatch(r"\d+,\d+", w) for w in args.merge_window):
        parser.error("--merge-window takes two merge indices OLDER,NEWER, e.g. 10,0")
    try:
        measure_all(GitRepo(Path(args.path)), args)
    except SluiceError as exc:
        print(f"real_history: error: {exc}", file=sys.stderr)
        return 2
    return 0


def measure_all(repo: GitRepo, args: argparse.Namespace) -> None:
    config = SluiceConfig()  # what a fork gets before it writes a .github/sluice.yml
    print(f"repository: {repo.path}")
    windows = [Window("given refs", args.fork, args.upstream)]
    if args.window:
        windows += [Window(f"window {i}", *w.split(":", 1)) for i, w in enumerate(args.window, 1)]
    else:
        picks = [tuple(int(i) for i in w.split(",")) for w in args.merge_window] or DEFAULT_WINDOWS
        windows += merge_windows(repo, args.fork, [(a, b) for a, b in picks])
    for window in windows:
        measure(repo, window, config)
    if not args.recognition_only:
        run_sections(repo.path, fork=args.fork, upstream=args.upstream)


if __name__ == "__main__":
    sys.exit(main())
