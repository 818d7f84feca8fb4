"""Sandbox generator: a deterministic Triton-like upstream and a TLX fork as bare repos, with ground truth."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

from bot.demo.emit import emit_fork, emit_upstream
from bot.demo.fork import Fork
from bot.demo.history import Planner
from bot.demo.spec import DEMO, MIN_SIZE, Manifest, Sandbox, SandboxError, SandboxSize


def _check(size: SandboxSize) -> None:
    for name in ("files", "base_commits", "fork_commits", "ingested", "pending"):
        if getattr(size, name) < getattr(MIN_SIZE, name):
            least = getattr(MIN_SIZE, name)
            raise SandboxError(
                f"{name}={getattr(size, name)} is below the minimum {least}", f"ask for {least} or more"
            )


def _manifest(planner: Planner, fork: Fork, up_shas: list[str], fork_shas: list[str]) -> Manifest:
    up = planner.up
    s = up_shas.__getitem__
    truth = up.truth
    holes = truth["hole"]
    newer = [c.index for c in up.commits[planner.tip + 1 :] if c.role != "emergency"]
    picks = {s(c.upstream): fork_shas[k] for k, c in enumerate(fork.commits) if c.upstream is not None}
    return Manifest(
        upstream_head=up_shas[-1],
        fork_head=fork_shas[-1],
        fork_point=s(planner.size.base_commits - 1),
        ingestion_tip=s(planner.tip),
        ingested={s(i): m for i, m in sorted(fork.methods.items())},
        emergency=[s(i) for i in truth["emergency"]],
        backlog=[s(i) for i in holes],
        pending=[s(i) for i in sorted(holes + newer)],
        patch_stack=[fork_shas[k] for k in fork.own],
        fork_picks=picks,
        line_dependencies=[(s(a), s(b)) for a, b in up.line_deps],
        reverts={s(a): s(b) for a, b in up.reverts.items()},
        relands={s(a): s(b) for a, b in up.relands.items()},
        llvm_bumps=[s(i) for i in truth["llvm"]],
        large=[s(i) for i in truth["large"]],
        patch_stack_symbol_overlaps=[s(i) for i in truth["overlap"]],
        overlap_symbols={s(i): q for i, q in up.overlap_symbols.items()},
        conflicting=[s(i) for i in truth["conflict"]],
        interface_changes=[s(i) for i in truth["interface"]],
        independent=[s(i) for i in truth["independent"]],
        culprits=[s(i) for i in truth["culprit"]],
    )


def build_sandbox(
    root: Path, size: SandboxSize = DEMO, *, progress: Callable[[str], None] | None = None
) -> Sandbox:
    """Build `root/upstream.git` and `root/fork.git` for `size`; identical SHAs for the same size and seed."""
    _check(size)
    say = progress or (lambda _msg: None)
    root = Path(root)
    upstream, fork_repo = root / "upstream.git", root / "fork.git"
    for path in (upstream, fork_repo):
        if path.exists():
            raise SandboxError(f"{path} already exists", "give an empty or new directory, or remove it first")
    root.mkdir(parents=True, exist_ok=True)
    planner = Planner(size, random.Random(f"sluice-sandbox/{size.seed}"))
    planner.run(say)
    fork = Fork(planner)
    fork.run(say)
    say(f"writing {upstream.name}: {len(planner.up.commits)} commits")
    up_shas = emit_upstream(upstream, planner.up, say)
    say(f"writing {fork_repo.name}: {len(fork.commits)} commits")
    fork_shas = emit_fork(fork_repo, upstream, fork, up_shas, up_shas[size.base_commits - 1], say)
    manifest = _manifest(planner, fork, up_shas, fork_shas)
    say("sandbox ready")
    return Sandbox(root=root, upstream=upstream, fork=fork_repo, manifest=manifest)
