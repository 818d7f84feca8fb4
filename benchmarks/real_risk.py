"""The planner with a calibrated risk model on a fork's real ingestions: culprits chained, commits bundled.

    python benchmarks/real_risk.py PATH [--fork REF] [--upstream REF] [--since DATE] [--until DATE]
        [--train-since DATE] [--limit N] [--cache FILE]

The ingestions, their planned commits and their culprits are exactly those of `sluice calibrate`: the same
mining (`bot.flows.calibrate`), labels and feature cache (the planner as of each ingestion). A time split
(calibrate's: the earlier 70 % of commits) fits a model on the earlier ingestions only, with the culprits
the fork had named by the split (a fix that came later is not known to it); on the later ones,
held out, the planner itself (`calibrated_selection` and `classify`, structural rules included) chains
commits with that model at each setting: the fewest-expected-runs threshold and `risk.chain_share`. It
prints the share of commits bundled and of culprits chained beside today's rules, says whether the issue's
goal (>= 80 % of culprits chained at >= 70 % bundled) is met, sweeps `chain_share` finely for the setting
that chains the most culprits with 70 % bundled (the trade-off's best) and where its chain budget goes
(commits chained for their own probability, joining a chain they depend on, or by a structural rule, with
the culprits each catches), and times `make_plan` with and without a model on the largest held-out window.
A rolling origin (a model refitted at each month, judged on that month, the months pooled) gives the same
figures on more culprits. Two lines put them in context: how often a commit broke the fork in the rows
fitted on, in those held out and in each month (the drift a fitted model meets), and the ceiling: the
trade-off's best on the same ingestions with a model fitted on every ingestion, the judged ones too (in
sample, so what the features and the planner can do at all when the model has seen the culprits).
`--train-since` (earlier than `--since`) fits every model on a longer history while the ingestions judged
stay those from `--since`: whether older history helps. PATH is only read: planning's merge-tree objects go
to a `--shared` clone in a temporary directory. With no PATH it prints "skipped: no repository given" and
exits 0.

`culprits` and `windows` (a minimal labelling of merge PRs' own fixes) are what benchmarks/simulate_bench.py
replays.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._history import shared_clone
from bot.core import fitting
from bot.core.calibrated import LoadedModel, Selection, calibrated_selection, with_probability
from bot.core.config import SluiceConfig
from bot.core.errors import SluiceError
from bot.core.fitting import Row
from bot.core.models import Plan, PlannedCommit
from bot.core.planner import classify, make_plan
from bot.core.risk_model import MODEL_SCHEMA, Provenance, RiskModel, quantiles_of
from bot.flows import calibrate
from bot.flows.calibrate import CalibrateOptions
from bot.flows.engine import PendingAnalysis, Snapshot, analyse_pending, load_repo_config, take_snapshot
from bot.flows.mining import IngestionWindow
from bot.flows.risk_files import default_model
from bot.git.repo import GitRepo

MERGE_SUBJECT = re.compile(r"^Merge OpenAI (?:Triton )?commit `([0-9a-f]{7,40})`")
REVERT = re.compile(r'^Revert "(?P<title>.+)"')
HEX = re.compile(r"\b[0-9a-f]{7,40}\b")
UPSTREAM_PULL = re.compile(r"github\.com/(?:triton-lang|openai)/triton/pull/(\d+)")
PR_REF = re.compile(r"#(\d+)")
OWN_PR = re.compile(r"\(#(\d+)\)\s*$")
TRAIN_SHARE = 0.7  # calibrate's time split
# Rolling origin: refit at each calendar month from the first one after the earlier ROLLING_FROM of the
# commits, judge the month that follows; the months' figures are pooled (more culprits than one split).
ROLLING_FROM = 0.4
SHARES = (0.15, 0.2, 0.25, 0.3)
SWEEP = tuple(round(0.1 + 0.0025 * i, 4) for i in range(121))  # chain_share 0.1 … 0.4: the best at the goal
assert set(SHARES) <= set(SWEEP)  # the sweep gives the figures at each of SHARES too
GOAL_RECALL, GOAL_BUNDLED = 0.8, 0.7
# The trade-off's best is judged on few culprits (one of 50 is 2 points): resample the judged ingestions
# (seeded, so every run prints the same interval) and take the best setting again in each resample.
RESAMPLES, SEED = 2000, 12
# Where the planner puts a commit: a chain, for its own probability, for a dependency on a chained commit
# (which it must follow), or by a structural rule (critical pin, revert pair); or a bundle.
OWN, DEPENDENT, STRUCTURAL, BUNDLED = (
    "chained for its probability",
    "joins a chain it depends on",
    "structural",
    "bundled",
)
PLACES = (OWN, DEPENDENT, STRUCTURAL, BUNDLED)
SINCE, UNTIL = "2025-02-01", "2025-10-01"  # the default model's range: history before the cutoff
CACHE = Path(tempfile.gettempdir()) / "sluice-calibrate" / "intel-features.jsonl"  # make_default_model's
CONFIG = SluiceConfig.model_validate({"risk": {"model": "none"}})


@dataclass(frozen=True)
class Window:
    merge: str
    fork: str  # fork trunk before the merge
    branch: str  # the merge PR's head: X, then the fix commits
    upstream: str  # X
    when: int


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


@dataclass(frozen=True)
class Mined:
    """One past ingestion as `sluice calibrate` mines it: the planner's commits then, and its culprits."""

    window: IngestionWindow
    commits: tuple[PlannedCommit, ...]
    culprits: frozenset[str]


