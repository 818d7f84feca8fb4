"""The store on SQLite and PostgreSQL: migrations, plans, risky chains and dispositions."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, create_engine, inspect, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.pool import NullPool

import bot.db.audit
import bot.db.bisections
import bot.db.gates
import bot.db.jobs
import bot.db.lag
import bot.db.leases
import bot.db.registry
import bot.db.revisions
import bot.db.signoffs
import bot.db.store
import bot.db.tier_runs
import bot.db.trunk_watch
from bot.core.errors import BadInput
from bot.core.ingestion import IngestionRecord
from bot.core.models import (
    Dependency,
    DependencyKind,
    Disposition,
    LowRiskBundle,
    Plan,
    PlannedCommit,
    RiskKind,
    RiskLevel,
    RiskReason,
    RiskyChain,
    StreamStatus,
)
from bot.db.store import (
    DEFAULT_URL_ENV,
    DispositionRecord,
    ResolutionSource,
    Store,
    StoredChain,
    chains,
    default_database_url,
    metadata,
    normalise_url,
    resolutions,
)

FORK = "acme/triton"
OTHER_FORK = "acme/triton-xpu"
AT = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
AT2 = AT + timedelta(hours=6)
AT3 = AT + timedelta(days=1)
HEAD_REVISION = "0024_fork_dashboard_issue"
# Modules that define tables on the metadata the migrations are compared with.
TABLE_MODULES = (
    bot.db.audit,
    bot.db.bisections,
    bot.db.gates,
    bot.db.jobs,
    bot.db.lag,
    bot.db.registry,
    bot.db.signoffs,
    bot.db.tier_runs,
    bot.db.trunk_watch,
)
TABLES = [
    "alembic_version",
    "approvals",
    "audits",
    "bisect_culprits",
    "bisections",
    "chain_members",
    "chains",
    "command_audit",
    "commit_facts",
    "deliveries",
    "dispositions",
    "fork_state",
    "forks",
    "gate_failures",
    "holds",
    "ingestion_heads",
    "ingestions",
    "installation_repos",
    "installations",
    "jobs",
    "l3_regressions",
    "l3_signoffs",
    "lag_points",
    "leases",
    "plans",
    "resolutions",
    "tier_runs",
    "trunk_failures",
    "waivers",
]

A, B, C, D, E, F = (letter * 40 for letter in "abcdef")
X = "9" * 40  # an upstream commit the fork had before any plan


def planned(sha: str, *, risk: RiskLevel = RiskLevel.LOW, after: str | None = None) -> PlannedCommit:
    return PlannedCommit(
        sha=sha,
        subject=f"[TritonGPU] change {sha[:7]}",
        author="Dev <dev@example.com>",
        committer_time=1_740_000_000,
        changed_lines=12,
        files=("lib/Dialect/TritonGPU/Transforms/Pipeliner.cpp",),
        symbols=("mlir::triton::gpu::pipelineLoop",),
        risk=risk,
        reasons=(RiskReason(kind=RiskKind.PATCH_STACK_HUNK, level=risk, detail="overlaps fork hunk"),)
        if risk is not RiskLevel.LOW
        else (),
        depends_on=(Dependency(sha=after, kind=DependencyKind.LINES, detail="same hunk"),) if after else (),
    )


def bundle(bundle_id: str, *shas: str) -> LowRiskBundle:
    return LowRiskBundle(id=bundle_id, commits=tuple(planned(sha) for sha in shas))


def chain(chain_id: str, *shas: str, ingested: tuple[str, ...] = ()) -> RiskyChain:
    members = ingested + shas
    commits = tuple(
        planned(sha, risk=RiskLevel.HIGH, after=members[i - 1] if i else None)
        for i, sha in enumerate(members)
        if sha in shas
    )
    return RiskyChain(
        id=chain_id,
        root=members[0],
        risk=RiskLevel.HIGH,
        ingested=ingested,
        commits=commits,
        linked_files=("lib/Dialect/TritonGPU/Transforms/Pipeliner.cpp",),
    )


def make_plan(
    *,
    bundles: tuple[LowRiskBundle, ...] = (),
    chains: tuple[RiskyChain, ...] = (),
    upstream_head: str = "1" * 40,
    held: dict[str, Disposition] | None = None,
) -> Plan:
    return Plan(
        fork_ref="refs/heads/main",
        fork_head="2" * 40,
        upstream_ref="refs/remotes/upstream/main",
        upstream_head=upstream_head,
        config_digest="sha256:" + "3" * 64,
        status=StreamStatus(
            upstream_head=upstream_head,
            upstream_head_time=1_740_100_000,
            fork_head="2" * 40,
            ingestion_tip=X,
            ingestion_tip_time=1_739_000_000,
            days_behind=12.5,
            backlog_commits=1,
            pending_commits=6,
            ingested_commits=12_000,
            emergency_commits=2,
            patch_stack_commits=40,
            recognised_by={"trailer": 11_000, "cherry-pick-x": 1_000},
        ),
        bundles=bundles,
        chains=chains,
        held=held or {},
    )


@contextmanager
def raw_connection(url: str) -> Iterator[Connection]:
    engine = create_engine(normalise_url(url), poolclass=NullPool)
    try:
        with engine.connect() as conn:
            yield conn
    finally:
        engine.dispose()


def migrated_versions(conn: Connection) -> list[str]:
    return list(conn.execute(text("SELECT version_num FROM alembic_version")).scalars())


def chain_statuses(url: str, fork_key: str) -> dict[str, str]:
    with raw_connection(url) as conn:
        rows = conn.execute(select(chains.c.id, chains.c.status).where(chains.c.fork_key == fork_key))
        return {row.id: row.status for row in rows}


# Migrations


def test_migrations_create_tables_and_are_idempotent(database_url: str) -> None:
    plan = make_plan(bundles=(bundle("bundle-1", A),))
    first = Store.open(database_url)
    first.record_plan(FORK, plan, ingested=(), at=AT)
    first.close()

    second = Store.open(database_url)
    try:
        assert second.latest_plan(FORK) == plan
    finally:
        second.close()
    with raw_connection(database_url) as conn:
        assert sorted(inspect(conn).get_table_names()) == TABLES
        assert migrated_versions(conn) == [HEAD_REVISION]


def test_concurrent_opens_migrate_once(database_url: str) -> None:
    start = threading.Barrier(4)
    errors: list[BaseException] = []

    def open_store() -> None:
        start.wait()
        try:
            Store.open(database_url).close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_store) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    with raw_connection(database_url) as conn:
        assert migrated_versions(conn) == [HEAD_REVISION]


def test_a_database_of_another_application_is_refused_and_left_as_it_was(database_url: str) -> None:
    """Bad input changes nothing: a URL that names someone else's database (tables, no Sluice schema) gets a
    clear error, and Sluice adds none of its tables to it."""
    with raw_connection(database_url) as conn:
        conn.execute(text("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total INTEGER)"))
        conn.commit()
    with pytest.raises(BadInput, match=r"tables that are not Sluice's \(invoices\)"):
        Store.open(database_url)
    with raw_connection(database_url) as conn:
        assert inspect(conn).get_table_names() == ["invoices"]


def test_a_store_at_a_revision_this_sluice_does_not_know_is_refused_and_left_as_it_was(
    database_url: str,
) -> None:
    Store.open(database_url).close()
    with raw_connection(database_url) as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '0099_from_the_future'"))
        conn.commit()
    with pytest.raises(BadInput, match="schema revision '0099_from_the_future', which this Sluice does not"):
        Store.open(database_url)
    with raw_connection(database_url) as conn:
        assert migrated_versions(conn) == ["0099_from_the_future"]


def test_head_revision_constant_is_alembics_head() -> None:
    """Store.open skips Alembic when the database is at HEAD_REVISION: it must be the real head."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(bot.db.revisions.MIGRATIONS_DIR))
    head = ScriptDirectory.from_config(config).get_current_head()
    assert head == bot.db.revisions.HEAD_REVISION == HEAD_REVISION


