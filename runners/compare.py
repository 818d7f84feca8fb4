"""`python -m runners compare`: noise-aware verdicts on two tier reports' benchmarks (docs/compare.md)."""

from __future__ import annotations

import argparse
import enum
import json
import math
import subprocess
import sys
import tempfile
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

import numpy as np
import yaml
from pydantic import ValidationError

from bot.config_file import load_config
from bot.core.config import ConfigError, PerformanceConfig
from bot.core.errors import SluiceError
from bot.core.render import plural
from runners import stats
from runners.environment import MOMENTARY_CLOCKS
from runners.report import Benchmark, Environment, Report

EXIT_OK = 0
EXIT_CRITICAL_REGRESSION = 1
EXIT_BAD_INPUT = 2
EXIT_REFUSED = 3

MIN_SAMPLES = 10  # per side, for any verdict but `inconclusive`; compile time: see LOW_CONFIDENCE_FACTOR
LOW_CONFIDENCE_FACTOR = 2.0  # compile time from fewer samples must move by this many thresholds
# The compiler under test: its version differs between the builds compared, so it never refuses a comparison
# (it does refuse when the runs of one arm differ in it). The context hash covers it (runners.environment).
UNDER_TEST = frozenset({"triton"})
SUMMARY_LIMIT = 65535  # GitHub's limit on a check run's summary
DEFAULT_ROUNDS = 10  # A/B rounds: 10 gives compile time MIN_SAMPLES samples per side


class Verdict(enum.StrEnum):
    REGRESSED = "regressed"
    IMPROVED = "improved"
    SAME = "same"
    INCONCLUSIVE = "inconclusive"
    NOT_COMPARABLE = "not_comparable"


class Metric(enum.StrEnum):
    MEDIAN = "median"
    P90 = "p90"
    P99 = "p99"
    COMPILE_COLD = "compile_cold"
    COMPILE_WARM = "compile_warm"


# Latency cells: the quantile each judges and the samples per side it needs to exist at all.
QUANTILES: dict[Metric, tuple[float, int]] = {
    Metric.MEDIAN: (0.5, 0),
    Metric.P90: (0.9, 40),
    Metric.P99: (0.99, 400),
}


class CompareInputError(SluiceError):
    """A report, thresholds file or A/B run that cannot be used as given (exit 2)."""


class ContextRefused(Exception):
    """The two sides ran in different contexts: timings from them are not comparable (exit 3)."""

    def __init__(
        self,
        differences: Mapping[str, tuple[object, object]],
        *,
        where: str,
        labels: tuple[str, str] = ("baseline", "candidate"),
    ) -> None:
        super().__init__(f"{where}: {', '.join(differences)} differ")
        self.differences = dict(differences)
        self.where = where
        self.labels = labels


# --- the two sides ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BenchmarkSamples:
    """Everything measured for one benchmark key on one side, pooled over runs (A/B rounds)."""

    key: str
    kernel: str
    latency_ms: tuple[float, ...]
    compile_cold_ms: tuple[float, ...]
    compile_warm_ms: tuple[float, ...]
    comparable: bool
    note: str | None = None

    @classmethod
    def of(cls, bench: Benchmark) -> BenchmarkSamples:
        return cls(
            key=bench.key,
            kernel=bench.kernel,
            latency_ms=bench.samples_ms,
            compile_cold_ms=() if bench.compile_cold_ms is None else (bench.compile_cold_ms,),
            compile_warm_ms=() if bench.compile_warm_ms is None else (bench.compile_warm_ms,),
            comparable=bench.comparable,
            note=bench.note,
        )

    def pooled(self, other: BenchmarkSamples) -> BenchmarkSamples:
        return replace(
            self,
            latency_ms=self.latency_ms + other.latency_ms,
            compile_cold_ms=self.compile_cold_ms + other.compile_cold_ms,
            compile_warm_ms=self.compile_warm_ms + other.compile_warm_ms,
            comparable=self.comparable and other.comparable,
            note=self.note or other.note,
        )

    def samples(self, metric: Metric) -> tuple[float, ...]:
        if metric is Metric.COMPILE_COLD:
            return self.compile_cold_ms
        if metric is Metric.COMPILE_WARM:
            return self.compile_warm_ms
        return self.latency_ms


