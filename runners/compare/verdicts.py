"""Measuring each cell (a benchmark and a metric) on both sides and deciding its verdict."""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from bot.core.config import PerformanceConfig
from runners import stats
from runners.compare.model import EXIT_CRITICAL_REGRESSION, EXIT_OK, ContextRefused, Metric, Verdict, pct
from runners.compare.sides import BenchmarkSamples, Side, context_differences

MIN_SAMPLES = 10  # per side, for any verdict but `inconclusive`; compile time: see LOW_CONFIDENCE_FACTOR
LOW_CONFIDENCE_FACTOR = 2.0  # compile time from fewer samples must move by this many thresholds
# The compiler under test: its version differs between the builds compared, so it never refuses a comparison
# (it does refuse when the runs of one arm differ in it). The context hash covers it (runners.environment).
UNDER_TEST = frozenset({"triton"})

# Latency cells: the quantile each judges and the samples per side it needs to exist at all.
QUANTILES: dict[Metric, tuple[float, int]] = {
    Metric.MEDIAN: (0.5, 0),
    Metric.P90: (0.9, 40),
    Metric.P99: (0.99, 400),
}


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
        return Decision(Verdict.REGRESSED, f"slower by more than {pct(t)}, q = {q_value:.2g}")
    if significant and iv.hi < 1 and change < -t:
        return Decision(Verdict.IMPROVED, f"faster by more than {pct(t)}, q = {q_value:.2g}")
    if iv.lo >= 1 - t and iv.hi <= 1 + t:
        return Decision(Verdict.SAME, f"the interval lies within ±{pct(t)}")
    if abs(change) > t and not significant:
        reason = f"the rank test does not hold after the FDR correction (q = {q_value or 1:.2g})"
    elif abs(change) > t:
        reason = "the interval includes no change"
    else:
        reason = f"the interval reaches past ±{pct(t)}"
    return Decision(Verdict.INCONCLUSIVE, reason, _more_samples(m))


def _decide_low_confidence(m: Measurement) -> Decision:
    """Compile time from fewer than MIN_SAMPLES runs: only a large, clean change gets a verdict."""
    bar = LOW_CONFIDENCE_FACTOR * m.threshold
    more = MIN_SAMPLES - min(m.n)
    if m.separation > 0 and m.ratio - 1 > bar:
        return Decision(
            Verdict.REGRESSED, f"low confidence: {min(m.n)} run(s), slower by more than {pct(bar)}"
        )
    if m.separation < 0 and 1 - m.ratio > bar:
        return Decision(
            Verdict.IMPROVED, f"low confidence: {min(m.n)} run(s), faster by more than {pct(bar)}"
        )
    return Decision(
        Verdict.INCONCLUSIVE,
        f"compile time from {min(m.n)} run(s) per side; judged only beyond ±{pct(bar)} (use --ab)",
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
