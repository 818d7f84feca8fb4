"""`sluice calibrate`: mine a fork's past ingestions, fit its risk model, judge it on a time split."""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import json
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bot.core import fitting, tradeoff_svg
from bot.core.bisect_pr import Blame
from bot.core.calibrated import chain_levels
from bot.core.config import SluiceConfig
from bot.core.errors import SluiceError
from bot.core.fitting import Quality, Row
from bot.core.models import Plan, PlannedCommit
from bot.core.risk_model import (
    FEATURES_VERSION,
    MODEL_SCHEMA,
    Provenance,
    RiskModel,
    commit_features,
    quantiles_of,
)
from bot.flows import mining
from bot.flows.mining import IngestionWindow
from bot.flows.planning import build_plan
from bot.flows.risk_files import default_model
from bot.ports import Repository

Progress = Callable[[str], None]
SIZE_FEATURE = "log2-lines"


def _quiet(_: str) -> None:
    pass


@dataclass(frozen=True)
class CalibrateOptions:
    since: int | None = None  # epoch seconds: ingestions from then on …
    until: int | None = None  # … and before this (fix commits too)
    limit: int | None = None  # only the newest N ingestions
    fix_days: float = 7.0  # how long after an ingestion a fork commit on trunk still counts as its fix
    bundled_share: float = 0.7  # the share of commits the planner aims to bundle
    recall_target: float = 0.8
    train_share: float = 0.7
    c: float = 1.0  # inverse L2 strength
    source: str = ""  # how the provenance names the repository


def parse_date(text: str, option: str) -> int:
    """An ISO date or date-time (UTC unless it says otherwise) as epoch seconds."""
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise SluiceError(
            f"{option} {text!r} is not a date", f"write it as YYYY-MM-DD, e.g. {option} 2025-10-01"
        ) from None
    return int((when if when.tzinfo else when.replace(tzinfo=dt.UTC)).timestamp())


def iso(ts: int | None) -> str | None:
    return None if ts is None else dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- mining -------------------------------------------------------------------------------------------------


def find_windows(
    repo: Repository,
    config: SluiceConfig,
    *,
    fork_head: str,
    upstream_head: str,
    options: CalibrateOptions,
) -> list[IngestionWindow]:
    """Past ingestions in the requested range, oldest first: upstream merges and runs of picks."""
    stream = {sha: i for i, (sha, _) in enumerate(repo.first_parent_times(upstream_head))}
    trunk = mining.read_trunk(repo, fork_head, "--not", upstream_head)
    merges = mining.merge_windows(
        repo,
        trunk=trunk,
        stream=stream,
        upstream_head=upstream_head,
        fix_days=options.fix_days,
        until=options.until,
    )
    picked = mining.picks_on_trunk(repo, fork_head=fork_head, upstream_head=upstream_head, config=config)
    picks = mining.pick_windows(trunk, picked, stream=stream, fix_days=options.fix_days, until=options.until)
    windows = [w for w in merges + picks if mining.in_range(w.time, since=options.since, until=options.until)]
    windows.sort(key=lambda w: (w.time, w.id))
    return windows[-options.limit :] if options.limit else windows


def planned_commits(plan: Plan) -> dict[str, PlannedCommit]:
    found = {c.sha: c for bundle in plan.bundles for c in bundle.commits}
    return found | {c.sha: c for chain in plan.chains for c in chain.commits}


PLAN_CACHE_VERSION = 5  # bump when what the planner computes per commit changes (not when features do)
# 4: conflict prediction searches the fork for users of a changed API (api conflicts were mechanical)
# 5: a patch's sections go to the files their headers name (a type change shifted later files' hunks)


def window_commits(repo: Repository, config: SluiceConfig, window: IngestionWindow) -> list[PlannedCommit]:
    """The planner's own analysis as of just before the ingestion: fork trunk then, upstream as it took it."""
    as_of = dt.datetime.fromtimestamp(window.time, dt.UTC)
    plan = build_plan(
        repo,
        config,
        fork=window.fork,
        upstream=window.upstream,
        store=None,
        progress=_quiet,
        clock=lambda: as_of,
    )
    planned = planned_commits(plan)
    return [planned[sha] for sha in window.brought if sha in planned]


