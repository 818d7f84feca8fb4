"""Persistent store of plans, chains, dispositions and remembered resolutions: SQLite, or PostgreSQL."""

from __future__ import annotations

import functools
import json
import math
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import (
    CheckConstraint,
    Column,
    Connection,
    DateTime,
    Dialect,
    Engine,
    ForeignKeyConstraint,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
    and_,
    create_engine,
    event,
    insert,
    literal_column,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import OperationalError, SQLAlchemyError
from sqlalchemy.pool import StaticPool
from sqlalchemy.sql.base import ReadOnlyColumnCollection
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import TypeDecorator

from bot.core.models import ChainStatus, Disposition, DispositionRecord, Plan, ResolutionSource, StoredChain
from bot.db.revisions import migrate

DEFAULT_URL_ENV = "SLUICE_DATABASE_URL"
SQLITE_BUSY_TIMEOUT_MS = 30_000
# pg_advisory_xact_lock namespace for per-fork plan recording (bot.db.revisions has the migrations' key).
_FORK_LOCK_NAMESPACE = 0x534C_5549
# Rows per IN (...) list: well under SQLite's bound-parameter limit.
_CHUNK = 500

# The row an upsert is inserting, as ON CONFLICT … DO UPDATE sees it.
_Excluded = ReadOnlyColumnCollection[str, Any]

# Set by a person (set_disposition); a plan never overwrites them.
HELD_DISPOSITIONS = frozenset({Disposition.DEFERRED, Disposition.SKIPPED, Disposition.EMERGENCY})
# Plain strings: psycopg dumps an Enum member by its name, not its value.
_HELD_VALUES = sorted(d.value for d in HELD_DISPOSITIONS)
# What ingestion never moves to `ingested`: a person's deferral or skip. An emergency pick's disposition does
# move once regular ingestion brings the commit (the ingested set leaves emergency-only picks out).
_SETTLED_VALUES = sorted([Disposition.INGESTED.value, Disposition.DEFERRED.value, Disposition.SKIPPED.value])


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC in and out; SQLite stores it as naive UTC text."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        value = _utc(value)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


# Mirrors the head migration (tests compare the two); queries use these tables.
metadata = MetaData()

plans = Table(
    "plans",
    metadata,
    Column("id", Integer, autoincrement=True),
    Column("fork_key", String(255), nullable=False),
    Column("fork_head", String(64), nullable=False),
    Column("upstream_head", String(64), nullable=False),
    Column("config_digest", String(128), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("plan", Text, nullable=False),
    PrimaryKeyConstraint("id", name="pk_plans"),
    Index("ix_plans_fork_key_id", "fork_key", "id"),
)

chains = Table(
    "chains",
    metadata,
    Column("fork_key", String(255), nullable=False),
    Column("id", String(255), nullable=False),
    Column("root", String(64), nullable=False),
    Column("status", String(16), nullable=False),
    Column("created_plan_id", Integer, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    PrimaryKeyConstraint("fork_key", "id", name="pk_chains"),
    ForeignKeyConstraint(["created_plan_id"], ["plans.id"], name="fk_chains_created_plan_id_plans"),
    CheckConstraint("status IN ('open', 'closed')", name="ck_chains_status"),
    Index("ix_chains_fork_key_status_created_at", "fork_key", "status", "created_at"),
)

chain_members = Table(
    "chain_members",
    metadata,
    Column("fork_key", String(255), nullable=False),
    Column("chain_id", String(255), nullable=False),
    Column("position", Integer, nullable=False),
    Column("sha", String(64), nullable=False),
    PrimaryKeyConstraint("fork_key", "chain_id", "position", name="pk_chain_members"),
    UniqueConstraint("fork_key", "chain_id", "sha", name="uq_chain_members_fork_key_chain_id_sha"),
    ForeignKeyConstraint(
        ["fork_key", "chain_id"],
        ["chains.fork_key", "chains.id"],
        name="fk_chain_members_chain",
        ondelete="CASCADE",
    ),
)

dispositions = Table(
    "dispositions",
    metadata,
    Column("fork_key", String(255), nullable=False),
    Column("sha", String(64), nullable=False),
    Column("disposition", String(16), nullable=False),
    Column("reason", Text),
    Column("approver", String(255)),
    Column("plan_id", Integer),
    Column("group_id", String(255)),
    Column("updated_at", UTCDateTime, nullable=False),
    PrimaryKeyConstraint("fork_key", "sha", name="pk_dispositions"),
    ForeignKeyConstraint(["plan_id"], ["plans.id"], name="fk_dispositions_plan_id_plans"),
    CheckConstraint(
        "disposition IN ('pending', 'bundled', 'chained', 'ingested', 'deferred', 'skipped', 'emergency')",
        name="ck_dispositions_disposition",
    ),
    Index("ix_dispositions_fork_key_disposition", "fork_key", "disposition"),
)


# One remembered resolution per (fork, rerere key); see bot/core/rerere.py for the key.
resolutions = Table(
    "resolutions",
    metadata,
    Column("fork_key", String(255), nullable=False),
    Column("key", String(64), nullable=False),
    Column("lines", Text, nullable=False),  # JSON list of the lines, without newlines
    Column("path", Text, nullable=False),
    Column("source", String(16), nullable=False),
    Column("recorded_by", String(255), nullable=False),
    Column("upstream_sha", String(64)),
    Column("fork_sha", String(64)),
    Column("created_at", UTCDateTime, nullable=False),
    PrimaryKeyConstraint("fork_key", "key", name="pk_resolutions"),
    CheckConstraint("source IN ('human', 'proposed')", name="ck_resolutions_source"),
)


# Facts about one commit that its SHA determines (see bot/git/facts.py): patch-ids, parsed diffs, symbols.
# Not per fork: a SHA names the same content in every repository. One row per (kind, sha, path); a row of
# another version is a stale cache entry, overwritten when the fact is computed again.
commit_facts = Table(
    "commit_facts",
    metadata,
    Column("kind", String(16), nullable=False),
    Column("sha", String(64), nullable=False),
    Column("path", Text, nullable=False),  # "" for a fact about the whole commit
    Column("version", String(64), nullable=False),
    Column("value", Text, nullable=False),
    PrimaryKeyConstraint("kind", "sha", "path", name="pk_commit_facts"),
)


def default_database_url() -> str:
    """$SLUICE_DATABASE_URL, else a SQLite file under $XDG_STATE_HOME/sluice (created if missing)."""
    url = os.environ.get(DEFAULT_URL_ENV)
    if url:
        return url
    path = default_sqlite_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


def default_sqlite_path() -> Path:
    """The SQLite file used when no database URL is given: $XDG_STATE_HOME/sluice/sluice.db."""
    state_home = os.environ.get("XDG_STATE_HOME")
    # The XDG spec says to ignore a relative XDG_STATE_HOME.
    base = Path(state_home) if state_home and os.path.isabs(state_home) else Path.home() / ".local" / "state"
    return base / "sluice" / "sluice.db"


def normalise_url(url: str) -> str:
    """Pick psycopg 3 for a bare `postgresql://` URL (SQLAlchemy would look for psycopg2)."""
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


class Store:
    """Plans, risky chains and dispositions of any number of forks, keyed by `fork_key`."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    @classmethod
    def open(cls, url: str | None = None) -> Store:
        engine = _create_engine(url or default_database_url())
        try:
            migrate(engine)
        except BaseException:
            engine.dispose()
            raise
        return cls(engine)

    def close(self) -> None:
        self._engine.dispose()

    def lane(self, *, timeout: float, connections: int) -> Store:
        """Another handle on this database with its own pool of `connections` and every database-side wait
        bounded by `timeout` s: for a caller that must answer in time whatever the rest of the process does
        (the webhook intake, the health checks). An in-memory SQLite database has no second handle: itself.
        """
        url = self._engine.url
        if url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:"):
            return self
        return Store(_create_engine(url, timeout=timeout, connections=connections))

    def ping(self) -> bool:
        try:
            with self._engine.connect() as conn:
                return conn.execute(select(1)).scalar_one() == 1
        except SQLAlchemyError:
            return False

    def open_chains(self, fork_key: str) -> tuple[StoredChain, ...]:
        query = (
            select(chains.c.id, chains.c.root)
            .where(chains.c.fork_key == fork_key, chains.c.status == ChainStatus.OPEN.value)
            .order_by(chains.c.created_at, chains.c.id)
        )
        with self._engine.connect() as conn:
            rows = conn.execute(query).all()
            members = _members(conn, fork_key, [row.id for row in rows])
        status = ChainStatus.OPEN.value
        return tuple(StoredChain(row.id, row.root, tuple(members.get(row.id, ())), status) for row in rows)

    def dispositions(self, fork_key: str) -> dict[str, DispositionRecord]:
        query = select(dispositions).where(dispositions.c.fork_key == fork_key).order_by(dispositions.c.sha)
        with self._engine.connect() as conn:
            rows = conn.execute(query).all()
        return {
            row.sha: DispositionRecord(
                sha=row.sha,
                disposition=Disposition(row.disposition),
                reason=row.reason,
                approver=row.approver,
                plan_id=row.plan_id,
                group_id=row.group_id,
                updated_at=row.updated_at,
            )
            for row in rows
        }

    def record_plan(self, fork_key: str, plan: Plan, *, ingested: Iterable[str], at: datetime) -> int:
        """Store `plan` and what it implies for chains and dispositions, all or nothing; returns its id."""
        at = _utc(at)
        with self._engine.begin() as conn:
            _lock_fork(conn, fork_key)
            plan_id = _insert_plan(conn, fork_key, plan, at)
            _save_chains(conn, fork_key, plan, plan_id=plan_id, at=at)
            _close_chains_not_in(conn, fork_key, {chain.id for chain in plan.chains}, at=at)
            _save_grouped(conn, fork_key, plan, plan_id=plan_id, at=at)
            _mark_ingested(conn, fork_key, set(ingested), at=at)
        return plan_id

    def set_disposition(
        self,
        fork_key: str,
        sha: str,
        disposition: Disposition,
        *,
        reason: str | None,
        approver: str | None,
        at: datetime,
    ) -> None:
        """Record a person's decision; it wins over anything a plan wrote."""
        disposition = Disposition(disposition)
        row = {
            "fork_key": fork_key,
            "sha": sha,
            "disposition": disposition.value,
            "reason": reason,
            "approver": approver,
            "plan_id": None,
            "group_id": None,
            "updated_at": _utc(at),
        }
        changed = ["disposition", "reason", "approver", "updated_at"]
        # An ingested commit keeps the plan and group that carried it in; anything else leaves its group.
        if disposition is not Disposition.INGESTED:
            changed += ["plan_id", "group_id"]
        with self._engine.begin() as conn:
            _upsert(conn, dispositions, [row], keys=("fork_key", "sha"), changed=changed)

    def remember_resolution(
        self,
        fork_key: str,
        key: str,
        lines: Sequence[str],
        *,
        path: str,
        recorded_by: str,
        upstream_sha: str | None,
        fork_sha: str | None,
        at: datetime,
        source: ResolutionSource = ResolutionSource.HUMAN,
    ) -> None:
        """Remember how the conflict block `key` was resolved; a person's latest resolution wins.

        A human resolution replaces a proposed one and an older human one; a proposal replaces only an
        older proposal, never a human resolution.
        """
        source = ResolutionSource(source)
        row = {
            "fork_key": fork_key,
            "key": key,
            "lines": json.dumps(list(lines), ensure_ascii=False),
            "path": path,
            "source": source.value,
            "recorded_by": recorded_by,
            "upstream_sha": upstream_sha,
            "fork_sha": fork_sha,
            "created_at": _utc(at),
        }
        changed = [name for name in row if name not in ("fork_key", "key")]
        with self._engine.begin() as conn:
            _upsert(
                conn, resolutions, [row], keys=("fork_key", "key"), changed=changed, where=_resolution_wins
            )

    def resolutions(
        self,
        fork_key: str,
        keys: Iterable[str],
        *,
        sources: Iterable[ResolutionSource] = (ResolutionSource.HUMAN,),
    ) -> dict[str, tuple[str, ...]]:
        """{key: lines} for the `keys` remembered for the fork; only people's resolutions unless asked."""
        wanted = sorted({ResolutionSource(source).value for source in sources})
        found: dict[str, tuple[str, ...]] = {}
        with self._engine.connect() as conn:
            for chunk in _chunks(sorted(set(keys))):
                query = select(resolutions.c.key, resolutions.c.lines).where(
                    resolutions.c.fork_key == fork_key,
                    resolutions.c.key.in_(chunk),
                    resolutions.c.source.in_(wanted),
                )
                found.update((row.key, tuple(json.loads(row.lines))) for row in conn.execute(query))
        return found

    def load_facts(
        self, kind: str, version: str, shas: Sequence[str], *, paths: Collection[str] | None = None
    ) -> dict[tuple[str, str], str]:
        """{(sha, path): value} of the stored facts of one kind and version about the given commits (and
        only the given paths, when some are given)."""
        found: dict[tuple[str, str], str] = {}
        path_chunks: list[Sequence[str] | None] = [None] if paths is None else list(_chunks(sorted(paths)))
        with self._engine.connect() as conn:
            for chunk in _chunks(sorted(set(shas))):
                for path_chunk in path_chunks:
                    query = select(commit_facts.c.sha, commit_facts.c.path, commit_facts.c.value).where(
                        commit_facts.c.kind == kind,
                        commit_facts.c.version == version,
                        commit_facts.c.sha.in_(chunk),
                    )
                    if path_chunk is not None:
                        query = query.where(commit_facts.c.path.in_(path_chunk))
                    # fetchall, not row by row: a fork's history is thousands of rows
                    found.update(((sha, path), value) for sha, path, value in conn.execute(query).all())
        return found

    def save_facts(self, kind: str, version: str, facts: Mapping[tuple[str, str], str]) -> None:
        """Store facts ({(sha, path): value}); a fact stored before under another version is replaced."""
        rows = [
            {"kind": kind, "sha": sha, "path": path, "version": version, "value": value}
            for (sha, path), value in sorted(facts.items())
        ]
        with self._engine.begin() as conn:
            for start in range(0, len(rows), _CHUNK):
                _upsert(
                    conn,
                    commit_facts,
                    rows[start : start + _CHUNK],
                    keys=("kind", "sha", "path"),
                    changed=("version", "value"),
                )

    def latest_plan(self, fork_key: str) -> Plan | None:
        query = select(plans.c.plan).where(plans.c.fork_key == fork_key).order_by(plans.c.id.desc()).limit(1)
        with self._engine.connect() as conn:
            stored = conn.execute(query).scalar_one_or_none()
        return None if stored is None else Plan.model_validate_json(stored)


def _utc(at: datetime) -> datetime:
    if at.tzinfo is None or at.utcoffset() is None:
        raise ValueError(f"timestamps must be timezone-aware, got naive {at.isoformat()}")
    return at.astimezone(UTC)


def engine_for(url: str | None) -> Engine:
    """An engine on the store at `url` (default: $SLUICE_DATABASE_URL, else the SQLite file), without
    migrating it: for `sluice db`, which reads or changes the schema itself."""
    return _create_engine(url or default_database_url())


def _create_engine(url: str | URL, *, timeout: float | None = None, connections: int | None = None) -> Engine:
    """An engine on `url`; with `timeout`, every wait on the database (a lock, a statement, a connection)
    gives up after about that many seconds, and the pool holds at most `connections`."""
    parsed = make_url(normalise_url(url)) if isinstance(url, str) else url
    backend = parsed.get_backend_name()
    pool: dict[str, Any] = {}
    if connections is not None:
        pool = {"pool_size": connections, "max_overflow": 0, "pool_timeout": timeout or 30}
    if backend == "postgresql":
        if timeout is None:
            return create_engine(parsed, pool_pre_ping=True, **pool)
        return create_engine(_bounded_postgres(parsed, timeout), pool_pre_ping=True, **pool)
    if backend != "sqlite":
        raise ValueError(f"unsupported database {backend!r} in {parsed!r}: use sqlite or postgresql")
    wait_s = SQLITE_BUSY_TIMEOUT_MS / 1000 if timeout is None else timeout
    if parsed.database in (None, "", ":memory:"):
        # One shared connection, or every pooled connection would see its own empty database.
        engine = create_engine(parsed, poolclass=StaticPool, connect_args={"factory": SerialisedConnection})
    else:
        engine = create_engine(parsed, connect_args={"factory": SerialisedConnection}, **pool)
    event.listen(engine, "connect", functools.partial(_configure_sqlite_connection, parsed.database, wait_s))
    event.listen(engine, "begin", _begin_immediate)
    return engine


def _bounded_postgres(url: URL, timeout: float) -> URL:
    """`url` with server-side lock and statement timeouts, a connect timeout and TCP keepalives added."""
    ms = int(timeout * 1000)
    given = url.query.get("options", "")
    options = given if isinstance(given, str) else " ".join(given)
    extra = f"-c lock_timeout={ms} -c statement_timeout={ms} -c idle_in_transaction_session_timeout={ms}"
    return url.update_query_dict(
        {
            "options": f"{options} {extra}".strip(),
            "connect_timeout": str(max(1, math.ceil(timeout))),
            # A peer that vanished (a frozen host, a cut link) breaks the connection instead of hanging it.
            "keepalives": "1",
            "keepalives_idle": "5",
            "keepalives_interval": "2",
            "keepalives_count": "3",
            "tcp_user_timeout": str(max(ms, 10_000)),
        }
    )


# One lock per SQLite file, shared by every engine of this process on it (see SerialisedConnection).
_WRITE_LOCKS: dict[str, threading.Lock] = {}
_WRITE_LOCKS_GUARD = threading.Lock()


class SerialisedConnection(sqlite3.Connection):
    """A pysqlite connection whose transactions first take its file's lock in this process.

    Threads of one process then queue on a lock and wake the moment it is free, where SQLite's busy
    handler would sleep and poll (up to 100 ms a time); other processes still meet SQLite's own lock.
    """

    write_lock: threading.Lock | None = None
    lock_wait_s: float = SQLITE_BUSY_TIMEOUT_MS / 1000
    holding = False

    def begin_immediate(self) -> None:
        if self.write_lock is not None:
            if not self.write_lock.acquire(timeout=self.lock_wait_s):
                raise sqlite3.OperationalError(
                    f"database is locked: another transaction here held it for {self.lock_wait_s:g} s"
                )
            self.holding = True
        try:
            self.execute("BEGIN IMMEDIATE")
        except BaseException:
            self._release()
            raise

    def commit(self) -> None:
        try:
            super().commit()
        finally:
            self._release()

    def rollback(self) -> None:
        try:
            super().rollback()
        finally:
            self._release()

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._release()

    def _release(self) -> None:
        if self.holding and self.write_lock is not None:
            self.holding = False
            self.write_lock.release()


def _configure_sqlite_connection(
    path: str | None, wait_s: float, dbapi_connection: Any, _record: Any
) -> None:
    # Let SQLAlchemy issue BEGIN itself (see _begin_immediate) instead of pysqlite's implicit, deferred one.
    dbapi_connection.isolation_level = None
    if path not in (None, "", ":memory:"):
        with _WRITE_LOCKS_GUARD:
            dbapi_connection.write_lock = _WRITE_LOCKS.setdefault(os.path.realpath(path), threading.Lock())
    dbapi_connection.lock_wait_s = wait_s
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout = {int(wait_s * 1000)}")
    _enable_wal(cursor)
    cursor.execute("PRAGMA synchronous = NORMAL")
    cursor.execute("PRAGMA foreign_keys = ON")
    cursor.close()


def _enable_wal(cursor: Any) -> None:
    """Switch the database to WAL (it persists); the switch ignores busy_timeout, so retry by hand."""
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            mode = cursor.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        except sqlite3.OperationalError as exc:
            busy = exc.sqlite_errorcode & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)  # primary code
            if not busy:
                raise
            mode = "locked"
        if mode in ("wal", "memory"):  # in-memory databases have no WAL
            return
        if time.monotonic() > deadline:
            raise sqlite3.OperationalError(f"could not switch the database to WAL: journal mode {mode}")
        time.sleep(0.02)


def _begin_immediate(conn: Connection) -> None:
    # Take the write lock up front: a deferred transaction that later writes gets SQLITE_BUSY in WAL mode
    # without waiting for busy_timeout, while BEGIN IMMEDIATE waits for it. Readers pay a short wait.
    dbapi_connection = conn.connection.dbapi_connection
    assert isinstance(dbapi_connection, SerialisedConnection)
    try:
        dbapi_connection.begin_immediate()
    except sqlite3.Error as exc:  # as SQLAlchemy wraps it when it runs the statement itself
        raise OperationalError("BEGIN IMMEDIATE", None, exc) from exc


def _lock_fork(conn: Connection, fork_key: str) -> None:
    # Two replicas recording plans for one fork take turns (SQLite's BEGIN IMMEDIATE already serialises).
    if conn.dialect.name == "postgresql":
        conn.execute(
            text("SELECT pg_advisory_xact_lock(:namespace, hashtext(:fork_key))"),
            {"namespace": _FORK_LOCK_NAMESPACE, "fork_key": fork_key},
        )


def _insert_plan(conn: Connection, fork_key: str, plan: Plan, at: datetime) -> int:
    result = conn.execute(
        insert(plans).values(
            fork_key=fork_key,
            fork_head=plan.fork_head,
            upstream_head=plan.upstream_head,
            config_digest=plan.config_digest,
            created_at=at,
            plan=plan.model_dump_json(),
        )
    )
    plan_id = result.inserted_primary_key
    assert plan_id is not None
    return int(plan_id[0])


def _save_chains(conn: Connection, fork_key: str, plan: Plan, *, plan_id: int, at: datetime) -> None:
    """Upsert every chain of the plan as open and append members it has not stored yet."""
    rows = [
        {
            "fork_key": fork_key,
            "id": chain.id,
            "root": chain.root,
            "status": ChainStatus.OPEN.value,
            "created_plan_id": plan_id,
            "created_at": at,
            "updated_at": at,
        }
        for chain in plan.chains
    ]
    # The root stays the one the chain was created with.
    _upsert(conn, chains, rows, keys=("fork_key", "id"), changed=("status", "updated_at"))
    stored = _members(conn, fork_key, [chain.id for chain in plan.chains])
    new_members = []
    for chain in plan.chains:
        have = stored.get(chain.id, [])
        known = set(have)
        wanted = chain.ingested + tuple(commit.sha for commit in chain.commits)
        added = [sha for sha in wanted if sha not in known]
        new_members += [
            {"fork_key": fork_key, "chain_id": chain.id, "position": len(have) + offset, "sha": sha}
            for offset, sha in enumerate(added)
        ]
    if new_members:
        conn.execute(insert(chain_members), new_members)


def _members(conn: Connection, fork_key: str, chain_ids: Sequence[str]) -> dict[str, list[str]]:
    members: dict[str, list[str]] = {}
    for chunk in _chunks(sorted(set(chain_ids))):
        query = (
            select(chain_members.c.chain_id, chain_members.c.sha)
            .where(chain_members.c.fork_key == fork_key, chain_members.c.chain_id.in_(chunk))
            .order_by(chain_members.c.chain_id, chain_members.c.position)
        )
        for row in conn.execute(query):
            members.setdefault(row.chain_id, []).append(row.sha)
    return members


def _close_chains_not_in(conn: Connection, fork_key: str, keep: set[str], *, at: datetime) -> None:
    conn.execute(
        update(chains)
        .where(
            chains.c.fork_key == fork_key,
            chains.c.status == ChainStatus.OPEN.value,
            chains.c.id.not_in(sorted(keep)),
        )
        .values(status=ChainStatus.CLOSED.value, updated_at=at)
    )


def _save_grouped(conn: Connection, fork_key: str, plan: Plan, *, plan_id: int, at: datetime) -> None:
    """`bundled` / `chained` for every planned commit, except where a person has held it."""
    grouped = [(bundle.id, Disposition.BUNDLED, bundle.commits) for bundle in plan.bundles]
    grouped += [(chain.id, Disposition.CHAINED, chain.commits) for chain in plan.chains]
    # Keyed by SHA: one statement may not upsert a row twice, so a commit listed twice keeps its last group.
    rows = {
        commit.sha: {
            "fork_key": fork_key,
            "sha": commit.sha,
            "disposition": disposition.value,
            "reason": None,
            "approver": None,
            "plan_id": plan_id,
            "group_id": group_id,
            "updated_at": at,
        }
        for group_id, disposition, commits in grouped
        for commit in commits
    }
    changed = ("disposition", "reason", "approver", "plan_id", "group_id", "updated_at")
    # Literal values: an expanding IN parameter cannot go with executemany.
    not_held = dispositions.c.disposition.not_in([literal_column(f"'{value}'") for value in _HELD_VALUES])
    keys = ("fork_key", "sha")
    _upsert(conn, dispositions, list(rows.values()), keys=keys, changed=changed, where=not_held)


def _mark_ingested(conn: Connection, fork_key: str, ingested: set[str], *, at: datetime) -> None:
    """Move records still in flight to `ingested`; SHAs without a record get none (forks have ~12k)."""
    if not ingested:
        return
    in_flight = select(dispositions.c.sha).where(
        dispositions.c.fork_key == fork_key, dispositions.c.disposition.not_in(_SETTLED_VALUES)
    )
    arrived = sorted(ingested.intersection(conn.execute(in_flight).scalars()))
    for chunk in _chunks(arrived):
        conn.execute(
            update(dispositions)
            .where(dispositions.c.fork_key == fork_key, dispositions.c.sha.in_(chunk))
            .values(disposition=Disposition.INGESTED.value, updated_at=at)
        )


def _resolution_wins(excluded: _Excluded) -> ColumnElement[bool]:
    """Whether the resolution being inserted replaces the stored one: a person's latest resolution wins."""
    stored_human = resolutions.c.source == ResolutionSource.HUMAN.value
    newer = excluded.created_at >= resolutions.c.created_at
    return or_(
        and_(excluded.source == ResolutionSource.HUMAN.value, or_(~stored_human, newer)),
        and_(~stored_human, newer),
    )


def _upsert(
    conn: Connection,
    table: Table,
    rows: list[dict[str, Any]],
    *,
    keys: Sequence[str],
    changed: Sequence[str],
    where: ColumnElement[bool] | Callable[[_Excluded], ColumnElement[bool]] | None = None,
) -> None:
    """INSERT … ON CONFLICT (keys) DO UPDATE SET changed [WHERE where]; both dialects spell it alike.

    `where` may be a function of the `excluded` row (the one being inserted).
    """
    if not rows:
        return
    # Imported here: the PostgreSQL dialect package costs every command ~20 ms, and reads never need it.

    dialect_insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    stmt = dialect_insert(table)
    stmt = stmt.on_conflict_do_update(
        index_elements=[table.c[key] for key in keys],
        set_={name: stmt.excluded[name] for name in changed},
        where=where(stmt.excluded) if callable(where) else where,
    )
    conn.execute(stmt, rows)


def _chunks(items: Sequence[str]) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]