@dataclass(frozen=True)
class Side:
    """One side of a comparison: its environment and its benchmarks by key, from one or more runs."""

    environment: Environment
    head_sha: str | None
    benchmarks: Mapping[str, BenchmarkSamples]
    runs: int = 1

    @classmethod
    def from_reports(cls, reports: Sequence[Report], *, name: str) -> Side:
        """Pool the reports' samples per key; refuses when the runs' contexts differ."""
        first = reports[0]
        benchmarks: dict[str, BenchmarkSamples] = {}
        for index, report in enumerate(reports):
            differences = context_differences(first.environment, report.environment)
            if differences:
                where = f"the {name} runs 1 and {index + 1}"
                raise ContextRefused(differences, where=where, labels=("run 1", f"run {index + 1}"))
            for bench in report.benchmarks:
                _check_samples(bench, name=name)
                samples = BenchmarkSamples.of(bench)
                known = benchmarks.get(bench.key)
                benchmarks[bench.key] = known.pooled(samples) if known else samples
        return cls(first.environment, first.run.head_sha, benchmarks, runs=len(reports))


def _check_samples(bench: Benchmark, *, name: str) -> None:
    timings = (*bench.samples_ms, bench.compile_cold_ms or 1.0, bench.compile_warm_ms or 1.0)
    if not all(math.isfinite(t) and t > 0 for t in timings):
        raise CompareInputError(
            f"the {name} report's benchmark {bench.key} has a timing that is not a positive number",
            "fix the runner that wrote it; timings are milliseconds greater than zero",
        )


def context_differences(baseline: Environment, candidate: Environment) -> dict[str, tuple[object, object]]:
    """The environment fields that differ when the context hashes do (empty when they are equal)."""
    if baseline.context_hash == candidate.context_hash:
        return {}
    a, b = _fingerprint(baseline), _fingerprint(candidate)
    names = [*a, *(name for name in b if name not in a)]
    differing = {name: (a.get(name), b.get(name)) for name in names if a.get(name) != b.get(name)}
    return differing or {"context_hash": (baseline.context_hash, candidate.context_hash)}


def _fingerprint(environment: Environment) -> dict[str, object]:
    """The fields the context hash covers, clocks one by one (the momentary ones are not covered)."""
    fields: dict[str, object] = environment.model_dump(exclude={"context_hash", "clocks"})
    clocks = environment.clocks.items()
    return fields | {f"clocks.{k}": v for k, v in clocks if k not in MOMENTARY_CLOCKS}


# --- measuring and deciding -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Measurement:
    """The statistics of one cell (a benchmark and a metric) before the verdict."""

    benchmark: str
    kernel: str
    metric: Metric
    critical: bool
    n: tuple[int, int]
    baseline_ms: float
    candidate_ms: float
    ratio: float
    interval: stats.RatioInterval | None  # None for low-confidence compile cells
    threshold: float
    noise: float | None
    p_value: float | None  # None when the cell is not tested (too few samples)
    separation: int = 0  # +1: every candidate sample slower than every baseline one; -1: faster

    @property
    def low_confidence(self) -> bool:
        return self.metric in (Metric.COMPILE_COLD, Metric.COMPILE_WARM) and min(self.n) < MIN_SAMPLES


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    reason: str
    more_samples: int | None = None  # per side, for inconclusive cells; None: not worth estimating


@dataclass(frozen=True)
class CellVerdict:
    benchmark: str
    kernel: str
    metric: Metric
    critical: bool
    decision: Decision
    measurement: Measurement | None = None  # None for not-comparable benchmarks
    q_value: float | None = None

    @property
    def verdict(self) -> Verdict:
        return self.decision.verdict


@dataclass(frozen=True)
class Comparison:
    baseline: Side
    candidate: Side
    config: PerformanceConfig
    cells: tuple[CellVerdict, ...]
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    context_differences: Mapping[str, tuple[object, object]] = field(default_factory=dict)

    @property
    def forced_differences(self) -> dict[str, tuple[object, object]]:
        """Differences in context that `--force-context` let pass."""
        return {k: v for k, v in self.context_differences.items() if k not in UNDER_TEST}

    @property
    def under_test(self) -> dict[str, tuple[object, object]]:
        """The versions of the compiler under test, where they differ."""
        return {k: v for k, v in self.context_differences.items() if k in UNDER_TEST}

    def count(self, verdict: Verdict) -> int:
        return sum(1 for c in self.cells if c.verdict is verdict)

    @property
    def failing(self) -> tuple[CellVerdict, ...]:
        """Confident regressions of critical kernels: the cells that fail the run."""
        return tuple(
            c
            for c in self.cells
            if c.verdict is Verdict.REGRESSED
            and c.critical
            and c.measurement
            and not c.measurement.low_confidence
        )