def mine(repo: GitRepo, args: argparse.Namespace) -> tuple[SluiceConfig, list[Mined], list[Row]]:
    """Every ingestion in range, mined exactly as `sluice calibrate` mines it (same cache, same labels)."""
    fork_head, upstream_head = repo.resolve(args.fork), repo.resolve(args.upstream)
    config = load_repo_config(repo, fork_head, args.fork)
    options = CalibrateOptions(
        since=mined_from(args),
        until=calibrate.parse_date(args.until, "--until"),
        limit=args.limit or None,
    )
    windows = calibrate.find_windows(
        repo, config, fork_head=fork_head, upstream_head=upstream_head, options=options
    )
    cache = calibrate.FeatureCache(Path(args.cache) if args.cache else None, config=config)
    rows, failed = calibrate.mine(repo, config, windows, cache=cache, progress=_progress)
    for note in failed:
        print(f"  not planned: {note}")
    broke = {(r.window, r.sha) for r in rows if r.outcome}
    mined = []
    for window in windows:
        planned = cache.get(window)
        if planned:
            bad = frozenset(c.sha for c in planned if (window.id, c.sha) in broke)
            mined.append(Mined(window, tuple(planned), bad))
    return config, mined, rows


def judged_from(args: argparse.Namespace) -> int | None:
    """The first ingestion judged (`--since`), as epoch seconds; None: all of them."""
    return calibrate.parse_date(args.since, "--since") if args.since else None


def mined_from(args: argparse.Namespace) -> int | None:
    """Mining starts at `--since`, or at `--train-since` when that is earlier; None: all history."""
    judged = judged_from(args)
    fitted = calibrate.parse_date(args.train_since, "--train-since") if args.train_since else None
    return judged if judged is None or fitted is None else min(judged, fitted)


def _progress(line: str) -> None:
    if line.endswith(")") or "planning" in line:  # the windows planned now, not the cached ones
        print(f"  {line}", flush=True)


def rules_chained(
    commits: Sequence[PlannedCommit], config: SluiceConfig, selection: Selection | None = None
) -> frozenset[str]:
    """The commits the planner's classification chains: by `selection`, else by today's rules."""
    _, chains = classify(
        commits, symbol_keys={}, prior=(), ingested=set(), config=config, selection=selection
    )
    return frozenset(c.sha for ch in chains for c in ch.commits)


@dataclass(frozen=True)
class Judged:
    """One held-out ingestion's commits as the planner scores them with `model` (scored once: only the
    selection and classification depend on `risk.chain_share`)."""

    scored: tuple[PlannedCommit, ...]
    model: RiskModel

    @classmethod
    def of(cls, commits: Sequence[PlannedCommit], model: RiskModel, config: SluiceConfig) -> Judged:
        return cls(tuple(with_probability(c, model, config) for c in commits), model)

    def chained(self, config: SluiceConfig) -> frozenset[str]:
        """The commits the planner chains under `config`: its own selection and classification."""
        return frozenset(sha for sha, where in self.placed(config).items() if where != BUNDLED)

    def placed(self, config: SluiceConfig) -> dict[str, str]:
        """Where the planner puts each commit under `config`, and why (one of PLACES). The selection's
        `chosen` are the structural commits and those chosen for their probability: a chained commit outside
        it joined its chain through a dependency."""
        selection = calibrated_selection(self.scored, config, self.model)
        chained = rules_chained(self.scored, config, selection)
        return {c.sha: place_of(c.sha, chained, selection) for c in self.scored}


