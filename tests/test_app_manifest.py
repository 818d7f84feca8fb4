"""`app.yml` asks for exactly what Sluice uses; every event it subscribes to is recorded by the service."""

from __future__ import annotations

from pathlib import Path

import yaml

from bot.core.webhooks import MODELS

MANIFEST = yaml.safe_load((Path(__file__).parent.parent / "app.yml").read_text())


def test_least_privilege_permissions() -> None:
    assert MANIFEST["default_permissions"] == {
        "metadata": "read",
        "contents": "write",
        "workflows": "write",
        "pull_requests": "write",
        "issues": "write",
        "checks": "write",
        "actions": "write",
        "members": "read",
    }
    assert MANIFEST["public"] is False


def test_every_subscribed_event_is_recorded() -> None:
    assert set(MANIFEST["default_events"]) <= set(MODELS)
    assert MANIFEST["hook_attributes"]["url"].endswith("/webhook")
