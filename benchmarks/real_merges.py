"""Replay a fork's upstream merges; compare Sluice's resolution of each conflicted file with the landed one.

Intel's XPU fork ingests upstream with the `merge` strategy: a first-parent "Merge OpenAI Triton commit `X`
(#N)" merge whose second parent is a PR branch that starts with "Merge commit '<X>'": the merge an engineer
made of upstream commit X onto fork trunk, conflicts resolved by hand, followed by fix commits. Each such
commit is replayed: Sluice merges X onto that commit's first parent as `pick --strategy merge --dry-run`
would, and every file git reports as conflicted is compared with the file the engineer committed there:
identical, different (a candidate misplacement to study), or left to a human.

    python benchmarks/real_merges.py PATH [--fork main] [--merges 40] [--show 20]

All writing (merge-tree's trees, probe objects) goes to a `--shared` clone in a temporary directory that
is removed at the end; PATH itself is only read. Without PATH it prints "skipped: no repository given".
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._history import shared_clone
from bot.core.config import SluiceConfig
from bot.core.errors import SluiceError
from bot.core.models import CommitInfo
from bot.flows.pick import Picker
from bot.git.repo import GitRepo

MERGE_GREP = "Merge OpenAI Triton commit"
MERGE_COMMIT = re.compile(r"^Merge commit '([0-9a-f]{40})'")


@dataclass(frozen=True)
class Replay:
    """One engineer's merge of an upstream commit: `landed` has parents (`fork`, `upstream`)."""

    pr_merge: str  # the first-parent merge on fork trunk
    landed: str  # the "Merge commit '<X>'" commit
    fork: str
    upstream: str


@dataclass(frozen=True)
class FileOutcome:
    replay: Replay
    path: str
    verdict: str  # identical | different | human
    cls: str  # the conflict class Sluice gave the file
    detail: str  # the reason, for a human; the rules and the size of the difference otherwise


def find_replays(repo: GitRepo, fork: str, limit: int) -> list[Replay]:
    """The newest `limit` upstream merges on `fork`'s first-parent line, newest first."""
    out = repo.run("log", "--first-parent", f"--grep={MERGE_GREP}", "--format=%H %P", fork, "--")
    found: list[Replay] = []
    for line in out.splitlines():
        pr_merge, *parents = line.split()
        replay = _replay_of(repo, pr_merge, parents) if len(parents) == 2 else None
        if replay is not None:
            found.append(replay)
        if len(found) == limit:
            break
    return found


def _replay_of(repo: GitRepo, pr_merge: str, parents: Sequence[str]) -> Replay | None:
    """The PR branch's "Merge commit '<X>'" commit: the oldest of its first-parent commits not on trunk."""
    listed = repo.run("rev-list", "--first-parent", "--format=%P%x00%s", parents[1], "--not", parents[0])
    for header, body in zip(listed.splitlines()[::2], listed.splitlines()[1::2], strict=False):
        landed = header.removeprefix("commit ")
        merge_parents, _, subject = body.partition("\0")
        named = MERGE_COMMIT.match(subject)
        sides = merge_parents.split()
        if named and len(sides) == 2 and sides[1] == named.group(1):
            return Replay(pr_merge, landed, sides[0], sides[1])
    return None


def replay_merge(picker: Picker, replay: Replay, info: CommitInfo) -> list[FileOutcome]:
    """Sluice's merge of the upstream commit onto the engineer's base, compared file by file."""
    repo = picker.repo
    result = picker.git.merge(replay.fork, replay.upstream)
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="sluice-real-merges-") as tmp:
        for path, stages in sorted(result.stages.items()):
            # The private step is the one `Picker.step` runs per conflicted file; it keeps the file's text.
            outcome = picker._file(path, stages, info, replay.fork, Path(tmp))
            landed = repo.read_file(replay.landed, path)
            verdict = outcome.verdict
            outcomes.append(
                _compare(replay, path, outcome.text, outcome.how, verdict.cls, verdict.reason, landed)
            )
    return outcomes


