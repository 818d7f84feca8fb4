"""Which installations and forks the App serves, and the ingestion PRs it keeps for them, in the store."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Index,
    Integer,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    delete,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite

from bot.core.ingestion import IngestionRecord
from bot.db.store import Store, UTCDateTime, _utc, metadata
from bot.ports import Fork

# GitHub's ids are 63-bit (webhooks.py accepts up to 2**63 - 1); PostgreSQL's INTEGER holds only 32 bits.
# SQLite's INTEGER is 64-bit already.
GitHubId = BigInteger().with_variant(Integer, "sqlite")

installations = Table(
    "installations",
    metadata,
    Column("id", GitHubId, autoincrement=False),
    Column("account", String(255), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    PrimaryKeyConstraint("id", name="pk_installations"),
)

installation_repos = Table(
    "installation_repos",
    metadata,
    Column("repo", String(255), nullable=False),  # owner/name
    Column("installation_id", GitHubId, nullable=False),
    PrimaryKeyConstraint("repo", name="pk_installation_repos"),
    Index("ix_installation_repos_installation_id", "installation_id"),
)

forks = Table(
    "forks",
    metadata,
    Column("repo", String(255), nullable=False),  # owner/name of the fork
    Column("installation_id", GitHubId, nullable=False),
    Column("branch", String(255), nullable=False),  # fork trunk
    Column("upstream_url", Text, nullable=False),
    Column("upstream_branch", String(255), nullable=False),
    Column("upstream_repo", String(255)),  # owner/name when upstream lives on the same GitHub
    Column("upstream_seen", String(40)),  # the upstream head the poll loop saw last
    Column("dashboard_issue", Integer),  # the number of the fork's dashboard issue, once Sluice opened it
    Column("updated_at", UTCDateTime, nullable=False),
    PrimaryKeyConstraint("repo", name="pk_forks"),
    Index("ix_forks_upstream_repo", "upstream_repo"),
)

ingestions = Table(
    "ingestions",
    metadata,
    Column("fork", String(255), nullable=False),
    Column("id", String(64), nullable=False),  # bundle-<sha> / chain-<sha>: the branch sluice/ingest/<id>
    Column("kind", String(16), nullable=False),  # bundle | chain
    Column("state", String(16), nullable=False),  # open | blocked | closed
    Column("pr_number", Integer),
    Column("head", String(40)),  # the branch head Sluice pushed last
    Column("upstream_first", String(40), nullable=False),
    Column("upstream_last", String(40), nullable=False),
    Column("commits", Integer, nullable=False),
    Column("needs_human", String(40)),  # the upstream commit that stopped the pick, if one did
    Column("updated_at", UTCDateTime, nullable=False),
    PrimaryKeyConstraint("fork", "id", name="pk_ingestions"),
)

# Every head Sluice pushed to an ingestion's branch, with the upstream commits it carried then: a tier run on
# any of them ran Sluice's own work, even after a rebuild moved `ingestions.head` on (what `sluice calibrate
# --database` counts a failure of a one-commit PR by).
ingestion_heads = Table(
    "ingestion_heads",
    metadata,
    Column("fork", String(255), nullable=False),
    Column("ingestion", String(64), nullable=False),
    Column("head", String(40), nullable=False),
    Column("upstream_first", String(40), nullable=False),
    Column("upstream_last", String(40), nullable=False),
    Column("commits", Integer, nullable=False),
    Column("pushed_at", UTCDateTime, nullable=False),
    PrimaryKeyConstraint("fork", "ingestion", "head", name="pk_ingestion_heads"),
)


class Registry:
    """Installations, the forks among their repositories, and each fork's ingestion PRs."""

    def __init__(self, store: Store) -> None:
        self._engine = store._engine

    # --- installations

    def record_installation(
        self, installation_id: int, account: str, repos: list[str], *, at: datetime
    ) -> None:
        with self._engine.begin() as conn:
            _upsert(
                conn,
                installations,
                {"id": installation_id, "account": account, "created_at": _utc(at)},
                keys=("id",),
                keep=("created_at",),
            )
            _add_repos(conn, installation_id, repos)

    def add_repos(self, installation_id: int, repos: list[str]) -> None:
        with self._engine.begin() as conn:
            _add_repos(conn, installation_id, repos)

    def remove_repos(self, installation_id: int, repos: list[str]) -> None:
        """Forget the repositories, and the forks among them (their ingestion records stay, for audit)."""
        with self._engine.begin() as conn:
            owned = installation_repos.c.installation_id == installation_id
            conn.execute(delete(installation_repos).where(owned, installation_repos.c.repo.in_(repos)))
            conn.execute(
                delete(forks).where(forks.c.installation_id == installation_id, forks.c.repo.in_(repos))
            )

    def forget_installation(self, installation_id: int) -> None:
        with self._engine.begin() as conn:
            conn.execute(
                delete(installation_repos).where(installation_repos.c.installation_id == installation_id)
            )
            conn.execute(delete(forks).where(forks.c.installation_id == installation_id))
            conn.execute(delete(installations).where(installations.c.id == installation_id))

    def installation_of(self, repo: str) -> int | None:
        query = select(installation_repos.c.installation_id).where(installation_repos.c.repo == repo)
        with self._engine.connect() as conn:
            return conn.execute(query).scalar_one_or_none()

    def installed_repos(self, installation_id: int) -> list[str]:
        query = (
            select(installation_repos.c.repo)
            .where(installation_repos.c.installation_id == installation_id)
            .order_by(installation_repos.c.repo)
        )
        with self._engine.connect() as conn:
            return list(conn.execute(query).scalars())

    # --- forks

    def register_fork(self, fork: Fork, *, at: datetime) -> None:
        row = {**fork.__dict__, "updated_at": _utc(at)}
        with self._engine.begin() as conn:
            _upsert(conn, forks, row, keys=("repo",), keep=("upstream_seen",))

    def unregister_fork(self, repo: str) -> None:
        with self._engine.begin() as conn:
            conn.execute(delete(forks).where(forks.c.repo == repo))

    def fork(self, repo: str) -> Fork | None:
        with self._engine.connect() as conn:
            row = conn.execute(select(forks).where(forks.c.repo == repo)).first()
        return _fork(row) if row is not None else None

    def forks_tracking(self, upstream_repo: str, branch: str) -> list[Fork]:
        query = (
            select(forks)
            .where(forks.c.upstream_repo == upstream_repo, forks.c.upstream_branch == branch)
            .order_by(forks.c.repo)
        )
        with self._engine.connect() as conn:
            return [_fork(row) for row in conn.execute(query)]

    def all_forks(self) -> list[Fork]:
        with self._engine.connect() as conn:
            return [_fork(row) for row in conn.execute(select(forks).order_by(forks.c.repo))]

    def mark_upstream_seen(self, repo: str, *, old: str | None, new: str) -> bool:
        """Compare-and-set of the upstream head the poll loop saw: True for the one replica that moved it."""
        seen = forks.c.upstream_seen.is_(None) if old is None else forks.c.upstream_seen == old
        with self._engine.begin() as conn:
            return (
                conn.execute(
                    update(forks).where(forks.c.repo == repo, seen).values(upstream_seen=new)
                ).rowcount
                == 1
            )

    def dashboard_issue(self, repo: str) -> int | None:
        """The number the fork's dashboard issue had when Sluice last published it."""
        with self._engine.connect() as conn:
            return conn.execute(select(forks.c.dashboard_issue).where(forks.c.repo == repo)).scalar()

    def remember_dashboard(self, repo: str, number: int) -> None:
        with self._engine.begin() as conn:
            conn.execute(update(forks).where(forks.c.repo == repo).values(dashboard_issue=number))

    # --- ingestion PRs

    def save_ingestion(self, record: IngestionRecord, *, at: datetime) -> None:
        """Keep `record`, and its head among the heads Sluice pushed for it (the first time it is seen)."""
        with self._engine.begin() as conn:
            _upsert(conn, ingestions, {**record.__dict__, "updated_at": _utc(at)}, keys=("fork", "id"))
            if record.head is not None:
                pushed = {
                    "fork": record.fork,
                    "ingestion": record.id,
                    "head": record.head,
                    "upstream_first": record.upstream_first,
                    "upstream_last": record.upstream_last,
                    "commits": record.commits,
                    "pushed_at": _utc(at),
                }
                _upsert(conn, ingestion_heads, pushed, keys=("fork", "ingestion", "head"), keep=tuple(pushed))

    def close_pull(self, fork: str, ingestion: str, number: int, *, at: datetime) -> bool:
        """`ingestion`'s PR `number` is closed (merged, or closed by a person): its open record is closed now,
        not at the next ingestion pass (none runs while the fork is paused). False when no open record of
        `ingestion` has that PR (Sluice closed it; a rebuild gave it a new one)."""
        query = (
            update(ingestions)
            .where(
                (ingestions.c.fork == fork)
                & (ingestions.c.id == ingestion)
                & (ingestions.c.pr_number == number)
                & (ingestions.c.state == "open")
            )
            .values(state="closed", updated_at=_utc(at))
        )
        with self._engine.begin() as conn:
            return conn.execute(query).rowcount == 1

    def ingestions(self, fork: str, *, state: str | None = None) -> list[IngestionRecord]:
        query = select(ingestions).where(ingestions.c.fork == fork)
        if state is not None:
            query = query.where(ingestions.c.state == state)
        with self._engine.connect() as conn:
            rows = conn.execute(query.order_by(ingestions.c.updated_at, ingestions.c.id))
            return [
                IngestionRecord(**{k: row._mapping[k] for k in IngestionRecord.__dataclass_fields__})
                for row in rows
            ]


def _add_repos(conn: Connection, installation_id: int, repos: list[str]) -> None:
    for repo in repos:
        row = {"repo": repo, "installation_id": installation_id}
        _upsert(conn, installation_repos, row, keys=("repo",))


def _fork(row: object) -> Fork:
    mapping = row._mapping  # type: ignore[attr-defined]
    return Fork(**{k: mapping[k] for k in Fork.__dataclass_fields__})


def _upsert(
    conn: Connection,
    table: Table,
    row: dict[str, object],
    *,
    keys: tuple[str, ...],
    keep: tuple[str, ...] = (),
) -> None:
    """Insert, or update every column but `keys` and `keep` when the row exists (one statement, race-free)."""
    dialect_insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    stmt = dialect_insert(table).values(row)
    changed = {name: stmt.excluded[name] for name in row if name not in keys and name not in keep}
    if changed:
        conn.execute(stmt.on_conflict_do_update(index_elements=list(keys), set_=changed))
    else:
        conn.execute(stmt.on_conflict_do_nothing(index_elements=list(keys)))