def compare(
    baseline: Side,
    candidate: Side,
    config: PerformanceConfig,
    *,
    seed: int = 0,
    resamples: int = stats.DEFAULT_RESAMPLES,
    force_context: bool = False,
) -> Comparison:
    """Judge every benchmark on both sides; raises ContextRefused unless the contexts match or are forced."""
    differences = context_differences(baseline.environment, candidate.environment)
    blocking = {k: v for k, v in differences.items() if k not in UNDER_TEST}
    if blocking and not force_context:
        raise ContextRefused(blocking, where="the baseline and the candidate")
    shared = [key for key in baseline.benchmarks if key in candidate.benchmarks]
    pairs = [(baseline.benchmarks[key], candidate.benchmarks[key]) for key in shared]
    unjudged = {a.key: verdict for a, b in pairs if (verdict := _not_comparable(a, b, config))}
    measured = [
        _measure(a, b, metric, config, seed, resamples)
        for a, b in pairs
        if a.key not in unjudged
        for metric in Metric
        if _has_cell(a, b, metric)
    ]
    order = {key: index for index, key in enumerate(shared)}
    cells = sorted([*unjudged.values(), *_judge(measured, fdr=config.fdr)], key=lambda c: order[c.benchmark])
    return Comparison(
        baseline,
        candidate,
        config,
        cells=tuple(cells),
        added=tuple(k for k in candidate.benchmarks if k not in baseline.benchmarks),
        removed=tuple(k for k in baseline.benchmarks if k not in candidate.benchmarks),
        context_differences=differences,
    )


def _not_comparable(
    baseline: BenchmarkSamples, candidate: BenchmarkSamples, config: PerformanceConfig
) -> CellVerdict | None:
    """The not-comparable verdict for a benchmark that gets no statistics, or None when it is judged."""
    sides = (("baseline", baseline), ("candidate", candidate))
    unmarked = "timings marked not comparable (e.g. interpreter)"
    notes = {name: bench.note or unmarked for name, bench in sides if not bench.comparable}
    if len(notes) == 2 and notes["baseline"] == notes["candidate"]:
        reasons = [f"both sides: {notes['baseline']}"]  # the usual case, e.g. two interpreter runs
    else:
        reasons = [f"{name}: {note}" for name, note in notes.items()]
    reasons = reasons or [
        f"no latency samples on the {name} side" for name, bench in sides if not bench.latency_ms
    ]
    if not reasons:
        return None
    return CellVerdict(
        baseline.key,
        baseline.kernel,
        Metric.MEDIAN,
        config.is_critical(baseline.kernel),
        Decision(Verdict.NOT_COMPARABLE, "; ".join(reasons)),
    )


def _has_cell(baseline: BenchmarkSamples, candidate: BenchmarkSamples, metric: Metric) -> bool:
    n = min(len(baseline.samples(metric)), len(candidate.samples(metric)))
    return n >= QUANTILES[metric][1] if metric in QUANTILES else n > 0


def _measure(
    baseline: BenchmarkSamples,
    candidate: BenchmarkSamples,
    metric: Metric,
    config: PerformanceConfig,
    seed: int,
    resamples: int,
) -> Measurement:
    a, b = np.asarray(baseline.samples(metric)), np.asarray(candidate.samples(metric))
    q = QUANTILES[metric][0] if metric in QUANTILES else 0.5
    compile_cell = metric not in QUANTILES
    enough = min(len(a), len(b)) >= MIN_SAMPLES
    # Compile time from a few runs gets no interval; latency below MIN_SAMPLES one for the samples needed.
    full = enough or not compile_cell
    noise = stats.relative_noise(a, b) if full else None
    interval = None
    if full:
        rng = np.random.default_rng([seed, zlib.crc32(f"{baseline.key}/{metric}".encode())])
        interval = stats.ratio_interval(a, b, q=q, confidence=config.confidence, rng=rng, resamples=resamples)
    return Measurement(
        benchmark=baseline.key,
        kernel=baseline.kernel,
        metric=metric,
        critical=config.is_critical(baseline.kernel),
        n=(len(a), len(b)),
        baseline_ms=float(np.quantile(a, q)),
        candidate_ms=float(np.quantile(b, q)),
        ratio=float(np.quantile(b, q) / np.quantile(a, q)),
        interval=interval,
        threshold=config.threshold_for(baseline.kernel, noise or 0.0),
        noise=noise,
        p_value=_p_value(a, b, metric) if enough else None,
        separation=1 if b.min() > a.max() else -1 if b.max() < a.min() else 0,
    )


def _p_value(a: stats.Samples, b: stats.Samples, metric: Metric) -> float:
    if metric in (Metric.P90, Metric.P99):
        return stats.quantile_test_p(a, b, q=QUANTILES[metric][0])
    return stats.rank_test_p(a, b)


