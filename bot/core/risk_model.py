"""A calibrated risk model: P(an upstream commit breaks the fork | its features), each with its weight."""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from bot.core.config import SluiceConfig, all_glob, any_glob
from bot.core.models import PlannedCommit, RiskKind

MODEL_SCHEMA = "sluice.risk-model/1"
DEFAULT_MODEL = (
    "data/default_risk_model.json"  # in the `bot` package: fitted by benchmarks/make_default_model.py
)
FEATURES_VERSION = 2  # bump when commit_features changes meaning: a model fitted on other features is refused
# Changed-line buckets (lower bounds); the first is the reference level, so it has no feature of its own.
SIZE_BUCKETS: tuple[int, ...] = (0, 10, 50, 200, 500)
TESTS_OR_DOCS = ("test/**", "**/test/**", "**/tests/**", "python/test/**", "docs/**", "**/*.md", "**/*.rst")
# Planner reasons that become a 0/1 feature each (the size and component reasons have features of their own).
REASON_FEATURES: tuple[RiskKind, ...] = (
    RiskKind.PATCH_STACK_FILE,
    RiskKind.PATCH_STACK_HUNK,
    RiskKind.PATCH_STACK_SYMBOL,
    RiskKind.PREDICTED_CONFLICT,
    RiskKind.MECHANICAL_CONFLICT,
    RiskKind.REVERT,
    RiskKind.RELAND,
    RiskKind.EXTENSION_INTERFACE,
    RiskKind.BINARY,
    RiskKind.UNREADABLE,
)
# Planner reasons given once per file or symbol: how many there are (log2(1 + n)) is a feature of its own. On
# Intel's history the count carries what the 0/1 feature cannot: one file of a fork-patched tree is common,
# ten of them are not.
COUNTED_FEATURES: tuple[RiskKind, ...] = (
    RiskKind.PATCH_STACK_FILE,
    RiskKind.PATCH_STACK_HUNK,
    RiskKind.PATCH_STACK_SYMBOL,
)
# Upstream's subject tags, `[LAYOUTS] …`, `[AMD][NFC] …`: the area the author says the change is in. Only
# the leading ones count (a bracket later in the subject is prose), at most MAX_TAGS of them.
SUBJECT_TAGS = re.compile(r"\s*\[([^\[\]]{1,32})\]")
TAG_TEXT = re.compile(r"[a-z0-9][a-z0-9_.+/-]*")  # what a tag may be made of once normalised (else skipped)
MAX_TAGS = 4
QUANTILES = 101  # a model's `quantiles`: one per percentile, 0 % … 100 %


def size_feature(changed_lines: int) -> str | None:
    """`size>=N` for the bucket the commit's changed lines fall in; None for the reference bucket."""
    floor = max(b for b in SIZE_BUCKETS if changed_lines >= b)
    return None if floor == SIZE_BUCKETS[0] else f"size>={floor}"


def component_features(files: tuple[str, ...], config: SluiceConfig) -> set[str]:
    """`component:<name>` for each configured component any of the files belongs to."""
    return {f"component:{c.name}" for c in config.all_components if any_glob(c.paths, files)}


def subject_tags(subject: str) -> list[str]:
    """The subject's leading `[TAG]`s, lower-cased and with inner spaces as `-`, in order, each once."""
    tags: list[str] = []
    at = 0
    while len(tags) < MAX_TAGS and (m := SUBJECT_TAGS.match(subject, at)):
        tag = "-".join(m.group(1).lower().split())
        if TAG_TEXT.fullmatch(tag) and tag not in tags:
            tags.append(tag)
        at = m.end()
    return tags


def commit_features(commit: PlannedCommit, *, config: SluiceConfig) -> dict[str, float]:
    """The model's inputs for one planned commit, as the planner computed them (only the present ones)."""
    found: dict[str, float] = {"log2-lines": math.log2(1 + commit.changed_lines)}
    if commit.files:
        found["log2-files"] = math.log2(1 + len(commit.files))
    size = size_feature(commit.changed_lines)
    if size:
        found[size] = 1.0
    found.update(dict.fromkeys(component_features(commit.files, config), 1.0))
    if commit.files and all_glob(TESTS_OR_DOCS, commit.files):
        found["tests-or-docs-only"] = 1.0
    kinds = {r.kind for r in commit.reasons}
    found.update({f"reason:{k.value}": 1.0 for k in REASON_FEATURES if k in kinds})
    for kind in COUNTED_FEATURES:
        if n := sum(1 for r in commit.reasons if r.kind is kind):
            found[f"count:{kind.value}"] = math.log2(1 + n)
    found.update({f"tag:{t}": 1.0 for t in subject_tags(commit.subject)})
    if commit.depends_on:
        found["has-dependencies"] = 1.0
    return found