@contextmanager
def at_revision(url: str, revision: str) -> Iterator[Connection]:
    """A connection to the database at `url` migrated only up to `revision`, in a transaction committed on
    leaving: rows written there are what an older Sluice left."""
    from alembic import command
    from alembic.config import Config

    engine = create_engine(normalise_url(url), poolclass=NullPool)
    config = Config()
    config.set_main_option("script_location", str(bot.db.revisions.MIGRATIONS_DIR))
    try:
        with engine.begin() as conn:
            config.attributes["connection"] = conn
            command.upgrade(config, revision)
            yield conn
    finally:
        engine.dispose()


def test_a_database_at_an_older_revision_is_upgraded(database_url: str) -> None:
    with at_revision(database_url, "0004_registry"):
        pass
    Store.open(database_url).close()
    with raw_connection(database_url) as conn:
        assert migrated_versions(conn) == [HEAD_REVISION]
        assert "commit_facts" in inspect(conn).get_table_names()


def test_migrations_match_the_tables_the_store_queries(store: Store, database_url: str) -> None:
    with raw_connection(database_url) as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        assert compare_metadata(context, metadata) == []


# Plans


def test_record_plan_round_trips_latest_plan(store: Store) -> None:
    assert store.latest_plan(FORK) is None
    first = make_plan(
        bundles=(bundle("bundle-1", A, B),),
        chains=(chain("risky-1", C, D),),
        held={E: Disposition.DEFERRED},
    )
    second = make_plan(bundles=(bundle("bundle-2", F),), upstream_head="4" * 40)

    first_id = store.record_plan(FORK, first, ingested=(), at=AT)
    stored = store.latest_plan(FORK)
    assert stored is not None
    assert stored.model_dump_json() == first.model_dump_json()

    second_id = store.record_plan(FORK, second, ingested=(), at=AT2)
    latest = store.latest_plan(FORK)
    assert latest is not None
    assert latest.model_dump_json() == second.model_dump_json()
    assert second_id > first_id
    assert store.latest_plan(OTHER_FORK) is None


