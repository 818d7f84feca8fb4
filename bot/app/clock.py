"""The system clock: the one adapter that reads the time of day (everything else is handed a `Clock`)."""

from __future__ import annotations

import datetime as dt


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)
