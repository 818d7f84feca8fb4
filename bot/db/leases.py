"""Named leases in the database: of several replicas, one runs a periodic task per interval."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Column, Connection, PrimaryKeyConstraint, String, Table, update
from sqlalchemy.dialects import postgresql, sqlite

from bot.db.store import Store, UTCDateTime, _utc, metadata

LEASE_CHECK_S = 30.0  # how often a replica looks whether a task with a longer interval is due
log = logging.getLogger("sluice.leases")

leases = Table(
    "leases",
    metadata,
    Column("name", String(64), nullable=False),  # the task: redelivery, resync
    Column("holder", String(255), nullable=False),  # the replica that ran it last (for people reading)
    Column("until", UTCDateTime, nullable=False),  # no replica runs the task again before then
    PrimaryKeyConstraint("name", name="pk_leases"),
)


def _insert_ignoring_conflict(conn: Connection, table: Table, row: dict[str, Any]) -> bool:
    dialect_insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    # RETURNING, not rowcount: psycopg reports no row count for INSERT … ON CONFLICT DO NOTHING here.
    stmt = dialect_insert(table).values(row).on_conflict_do_nothing().returning(*table.primary_key)
    return conn.execute(stmt).first() is not None


class Leases:
    """`claim` is one compare-and-set: True for exactly one replica per expired lease, on SQLite and
    PostgreSQL alike (PostgreSQL re-checks the WHERE of a concurrent UPDATE after the first commits;
    SQLite's BEGIN IMMEDIATE serialises writers)."""

    def __init__(self, store: Store) -> None:
        self._engine = store._engine

    def claim(self, name: str, holder: str, *, now: datetime, hold: timedelta) -> bool:
        """Take the lease `name` until now + hold if nobody holds it now; whether this caller got it."""
        now = _utc(now)
        row = {"name": name, "holder": holder, "until": now + hold}
        expired = update(leases).where(leases.c.name == name, leases.c.until <= now)
        with self._engine.begin() as conn:
            if conn.execute(expired.values(holder=holder, until=now + hold)).rowcount == 1:
                return True
            return _insert_ignoring_conflict(conn, leases, row)

    def extend(self, name: str, holder: str, *, now: datetime, hold: timedelta) -> bool:
        """Hold the lease `name` until now + hold if `holder` holds it still; whether it does."""
        mine = update(leases).where(leases.c.name == name, leases.c.holder == holder)
        with self._engine.begin() as conn:
            return conn.execute(mine.values(until=_utc(now) + hold)).rowcount == 1

    def holder(self, name: str) -> tuple[str, datetime] | None:
        with self._engine.connect() as conn:
            row = conn.execute(leases.select().where(leases.c.name == name)).first()
        return (row.holder, row.until) if row is not None else None


async def periodically(
    name: str,
    task: Callable[[], Awaitable[object]],
    *,
    interval: float,
    leases: Leases,
    holder: str,
    clock: Callable[[], datetime],
    stop: asyncio.Event,
) -> None:
    """Run `task` about every `interval` seconds on whichever replica claims the lease `name` first.

    The lease is held for the whole interval, not released after the task: it says when the task is due
    next, so replicas started together, or restarted, do not repeat it within the interval. While a round
    runs its lease is extended, so a round longer than the interval (a redelivery sweep paging through days
    of deliveries under rate limits) never runs on two replicas at once.
    """
    hold = timedelta(seconds=interval)
    while not stop.is_set():
        try:
            if await asyncio.to_thread(leases.claim, name, holder, now=clock(), hold=hold):
                renewing = asyncio.create_task(_renew(name, leases, holder=holder, clock=clock, hold=hold))
                try:
                    await task()
                finally:
                    renewing.cancel()
        except Exception:  # the loop outlives any one round's failure (GitHub or the database down)
            log.exception("%s round failed", name)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), min(interval, LEASE_CHECK_S))


async def _renew(
    name: str, leases: Leases, *, holder: str, clock: Callable[[], datetime], hold: timedelta
) -> None:
    """Extend the lease every third of its hold while the round runs; a failed extension is tried again."""
    every = max(hold.total_seconds() / 3, 0.05)
    while True:
        await asyncio.sleep(every)
        try:
            if not await asyncio.to_thread(leases.extend, name, holder, now=clock(), hold=hold):
                log.warning("%s: the lease went to another replica while this round ran", name)
                return
        except Exception:
            log.exception("%s: the lease could not be extended; trying again", name)
