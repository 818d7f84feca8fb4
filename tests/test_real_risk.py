"""`benchmarks/real_risk.py`: its culprit labels and quick fit on hand-made commits, and the no-PATH skip."""

from __future__ import annotations

import hashlib
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from bot.core.models import PlannedCommit, RiskKind, RiskLevel, RiskReason

SCRIPT = Path(__file__).parent.parent / "benchmarks" / "real_risk.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("real_risk", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["real_risk"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def commit(n: int, subject: str, *, hot: bool = False) -> PlannedCommit:
    reasons = (RiskReason(kind=RiskKind.PATCH_STACK_SYMBOL, level=RiskLevel.HIGH, detail="a.cpp: f"),)
    return PlannedCommit(
        sha=f"{n:x}" * 40 if n < 16 else hashlib.sha1(str(n).encode()).hexdigest(),
        subject=subject,
        author="dev",
        committer_time=n,
        changed_lines=3,
        files=("python/triton/a.py",),
        symbols=(),
        risk=RiskLevel.HIGH if hot else RiskLevel.LOW,
        reasons=reasons if hot else (),
        depends_on=(),
    )


def test_culprits_are_reverted_or_named_by_the_fix_commits() -> None:
    real_risk = load()
    window = [
        commit(1, "[AMD] Use buffer ops (#8001)"),
        commit(2, "[NVIDIA] Faster TMA (#8002)"),
        commit(3, "[FRONTEND] Scalars (#8003)"),
        commit(4, "[BACKEND] Layouts (#8004)"),
        commit(5, "[DOCS] Typo (#8005)"),
    ]
    fixes = [
        ("f1", 'Revert "[AMD] Use buffer ops (#8001)"\n\nbreaks XPU'),
        ("f2", f"[intel] fix build after '{'2' * 7}'"),
        ("f3", "[intel] adapt to https://github.com/triton-lang/triton/pull/8003"),
        ("f4", "[intel] follow #8004 in our pass"),
        ("f5", "[Build] Port the docs typo fix (#8005)"),  # its own PR number: a port, not a culprit
    ]
    assert real_risk.culprits(window, fixes) == {c.sha for c in window[:4]}


def test_the_quick_fit_recovers_a_planted_effect() -> None:
    real_risk = load()
    commits = tuple(commit(n, f"c{n}", hot=n % 4 == 0) for n in range(16, 216))
    fixes = tuple(
        (f"f{c.sha}", f"[intel] fix after {c.sha[:10]}") for c in commits if c.committer_time % 8 == 0
    )
    row = real_risk.Row("m", 0, commits, frozenset(), fixes)
    model = real_risk.fit([row])
    assert model.coefficients["reason:patch-stack-symbol"] > 2.0  # half the hot ones break, none of the rest


def test_without_a_path_it_skips() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout.strip()) == (0, "skipped: no repository given")
