"""The planner's use of a calibrated risk model: each commit's probability and weights, and what to chain."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from bot.core.analysis import short
from bot.core.config import SluiceConfig
from bot.core.models import DependencyKind, PlannedCommit, RiskDecision, RiskKind, RiskLevel, RiskWeight
from bot.core.risk_cost import BundleCaps, Candidate, choose_threshold, plan_runs, share_mask
from bot.core.risk_model import RiskModel, commit_features

SHOWN_WEIGHTS = 6  # features kept per commit, strongest first
REVERT_PAIR = (DependencyKind.REVERTS, DependencyKind.RELANDS)


@dataclass(frozen=True)
class Selection:
    """The commits that start (or join) a chain on their own, each with why; the rest may be bundled."""

    chosen: dict[str, str]
    calibrated: bool = False  # with a model: chains link by real dependencies, bundles by summed probability
    threshold: float | None = None
    chosen_by: str = "rules"
    expected_runs: float | None = None
    caps: BundleCaps | None = None
    structural: frozenset[str] = field(default_factory=frozenset)


@dataclass(frozen=True)
class LoadedModel:
    """A risk model and the name the configuration gave it (`default` or a path)."""

    name: str
    model: RiskModel

    def source(self) -> str:
        p = self.model.provenance
        span = f" {p.since or '…'}..{p.until or '…'}" if p.since or p.until else ""
        return f"{p.source}{span}, {p.commits} commits, {p.positives} broke the fork"

    def decision(self, selection: Selection, *, bundle_culprits: float) -> RiskDecision:
        return RiskDecision(
            model=self.name,
            source=self.source(),
            threshold=selection.threshold if selection.threshold is not None else 1.0,
            chosen_by=selection.chosen_by,
            expected_runs=selection.expected_runs or 0.0,
            bundle_culprits=bundle_culprits,
        )


def caps_for(config: SluiceConfig, *, calibrated: bool) -> BundleCaps:
    culprits = config.risk.bundle_culprits if calibrated else float("inf")
    return BundleCaps(config.bundles.max_commits, config.bundles.max_changed_lines, culprits)


def _some(items: Sequence[str]) -> str:
    return ", ".join(items[:2]) + (f" +{len(items) - 2} more" if len(items) > 2 else "")


def weight_detail(feature: str, commit: PlannedCommit, config: SluiceConfig) -> str:
    """What in the commit a feature stands for, in the words of the planner's reasons."""
    if feature == "log2-lines" or feature.startswith("size>="):
        return f"{commit.changed_lines} lines"
    if feature.startswith("component:"):
        name = feature.removeprefix("component:")
        found = [c for c in config.all_components if c.name == name]
        return _some([f for f in commit.files if found and found[0].matches(f)])
    if feature.startswith(("reason:", "count:")):
        kind = feature.partition(":")[2]
        details = [r.detail for r in commit.reasons if r.kind.value == kind]
        return _some(details) if feature.startswith("reason:") else f"{len(details)}: {_some(details)}"
    if feature == "log2-files":
        return f"{len(commit.files)} files"
    if feature.startswith("tag:"):
        return f"[{feature.removeprefix('tag:')}] in the subject"
    if feature == "tests-or-docs-only":
        return _some(list(commit.files))
    if feature == "has-dependencies":
        return "after " + _some([f"{short(d.sha)} ({d.kind})" for d in commit.depends_on])
    return ""


def with_probability(commit: PlannedCommit, model: RiskModel, config: SluiceConfig) -> PlannedCommit:
    """The commit with P(it breaks the fork) and its strongest weights (rounded: plans compare as bytes)."""
    estimate = model.estimate(commit_features(commit, config=config), strongest=SHOWN_WEIGHTS)
    weights = tuple(
        RiskWeight(
            feature=c.feature.removeprefix("reason:"),
            odds_ratio=round(c.odds_ratio, 3),
            detail=weight_detail(c.feature, commit, config),
        )
        for c in estimate.contributions
    )
    return commit.model_copy(update={"probability": round(estimate.probability, 6), "weights": weights})


def structural_why(commit: PlannedCommit) -> str | None:
    """Why a commit is chained whatever its probability: a critical pin, a revert pair within the plan, or
    a dependency on a commit people deferred or skipped."""
    for reason in commit.reasons:
        if reason.level is RiskLevel.CRITICAL:
            return f"critical pin ({reason.detail})"
    for reason in commit.reasons:
        if reason.kind is RiskKind.HELD_DEPENDENCY:
            return reason.detail
    for dep in commit.depends_on:
        if dep.kind in REVERT_PAIR:
            return f"{dep.kind} {short(dep.sha)}"
    for reason in commit.reasons:
        if reason.kind is RiskKind.REVERT and reason.detail.startswith("reverted by"):
            return reason.detail
    return None


