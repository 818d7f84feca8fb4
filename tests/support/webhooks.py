"""Webhook deliveries signed as GitHub signs them, for the tests and benchmarks that POST to `/webhook`."""

from __future__ import annotations

import hashlib
import hmac
import uuid


def signature(body: bytes, secret: str) -> str:
    """The `X-Hub-Signature-256` value of `body`: `sha256=` and its hex HMAC-SHA256 under `secret`."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def signed_headers(
    body: bytes, *, secret: str, event: str = "push", delivery: str | None = None
) -> dict[str, str]:
    """The headers of one JSON delivery of `event`: its id (a fresh one unless given) and its signature."""
    return {
        "Content-Type": "application/json",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "X-Hub-Signature-256": signature(body, secret),
    }