def window_rows(
    window: IngestionWindow,
    planned: Sequence[PlannedCommit],
    config: SluiceConfig,
    *,
    blamed: Mapping[str, Blame] | None = None,
) -> list[Row]:
    """Each brought-in commit's features as the planner saw it then, and its outcome from what the fork did
    next (`blamed`: the culprits Sluice's own tier runs blamed, by upstream SHA)."""
    brought = {p.sha: p.subject for p in planned}
    broke = mining.evidence(brought, window.fixes, picks=window.picks, blamed=blamed)
    return [
        Row(
            sha=p.sha,
            window=window.id,
            time=window.time,
            features=commit_features(p, config=config),
            outcome=int(p.sha in broke),
            evidence=broke[p.sha].said if p.sha in broke else "",
            risk=p.risk.value,
            changed_lines=p.changed_lines,
            known=broke[p.sha].time if p.sha in broke else None,
        )
        for p in planned
    ]


class FeatureCache:
    """The planner's commits by ingestion, in a JSON-lines file (keep it under /tmp: mined data is never
    committed). Features are computed from them on every run, so a change of `commit_features` needs no new
    mining; outcomes are not cached either: they are cheap, and follow the fix rules of the run."""

    def __init__(self, path: Path | None, *, config: SluiceConfig) -> None:
        self.path = path
        self.salt = f"plan{PLAN_CACHE_VERSION}:{config.digest()}"
        self.found: dict[str, list[PlannedCommit]] = {}
        if path is not None and path.exists():
            for line in path.read_text().splitlines():
                entry = json.loads(line)
                if entry.get("key", "").endswith(self.salt):
                    self.found[entry["key"]] = [PlannedCommit.model_validate(c) for c in entry["commits"]]

    def key(self, window: IngestionWindow) -> str:
        return f"{window.id}:{window.fork}:{window.upstream}:{self.salt}"

    def get(self, window: IngestionWindow) -> list[PlannedCommit] | None:
        return self.found.get(self.key(window))

    def put(self, window: IngestionWindow, planned: list[PlannedCommit]) -> None:
        self.found[self.key(window)] = planned
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            entry = {"key": self.key(window), "commits": [c.model_dump(mode="json") for c in planned]}
            with self.path.open("a") as out:
                out.write(json.dumps(entry, sort_keys=True) + "\n")


def mine(
    repo: Repository,
    config: SluiceConfig,
    windows: Sequence[IngestionWindow],
    *,
    cache: FeatureCache,
    progress: Progress = _quiet,
    blamed: Mapping[str, Blame] | None = None,
) -> tuple[list[Row], list[str]]:
    """Every window's rows (features from the cache when it has them), and a note per window that could not
    be read (`blamed`: as for `window_rows`)."""
    rows: list[Row] = []
    failed: list[str] = []
    # Newest first: an interrupted run has cached the newest ingestions, which `--limit` takes.
    for index, window in enumerate(reversed(windows), 1):
        planned = cache.get(window)
        brought = len(window.brought)
        label = f"window {index}/{len(windows)} {window.id[:10]} ({window.style}, {brought} upstream commits)"
        if planned is None:
            progress(f"{label}: planning as of {iso(window.time)}")
            try:
                planned = window_commits(repo, config, window)
            except SluiceError as err:
                failed.append(f"{window.id[:10]}: {err.message}")
                progress(f"{label}: skipped ({err.message})")
                continue
            cache.put(window, planned)
        found = window_rows(window, planned, config, blamed=blamed)
        culprits = sum(r.outcome for r in found)
        progress(f"{label}: {len(found)} rows, {culprits} broke the fork")
        rows += found
    rows.sort(key=lambda r: (r.time, r.window))
    return rows, failed


