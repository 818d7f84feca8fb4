"""Periodic tasks under a lease: one replica runs a round, even a round longer than the interval."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable, Callable

from bot.db.leases import Leases, periodically
from bot.db.store import Store


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


async def test_a_round_longer_than_the_interval_never_runs_on_two_replicas_at_once(store: Store) -> None:
    """The redelivery sweep can page through days of deliveries under rate limits: its lease is extended
    while it runs, so the other replica waits for it instead of sweeping the same deliveries too."""
    running: set[str] = set()
    together: list[int] = []
    rounds: list[str] = []

    def round_of(holder: str) -> Callable[[], Awaitable[None]]:
        async def sweep() -> None:
            running.add(holder)
            together.append(len(running))
            rounds.append(holder)
            await asyncio.sleep(1.3)  # well over the interval
            running.discard(holder)

        return sweep

    leases, stop = Leases(store), asyncio.Event()
    loops = asyncio.gather(
        *(
            periodically("sweep", round_of(h), interval=0.5, leases=leases, holder=h, clock=now, stop=stop)
            for h in ("replica-a", "replica-b")
        )
    )
    await asyncio.sleep(3.2)
    stop.set()
    await asyncio.wait_for(loops, 10)

    assert rounds and max(together) == 1
    holder = leases.holder("sweep")
    assert holder is not None and holder[0] in ("replica-a", "replica-b")