def _judge(measured: list[Measurement], *, fdr: float) -> list[CellVerdict]:
    """Verdicts for all cells at once: the FDR correction spans every tested cell of the run."""
    tested = [(index, p) for index, m in enumerate(measured) if (p := m.p_value) is not None]
    adjusted = stats.benjamini_hochberg([p for _, p in tested])
    q_values = {index: q for (index, _), q in zip(tested, adjusted, strict=True)}
    return [
        CellVerdict(
            m.benchmark,
            m.kernel,
            m.metric,
            m.critical,
            decide(m, q_value=q_values.get(index), fdr=fdr),
            measurement=m,
            q_value=q_values.get(index),
        )
        for index, m in enumerate(measured)
    ]


def decide(m: Measurement, *, q_value: float | None, fdr: float) -> Decision:
    """The verdict of one measured cell (the rules are in docs/compare.md)."""
    if m.low_confidence:
        return _decide_low_confidence(m)
    if min(m.n) < MIN_SAMPLES or m.interval is None:
        more = max(MIN_SAMPLES - min(m.n), _more_samples(m) or 0)
        return Decision(Verdict.INCONCLUSIVE, f"fewer than {MIN_SAMPLES} samples per side", more)
    t, iv, change = m.threshold, m.interval, m.ratio - 1
    significant = q_value is not None and q_value <= fdr
    if significant and iv.lo > 1 and change > t:
        return Decision(Verdict.REGRESSED, f"slower by more than {_pct(t)}, q = {q_value:.2g}")
    if significant and iv.hi < 1 and change < -t:
        return Decision(Verdict.IMPROVED, f"faster by more than {_pct(t)}, q = {q_value:.2g}")
    if iv.lo >= 1 - t and iv.hi <= 1 + t:
        return Decision(Verdict.SAME, f"the interval lies within ±{_pct(t)}")
    if abs(change) > t and not significant:
        reason = f"the rank test does not hold after the FDR correction (q = {q_value or 1:.2g})"
    elif abs(change) > t:
        reason = "the interval includes no change"
    else:
        reason = f"the interval reaches past ±{_pct(t)}"
    return Decision(Verdict.INCONCLUSIVE, reason, _more_samples(m))


def _decide_low_confidence(m: Measurement) -> Decision:
    """Compile time from fewer than MIN_SAMPLES runs: only a large, clean change gets a verdict."""
    bar = LOW_CONFIDENCE_FACTOR * m.threshold
    more = MIN_SAMPLES - min(m.n)
    if m.separation > 0 and m.ratio - 1 > bar:
        return Decision(
            Verdict.REGRESSED, f"low confidence: {min(m.n)} run(s), slower by more than {_pct(bar)}"
        )
    if m.separation < 0 and 1 - m.ratio > bar:
        return Decision(
            Verdict.IMPROVED, f"low confidence: {min(m.n)} run(s), faster by more than {_pct(bar)}"
        )
    return Decision(
        Verdict.INCONCLUSIVE,
        f"compile time from {min(m.n)} run(s) per side; judged only beyond ±{_pct(bar)} (use --ab)",
        more,
    )


def _more_samples(m: Measurement) -> int | None:
    """More samples per side that would likely settle an inconclusive cell (interval ∝ 1/sqrt(n))."""
    if m.interval is None:
        return None
    n, distance, t = min(m.n), abs(m.ratio - 1), m.threshold
    # Inside the band the interval must fit in it; past the threshold it must clear no-change, and the
    # point estimate must stay past the threshold as it moves: a change on the threshold never settles.
    margin = t - distance if distance <= t else min(distance, distance - t)
    needed = stats.samples_to_settle(n, half_width=m.interval.half_width, margin=margin)
    if needed is None:
        return None
    return needed - n if needed > n else n  # narrow enough already: the rank test wants more; double


def exit_code(comparison: Comparison) -> int:
    return EXIT_CRITICAL_REGRESSION if comparison.failing else EXIT_OK


# --- JSON -------------------------------------------------------------------------------------------------


def to_json(comparison: Comparison) -> dict[str, object]:
    return {
        "verdicts": [_cell_json(cell) for cell in comparison.cells],
        "added": list(comparison.added),
        "removed": list(comparison.removed),
        "baseline": _side_json(comparison.baseline),
        "candidate": _side_json(comparison.candidate),
        "under_test": {k: [str(a), str(b)] for k, (a, b) in comparison.under_test.items()},
        "context_warning": {k: [str(a), str(b)] for k, (a, b) in comparison.forced_differences.items()},
    }


def _cell_json(cell: CellVerdict) -> dict[str, object]:
    m = cell.measurement
    return {
        "benchmark": cell.benchmark,
        "verdict": str(cell.verdict),
        "ratio": m.ratio if m else None,
        "interval": [m.interval.lo, m.interval.hi] if m and m.interval else None,
        "threshold": m.threshold if m else None,
        "metric": str(cell.metric),
        "kernel": cell.kernel,
        "critical": cell.critical,
        "low_confidence": bool(m and m.low_confidence),
        "n": list(m.n) if m else None,
        "baseline_ms": m.baseline_ms if m else None,
        "candidate_ms": m.candidate_ms if m else None,
        "noise": m.noise if m else None,
        "p_value": m.p_value if m else None,
        "q_value": cell.q_value,
        "more_samples": cell.decision.more_samples,
        "reason": cell.decision.reason,
    }


