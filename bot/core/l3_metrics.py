"""L3's metrics as the gate weighs them: what regressed beyond noise against the baseline, by area of the
config (`tiers.l3.areas`), and the area owners' `/signoff l3` on a head."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from bot.core import bisect
from bot.core.config import SluiceConfig

UNASSIGNED = "(unassigned)"  # kernels no `tiers.l3.areas` entry covers (no valid area name): L3's owner


@dataclass(frozen=True)
class Regression:
    """One cell of `runners compare` that regressed: a benchmark (its key) on one metric."""

    benchmark: str  # kernel[shape:dtype:config]
    kernel: str
    metric: str  # median | p90 | p99 | compile_cold | compile_warm
    critical: bool
    ratio: float  # candidate / baseline
    threshold: float  # the relative change that counts, for this cell

    def shown(self) -> str:
        """`matmul[…] median +5.2 %` for a summary or a reply."""
        return f"`{self.benchmark}` {self.metric} {self.ratio - 1:+.1%}".replace("%", " %")


@dataclass(frozen=True)
class MetricRegression:
    """A critical kernel's confident regression between two reports (runners.compare's failing cells): what
    trunk watch and a bundle's performance bisection both bisect."""

    name: str  # `benchmark key · metric`
    before_ms: float
    after_ms: float
    reason: str

    def evidence(self) -> str:
        """`0.25 ms before, 0.33 ms after (+30.0%): why` for an issue, a comment or a risk reason."""
        change = self.after_ms / self.before_ms - 1 if self.before_ms > 0 else float("inf")
        return f"{self.before_ms:.4g} ms before, {self.after_ms:.4g} ms after ({change:+.1%}): {self.reason}"


@dataclass(frozen=True)
class MetricComparison:
    """A report against a baseline: the critical kernels' confident regressions, and every metric (`key ·
    metric`) it measured with a confident verdict either way (regressed, improved or the same)."""

    regressions: tuple[MetricRegression, ...]
    measured: frozenset[str]


def regression_outcome(names: Sequence[str], comparison: MetricComparison | None) -> bisect.Outcome:
    """A bisection run's answer for metric regressions `names`: FAIL when its report still shows one of them
    (confidently regressed against the same baseline), PASS when it measured each of them and none regressed,
    SKIP when it cannot say (no report, no benchmarks, another context; or one of them not measured, not
    comparable or only with low confidence: a missing benchmark is no evidence that it got faster)."""
    if comparison is None:
        return bisect.Outcome.SKIP
    found = {r.name for r in comparison.regressions}
    if any(name in found for name in names):
        return bisect.Outcome.FAIL
    return bisect.Outcome.PASS if all(name in comparison.measured for name in names) else bisect.Outcome.SKIP


@dataclass(frozen=True)
class L3Metrics:
    """What the newest attempt of L3 on a head found against its baseline (empty: nothing regressed, or no
    baseline to compare with)."""

    head_sha: str
    regressions: tuple[Regression, ...] = ()


@dataclass(frozen=True)
class Signoff:
    """An area owner's `/signoff l3`: they accept L3's regressed metrics on a head (a push needs another)."""

    login: str
    head_sha: str
    at: dt.datetime


def by_area(regressions: Sequence[Regression], config: SluiceConfig) -> dict[str, tuple[Regression, ...]]:
    """The regressions grouped by the area of their kernel, in the config's order (the unassigned ones,
    `(unassigned)`, last)."""
    l3 = config.tiers.l3
    found: dict[str, list[Regression]] = {}
    for regression in regressions:
        area = l3.area_of(regression.kernel)
        found.setdefault(area.name if area is not None else UNASSIGNED, []).append(regression)
    order = [a.name for a in l3.areas] + [UNASSIGNED]
    return {name: tuple(found[name]) for name in order if name in found}


def listed(regressions: Sequence[Regression], *, limit: int = 5) -> str:
    shown = ", ".join(r.shown() for r in regressions[:limit])
    return shown + (f" and {len(regressions) - limit} more" if len(regressions) > limit else "")
