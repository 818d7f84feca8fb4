"""Planning a fork against its upstream, recorded in the store: shared by the CLI and the service."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from bot.config import SluiceConfig
from bot.engine import analyse_pending, take_snapshot
from bot.facts import CommitFacts
from bot.gitio import GitRepo
from bot.models import Disposition, Plan
from bot.planner import make_plan, prior_chains
from bot.store import Store

HELD = {Disposition.DEFERRED, Disposition.SKIPPED}


def fork_key(config: SluiceConfig, repo: GitRepo, fork_ref: str) -> str:
    return config.fork.repo or f"{repo.path}#{fork_ref}"


def build_plan(
    repo: GitRepo,
    config: SluiceConfig,
    *,
    fork: str,
    upstream: str,
    store: Store | None,
    progress: Callable[[str], None],
) -> Plan:
    """Read the repository, plan it against the stored chains and record the plan when a store is given."""
    facts = CommitFacts(repo, store)  # what is known of a commit is not read again
    snapshot = take_snapshot(
        repo, fork_ref=fork, upstream_ref=upstream, config=config, progress=progress, facts=facts
    )
    key = fork_key(config, repo, fork)
    dispositions = store.dispositions(key) if store else {}
    pending = set(snapshot.pending)
    held = {s: r.disposition for s, r in dispositions.items() if r.disposition in HELD and s in pending}
    analysis = analyse_pending(repo, snapshot, config=config, skip=held, progress=progress, facts=facts)
    ingested = snapshot.ingested
    progress("planning")
    plan = make_plan(
        status=snapshot.status,
        fork_ref=fork,
        upstream_ref=upstream,
        config=config,
        commits=analysis.commits,
        stream_patches=analysis.stream_patches,
        footprint=analysis.footprint,
        prior=prior_chains(store.latest_plan(key), store.open_chains(key), ingested) if store else (),
        held=held,
        ingested=ingested,
    )
    if store is not None:
        now = dt.datetime.now(dt.UTC)
        store.record_plan(key, plan, ingested=ingested, at=now)
        for sha, pick in snapshot.emergency.items():
            if dispositions.get(sha) is None or dispositions[sha].disposition != Disposition.EMERGENCY:
                reason = f"emergency pick {pick.fork_sha}"
                store.set_disposition(key, sha, Disposition.EMERGENCY, reason=reason, approver=None, at=now)
    return plan