def _side_json(side: Side) -> dict[str, object]:
    return {"context_hash": side.environment.context_hash, "head_sha": side.head_sha, "runs": side.runs}


def refusal_json(refusal: ContextRefused) -> dict[str, object]:
    differences = {k: [str(a), str(b)] for k, (a, b) in refusal.differences.items()}
    return {"refused": {"where": refusal.where, "differences": differences}, "verdicts": []}


# --- markdown ---------------------------------------------------------------------------------------------

_MARK = {
    Verdict.REGRESSED: "🔴 regressed",
    Verdict.IMPROVED: "🟢 improved",
    Verdict.SAME: "⚪ same",
    Verdict.INCONCLUSIVE: "🟡 inconclusive",
    Verdict.NOT_COMPARABLE: "not comparable",
}
_KEY_HEADER = (
    "| benchmark | metric | baseline | candidate | change [interval] | threshold | verdict |\n"
    "|---|---|---:|---:|---|---:|---|"
)
_NOISY_HEADER = (
    "| benchmark | metric | change [interval] | threshold | noise | samples | why | more samples |\n"
    "|---|---|---|---:|---:|---:|---|---:|"
)
_SAME_HEADER = (
    "| benchmark | metric | baseline | candidate | change [interval] | threshold |\n"
    "|---|---|---:|---:|---|---:|"
)


def render_markdown(comparison: Comparison) -> str:
    """The check-run summary, shortened (tables first) to fit GitHub's limit."""
    for max_rows in (None, 400, 200, 100, 50, 20, 10, 5, 0):
        text = _markdown(comparison, max_rows=max_rows)
        if len(text.encode()) <= SUMMARY_LIMIT:
            return text
    note = "\n\n… summary cut at GitHub's size limit; run with `--json` for everything.\n"
    return text.encode()[: SUMMARY_LIMIT - len(note.encode())].decode(errors="ignore") + note


def _markdown(comparison: Comparison, *, max_rows: int | None) -> str:
    cells = comparison.cells
    key = sorted(
        (c for c in cells if c.verdict in (Verdict.REGRESSED, Verdict.IMPROVED) or _critical_median(c)),
        key=_key_order,
    )
    noisy = [c for c in cells if c.verdict is Verdict.INCONCLUSIVE and c not in key]
    same = [c for c in cells if c.verdict is Verdict.SAME and c not in key]
    unjudged = [c for c in cells if c.verdict is Verdict.NOT_COMPARABLE]
    parts = [_header(comparison)]
    if comparison.forced_differences:
        parts.append(_context_banner(comparison.forced_differences))
    parts.append(_table("Key kernels", _KEY_HEADER, [_key_row(c) for c in key], max_rows, "no changes"))
    if noisy:
        parts.append(_table("Noisy / inconclusive", _NOISY_HEADER, [_noisy_row(c) for c in noisy], max_rows))
    if unjudged:
        lines = [f"- {_code(c.benchmark)}: {c.decision.reason}" for c in unjudged]
        parts.append(_section("Not comparable", lines, max_rows))
    if comparison.added or comparison.removed:
        lines = [f"- added: {_code(k)}" for k in comparison.added]
        lines += [f"- removed: {_code(k)}" for k in comparison.removed]
        parts.append(_section("Added / removed", lines, max_rows))
    if same:
        table = _table("", _SAME_HEADER, [_same_row(c) for c in same], max_rows)
        parts.append(f"<details><summary>{len(same)} unchanged</summary>\n\n{table}\n\n</details>")
    return "\n\n".join(parts) + "\n"


def _critical_median(cell: CellVerdict) -> bool:
    return cell.critical and cell.metric is Metric.MEDIAN and cell.verdict is not Verdict.NOT_COMPARABLE


def _key_order(cell: CellVerdict) -> tuple[int, int]:
    """Critical kernels first, then regressions, then improvements; the sort keeps report order."""
    return (0 if cell.critical else 1, {Verdict.REGRESSED: 0, Verdict.IMPROVED: 1}.get(cell.verdict, 2))