def test_record_plan_rejects_naive_timestamps(store: Store) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        store.record_plan(FORK, make_plan(), ingested=(), at=datetime(2025, 3, 3, 9, 0))
    assert store.latest_plan(FORK) is None


def test_timestamps_come_back_in_utc(store: Store) -> None:
    paris = timezone(timedelta(hours=1))
    store.set_disposition(FORK, A, Disposition.DEFERRED, reason=None, approver=None, at=AT.astimezone(paris))

    updated_at = store.dispositions(FORK)[A].updated_at
    assert updated_at == AT
    assert updated_at.utcoffset() == timedelta(0)


# Risky chains


def test_chains_persist_and_extend_across_plans(store: Store) -> None:
    store.record_plan(FORK, make_plan(chains=(chain("risky-9", A, B),)), ingested=(), at=AT)
    assert store.open_chains(FORK) == (StoredChain("risky-9", A, (A, B), "open"),)

    # A reached the fork; C and D joined the chain; two newer chains come after it, same plan by id.
    second = make_plan(
        chains=(
            chain("risky-9", B, C, ingested=(A,)),
            chain("risky-5", E),
            chain("risky-1", F),
        )
    )
    store.record_plan(FORK, second, ingested=(A,), at=AT2)

    assert store.open_chains(FORK) == (
        StoredChain("risky-9", A, (A, B, C), "open"),
        StoredChain("risky-1", F, (F,), "open"),
        StoredChain("risky-5", E, (E,), "open"),
    )
    assert store.open_chains(OTHER_FORK) == ()


