"""The planner with a calibrated risk model on a merge-style fork's real windows: culprits chained, bundled.

    python benchmarks/real_risk.py PATH [--fork REF] [--limit N] [--cache FILE] [--model FILE]

Each "Merge OpenAI Triton commit `X` (#N)" first-parent merge of fork trunk is one window: the upstream
commits fork trunk lacked before the merge, up to X. A window's culprits are its upstream commits that the
fix commits of the same merge PR (the merge's second parent, past X) revert or name (an upstream SHA, an
upstream PR URL, or a `#N` of a window commit that is not the fix commit's own PR). This is a minimal
labelling of its own; `sluice calibrate`'s mining is the full one. Each window is planned by today's rules
(the features the planner computed then), then re-classified with a model: the one given, else Sluice's
default, else one fitted here on the earlier 60 % of the windows (a time split: figures are given for the
later 40 %, held out). Prints the share of commits bundled and of culprits chained, and the plan time with
and without a model. PATH is only read: planning's merge-tree objects go to a `--shared` clone in a
temporary directory. With no PATH it prints "skipped: no repository given" and exits 0.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._history import shared_clone
from bot.core.calibrated import LoadedModel, calibrated_selection, with_probability
from bot.core.config import SluiceConfig
from bot.core.errors import SluiceError
from bot.core.models import Plan, PlannedCommit
from bot.core.planner import classify, make_plan
from bot.core.risk_model import Provenance, RiskModel, commit_features
from bot.flows.engine import PendingAnalysis, Snapshot, analyse_pending, take_snapshot
from bot.flows.risk_files import default_model, read_model
from bot.git.repo import GitRepo

MERGE_SUBJECT = re.compile(r"^Merge OpenAI (?:Triton )?commit `([0-9a-f]{7,40})`")
REVERT = re.compile(r'^Revert "(?P<title>.+)"')
HEX = re.compile(r"\b[0-9a-f]{7,40}\b")
UPSTREAM_PULL = re.compile(r"github\.com/(?:triton-lang|openai)/triton/pull/(\d+)")
PR_REF = re.compile(r"#(\d+)")
OWN_PR = re.compile(r"\(#(\d+)\)\s*$")
TRAIN_SHARE = 0.6
SHARES = (0.1, 0.2, 0.3)
CONFIG = SluiceConfig.model_validate({"risk": {"model": "none"}})


@dataclass(frozen=True)
class Window:
    merge: str
    fork: str  # fork trunk before the merge
    branch: str  # the merge PR's head: X, then the fix commits
    upstream: str  # X
    when: int


@dataclass(frozen=True)
class Row:
    """One planned window: its commits as the rules planned them, which of them were chained, the culprits."""

    merge: str
    when: int
    commits: tuple[PlannedCommit, ...]
    chained: frozenset[str]
    fixes: tuple[tuple[str, str], ...]  # (sha, message) of the merge PR's own commits

    @property
    def culprits(self) -> frozenset[str]:
        return culprits(self.commits, self.fixes)


def windows(repo: GitRepo, fork: str) -> list[Window]:
    """The fork's upstream merges with their PR branch, oldest first."""
    out = repo.run("log", "--first-parent", "--format=%H %ct %P%x00%s", repo.resolve(fork), "--")
    found = []
    for line in out.splitlines():
        head, _, subject = line.partition("\x00")
        sha, when, *parents = head.split()
        took = MERGE_SUBJECT.match(subject)
        upstream = repo.resolve_optional(took.group(1)) if took else None
        if upstream and len(parents) == 2:
            found.append(Window(sha, parents[0], parents[1], upstream, int(when)))
    return found[::-1]


def messages(repo: GitRepo, *revs: str) -> list[tuple[str, str]]:
    out = repo.run("log", "--no-merges", "--format=%H%x00%B%x01", *revs, "--")
    return [tuple(chunk.strip("\n").split("\x00", 1)) for chunk in out.split("\x01") if "\x00" in chunk]  # type: ignore[misc]


def culprits(commits: Sequence[PlannedCommit], fixes: Iterable[tuple[str, str]]) -> frozenset[str]:
    """Window commits that a fix commit reverts, or names by SHA, upstream URL or PR number."""
    by_title = {c.subject: c.sha for c in commits}
    by_pr = {m.group(1): c.sha for c in commits if (m := OWN_PR.search(c.subject))}
    named: set[str] = set()
    for _, message in fixes:
        subject = message.split("\n", 1)[0]
        if (revert := REVERT.match(subject)) and revert.group("title") in by_title:
            named.add(by_title[revert.group("title")])
        tokens = set(HEX.findall(message))  # an abbreviated SHA, or one in a commit URL
        named |= {c.sha for c in commits for t in tokens if c.sha.startswith(t)}
        own = OWN_PR.search(subject)
        refs = set(PR_REF.findall(message)) | set(UPSTREAM_PULL.findall(message))
        refs -= {own.group(1)} if own else set()
        named |= {by_pr[n] for n in refs if n in by_pr}
    return frozenset(named)