def _header(c: Comparison) -> str:
    counts = " · ".join(f"{c.count(v)} {v.value.replace('_', ' ')}" for v in Verdict)
    failing = sorted({cell.kernel for cell in c.failing})
    verdict = (
        f"❌ critical kernels regressed: {', '.join(failing)}" if failing else "✅ no critical regression"
    )
    benchmarks = len({cell.benchmark for cell in c.cells})
    cfg, env = c.config, c.candidate.environment
    versions = "".join(f", {name} {a} → {b}" for name, (a, b) in c.under_test.items())
    return (
        f"## Benchmarks: {verdict}\n\n"
        f"{plural(benchmarks, 'benchmark')} in {plural(len(c.cells), 'cell')}: {counts}.\n\n"
        f"Baseline {_side_words(c.baseline)} → candidate {_side_words(c.candidate)} "
        f"on {env.gpu_model or env.cpu}{versions}. A change counts when it passes the kernel's threshold, "
        f"max(floor {_pct(cfg.floor)}, {cfg.k:g} × noise), its {_pct(cfg.confidence, 0)} bootstrap "
        f"interval excludes no change, and the rank test holds at a false discovery rate of "
        f"{_pct(cfg.fdr, 0)}."
    )


def _side_words(side: Side) -> str:
    sha = f"`{side.head_sha[:10]}` " if side.head_sha else ""
    runs = f", {side.runs} runs" if side.runs > 1 else ""
    return f"{sha}(context `{side.environment.context_hash[:12]}`{runs})"


def _context_banner(differences: Mapping[str, tuple[object, object]]) -> str:
    fields = ", ".join(f"{k} ({a} → {b})" for k, (a, b) in differences.items())
    return (
        f"> [!WARNING]\n> Compared with `--force-context` although the environments differ: {fields}. "
        "The verdicts may reflect the environment rather than the change."
    )


def _table(title: str, header: str, rows: list[str], max_rows: int | None, empty: str = "") -> str:
    heading = f"### {title}\n\n" if title else ""
    if not rows:
        return f"{heading}{empty}".rstrip()
    shown = rows if max_rows is None else rows[:max_rows]
    more = f"\n\n… and {len(rows) - len(shown)} more (see `--json`)" if len(shown) < len(rows) else ""
    return heading + "\n".join([header, *shown]) + more


def _section(title: str, lines: list[str], max_rows: int | None) -> str:
    shown = lines if max_rows is None else lines[:max_rows]
    more = [f"- … and {len(lines) - len(shown)} more (see `--json`)"] if len(shown) < len(lines) else []
    return f"### {title}\n\n" + "\n".join(shown + more)


def _key_row(cell: CellVerdict) -> str:
    m = cell.measurement
    assert m is not None  # key rows are judged cells
    tags = ["critical"] if cell.critical else []
    tags += ["low confidence"] if m.low_confidence and cell.verdict is not Verdict.INCONCLUSIVE else []
    verdict = _MARK[cell.verdict] + (f" ({', '.join(tags)})" if tags else "")
    return (
        f"| {_code(cell.benchmark)} | {cell.metric} | {_ms(m.baseline_ms)} | {_ms(m.candidate_ms)} "
        f"| {_change(m)} | ±{_pct(m.threshold)} | {verdict} |"
    )


def _noisy_row(cell: CellVerdict) -> str:
    m = cell.measurement
    assert m is not None
    noise = "–" if m.noise is None else _pct(m.noise)
    more = "?" if cell.decision.more_samples is None else f"~{cell.decision.more_samples}"
    return (
        f"| {_code(cell.benchmark)} | {cell.metric} | {_change(m)} | ±{_pct(m.threshold)} | {noise} "
        f"| {m.n[0]} / {m.n[1]} | {cell.decision.reason} | {more} |"
    )


def _same_row(cell: CellVerdict) -> str:
    m = cell.measurement
    assert m is not None
    return (
        f"| {_code(cell.benchmark)} | {cell.metric} | {_ms(m.baseline_ms)} | {_ms(m.candidate_ms)} "
        f"| {_change(m)} | ±{_pct(m.threshold)} |"
    )


def _change(m: Measurement) -> str:
    change = f"{(m.ratio - 1) * 100:+.1f} %"
    if m.interval is None:
        return change
    return f"{change} [{(m.interval.lo - 1) * 100:+.1f}, {(m.interval.hi - 1) * 100:+.1f}]"


def _pct(fraction: float, decimals: int = 1) -> str:
    return f"{fraction * 100:.{decimals}f} %"


def _ms(value: float) -> str:
    """Four significant digits or so, in the unit that suits: 12.34 µs, 2.101 ms, 812.0 ms, 1.03 s."""
    if value < 1:
        return f"{value * 1000:.1f} µs"
    if value >= 1000:
        return f"{value / 1000:.2f} s"
    return f"{value:.{3 - min(2, int(math.log10(value)))}f} ms"


def _code(text: str) -> str:
    return "`" + text.replace("|", "\\|").replace("`", "'") + "`"


