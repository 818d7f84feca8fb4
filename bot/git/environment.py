"""The environment every git command of Sluice's runs in."""

from __future__ import annotations

import os

GIT_ENV = {
    "LC_ALL": "C",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_LITERAL_PATHSPECS": "1",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_NO_REPLACE_OBJECTS": "1",
    # A remote that took the connection and then sends nothing (no data, no keepalive) for 5 minutes is
    # given up on: git's default is to wait forever.
    "GIT_HTTP_LOW_SPEED_LIMIT": "1",
    "GIT_HTTP_LOW_SPEED_TIME": "300",
}


def git_environ() -> dict[str, str]:
    """The environment git runs in: the process's, less Sluice's own settings (`SLUICE_*`: the App's private
    key, the webhook secret, the database URL), which nothing git starts (ssh, a helper) has any use for."""
    return {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")} | GIT_ENV
