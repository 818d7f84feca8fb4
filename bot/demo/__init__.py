"""The generated sandbox behind `sluice demo`: `build_sandbox(root, size)` and what it promises."""

from bot.demo.layout import SLUICE_YML
from bot.demo.sandbox import build_sandbox
from bot.demo.spec import (
    BENCH,
    CHERRY_PICK_X,
    DEMO,
    HIGH_RISK_PATTERNS,
    MIN_SIZE,
    PATCH_ID,
    SUBJECT_PATTERN,
    TRAILER,
    Manifest,
    Sandbox,
    SandboxError,
    SandboxSize,
    is_high_risk,
)
from bot.demo.validation import CULPRIT_SUBJECT

__all__ = [
    "BENCH",
    "CHERRY_PICK_X",
    "CULPRIT_SUBJECT",
    "DEMO",
    "HIGH_RISK_PATTERNS",
    "MIN_SIZE",
    "PATCH_ID",
    "SLUICE_YML",
    "SUBJECT_PATTERN",
    "TRAILER",
    "Manifest",
    "Sandbox",
    "SandboxError",
    "SandboxSize",
    "build_sandbox",
    "is_high_risk",
]
