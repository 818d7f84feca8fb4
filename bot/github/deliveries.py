"""The App's webhook delivery log through GitHub's REST API: what the redelivery sweep reads and asks for."""

from __future__ import annotations

import datetime as dt

from bot.core.redelivery import HookAttempt
from bot.github.answers import parsed
from bot.github.client import InstallationAPI

DELIVERIES_URL = "/app/hook/deliveries?per_page=100"


class AppDeliveries:
    """The App's own webhook deliveries (`/app/hook/deliveries`), read and redelivered with its JWT."""

    def __init__(self, api: InstallationAPI) -> None:
        self.api = api

    async def since(self, since: dt.datetime) -> list[HookAttempt]:
        """The delivery log back to `since`, newest first (GitHub's order: the walk stops at the first
        older attempt, and reads no further page)."""
        attempts = []
        async for item in self.api.getiter(DELIVERIES_URL):
            attempt = parsed(HookAttempt, item, what="a webhook delivery")
            if attempt.delivered_at < since:
                break
            attempts.append(attempt)
        return attempts

    async def redeliver(self, attempt_id: int) -> None:
        """Ask GitHub to deliver that attempt's payload again (a new attempt with the same guid)."""
        await self.api.post(f"/app/hook/deliveries/{attempt_id}/attempts", data=b"")
