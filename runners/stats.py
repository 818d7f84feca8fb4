"""The statistics behind `runners compare`: bootstrap ratio intervals, rank and quantile tests, FDR, noise."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import stats as sps

Samples = npt.NDArray[np.float64]

DEFAULT_RESAMPLES = 2000
# Resampled values held in memory at once (8 bytes each): 4M keeps a bootstrap of 10k samples at 32 MB.
_CHUNK_ELEMENTS = 4_000_000
# Beyond this many times the current samples, "more samples" stops being useful advice.
MAX_SETTLE_FACTOR = 100
# Sample counts aim for an interval this fraction of the margin wide, so that one more run likely settles.
SETTLE_SAFETY = 0.8


@dataclass(frozen=True)
class RatioInterval:
    """candidate / baseline of one statistic: the point estimate and its bootstrap interval."""

    ratio: float
    lo: float
    hi: float

    @property
    def half_width(self) -> float:
        return (self.hi - self.lo) / 2


def ratio_interval(
    baseline: Samples,
    candidate: Samples,
    *,
    q: float,
    confidence: float,
    rng: np.random.Generator,
    resamples: int = DEFAULT_RESAMPLES,
) -> RatioInterval:
    """Percentile-bootstrap interval of quantile(candidate, q) / quantile(baseline, q), both resampled."""
    ratios = _resampled_quantile(candidate, q, rng, resamples) / _resampled_quantile(
        baseline, q, rng, resamples
    )
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(ratios, [alpha, 1 - alpha])
    point = float(np.quantile(candidate, q) / np.quantile(baseline, q))
    return RatioInterval(point, float(lo), float(hi))


def _resampled_quantile(samples: Samples, q: float, rng: np.random.Generator, resamples: int) -> Samples:
    """The `q` quantile of `resamples` bootstrap resamples, drawn in chunks that bound the memory used."""
    n = len(samples)
    rows_per_chunk = max(1, _CHUNK_ELEMENTS // n)
    out = np.empty(resamples)
    for start in range(0, resamples, rows_per_chunk):
        rows = min(rows_per_chunk, resamples - start)
        picks = samples[rng.integers(0, n, size=(rows, n))]
        out[start : start + rows] = np.quantile(picks, q, axis=1)
    return out


def rank_test_p(baseline: Samples, candidate: Samples) -> float:
    """Two-sided Mann-Whitney U p-value; 1.0 when every sample is equal (nothing to rank)."""
    if np.ptp(np.concatenate([baseline, candidate])) == 0:
        return 1.0
    p = float(sps.mannwhitneyu(candidate, baseline, alternative="two-sided").pvalue)
    return p if math.isfinite(p) else 1.0


def quantile_test_p(baseline: Samples, candidate: Samples, *, q: float) -> float:
    """Two-sided p-value that both sides share their `q` quantile (Mood's quantile test, Fisher exact).

    The rank test asks whether one side is generally slower; a tail (p90, p99) can move while the
    body stays put, so tails are tested by how many samples of each side exceed the pooled quantile.
    """
    cut = np.quantile(np.concatenate([baseline, candidate]), q)
    table = [
        [int(np.sum(baseline > cut)), int(np.sum(baseline <= cut))],
        [int(np.sum(candidate > cut)), int(np.sum(candidate <= cut))],
    ]
    return float(sps.fisher_exact(table).pvalue)


def benjamini_hochberg(p_values: list[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (q-values): a cell is significant when its q-value ≤ the FDR."""
    if not p_values:
        return []
    return [float(q) for q in sps.false_discovery_control(np.asarray(p_values), method="bh")]


def relative_noise(*sides: Samples) -> float:
    """Half the interquartile range of the samples relative to their side's median, both sides pooled.

    Pooling (each side divided by its own median, so a shift between the sides adds nothing) gives
    twice the samples of either side alone, which keeps the threshold, k times this, from jittering
    by as much as the changes it is meant to separate.
    """
    normalised = np.concatenate([side / np.median(side) for side in sides if len(side)])
    q1, q3 = np.quantile(normalised, [0.25, 0.75])
    return float(q3 - q1) / 2


def samples_to_settle(n: int, *, half_width: float, margin: float) -> int | None:
    """Samples per side at which an interval of `half_width` at `n` samples fits well within `margin`.

    The interval's half-width scales as 1/sqrt(n); the target is SETTLE_SAFETY x `margin`, since the
    point estimate moves too as samples are added. None when that needs more than MAX_SETTLE_FACTOR
    times `n` (the change sits on a boundary: more samples will not settle it cheaply).
    """
    if margin <= 0:
        return None
    needed = math.ceil(n * (half_width / (SETTLE_SAFETY * margin)) ** 2)
    return needed if needed <= MAX_SETTLE_FACTOR * n else None