def test_chain_members_only_grow(store: Store) -> None:
    store.record_plan(FORK, make_plan(chains=(chain("risky-1", A, B, C),)), ingested=(), at=AT)
    # A later plan that forgets the ingested prefix still keeps it.
    store.record_plan(FORK, make_plan(chains=(chain("risky-1", C, D),)), ingested=(), at=AT2)

    assert store.open_chains(FORK) == (StoredChain("risky-1", A, (A, B, C, D), "open"),)


def test_chain_missing_from_next_plan_is_closed_and_can_reopen(store: Store, database_url: str) -> None:
    store.record_plan(FORK, make_plan(chains=(chain("risky-1", A), chain("risky-2", B))), ingested=(), at=AT)
    store.record_plan(OTHER_FORK, make_plan(chains=(chain("risky-1", A),)), ingested=(), at=AT)

    store.record_plan(FORK, make_plan(chains=(chain("risky-2", B, C),)), ingested=(A,), at=AT2)

    assert store.open_chains(FORK) == (StoredChain("risky-2", B, (B, C), "open"),)
    assert chain_statuses(database_url, FORK) == {"risky-1": "closed", "risky-2": "open"}
    assert store.open_chains(OTHER_FORK) == (StoredChain("risky-1", A, (A,), "open"),)

    store.record_plan(FORK, make_plan(chains=(chain("risky-1", D, ingested=(A,)),)), ingested=(), at=AT3)

    assert store.open_chains(FORK) == (StoredChain("risky-1", A, (A, D), "open"),)
    assert chain_statuses(database_url, FORK) == {"risky-1": "open", "risky-2": "closed"}


# Dispositions


def test_record_plan_writes_bundled_and_chained_with_group_ids(store: Store) -> None:
    plan = make_plan(bundles=(bundle("bundle-1", A, B),), chains=(chain("risky-1", C, D, ingested=(X,)),))

    plan_id = store.record_plan(FORK, plan, ingested=(), at=AT)

    assert store.dispositions(FORK) == {
        A: DispositionRecord(A, Disposition.BUNDLED, None, None, plan_id, "bundle-1", AT),
        B: DispositionRecord(B, Disposition.BUNDLED, None, None, plan_id, "bundle-1", AT),
        C: DispositionRecord(C, Disposition.CHAINED, None, None, plan_id, "risky-1", AT),
        D: DispositionRecord(D, Disposition.CHAINED, None, None, plan_id, "risky-1", AT),
    }
    assert store.dispositions(OTHER_FORK) == {}


def test_commit_moved_from_bundle_to_chain_changes_group(store: Store) -> None:
    store.record_plan(FORK, make_plan(bundles=(bundle("bundle-1", A, B),)), ingested=(), at=AT)
    # Bisection found B to be the culprit: it now heads a risky chain.
    second_id = store.record_plan(
        FORK, make_plan(bundles=(bundle("bundle-2", A),), chains=(chain("risky-1", B),)), ingested=(), at=AT2
    )

    assert store.dispositions(FORK) == {
        A: DispositionRecord(A, Disposition.BUNDLED, None, None, second_id, "bundle-2", AT2),
        B: DispositionRecord(B, Disposition.CHAINED, None, None, second_id, "risky-1", AT2),
    }


def test_ingested_only_updates_existing_records(store: Store) -> None:
    first_id = store.record_plan(FORK, make_plan(bundles=(bundle("bundle-1", A, B),)), ingested=(), at=AT)
    fork_history = (f"{n:040x}" for n in range(12_000))  # what a real fork has already ingested

    store.record_plan(FORK, make_plan(), ingested=[*fork_history, A, E], at=AT2)
    store.record_plan(FORK, make_plan(), ingested=[A], at=AT3)  # already ingested: untouched

    assert store.dispositions(FORK) == {
        A: DispositionRecord(A, Disposition.INGESTED, None, None, first_id, "bundle-1", AT2),
        B: DispositionRecord(B, Disposition.BUNDLED, None, None, first_id, "bundle-1", AT),
    }