def render_refusal(refusal: ContextRefused) -> str:
    rows = "\n".join(f"| {name} | {a} | {b} |" for name, (a, b) in refusal.differences.items())
    return (
        "## Benchmark comparison refused: the environments differ\n\n"
        f"The timings of {refusal.where} come from different contexts, so no verdict is given.\n\n"
        f"| field | {refusal.labels[0]} | {refusal.labels[1]} |\n|---|---|---|\n{rows}\n\n"
        "Run both on the same machine and software stack (`--ab` runs them interleaved), or pass "
        "`--force-context` to compare anyway under a warning.\n"
    )


# --- inputs -----------------------------------------------------------------------------------------------


def read_report(path: Path, *, name: str) -> Report:
    """The report at `path`; CompareInputError naming the file when it is missing or invalid."""
    try:
        return Report.read(path)
    except FileNotFoundError:
        raise CompareInputError(f"{name} report {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise CompareInputError(f"{name} report {path}: cannot read it ({err})") from None
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'the file'}: {e['msg']}" for e in err.errors()[:3]
        )
        more = f" (and {err.error_count() - 3} more)" if err.error_count() > 3 else ""
        raise CompareInputError(
            f"{name} report {path} is not a valid tier report: {problems}{more}",
            "pass a file written by `python -m runners run`",
        ) from None


def load_thresholds(path: Path) -> PerformanceConfig:
    """A thresholds file: the keys of the `performance:` section, at the top level or under `performance:`."""
    data = _yaml_mapping(path)
    return _performance(data["performance"] or {} if set(data) == {"performance"} else data, path)


def load_performance_section(path: Path) -> PerformanceConfig:
    """The `performance:` section of `.github/sluice.yml`, the whole file validated."""
    try:
        return load_config(path).performance
    except ConfigError as err:
        raise CompareInputError(str(err)) from None


def _yaml_mapping(path: Path) -> dict[str, object]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        raise CompareInputError(f"thresholds {path}: cannot read it ({err})") from None
    except yaml.YAMLError as err:
        raise CompareInputError(f"thresholds {path}: invalid YAML: {err}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise CompareInputError(f"thresholds {path}: the top level must be a mapping")
    return data


def _performance(data: object, path: Path) -> PerformanceConfig:
    try:
        return PerformanceConfig.model_validate(data)
    except ValidationError as err:
        problems = "; ".join(
            f"performance.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors()
        )
        raise CompareInputError(f"thresholds {path}: {problems}", "see docs/compare.md") from None


# --- interleaved A/B runs ---------------------------------------------------------------------------------


class Arm(enum.StrEnum):
    BASELINE = "baseline"
    CANDIDATE = "candidate"


class BenchRunner(Protocol):
    """Runs the benchmarks once with one interpreter and leaves a tier report at `out`."""

    def __call__(self, python: str, out: Path, *, config: Path | None) -> None: ...


@dataclass(frozen=True)
class SubprocessBenchRunner:
    """`<python> -m runners run --tier l3 --only bench --out FILE [--config FILE]` in `cwd`."""

    cwd: Path | None = None
    log: Callable[[str], None] = field(default=lambda line: print(line, file=sys.stderr))

    def __call__(self, python: str, out: Path, *, config: Path | None) -> None:
        argv = [python, "-m", "runners", "run", "--tier", "l3", "--only", "bench", "--out", str(out)]
        argv += ["--config", str(config)] if config else []
        try:
            proc = subprocess.run(argv, cwd=self.cwd, capture_output=True, text=True, check=False)
        except OSError as err:
            raise CompareInputError(f"cannot run {python}: {err.strerror}") from None
        if proc.returncode != 0 and not out.exists():
            tail = "\n".join(proc.stderr.strip().splitlines()[-10:])
            raise CompareInputError(f"`{' '.join(argv)}` failed with exit code {proc.returncode}:\n{tail}")
        if proc.returncode != 0:
            self.log(f"compare: `{' '.join(argv)}` exited {proc.returncode}; using the report it wrote")


def interleaved_order(rounds: int) -> list[tuple[int, Arm]]:
    """A B, B A, A B, …: each arm goes first in half the rounds, so a steady drift hits both alike."""
    order: list[tuple[int, Arm]] = []
    for round_ in range(rounds):
        pair = (Arm.BASELINE, Arm.CANDIDATE) if round_ % 2 == 0 else (Arm.CANDIDATE, Arm.BASELINE)
        order += [(round_, arm) for arm in pair]
    return order


def run_interleaved(
    pythons: Mapping[Arm, str],
    *,
    rounds: int,
    out_dir: Path,
    config: Path | None = None,
    runner: BenchRunner | None = None,
    log: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
) -> dict[Arm, Side]:
    """Run both arms `rounds` times each, interleaved on this machine, and pool each arm's reports."""
    run = runner or SubprocessBenchRunner()
    reports: dict[Arm, list[Report]] = {Arm.BASELINE: [], Arm.CANDIDATE: []}
    for round_, arm in interleaved_order(rounds):
        out = out_dir / f"round-{round_ + 1:02d}-{arm}.json"
        out.unlink(missing_ok=True)  # a report left from an earlier run must not stand in for this one
        log(f"compare: round {round_ + 1}/{rounds}: {arm} ({pythons[arm]})")
        run(pythons[arm], out, config=config)
        reports[arm].append(read_report(out, name=f"the {arm} round {round_ + 1}"))
    return {arm: Side.from_reports(reports[arm], name=str(arm)) for arm in Arm}


# --- the command ------------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m runners compare",
        description="Noise-aware verdicts on benchmark samples (docs/compare.md). Exit codes: 0 fine, "
        "1 a critical kernel regressed, 2 bad input, 3 refused (different contexts).",
    )
    parser.add_argument("reports", nargs="*", metavar="REPORT", help="BASELINE.json CANDIDATE.json")
    parser.add_argument(
        "--ab",
        nargs=2,
        metavar=("BASELINE_PYTHON", "CANDIDATE_PYTHON"),
        help="run the benchmarks with both interpreters, interleaved, then compare",
    )
    parser.add_argument(
        "--rounds", type=int, default=DEFAULT_ROUNDS, metavar="N", help="A/B rounds (default: %(default)s)"
    )
    parser.add_argument("--out-dir", type=Path, metavar="DIR", help="keep the A/B rounds' reports here")
    parser.add_argument(
        "--thresholds", type=Path, metavar="FILE", help="YAML with the keys of the `performance:` section"
    )
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help=".github/sluice.yml: its `performance:` section; A/B runs are passed it too",
    )
    parser.add_argument("--json", action="store_true", help="print the verdicts as JSON")
    parser.add_argument("--force-context", action="store_true", help="compare different contexts")
    parser.add_argument("--seed", type=int, default=0, metavar="N", help="of the bootstrap (default: 0)")
    return parser