class Provenance(BaseModel):
    """Where a model came from, so a reader can judge it and re-derive it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str  # the repository (path or URL) and refs it was mined from
    fork_ref: str = ""
    upstream_ref: str = ""
    since: str | None = None  # ISO dates of the mined range
    until: str | None = None
    commits: int = 0  # upstream commits with an outcome
    positives: int = 0  # of which broke the fork
    method: str = ""  # e.g. "scikit-learn LogisticRegression(C=1.0, class_weight=None)"
    held_out: dict[str, float] = Field(default_factory=dict)  # auc, recall@bundled-share, split date …
    notes: tuple[str, ...] = ()


class Contribution(BaseModel):
    """One feature's part in a commit's probability: its value and the odds multiplier it brings."""

    model_config = ConfigDict(frozen=True)

    feature: str
    value: float
    odds_ratio: float  # exp(coefficient × value): ×2.1 means the feature doubles the odds


def quantiles_of(probabilities: Sequence[float]) -> tuple[float, ...]:
    """`RiskModel.quantiles` for the chain levels a model gave the commits it was fitted on."""
    if not probabilities:
        return ()
    ranked = sorted(probabilities, reverse=True)
    top = len(ranked) - 1
    return tuple(round(ranked[round(k * top / (QUANTILES - 1))], 6) for k in range(QUANTILES))


class Estimate(BaseModel):
    model_config = ConfigDict(frozen=True)

    probability: float
    contributions: tuple[Contribution, ...]  # strongest first, features with no weight left out


class RiskModel(BaseModel):
    """A logistic model over `commit_features`; written as JSON with its provenance."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_id: str = Field(MODEL_SCHEMA, alias="schema")
    features_version: int = FEATURES_VERSION
    intercept: float
    coefficients: dict[str, float]
    provenance: Provenance
    # The chain levels (`bot.core.calibrated.chain_levels`: a commit's probability, or that of a commit it
    # depends on) of the commits it was fitted on, at each percentile from the highest down: `quantiles[k]` is
    # the threshold at which the planner chains k % of them, dependents included. With these,
    # `risk.chain_share` is a share of the fork's stream (one threshold for every plan), not of each plan;
    # () when unknown.
    quantiles: tuple[float, ...] = ()

    def share_threshold(self, share: float) -> float | None:
        """The threshold that chains `share` of the fitted commits (None without quantiles)."""
        if len(self.quantiles) != QUANTILES:
            return None
        at = min(max(share, 0.0), 1.0) * (QUANTILES - 1)
        low = math.floor(at)
        high = min(low + 1, QUANTILES - 1)
        return self.quantiles[low] + (self.quantiles[high] - self.quantiles[low]) * (at - low)

    def estimate(self, features: Mapping[str, float], *, strongest: int | None = None) -> Estimate:
        """P(breaks the fork) and each present feature's odds multiplier, strongest first (only the
        `strongest` ones when given: the planner shows a few, and scores every commit of a plan)."""
        logit = self.intercept
        parts: list[tuple[float, str, float]] = []  # (log odds it adds, feature, value)
        for name, value in sorted(features.items()):
            weight = self.coefficients.get(name, 0.0)
            if weight == 0.0 or value == 0.0:
                continue
            logit += weight * value
            parts.append((weight * value, name, value))
        parts.sort(key=lambda p: (-abs(p[0]), p[1]))
        shown = tuple(
            Contribution(feature=name, value=value, odds_ratio=math.exp(added))
            for added, name, value in parts[:strongest]
        )
        return Estimate(probability=1.0 / (1.0 + math.exp(-logit)), contributions=shown)

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> RiskModel:
        """The model in `text`; ValueError when it is not one, or was fitted on other features."""
        model = cls.model_validate_json(text)
        if model.schema_id != MODEL_SCHEMA:
            raise ValueError(
                f"not a Sluice risk model (schema {model.schema_id!r}, expected {MODEL_SCHEMA!r})"
            )
        if model.features_version != FEATURES_VERSION:
            raise ValueError(
                f"the model was fitted on features version {model.features_version}; this Sluice computes "
                f"version {FEATURES_VERSION}: run `sluice calibrate` again"
            )
        if model.quantiles and (
            len(model.quantiles) != QUANTILES or any(a < b for a, b in itertools.pairwise(model.quantiles))
        ):
            raise ValueError(f"the model's quantiles must be {QUANTILES} probabilities, from high to low")
        return model
