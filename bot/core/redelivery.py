"""Which of GitHub's failed webhook deliveries the redelivery sweep asks for again (pure decisions)."""

from __future__ import annotations

import enum
from collections import Counter, defaultdict
from collections.abc import Iterable, Set
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict

REDELIVERY_WINDOW = timedelta(days=3)  # GitHub redelivers only deliveries made in the past 3 days
# Clocks differ and a sweep takes a while: a delivery this close to the window's end is not asked for.
WINDOW_MARGIN = timedelta(minutes=10)
# Sluice judged the payload itself and refused it: a redelivery would be refused the same way.
REFUSED_STATUSES = frozenset({400, 413, 422})
# An event that failed this often while Sluice was up to ask (a wrong secret or URL) is left to the resync,
# rather than asked for again every sweep for three days.
MAX_ATTEMPTS = 8


class HookAttempt(BaseModel):
    """One attempt in the App's webhook delivery log (`GET /app/hook/deliveries`); a redelivery is another
    attempt with the same `guid` (the `X-GitHub-Delivery` header Sluice records)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: int
    guid: str
    delivered_at: datetime
    redelivery: bool
    status: str
    status_code: int
    event: str
    action: str | None = None

    @property
    def succeeded(self) -> bool:
        return 200 <= self.status_code < 300


class Skip(enum.StrEnum):
    DELIVERED = "delivered"  # an attempt got a 2xx
    RECORDED = "recorded"  # Sluice has the delivery although GitHub saw a failure (a timeout, say)
    EXPIRED = "expired"  # past GitHub's 3-day redelivery window
    REFUSED = "refused"  # Sluice answered that it will not take this payload
    GAVE_UP = "gave_up"  # MAX_ATTEMPTS attempts failed


@dataclass(frozen=True)
class Redelivery:
    guid: str
    attempt_id: int  # the newest attempt: the one GitHub is asked to send again
    event: str
    action: str | None
    last_status: str
    last_status_code: int
    attempts: int


@dataclass(frozen=True)
class SweepPlan:
    redeliver: tuple[Redelivery, ...]
    skipped: Counter[Skip] = field(default_factory=Counter)


def by_guid(attempts: Iterable[HookAttempt]) -> dict[str, list[HookAttempt]]:
    """The attempts of each event, newest first."""
    grouped: dict[str, list[HookAttempt]] = defaultdict(list)
    for attempt in attempts:
        grouped[attempt.guid].append(attempt)
    return {guid: sorted(found, key=lambda a: a.id, reverse=True) for guid, found in grouped.items()}


def undelivered(attempts: Iterable[HookAttempt]) -> set[str]:
    """The GUIDs none of whose attempts succeeded: the ones to look up among Sluice's deliveries."""
    return {guid for guid, found in by_guid(attempts).items() if not any(a.succeeded for a in found)}


def why_not(newest: HookAttempt, *, attempts: int, recorded: bool, now: datetime) -> Skip | None:
    """Why an event that failed `attempts` times, `newest` last, is not asked for again; None: ask."""
    if recorded:
        return Skip.RECORDED
    if now - newest.delivered_at >= REDELIVERY_WINDOW - WINDOW_MARGIN:
        return Skip.EXPIRED
    if newest.status_code in REFUSED_STATUSES:
        return Skip.REFUSED
    if attempts >= MAX_ATTEMPTS:
        return Skip.GAVE_UP
    return None


def plan_redeliveries(attempts: Iterable[HookAttempt], *, recorded: Set[str], now: datetime) -> SweepPlan:
    """One redelivery per event that never got a 2xx, Sluice never recorded, and GitHub can still send."""
    redeliver, skipped = [], Counter[Skip]()
    for guid, found in sorted(by_guid(attempts).items(), key=lambda item: item[1][-1].id):
        newest = found[0]
        reason = Skip.DELIVERED if any(a.succeeded for a in found) else None
        reason = reason or why_not(newest, attempts=len(found), recorded=guid in recorded, now=now)
        if reason is not None:
            skipped[reason] += 1
            continue
        redeliver.append(
            Redelivery(
                guid, newest.id, newest.event, newest.action, newest.status, newest.status_code, len(found)
            )
        )
    return SweepPlan(tuple(redeliver), skipped)