def place_of(sha: str, chained: frozenset[str], selection: Selection) -> str:
    if sha not in chained:
        return BUNDLED
    if sha in selection.structural:
        return STRUCTURAL
    return OWN if sha in selection.chosen else DEPENDENT


def with_share(config: SluiceConfig, share: float) -> SluiceConfig:
    return config.model_copy(update={"risk": config.risk.model_copy(update={"chain_share": share})})


def chained_at(
    judged: Sequence[Judged], config: SluiceConfig, shares: Iterable[float]
) -> dict[float, list[frozenset[str]]]:
    """At each `risk.chain_share`: the commits the planner chains in each ingestion (scored as `judged`)."""
    return {share: [j.chained(with_share(config, share)) for j in judged] for share in shares}


def at_shares(
    mined: Sequence[Mined], judged: Sequence[Judged], config: SluiceConfig, shares: Iterable[float]
) -> dict[float, Figures]:
    """The planner's figures over `mined` (scored as `judged`) at each `risk.chain_share`."""
    return {share: figures(mined, chained) for share, chained in chained_at(judged, config, shares).items()}


def sweep(label: str, mined: Sequence[Mined], judged: Sequence[Judged], config: SluiceConfig) -> float | None:
    """Sweep `chain_share` over SWEEP: print the figures at each of SHARES, the trade-off's best and how
    far resampling the ingestions moves it; return the best setting (None when none bundles enough)."""
    swept = chained_at(judged, config, SWEEP)
    found = {share: figures(mined, chained) for share, chained in swept.items()}
    for share in SHARES:
        report(f"{label}, chain_share {share}", found[share], goal=True)
    best = report_sweep(label, found)
    report_resampled(label, resampled_best(mined, swept))
    return best


def best_at_goal(found: Mapping[float, Figures]) -> tuple[float, Figures] | None:
    """The setting that chains the most culprits with at least GOAL_BUNDLED of the commits bundled (the
    most bundled among equals); None when none bundles that much."""
    kept = [(f.recall, f.bundled, share) for share, f in found.items() if f.bundled >= GOAL_BUNDLED]
    if not kept:
        return None
    share = max(kept)[2]
    return share, found[share]


def report_sweep(label: str, found: Mapping[float, Figures], *, goal: bool = True) -> float | None:
    """Print the trade-off's best setting (`goal`: and whether it meets the issue's goal); return its
    `chain_share` (None when none bundles enough)."""
    best = best_at_goal(found)
    if best is None:
        print(f"{label}: no chain_share in {min(found)}–{max(found)} bundles {GOAL_BUNDLED:.0%}")
        return None
    share, figs = best
    report(
        f"{label}, best chain_share at >= {GOAL_BUNDLED:.0%} bundled ({share}, swept {min(found)}–"
        f"{max(found)})",
        figs,
        goal=goal,
    )
    return share


@dataclass(frozen=True)
class Resampled:
    """The trade-off's best (the most culprits chained at >= GOAL_BUNDLED bundled, the setting chosen
    again in each resample) over bootstrap resamples of the judged ingestions."""

    ingestions: int
    resamples: int
    median: float
    low: float  # its 2.5th and 97.5th percentiles
    high: float
    met: float  # share of the resamples that meet the goal