def _compare(
    replay: Replay, path: str, text: str | None, how: str | None, cls: str, reason: str, landed: bytes | None
) -> FileOutcome:
    if text is None:
        return FileOutcome(replay, path, "human", cls, reason)
    if landed is None:
        return FileOutcome(replay, path, "different", cls, f"{how}: the engineers deleted the file")
    theirs = landed.decode("utf-8", "surrogateescape")
    if theirs == text:
        return FileOutcome(replay, path, "identical", cls, how or "no rule needed")
    diff = list(difflib.unified_diff(theirs.splitlines(), text.splitlines(), lineterm="", n=0))
    plus = sum(1 for line in diff if line.startswith("+") and not line.startswith("+++"))
    minus = sum(1 for line in diff if line.startswith("-") and not line.startswith("---"))
    return FileOutcome(
        replay, path, "different", cls, f"{how}: +{plus} -{minus} lines against the landed file"
    )


def run(repo: Path, *, fork: str, upstream: str, merges: int = 40, show: int = 20) -> None:
    """Print the replay figures for the newest `merges` upstream merges on `fork` (`upstream` is unused:
    each merge names its own upstream commit)."""
    del upstream
    with shared_clone(repo, prefix="sluice-real-merges-") as clone:
        started = time.perf_counter()
        replays = find_replays(clone, clone.resolve(fork), merges)
        picker = Picker(clone, SluiceConfig(), evidence=False)  # no blame: the evidence is for people
        outcomes: list[FileOutcome] = []
        failed: list[str] = []
        for replay in replays:
            try:
                info = clone.commits(replay.upstream, "-1")[-1]
                outcomes += replay_merge(picker, replay, info)
            except SluiceError as err:
                failed.append(f"{replay.pr_merge[:10]}: {err.message}")
        print_figures(replays, outcomes, failed, show=show, seconds=time.perf_counter() - started)


def print_figures(
    replays: Sequence[Replay],
    outcomes: Sequence[FileOutcome],
    failed: Sequence[str],
    *,
    show: int,
    seconds: float,
) -> None:
    counts = Counter(o.verdict for o in outcomes)
    conflicted = {o.replay.pr_merge for o in outcomes}
    print(f"real merges: upstream merges replayed: {len(replays)} ({len(conflicted)} with conflicts)")
    print(f"real merges: conflicted files: {len(outcomes)}")
    for verdict in ("identical", "different"):
        print(f"real merges: {verdict}: {counts[verdict]}")
    classes = Counter(o.cls for o in outcomes if o.verdict == "human")
    print(
        f"real merges: human: {counts['human']} ({', '.join(f'{c} {n}' for c, n in sorted(classes.items()))})"
    )
    resolved = counts["identical"] + counts["different"]
    if resolved:
        share = f"{counts['identical']}/{resolved}"
        print(f"real merges: automatic resolutions identical to the landed file: {share}")
    print(f"real merges: replay time: {seconds:.1f} s")
    for line in failed:
        print(f"real merges: not replayed: {line}")
    different = [o for o in outcomes if o.verdict == "different"]
    if different:
        print("real merges: different (candidates to study):")
    for o in different[:show]:
        print(f"  {o.replay.pr_merge[:10]} {o.replay.upstream[:10]} {o.path}: {o.detail}")
    for o in (o for o in outcomes if o.verdict == "identical"):
        print(f"  identical: {o.replay.pr_merge[:10]} {o.path} ({o.detail})")
    humans = [o for o in outcomes if o.verdict == "human"]
    if humans and show:
        print("real merges: left to a human (class: why):")
    for o in humans[:show]:
        print(f"  {o.replay.pr_merge[:10]} {o.path} ({o.cls}: {o.detail})")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("path", nargs="?", type=Path, help="a clone of the fork (only read)")
    parser.add_argument("--fork", default="main", help="fork trunk (default: main)")
    parser.add_argument("--upstream", default="upstream", help="unused: each merge names its upstream commit")
    parser.add_argument("--merges", type=int, default=40, help="how many of the newest merges (default: 40)")
    parser.add_argument(
        "--show",
        type=int,
        default=20,
        help="how many different files, and files left to a human, to list (default: 20)",
    )
    args = parser.parse_args(argv)
    if args.path is None:
        print("skipped: no repository given")
        return 0
    run(args.path, fork=args.fork, upstream=args.upstream, merges=args.merges, show=args.show)
    return 0


if __name__ == "__main__":
    sys.exit(main())