# -- fitting and judging ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class HeldOut:
    """The time split: a model fitted on the earlier rows, judged (beside simple rankings) on the later."""

    quality: Quality
    baselines: dict[str, Quality]  # size alone, today's rules: on the same held-out rows
    split_time: int  # the first held-out ingestion
    train_commits: int
    train_culprits: int = 0  # the fitted ones, as known at the split
    late_culprits: int = 0  # fitted commits the fork named as culprits only after the split: fitted as clean

    def metrics(self, options: CalibrateOptions) -> dict[str, float]:
        q = self.quality
        metrics = {
            **({"auc": round(q.auc, 4)} if q.auc is not None else {}),
            "bundled_share": options.bundled_share,
            "recall_at_bundled_share": round(q.recall_at_bundled, 4),
            "recall_target": options.recall_target,
            "chained_share_for_recall_target": round(q.chained_for_recall, 4),
            "train_commits": float(self.train_commits),
            "test_commits": float(q.commits),
            "test_culprits": float(q.culprits),
            "split_time": float(self.split_time),
        }
        for name, base in self.baselines.items():
            metrics[f"recall_at_bundled_share ({name})"] = round(base.recall_at_bundled, 4)
        return metrics


@dataclass(frozen=True)
class Calibration:
    """What `sluice calibrate` found: the model, and the figures its report and curve show."""

    model: RiskModel
    windows: Sequence[IngestionWindow]
    rows: Sequence[Row]
    held_out: HeldOut | None = None
    in_sample: Quality | None = None
    fallback: str = ""  # why the default model was used instead, when it was


def size_scores(rows: Sequence[Row]) -> list[float]:
    return [float(r.changed_lines) for r in rows]


def todays_rule_scores(rows: Sequence[Row]) -> list[float]:
    """Today's rules chain `high` and `critical` commits: as a ranking, chained ones first."""
    return [1.0 if r.risk in ("high", "critical") else 0.0 for r in rows]


def judge_split(rows: Sequence[Row], options: CalibrateOptions) -> HeldOut | None:
    """Fit on the earlier rows, with the culprits known by the split, judge on the later ones; None when
    either side lacks a culprit."""
    earlier, test = fitting.time_split(rows, options.train_share)
    train = fitting.as_known_at(earlier, test[0].time) if test else earlier
    if len({r.outcome for r in train}) < 2 or not test or not any(r.outcome for r in test):
        return None
    model = fitting.fit(train, c=options.c)
    outcomes = [r.outcome for r in test]
    args = {"bundled_share": options.bundled_share, "target": options.recall_target}
    return HeldOut(
        quality=fitting.judge(model.score(test), outcomes, **args),
        baselines={
            "size alone": fitting.judge(size_scores(test), outcomes, **args),
            "today's rules": fitting.judge(todays_rule_scores(test), outcomes, **args),
        },
        split_time=test[0].time,
        train_commits=len(train),
        train_culprits=sum(r.outcome for r in train),
        late_culprits=sum(r.outcome for r in earlier) - sum(r.outcome for r in train),
    )


def fallback(
    windows: Sequence[IngestionWindow], rows: Sequence[Row], reason: str, options: CalibrateOptions
) -> Calibration:
    """Sluice's default model, saying why this fork's own history could not be used."""
    model = default_model()
    if model is None:
        raise SluiceError(
            f"{reason}, and this Sluice has no default risk model",
            "reinstall Sluice, or calibrate on a fork with ingestion history",
        )
    note = f"{reason} in {options.source or 'the given repository'}: this is Sluice's default model"
    provenance = model.provenance.model_copy(update={"notes": (*model.provenance.notes, note)})
    return Calibration(
        model=model.model_copy(update={"provenance": provenance}), windows=windows, rows=rows, fallback=note
    )


