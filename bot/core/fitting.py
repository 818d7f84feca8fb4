"""Fitting P(breaks the fork | features) to mined rows, and judging it on a time split: AUC and recall."""

from __future__ import annotations

import datetime as dt
import itertools
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

# numpy and scikit-learn are imported where a fit or a judgement needs them: every `sluice` command imports
# this module (through calibrate's parser), and they cost a second of start-up.

# Deterministic: lbfgs has no randomness; the rows come sorted by time and the columns by name.
SOLVER = "lbfgs"
MAX_ITER = 5000
DIGITS = 6  # coefficients are rounded so the model file does not change with the last bit of a float
# A feature present in fewer fitted rows gets no coefficient: on Intel's history, subject tags seen once or
# twice took weights of ×2–×5 from a single commit, and held-out recall did not need them.
MIN_SUPPORT = 5


@dataclass(frozen=True)
class Row:
    """One upstream commit of one past ingestion: its features then, and whether it broke the fork."""

    sha: str
    window: str
    time: int  # the ingestion's committer time: rows are split by it
    features: Mapping[str, float]
    outcome: int  # 1 when it broke the fork
    evidence: str = ""
    risk: str = ""  # the level today's rules gave it, for comparison
    changed_lines: int = 0
    known: int | None = None  # when the fork first said it broke (a fix commit's time); None: not when


def by_month(rows: Sequence[Row]) -> list[tuple[str, int, int]]:
    """(UTC month `YYYY-MM`, commits, culprits) of the rows' ingestions, oldest first: how the fork's
    breakage rate moves, which a model fitted on earlier months carries forward unchanged."""
    months: dict[str, list[int]] = {}
    for row in sorted(rows, key=lambda r: r.time):
        month = dt.datetime.fromtimestamp(row.time, dt.UTC).strftime("%Y-%m")
        months.setdefault(month, []).append(row.outcome)
    return [(month, len(outcomes), sum(outcomes)) for month, outcomes in months.items()]


def as_known_at(rows: Sequence[Row], cut: int) -> list[Row]:
    """The rows as a fit at time `cut` would have had them: a culprit the fork only named at `cut` or later
    was, then, a commit that had not broken anything yet (a row that does not say when stays a culprit)."""
    return [replace(r, outcome=0) if r.known is not None and r.known >= cut else r for r in rows]


@dataclass(frozen=True)
class Fit:
    intercept: float
    coefficients: dict[str, float]

    def probability(self, features: Mapping[str, float]) -> float:
        logit = self.intercept + sum(self.coefficients.get(k, 0.0) * v for k, v in features.items())
        return 1.0 / (1.0 + math.exp(-logit))

    def score(self, rows: Sequence[Row]) -> list[float]:
        return [self.probability(r.features) for r in rows]


def design(rows: Sequence[Row], names: Sequence[str]) -> np.ndarray:
    import numpy as np

    column = {name: i for i, name in enumerate(names)}
    matrix = np.zeros((len(rows), len(names)))
    for i, row in enumerate(rows):
        for name, value in row.features.items():
            if name in column:
                matrix[i, column[name]] = value
    return matrix


def supported(rows: Sequence[Row], minimum: int = MIN_SUPPORT) -> list[str]:
    """The features present (non-zero) in at least `minimum` rows, by name."""
    seen = Counter(name for r in rows for name, value in r.features.items() if value)
    return sorted(name for name, n in seen.items() if n >= minimum)


def fit(rows: Sequence[Row], *, c: float) -> Fit:
    """Regularised (L2, strength 1/c) logistic regression over the features present in at least
    MIN_SUPPORT rows; a rarer feature (a subject tag seen twice) gets no coefficient."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    names = supported(rows)
    outcomes = np.array([r.outcome for r in rows])
    if len(set(outcomes.tolist())) < 2:
        raise ValueError("every mined commit has the same outcome: nothing to learn")
    model = LogisticRegression(C=c, solver=SOLVER, max_iter=MAX_ITER, tol=1e-10)
    model.fit(design(rows, names), outcomes)
    coefficients = {n: round(float(w), DIGITS) for n, w in zip(names, model.coef_[0], strict=True)}
    return Fit(intercept=round(float(model.intercept_[0]), DIGITS), coefficients=coefficients)


def time_split(rows: Sequence[Row], train_share: float) -> tuple[list[Row], list[Row]]:
    """The earlier ~`train_share` of rows and the later rest, cut between ingestions (never inside one)."""
    ordered = sorted(rows, key=lambda r: (r.time, r.window))
    cut = round(len(ordered) * train_share)
    while 0 < cut < len(ordered) and ordered[cut].window == ordered[cut - 1].window:
        cut += 1
    return ordered[:cut], ordered[cut:]


def recall_curve(scores: Sequence[float], outcomes: Sequence[int]) -> list[tuple[float, float]]:
    """(share of commits chained, share of culprits among them) when the riskiest are chained first, for
    k = 0 … n chained. Ties are broken by chance in expectation: a tie group counts pro rata."""
    n, culprits = len(scores), sum(outcomes)
    if n == 0 or culprits == 0:
        return [(0.0, 0.0), (1.0, 0.0)]
    groups: dict[float, list[int]] = {}
    for score, outcome in zip(scores, outcomes, strict=True):
        groups.setdefault(score, []).append(outcome)
    curve, taken, caught = [(0.0, 0.0)], 0, 0.0
    for score in sorted(groups, reverse=True):
        members = groups[score]
        rate = sum(members) / len(members)
        for _ in members:
            taken += 1
            caught += rate
            curve.append((taken / n, caught / culprits))
    return curve


def recall_at(curve: Sequence[tuple[float, float]], chained_share: float) -> float:
    """Recall when the riskiest `chained_share` of commits are chained (interpolated between commits)."""
    for (s0, r0), (s1, r1) in itertools.pairwise(curve):
        if s0 <= chained_share <= s1:
            return r0 if s1 == s0 else r0 + (r1 - r0) * (chained_share - s0) / (s1 - s0)
    return curve[-1][1]


def share_for_recall(curve: Sequence[tuple[float, float]], target: float) -> float:
    """The smallest share of commits chained that reaches `target` recall."""
    return next((share for share, recall in curve if recall >= target - 1e-12), 1.0)


def auc(scores: Sequence[float], outcomes: Sequence[int]) -> float | None:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(outcomes, scores)) if len(set(outcomes)) == 2 else None


@dataclass(frozen=True)
class Quality:
    """How well a ranking finds the culprits of some rows."""

    commits: int
    culprits: int
    auc: float | None
    recall_at_bundled: float
    chained_for_recall: float
    curve: list[tuple[float, float]]


def judge(
    scores: Sequence[float], outcomes: Sequence[int], *, bundled_share: float, target: float
) -> Quality:
    curve = recall_curve(scores, outcomes)
    return Quality(
        commits=len(outcomes),
        culprits=sum(outcomes),
        auc=auc(scores, outcomes),
        recall_at_bundled=recall_at(curve, 1.0 - bundled_share),
        chained_for_recall=share_for_recall(curve, target),
        curve=curve,
    )