def test_held_dispositions_survive_record_plan(store: Store) -> None:
    store.set_disposition(
        FORK, B, Disposition.SKIPPED, reason="fork carries its own fix", approver="alice", at=AT
    )
    store.set_disposition(FORK, C, Disposition.DEFERRED, reason="after the LLVM bump", approver="bob", at=AT)
    store.set_disposition(FORK, D, Disposition.EMERGENCY, reason=None, approver="carol", at=AT)

    # Defensive: a planner bug puts held commits in the plan, and they show up as ingested.
    plan = make_plan(bundles=(bundle("bundle-1", A, B),), chains=(chain("risky-1", C),))
    plan_id = store.record_plan(FORK, plan, ingested=(B, C, D), at=AT2)

    assert store.dispositions(FORK) == {
        A: DispositionRecord(A, Disposition.BUNDLED, None, None, plan_id, "bundle-1", AT2),
        B: DispositionRecord(B, Disposition.SKIPPED, "fork carries its own fix", "alice", None, None, AT),
        C: DispositionRecord(C, Disposition.DEFERRED, "after the LLVM bump", "bob", None, None, AT),
        # an emergency pick holds its commit out of plans only until regular ingestion brings it in
        D: DispositionRecord(D, Disposition.INGESTED, None, "carol", None, None, AT2),
    }


def test_set_disposition_overrides_a_plan(store: Store) -> None:
    plan_id = store.record_plan(FORK, make_plan(bundles=(bundle("bundle-1", A, B),)), ingested=(), at=AT)

    store.set_disposition(FORK, A, Disposition.INGESTED, reason=None, approver=None, at=AT2)
    store.set_disposition(FORK, B, Disposition.DEFERRED, reason="waits for API", approver="dave", at=AT2)

    assert store.dispositions(FORK) == {
        A: DispositionRecord(A, Disposition.INGESTED, None, None, plan_id, "bundle-1", AT2),
        B: DispositionRecord(B, Disposition.DEFERRED, "waits for API", "dave", None, None, AT2),
    }


def test_failed_record_plan_writes_nothing(store: Store) -> None:
    good = make_plan(bundles=(bundle("bundle-1", A),), chains=(chain("risky-1", B),))
    store.record_plan(FORK, good, ingested=(), at=AT)
    before = (store.dispositions(FORK), store.open_chains(FORK))

    # A chain that lists C twice violates the one-position-per-member constraint: after the plan row
    # and the upsert of risky-2 were written, before risky-1 is closed and A marked ingested.
    bad = make_plan(bundles=(bundle("bundle-2", D),), chains=(chain("risky-2", C, E, C),))
    with pytest.raises(IntegrityError):
        store.record_plan(FORK, bad, ingested=(A,), at=AT2)

    assert store.latest_plan(FORK) == good
    assert (store.dispositions(FORK), store.open_chains(FORK)) == before


# Configuration and health


def test_default_database_url_honours_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DEFAULT_URL_ENV, "postgresql+psycopg://sluice@db:5432/sluice")
    assert default_database_url() == "postgresql+psycopg://sluice@db:5432/sluice"


def test_default_database_url_under_xdg_state_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(DEFAULT_URL_ENV, raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))

    assert default_database_url() == f"sqlite:///{tmp_path}/state/sluice/sluice.db"
    assert (tmp_path / "state" / "sluice").is_dir()


def test_default_database_url_falls_back_to_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(DEFAULT_URL_ENV, raising=False)
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))

    assert default_database_url() == f"sqlite:///{tmp_path}/.local/state/sluice/sluice.db"
    assert (tmp_path / ".local" / "state" / "sluice").is_dir()