def main(argv: list[str]) -> int:
    """`python -m runners compare …`; returns the exit code."""
    try:
        args = _parser().parse_args(argv)
        _check_arguments(args)
    except SystemExit as exit_:  # argparse: --help (0) or a usage error (2)
        return exit_.code if isinstance(exit_.code, int) else EXIT_BAD_INPUT
    try:
        config = _performance_config(args)
        baseline, candidate = _sides(args)
        comparison = compare(baseline, candidate, config, seed=args.seed, force_context=args.force_context)
    except ContextRefused as refusal:
        print(json.dumps(refusal_json(refusal), indent=2) if args.json else render_refusal(refusal))
        print(f"compare: refused: {refusal}", file=sys.stderr)
        return EXIT_REFUSED
    except SluiceError as err:
        print(f"compare: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    sys.stdout.write(
        json.dumps(to_json(comparison), indent=2) + "\n" if args.json else render_markdown(comparison)
    )
    return exit_code(comparison)


def _check_arguments(args: argparse.Namespace) -> None:
    usage = _parser()
    if args.ab and args.reports:
        usage.error("give either two reports or --ab with two interpreters, not both")
    if not args.ab and len(args.reports) != 2:
        usage.error("expected BASELINE.json CANDIDATE.json (or --ab BASELINE_PYTHON CANDIDATE_PYTHON)")
    if args.rounds < 1:
        usage.error("--rounds must be at least 1")


def _performance_config(args: argparse.Namespace) -> PerformanceConfig:
    if args.thresholds:
        return load_thresholds(args.thresholds)
    if args.config:
        return load_performance_section(args.config)
    return PerformanceConfig()


def _sides(args: argparse.Namespace) -> tuple[Side, Side]:
    if not args.ab:
        baseline = read_report(Path(args.reports[0]), name="baseline")
        candidate = read_report(Path(args.reports[1]), name="candidate")
        return Side.from_reports([baseline], name="baseline"), Side.from_reports(
            [candidate], name="candidate"
        )
    pythons = dict(zip(Arm, args.ab, strict=True))
    if args.out_dir:
        try:
            args.out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise CompareInputError(f"--out-dir {args.out_dir}: {err.strerror}") from None
        sides = run_interleaved(pythons, rounds=args.rounds, out_dir=args.out_dir, config=args.config)
    else:
        with tempfile.TemporaryDirectory(prefix="sluice-ab-") as tmp:
            sides = run_interleaved(pythons, rounds=args.rounds, out_dir=Path(tmp), config=args.config)
    return sides[Arm.BASELINE], sides[Arm.CANDIDATE]
