"""Planning a fork against its upstream, recorded in the store: shared by the CLI and the service."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping

from bot.config import SluiceConfig
from bot.engine import Snapshot, analyse_pending, take_snapshot
from bot.facts import CommitFacts
from bot.gitio import GitRepo
from bot.models import Disposition, Plan, StreamStatus
from bot.planner import make_plan, prior_chains
from bot.store import DispositionRecord, Store

HELD = {Disposition.DEFERRED, Disposition.SKIPPED}


def fork_key(config: SluiceConfig, repo: GitRepo, fork_ref: str) -> str:
    return config.fork.repo or f"{repo.path}#{fork_ref}"


def held_by_people(snapshot: Snapshot, records: Mapping[str, DispositionRecord]) -> dict[str, Disposition]:
    """Pending upstream commits a person deferred or skipped, as the store records them."""
    pending = set(snapshot.pending)
    return {s: r.disposition for s, r in records.items() if r.disposition in HELD and s in pending}


def with_dispositions(snapshot: Snapshot, held: Mapping[str, Disposition]) -> StreamStatus:
    """The status once people's decisions count: a skipped commit is neither pending nor backlog."""
    status = snapshot.status
    skipped = {sha for sha, d in held.items() if d == Disposition.SKIPPED}
    position = {sha: index for index, (sha, _) in enumerate(snapshot.stream)}
    tip = position.get(status.ingestion_tip) if status.ingestion_tip else None
    behind_tip = sum(1 for sha in skipped if tip is not None and position[sha] < tip)
    update = {
        "pending_commits": status.pending_commits - len(skipped),
        "backlog_commits": status.backlog_commits - behind_tip,
        "skipped_commits": len(skipped),
        "deferred_commits": len(held) - len(skipped),
    }
    return status.model_copy(update=update)


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
    held = held_by_people(snapshot, dispositions)
    analysis = analyse_pending(repo, snapshot, config=config, skip=held, progress=progress, facts=facts)
    ingested = snapshot.ingested
    progress("planning")
    plan = make_plan(
        status=with_dispositions(snapshot, held),
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