def test_open_without_url_uses_the_env_var(monkeypatch: pytest.MonkeyPatch, database_url: str) -> None:
    monkeypatch.setenv(DEFAULT_URL_ENV, database_url)
    plan = make_plan(bundles=(bundle("bundle-1", A),))
    implicit = Store.open()
    implicit.record_plan(FORK, plan, ingested=(), at=AT)
    implicit.close()

    explicit = Store.open(database_url)
    try:
        assert explicit.latest_plan(FORK) == plan
    finally:
        explicit.close()


def test_ping(store: Store) -> None:
    assert store.ping() is True


# Remembered resolutions

KEY, KEY2 = "1" * 64, "2" * 64


def remember(
    store: Store,
    key: str,
    lines: tuple[str, ...],
    *,
    at: datetime,
    by: str = "alice",
    source: ResolutionSource = ResolutionSource.HUMAN,
    fork_key: str = FORK,
) -> None:
    store.remember_resolution(
        fork_key,
        key,
        lines,
        path="lib/Dialect/TritonGPU/Transforms/Pipeliner/Schedule.cpp",
        recorded_by=by,
        upstream_sha=A,
        fork_sha=B,
        at=at,
        source=source,
    )


def test_resolutions_round_trip_losslessly(store: Store, database_url: str) -> None:
    lines = ("", "  // héllo, 世界  ", "\ttabs\tand \\ backslashes", '"quotes"', "trailing space ", "")
    remember(store, KEY, lines, at=AT)
    remember(store, KEY2, (), at=AT)

    assert store.resolutions(FORK, [KEY, KEY2, "3" * 64]) == {KEY: lines, KEY2: ()}
    assert store.resolutions(FORK, []) == {}
    assert store.resolutions(OTHER_FORK, [KEY]) == {}
    with raw_connection(database_url) as conn:
        row = conn.execute(select(resolutions).where(resolutions.c.key == KEY)).one()
    assert (row.path, row.source, row.recorded_by, row.upstream_sha, row.fork_sha) == (
        "lib/Dialect/TritonGPU/Transforms/Pipeliner/Schedule.cpp",
        "human",
        "alice",
        A,
        B,
    )


def test_the_latest_human_resolution_wins(store: Store) -> None:
    remember(store, KEY, ("first",), at=AT, by="alice")
    remember(store, KEY, ("second",), at=AT2, by="bob")
    remember(store, KEY, ("replayed, older",), at=AT, by="carol")

    assert store.resolutions(FORK, [KEY]) == {KEY: ("second",)}


def test_a_proposal_never_replaces_a_human_resolution(store: Store) -> None:
    remember(store, KEY, ("human",), at=AT)
    remember(store, KEY, ("agent",), at=AT3, by="sluice[bot]", source=ResolutionSource.PROPOSED)
    remember(store, KEY2, ("agent",), at=AT3, by="sluice[bot]", source=ResolutionSource.PROPOSED)

    assert store.resolutions(FORK, [KEY, KEY2]) == {KEY: ("human",)}  # proposals are not replayed
    proposals = store.resolutions(FORK, [KEY, KEY2], sources=[ResolutionSource.PROPOSED])
    assert proposals == {KEY2: ("agent",)}


def test_a_human_resolution_replaces_a_proposal_whatever_its_time(store: Store) -> None:
    remember(store, KEY, ("agent",), at=AT3, by="sluice[bot]", source=ResolutionSource.PROPOSED)
    remember(store, KEY, ("human",), at=AT, by="alice")

    assert store.resolutions(FORK, [KEY]) == {KEY: ("human",)}


def test_many_keys_are_looked_up_in_chunks(store: Store) -> None:
    keys = [f"{n:064x}" for n in range(1200)]
    for key in keys[::100]:
        remember(store, key, (key[-4:],), at=AT)

    assert store.resolutions(FORK, keys) == {key: (key[-4:],) for key in keys[::100]}


