"""Expected tier runs of a plan, and the chaining threshold that minimises them (pure)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# Thresholds tried when choosing one: every distinct probability for small plans, evenly spaced ranks of them
# for large ones (the expected runs change slowly between neighbours, and this keeps a plan linear in size).
MAX_THRESHOLDS = 64
NO_CHAIN = 1.0  # the threshold that chains nothing on probability alone


@dataclass(frozen=True)
class Candidate:
    """A commit the threshold decides: its probability and changed lines, in upstream order."""

    probability: float
    lines: int
    forced: bool = False  # chained whatever the threshold (a structural rule)
    # Bundled, it is its bundle's last commit: it needs a person against fork trunk, and what a bundle holds
    # after a commit that stops the picking would wait on them too.
    ends: bool = False


Close = Callable[[list[bool]], list[bool]]  # a chained set with what must follow it (dependents) added


def unchanged(mask: list[bool]) -> list[bool]:
    return mask


@dataclass(frozen=True)
class BundleCaps:
    max_commits: int
    max_lines: int
    max_culprits: float  # the summed probability (expected culprits) a bundle may reach


@dataclass(frozen=True)
class Choice:
    threshold: float  # chain a candidate when its probability is at least this
    expected_runs: float


def bundle_runs(probabilities: Sequence[float]) -> float:
    """One run, plus when it fails a bisection: about log2(n) runs per culprit.

    P(fails) · E[culprits | fails] is the summed probability, so this is 1 + Σp · log2(n).
    """
    n = len(probabilities)
    if n == 0:
        return 0.0
    fails = 1.0 - math.prod(1.0 - p for p in probabilities)
    culprits = sum(probabilities) / fails if fails > 0 else 0.0
    return 1.0 + fails * math.log2(n) * culprits


def fill(sizes: Sequence[Candidate], caps: BundleCaps) -> list[list[int]]:
    """Bundles (as indices) in upstream order, each closed before it passes a cap or after a commit that
    `ends` one; a lone commit fits."""
    groups: list[list[int]] = []
    lines, culprits = 0, 0.0
    for index, c in enumerate(sizes):
        full = groups and (
            sizes[groups[-1][-1]].ends
            or len(groups[-1]) >= caps.max_commits
            or lines + c.lines > caps.max_lines
            or culprits + c.probability > caps.max_culprits + 1e-12
        )
        if not groups or full:
            groups.append([])
            lines, culprits = 0, 0.0
        groups[-1].append(index)
        lines += c.lines
        culprits += c.probability
    return groups


def plan_runs(candidates: Sequence[Candidate], chained: Sequence[bool], caps: BundleCaps) -> float:
    """Σ over the bundles the unchained candidates fill of `bundle_runs`, + one run per chained one."""
    bundled = [c for c, chain in zip(candidates, chained, strict=True) if not chain]
    groups = fill(bundled, caps)
    return sum(chained) + sum(bundle_runs([bundled[i].probability for i in g]) for g in groups)


def chained_at(candidates: Sequence[Candidate], threshold: float, close: Close = unchanged) -> list[bool]:
    """The candidates chained at `threshold`: forced ones, those at or above it, and what `close` adds."""
    return close([c.forced or c.probability >= threshold for c in candidates])


def expected_runs(
    candidates: Sequence[Candidate], *, threshold: float, caps: BundleCaps, close: Close = unchanged
) -> float:
    """The runs of the plan that chains the candidates at or above `threshold` and bundles the rest."""
    return plan_runs(candidates, chained_at(candidates, threshold, close), caps)


def thresholds(candidates: Sequence[Candidate], caps: BundleCaps) -> list[float]:
    """From high to low. The highest is the culprit cap: a commit whose probability alone reaches it can
    share no bundle, and a bundle of one that is likely to fail is a chain nobody watches."""
    top = min(NO_CHAIN, caps.max_culprits)
    values = sorted({c.probability for c in candidates if c.probability < top}, reverse=True)
    if len(values) > MAX_THRESHOLDS:
        step = (len(values) - 1) / (MAX_THRESHOLDS - 1)
        values = [values[round(i * step)] for i in range(MAX_THRESHOLDS)]
    return [top, *values]


def choose_threshold(
    candidates: Sequence[Candidate], caps: BundleCaps, *, close: Close = unchanged
) -> Choice:
    """The threshold with the fewest expected runs; on a tie the higher one (fewer commits chained)."""
    best: Choice | None = None
    for threshold in thresholds([c for c in candidates if not c.forced], caps):
        runs = expected_runs(candidates, threshold=threshold, caps=caps, close=close)
        if best is None or runs < best.expected_runs - 1e-9:
            best = Choice(threshold=threshold, expected_runs=runs)
    assert best is not None  # the cap is always tried
    return best


def share_mask(candidates: Sequence[Candidate], *, share: float, grow: Grow) -> tuple[list[bool], list[bool]]:
    """`risk.chain_share`: the forced candidates, then the most likely first, each with what `grow` says
    must follow it, while the chained stay within that share of all candidates. Returns the chained, and
    the candidates chained for their own probability (not forced, not only following another)."""
    target = math.floor(share * len(candidates) + 0.5)
    mask = [False] * len(candidates)
    roots = [False] * len(candidates)
    for i in (i for i, c in enumerate(candidates) if c.forced):
        grow(mask, i, math.inf)
    ranked = sorted(
        (i for i, c in enumerate(candidates) if not c.forced), key=lambda i: (-candidates[i].probability, i)
    )
    for i in ranked:  # one that would overflow the share with its dependents is passed over
        if not mask[i]:
            roots[i] = grow(mask, i, target - sum(mask))
    return mask, roots


# Chain candidate `index` in `mask` with what must follow it, if that adds at most `room`; whether it did.
Grow = Callable[[list[bool], int, float], bool]
