"""Planning a fork against its upstream, recorded in the store: shared by the CLI and the service."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from pathlib import Path

from pydantic import ValidationError

from bot.core.calibrated import LoadedModel
from bot.core.config import CONFIG_PATH, SluiceConfig, Strategy
from bot.core.errors import ConfigRefused, first_problem
from bot.core.metrics import oldest_missing
from bot.core.models import Disposition, DispositionRecord, Plan, StreamStatus
from bot.core.planner import make_plan, prior_chains
from bot.core.risk_model import RiskModel
from bot.db.bisections import Bisections
from bot.db.store import Store
from bot.flows.engine import Snapshot, analyse_pending, take_snapshot
from bot.flows.risk_files import default_model
from bot.git.facts import CommitFacts
from bot.ports import Clock, FileReader, HistoryReader, PlanRecorder, Repository

HELD = {Disposition.DEFERRED, Disposition.SKIPPED}


def fork_key(config: SluiceConfig, repo: HistoryReader, fork_ref: str) -> str:
    return config.fork.repo or f"{repo.path}#{fork_ref}"


def held_by_people(
    snapshot: Snapshot, records: Mapping[str, DispositionRecord], *, strategy: Strategy
) -> dict[str, Disposition]:
    """Pending upstream commits a person deferred or skipped, as the store records them; none with
    `strategy: merge`, where no merge leaves a commit out (a deferral recorded before the fork switched
    to merging would be a promise the next merge breaks)."""
    if strategy is Strategy.MERGE:
        return {}
    pending = set(snapshot.pending)
    return {s: r.disposition for s, r in records.items() if r.disposition in HELD and s in pending}


def with_dispositions(snapshot: Snapshot, held: Mapping[str, Disposition]) -> StreamStatus:
    """The status once people's decisions count: a skipped commit is neither pending, nor backlog, nor
    the oldest missing commit."""
    status = snapshot.status
    skipped = {sha for sha, d in held.items() if d == Disposition.SKIPPED}
    position = {sha: index for index, (sha, _) in enumerate(snapshot.stream)}
    tip = position.get(status.ingestion_tip) if status.ingestion_tip else None
    behind_tip = sum(1 for sha in skipped if tip is not None and position[sha] < tip)
    oldest, oldest_days = oldest_missing(snapshot.stream, (s for s in snapshot.pending if s not in skipped))
    update = {
        "pending_commits": status.pending_commits - len(skipped),
        "backlog_commits": status.backlog_commits - behind_tip,
        "skipped_commits": len(skipped),
        "deferred_commits": len(held) - len(skipped),
        "oldest_missing": oldest,
        "oldest_missing_days": oldest_days,
    }
    return status.model_copy(update=update)


def model_problem(exc: ConfigRefused) -> str:
    """A risk model that cannot be loaded, as a line of `sluice config check`'s output, with its remedy."""
    return f"{CONFIG_PATH}: {exc.message}\n  → {exc.remedy}"


def load_risk_model(repo: FileReader, config: SluiceConfig, *, fork_head: str) -> LoadedModel | None:
    """The model `risk.model` names: None for `none`, and for `default` when Sluice ships none; a path is
    read from this machine when absolute, else from fork trunk's tree (where `sluice calibrate --out` went).
    ConfigRefused when it names no usable model."""
    name = config.risk.model
    if name == "none":
        return None
    if name == "default":
        model = default_model()
        return LoadedModel(name, model) if model else None
    path = Path(name)
    text = path.read_bytes() if path.is_absolute() and path.is_file() else None
    if not path.is_absolute():
        text = repo.read_file(fork_head, name.removeprefix("./"))
    if text is None:
        where = "on this machine" if path.is_absolute() else "in fork trunk's tree"
        raise ConfigRefused(
            f"risk.model names {name}, which is not there {where}",
            "write it with `sluice calibrate --out`, or set risk.model to `default` or `none`",
        )
    try:
        return LoadedModel(name, RiskModel.from_json(text.decode("utf-8", "replace")))
    except ValidationError as err:  # named by where and why, never by the file's content
        where, why = first_problem(err, whole="the file")
        raise ConfigRefused(
            f"risk.model {name} is not a usable risk model: {where}: {why}",
            "run `sluice calibrate` again",
        ) from None
    except ValueError as err:
        raise ConfigRefused(
            f"risk.model {name} is not a usable risk model: {err}", "run `sluice calibrate` again"
        ) from None


def build_plan(
    repo: Repository,
    config: SluiceConfig,
    *,
    fork: str,
    upstream: str,
    store: Store | None,
    progress: Callable[[str], None],
    clock: Clock,
    record: bool = True,
) -> Plan:
    """Read the repository, plan it against the stored chains, dispositions and bisections, and record the
    plan when a store is given and `record` (a preview reads the store and writes only commit facts).
    ConfigRefused, before any history is read, when `risk.model` names no usable model."""
    model = load_risk_model(repo, config, fork_head=repo.resolve(fork))
    facts = CommitFacts(repo, store)  # what is known of a commit is not read again
    snapshot = take_snapshot(
        repo, fork_ref=fork, upstream_ref=upstream, config=config, progress=progress, facts=facts
    )
    key = fork_key(config, repo, fork)
    dispositions = store.dispositions(key) if store else {}
    held = held_by_people(snapshot, dispositions, strategy=config.strategy)
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
        model=model,
        blamed=Bisections(store).blamed(key) if store else None,
    )
    if store is not None and record:
        record_plan(store, key, plan, snapshot=snapshot, dispositions=dispositions, at=clock())
    return plan


def record_plan(
    store: PlanRecorder,
    key: str,
    plan: Plan,
    *,
    snapshot: Snapshot,
    dispositions: Mapping[str, DispositionRecord],
    at: dt.datetime,
) -> None:
    """Record the plan, and the emergency picks found on fork trunk that the store does not know yet."""
    store.record_plan(key, plan, ingested=snapshot.ingested, at=at)
    for sha, pick in snapshot.emergency.items():
        if dispositions.get(sha) is None or dispositions[sha].disposition != Disposition.EMERGENCY:
            reason = f"emergency pick {pick.fork_sha}"
            store.set_disposition(key, sha, Disposition.EMERGENCY, reason=reason, approver=None, at=at)