def test_remember_resolution_rejects_naive_timestamps(store: Store) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        remember(store, KEY, ("x",), at=datetime(2025, 3, 3, 9, 0))


# Per-commit facts


def test_facts_round_trip_by_kind_version_and_path(store: Store) -> None:
    store.save_facts("diff", "v1", {(A, "lib/a.cpp"): '["a"]', (A, "lib/b.cpp"): '["b"]', (B, ""): "x"})
    store.save_facts("paths", "v1", {(A, ""): '["lib/a.cpp"]'})

    assert store.load_facts("diff", "v1", [A, B, C]) == {
        (A, "lib/a.cpp"): '["a"]',
        (A, "lib/b.cpp"): '["b"]',
        (B, ""): "x",
    }
    assert store.load_facts("diff", "v1", [A], paths={"lib/b.cpp"}) == {(A, "lib/b.cpp"): '["b"]'}
    assert store.load_facts("diff", "v2", [A, B]) == {}  # another version is a miss
    assert store.load_facts("paths", "v1", [A, B]) == {(A, ""): '["lib/a.cpp"]'}


def test_a_fact_computed_again_under_a_new_version_replaces_the_old_one(store: Store) -> None:
    store.save_facts("patch-id", "v1", {(A, ""): "old"})
    store.save_facts("patch-id", "v2", {(A, ""): "new"})
    store.save_facts("patch-id", "v2", {(A, ""): "new"})  # saving twice is harmless (replicas race)

    assert store.load_facts("patch-id", "v1", [A]) == {}
    assert store.load_facts("patch-id", "v2", [A]) == {(A, ""): "new"}


def test_facts_load_in_chunks_beyond_the_parameter_limit(store: Store) -> None:
    shas = [f"{i:040x}" for i in range(1_200)]
    store.save_facts("patch-id", "v1", {(sha, ""): sha[::-1] for sha in shas})
    paths = [f"p{i}" for i in range(600)]
    store.save_facts("diff", "v1", {(shas[0], p): p for p in paths})

    assert len(store.load_facts("patch-id", "v1", shas)) == 1_200
    assert len(store.load_facts("diff", "v1", shas[:1], paths=paths)) == 600


def test_the_largest_github_id_the_intake_accepts_is_recorded(store: Store) -> None:
    """webhooks.py accepts ids up to 2**63 - 1; the registry must hold them on PostgreSQL too (BIGINT)."""
    from bot.db.registry import Registry

    largest = 2**63 - 1
    registry = Registry(store)
    registry.record_installation(largest, "octo-org", ["octo-org/fork"], at=datetime(2026, 1, 1, tzinfo=UTC))
    assert registry.installation_of("octo-org/fork") == largest


def test_the_heads_the_registry_held_before_0018_become_the_first_ingestion_heads(database_url: str) -> None:
    """Upgrading a store that predates ingestion_heads keeps the heads Sluice had pushed, with what each
    carried, so `TierRuns.failed_alone` still reads the failures on them."""
    at = datetime(2026, 12, 1, tzinfo=UTC)
    with at_revision(database_url, "0017_bisections_ingestion_len") as conn:
        for n, head in ((1, "a" * 40), (2, None)):
            row = {
                "fork": "o/f",
                "id": f"chain-{n}",
                "kind": "chain",
                "state": "open",
                "pr_number": n,
                "head": head,
                "upstream_first": str(n) * 40,
                "upstream_last": str(n) * 40,
                "commits": 1,
                "needs_human": None,
                "updated_at": at,
            }
            conn.execute(bot.db.registry.ingestions.insert().values(row))
    Store.open(database_url).close()
    with raw_connection(database_url) as conn:
        rows = conn.execute(select(bot.db.registry.ingestion_heads)).all()
    assert [(r.ingestion, r.head, r.upstream_first, r.commits) for r in rows] == [
        ("chain-1", "a" * 40, "1" * 40, 1)
    ]
    pushed = rows[0].pushed_at
    assert (pushed if pushed.tzinfo else pushed.replace(tzinfo=UTC)) == at


