"""Risk models on disk: a fork's calibrated model, and the default one Sluice ships as package data."""

from __future__ import annotations

import importlib.resources
from pathlib import Path

from bot.core.risk_model import DEFAULT_MODEL, RiskModel


def read_model(path: Path) -> RiskModel:
    return RiskModel.from_json(path.read_text())


DEFAULT_MODEL_PATH = Path(__file__).resolve().parent.parent / DEFAULT_MODEL  # package data of `bot`


def default_model() -> RiskModel | None:
    """The model Sluice ships (fitted on public Triton fork history), or None when this install lacks it."""
    resource = importlib.resources.files("bot").joinpath(DEFAULT_MODEL)
    return RiskModel.from_json(resource.read_text()) if resource.is_file() else None