def plan_of(
    window: Window, snapshot: Snapshot, analysis: PendingAnalysis, *, model: LoadedModel | None = None
) -> Plan:
    """make_plan on one window's snapshot and analysis, with `model` or none."""
    return make_plan(
        status=snapshot.status,
        fork_ref=window.fork,
        upstream_ref=window.upstream,
        config=CONFIG,
        commits=analysis.commits,
        stream_patches=analysis.stream_patches,
        footprint=analysis.footprint,
        model=model,
    )


def plan_window(repo: GitRepo, window: Window) -> Row:
    snapshot = take_snapshot(repo, fork_ref=window.fork, upstream_ref=window.upstream, config=CONFIG)
    analysis = analyse_pending(repo, snapshot, config=CONFIG)
    plan = plan_of(window, snapshot, analysis)
    commits = [c for g in [*plan.bundles, *plan.chains] for c in g.commits]
    order = {c.sha: c.position for c in analysis.commits}
    commits.sort(key=lambda c: order[c.sha])
    fixes = messages(repo, window.branch, "--not", window.fork, window.upstream)
    chained = frozenset(c.sha for ch in plan.chains for c in ch.commits)
    return Row(window.merge, window.when, tuple(commits), chained, tuple(fixes))


def to_json(row: Row) -> str:
    return json.dumps(
        {
            "merge": row.merge,
            "when": row.when,
            "commits": [c.model_dump(mode="json") for c in row.commits],
            "chained": sorted(row.chained),
            "fixes": [list(f) for f in row.fixes],
        }
    )


def from_json(line: str) -> Row:
    d = json.loads(line)
    commits = tuple(PlannedCommit.model_validate(c) for c in d["commits"])
    fixes = tuple((sha, message) for sha, message in d["fixes"])
    return Row(d["merge"], d["when"], commits, frozenset(d["chained"]), fixes)


def mine(repo: GitRepo, picked: Sequence[Window], cache: Path | None) -> list[Row]:
    """One rules plan per window, cached by merge SHA in `cache` (JSON lines) when given."""
    known = {}
    if cache and cache.exists():
        known = {r.merge: r for r in map(from_json, cache.read_text().splitlines())}
    rows = []
    for n, window in enumerate(picked, 1):
        if window.merge not in known:
            started = time.perf_counter()
            known[window.merge] = plan_window(repo, window)
            seconds = time.perf_counter() - started
            print(f"  planned window {n}/{len(picked)} {window.merge[:10]} in {seconds:.1f} s", flush=True)
            if cache:
                with cache.open("a") as out:
                    out.write(to_json(known[window.merge]) + "\n")
        rows.append(known[window.merge])
    return rows


def fit(rows: Sequence[Row], *, c: float = 1.0) -> RiskModel:
    """L2-regularised logistic regression by Newton's method (numpy): deterministic, no other dependency."""
    import numpy as np

    samples = [(commit_features(x, config=CONFIG), x.sha in r.culprits) for r in rows for x in r.commits]
    names = sorted({k for f, _ in samples for k in f})
    X = np.array([[1.0, *(f.get(k, 0.0) for k in names)] for f, _ in samples])
    y = np.array([1.0 if hit else 0.0 for _, hit in samples])
    w = np.zeros(X.shape[1])
    penalty = np.eye(X.shape[1]) / c
    penalty[0, 0] = 0.0  # the intercept is not shrunk
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-X @ w))
        step = np.linalg.solve(X.T @ (X * (p * (1 - p))[:, None]) + penalty, X.T @ (y - p) - penalty @ w)
        w += step
        if float(np.abs(step).max()) < 1e-8:
            break
    coefficients = {k: round(float(v), 6) for k, v in zip(names, w[1:], strict=True) if abs(v) > 1e-9}
    provenance = Provenance(
        source="benchmarks/real_risk.py (quick fit on the earlier windows)",
        commits=len(samples),
        positives=int(y.sum()),
        method=f"L2 logistic regression, Newton, C={c}",
    )
    return RiskModel(intercept=round(float(w[0]), 6), coefficients=coefficients, provenance=provenance)


def chained_with(row: Row, model: RiskModel, config: SluiceConfig) -> frozenset[str]:
    scored = [with_probability(c, model, config) for c in row.commits]
    selection = calibrated_selection(scored, config)
    _, chains = classify(scored, symbol_keys={}, prior=(), ingested=set(), config=config, selection=selection)
    return frozenset(c.sha for ch in chains for c in ch.commits)


def report(label: str, rows: Sequence[Row], chained: Sequence[frozenset[str]]) -> None:
    total = sum(len(r.commits) for r in rows)
    bad = sum(len(r.culprits) for r in rows)
    caught = sum(len(r.culprits & ch) for r, ch in zip(rows, chained, strict=True))
    n_chained = sum(len(ch) for ch in chained)
    bundled = 100 * (total - n_chained) / total if total else 0.0
    recall = 100 * caught / bad if bad else 0.0
    print(f"{label}: {bundled:.1f} % of {total} commits bundled, {recall:.1f} % of {bad} culprits chained")