def resampled_best(
    mined: Sequence[Mined],
    chained: Mapping[float, Sequence[frozenset[str]]],
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> Resampled:
    """Draw the judged ingestions with replacement `resamples` times; in each draw take the setting that
    chains the most culprits with GOAL_BUNDLED of the commits bundled (a draw where none does counts as 0).
    It measures how much the figure owes to which ingestions happened to be judged, with the threshold
    chosen in hindsight each time; the models stay the ones fitted, so a refit's own variance is not in it."""
    rng = np.random.default_rng(seed)
    shares = sorted(chained)
    commits = np.array([len(m.commits) for m in mined])
    culprits = np.array([len(m.culprits) for m in mined])
    n_chained = np.array([[len(ch) for ch in chained[s]] for s in shares])  # (shares, ingestions)
    caught = np.array(
        [[len(m.culprits & ch) for m, ch in zip(mined, chained[s], strict=True)] for s in shares]
    )
    # How often each ingestion is drawn, per resample: (resamples, ingestions).
    draws = rng.multinomial(len(mined), np.full(len(mined), 1 / len(mined)), size=resamples)
    bundled = 1 - (draws @ n_chained.T) / np.maximum(draws @ commits, 1)[:, None]
    recall = (draws @ caught.T) / np.maximum(draws @ culprits, 1)[:, None]
    best = np.where(bundled >= GOAL_BUNDLED, recall, 0.0).max(axis=1)
    low, median, high = np.percentile(best, [2.5, 50, 97.5])
    return Resampled(
        len(mined), resamples, float(median), float(low), float(high), float(np.mean(best >= GOAL_RECALL))
    )


def report_resampled(label: str, found: Resampled) -> None:
    print(
        f"{label}, best at >= {GOAL_BUNDLED:.0%} bundled over {found.resamples} resamples of the "
        f"{found.ingestions} ingestions: {found.median:.1%} of culprits chained (95% interval "
        f"{found.low:.1%}–{found.high:.1%}); goal met in {found.met:.1%} of resamples",
        flush=True,
    )


def budget(
    mined: Sequence[Mined], judged: Sequence[Judged], config: SluiceConfig
) -> dict[str, tuple[int, int]]:
    """Per place (PLACES): how many commits the planner puts there under `config`, and how many culprits."""
    commits = dict.fromkeys(PLACES, 0)
    culprits = dict.fromkeys(PLACES, 0)
    for m, j in zip(mined, judged, strict=True):
        for sha, where in j.placed(config).items():
            commits[where] += 1
            culprits[where] += sha in m.culprits
    return {where: (commits[where], culprits[where]) for where in PLACES}


def report_budget(label: str, mined: Sequence[Mined], judged: Sequence[Judged], config: SluiceConfig) -> None:
    """Where the chain budget goes under `config`: commits and culprits per place."""
    parts = [
        f"{p} {n} commits ({k} culprit{'' if k == 1 else 's'})"
        for p, (n, k) in budget(mined, judged, config).items()
    ]
    print(f"{label}: " + "; ".join(parts), flush=True)


@dataclass(frozen=True)
class Figures:
    commits: int
    culprits: int
    bundled: float  # share of commits bundled
    recall: float  # share of culprits chained


def figures(mined: Sequence[Mined], chained: Sequence[frozenset[str]]) -> Figures:
    total = sum(len(m.commits) for m in mined)
    bad = sum(len(m.culprits) for m in mined)
    caught = sum(len(m.culprits & ch) for m, ch in zip(mined, chained, strict=True))
    n_chained = sum(len(ch) for ch in chained)
    return Figures(total, bad, (total - n_chained) / total if total else 0.0, caught / bad if bad else 0.0)


def report(label: str, found: Figures, *, goal: bool = False) -> None:
    line = (
        f"{label}: {found.bundled:.1%} of {found.commits} commits bundled, "
        f"{found.recall:.1%} of {found.culprits} culprits chained"
    )
    if goal:
        met = found.bundled >= GOAL_BUNDLED and found.recall >= GOAL_RECALL
        line += (
            f"  [goal >= {GOAL_RECALL:.0%} at >= {GOAL_BUNDLED:.0%} bundled: {'met' if met else 'missed'}]"
        )
    print(line, flush=True)


def held_out_model(
    train: Sequence[Row],
    plans: Mapping[str, Sequence[PlannedCommit]],
    *,
    source: str = "benchmarks/real_risk.py (fitted on the earlier ingestions only)",
) -> RiskModel:
    """The model `sluice calibrate` would fit on `train` only (`plans`: those rows' ingestions by id): the
    earlier rows for a held-out judgement, every row for the ceiling (`source` says which)."""
    fit = fitting.fit(train, c=1.0)
    provenance = Provenance(
        source=source,
        commits=len(train),
        positives=sum(r.outcome for r in train),
        method="bot.core.fitting.fit, C=1.0",
    )
    return RiskModel(
        schema=MODEL_SCHEMA,
        intercept=fit.intercept,
        coefficients=fit.coefficients,
        provenance=provenance,
        quantiles=quantiles_of(calibrate.stream_levels(plans, train, fit.score(train))),
    )


def month_starts(rows: Sequence[Row], *, after_share: float) -> list[int]:
    """The UTC month starts after the earlier `after_share` of the rows (by time), up to the last row."""
    times = sorted(r.time for r in rows)
    if not times:
        return []
    day = dt.datetime.fromtimestamp(times[min(round(len(times) * after_share), len(times) - 1)], dt.UTC)
    month = dt.datetime(day.year, day.month, 1, tzinfo=dt.UTC)
    starts: list[int] = []
    while True:
        month = dt.datetime(month.year + month.month // 12, month.month % 12 + 1, 1, tzinfo=dt.UTC)
        if month.timestamp() > times[-1]:
            return starts
        starts.append(int(month.timestamp()))


@dataclass(frozen=True)
class Fold:
    """One month of a rolling-origin evaluation: the ingestions judged, by a model fitted on all before."""

    start: int
    model: RiskModel
    judged: tuple[Mined, ...]


def rolling_folds(mined: Sequence[Mined], rows: Sequence[Row], starts: Sequence[int]) -> list[Fold]:
    """Per month start: the model fitted on every ingestion before it, with the culprits named by then
    (none when those hold no culprit, or only culprits), and the ingestions of that month, which it never
    saw."""
    folds = []
    for start, end in itertools.zip_longest(starts, starts[1:]):  # the last month runs to the last row
        train = fitting.as_known_at([r for r in rows if r.time < start], start)
        judged = tuple(m for m in mined if m.window.time >= start and (end is None or m.window.time < end))
        if judged and len({r.outcome for r in train}) == 2:
            earlier = {m.window.id: m.commits for m in mined if m.window.time < start}
            folds.append(Fold(start, held_out_model(train, earlier), judged))
    return folds


def rolling_origin(
    config: SluiceConfig, mined: Sequence[Mined], rows: Sequence[Row], *, since: int | None = None
) -> tuple[str, list[Mined]] | None:
    """The planner at each `chain_share` over a rolling origin: every month (after the earlier
    ROLLING_FROM of the rows from `since` on) judged by a model refitted on all that came before, the
    months pooled. Returns which months and the ingestions it judged (None when no month could be)."""
    starts = month_starts(judged_rows(rows, since), after_share=ROLLING_FROM)
    folds = rolling_folds(mined, rows, starts)
    if not folds:
        print("rolling origin: no month to judge (too little history before it)")
        return None
    first = dt.datetime.fromtimestamp(folds[0].start, dt.UTC).strftime("%Y-%m")
    mined_judged = [m for f in folds for m in f.judged]
    judged = [Judged.of(m.commits, f.model, config) for f in folds for m in f.judged]
    label = f"rolling origin ({len(folds)} months from {first}, refitted monthly)"
    best = sweep(label, mined_judged, judged, config)
    if best is not None:
        report_budget(f"{label}, at {best}", mined_judged, judged, with_share(config, best))
    return f"the rolling origin's {len(folds)} months from {first}", mined_judged


def ceiling(
    config: SluiceConfig, mined: Sequence[Mined], rows: Sequence[Row], judged: Mapping[str, Sequence[Mined]]
) -> None:
    """The trade-off's best on each set of `judged` ingestions (by label) with a model fitted on every mined
    ingestion, those judged included. Not a forecast: the ceiling of what the features and the planner can
    do on those culprits when the model has already seen them. A held-out figure near it means the model
    generalises and the features are what limits it; far below it, the fit."""
    model = held_out_model(
        rows,
        {m.window.id: m.commits for m in mined},
        source="benchmarks/real_risk.py (fitted on every ingestion: in sample)",
    )
    for label, part in judged.items():
        scored = [Judged.of(m.commits, model, config) for m in part]
        found = at_shares(part, scored, config, SWEEP)
        report_sweep(f"{label}, in sample (fitted on every ingestion, these too)", found, goal=False)


def culprit_rates(fitted: Sequence[Row], held_out: Sequence[Row]) -> str:
    """How often a commit broke the fork: in the rows fitted on (as known at the split), in those held out,
    and per month: the base rate a fitted model carries forward, against what came after."""

    def rate(part: Sequence[Row]) -> str:
        bad = sum(r.outcome for r in part)
        return f"{bad / len(part):.1%} ({bad} of {len(part)})" if part else "none"

    months = fitting.by_month([*fitted, *held_out])
    by_month = ", ".join(f"{month} {bad / n:.1%}" for month, n, bad in months)
    return f"culprits per commit: fitted {rate(fitted)}, held out {rate(held_out)}; by month {by_month}"


def judged_rows(rows: Sequence[Row], since: int | None) -> list[Row]:
    return [r for r in rows if since is None or r.time >= since]


def held_out(rows: Sequence[Row], since: int | None) -> tuple[list[Row], list[Row]]:
    """Calibrate's time split of the rows judged (those from `since` on): the later ones held out; every
    row before them is fitted on, those from before `since` too, with the culprits known by the split."""
    _, test = fitting.time_split(judged_rows(rows, since), TRAIN_SHARE)
    held = {r.window for r in test}
    earlier = [r for r in rows if r.window not in held]
    return (fitting.as_known_at(earlier, min(r.time for r in test)) if test else earlier), test


def measure(repo: GitRepo, args: argparse.Namespace) -> None:
    config, mined, rows = mine(repo, args)
    since = judged_from(args)
    train, test = held_out(rows, since)
    held = {r.window for r in test}
    test_windows = [m for m in mined if m.window.id in held]
    earlier = [m for m in mined if since is not None and m.window.time < since]
    fitted_only = f", {len(earlier)} of them before {args.since} only fitted on" if earlier else ""
    later = sum(r.outcome for r in rows if r.window not in held) - sum(r.outcome for r in train)
    print(
        f"ingestions mined: {len(mined)} ({len(rows)} upstream commits, {sum(r.outcome for r in rows)} "
        f"culprits{fitted_only}); held out: the newest {len(test_windows)} ({len(test)} commits), fitted on "
        f"the rest ({sum(r.outcome for r in train)} culprits named by the split, {later} only later)"
    )
    report(
        "held out, today's rules",
        figures(test_windows, [rules_chained(m.commits, config) for m in test_windows]),
    )
    if len({r.outcome for r in train}) < 2:
        print("no model fitted: the earlier ingestions hold no culprit (or only culprits) to learn from")
        return
    model = held_out_model(train, {m.window.id: m.commits for m in mined if m.window.id not in held})
    judged = [Judged.of(m.commits, model, config) for m in test_windows]
    fewest = figures(test_windows, [j.chained(config) for j in judged])
    report("held out, model, fewest expected tier runs", fewest)
    best = sweep("held out, model", test_windows, judged, config)
    if best is not None:
        report_budget(f"held out, model, at {best}", test_windows, judged, with_share(config, best))
    rolling = rolling_origin(config, mined, rows, since=since)
    print(culprit_rates(train, test), flush=True)
    judged_sets = {"the held-out ingestions": test_windows}
    if rolling is not None:
        judged_sets[rolling[0]] = rolling[1]
    ceiling(config, mined, rows, judged_sets)
    shipped = default_model()
    if shipped is not None:
        in_sample = [Judged.of(m.commits, shipped, config) for m in test_windows]
        report(
            "same ingestions, Sluice's default model (in sample), chain_share 0.3",
            figures(test_windows, [j.chained(with_share(config, 0.3)) for j in in_sample]),
        )
    merges = {w.merge: w for w in windows(repo, args.fork)}
    timed = [m for m in test_windows if m.window.id in merges]
    if timed:
        plan_time(repo, merges[max(timed, key=lambda m: len(m.commits)).window.id], model)


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


def run(repo: Path, *, fork: str, upstream: str) -> None:
    """The section of benchmarks/real_history.py: ingestions before the cutoff, with calibrate's cache."""
    args = argparse.Namespace(
        fork=fork, upstream=upstream, since=SINCE, until=UNTIL, train_since=None, limit=0, cache=str(CACHE)
    )
    with shared_clone(repo, prefix="sluice-real-risk-") as clone:
        measure(clone, args)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("path", nargs="?", help="a repository holding fork trunk and upstream (only read)")
    parser.add_argument("--fork", default="main", help="fork trunk ref (default main)")
    parser.add_argument("--upstream", default="upstream", help="upstream ref (default upstream)")
    parser.add_argument("--since", default=SINCE, help=f"ingestions from this date on (default {SINCE})")
    parser.add_argument("--until", default=UNTIL, help=f"history before this date (default {UNTIL})")
    parser.add_argument(
        "--train-since",
        help="fit the models on ingestions from this earlier date on too; those judged stay --since's",
    )
    parser.add_argument("--limit", type=int, default=0, help="only the newest N ingestions")
    parser.add_argument("--cache", default=str(CACHE), help=f"calibrate's feature cache (default {CACHE})")
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