def needs_person(commit: PlannedCommit) -> bool:
    """Whether a commit is predicted to conflict with fork trunk where no mechanical rule resolves it."""
    return any(r.kind is RiskKind.PREDICTED_CONFLICT for r in commit.reasons)


def chain_levels(commits: Sequence[PlannedCommit]) -> list[float]:
    """Per commit (upstream order, with probabilities): the highest stream threshold at which the planner
    chains it. That is its own probability, or the level of a plan commit it depends on (it joins that
    one's chain), or 1.0 for a structural one. The share of commits whose level reaches t is the share a
    threshold of t chains, dependents included: the quantiles `risk.chain_share` reads are of these."""
    level: dict[str, float] = {}  # of the commits before this one
    for c in commits:
        own = 1.0 if structural_why(c) is not None else (c.probability or 0.0)
        level[c.sha] = max([own, *(level[d.sha] for d in c.depends_on if d.sha in level)])
    return [level[c.sha] for c in commits]


def rules_selection(commits: Sequence[PlannedCommit], *, risky_from: RiskLevel) -> Selection:
    """Today's rules: every commit of high risk or above starts a chain, for its strongest reason."""
    chosen = {}
    for c in commits:
        if c.risk.rank >= risky_from.rank:
            top = next((r for r in c.reasons if r.level is c.risk), None)
            chosen[c.sha] = f"{c.risk} risk" + (f": {top.kind}: {top.detail}" if top else "")
    return Selection(chosen=chosen)


@dataclass(frozen=True)
class Dependents:
    """For each commit (by index, upstream order), the later ones that depend on it: they join its chain."""

    later: tuple[tuple[int, ...], ...]

    @classmethod
    def of(cls, commits: Sequence[PlannedCommit]) -> Dependents:
        index = {c.sha: i for i, c in enumerate(commits)}
        later: list[list[int]] = [[] for _ in commits]
        for j, c in enumerate(commits):
            for i in sorted({index[d.sha] for d in c.depends_on if d.sha in index}):
                later[i].append(j)
        return cls(tuple(tuple(x) for x in later))

    def close(self, mask: list[bool]) -> list[bool]:
        out = list(mask)
        for i, chained in enumerate(out):  # dependents come later: one pass in order reaches them all
            if chained:
                for j in self.later[i]:
                    out[j] = True
        return out

    def grow(self, mask: list[bool], start: int, room: float) -> bool:
        """Chain `start` and its dependents in `mask` when that adds at most `room` commits."""
        found, todo = {start}, [start]
        while todo:
            for j in self.later[todo.pop()]:
                if not mask[j] and j not in found:
                    found.add(j)
                    todo.append(j)
        if len(found) > room:
            return False
        for j in found:
            mask[j] = True
        return True


def calibrated_selection(
    commits: Sequence[PlannedCommit], config: SluiceConfig, model: RiskModel | None = None
) -> Selection:
    """Structural rules first; then the threshold with the fewest expected tier runs, or `chain_share`:
    of the fork's stream when `model` knows the probabilities of the commits it was fitted on (one
    threshold for every plan), else of this plan. Both count the commits that will join a chain through
    their dependencies."""
    structural = {c.sha: why for c in commits if (why := structural_why(c)) is not None}
    candidates = [
        Candidate(c.probability or 0.0, c.changed_lines, forced=c.sha in structural, ends=needs_person(c))
        for c in commits
    ]
    caps, dependents = caps_for(config, calibrated=True), Dependents.of(commits)
    share = config.risk.chain_share
    stream = model.share_threshold(share) if model is not None and share is not None else None
    if share is None:
        threshold = choose_threshold(candidates, caps, close=dependents.close).threshold
        roots = [not c.forced and c.probability >= threshold for c in candidates]
        chosen_by, label = "expected-runs", f"≥ threshold {threshold:.3f} (fewest expected tier runs)"
    elif stream is not None:
        threshold = stream
        roots = [share > 0 and not c.forced and c.probability >= threshold for c in candidates]
        chosen_by = "chain-share"
        label = f"≥ {threshold:.3f}: among the {share:.0%} of the fork's stream most likely to break"
    else:
        _, roots = share_mask(candidates, share=share, grow=dependents.grow)
        threshold = min((c.probability for c, r in zip(candidates, roots, strict=True) if r), default=1.0)
        chosen_by, label = "chain-share", f"among the {share:.0%} most likely to break"
    chosen = dict(structural)
    chosen.update(
        {c.sha: f"p {c.probability or 0:.3f} {label}" for c, r in zip(commits, roots, strict=True) if r}
    )
    mask = dependents.close([c.forced or r for c, r in zip(candidates, roots, strict=True)])
    return Selection(
        chosen=chosen,
        calibrated=True,
        threshold=round(threshold, 6),
        chosen_by=chosen_by,
        expected_runs=round(plan_runs(candidates, mask, caps), 3),
        caps=caps,
        structural=frozenset(structural),
    )
