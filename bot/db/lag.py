"""The lag history: one row per fork per ingestion run, read back for `/metrics` and the status page."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, Float, Index, Integer, String, Table, func, select

from bot.core.lag import LagPoint
from bot.db.store import Store, UTCDateTime, _utc, metadata

HISTORY_LIMIT = 2000  # points per fork a chart reads at most (newest first); older ones stay stored

lag_points = Table(
    "lag_points",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("fork", String(255), nullable=False),
    Column("at", UTCDateTime, nullable=False),
    Column("days_behind", Float),
    Column("backlog_commits", Integer, nullable=False),
    Column("pending_commits", Integer, nullable=False),
    Column("oldest_missing_days", Float),
    Column("open_ingestions", Integer, nullable=False),
    Column("ingestion_tip", String(40)),
    Column("upstream_head", String(40), nullable=False),
    Column("lead_time_days_median", Float),
    Column("lead_time_days_p90", Float),
    Index("ix_lag_points_fork_at", "fork", "at"),
)
_FIELDS = tuple(c.name for c in lag_points.columns if c.name != "id")


class LagHistory:
    def __init__(self, store: Store) -> None:
        self._engine = store._engine

    def record(self, point: LagPoint) -> None:
        row = point.model_dump(include=set(_FIELDS)) | {"at": _utc(point.at)}
        with self._engine.begin() as conn:
            conn.execute(lag_points.insert().values(row))

    def history(self, fork: str, *, limit: int = HISTORY_LIMIT) -> list[LagPoint]:
        """The fork's newest `limit` points, oldest first."""
        query = select(lag_points).where(lag_points.c.fork == fork)
        query = query.order_by(lag_points.c.at.desc(), lag_points.c.id.desc()).limit(limit)
        with self._engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [LagPoint.model_validate({k: row[k] for k in _FIELDS}) for row in reversed(rows)]

    def latest(self) -> dict[str, LagPoint]:
        """Each fork's newest point: the last of its `history` (by time, then by id)."""
        rank = (
            func.row_number()
            .over(partition_by=lag_points.c.fork, order_by=(lag_points.c.at.desc(), lag_points.c.id.desc()))
            .label("rank")
        )
        ranked = select(lag_points.c.id, rank).subquery()
        newest = select(ranked.c.id).where(ranked.c.rank == 1)
        query = select(lag_points).where(lag_points.c.id.in_(newest))
        with self._engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return {row["fork"]: LagPoint.model_validate({k: row[k] for k in _FIELDS}) for row in rows}

    def since(self, at: datetime) -> int:
        """How many points were recorded at or after `at` (for people checking the history grows)."""
        query = select(func.count()).select_from(lag_points).where(lag_points.c.at >= _utc(at))
        with self._engine.connect() as conn:
            return int(conn.execute(query).scalar_one())