def within(blamed: Mapping[str, Blame] | None, options: CalibrateOptions) -> Mapping[str, Blame] | None:
    """The blames before `--until`: one after it is later history, as a fix after it is."""
    if blamed is None:
        return None
    return {s: b for s, b in blamed.items() if mining.in_range(b.time, since=None, until=options.until)}


def calibrate(
    repo: Repository,
    config: SluiceConfig,
    *,
    fork: str,
    upstream: str,
    options: CalibrateOptions,
    cache: Path | None = None,
    progress: Progress = _quiet,
    blamed: Mapping[str, Blame] | None = None,
) -> Calibration:
    """Mine, fit and judge; the default model (and why) when the history has nothing to learn from.
    `blamed`: the culprits Sluice's own tier runs blamed on this fork (the store's), also evidence."""
    fork_head, upstream_head = repo.resolve(fork), repo.resolve(upstream)
    progress("finding past ingestions")
    windows = find_windows(repo, config, fork_head=fork_head, upstream_head=upstream_head, options=options)
    if not windows:
        asked = " in the range asked" if options.since is not None or options.until is not None else ""
        return fallback(windows, [], f"no past ingestion (upstream merge or pick) found{asked}", options)
    features = FeatureCache(cache, config=config)
    blamed = within(blamed, options)
    rows, failed = mine(repo, config, windows, cache=features, progress=progress, blamed=blamed)
    if not any(r.outcome for r in rows):
        reason = f"{len(rows)} upstream commits mined, none of them broke the fork"
        return fallback(windows, rows, reason, options)
    progress(f"fitting {len(rows)} rows")
    held_out = judge_split(rows, options)
    final = fitting.fit(rows, c=options.c)
    scores = final.score(rows)
    planned = {w.id: found for w in windows if (found := features.get(w))}
    outcomes = [r.outcome for r in rows]
    provenance = Provenance(
        source=options.source or str(repo.path),
        fork_ref=fork,
        upstream_ref=upstream,
        since=iso(windows[0].time),
        until=iso(windows[-1].time),
        commits=len(rows),
        positives=sum(outcomes),
        method=_method(options),
        held_out=held_out.metrics(options) if held_out else {},
        notes=_notes(windows, failed, options, held_out is not None, blamed=_blamed_note(rows, blamed)),
    )
    model = RiskModel(
        schema=MODEL_SCHEMA,
        intercept=final.intercept,
        coefficients=final.coefficients,
        provenance=provenance,
        quantiles=quantiles_of(stream_levels(planned, rows, scores)),
    )
    in_sample = fitting.judge(
        scores, outcomes, bundled_share=options.bundled_share, target=options.recall_target
    )
    return Calibration(model=model, windows=windows, rows=rows, held_out=held_out, in_sample=in_sample)


def stream_levels(
    plans: Mapping[str, Sequence[PlannedCommit]], rows: Sequence[Row], scores: Sequence[float]
) -> list[float]:
    """Each mined commit's chain level (`chain_levels`: its probability, or that of a commit it depends on,
    or 1.0 when a structural rule chains it) with the rows' `scores`, ingestion by ingestion (`plans`, by
    window id): what a model's quantiles are of, so `risk.chain_share` is the share of the stream chained,
    dependents included."""
    probability = {(r.window, r.sha): p for r, p in zip(rows, scores, strict=True)}
    levels: list[float] = []
    for window, planned in plans.items():
        levels += chain_levels(
            [c.model_copy(update={"probability": probability[(window, c.sha)]}) for c in planned]
        )
    return levels


def _method(options: CalibrateOptions) -> str:
    version = importlib.metadata.version("scikit-learn")
    return (
        f"scikit-learn {version} LogisticRegression(C={options.c}, penalty='l2', "
        f"solver='{fitting.SOLVER}') over the features present in at least {fitting.MIN_SUPPORT} rows; "
        f"held_out: fitted on the earlier {options.train_share:.0%} of rows, "
        "judged on the later rest; shipped coefficients refitted on all rows"
    )


