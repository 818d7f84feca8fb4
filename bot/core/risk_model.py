"""A calibrated risk model: P(an upstream commit breaks the fork | its features), each with its weight."""

from __future__ import annotations

import math
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from bot.core.config import SluiceConfig, glob_match
from bot.core.models import PlannedCommit, RiskKind

MODEL_SCHEMA = "sluice.risk-model/1"
DEFAULT_MODEL = (
    "data/default_risk_model.json"  # in the `bot` package: fitted by benchmarks/make_default_model.py
)
FEATURES_VERSION = 1  # bump when commit_features changes meaning: a model fitted on other features is refused
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


def size_feature(changed_lines: int) -> str | None:
    """`size>=N` for the bucket the commit's changed lines fall in; None for the reference bucket."""
    floor = max(b for b in SIZE_BUCKETS if changed_lines >= b)
    return None if floor == SIZE_BUCKETS[0] else f"size>={floor}"


def component_features(files: tuple[str, ...], config: SluiceConfig) -> set[str]:
    """`component:<name>` for each configured component any of the files belongs to."""
    return {f"component:{c.name}" for c in config.all_components if any(c.matches(path) for path in files)}


def commit_features(commit: PlannedCommit, *, config: SluiceConfig) -> dict[str, float]:
    """The model's inputs for one planned commit, as the planner computed them (only the present ones)."""
    found: dict[str, float] = {"log2-lines": math.log2(1 + commit.changed_lines)}
    size = size_feature(commit.changed_lines)
    if size:
        found[size] = 1.0
    found.update(dict.fromkeys(component_features(commit.files, config), 1.0))
    if commit.files and all(any(glob_match(p, f) for p in TESTS_OR_DOCS) for f in commit.files):
        found["tests-or-docs-only"] = 1.0
    kinds = {r.kind for r in commit.reasons}
    found.update({f"reason:{k.value}": 1.0 for k in REASON_FEATURES if k in kinds})
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

    def estimate(self, features: Mapping[str, float]) -> Estimate:
        """P(breaks the fork) and each present feature's odds multiplier, strongest first."""
        logit = self.intercept
        parts = []
        for name, value in sorted(features.items()):
            weight = self.coefficients.get(name, 0.0)
            if weight == 0.0 or value == 0.0:
                continue
            logit += weight * value
            parts.append(Contribution(feature=name, value=value, odds_ratio=math.exp(weight * value)))
        parts.sort(key=lambda c: (-abs(math.log(c.odds_ratio)), c.feature))
        return Estimate(probability=1.0 / (1.0 + math.exp(-logit)), contributions=tuple(parts))

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
        return model