def plan_time(repo: GitRepo, window: Window, model: RiskModel, *, repeat: int = 21) -> None:
    """make_plan on one window's analysis, with and without the model, interleaved (the git work before it,
    snapshot and analysis, is the same code either way and is timed once)."""
    started = time.perf_counter()
    snapshot = take_snapshot(repo, fork_ref=window.fork, upstream_ref=window.upstream, config=CONFIG)
    analysis = analyse_pending(repo, snapshot, config=CONFIG)
    print(f"snapshot and analysis of window {window.merge[:10]}: {time.perf_counter() - started:.1f} s")
    loaded = LoadedModel("benchmark", model)
    times: dict[str, list[float]] = {"without a model": [], "with a model": []}
    for _ in range(repeat):
        for label, arg in (("without a model", None), ("with a model", loaded)):
            started = time.perf_counter()
            plan_of(window, snapshot, analysis, model=arg)
            times[label].append(time.perf_counter() - started)
    for label, samples in times.items():
        low, high = statistics.quantiles(samples, n=4)[0], statistics.quantiles(samples, n=4)[2]
        iqr = f"IQR {low * 1000:.2f}–{high * 1000:.2f} ms, {repeat} runs"
        median = statistics.median(samples) * 1000
        print(f"make_plan {label} ({len(analysis.commits)} commits): median {median:.2f} ms ({iqr})")


def choose_model(args: argparse.Namespace, train: Sequence[Row]) -> tuple[RiskModel, str]:
    if args.model:
        return read_model(Path(args.model)), f"the given model {args.model}"
    shipped = default_model()
    if shipped is not None:
        return shipped, "Sluice's default model"
    model = fit(train)
    return model, f"fitted here on the {len(train)} earlier windows (no default model installed)"


def measure(repo: GitRepo, args: argparse.Namespace) -> None:
    every = windows(repo, args.fork)
    picked = every[-args.limit :] if args.limit else every
    if args.cached_only and args.cache and Path(args.cache).exists():  # iterate on what is mined so far
        mined = {json.loads(line)["merge"] for line in Path(args.cache).read_text().splitlines()}
        picked = [w for w in picked if w.merge in mined]
    print(f"merge windows: {len(every)}, planned: {len(picked)}")
    rows = [r for r in mine(repo, picked, Path(args.cache) if args.cache else None) if r.commits]
    split = max(1, math.floor(len(rows) * TRAIN_SHARE))
    train, test = rows[:split], rows[split:]
    print(f"windows with pending commits: {len(rows)} (fit {len(train)}, held out {len(test)})")
    report("all windows, today's rules", rows, [r.chained for r in rows])
    model, where = choose_model(args, train)
    print(f"model: {where}; {model.provenance.commits} commits, {model.provenance.positives} culprits")
    report("held out, today's rules", test, [r.chained for r in test])
    settings = [("fewest expected tier runs", {})] + [
        (f"chain_share {s}", {"chain_share": s}) for s in SHARES
    ]
    for label, risk in settings:
        config = SluiceConfig.model_validate({"risk": {"model": "none", **risk}})
        report(f"held out, model, {label}", test, [chained_with(r, model, config) for r in test])
    # A baseline for the model's features: the probability rises with the changed lines, nothing else.
    by_size = RiskModel(
        intercept=-4.0, coefficients={"log2-lines": 0.3}, provenance=Provenance(source="size")
    )
    for share in SHARES:
        config = SluiceConfig.model_validate({"risk": {"model": "none", "chain_share": share}})
        report(
            f"held out, size alone, chain_share {share}",
            test,
            [chained_with(r, by_size, config) for r in test],
        )
    sizes = {r.merge: len(r.commits) for r in rows[-10:]}  # the largest of the newest windows
    plan_time(repo, max((w for w in picked if w.merge in sizes), key=lambda w: sizes[w.merge]), model)


def run(repo: Path, *, fork: str, upstream: str) -> None:
    """The section of benchmarks/real_history.py: every window, no cache."""
    del upstream  # the windows come from fork trunk's merges
    with shared_clone(repo, prefix="sluice-real-risk-") as clone:
        measure(clone, argparse.Namespace(fork=fork, limit=0, cache=None, model=None, cached_only=False))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("path", nargs="?", help="a repository holding fork trunk and upstream (only read)")
    parser.add_argument("--fork", default="main", help="fork trunk ref (default main)")
    parser.add_argument("--limit", type=int, default=0, help="plan only the newest N windows")
    parser.add_argument("--cache", help="JSON-lines file of planned windows, reused and extended")
    parser.add_argument("--model", help="a risk model file (default: Sluice's default, else a quick fit)")
    parser.add_argument("--cached-only", action="store_true", help="only the windows --cache already holds")
    args = parser.parse_args(argv)
    if not args.path:
        print("skipped: no repository given")
        return 0
    try:
        with shared_clone(Path(args.path), prefix="sluice-real-risk-") as clone:
            measure(clone, args)
    except SluiceError as exc:
        print(f"real_risk: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