def _blamed_note(rows: Sequence[Row], blamed: Mapping[str, Blame] | None) -> str | None:
    """What Sluice's own blames added, when a store was read (none blamed is worth saying too)."""
    if blamed is None:
        return None
    mined = {r.sha for r in rows} & set(blamed)
    first = sum(1 for r in rows if r.evidence.startswith(mining.BLAMED))
    return (
        f"Sluice blamed {len(blamed)} upstream commits on this fork (bisections, and one-commit PRs whose "
        f"own tier failed); {len(mined)} of them are among the mined ones, {first} labelled by that first"
    )


def _notes(
    windows: Sequence[IngestionWindow],
    failed: Sequence[str],
    options: CalibrateOptions,
    judged: bool,
    *,
    blamed: str | None = None,
) -> tuple[str, ...]:
    styles = {s: sum(1 for w in windows if w.style == s) for s in ("merge", "pick")}
    notes = [
        f"ingestions: {styles['merge']} upstream merges, {styles['pick']} runs of picks",
        f"outcome 1: reverted, or named (SHA or upstream PR) by a fork commit in the ingestion's PR or on "
        f"trunk within {options.fix_days:g} days, or picked with [RESOLVED], or blamed by Sluice's own "
        "tier runs (when a store is read)",
        f"features: bot.core.risk_model.commit_features version {FEATURES_VERSION}, "
        "computed by the planner as of each ingestion",
    ]
    if options.since is not None or options.until is not None or options.limit:
        notes.append(
            f"range asked: since {iso(options.since)}, until {iso(options.until)}, limit {options.limit}"
        )
    if blamed is not None:
        notes.append(blamed)
    if failed:
        notes.append(f"{len(failed)} ingestions could not be read: {'; '.join(failed[:5])}")
    if not judged:
        notes.append("no held-out figures: the time split left no culprit on one side")
    return tuple(notes)


# -- the report -------------------------------------------------------------------------------------------


def _pct(value: float) -> str:
    return f"{100 * value:.1f} %"


def _quality_lines(label: str, q: Quality, options: CalibrateOptions) -> list[str]:
    auc = "—" if q.auc is None else f"{q.auc:.3f}"
    return [
        f"{label}: {q.commits} commits, {q.culprits} culprits, AUC {auc}",
        f"{label}: recall at {_pct(options.bundled_share)} bundled: {_pct(q.recall_at_bundled)}",
        f"{label}: share chained for {_pct(options.recall_target)} recall: {_pct(q.chained_for_recall)}",
    ]


def report(cal: Calibration, options: CalibrateOptions) -> list[str]:
    """The calibration report: what was mined, the coefficients as odds ratios, the held-out quality."""
    p = cal.model.provenance
    if cal.fallback:
        return [f"calibrate: {cal.fallback}", f"calibrate: the default model was fitted on {p.source}"]
    lines = [*_mined_lines(cal), *_feature_lines(cal)]
    if cal.held_out is not None:
        held = cal.held_out
        lines.append(
            f"held-out split: fitted on the {held.train_commits} commits of ingestions before "
            f"{iso(held.split_time)} ({held.train_culprits} culprits named by then, {held.late_culprits} "
            "only later, fitted as clean), judged on the rest"
        )
        lines += _quality_lines("held-out", held.quality, options)
        for name, base in held.baselines.items():
            lines += _quality_lines(f"held-out, {name}", base, options)
    if cal.in_sample is not None:
        lines += _quality_lines("all ingestions (refit, in sample)", cal.in_sample, options)
    lines += [f"note: {n}" for n in p.notes]
    return [f"calibrate: {line}" for line in lines]