def test_a_culprit_blamed_before_0019_was_first_blamed_at_its_blame(database_url: str) -> None:
    """The culprits bisections blamed before bisect_culprits kept a first blame start from the one they
    have."""
    at = datetime(2026, 12, 1, tzinfo=UTC)
    row = {"fork": "o/f", "sha": "c" * 40, "level": "l1", "pull": 7, "bisection": 1, "detail": "d", "at": at}
    with at_revision(database_url, "0018_ingestion_heads") as conn:
        conn.execute(bot.db.bisections.bisect_culprits.insert().values(row))
    store = Store.open(database_url)
    try:
        blames = bot.db.bisections.Bisections(store).blames("o/f")
    finally:
        store.close()
    assert {sha: b.time for sha, b in blames.items()} == {"c" * 40: int(at.timestamp())}


def test_an_audit_record_closed_before_0021_keeps_its_waived_failing_tiers(database_url: str) -> None:
    """Records kept the first tier that did not succeed, waived or not; upgraded, they keep the failing tiers
    their waivers let through (L3 failed unwaived: a person merged anyway)."""
    tiers = [
        {"name": f"sluice/{level}", "head_sha": "a" * 40, "status": "completed", "conclusion": conclusion}
        for level, conclusion in (("L1", "success"), ("L2", "timed_out"), ("L3", "failure"))
    ]
    waiver = {
        "tier": "sluice/L2",
        "owner": "@perf",
        "reason": "flaky",
        "recovery_plan": "rerun",
        "expires_at": "2026-12-04T00:00:00Z",
        "granted_by": "alice",
        "head_sha": "a" * 40,
    }
    record = {
        "fork": "o/f",
        "ingestion_id": "bundle-1",
        "kind": "bundle",
        "pr_number": 7,
        "head": "a" * 40,
        "upstream_base": None,
        "upstream_target": "b" * 40,
        "tiers": tiers,
        "failing_tier": "sluice/L2",
        "waivers": [waiver],
        "state": "closed",
    }
    row = {
        "fork": "o/f",
        "pr_number": 7,
        "ingestion_id": "bundle-1",
        "state": "closed",
        "record": json.dumps(record),
        "updated_at": datetime(2026, 12, 1, tzinfo=UTC),
    }
    with at_revision(database_url, "0020_command_audit_line_len") as conn:
        conn.execute(bot.db.gates.audits.insert().values(row))
    store = Store.open(database_url)
    try:
        upgraded = bot.db.gates.GateStore(store).audit("o/f", 7)
    finally:
        store.close()
    assert upgraded is not None and upgraded.waived_tiers == ("sluice/L2",)


def test_closing_an_ingestion_pr_closes_only_the_open_record_that_has_that_pr(store: Store) -> None:
    """A rebuild gave the ingestion a new PR: the old PR's `closed` event leaves the new record open."""
    registry, at = bot.db.registry.Registry(store), datetime(2026, 12, 1, tzinfo=UTC)
    sha = "c" * 40
    record = IngestionRecord("meta/triton", "bundle-cccccccccc", "bundle", "open", 7, sha, sha, sha, 1, None)
    registry.save_ingestion(record, at=at)
    unit = "bundle-cccccccccc"
    assert not registry.close_pull("meta/triton", unit, 6, at=at)  # an earlier PR of the unit
    assert not registry.close_pull("meta/triton", "bundle-dddddddddd", 7, at=at)
    assert not registry.close_pull("meta/fork", unit, 7, at=at)
    assert [r.state for r in registry.ingestions("meta/triton")] == ["open"]
    assert registry.close_pull("meta/triton", unit, 7, at=at)
    assert registry.ingestions("meta/triton") == [dataclasses.replace(record, state="closed")]
    assert not registry.close_pull("meta/triton", unit, 7, at=at)  # closed already
