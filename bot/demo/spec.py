"""What a sandbox is: its sizes, its ground-truth manifest, and the paths it counts as high-risk."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from bot.core.errors import BadInput
from bot.core.models import RecognitionMethod


@dataclass(frozen=True)
class SandboxSize:
    files: int
    base_commits: int
    fork_commits: int
    ingested: int
    pending: int
    seed: int = 0


DEMO = SandboxSize(files=400, base_commits=200, fork_commits=60, ingested=150, pending=120)
# ≈12,000 upstream commits in all, like Triton
BENCH = SandboxSize(files=5000, base_commits=10_000, fork_commits=2000, ingested=600, pending=500)

# Smallest sizes that still hold every ground-truth structure the manifest promises.
MIN_SIZE = SandboxSize(files=120, base_commits=5, fork_commits=12, ingested=20, pending=40)

TRAILER = RecognitionMethod.TRAILER.value
CHERRY_PICK_X = RecognitionMethod.CHERRY_PICK_X.value
PATCH_ID = RecognitionMethod.PATCH_ID.value
SUBJECT_PATTERN = RecognitionMethod.SUBJECT_PATTERN.value
EMERGENCY = "emergency"  # the fork-side marker of an emergency pick (not a recognition method)

HIGH_RISK_PATTERNS = (
    "cmake/llvm-hash.txt",
    "cmake/*toolchain*",
    "lib/Dialect/*/Transforms/**",
    "lib/Analysis/**",
    "lib/Conversion/**",
    "third_party/nvidia/lib/**",
    "third_party/amd/lib/**",
    "python/src/**",
    "python/triton/runtime/**",
    "third_party/*/backend/driver.*",
)


def _glob_regex(pattern: str) -> str:
    out = re.escape(pattern).replace(r"\*\*", "\0").replace(r"\*", "[^/]*")
    return out.replace("\0", ".*")


_HIGH_RISK_RE = re.compile("|".join(f"(?:{_glob_regex(p)})" for p in HIGH_RISK_PATTERNS) + r"\Z")


def is_high_risk(path: str) -> bool:
    """True for paths in a high-risk component (LLVM pin, toolchain, core passes, codegen, runtime ABI)."""
    return _HIGH_RISK_RE.match(path) is not None


@dataclass(frozen=True)
class Manifest:
    """Ground truth about a sandbox: what the fork has, what it lacks, and how the pending commits relate."""

    upstream_head: str
    fork_head: str
    fork_point: str
    ingestion_tip: str
    ingested: dict[str, str]  # upstream sha -> recognition method (picks after the fork point, no emergency)
    emergency: list[str]
    backlog: list[str]
    pending: list[str]
    patch_stack: list[str]
    fork_picks: dict[str, str]  # upstream sha -> fork commit that carries it (ingested and emergency)
    line_dependencies: list[tuple[str, str]]  # (later, earlier)
    reverts: dict[str, str]
    relands: dict[str, str]
    llvm_bumps: list[str]
    large: list[str]
    patch_stack_symbol_overlaps: list[str]
    overlap_symbols: dict[str, str]
    conflicting: list[str]
    interface_changes: list[str]
    independent: list[str]
    # Low-risk upstream commits that break the fork's L1 (its TLX tests): what a bundle's bisection must find.
    culprits: list[str]

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)


@dataclass(frozen=True)
class Sandbox:
    root: Path
    upstream: Path
    fork: Path
    manifest: Manifest
    fork_ref: str = "main"
    upstream_ref: str = "upstream/main"


class SandboxError(BadInput):
    """The requested sandbox cannot be built (size too small, target exists, git failed)."""