def _mined_lines(cal: Calibration) -> list[str]:
    p = cal.model.provenance
    merges = sum(1 for w in cal.windows if w.style == "merge")
    return [
        f"source: {p.source} (fork {p.fork_ref}, upstream {p.upstream_ref})",
        f"ingestions: {len(cal.windows)} ({merges} merges, {len(cal.windows) - merges} pick runs), "
        f"{p.since} .. {p.until}",
        f"upstream commits: {p.commits}, culprits: {p.positives} ({_pct(p.positives / max(p.commits, 1))})",
        f"culprits by evidence: {_evidence_counts(cal.rows)}",
        "culprits by month: "
        + ", ".join(
            f"{month} {_pct(bad / n)} ({bad} of {n})" for month, n, bad in fitting.by_month(cal.rows)
        ),
        f"method: {p.method}",
    ]


def _evidence_counts(rows: Sequence[Row]) -> str:
    kinds = {
        "reverted": "reverted",
        "named": "SHA named",
        "PR": "PR named",
        "pick": "[RESOLVED] pick",
        "blamed": "blamed by Sluice",
    }
    counts = Counter(kinds.get(r.evidence.split(" ", 1)[0], "other") for r in rows if r.outcome)
    return ", ".join(f"{kind} {n}" for kind, n in sorted(counts.items())) or "none"


def _feature_lines(cal: Calibration) -> list[str]:
    intercept = cal.model.intercept
    lines = [f"intercept {intercept:+.3f} (odds ×{math.exp(intercept):.3f} with no feature present)"]
    for name, weight in sorted(cal.model.coefficients.items(), key=lambda kv: (-abs(kv[1]), kv[0])):
        share = sum(1 for r in cal.rows if r.features.get(name)) / max(len(cal.rows), 1)
        unit = " per doubling of changed lines" if name == SIZE_FEATURE else ""
        lines.append(
            f"feature {name}: coefficient {weight:+.3f}, odds ×{math.exp(weight):.2f}{unit} "
            f"(present in {_pct(share)} of commits)"
        )
    return lines


def curve_svg(cal: Calibration, options: CalibrateOptions) -> str | None:
    """The trade-off curve: held out (and its baselines) and all ingestions, marked at the bundled share."""
    curves, marks = [], []
    if cal.held_out is not None:
        after = (iso(cal.held_out.split_time) or "")[:10]
        curves.append(tradeoff_svg.Curve(f"held out (after {after})", cal.held_out.quality.curve))
        marks.append(("held out", cal.held_out.quality.recall_at_bundled))
        for name, base in cal.held_out.baselines.items():
            curves.append(tradeoff_svg.Curve(f"held out, {name}", base.curve, dashed=True))
    if cal.in_sample is not None:
        curves.append(tradeoff_svg.Curve("all ingestions (refit, in sample)", cal.in_sample.curve))
        marks.append(("all", cal.in_sample.recall_at_bundled))
    if not curves:
        return None
    p = cal.model.provenance
    span = f"{(p.since or '')[:10]} .. {(p.until or '')[:10]}"
    subtitle = f"{p.source}, ingestions {span}: {p.commits} upstream commits, {p.positives} culprits"
    return tradeoff_svg.tradeoff_svg(
        curves,
        title="Culprits in risky chains vs. commits bundled",
        subtitle=subtitle,
        mark_bundled=options.bundled_share,
        mark=marks,
    )


def mined_culprits(
    repo: Repository,
    config: SluiceConfig,
    *,
    fork: str,
    upstream: str,
    options: CalibrateOptions,
    blamed: Mapping[str, Blame] | None = None,
) -> dict[str, str]:
    """Upstream SHA -> the evidence that it broke the fork, as `sluice calibrate` labels its rows, without
    planning any window (only the labels: cheap, where the features are not)."""
    blamed = within(blamed, options)
    fork_head, upstream_head = repo.resolve(fork), repo.resolve(upstream)
    windows = find_windows(repo, config, fork_head=fork_head, upstream_head=upstream_head, options=options)
    found: dict[str, str] = {}
    for window in windows:
        brought = set(window.brought)
        infos = repo.commits(window.upstream, "--not", window.fork, first_parent=True)
        subjects = {c.sha: c.subject for c in infos if c.sha in brought}
        found |= mining.outcomes(subjects, window.fixes, picks=window.picks, blamed=blamed)
    return found
